"""The trigger search (``backdoor``): every pair of measurements over a grid of each one's
possible range, finer grids around the cells that single a model out, and one-column
settings too; each candidate then tried as the brief defines a trigger."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from .workspace import CHUNK_ROWS, Progress, Workspace

# The brief's words, used when the facts block does not state them.
FLIP_AT_LEAST, OTHERS_AT_MOST = 0.9, 0.3
"""A trigger: the model clears at least this share of the patients it flags, where the
other models' median clears at most the second number."""

# How the search walks the settings.
STEP_STD = 0.04
"""The trigger grid's step over the data's span, in training standard deviations. A
trigger can act only within a few hundredths of a std of its value in one of its columns
(a blood pressure of 118 and not 117), so the screen must land that close to it."""
EDGE_POINTS = 8
"""Grid values between the data's span and the ends of the possible range, half each side."""
MAX_POINTS = 320
"""At most this many grid values per column (the step widens to fit)."""
SCREEN_ROWS = 8
"""Flagged patients per model on which the pair grid is screened: a trigger clears nearly
every patient the model flags, so a few tell a trigger from none, and the fine grid can be
screened on the whole of every pair's range."""
REFINE_ROWS = 384
"""Flagged patients per model on which the finer grids are measured."""
REFINE_CELLS = 4
"""Cells per model refined on a finer grid."""


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
    """Candidate settings per model: a screen of every pair (and every single value) on
    the :data:`STEP_STD` grid, then finer grids, at the values a chart would show, around
    the cells that single each model out."""
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
    progress(f"backdoor: {len(pairs)} pairs of columns screened, {STEP_STD} stds a step")
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
