"""Grader extensions: the documented example conftest, and hooks that misbehave."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from grading_helpers import (
    REPO,
    grading_args,
    reference_report,
    submitted,
    summary_line,
    write_json,
)

EXAMPLE = REPO / "examples" / "grader_conftest.py"


@pytest.fixture
def graded_with_example(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(EXAMPLE.read_text(encoding="utf-8"))
    return pytester


def test_the_example_registers_a_variant_and_adds_a_check_that_the_reference_passes(
    graded_with_example: pytest.Pytester, warm_cache: Path
) -> None:
    report = write_json(
        submitted(graded_with_example.path, "r.json"), reference_report(warm_cache, "wdbc-baseline")
    )
    result = graded_with_example.runpytest(*grading_args(report, "tight", warm_cache, "-v"))
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*wdbc-baseline-tight::names-the-model PASSED*"])
    assert (
        summary_line(result.stdout.str())
        == "clinaudit: wdbc-baseline-tight score 1.000 (profile strict) category none"
    )


def test_the_example_check_deducts_its_weight_and_says_how_to_fix_the_report(
    graded_with_example: pytest.Pytester, warm_cache: Path
) -> None:
    report = write_json(
        submitted(graded_with_example.path, "r.json"),
        reference_report(warm_cache, "wdbc-baseline", details=False),
    )
    result = graded_with_example.runpytest(*grading_args(report, "tight", warm_cache))
    result.stdout.fnmatch_lines(
        ["details.artifact_sha256: expected * (the sha256 of model.pkl), got null. Fix: *"]
    )
    assert (
        summary_line(result.stdout.str())
        == "clinaudit: wdbc-baseline-tight score 0.950 (profile strict) category schema"
    )


def test_the_example_variant_applies_its_tighter_tolerance(
    graded_with_example: pytest.Pytester, warm_cache: Path
) -> None:
    document = reference_report(warm_cache, "wdbc-baseline")
    document["components"]["calibration_ece"] += 0.05  # inside 0.10, outside 0.01
    report = write_json(submitted(graded_with_example.path, "r.json"), document)
    loose = graded_with_example.runpytest(
        *grading_args(report, "baseline", warm_cache, "-k", "component")
    )
    tight = graded_with_example.runpytest(
        *grading_args(report, "tight", warm_cache, "-k", "component")
    )
    assert loose.ret == 0
    assert tight.ret == 1
    tight.stdout.fnmatch_lines(["*|difference| 0.05 > tolerance 0.01"])


def test_the_graded_hook_sees_the_final_grade_once(
    graded_with_example: pytest.Pytester, warm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = graded_with_example.path / "grades.csv"
    monkeypatch.setenv("GRADES_CSV", str(log))
    report = write_json(
        submitted(graded_with_example.path, "r.json"), reference_report(warm_cache, "wdbc-baseline")
    )
    graded_with_example.runpytest(
        *grading_args(report, "baseline", warm_cache, "--clinaudit-profile", "metr")
    )
    assert list(csv.reader(log.read_text().splitlines())) == [
        ["wdbc-baseline", "metr", "1.0000", "none"]
    ]


def test_the_example_loads_when_the_plugin_is_disabled(
    graded_with_example: pytest.Pytester,
) -> None:
    graded_with_example.makepyfile(test_x="def test_x():\n    pass\n")
    graded_with_example.runpytest("-p", "no:clinaudit").assert_outcomes(passed=1)


def test_the_example_works_under_xdist(
    graded_with_example: pytest.Pytester, warm_cache: Path
) -> None:
    report = write_json(
        submitted(graded_with_example.path, "r.json"),
        reference_report(warm_cache, "wdbc-baseline", details=False),
    )
    result = graded_with_example.runpytest_subprocess(
        *grading_args(report, "tight", warm_cache, "-n", "2")
    )
    assert (
        summary_line(result.stdout.str())
        == "clinaudit: wdbc-baseline-tight score 0.950 (profile strict) category schema"
    )


def test_a_hook_returning_something_else_than_checks_is_a_collection_error_that_says_so(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    pytester.makeconftest(
        "import pytest\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_clinaudit_add_checks(config, variant, reference, submission):\n"
        "    return ['not a check']\n"
    )
    report = write_json(
        submitted(pytester.path, "r.json"), reference_report(warm_cache, "wdbc-baseline")
    )
    result = pytester.runpytest(*grading_args(report, "baseline", warm_cache))
    assert result.ret == pytest.ExitCode.INTERRUPTED  # a collection error stops the session
    result.stdout.fnmatch_lines(
        ["*pytest_clinaudit_add_checks returned str; return pytest_clinaudit.api.Check objects*"]
    )
    assert "INTERNALERROR" not in result.stdout.str() + result.stderr.str()


def test_a_hook_check_reusing_a_builtin_name_is_refused(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    pytester.makeconftest(
        "import pytest\n"
        "from pytest_clinaudit.api import Check\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_clinaudit_add_checks(config, variant, reference, submission):\n"
        "    return [Check('sps', 'tolerance', lambda: True)]\n"
    )
    report = write_json(
        submitted(pytester.path, "r.json"), reference_report(warm_cache, "wdbc-baseline")
    )
    result = pytester.runpytest(*grading_args(report, "baseline", warm_cache))
    result.stdout.fnmatch_lines(["*check name(s) sps used twice*"])


def test_a_crashing_grader_check_shows_its_traceback_earns_nothing_and_spares_the_others(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    pytester.makeconftest(
        "import pytest\n"
        "from pytest_clinaudit.api import Check\n"
        "def boom():\n"
        "    raise KeyError('graders make mistakes')\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_clinaudit_add_checks(config, variant, reference, submission):\n"
        "    return [Check('mine', 'schema', boom, weight=1.0, kind='credit')]\n"
    )
    report = write_json(
        submitted(pytester.path, "r.json"), reference_report(warm_cache, "wdbc-baseline")
    )
    result = pytester.runpytest(
        *grading_args(report, "baseline", warm_cache, "--clinaudit-score-json", "s.json")
    )
    result.assert_outcomes(passed=17, failed=1)
    result.stdout.fnmatch_lines(["*def boom():*", "*KeyError: 'graders make mistakes'"])
    document = json.loads((pytester.path / "s.json").read_text())
    assert document["score"] == 0.5  # 1 of 2 credit weight: the built-in 1.0 and the crashed 1.0
    assert "the check raised KeyError" in next(
        c["message"] for c in document["checks"] if c["name"] == "mine"
    )


def test_a_check_returning_a_bool_passes_or_fails_with_its_description(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    pytester.makeconftest(
        "import pytest\n"
        "from pytest_clinaudit.api import Check\n"
        "@pytest.hookimpl(optionalhook=True)\n"
        "def pytest_clinaudit_add_checks(config, variant, reference, submission):\n"
        "    return [Check('yes', 'schema', lambda: True, description='always'),\n"
        "            Check('no', 'verdict', lambda: False, description='never', weight=0.2, kind='penalty')]\n"  # noqa: E501
    )
    report = write_json(
        submitted(pytester.path, "r.json"), reference_report(warm_cache, "wdbc-baseline")
    )
    result = pytester.runpytest(*grading_args(report, "baseline", warm_cache))
    result.assert_outcomes(passed=18, failed=1)
    result.stdout.fnmatch_lines(["never", "[[]verdict; deducts 0.2[]]"])
    assert summary_line(result.stdout.str()).endswith(
        "score 0.800 (profile strict) category verdict"
    )
