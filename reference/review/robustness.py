"""FGSM in the own-data profile: the perturbed copies, the component and the robustness curve.

Two ways to find each row's direction:

- **A model with a gradient** (a torch program,
  :class:`~..models.torch_adapter.TorchClassifier`) is attacked white-box, with
  sps-v1-wb2's direction (SPEC §7.2): ``(1 - 2y) sign(d logit / dx)``, the sign
  of the cross-entropy gradient without its float32 saturation
  (:func:`~..attacks.whitebox.fgsm_direction`). A logistic surrogate would
  understate the damage: on ``icu-synth-mlp`` it left the FGSM component at
  0.929 while the model's own gradient, at the same ε, took the AUROC from
  0.664 to 0.463 (issue 18). The robustness curve adds margin PGD with
  restarts (:func:`~..attacks.whitebox.margin_pgd`, §7.3), the strong attack.
- **Any other model** gets the task's surrogate signs (§3.1), fitted on the
  numeric columns (:func:`~.features.surrogate_sign`).

Either way ε is in training standard deviations, perturbed rows are clipped
to the training range, and only movable cells move (:mod:`.features`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..attacks.budget import Budget
    from ..attacks.fgsm import FGSMResult
    from ..attacks.params import FGSMParams
    from .features import FeatureView
    from .profile import OwnDataParams

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

SURROGATE = "surrogate"
WHITE_BOX = "white-box"


def differentiable(model: Any) -> bool:
    """Whether the model gives its logits and their input gradient (a torch program)."""
    return callable(getattr(model, "logit_gradient", None)) and callable(
        getattr(model, "logits", None)
    )


@dataclasses.dataclass(frozen=True, eq=False)
class Perturbation:
    """The FGSM rows' perturbed copies, one array (k, d) per budget, and how they were made."""

    attack: str
    """:data:`SURROGATE` or :data:`WHITE_BOX`."""
    copies: list[FloatArray]
    direction: FloatArray
    """Shape (k, d) for the white-box direction, (d,) for the surrogate's signs."""
    zero_gradient_fraction: float | None


def perturb(
    model: Any,
    X: FloatArray,
    y: IntArray,
    budgets: list[Budget],
    *,
    view: FeatureView,
    surrogate_sign: Any,
) -> Perturbation:
    """FGSM copies of rows ``X`` (k, d) at every budget, movable cells only.

    ``surrogate_sign`` is called (with no arguments) only for a model without a
    gradient, so a torch program's audit never fits the surrogate.
    """
    import numpy as np

    from ..attacks.fgsm import fgsm_perturb
    from ..attacks.whitebox import fgsm_direction, zero_gradient_fraction

    movable = view.movable(X)
    if differentiable(model):
        direction = np.where(movable, fgsm_direction(model, X, y), 0.0)
        copies = [b.clip(X + b.step * direction) for b in budgets]
        return Perturbation(WHITE_BOX, copies, direction, zero_gradient_fraction(direction))
    sign = np.asarray(surrogate_sign(), dtype=np.float64)
    copies = [np.where(movable, b.clip(fgsm_perturb(X, y, b.step, sign)), X) for b in budgets]
    return Perturbation(SURROGATE, copies, sign, None)


@dataclasses.dataclass(frozen=True, eq=False)
class FGSMOutcome:
    params: FGSMParams
    result: FGSMResult
    curve: dict[str, Any]


def fgsm_outcome(
    model: Any,
    X: FloatArray,
    y: IntArray,
    p_clean: FloatArray,
    p_adversarial: FloatArray,
    *,
    perturbation: Perturbation,
    epsilons: tuple[float, ...],
    budgets: list[Budget],
    params: OwnDataParams,
) -> FGSMOutcome:
    """The component at ``params.epsilon`` and the robustness curve (AUROC against ε).

    ``p_adversarial`` is (n_eps, k): the model's probabilities on each budget's
    copies, the first budget being the audited ε. A torch program's curve adds
    margin PGD at every budget, which must never be weaker than FGSM.
    """
    from ..attacks.fgsm import fgsm_score
    from ..attacks.params import FGSMParams

    fgsm_params = FGSMParams(
        epsilon=params.epsilon,
        n_samples=len(y),
        seed=params.seed + 2,
        single_class_score=0.5,
        surrogate=params.surrogate,
        gradient="model" if perturbation.attack == WHITE_BOX else None,
        epsilon_units="std",
        clip="train-range" if params.clip else None,
    )
    points = [fgsm_score(y, p_clean, p, params=fgsm_params) for p in p_adversarial]
    curve: dict[str, Any] = {
        "attack": perturbation.attack,
        "epsilon": list(epsilons),
        "fgsm_auroc": [point.auroc_adversarial for point in points],
        "fgsm_score": [point.score for point in points],
        "clean_auroc": points[0].auroc_clean,
    }
    if perturbation.attack == WHITE_BOX:
        curve["zero_gradient_fraction"] = perturbation.zero_gradient_fraction
        curve["pgd_auroc"] = _pgd_curve(model, X, y, budgets, params)
        curve["pgd_steps"] = params.pgd_steps
        curve["pgd_restarts"] = params.pgd_restarts
    return FGSMOutcome(fgsm_params, points[0], curve)


def _pgd_curve(
    model: Any, X: FloatArray, y: IntArray, budgets: list[Budget], params: OwnDataParams
) -> list[float | None]:
    """Margin PGD's adversarial AUROC at every budget (SPEC §7.3), None on one class."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    from ..attacks.whitebox import margin_pgd

    if np.unique(y).size < 2:
        return [None] * len(budgets)
    found: list[float | None] = []
    for budget in budgets:
        adversarial = margin_pgd(
            model,
            X,
            y,
            budget=budget,
            steps=params.pgd_steps,
            restarts=params.pgd_restarts,
            seed=params.seed + 11,
        )
        p = np.asarray(model.predict_proba(adversarial), dtype=np.float64)[:, 1]
        found.append(float(roc_auc_score(y, p)))
    return found
