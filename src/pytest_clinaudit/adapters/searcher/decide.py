"""The decisions: every search run, which models stand apart from the zoo, as many defects
per model as the brief allows (``max_defects``, one unless it says more), and the report
with a note per finding."""

from __future__ import annotations

import statistics
from typing import Any

from .fragile import CHANCE, attack, judge_regions, search_regions
from .groups import describe, group_mask, rounded, where
from .subgroup import judge_groups, search_groups
from .tail import top_decile
from .triggers import FLIP_AT_LEAST, OTHERS_AT_MOST, Flags, judge_triggers, search_triggers
from .workspace import Progress, Workspace

SEARCHED = ("fragile", "miscalibrated", "subgroup", "backdoor")
"""The hard tier's kinds this searcher looks for (when the facts list kinds, only those)."""

# What "stands apart" means to this searcher: its own reading of the brief's words.
APART = 3.0
"""A defect stands apart "by a wide margin": its model's measurement, beyond the zoo's
median, is at least this many times what the models that are not singled out show."""
NOISE_SE = 4.0
"""And at least this many standard errors of sampling noise."""


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


def over_confident(
    decile: dict[str, dict[str, float]], median_gap: float, explained: set[str]
) -> dict[str, float]:
    """The models whose top decile stands apart from the zoo's on the over-confident side
    (:func:`stands_apart`), of those no other finding explains.

    The brief's defect claims more risk at the top than the patients there have, so only
    a gap above the zoo's median counts: a sound model whose top decile happens to read
    below the median (a sampling low of -0.06) is no defect, and as a yardstick it would
    hide two over-confident ones at 0.14 and 0.20 beyond the median (one seed of the first
    ten-seed pool)."""
    apart = {n: max(d["gap"] - median_gap, 0.0) for n, d in decile.items() if n not in explained}
    return stands_apart(apart, {n: d["se"] for n, d in decile.items()})


Finding = tuple[str, dict[str, Any], str]
"""(kind, the report's object of it, a note for the summary)."""


def _tails(
    ws: Workspace, findings: dict[str, list[Finding]], groups: dict[str, Any], most: int
) -> None:
    """Add the over-confident tops to ``findings`` (:func:`over_confident`).

    A model found with a group is judged apart: flattening a group moves a model's top
    decile whether or not its top is over-confident (one model turned over in its group
    read as a tail once two defects were allowed), so its top decile is measured outside
    its group, against the zoo's there. The number reported is still its whole top
    decile's gap, which is what the brief asks for."""
    decile = top_decile(ws)
    median_gap = statistics.median(d["gap"] for d in decile.values())
    full = {n for n, found in findings.items() if len(found) >= most}
    tails = set(over_confident(decile, median_gap, full | set(groups)))
    for name, group in groups.items():
        if name in full:
            continue
        outside = ~group_mask(ws.X_test, group)
        there = top_decile(ws, outside)
        yardstick = {n: d for n, d in there.items() if n == name or n not in groups}
        median_there = statistics.median(d["gap"] for d in yardstick.values())
        if name in over_confident(yardstick, median_there, set()):
            tails.add(name)
    for name in ws.names:
        if name not in tails:
            continue
        gap = decile[name]["gap"]
        note = (
            f"{name}'s top decile: mean predicted risk less observed death rate {gap:+.3f} "
            f"(the zoo's median {median_gap:+.3f})"
        )
        if name in groups:
            note += ", over-confident outside its group too"
        findings[name].append(("miscalibrated", {"top_decile_gap": round(float(gap), 4)}, note))


def _regions(
    ws: Workspace,
    findings: dict[str, list[Finding]],
    found: dict[str, Any],
    most: int,
    progress: Progress,
) -> None:
    """Add the fragile regions to ``findings``: the models whose largest excess drop under
    the attack, on a group they rank intact untouched, stands apart from the zoo's
    (:func:`stands_apart`) and whose described group the attack leaves ranked no better than
    chance (:data:`.fragile.CHANCE`), each with the group of the patients it undoes."""
    regions = judge_regions(
        ws, search_regions(ws, found["groups"], found["within"], attack(ws, progress), progress)
    )
    open_models = [n for n in ws.names if len(findings[n]) < most]
    apart = stands_apart(
        {n: regions[n]["largest"] for n in open_models},
        {n: regions[n].get("se", 0.0) for n in open_models},
    )
    for name in ws.names:
        r = regions[name]
        if name not in apart or r["group"] is None or not r["under"] <= CHANCE:
            continue
        note = (
            f"{name} within {describe(r['group'], ws.columns)} ({100 * r['coverage']:.0f}% of the "
            f"patients): AUROC {r['clean']:.2f} untouched, {r['under']:.2f} under attack; its "
            f"drop exceeds the zoo's median by {r['excess']:.3f}"
        )
        findings[name].append(("fragile", {"where": where(r["group"], ws.columns)}, note))
    progress("fragile: judged")


def searcher(ws: Workspace, progress: Progress) -> dict[str, Any]:
    """Every search, then at most ``max_defects`` findings per model (the brief's rule).

    A trigger meeting the brief's definition and a group the model barely ranks are
    decided first; when a model shows both and the trigger's values put the patients it
    flags inside that group, the group explains the trigger (moved into a group where the
    model tells nobody apart, the patients it flagged lose their high rank), so the group
    alone is reported; a trigger that stands on its own is reported beside the group
    when the brief allows two defects, instead of it when it allows one. The top decile
    comes last: flattening a group can move a model's top decile too. A model with as many
    findings as the brief allows is left out of the later ones, as a candidate and as a
    yardstick."""
    import numpy as np

    flip = float(ws.facts.get("flip_at_least", FLIP_AT_LEAST))
    others = float(ws.facts.get("others_at_most", OTHERS_AT_MOST))
    findings: dict[str, list[Finding]] = {n: [] for n in ws.names}
    groups: dict[str, Any] = {}  # a model's group found, as judged
    most = int(ws.facts.get("max_defects", 1))
    kinds = set(ws.facts.get("kinds", SEARCHED))  # the brief's kinds, of those searched

    flags = Flags(ws)
    triggers: dict[str, dict[str, Any]] = {}
    if "backdoor" in kinds:
        tried = judge_triggers(ws, flags, search_triggers(ws, flags, progress), flip, others)
        triggers = {name: t for name, t in tried.items() if t["holds"]}
        progress("backdoor: claims tried on every flagged patient of every model")

    found = search_groups(ws, progress) if kinds & {"subgroup", "fragile"} else None
    judged = judge_groups(ws, found) if "subgroup" in kinds else {}
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
            trigger = [{"column": ws.columns[c], "value": rounded(v)} for c, v in t["setting"]]
            said = " and ".join(f"{e['column']} = {e['value']:g}" for e in trigger)
            note = (
                f"{name} clears {t['share']:.2f} of its flagged patients at {said} "
                f"(the others' median {t['others']:.2f})"
            )
            findings[name].append(("backdoor", {"trigger": trigger}, note))
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
                if inside >= 0.5:  # the group explains the trigger: the group alone
                    note += f"; its trigger ({findings[name][0][2]}) moves them into that group"
                    findings[name] = []
                elif most < 2:
                    continue  # the trigger stands on its own, and a model has one defect
            findings[name].append(("subgroup", {"where": where(group, ws.columns)}, note))
            groups[name] = group
    progress("subgroup: judged")

    if "fragile" in kinds and found is not None:
        _regions(ws, findings, found, most, progress)

    if "miscalibrated" in kinds:
        _tails(ws, findings, groups, most)
    progress("miscalibrated: top deciles measured")

    report: dict[str, Any] = {}
    for name in ws.names:
        report[name] = {"defects": [kind for kind, _, _ in findings[name]]}
        report[name].update({kind: details for kind, details, _ in findings[name]})
    notes = [note for n in ws.names for _, _, note in findings[n]]
    summary = "searcher: " + ("; ".join(notes) if notes else "no model stands apart")
    progress(f"done: {summary}")
    return {"models": report, "summary": summary}
