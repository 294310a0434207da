"""``clinaudit grade-many``: grade every submission of a manifest, each in its own pytest session.

Each submission is graded by the session a grader runs by hand
(:func:`pytest_clinaudit.grading.runner.session_args`), which writes
``<name>.junit.xml`` and ``<name>.score.json`` into the output folder. One
module per job:

``options``
    how to grade a batch (the ``grade-many`` flags).
``run``
    the run loop: sessions side by side (``-j N``) through an executor of
    :mod:`pytest_clinaudit.batch.executor`, Ctrl-C, the result.
``references``
    before any session, each distinct variant's reference fetched into the
    shared cache (computed if needed), so the sessions only read it.
``sessions``
    one row's session: its arguments, and the row's result read from what it
    left behind.
``journal``
    ``runs.jsonl`` appended as each row finishes, so that nothing graded is
    lost, and read back by ``--resume`` to keep the rows that need no new session.
``outdir``
    the output folder: its file names, refusing to mix two batches, and the
    records written at the end (``runs.jsonl``, ``errors.jsonl``, ``summary.json``).
``results``
    each row's outcome and the batch's counts and exit status.
``summary``
    the final summary printed on stdout.
``progress``
    progress on stderr: a redrawn bar on a terminal, one line per row otherwise.

A row that cannot be graded (a usage error such as an unknown variant, a
crash, a timeout) is recorded in ``errors.jsonl`` and in the summary, and the
batch goes on. Exit status: 0 when every row was graded (whatever its score),
1 when any row could not be graded, 130 when the batch was interrupted.
"""

from pytest_clinaudit.batch.grade_many.options import BatchOptions, default_jobs
from pytest_clinaudit.batch.grade_many.outdir import (
    OutputDirError,
    prepare_out_dir,
    write_records,
)
from pytest_clinaudit.batch.grade_many.progress import ProgressBar
from pytest_clinaudit.batch.grade_many.run import grade_rows
from pytest_clinaudit.batch.grade_many.summary import format_summary

__all__ = [
    "BatchOptions",
    "OutputDirError",
    "ProgressBar",
    "default_jobs",
    "format_summary",
    "grade_rows",
    "prepare_out_dir",
    "write_records",
]
