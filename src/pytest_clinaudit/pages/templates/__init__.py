"""The pages' templates (``*.html.j2``) and inlined assets (``page.css``, ``sort.js``)."""
