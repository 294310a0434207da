"""The loop of ``clinaudit pool build``: one task per instance, results written as they come.

:func:`build_pool` submits ``builder(spec)`` for every instance to a
``concurrent.futures`` executor (``distributed.Client.get_executor()`` on a
cluster; any executor in tests), then writes each result into the pool and
journals it the moment it arrives. A task whose worker dies is rerun by Dask
on another worker with the same spec (the same secret, so the same bytes).
Ctrl-C cancels what has not ended and returns: the journal holds exactly the
instances whose folders are complete.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

from pytest_clinaudit.pool.completion import as_they_end
from pytest_clinaudit.pool.layout import FAILED, FINISHED, PoolDir
from pytest_clinaudit.pool.progress import PoolProgress
from pytest_clinaudit.pool.task import BuildSpec, Built

Builder = Callable[[BuildSpec], Built]


@dataclasses.dataclass(frozen=True)
class PoolResult:
    finished: list[str]
    failed: dict[str, str]
    interrupted: bool
    seconds: float

    @property
    def exit_status(self) -> int:
        if self.interrupted:
            return 130
        return 1 if self.failed else 0


def reason_of(exc: BaseException) -> str:
    """One line: the exception's type and first line (a worker's traceback stays there)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _entry(spec: BuildSpec, status: str) -> dict[str, Any]:
    return {"instance": spec.name, "variant": spec.variant, "seed": spec.seed, "status": status}


def build_pool(
    specs: Sequence[BuildSpec],
    pool: PoolDir,
    executor: concurrent.futures.Executor,
    builder: Builder,
    *,
    progress: PoolProgress | None = None,
) -> PoolResult:
    """Build every spec through ``executor``; never raises for one instance's failure."""
    start = time.perf_counter()
    finished: list[str] = []
    failed: dict[str, str] = {}

    def record(spec: BuildSpec, future: concurrent.futures.Future[Built]) -> None:
        try:
            built = future.result()
            if built.name != spec.name:
                raise ValueError(f"the worker returned {built.name} for {spec.name}")
            manifest = pool.write_instance(spec.name, built.files)
        except Exception as exc:  # noqa: BLE001 - a failed instance, recorded; the pool goes on
            reason = reason_of(exc)
            pool.append({**_entry(spec, FAILED), "reason": reason})
            failed[spec.name] = reason
            if progress is not None:
                progress.update(spec.name, reason)
            return
        pool.append(
            {
                **_entry(spec, FINISHED),
                "worker": built.worker,
                "capability": built.capability,
                "seconds": round(built.seconds, 3),
                "artifact_sha256": manifest.get("artifact_sha256"),
                "programs": manifest.get("programs"),
            }
        )
        finished.append(spec.name)
        if progress is not None:
            progress.update(spec.name)

    futures = {executor.submit(builder, spec): spec for spec in specs}
    interrupted = False
    try:
        for future in as_they_end(futures):
            record(futures[future], future)
    except KeyboardInterrupt:
        interrupted = True
        for future in futures:
            future.cancel()
    finally:
        if progress is not None:
            progress.finish()
    return PoolResult(finished, failed, interrupted, time.perf_counter() - start)
