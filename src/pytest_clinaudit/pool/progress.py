"""The live line of a pool build: instances done / total, failed, ETA."""

from __future__ import annotations

import sys
import time
from typing import IO


class PoolProgress:
    """On a terminal one redrawn line; otherwise one line per instance as it ends."""

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.failed = 0
        self.start = time.monotonic()
        self._open = False

    def eta(self) -> float | None:
        """Seconds left at the rate so far (``None`` before the first instance ends)."""
        if self.done == 0:
            return None
        elapsed = time.monotonic() - self.start
        return elapsed / self.done * (self.total - self.done)

    def line(self) -> str:
        eta = self.eta()
        left = "ETA ?" if eta is None else f"ETA {_duration(eta)}"
        return f"pool: {self.done}/{self.total} done, {self.failed} failed, {left}"

    def update(self, name: str, reason: str | None = None) -> None:
        """Instance ``name`` ended (``reason``: why it failed)."""
        self.done += 1
        self.failed += reason is not None
        if self.tty:
            self.stream.write(f"\r{self.line()}   ")
            self._open = True
        else:
            what = "built" if reason is None else f"FAILED: {reason[:200]}"
            self.stream.write(f"{self.line()} | {name} {what}\n")
        self.stream.flush()

    def finish(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
