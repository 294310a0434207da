"""A live count of items done out of a total, on a terminal or in a log.

On a terminal each item redraws one line; on anything else (a file, a pipe, a CI log)
each item appends a line of its own. :class:`Progress` keeps the counts, the rate and
the estimated time left and does the writing; ``grade-many``'s bar
(:mod:`pytest_clinaudit.batch.grade_many.progress`) and a pool build's line
(:mod:`pytest_clinaudit.pool.progress`) say what the lines contain.
"""

from __future__ import annotations

import sys
import time
from typing import IO


class Progress:
    """Items done and failed out of ``total``, shown on ``stream`` (stderr by default)."""

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.failed = 0
        self.start = time.monotonic()
        self._line_open = False

    def elapsed(self) -> float:
        """Seconds since the count started."""
        return time.monotonic() - self.start

    def rate(self) -> float:
        """Items per second so far (0 before any time has passed)."""
        elapsed = self.elapsed()
        return self.done / elapsed if elapsed > 0 else 0.0

    def eta(self) -> float | None:
        """Seconds left at the rate so far (``None`` before the first item ends)."""
        if self.done == 0:
            return None
        return self.elapsed() / self.done * (self.total - self.done)

    def advance(self, *, failed: bool = False) -> None:
        """Count one more item done (and failed, if ``failed``)."""
        self.done += 1
        self.failed += failed

    def show(self, redrawn: str, line: str) -> None:
        """On a terminal, ``redrawn`` replaces the live line; otherwise ``line`` is appended."""
        if self.tty:
            self.stream.write(f"\r{redrawn}   ")  # the blanks cover a longer line's end
            self._line_open = True
        else:
            self.stream.write(f"{line}\n")
        self.stream.flush()

    def finish(self) -> None:
        """End the live line (if one is drawn), so that other messages start on their own."""
        if self._line_open:
            self.stream.write("\n")
            self.stream.flush()
            self._line_open = False
