"""How to grade a batch: the ``grade-many`` flags, resolved."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from pytest_clinaudit.batch.executor import default_executor
from pytest_clinaudit.grading.options import DEFAULT_PROFILE

DEFAULT_TIMEOUT = 600.0
"""Seconds one session may take; a warm session takes about one."""


def default_jobs() -> int:
    """The CPUs this process may use (``sched_getaffinity`` where it exists)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True)
class BatchOptions:
    """How to grade a batch (the ``grade-many`` flags)."""

    out: Path
    jobs: int = dataclasses.field(default_factory=default_jobs)
    profile: str = DEFAULT_PROFILE
    cache_dir: Path | None = None
    """``None``: ``$CLINAUDIT_CACHE_DIR`` or ``~/.cache/pytest-clinaudit``, resolved once."""
    variants_dirs: tuple[Path, ...] = ()
    mimic_dir: Path | None = None
    executor: str = dataclasses.field(default_factory=default_executor)
    timeout: float = DEFAULT_TIMEOUT
    warm: bool = True
    """Fetch every variant's reference in this process first (off only to test the lock)."""
