"""Benchmark: the torch variants' build and audit, and grading one of them with a warm cache.

    python benchmarks/bench_nn.py                 # everything (about 4 minutes on 2 cores)
    python benchmarks/bench_nn.py --skip-icu      # WDBC and grading only

Each measurement runs in its own process (imports and torch's warm-up
included, since a grader pays them too):

- the three WDBC MLP variants built and audited one after the other in one
  process (issue 11's target: 20 s in all on 2 cores);
- each ICU MLP variant built and audited in a process of its own (target:
  120 s each);
- a warm grading session of wdbc-mlp against one of wdbc-hard, alternated,
  medians of ``--sessions`` each: the ratio says whether a torch variant
  costs more to grade once its reference is cached (it should not: the warm
  path imports no torch).
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
from pathlib import Path

from bench_tables import print_table

WDBC = ("wdbc-mlp", "wdbc-mlp-pgd", "wdbc-mlp-dp")
ICU = ("icu-synth-mlp", "icu-synth-mlp-pgd", "icu-synth-mlp-dp")

BUILD_AND_AUDIT = """
import json, sys, time
start = time.perf_counter()
from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.reference.attacks.audit import audit
from pytest_clinaudit.reference.models.program import build_mlp
catalog = default_catalog()
stages = {}
for name in sys.argv[1:]:
    variant = catalog.get(name)
    t = time.perf_counter()
    data = variant.dataset.load(variant.context)
    built = build_mlp(variant.model, data)
    trained = time.perf_counter()
    model, sha = built.artifact.load(), built.artifact.sha256
    result = audit(model, data, variant.params, artifact_sha256=sha)
    stages[name] = {"build": trained - t, "audit": time.perf_counter() - trained, "sps": result.sps}
print(json.dumps({"total": time.perf_counter() - start, "stages": stages}))
"""


def _build_and_audit(names: tuple[str, ...]) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", BUILD_AND_AUDIT, *names], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _session_seconds(submission: Path, variant: str, cache: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--submission",
            str(submission), "--variant", variant, "--clinaudit-cache-dir", str(cache),
        ],
        capture_output=True,
        check=False,
        cwd=submission.parent,
    )  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-icu", action="store_true")
    parser.add_argument("--sessions", type=int, default=7)
    args = parser.parse_args()
    env_note = f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}"

    wdbc = _build_and_audit(WDBC)
    rows = [
        [name, f"{s['build']:.1f}", f"{s['audit']:.1f}", f"{s['sps']:.2f}"]
        for name, s in wdbc["stages"].items()  # type: ignore[union-attr]
    ]
    rows.append(["all three, one process", "", "", f"{wdbc['total']:.1f} s (target 20)"])
    if not args.skip_icu:
        for name in ICU:
            icu = _build_and_audit((name,))
            s = icu["stages"][name]  # type: ignore[index]
            rows.append(
                [
                    name,
                    f"{s['build']:.1f}",
                    f"{s['audit']:.1f}",
                    f"{icu['total']:.1f} s (target 120)",
                ]
            )
    print(f"torch variants: build and audit, seconds ({env_note})")
    print_table("", ["variant", "build s", "audit s", "SPS / whole process"], rows)

    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference
    from pytest_clinaudit.catalog.variants import default_catalog

    with tempfile.TemporaryDirectory(prefix="clinaudit-nn-bench-") as scratch:
        cache, catalog = Path(scratch) / "cache", default_catalog()
        submissions = {}
        for name in ("wdbc-mlp", "wdbc-hard"):
            report = get_reference(catalog.get(name), cache=ReferenceCache(cache)).report
            path = Path(scratch) / f"{name}.json"
            path.write_text(json.dumps({k: report[k] for k in ("sps", "components", "verdict")}))
            submissions[name] = path
            _session_seconds(path, name, cache)  # warm the invariant memo too
        times: dict[str, list[float]] = {"wdbc-mlp": [], "wdbc-hard": []}
        for _ in range(args.sessions):
            for name in times:
                times[name].append(_session_seconds(submissions[name], name, cache))
    classical_median = statistics.median(times["wdbc-hard"])
    print_table(
        f"warm grading session, median of {args.sessions}, alternated",
        ["variant", "median s", "min s", "x vs wdbc-hard"],
        [
            [
                name,
                f"{statistics.median(v):.3f}",
                f"{min(v):.3f}",
                f"{statistics.median(v) / classical_median:.2f}",
            ]
            for name, v in times.items()
        ],
    )


if __name__ == "__main__":
    main()
