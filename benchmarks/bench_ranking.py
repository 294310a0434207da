"""Benchmark: the hard tier's AUROCs of every group of the grammar, per model.

    python benchmarks/bench_ranking.py              # icu-synth-game-hard, 3 repeats

The build measures every model on every group of the grammar (2,999 groups over
40,000 test patients on ``icu-synth-game-hard``): a hidden group's gap (the
complement's AUROC less the group's) and a fragile region's drop (the group's AUROC
less its AUROC under attack). One table, each row timed side by side in one run on
the variant's own groups and random scores, the ratios against the shipped
:func:`group_gaps`:

- ``group_gaps``: one ordered pass per group, the complement's U derived from it;
- ``two passes``: the complement given a pass of its own (the form before);
- ``group_drops``: two ordered passes per group (untouched, attacked);
- ``group_gaps_and_drops``: the build's measure, both from those two passes;
- ``scikit-learn``: ``roc_auc_score`` on the group and on its complement, timed on
  60 groups and scaled to all of them.

The machine the project is measured on has 2 cores shared with other work: numbers
are noisy; the ratios in a row were measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))


def _seconds(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: Sequence[str] | None = None) -> int:
    import numpy as np
    from game_helpers import game_variant
    from sklearn.metrics import roc_auc_score

    from pytest_clinaudit.reference.game.hard import ranking
    from pytest_clinaudit.reference.game.hard.verdicts import space_of

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--game", default="icu-synth-game-hard")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    variant = game_variant(args.game)
    data = variant.dataset.load(variant.context)
    space, X, y = space_of(data, variant.game)
    rng = np.random.default_rng(0)
    z = rng.normal(size=len(X)) + np.asarray(y)
    attacked = z + rng.normal(size=len(X))

    def two_passes() -> Any:
        order = np.argsort(z, kind="stable")
        ys = np.asarray(y, dtype=bool)[order]
        gaps = np.empty(len(space))
        for start in range(0, len(space), 256):
            part = slice(start, min(start + 256, len(space)))
            masks = ranking._masks(space, part)[:, order]
            gaps[part] = ranking.aurocs(~masks, ys) - ranking.aurocs(masks, ys)
        return gaps

    sample = rng.choice(len(space), size=60, replace=False)

    def sklearn() -> None:
        for k in sample:
            mask = space.mask(int(k))
            roc_auc_score(y[mask], z[mask]), roc_auc_score(y[~mask], z[~mask])

    assert np.array_equal(two_passes(), ranking.group_gaps(z, y, space), equal_nan=True)
    rows = [
        ("group_gaps (shipped)", _seconds(lambda: ranking.group_gaps(z, y, space), args.repeats)),
        ("two passes", _seconds(two_passes, args.repeats)),
        ("group_drops", _seconds(lambda: ranking.group_drops(z, attacked, y, space), args.repeats)),
        (
            "group_gaps_and_drops",
            _seconds(lambda: ranking.group_gaps_and_drops(z, attacked, y, space), args.repeats),
        ),
        ("scikit-learn", _seconds(sklearn, args.repeats) * len(space) / len(sample)),
    ]
    base = rows[0][1]
    print(f"{len(space)} groups over {len(X)} patients ({args.game}), median of {args.repeats}")
    print(f"| {'measure':<22} | seconds | ratio to group_gaps |")
    print(f"|{'-' * 24}|---------|---------------------|")
    for name, seconds in rows:
        print(f"| {name:<22} | {seconds:7.2f} | {seconds / base:19.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
