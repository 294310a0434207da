"""The manifest of ``clinaudit grade-many``: which submission to grade as which variant, by whom.

A manifest is JSON Lines (one object per line) or CSV (a header row, then one
row per submission). Each row names

``submission``
    the report to grade, relative to the manifest file (or absolute). A missing
    file is a valid row: it grades as "no submission", as in the paper.
``variant``
    the variant (or the paper's alias) to grade against.
``manifest`` (optional)
    the grader's manifest of the workspace the submission came from
    (``clinaudit build``'s ``grader/manifest.json``), relative to the manifest
    file; a game needs it to know which instance a report is about.
anything else
    run metadata, passed to the grading session as ``--clinaudit-meta KEY=VALUE``
    and so written into the JUnit XML (``clinaudit.meta.KEY``) and the score
    JSON (``meta``). The conventional keys are ``agent`` (the agent or model
    that produced the submission), ``run`` (the run id), ``tokens`` and
    ``turns`` (whole numbers, validated as such); ``clinaudit report`` reads them.

Every problem is reported with its line number, its field and what was wrong;
all problems of a manifest are reported at once, so one edit fixes them.

Only the standard library is imported.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import io
import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_clinaudit.grading.options import meta_item

REQUIRED = ("submission", "variant")
"""Fields every row must have; every other field but ``manifest`` is metadata."""
GRADER_MANIFEST = "manifest"
"""The optional field naming the grader's manifest (``--clinaudit-manifest``)."""
WHOLE_NUMBER_FIELDS = ("tokens", "turns")
"""Conventional metadata that must be a whole number >= 0 when given."""
MAX_PROBLEMS = 20
"""Report at most this many problems: a manifest in the wrong format has one per line."""

_EXAMPLE = '{"submission": "runs/a-1.json", "variant": "wdbc-hard", "agent": "a", "run": 1}'
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class BatchManifestError(ValueError):
    """The manifest cannot be used; the message lists every problem found, by line."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One submission to grade.

    Attributes
    ----------
    line
        The manifest line the row starts on (1-based), used in messages and file names.
    submission
        Absolute path of the report (it need not exist).
    variant
        As written in the manifest (a name or an alias).
    meta
        Metadata, in manifest order, values as text.
    name
        Stem of the row's output files: unique within the manifest and the same
        on every run of the same manifest.
    """

    line: int
    submission: Path
    variant: str
    meta: Mapping[str, str]
    name: str
    grader_manifest: Path | None = None
    """The grader's manifest to grade against (absolute), if the row names one."""

    @property
    def agent(self) -> str | None:
        return self.meta.get("agent")

    def describe(self) -> str:
        """A short human label, e.g. ``line 3 (agent-a, wdbc-hard, run 2)``."""
        parts = [self.meta.get("agent") or "no agent", self.variant]
        if self.meta.get("run"):
            parts.append(f"run {self.meta['run']}")
        return f"line {self.line} ({', '.join(parts)})"


def _slug(text: str, limit: int = 40) -> str:
    """File-name-safe text: unsafe characters collapse to ``_``, at most ``limit`` characters."""
    return _UNSAFE.sub("_", text).strip("._")[:limit]


def output_name(line: int, width: int, variant: str, meta: Mapping[str, str]) -> str:
    """``<line>-<agent>-<variant>-<run>``, zero-padded so that names sort in manifest order.

    The line number alone makes names unique (two rows may have the same agent,
    variant and run); agent, variant and run make them readable.
    """
    parts = [f"{line:0{width}d}"]
    for value in (meta.get("agent", ""), variant, meta.get("run", "")):
        slug = _slug(value)
        if slug:
            parts.append(slug)
    return "-".join(parts)


def _meta_value(value: Any) -> str | None:
    """A metadata value as text; ``None`` to leave the key out.

    Raises
    ------
    TypeError
        An object or array: metadata is flat, one value per key.
    """
    if value is None:
        return None
    if isinstance(value, bool):  # before int: bool is an int in Python
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(type(value).__name__)


def _describe(value: Any) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value!r}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return {dict: "an object", list: "an array", type(None): "null"}.get(type(value), repr(value))


class _Problems:
    """Collects ``<file>:<line>: <field>: <problem>`` messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._found: list[tuple[int, str]] = []

    @property
    def messages(self) -> list[str]:
        """In line order (parsing and validation find them in two passes)."""
        ordered = sorted(self._found, key=lambda found: found[0])  # stable within a line
        return [f"{self.path}:{line}: {message}" for line, message in ordered]

    def add(self, line: int, message: str) -> None:
        self._found.append((line, message))

    def __len__(self) -> int:
        return len(self._found)

    def raise_if_any(self) -> None:
        if not self._found:
            return
        shown = self.messages[:MAX_PROBLEMS]
        more = len(self.messages) - len(shown)
        tail = [f"... and {more} more problem(s)"] if more else []
        raise BatchManifestError(
            f"the manifest {self.path} has {len(self.messages)} problem(s):\n"
            + "\n".join(["  " + m for m in shown] + ["  " + t for t in tail])
        )


def _validate(
    line: int, record: Mapping[str, Any], base: Path, problems: _Problems
) -> tuple[Path, str, dict[str, str], Path | None] | None:
    """Check one record; returns (submission, variant, meta, grader manifest) or ``None``
    after adding problems."""
    before = len(problems)
    grader: Path | None = None
    if record.get(GRADER_MANIFEST) not in (None, ""):
        named = record[GRADER_MANIFEST]
        if not isinstance(named, str):
            problems.add(line, f"field 'manifest': expected a path, got {_describe(named)}")
        else:
            grader = Path(named.strip())
            grader = grader if grader.is_absolute() else base / grader
    values: dict[str, str] = {}
    for field in REQUIRED:
        value = record.get(field)
        if value is None or (isinstance(value, str) and not value.strip()):
            problems.add(
                line,
                f"field {field!r}: missing; every row needs 'submission' (a path relative to "
                f"the manifest) and 'variant' (e.g. wdbc-hard), e.g. {_EXAMPLE}",
            )
        elif not isinstance(value, str):
            problems.add(line, f"field {field!r}: expected a string, got {_describe(value)}")
        else:
            values[field] = value.strip()
    meta: dict[str, str] = {}
    for key, value in record.items():
        if key in REQUIRED or key == GRADER_MANIFEST:
            continue
        try:
            text = _meta_value(value)
        except TypeError:
            problems.add(
                line,
                f"field {key!r}: expected a string, number or boolean (metadata is one value "
                f"per key), got {_describe(value)}",
            )
            continue
        if text is None or (isinstance(value, str) and not value.strip()):
            continue  # an empty CSV cell or a JSON null: the run has no such metadata
        try:
            meta_item(f"{key}={text}")
        except argparse.ArgumentTypeError:
            problems.add(
                line,
                f"field {key!r}: not usable as a metadata key; use letters, digits, '_', '.' "
                "and '-' only (e.g. agent, run, tokens)",
            )
            continue
        if key in WHOLE_NUMBER_FIELDS and not re.fullmatch(r"\s*\d+\s*", text):
            problems.add(
                line,
                f"field {key!r}: expected a whole number >= 0 (e.g. 15230), got {_describe(value)}",
            )
            continue
        meta[key] = text.strip() if key in WHOLE_NUMBER_FIELDS else text
    if len(problems) > before:
        return None
    submission = Path(values["submission"])
    # Relative to the manifest, not to wherever grade-many runs: a manifest and
    # its submissions move together.
    return (
        (submission if submission.is_absolute() else base / submission),
        values["variant"],
        meta,
        grader,
    )


def _jsonl_records(text: str, problems: _Problems) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            problems.add(
                number,
                f"not valid JSON ({exc}); write one JSON object per line, e.g. {_EXAMPLE}",
            )
            continue
        if not isinstance(record, dict):
            problems.add(
                number, f"expected a JSON object, e.g. {_EXAMPLE}, got {_describe(record)}"
            )
            continue
        yield number, record


def _csv_records(text: str, problems: _Problems) -> Iterator[tuple[int, Mapping[str, Any]]]:
    reader = csv.reader(io.StringIO(text, newline=""))
    header: list[str] | None = None
    start = 1
    for cells in reader:
        number, start = start, reader.line_num + 1  # a quoted cell may span lines
        if not any(cell.strip() for cell in cells):
            continue
        if header is None:
            header = [cell.strip() for cell in cells]
            missing = [name for name in REQUIRED if name not in header]
            blank = [i + 1 for i, name in enumerate(header) if not name]
            repeated = sorted({name for name in header if name and header.count(name) > 1})
            if missing:
                problems.add(
                    number,
                    f"header: missing column(s) {', '.join(missing)}; the first row names the "
                    "columns, e.g. submission,variant,agent,run,tokens,turns",
                )
            if blank:
                problems.add(number, f"header: column(s) {blank} have no name")
            if repeated:
                problems.add(number, f"header: column(s) {', '.join(repeated)} appear twice")
            if missing or blank or repeated:
                return
            continue
        if len(cells) != len(header):
            problems.add(
                number,
                f"expected {len(header)} cells (as in the header), got {len(cells)}; quote "
                "cells that contain commas",
            )
            continue
        yield number, dict(zip(header, cells, strict=True))
    if header is None:
        problems.add(1, "no header row: the first row names the columns, e.g. submission,variant")


def manifest_format(path: Path, text: str) -> str:
    """``"jsonl"`` or ``"csv"``: by extension, else by the first non-blank character."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    return "jsonl" if text.lstrip().startswith("{") else "csv"


def read_batch_manifest(path: Path) -> list[Row]:
    """Read and validate a manifest.

    Parameters
    ----------
    path
        A ``.jsonl`` or ``.csv`` file (other extensions: sniffed from the content).

    Returns
    -------
    list of Row
        In manifest order, at least one.

    Raises
    ------
    BatchManifestError
        The file cannot be read, or some rows are invalid: every problem is
        listed with its line number and field.
    """
    path = Path(path)
    try:
        # utf-8-sig: spreadsheet programs write a byte order mark before CSV headers.
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BatchManifestError(f"the manifest {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchManifestError(f"cannot read the manifest {path}: {exc}") from None
    problems = _Problems(path)
    kind = manifest_format(path, text)
    records = list(
        _jsonl_records(text, problems) if kind == "jsonl" else _csv_records(text, problems)
    )
    base = path.absolute().parent
    valid = [(line, _validate(line, record, base, problems)) for line, record in records]
    problems.raise_if_any()
    if not valid:
        raise BatchManifestError(
            f"the manifest {path} has no rows; add one per submission, e.g. {_EXAMPLE}"
        )
    width = max(4, len(str(valid[-1][0])))
    rows = []
    for line, fields in valid:
        assert fields is not None  # problems.raise_if_any() returned
        submission, variant, meta, grader = fields
        rows.append(
            Row(
                line=line,
                submission=submission,
                variant=variant,
                meta=meta,
                name=output_name(line, width, variant, meta),
                grader_manifest=grader,
            )
        )
    return rows
