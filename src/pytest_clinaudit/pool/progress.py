"""The live line of a pool build: instances done / total, failed, ETA."""

from __future__ import annotations

from pytest_clinaudit.progress import Progress


class PoolProgress(Progress):
    """On a terminal one redrawn line; otherwise one line per instance as it ends."""

    def line(self) -> str:
        eta = self.eta()
        left = "ETA ?" if eta is None else f"ETA {_duration(eta)}"
        return f"pool: {self.done}/{self.total} done, {self.failed} failed, {left}"

    def update(self, name: str, reason: str | None = None) -> None:
        """Instance ``name`` ended (``reason``: why it failed)."""
        self.advance(failed=reason is not None)
        what = "built" if reason is None else f"FAILED: {reason[:200]}"
        line = self.line()
        self.show(line, f"{line} | {name} {what}")


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
