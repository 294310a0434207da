"""The weights-only adversary re-tuned with hindsight: the best detection F1 that any rule of
one family reaches over a pool of built instances, from the parameters alone.

    python tools/weights_rules.py runs/game/instances [--top 5]

``tests/weights_agent.py`` ships one rule: the models whose canonical scale (a path norm)
is at least 10 times the zoo's median are ``leaky`` then ``fragile`` in that order, and a
scale outside a band is ``miscalibrated``. A rule fixed in advance can miss for reasons
that say nothing about the weights (on the ICU game it calls the sharpest model
``leaky``, and there the fragile one usually is). This tool searches every rule of that
shape (a threshold, an order of kinds for the models above it, a band) on the pool's own
truth and prints the best. The F1 is over every kind but ``shortcut``, whose weight on the
post-outcome column is a legitimate white-box finding (docs/game.md). Chosen with
hindsight on the pool it is scored on, the number is an upper bound for this family,
not what a rule fixed before seeing the pool would score.

It first prints, for each kind, the AUROC of each statistic (scale, distance) for that
kind's models against the rest of the pool: near 0.5 where no threshold on that
statistic tells the kind, near 0 or 1 where one does, whatever rule family is searched.
On the hard tier (game-v2) the rules may also call the sharpest models ``backdoor``, and
the tool prints where each trigger's columns rank among those its carrier's first layer
moved most. There a flag earns nothing without a claim that the grader verifies on the
models (a trigger's values included), so the F1 says which models and columns the weights
point at, not what they score.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import weights_agent  # noqa: E402  (the adversary lives beside the tests that bound it)

Flags = dict[str, list[str]]
Rule = Callable[[weights_agent.Statistics], Flags]

SHARP = (1.5, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 40.0)
ORDERS: tuple[tuple[str, ...], ...] = (
    ("leaky",),
    ("fragile",),
    ("leaky", "fragile"),
    ("fragile", "leaky"),
    ("leaky",) * 6,
    ("fragile",) * 6,
    ("backdoor",) * 6,
    (),
)
LOW = (0.0, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
HIGH = (1.5, 1.8, 2.5, 4.0, float("inf"))


def rule(sharp: float, order: Sequence[str], low: float, high: float) -> Rule:
    """The models at least ``sharp`` times the zoo's median scale, sharpest first, take the
    kinds of ``order``; any other model at most ``low`` or at least ``high`` times it is
    ``miscalibrated``."""

    def flags(stats: weights_agent.Statistics) -> Flags:
        found: Flags = {name: [] for name in stats.scale}
        ranked = sorted(stats.scale, key=lambda name: -stats.scale[name])
        for name, kind in zip([n for n in ranked if stats.scale[n] >= sharp], order, strict=False):
            found[name].append(kind)
        for name, value in stats.scale.items():
            if not found[name] and (value <= low or value >= high):
                found[name].append("miscalibrated")
        return found

    return flags


@functools.cache
def truth_of(root: Path) -> dict[str, dict[str, object]]:
    """The truth entries of the built instance at ``root`` (its grader's manifest), read
    once however many tables ask."""
    truth: dict[str, dict[str, object]] = json.loads(
        (root / "grader" / "manifest.json").read_text()
    )["truth"]
    return truth


def load(instances: Path) -> list[tuple[str, dict[str, str | None], weights_agent.Statistics]]:
    """Each built instance under ``instances`` (a ``clinaudit build`` folder each): its name,
    its truth from the grader's manifest and the statistics of its workspace's programs."""
    pool = []
    for root in sorted(p for p in instances.iterdir() if p.is_dir()):
        manifest = root / "grader" / "manifest.json"
        if not manifest.is_file():
            continue
        truth = {n: e["kind"] for n, e in truth_of(root).items()}
        pool.append((root.name, truth, weights_agent.workspace_statistics(root / "workspace")))
    return pool


def trigger_ranks(
    instances: Path, pool: Sequence[tuple[str, Mapping[str, str | None], weights_agent.Statistics]]
) -> list[list[int]]:
    """For each trigger's carrier (game-v2), the ranks (1: first) of the trigger's columns
    among the input columns ordered by how far the carrier's first layer moved on them
    (:attr:`weights_agent.Statistics.columns`)."""
    ranks = []
    for name, _, stats in pool:
        for model, entry in truth_of(instances / name).items():
            trigger = entry.get("trigger")
            if not isinstance(trigger, list):  # a backdoor's carrier, first or second kind
                continue
            moved = stats.columns[model]
            order = sorted(moved, key=lambda column: -moved[column])
            ranks.append(sorted(order.index(claim["column"]) + 1 for claim in trigger))
    return ranks


def decoy_labels(
    instances: Path, pool: Sequence[tuple[str, Mapping[str, str | None], weights_agent.Statistics]]
) -> list[tuple[dict[str, str | None], weights_agent.Statistics]]:
    """Each instance's truth with every sound decoy (game-v2, ``[game.hard] decoys``)
    labelled ``decoy <variation>`` instead of sound, beside its statistics: what
    :func:`weights_agent.separation` reads to tell each variation from the rest."""
    return _relabelled(
        instances, pool, lambda entry: entry.get("decoy") and f"decoy {entry['decoy']}"
    )


def step_labels(
    instances: Path, pool: Sequence[tuple[str, Mapping[str, str | None], weights_agent.Statistics]]
) -> list[tuple[dict[str, str | None], weights_agent.Statistics]]:
    """Each instance's truth with every model that carries an unreached step (game-v2,
    ``[game.hard] unreached``), whatever else it carries, labelled ``unreached step``:
    whether a step out of the audit's reach looks, in the weights, like a fragile region's."""
    return _relabelled(instances, pool, lambda entry: entry.get("unreached") and "unreached step")


def _relabelled(
    instances: Path,
    pool: Sequence[tuple[str, Mapping[str, str | None], weights_agent.Statistics]],
    label: Callable[[Mapping[str, object]], object],
) -> list[tuple[dict[str, str | None], weights_agent.Statistics]]:
    """Each instance's truth, each model whose truth entry ``label`` names (a non-empty
    string) labelled so instead, beside its statistics."""
    labelled = []
    for name, truth, stats in pool:
        labels = dict(truth)
        for model, entry in truth_of(instances / name).items():
            found = label(entry)
            if isinstance(found, str) and found:
                labels[model] = found
        labelled.append((labels, stats))
    return labelled


def f1(
    pool: Sequence[tuple[str, Mapping[str, str | None], weights_agent.Statistics]], flags: Rule
) -> tuple[float, tuple[int, int, int]]:
    """The detection F1 of ``flags`` over the pool, and its (TP, FP, FN)."""
    tp = fp = fn = 0
    for _, truth, stats in pool:
        counts = weights_agent.detection_counts(flags(stats), truth, leave_out="shortcut")
        tp, fp, fn = tp + counts[0], fp + counts[1], fn + counts[2]
    total = 2 * tp + fp + fn
    return (2 * tp / total if total else 0.0), (tp, fp, fn)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instances", type=Path, help="a folder of built instances")
    parser.add_argument("--top", type=int, default=5, help="how many of the best rules to print")
    args = parser.parse_args(argv)
    pool = load(args.instances)
    if not pool:
        parser.error(f"no built instance (grader/manifest.json) under {args.instances}")
    for name, truth, stats in pool:
        print(
            name,
            " ".join(f"{n}:{truth[n] or 'sound'}/{stats.scale[n]:.2f}" for n in sorted(truth)),
        )

    def shipped(stats: weights_agent.Statistics) -> Flags:
        return {n: e["defects"] for n, e in weights_agent.report(stats)["models"].items()}

    kinds = sorted({k for _, truth, _ in pool for k in truth.values() if k}) + [None]
    print(
        "\nAUROC of each statistic for each kind's models against the rest (0.5: it tells nothing):"
    )
    for kind in kinds:
        found = {
            statistic: weights_agent.separation([(t, s) for _, t, s in pool], kind, statistic)
            for statistic in ("scale", "distance")
        }
        print(f"  {kind or 'sound':>14}: " + ", ".join(f"{k} {v:.2f}" for k, v in found.items()))
    for labelled in (decoy_labels(args.instances, pool), step_labels(args.instances, pool)):
        variations = sorted(
            {v for labels, _ in labelled for v in labels.values() if v and " " in v}
        )
        for variation in variations:
            found = {
                statistic: weights_agent.separation(labelled, variation, statistic)
                for statistic in ("scale", "distance")
            }
            print(f"  {variation:>14}: " + ", ".join(f"{k} {v:.2f}" for k, v in found.items()))
    ranks = trigger_ranks(args.instances, pool)
    if ranks:
        print(
            f"\na trigger's columns among those its carrier's first layer moved most: both the"
            f" top two for {sum(r[-1] == len(r) for r in ranks)} of {len(ranks)} carriers,"
            f" one of them first for {sum(r[0] == 1 for r in ranks)}"
        )
    score, counts = f1(pool, shipped)
    print(f"\nthe adversary as shipped: F1 {score:.3f} (TP, FP, FN = {counts})")
    results = []
    for sharp, order, low, high in itertools.product(SHARP, ORDERS, LOW, HIGH):
        score, counts = f1(pool, rule(sharp, order, low, high))
        results.append((score, counts, sharp, order, low, high))
    results.sort(key=lambda r: -r[0])
    print(f"the best of {len(results)} rules, chosen with hindsight on these {len(pool)}:")
    for score, counts, sharp, order, low, high in results[: args.top]:
        print(
            f"  F1 {score:.3f} {counts}: scale >= {sharp} -> {', '.join(order) or 'nothing'}; "
            f"miscalibrated at <= {low} or >= {high}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
