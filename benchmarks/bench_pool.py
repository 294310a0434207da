"""Benchmark: building a pool of game instances on Dask against today's process pool.

    python benchmarks/bench_pool.py                      # 8 instances, real builds (long)
    python benchmarks/bench_pool.py --instances 4 --builder sleep   # the harness alone

Tables
------
1. Workers: the same ``--instances`` instances (fixed secrets, so every run
   builds the same zoos) on an embedded Dask cluster of 1 and of 2 worker
   processes, one thread each: wall time from the first task submitted to the
   last result, and the ratio 1 / 2 workers.
2. Overhead per instance: the same instances on one worker of a Dask
   cluster and of a spawned ``concurrent.futures.ProcessPoolExecutor`` (the
   seam a build's models use today), each task timing its own build: the
   overhead is (wall - the tasks' own seconds) / instances, as a share of
   the mean build, against the 5 % target. Start-up (the cluster's, the
   pool's) is shown apart: it is paid once per pool (a process pool starts its
   processes at its first task, so its start-up lands in its wall time).
3. Makespan of 200 instances on 1-64 workers, simulated from the measured
   build seconds (resampled with a fixed seed) plus the measured Dask
   overhead: each instance goes to the first worker free, as Dask's
   scheduler does with one thread per worker.

``--builder sleep`` replaces the build with a 2 s sleep, to check the harness.
The machine the project is measured on has 2 cores shared with other work: run
this only when it is quiet, and read table 1's ratio with that in mind.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import heapq
import multiprocessing
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_tables import print_table

from pytest_clinaudit.catalog.instances import instance_libraries
from pytest_clinaudit.pool.cluster import worker_environment
from pytest_clinaudit.pool.task import BuildSpec, Built, build_on_worker

GAME = "icu-synth-game"
OVERHEAD_TARGET = 0.05
SLEEP_SECONDS = 2.0


def sleep_build(spec: BuildSpec) -> Built:
    """The harness's stand-in for a build: a fixed sleep, timed as a build times itself."""
    start = time.perf_counter()
    time.sleep(SLEEP_SECONDS)
    return Built(spec.name, {}, "sleep", spec.capability, time.perf_counter() - start)


def _specs(count: int, cache: Path) -> list[BuildSpec]:
    libraries = instance_libraries()
    return [
        BuildSpec(
            GAME,
            seed,
            hashlib.sha256(f"bench-pool:{seed}".encode()).hexdigest()[:32],
            "default",
            libraries,
            cache_dir=str(cache),
            no_cache=True,
        )
        for seed in range(1, count + 1)
    ]


def _pin_environment() -> None:
    import os

    os.environ.update(worker_environment("default"))


@contextmanager
def _dask(workers: int) -> Iterator[concurrent.futures.Executor]:
    from pytest_clinaudit.pool.cluster import open_client

    with open_client(None, workers=workers) as (client, _):
        client.wait_for_workers(workers)
        yield client.get_executor(pure=False)


@contextmanager
def _processes(workers: int) -> Iterator[concurrent.futures.Executor]:
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        workers, mp_context=context, initializer=_pin_environment
    ) as pool:
        yield pool


def _run(
    executor_of: Callable[[int], Any], workers: int, specs: list[BuildSpec], builder: Any
) -> tuple[float, float, list[float]]:
    """Start-up seconds, wall seconds from the first task submitted to the last result, and
    each task's own seconds."""
    start = time.perf_counter()
    with executor_of(workers) as executor:
        started = time.perf_counter()
        built = list(executor.map(builder, specs))
        ended = time.perf_counter()
    return started - start, ended - started, [b.seconds for b in built]


def simulate(durations: list[float], overhead: float, tasks: int, workers: int) -> float:
    """Makespan of ``tasks`` drawn from ``durations`` on ``workers``: first free worker."""
    draw = random.Random(0)
    free = [0.0] * workers
    heapq.heapify(free)
    for _ in range(tasks):
        at = heapq.heappop(free)
        heapq.heappush(free, at + draw.choice(durations) + overhead)
    return max(free)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=8)
    parser.add_argument("--builder", choices=("real", "sleep"), default="real")
    args = parser.parse_args(argv)
    builder = build_on_worker if args.builder == "real" else sleep_build
    with tempfile.TemporaryDirectory(prefix="bench-pool-") as scratch:
        specs = _specs(args.instances, Path(scratch))
        up_one, one, seconds_one = _run(_dask, 1, specs, builder)
        _, two, _ = _run(_dask, 2, specs, builder)
        up_plain, plain, seconds_plain = _run(_processes, 1, specs, builder)
    n = len(specs)
    print_table(
        f"1. {n} instances of {GAME} on an embedded Dask cluster ({args.builder} builds)",
        ["workers", "wall s", "per instance s"],
        [["1", f"{one:.1f}", f"{one / n:.1f}"], ["2", f"{two:.1f}", f"{two / n:.1f}"]]
        + [["ratio 1 / 2", f"{one / two:.2f}", ""]],
    )
    build = statistics.mean(seconds_one)
    dask_overhead = (one - sum(seconds_one)) / n
    pool_overhead = (plain - sum(seconds_plain)) / n
    print_table(
        "2. Overhead per instance, one worker (start-up apart: paid once per pool)",
        [
            "executor",
            "start-up s",
            "wall s",
            "builds s",
            "overhead s",
            "share of a build",
            "target",
        ],
        [
            [
                "Dask LocalCluster",
                f"{up_one:.1f}",
                f"{one:.1f}",
                f"{sum(seconds_one):.1f}",
                f"{dask_overhead:.2f}",
                f"{dask_overhead / build:.1%}",
                f"< {OVERHEAD_TARGET:.0%}",
            ],
            [
                "ProcessPoolExecutor",
                f"{up_plain:.1f}",
                f"{plain:.1f}",
                f"{sum(seconds_plain):.1f}",
                f"{pool_overhead:.2f}",
                f"{pool_overhead / statistics.mean(seconds_plain):.1%}",
                "",
            ],
        ],
    )
    rows = []
    serial = simulate(seconds_one, max(0.0, dask_overhead), 200, 1)
    for workers in (1, 2, 4, 8, 16, 32, 64):
        makespan = simulate(seconds_one, max(0.0, dask_overhead), 200, workers)
        rows.append(
            [
                str(workers),
                f"{makespan / 3600:.2f}",
                f"{serial / makespan:.1f}",
                f"{serial / makespan / workers:.0%}",
            ]
        )
    print_table(
        f"3. 200 instances, simulated from {n} measured builds (mean {build:.0f} s)",
        ["workers", "makespan h", "speed-up", "efficiency"],
        rows,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
