"""Pinned torch state: what makes training, export and evaluation repeat to the bit.

Threads change the order of floating-point sums inside matrix products, so every
torch computation of this package runs on one intra-op thread; training also
runs with deterministic algorithms inside a forked, seeded random state. The
caller's global torch state is restored on exit.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """One intra-op thread (training, export and evaluation alike), restored on exit."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def pinned_torch(seed: int) -> Iterator[torch.Generator]:
    """One intra-op thread, deterministic algorithms, a forked global RNG seeded
    with ``seed``; yields a generator seeded with ``seed`` for explicit draws.

    Threads change the order of floating-point sums inside matrix products, so
    one thread is what makes training repeat to the bit. Everything is restored
    on exit, so callers' torch state is untouched.
    """
    import torch

    deterministic = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with one_thread(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield torch.Generator().manual_seed(seed)
    finally:
        torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
