"""The grammar of groups: a condition, a group of one or two, what each selects, and the
facts about a column the grammar depends on (0/1, ever missing)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from ..settings import Column

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    BoolArray = npt.NDArray[np.bool_]

Op = Literal[">=", "<", "==", "missing"]
OPS: tuple[Op, ...] = (">=", "<", "==", "missing")
"""The grammar's operators, in the order candidates are listed."""
MAX_CONDITIONS = 2
"""A group is described by at most two conditions: enough to cut across the listed
subgroups (age and heart rate), few enough that a search can enumerate every group."""


class GroupError(ValueError):
    """A group description that the grammar does not allow.

    ``problems`` holds one message per fault, each naming where it is (``where[1].op``),
    what arrived and what would fix it; the exception's text joins them.
    """

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(self.problems))


class Masked(Protocol):
    """Anything that picks rows out of ``X`` by column names: a :class:`Group`, or a listed
    :class:`~..settings.Subgroup` of the v1 brief."""

    def mask(self, X: Any, columns: tuple[str, ...]) -> Any: ...


def as_text(value: float) -> str:
    """A threshold as a person writes it: ``70``, ``97.7``, ``0.95``."""
    return f"{value:.6g}"


@dataclasses.dataclass(frozen=True)
class Condition:
    """One condition of the grammar: ``column op value`` (``value`` is ``None`` for
    ``missing``). Constructing one checks only its own shape; whether it fits a data
    dictionary is :func:`~.reading.parse_group`'s question."""

    column: str
    op: Op
    value: float | None = None

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise GroupError([f"op must be one of {', '.join(OPS)}, got {self.op!r}"])
        if self.op == "missing":
            if self.value is not None:
                raise GroupError([f"{self.column} missing takes no value, got {self.value!r}"])
        elif self.value is None or not math.isfinite(self.value):
            raise GroupError([f"{self.column} {self.op} needs a finite value, got {self.value!r}"])
        else:
            object.__setattr__(self, "value", float(self.value))

    def mask(self, X: Any, columns: Sequence[str]) -> BoolArray:
        """Boolean (n,) of the rows of ``X`` (n, d) that satisfy the condition; ``columns``
        names the d columns. A NaN cell satisfies only ``missing``."""
        import numpy as np

        values = np.asarray(X, dtype=np.float64)[:, _index(columns, self.column)]
        if self.op == "missing":
            return np.isnan(values)
        value = cast(float, self.value)
        # Comparisons with NaN are False without a warning: a missing cell is outside
        # every threshold and every value.
        inside: BoolArray
        if self.op == ">=":
            inside = values >= value
        elif self.op == "<":
            inside = values < value
        else:
            inside = values == value
        return inside

    def describe(self) -> str:
        if self.op == "missing":
            return f"{self.column} is missing"
        return f"{self.column} {self.op} {as_text(cast(float, self.value))}"

    def to_json(self) -> dict[str, Any]:
        """The report form: ``{"column": ..., "op": ..., "value": ...}`` (no value for
        ``missing``)."""
        entry: dict[str, Any] = {"column": self.column, "op": self.op}
        if self.value is not None:
            entry["value"] = self.value
        return entry


@dataclasses.dataclass(frozen=True)
class Group:
    """The patients who satisfy every condition: one or two, on distinct columns."""

    conditions: tuple[Condition, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "conditions", tuple(self.conditions))
        count = len(self.conditions)
        if not 1 <= count <= MAX_CONDITIONS:
            raise GroupError([f"a group has 1 to {MAX_CONDITIONS} conditions, got {count}"])
        names = [c.column for c in self.conditions]
        if len(set(names)) != len(names):
            raise GroupError([f"a group uses each column once, got {' and '.join(names)}"])

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(c.column for c in self.conditions)

    def mask(self, X: Any, columns: Sequence[str]) -> BoolArray:
        """Boolean (n,) of the rows of ``X`` (n, d) in the group; ``columns`` names the d
        columns."""
        inside = self.conditions[0].mask(X, columns)
        for condition in self.conditions[1:]:
            inside = inside & condition.mask(X, columns)
        return inside

    def describe(self) -> str:
        """Short human text, e.g. ``anchor_age >= 70 and gender_enc == 0``."""
        return " and ".join(c.describe() for c in self.conditions)

    def to_json(self) -> dict[str, Any]:
        """The report form: ``{"where": [condition, ...]}``."""
        return {"where": [c.to_json() for c in self.conditions]}


def _index(columns: Sequence[str], name: str) -> int:
    try:
        return list(columns).index(name)
    except ValueError:
        raise GroupError([f"{name!r} is not one of the columns {', '.join(columns)}"]) from None


def is_binary(column: Column, values: Any = None) -> bool:
    """Whether ``column`` is a 0/1 column: its possible range is exactly 0 to 1 and, when its
    ``values`` (n,) are given, each present one is 0 or 1."""
    if (column.low, column.high) != (0.0, 1.0):
        return False
    if values is None:
        return True
    import numpy as np

    present = np.asarray(values, dtype=np.float64)
    present = present[~np.isnan(present)]
    return bool(np.isin(present, (0.0, 1.0)).all())


def can_be_missing(column: Column, values: Any = None) -> bool:
    """Whether ``column`` has missing cells: in its ``values`` (n,) when given, else by the
    data dictionary (a column with a ``fill`` may be missing)."""
    if values is None:
        return column.fill is not None
    import numpy as np

    return bool(np.isnan(np.asarray(values, dtype=np.float64)).any())


def data_columns(X: Any, d: int) -> Any:
    """``X`` as a float (n, d) array, ``d`` the columns it must have."""
    import numpy as np

    values = np.asarray(X, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != d:
        raise ValueError(f"X must have shape (n, {d}) to match the columns, got {values.shape}")
    return values


def coverage(mask: Any) -> float:
    """The share of the rows a boolean ``mask`` (n,) selects; 0 for no rows."""
    import numpy as np

    inside = np.asarray(mask, dtype=bool)
    return float(inside.mean()) if inside.size else 0.0


def jaccard(a_mask: Any, b_mask: Any) -> float:
    """|a ∩ b| / |a ∪ b| of two boolean masks (n,) over the same rows, in [0, 1].

    Two empty groups give 0, not 1: a description that selects nobody is never the
    planted group, whatever it is compared with.
    """
    import numpy as np

    a, b = np.asarray(a_mask, dtype=bool), np.asarray(b_mask, dtype=bool)
    if a.shape != b.shape:
        raise ValueError(f"masks of different shapes {a.shape} and {b.shape}")
    union = int(np.count_nonzero(a | b))
    return int(np.count_nonzero(a & b)) / union if union else 0.0
