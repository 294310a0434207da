"""Benchmark: building one game instance, and a warm grading session of a game report.

    python benchmarks/bench_game.py                  # instance 1, 2 jobs, 7 warm sessions
    python benchmarks/bench_game.py --seed 3 --jobs 2 --sessions 11 --skip-build CACHE
    python benchmarks/bench_game.py --game flchain-game   # the game on real patients

Tables
------
1. Build: wall time of ``clinaudit build --variant GAME --seed N`` into a
   cold, temporary cache (train, measure and validate six models; redraws
   included), with ``--jobs`` processes, against its target (120 s for the
   game, SPEC §8.6; 180 s for a hard tier, SPEC §9); the
   seconds the instance records for training and measuring its accepted
   attempt, and how many attempts it took. Then the same command warm (the
   programs exported again from the cached weights).
2. Warm grading session: ``pytest --submission report.json --variant
   GAME --clinaudit-manifest ...`` in a fresh process, median and min
   over ``--sessions`` runs, for the truth report (which makes the grader test
   a backdoor claim on the models) and for the null report, side by side with
   a warm audit-task session (``wdbc-baseline``), against the 2 s target. Each
   game report is graded both ways: bare ``pytest --submission`` started outside
   the reports' folder, and ``clinaudit grade`` (the isolated session the docs
   print, which starts a fresh ``python -m pytest`` of its own).

The machine the project is measured on has 2 cores shared with other work:
numbers are noisy; the ratios in a row were measured side by side.
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

from pytest_clinaudit.catalog.instances import kinds_of
from pytest_clinaudit.catalog.variants import default_catalog

GAME = "icu-synth-game"
"""The game built when ``--game`` is not given."""
BUILD_TARGETS = {"game-v1": 120.0, "game-v2": 180.0}
"""A cold build's target by the game's semantics: the game's (SPEC §8.6), the hard tier's."""
SESSION_TARGET = 2.0


def _timed(command: Sequence[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stdout}{result.stderr}")
    return time.perf_counter() - start, result.stdout + result.stderr


def _truth(manifest: dict[str, object]) -> dict[str, object]:
    truth = manifest["truth"]
    evidence = manifest["evidence"]
    assert isinstance(truth, dict)
    assert isinstance(evidence, dict)
    keys = {"fragile": "pgd_auroc", "leaky": "loss_attack_auc", "miscalibrated": "ece"}
    models: dict[str, object] = {}
    hard = manifest.get("semantics") == "game-v2"  # a group, a two-value trigger, a tail
    for name, entry in truth.items():
        kind = entry["kind"]
        details: dict[str, object]
        if hard:  # one object per kind it carries (two with [game.hard] second)
            claims = {
                "subgroup": {"where": entry.get("where")},
                "fragile": {"where": entry.get("region")},
                "backdoor": {"trigger": entry.get("trigger")},
                "miscalibrated": {"top_decile_gap": evidence[name]["top_decile_gap"]},
            }
            carried = kinds_of(entry)
            models[name] = {"defects": list(carried), **{k: claims[k] for k in carried}}
            continue
        details = {k: v for k, v in entry.items() if k in ("direction", "feature", "subgroup")}
        if kind == "backdoor":
            details["value"] = entry["value"]
        if kind in keys:
            details[keys[kind]] = evidence[name][keys[kind]]
        models[name] = {"defects": [kind] if kind else [], **({kind: details} if kind else {})}
    return {"models": models}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--game", default=GAME, help=f"the game variant (default {GAME})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sessions", type=int, default=7)
    parser.add_argument(
        "--skip-build", type=Path, metavar="CACHE", help="use this warm cache, build nothing"
    )
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-game-"))
    cache = args.skip_build or scratch / "cache"
    env = dict(os.environ, CLINAUDIT_CACHE_DIR=str(cache), OMP_NUM_THREADS="1")
    out = scratch / "instance"
    game = args.game
    target = BUILD_TARGETS.get(default_catalog().find(game).semantics, BUILD_TARGETS["game-v1"])
    build = ["clinaudit", "build", "--variant", game, "--seed", str(args.seed), "--out", str(out)]
    rows = []
    if args.skip_build is None:
        cold, _ = _timed(build, scratch, env)
        manifest = json.loads((out / "grader" / "manifest.json").read_text())
        recorded = manifest["seconds"]
        rows.append(
            [
                f"cold, {args.jobs} jobs",
                f"{cold:.1f}",
                f"{cold / target:.2f}",
                f"{recorded['train']:.1f}",
                f"{recorded['measure']:.1f}",
                str(manifest["attempt"] + 1),
            ]
        )
    warm, _ = _timed(build, scratch, env)
    manifest = json.loads((out / "grader" / "manifest.json").read_text())
    rows.append(["warm (cached)", f"{warm:.1f}", f"{warm / target:.2f}", "-", "-", "-"])
    print_table(
        f"1. Building {game} instance {args.seed} (target {target:.0f} s)",
        ["build", "seconds", "x target", "train s", "measure s", "attempts"],
        rows,
    )

    reports = {
        "truth": _truth(manifest),
        "null": {"models": {name: {"defects": []} for name in manifest["truth"]}},
    }
    # The reports lie in a folder of their own and pytest starts elsewhere: the plugin
    # refuses a session whose rootdir holds the report (the workspace may not configure it).
    folder, run = scratch / "reports", scratch / "run"
    folder.mkdir()
    run.mkdir()
    manifest_path = str(out / "grader" / "manifest.json")
    sessions: list[list[str]] = []
    for name, document in reports.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(document))
        bare = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q"]
        bare += ["--submission", str(path), "--variant", game]
        bare += ["--clinaudit-manifest", manifest_path]
        isolated = ["clinaudit", "grade", str(path), "--variant", game]
        isolated += ["--manifest", manifest_path]
        for how, command in (("pytest --submission", bare), ("clinaudit grade", isolated)):
            times = [_timed(command, run, env)[0] for _ in range(args.sessions)]
            sessions.append(_row(f"game, {name} report, {how}", times))
    sps = folder / "sps.json"
    sps.write_text(json.dumps({"sps": 57.07, "components": {}, "verdict": "NOT RECOMMENDED"}))
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--submission"]
    command += [str(sps), "--variant", "wdbc-baseline"]
    _timed(command, run, env)  # computes the wdbc-baseline reference once
    times = [_timed(command, run, env)[0] for _ in range(args.sessions)]
    sessions.append(_row("audit task, wdbc-baseline, pytest --submission", times))
    print_table(
        f"2. Warm grading session ({args.sessions} runs, target {SESSION_TARGET:.0f} s)",
        ["session", "median s", "min s", "x target"],
        sessions,
    )
    print(f"\nscratch: {scratch}")
    return 0


def _row(name: str, times: list[float]) -> list[str]:
    median = statistics.median(times)
    return [name, f"{median:.2f}", f"{min(times):.2f}", f"{median / SESSION_TARGET:.2f}"]


if __name__ == "__main__":
    sys.exit(main())
