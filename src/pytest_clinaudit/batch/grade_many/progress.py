"""Progress of a batch on stderr: one redrawn bar on a terminal, one line per row otherwise."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import IO

from pytest_clinaudit.batch.grade_many.results import RowResult

Say = Callable[[str], None]
"""Receives a progress message (fetching references, resuming, Ctrl-C)."""


class ProgressBar:
    """Progress on ``stream``: one redrawn bar on a terminal, one line per row otherwise."""

    WIDTH = 28

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.failed = 0
        self.start = time.perf_counter()
        self._line_open = False

    def update(self, result: RowResult) -> None:
        self.done += 1
        self.failed += not result.graded
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.tty:
            filled = int(self.WIDTH * self.done / max(1, self.total))
            eta = (self.total - self.done) / rate if rate > 0 else 0.0
            failed = f"  not graded {self.failed}" if self.failed else ""
            self.stream.write(
                f"\rgrading [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                f"{self.done}/{self.total}  {rate:.1f}/s  ETA {eta:.0f} s{failed}   "
            )
            self._line_open = True
        else:
            width = len(str(self.total))
            if result.graded:
                what = f"score {result.score:.3f} ({result.category})"
            else:
                what = "NOT GRADED: " + (result.error.strip().splitlines() or ["?"])[0][:160]
            self.stream.write(
                f"[{self.done:>{width}}/{self.total}] {result.row.describe()}: {what}\n"
            )
        self.stream.flush()

    def finish(self) -> None:
        """End the bar's line (if one is drawn), so that other messages start on their own."""
        if self._line_open:
            self.stream.write("\n")
            self.stream.flush()
            self._line_open = False
