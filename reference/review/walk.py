"""The own-data boundary walk: the task's walk in training-std units, on the movable cells.

SPEC §3.4's walk moves a row in steps of 0.05 towards the first test row
predicted differently. The own-data profile steps 0.05 training standard
deviations at a time (a raw 0.05 means nothing on a feature measured in
thousands) and moves only the cells :class:`~.features.FeatureView` calls
movable: a cell that is categorical, or missing in the row or in its target,
keeps the row's own value. With every cell movable this is exactly the task's
walk run on ``X / std`` with predictions on ``Z * std``.

Candidates come from :func:`~..attacks.boundary.walk_candidates` (they never
depend on a prediction) and are predicted in one batch.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..attacks.params import BoundaryParams
    from ..models.adapters import AuditedModel
    from .features import FeatureView

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class WalkResult:
    """Steps to the first flip of each walked row; the component is ``min(1, mean / max)``."""

    score: float
    mean_steps: float
    steps: tuple[int, ...]
    rows: tuple[int, ...]
    """Test-row indices walked, in draw order."""
    n_candidates: int


def boundary_walk(
    model: AuditedModel,
    X_test: FloatArray,
    *,
    test_predictions: Any,
    view: FeatureView,
    params: BoundaryParams,
) -> WalkResult:
    """The own-data walk of ``params.n_samples`` test rows drawn with ``params.seed``.

    Parameters
    ----------
    test_predictions
        ``model.predict(X_test)``, shape (n_test,), predicted once by the caller.
    """
    import numpy as np

    from ..attacks.boundary import first_differing_rows, walk_candidates
    from ..attacks.classifier import draw_rows

    predictions = np.asarray(test_predictions)
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    original = predictions[idx]
    steps = np.full(len(idx), params.max_steps, dtype=np.int64)
    target_row = first_differing_rows(predictions, idx)
    walking = np.flatnonzero(target_row >= 0)
    n_candidates = 0
    if walking.size:
        starts, targets = X_test[idx[walking]], X_test[target_row[walking]]
        unit = view.unit
        with np.errstate(over="ignore"):  # 1e300 / a std of 1e-10 is no coordinate
            z_start, z_target = starts / unit, targets / unit
        free = view.movable(starts) & view.movable(targets)
        free &= np.isfinite(z_start) & np.isfinite(z_target)
        # Held-fixed cells sit at 0 in both ends, so the walk never moves them
        # and they add nothing to a distance.
        z_start = np.where(free, z_start, 0.0)
        z_target = np.where(free, z_target, 0.0)
        with np.errstate(over="ignore", invalid="ignore"):
            # Ends 1e300 std apart have an infinite norm: such a walk takes steps of
            # 0 and, never flipping, counts the maximum, as a walk that never arrives.
            candidates, stop = walk_candidates(z_start, z_target, params)
        valid = np.arange(params.max_steps)[:, None] < stop[None, :]
        flipped = np.zeros(valid.shape, dtype=bool)
        step_of, row_of = np.nonzero(valid)
        n_candidates = len(step_of)
        if n_candidates:
            rows = candidates[step_of, row_of] * unit
            rows = np.where(free[row_of], rows, starts[row_of])
            expected = original[walking][row_of]
            flipped[step_of, row_of] = np.asarray(model.predict(rows)) != expected
        has_flip = flipped.any(axis=0)
        steps[walking[has_flip]] = np.argmax(flipped, axis=0)[has_flip] + 1
    mean = float(steps.mean()) if len(steps) else float(params.max_steps)
    return WalkResult(
        score=min(1.0, mean / params.max_steps),
        mean_steps=mean,
        steps=tuple(steps.tolist()),
        rows=tuple(int(i) for i in idx),
        n_candidates=n_candidates,
    )
