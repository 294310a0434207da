"""Boundary-attack resistance (SPEC §3.4): the walk towards the first differing row, batched."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .classifier import Classifier, draw_rows
from .params import BoundaryParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class BoundaryResult:
    score: float
    mean_steps: float
    steps: tuple[int, ...]
    n_samples: int
    n_candidates: int


def walk_candidates(
    starts: FloatArray, targets: FloatArray, params: BoundaryParams
) -> tuple[FloatArray, IntArray]:
    """Every point the walks would visit, shape (max_steps, n, d), and where each stops.

    The walk from ``x`` towards ``t`` moves ``step_size`` along the unit direction
    each step; which point it visits next never depends on a prediction, so all
    candidates can be generated first and predicted in one batch. ``stop[i]`` is
    the first step whose remaining distance is below ``min_norm`` (the walk ends
    there without a candidate), or ``max_steps`` if it never is.

    The norm is a per-row dot product through ``matmul``, which is bit-for-bit
    ``np.linalg.norm`` of each row; an einsum or a sum would round differently.
    """
    import numpy as np

    n, d = starts.shape
    candidates = np.empty((params.max_steps, n, d))
    stop = np.full(n, params.max_steps, dtype=np.int64)
    current = np.array(starts, dtype=np.float64)
    alive = np.ones(n, dtype=bool)
    for step in range(params.max_steps):
        direction = targets - current
        norm = np.sqrt(np.matmul(direction[:, None, :], direction[:, :, None])[:, 0, 0])
        ended = alive & (norm < params.min_norm)
        stop[ended] = step
        alive &= ~ended
        safe = np.where(alive, norm, 1.0)  # rows that ended get a dummy, never used
        current = current + params.step_size * direction / safe[:, None]
        candidates[step] = current
    return candidates, stop


def first_differing_rows(predictions: Any, idx: IntArray) -> IntArray:
    """Each drawn row's walk target: the first test row, in file order, whose
    prediction differs from the drawn row's, or -1 where every row agrees.

    ``predictions`` are the whole test split's, ``idx`` the drawn rows' positions.
    """
    import numpy as np

    original = predictions[idx]
    target_row = np.full(len(idx), -1, dtype=np.int64)
    for value in np.unique(original):
        differs = predictions != value
        if differs.any():
            target_row[original == value] = int(np.argmax(differs))
    return target_row


def boundary_attack_resistance(
    model: Classifier,
    X_test: FloatArray,
    *,
    test_predictions: Any,
    params: BoundaryParams,
) -> BoundaryResult:
    """``min(1, mean(steps) / max_steps)`` of a walk towards the other class.

    For each of ``n_samples`` test rows drawn with ``RandomState(seed)``, the
    target is the *first* test row in file order predicted differently (the
    task's code, not its "nearest" prose). Steps to the first flipped
    prediction are counted; no target, a vanished distance, or no flip within
    ``max_steps`` count as ``max_steps``. The row's label is not used.

    Parameters
    ----------
    test_predictions
        ``model.predict(X_test)``, shape (n_test,), predicted once by the caller.
    """
    import numpy as np

    predictions = np.asarray(test_predictions)
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    original = predictions[idx]
    steps = np.full(len(idx), params.max_steps, dtype=np.int64)
    target_row = first_differing_rows(predictions, idx)
    walking = np.flatnonzero(target_row >= 0)
    n_candidates = 0
    if walking.size:
        candidates, stop = walk_candidates(
            X_test[idx[walking]], X_test[target_row[walking]], params
        )
        # Candidates of step s exist for walks that had not stopped before s.
        valid = np.arange(params.max_steps)[:, None] < stop[None, :]
        flat = candidates[valid]
        n_candidates = len(flat)
        flipped = np.zeros(valid.shape, dtype=bool)
        if n_candidates:
            expected = np.broadcast_to(original[walking], valid.shape)[valid]
            flipped[valid] = np.asarray(model.predict(flat)) != expected
        has_flip = flipped.any(axis=0)
        steps[walking[has_flip]] = np.argmax(flipped, axis=0)[has_flip] + 1
    mean = float(steps.mean())
    return BoundaryResult(
        min(1.0, mean / params.max_steps), mean, tuple(steps.tolist()), len(idx), n_candidates
    )
