"""The hidden-group search (``subgroup``): every model's AUROC within and outside every
group of the grammar, and per model the group where it barely tells the patients apart
and its deficit is plainest."""

from __future__ import annotations

from typing import Any

from .aurocs import Ranked, auroc_se
from .groups import COVERAGE, OPS, Groups
from .workspace import Progress, Workspace

# What "barely" and "plainest" mean to this searcher: its own reading of the brief's words.
BARELY = 1.0 / 3.0
""""Can barely tell who will die from who will survive": on the group, the model keeps at
most this share of the discrimination above chance (AUROC - 0.5) the zoo's median keeps."""
NEAR_TIE = 0.05
"""Groups within this share of the best group's standing (excess gap in standard errors)
tie; the shortest description wins."""
GROUP_CHUNK = 256
"""Groups whose sorted masks are held at once (256 x n)."""


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
