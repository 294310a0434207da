"""Progress of a batch on stderr: one redrawn bar on a terminal, one line per row otherwise."""

from __future__ import annotations

from collections.abc import Callable

from pytest_clinaudit.batch.grade_many.results import RowResult
from pytest_clinaudit.progress import Progress

Say = Callable[[str], None]
"""Receives a progress message (fetching references, resuming, Ctrl-C)."""


class ProgressBar(Progress):
    """Progress on ``stream``: one redrawn bar on a terminal, one line per row otherwise."""

    WIDTH = 28

    def update(self, result: RowResult) -> None:
        self.advance(failed=not result.graded)
        self.show(self._bar(), self._row_line(result))

    def _bar(self) -> str:
        filled = int(self.WIDTH * self.done / max(1, self.total))
        failed = f"  not graded {self.failed}" if self.failed else ""
        return (
            f"grading [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
            f"{self.done}/{self.total}  {self.rate():.1f}/s  ETA {self.eta() or 0.0:.0f} s{failed}"
        )

    def _row_line(self, result: RowResult) -> str:
        width = len(str(self.total))
        if result.graded:
            what = f"score {result.score:.3f} ({result.category})"
        else:
            what = "NOT GRADED: " + (result.error.strip().splitlines() or ["?"])[0][:160]
        return f"[{self.done:>{width}}/{self.total}] {result.row.describe()}: {what}"
