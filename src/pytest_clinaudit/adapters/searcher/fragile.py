"""The fragile-region search (``fragile``): every model attacked within the brief's threat
model, its AUROC within every group of the grammar before and under the attack, and per
model the group where the attack undoes it most plainly."""

from __future__ import annotations

from typing import Any

from .aurocs import Ranked, auroc_se
from .groups import Groups
from .subgroup import GROUP_CHUNK
from .workspace import Progress, Workspace

# This searcher's own attack and reading of the brief's words.
STEPS = 20
"""Signed gradient steps of the attack, each 2.5 / STEPS of the budget..."""
RESTARTS = 4
"""...from the record itself and from this many less one random points of the budget's box:
a gradient at a record need not point the way the model is weakest."""
SEED = 12345
INTACT = 2.0 / 3.0
"""A region is undone by the attack, not missing before it: untouched, the model keeps at
least this share of the discrimination above chance (AUROC - 0.5) the zoo's median keeps
there (a model that already cannot rank a group loses little more to an attack)."""
CHANCE = 0.5
"""A region is undone when, under the attack, the model ranks its patients no better than
chance: the brief's "hide the ones who will die among the ones who will survive". A sound
model whose drop merely stood above the zoo's (0.07 beyond its median, one seed of the
first pool) still ranked them."""
UNDONE = 1.0
"""A patient is undone by the attack on a model when the attack moves its logit towards the
wrong outcome by this much more (in logits) than it moves the zoo's median model's."""
BATCH_ROWS = 1 << 15


def attack(ws: Workspace, progress: Progress) -> dict[str, Any]:
    """Each model's test logits under a margin attack (a death's logit pushed down, a
    survivor's up) within the brief's L-infinity budget: ``epsilon`` training standard
    deviations a column, the value kept within the column's training range."""
    import numpy as np
    import torch

    epsilon = float(ws.facts.get("epsilon", 0.05))
    low = torch.tensor(np.nanmin(ws.X_train, axis=0), dtype=torch.float32)
    high = torch.tensor(np.nanmax(ws.X_train, axis=0), dtype=torch.float32)
    step_size = torch.tensor(epsilon * np.nan_to_num(ws.std), dtype=torch.float32)
    sign = torch.tensor(1.0 - 2.0 * ws.y_test, dtype=torch.float32)  # +1: push a survivor up
    generator = torch.Generator().manual_seed(SEED)
    attacked: dict[str, Any] = {}
    for name in ws.names:
        f = ws.models[name].f
        best = []
        for start in range(0, len(ws.X_test), BATCH_ROWS):
            x0 = torch.tensor(ws.X_test[start : start + BATCH_ROWS], dtype=torch.float32)
            s = sign[start : start + BATCH_ROWS]
            lo = torch.maximum(x0 - step_size, low)
            hi = torch.minimum(x0 + step_size, high)
            worst = None
            for restart in range(RESTARTS):
                x = x0.clone()
                if restart:
                    x = lo + torch.rand(x0.shape, generator=generator) * (hi - lo)
                x = torch.where(torch.isnan(x0), x0, x)
                for _ in range(STEPS):
                    x.requires_grad_(True)
                    (gradient,) = torch.autograd.grad((s * f(x)).sum(), x)
                    with torch.no_grad():
                        x = x + 2.5 * step_size / STEPS * torch.sign(gradient)
                        x = torch.where(torch.isnan(x0), x0, torch.clamp(x, lo, hi))
                with torch.no_grad():
                    margin = s * f(x)
                worst = margin if worst is None else torch.maximum(worst, margin)
            assert worst is not None
            best.append((s * worst).double().numpy())
        attacked[name] = np.concatenate(best)
        progress(f"fragile: {name} attacked")
    return attacked


def search_regions(
    ws: Workspace, groups: Groups, clean: Any, attacked: dict[str, Any], progress: Progress
) -> dict[str, Any]:
    """Every model's AUROC under the attack within every group, beside its clean AUROC there
    (``clean``, (models, G), from the hidden-group search): the drops, each beyond the zoo's
    median, and their standard errors (an untouched AUROC's: under a collapse the attacked
    AUROC is near 0 and all but certain)."""
    import numpy as np

    G, names = len(groups), ws.names
    under = np.full((len(names), G), np.nan)
    for i, name in enumerate(names):
        ranked = Ranked(attacked[name], ws.y_test)
        conditions = groups.masks[:, ranked.order]
        for start in range(0, G, GROUP_CHUNK):
            stop = min(start + GROUP_CHUNK, G)
            masks = conditions[groups.first[start:stop]] & conditions[groups.second[start:stop]]
            under[i, start:stop], _ = ranked.aurocs(masks)
    died = ws.y_test == 1
    deaths = np.zeros(G)
    for start in range(0, G, GROUP_CHUNK):
        stop = min(start + GROUP_CHUNK, G)
        masks = groups.masks[groups.first[start:stop]] & groups.masks[groups.second[start:stop]]
        deaths[start:stop] = (masks & died).sum(axis=1)
    drop = clean - under
    median_clean = np.nanmedian(clean, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        kept = (clean - 0.5) / (median_clean - 0.5)
    progress(f"fragile: {len(names)} models x {G} groups measured under attack")
    # Per patient: how far the attack moves each model's logit towards the wrong outcome,
    # beyond the zoo's median model's.
    sign = 1.0 - 2.0 * ws.y_test
    gained = np.array([sign * (attacked[n] - ws.z[n]) for n in names])
    return {
        "groups": groups,
        "under": under,
        "clean": clean,
        "excess": drop - np.nanmedian(drop, axis=0),
        "intact": (kept >= INTACT) & (median_clean - 0.5 > 0.05),
        "se": auroc_se(clean, deaths, groups.sizes - deaths),
        "undone": gained - np.median(gained, axis=0) > UNDONE,
    }


def best_match(groups: Groups, undone: Any, among: Any) -> tuple[int, float]:
    """The group whose patients ``among`` (n,) are most nearly the ``undone`` ones (n,), by
    Jaccard overlap, and that overlap."""
    import numpy as np

    best, overlap = 0, -1.0
    for start in range(0, len(groups), GROUP_CHUNK):
        stop = min(start + GROUP_CHUNK, len(groups))
        masks = groups.masks[groups.first[start:stop]] & groups.masks[groups.second[start:stop]]
        masks &= among
        both = (masks & undone).sum(axis=1)
        either = masks.sum(axis=1) + int(undone.sum()) - both
        jaccard = np.where(either > 0, both / np.maximum(either, 1), 0.0)
        k = int(np.argmax(jaccard))
        if jaccard[k] > overlap:
            best, overlap = start + k, float(jaccard[k])
    return best, overlap


def judge_regions(ws: Workspace, found: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Per model: its largest excess drop over the groups it ranks intact when untouched,
    and the group of the grammar that best describes the patients the attack undoes on it
    (:data:`UNDONE`; of the outcome most of them have, since an attack may undo one side
    only): a region's core drops as far as the region, so the drop alone does not say
    where the region ends. Nothing when no group was searched."""
    import numpy as np

    if found is None:
        return {}
    groups: Groups = found["groups"]
    out: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(ws.names):
        excess = np.where(found["intact"][i], found["excess"][i], np.nan)
        row = np.where(np.isfinite(excess), excess, -np.inf)
        largest = float(row.max()) if len(row) else 0.0
        entry: dict[str, Any] = {"largest": max(largest, 0.0), "group": None}
        undone = found["undone"][i]
        if largest > 0 and undone.any():
            died = ws.y_test == 1
            among = died if undone[died].sum() >= undone[~died].sum() else ~died
            k, overlap = best_match(groups, undone & among, among)
            entry.update(
                group=groups.of(k),
                overlap=overlap,
                excess=float(found["excess"][i, k]),
                clean=float(found["clean"][i, k]),
                under=float(found["under"][i, k]),
                coverage=float(groups.sizes[k] / len(ws.X_test)),
                se=float(found["se"][i, k]),
            )
        out[name] = entry
    return out
