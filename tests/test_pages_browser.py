"""The pages in headless Chromium: they load offline, draw every figure, sort, and never run data.

Playwright drives Debian's ``chromium`` (``/usr/bin/chromium``, or
``$CLINAUDIT_CHROMIUM``), one browser for the whole test session. Each page is
opened from ``file://`` with a listener on every request: only the page's own
URL may be asked for. The tests skip, saying why, when Playwright or Chromium
is missing on a developer's machine; under CI (``$CI`` set) they fail instead,
because ``.ci/run`` installs both.
"""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import grading_args, reference_report, write_json
from page_helpers import CHROMIUM, HOSTILE, add_hostile_runs, launch_chromium

from pytest_clinaudit.cli import main
from pytest_clinaudit.pages.audit_page import write_audit_page
from pytest_clinaudit.pages.example import example_audit_context


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{reason}; CI must run the browser tests (.ci/run installs chromium)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """One headless Chromium for every browser test of this process, with a fresh profile."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install '.[test]')")
    if shutil.which(CHROMIUM) is None:
        _unavailable(f"no Chromium at {CHROMIUM} (apt-get install chromium)")
    with sync_playwright() as playwright:
        launched = launch_chromium(playwright)
        yield launched
        launched.close()


@dataclass
class Opened:
    """A page opened in the browser, and what it did while loading."""

    page: Any
    url: str
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@pytest.fixture
def open_page(browser: Any) -> Iterator[Any]:
    contexts: list[Any] = []

    def opener(path: Path) -> Opened:
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        contexts.append(context)
        page = context.new_page()
        opened = Opened(page, path.resolve().as_uri())
        page.on("request", lambda request: opened.requests.append(request.url))
        page.on(
            "console",
            lambda message: opened.errors.append(message.text) if message.type == "error" else None,
        )
        page.on("pageerror", lambda error: opened.errors.append(str(error)))
        page.goto(opened.url, wait_until="load")
        return opened

    yield opener
    for context in contexts:
        context.close()


# ------------------------------------------------------------------ the pages


@pytest.fixture(scope="module")
def batch_page(graded_batch: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = add_hostile_runs(graded_batch.out, tmp_path_factory.mktemp("runs"))
    assert main(["report", str(runs), "--out", str(runs / "report"), "--html"]) == 0
    return runs / "report" / "report.html"


@pytest.fixture(scope="module")
def audit_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    context = example_audit_context(model_name=HOSTILE)
    context["parameters"]["run"] = HOSTILE
    return write_audit_page(context, tmp_path_factory.mktemp("audit") / "audit.html")


@pytest.fixture(scope="module")
def grade_page(warm_cache: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip(
        "pytest_html", reason="pytest-html is not installed (pip install '.[test]')"
    )
    directory = tmp_path_factory.mktemp("grade")
    report = reference_report(warm_cache, "wdbc-hard")
    report["sps"] = round(report["sps"] - 20.0, 2)
    submission = write_json(directory / "report.json", report)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *grading_args(submission, "wdbc-hard", warm_cache),
            "--html",
            "grade.html",
            "--self-contained-html",
            "--clinaudit-meta",
            f"agent={HOSTILE}",
            "--clinaudit-meta",
            f"run={HOSTILE}",
        ],
        cwd=directory,
        capture_output=True,
        check=False,
    )
    return directory / "grade.html"


@pytest.fixture(scope="module")
def own_audit_page(tmp_path_factory: pytest.TempPathFactory, wdbc: Any) -> Path:
    """A real own-model audit's page, its label column named by a script."""
    import pickle

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pytest_clinaudit.reference.data import write_csvs

    directory = tmp_path_factory.mktemp("own")
    train, test = write_csvs(wdbc, directory, train_name="train.csv", test_name="test.csv")
    for path in (train, test):
        text = path.read_text()
        path.write_text(text.replace(wdbc.label, HOSTILE, 1))
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    (directory / "model.pkl").write_bytes(pickle.dumps(model.fit(wdbc.X_train, wdbc.y_train)))
    page = directory / "audit.html"
    argv = [
        "audit", "--model", str(directory / "model.pkl"), "--train", str(train),
        "--test", str(test), "--label", HOSTILE, "--bootstrap", "200", "--no-lira",
        "--html", str(page), "-q",
    ]  # fmt: skip
    assert main(argv) == 0
    return page


PAGES = ["batch_page", "audit_page", "own_audit_page", "grade_page"]
FIGURE_PAGES = ["batch_page", "audit_page", "own_audit_page"]


def _path(request: pytest.FixtureRequest, name: str) -> Path:
    path: Path = request.getfixturevalue(name)
    return path


# -------------------------------------------------------------------- checks


@pytest.mark.parametrize("name", PAGES)
def test_a_page_loads_with_no_console_error_and_no_network_request(
    name: str, request: pytest.FixtureRequest, open_page: Any
) -> None:
    opened = open_page(_path(request, name))
    assert opened.errors == []
    assert opened.requests == [opened.url]


@pytest.mark.parametrize("name", FIGURE_PAGES)
def test_every_figure_is_drawn_and_not_blank(
    name: str, request: pytest.FixtureRequest, open_page: Any
) -> None:
    from PIL import Image

    opened = open_page(_path(request, name))
    figures = opened.page.locator("figure svg")
    assert figures.count() == (3 if name == "batch_page" else 4)
    for index in range(figures.count()):
        figure = figures.nth(index)
        box = figure.bounding_box()
        assert box is not None
        assert box["width"] > 200
        assert box["height"] > 150
        colours = Image.open(io.BytesIO(figure.screenshot())).convert("RGB").getcolors(1 << 20)
        assert colours is not None
        assert len(colours) > 1, f"figure {index} of {name} is blank"


@pytest.mark.parametrize("name", PAGES)
def test_a_page_has_headings_and_every_figure_has_a_text_alternative(
    name: str, request: pytest.FixtureRequest, open_page: Any
) -> None:
    page = open_page(_path(request, name)).page
    assert page.locator("h1").first.inner_text().strip()
    assert page.locator("h2").count() >= 1
    missing = page.evaluate(
        """() => {
          const label = (el) => {
            if ((el.getAttribute('alt') || '').trim()) return true;
            if ((el.getAttribute('aria-label') || '').trim()) return true;
            const ids = (el.getAttribute('aria-labelledby') || '').split(/\\s+/).filter(Boolean);
            const titled = ids.map((id) => document.getElementById(id))
              .some((t) => t && t.textContent.trim());
            const title = el.querySelector(':scope > title');
            return el.getAttribute('role') === 'img' && (titled || !!(title && title.textContent.trim()));
          };
          // Shown images only: pytest-html keeps empty, hidden <img> placeholders per row.
          return [...document.querySelectorAll('img, svg, [role=img]')]
            .filter((el) => el.checkVisibility())
            .filter((el) => !label(el)).map((el) => el.outerHTML.slice(0, 80));
        }"""
    )
    assert missing == []


def _column(page: Any, table: str, column: int) -> list[str]:
    texts: list[str] = page.locator(f"#{table} tbody tr").evaluate_all(
        f"rows => rows.map(r => r.cells[{column}].textContent.trim())"
    )
    return texts


def test_clicking_a_batch_table_header_sorts_by_number_both_ways(
    batch_page: Path, open_page: Any
) -> None:
    page = open_page(batch_page).page
    header = page.locator("#table1_agents thead th").nth(3)  # Mean score
    values = _column(page, "table1_agents", 3)
    header.locator("button").click()
    ascending = _column(page, "table1_agents", 3)
    assert ascending == sorted(values, key=float)
    assert header.get_attribute("aria-sort") == "ascending"
    header.locator("button").click()
    assert _column(page, "table1_agents", 3) == sorted(values, key=float, reverse=True)
    assert header.get_attribute("aria-sort") == "descending"


def test_a_header_sorts_from_the_keyboard_too(batch_page: Path, open_page: Any) -> None:
    page = open_page(batch_page).page
    before = _column(page, "runs", 3)
    page.locator("#runs thead th").nth(3).locator("button").focus()
    page.keyboard.press("Enter")
    after = _column(page, "runs", 3)
    assert after == sorted(before, key=lambda text: float("inf") if text == "-" else float(text))
    assert after != before


def test_the_audit_components_sort_by_value(audit_page: Path, open_page: Any) -> None:
    page = open_page(audit_page).page
    values = _column(page, "components", 1)
    page.locator("#components thead th").nth(1).locator("button").click()
    assert _column(page, "components", 1) == sorted(values, key=float)
    assert _column(page, "components", 1) != values


def test_the_grade_page_sorts_by_the_kind_column(grade_page: Path, open_page: Any) -> None:
    page = open_page(grade_page).page
    kinds = page.locator("#results-table tbody.results-table-row td.col-kind")
    before = kinds.all_inner_texts()
    page.locator("#results-table-head th.sortable", has_text="Kind").click()
    after = kinds.all_inner_texts()
    assert sorted(after) == sorted(before)
    assert after in (sorted(before), sorted(before, reverse=True))
    assert after != before


@pytest.mark.parametrize("name", PAGES)
def test_a_script_in_metadata_shows_as_text_and_never_runs(
    name: str, request: pytest.FixtureRequest, open_page: Any
) -> None:
    page = open_page(_path(request, name)).page
    assert HOSTILE in page.locator("body").inner_text()
    assert page.evaluate("typeof window.__pwned") == "undefined"
