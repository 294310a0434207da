"""clinaudit grade-many: manifests, parallel grading, records, and sameness with serial grading."""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from batch_helpers import (
    UNGRADABLE_VARIANT,
    GradedBatch,
    Planned,
)
from grading_helpers import reference, reference_report, write_json

from pytest_clinaudit.batch.executor import ForkExecutor, Session, fork_available
from pytest_clinaudit.batch.grade_many.journal import earlier_results, read_journal
from pytest_clinaudit.batch.grade_many.options import BatchOptions
from pytest_clinaudit.batch.grade_many.progress import ProgressBar
from pytest_clinaudit.batch.grade_many.results import INTERRUPTED, BatchResult, RowResult
from pytest_clinaudit.batch.grade_many.run import grade_rows
from pytest_clinaudit.batch.grade_many.sessions import session_args
from pytest_clinaudit.batch.manifest import BatchManifestError, Row, read_batch_manifest
from pytest_clinaudit.cli import main
from pytest_clinaudit.grading.runner import grade

# ------------------------------------------------------------------ manifests


def test_a_jsonl_manifest_resolves_paths_relative_to_the_manifest_and_keeps_metadata_as_text(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "sub" / "m.jsonl"
    manifest.parent.mkdir()
    manifest.write_text(
        '{"submission": "runs/a.json", "variant": "hardened", "agent": "gpt", "run": 2, '
        '"tokens": 15230, "turns": "31", "seed": 0.5, "retry": true, "note": null}\n'
        "\n"
        '{"submission": "/abs/b.json", "variant": "wdbc-hard"}\n',
        encoding="utf-8",
    )
    first, second = read_batch_manifest(manifest)
    assert (first.line, second.line) == (1, 3)  # the blank line still counts
    assert first.submission == manifest.parent.absolute() / "runs" / "a.json"
    assert second.submission == Path("/abs/b.json")
    assert first.variant == "hardened"
    assert dict(first.meta) == {
        "agent": "gpt",
        "run": "2",
        "tokens": "15230",
        "turns": "31",
        "seed": "0.5",
        "retry": "true",
    }
    assert dict(second.meta) == {}


def test_a_csv_manifest_gives_the_same_rows_as_the_same_jsonl_manifest(tmp_path: Path) -> None:
    (tmp_path / "m.csv").write_text(
        "\ufeffsubmission,variant,agent,run,tokens,turns\n"
        "runs/a.json,wdbc-hard,gpt,1,100,\n"
        'runs/b.json,wdbc-baseline,"team, x",2,,7\n',
        encoding="utf-8",
    )
    (tmp_path / "m.jsonl").write_text(
        '{"submission": "runs/a.json", "variant": "wdbc-hard", "agent": "gpt", "run": 1, '
        '"tokens": 100}\n'
        '{"submission": "runs/b.json", "variant": "wdbc-baseline", "agent": "team, x", '
        '"run": 2, "turns": 7}\n',
        encoding="utf-8",
    )
    from_csv = read_batch_manifest(tmp_path / "m.csv")
    from_jsonl = read_batch_manifest(tmp_path / "m.jsonl")
    assert [(r.submission, r.variant, dict(r.meta)) for r in from_csv] == [
        (r.submission, r.variant, dict(r.meta)) for r in from_jsonl
    ]
    assert [r.line for r in from_csv] == [2, 3]  # the header is line 1


def test_every_problem_of_a_manifest_is_reported_with_its_line_and_field(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        '{"submission": "a.json", "variant": "wdbc-hard"}\n'
        '{"submission": "a.json"}\n'
        '{"submission": "a.json", "variant": "wdbc-hard", "tokens": "many"}\n'
        '{"submission": "a.json", "variant": "wdbc-hard", "agent": {"name": "x"}}\n'
        '{"submission": "a.json", "variant": "wdbc-hard", "agent name": "x"}\n'
        '{"submission": "a.json", "variant": "wdbc-hard",\n'
        '["a.json", "wdbc-hard"]\n'
        '{"submission": 3, "variant": "wdbc-hard", "turns": -2}\n',
        encoding="utf-8",
    )
    with pytest.raises(BatchManifestError) as caught:
        read_batch_manifest(manifest)
    lines = str(caught.value).splitlines()
    assert lines[0] == f"the manifest {manifest} has 8 problem(s):"
    problems = [line.strip() for line in lines[1:]]
    assert problems[0].startswith(f"{manifest}:2: field 'variant': missing")
    assert problems[1] == (
        f"{manifest}:3: field 'tokens': expected a whole number >= 0 (e.g. 15230), "
        "got the string 'many'"
    )
    assert problems[2].startswith(f"{manifest}:4: field 'agent': expected a string, number or")
    assert problems[2].endswith("got an object")
    assert problems[3].startswith(f"{manifest}:5: field 'agent name': not usable as a metadata key")
    assert problems[4].startswith(f"{manifest}:6: not valid JSON")
    assert problems[5].startswith(f"{manifest}:7: expected a JSON object")
    assert problems[5].endswith("got an array")
    assert problems[6] == f"{manifest}:8: field 'submission': expected a string, got the number 3"
    assert problems[7] == (
        f"{manifest}:8: field 'turns': expected a whole number >= 0 (e.g. 15230), got the number -2"
    )


def test_a_csv_manifest_without_the_required_columns_names_them(tmp_path: Path) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text("path,agent\na.json,x\n", encoding="utf-8")
    with pytest.raises(
        BatchManifestError, match=r"m.csv:1: header: missing column\(s\) submission, "
    ):
        read_batch_manifest(manifest)


def test_a_csv_row_with_too_many_cells_says_to_quote_commas(tmp_path: Path) -> None:
    manifest = tmp_path / "m.csv"
    manifest.write_text("submission,variant,agent\na.json,wdbc-hard,x,y\n", encoding="utf-8")
    with pytest.raises(BatchManifestError, match=r"m.csv:2: expected 3 cells .*got 4; quote cells"):
        read_batch_manifest(manifest)


def test_a_manifest_without_rows_or_without_a_file_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "m.jsonl").write_text("\n\n", encoding="utf-8")
    with pytest.raises(BatchManifestError, match="has no rows; add one per submission"):
        read_batch_manifest(tmp_path / "m.jsonl")
    with pytest.raises(BatchManifestError, match="does not exist"):
        read_batch_manifest(tmp_path / "nope.jsonl")


def test_output_names_are_unique_file_name_safe_and_sort_in_manifest_order(tmp_path: Path) -> None:
    manifest = tmp_path / "m.jsonl"
    same = '{"submission": "a.json", "variant": "wdbc-hard", "agent": "org/model v2", "run": 1}\n'
    manifest.write_text(same * 11, encoding="utf-8")
    names = [row.name for row in read_batch_manifest(manifest)]
    assert names[0] == "0001-org_model_v2-wdbc-hard-1"
    assert len(set(names)) == 11
    assert names == sorted(names)


def test_grade_many_rejects_an_invalid_manifest_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"variant": "wdbc-hard"}\n', encoding="utf-8")
    assert main(["grade-many", str(manifest), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clinaudit grade-many: error: the manifest")
    assert f"{manifest}:1: field 'submission': missing" in err
    assert not (tmp_path / "out").exists()


def test_grade_many_refuses_to_mix_with_an_earlier_batch_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "m.jsonl"
    manifest.write_text('{"submission": "a.json", "variant": "nope"}\n', encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    (out / "0007-old.junit.xml").write_text("<testsuites/>", encoding="utf-8")
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["grade-many", str(manifest), "--out", str(out), "-q"]) == 2
    assert "already holds 1 output file(s) of an earlier batch" in capsys.readouterr().err
    assert main(["grade-many", str(manifest), "--out", str(out), "-q", "--force"]) == 1
    assert not (out / "0007-old.junit.xml").exists()
    assert (out / "notes.txt").read_text(encoding="utf-8") == "mine"  # not ours: kept


# ------------------------------------------------------------ a graded batch


def _planned_graded(batch: GradedBatch) -> list[Planned]:
    return [row for row in batch.rows if row.expected is not None]


def test_grade_many_writes_a_junit_xml_and_a_score_json_per_row(graded_batch: GradedBatch) -> None:
    files = sorted(p.name for p in graded_batch.out.iterdir())
    expected = {"errors.jsonl", "runs.jsonl", "summary.json"}
    for row in graded_batch.rows:
        expected.add(f"{graded_batch.name(row)}.score.json")  # also for the usage error
        if row.expected is not None:
            expected.add(f"{graded_batch.name(row)}.junit.xml")
    assert files == sorted(expected)


def test_every_row_gets_the_score_and_category_known_from_its_submission(
    graded_batch: GradedBatch,
) -> None:
    for row in _planned_graded(graded_batch):
        assert row.expected is not None
        document = graded_batch.score_document(row)
        assert (row.kind, document["score"], document["category"]) == (
            row.kind,
            pytest.approx(row.expected.score, abs=1e-9),
            row.expected.category,
        )
        assert document["no_submission"] is (row.kind == "missing")
        assert document["submission"]["path"] == str(row.submission.absolute())


def test_manifest_metadata_reaches_the_score_json_and_the_junit_xml(
    graded_batch: GradedBatch,
) -> None:
    for row in _planned_graded(graded_batch):
        assert graded_batch.score_document(row)["meta"] == row.meta
        suite = ET.parse(graded_batch.out / f"{graded_batch.name(row)}.junit.xml").find(
            ".//testsuite"
        )
        assert suite is not None
        properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
        recorded = {
            k.removeprefix("clinaudit.meta."): v
            for k, v in properties.items()
            if k and k.startswith("clinaudit.meta.")
        }
        assert recorded == row.meta
        assert properties["clinaudit.variant"] == row.variant


def test_a_row_that_cannot_be_graded_is_recorded_and_the_batch_goes_on(
    graded_batch: GradedBatch,
) -> None:
    assert graded_batch.exit_status == 1
    errors = [
        json.loads(line)
        for line in (graded_batch.out / "errors.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    (bad,) = [row for row in graded_batch.rows if row.expected is None]
    assert len(errors) == 1
    error = errors[0]
    assert (error["line"], error["variant"], error["graded"]) == (
        bad.line,
        UNGRADABLE_VARIANT,
        False,
    )
    assert error["error"].startswith(f"--variant: unknown variant '{UNGRADABLE_VARIANT}'")
    assert error["exit_status"] == 4  # pytest's usage error
    assert "unknown variant" in error["output"]
    assert f"line {bad.line} (agent-b, {UNGRADABLE_VARIANT}, run 4): --variant: unknown" in (
        graded_batch.stdout
    )


def test_runs_jsonl_indexes_every_row_in_manifest_order(graded_batch: GradedBatch) -> None:
    records = [
        json.loads(line)
        for line in (graded_batch.out / "runs.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    assert [r["line"] for r in records] == [row.line for row in graded_batch.rows]
    for record, row in zip(records, graded_batch.rows, strict=True):
        assert record["graded"] is (row.expected is not None)
        assert record["meta"] == row.meta
        if row.expected is not None:
            assert record["score"] == pytest.approx(row.expected.score, abs=1e-9)
            assert record["junit_xml"] == f"{graded_batch.name(row)}.junit.xml"


def test_the_summary_counts_rows_by_category_and_gives_the_mean_score(
    graded_batch: GradedBatch,
) -> None:
    graded = _planned_graded(graded_batch)
    expected_scores = [row.expected.score for row in graded if row.expected is not None]
    mean = sum(expected_scores) / len(expected_scores)
    summary = json.loads((graded_batch.out / "summary.json").read_text(encoding="utf-8"))
    assert (summary["rows"], summary["graded"], summary["not_graded"]) == (
        len(graded_batch.rows),
        len(graded),
        1,
    )
    assert summary["mean_score"] == pytest.approx(mean, abs=1e-9)
    counts = {
        name: sum(1 for row in graded if row.expected and row.expected.category == name)
        for name in summary["categories"]
    }
    assert summary["categories"] == counts
    assert set(counts) == {
        "none",
        "no-submission",
        "empty",
        "unparseable",
        "schema",
        "tolerance",
        "aggregation",
        "verdict",
    }
    assert all(counts.values())  # the plan covers every category
    out = graded_batch.stdout
    assert f"{len(graded_batch.rows)} submission(s) from " in out
    assert f"{len(graded)} graded, 1 not graded" in out
    assert f"mean score {mean:.3f} over {len(graded)} graded submission(s)" in out
    for name, count in counts.items():
        assert f"\n{name:<15} {count:>11}\n" in out


def test_progress_is_one_plain_line_per_row_when_stderr_is_not_a_terminal(
    graded_batch: GradedBatch,
) -> None:
    total = len(graded_batch.rows)
    lines = [line for line in graded_batch.stderr.splitlines() if line.startswith("[")]
    assert len(lines) == total
    assert sorted(int(line[1:].split("/")[0]) for line in lines) == list(range(1, total + 1))
    assert "\r" not in graded_batch.stderr
    perfect = next(r for r in graded_batch.rows if r.kind == "perfect")
    assert f"line {perfect.line} (agent-a, wdbc-baseline, run 1): score 1.000 (none)" in (
        graded_batch.stderr
    )
    assert "reference wdbc-hard: SPS" in graded_batch.stderr  # warmed in the parent


def test_progress_on_a_terminal_is_one_redrawn_bar() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    bar = ProgressBar(4, stream)
    row = Row(1, Path("a.json"), "wdbc-hard", {}, "0001-wdbc-hard")
    for _ in range(2):
        bar.update(RowResult(row, Path("x"), Path("y"), 0.5, score=1.0, category="none"))
    bar.update(RowResult(row, Path("x"), Path("y"), 0.5, error="boom"))
    bar.finish()
    text = stream.getvalue()
    assert (text.count("\r"), text.count("\n"), text[-1]) == (3, 1, "\n")
    assert "grading [#####################.......] 3/4" in text
    assert "not graded 1" in text


# --------------------------------------------------- the same as serial grading


def _suite_and_cases(path: Path) -> tuple[list[tuple[str, str]], dict[str, list[tuple[str, str]]]]:
    """JUnit properties: the suite's in order, and each test case's by its name."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None

    def props(element: ET.Element) -> list[tuple[str, str]]:
        return [
            (p.get("name", ""), p.get("value", "")) for p in element.findall("properties/property")
        ]

    cases = {case.get("name", ""): props(case) for case in suite.findall("testcase")}
    return props(suite), cases


def _serial(
    row: Planned, cache: Path, directory: Path, extra: tuple[str, ...] = ()
) -> tuple[dict[str, Any], Path]:
    junit = directory / f"{row.line}.xml"
    document = grade(
        row.submission,
        row.variant,
        score_json=directory / f"{row.line}.json",
        junit_xml=junit,
        cache_dir=cache,
        meta=row.meta,
        extra=extra,
    )
    return document, junit


@pytest.mark.slow  # a serial session per row: the acceptance run's job
def test_grade_many_j2_gives_the_same_documents_as_serial_grading(
    graded_batch: GradedBatch, tmp_path: Path
) -> None:
    rows = _planned_graded(graded_batch)
    # Each serial session is its own process; two at a time only saves the test's time.
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        serial = list(pool.map(lambda row: _serial(row, graded_batch.cache_dir, tmp_path), rows))
    for row, (document, junit) in zip(rows, serial, strict=True):
        assert document == graded_batch.score_document(row), row.kind
        batch_junit = graded_batch.out / f"{graded_batch.name(row)}.junit.xml"
        assert _suite_and_cases(junit) == _suite_and_cases(batch_junit), row.kind


@pytest.mark.slow  # a serial session per row: the acceptance run's job
def test_pytest_n_2_gives_the_same_documents_as_serial_grading(
    graded_batch: GradedBatch, tmp_path: Path
) -> None:
    # One row per kind of outcome: full marks, a penalty, a tolerance failure, no file.
    kinds = ("perfect", "unknown-key", "paper-case", "missing")
    rows = [next(r for r in _planned_graded(graded_batch) if r.kind == k) for k in kinds]
    for row in rows:
        parallel, parallel_junit = _serial(row, graded_batch.cache_dir, tmp_path, ("-n", "2"))
        assert parallel["libraries"]["pytest-xdist"] != "not installed"
        assert parallel == graded_batch.score_document(row), row.kind
        batch_junit = graded_batch.out / f"{graded_batch.name(row)}.junit.xml"
        assert _suite_and_cases(parallel_junit) == _suite_and_cases(batch_junit), row.kind


@pytest.mark.slow  # a second executor's whole batch: the acceptance run's job
def test_the_subprocess_executor_writes_what_the_fork_executor_writes(
    graded_batch: GradedBatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kinds = {"perfect", "string-sps", "empty", "verdict"}
    manifest = tmp_path / "m.jsonl"
    lines = (graded_batch.directory / "manifest.jsonl").read_text(encoding="utf-8").splitlines()
    chosen = [row for row in graded_batch.rows if row.kind in kinds and row.expected is not None]
    # Keep the original line numbers (blank lines), so that the file names match.
    text = ["" for _ in lines]
    for row in chosen:
        text[row.line - 1] = lines[row.line - 1].replace(
            '"runs/', f'"{graded_batch.directory}/runs/'
        )
    manifest.write_text("\n".join(text) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    argv = ["grade-many", str(manifest), "--out", str(out), "-j", "2", "-q"]
    assert (
        main([*argv, "--cache-dir", str(graded_batch.cache_dir), "--executor", "subprocess"]) == 0
    )
    assert "subprocess executor" in capsys.readouterr().out
    for row in chosen:
        name = graded_batch.name(row)
        assert (out / f"{name}.score.json").read_bytes() == (
            graded_batch.out / f"{name}.score.json"
        ).read_bytes()
        assert _suite_and_cases(out / f"{name}.junit.xml") == _suite_and_cases(
            graded_batch.out / f"{name}.junit.xml"
        )


# ------------------------------------------------------------- the reference cache


def _three_baseline_rows(tmp_path: Path) -> list[Row]:
    report = tmp_path / "r.json"
    report.write_text('{"sps": 1}', encoding="utf-8")
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"submission": "r.json", "variant": "wdbc-baseline", "run": i}) + "\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    return read_batch_manifest(manifest)


def _from_cache_flags(result: BatchResult) -> list[bool]:
    return [
        json.loads(r.score_json.read_text(encoding="utf-8"))["reference"]["from_cache"]
        for r in result.rows
    ]


def test_concurrent_sessions_on_a_cold_cache_compute_the_reference_once(tmp_path: Path) -> None:
    cache = tmp_path / "cold-cache"
    rows = _three_baseline_rows(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    # No warm-up in the parent: three sessions start together on an empty cache, and
    # the cache's file lock must let exactly one of them compute.
    options = BatchOptions(out=out, jobs=3, cache_dir=cache, warm=False)
    result = grade_rows(rows, options)
    assert not result.failed, [r.error for r in result.failed]
    assert sorted(_from_cache_flags(result)) == [False, True, True]
    assert len(list((cache / "references").glob("*.json"))) == 1


def test_grade_many_computes_each_reference_in_the_parent_before_the_sessions(
    tmp_path: Path, warm_cache: Path
) -> None:
    cache = tmp_path / "cold-cache"
    rows = _three_baseline_rows(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    messages: list[str] = []
    result = grade_rows(rows, BatchOptions(out=out, jobs=2, cache_dir=cache), say=messages.append)
    assert _from_cache_flags(result) == [True, True, True]
    fetched = [m for m in messages if m.startswith("reference ")]
    assert len(fetched) == 1
    sps = reference(warm_cache, "wdbc-baseline").sps  # computed again, in another cache
    assert fetched[0].startswith(f"reference wdbc-baseline: SPS {sps:.2f}, computed and cached (")


@pytest.mark.parametrize("executor", ["fork", "subprocess"])
def test_a_session_over_the_time_limit_is_not_graded_and_says_so(
    executor: str, warm_cache: Path, tmp_path: Path
) -> None:
    rows = _three_baseline_rows(tmp_path)[:1]
    out = tmp_path / "out"
    out.mkdir()
    options = BatchOptions(out=out, jobs=1, cache_dir=warm_cache, executor=executor, timeout=0.05)
    (result,) = grade_rows(rows, options).rows
    assert not result.graded
    assert result.error == "timed out after 0.05 s"
    assert not result.junit_xml.exists()


def test_the_plugin_and_the_cli_import_neither_junitparser_nor_matplotlib() -> None:
    code = (
        "import sys, pytest_clinaudit.plugin, pytest_clinaudit.cli, pytest_clinaudit.batch.grade_many; "
        "print(sorted(m for m in ('junitparser', 'matplotlib') if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


@pytest.mark.skipif(not fork_available(), reason="the fork executor needs os.fork")
def test_a_dead_fork_worker_fails_one_session_and_is_replaced(
    warm_cache: Path, tmp_path: Path
) -> None:
    row = _three_baseline_rows(tmp_path)[0]
    out = tmp_path / "out"
    out.mkdir()
    options = BatchOptions(out=out, cache_dir=warm_cache)
    session = Session(session_args(row, options, warm_cache), timeout=60)
    executor = ForkExecutor(1)
    try:
        executor.check_started()
        (worker,) = executor._workers
        worker.process.kill()  # as if the OOM killer took it
        worker.process.wait()
        failed = executor.run(session)
        assert failed.exit_code is None
        assert failed.problem.startswith("the grading worker failed: the worker exited (status -9)")
        after = executor.run(session)  # a new worker took its place
        assert (after.exit_code, after.problem) == (1, "")
    finally:
        executor.close()
    document = json.loads((out / f"{row.name}.score.json").read_text(encoding="utf-8"))
    assert (document["score"], document["category"]) == (0.0, "schema")  # {"sps": 1}


def test_the_profile_flag_reaches_every_session(graded_batch: GradedBatch, tmp_path: Path) -> None:
    paper, missing = (
        next(r for r in graded_batch.rows if r.kind == kind) for kind in ("paper-case", "missing")
    )
    manifest = tmp_path / "m.jsonl"
    manifest.write_text(
        "".join(
            json.dumps({"submission": str(row.submission), "variant": row.variant}) + "\n"
            for row in (paper, missing)
        ),
        encoding="utf-8",
    )
    out = tmp_path / "out"
    argv = ["grade-many", str(manifest), "--out", str(out), "-q", "--profile", "metr"]
    assert main([*argv, "--cache-dir", str(graded_batch.cache_dir)]) == 0
    records = [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]
    # SPEC §5: four right components and no SPS credit score 0.4; no file scores None.
    assert [(r["score"], r["raw_score"], r["category"]) for r in records] == [
        (pytest.approx(0.4), pytest.approx(0.4), "tolerance"),
        (0.0, None, "no-submission"),
    ]


# ------------------------------------------------------ interrupting and resuming


def _hard_manifest(directory: Path, cache: Path, runs: int) -> Path:
    """``runs`` rows of wdbc-hard, each with its own copy of the reference report."""
    report = {k: v for k, v in reference_report(cache, "wdbc-hard").items() if k != "details"}
    lines = []
    for run in range(runs):
        write_json(directory / f"run{run}.json", report)
        lines.append(
            {"submission": f"run{run}.json", "variant": "wdbc-hard", "agent": "a", "run": run}
        )
    manifest = directory / "m.jsonl"
    manifest.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return manifest


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "runs.jsonl").read_text().splitlines()]


def _restore_sigint() -> None:
    # A background process may inherit an ignored SIGINT; Ctrl-C must reach this one.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_batch(argv: list[str], out: Path) -> subprocess.Popen[str]:
    """``clinaudit`` with ``argv`` in its own process group, once it has graded a row."""
    process = subprocess.Popen(
        [sys.executable, "-m", "pytest_clinaudit.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job
        preexec_fn=_restore_sigint,
    )
    deadline = time.monotonic() + 120
    while not (out / "runs.jsonl").is_file() or not (out / "runs.jsonl").read_text():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "no row graded within 120 s"
        time.sleep(0.02)
    return process


def _batch_argv(manifest: Path, out: Path, cache: Path) -> list[str]:
    return ["grade-many", str(manifest), "--out", str(out), "-j", "1", "--cache-dir", str(cache)]


def test_ctrl_c_keeps_every_graded_row_and_resume_grades_only_the_others(
    warm_cache: Path, tmp_path: Path
) -> None:
    manifest = _hard_manifest(tmp_path, warm_cache, runs=12)
    out = tmp_path / "out"
    argv = _batch_argv(manifest, out, warm_cache)
    process = _start_batch(argv, out)
    os.killpg(process.pid, signal.SIGINT)  # Ctrl-C: the batch and its running session
    stdout, stderr = process.communicate(timeout=120)

    assert process.returncode == 130, stderr
    assert "interrupted: starting no more sessions; waiting for the running ones" in stderr
    records = _records(out)
    assert [r["line"] for r in records] == list(range(1, 13))
    graded = [r for r in records if r["graded"]]
    not_started = [r for r in records if r.get("error") == INTERRUPTED]
    assert graded
    assert not_started
    assert len(graded) + len(not_started) >= 11  # at most one session was cut short
    for record in graded:
        assert record["score"] == 1.0
        assert (out / record["junit_xml"]).is_file()
        assert (out / record["score_json"]).is_file()
    for record in not_started:
        assert (record["junit_xml"], record["score_json"]) == (None, None)
    errors = [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]
    assert [e["line"] for e in errors] == [r["line"] for r in records if not r["graded"]]
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["interrupted"], summary["exit_status"]) == (True, 130)
    assert (
        f"INTERRUPTED: {12 - len(graded)} row(s) not graded ({len(not_started)} not started)"
        in stdout
    )

    kept = {r["score_json"]: (out / r["score_json"]).read_bytes() for r in graded}
    assert main([*argv, "-q", "--resume"]) == 0
    records = _records(out)
    assert all(r["graded"] and r["score"] == 1.0 for r in records)
    assert [r["line"] for r in records if r["resumed"]] == [r["line"] for r in graded]
    assert {name: (out / name).read_bytes() for name in kept} == kept  # not graded again
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["graded"], summary["resumed"], summary["exit_status"]) == (12, len(graded), 0)
    assert (out / "errors.jsonl").read_text() == ""


def test_a_killed_batch_keeps_the_rows_it_graded_for_resume(
    warm_cache: Path, tmp_path: Path
) -> None:
    manifest = _hard_manifest(tmp_path, warm_cache, runs=12)
    out = tmp_path / "out"
    argv = _batch_argv(manifest, out, warm_cache)
    process = _start_batch(argv, out)
    os.killpg(process.pid, signal.SIGKILL)  # no clean-up at all, workers and sessions included
    process.communicate(timeout=120)
    journal = read_journal(out)
    graded = sorted(name for name, record in journal.items() if record["graded"])
    assert graded
    assert len(graded) < 12
    assert not (out / "summary.json").exists()

    assert main([*argv, "-q", "--resume"]) == 0
    records = _records(out)
    assert sorted(r["name"] for r in records if r["resumed"]) == graded
    assert [(r["graded"], r["score"]) for r in records] == [(True, 1.0)] * 12


def test_resume_grades_again_every_row_whose_submission_metadata_or_profile_changed(
    warm_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _hard_manifest(tmp_path, warm_cache, runs=4)
    out = tmp_path / "out"
    argv = ["grade-many", str(manifest), "--out", str(out), "-q", "--cache-dir", str(warm_cache)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv, "--resume"]) == 0
    assert all(r["resumed"] for r in _records(out))  # nothing changed: no session at all
    summary = capsys.readouterr().out
    assert "4 graded, 0 not graded; " in summary
    assert "s (no session run)\n4 of them graded by an earlier run (--resume)\n" in summary

    write_json(tmp_path / "run0.json", {"sps": 1})  # a new report under the same name
    (tmp_path / "run1.json").unlink()  # a report gone
    lines = manifest.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "tokens": 99})  # new metadata
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert main([*argv, "--resume"]) == 0
    records = _records(out)
    assert [r["resumed"] for r in records] == [False, False, False, True]
    assert [(r["score"], r["category"]) for r in records] == [
        (0.0, "schema"),
        (0.0, "no-submission"),
        (1.0, "none"),
        (1.0, "none"),
    ]
    assert main([*argv, "--resume"]) == 0  # a missing report that is still missing is kept
    assert [r["resumed"] for r in _records(out)] == [True, True, True, True]

    assert main([*argv, "--resume", "--profile", "metr"]) == 0
    assert [r["resumed"] for r in _records(out)] == [False, False, False, False]


def test_resume_grades_again_rows_graded_against_another_reference(
    warm_cache: Path, tmp_path: Path
) -> None:
    manifest = _hard_manifest(tmp_path, warm_cache, runs=2)
    out = tmp_path / "out"
    assert (
        main(["grade-many", str(manifest), "--out", str(out), "-q", "--cache-dir", str(warm_cache)])
        == 0
    )
    rows = read_batch_manifest(manifest)
    options = BatchOptions(out=out, profile="strict")
    hard = reference(warm_cache, "wdbc-hard")
    key = (hard.artifact_sha256, hard.data_sha256, hard.sps, tuple(sorted(hard.components.items())))
    assert sorted(earlier_results(rows, options, {"wdbc-hard": key})) == [1, 2]
    moved = (*key[:2], key[2] + 0.01, key[3])  # e.g. a variant file with another epsilon
    assert earlier_results(rows, options, {"wdbc-hard": moved}) == {}
    assert earlier_results(rows, options, {}) == {}  # a variant that could not be fetched


def test_resume_refuses_an_output_directory_of_another_batch(
    warm_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _hard_manifest(tmp_path, warm_cache, runs=1)
    out = tmp_path / "out"
    out.mkdir()
    (out / "0009-b-wdbc-hard-9.score.json").write_text("{}", encoding="utf-8")
    assert main(["grade-many", str(manifest), "--out", str(out), "-q", "--resume"]) == 2
    assert (
        f"cannot resume: {out} holds 1 output file(s) of rows that are not in this manifest "
        "(e.g. 0009-b-wdbc-hard-9.score.json), so it is another batch."
    ) in capsys.readouterr().err
    assert (out / "0009-b-wdbc-hard-9.score.json").exists()
    with pytest.raises(SystemExit) as exit_info:
        main(["grade-many", str(manifest), "--out", str(out), "--resume", "--force"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_runs_jsonl_cut_short_by_a_kill_still_gives_its_complete_lines(tmp_path: Path) -> None:
    (tmp_path / "runs.jsonl").write_text(
        '{"name": "0001-a", "graded": false}\n[1]\n{"name": "0002-a", "graded": true}\n'
        '{"name": "0001-a", "graded": true}\n{"name": "0003-a", "gra',
        encoding="utf-8",
    )
    assert read_journal(tmp_path) == {
        "0001-a": {"name": "0001-a", "graded": True},
        "0002-a": {"name": "0002-a", "graded": True},
    }
    assert read_journal(tmp_path / "nowhere") == {}


def test_a_fork_worker_imports_every_installed_pytest_plugin_before_forking() -> None:
    # Each session loads them; imported by each forked child instead, a plugin's
    # distribution is assertion-rewritten from source every session.
    script = (
        "import sys\n"
        "from pytest_clinaudit.batch import executor\n"
        "executor._preload()\n"
        "modules = executor.plugin_modules()\n"
        "print(len(modules), [m for m in modules if m not in sys.modules])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    count, missing = result.stdout.strip().splitlines()[-1].split(" ", 1)
    assert int(count) >= 3  # at least this plugin, Hypothesis and xdist
    assert missing == "[]"
