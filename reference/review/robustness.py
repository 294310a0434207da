"""Robustness beyond the FGSM component: white-box curves, and the model in training-std units.

A differentiable (torch) model is also attacked through its own gradient, FGSM
and PGD at every budget of the robustness curve; the boundary walk and
HopSkipJump step in training standard deviations, through :class:`StandardizedModel`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..attacks.budget import Budget
    from ..models.adapters import AuditedModel
    from .profile import OwnDataParams

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


class StandardizedModel:
    """The model seen in training-std coordinates ``z = x / std`` (the walk steps in them)."""

    def __init__(self, model: AuditedModel, std: FloatArray) -> None:
        self.model, self.std = model, std

    def predict_proba(self, Z: FloatArray) -> FloatArray:
        return self.model.predict_proba(Z * self.std)

    def predict(self, Z: FloatArray) -> IntArray:
        return self.model.predict(Z * self.std)


def white_box_curves(
    model: Any,
    X: FloatArray,
    y: IntArray,
    epsilons: tuple[float, ...],
    budgets: list[Budget],
    params: OwnDataParams,
) -> dict[str, Any]:
    """Adversarial AUROC against ε through a differentiable model's own gradient.

    FGSM (one signed-gradient step, SPEC §7.2) and PGD (``pgd_steps`` steps,
    §7.3) on the FGSM rows, per budget: the curves a torch model's audit adds
    to the surrogate's.
    """
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from ..attacks.whitebox import pgd_perturb

    def auroc(rows: FloatArray) -> float | None:
        if np.unique(y).size < 2:
            return None
        return float(roc_auc_score(y, np.asarray(model.predict_proba(rows))[:, 1]))

    gradient_sign = np.sign(np.asarray(model.loss_gradient(X, y), dtype=np.float64))
    fgsm, pgd = [], []
    for budget in budgets:
        fgsm.append(auroc(budget.clip(X + budget.step * gradient_sign)))
        pgd.append(auroc(pgd_perturb(model, X, y, budget=budget, steps=params.pgd_steps)))
    return {
        "epsilon": list(epsilons),
        "fgsm_auroc": fgsm,
        "pgd_auroc": pgd,
        "pgd_steps": params.pgd_steps,
        "clean_auroc": auroc(X),
    }
