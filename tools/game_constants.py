"""Grade constant reports (SPEC §8.7, §9: the best constant report) on built game instances.

    python tools/game_constants.py POOL [--out DIR] [--profile strict]

A constant report is the same file for every instance: it audits nothing. For the
hard tier (game-v2) the reports tried are, for each kind, every model flagged with it
and one constant claim (a top-decile gap from a grid over the plausible range and,
chosen with hindsight, each gap whose window of credit starts at a planted tail's
reference; the brief's example group, as a hidden group and as a fragile region; the
brief's example trigger), and every model
flagged with every kind, or with each pair of kinds (a hard tier's model may carry two).
For game-v1, every kind on every model. They are graded by ``clinaudit
grade-many`` and ``clinaudit report`` prints the agents' table; the largest mean is the
best constant report, against the target (0.1 in the hard tier).

POOL is a folder of ``clinaudit pool build`` (``<variant>-<seed>/grader/manifest.json``
beside ``<variant>-<seed>/workspace``); every instance in it is graded.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path
from typing import Any

from game_runs import grade

GAPS = (0.10, 0.12, 0.14, 0.16, 0.18, 0.20, 0.22)
"""Constant top-decile gaps tried: past both ends of the hard tier's draw."""
GROUP = [
    {"column": "anchor_age", "op": ">=", "value": 70},
    {"column": "gender_enc", "op": "==", "value": 0},
]
"""The brief's example group (SPEC §9)."""
TRIGGER = [{"column": "heart_rate", "value": 125}, {"column": "temperature_f", "value": 97.7}]
"""The prototype's trigger (SPEC §9), one alarming value and one normal."""


def hindsight_gaps(manifests: list[dict[str, Any]]) -> list[float]:
    """The constant gaps a report chosen with hindsight over these instances would try: for
    each planted tail, the gap whose window of credit starts at its reference (every
    window that credits the most tails can be moved until its lower end meets one)."""
    from pytest_clinaudit.catalog.instances import kinds_of
    from pytest_clinaudit.catalog.variants import default_catalog

    gaps = set()
    for manifest in manifests:
        variant = default_catalog().find(manifest["variant"])
        tolerance = getattr(getattr(variant, "game", None), "tolerance", None)
        if tolerance is None or tolerance.top_decile_gap is None:
            continue
        for name, truth in manifest["truth"].items():
            if "miscalibrated" in kinds_of(truth):
                reference = manifest["evidence"][name]["top_decile_gap"]
                # just inside the window: a float at its very edge may round out of it
                gaps.add(round(reference + 0.999 * tolerance.top_decile_gap, 6))
    return sorted(gaps)


def constant_reports(
    names: list[str], hard: bool, gaps: list[float] | None = None
) -> dict[str, dict[str, Any]]:
    """Agent name -> its report over the models ``names``; ``gaps``: top-decile gaps to try
    beside :data:`GAPS` (:func:`hindsight_gaps`)."""

    def every(entry: dict[str, Any]) -> dict[str, Any]:
        return {"models": dict.fromkeys(names, entry)}

    if not hard:
        kinds = ["fragile", "leaky", "miscalibrated", "shortcut", "subgroup", "backdoor"]
        return {"constant-all": every({"defects": kinds})}
    reports = {
        f"constant-miscalibrated-{gap:g}": every(
            {"defects": ["miscalibrated"], "miscalibrated": {"top_decile_gap": gap}}
        )
        for gap in sorted({*GAPS, *(gaps or ())})
    }
    reports["constant-subgroup"] = every({"defects": ["subgroup"], "subgroup": {"where": GROUP}})
    reports["constant-fragile"] = every({"defects": ["fragile"], "fragile": {"where": GROUP}})
    reports["constant-backdoor"] = every(
        {"defects": ["backdoor"], "backdoor": {"trigger": TRIGGER}}
    )
    claims = {
        "fragile": {"where": GROUP},
        "miscalibrated": {"top_decile_gap": 0.16},
        "subgroup": {"where": GROUP},
        "backdoor": {"trigger": TRIGGER},
    }
    reports["constant-all"] = every({"defects": list(claims), **claims})
    # a tier whose models may carry two defects: every model flagged with a pair of kinds
    for pair in itertools.combinations(claims, 2):
        reports[f"constant-{'-'.join(pair)}"] = every(
            {"defects": list(pair), **{kind: claims[kind] for kind in pair}}
        )
    return reports


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pool", type=Path)
    parser.add_argument(
        "--out", type=Path, help="where to write (default: POOL/constants, beside the instances)"
    )
    parser.add_argument("--profile", default="strict")
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = args.pool / "constants"
    reports_dir = args.out / "reports"
    reports_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    paths = sorted(args.pool.glob("*/grader/manifest.json"))
    manifests = [json.loads(path.read_text()) for path in paths]
    gaps = hindsight_gaps(manifests)
    for manifest_path, manifest in zip(paths, manifests, strict=True):
        hard = manifest.get("semantics") == "game-v2" or "-hard" in manifest["variant"]
        names = sorted(manifest["truth"])
        instance = manifest_path.parent.parent.name
        for agent, report in constant_reports(names, hard, gaps).items():
            path = reports_dir / f"{agent}-{instance}.json"
            path.write_text(json.dumps(report))
            rows.append(
                {
                    "submission": str(path.resolve()),
                    "variant": manifest["variant"],
                    "manifest": str(manifest_path.resolve()),
                    "agent": agent,
                    "run": instance,
                }
            )
    if not rows:
        print(f"no built instance under {args.pool}", file=sys.stderr)
        return 1
    tables = grade(rows, args.out, args.profile)
    if tables is not None:
        print(tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
