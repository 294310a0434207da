"""What grading a batch gave: each row's outcome, the batch's counts and its exit status."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from pathlib import Path
from typing import Any

from pytest_clinaudit.batch.manifest import Row
from pytest_clinaudit.grading.scoring import CATEGORIES, NONE

EXIT_ALL_GRADED = 0
EXIT_SOME_NOT_GRADED = 1
EXIT_INTERRUPTED = 130
INTERRUPTED = "not graded: the batch was interrupted before this row"


@dataclasses.dataclass(frozen=True)
class RowResult:
    """The outcome of one row: graded (a score) or not (an error)."""

    row: Row
    junit_xml: Path
    score_json: Path
    seconds: float
    score: float | None = None
    raw_score: float | None = None
    category: str | None = None
    exit_status: int | None = None
    error: str = ""
    """Why the row was not graded; empty when it was."""
    output: str = ""
    """The tail of the session's output, kept when the row was not graded."""
    resumed: bool = False
    """Graded by an earlier run of the batch (``--resume``), not by this one."""

    @property
    def graded(self) -> bool:
        return not self.error

    def record(self) -> dict[str, Any]:
        """This row as a line of ``runs.jsonl`` (and, with ``output``, of ``errors.jsonl``)."""
        document: dict[str, Any] = {
            "line": self.row.line,
            "name": self.row.name,
            "submission": str(self.row.submission),
            "variant": self.row.variant,
            "meta": dict(self.row.meta),
            "graded": self.graded,
            "score": self.score,
            "raw_score": self.raw_score,
            "category": self.category,
            "exit_status": self.exit_status,
            "seconds": round(self.seconds, 3),
            "junit_xml": self.junit_xml.name if self.graded else None,
            "score_json": self.score_json.name if self.score_json.exists() else None,
            "resumed": self.resumed,
        }
        if not self.graded:
            document["error"] = self.error
        return document


@dataclasses.dataclass
class BatchResult:
    """Every row's outcome, in manifest order, and how the batch ran."""

    rows: list[RowResult]
    seconds: float
    jobs: int
    executor: str
    profile: str
    warnings: list[str] = dataclasses.field(default_factory=list)
    interrupted: bool = False
    """Ctrl-C stopped the batch: rows it did not reach are not graded (:data:`INTERRUPTED`)."""

    @property
    def graded(self) -> list[RowResult]:
        return [r for r in self.rows if r.graded]

    @property
    def failed(self) -> list[RowResult]:
        return [r for r in self.rows if not r.graded]

    @property
    def mean_score(self) -> float | None:
        scores = [r.score for r in self.graded if r.score is not None]
        return math.fsum(scores) / len(scores) if scores else None

    @property
    def categories(self) -> dict[str, int]:
        """Graded rows per failure category, every category listed (``none`` first)."""
        counts = Counter(r.category for r in self.graded)
        return {name: counts.get(name, 0) for name in (NONE, *CATEGORIES)}

    @property
    def resumed(self) -> list[RowResult]:
        return [r for r in self.rows if r.resumed]

    @property
    def exit_status(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_SOME_NOT_GRADED if self.failed else EXIT_ALL_GRADED

    def summary(self) -> dict[str, Any]:
        """The counts of ``summary.json``."""
        return {
            "rows": len(self.rows),
            "graded": len(self.graded),
            "not_graded": len(self.failed),
            "resumed": len(self.resumed),
            "interrupted": self.interrupted,
            "mean_score": self.mean_score,
            "categories": self.categories,
            "profile": self.profile,
            "jobs": self.jobs,
            "executor": self.executor,
            "seconds": round(self.seconds, 3),
            "exit_status": self.exit_status,
            "warnings": self.warnings,
        }
