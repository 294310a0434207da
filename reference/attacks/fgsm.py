"""FGSM robustness (SPEC §3.1): a surrogate's signs, the label-dependent step, the AUROC drop.

The white-box form of §7.2, through the audited model's own gradient, is in
:mod:`.whitebox`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .budget import Budget
from .classifier import Classifier, draw_rows, positive_proba
from .params import FGSMParams, SurrogateParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


def fit_surrogate_sign(params: SurrogateParams, X: FloatArray, y: IntArray) -> FloatArray:
    """Sign of the surrogate's coefficient row, shape (n_features,).

    The surrogate is fitted on the training rows; the sign is taken in its own
    (scaled) space but applied to raw features, exactly as the task does, which
    is why one epsilon has very different effects on features of different scales.
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    logistic = LogisticRegression(
        max_iter=params.max_iter,
        C=params.C,
        class_weight=None if params.class_weight == "none" else params.class_weight,
        random_state=params.random_state,
    )
    surrogate = make_pipeline(StandardScaler(), logistic) if params.scaler else logistic
    surrogate.fit(X, y)
    sign: FloatArray = np.sign(np.asarray(logistic.coef_, dtype=np.float64)[0])
    return sign


def fgsm_perturb(
    X: FloatArray, y: IntArray, epsilon: float | FloatArray, sign: FloatArray
) -> FloatArray:
    """Move each row by ``epsilon`` per feature against its own label.

    Rows labelled 1 step along ``-sign`` (towards class 0) and rows labelled 0
    along ``+sign``. ``epsilon`` is one number or a per-feature budget of shape
    (d,). Shapes: X (n, d), y (n,), sign (d,) -> (n, d).
    """
    import numpy as np

    step = epsilon * sign  # computed once, as the row-wise form computes it per row
    return np.where(np.asarray(y)[:, None] == 1, X - step, X + step)


@dataclasses.dataclass(frozen=True)
class FGSMResult:
    score: float
    auroc_clean: float | None
    auroc_adversarial: float | None
    auroc_drop: float | None
    n_samples: int
    single_class: bool


def fgsm_sample(
    X_test: FloatArray,
    y_test: IntArray,
    *,
    sign: FloatArray,
    params: FGSMParams,
    budget: Budget | None = None,
) -> tuple[IntArray, FloatArray]:
    """The drawn test rows' indices, shape (k,), and their FGSM copies, shape (k, d).

    ``budget`` (:func:`fgsm_budget`) gives per-feature steps and the clipping
    box; without it every feature moves ``params.epsilon`` unclipped (§3.1).
    """
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    if budget is None:
        return idx, fgsm_perturb(X_test[idx], y_test[idx], params.epsilon, sign)
    return idx, budget.clip(fgsm_perturb(X_test[idx], y_test[idx], budget.step, sign))


def fgsm_score(
    y_sample: IntArray, p_clean: FloatArray, p_adversarial: FloatArray, *, params: FGSMParams
) -> FGSMResult:
    """``max(0, 1 - max(0, AUROC_clean - AUROC_adversarial))`` from the model's answers."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    if np.unique(y_sample).size < 2:
        # AUROC is undefined on one class; the task scores that as a coin flip.
        return FGSMResult(params.single_class_score, None, None, None, len(y_sample), True)
    clean = float(roc_auc_score(y_sample, p_clean))
    adversarial = float(roc_auc_score(y_sample, p_adversarial))
    drop = max(0.0, clean - adversarial)
    return FGSMResult(max(0.0, 1.0 - drop), clean, adversarial, drop, len(y_sample), False)


def fgsm_robustness(
    model: Classifier,
    X_test: FloatArray,
    y_test: IntArray,
    *,
    sign: FloatArray,
    params: FGSMParams,
    budget: Budget | None = None,
) -> FGSMResult:
    """FGSM robustness of ``model`` on ``params.n_samples`` drawn test rows.

    Parameters
    ----------
    sign
        :func:`fit_surrogate_sign` of the training rows, shape (n_features,).
    budget
        :func:`fgsm_budget` of the training rows; ``None`` is §3.1's raw ``epsilon``.
    """
    import numpy as np

    idx, X_adv = fgsm_sample(X_test, y_test, sign=sign, params=params, budget=budget)
    both = positive_proba(model, np.concatenate([X_test[idx], X_adv]))
    return fgsm_score(y_test[idx], both[: len(idx)], both[len(idx) :], params=params)
