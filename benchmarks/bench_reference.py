"""Benchmark: the vectorized reference auditor against the literal oracle, side by side.

Every measurement runs in its own Python process (imports done before the clock
starts), so none inherits another's warm caches, and its peak memory can be read.

    python benchmarks/bench_reference.py                       # the three WDBC variants
    python benchmarks/bench_reference.py --variants icu-synth-baseline,icu-synth-hard
    python benchmarks/bench_reference.py --literal-walk-rows 5  # shorter literal walk

Tables
------
1. Per variant, audit only, on the same artifact: literal seconds, ours seconds,
   ratio, and the peak resident memory of each process.
2. All variants from recipe (data + build + audit, the shadow-model attack
   shared between variants of one dataset) in one process: total seconds.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench_tables import table

ROOT = Path(__file__).resolve().parents[1]
WDBC = "wdbc-baseline,wdbc-calibrated,wdbc-hard"


# ------------------------------------------------------------------ workers


def _load(name: str) -> tuple[Any, Any, Any]:
    from pytest_clinaudit.catalog.variants import default_catalog
    from pytest_clinaudit.reference.models.recipes import Artifact, build_model

    variant = default_catalog().get(name)
    data = variant.dataset.load(variant.context)
    model = Artifact.from_model(
        build_model(variant.model, variant.params.fgsm.surrogate, data)
    ).load()
    return variant, data, model


def worker_audit(kind: str, name: str, walk_rows: int | None) -> dict[str, Any]:
    """Time one audit of an already built artifact (literal or ours)."""
    variant, data, model = _load(name)
    if kind == "literal":
        sys.path.insert(0, str(ROOT / "tests"))
        import literal_oracle

        rows = None if walk_rows is None else list(range(walk_rows))
        start = time.perf_counter()
        result = literal_oracle.audit(
            model, data.X_train, data.y_train, data.X_test, data.y_test, variant.params, rows
        )
        seconds = time.perf_counter() - start
        steps = result["boundary"]["steps"]
    else:
        import sklearn.ensemble  # noqa: F401  - imported before the clock, as the oracle's are
        import sklearn.metrics  # noqa: F401

        from pytest_clinaudit.reference.attacks.audit import audit

        start = time.perf_counter()
        result = audit(model, data, variant.params)
        seconds = time.perf_counter() - start
        steps = result.details["steps_to_flip"]
        if walk_rows is not None:
            steps = steps[:walk_rows]
    return {"seconds": seconds, "steps": steps}


def worker_recipe(names: list[str]) -> dict[str, Any]:
    """Data + build + audit of every variant, as a cold reference computation does."""
    from pytest_clinaudit.catalog.variants import default_catalog
    from pytest_clinaudit.reference.attacks.audit import audit
    from pytest_clinaudit.reference.models.recipes import Artifact, build_model

    catalog = default_catalog()
    # Import what the recipes use before the clock starts, as the audit workers do.
    import sklearn.calibration  # noqa: F401
    import sklearn.ensemble  # noqa: F401
    import sklearn.linear_model  # noqa: F401
    import sklearn.metrics  # noqa: F401
    import xgboost  # noqa: F401

    stages: dict[str, float] = {}
    start = time.perf_counter()
    for name in names:
        variant = catalog.get(name)
        t0 = time.perf_counter()
        data = variant.dataset.load(variant.context)
        t1 = time.perf_counter()
        artifact = Artifact.from_model(
            build_model(variant.model, variant.params.fgsm.surrogate, data)
        )
        t2 = time.perf_counter()
        audit(artifact.load(), data, variant.params, artifact_sha256=artifact.sha256)
        t3 = time.perf_counter()
        stages[name] = {"data": t1 - t0, "build": t2 - t1, "audit": t3 - t2}  # type: ignore[assignment]
    return {"seconds": time.perf_counter() - start, "stages": stages}


# ------------------------------------------------------------------- driver


def _run_worker(*args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args], capture_output=True, text=True, cwd=ROOT
    )
    if out.returncode != 0:
        raise SystemExit(f"worker {args} failed:\n{out.stderr}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variants", default=WDBC, help="comma-separated variant names")
    parser.add_argument(
        "--literal-walk-rows", type=int, default=None, help="limit the literal walk to N rows"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="repetitions of ours and of the recipe run"
    )
    parser.add_argument("--skip-literal", action="store_true")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        kind, *rest = args.worker
        if kind == "recipe":
            result = worker_recipe(rest[0].split(","))
        else:
            rows = None if rest[1] == "all" else int(rest[1])
            result = worker_audit(kind, rest[0], rows)
        # Peak resident memory of this worker process (KiB on Linux).
        result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return

    names = args.variants.split(",")
    walk = "all" if args.literal_walk_rows is None else str(args.literal_walk_rows)
    print(f"python {sys.version.split()[0]}; {len(names)} variants; literal walk rows: {walk}")
    rows = []
    for name in names:
        ours = [_run_worker("ours", name, walk) for _ in range(args.repeat)]
        ours_s = statistics.median(r["seconds"] for r in ours)
        ours_mem = max(r["peak_mib"] for r in ours)
        if args.skip_literal:
            rows.append([name, "-", f"{ours_s:.3f}", "-", "-", f"{ours_mem:.0f}"])
            continue
        literal = _run_worker("literal", name, walk)
        assert literal["steps"] == ours[0]["steps"], f"{name}: walk steps differ from the oracle"
        rows.append(
            [
                name,
                f"{literal['seconds']:.2f}",
                f"{ours_s:.3f}",
                f"{literal['seconds'] / ours_s:.0f}x",
                f"{literal['peak_mib']:.0f}",
                f"{ours_mem:.0f}",
            ]
        )
        print(f"  measured {name}", file=sys.stderr, flush=True)
    print(f"\nAudit only, same artifact (median of ours over {args.repeat} runs)")
    print(table(["variant", "literal s", "ours s", "speed-up", "literal MiB", "ours MiB"], rows))

    recipe = [_run_worker("recipe", ",".join(names)) for _ in range(args.repeat)]
    best = min(recipe, key=lambda r: r["seconds"])
    print(f"\nAll {len(names)} from recipe (data + build + audit), one process, imports excluded")
    stage_rows = [
        [name, f"{s['data']:.3f}", f"{s['build']:.3f}", f"{s['audit']:.3f}"]
        for name, s in best["stages"].items()
    ]
    print(table(["variant", "data s", "build s", "audit s"], stage_rows))
    totals = sorted(r["seconds"] for r in recipe)
    print(
        f"total: median {statistics.median(totals):.2f} s, best {totals[0]:.2f} s, "
        f"peak {max(r['peak_mib'] for r in recipe):.0f} MiB"
    )


if __name__ == "__main__":
    main()
