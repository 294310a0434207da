"""Benchmark: what a grading session and the idle plugin cost, printed as tables with ratios.

    python benchmarks/bench_grading.py                 # 7 warm sessions, 30 x pytest --version
    python benchmarks/bench_grading.py --sessions 15 --repeat 60 --variant wdbc-baseline

Every measurement is a fresh process, so nothing is warm that a grader's first
run would not have warm: the reference cache is computed once, before the clock
starts, into a temporary directory, and every session runs in an empty
temporary directory with ``-p no:cacheprovider``.

Tables
------
1. Warm grading session: wall time of ``pytest --submission report.json
   --variant NAME`` (serial and ``-n 2``), median and min over ``--sessions`` runs,
   against the 1 s target.
2. Idle plugin: wall time of ``pytest --version`` in an unrelated empty
   directory with ``-p no:clinaudit`` and with the plugin, interleaved, median
   over ``--repeat`` runs each; the difference is the plugin's import overhead,
   against the 50 ms target. Plus ``python -X importtime`` of the plugin module.

A grading session imports Hypothesis and this package without assertion
rewriting (see ``grading.pytest_internals.stop_rewriting``); before that, with
``PYTHONDONTWRITEBYTECODE=1`` every session rewrote Hypothesis from source
(1.7-2.0 s a session). The tables say which bytecode mode was measured, and
``--bytecode both`` measures the two side by side. Other installed pytest
plugins still cost their import (inspect-ai's anyio plugin adds about 0.15 s),
so measure in the environment graders use.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from bench_tables import print_table

WARM_TARGET = 1.0
IMPORT_TARGET = 0.050


def _env(bytecode: bool) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if not bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _timed(command: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, result.returncode, result.stdout + result.stderr


def prepare(variant: str, scratch: Path) -> tuple[Path, Path]:
    """A warm cache and the variant's reference report as a submission."""
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference
    from pytest_clinaudit.catalog.variants import default_catalog

    cache = scratch / "cache"
    reference = get_reference(default_catalog().get(variant), cache=ReferenceCache(cache))
    report = scratch / "report.json"
    report.write_text(json.dumps(reference.report), encoding="utf-8")
    return cache, report


def bench_sessions(
    variant: str, sessions: int, bytecode: bool, scratch: Path
) -> list[tuple[str, float, float]]:
    cache, report = prepare(variant, scratch)
    rows = []
    for label, extra in (("serial", ["-p", "no:xdist"]), ("-n 2", ["-n", "2"])):
        command = [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            "--submission", str(report), "--variant", variant, "--clinaudit-cache-dir", str(cache),
            *extra,
        ]  # fmt: skip
        times = []
        for index in range(sessions + 1):
            with tempfile.TemporaryDirectory(prefix="clinaudit-bench-") as empty:
                seconds, status, output = _timed(command, Path(empty), _env(bytecode))
            if status != 0:
                raise SystemExit(f"grading session failed (exit {status}):\n{output[-3000:]}")
            if index:  # the first run may write bytecode caches; it is not timed
                times.append(seconds)
        rows.append((label, statistics.median(times), min(times)))
    return rows


def bench_idle(repeat: int, bytecode: bool) -> tuple[float, float]:
    base = [sys.executable, "-m", "pytest", "--version"]
    without, with_plugin = [], []
    with tempfile.TemporaryDirectory(prefix="clinaudit-idle-") as empty:
        for index in range(repeat + 1):
            # Interleaved, so drift in machine load hits both sides alike.
            a = _timed([*base, "-p", "no:clinaudit"], Path(empty), _env(bytecode))[0]
            b = _timed(base, Path(empty), _env(bytecode))[0]
            if index:
                without.append(a)
                with_plugin.append(b)
    return statistics.median(without), statistics.median(with_plugin)


def plugin_importtime(bytecode: bool) -> float:
    """Cumulative seconds of ``import pytest_clinaudit.plugin`` beyond pytest itself."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pytest; import pytest_clinaudit.plugin"],
        capture_output=True, text=True, check=True, env=_env(bytecode),
    )  # fmt: skip
    total = 0
    for line in result.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].rstrip() == " pytest_clinaudit.plugin":
            total = int(parts[1])
    return total / 1e6


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", default="wdbc-hard")
    parser.add_argument("--sessions", type=int, default=7, help="timed warm sessions per mode")
    parser.add_argument("--repeat", type=int, default=30, help="pytest --version runs per side")
    parser.add_argument(
        "--bytecode",
        choices=["env", "on", "off", "both"],
        default="env",
        help="bytecode caching: as the environment says (default), on, off, or both side by side",
    )
    args = parser.parse_args(argv)
    if args.bytecode == "env":
        modes = [not os.environ.get("PYTHONDONTWRITEBYTECODE")]
    else:
        modes = {"on": [True], "off": [False], "both": [True, False]}[args.bytecode]

    session_rows, idle_rows = [], []
    for bytecode in modes:
        mode = "bytecode cache on" if bytecode else "PYTHONDONTWRITEBYTECODE=1"
        with tempfile.TemporaryDirectory(prefix="clinaudit-bench-") as scratch:
            measured = bench_sessions(args.variant, args.sessions, bytecode, Path(scratch))
            for label, median, fastest in measured:
                session_rows.append(
                    [mode, label, f"{median:.3f}", f"{fastest:.3f}", f"{median / WARM_TARGET:.2f}"]
                )
        without, with_plugin = bench_idle(args.repeat, bytecode)
        overhead = with_plugin - without
        idle_rows.append(
            [
                mode,
                f"{without * 1000:.1f}",
                f"{with_plugin * 1000:.1f}",
                f"{with_plugin / without:.3f}",
                f"{overhead * 1000:+.1f}",
                f"{overhead / IMPORT_TARGET:.2f}",
                f"{plugin_importtime(bytecode) * 1000:.1f}",
            ]
        )
    print_table(
        f"Warm grading session, {args.variant}, reference report, empty directory "
        f"(median and min of {args.sessions} runs)",
        ["mode", "workers", "median s", "min s", "median / 1 s target"],
        session_rows,
    )
    print_table(
        f"Idle plugin: `pytest --version` in an empty directory "
        f"(median of {args.repeat} runs each)",
        [
            "mode",
            "-p no:clinaudit ms",
            "with plugin ms",
            "ratio",
            "overhead ms",
            "overhead / 50 ms target",
            "importtime of plugin ms",
        ],
        idle_rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
