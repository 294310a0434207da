"""Build game instances, run the scripted agents on them, grade them, and print the tables.

    python tools/game_runs.py --seeds 1-10 --out runs/game [--game icu-synth-game]
                              [--agents null,transcription,expert,searcher,weights]

For each seed: ``clinaudit build`` (cached), each agent's report, then one
``clinaudit grade-many`` over all reports and ``clinaudit report --html``.
Prints the Markdown of docs/game.md's 10-seed tables: every model's
defining measurements against the margins, what one evidence number per kind
would earn (SPEC §8.7), and the agents' scores with per-kind recall and false
alarms. Each step is skipped when its output exists,
so an interrupted run resumes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GAME = "icu-synth-game"
"""The game variant built when ``--game`` is not given."""
AGENTS = ("null", "transcription", "expert")
"""The default agents; ``searcher`` (the hard tier's searching expert) is run when named."""
WEIGHTS_AGENT = Path(__file__).resolve().parent.parent / "tests" / "weights_agent.py"
"""``--agents ...,weights``: the weights-only adversary of the tests, run on the instance."""


def seeds(text: str) -> list[int]:
    found: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        found += list(range(int(low), int(high) + 1)) if high else [int(low)]
    return found


def build(out: Path, seed: int, game: str = GAME) -> Path | None:
    """The instance's folder, built unless it exists; ``None`` when the build fails (every
    attempt ambiguous): the other seeds still run, and the tables say which failed."""
    root = out / "instances" / f"{game}-{seed}"
    if not (root / "grader" / "manifest.json").is_file():
        command = ["clinaudit", "build", "--variant", game, "--seed", str(seed), "--out", str(root)]
        start = time.perf_counter()
        result = subprocess.run(command, check=False)
        seconds = time.perf_counter() - start
        record = {"seed": seed, "seconds": round(seconds, 1), "returncode": result.returncode}
        with (out / "builds.jsonl").open("a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")
        if result.returncode != 0:
            print(f"instance {seed}: the build failed after {seconds:.0f} s", file=sys.stderr)
            return None
        print(f"built instance {seed} in {seconds:.0f} s", file=sys.stderr)
    return root


def run_agent(root: Path, agent: str, reports: Path, seed: int) -> Path:
    report = reports / f"{agent}-{seed}.json"
    if not report.is_file():
        start = time.perf_counter()
        if agent == "weights":  # the adversary that reads parameters only (SPEC §8.7)
            command = [sys.executable, str(WEIGHTS_AGENT), str(root / "workspace")]
        else:
            command = [sys.executable, "-m", "pytest_clinaudit.adapters.game_agent"]
            command += [str(root / "workspace"), "--agent", agent]
        subprocess.run([*command, "--out", str(report)], check=True)
        print(f"{agent} on {seed}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    return report


def _fmt(value: Any, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def manifests(out: Path, chosen: list[int], game: str = GAME) -> list[dict[str, Any]]:
    """The grader manifests of the instances ``chosen``, in that order."""
    return [
        json.loads((out / "instances" / f"{game}-{seed}" / "grader" / "manifest.json").read_text())
        for seed in chosen
    ]


def measurement_table(found: list[dict[str, Any]]) -> str:
    """Every model of every instance: its planted kind and each kind's defining measurement."""
    lines = [
        "| instance | model | planted | PGD drop | loss AUC | ECE | importance | "
        "subgroup excess (largest) | backdoor flip (trigger) | attempt |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for manifest in found:
        seed = manifest["seed"]
        measured = manifest["measurements"]
        gaps = _excess(measured)
        for name, truth in manifest["truth"].items():
            m = measured[name]
            group, excess = max(gaps[name].items(), key=lambda item: item[1])
            planted = truth["kind"] or "clean"
            if truth["kind"] == "subgroup":
                planted += f" ({truth['subgroup']})"
            elif truth["kind"] == "miscalibrated":
                planted += f" ({truth['direction']})"
            elif truth["kind"] == "backdoor":
                planted += f" ({truth['feature']} {truth['value']:g})"
            trigger = m["backdoor"]["planted"]
            lines.append(
                f"| {seed} | {name} | {planted} | {_fmt(m['fragile']['drop'])} | "
                f"{_fmt(m['leaky']['loss_attack_auc'])} | {_fmt(m['miscalibrated']['ece'])} | "
                f"{_fmt(m['shortcut']['importance'])} | {_fmt(excess)} ({group}) | "
                f"{'-' if trigger is None else _fmt(trigger['flip'])} | {manifest['attempt']} |"
            )
    return "\n".join(lines)


def evidence_table(found: list[dict[str, Any]], game: str = GAME) -> str:
    """Per kind with an evidence number: the carriers' references and the best constant's
    share of instances (SPEC §8.7: at most a quarter)."""
    from pytest_clinaudit.batch.game_evidence import evidence_table as table
    from pytest_clinaudit.catalog.variants import default_catalog
    from pytest_clinaudit.reference.game.settings import EVIDENCE, EVIDENCE_V2

    settings = default_catalog().find(game).game
    evidence = EVIDENCE if settings.hard is None else EVIDENCE_V2
    return table(found, dataclasses.asdict(settings.tolerance), evidence).markdown()


def hard_measurement_table(found: list[dict[str, Any]]) -> str:
    """The hard tier (SPEC §9): every model's excess gaps (its planted group, its worst group
    of the grammar), its top-decile gap beyond the zoo's median and its ECE, and its flip
    share at each planted trigger, its largest alone on the one-column sweep and on the
    two-value sweep (``-`` in a manifest built before that sweep)."""
    from pytest_clinaudit.catalog.instances import kinds_of

    lines = [
        "| instance | model | planted | planted group excess | worst group excess | "
        "top-decile excess | ECE | flip at triggers | one value alone | two values | attempt |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for manifest in found:
        for name, truth in manifest["truth"].items():
            m = manifest["measurements"][name]
            choices = []
            if "where" in truth:
                choices.append(" and ".join(_condition(c) for c in truth["where"]))
            if "trigger" in truth:
                pairs = (f"{t['column']} {t['value']:g}" for t in truth["trigger"])
                choices.append(" & ".join(pairs))
            if "tail" in truth:
                choices.append(f"gap {truth['tail']:.2f}")
            planted = " + ".join(kinds_of(truth)) or "clean"
            if choices:
                planted += " (" + "; ".join(choices) + ")"
            sub, tail, door = m["subgroup"], m["miscalibrated"], m["backdoor"]
            flips = ", ".join(
                f"{carrier} {_fmt(at['flip'], 2)}" for carrier, at in door["at_triggers"].items()
            )
            lines.append(
                f"| {manifest['seed']} | {name} | {planted} | {_fmt(sub['planted_excess'])} | "
                f"{_fmt(sub['worst_excess'])} | {_fmt(tail['excess'])} | {_fmt(tail['ece'])} | "
                f"{flips or '-'} | {_fmt(door['singled_out']['flip'], 2)} | "
                f"{_fmt(door.get('pair_singled_out', {}).get('flip'), 2)} | "
                f"{manifest['attempt']} |"
            )
    return "\n".join(lines)


def _condition(condition: dict[str, Any]) -> str:
    if condition["op"] == "missing":
        return f"{condition['column']} missing"
    return f"{condition['column']} {condition['op']} {condition['value']:g}"


def _excess(measured: dict[str, Any]) -> dict[str, dict[str, float]]:
    import statistics

    gaps = {
        name: {g: e["complement"] - e["within"] for g, e in m["subgroup"].items()}
        for name, m in measured.items()
    }
    groups = next(iter(gaps.values()))
    medians = {g: statistics.median(gap[g] for gap in gaps.values()) for g in groups}
    return {name: {g: gap[g] - medians[g] for g in groups} for name, gap in gaps.items()}


def grade(rows: list[dict[str, Any]], out: Path, profile: str, html: bool = False) -> str | None:
    """Grade the batch ``rows`` (``clinaudit grade-many`` into OUT/graded, resuming) and
    tabulate it (``clinaudit report`` into OUT/report); the report's agent tables, from
    its Table 5 on (``None`` when no report was written)."""
    batch = out / "batch.jsonl"
    batch.write_text("".join(json.dumps(row) + "\n" for row in rows))
    graded = out / "graded"
    command = ["clinaudit", "grade-many", str(batch), "--out", str(graded)]
    subprocess.run([*command, "--profile", profile, "--resume"], check=False)
    report = ["clinaudit", "report", str(graded), "--out", str(out / "report")]
    subprocess.run([*report, *(["--html"] if html else [])], check=False)
    report_md = out / "report" / "report.md"
    if not report_md.is_file():
        return None
    text = report_md.read_text()
    start = text.find("### Table 5.")
    return text[start:] if start >= 0 else text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds, default=seeds("1-10"))
    parser.add_argument("--out", type=Path, default=Path("runs/game"))
    parser.add_argument("--game", default=GAME, help=f"the game variant (default {GAME})")
    parser.add_argument("--agents", default=",".join(AGENTS))
    parser.add_argument("--profile", default="strict")
    args = parser.parse_args(argv)
    agents = args.agents.split(",")
    reports = args.out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    rows = []
    built: list[int] = []
    for seed in args.seeds:
        root = build(args.out, seed, args.game)
        if root is None:
            continue
        built.append(seed)
        for agent in agents:
            report = run_agent(root, agent, reports, seed)
            rows.append(
                {
                    "submission": str(report.resolve()),
                    "variant": args.game,
                    "manifest": str((root / "grader" / "manifest.json").resolve()),
                    "agent": agent,
                    "run": str(seed),
                }
            )
    if not rows:
        print("no instance built", file=sys.stderr)
        return 1
    agents_tables = grade(rows, args.out, args.profile, html=True)
    found = manifests(args.out, built, args.game)
    print("## Defining measurements\n")
    from pytest_clinaudit.catalog.variants import default_catalog

    hard = default_catalog().find(args.game).game.hard is not None
    print(hard_measurement_table(found) if hard else measurement_table(found))
    print()
    print(evidence_table(found, args.game))
    failed = sorted(set(args.seeds) - set(built))
    if failed:
        print(f"\nInstances whose build failed: {', '.join(map(str, failed))}")
    if agents_tables is not None:
        print("\n## Agents\n")
        print(agents_tables)
    return 0


if __name__ == "__main__":
    sys.exit(main())
