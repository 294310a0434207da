"""Decision-based minimal perturbation distance: a batched HopSkipJump.

How far must a row move, in training-standard-deviation units (L2), before the
model's *predicted class* changes? HopSkipJump (Chen, Jordan and Wainwright 2020)
answers with predictions only, so it audits any model kind, and it returns an
adversarial point, so every distance is an upper bound on the true minimum.

The Adversarial Robustness Toolbox implements it (``art.attacks.evasion.HopSkipJump``)
row by row: thousands of small ``predict`` calls per row, which for a forest of
1,000 trees is dominated by per-call overhead. This implementation runs every
row's iteration together: one ``predict`` per gradient estimate, one per step
search and one per bisection round, for all rows at once. ``tests`` check it
against ART and against closed forms (a hyperplane and a sphere, where the
minimal distance is known exactly).

The steps, in standardised coordinates ``u = x / std`` (for row ``u0`` with
predicted class ``o``; "adversarial" means predicted differently from ``o``):

1. Start from the nearest reference row predicted differently (the test rows,
   whose predictions the audit already has), then bisect the segment from
   ``u0`` to it down to the boundary.
2. Iteration ``t``: at the boundary point ``b`` (distance ``r`` from ``u0``),
   estimate the boundary's normal from ``B_t = min(init_evals * sqrt(t),
   max_evals)`` predictions at ``b + delta * v``, ``v`` random unit vectors,
   ``delta = r / d`` (the paper's ``sqrt(d) * theta * r`` with ``theta = d^-1.5``),
   baseline-corrected as in the paper; step ``r / sqrt(t)`` along it, halving up
   to :data:`STEP_HALVINGS` times until adversarial; bisect back towards ``u0``.
3. Keep each row's closest adversarial point.

Bisection is batched too: each round predicts ``BISECTION_PROBES`` evenly spaced
points per row and keeps the bracket around the first adversarial one, so three
rounds shrink the bracket 4,096-fold.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..models.adapters import AuditedModel

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]

BISECTION_PROBES = 15
"""Points per row per bisection round: the bracket shrinks 16-fold per ``predict``."""

STEP_HALVINGS = 12
"""Geometric step search: the step is tried at ``1, 1/2, ..., 1/2**11`` of its size."""


@dataclasses.dataclass(frozen=True, eq=False)
class DistanceResult:
    """Per-row minimal perturbation distances (standardised L2 units).

    Attributes
    ----------
    distance
        Shape (n,): distance to the closest adversarial point found; ``inf`` where
        none was found (no reference row is predicted differently).
    adversarial
        Shape (n, d): that point in raw feature units (NaN rows where none).
    found
        Shape (n,): whether an adversarial point was found.
    queries
        Model predictions made, all rows together.
    """

    distance: FloatArray
    adversarial: FloatArray
    found: BoolArray
    queries: int
    n_iter: int

    def summary(self) -> dict[str, Any]:
        """JSON-ready: per-row distances (for a histogram) and their quartiles."""
        import numpy as np

        finite = self.distance[self.found]
        quartiles = np.quantile(finite, [0.25, 0.5, 0.75]).tolist() if finite.size else None
        return {
            "distances": [
                float(d) if f else None for d, f in zip(self.distance, self.found, strict=True)
            ],
            "median": None if quartiles is None else quartiles[1],
            "quartiles": quartiles,
            "n_rows": int(len(self.distance)),
            "n_found": int(self.found.sum()),
            "queries": self.queries,
            "n_iter": self.n_iter,
        }


class _Oracle:
    """Adversarial-or-not of standardised points, counting queries; one ``predict`` per call.

    Held-fixed cells (``free`` False) are 0 in the standardised points and take
    the row's own raw value (``template``: a category code, or NaN) when the
    model is asked; both are (n, d) and aligned with the rows being attacked.
    """

    def __init__(self, model: AuditedModel, std: FloatArray, low: FloatArray, high: FloatArray):
        self.model, self.std, self.low, self.high = model, std, low, high
        self.queries = 0
        self.free: BoolArray | None = None
        self.template: FloatArray | None = None

    def rows(self, u: FloatArray) -> FloatArray:
        """Raw rows of standardised points ``u`` (..., n, d)."""
        import numpy as np

        raw: FloatArray = u * self.std
        if self.free is not None and self.template is not None:
            raw = np.where(self.free, raw, self.template)
        return raw

    def clip(self, u: FloatArray) -> FloatArray:
        import numpy as np

        result: FloatArray = np.clip(u, self.low, self.high)
        return result

    def adversarial(self, u: FloatArray, original: IntArray) -> BoolArray:
        """``u`` shape (..., n, d) against ``original`` shape (n,): predicted differently?"""
        import numpy as np

        shape = u.shape[:-1]
        flat = u.reshape(-1, u.shape[-1])
        self.queries += len(flat)
        if not len(flat):
            return np.zeros(shape, dtype=bool)
        raw = self.rows(u).reshape(-1, u.shape[-1])
        predicted = np.asarray(self.model.predict(raw)).reshape(shape)
        result: BoolArray = predicted != np.broadcast_to(original, shape)
        return result


def _bisect(
    oracle: _Oracle,
    start: FloatArray,
    adversarial: FloatArray,
    original: IntArray,
    *,
    tolerance: float,
) -> FloatArray:
    """The boundary point between ``start`` (not adversarial) and ``adversarial``, per row.

    Returns points on the adversarial side within ``tolerance`` (relative to the
    segment's length) of the first crossing found. Shapes (n, d).
    """
    import numpy as np

    n = len(start)
    lo, hi = np.zeros(n), np.ones(n)
    fractions = np.arange(1, BISECTION_PROBES + 1) / (BISECTION_PROBES + 1)
    rounds = max(1, math.ceil(math.log(1.0 / tolerance) / math.log(BISECTION_PROBES + 1)))
    direction = adversarial - start
    for _ in range(rounds):
        alphas = lo[None, :] + (hi - lo)[None, :] * fractions[:, None]  # (probes, n)
        points = oracle.clip(start[None] + alphas[:, :, None] * direction[None])
        hit = oracle.adversarial(points, original)
        any_hit = hit.any(axis=0)
        first = np.argmax(hit, axis=0)
        new_hi = np.where(any_hit, alphas[first, np.arange(n)], hi)
        below = np.where(first > 0, alphas[np.maximum(first - 1, 0), np.arange(n)], lo)
        lo = np.where(any_hit, below, alphas[-1])
        hi = new_hi
    result: FloatArray = oracle.clip(start + hi[:, None] * direction)
    return result


def minimal_perturbation_distance(
    model: AuditedModel,
    X: FloatArray,
    *,
    std: FloatArray,
    reference_rows: FloatArray,
    reference_predictions: IntArray,
    low: FloatArray | None = None,
    high: FloatArray | None = None,
    n_iter: int = 20,
    init_evals: int = 50,
    max_evals: int = 400,
    tolerance: float = 1e-3,
    seed: int = 42,
    movable: BoolArray | None = None,
) -> DistanceResult:
    """HopSkipJump distances of rows ``X`` (n, d) to the model's decision boundary.

    Parameters
    ----------
    std
        Per-feature training standard deviations (d,): distances are L2 in
        ``x / std``. A zero std (a constant feature) counts in raw units.
    reference_rows, reference_predictions
        Rows (m, d) with the model's predictions (m,), e.g. the test set; each
        row starts from its nearest differently predicted reference row.
    low, high
        Optional per-feature bounds in raw units (e.g. the training range):
        every point queried stays inside them.
    n_iter, init_evals, max_evals
        Iterations and the gradient-estimate budget ``min(init_evals * sqrt(t), max_evals)``.
    tolerance
        Bisection precision, relative to the bisected segment.
    seed
        Seed of the ``RandomState`` drawing the probe directions.
    movable
        Shape (n, d): the cells each row may move (:meth:`~.features.FeatureView.movable`);
        the others keep the row's own value (a category, a missing cell). None: all.

    Returns
    -------
    DistanceResult
        Per-row distances; lower means a smaller change flips the prediction.
    """
    import numpy as np

    rows = np.asarray(X, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {rows.shape}")
    n, d = rows.shape
    scale = np.where(np.asarray(std, dtype=np.float64) > 0, std, 1.0)
    inf = np.full(d, np.inf)
    lo_u = -inf if low is None else np.asarray(low, dtype=np.float64) / scale
    hi_u = inf if high is None else np.asarray(high, dtype=np.float64) / scale
    oracle = _Oracle(model, scale, lo_u, hi_u)
    rng = np.random.RandomState(seed)
    free = np.ones((n, d), dtype=bool) if movable is None else np.asarray(movable, dtype=bool)
    held = not free.all()

    # Held-fixed cells are 0 in standardised coordinates: they never move and add
    # nothing to a distance. Without any, this is the plain clipped x / std.
    u0 = oracle.clip(np.where(free, rows, 0.0) / scale) if held else oracle.clip(rows / scale)
    if held:
        oracle.free, oracle.template = free, rows
    original = np.asarray(model.predict(oracle.rows(u0))).astype(np.int64)
    oracle.queries += n

    # 1. Start: the nearest reference row predicted differently (in std units,
    # over the cells both rows can compare: a missing reference cell counts 0).
    # Clipped to the box first: a start must lie in it anyway, and a reference row
    # far outside it (1e300 where the training range is [0, 5]) would overflow.
    reference = oracle.clip(np.asarray(reference_rows, dtype=np.float64) / scale)
    if held:
        reference = np.where(np.isfinite(reference) & free.any(axis=0), reference, 0.0)
    reference_pred = np.asarray(reference_predictions).astype(np.int64)
    start = np.full((n, d), np.nan)
    has_start = np.zeros(n, dtype=bool)
    for value in np.unique(original):
        mine = np.flatnonzero(original == value)
        others = reference[reference_pred != value]
        if not len(others):
            continue
        # Squared distances by blocks of rows, never an (n, m, d) array.
        for block in np.array_split(mine, max(1, len(mine) * len(others) // 2_000_000 + 1)):
            gaps = (
                (u0[block] ** 2).sum(axis=1)[:, None]
                - 2.0 * u0[block] @ others.T
                + (others**2).sum(axis=1)[None, :]
            )
            start[block] = others[np.argmin(gaps, axis=1)]
            has_start[block] = True
    if held:
        start = np.where(free, start, u0)
    found = has_start.copy()
    best = np.full((n, d), np.nan)
    distance = np.full(n, np.inf)
    if not found.any():
        return DistanceResult(distance, best, found, oracle.queries, 0)

    live = np.flatnonzero(found)
    if held:
        oracle.free, oracle.template = free[live], rows[live]
    # The reference row's prediction was made on the unclipped row; check it here.
    start_ok = oracle.adversarial(oracle.clip(start[live]), original[live])
    live = live[start_ok]
    found[:] = False
    found[live] = True
    if not live.size:
        return DistanceResult(distance, best, found, oracle.queries, 0)
    if held:
        oracle.free, oracle.template = free[live], rows[live]
    mask = free[live].astype(np.float64)
    x0, o = u0[live], original[live]
    boundary = _bisect(oracle, x0, oracle.clip(start[live]), o, tolerance=tolerance)
    best_live = boundary.copy()
    best_dist = np.linalg.norm(boundary - x0, axis=1)

    # 2. Iterate: estimate the normal, step along it, bisect back.
    m = len(live)
    for t in range(1, n_iter + 1):
        radius = np.linalg.norm(boundary - x0, axis=1)
        evals = int(min(init_evals * math.sqrt(t), max_evals))
        directions = rng.standard_normal((evals, m, d))
        if held:
            directions = directions * mask[None]
        norms = np.linalg.norm(directions, axis=2, keepdims=True)
        directions /= np.where(norms > 0, norms, 1.0)
        delta = radius / d
        probes = oracle.clip(boundary[None] + delta[None, :, None] * directions)
        # Directions after clipping, so the estimate uses where the probes really went.
        directions = probes - boundary[None]
        signs = np.where(oracle.adversarial(probes, o), 1.0, -1.0)  # (evals, m)
        mean_sign = signs.mean(axis=0)
        centred = np.where(np.abs(mean_sign) == 1.0, signs, signs - mean_sign[None, :])
        gradient = (centred[:, :, None] * directions).mean(axis=0)
        norm = np.linalg.norm(gradient, axis=1)
        gradient = gradient / np.where(norm > 0, norm, 1.0)[:, None]

        step = radius / math.sqrt(t)
        halvings = 0.5 ** np.arange(STEP_HALVINGS)
        candidates = oracle.clip(
            boundary[None] + (halvings[:, None, None] * step[None, :, None]) * gradient[None]
        )
        hit = oracle.adversarial(candidates, o)
        moved: BoolArray = np.asarray(hit.any(axis=0))
        chosen = candidates[np.argmax(hit, axis=0), np.arange(m)]
        target = np.where(moved[:, None], chosen, boundary)
        boundary = _bisect(oracle, x0, target, o, tolerance=tolerance)
        dist = np.linalg.norm(boundary - x0, axis=1)
        better = dist < best_dist
        best_live[better], best_dist[better] = boundary[better], dist[better]

    distance[live] = best_dist
    best[live] = oracle.rows(best_live)
    return DistanceResult(distance, best, found, oracle.queries, n_iter)
