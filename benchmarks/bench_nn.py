"""Benchmark: the torch variants' build and audit, and grading one of them with a warm cache.

    python benchmarks/bench_nn.py                 # everything (several minutes on 2 cores)
    python benchmarks/bench_nn.py --skip-icu      # WDBC, FLCHAIN and grading
    python benchmarks/bench_nn.py --skip-icu --skip-flchain   # WDBC and grading only

Each measurement runs in its own process (imports and torch's warm-up
included, since a grader pays them too):

- the four WDBC MLP variants built and audited one after the other in one
  process (issue 17's target: 30 s in all on 2 cores, the strong PGD of
  SPEC §7.3 included);
- each ICU MLP variant built and audited in a process of its own (target:
  120 s each), and each FLCHAIN one (6,143 training rows, 1,536 test rows:
  the ICU target; needs scikit-survival);
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

SUFFIXES = ("", "-pgd", "-dp", "-clip")
WDBC = tuple(f"wdbc-mlp{s}" for s in SUFFIXES)
ICU = tuple(f"icu-synth-mlp{s}" for s in SUFFIXES)
FLCHAIN = tuple(f"flchain-mlp{s}" for s in SUFFIXES)
WDBC_TARGET, ICU_TARGET = 30, 120
"""Seconds on 2 cores: all WDBC variants in one process; each ICU (and FLCHAIN) variant
in its own."""

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
    stages[name] = {
        "build": trained - t,
        "audit": time.perf_counter() - trained,
        "diagnostics": result.seconds.get("white_box_diagnostics", 0.0),
        "sps": result.sps,
    }
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
    parser.add_argument("--skip-flchain", action="store_true")
    parser.add_argument("--sessions", type=int, default=7)
    args = parser.parse_args()
    import torch

    env_note = (
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, torch {torch.__version__}, "
        f"CPU capability {torch.backends.cpu.get_cpu_capability()}"
    )

    wdbc = _build_and_audit(WDBC)
    rows = [
        [name, *(f"{s[k]:.1f}" for k in ("build", "audit", "diagnostics")), f"{s['sps']:.2f}"]
        for name, s in wdbc["stages"].items()  # type: ignore[union-attr]
    ]
    total = float(wdbc["total"])  # type: ignore[arg-type]
    rows.append(
        ["all four, one process", "", "", "", f"{total:.1f} s ({total / WDBC_TARGET:.2f}x target)"]
    )
    one_by_one = () if args.skip_icu else ICU
    if not args.skip_flchain:
        one_by_one += FLCHAIN
    if one_by_one:
        for name in one_by_one:
            icu = _build_and_audit((name,))
            s = icu["stages"][name]  # type: ignore[index]
            total = float(icu["total"])  # type: ignore[arg-type]
            rows.append(
                [
                    name,
                    f"{s['build']:.1f}",
                    f"{s['audit']:.1f}",
                    f"{s['diagnostics']:.1f}",
                    f"{total:.1f} s ({total / ICU_TARGET:.2f}x target)",
                ]
            )
    print(f"torch variants: build and audit, seconds ({env_note})")
    header = ["variant", "build s", "audit s", "of it §7.3 diagnostics s", "SPS / whole process"]
    print_table("", header, rows)

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
