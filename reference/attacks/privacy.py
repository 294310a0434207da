"""Membership attacks' metrics, and the loss-threshold attack (Yeom et al. 2018).

An attack gives each queried row a score, higher meaning "member". From the
members' and non-members' scores come the ROC curve (tie-aware: tied scores
form one threshold), its AUC, and the true-positive rate at a low
false-positive rate, which is what matters to a patient whose record is
singled out (Carlini et al. 2022). A TPR at FPR ``f`` needs at least
``ceil(1/f)`` non-members to mean anything (below that the first false positive
already exceeds ``f``): :func:`attack_result` then says so (``estimable=False``)
instead of printing a number, while :func:`tpr_at_fpr` (SPEC §7.3's diagnostic)
always answers, as the specification asks.

The loss-threshold attack needs no shadow model: a model fits its training rows
better than unseen ones, so a low loss on ``(x, y)`` is evidence of membership.
It works from losses (a torch program's own
:meth:`~..models.torch_adapter.TorchClassifier.row_losses`) or from probabilities
(:func:`loss_threshold_attack`). LiRA (:mod:`.lira`) reports through the same
:class:`MembershipAttack` records.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

LOW_FPR = 0.01
"""The false-positive rate at which SPEC §7.3 reports the true-positive rate."""

LOW_FPRS = (0.01, 0.001)
"""False-positive rates at which the TPR is reported (1% and 0.1%)."""

PROBABILITY_CLIP = 1e-12
"""Probabilities are clipped to [PROBABILITY_CLIP, 1 - PROBABILITY_CLIP] before a log,
so a model answering exactly 0 or 1 gives a finite loss (at most about 27.6)."""

PLOT_POINTS = 400
"""Most ROC points kept for a plot; they are log-spaced in FPR, where the detail is."""


# ------------------------------------------------------------------------ ROC


@dataclasses.dataclass(frozen=True)
class LowFPRPoint:
    """The TPR at one false-positive rate, or why there is none.

    ``tpr`` is the largest TPR among thresholds whose FPR is at most ``fpr``;
    None when ``n_nonmembers < min_nonmembers = ceil(1/fpr)``.
    """

    fpr: float
    tpr: float | None
    estimable: bool
    n_nonmembers: int
    min_nonmembers: int


def _roc(member_scores: FloatArray, nonmember_scores: FloatArray) -> tuple[FloatArray, FloatArray]:
    """ROC points (fpr, tpr) at every distinct threshold, from (0, 0) to (1, 1).

    Higher scores mean "member". Tied scores form one threshold, so the curve
    (and its area) does not depend on the order of tied rows.
    """
    import numpy as np

    scores = np.concatenate([member_scores, nonmember_scores])
    is_member = np.concatenate(
        [np.ones(len(member_scores), dtype=bool), np.zeros(len(nonmember_scores), dtype=bool)]
    )
    order = np.argsort(-scores, kind="stable")
    scores, is_member = scores[order], is_member[order]
    last_of_tie = np.flatnonzero(np.r_[scores[1:] != scores[:-1], True])
    tp = np.cumsum(is_member)[last_of_tie]
    fp = (last_of_tie + 1) - tp
    fpr = np.r_[0.0, fp / max(len(nonmember_scores), 1)]
    tpr = np.r_[0.0, tp / max(len(member_scores), 1)]
    return fpr, tpr


def _auc(fpr: FloatArray, tpr: FloatArray) -> float:
    """Trapezoidal area: ties between a member and a non-member count one half."""
    import numpy as np

    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


def _tpr_at(fpr: FloatArray, tpr: FloatArray, target: float, n_nonmembers: int) -> LowFPRPoint:
    import numpy as np

    needed = math.ceil(1.0 / target - 1e-9)
    if n_nonmembers < needed:
        return LowFPRPoint(target, None, False, n_nonmembers, needed)
    within = fpr <= target + 1e-15
    return LowFPRPoint(target, float(np.max(tpr[within])), True, n_nonmembers, needed)


def _plot_points(
    fpr: FloatArray, tpr: FloatArray, n_nonmembers: int
) -> tuple[FloatArray, FloatArray]:
    """At most :data:`PLOT_POINTS` points of the ROC step function, log-spaced in FPR.

    Each grid FPR ``g`` gets the TPR of the last threshold with FPR at most ``g``;
    the grid is 0, then log-spaced from ``1/n_nonmembers`` (the smallest non-zero
    FPR) to 1.
    """
    import numpy as np

    if len(fpr) <= PLOT_POINTS:
        return fpr, tpr
    low = 1.0 / max(n_nonmembers, 1)
    grid = np.unique(np.r_[0.0, np.geomspace(low, 1.0, PLOT_POINTS - 1), fpr[fpr > 0].min()])
    at = np.searchsorted(fpr, grid + 1e-15, side="right") - 1
    # fpr is non-decreasing; the last index with fpr <= g carries the largest tpr
    # (at g = 0: the members scored above every non-member).
    return fpr[at], tpr[at]


@dataclasses.dataclass(frozen=True, eq=False)
class MembershipAttack:
    """One attack's result; higher scores mean "member".

    Attributes
    ----------
    member_scores, nonmember_scores
        Per-row attack scores, shapes (n_members,) and (n_nonmembers,), kept for
        the bootstrap; left out of :meth:`as_dict`.
    roc_fpr, roc_tpr
        ROC points for a plot (log-FPR friendly, at most ``PLOT_POINTS``).
    """

    name: str
    auc: float
    low_fpr: tuple[LowFPRPoint, ...]
    roc_fpr: tuple[float, ...]
    roc_tpr: tuple[float, ...]
    n_members: int
    n_nonmembers: int
    member_scores: FloatArray
    nonmember_scores: FloatArray
    notes: tuple[str, ...] = ()

    def tpr_at(self, fpr: float) -> LowFPRPoint:
        for point in self.low_fpr:
            if point.fpr == fpr:
                return point
        raise KeyError(fpr)

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "auc": self.auc,
            "low_fpr": [dataclasses.asdict(point) for point in self.low_fpr],
            "roc": {"fpr": list(self.roc_fpr), "tpr": list(self.roc_tpr)},
            "n_members": self.n_members,
            "n_nonmembers": self.n_nonmembers,
            "notes": list(self.notes),
        }


def attack_result(
    name: str,
    member_scores: FloatArray,
    nonmember_scores: FloatArray,
    *,
    fprs: Sequence[float] = LOW_FPRS,
    notes: tuple[str, ...] = (),
) -> MembershipAttack:
    """AUC, low-FPR points and plot curve of any per-row membership scores."""
    import numpy as np

    if np.ndim(member_scores) != 1 or np.ndim(nonmember_scores) != 1:
        raise ValueError("membership scores must be one-dimensional, one score per row")
    members, nonmembers = _checked_scores(member_scores, nonmember_scores)
    fpr, tpr = _roc(members, nonmembers)
    plot_fpr, plot_tpr = _plot_points(fpr, tpr, len(nonmembers))
    return MembershipAttack(
        name=name,
        auc=_auc(fpr, tpr),
        low_fpr=tuple(_tpr_at(fpr, tpr, f, len(nonmembers)) for f in fprs),
        roc_fpr=tuple(plot_fpr.tolist()),
        roc_tpr=tuple(plot_tpr.tolist()),
        n_members=len(members),
        n_nonmembers=len(nonmembers),
        member_scores=members,
        nonmember_scores=nonmembers,
        notes=notes,
    )


def loss_threshold_attack(
    y_members: IntArray,
    p_members: FloatArray,
    y_nonmembers: IntArray,
    p_nonmembers: FloatArray,
    *,
    fprs: Sequence[float] = LOW_FPRS,
) -> MembershipAttack:
    """Yeom et al. (2018): lower cross-entropy on the true label means "member".

    Parameters
    ----------
    y_members, p_members
        Labels and the target's positive-class probabilities on member rows, (n_m,).
    y_nonmembers, p_nonmembers
        The same on non-member rows, (n_n,).
    """
    return attack_result(
        "loss_threshold",
        -log_loss_per_row(p_members, y_members),
        -log_loss_per_row(p_nonmembers, y_nonmembers),
        fprs=fprs,
    )


def _checked_scores(member: Any, nonmember: Any) -> tuple[FloatArray, FloatArray]:
    """Members' and non-members' scores as flat float64 arrays: at least one each, finite."""
    import numpy as np

    members = np.asarray(member, dtype=np.float64).ravel()
    nonmembers = np.asarray(nonmember, dtype=np.float64).ravel()
    if not len(members) or not len(nonmembers):
        raise ValueError(
            f"need members and non-members, got {len(members)} and {len(nonmembers)} scores"
        )
    if not (np.isfinite(members).all() and np.isfinite(nonmembers).all()):
        raise ValueError("attack scores must be finite")
    return members, nonmembers


def attack_auc(member_scores: Any, nonmember_scores: Any) -> float:
    """ROC AUC of "higher score means member"; 0.5 is chance, higher leaks more.

    Tied scores count one half, so it equals ``sklearn.metrics.roc_auc_score``.
    """
    return _auc(*_roc(*_checked_scores(member_scores, nonmember_scores)))


def tpr_at_fpr(member_scores: Any, nonmember_scores: Any, fpr: float) -> float:
    """Largest true-positive rate of a threshold whose false-positive rate is at most ``fpr``.

    The attack says "member" for scores at or above a threshold. With 200
    non-members, 1% FPR allows two false positives; with fewer than ``1 / fpr``
    non-members it allows none, and the value is then the fraction of members
    scored above every non-member (:func:`attack_result` reports such a point
    as not estimable instead).
    """
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must lie in [0, 1], got {fpr}")
    fprs, tprs = _roc(*_checked_scores(member_scores, nonmember_scores))
    return float(tprs[fprs <= fpr + 1e-12].max())


@dataclasses.dataclass(frozen=True)
class LossAttackResult:
    auc: float
    """ROC AUC of ``-loss`` separating members from non-members; 0.5 is no leakage."""
    tpr_at_low_fpr: float
    """True-positive rate at :data:`LOW_FPR` false positives."""
    n_members: int
    n_nonmembers: int


def loss_attack(member_losses: Any, nonmember_losses: Any) -> LossAttackResult:
    """The loss-threshold attack from per-row losses (true labels), shapes (m,) and (k,)."""
    import numpy as np

    member = -np.asarray(member_losses, dtype=np.float64)
    nonmember = -np.asarray(nonmember_losses, dtype=np.float64)
    return LossAttackResult(
        attack_auc(member, nonmember),
        tpr_at_fpr(member, nonmember, LOW_FPR),
        len(member),
        len(nonmember),
    )


def log_loss_per_row(prob: Any, y: Any, *, eps: float = PROBABILITY_CLIP) -> FloatArray:
    """Binary cross-entropy of each row from ``P(class 1)``, clipped to ``[eps, 1 - eps]``.

    For models that give probabilities only; the clip keeps a confident
    mistake finite (the attack ranks, so the clip changes no order).
    """
    import numpy as np

    p = np.clip(np.asarray(prob, dtype=np.float64), eps, 1.0 - eps)
    truth = np.asarray(y) == 1
    losses: FloatArray = -np.where(truth, np.log(p), np.log1p(-p))
    return losses


@dataclasses.dataclass(frozen=True)
class Difference:
    """``a - b`` of a statistic and its bootstrap percentile interval."""

    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0


def bootstrap_auc_difference(
    a_members: Any,
    a_nonmembers: Any,
    b_members: Any,
    b_nonmembers: Any,
    *,
    n_resamples: int = 2000,
    seed: int = 42,
    level: float = 0.95,
) -> Difference:
    """Paired bootstrap of ``AUC(a) - AUC(b)`` for two attacks on the same rows.

    Both models are scored on the same members and non-members, so each
    resample draws members and non-members (separately, keeping their counts)
    once and scores both attacks on that draw; the pairing removes the rows'
    shared difficulty from the interval. Percentile interval.
    """
    import numpy as np

    a_m, a_n = np.asarray(a_members, np.float64), np.asarray(a_nonmembers, np.float64)
    b_m, b_n = np.asarray(b_members, np.float64), np.asarray(b_nonmembers, np.float64)
    if a_m.shape != b_m.shape or a_n.shape != b_n.shape:
        raise ValueError("the two attacks must score the same members and non-members")
    rng = np.random.RandomState(seed)
    diffs = np.empty(n_resamples)
    for i in range(n_resamples):
        m = rng.randint(0, len(a_m), len(a_m))
        n = rng.randint(0, len(a_n), len(a_n))
        diffs[i] = attack_auc(a_m[m], a_n[n]) - attack_auc(b_m[m], b_n[n])
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(diffs, [tail, 1.0 - tail])
    return Difference(
        attack_auc(a_m, a_n) - attack_auc(b_m, b_n), float(low), float(high), level, n_resamples
    )


def bootstrap_mean_auc_difference(
    a: Sequence[tuple[Any, Any]],
    b: Sequence[tuple[Any, Any]],
    *,
    n_resamples: int = 1000,
    seed: int = 42,
    level: float = 0.95,
) -> Difference:
    """Paired bootstrap of ``mean_k [AUC(a_k) - AUC(b_k)]`` over k replicates on shared rows.

    ``a[k]`` and ``b[k]`` are ``(positive_scores, negative_scores)`` of two
    scorers (say, a model trained with seed k with and without a defence) on
    the same positive and negative rows, in the same order for every k. Each
    resample draws positives and negatives (separately, keeping their counts)
    once and scores every replicate on that draw, so the interval holds the
    rows' sampling noise while the mean over k averages the training noise.
    Used for AUROCs (positives = label 1) and membership AUCs (members) alike.
    """
    import numpy as np

    if not a or len(a) != len(b):
        raise ValueError(f"need as many replicates of a as of b, got {len(a)} and {len(b)}")
    pairs = [
        tuple(np.asarray(scores, np.float64) for scores in (*a_k, *b_k))
        for a_k, b_k in zip(a, b, strict=True)
    ]
    shapes = {tuple(part.shape for part in pair) for pair in pairs}
    m, n = pairs[0][0].shape, pairs[0][1].shape
    if shapes != {(m, n, m, n)}:
        raise ValueError("every scorer must score the same positives and negatives")

    def mean_difference(rows_m: Any, rows_n: Any) -> float:
        return float(
            np.mean(
                [
                    attack_auc(am[rows_m], an[rows_n]) - attack_auc(bm[rows_m], bn[rows_n])
                    for am, an, bm, bn in pairs
                ]
            )
        )

    rng = np.random.RandomState(seed)
    diffs = np.empty(n_resamples)
    for i in range(n_resamples):
        diffs[i] = mean_difference(rng.randint(0, m[0], m[0]), rng.randint(0, n[0], n[0]))
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(diffs, [tail, 1.0 - tail])
    everything = mean_difference(np.arange(m[0]), np.arange(n[0]))
    return Difference(everything, float(low), float(high), level, n_resamples)
