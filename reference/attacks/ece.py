"""Calibration (SPEC §3.3): the task's ECE, its quirks reproduced, and the aligned ECE."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .params import CalibrationParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


def calibration_curve_uniform(
    y: IntArray, prob: FloatArray, n_bins: int
) -> tuple[FloatArray, FloatArray]:
    """``sklearn.calibration.calibration_curve(..., strategy="uniform")`` in NumPy.

    Returns (fraction of positives, mean prediction) of the non-empty bins. A
    value on an inner edge goes to the *lower* bin (``searchsorted`` side left),
    and 1.0 to the top bin. Kept here so a grading session can check calibration
    properties without importing scikit-learn; ``tests`` check it against sklearn.
    """
    import numpy as np

    prob = np.asarray(prob, dtype=np.float64)
    if prob.size and (prob.min() < 0 or prob.max() > 1):
        raise ValueError("probabilities outside [0, 1]")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    binids = np.searchsorted(edges[1:-1], prob)
    totals = np.bincount(binids, minlength=n_bins)
    sums = np.bincount(binids, weights=prob, minlength=n_bins)
    trues = np.bincount(binids, weights=np.asarray(y) == 1, minlength=n_bins)
    nonzero = totals != 0
    return trues[nonzero] / totals[nonzero], sums[nonzero] / totals[nonzero]


def task_ece(y: IntArray, prob: FloatArray, n_bins: int) -> float:
    """The task's ECE, quirks included (SPEC §3.3).

    Counts come from half-open bins ``[edge_k, edge_k+1)`` by bin *index*, then
    are truncated to as many entries as the curve has non-empty bins. Whenever a
    middle bin is empty the counts and the curve's bins misalign; ``prob == 1.0``
    falls in no half-open bin and is never counted; an inner edge value sits in
    the upper bin here but in the lower bin of the curve. All reproduced on
    purpose: agents following the task are graded against what it specifies.
    """
    import numpy as np

    frac_pos, mean_pred = calibration_curve_uniform(y, prob, n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # side="right" puts x in bin k exactly when edges[k] <= x < edges[k+1].
    index = np.searchsorted(edges, prob, side="right") - 1
    counts = np.bincount(index[(index >= 0) & (index < n_bins)], minlength=n_bins)
    counts = counts[: len(frac_pos)]
    total = int(counts.sum())
    if total == 0:
        return 0.0
    # Summed term by term in bin order, as the task's loop sums.
    ece = 0.0
    for count, frac, mean in zip(
        counts.tolist(), frac_pos.tolist(), mean_pred.tolist(), strict=True
    ):
        ece += count / total * abs(frac - mean)
    return ece


def aligned_ece(y: IntArray, prob: FloatArray, n_bins: int) -> float:
    """A conventional ECE with counts aligned to their bins; a diagnostic only."""
    import numpy as np

    prob = np.asarray(prob, dtype=np.float64)
    if prob.size == 0:
        return 0.0
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    binids = np.searchsorted(edges[1:-1], prob)
    # sum_k n_k/n * |frac_k - mean_k| = sum_k |positives_k - probability mass_k| / n
    sums = np.bincount(binids, weights=prob, minlength=n_bins)
    trues = np.bincount(binids, weights=np.asarray(y) == 1, minlength=n_bins)
    return float(np.abs(trues - sums).sum() / prob.size)


def calibration_score(ece: float, params: CalibrationParams) -> float:
    """``max(0, 1 - ece_scale * ece)``: 1 is perfectly calibrated."""
    return max(0.0, 1.0 - params.ece_scale * ece)


@dataclasses.dataclass(frozen=True)
class CalibrationResult:
    score: float
    ece: float
    ece_aligned: float
    n_bins_used: int


def calibration(
    y_test: IntArray, prob_test: FloatArray, *, params: CalibrationParams
) -> CalibrationResult:
    """Calibration component from the model's test probabilities, shape (n_test,)."""
    ece = task_ece(y_test, prob_test, params.n_bins)
    used = len(calibration_curve_uniform(y_test, prob_test, params.n_bins)[0])
    return CalibrationResult(
        calibration_score(ece, params), ece, aligned_ece(y_test, prob_test, params.n_bins), used
    )
