"""FGSM and PGD through the audited model's own gradient (SPEC §7.2, §7.3).

The model is anything with a :class:`Differentiable` interface (the
:class:`~..models.torch_adapter.TorchClassifier` adapter of a ``model.pt2``): these functions
never import torch. Perturbations are computed in float64 NumPy from the
gradient's sign, exactly as the specification writes them.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from .budget import Budget
from .classifier import draw_rows
from .params import FGSMParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


class Differentiable(Protocol):
    """A classifier that also gives input gradients and per-row losses."""

    def predict_proba(self, X: Any) -> Any: ...

    def predict(self, X: Any) -> Any: ...

    def loss_gradient(self, X: Any, y: Any) -> Any:
        """Gradient of the summed binary cross-entropy w.r.t. the rows, shape (n, d)."""
        ...

    def row_losses(self, X: Any, y: Any) -> Any:
        """Binary cross-entropy of each row, shape (n,)."""
        ...


def fgsm_whitebox_sample(
    model: Differentiable,
    X_test: FloatArray,
    y_test: IntArray,
    *,
    params: FGSMParams,
    budget: Budget,
) -> tuple[IntArray, FloatArray]:
    """The drawn rows' indices, shape (k,), and their white-box FGSM copies, (k, d).

    Rows are drawn as in §3.1 step 2. ``X_adv = X + e * sign(g)`` with ``g``
    the loss gradient at the row's own label: a step *up* the loss, so unlike
    the surrogate form no label-dependent direction is needed. A zero gradient
    component (a saturated sigmoid gives exactly zero) moves nothing.
    """
    import numpy as np

    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    X = X_test[idx]
    gradient = np.asarray(model.loss_gradient(X, y_test[idx]), dtype=np.float64)
    return idx, budget.clip(X + budget.step * np.sign(gradient))


def pgd_perturb(
    model: Differentiable, X: FloatArray, y: IntArray, *, budget: Budget, steps: int
) -> FloatArray:
    """``steps`` signed-gradient steps of ``alpha = 2.5 e / steps`` from ``X`` (no random start).

    After each step the rows are projected onto the box ``[X - e, X + e]``,
    then (with a clipping box in ``budget``) onto the training range. The
    step size is Madry et al.'s: large enough to reach any corner of the box
    in ``steps / 2.5`` steps and to move back along the way.
    """
    import numpy as np

    alpha = 2.5 * budget.step / steps
    low, high = X - budget.step, X + budget.step
    current = np.array(X, dtype=np.float64)
    for _ in range(steps):
        gradient = np.asarray(model.loss_gradient(current, y), dtype=np.float64)
        current = budget.clip(np.clip(current + alpha * np.sign(gradient), low, high))
    return current


@dataclasses.dataclass(frozen=True)
class PGDResult:
    auroc_adversarial: float | None
    """AUROC on the PGD copies of the FGSM rows; ``None`` if they hold one class."""
    steps: int


def pgd_auroc(
    model: Differentiable,
    X_test: FloatArray,
    y_test: IntArray,
    *,
    params: FGSMParams,
    budget: Budget,
) -> PGDResult:
    """The PGD diagnostic (§7.3) on the rows FGSM draws: lower means less robust."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    if params.pgd_steps is None:
        raise ValueError("fgsm.pgd_steps is not set: the variant asks for no PGD diagnostic")
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    y = y_test[idx]
    if np.unique(y).size < 2:
        return PGDResult(None, params.pgd_steps)
    X_adv = pgd_perturb(model, X_test[idx], y, budget=budget, steps=params.pgd_steps)
    p = np.asarray(model.predict_proba(X_adv), dtype=np.float64)[:, 1]
    return PGDResult(float(roc_auc_score(y, p)), params.pgd_steps)
