"""One row's grading session: its arguments, and the row's result read from what it left behind."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_clinaudit.batch.grade_many.options import BatchOptions
from pytest_clinaudit.batch.grade_many.outdir import row_outputs
from pytest_clinaudit.batch.grade_many.results import RowResult
from pytest_clinaudit.batch.manifest import Row
from pytest_clinaudit.grading import runner
from pytest_clinaudit.grading.runner import Finished
from pytest_clinaudit.grading.values import json_number


def session_args(row: Row, options: BatchOptions, cache_dir: Path) -> tuple[str, ...]:
    """pytest's arguments for grading ``row``: :func:`runner.session_args` for its files."""
    junit_xml, score_json = row_outputs(options.out, row)
    return tuple(
        runner.session_args(
            row.submission,
            row.variant,
            score_json=score_json,
            junit_xml=junit_xml,
            profile=options.profile,
            cache_dir=cache_dir,
            variants_dirs=options.variants_dirs,
            mimic_dir=options.mimic_dir,
            meta=row.meta,
            manifest=row.grader_manifest,
        )
    )


def graded_result(
    row: Row,
    out: Path,
    document: dict[str, Any],
    seconds: float,
    exit_status: int | None,
    *,
    resumed: bool = False,
) -> RowResult:
    """A graded row, from the score JSON ``document`` its session wrote."""
    score = json_number(document.get("score"))
    assert score is not None, "the caller checked that the session wrote a score"
    return RowResult(
        row,
        *row_outputs(out, row),
        seconds,
        score=score,
        raw_score=json_number(document.get("raw_score")),
        category=str(document.get("category")),
        exit_status=exit_status,
        resumed=resumed,
    )


def read_result(row: Row, out: Path, finished: Finished) -> RowResult:
    """Read what ``row``'s session left in ``out``: a score, or the reason there is none."""
    junit, score_json = row_outputs(out, row)
    output = finished.output.strip()
    document: dict[str, Any] | None = None
    try:
        loaded = json.loads(score_json.read_text(encoding="utf-8"))
        document = loaded if isinstance(loaded, dict) else None
    except (OSError, ValueError):
        document = None
    if finished.problem:
        error = finished.problem
    elif document is None:
        error = f"the session wrote no score (exit status {finished.exit_code})"
    elif document.get("error"):
        error = str(document["error"])  # a usage error: unknown variant, missing data, ...
    elif finished.exit_code not in (0, 1) or json_number(document.get("score")) is None:
        # 0 and 1 are "graded" (1: some check failed); anything else is an
        # interrupted or crashed session whose score cannot be trusted.
        error = f"the session ended with exit status {finished.exit_code}"
    elif not junit.exists():
        error = "the session wrote no JUnit XML"
    else:
        return graded_result(row, out, document, finished.seconds, finished.exit_code)
    # A partial JUnit XML must not reach `clinaudit report` as if it were a grade.
    junit.unlink(missing_ok=True)
    return RowResult(
        row,
        junit,
        score_json,
        finished.seconds,
        exit_status=finished.exit_code,
        error=error,
        output=output,
    )
