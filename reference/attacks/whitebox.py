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


class Attackable(Protocol):
    """What the strong attack asks of a model: its logits and their input gradients."""

    def logits(self, X: Any) -> Any:
        """The class-1 logit ``f(x)`` of each row, shape (n,)."""
        ...

    def logit_gradient(self, X: Any) -> Any:
        """``d f(x) / dx`` of each row's own logit, shape (n, d)."""
        ...


class Differentiable(Protocol):
    """A classifier that also gives its logits, their input gradients and per-row losses."""

    def predict_proba(self, X: Any) -> Any: ...

    def predict(self, X: Any) -> Any: ...

    def row_losses(self, X: Any, y: Any) -> Any:
        """Binary cross-entropy of each row, shape (n,)."""
        ...

    def logits(self, X: Any) -> Any:
        """The class-1 logit ``f(x)`` of each row, shape (n,)."""
        ...

    def logit_gradient(self, X: Any) -> Any:
        """``d f(x) / dx`` of each row's own logit, shape (n, d)."""
        ...


def fgsm_direction(model: Differentiable, X: FloatArray, y: IntArray) -> FloatArray:
    """SPEC §7.2 step 4 ("sps-v1-wb2"): ``(1 - 2y) * sign(d f / dx)`` per row, shape (n, d).

    In exact arithmetic this is the sign of the cross-entropy gradient
    (``(sigmoid(f) - y) * df/dx``, whose first factor has the sign of
    ``1 - 2y``), without the float32 saturation that makes that gradient exactly
    zero where ``|f| > ~17``. A row whose logit gradient is zero moves nothing.
    """
    import numpy as np

    sign = np.sign(np.asarray(model.logit_gradient(X), dtype=np.float64))
    direction: FloatArray = (1.0 - 2.0 * np.asarray(y, dtype=np.float64))[:, None] * sign
    return direction


def zero_gradient_fraction(direction: FloatArray) -> float:
    """The share of rows whose direction is all zero (SPEC §7.3): they cannot move."""
    import numpy as np

    if not len(direction):
        return 0.0
    return float(np.mean(~np.any(direction != 0, axis=1)))


def margin_pgd(
    model: Attackable,
    X: FloatArray,
    y: IntArray,
    *,
    budget: Budget,
    steps: int,
    restarts: int,
    seed: int,
) -> FloatArray:
    """The strong attack of SPEC §7.3: PGD on the margin ``(1 - 2y) f(x)``, with restarts.

    Each restart takes ``steps`` signed steps of ``alpha = 2.5 e / steps`` up the
    margin (towards the wrong class), projecting onto the box
    ``[X - e, X + e]`` and, with a clipping box in ``budget``, the training
    range. The first restart starts at ``X``; the others at uniform points of
    the (clipped) box, drawn from ``RandomState(seed)``. Per row, the restart
    whose final margin is highest is kept. All restarts advance together, so
    the model sees ``steps + 1`` batched calls, not ``restarts * steps``.

    Shapes: X (n, d), y (n,) -> (n, d).
    """
    import numpy as np

    if steps < 1 or restarts < 1:
        raise ValueError(f"steps and restarts must be >= 1, got {steps} and {restarts}")
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    if not n:
        nothing: FloatArray = X.copy()
        return nothing
    alpha = 2.5 * budget.step / steps
    low, high = np.tile(X - budget.step, (restarts, 1)), np.tile(X + budget.step, (restarts, 1))
    sign_y = np.tile(1.0 - 2.0 * np.asarray(y, dtype=np.float64), restarts)
    rng = np.random.RandomState(seed)
    current = np.tile(X, (restarts, 1))
    if restarts > 1:
        # A missing cell (NaN) stays missing: its box is drawn from as an empty one at 0.
        absent = np.isnan(current[n:])
        start = rng.uniform(np.where(absent, 0.0, low[n:]), np.where(absent, 0.0, high[n:]))
        current[n:] = np.where(absent, np.nan, start)
    current = budget.clip(current)
    for _ in range(steps):
        gradient = np.asarray(model.logit_gradient(current), dtype=np.float64)
        step = alpha * sign_y[:, None] * np.sign(gradient)
        current = budget.clip(np.clip(current + step, low, high))
    margins = (sign_y * np.asarray(model.logits(current), dtype=np.float64)).reshape(restarts, n)
    best = np.argmax(margins, axis=0)
    adversarial: FloatArray = current.reshape(restarts, n, -1)[best, np.arange(n)]
    return adversarial


@dataclasses.dataclass(frozen=True, eq=False)
class WhiteBoxFGSM:
    """The FGSM rows of SPEC §7.2: drawn positions, their direction and their copies.

    Attributes
    ----------
    idx
        Positions of the drawn test rows, shape (k,).
    direction
        ``(1 - 2y) * sign(d f / dx)`` per drawn row, shape (k, d), entries in {-1, 0, 1}.
    X_adv
        ``X_drawn + e * direction``, clipped to the training range if asked, (k, d).
    """

    idx: IntArray
    direction: FloatArray
    X_adv: FloatArray

    @property
    def zero_gradient_fraction(self) -> float:
        """The share of drawn rows whose logit gradient is all zero (SPEC §7.3)."""
        return zero_gradient_fraction(self.direction)


def fgsm_whitebox_sample(
    model: Differentiable,
    X_test: FloatArray,
    y_test: IntArray,
    *,
    params: FGSMParams,
    budget: Budget,
) -> WhiteBoxFGSM:
    """SPEC §7.2 steps 2-5 ("sps-v1-wb2"): draw rows as §3.1 step 2, step along the direction.

    ``X_adv = X + e * (1 - 2y) * sign(d f / dx)`` in float64: positives move
    down the logit, negatives up, each feature by its whole budget unless its
    gradient component is exactly zero.
    """
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    X = X_test[idx]
    direction = fgsm_direction(model, X, y_test[idx])
    return WhiteBoxFGSM(idx, direction, budget.clip(X + budget.step * direction))


@dataclasses.dataclass(frozen=True)
class PGDResult:
    auroc_adversarial: float | None
    """AUROC on the strong PGD copies of the FGSM rows; ``None`` if they hold one class."""
    steps: int
    restarts: int


def strong_pgd_auroc(
    model: Differentiable,
    X_test: FloatArray,
    y_test: IntArray,
    *,
    params: FGSMParams,
    budget: Budget,
) -> PGDResult:
    """SPEC §7.3's strong attack on the rows FGSM draws: lower means less robust.

    :func:`margin_pgd` with the variant's ``pgd_steps`` and ``pgd_restarts``;
    its random starts are drawn from ``RandomState(params.seed)``.
    """
    import numpy as np
    from sklearn.metrics import roc_auc_score

    if params.pgd_steps is None or params.pgd_restarts is None:
        raise ValueError(
            "fgsm.pgd_steps and fgsm.pgd_restarts are not both set: "
            "the variant asks for no strong PGD"
        )
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    y = y_test[idx]
    if np.unique(y).size < 2:
        return PGDResult(None, params.pgd_steps, params.pgd_restarts)
    X_adv = margin_pgd(
        model,
        X_test[idx],
        y,
        budget=budget,
        steps=params.pgd_steps,
        restarts=params.pgd_restarts,
        seed=params.seed,
    )
    p = np.asarray(model.predict_proba(X_adv), dtype=np.float64)[:, 1]
    return PGDResult(float(roc_auc_score(y, p)), params.pgd_steps, params.pgd_restarts)
