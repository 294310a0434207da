"""Categorical columns as the audit holds them, and as a model is given them.

A :class:`~..data.Dataset` holds float64 arrays, which is what every attack
computes with. A categorical column (text such as ``sex = "F"``) is held there
as a float *code*, the index of its value in a sorted list of levels, and a
missing value of any column as NaN. Nothing else changes: hashing, canonical
order and sampling already treat codes and NaN as numbers.

The model never sees a code. :meth:`Categories.frame` and
:meth:`Categories.objects` turn the rows back into what it was fitted on: the
level strings in categorical columns (NaN where missing) and the numbers
elsewhere, as a DataFrame with each column's own dtype or as an object array.
So a ``Pipeline(ColumnTransformer(OneHotEncoder))`` fitted on a string ``sex``
column gets strings, and XGBoost gets its NaN.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]


@dataclasses.dataclass(frozen=True)
class Categories:
    """Categorical columns: data column index -> its levels, in code order.

    A cell holding code ``c`` means ``levels[c]``; NaN means missing.
    """

    levels: tuple[tuple[int, tuple[str, ...]], ...]

    @classmethod
    def of(cls, levels: Mapping[int, Sequence[str]]) -> Categories:
        return cls(tuple(sorted((int(j), tuple(map(str, v))) for j, v in levels.items())))

    @property
    def columns(self) -> tuple[int, ...]:
        return tuple(j for j, _ in self.levels)

    def __bool__(self) -> bool:
        return bool(self.levels)

    def decoded(self, column: Any, index: int) -> Any:
        """Column ``index`` of the data as a model is given it: strings (or NaN) for a
        categorical column, the float values otherwise."""
        import numpy as np

        for j, names in self.levels:
            if j == index:
                codes = np.asarray(column, dtype=np.float64)
                known = np.isfinite(codes) & (codes >= 0) & (codes < len(names))
                table = np.asarray(names, dtype=object)
                out = np.full(codes.shape, np.nan, dtype=object)
                out[known] = table[codes[known].astype(np.int64)]
                return out
        return np.asarray(column, dtype=np.float64)

    def objects(self, X: FloatArray, columns: Sequence[int]) -> Any:
        """Rows ``X`` (n, k), whose columns are the data's ``columns``, as an object array."""
        import numpy as np

        out = np.empty(X.shape, dtype=object)
        for position, index in enumerate(columns):
            out[:, position] = self.decoded(X[:, position], index)
        return out

    def frame(self, X: FloatArray, columns: Sequence[int], names: Sequence[str]) -> Any:
        """Rows ``X`` as a pandas DataFrame named ``names``, each column with its own dtype."""
        import importlib

        pandas: Any = importlib.import_module("pandas")
        return pandas.DataFrame(
            {
                name: self.decoded(X[:, position], index)
                for position, (index, name) in enumerate(zip(columns, names, strict=True))
            }
        )

    def summary(self, feature_names: Sequence[str]) -> dict[str, list[str]]:
        """JSON-ready: each categorical column's name and levels."""
        return {feature_names[j]: list(names) for j, names in self.levels}


NO_CATEGORIES = Categories(())
