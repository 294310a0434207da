"""grading/runner: the one argument list of a grading session, and the one way to start it."""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path

import pytest
from grading_helpers import REPO

from pytest_clinaudit.grading import options, runner


def test_the_plugin_reads_back_every_value_the_session_arguments_carry(
    pytester: pytest.Pytester,
) -> None:
    # Differential: whatever the runner writes, the plugin's own resolver must read
    # back as the same options; a flag spelled differently would be a usage error.
    variants = pytester.mkdir("variants")
    mimic = pytester.mkdir("mimic")
    args = runner.session_args(
        pytester.path / "report.json",
        "wdbc-hard",
        score_json=pytester.path / "score.json",
        profile="metr",
        manifest=pytester.path / "manifest.json",
        junit_xml=pytester.path / "junit.xml",
        cache_dir=pytester.path / "cache",
        variants_dirs=(variants,),
        mimic_dir=mimic,
        meta={"agent": "a=b", "run": "2"},
    )
    config = pytester.parseconfig(*args)
    resolved = options.resolve(config)
    assert resolved is not None
    assert dataclasses.asdict(resolved) == {
        "submission": pytester.path / "report.json",
        "variant": "wdbc-hard",
        "profile": "metr",
        "fail_under": None,
        "score_json": pytester.path / "score.json",
        "variants_dirs": (variants,),
        "cache_dir": pytester.path / "cache",
        "mimic_dir": mimic,
        "max_bytes": options.DEFAULT_MAX_BYTES,
        "manifest": pytester.path / "manifest.json",
        "meta": (("agent", "a=b"), ("run", "2")),
    }
    assert config.getoption("xmlpath") == str(pytester.path / "junit.xml")


def test_a_session_runs_without_configuration_file_or_cache_in_its_own_directory() -> None:
    args = runner.session_args(Path("/r.json"), "wdbc-hard", score_json=Path("/s.json"))
    assert args[args.index("-c") + 1] == os.devnull
    assert args[args.index("--rootdir") + 1] == "."
    assert "no:cacheprovider" in args
    assert runner.plugin_arguments() == []  # the installed entry point loads the plugin


def test_extra_arguments_come_last() -> None:
    args = runner.session_args(
        Path("/r.json"), "wdbc-hard", score_json=Path("/s.json"), extra=("-n", "2")
    )
    assert args[-2:] == ["-n", "2"]


def test_a_session_over_its_time_limit_is_reported_not_raised() -> None:
    finished = runner.run_session(["--version"], timeout=0.001)
    assert (finished.exit_code, finished.problem) == (None, "timed out after 0.001 s")


def test_a_session_reports_pytests_exit_status_and_output() -> None:
    finished = runner.run_session(["--no-such-flag"], timeout=120)
    assert finished.exit_code == 4  # pytest's usage error
    assert "--no-such-flag" in finished.output
    assert finished.problem == ""


def test_grading_over_the_time_limit_is_an_error_not_a_grade(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match=r"wrote no score \(timed out after 0.001 s\)"):
        runner.grade(tmp_path / "report.json", "wdbc-hard", timeout=0.001)


def _starts_pytest(node: ast.AST) -> bool:
    """A list or tuple literal holding ``"-m", "pytest"`` one after the other."""
    if not isinstance(node, ast.List | ast.Tuple):
        return False
    values = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return any(values[i : i + 2] == ["-m", "pytest"] for i in range(len(values) - 1))


def test_only_the_runner_starts_a_pytest_process() -> None:
    package = REPO / "src" / "pytest_clinaudit"
    starters = sorted(
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if any(map(_starts_pytest, ast.walk(ast.parse(path.read_text(encoding="utf-8")))))
    )
    assert starters == ["grading/runner.py"]
