"""The grammar of groups (SPEC §9): patients described by one or two conditions on columns.

The hard tier plants a defect in a *hidden* group: not one of the brief's listed
subgroups, but any group that one or two conditions on pre-outcome columns
describe, covering 5-25% of the test patients. One grammar serves everyone who
speaks about such a group, so that they mean the same patients:

- the builder draws a hidden group from it (:func:`draw_group`);
- the brief states it, and an agent's report describes a group in it
  (``{"where": [{"column": "anchor_age", "op": ">=", "value": 70}, ...]}``);
- the grader reads that description strictly (:func:`parse_group`) and compares
  the described patients with the planted ones by Jaccard overlap
  (:func:`jaccard`), never by the recipe's numbers;
- a searching expert enumerates the same space (:func:`candidate_groups`).

A condition is one of:

``column >= value`` / ``column < value``
    a threshold on a measurement;
``column == value``
    a value (0 or 1) of a 0/1 column;
``column missing``
    the cell is empty (NaN), where a column can be missing (FLCHAIN's creatinine).

A group is the AND of one or two conditions on distinct columns. A missing
cell satisfies no threshold and no value: "creatinine >= 1.3" means the
patients whose creatinine was measured at 1.3 or more.

Only NumPy is needed (imported where used, as everywhere in the reference): the
grader reads groups at grading time without torch.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

from .settings import Column

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]
    IntArray = npt.NDArray[np.int64]

Op = Literal[">=", "<", "==", "missing"]
OPS: tuple[Op, ...] = (">=", "<", "==", "missing")
"""The grammar's operators, in the order candidates are listed."""
MAX_CONDITIONS = 2
"""A group is described by at most two conditions: enough to cut across the listed
subgroups (age and heart rate), few enough that a search can enumerate every group."""
DECILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Where :func:`candidate_conditions` puts thresholds: the deciles of each column."""
MAX_JACCARD = 0.5
"""A hidden group's largest Jaccard overlap with a listed subgroup (:func:`draw_group`):
the grader credits a described group at Jaccard >= 0.5 with the planted one, so a planted
group below 0.5 with every listed subgroup cannot be named by a listed one."""

_SHOWN = 60
"""Characters of a submitted value quoted in a message; a value can be 1 MB long."""
_HINTS = {
    ">": ">=",
    "=>": ">=",
    "ge": ">=",
    "<=": "<",
    "=<": "<",
    "lt": "<",
    "=": "==",
    "eq": "==",
    "is": "==",
    "isnan": "missing",
    "is_missing": "missing",
    "isnull": "missing",
    "null": "missing",
    "nan": "missing",
    "na": "missing",
}
"""Operators an agent is likely to write, and the grammar's nearest one."""


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
    :class:`~.settings.Subgroup` of the v1 brief."""

    def mask(self, X: Any, columns: tuple[str, ...]) -> Any: ...


def _text(value: float) -> str:
    """A threshold as a person writes it: ``70``, ``97.7``, ``0.95``."""
    return f"{value:.6g}"


@dataclasses.dataclass(frozen=True)
class Condition:
    """One condition of the grammar: ``column op value`` (``value`` is ``None`` for
    ``missing``). Constructing one checks only its own shape; whether it fits a data
    dictionary is :func:`parse_group`'s question."""

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
        return f"{self.column} {self.op} {_text(cast(float, self.value))}"

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


# ------------------------------------------------------------------ reading a report


def _show(value: Any) -> str:
    """A submitted value for a message: brief and safe on any JSON value (a 1 MB string, an
    integer of 10,000 digits, a nested array)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {_quote(value)}"
    if isinstance(value, int):
        if value.bit_length() > 128:  # str() of a huge integer is slow, and refused beyond 4300
            return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, dict):
        return f"an object with {len(value)} keys"
    return f"a value of type {type(value).__name__}"


def _quote(text: str) -> str:
    """A submitted name, quoted and cut short."""
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a finite JSON number (not a boolean, not a string),
    else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double
        return None
    return number if math.isfinite(number) else None


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


def _closest(name: str, names: Sequence[str]) -> list[str]:
    if len(name) > 4 * max(map(len, names), default=0):  # difflib is quadratic in length
        return []
    lowered = {n.lower(): n for n in names}
    found = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
    return [lowered[f] for f in found]


def parse_group(
    obj: Any, columns: Sequence[Column], *, X: Any = None, where: str = "where"
) -> Group:
    """The group an untrusted report describes, or :class:`GroupError` naming every fault.

    ``obj`` is any parsed JSON value; a group is ``{"where": [condition, ...]}`` with one
    or two conditions ``{"column": name, "op": ">=" | "<" | "==" | "missing", "value":
    number}`` on distinct columns of the data dictionary ``columns``. Refused, each with
    its own message: anything but that shape (other keys included), a column that is not
    in the dictionary (naming the closest ones) or is recorded after the prediction, an
    operator outside the grammar, a value that is not a finite number or lies outside the
    column's possible range, ``==`` on a column that is not 0/1 or with a value other than
    0 or 1, and ``missing`` on a column that is never missing. ``X`` (n, d), the data in
    the order of ``columns``, if given, decides which columns are 0/1 and which have
    missing cells; otherwise the data dictionary does. ``where`` is the prefix of the
    messages' paths (for example ``models.m3.subgroup.where``).

    Never raises anything but :class:`GroupError`, whatever ``obj`` is.
    """
    context = where.rpartition(".")[0] or "the group"
    if not isinstance(obj, dict):
        raise GroupError([f'{context}: expected an object {{"where": [...]}}, got {_show(obj)}'])
    other = [k for k in obj if k != "where"]
    problems: list[str] = []
    if other:
        problems.append(
            f"{context}: unexpected key {_quote(str(other[0]))}; a group is "
            '{"where": [condition, ...]} and nothing else'
        )
    if "where" not in obj:
        problems.append(f"{where}: missing; list one or two conditions")
        raise GroupError(problems)
    items = obj["where"]
    if not isinstance(items, list):
        problems.append(f"{where}: expected an array of 1 to 2 conditions, got {_show(items)}")
        raise GroupError(problems)
    if not 1 <= len(items) <= MAX_CONDITIONS:
        problems.append(f"{where}: a group has 1 to {MAX_CONDITIONS} conditions, got {len(items)}")
        raise GroupError(problems)
    by_name = {c.name: (j, c) for j, c in enumerate(columns)}
    values = None if X is None else _columns_of(X, len(columns))
    conditions: list[Condition] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        path = f"{where}[{i}]"
        condition, found = _condition(item, path, by_name, values)
        problems.extend(found)
        if condition is None:
            continue
        if condition.column in seen:
            problems.append(
                f"{path}.column: {condition.column} is already used by {where}"
                f"[{seen[condition.column]}]; a group uses each column once (a range of one "
                "column is not in the grammar: pick its one threshold that matters)"
            )
            continue
        seen[condition.column] = i
        conditions.append(condition)
    if problems:
        raise GroupError(problems)
    return Group(tuple(conditions))


def _columns_of(X: Any, d: int) -> Any:
    import numpy as np

    values = np.asarray(X, dtype=np.float64)
    if values.ndim != 2 or values.shape[1] != d:
        raise ValueError(f"X must have shape (n, {d}) to match the columns, got {values.shape}")
    return values


_KEYS = ("column", "op", "value")


def _condition(
    item: Any, path: str, by_name: dict[str, tuple[int, Column]], values: Any
) -> tuple[Condition | None, list[str]]:
    """One condition of a report, or ``None`` and its faults."""
    if not isinstance(item, dict):
        return None, [
            f'{path}: expected an object {{"column": ..., "op": ..., "value": ...}}, '
            f"got {_show(item)}"
        ]
    problems: list[str] = []
    other = [k for k in item if k not in _KEYS]
    if other:
        problems.append(
            f"{path}: unexpected key {_quote(str(other[0]))}; a condition has the keys "
            "column, op and value"
        )
    name, raw = item.get("column"), item.get("value")
    column = None
    if "column" not in item:
        problems.append(f"{path}.column: missing; name a column of the data dictionary")
    elif not isinstance(name, str):
        problems.append(f"{path}.column: expected a column name, got {_show(name)}")
    elif name not in by_name:
        closest = _closest(name, list(by_name))
        hint = f" (closest: {', '.join(closest)})" if closest else ""
        problems.append(
            f"{path}.column: {_quote(name)} is not a column of the data dictionary{hint}"
        )
    elif not by_name[name][1].at_prediction:
        problems.append(
            f"{path}.column: {name} is recorded {by_name[name][1].recorded}, after the "
            "prediction; a group is described by what is known when the model is used"
        )
    else:
        column = by_name[name]
    op = _op(item, path, problems)
    value = None
    if op == "missing":
        if raw is not None:
            problems.append(f"{path}.value: 'missing' takes no value, got {_show(raw)}")
        if column is not None and not can_be_missing(column[1], _at(values, column[0])):
            problems.append(
                f"{path}: {column[1].name} is never missing in the data, so 'missing' "
                "describes nobody"
            )
    elif op is not None or "value" in item:
        value = _number(raw)
        if value is None:
            got = "missing" if "value" not in item else _show(raw)
            problems.append(f"{path}.value: expected a finite number, got {got}")
        elif column is not None:
            problems.extend(_value_problems(path, op, value, column[1], _at(values, column[0])))
    if problems or column is None or op is None:
        return None, problems
    return Condition(column[1].name, op, value), []


def _op(item: dict[Any, Any], path: str, problems: list[str]) -> Op | None:
    """A condition's operator, or ``None`` with its fault added to ``problems``."""
    op = item.get("op")
    if "op" not in item:
        problems.append(f"{path}.op: missing; one of {', '.join(OPS)}")
        return None
    for known in OPS:
        if op == known:
            return known
    hint = _HINTS.get(op.strip().lower()) if isinstance(op, str) and len(op) < 20 else None
    also = f" (for {op!r} write {hint!r})" if hint else ""
    problems.append(f"{path}.op: expected one of {', '.join(OPS)}, got {_show(op)}{also}")
    return None


def _at(values: Any, j: int) -> Any:
    return None if values is None else values[:, j]


def _value_problems(path: str, op: Any, value: float, column: Column, values: Any) -> list[str]:
    if op == "==":
        if not is_binary(column, values):
            return [
                f"{path}.op: '==' is for a 0/1 column and {column.name} is not one; "
                "describe a range of it with '>=' or '<'"
            ]
        if value not in (0.0, 1.0):
            return [f"{path}.value: {column.name} is 0 or 1, got {_text(value)}"]
        return []
    if not column.low <= value <= column.high:
        return [
            f"{path}.value: {_text(value)} lies outside {column.name}'s possible range "
            f"({_text(column.low)} to {_text(column.high)})"
        ]
    return []


# ------------------------------------------------------------------ comparing groups


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


# ------------------------------------------------------------------ the space of groups


def _thresholds(present: Any, quantiles: Sequence[float], column: Column) -> list[float]:
    """The ``quantiles`` of a column's present values, each a value of the data (so that an
    integer column gets integer thresholds) rounded to a step a hundred times finer than
    the column's central spread (so that ``97.7`` reads as such, not ``97.70183``), and
    held within its possible range."""
    import numpy as np

    values = np.quantile(present, list(quantiles), method="inverted_cdf")
    spread = float(np.quantile(present, 0.9) - np.quantile(present, 0.1))
    thresholds = []
    for value in map(float, values):
        if spread > 0:
            step = 10.0 ** math.floor(math.log10(spread / 100))
            value = float(f"{round(value / step) * step:.12g}")  # 97.7, not 97.70000000000002
        thresholds.append(min(max(value, column.low), column.high))
    return thresholds


def candidate_conditions(
    X: Any, columns: Sequence[Column], quantiles: Sequence[float] = DECILES
) -> list[Condition]:
    """Every condition worth trying on the data ``X`` (n, d) whose columns ``columns`` name.

    Per pre-outcome column: ``>=`` and ``<`` at each of ``quantiles`` of its present
    values (a 0/1 column: ``== 0`` and ``== 1`` instead), and ``missing`` where it has
    missing cells. Conditions that select nobody or everybody are left out, and of
    conditions that select the same rows only the first is kept (a discrete column's
    deciles coincide), in the order column, quantile, ``>=`` before ``<``.
    """
    import numpy as np

    values = _columns_of(X, len(columns))
    found: list[Condition] = []
    for j, column in enumerate(columns):
        if not column.at_prediction:
            continue
        cells = values[:, j]
        present = cells[~np.isnan(cells)]
        if not len(present):
            continue
        if is_binary(column, cells):
            found += [Condition(column.name, "==", 0.0), Condition(column.name, "==", 1.0)]
        else:
            for t in _thresholds(present, quantiles, column):
                found += [Condition(column.name, ">=", t), Condition(column.name, "<", t)]
        if len(present) < len(cells):
            found.append(Condition(column.name, "missing"))
    names = [c.name for c in columns]
    kept, seen = [], set()
    n = len(values)
    for condition in found:
        inside = condition.mask(values, names)
        count = int(inside.sum())
        key = np.packbits(inside).tobytes()
        if 0 < count < n and key not in seen:
            seen.add(key)
            kept.append(condition)
    return kept


def _popcount(packed: Any) -> Any:
    """Set bits per row of a packed boolean matrix (G, bytes), as int64 (G,)."""
    import numpy as np

    count = getattr(np, "bitwise_count", None)  # NumPy 2; a byte table before it
    if count is None:
        table = np.array([bin(byte).count("1") for byte in range(256)], dtype=np.uint8)
        return table[packed].sum(axis=1, dtype=np.int64)
    return count(packed).sum(axis=1, dtype=np.int64)


_CHUNK = 1024
"""Groups whose masks are built at once (1024 x n booleans)."""


@dataclasses.dataclass(frozen=True)
class GroupSpace:
    """Every group of the grammar that covers ``low`` to ``high`` of some rows, built once
    (:meth:`of`) and asked many times: a builder drawing hidden groups, an expert
    searching them, a test drawing fifty.

    Group k is conditions ``first[k]`` and ``second[k]`` of ``conditions`` (equal for a
    one-condition group); its mask is kept packed eight rows to a byte, so that its
    overlap with any other group is a bitwise AND and a popcount, not a loop over rows.
    """

    conditions: tuple[Condition, ...]
    first: IntArray
    second: IntArray
    packed: Any
    """uint8 (G, ceil(n / 8)): each group's mask, :func:`numpy.packbits` along the rows."""
    sizes: IntArray
    """The rows in each group (G,)."""
    rows: int
    """n, the rows the groups were counted on."""

    @classmethod
    def of(
        cls,
        X: Any,
        columns: Sequence[Column],
        low: float = 0.05,
        high: float = 0.25,
        *,
        quantiles: Sequence[float] = DECILES,
    ) -> GroupSpace:
        """The groups built from :func:`candidate_conditions` of ``X`` (n, d) that cover
        between ``low`` and ``high`` of its rows, both included.

        One-condition groups come first, then pairs on distinct columns; of groups that
        select the same rows only the first is kept. The pairs' sizes come from one matrix
        product; masks are built only for the groups that fit, to deduplicate them.
        """
        import numpy as np

        values = _columns_of(X, len(columns))
        names = [c.name for c in columns]
        conditions = candidate_conditions(values, columns, quantiles)
        n = len(values)
        if n >= 2**24:  # float32 counts are exact below 2**24
            raise ValueError(f"{n} rows: groups are counted in float32, up to 2**24 rows")
        # (C, n): each condition's rows, contiguous, so that a pair's mask is two row reads.
        M = np.array([c.mask(values, names) for c in conditions], dtype=bool)
        M = M.reshape(len(conditions), n)
        # Rows in both of two conditions, for every pair at once: one matrix product.
        ones = M.astype(np.float32)
        both = np.rint(ones @ ones.T).astype(np.int64)
        owner = np.array([names.index(c.column) for c in conditions], dtype=np.int64)
        a, b = np.triu_indices(len(conditions))  # a == b: the one-condition groups
        share = both[a, b] / max(n, 1)
        fits = (low <= share) & (share <= high) & ((a == b) | (owner[a] != owner[b]))
        # One-condition groups first: of two descriptions of the same patients, the shorter
        # wins.
        order = np.lexsort((b, a, a != b))
        order = order[fits[order]]
        a, b = a[order], b[order]
        keep = np.zeros(len(a), dtype=bool)
        packed = np.zeros((len(a), (n + 7) // 8), dtype=np.uint8)
        seen: set[bytes] = set()
        for start in range(0, len(a), _CHUNK):
            part = slice(start, start + _CHUNK)
            packed[part] = np.packbits(M[a[part]] & M[b[part]], axis=1)
            for k in range(start, min(start + _CHUNK, len(a))):
                key = packed[k].tobytes()
                if key not in seen:
                    seen.add(key)
                    keep[k] = True
        a, b = a[keep], b[keep]
        return cls(tuple(conditions), a, b, packed[keep], both[a, b], n)

    def __len__(self) -> int:
        return len(self.first)

    def group(self, k: int) -> Group:
        a, b = int(self.first[k]), int(self.second[k])
        pair = (self.conditions[a],) if a == b else (self.conditions[a], self.conditions[b])
        return Group(pair)

    def groups(self) -> list[Group]:
        return [self.group(k) for k in range(len(self))]

    def mask(self, k: int) -> BoolArray:
        """Group k's rows, boolean (n,)."""
        import numpy as np

        return np.unpackbits(self.packed[k], count=self.rows).astype(bool)

    def _common(self, mask: Any) -> tuple[IntArray, int]:
        """Each group's rows inside ``mask`` (n,), and the rows of ``mask``."""
        import numpy as np

        inside = np.asarray(mask, dtype=bool)
        if inside.shape != (self.rows,):
            raise ValueError(f"a mask of {self.rows} rows was expected, got {inside.shape}")
        return _popcount(self.packed & np.packbits(inside)), int(inside.sum())

    def overlaps(self, mask: Any) -> FloatArray:
        """Every group's Jaccard overlap with the rows of ``mask`` (n,), (G,) at once; 0 where
        both are empty (:func:`jaccard`)."""
        import numpy as np

        intersection, size = self._common(mask)
        union = self.sizes + size - intersection
        return np.where(union > 0, intersection / np.maximum(union, 1), 0.0)

    def held(self, mask: Any) -> FloatArray:
        """The share of the rows of ``mask`` (n,) that each group holds, (G,); 0 for an empty
        mask. A group may be far from a listed subgroup by Jaccard and still hold much of
        it (``age >= 80 and female`` holds half of ``age >= 75``): planted there, a defect
        shows in the listed subgroup too."""
        import numpy as np

        intersection, size = self._common(mask)
        return np.asarray(intersection / size if size else np.zeros(len(self)), dtype=np.float64)

    def made_up_of(self, mask: Any) -> FloatArray:
        """The share of each group's rows that lie in ``mask`` (n,), (G,): the converse of
        :meth:`held`."""
        import numpy as np

        intersection, _ = self._common(mask)
        return np.asarray(intersection / np.maximum(self.sizes, 1), dtype=np.float64)

    def draw(
        self,
        rng: np.random.Generator,
        avoid: Sequence[Any],
        *,
        max_jaccard: float = MAX_JACCARD,
        max_held: float | None = None,
    ) -> Group:
        """A group drawn uniformly with ``rng`` among those whose Jaccard overlap with each
        mask of ``avoid`` (n,) is below ``max_jaccard`` and, if ``max_held`` is given, that
        hold at most that share of each (:func:`draw_group`)."""
        import numpy as np

        far = np.ones(len(self), dtype=bool)
        for mask in avoid:
            far &= self.overlaps(mask) < max_jaccard
            if max_held is not None:
                far &= self.held(mask) <= max_held
        choices = np.flatnonzero(far)
        if not len(choices):
            held = "" if max_held is None else f" and holding at most {max_held:g} of it"
            raise ValueError(
                f"none of the {len(self)} groups is below a Jaccard overlap of "
                f"{max_jaccard:g} with every group to avoid{held}"
            )
        return self.group(int(choices[rng.integers(len(choices))]))


def candidate_groups(
    X: Any,
    columns: Sequence[Column],
    low: float = 0.05,
    high: float = 0.25,
    *,
    quantiles: Sequence[float] = DECILES,
) -> list[Group]:
    """Every group of the grammar, built from :func:`candidate_conditions`, that covers
    between ``low`` and ``high`` of the rows of ``X`` (n, d), both included; see
    :meth:`GroupSpace.of`."""
    return GroupSpace.of(X, columns, low, high, quantiles=quantiles).groups()


def draw_group(
    rng: np.random.Generator,
    X: Any,
    columns: Sequence[Column],
    listed_subgroups: Sequence[Masked],
    low: float = 0.05,
    high: float = 0.25,
    *,
    max_jaccard: float = MAX_JACCARD,
    max_held: float | None = None,
    quantiles: Sequence[float] = DECILES,
) -> Group:
    """A hidden group for the builder: drawn uniformly, with ``rng``, among the
    :func:`candidate_groups` of ``X`` (n, d) covering ``low`` to ``high`` of its rows whose
    Jaccard overlap with each of ``listed_subgroups`` (the v1 brief's listed subgroups, or
    any other groups to keep away from) is below ``max_jaccard``: so that no listed
    subgroup names it. With ``max_held``, each group drawn also holds at most that share
    of every listed subgroup's patients (:meth:`GroupSpace.held`), so that a defect
    planted in it does not show in a listed subgroup as well.

    Deterministic in ``rng``: the candidates are listed in a fixed order, and one integer
    is drawn. ``ValueError`` if no candidate is far enough from every listed subgroup. To
    draw many, build the :class:`GroupSpace` once and call its :meth:`~GroupSpace.draw`.
    """
    import numpy as np

    values = np.asarray(X, dtype=np.float64)
    space = GroupSpace.of(values, columns, low, high, quantiles=quantiles)
    names = tuple(c.name for c in columns)
    return space.draw(
        rng,
        [listed.mask(values, names) for listed in listed_subgroups],
        max_jaccard=max_jaccard,
        max_held=max_held,
    )
