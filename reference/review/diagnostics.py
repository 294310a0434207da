"""Diagnostics a reviewer expects next to the SPS, from the full test set's (y, p).

None of these is graded or enters the SPS; they say how good and how calibrated
the model is, in the estimators a clinical reviewer would use:

- AUROC and the Brier score over every test row;
- the calibration slope and intercept of a logistic recalibration on the logit
  (Cox 1958; the "weak calibration" of Van Calster et al. 2019), and the
  calibration-in-the-large intercept with the slope fixed at 1;
- an equal-mass-bin ECE (Nixon et al. 2019; Roelofs et al. 2022 show equal-mass
  bins have less bias than equal-width ones) and a debiased L2 calibration error
  (Kumar, Liang and Ma 2019, "Verified Uncertainty Calibration", §5: subtract
  each bin's estimated sampling variance of the label mean, Bröcker 2012 /
  Ferro and Fricker 2012), reported next to the task's quirky ECE (SPEC §3.3),
  never instead of it;
- the reliability-diagram data (per-bin mean prediction, observed frequency and
  count, both binnings), kept for the HTML report's plot.

Every statistic here depends on the set of (y, p) pairs, not their order: bins
are cut at probability values, so tied probabilities always share a bin.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

LOGIT_CLIP = 1e-12
"""Probabilities are clipped to [LOGIT_CLIP, 1 - LOGIT_CLIP] before the logit, so a
model that answers exactly 0 or 1 gives a finite (if large, |logit| < 27.7) value."""

EQUAL_MASS_BINS = 15
"""Bins of the equal-mass ECE and of the debiased L2 error (Kumar et al. use 15 too)."""


def _checked(y: Any, p: Any) -> tuple[IntArray, FloatArray]:
    import numpy as np

    labels = np.asarray(y)
    prob = np.asarray(p, dtype=np.float64)
    if labels.ndim != 1 or prob.shape != labels.shape:
        raise ValueError(f"y and p must be 1-D of one length, got {labels.shape} and {prob.shape}")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("y must hold 0/1 labels")
    if prob.size and (not np.isfinite(prob).all() or prob.min() < 0 or prob.max() > 1):
        raise ValueError("p must hold probabilities in [0, 1]")
    return labels.astype(np.int64), prob


# ------------------------------------------------------------------ discrimination


def auroc(y: IntArray, p: FloatArray) -> float | None:
    """Area under the ROC curve; None when the rows hold a single class."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    labels, prob = _checked(y, p)
    if np.unique(labels).size < 2:
        return None
    return float(roc_auc_score(labels, prob))


def brier_score(y: IntArray, p: FloatArray) -> float:
    """Mean squared difference between probability and outcome; lower is better."""
    import numpy as np

    labels, prob = _checked(y, p)
    return float(np.mean((prob - labels) ** 2)) if labels.size else math.nan


# --------------------------------------------------------------- recalibration fit


@dataclasses.dataclass(frozen=True)
class Recalibration:
    """``logit P(y=1) = intercept + slope * logit(p)``, fitted by maximum likelihood.

    Perfect calibration is slope 1, intercept 0. A slope below 1 means the
    predictions are too extreme (overfitting), above 1 too timid.
    ``intercept_in_the_large`` is the intercept with the slope fixed at 1: above 0
    means the model under-predicts risk on average. Values are NaN when the fit
    does not converge (e.g. the logit separates the classes perfectly), and
    ``reason`` says why.
    """

    slope: float
    intercept: float
    intercept_in_the_large: float
    converged: bool
    reason: str | None = None


def _logit(p: FloatArray) -> FloatArray:
    import numpy as np

    q = np.clip(p, LOGIT_CLIP, 1.0 - LOGIT_CLIP)
    result: FloatArray = np.log(q) - np.log1p(-q)
    return result


def _newton_logistic(
    design: FloatArray, y: FloatArray, offset: FloatArray, *, max_iter: int = 100
) -> FloatArray | None:
    """Maximum-likelihood logistic coefficients by Newton's method with step halving.

    ``design`` is (n, k) with k of 1 or 2; the log-likelihood is concave, so
    Newton converges in a handful of steps unless the classes are separable,
    when the coefficients diverge and None is returned. The (k, k) normal
    equations are solved directly: nothing here needs scikit-learn's penalised,
    tolerance-stopped solvers.
    """
    import numpy as np

    def loglik(beta: FloatArray) -> float:
        eta = offset + design @ beta
        return float(np.sum(y * eta - np.logaddexp(0.0, eta)))

    beta = np.zeros(design.shape[1])
    current = loglik(beta)
    for _ in range(max_iter):
        eta = offset + design @ beta
        mu = 0.5 * (1.0 + np.tanh(0.5 * eta))  # a sigmoid that never overflows
        gradient = design.T @ (y - mu)
        hessian = (design * (mu * (1.0 - mu))[:, None]).T @ design
        try:
            step = np.linalg.solve(hessian, gradient)
        except np.linalg.LinAlgError:
            return None
        scale = 1.0
        while scale > 1e-10:
            candidate = beta + scale * step
            value = loglik(candidate)
            if value >= current - 1e-12 * abs(current):
                break
            scale *= 0.5
        beta, previous, current = candidate, current, value
        if np.max(np.abs(scale * step)) < 1e-10 or abs(current - previous) < 1e-14 * max(
            1.0, abs(current)
        ):
            return beta if np.all(np.abs(beta) < 1e6) else None
    return None


def recalibration(y: IntArray, p: FloatArray) -> Recalibration:
    """Calibration slope and intercept (logistic recalibration on the logit of ``p``)."""
    import numpy as np

    labels, prob = _checked(y, p)

    def undefined(reason: str) -> Recalibration:
        return Recalibration(math.nan, math.nan, math.nan, False, reason)

    if labels.size == 0 or np.unique(labels).size < 2:
        return undefined("the test rows hold one class; a recalibration needs both")
    z = _logit(prob)
    positives, negatives = z[labels == 1], z[labels == 0]
    if positives.min() >= negatives.max() or positives.max() <= negatives.min():
        # (Quasi-)complete separation on the logit: the slope's likelihood has no
        # maximum, it grows without bound.
        return undefined(
            "the predictions separate the classes perfectly, so the recalibration's "
            "likelihood has no maximum (the slope grows without bound)"
        )
    target = labels.astype(np.float64)
    joint = _newton_logistic(np.column_stack([np.ones_like(z), z]), target, np.zeros_like(z))
    large = _newton_logistic(np.ones((z.size, 1)), target, z)
    if joint is None or large is None:
        return undefined("the logistic recalibration did not converge (its coefficients diverge)")
    return Recalibration(float(joint[1]), float(joint[0]), float(large[0]), True)


# --------------------------------------------------------------------------- bins


@dataclasses.dataclass(frozen=True)
class ReliabilityBins:
    """Per-bin data of a reliability diagram; arrays of shape (n_bins_nonempty,).

    ``lower`` and ``upper`` are the smallest and largest probability in the bin
    (not the cut points), so a plot can draw where the bin's rows actually lie.
    """

    strategy: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    mean_predicted: tuple[float, ...]
    observed_frequency: tuple[float, ...]
    count: tuple[int, ...]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def equal_mass_bin_ids(p: FloatArray, n_bins: int) -> IntArray:
    """Bin of each probability, bins holding about ``n/n_bins`` rows each, shape (n,).

    Cut points are the probabilities at ranks ``k*n/n_bins``; a probability equal
    to a cut point goes to the upper bin, so tied probabilities share a bin (which
    can then hold more than its share, and a bin can be empty). Ids are 0-based and
    increasing in ``p``; empty bins leave gaps.
    """
    import numpy as np

    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    prob = np.asarray(p, dtype=np.float64)
    if prob.size == 0:
        return np.zeros(0, dtype=np.int64)
    ranked = np.sort(prob)
    cuts = ranked[(np.arange(1, n_bins) * prob.size) // n_bins]
    ids: IntArray = np.searchsorted(cuts, prob, side="right").astype(np.int64)
    return ids


def uniform_bin_ids(p: FloatArray, n_bins: int) -> IntArray:
    """Equal-width bins on [0, 1], an inner edge value in the *lower* bin (scikit-learn's)."""
    import numpy as np

    edges = np.linspace(0.0, 1.0, n_bins + 1)
    ids: IntArray = np.searchsorted(edges[1:-1], np.asarray(p, dtype=np.float64)).astype(np.int64)
    return ids


def _bin_sums(
    y: IntArray, p: FloatArray, ids: IntArray, n_bins: int
) -> tuple[FloatArray, FloatArray, FloatArray]:
    import numpy as np

    counts: FloatArray = np.bincount(ids, minlength=n_bins).astype(np.float64)
    sums: FloatArray = np.bincount(ids, weights=p, minlength=n_bins).astype(np.float64)
    labels = y.astype(np.float64)
    positives: FloatArray = np.bincount(ids, weights=labels, minlength=n_bins).astype(np.float64)
    return counts, sums, positives


def reliability_bins(
    y: IntArray, p: FloatArray, *, n_bins: int, strategy: str = "equal-mass"
) -> ReliabilityBins:
    """Reliability-diagram data with ``strategy`` "equal-mass" or "uniform" bins."""
    import numpy as np

    labels, prob = _checked(y, p)
    if strategy == "equal-mass":
        ids = equal_mass_bin_ids(prob, n_bins)
    elif strategy == "uniform":
        ids = uniform_bin_ids(prob, n_bins)
    else:
        raise ValueError(f"strategy must be 'equal-mass' or 'uniform', got {strategy!r}")
    counts, sums, positives = _bin_sums(labels, prob, ids, n_bins)
    full = counts > 0
    lower = np.full(n_bins, np.inf)
    upper = np.full(n_bins, -np.inf)
    np.minimum.at(lower, ids, prob)
    np.maximum.at(upper, ids, prob)
    return ReliabilityBins(
        strategy=strategy,
        lower=tuple(lower[full].tolist()),
        upper=tuple(upper[full].tolist()),
        mean_predicted=tuple((sums[full] / counts[full]).tolist()),
        observed_frequency=tuple((positives[full] / counts[full]).tolist()),
        count=tuple(int(c) for c in counts[full]),
    )


def equal_mass_ece(y: IntArray, p: FloatArray, *, n_bins: int = EQUAL_MASS_BINS) -> float:
    """Plug-in L1 ECE over equal-mass bins: ``sum_b n_b/n |mean(y)_b - mean(p)_b|``."""
    import numpy as np

    labels, prob = _checked(y, p)
    if labels.size == 0:
        return math.nan
    counts, sums, positives = _bin_sums(labels, prob, equal_mass_bin_ids(prob, n_bins), n_bins)
    # n_b/n * |pos_b/n_b - sum_b/n_b| = |pos_b - sum_b| / n
    return float(np.abs(positives - sums).sum() / labels.size)


@dataclasses.dataclass(frozen=True)
class DebiasedCalibrationError:
    """Kumar et al. (2019) debiased estimate of the squared L2 calibration error.

    With ``a_b = mean(p)_b`` and ``f_b = mean(y)_b`` over the ``n_b`` rows of bin b,
    ``squared`` is ``sum_b n_b/n [(a_b - f_b)^2 - f_b (1 - f_b) / (n_b - 1)]``: the
    plug-in squared error minus an unbiased estimate of the variance of each bin's
    label mean. It is unbiased for the binned squared error and can be
    negative when the model is about calibrated; ``rms`` is ``sqrt(max(0, squared))``,
    on the probability scale like an ECE. A bin of one row has no variance
    estimate; Kumar et al. count its error as 0 (its weight ``n_b/n`` stays in
    the sum), and so does this estimator. Counting it uncorrected, as an
    earlier version did, added a full squared gap per lonely row: an upward
    bias exactly where bins are smallest.
    """

    squared: float
    rms: float
    plugin_rms: float
    n_bins_used: int


def debiased_l2_calibration_error(
    y: IntArray, p: FloatArray, *, n_bins: int = EQUAL_MASS_BINS
) -> DebiasedCalibrationError:
    """Debiased L2 calibration error over equal-mass bins (Kumar et al. 2019, §5)."""
    import numpy as np

    labels, prob = _checked(y, p)
    if labels.size == 0:
        return DebiasedCalibrationError(math.nan, math.nan, math.nan, 0)
    counts, sums, positives = _bin_sums(labels, prob, equal_mass_bin_ids(prob, n_bins), n_bins)
    full = counts > 0
    n_b, mean_p, mean_y = counts[full], sums[full] / counts[full], positives[full] / counts[full]
    plugin = (mean_p - mean_y) ** 2
    variance = mean_y * (1.0 - mean_y) / np.maximum(n_b - 1.0, 1.0)
    # Kumar et al.'s estimator: a bin of fewer than two rows contributes 0.
    debiased = np.where(n_b > 1, plugin - variance, 0.0)
    weights = n_b / labels.size
    squared = float(np.sum(weights * debiased))
    return DebiasedCalibrationError(
        squared,
        math.sqrt(max(0.0, squared)),
        math.sqrt(float(np.sum(weights * plugin))),
        int(full.sum()),
    )


# ---------------------------------------------------------------------- together


@dataclasses.dataclass(frozen=True)
class Diagnostics:
    """Everything :func:`diagnose` computes; :meth:`as_dict` is JSON-ready."""

    n: int
    n_positive: int
    auroc: float | None
    brier: float
    recalibration: Recalibration
    ece_task: float
    ece_task_aligned: float
    ece_equal_mass: float
    debiased_l2: DebiasedCalibrationError
    reliability_equal_mass: ReliabilityBins
    reliability_uniform: ReliabilityBins

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def reasons(self) -> dict[str, str]:
        """Why each undefined diagnostic is undefined, by its path in the audit report."""
        found: dict[str, str] = {}
        if self.auroc is None:
            found["diagnostics.auroc"] = "the test rows hold one class; an AUROC needs both"
        if self.recalibration.reason is not None:
            for key in ("slope", "intercept", "intercept_in_the_large"):
                found[f"diagnostics.recalibration.{key}"] = self.recalibration.reason
        if self.n == 0:
            found["diagnostics"] = "no test rows"
        return found


def diagnose(
    y: IntArray, p: FloatArray, *, task_bins: int = 10, n_bins: int = EQUAL_MASS_BINS
) -> Diagnostics:
    """The reviewer's diagnostics of test probabilities ``p`` (shape (n,)) for labels ``y``.

    ``task_bins`` is the task's bin count (SPEC §3.3) for its ECE and for the
    uniform reliability diagram; ``n_bins`` the equal-mass bin count.
    """
    from ..attacks.ece import aligned_ece, task_ece

    labels, prob = _checked(y, p)
    return Diagnostics(
        n=int(labels.size),
        n_positive=int(labels.sum()),
        auroc=auroc(labels, prob),
        brier=brier_score(labels, prob),
        recalibration=recalibration(labels, prob),
        ece_task=task_ece(labels, prob, task_bins),
        ece_task_aligned=aligned_ece(labels, prob, task_bins),
        ece_equal_mass=equal_mass_ece(labels, prob, n_bins=n_bins),
        debiased_l2=debiased_l2_calibration_error(labels, prob, n_bins=n_bins),
        reliability_equal_mass=reliability_bins(labels, prob, n_bins=n_bins),
        reliability_uniform=reliability_bins(labels, prob, n_bins=task_bins, strategy="uniform"),
    )
