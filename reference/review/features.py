"""What the attacks of an own-data audit may move: numeric cells that hold a number.

Hospital data has missing values and categorical columns. The model owner's
model takes them as they are (XGBoost splits on a missing value natively; a
``ColumnTransformer`` one-hot encodes a ``sex`` column of strings), so the audit
passes them through unchanged, and every attack perturbs only what a
perturbation means something for:

- a **categorical column** (held as float codes, see
  :class:`~..models.adapters.Categories`) is held fixed: a code has no
  direction to move in, and a gradient sign says nothing about ``"F"`` vs ``"M"``;
- a **missing cell** (NaN) is held fixed: it stays missing, as the row was recorded;
- every other cell is numeric and finite, and moves in training standard
  deviations as before.

The training scale (:class:`~..attacks.budget.FeatureScale`) is computed over
the finite cells of numeric columns, with NumPy's nan-aware reductions and
without overflow (values of 1e300 square to infinity); a held-fixed column
gets a zero step and an unbounded box, so no clipping can turn one category
code into another. The FGSM surrogate is fitted on the numeric columns, each
missing cell filled with its column's training mean (only the sign of the
surrogate's coefficients is used).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..attacks.budget import FeatureScale
    from ..attacks.params import SurrogateParams
    from ..data import Dataset

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]


HUGE = 1e150
"""Above this magnitude a column is rescaled before the surrogate's fit (its square overflows)."""


@dataclasses.dataclass(frozen=True, eq=False)
class FeatureView:
    """The columns an own-data audit may perturb, and their training scale.

    Attributes
    ----------
    names
        The feature names, in column order.
    numeric
        Shape (d,): True for a numeric column, False for a categorical one.
    scale
        Per-feature std (ddof=0), min and max over the finite training cells of
        numeric columns; std 0 and an unbounded range for a held-fixed column.
    unit
        Shape (d,): the std, or 1 where it is 0 (the walk's coordinates).
    missing
        Missing (NaN) cells per split, ``{"train": n, "test": n}``.
    """

    names: tuple[str, ...]
    numeric: BoolArray
    scale: FeatureScale
    unit: FloatArray
    missing: dict[str, int]
    missing_columns: tuple[str, ...]

    @property
    def categorical(self) -> tuple[str, ...]:
        return tuple(n for n, numeric in zip(self.names, self.numeric, strict=True) if not numeric)

    @property
    def all_movable(self) -> bool:
        """True when nothing is held fixed: every column numeric, no cell missing."""
        return bool(self.numeric.all()) and not any(self.missing.values())

    def movable(self, X: FloatArray) -> BoolArray:
        """Shape (n, d): the cells of ``X`` an attack may move (numeric and finite)."""
        import numpy as np

        cells: BoolArray = np.isfinite(X) & self.numeric[None, :]
        return cells

    def summary(self) -> dict[str, Any]:
        """JSON-ready: what every attack held fixed, and why."""
        held = []
        if self.categorical:
            held.append(f"categorical columns {', '.join(self.categorical)}")
        if any(self.missing.values()):
            held.append(
                f"missing cells ({self.missing['train']} in training, {self.missing['test']} in "
                f"test rows, in {', '.join(self.missing_columns)})"
            )
        return {
            "categorical_columns": list(self.categorical),
            "missing_cells": dict(self.missing),
            "columns_with_missing_cells": list(self.missing_columns),
            "held_fixed": (
                "every attack perturbs only numeric cells that hold a number; it held fixed "
                + " and ".join(held)
                if held
                else None
            ),
        }


def _column_scale(column: FloatArray) -> tuple[float, float, float]:
    """(std, min, max) over the finite cells of one column; std without overflow."""
    import numpy as np

    values = column[np.isfinite(column)]
    if not values.size:
        return 0.0, -np.inf, np.inf
    low, high = float(values.min()), float(values.max())
    largest = max(abs(low), abs(high))
    if largest == 0.0:
        return 0.0, low, high
    # Scaled first: (1e300)**2 overflows, (1e300 / 1e300)**2 does not.
    std = float(np.std(values / largest)) * largest
    return std, low, high


def feature_view(data: Dataset, categorical: Sequence[int] = ()) -> FeatureView:
    """The view of ``data`` with the columns ``categorical`` (indices) held fixed."""
    import numpy as np

    from ..attacks.budget import FeatureScale

    d = len(data.feature_names)
    numeric = np.ones(d, dtype=bool)
    for j in categorical:
        if not 0 <= j < d:
            raise ValueError(f"categorical column {j} is not one of the {d} features")
        numeric[j] = False
    std, low, high = np.zeros(d), np.full(d, -np.inf), np.full(d, np.inf)
    for column in np.flatnonzero(numeric).tolist():  # a loop over columns, never over rows
        std[column], low[column], high[column] = _column_scale(data.X_train[:, column])
    nan_train, nan_test = np.isnan(data.X_train), np.isnan(data.X_test)
    columns = [bool(c) for c in np.asarray(nan_train.any(axis=0) | nan_test.any(axis=0))]
    return FeatureView(
        names=tuple(data.feature_names),
        numeric=numeric,
        scale=FeatureScale(std, low, high),
        # A constant or held-fixed feature has std 0; its coordinate keeps unit scale.
        unit=np.where(std > 0, std, 1.0),
        missing={"train": int(nan_train.sum()), "test": int(nan_test.sum())},
        missing_columns=tuple(n for n, c in zip(data.feature_names, columns, strict=True) if c),
    )


def surrogate_sign(
    params: SurrogateParams, view: FeatureView, X: FloatArray, y: IntArray
) -> FloatArray:
    """The FGSM surrogate's coefficient signs, shape (d,); 0 for held-fixed columns.

    The logistic surrogate is fitted on the numeric columns that have a finite
    cell, each missing cell filled with its column's mean over ``X``. With
    nothing held fixed this is :func:`~..attacks.fgsm.fit_surrogate_sign` on
    the rows as they are.
    """
    import numpy as np

    from ..attacks.fgsm import fit_surrogate_sign

    sign = np.zeros(X.shape[1])
    if len(np.unique(y)) < 2:
        return sign  # no direction separates one class from itself
    usable = view.numeric & np.isfinite(X).any(axis=0)
    if not usable.any():
        return sign
    columns = X if view.all_movable else X[:, usable]
    if not view.all_movable:
        means = np.array([c[np.isfinite(c)].mean() for c in columns.T])
        columns = np.where(np.isfinite(columns), columns, means[None, :])
    largest = np.abs(columns).max(axis=0)
    if largest.max() > HUGE:
        # Values near 1e300 overflow the scaler's variance. Dividing a column by a
        # positive constant leaves a standardised logistic fit, and so its signs,
        # unchanged; it is done only then, so ordinary data keeps its exact bits.
        columns = columns / np.where(largest > 0, largest, 1.0)[None, :]
    sign[usable] = fit_surrogate_sign(params, columns, y)
    return sign
