"""The space of groups: every group of the grammar that covers a share of the patients,
built once and asked many times (the builder draws hidden groups from it, the searching
expert enumerates it, the verdicts scan it)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..settings import Column
from .grammar import Condition, Group, Masked, data_columns, is_binary

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    BoolArray = npt.NDArray[np.bool_]
    IntArray = npt.NDArray[np.int64]

DECILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Where :func:`candidate_conditions` puts thresholds: the deciles of each column."""
MAX_JACCARD = 0.5
"""A hidden group's largest Jaccard overlap with a listed subgroup (:func:`draw_group`):
the grader credits a described group at Jaccard >= 0.5 with the planted one, so a planted
group below 0.5 with every listed subgroup cannot be named by a listed one."""


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

    values = data_columns(X, len(columns))
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

        values = data_columns(X, len(columns))
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
