"""The live count shared by grade-many's bar and a pool build's line (progress.py)."""

from __future__ import annotations

import io
import time

import pytest

from pytest_clinaudit.progress import Progress


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_off_a_terminal_each_item_appends_its_own_line() -> None:
    stream = io.StringIO()
    progress = Progress(3, stream)
    assert not progress.tty
    progress.advance()
    progress.show("redrawn 1", "line 1")
    progress.advance(failed=True)
    progress.show("redrawn 2", "line 2")
    progress.finish()  # no live line to end
    assert stream.getvalue() == "line 1\nline 2\n"
    assert (progress.done, progress.failed) == (2, 1)


def test_on_a_terminal_each_item_redraws_one_line_that_finish_ends_once() -> None:
    stream = Terminal()
    progress = Progress(3, stream)
    assert progress.tty
    for n in (1, 2):
        progress.advance()
        progress.show(f"redrawn {n}", f"line {n}")
    progress.finish()
    progress.finish()
    assert stream.getvalue() == "\rredrawn 1   \rredrawn 2   \n"


def test_the_eta_is_the_time_left_at_the_rate_so_far() -> None:
    progress = Progress(5, io.StringIO())
    assert progress.eta() is None
    assert progress.rate() == 0.0  # nothing done yet
    progress.start = time.monotonic() - 10.0  # 2 items in 10 s: 3 left take 15 s
    progress.advance()
    progress.advance(failed=True)
    assert progress.rate() == pytest.approx(0.2, rel=0.01)
    assert progress.eta() == pytest.approx(15.0, rel=0.01)


def test_the_default_stream_is_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    progress = Progress(1)
    progress.advance()
    progress.show("redrawn", "line")
    assert capsys.readouterr().err == "line\n"
