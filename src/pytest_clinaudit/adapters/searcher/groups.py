"""The brief's grammar of groups: one or two conditions (a threshold at each decile of a
measurement, either way; a value of a 0/1 column; a missing cell), every group of it
covering the brief's share of the test patients, and a group in the report's form."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .workspace import Workspace

# The brief's words, used when the facts block does not state them.
COVERAGE = (0.05, 0.25)
"""A hidden group covers this share of the test patients (the brief's grammar)."""
OPS = (">=", "<", "==", "missing")
"""The grammar's operators: a threshold either way, a 0/1 value, a missing cell."""
DECILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Where the search puts a measurement's thresholds."""


def rounded(value: float) -> float:
    """A threshold as a person writes it (six significant digits)."""
    return float(f"{value:.6g}")


Condition = tuple[int, str, "float | None"]
"""A condition of the grammar: (column index, op, value), the value None for ``missing``."""


class Groups:
    """Every group of the grammar covering the brief's share of the test patients.

    ``conditions`` are (column index, op, value) triples, ``masks`` their rows (C, n);
    group k is conditions ``first[k]`` and ``second[k]`` (equal for one condition).
    One-condition groups come first; of groups that select the same patients only the
    first is kept.
    """

    def __init__(
        self,
        ws: Workspace,
        coverage: tuple[float, float],
        ops: Sequence[str] = OPS,
        max_conditions: int = 2,
    ) -> None:
        import numpy as np

        X = ws.X_test
        n = len(X)
        found: list[Condition] = []
        for j, column in enumerate(ws.columns):
            if not ws.at_prediction(column):
                continue
            cells = X[:, j]
            present = cells[~np.isnan(cells)]
            if not len(present):
                continue
            if ws.binary(j):
                found += [(j, "==", 0.0), (j, "==", 1.0)]
            else:
                for q in DECILES:
                    t = rounded(float(np.quantile(present, q, method="inverted_cdf")))
                    found += [(j, ">=", t), (j, "<", t)]
            if len(present) < n:
                found.append((j, "missing", None))
        found = [c for c in found if c[1] in ops]
        conditions, masks, seen = [], [], set()
        for condition in found:
            mask = condition_mask(X, condition)
            key = np.packbits(mask).tobytes()
            if 0 < mask.sum() < n and key not in seen:
                seen.add(key)
                conditions.append(condition)
                masks.append(mask)
        self.conditions = conditions
        self.masks = np.array(masks, dtype=bool).reshape(len(masks), n)
        ones = self.masks.astype(np.float32)
        both = np.rint(ones @ ones.T).astype(np.int64)
        owner = np.array([c[0] for c in conditions])
        a, b = np.triu_indices(len(conditions))
        share = both[a, b] / max(n, 1)
        fits = (coverage[0] <= share) & (share <= coverage[1])
        fits &= (a == b) | ((owner[a] != owner[b]) & (max_conditions >= 2))
        order = np.lexsort((b, a, a != b))  # one condition first
        order = order[fits[order]]
        keep, seen = [], set()
        for k in order:
            key = np.packbits(self.masks[a[k]] & self.masks[b[k]]).tobytes()
            if key not in seen:
                seen.add(key)
                keep.append(k)
        self.first, self.second = a[keep], b[keep]
        self.sizes = both[self.first, self.second]
        self.columns = ws.columns

    def __len__(self) -> int:
        return len(self.first)

    def mask(self, k: int) -> Any:
        return self.masks[self.first[k]] & self.masks[self.second[k]]

    def length(self, k: int) -> int:
        return 1 if self.first[k] == self.second[k] else 2

    def of(self, k: int) -> tuple[Condition, ...]:
        """Group k's conditions, one or two."""
        picked = sorted({int(self.first[k]), int(self.second[k])})
        return tuple(self.conditions[c] for c in picked)

    def where(self, k: int) -> list[dict[str, Any]]:
        return where(self.of(k), self.columns)


def where(conditions: Sequence[Condition], columns: Sequence[str]) -> list[dict[str, Any]]:
    """A group in the report's form: ``[{"column": ..., "op": ..., "value": ...}, ...]``."""
    out = []
    for j, op, value in conditions:
        entry: dict[str, Any] = {"column": columns[j], "op": op}
        if value is not None:
            entry["value"] = value
        out.append(entry)
    return out


def describe(conditions: Sequence[Condition], columns: Sequence[str]) -> str:
    """``heart_rate >= 100 and anchor_age >= 70``."""
    return " and ".join(
        f"{e['column']} {e['op']}" + (f" {e['value']:g}" if "value" in e else "")
        for e in where(conditions, columns)
    )


def group_mask(X: Any, conditions: Sequence[Condition]) -> Any:
    """The rows of ``X`` (n, d) that meet every condition."""
    import numpy as np

    inside = np.ones(len(X), dtype=bool)
    for condition in conditions:
        inside &= condition_mask(X, condition)
    return inside


def condition_mask(X: Any, condition: Condition) -> Any:
    import numpy as np

    j, op, value = condition
    cells = X[:, j]
    if op == "missing":
        return np.isnan(cells)
    with np.errstate(invalid="ignore"):  # NaN is in no threshold and no value
        if op == ">=":
            return cells >= value
        if op == "<":
            return cells < value
        return cells == value
