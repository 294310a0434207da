"""Benchmark: `clinaudit audit` of one's own model on synthetic ICU cohorts of growing size.

    python benchmarks/bench_owner_scale.py                       # 10k, 100k and 1M rows
    python benchmarks/bench_owner_scale.py --sizes 10000,100000 --bootstrap 200

For each size, the ICU generator (scaled up) writes train and test CSV files
and an XGBoost model (100 trees) is fitted and pickled, none of it timed. Then
the command a model owner runs, ``clinaudit audit --model ... --train ...
--test ... --label hospital_expire_flag``, runs in its own process; the table
gives its wall time, CPU time and peak memory (the process's own accounting),
the stages the report times, and the time outside them (start-up, reading and
checking the files, writing the report). The issue's budget for 1M rows is
120 s on 2 cores and 4 GiB.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_tables import table

SIZES = "10000,100000,1000000"
TRAIN_SHARE = 57_839 / (57_839 + 12_395)
"""The published extract's train / test proportion."""


def _prepare(n_rows: int, directory: Path) -> tuple[Path, Path, Path]:
    import numpy as np
    from xgboost import XGBClassifier

    from pytest_clinaudit.reference.data.icu import LABEL, generate_icu_cohort

    n_train = round(n_rows * TRAIN_SHARE)
    data = generate_icu_cohort(seed=42, n_train=n_train, n_test=n_rows - n_train).dataset
    paths = []
    for name, X, y in (("train", data.X_train, data.y_train), ("test", data.X_test, data.y_test)):
        path = directory / f"{name}.csv"
        header = ",".join([LABEL, *data.feature_names])
        np.savetxt(
            path,
            np.column_stack([y, X]),
            delimiter=",",
            header=header,
            comments="",
            fmt=["%d"] + ["%.17g"] * X.shape[1],
        )
        paths.append(path)
    model = XGBClassifier(
        n_estimators=100,
        max_depth=4,
        learning_rate=0.1,
        tree_method="hist",
        n_jobs=2,
        random_state=42,
        verbosity=0,
    ).fit(data.X_train, data.y_train)
    model_path = directory / "model.pkl"
    model_path.write_bytes(pickle.dumps(model))
    return model_path, paths[0], paths[1]


def _run(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak MiB of one process."""
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"failed: {' '.join(command)}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=SIZES, help="comma-separated total row counts")
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()

    results: list[dict[str, Any]] = []
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory(prefix="clinaudit-scale-") as scratch:
            directory = Path(scratch)
            print(f"{size:,} rows: writing the cohort and fitting the model", file=sys.stderr)
            model, train, test = _prepare(size, directory)
            out = directory / "report.json"
            command = [
                sys.executable,
                "-m",
                "pytest_clinaudit.cli",
                "audit",
                "--model",
                str(model),
                "--train",
                str(train),
                "--test",
                str(test),
                "--label",
                "hospital_expire_flag",
                "--bootstrap",
                str(args.bootstrap),
                "--out",
                str(out),
            ]
            print(f"{size:,} rows: auditing", file=sys.stderr)
            wall, cpu, peak = _run(command)
            report = json.loads(out.read_text())
            results.append(
                {
                    "size": size,
                    "wall": wall,
                    "cpu": cpu,
                    "peak": peak,
                    "stages": report["seconds"],
                    "sps": report["sps"],
                    "ci": report["uncertainty"]["sps"],
                }
            )

    stages = list(results[0]["stages"])
    header = ["", *(f"{r['size']:,} rows" for r in results)]
    rows = [[f"stage: {s}", *(f"{r['stages'][s]:.2f}" for r in results)] for s in stages]
    rows.append(
        ["outside the stages", *(f"{r['wall'] - sum(r['stages'].values()):.2f}" for r in results)]
    )
    rows.append(["wall seconds", *(f"{r['wall']:.1f}" for r in results)])
    rows.append(["CPU seconds", *(f"{r['cpu']:.1f}" for r in results)])
    rows.append(["peak MiB", *(f"{r['peak']:.0f}" for r in results)])
    if len(results) > 1:
        rows.append(
            ["wall / first size", *(f"{r['wall'] / results[0]['wall']:.2f}" for r in results)]
        )
    rows.append(
        [
            "SPS [95% CI]",
            *(f"{r['sps']:.2f} [{r['ci']['low']:.2f}, {r['ci']['high']:.2f}]" for r in results),
        ]
    )
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} CPUs; bootstrap {args.bootstrap}")
    print(table(header, rows))


if __name__ == "__main__":
    main()
