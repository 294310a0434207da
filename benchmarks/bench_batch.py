"""Benchmark: ``clinaudit grade-many`` throughput, -j 1 vs -j 2, subprocess vs fork executor.

    python benchmarks/bench_batch.py              # 500 submissions, both executors, -j 1 and 2
    python benchmarks/bench_batch.py -n 100       # a quicker run
    python benchmarks/bench_batch.py -n 100 --executors fork --jobs 1 2 4
    python benchmarks/bench_batch.py --executors fork --jobs 2 --against OTHER/bin/python

The reference cache is warmed once, before any clock starts, into a temporary
directory. The submissions cycle through the kinds graders meet (the reference
report, a component out of tolerance, the paper's aggregation slip, a wrong
verdict, a string SPS, an empty file, invalid JSON, a missing file) on
wdbc-baseline and wdbc-hard, with agent/run/tokens/turns metadata, so every
code path of a session is exercised. Each configuration grades the same
manifest into a fresh output directory through :func:`pytest_clinaudit.batch.grade_many.grade_rows`
(what the command runs), wall time from start to the last session, worker
start-up included.

The table gives submissions per second, the speed-up over -j 1 of the same
executor and over the subprocess executor at -j 1, and whether every score JSON
and JUnit XML equals the subprocess -j 1 run's (volatile JUnit attributes
``time``, ``timestamp``, ``hostname`` removed).

``--against PYTHON`` compares this install with another one (an earlier
release, a branch) instead: both run the ``clinaudit grade-many`` command of
their own environment on the same manifest, in turn (this, other, this, ...)
for ``--rounds`` rounds after an uncounted warm-up round that also warms each
side's own reference cache. The table gives each side's median throughput,
the median of the paired ratios, and whether the two installs gave every row
the same score.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_tables import print_table

VARIANTS = ("wdbc-baseline", "wdbc-hard")
_VOLATILE = re.compile(rb' (time|timestamp|hostname)="[^"]*"')


def _kinds(reference: dict[str, Any]) -> list[tuple[str, bytes | None]]:
    """(kind, file content or None for a missing file) for one variant's reference."""
    report = {k: reference[k] for k in ("sps", "components", "verdict")}
    far = copy.deepcopy(report)
    far["components"]["calibration_ece"] = round(
        min(1.0, far["components"]["calibration_ece"] + 0.3), 4
    )
    slipped = {**report, "sps": round(report["sps"] - 3.0, 2)}
    wrong = {**report, "verdict": "CONDITIONAL"}
    string = {**report, "sps": str(report["sps"])}

    def dump(document: Any) -> bytes:
        return json.dumps(document).encode()

    return [
        ("reference", dump(report)),
        ("tolerance", dump(far)),
        ("aggregation", dump(slipped)),
        ("verdict", dump(wrong)),
        ("schema", dump(string)),
        ("empty", b""),
        ("unparseable", b"{not json"),
        ("missing", None),
    ]


def prepare(n: int, scratch: Path) -> tuple[Path, Path]:
    """A warm cache and a manifest of ``n`` submissions; returns (cache, manifest)."""
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference
    from pytest_clinaudit.catalog.variants import default_catalog

    cache = scratch / "cache"
    catalog = default_catalog()
    kinds = {
        name: _kinds(get_reference(catalog.get(name), cache=ReferenceCache(cache)).report)
        for name in VARIANTS
    }
    submissions = scratch / "submissions"
    submissions.mkdir()
    lines = []
    for index in range(n):
        variant = VARIANTS[index % len(VARIANTS)]
        kind, content = kinds[variant][(index // len(VARIANTS)) % len(kinds[variant])]
        path = submissions / f"{index:05d}-{kind}.json"
        if content is not None:
            path.write_bytes(content)
        row = {
            "submission": f"submissions/{path.name}",
            "variant": variant,
            "agent": f"agent-{index % 3}",
            "run": index,
            "tokens": 1000 + index,
            "turns": 10 + index % 7,
        }
        lines.append(json.dumps(row))
    manifest = scratch / "manifest.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return cache, manifest


def _contents(out: Path) -> dict[str, bytes]:
    found = {}
    for path in sorted(out.iterdir()):
        if path.name.endswith(".junit.xml"):
            found[path.name] = _VOLATILE.sub(b"", path.read_bytes())
        elif path.name.endswith(".score.json"):
            found[path.name] = path.read_bytes()
    return found


def run(
    manifest: Path, cache: Path, out: Path, executor: str, jobs: int
) -> tuple[float, int, str, dict[str, bytes]]:
    """Grade the manifest; returns (seconds, rows not graded, executor used, outputs)."""
    from pytest_clinaudit.batch.grade_many import BatchOptions, grade_rows
    from pytest_clinaudit.batch.manifest import read_batch_manifest

    out.mkdir()
    rows = read_batch_manifest(manifest)
    options = BatchOptions(out=out, jobs=jobs, cache_dir=cache, executor=executor)
    result = grade_rows(rows, options)
    return result.seconds, len(result.failed), result.executor, _contents(out)


def _command_run(
    python: Path, manifest: Path, cache: Path, out: Path, executor: str, jobs: int
) -> float:
    """Wall seconds of one ``clinaudit grade-many`` command of the install that owns ``python``."""
    command = [
        str(python.parent / "clinaudit"),
        "grade-many",
        str(manifest),
        "--out",
        str(out),
        "--force",
        "-q",
        "-j",
        str(jobs),
        "--executor",
        executor,
        "--cache-dir",
        str(cache),
    ]
    start = time.perf_counter()
    subprocess.run(command, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _scores(out: Path) -> dict[str, Any]:
    return {
        path.name: json.loads(path.read_bytes()).get("score")
        for path in sorted(out.glob("*.score.json"))
    }


def against(other: Path, n: int, executors: Sequence[str], jobs: Sequence[int], rounds: int) -> int:
    """This install's ``grade-many`` against another install's, in turn on one manifest."""
    this = Path(sys.executable)
    rows = []
    with tempfile.TemporaryDirectory(prefix="clinaudit-bench-batch-") as name:
        scratch = Path(name)
        _, manifest = prepare(n, scratch)
        caches = {"this": scratch / "cache-this", "other": scratch / "cache-other"}
        sides = {"this": this, "other": other}
        for executor in executors:
            for j in jobs:
                seconds: dict[str, list[float]] = {"this": [], "other": []}
                for round_ in range(rounds + 1):  # round 0 warms caches and is not counted
                    for side, python in sides.items():
                        out = scratch / f"out-{side}"
                        took = _command_run(python, manifest, caches[side], out, executor, j)
                        if round_:
                            seconds[side].append(took)
                    print(
                        f"  {executor} -j {j} round {round_}: "
                        + ", ".join(f"{s} {v[-1]:.1f} s" for s, v in seconds.items() if v),
                        flush=True,
                    )
                ratios = [o / t for t, o in zip(seconds["this"], seconds["other"], strict=True)]
                this_scores = _scores(scratch / "out-this")
                other_scores = _scores(scratch / "out-other")
                rows.append(
                    [
                        executor,
                        str(j),
                        f"{n / statistics.median(seconds['other']):.2f}",
                        f"{n / statistics.median(seconds['this']):.2f}",
                        f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})",
                        f"{len(this_scores)}/{n}",
                        "yes" if this_scores == other_scores else "NO",
                    ]
                )
    print_table(
        f"grade-many, this install vs {other}, {n} submissions, warm caches, "
        f"median of {rounds} paired rounds",
        [
            "executor",
            "-j",
            "other submissions/s",
            "this submissions/s",
            "x this vs other (min-max)",
            "score files",
            "same scores",
        ],
        rows,
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=500, help="submissions (default 500)")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2], help="-j values")
    parser.add_argument(
        "--executors", nargs="+", choices=["subprocess", "fork"], default=["subprocess", "fork"]
    )
    parser.add_argument(
        "--against", type=Path, metavar="PYTHON", help="another install's python to compare with"
    )
    parser.add_argument("--rounds", type=int, default=3, help="paired rounds with --against")
    args = parser.parse_args(argv)
    bytecode = (
        "off (PYTHONDONTWRITEBYTECODE=1)" if os.environ.get("PYTHONDONTWRITEBYTECODE") else "on"
    )
    print(
        f"clinaudit grade-many benchmark: {args.n} submissions, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, bytecode cache {bytecode}",
        flush=True,
    )
    if args.against is not None:
        return against(args.against, args.n, args.executors, args.jobs, args.rounds)
    measured: dict[tuple[str, int], tuple[float, int, str]] = {}
    outputs: dict[tuple[str, int], dict[str, bytes]] = {}
    with tempfile.TemporaryDirectory(prefix="clinaudit-bench-batch-") as name:
        scratch = Path(name)
        cache, manifest = prepare(args.n, scratch)
        for executor in args.executors:
            for jobs in args.jobs:
                out = scratch / f"out-{executor}-{jobs}"
                seconds, failed, used, contents = run(manifest, cache, out, executor, jobs)
                measured[(executor, jobs)] = (seconds, failed, used)
                outputs[(executor, jobs)] = contents
                print(
                    f"  {executor} -j {jobs}: {seconds:.1f} s, {args.n / seconds:.2f}/s",
                    flush=True,
                )
    base_key = (args.executors[0], min(args.jobs))
    base_seconds = measured[base_key][0]
    rows = []
    for (executor, jobs), (seconds, failed, used) in measured.items():
        serial = measured[(executor, min(args.jobs))][0]
        same = outputs[(executor, jobs)] == outputs[base_key]
        rows.append(
            [
                executor if used == executor else f"{executor} (fell back to {used})",
                str(jobs),
                f"{seconds:.1f}",
                f"{args.n / seconds:.2f}",
                f"{serial / seconds:.2f}",
                f"{base_seconds / seconds:.2f}",
                str(failed),
                "yes" if same else "NO",
            ]
        )
    print_table(
        f"grade-many throughput, {args.n} submissions, warm cache",
        [
            "executor",
            "-j",
            "seconds",
            "submissions/s",
            f"x vs -j {min(args.jobs)}",
            f"x vs {base_key[0]} -j {base_key[1]}",
            "not graded",
            f"outputs equal {base_key[0]} -j {base_key[1]}",
        ],
        rows,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
