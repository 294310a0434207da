"""The journal of a batch, and ``--resume``: nothing graded is lost, nothing unchanged graded twice.

``runs.jsonl`` gets one line per row as soon as the row is graded (and is
rewritten in manifest order at the end, :func:`~.outdir.write_records`), so a
batch killed half-way keeps every row it graded. ``--resume`` reads it back
and keeps a row only when nothing that decides its grade changed since
(:func:`earlier_results`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from pytest_clinaudit.batch.grade_many.options import BatchOptions
from pytest_clinaudit.batch.grade_many.outdir import RUNS_FILE, row_outputs
from pytest_clinaudit.batch.grade_many.references import ReferenceKey, reference_key
from pytest_clinaudit.batch.grade_many.results import RowResult
from pytest_clinaudit.batch.grade_many.sessions import graded_result
from pytest_clinaudit.batch.manifest import Row
from pytest_clinaudit.files import sha256_file
from pytest_clinaudit.grading.values import json_number


class Journal:
    """``out/runs.jsonl`` while a batch runs: one line per finished row, flushed at once."""

    def __init__(self, out: Path, *, append: bool) -> None:
        self._file = open(out / RUNS_FILE, "a" if append else "w", encoding="utf-8")  # noqa: SIM115

    def add(self, result: RowResult) -> None:
        self._file.write(json.dumps(result.record(), allow_nan=False) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Journal:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def read_journal(out: Path) -> dict[str, dict[str, Any]]:
    """The records of ``out/runs.jsonl`` by row name, the last one of each name winning.

    Lines that are not JSON objects (a line cut short when a batch was killed) are
    skipped; a missing file is no records.
    """
    try:
        text = (out / RUNS_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    records: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("name"), str):
            records[record["name"]] = record
    return records


def _file_sha256(path: Path) -> str | None:
    """The sha256 a grading session records for ``path``; ``None`` for no regular file."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return sha256_file(path)
    except OSError:
        return None


def earlier_results(
    rows: Sequence[Row],
    options: BatchOptions,
    references: dict[str, ReferenceKey],
) -> dict[int, RowResult]:
    """The rows an earlier run of this batch graded that need no new session, by manifest line.

    A row is kept only when all of this holds: ``runs.jsonl`` says it was graded,
    with the same submission path, variant and metadata as now; its JUnit XML and
    score JSON are there, and the score JSON agrees on the score, the profile and
    the metadata; its reference is the one this run fetched (same artifact, data,
    SPS and components); and the submission file has the same sha256, or was and
    still is missing. Anything else is graded again.
    """
    records = read_journal(options.out)
    kept: dict[int, RowResult] = {}
    for row in rows:
        record = records.get(row.name)
        if record is None or record.get("graded") is not True:
            continue
        if (record.get("submission"), record.get("variant"), record.get("meta")) != (
            str(row.submission),
            row.variant,
            dict(row.meta),
        ):
            continue
        junit, score_json = row_outputs(options.out, row)
        try:
            document = json.loads(score_json.read_text(encoding="utf-8"))
            reference, submission = document["reference"], document["submission"]
            recorded_sha = submission["sha256"]
            unchanged_file = (
                recorded_sha == _file_sha256(row.submission)
                if recorded_sha is not None
                else submission["status"] == "missing" and not os.path.lexists(row.submission)
            )
            fresh = (
                unchanged_file
                and junit.is_file()
                and document["score"] == record["score"]
                and document["profile"] == options.profile
                and document["meta"] == dict(row.meta)
                and references.get(row.variant)
                == reference_key(
                    reference["artifact_sha256"],
                    reference["data_sha256"],
                    reference["sps"],
                    reference["components"],
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if fresh:
            seconds = json_number(record.get("seconds")) or 0.0
            exit_status = record.get("exit_status")
            kept[row.line] = graded_result(
                row, options.out, document, seconds, exit_status, resumed=True
            )
    return kept
