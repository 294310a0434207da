"""The loss-threshold membership attack (Yeom et al. 2018) and its metrics.

A model fits its training rows better than unseen rows, so a low loss on
``(x, y)`` is evidence that the row was a member. The attack's score is
``-loss``; it needs no shadow models, only the target's per-row loss with the
true label. Reported as in the membership-inference literature (Carlini et al.
2022): the ROC AUC, and the true-positive rate at a low false-positive rate,
which is what matters to a patient whose record is singled out.

Works from losses, so it serves any model: a torch program's own
binary cross-entropy (:meth:`~.nn.TorchClassifier.row_losses`) or
:func:`log_loss_per_row` of a scikit-learn model's probabilities.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

LOW_FPR = 0.01
"""The false-positive rate at which SPEC §7.3 reports the true-positive rate."""


def _scores_and_truth(member: Any, nonmember: Any) -> tuple[FloatArray, FloatArray]:
    import numpy as np

    member = np.asarray(member, dtype=np.float64).ravel()
    nonmember = np.asarray(nonmember, dtype=np.float64).ravel()
    if not len(member) or not len(nonmember):
        raise ValueError(
            f"need members and non-members, got {len(member)} and {len(nonmember)} scores"
        )
    if not (np.isfinite(member).all() and np.isfinite(nonmember).all()):
        raise ValueError("attack scores must be finite")
    scores = np.concatenate([member, nonmember])
    truth = np.concatenate([np.ones(len(member)), np.zeros(len(nonmember))])
    return scores, truth


def attack_auc(member_scores: Any, nonmember_scores: Any) -> float:
    """ROC AUC of "higher score means member"; 0.5 is chance, higher leaks more.

    The Mann-Whitney form with tied scores counted as one half, so it equals
    ``sklearn.metrics.roc_auc_score``.
    """
    import numpy as np
    from scipy.stats import rankdata

    scores, truth = _scores_and_truth(member_scores, nonmember_scores)
    n_member = int(truth.sum())
    n_nonmember = len(truth) - n_member
    ranks = rankdata(scores)  # average ranks: ties count one half
    u = float(np.sum(ranks[truth == 1])) - n_member * (n_member + 1) / 2.0
    return u / (n_member * n_nonmember)


def tpr_at_fpr(member_scores: Any, nonmember_scores: Any, fpr: float) -> float:
    """Largest true-positive rate of a threshold whose false-positive rate is at most ``fpr``.

    The attack says "member" for scores at or above a threshold. Over every
    threshold that flags at most ``floor(fpr * n_nonmember)`` non-members, the
    best fraction of members flagged. With 200 non-members, 1% FPR allows two
    false positives; with fewer than ``1 / fpr`` non-members it allows none, and
    the value is then the fraction of members scored above every non-member.
    """
    import numpy as np

    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"fpr must lie in [0, 1], got {fpr}")
    _scores_and_truth(member_scores, nonmember_scores)  # validation only
    member = np.sort(np.asarray(member_scores, dtype=np.float64).ravel())
    nonmember = np.sort(np.asarray(nonmember_scores, dtype=np.float64).ravel())[::-1]
    allowed = int(np.floor(fpr * len(nonmember) + 1e-12))  # 1e-12: 0.01 * 200 is 2, not 1.99..
    # Flagging at most `allowed` non-members means a threshold above the
    # (allowed+1)-th largest non-member score; all members above it are caught.
    if allowed >= len(nonmember):
        return 1.0
    bar = nonmember[allowed]
    caught = len(member) - int(np.searchsorted(member, bar, side="right"))
    return caught / len(member)


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


def log_loss_per_row(prob: Any, y: Any, *, eps: float = 1e-15) -> FloatArray:
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
