"""``grade-many --scheduler``: grading sessions run on the workers of a Dask cluster.

Each session is the one :func:`pytest_clinaudit.grading.runner.run_session`
starts everywhere else: a fresh ``python -m pytest`` in an empty folder, on
whichever worker Dask picks, so sessions stay isolated from one another and
from the worker. The session's arguments name the submissions, the output
folder and the cache by path: on a cluster of several machines these must lie
on a filesystem every worker sees. A session whose worker dies is rerun by
Dask on another; one that cannot be run at all is reported as not graded,
as the fork executor reports a broken worker.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from typing import Any

from pytest_clinaudit.batch.executor import Session, session_environment
from pytest_clinaudit.grading.runner import Finished, run_session

GRADING_WORKER_LIBRARIES = (
    "python",
    "pytest-clinaudit",
    "pytest",
    "hypothesis",
    "jsonschema",
    "numpy",
    "scipy",
    "scikit-learn",
    "xgboost",
)
"""What a grading worker must run at this machine's versions (a grade depends on them)."""


def run_on_worker(args: Sequence[str], timeout: float) -> Finished:
    """The Dask task: one grading session in a fresh process on this worker."""
    return run_session(tuple(args), timeout=timeout, env=session_environment())


class DaskExecutor:
    """Runs each session as a Dask task on ``client``'s cluster; :meth:`run` may be called
    from many threads. :meth:`close` closes the client only if :meth:`connect` opened it."""

    name = "dask"

    def __init__(self, client: Any, dashboard: str | None = None) -> None:
        self.client = client
        self.dashboard = dashboard
        self.slots = max(1, sum(client.nthreads().values()))
        self._stack = contextlib.ExitStack()

    @classmethod
    def connect(cls, scheduler: str, *, timeout: float) -> DaskExecutor:
        """Connect to ``scheduler`` and check its workers (``ClusterError``: one line)."""
        from pytest_clinaudit.pool.cluster import check_workers, open_client

        stack = contextlib.ExitStack()
        try:
            client, dashboard = stack.enter_context(open_client(scheduler, timeout=timeout))
            check_workers(client, grading_libraries(), capability=None, timeout=timeout)
            executor = cls(client, dashboard)
        except BaseException:
            stack.close()
            raise
        executor._stack = stack
        return executor

    def run(self, session: Session) -> Finished:
        start = time.perf_counter()
        future = self.client.submit(run_on_worker, session.args, session.timeout, pure=False)
        try:
            finished: Finished = future.result()
        except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: this row is not graded
            text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return Finished(None, "", time.perf_counter() - start, f"the Dask task failed: {text}")
        return finished

    def close(self) -> None:
        self._stack.close()


def grading_libraries() -> dict[str, str]:
    """This machine's versions of :data:`GRADING_WORKER_LIBRARIES`."""
    from pytest_clinaudit.versions import library_versions

    return library_versions(GRADING_WORKER_LIBRARIES[1:], python=True)
