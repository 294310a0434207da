"""The score of a game report (SPEC §8.5), from its items' results.

Over the K x 6 (model, kind) pairs (game-v2: K x the variant's kinds, which may
repeat across models: every pair counts), with TP, FP and FN counted against
the ground truth::

    detection    = 2 TP / (2 TP + FP + FN)          the F1 of the flags
    localization = mean credit of the localization items (planted defects with a key)
    evidence     = mean credit of the evidence items (planted defects with a number)

A hedged model (flagged with more kinds than a model carries) finds nothing and earns no credit,
and a kind's localization and evidence credit is shared by the right share of
the report's flags of it (game-v1: a kind flagged on n models earns 1/n;
:mod:`.game_checks`): such an item fails with its partial credit. Which kinds
and keys count is :mod:`.game_rules`'.
    score        = 0.5 detection + 0.3 localization + 0.2 evidence

A part whose items the instance does not have gives its weight to detection.

Profiles. ``metr`` is that score, with numbers read as the published scorer
read them (``float()``: ``"0.31"`` counts) and the schema informational; a
missing file scores ``None`` ("no submission"). ``strict`` reads JSON numbers
only, treats a repeated key as a hedge (flags: the union of the copies;
values given twice differently: no credit), and deducts 0.10 when the report
departs from the schema, so a strict score is never above the metr score of
the same report. An unreadable report (no file, not UTF-8, not a non-empty
JSON object, no ``models`` object) scores 0.

An item's ``weight`` in the JUnit XML is its share of its part's weight:
exact for localization and evidence, nominal for detection, whose part is an
F1 rather than a sum. Only the standard library is imported.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_clinaudit.grading.game_rules import V1, GameRules
from pytest_clinaudit.grading.scoring import CATEGORIES, INVARIANT, NONE, CheckRecord, Grade, Slot
from pytest_clinaudit.reference.game.settings import ScoreWeights

_INFO = Slot("info", 0.0)
SCHEMA_PENALTY = 0.10
"""Deducted under ``strict`` when the report departs from the schema."""

PROFILE_SLOTS: Mapping[str, Mapping[str, Slot]] = {
    "metr": {"present": _INFO, "utf8": _INFO, "json-object": _INFO, "schema": _INFO},
    "strict": {
        "present": _INFO,
        "utf8": _INFO,
        "json-object": _INFO,
        "schema": Slot("penalty", SCHEMA_PENALTY),
    },
}


def slot(profile: str, check: str) -> dict[str, Any]:
    """``kind`` and ``weight`` of a stage or schema check of the game, by profile."""
    found = PROFILE_SLOTS[profile][check]
    return {"kind": found.kind, "weight": found.weight}


def part_weights(
    score: ScoreWeights, pairs: Iterable[tuple[str, str]], rules: GameRules = V1
) -> dict[str, float]:
    """The weight of each part; a part with no item gives its weight to detection."""
    pairs = list(pairs)
    weights = {
        "detection": score.detection,
        "localization": score.localization,
        "evidence": score.evidence,
    }
    if not any(kind in rules.localization for _, kind in pairs):
        weights["detection"] += weights["localization"]
        weights["localization"] = 0.0
    if not any(kind in rules.evidence for _, kind in pairs):
        weights["detection"] += weights["evidence"]
        weights["evidence"] = 0.0
    return weights


def _f1(tp: int, fp: int, fn: int) -> float:
    return 1.0 if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


Truth = Mapping[str, str | tuple[str, ...] | None]
"""Model -> what it carries: its kind, or the kinds of a hard-tier model with two defects
(``None`` or empty: sound)."""


def _carried(planted: str | tuple[str, ...] | None) -> tuple[str, ...]:
    if planted is None:
        return ()
    return (planted,) if isinstance(planted, str) else tuple(planted)


def parts(
    records: Iterable[CheckRecord],
    truth: Truth,
    kinds: Iterable[str],
    rules: GameRules = V1,
) -> dict[str, Any]:
    """Counts and part scores from the items' records.

    ``truth`` maps each model to what it carries (:data:`Truth`). A detection
    item passed when the report's flag agreed with the truth, so the flag is
    ``passed == truth``; a skipped item (no decisions to read) or a missing one
    (deselected) flags nothing. Every model is counted on its own, so a kind planted in
    several models (game-v2) is several pairs, each found or missed by itself.
    """
    kinds = list(kinds)
    by_name = {r.name: r for r in records}
    tp = fp = fn = 0
    for model, planted in truth.items():
        for kind in kinds:
            record = by_name.get(f"{model}::{kind}")
            present = kind in _carried(planted)
            flagged = record is not None and not record.skipped and record.passed == present
            tp += flagged and present
            fp += flagged and not present
            fn += present and not flagged
    localization: list[float] = []
    evidence: list[float] = []
    for model, planted in truth.items():
        for kind in _carried(planted):
            if kind in rules.localization:
                record = by_name.get(f"{model}::{kind}.{rules.item_key(kind)}")
                localization.append(_credit(record))
            if kind in rules.evidence:
                record = by_name.get(f"{model}::{kind}.{rules.evidence[kind]}")
                evidence.append(_credit(record))
    n_localized, n_evidenced = len(localization), len(evidence)
    return {
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "detection": _f1(tp, fp, fn),
        "localization": math.fsum(localization) / n_localized if n_localized else None,
        "evidence": math.fsum(evidence) / n_evidenced if n_evidenced else None,
    }


def _credit(record: CheckRecord | None) -> float:
    """A localization or evidence item's credit: full when passed, a share when the report
    flagged its kind on several models (game-v1), else none."""
    return 0.0 if record is None or record.skipped else record.credit


def compute(
    records: Iterable[CheckRecord],
    profile: str,
    *,
    truth: Truth,
    kinds: Iterable[str],
    score: ScoreWeights,
    rules: GameRules = V1,
) -> tuple[Grade, dict[str, Any]]:
    """The grade of a game report and its parts (counts, part scores, weights)."""
    ordered = tuple(sorted(records, key=lambda r: r.id))
    kinds = list(kinds)
    counted = parts(ordered, truth, kinds, rules)
    pairs = [(m, k) for m, planted in truth.items() for k in _carried(planted)]
    weights = part_weights(score, pairs, rules)
    by_name = {r.name: r for r in ordered}
    readable = all(
        by_name.get(stage) is not None and by_name[stage].passed
        for stage in ("present", "utf8", "json-object")
    )
    value = (
        weights["detection"] * counted["detection"]
        + weights["localization"] * (counted["localization"] or 0.0)
        + weights["evidence"] * (counted["evidence"] or 0.0)
    )
    if not readable:
        value = 0.0
    penalty = math.fsum(-r.contribution for r in ordered if r.kind == "penalty")
    value = min(1.0, max(0.0, round(value - penalty, 10)))
    failed = {r.category for r in ordered if not r.passed and not r.skipped}
    category = next((c for c in CATEGORIES if c in failed), NONE)
    missing = any(r.missing_submission for r in ordered)
    raw: float | None = None if (missing and profile == "metr") else value
    grade = Grade(
        score=0.0 if raw is None else value,
        raw_score=raw,
        profile=profile,
        category=category,
        invariants_ok=not any(r.category == INVARIANT and not r.passed for r in ordered),
        checks=ordered,
    )
    return grade, {**counted, "weights": weights}
