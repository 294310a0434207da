"""The output folder of a batch: its file names, refusing to mix two batches, the final records.

For each row, ``<name>.junit.xml`` and ``<name>.score.json`` (written by its
session); for the batch, ``runs.jsonl`` (every row), ``errors.jsonl`` (rows not
graded) and ``summary.json`` (the counts). ``clinaudit report`` reads every
JUnit XML of the folder, so two batches must never share one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_clinaudit.batch.grade_many.results import BatchResult
from pytest_clinaudit.batch.manifest import Row
from pytest_clinaudit.files import write_atomic, write_json_atomic

JUNIT_SUFFIX = ".junit.xml"
SCORE_SUFFIX = ".score.json"
ERRORS_FILE = "errors.jsonl"
RUNS_FILE = "runs.jsonl"
SUMMARY_FILE = "summary.json"
BATCH_FILES = (ERRORS_FILE, RUNS_FILE, SUMMARY_FILE)


class OutputDirError(ValueError):
    """The output directory holds an earlier batch and ``--force`` was not given."""


def row_outputs(out: Path, row: Row) -> tuple[Path, Path]:
    """``row``'s JUnit XML and score JSON in ``out``."""
    return out / f"{row.name}{JUNIT_SUFFIX}", out / f"{row.name}{SCORE_SUFFIX}"


def _earlier_outputs(out: Path) -> list[Path]:
    if not out.is_dir():
        return []
    return sorted(
        p
        for p in out.iterdir()
        if p.is_file()
        and (
            p.name in BATCH_FILES or p.name.endswith(JUNIT_SUFFIX) or p.name.endswith(SCORE_SUFFIX)
        )
    )


def prepare_out_dir(
    out: Path, *, force: bool, resume: bool = False, rows: Sequence[Row] = ()
) -> None:
    """Create ``out``; refuse to mix with an earlier batch's outputs unless ``force`` or ``resume``.

    With ``force`` only files this command writes are removed (``*.junit.xml``,
    ``*.score.json``, ``runs.jsonl``, ``errors.jsonl``, ``summary.json``). With
    ``resume`` they are kept, provided every one of them belongs to one of ``rows``.

    Raises
    ------
    OutputDirError
        ``out`` holds an earlier batch (with ``resume``: a different one):
        `clinaudit report` would mix the two.
    """
    earlier = _earlier_outputs(out)
    if resume:
        ours = set(BATCH_FILES)
        ours.update(path.name for row in rows for path in row_outputs(out, row))
        strangers = [path for path in earlier if path.name not in ours]
        if strangers:
            raise OutputDirError(
                f"cannot resume: {out} holds {len(strangers)} output file(s) of rows that are "
                f"not in this manifest (e.g. {strangers[0].name}), so it is another batch. "
                "Choose another --out directory, or pass --force instead of --resume to "
                "start over"
            )
        earlier = []
    elif earlier and not force:
        raise OutputDirError(
            f"{out} already holds {len(earlier)} output file(s) of an earlier batch (e.g. "
            f"{earlier[0].name}); `clinaudit report` would mix both batches. Choose another "
            "--out directory, pass --resume to finish that batch, or pass --force to delete "
            "those files first"
        )
    for path in earlier:
        path.unlink()
    out.mkdir(parents=True, exist_ok=True)


def write_records(result: BatchResult, out: Path) -> None:
    """``runs.jsonl`` (every row), ``errors.jsonl`` (rows not graded), ``summary.json``."""

    def lines(documents: Iterable[dict[str, Any]]) -> str:
        return "".join(json.dumps(d, allow_nan=False) + "\n" for d in documents)

    # runs.jsonl replaces the journal appended to while grading: whole or not at all.
    write_atomic(out / RUNS_FILE, lines(r.record() for r in result.rows))
    write_atomic(
        out / ERRORS_FILE, lines({**r.record(), "output": r.output} for r in result.failed)
    )
    write_json_atomic(out / SUMMARY_FILE, result.summary())
