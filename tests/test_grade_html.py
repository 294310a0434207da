"""A grading session through pytest-html: the grade's columns and summary in its page.

Expected values come from the same session's score JSON (every check's kind,
weight and credit; the reference and submitted values), never from constants.
tests/test_pages_browser.py opens such a page in Chromium.
"""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import grading_args, reference_report, submitted, write_json
from page_helpers import HOSTILE

pytest.importorskip("pytest_html", reason="pytest-html is not installed (pip install '.[test]')")

COLUMNS = ["Kind", "Weight", "Credit", "Reference", "Submitted"]


def grade_page(
    pytester: pytest.Pytester, warm_cache: Path, *more: str
) -> tuple[str, dict[str, Any]]:
    """Grade a submission whose SPS is 20 off with --html; return the page and the score JSON."""
    report = reference_report(warm_cache, "wdbc-hard")
    report["sps"] = round(report["sps"] - 20.0, 2)
    submission = write_json(submitted(pytester.path), report)
    result = pytester.runpytest_subprocess(
        *grading_args(submission, "wdbc-hard", warm_cache),
        "--html",
        "grade.html",
        "--self-contained-html",
        "--clinaudit-score-json",
        "score.json",
        *more,
    )
    assert result.ret == 1, result.stdout.str()
    page = (pytester.path / "grade.html").read_text(encoding="utf-8")
    return page, json.loads((pytester.path / "score.json").read_text(encoding="utf-8"))


def _text(cell: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", cell)).strip()


def _rows(page: str) -> dict[str, list[str]]:
    """Test id -> the texts of its row's cells, from pytest-html's JSON data blob."""
    blob = re.search(r'data-jsonblob="([^"]*)"', page)
    assert blob is not None
    tests = json.loads(html.unescape(blob.group(1)))["tests"]
    return {
        test_id: [_text(cell) for cell in entries[-1]["resultsTableRow"]]
        for test_id, entries in tests.items()
    }


def _close(text: str, value: float) -> bool:
    return math.isclose(float(text), value, rel_tol=1e-5, abs_tol=1e-9)


def test_each_check_row_shows_its_kind_weight_credit_reference_and_submitted_value(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    page, score = grade_page(pytester, warm_cache)
    head = re.search(r'<thead id="results-table-head">(.*?)</thead>', page, re.S)
    assert head is not None
    assert [_text(c) for c in re.findall(r"<th[^>]*>.*?</th>", head.group(1))][2:7] == COLUMNS
    rows = _rows(page)
    assert sorted(rows) == sorted(check["id"] for check in score["checks"])
    reference, submitted = score["reference"], score["submitted"]
    for check in score["checks"]:
        kind, weight, credit, ref, sub = rows[check["id"]][2:7]
        assert kind == check["kind"]
        assert _close(weight, check["weight"])
        assert credit == "skipped" if check["skipped"] else _close(credit, check["credit"])
        name = check["name"]
        if name == "sps":
            assert _close(ref, reference["sps"])
            assert _close(sub, submitted["sps"])
        elif name.startswith("component["):
            component = name[len("component[") : -1]
            assert _close(ref, reference["components"][component])
            assert _close(sub, submitted["components"][component])
        elif name == "verdict":
            assert (ref, sub) == (reference["verdict"], submitted["verdict"])
        else:
            assert (ref, sub) == ("", "")


def test_the_page_opens_with_the_score_category_and_profile(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    page, score = grade_page(pytester, warm_cache, "--clinaudit-meta", f"agent={HOSTILE}")
    summary = page.index('class="clinaudit-grade"')
    assert summary < page.index('id="results-table"')
    text = _text(page[summary : page.index("</div>", summary)])
    assert f"clinaudit score: {score['score']:.3f}" in text
    assert f"Category: {score['category']} · profile {score['profile']}" in text
    assert f"Meta: agent{HOSTILE}" in text.replace("\n", "")
    assert HOSTILE not in page


def test_without_pytest_html_active_the_grade_columns_are_not_registered(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    pytester.makeconftest(
        "def pytest_clinaudit_graded(config, variant, grade):\n"
        "    print('COLUMNS', config.pluginmanager.has_plugin('clinaudit-html'))\n"
    )
    report = reference_report(warm_cache, "wdbc-hard")
    submission = write_json(submitted(pytester.path), report)
    result = pytester.runpytest_subprocess(
        *grading_args(submission, "wdbc-hard", warm_cache), "-p", "no:html", "-s"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*COLUMNS False*"])


def test_clinaudit_grade_writes_the_same_page(
    tmp_path: Path, warm_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_clinaudit.cli import main

    report = reference_report(warm_cache, "wdbc-hard")
    report["sps"] = round(report["sps"] - 20.0, 2)
    submission = write_json(tmp_path / "report.json", report)
    page = tmp_path / "pages" / "grade.html"
    args = ["grade", str(submission), "--variant", "wdbc-hard", "--cache-dir", str(warm_cache)]
    assert main([*args, "--html", str(page)]) == 1, capsys.readouterr()
    text = page.read_text(encoding="utf-8")
    rows = _rows(text)
    assert rows["wdbc-hard::sps"][2:5] == ["credit", "0.6", "0"]  # kind, weight, credit
    assert 'class="clinaudit-grade"' in text
