"""The per-feature perturbation budget: ε in raw units or training standard deviations.

Every ε and step size of the white-box attacks, the own-data FGSM, the walk in
training-std units and HopSkipJump is measured against the training rows'
per-feature standard deviation and range, :func:`training_scale`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from .params import FGSMParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureScale:
    """Per-feature training statistics, each shape (d,): population std (ddof=0), min, max."""

    std: FloatArray
    low: FloatArray
    high: FloatArray


def training_scale(X_train: FloatArray) -> FeatureScale:
    """The training rows' per-feature std (ddof=0, as ``StandardScaler``), min and max.

    A constant feature has std 0: no ε budget moves it, which is what "ε in std
    units" means for it, and clipping to its range would pin it anyway. Missing
    cells (NaN, the game's raw cohorts) are left out of each feature's statistics.
    """
    import numpy as np

    X = np.asarray(X_train, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError(f"training rows must be a non-empty 2-D array, got shape {X.shape}")
    if np.isnan(X).any():
        return FeatureScale(np.nanstd(X, axis=0), np.nanmin(X, axis=0), np.nanmax(X, axis=0))
    return FeatureScale(X.std(axis=0), X.min(axis=0), X.max(axis=0))


@dataclasses.dataclass(frozen=True, eq=False)
class Budget:
    """Per-feature FGSM step and the box perturbed rows are clipped to.

    Attributes
    ----------
    step
        ``e_j``, shape (d,): ``epsilon`` in raw units, or ``epsilon * s_j`` with
        ``s_j`` the training standard deviation (ddof=0) of feature j.
    low, high
        Each feature's minimum and maximum over the training rows, shape (d,),
        when perturbed rows are clipped to the training range; else ``None``.
    """

    step: FloatArray
    low: FloatArray | None = None
    high: FloatArray | None = None

    @classmethod
    def of(cls, epsilon: float, scale: FeatureScale, *, std_units: bool, clip: bool) -> Budget:
        """``epsilon`` per feature, in training stds (``std_units``) or raw units, with the
        training range of ``scale`` as clipping box when ``clip``."""
        import numpy as np

        step = epsilon * scale.std if std_units else np.full(len(scale.std), epsilon)
        return cls(step, scale.low, scale.high) if clip else cls(step)

    def clip(self, X: FloatArray) -> FloatArray:
        """``X`` clipped to the training range, or ``X`` itself without one."""
        import numpy as np

        if self.low is None or self.high is None:
            return X
        clipped: FloatArray = np.clip(X, self.low, self.high)
        return clipped


def fgsm_budget(params: FGSMParams, X_train: FloatArray) -> Budget:
    """The per-feature budget and clipping box that ``params`` asks for.

    ``s_j`` is the population standard deviation (ddof=0, as ``StandardScaler``
    uses) so that "1 std" means one unit of the standardised space a model sees.
    In raw units every ``e_j`` is ``epsilon`` itself, so ``e * sign`` has the
    same bits as ``epsilon * sign`` and "sps-v1" results are unchanged.
    """
    import numpy as np

    X_train = np.asarray(X_train, dtype=np.float64)
    if not len(X_train):
        return Budget(np.full(X_train.shape[1], params.epsilon))
    return Budget.of(
        params.epsilon,
        training_scale(X_train),
        std_units=params.in_std_units,
        clip=params.clipped,
    )
