"""Futures as they end, until Ctrl-C, for the pool's loops (builds, agents).

``concurrent.futures.as_completed`` leaves Ctrl-C to ``KeyboardInterrupt``, raised
wherever the main thread happens to be, and lost if a call there catches
``BaseException`` (``tests/test_pool_completion.py`` shows it). :func:`as_they_end`
instead lets SIGINT only set a flag, checked between short waits, and raises
``KeyboardInterrupt`` itself once the futures that had ended are handed over, so no
finished result is dropped. (It was written after one loaded CI run in which Ctrl-C,
sent after a pool's first instance, left a pool of 8 built and exit status 0; that
run's cause was not reproduced.)
"""

from __future__ import annotations

import concurrent.futures
import signal
import threading
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")

POLL_SECONDS = 0.2
"""How long one wait lasts: the longest Ctrl-C waits to be seen."""


def as_they_end(
    futures: Iterable[concurrent.futures.Future[T]], poll: float = POLL_SECONDS
) -> Iterator[concurrent.futures.Future[T]]:
    """Each of ``futures`` as it ends. On SIGINT, the futures ended by then are yielded,
    the others cancelled, and ``KeyboardInterrupt`` is raised here. The SIGINT handler
    is this loop's only while it runs, and only on the main thread (elsewhere Python
    delivers no signal, and this is ``as_completed``)."""
    pending = set(futures)
    if threading.current_thread() is not threading.main_thread():
        yield from concurrent.futures.as_completed(pending)
        return
    stop = threading.Event()
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda _signum, _frame: stop.set())
    try:
        while pending:
            done, pending = concurrent.futures.wait(
                pending, timeout=poll, return_when=concurrent.futures.FIRST_COMPLETED
            )
            yield from done
            if stop.is_set():
                for future in pending:
                    future.cancel()
                raise KeyboardInterrupt
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)
