"""The run loop of a batch: every row graded by its own session, ``-j`` at a time.

Ctrl-C stops starting sessions, lets the running ones end (Ctrl-C reaches them
too), and returns a result marked interrupted, so that the records are still
written.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Sequence

from pytest_clinaudit.batch.executor import Executor, Session, make_executor
from pytest_clinaudit.batch.grade_many.journal import Journal, earlier_results
from pytest_clinaudit.batch.grade_many.options import BatchOptions
from pytest_clinaudit.batch.grade_many.outdir import row_outputs
from pytest_clinaudit.batch.grade_many.progress import ProgressBar, Say
from pytest_clinaudit.batch.grade_many.references import warm_references
from pytest_clinaudit.batch.grade_many.results import INTERRUPTED, BatchResult, RowResult
from pytest_clinaudit.batch.grade_many.sessions import read_result, session_args
from pytest_clinaudit.batch.manifest import Row


def grade_rows(
    rows: Sequence[Row],
    options: BatchOptions,
    *,
    say: Say | None = None,
    progress: ProgressBar | None = None,
    resume: bool = False,
    executor: Executor | None = None,
) -> BatchResult:
    """Grade every row, ``options.jobs`` sessions at a time; never raises for a bad row.

    Each finished row is appended to ``runs.jsonl`` at once, so that a batch
    killed half-way keeps what it graded. Ctrl-C (:class:`KeyboardInterrupt`)
    starts no further session, waits for the running ones and returns a result
    marked ``interrupted``.

    Parameters
    ----------
    rows
        From :func:`pytest_clinaudit.batch.manifest.read_batch_manifest`.
    options
        The output directory must exist; outputs of earlier runs of the rows
        graded now are replaced.
    say
        Receives progress messages (reference fetching, resuming); default: nothing.
    progress
        Updated after each row graded now.
    resume
        Keep the rows an earlier run graded
        (:func:`~pytest_clinaudit.batch.grade_many.journal.earlier_results`) and
        grade only the others.
    executor
        Runs the sessions (closed at the end); default: ``options.executor``'s, made here
        (``grade-many --scheduler`` passes a :class:`~pytest_clinaudit.batch.dask_executor.
        DaskExecutor` it has connected first).
    """
    from pytest_clinaudit.catalog.cache import default_cache_dir

    say = say or (lambda _message: None)
    cache_dir = (options.cache_dir or default_cache_dir()).absolute()
    options = dataclasses.replace(options, out=options.out.absolute())
    start = time.perf_counter()
    warnings, references = (
        warm_references(rows, options, cache_dir, say) if options.warm else ([], {})
    )
    for warning in warnings:
        say(f"warning: {warning}; its rows will not be graded")
    results = earlier_results(rows, options, references) if resume else {}
    if resume:
        say(f"resuming: {len(results)} of {len(rows)} row(s) already graded in {options.out}")
    todo = [row for row in rows if row.line not in results]
    if progress is not None:
        progress.total = len(todo)
    for row in todo:  # a row's old outputs must not survive a failure to grade it now
        for path in row_outputs(options.out, row):
            path.unlink(missing_ok=True)
    jobs = max(1, min(options.jobs, len(todo)))
    interrupted = False
    if executor is None and todo:
        executor = make_executor(options.executor, jobs)
    with Journal(options.out, append=resume) as journal:

        def finished(result: RowResult) -> None:
            results[result.row.line] = result
            journal.add(result)
            if progress is not None:
                progress.update(result)

        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:

                def grade_one(row: Row) -> RowResult:
                    assert executor is not None
                    session = Session(session_args(row, options, cache_dir), options.timeout)
                    return read_result(row, options.out, executor.run(session))

                futures = [pool.submit(grade_one, row) for row in todo]
                try:
                    for future in concurrent.futures.as_completed(futures):
                        finished(future.result())
                except KeyboardInterrupt:
                    interrupted = True
                    for future in futures:
                        future.cancel()
                    if progress is not None:
                        progress.finish()
                    say("interrupted: starting no more sessions; waiting for the running ones")
                    for future in futures:
                        if not future.cancelled():
                            result = future.result()
                            if result.row.line not in results:
                                finished(result)
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
        finally:
            if executor is not None:
                executor.close()
            if progress is not None:
                progress.finish()
    for row in rows:
        if row.line not in results:  # never started: Ctrl-C came first
            results[row.line] = RowResult(
                row, *row_outputs(options.out, row), 0.0, error=INTERRUPTED
            )
    return BatchResult(
        rows=[results[row.line] for row in rows],
        seconds=time.perf_counter() - start,
        jobs=jobs,
        executor="none" if executor is None else executor.name,
        profile=options.profile,
        warnings=warnings,
        interrupted=interrupted,
    )
