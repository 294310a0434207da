"""``clinaudit grade``: one report, graded by the runner's isolated session (issue 26, part 5)."""

from __future__ import annotations

import json
import shlex
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from grading_helpers import REPO, reference_report, warm_cache_dir, write_json

from pytest_clinaudit.cli import main


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warm_cache_dir(tmp_path_factory)


def test_a_right_report_scores_one_and_writes_the_score_json_and_junit_xml(
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    (tmp_path / "run").mkdir()
    write_json(tmp_path / "run" / "report.json", reference_report(cache, "wdbc-hard"))
    monkeypatch.chdir(tmp_path)  # relative paths start here, not in the session's directory
    status = main(
        [
            "grade",
            "run/report.json",
            "--variant",
            "hardened",
            "--cache-dir",
            str(cache),
            "--score-json",
            "out/score.json",
            "--junit-xml",
            "out/junit.xml",
            "--meta",
            "agent=a",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0, out
    assert "clinaudit: wdbc-hard score 1.000 (profile strict) category none" in out
    assert "FAIL" not in out
    document = json.loads((tmp_path / "out" / "score.json").read_text())
    assert (document["score"], document["meta"]) == (1.0, {"agent": "a"})
    properties = {
        p.get("name"): p.get("value")
        for p in ET.parse(tmp_path / "out" / "junit.xml").getroot().iter("property")
    }
    assert properties["clinaudit.score"] == "1.000000"


def test_a_wrong_component_is_listed_with_its_message_and_exits_one(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = reference_report(cache, "wdbc-hard", details=False)
    report["components"]["calibration_ece"] = round(
        1.0 - report["components"]["calibration_ece"], 4
    )
    path = write_json(tmp_path / "report.json", report)
    status = main(
        [
            "grade",
            str(path),
            "--variant",
            "wdbc-hard",
            "--cache-dir",
            str(cache),
            "--profile",
            "metr",
        ]
    )
    out = capsys.readouterr().out
    assert status == 1, out
    failing = [line for line in out.splitlines() if line.startswith("  FAIL ")]
    assert len(failing) == 1, out
    assert failing[0].startswith("  FAIL wdbc-hard::component[calibration_ece]: ")
    assert "reference" in failing[0]
    assert "tolerance" in failing[0]
    assert "clinaudit: 1 failing check(s)" in out


def test_fail_under_decides_the_exit_status_of_a_graded_report(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "report.json", {})
    base = ["grade", str(path), "--variant", "wdbc-hard", "--cache-dir", str(cache)]
    assert main([*base, "--fail-under", "0"]) == 0
    assert main([*base, "--fail-under", "0.5"]) == 1
    assert "score 0.000" in capsys.readouterr().out


def test_a_report_that_cannot_be_graded_exits_two_saying_why(
    tmp_path: Path, cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_json(tmp_path / "report.json", {})
    status = main(["grade", str(path), "--variant", "no-such-variant", "--cache-dir", str(cache)])
    captured = capsys.readouterr()
    assert status == 2
    assert captured.out == ""
    assert captured.err.startswith("clinaudit grade: error: grading ")
    assert "no-such-variant" in captured.err


def test_the_command_clinaudit_build_prints_grades_the_workspace(
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CLINAUDIT_CACHE_DIR", str(cache))
    out = tmp_path / "run one"  # a space: the printed command quotes its paths
    assert main(["build", "--variant", "wdbc-hard", "--out", str(out), "-q"]) == 0
    printed = capsys.readouterr().out.splitlines()[-1]
    assert printed.startswith("  grade with: clinaudit grade ")
    command = shlex.split(printed.partition("grade with: ")[2])
    assert command[:2] == ["clinaudit", "grade"]
    write_json(out / "workspace" / "report.json", reference_report(cache, "wdbc-hard"))
    assert main(command[1:]) == 0
    assert "clinaudit: wdbc-hard score 1.000" in capsys.readouterr().out


def _readme_first_grading_command() -> str:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("```bash\n", 1)[1].split("```", 1)[0]
    first = next(line for line in block.splitlines() if line and not line.startswith("#"))
    return first.rsplit("&& ", 1)[1].strip()


def test_the_readmes_first_command_is_cis_main_job_and_grades_the_example(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    command = _readme_first_grading_command()
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    main_job = ci[ci.index('echo "== the main job on the bundled example"') + 1]
    assert main_job == command
    words = shlex.split(command)
    assert words[:2] == ["clinaudit", "grade"]
    monkeypatch.chdir(REPO)
    assert main([*words[1:], "--cache-dir", str(cache)]) == 0
    assert "clinaudit: wdbc-hard score 1.000 (profile strict) category none" in (
        capsys.readouterr().out
    )
