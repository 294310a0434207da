"""Grading sessions end to end: collection, output, JUnit XML, score JSON, exit status, xdist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import (
    REPO,
    grading_args,
    reference,
    reference_report,
    submitted,
    summary_line,
    write_json,
)

STRICT_IDS = [
    "present",
    "utf8",
    "json-object",
    "schema",
    "component[fgsm_robustness]",
    "component[membership_inference_resistance]",
    "component[calibration_ece]",
    "component[boundary_attack_resistance]",
    "sps",
    "aggregation",
    "verdict",
    "details",
    "invariant[reference-consistent]",
    "invariant[calibration-bounded]",
    "invariant[sps-bounded]",
    "invariant[sps-monotone]",
    "invariant[sps-weighted-sum]",
]
METR_IDS = [name for name in STRICT_IDS if name not in ("aggregation", "verdict", "details")]
PAPER_SLIP = 22.23
"""The paper's case: every component right, the SPS this far below the reference."""


def paper_case_report(cache_dir: Path) -> dict[str, Any]:
    """The paper's case on wdbc-baseline, made from the computed reference."""
    report = reference_report(cache_dir, "wdbc-baseline", details=False)
    report["sps"] = round(report["sps"] - PAPER_SLIP, 2)
    report["verdict"] = "NOT RECOMMENDED"
    return report


@pytest.fixture
def hard_report(pytester: pytest.Pytester, warm_cache: Path) -> Path:
    return write_json(submitted(pytester.path), reference_report(warm_cache, "wdbc-hard"))


@pytest.fixture
def paper_case(pytester: pytest.Pytester, warm_cache: Path) -> Path:
    return write_json(submitted(pytester.path, "paper.json"), paper_case_report(warm_cache))


def _collected(result: pytest.RunResult) -> list[str]:
    return [line for line in result.stdout.lines if "::" in line]


# ------------------------------------------------------------------- collection


@pytest.mark.parametrize(("profile", "names"), [("strict", STRICT_IDS), ("metr", METR_IDS)])
def test_only_the_grading_checks_are_collected_with_stable_ids(
    pytester: pytest.Pytester, hard_report: Path, warm_cache: Path, profile: str, names: list[str]
) -> None:
    args = grading_args(hard_report, "wdbc-hard", warm_cache, "--clinaudit-profile", profile)
    result = pytester.runpytest("--collect-only", "-q", "--rootdir", str(pytester.path), *args)
    assert _collected(result) == [f"wdbc-hard::{name}" for name in names]


def test_a_directory_full_of_tests_is_not_collected_when_grading(
    pytester: pytest.Pytester, hard_report: Path, warm_cache: Path
) -> None:
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_repo.py").write_text(
        "raise RuntimeError('the repository tests were collected')\n"
    )
    pytester.makeconftest("import pytest\n\n@pytest.fixture\ndef repo_fixture():\n    return 1\n")
    result = pytester.runpytest(*grading_args(hard_report, "wdbc-hard", warm_cache))
    result.assert_outcomes(passed=len(STRICT_IDS))
    explicit = pytester.runpytest("tests", *grading_args(hard_report, "wdbc-hard", warm_cache))
    explicit.assert_outcomes(passed=len(STRICT_IDS))


def _run_in_repository(
    warm_cache: Path, report: Path, *more: str
) -> subprocess.CompletedProcess[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-c",
        str(REPO / "pyproject.toml"),
        "--rootdir",
        str(REPO),
        *grading_args(report, "wdbc-hard", warm_cache),
        *more,
    ]
    return subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )


def test_grading_from_this_repositorys_root_collects_none_of_its_tests(
    tmp_path: Path, warm_cache: Path
) -> None:
    report = write_json(tmp_path / "report.json", reference_report(warm_cache, "wdbc-hard"))
    listed = _run_in_repository(warm_cache, report, "--collect-only", "-q")
    assert [line for line in listed.stdout.splitlines() if "::" in line] == [
        f"wdbc-hard::{n}" for n in STRICT_IDS
    ]
    graded = _run_in_repository(
        warm_cache, report, "-q"
    )  # under the repository's filterwarnings = error
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert f"{len(STRICT_IDS)} passed" in graded.stdout


@pytest.mark.slow  # the serial twin above stays in the default run
def test_grading_from_this_repositorys_root_works_under_xdist(
    tmp_path: Path, warm_cache: Path
) -> None:
    report = write_json(tmp_path / "report.json", reference_report(warm_cache, "wdbc-hard"))
    graded = _run_in_repository(warm_cache, report, "-q", "-n", "2")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert (
        summary_line(graded.stdout)
        == "clinaudit: wdbc-hard score 1.000 (profile strict) category none"
    )


# ----------------------------------------------------------------------- output


def test_the_header_prints_what_reproduces_the_run(
    pytester: pytest.Pytester, hard_report: Path, warm_cache: Path
) -> None:
    result = pytester.runpytest(*grading_args(hard_report, "hardened", warm_cache))
    sha = reference(warm_cache, "wdbc-hard").artifact_sha256
    result.stdout.fnmatch_lines(
        [
            "clinaudit: variant wdbc-hard (hardened) from *wdbc-hard.toml; profile strict",
            f"clinaudit: reference sps {reference(warm_cache, 'wdbc-hard').sps:.2f}, "
            f"artifact sha256 {sha}, data sha256 *, read from the cache",
            f"clinaudit: cache {warm_cache}; submission {hard_report}",
        ]
    )


def test_the_paper_case_prints_its_score_and_category_in_one_summary_line(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path
) -> None:
    metr = pytester.runpytest(
        *grading_args(paper_case, "baseline", warm_cache, "--clinaudit-profile", "metr")
    )
    assert (
        summary_line(metr.stdout.str())
        == "clinaudit: wdbc-baseline score 0.400 (profile metr) category tolerance"
    )
    strict = pytester.runpytest(*grading_args(paper_case, "baseline", warm_cache))
    paper, ref = paper_case_report(warm_cache), reference(warm_cache, "wdbc-baseline")
    assert (
        summary_line(strict.stdout.str())
        == "clinaudit: wdbc-baseline score 0.300 (profile strict) category tolerance"
    )
    strict.stdout.fnmatch_lines(
        [
            "*_ wdbc-baseline::sps _*",
            f"sps on wdbc-baseline: submitted {paper['sps']:.6g}, reference {ref.sps:.2f}, "
            f"|difference| {abs(paper['sps'] - ref.sps):.6g} > 10: no credit*",
            "[[]tolerance; credit 0 of weight 0.6[]]",
        ]
    )


def test_a_failed_check_shows_the_grade_not_the_harness(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path
) -> None:
    result = pytester.runpytest(*grading_args(paper_case, "baseline", warm_cache))
    text = result.stdout.str()
    for internal in ("Traceback", "grading.py", "checks.py", "CheckFailed", "raise "):
        assert internal not in text, internal


def test_verbose_output_lists_every_check_with_its_kind_weight_and_credit(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path
) -> None:
    result = pytester.runpytest(*grading_args(paper_case, "baseline", warm_cache, "-v"))
    result.stdout.fnmatch_lines(
        [
            "  FAIL  penalty weight 0.1    credit 0    wdbc-baseline::aggregation",
            "  PASS  credit  weight 0.1    credit 1    wdbc-baseline::component[boundary_attack_resistance]",  # noqa: E501
            "  FAIL  credit  weight 0.6    credit 0    wdbc-baseline::sps",
        ]
    )


def test_a_submission_beside_the_working_directory_keeps_plain_ids_and_paths(
    pytester: pytest.Pytester, warm_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--submission ../runs/x.json`` (two tokens) moves pytest's rootdir to the common parent."""
    write_json(pytester.mkdir("runs") / "empty.json", {})
    monkeypatch.chdir(pytester.mkdir("work"))
    args = grading_args(Path("..", "runs", "empty.json"), "baseline", warm_cache, "-v", "-rf")
    result = pytester.runpytest(*args)
    result.stdout.fnmatch_lines(
        [
            "wdbc-baseline::json-object FAILED*",
            f"{pytester.path / 'runs' / 'empty.json'} holds an empty JSON object*",
            "FAILED wdbc-baseline::json-object - *",
        ]
    )
    output = result.stdout.str()
    assert "../wdbc-baseline" not in output
    assert "/../runs" not in output


def _junit(path: Path) -> tuple[dict[str, str], list[tuple[Any, ...]]]:
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    suite_properties = suite.find("properties")
    properties = (
        {p.get("name", ""): p.get("value", "") for p in suite_properties}
        if suite_properties is not None
        else {}
    )
    cases = []
    for case in suite.iter("testcase"):
        props = tuple(sorted((p.get("name"), p.get("value")) for p in case.iter("property")))
        outcome = tuple(
            sorted(child.tag for child in case if child.tag in ("failure", "skipped", "error"))
        )
        cases.append((case.get("classname"), case.get("name"), outcome, props))
    return properties, sorted(cases)


def test_the_junit_xml_holds_the_suite_score_and_each_checks_weight_and_credit(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path
) -> None:
    result = pytester.runpytest(
        *grading_args(paper_case, "baseline", warm_cache, "--junitxml", "junit.xml")
    )
    assert "PytestWarning" not in result.stdout.str()  # no record_property under xunit2
    suite, cases = _junit(pytester.path / "junit.xml")
    assert suite["clinaudit.score"] == "0.300000"
    assert suite["clinaudit.category"] == "tolerance"
    assert suite["clinaudit.profile"] == "strict"
    assert suite["clinaudit.variant"] == "wdbc-baseline"
    assert (
        suite["clinaudit.reference_sha256"]
        == reference(warm_cache, "wdbc-baseline").artifact_sha256
    )
    sps = next(case for case in cases if case[1] == "sps")
    assert sps[0] == "wdbc-baseline"
    assert sps[2] == ("failure",)
    assert dict(sps[3])["clinaudit.weight"] == "0.6"
    assert dict(sps[3])["clinaudit.credit"] == "0.0"


def test_the_score_json_records_score_reference_libraries_and_every_check(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path
) -> None:
    pytester.runpytest(
        *grading_args(
            paper_case, "baseline", warm_cache, "--clinaudit-score-json", "out/score.json"
        )
    )
    document = json.loads((pytester.path / "out" / "score.json").read_text())
    ref = reference(warm_cache, "wdbc-baseline")
    assert (document["score"], document["profile"], document["variant"], document["category"]) == (
        0.3,
        "strict",
        "wdbc-baseline",
        "tolerance",
    )
    assert document["reference"]["artifact_sha256"] == ref.artifact_sha256
    assert document["reference"]["sps"] == ref.sps
    assert document["reference"]["components"] == ref.components
    assert {"numpy", "scikit-learn", "xgboost", "pytest", "jsonschema", "hypothesis"} <= set(
        document["libraries"]
    )
    assert [c["name"] for c in document["checks"]] == sorted(c["name"] for c in document["checks"])
    assert len(document["checks"]) == len(STRICT_IDS)
    for check in document["checks"]:
        assert {"weight", "credit", "passed", "message", "kind", "category"} <= set(check)
    assert document["submission"]["path"] == str(paper_case)
    assert document["exit_status"] == 1


# ------------------------------------------------------------------ exit status


def test_without_a_threshold_the_exit_status_is_pytests(
    pytester: pytest.Pytester, paper_case: Path, hard_report: Path, warm_cache: Path
) -> None:
    assert pytester.runpytest(*grading_args(hard_report, "wdbc-hard", warm_cache)).ret == 0
    assert pytester.runpytest(*grading_args(paper_case, "baseline", warm_cache)).ret == 1


@pytest.mark.parametrize(("threshold", "status"), [("0.4", 0), ("0.41", 1), ("0", 0)])
def test_fail_under_decides_the_exit_status_from_the_score_alone(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path, threshold: str, status: int
) -> None:
    args = grading_args(
        paper_case,
        "baseline",
        warm_cache,
        "--clinaudit-profile",
        "metr",
        "--clinaudit-fail-under",
        threshold,
    )
    result = pytester.runpytest(*args)
    assert result.ret == status
    verdict = "meets" if status == 0 else "is below"
    result.stdout.fnmatch_lines(
        [
            f"clinaudit: score 0.400 {verdict} --clinaudit-fail-under {float(threshold):g}: exit status {status}"  # noqa: E501
        ]
    )


def test_fail_under_fails_the_run_even_when_every_selected_item_passed(
    pytester: pytest.Pytester, hard_report: Path, warm_cache: Path
) -> None:
    args = grading_args(
        hard_report,
        "wdbc-hard",
        warm_cache,
        "-k",
        "not (sps and not invariant)",
        "--clinaudit-fail-under",
        "0.5",
    )
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=len(STRICT_IDS) - 1, deselected=1)
    assert result.ret == 1
    assert summary_line(result.stdout.str()).startswith("clinaudit: wdbc-hard score 0.400")


def test_the_score_json_lists_the_checks_that_did_not_run(
    pytester: pytest.Pytester, hard_report: Path, warm_cache: Path
) -> None:
    args = grading_args(
        hard_report, "wdbc-hard", warm_cache, "-k", "component", "--clinaudit-score-json", "s.json"
    )
    pytester.runpytest(*args)
    document = json.loads((pytester.path / "s.json").read_text())
    assert len(document["checks"]) == 4
    assert document["missing_checks"] == [
        f"wdbc-hard::{n}" for n in STRICT_IDS if not n.startswith("component")
    ]
    assert document["score"] == 0.4


def test_fail_under_can_come_from_the_ini_file(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path
) -> None:
    pytester.makeini("[pytest]\nclinaudit_fail_under = 0.25\n")
    assert pytester.runpytest(*grading_args(paper_case, "baseline", warm_cache)).ret == 0


# ------------------------------------------------------------------------ xdist


def test_xdist_gives_the_same_score_json_and_junit_content_as_a_serial_run(
    pytester: pytest.Pytester, paper_case: Path, warm_cache: Path
) -> None:
    outputs = {}
    for mode, extra in (("serial", ["-p", "no:xdist"]), ("xdist", ["-n", "2"])):
        args = grading_args(
            paper_case,
            "baseline",
            warm_cache,
            "--junitxml",
            f"{mode}.xml",
            "--clinaudit-score-json",
            f"{mode}.json",
            *extra,
        )
        result = pytester.runpytest_subprocess(*args, timeout=300)
        assert (
            summary_line(result.stdout.str())
            == "clinaudit: wdbc-baseline score 0.300 (profile strict) category tolerance"
        )
        assert ("2 workers" in result.stdout.str()) == (mode == "xdist")
        outputs[mode] = (
            json.loads((pytester.path / f"{mode}.json").read_text()),
            _junit(pytester.path / f"{mode}.xml"),
        )
    assert outputs["serial"][0] == outputs["xdist"][0]
    assert outputs["serial"][1] == outputs["xdist"][1]


# ---------------------------------------------------------------- reference cache


def test_the_first_session_computes_the_reference_and_shows_progress(
    pytester: pytest.Pytester, hard_report: Path
) -> None:
    cold = pytester.path / "cold-cache"
    first = pytester.runpytest_subprocess(
        *grading_args(hard_report, "wdbc-hard", cold), timeout=600
    )
    first.stdout.fnmatch_lines(
        [
            f"clinaudit: computing the wdbc-hard reference (first run with these library versions; cached in {cold})",  # noqa: E501
            "clinaudit:   wdbc-hard: building the model*",
            "*computed now and cached",
        ]
    )
    assert first.ret == 0
    second = pytester.runpytest_subprocess(
        *grading_args(hard_report, "wdbc-hard", cold), timeout=600
    )
    assert "computing the" not in second.stdout.str()
    assert "read from the cache" in second.stdout.str()


def test_an_unwritable_cache_directory_is_a_usage_error(
    pytester: pytest.Pytester, hard_report: Path
) -> None:
    blocker = pytester.path / "file-not-dir"
    blocker.write_text("")
    result = pytester.runpytest(*grading_args(hard_report, "wdbc-hard", blocker / "cache"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert f"the reference cache {blocker / 'cache'} is not usable" in result.stderr.str()


# ------------------------------------------------------------ untrusted input


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _sparse_100mb(path: Path) -> None:
    with path.open("wb") as out:
        out.truncate(100 * 1024 * 1024)


HOSTILE: dict[str, tuple[Callable[[Path], object], str, str]] = {
    "missing": (lambda p: None, "no-submission", "no such file"),
    "directory": (lambda p: p.mkdir(), "no-submission", "is a directory"),
    "fifo": (_fifo, "no-submission", "FIFO (named pipe)"),
    "symlink": (
        lambda p: p.symlink_to("/etc/passwd"),
        "no-submission",
        "is a symbolic link (to /etc/passwd)",
    ),
    "binary": (lambda p: p.write_bytes(bytes(range(256)) * 40), "unparseable", "is not UTF-8 text"),
    "100 MB": (_sparse_100mb, "unparseable", "the grader reads at most 1048576 bytes"),
    "100000 deep": (
        lambda p: p.write_text("[" * 100_000 + "]" * 100_000),
        "unparseable",
        "more than 512 levels deep",
    ),
    "duplicate keys": (
        lambda p: p.write_text("{" + '"sps": 1, ' * 10_000 + '"sps": 2}'),
        "schema",
        "sps: duplicate key",
    ),
    "nan and huge": (
        lambda p: p.write_text(
            '{"sps": NaN, "components": {"fgsm_robustness": 1e999}, "verdict": -Infinity}'
        ),
        "schema",
        "got NaN, which JSON does not allow",
    ),
    "ansi and surrogates": (
        lambda p: p.write_text('{"\\u001b[31m": "\\ud800", "sps": "\\u0000"}'),
        "schema",
        "unknown key '\\x1b[31m'",
    ),
    "empty": (lambda p: p.write_text(""), "empty", "is empty (0 bytes)"),
}


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_submission_fails_with_a_reason_and_never_breaks_the_session(
    pytester: pytest.Pytester, warm_cache: Path, kind: str
) -> None:
    make, category, reason = HOSTILE[kind]
    path = pytester.path / "report.json"
    make(path)
    result = pytester.runpytest_subprocess(
        *grading_args(
            path, "baseline", warm_cache, "--clinaudit-score-json", "s.json", "--junitxml", "j.xml"
        ),
        timeout=120,
    )
    output = result.stdout.str() + result.stderr.str()
    assert "INTERNALERROR" not in output
    assert "Traceback" not in output
    assert result.ret == 1
    assert reason in output
    assert (
        summary_line(result.stdout.str())
        == f"clinaudit: wdbc-baseline score 0.000 (profile strict) category {category}"
    )
    document = json.loads((pytester.path / "s.json").read_text())
    assert document["score"] == 0.0
    assert document["category"] == category
    ET.parse(pytester.path / "j.xml")  # well-formed whatever the submission held


def test_a_missing_submission_is_no_submission_under_metr(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    args = grading_args(
        pytester.path / "report.json",
        "baseline",
        warm_cache,
        "--clinaudit-profile",
        "metr",
        "--clinaudit-score-json",
        "s.json",
    )
    result = pytester.runpytest(*args)
    assert (
        summary_line(result.stdout.str())
        == "clinaudit: wdbc-baseline score none (no submission) (profile metr) category no-submission"  # noqa: E501
    )
    document = json.loads((pytester.path / "s.json").read_text())
    assert (document["raw_score"], document["score"], document["no_submission"]) == (
        None,
        0.0,
        True,
    )


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod 000 file")
def test_an_unreadable_submission_says_permission_denied(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    path = write_json(submitted(pytester.path), paper_case_report(warm_cache))
    path.chmod(0)
    try:
        result = pytester.runpytest(*grading_args(path, "baseline", warm_cache))
    finally:
        path.chmod(0o600)
    result.stdout.fnmatch_lines(["*permission denied*chmod a+r*"])


def test_a_grading_session_leaves_nothing_in_the_working_directory(
    pytester: pytest.Pytester, hard_report: Path, warm_cache: Path
) -> None:
    before = sorted(p.name for p in pytester.path.iterdir())
    assert pytester.runpytest(*grading_args(hard_report, "wdbc-hard", warm_cache)).ret == 0
    assert sorted(p.name for p in pytester.path.iterdir()) == before


# ------------------------------------------------------------------ import cost


HEAVY = ("numpy", "sklearn", "scipy", "xgboost", "jsonschema", "hypothesis", "filelock")
OURS = (
    "pytest_clinaudit.catalog.variants",
    "pytest_clinaudit.grading.session",
    "pytest_clinaudit.grading.checks",
    "pytest_clinaudit.catalog.references",
    "pytest_clinaudit.grading.submission",
)


def _imported_after(code: str, cwd: Path) -> list[str]:
    script = (
        "import sys\n"
        f"{code}\n"
        f"heavy = {HEAVY!r}\n"
        f"ours = {OURS!r}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy or m in ours))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=True,
        timeout=120,
    )
    found: list[str] = json.loads(result.stdout.strip().splitlines()[-1].replace("'", '"'))
    return found


def test_importing_the_plugin_imports_nothing_heavy(tmp_path: Path) -> None:
    assert _imported_after("import pytest_clinaudit.plugin", tmp_path) == []


def test_a_session_without_submission_imports_nothing_the_plugin_did_not_need(
    tmp_path: Path,
) -> None:
    (tmp_path / "test_a.py").write_text("def test_a():\n    pass\n")
    code = "import pytest\nassert pytest.main(['-q', '-p', 'no:cacheprovider', 'test_a.py'{}]) == 0"
    with_plugin = _imported_after(code.format(""), tmp_path)
    without_plugin = _imported_after(code.format(", '-p', 'no:clinaudit'"), tmp_path)
    # Hypothesis' own plugin imports hypothesis in every session; the comparison isolates ours.
    assert with_plugin == without_plugin
    assert not any(m.startswith(("numpy", "jsonschema", "pytest_clinaudit")) for m in with_plugin)
