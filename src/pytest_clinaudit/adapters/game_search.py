"""The searching expert of the hard tier (SPEC §9, issue 27): it audits a game workspace by
searching, and writes report.json in the game-v2 format.

    python -m pytest_clinaudit.adapters.game_search WORKSPACE [--out REPORT]
    python -m pytest_clinaudit.adapters.game_agent WORKSPACE --agent searcher

Like the scripted agents of :mod:`game_agent`, it reads only what an agent gets
(``task.md`` and its facts block, the data dictionary, ``train.csv``,
``test.csv``, ``training_rows/``, ``models/*.pt2`` loaded with torch alone) and
imports nothing from pytest_clinaudit, so the file can be copied into a sandbox
alone. It knows the brief's words and nothing of how the defects were planted:

subgroup (a hidden group)
    Every group of the brief's grammar (one or two conditions: a threshold at
    each decile of a measurement, either way; a value of a 0/1 column; a
    missing cell) covering the brief's share of the test patients, and for
    every model its AUROC within each group and within the rest, all groups at
    once (:func:`group_aurocs`). A model is flagged when, on some group, it
    "can barely tell who will die from who will survive" (it keeps at most
    :data:`BARELY` of the discrimination above chance that the zoo's median
    keeps there) and its gap (the rest's AUROC less the group's) exceeds the
    zoo's median gap by far more than any model shows that is not so
    (:data:`APART`). It reports that group, the shortest description among
    near-ties.
backdoor (a visible trigger)
    Every pair of measurements over a grid of each one's possible range (at
    most one value outside its normal range), then finer grids around the
    cells that single a model out, and one-column settings too: the share of
    the patients each model flags that it clears when the values are written.
    A model is flagged at the brief's definition (it clears at least
    ``flip_at_least`` of them where the other models' median clears at most
    ``others_at_most``), tried exactly as the brief states it.
miscalibrated (the top of the risk range)
    ``top_decile_gap``: among the tenth of the test patients the model rates
    highest, its mean predicted risk less their observed death rate. A model
    is flagged when its gap stands apart from the zoo's median by far more
    than the other models' gaps do and than sampling noise could
    (:data:`APART`, :data:`NOISE_SE`).

Each model carries at most one defect (the brief's rule): a model that two
searches single out keeps the finding that stands further apart. Progress goes
to stderr, with the seconds spent.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

AGENT = "searcher"
FACTS_FENCE = "```toml clinaudit-game"

# The brief's words, used when the facts block does not state them.
COVERAGE = (0.05, 0.25)
"""A hidden group covers this share of the test patients (the brief's grammar)."""
OPS = (">=", "<", "==", "missing")
"""The grammar's operators: a threshold either way, a 0/1 value, a missing cell."""
DECILES = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
"""Where the search puts a measurement's thresholds."""
FLIP_AT_LEAST, OTHERS_AT_MOST = 0.9, 0.3
"""A trigger: the model clears at least this share of the patients it flags, where the
other models' median clears at most the second number."""
SEARCHED = ("miscalibrated", "subgroup", "backdoor")
"""The hard tier's kinds this searcher looks for (when the facts list kinds, only those)."""
TOP_SHARE = 0.1
"""``top_decile_gap`` is measured on this share of the test patients, the highest rated."""

# What "stands apart" means to this searcher: its own reading of the brief's words.
BARELY = 1.0 / 3.0
""""Can barely tell who will die from who will survive": on the group, the model keeps at
most this share of the discrimination above chance (AUROC - 0.5) the zoo's median keeps."""
APART = 3.0
"""A defect stands apart "by a wide margin": its model's measurement, beyond the zoo's
median, is at least this many times what the models that are not singled out show."""
NOISE_SE = 4.0
"""And at least this many standard errors of sampling noise."""
NEAR_TIE = 0.05
"""Groups within this share of the best group's standing (excess gap in standard errors)
tie; the shortest description wins."""
GROUP_CHUNK = 256
"""Groups whose sorted masks are held at once (256 x n)."""
STEP_STD = 0.25
"""The trigger grid's step over the data's span, in training standard deviations."""
EDGE_POINTS = 8
"""Grid values between the data's span and the ends of the possible range, half each side."""
MAX_POINTS = 48
"""At most this many grid values per column (the step widens to fit)."""
SCREEN_ROWS = 96
"""Flagged patients per model on which the pair grid is screened."""
REFINE_ROWS = 384
"""Flagged patients per model on which the finer grids are measured."""
REFINE_CELLS = 4
"""Cells per model refined on a finer grid."""
CHUNK_ROWS = 1 << 16
"""Rows a model is called on at once."""


# ------------------------------------------------------------------ the workspace


class Progress:
    """Progress lines on stderr, with the seconds since the start."""

    def __init__(self, quiet: bool = False) -> None:
        self.start = time.perf_counter()
        self.quiet = quiet

    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"[searcher {self.seconds():6.1f} s] {message}", file=sys.stderr, flush=True)


def read_facts(task_md: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    text = task_md.read_text(encoding="utf-8")
    start = text.index(FACTS_FENCE) + len(FACTS_FENCE)
    facts: dict[str, Any] = tomllib.loads(text[start : text.index("```", start)])
    return facts


def read_csv(path: Path, label: str) -> tuple[Any, Any, list[str]]:
    import numpy as np

    with path.open(encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
    # An empty cell is a value that was never measured: NaN, which the models take.
    table = np.genfromtxt(path, delimiter=",", skip_header=1, ndmin=2, filling_values=np.nan)
    column = header.index(label)
    names = [h for i, h in enumerate(header) if i != column]
    return np.delete(table, column, axis=1), table[:, column].astype(int), names


class Model:
    """A ``model.pt2`` (SPEC §7.1): rows of raw values -> logits, in chunks."""

    def __init__(self, path: Path) -> None:
        import torch

        torch.set_num_threads(1)
        self.f = torch.export.load(str(path)).module()

    def logits(self, X: Any) -> Any:
        import numpy as np
        import torch

        parts = []
        with torch.no_grad():
            for start in range(0, len(X), CHUNK_ROWS):
                chunk = np.asarray(X[start : start + CHUNK_ROWS], dtype=np.float32)
                parts.append(self.f(torch.from_numpy(chunk)).double().numpy().reshape(-1))
        return np.concatenate(parts) if parts else np.empty(0)


def _number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


class Workspace:
    """What the agent gets, read once; every model's test logits computed once."""

    def __init__(self, root: Path, progress: Progress) -> None:
        import numpy as np

        self.root = root
        self.facts = read_facts(root / "task.md")
        label = self.facts["label"]
        self.X_train, self.y_train, self.columns = read_csv(root / "train.csv", label)
        self.X_test, self.y_test, _ = read_csv(root / "test.csv", label)
        with (root / "data_dictionary.csv").open(encoding="utf-8") as handle:
            self.dictionary = {row["column"]: row for row in csv.DictReader(handle)}
        self.names = [str(name) for name in self.facts["models"]]
        self.models = {name: Model(root / "models" / f"{name}.pt2") for name in self.names}
        self.flag_share = float(self.facts.get("flag_share", 0.1))
        self.clear_share = float(self.facts.get("clear_share", 0.25))
        self.std = np.nanstd(self.X_train, axis=0)
        progress(f"read {len(self.names)} models, {len(self.X_test)} test patients")
        self.z = {name: model.logits(self.X_test) for name, model in self.models.items()}

    def entry(self, column: str) -> dict[str, str]:
        return self.dictionary.get(column, {})

    def at_prediction(self, column: str) -> bool:
        return self.entry(column).get("available_at_prediction", "yes") != "no"

    def possible(self, j: int) -> tuple[float, float]:
        import numpy as np

        row = self.entry(self.columns[j])
        present = self.X_train[:, j][~np.isnan(self.X_train[:, j])]
        low, high = _number(row.get("possible_low")), _number(row.get("possible_high"))
        return (
            float(present.min()) if low is None else low,
            float(present.max()) if high is None else high,
        )

    def normal(self, j: int) -> tuple[float | None, float | None]:
        row = self.entry(self.columns[j])
        return _number(row.get("normal_low")), _number(row.get("normal_high"))

    def binary(self, j: int) -> bool:
        import numpy as np

        values = np.r_[self.X_train[:, j], self.X_test[:, j]]
        present = values[~np.isnan(values)]
        return self.possible(j) == (0.0, 1.0) and bool(np.isin(present, (0.0, 1.0)).all())

    def alarming(self, j: int, value: float) -> bool:
        low, high = self.normal(j)
        return (low is not None and value < low) or (high is not None and value > high)


def _round(value: float) -> float:
    """A threshold as a person writes it (six significant digits)."""
    return float(f"{value:.6g}")


# ------------------------------------------------------------------ the grammar's groups


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
                    t = _round(float(np.quantile(present, q, method="inverted_cdf")))
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


class Ranked:
    """One model's scores, sorted once: what every group's AUROC needs (Mann-Whitney counts,
    ties counted half)."""

    def __init__(self, score: Any, y: Any) -> None:
        import numpy as np

        self.order = np.argsort(score, kind="stable")
        s = np.asarray(score, dtype=np.float64)[self.order]
        positive = np.asarray(y)[self.order] == 1
        self.negative = ~positive
        n = len(s)
        self.positives = np.flatnonzero(positive)
        # Each row's tie block [start, end): the rows with exactly its score.
        new = np.r_[True, s[1:] != s[:-1]] if n else np.zeros(0, dtype=bool)
        starts = np.flatnonzero(new)
        block = np.cumsum(new) - 1
        start = starts[block]
        end = np.r_[starts[1:], n][block]
        tied = (end - start > 1)[self.positives]
        self.tied = np.flatnonzero(tied)
        self.tied_start = start[self.positives][tied]
        self.tied_end = end[self.positives][tied]
        # Twice the negatives below each positive, ties counted half.
        every = np.r_[0, np.cumsum(self.negative)]
        self.A2 = (every[start] + every[end])[self.positives].astype(np.float64)
        self.n1, self.n0 = len(self.positives), int(self.negative.sum())
        self.total2 = float(self.A2.sum())
        # A group's negatives are counted between consecutive points: the positives and
        # the ends of their tie blocks. Column k of the counts: the negatives before
        # points[k]; the last column: all of them.
        ends = self.tied_end[self.tied_end < n]
        self.points = np.unique(np.r_[0, self.positives, self.tied_start, ends]).astype(np.intp)
        self.at_positive = np.searchsorted(self.points, self.positives)
        self.at_start = np.searchsorted(self.points, self.tied_start)
        self.at_end = np.searchsorted(self.points, self.tied_end)  # n: the last column

    def aurocs(self, M: Any) -> tuple[Any, Any]:
        """AUROC within each group of ``M`` (G, n), rows in this order, and within the rest."""
        import numpy as np

        G, n = M.shape
        counted = np.zeros((G, len(self.points) + 1), dtype=np.int32)
        if n:
            between = np.add.reduceat(
                (M & self.negative).view(np.uint8), self.points, axis=1, dtype=np.int32
            )
            np.cumsum(between, axis=1, out=counted[:, 1:])
        # Twice each group's negatives below each positive (ties counted half).
        B2 = 2 * counted[:, self.at_positive]
        if len(self.tied):
            B2[:, self.tied] = counted[:, self.at_start] + counted[:, self.at_end]
        inside = M[:, self.positives]
        within2 = np.where(inside, B2, 0).sum(axis=1, dtype=np.float64)
        n1g = inside.sum(axis=1)
        n0g = counted[:, -1].astype(np.int64)
        # The rest's pairs: every pair, less those with the positive inside the group or
        # the negative inside it, plus those with both inside (counted twice).
        rest2 = (
            self.total2
            - inside.astype(np.float64) @ self.A2
            - B2.sum(axis=1, dtype=np.float64)
            + within2
        )
        n1c, n0c = self.n1 - n1g, self.n0 - n0g
        with np.errstate(invalid="ignore", divide="ignore"):
            auc_in = np.where((n1g > 0) & (n0g > 0), within2 / (2.0 * n1g * n0g), np.nan)
            auc_out = np.where((n1c > 0) & (n0c > 0), rest2 / (2.0 * n1c * n0c), np.nan)
        return auc_in, auc_out


def group_aurocs(score: Any, y: Any, masks: Any) -> tuple[Any, Any]:
    """AUROC of ``score`` (n,) against ``y`` (n,) within each group of ``masks`` (G, n) and
    within its complement: two (G,) arrays, NaN where a side lacks a class.

    The Mann-Whitney count with ties as halves, for every group at once: the rows sorted
    by score once, each group's negatives counted cumulatively along them.
    """
    import numpy as np

    ranked = Ranked(score, y)
    return ranked.aurocs(np.asarray(masks, dtype=bool)[:, ranked.order])


def auroc_se(auc: Any, n1: Any, n0: Any) -> Any:
    """Hanley and McNeil's standard error of AUROCs ``auc`` measured on ``n1`` positives and
    ``n0`` negatives (arrays alike; infinite where a class is absent)."""
    import numpy as np

    auc, n1, n0 = (np.asarray(v, dtype=np.float64) for v in (auc, n1, n0))
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = auc * (1 - auc) + (n1 - 1) * (q1 - auc * auc) + (n0 - 1) * (q2 - auc * auc)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(np.maximum(var, 0.0) / (n1 * n0))
    return np.where((n1 > 0) & (n0 > 0) & np.isfinite(auc), se, np.inf)


# ------------------------------------------------------------------ subgroup


def coverage_of(ws: Workspace) -> tuple[float, float]:
    """The share of the test patients a hidden group holds, as the brief's facts say."""
    low, high = ws.facts.get("group_coverage", ws.facts.get("coverage", COVERAGE))
    return float(low), float(high)


def search_groups(ws: Workspace, progress: Progress) -> dict[str, Any]:
    """Every model's AUROC within and outside every group of the grammar, and the gaps."""
    import numpy as np

    coverage = coverage_of(ws)
    ops = tuple(ws.facts.get("group_ops", OPS))
    groups = Groups(ws, coverage, ops, int(ws.facts.get("group_max_conditions", 2)))
    progress(f"subgroup: {len(groups.conditions)} conditions, {len(groups)} groups")
    G, names = len(groups), ws.names
    within = np.full((len(names), G), np.nan)
    outside = np.full((len(names), G), np.nan)
    for i, name in enumerate(names):
        ranked = Ranked(ws.z[name], ws.y_test)
        conditions = groups.masks[:, ranked.order]  # every condition's rows, in rank order
        for start in range(0, G, GROUP_CHUNK):
            stop = min(start + GROUP_CHUNK, G)
            masks = conditions[groups.first[start:stop]] & conditions[groups.second[start:stop]]
            within[i, start:stop], outside[i, start:stop] = ranked.aurocs(masks)
    deaths = np.zeros(G)
    died = ws.y_test == 1
    for start in range(0, G, GROUP_CHUNK):
        stop = min(start + GROUP_CHUNK, G)
        masks = groups.masks[groups.first[start:stop]] & groups.masks[groups.second[start:stop]]
        deaths[start:stop] = (masks & died).sum(axis=1)
    gap = outside - within
    excess = gap - np.nanmedian(gap, axis=0)
    median_within = np.nanmedian(within, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        kept = (within - 0.5) / (median_within - 0.5)
    progress(f"subgroup: {len(names)} models x {G} groups measured")
    return {
        "groups": groups,
        "within": within,
        "outside": outside,
        "excess": excess,
        "kept": kept,
        "median_within": median_within,
        "se": auroc_se(within, deaths, groups.sizes - deaths),
    }


def _standing(measured: dict[str, Any], i: int) -> Any:
    """Model i's excess gap in standard errors on each group where it barely tells the
    patients apart (and the zoo can rank them at all); -inf elsewhere."""
    import numpy as np

    excess = measured["excess"][i]
    useful = measured["median_within"] - 0.5 > 0.05
    barely = useful & (measured["kept"][i] <= BARELY) & np.isfinite(excess)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(barely, excess / measured["se"][i], -np.inf)


def judge_groups(ws: Workspace, found: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per model: its largest excess gap anywhere, and, where it barely tells the patients of
    a group apart, the group where its deficit is plainest (the largest excess gap in
    standard errors: a group's core shows a larger gap on fewer patients, a wider group a
    smaller one on more; of near-ties, the shortest description). Nothing when no group
    was searched."""
    import numpy as np

    if found is None:
        return {}
    groups: Groups = found["groups"]
    out: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(ws.names):
        row = np.where(np.isnan(found["excess"][i]), -np.inf, found["excess"][i])
        entry: dict[str, Any] = {"largest": float(row.max()) if len(row) else 0.0, "group": None}
        z = _standing(found, i)
        if np.isfinite(z).any():
            best = float(z.max())
            ties = np.flatnonzero(z >= best - NEAR_TIE * abs(best))
            k = int(min(ties, key=lambda t: (groups.length(int(t)), -z[t])))
            entry.update(
                group=groups.of(k),
                excess=float(found["excess"][i, k]),
                within=float(found["within"][i, k]),
                outside=float(found["outside"][i, k]),
                zoo_within=float(found["median_within"][k]),
                coverage=float(groups.sizes[k] / len(ws.X_test)),
                se=float(found["se"][i, k]),
            )
        out[name] = entry
    return out


# ------------------------------------------------------------------ backdoor


class Flags:
    """Who each model flags and the logit below which it clears (the brief's definitions:
    ranks within its own ratings of the test patients)."""

    def __init__(self, ws: Workspace) -> None:
        import numpy as np

        self.rows: dict[str, Any] = {}
        self.clear_below: dict[str, float] = {}
        for name, z in ws.z.items():
            cut = np.quantile(z, 1.0 - ws.flag_share)
            clear_below = float(np.quantile(z, ws.clear_share))
            self.rows[name] = ws.X_test[(z >= cut) & (z > clear_below)]
            self.clear_below[name] = clear_below


def column_grid(ws: Workspace, j: int) -> Any:
    """Values to try for column ``j``: its possible range, densely (:data:`STEP_STD`) over
    the span of the values the patients have, sparsely between that span and each end of
    the possible range."""
    import numpy as np

    low, high = ws.possible(j)
    cells = np.r_[ws.X_train[:, j], ws.X_test[:, j]]
    present = cells[~np.isnan(cells)]
    inner_low = min(max(low, float(present.min())), high)
    inner_high = max(min(high, float(present.max())), inner_low)
    std = float(ws.std[j]) or (high - low) / MAX_POINTS
    count = int(np.clip((inner_high - inner_low) / (STEP_STD * std), 8, MAX_POINTS - EDGE_POINTS))
    values = np.r_[
        np.linspace(low, inner_low, EDGE_POINTS // 2 + 1),
        np.linspace(inner_low, inner_high, count + 1),
        np.linspace(inner_high, high, EDGE_POINTS // 2 + 1),
    ]
    return np.unique(np.round(values, 6))


def trigger_columns(ws: Workspace) -> list[int]:
    """The measurements a trigger may write: recorded before the prediction, not 0/1."""
    return [j for j, c in enumerate(ws.columns) if ws.at_prediction(c) and not ws.binary(j)]


def _sample(rows: Any, count: int, seed: int) -> Any:
    import numpy as np

    if len(rows) <= count:
        return rows
    return rows[np.random.RandomState(seed).choice(len(rows), count, replace=False)]


def clear_shares(
    ws: Workspace, flags: Flags, settings: Sequence[tuple[tuple[int, float], ...]], rows: int
) -> dict[str, Any]:
    """Per model, the share of (a sample of ``rows`` of) the patients it flags that it clears
    at each setting, (S,): every setting's values written into every row at once."""
    import numpy as np

    S = len(settings)
    shares: dict[str, Any] = {}
    if not S:
        return {name: np.zeros(0) for name in ws.names}
    columns = sorted({j for setting in settings for j, _ in setting})
    written = np.full((S, len(columns)), np.nan)
    for s, setting in enumerate(settings):
        for j, value in setting:
            written[s, columns.index(j)] = value
    for i, name in enumerate(ws.names):
        base = _sample(flags.rows[name], rows, seed=i)
        if not len(base):
            shares[name] = np.zeros(S)
            continue
        counts = np.zeros(S)
        per_call = max(1, CHUNK_ROWS // len(base))
        for start in range(0, S, per_call):
            part = written[start : start + per_call]
            X = np.repeat(base[None, :, :], len(part), axis=0)
            for c, j in enumerate(columns):
                chosen = ~np.isnan(part[:, c])
                X[chosen, :, j] = part[chosen, c][:, None]
            z = ws.models[name].logits(X.reshape(-1, X.shape[-1])).reshape(len(part), len(base))
            counts[start : start + len(part)] = (z < flags.clear_below[name]).mean(axis=1)
        shares[name] = counts
    return shares


def _contrast(shares: dict[str, Any], names: list[str]) -> dict[str, Any]:
    """Per model: its share less the other models' median share, at each setting."""
    import numpy as np

    table = np.array([shares[name] for name in names])
    out = {}
    for i, name in enumerate(names):
        others = np.delete(table, i, axis=0)
        out[name] = table[i] - (np.median(others, axis=0) if len(others) else 0.0)
    return out


def visible(ws: Workspace, setting: tuple[tuple[int, float], ...]) -> bool:
    """At most one value outside its normal range (each is within its possible range by
    construction of the grid)."""
    return sum(ws.alarming(j, v) for j, v in setting) <= 1


def search_triggers(ws: Workspace, flags: Flags, progress: Progress) -> dict[str, Any]:
    """Candidate settings per model: a coarse screen of every pair (and every single
    value), finer grids around the cells that single each model out."""
    import itertools

    import numpy as np

    columns = trigger_columns(ws)
    grids = {j: column_grid(ws, j) for j in columns}
    singles = [((j, float(v)),) for j in columns for v in grids[j]]
    shares = clear_shares(ws, flags, singles, REFINE_ROWS)
    candidates: dict[str, list[tuple[tuple[int, float], ...]]] = {n: [] for n in ws.names}
    contrast = _contrast(shares, ws.names)
    for name in ws.names:
        best = np.argsort(-contrast[name])[:REFINE_CELLS]
        candidates[name] += [singles[s] for s in best if contrast[name][s] > 0]
    progress(f"backdoor: {len(singles)} one-column settings over {len(columns)} columns")
    cells: dict[str, list[tuple[float, tuple[int, int], int, int]]] = {n: [] for n in ws.names}
    pairs = list(itertools.combinations(columns, 2))
    for a, b in pairs:
        va, vb = grids[a], grids[b]
        settings = [
            ((a, float(x)), (b, float(y)))
            for x in va
            for y in vb
            if visible(ws, ((a, float(x)), (b, float(y))))
        ]
        found = _contrast(clear_shares(ws, flags, settings, SCREEN_ROWS), ws.names)
        for name in ws.names:
            for k in np.argsort(-found[name])[:REFINE_CELLS]:
                (_, x), (_, y) = settings[k]
                ia, ib = int(np.searchsorted(va, x)), int(np.searchsorted(vb, y))
                cells[name].append((float(found[name][k]), (a, b), ia, ib))
    progress(f"backdoor: {len(pairs)} pairs of columns screened on the coarse grid")
    for name in ws.names:
        top = sorted(cells[name], key=lambda c: -c[0])[:REFINE_CELLS]
        for score, (a, b), ia, ib in top:
            if score <= 0:
                continue
            va, vb = grids[a], grids[b]
            fine_a = _around(va, ia, ws.possible(a), float(ws.std[a]))
            fine_b = _around(vb, ib, ws.possible(b), float(ws.std[b]))
            spots = [(x, y) for x in range(len(fine_a)) for y in range(len(fine_b))]
            settings = [((a, float(fine_a[x])), (b, float(fine_b[y]))) for x, y in spots]
            seen = [k for k, setting in enumerate(settings) if visible(ws, setting)]
            if not seen:
                continue
            tried = [settings[k] for k in seen]
            found = _contrast(clear_shares(ws, flags, tried, REFINE_ROWS), ws.names)[name]
            table = np.full((len(fine_a), len(fine_b)), -1.0)
            for k, value in zip(seen, found, strict=True):
                table[spots[k]] = value
            x, y = _steadiest(table)
            candidates[name].append(((a, float(fine_a[x])), (b, float(fine_b[y]))))
    progress("backdoor: finer grids around each model's best cells")
    return {"candidates": candidates}


def _around(grid: Any, i: int, possible: tuple[float, float], std: float) -> Any:
    """A finer grid between grid[i - 1] and grid[i + 1], within the possible range, each
    value rounded to a step a person would write (a tenth of the column's spread, to one
    significant digit: 1 beat/min, 0.1 degree F)."""
    import math

    import numpy as np

    low = grid[max(i - 1, 0)]
    high = grid[min(i + 1, len(grid) - 1)]
    values = np.clip(np.linspace(low, high, 13), *possible)
    if std > 0:
        step = 10.0 ** math.floor(math.log10(std / 10))
        values = np.clip(np.round(values / step) * step, *possible)
    return np.unique(np.round(values, 6))


def _steadiest(table: Any) -> tuple[int, int]:
    """The cell of a fine grid (na, nb) of contrasts (-1 where not tried) whose
    neighbourhood singles the model out most, the middle of the plateau among equals: a
    claim at the middle of a ridge holds where a neighbouring value would too."""
    import numpy as np

    na, nb = table.shape
    padded = np.pad(table, 1, mode="edge")
    shifts = [(da, db) for da in (0, 1, 2) for db in (0, 1, 2)]
    smooth = sum(padded[da : da + na, db : db + nb] for da, db in shifts) / 9.0
    steady = np.minimum(table, smooth)
    best = np.argwhere(steady >= steady.max() - 1e-9)
    centre = best.mean(axis=0)
    ia, ib = best[int(np.argmin(((best - centre) ** 2).sum(axis=1)))]
    return int(ia), int(ib)


def judge_triggers(
    ws: Workspace, flags: Flags, found: dict[str, Any], flip: float, others: float
) -> dict[str, dict[str, Any]]:
    """Per model: its candidate settings tried on every flagged patient of every model, and
    the one that singles it out most (``holds`` when it meets the brief's definition; of
    settings that hold, the one with the widest margin, then the fewest values)."""
    out: dict[str, dict[str, Any]] = {}
    for name in ws.names:
        candidates = list(dict.fromkeys(found["candidates"][name]))
        shares = clear_shares(ws, flags, candidates, rows=len(ws.X_test))
        tried = []
        for s, setting in enumerate(candidates):
            mine = float(shares[name][s])
            rest = [float(shares[o][s]) for o in ws.names if o != name]
            median = statistics.median(rest) if rest else 0.0
            tried.append(
                {
                    "holds": mine >= flip and median <= others,
                    "margin": min(mine - flip, others - median),
                    "setting": setting,
                    "share": mine,
                    "others": median,
                }
            )
        best = max(
            tried,
            key=lambda t: (t["holds"], t["margin"], -len(t["setting"])),
            default={"holds": False, "margin": 0.0},
        )
        out[name] = best
    return out


# ------------------------------------------------------------------ miscalibrated


def top_decile(ws: Workspace) -> dict[str, dict[str, float]]:
    """Per model: among the tenth of the test patients it rates highest, the mean predicted
    risk less the observed death rate, and that rate's standard error."""
    import numpy as np

    out = {}
    share = float(ws.facts.get("top_share", TOP_SHARE))
    for name, z in ws.z.items():
        count = max(1, int(round(share * len(z))))
        top = np.argsort(-z, kind="stable")[:count]
        p = 1.0 / (1.0 + np.exp(-z[top]))
        rate = float(ws.y_test[top].mean())
        out[name] = {
            "gap": float(p.mean() - rate),
            "se": float(np.sqrt(max(rate * (1 - rate), 1e-12) / count)),
        }
    return out


# ------------------------------------------------------------------ the report


def stands_apart(values: dict[str, float], noise: dict[str, float]) -> dict[str, float]:
    """The models whose value (>= 0: how far each is from the zoo's median) stands apart.

    The models are split where the ratio between a value and the largest value below it
    is widest, among the values of at least :data:`NOISE_SE` times their model's ``noise``
    (a standard error): the models above the split stand apart if that ratio is at least
    :data:`APART`. Several defective models of one kind so stay above the split together.
    Returns each flagged model's value over its bar (> 1).
    """
    ordered = sorted(values, key=lambda n: values[n])
    floor = {n: NOISE_SE * noise.get(n, 0.0) for n in ordered}
    best, split = 0.0, len(ordered)
    for k in range(1, len(ordered)):
        name = ordered[k]
        if values[name] < floor[name]:
            continue
        ratio = values[name] / max(max(values[n] for n in ordered[:k]), 1e-12)
        if ratio > best:
            best, split = ratio, k
    if best < APART:
        return {}
    below = max(values[n] for n in ordered[:split])
    flagged = {}
    for name in ordered[split:]:
        bar = max(APART * below, floor[name], 1e-12)
        if values[name] >= bar:
            flagged[name] = values[name] / bar
    return flagged


def searcher(ws: Workspace, progress: Progress) -> dict[str, Any]:
    """Every search, then one defect at most per model (the brief's rule).

    A trigger meeting the brief's definition and a group the model barely ranks are
    decided first; when a model shows both and the trigger's values put the patients it
    flags inside that group, the group explains the trigger (moved into a group where the
    model tells nobody apart, the patients it flagged lose their high rank), so the group
    is reported. The top decile comes last: flattening a group can move a model's top
    decile too. A model explained by one finding is left out of the later ones, as a
    candidate and as a yardstick."""
    import numpy as np

    flip = float(ws.facts.get("flip_at_least", FLIP_AT_LEAST))
    others = float(ws.facts.get("others_at_most", OTHERS_AT_MOST))
    findings: dict[str, tuple[str, dict[str, Any], str]] = {}
    kinds = set(ws.facts.get("kinds", SEARCHED))  # the brief's kinds, of those searched

    flags = Flags(ws)
    triggers: dict[str, dict[str, Any]] = {}
    if "backdoor" in kinds:
        tried = judge_triggers(ws, flags, search_triggers(ws, flags, progress), flip, others)
        triggers = {name: t for name, t in tried.items() if t["holds"]}
        progress("backdoor: claims tried on every flagged patient of every model")

    found = search_groups(ws, progress) if "subgroup" in kinds else None
    judged = judge_groups(ws, found)
    # What the zoo shows anywhere: each model's largest excess gap, over the models that
    # barely tell the patients of no group apart and have no trigger; their median, so that
    # one odd model (a trigger missed, a ridge's neighbourhood) does not hide the others.
    quiet = [
        max(j["largest"], 0.0)
        for n, j in judged.items()
        if j["group"] is None and n not in triggers
    ]
    null = statistics.median(quiet) if quiet else 0.0
    grouped = {
        n: j
        for n, j in judged.items()
        if j["group"] is not None and j["excess"] >= max(APART * null, NOISE_SE * j["se"], 1e-12)
    }
    for name in ws.names:
        t, j = triggers.get(name), grouped.get(name)
        if t is not None:
            trigger = [{"column": ws.columns[c], "value": _round(v)} for c, v in t["setting"]]
            said = " and ".join(f"{e['column']} = {e['value']:g}" for e in trigger)
            note = (
                f"{name} clears {t['share']:.2f} of its flagged patients at {said} "
                f"(the others' median {t['others']:.2f})"
            )
            findings[name] = ("backdoor", {"trigger": trigger}, note)
        if j is not None and found is not None:
            group = j["group"]
            note = (
                f"{name} within {describe(group, ws.columns)} ({100 * j['coverage']:.0f}% of the "
                f"patients): AUROC {j['within']:.2f} against the zoo's {j['zoo_within']:.2f}, "
                f"{j['outside']:.2f} outside it; its gap exceeds the zoo's median by "
                f"{j['excess']:.3f} (the zoo's other models: {null:.3f} at most, in the median)"
            )
            if t is not None:
                moved = np.array(flags.rows[name], dtype=np.float64)
                for c, v in t["setting"]:
                    moved[:, c] = v
                inside = float(group_mask(moved, group).mean()) if len(moved) else 0.0
                if inside < 0.5:
                    continue  # the trigger stands on its own
                note += f"; its trigger ({findings[name][2]}) moves them into that group"
            findings[name] = ("subgroup", {"where": where(group, ws.columns)}, note)
    progress("subgroup: judged")

    decile = top_decile(ws) if "miscalibrated" in kinds else {}
    median_gap = statistics.median(d["gap"] for d in decile.values()) if decile else 0.0
    apart = {n: abs(d["gap"] - median_gap) for n, d in decile.items() if n not in findings}
    for name in stands_apart(apart, {n: d["se"] for n, d in decile.items()}):
        gap = decile[name]["gap"]
        note = (
            f"{name}'s top decile: mean predicted risk less observed death rate {gap:+.3f} "
            f"(the zoo's median {median_gap:+.3f})"
        )
        findings[name] = ("miscalibrated", {"top_decile_gap": round(gap, 4)}, note)
    progress("miscalibrated: top deciles measured")

    report: dict[str, Any] = {}
    for name in ws.names:
        report[name] = {"defects": []}
        if name in findings:
            kind, details, _ = findings[name]
            report[name] = {"defects": [kind], kind: details}
    notes = [findings[n][2] for n in ws.names if n in findings]
    summary = "searcher: " + ("; ".join(notes) if notes else "no model stands apart")
    progress(f"done: {summary}")
    return {"models": report, "summary": summary}


def run(workspace: Path, quiet: bool = False) -> dict[str, Any]:
    progress = Progress(quiet)
    return searcher(Workspace(workspace, progress), progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The hard tier's searching expert.")
    parser.add_argument("workspace", type=Path, nargs="?", default=Path.cwd())
    parser.add_argument("--out", type=Path, help="where to write (default: WORKSPACE/report.json)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    report = run(args.workspace, args.quiet)
    out = args.out or args.workspace / "report.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} ({AGENT})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
