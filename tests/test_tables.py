"""clinaudit report: every number of the four tables, checked against the submissions written.

The expected values come from :mod:`batch_helpers`: what each synthetic
submission contains, its metadata, and its grade derived from the reference by
the documented rules; never from :mod:`pytest_clinaudit.batch.tables`.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import statistics
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import (
    COMPONENTS,
    GradedBatch,
    Planned,
)
from grading_helpers import reference_report

from pytest_clinaudit.batch.tables import ReportError, read_report, write_report
from pytest_clinaudit.cli import main

CATEGORIES = (
    "none",
    "no-submission",
    "empty",
    "unparseable",
    "schema",
    "tolerance",
    "aggregation",
    "verdict",
)


@pytest.fixture(scope="module")
def report(graded_batch: GradedBatch, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report")
    warnings: list[str] = []
    write_report(read_report(graded_batch.out, warnings.append), out, warn=warnings.append)
    assert warnings == []
    return out


def _graded(batch: GradedBatch) -> list[Planned]:
    return [row for row in batch.rows if row.expected is not None]


def _agent(row: Planned) -> str:
    return row.agent or "unknown"


def _by(rows: list[Planned], key: Callable[[Planned], Any]) -> dict[Any, list[Planned]]:
    groups: dict[Any, list[Planned]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return dict(sorted(groups.items()))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pct(count: int, total: int) -> str:
    return f"{count}/{total} ({100 * count / total:.1f}%)"


def _tables_json(report: Path) -> dict[str, list[dict[str, Any]]]:
    tables: dict[str, list[dict[str, Any]]] = json.loads(
        (report / "report.json").read_text(encoding="utf-8")
    )["tables"]
    return tables


def _markdown_rows(report: Path, title_start: str) -> list[list[str]]:
    """The body cells of the Markdown table whose heading starts with ``title_start``."""
    text = (report / "report.md").read_text(encoding="utf-8")
    section = text.split(f"### {title_start}", 1)[1].split("###", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def _same(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    assert list(actual) == list(expected)
    for key, value in expected.items():
        if isinstance(value, float):
            assert actual[key] == pytest.approx(value, abs=1e-9), key
        else:
            assert actual[key] == value, key


# ---------------------------------------------------------- table 1: per agent


def _expected_agents(batch: GradedBatch) -> list[dict[str, Any]]:
    rows = []
    for agent, group in _by(_graded(batch), _agent).items():
        scores = [r.expected.score for r in group if r.expected]
        turns = [float(r.turns) for r in group if r.turns is not None]
        tokens = [float(r.tokens) for r in group if r.tokens is not None]
        completed = sum(1 for s in scores if s == 1.0)
        rows.append(
            {
                "agent": agent,
                "runs": len(group),
                "completed": completed,
                "completion_rate": completed / len(group),
                "mean_score": sum(scores) / len(scores),
                "turns_runs": len(turns),
                "mean_turns": _mean(turns),
                "tokens_runs": len(tokens),
                "mean_tokens": _mean(tokens),
            }
        )
    return rows


def test_table_1_gives_runs_completions_mean_score_turns_and_tokens_per_agent(
    graded_batch: GradedBatch, report: Path
) -> None:
    expected = _expected_agents(graded_batch)
    actual = _tables_json(report)["table1_agents"]
    assert [r["agent"] for r in actual] == ["agent-a", "agent-b", "unknown"]
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected, strict=True):
        _same(a, e)
    # agent-a: perfect twice of six, scores 1 + 0.6 + 0 + 1 + 0.9 + 0 over 6
    assert actual[0]["mean_score"] == pytest.approx(3.5 / 6)

    def some(value: float | None, n: int, runs: int, digits: int) -> str:
        if value is None:
            return "-"
        text = f"{value:.{digits}f}"
        return text if n == runs else f"{text} ({n} of {runs})"

    assert _markdown_rows(report, "Table 1") == [
        [
            e["agent"],
            str(e["runs"]),
            _pct(e["completed"], e["runs"]),
            f"{e['mean_score']:.3f}",
            some(e["mean_turns"], e["turns_runs"], e["runs"], 1),
            some(e["mean_tokens"], e["tokens_runs"], e["runs"], 0),
        ]
        for e in expected
    ]


# ------------------------------------------------- table 2: per agent x variant


def _expected_agent_variant(batch: GradedBatch) -> list[dict[str, Any]]:
    rows = []
    for (agent, variant), group in _by(_graded(batch), lambda r: (_agent(r), r.variant)).items():
        reference = reference_report(batch.cache_dir, variant)["sps"]
        sps = [
            r.expected.submitted_sps
            for r in group
            if r.expected and r.expected.submitted_sps is not None
        ]
        errors = [s - reference for s in sps]
        row: dict[str, Any] = {
            "agent": agent,
            "variant": variant,
            "runs": len(group),
            "reference_sps": reference,
            "sps_runs": len(sps),
            "sps_mean": _mean(sps),
            "sps_std": statistics.pstdev(sps) if sps else None,
            "sps_error_mean": _mean(errors),
            "sps_abs_error_mean": _mean([abs(e) for e in errors]),
        }
        for index, component in enumerate(COMPONENTS):
            passed = sum(1 for r in group if r.expected and r.expected.components_ok[index])
            row[f"{component}_passed"] = passed
            row[f"{component}_rate"] = passed / len(group)
        row["mean_score"] = _mean([r.expected.score for r in group if r.expected])
        rows.append(row)
    return rows


def test_table_2_gives_the_submitted_sps_its_error_and_component_passes_per_agent_and_variant(
    graded_batch: GradedBatch, report: Path
) -> None:
    expected = _expected_agent_variant(graded_batch)
    actual = _tables_json(report)["table2_agent_variant"]
    assert [(r["agent"], r["variant"]) for r in actual] == [
        ("agent-a", "wdbc-baseline"),
        ("agent-a", "wdbc-hard"),
        ("agent-b", "wdbc-baseline"),
        ("agent-b", "wdbc-hard"),
        ("unknown", "wdbc-baseline"),
    ]
    for a, e in zip(actual, expected, strict=True):
        _same(a, e)
    # agent-b on wdbc-hard submitted a numeric SPS twice (the string SPS does not count):
    # the reference and the paper's slip 22 points below it.
    hard_b = actual[3]
    assert hard_b["sps_runs"] == 2
    assert hard_b["sps_error_mean"] == pytest.approx(-11.0, abs=0.006)
    assert hard_b["sps_std"] == pytest.approx(11.0, abs=0.006)

    def fixed(value: float | None, digits: int, sign: str = "") -> str:
        return "-" if value is None else f"{value:{sign}.{digits}f}"

    assert _markdown_rows(report, "Table 2") == [
        [
            e["agent"],
            e["variant"],
            str(e["runs"]),
            f"{e['reference_sps']:.2f}",
            str(e["sps_runs"]),
            "-" if e["sps_mean"] is None else f"{e['sps_mean']:.2f} ± {e['sps_std']:.2f}",
            fixed(e["sps_error_mean"], 2, "+"),
            fixed(e["sps_abs_error_mean"], 2),
            *(_pct(e[f"{c}_passed"], e["runs"]) for c in COMPONENTS),
            f"{e['mean_score']:.3f}",
        ]
        for e in expected
    ]


# ---------------------------------------------------- table 3: component passes


def test_table_3_gives_each_components_pass_rate_per_agent(
    graded_batch: GradedBatch, report: Path
) -> None:
    expected = []
    for agent, group in _by(_graded(graded_batch), _agent).items():
        row: dict[str, Any] = {"agent": agent, "runs": len(group)}
        for index, component in enumerate(COMPONENTS):
            passed = sum(1 for r in group if r.expected and r.expected.components_ok[index])
            row[f"{component}_passed"] = passed
            row[f"{component}_rate"] = passed / len(group)
        everything = sum(1 for r in group if r.expected and all(r.expected.components_ok))
        row["all_passed"] = everything
        row["all_rate"] = everything / len(group)
        expected.append(row)
    actual = _tables_json(report)["table3_components"]
    for a, e in zip(actual, expected, strict=True):
        _same(a, e)
    assert len(actual) == len(expected)
    # agent-a: calibration failed on the far component, the missing and the empty file
    assert actual[0]["calibration_ece_passed"] == 3
    assert _markdown_rows(report, "Table 3") == [
        [
            e["agent"],
            str(e["runs"]),
            *(_pct(e[f"{c}_passed"], e["runs"]) for c in COMPONENTS),
            _pct(e["all_passed"], e["runs"]),
        ]
        for e in expected
    ]


# ------------------------------------------------------ table 4: failure categories


def test_table_4_counts_runs_by_failure_category_per_agent(
    graded_batch: GradedBatch, report: Path
) -> None:
    expected = []
    for agent, group in _by(_graded(graded_batch), _agent).items():
        row: dict[str, Any] = {"agent": agent, "runs": len(group)}
        for name in CATEGORIES:
            row[name] = sum(1 for r in group if r.expected and r.expected.category == name)
        expected.append(row)
    actual = _tables_json(report)["table4_failures"]
    assert actual == expected
    assert _markdown_rows(report, "Table 4") == [
        [e["agent"], str(e["runs"]), *(str(e[name]) for name in CATEGORIES)] for e in expected
    ]
    totals = {name: sum(e[name] for e in expected) for name in CATEGORIES}
    assert all(totals.values()), totals  # every category occurs


# ---------------------------------------------------------------- files


def test_each_table_is_also_a_csv_file_with_the_json_values(report: Path) -> None:
    for name, rows in _tables_json(report).items():
        with (report / f"{name}.csv").open(encoding="utf-8", newline="") as handle:
            read = list(csv.DictReader(handle))
        assert len(read) == len(rows)
        for cells, row in zip(read, rows, strict=True):
            assert list(cells) == list(row)
            for key, value in row.items():
                cell = cells[key]
                if value is None:
                    assert cell == ""
                elif isinstance(value, (bool, str)):
                    assert cell == str(value)
                else:
                    assert float(cell) == value  # full precision, not rounded


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert (data[:8], data[12:16]) == (b"\x89PNG\r\n\x1a\n", b"IHDR")
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_the_report_writes_markdown_json_csv_and_two_png_plots(report: Path) -> None:
    assert sorted(p.name for p in report.iterdir()) == [
        "completion_rate.png",
        "report.json",
        "report.md",
        "sps_error.png",
        "table1_agents.csv",
        "table2_agent_variant.csv",
        "table3_components.csv",
        "table4_failures.csv",
    ]
    for plot in ("completion_rate.png", "sps_error.png"):
        width, height = _png_size(report / plot)
        assert min(width - 400, height - 300) >= 0, (width, height)
    markdown = (report / "report.md").read_text(encoding="utf-8")
    assert "![completion_rate](completion_rate.png)" in markdown
    assert re.search(r"^13 graded run\(s\) from 13 JUnit XML file\(s\)", markdown, re.M)


def test_report_json_lists_every_run_it_read(graded_batch: GradedBatch, report: Path) -> None:
    document = json.loads((report / "report.json").read_text(encoding="utf-8"))
    assert (document["runs"], document["files"], document["profiles"]) == (13, 13, {"strict": 13})
    records = sorted(document["run_records"], key=lambda r: r["file"])
    for record, row in zip(records, _graded(graded_batch), strict=True):
        assert row.expected is not None
        assert (record["agent"], record["variant"], record["run"]) == (
            _agent(row),
            row.variant,
            str(row.run),
        )
        assert record["score"] == pytest.approx(row.expected.score, abs=1e-9)
        assert record["submitted_sps"] == row.expected.submitted_sps


# ------------------------------------------------------------ odd directories


def test_an_empty_directory_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"clinaudit report: error: {tmp_path} holds no JUnit XML files (*.xml);")
    assert "clinaudit grade-many MANIFEST --out" in err
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


def test_xml_files_that_are_not_grading_runs_are_skipped_with_a_warning(
    graded_batch: GradedBatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    first = sorted(graded_batch.out.glob("*.junit.xml"))[0]
    shutil.copy(first, runs / "graded.xml")
    (runs / "plain.xml").write_text(
        '<testsuites><testsuite name="pytest" tests="1"><testcase name="t"/></testsuite>'
        "</testsuites>",
        encoding="utf-8",
    )
    (runs / "broken.xml").write_text("<testsuites><testsuite", encoding="utf-8")
    (runs / "other.xml").write_text("<coverage/>", encoding="utf-8")
    assert main(["report", str(runs), "--out", str(tmp_path / "r"), "--no-plots"]) == 0
    captured = capsys.readouterr()
    warnings = sorted(line for line in captured.err.splitlines() if "warning" in line)
    assert len(warnings) == 3
    assert warnings[0].startswith(
        f"clinaudit report: warning: skipped {runs / 'broken.xml'}: not a"
    )
    assert f"skipped {runs / 'other.xml'}: not a JUnit XML file" in warnings[1]
    assert warnings[2].endswith(
        f"skipped {runs / 'plain.xml'}: not a clinaudit grading run (no clinaudit.score property)"
    )
    assert json.loads((tmp_path / "r" / "report.json").read_text(encoding="utf-8"))["runs"] == 1
    assert not list((tmp_path / "r").glob("*.png"))
    assert "| agent-a | 1 | 1/1 (100.0%) | 1.000 |" in captured.out


def test_a_directory_of_xml_without_any_grading_run_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "plain.xml").write_text("<testsuites/>", encoding="utf-8")
    with pytest.raises(ReportError, match="none of the 1 XML file"):
        read_report(tmp_path)


def test_runs_graded_with_different_profiles_are_reported_with_a_warning(
    graded_batch: GradedBatch, tmp_path: Path
) -> None:
    first, second = sorted(graded_batch.out.glob("*.junit.xml"))[:2]
    shutil.copy(first, tmp_path / "a.xml")
    text = second.read_text(encoding="utf-8")
    marker = '<property name="clinaudit.profile" value="strict" />'
    assert marker in text
    (tmp_path / "b.xml").write_text(
        text.replace(marker, marker.replace("strict", "metr")), encoding="utf-8"
    )
    warnings: list[str] = []
    report = read_report(tmp_path, warnings.append)
    write_report(report, tmp_path / "r", plots=False, warn=warnings.append)
    assert warnings == [
        "runs were graded with different profiles (metr: 1, strict: 1); "
        "their scores are not comparable"
    ]
