"""True-positive rates at low false-positive rates, only where the non-members allow them.

Carlini et al. (2022) judge a membership attack by its TPR at a low FPR. The
estimate rests on the threshold that lets through a share ``fpr`` of the
non-members, an extreme quantile of their scores: with ``1/fpr`` non-members
it is their single highest score, and the TPR there is noise. Measured on 114
members and 114 non-members of a model that leaks nothing at all, the TPR at
1% FPR read that way had a 95th percentile of 0.053, which is what an audit of
a logistic model once reported as leakage (issue 18).

So a point is reported only with at least :data:`MIN_FALSE_POSITIVES` allowed
false positives, ``ceil(10 / fpr)`` non-members (the empirical FPR of the
chosen threshold then has a relative standard error of about 1/sqrt(10)), and
always with a Clopper-Pearson interval of the TPR: the members found above
that threshold are a binomial count. Otherwise the point says
``"not estimable: needs N non-members"``.

The graded semantics keep their own rule (:func:`~..attacks.privacy.attack_result`);
this is the own-data profile's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..attacks.privacy import MembershipAttack

    FloatArray = npt.NDArray[np.float64]

MIN_FALSE_POSITIVES = 10
"""False positives a threshold must be allowed before its TPR is reported."""

LEVEL = 0.95
"""Confidence of the Clopper-Pearson interval."""


@dataclasses.dataclass(frozen=True)
class LowFPRPoint:
    """The TPR at one false-positive rate with its interval, or why there is none.

    ``tpr`` is the largest TPR of a threshold whose empirical FPR is at most
    ``fpr``; ``tpr_low`` and ``tpr_high`` its Clopper-Pearson interval over the
    members; ``fpr_achieved`` the empirical FPR of that threshold. All None,
    with ``reason`` set, when ``n_nonmembers < min_nonmembers``.
    """

    fpr: float
    estimable: bool
    tpr: float | None
    tpr_low: float | None
    tpr_high: float | None
    fpr_achieved: float | None
    n_members: int
    n_nonmembers: int
    min_nonmembers: int
    reason: str | None


def min_nonmembers(fpr: float) -> int:
    """Non-members needed for a TPR at ``fpr``: ``ceil(MIN_FALSE_POSITIVES / fpr)``."""
    # The small slack keeps 10 / 0.01 at 1000 despite its binary rounding.
    return math.ceil(MIN_FALSE_POSITIVES / fpr - 1e-9)


def clopper_pearson(successes: int, trials: int, *, level: float = LEVEL) -> tuple[float, float]:
    """The exact (Clopper-Pearson) interval of a binomial proportion, via scipy."""
    from scipy.stats import binomtest

    interval = binomtest(successes, trials).proportion_ci(confidence_level=level, method="exact")
    return float(interval.low), float(interval.high)


def low_fpr_point(member_scores: Any, nonmember_scores: Any, fpr: float) -> LowFPRPoint:
    """The TPR at ``fpr`` of "higher score means member", with its interval, or why not.

    Parameters
    ----------
    member_scores, nonmember_scores
        Finite attack scores, shapes (n_m,) and (n_n,).
    fpr
        The false-positive rate in (0, 1).
    """
    import numpy as np

    if not 0.0 < fpr < 1.0:
        raise ValueError(f"fpr must lie in (0, 1), got {fpr}")
    members = np.asarray(member_scores, dtype=np.float64).ravel()
    nonmembers = np.asarray(nonmember_scores, dtype=np.float64).ravel()
    needed = min_nonmembers(fpr)
    n_m, n_n = len(members), len(nonmembers)
    if n_n < needed or not n_m:
        reason = (
            f"not estimable: needs {needed} non-members"
            if n_n < needed
            else "not estimable: no members"
        )
        return LowFPRPoint(fpr, False, None, None, None, None, n_m, n_n, needed, reason)
    # "Member" at scores >= t. The loosest threshold with at most floor(fpr * n_n)
    # non-members at or above it: a tie that would let more through is excluded whole.
    allowed = math.floor(fpr * n_n + 1e-9)
    ranked = np.sort(nonmembers)[::-1]
    # Thresholds just above a non-member score admit only the scores above it.
    if allowed >= n_n:
        threshold = -np.inf
    else:
        cut = ranked[allowed]  # the (allowed+1)-th highest non-member score
        threshold = np.nextafter(cut, np.inf)
    false_positives = int(np.sum(nonmembers >= threshold))
    found = int(np.sum(members >= threshold))
    low, high = clopper_pearson(found, n_m)
    return LowFPRPoint(
        fpr, True, found / n_m, low, high, false_positives / n_n, n_m, n_n, needed, None
    )


def low_fpr_points(
    member_scores: Any, nonmember_scores: Any, fprs: Sequence[float]
) -> list[LowFPRPoint]:
    return [low_fpr_point(member_scores, nonmember_scores, f) for f in fprs]


def attack_record(attack: MembershipAttack, fprs: Sequence[float]) -> dict[str, Any]:
    """An attack's JSON record with the own-data profile's low-FPR points in place."""
    record = attack.as_dict()
    record["low_fpr"] = [
        dataclasses.asdict(point)
        for point in low_fpr_points(attack.member_scores, attack.nonmember_scores, fprs)
    ]
    return record
