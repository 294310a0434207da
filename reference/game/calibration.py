"""Each model's calibration, folded into its last layer.

A logistic fit (Platt scaling without regularisation) of a model's logits on
its held-out calibration rows, folded into the network's own weights, so no
buffer or constant of a program says which model was distorted; a planted
miscalibration multiplies the calibrated logit by its factor.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .network import fold_affine

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


def logistic_calibration(logits: FloatArray, y: IntArray) -> tuple[float, float]:
    """(slope, intercept) of ``P(y=1) = sigmoid(slope * logit + intercept)`` fitted by
    maximum likelihood (Platt scaling without regularisation) in float64."""
    import numpy as np
    from scipy.optimize import minimize

    z = np.asarray(logits, dtype=np.float64)
    target = np.asarray(y, dtype=np.float64)

    def loss(theta: Any) -> tuple[float, Any]:
        t = theta[0] * z + theta[1]
        nll = np.logaddexp(0.0, t) - target * t
        residual = 1.0 / (1.0 + np.exp(-t)) - target
        return float(nll.mean()), np.array([np.mean(residual * z), np.mean(residual)])

    rate = min(max(float(target.mean()), 1e-6), 1 - 1e-6)
    start = np.array([1.0, 0.0]) if np.std(z) > 0 else np.array([0.0, math.log(rate / (1 - rate))])
    fitted = minimize(loss, start, jac=True, method="L-BFGS-B")
    return float(fitted.x[0]), float(fitted.x[1])


def calibrate(
    module: Any, X: FloatArray, y: IntArray, factor: float | None = None
) -> tuple[float, float]:
    """Fold a logistic calibration on held-out rows ``X``, ``y`` into the last layer, then
    (a planted miscalibration) multiply the logit by ``factor``. Returns (slope, intercept)."""
    import numpy as np
    import torch

    with torch.no_grad():
        z = module(torch.tensor(X, dtype=torch.float32)).double().numpy()
    slope, intercept = logistic_calibration(z, np.asarray(y))
    if factor is not None:
        slope, intercept = slope * factor, intercept * factor
    fold_affine(module, slope, intercept)
    return slope, intercept
