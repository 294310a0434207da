"""How often the best constant top-decile gap, chosen with hindsight, beats its bound.

    python tools/game_constant_odds.py [--pools 2000] [--instances 9]

The hard tier's tail carriers show a gap drawn uniformly from ``[game.hard] tail``
(the realised gap within about 0.005 of the draw). A report that flags every model
``miscalibrated`` with one gap earns, on each instance, detection for the carriers
within tolerance of it (an F1 against five false alarms) and their evidence items.
Over simulated pools of instances (4-5 defects of three kinds drawn with repetition,
at most two tails, as the build draws them), this prints the distribution of the
best such report's mean score under each tolerance, with evidence credit whole or
shared by the right share of the flags (:mod:`pytest_clinaudit.grading.game_checks`).
No build, no grading: a model of the score, checked against one built pool in
docs/game.md.
"""

from __future__ import annotations

import argparse

import numpy as np

from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.reference.game.hard.draw import MAX_TAILS

GAME = default_catalog().find("icu-synth-game-hard").game  # type: ignore[attr-defined]
TAIL = GAME.hard.tail
MODELS = GAME.models
KINDS = GAME.kinds
WEIGHTS = {"detection": GAME.score.detection, "evidence": GAME.score.evidence}


def pool(rng: np.random.Generator, instances: int) -> list[tuple[int, np.ndarray]]:
    """(defects, tail carriers' gaps) per instance."""
    drawn = []
    for _ in range(instances):
        defects = MODELS - int(rng.choice(GAME.clean))
        carriers = MAX_TAILS + 1
        while carriers > MAX_TAILS:  # as reference/game/hard/draw.py draws the kinds
            carriers = int(rng.binomial(defects, 1 / len(KINDS)))
        gaps = rng.uniform(*TAIL, carriers) + rng.normal(0.0, 0.004, carriers)
        drawn.append((defects, gaps))
    return drawn


def best(drawn: list[tuple[int, np.ndarray]], tolerance: float, shared: bool) -> float:
    """The mean score of the best constant gap over ``drawn``, chosen with hindsight."""
    candidates = {g + 0.999 * tolerance for _, gaps in drawn for g in gaps}
    top = 0.0
    for gap in candidates:
        total = 0.0
        for defects, gaps in drawn:
            hits = int(np.sum(np.abs(gaps - gap) <= tolerance))
            if len(gaps):
                evidence = hits / MODELS if shared else hits / len(gaps)
                f1 = 2 * hits / (MODELS + defects)
                total += WEIGHTS["detection"] * f1 + WEIGHTS["evidence"] * evidence
        top = max(top, total / len(drawn))
    return top


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=int, default=2000)
    parser.add_argument("--instances", type=int, default=9)
    args = parser.parse_args(argv)
    print("| tolerance | evidence | median | 90th percentile | P(> 0.1) |")
    print("|---|---|---|---|---|")
    for tolerance in (0.010, 0.007, 0.005):
        for shared in (False, True):
            rng = np.random.default_rng(0)
            scores = np.array(
                [best(pool(rng, args.instances), tolerance, shared) for _ in range(args.pools)]
            )
            print(
                f"| {tolerance:g} | {'shared' if shared else 'whole'} | "
                f"{np.median(scores):.3f} | {np.quantile(scores, 0.9):.3f} | "
                f"{np.mean(scores > 0.1):.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
