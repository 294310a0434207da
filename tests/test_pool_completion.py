"""Ctrl-C in the pool's loops (``pool/completion.py``): seen wherever the main thread is,
with every result that had ended handed over and the rest cancelled."""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
import signal
import threading
import time
from typing import Any

import pytest

from pytest_clinaudit.pool.completion import as_they_end


def _interrupt_after(seconds: float) -> threading.Timer:
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    return timer


def _swallowing(seconds: float) -> None:
    """A client call that catches everything, as a Dask call can while it waits."""
    with contextlib.suppress(BaseException):  # the point: an interrupt lost here
        time.sleep(seconds)


def _consume(futures: Any, body: Any) -> None:
    for future in futures:
        body(future)


def test_ctrl_c_inside_a_call_that_swallows_it_still_stops_the_loop() -> None:
    """SIGINT arrives while the loop's body is in a call that catches BaseException (most
    of the loop's time here). ``as_completed`` loses such an interrupt and runs to the
    end (checked when this test was written: all 20 handled); :func:`as_they_end` stops."""
    handled: list[Any] = []

    def body(future: Any) -> None:
        handled.append(future)
        _swallowing(0.1)

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as executor:
        futures = [executor.submit(time.sleep, 0.1) for _ in range(20)]
        timer = _interrupt_after(0.3)
        try:
            with pytest.raises(KeyboardInterrupt):
                _consume(as_they_end(futures), body)
        finally:
            timer.cancel()
    assert 1 <= len(handled) < 20
    assert any(f.cancelled() for f in futures)


def test_the_ended_futures_are_handed_over_and_the_handler_restored() -> None:
    before = signal.getsignal(signal.SIGINT)
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        quick = [executor.submit(lambda: "quick") for _ in range(2)]
        slow = [executor.submit(time.sleep, 2.0) for _ in range(6)]
        seen: list[Any] = []
        timer = _interrupt_after(0.2)
        try:
            with pytest.raises(KeyboardInterrupt):
                _consume(as_they_end([*quick, *slow]), seen.append)
        finally:
            timer.cancel()
    assert set(quick) <= set(seen)  # ended before Ctrl-C: handed over
    assert all(f.cancelled() for f in slow[2:])  # never started: cancelled
    assert signal.getsignal(signal.SIGINT) is before


def test_without_ctrl_c_every_future_is_handed_over_once() -> None:
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as executor:
        futures = [executor.submit(time.sleep, 0.01 * (i % 4)) for i in range(12)]
        seen = list(as_they_end(futures, poll=0.01))
    assert sorted(map(id, seen)) == sorted(map(id, futures))


def test_off_the_main_thread_it_is_as_completed() -> None:
    """Python delivers signals to the main thread only, and only it may set a handler."""
    out: list[Any] = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as executor:
        futures = [executor.submit(lambda i=i: i) for i in range(5)]
        thread = threading.Thread(
            target=lambda: out.extend(f.result() for f in as_they_end(futures))
        )
        thread.start()
        thread.join(10)
    assert sorted(out) == [0, 1, 2, 3, 4]
