"""The jinja2 environment of the pages, and how a page is written.

Every template is autoescaped (whatever its file name), undefined values raise
instead of rendering as empty text, and templates are read from this package
with :mod:`importlib.resources`, so pages render from a wheel or a zip as from
a checkout. Values reach HTML only through the templates; the only markup not
escaped is what this room made itself: the inlined CSS and script (package data)
and the SVG of :mod:`pytest_clinaudit.pages.figures`.

A page carries a Content-Security-Policy: no network at all (``default-src
'none'``), inline styles, and only the page's own scripts, allowed by their
SHA-256, so a value that escaped escaping still could not run.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import jinja2
    from markupsafe import Markup

TEMPLATES = "pytest_clinaudit.pages.templates"
"""The package holding the templates and the inlined assets."""


class PagesUnavailable(RuntimeError):
    """jinja2 or matplotlib is missing; the message says what to install."""


def _read(name: str) -> str:
    return resources.files(TEMPLATES).joinpath(name).read_text(encoding="utf-8")


@functools.cache
def environment() -> jinja2.Environment:
    """The pages' environment: autoescape everywhere, strict undefined, package loader."""
    try:
        import jinja2
    except ImportError:
        raise PagesUnavailable(
            "HTML pages are rendered with jinja2, which is not installed: "
            "pip install 'pytest-clinaudit[html]'"
        ) from None

    def load(name: str) -> str:
        # A template that is not package data is a bug here, not a user error.
        return _read(name)

    return jinja2.Environment(
        loader=jinja2.FunctionLoader(load),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def asset(name: str) -> Markup:
    """A CSS or JS file of this package, to be inlined as it is (it is ours, not data)."""
    from markupsafe import Markup

    return Markup(_read(name))  # package data written by us, never user input


def script_hash(script: str) -> str:
    """The CSP source that allows exactly this inline script."""
    digest = hashlib.sha256(script.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode('ascii')}'"


def render(template: str, **context: Any) -> str:
    """Render ``template`` with the page furniture (CSS, sorter script, CSP) added."""
    style = asset("page.css")
    script = asset("sort.js")
    policy = "; ".join(
        [
            "default-src 'none'",
            "style-src 'unsafe-inline'",  # matplotlib's SVG styles its elements inline
            f"script-src {script_hash(str(script))}",
            "img-src data:",
            "base-uri 'none'",
            "form-action 'none'",
        ]
    )
    page: str = (
        environment()
        .get_template(template)
        .render(page_style=style, page_script=script, page_policy=policy, **context)
    )
    return page


def write_page(path: Path, page: str) -> Path:
    """Write a rendered page (UTF-8, as its ``<meta charset>`` says), creating its folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
