"""What keeps a warm grading session fast: no assertion rewriting of library code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from grading_helpers import REPO


def test_a_grading_session_imports_hypothesis_and_its_checks_without_assertion_rewriting(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    # The grader's conftest is still rewritten; the library modules are not, whenever
    # the session imports them (a warm session may not import Hypothesis at all: its
    # invariant outcomes come from the cache).
    pytester.makeconftest(
        "import importlib\n"
        "def pytest_clinaudit_graded(config, variant, grade):\n"
        "    for name in ('hypothesis', 'hypothesis.core', 'pytest_clinaudit.grading.checks'):\n"
        "        loader = type(importlib.import_module(name).__spec__.loader).__name__\n"
        "        print(f'LOADER {name} {loader}')\n"
    )
    result = pytester.runpytest_subprocess(
        "-s",
        "-p",
        "no:cacheprovider",
        "--submission",
        str(REPO / "examples" / "wdbc-hard" / "report.json"),
        "--variant",
        "wdbc-hard",
        "--clinaudit-cache-dir",
        str(warm_cache),
    )
    loaders = re.findall(r"LOADER (\S+) (\S+)", result.stdout.str())
    assert [name for name, _ in loaders] == [
        "hypothesis",
        "hypothesis.core",
        "pytest_clinaudit.grading.checks",
    ]
    assert all(loader != "AssertionRewritingHook" for _, loader in loaders), loaders
    assert result.ret == 0


def test_an_ordinary_session_still_rewrites_assertions(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_a="def test_a():\n    x = 1\n    assert x == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*assert 1 == 2*"])
