"""A test of calibration whose error rate is known: consistency resampling of the task's ECE.

The bootstrap interval of the task's ECE does not cover its population value
(0.70 at 1,000 rows, ``benchmarks/bench_owner_coverage.py``): the plug-in of
absolute gaps is biased upward, more so the fewer the rows. A reviewer's
question can be put another way that has an exact answer: *could a calibrated
model have produced a task ECE this large on these patients?* Consistency
resampling (Bröcker and Smith 2007) answers it: draw each row's outcome from
the model's own probability, ``y* ~ Bernoulli(p)``, recompute the task's ECE
on the same probabilities, and read the observed ECE against those draws. The
p-value ``(1 + #{ECE* >= ECE}) / (1 + B)`` is a Monte Carlo test of "the model
is calibrated on these rows", whose size is the nominal one by construction
(tested: about 5% of calibrated samples reject at 0.05), at any row count and
with the task's quirks included, because the quirks are the same in every draw.

Bins depend on the probabilities only, so each draw needs only the positives
per bin: the rows' Bernoulli draws summed through a (rows x bins) indicator.
Above :data:`MAX_ROWS` rows the test runs on a seeded sample of that many.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

MAX_ROWS = 20_000
"""Rows the test draws outcomes for (a seeded sample above it): enough power, bounded cost."""

CHUNK_DRAWS = 2_000_000
"""Bernoulli draws per chunk of replicates (16 MB of uniforms)."""


@dataclasses.dataclass(frozen=True)
class ConsistencyTest:
    """The task's ECE against its distribution under calibration on the same probabilities."""

    statistic: str
    observed: float
    p_value: float
    n_resamples: int
    n_rows: int
    null_median: float
    """The median ECE a calibrated model would show on these probabilities: the size of
    the ECE's upward bias at this many rows."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True, eq=False)
class _TaskBins:
    """The task's ECE as a function of the positives per bin, the probabilities held fixed."""

    bins: IntArray
    """Each row's curve bin (the non-empty bins, in order)."""
    totals: FloatArray
    means: FloatArray
    weights: FloatArray
    """The task's count weights, truncated and misaligned as it computes them."""

    @classmethod
    def of(cls, prob: FloatArray, n_bins: int) -> _TaskBins:
        import numpy as np

        edges = np.linspace(0.0, 1.0, n_bins + 1)
        binids = np.searchsorted(edges[1:-1], prob)
        totals = np.bincount(binids, minlength=n_bins)
        nonzero = np.flatnonzero(totals)
        position = np.full(n_bins, -1)
        position[nonzero] = np.arange(len(nonzero))
        sums = np.bincount(binids, weights=prob, minlength=n_bins)[nonzero]
        index = np.searchsorted(edges, prob, side="right") - 1
        counts = np.bincount(index[(index >= 0) & (index < n_bins)], minlength=n_bins)
        counts = counts[: len(nonzero)].astype(np.float64)
        total = counts.sum()
        weights = counts / total if total > 0 else np.zeros(len(nonzero))
        return cls(
            position[binids], totals[nonzero].astype(np.float64), sums / totals[nonzero], weights
        )

    def ece(self, positives: FloatArray) -> FloatArray:
        """The task's ECE of each row of ``positives`` (shape (B, bins)), shape (B,)."""
        import numpy as np

        gaps = np.abs(positives / self.totals - self.means) * self.weights
        # Summed in bin order, as the task's loop sums.
        total = np.zeros(len(positives))
        for j in range(gaps.shape[1]):
            total = total + gaps[:, j]
        return total


def consistency_test(
    y: IntArray, p: FloatArray, *, n_bins: int, n_resamples: int = 1000, seed: int = 0
) -> ConsistencyTest:
    """The consistency-resampling test of the task's ECE on test labels ``y`` and ``p``."""
    import numpy as np

    rng = np.random.RandomState(seed)
    labels = np.asarray(y, dtype=np.float64)
    prob = np.asarray(p, dtype=np.float64)
    if len(prob) > MAX_ROWS:
        keep = np.sort(rng.choice(len(prob), MAX_ROWS, replace=False))
        labels, prob = labels[keep], prob[keep]
    bins = _TaskBins.of(prob, n_bins)
    n_rows, n_used = len(prob), len(bins.totals)
    indicator = np.zeros((n_rows, n_used))
    indicator[np.arange(n_rows), bins.bins] = 1.0
    observed = float(bins.ece((labels @ indicator)[None, :])[0])
    per_chunk = max(1, CHUNK_DRAWS // max(1, n_rows))
    null: list[FloatArray] = []
    for start in range(0, n_resamples, per_chunk):
        size = min(per_chunk, n_resamples - start)
        draws = (rng.uniform(size=(size, n_rows)) < prob).astype(np.float64)
        null.append(bins.ece(draws @ indicator))
    values = np.concatenate(null) if null else np.zeros(0)
    # Ties count as at least as large: the test stays valid for discrete ECEs.
    extreme = int(np.sum(values >= observed - 1e-12))
    return ConsistencyTest(
        statistic="task ECE",
        observed=observed,
        p_value=(1 + extreme) / (1 + len(values)),
        n_resamples=len(values),
        n_rows=n_rows,
        null_median=float(np.median(values)) if len(values) else float("nan"),
    )
