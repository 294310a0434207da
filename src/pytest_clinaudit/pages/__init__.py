"""Pages people would rather look at than read: self-contained HTML reports.

``render`` is the room's jinja2 environment (autoescape on for every template,
templates and assets shipped as package data and read with importlib.resources)
and writes pages that need no network: CSS, the table sorter and every figure
are inlined, and a Content-Security-Policy forbids fetching anything.
``figures`` draws with matplotlib (a Figure on the Agg canvas, never pyplot)
and returns inline SVG with a title and a description for screen readers.

The pages: ``batch_page`` is ``clinaudit report DIR --html`` (the four tables,
sortable, the plots and a heatmap of mean score per agent x variant);
``audit_page`` is the own-model audit, rendered from a documented context dict;
``grade_html`` adds the grade's columns and summary to pytest-html's page of a
grading session, registered by the plugin only when pytest-html is installed.

jinja2 and matplotlib are imported inside the functions that render, so
importing this room costs nothing until a page is made.
"""
