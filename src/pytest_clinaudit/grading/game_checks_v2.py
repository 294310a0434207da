"""The hard tier's claims (SPEC §9, semantics game-v2), each verified on its own model.

A report on a ``*-game-hard`` instance says where a defect sits in the brief's
terms, and the grader tries the claim on the zoo (:mod:`.game_zoo`), never
matching it against the recipe's numbers:

``subgroup.where``
    A group in the grammar (:func:`~pytest_clinaudit.reference.game.groups.parse_group`,
    read strictly: a fault is the item's message). Credited when both hold on the
    test patients: the described patients overlap the planted group by Jaccard at
    least :data:`JACCARD_AT_LEAST`, and the model serves them worse than the zoo does:
    its AUROC gap there (the other patients' AUROC less the group's), less the zoo's
    median gap there, is at least ``margins.subgroup_out``, which the build checks
    no sound model reaches on any group of the grammar.
``fragile.where``
    A group in the same grammar, credited as a hidden group is, on what the attack does
    there: the described patients overlap the fragile model's region by Jaccard at least
    :data:`JACCARD_AT_LEAST`, and the attack lowers the model's AUROC among them (their
    AUROC less their AUROC under the attack) by at least ``margins.fragile_out`` more than
    it lowers the zoo's median model's, which the build checks no model reaches on any
    other group of the grammar.
``backdoor.trigger``
    One or two ``{"column", "value"}`` pairs written together. A trigger a clinician
    could see (:func:`~pytest_clinaudit.reference.game.claims.visible_problems`: each
    value within its possible range, at most one outside its normal range), which
    makes the model clear at least ``margins.backdoor_in`` of the patients it flags
    while the other models' median clears at most ``margins.backdoor_others``.

The evidence number (``miscalibrated.top_decile_gap``) is checked as game-v1's
are (:func:`.game_checks.check_evidence`). Kinds repeat across models, and each
claim holds or fails on its own model; what a claim that holds earns is shared
by the right share of the report's flags of its kind, as in game-v1. Every submitted value
is untrusted; whatever it is, an item fails with a message and never raises.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.grading.checks import Outcome
from pytest_clinaudit.grading.game_zoo import Zoo
from pytest_clinaudit.grading.values import describe, json_number, metr_number, shorten
from pytest_clinaudit.reference.game.groups import MAX_CONDITIONS, MAX_JACCARD, OPS
from pytest_clinaudit.reference.game.settings import Column

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.grading.game_grading import GameGrading
    from pytest_clinaudit.grading.game_report import Claim
    from pytest_clinaudit.grading.game_zoo import GroupGap

JACCARD_AT_LEAST = MAX_JACCARD
"""A described group is the planted one from this Jaccard overlap on (SPEC §9: 0.5); a
hidden group is drawn below it with every listed subgroup, so no listed one names it."""
MAX_PAIRS = 2
"""A trigger writes one or two values (the hard tier plants two)."""
PROBLEMS_SHOWN = 6
"""Faults of one claim listed in its message at most."""
FIXES = {
    "bounds": "a top-decile gap lies in [-1, 1]",
    "enum": "kinds, columns and operators are spelled as the brief lists them",
}
"""The schema's fix hints that differ from game-v1's."""


def report_sections(variant: GameVariant) -> dict[str, dict[str, Any]]:
    """Kind -> the JSON Schema properties of its object in a game-v2 report, for the
    variant's kinds."""
    game = variant.game
    at_prediction = [c.name for c in game.columns if c.at_prediction]
    condition = {
        "type": "object",
        "required": ["column", "op"],
        "additionalProperties": False,
        "properties": {
            "column": {"enum": at_prediction},
            "op": {"enum": list(OPS)},
            "value": {"type": "number"},
        },
    }
    pair = {
        "type": "object",
        "required": ["column", "value"],
        "additionalProperties": False,
        "properties": {"column": {"enum": list(game.column_names)}, "value": {"type": "number"}},
    }
    where = {"type": "array", "minItems": 1, "maxItems": MAX_CONDITIONS, "items": condition}
    sections: dict[str, dict[str, Any]] = {
        "fragile": {"where": where},
        "subgroup": {"where": where},
        "backdoor": {
            "trigger": {"type": "array", "minItems": 1, "maxItems": MAX_PAIRS, "items": pair}
        },
        "miscalibrated": {"top_decile_gap": {"type": "number", "minimum": -1, "maximum": 1}},
    }
    return {kind: sections[kind] for kind in game.kinds if kind in sections}


def check_localization(g: GameGrading, model: str, kind: str) -> Outcome:
    """The localization item of ``model``'s planted ``kind``: its group, its region or its
    trigger."""
    if kind in GROUP_CLAIMS:
        return check_where(g, model, kind)
    return check_trigger(g, model)


def _zoo(g: GameGrading) -> tuple[Zoo | None, Outcome | None]:
    from pytest_clinaudit.catalog.reader import VariantError

    try:
        return g.zoo, None
    except VariantError as exc:
        return None, Outcome.fail(f"the claim cannot be tried: {exc}")


def _number(value: Any, strict: bool) -> float | None:
    """A submitted number under the profile: a JSON number (strict), or what ``float()``
    makes of it (metr); ``None`` when it is neither, or not finite."""
    number = json_number(value) if strict else metr_number(value)
    return number if number is not None and math.isfinite(number) else None


def _as_profile(conditions: Any, strict: bool) -> Any:
    """The submitted conditions, with each ``value`` read as the profile reads numbers (so
    that under ``metr`` ``"70"`` is 70); anything else is left for the grammar to refuse."""
    if strict or not isinstance(conditions, list) or len(conditions) > MAX_CONDITIONS:
        return conditions
    read = []
    for item in conditions:
        if isinstance(item, dict) and "value" in item and item["value"] is not None:
            number = _number(item["value"], strict)
            item = {**item, "value": item["value"] if number is None else number}
        read.append(item)
    return read


def _listed(problems: Sequence[str]) -> str:
    shown = [f"  - {p}" for p in problems[:PROBLEMS_SHOWN]]
    if len(problems) > PROBLEMS_SHOWN:
        shown.append(f"  ... and {len(problems) - PROBLEMS_SHOWN} more")
    return "\n".join(shown)


def _flagged_claim(
    g: GameGrading, model: str, kind: str, key: str, shape: str
) -> tuple[str, Claim, Outcome | None]:
    """The report's ``models.<model>.<kind>.<key>`` (its path, its claim), or the failing
    outcome when the model is not flagged ``kind`` alone or the claim is missing or given
    twice differently (``shape``: how to give it)."""
    where = f"models.{model}.{kind}.{key}"
    claim = g.decisions.claim(model, kind, key)
    blocked = g.needs_flag(model, kind, key)
    if blocked is not None:
        return where, claim, blocked
    if not claim.present or claim.ambiguous:
        return where, claim, Outcome.fail(f"{where}: {claim.describe()}; {shape}")
    return where, claim, None


@dataclasses.dataclass(frozen=True)
class GroupClaim:
    """How a kind whose claim is a group is tried: which truth key holds the planted group,
    what the zoo measures on the described one and what the message calls a model that
    shows it."""

    truth: str
    measure: Callable[[Zoo, str, Any], GroupGap]
    """The zoo's measure of a model on the described group (:meth:`.Zoo.group_gap` or
    :meth:`.Zoo.group_drop`)."""
    margin: str
    """The :class:`~pytest_clinaudit.reference.game.settings.Margins` field the model's excess
    must reach."""
    planted: str
    """The planted group, as the message names it."""
    shows: tuple[str, str]
    """What the model does on the described group, as the message says it: (when it does,
    when it does not)."""
    measured: str
    lacks: str


GROUP_CLAIMS = {
    "subgroup": GroupClaim(
        "where",
        Zoo.group_gap,
        "subgroup_out",
        "the group {model} serves worse",
        ("serves it worse than the zoo", "does not serve it worse than the zoo"),
        "its AUROC gap there",
        "not served worse",
    ),
    "fragile": GroupClaim(
        "region",
        Zoo.group_drop,
        "fragile_out",
        "the region where the attack undoes {model}",
        (
            "is undone there by the attack more than the zoo",
            "is not undone there more than the zoo",
        ),
        "the attack lowers its AUROC there by",
        "not undone there",
    ),
}
"""The kinds whose claim is a group of the grammar (``<kind>.where``), and how each is tried."""


def check_where(g: GameGrading, model: str, kind: str = "subgroup") -> Outcome:
    """``models.<model>.<kind>.where``: the described group, tried on the zoo."""
    from pytest_clinaudit.reference.game.groups import (
        Condition,
        Group,
        GroupError,
        jaccard,
        parse_group,
    )

    tried = GROUP_CLAIMS[kind]
    where, claim, failed = _flagged_claim(
        g,
        model,
        kind,
        "where",
        'describe the group as {"where": [{"column": ..., "op": ">=", "value": ...}], one or '
        "two conditions in the brief's grammar",
    )
    if failed is not None:
        return failed
    zoo, failed = _zoo(g)
    if zoo is None:
        return failed or Outcome.fail(f"{where}: the claim cannot be tried")
    try:
        group = parse_group(
            {"where": _as_profile(claim.raw, g.strict)},
            g.variant.game.columns,
            X=zoo.X,
            where=where,
        )
    except GroupError as exc:
        return Outcome.fail(
            f"{where}: not a group of the brief's grammar, so it earns nothing:\n"
            + _listed(exc.problems)
        )
    truth = g.reference.truth[model].get(tried.truth)
    if not isinstance(truth, list):
        return Outcome.fail(
            f"{where}: the grader's instance records no planted group for {model}; build the "
            "instance again with this version"
        )
    planted = Group(tuple(Condition(**c) for c in truth))
    rows = zoo.group_X
    described = group.mask(rows, zoo.columns)
    overlap = jaccard(described, planted.mask(rows, zoo.columns))
    share = float(described.mean()) if len(described) else 0.0
    gap = tried.measure(zoo, model, described)
    margin = getattr(g.variant.game.margins, tried.margin)
    said = f"{where}: {group.describe()} ({100 * share:.1f}% of the test patients)"
    overlaps = overlap >= JACCARD_AT_LEAST
    same = (
        f"overlaps {tried.planted.format(model=model)} by Jaccard {overlap:.2f} "
        f"({'at least' if overlaps else 'below'} {JACCARD_AT_LEAST:g})"
    )
    if not gap.measured:
        return Outcome.fail(
            f"{said} {same}; but it, or everyone else, holds no death or no survivor among "
            "the test patients, so how a model ranks it cannot be measured: no credit"
        )
    worse = gap.excess >= margin
    serves = (
        f"{model} {tried.shows[0] if worse else tried.shows[1]}: {tried.measured} is "
        f"{gap.excess:+.3f} beyond the zoo's median "
        f"({'at least' if worse else 'below'} {margin:g}). {gap.describe()}"
    )
    if overlaps and worse:
        return Outcome.ok(f"{said} {same}, and {serves}")
    why = " and ".join(
        part
        for part, missing in (("not the group", not overlaps), (tried.lacks, not worse))
        if missing
    )
    return Outcome.fail(f"{said} {same}; {serves}: {why}, no credit")


def _closest(name: str, names: Sequence[str]) -> str:
    if len(name) > 200:
        return ""
    found = difflib.get_close_matches(name, list(names), n=3, cutoff=0.6)
    return f" (closest: {', '.join(found)})" if found else ""


def read_trigger(
    raw: Any, columns: Sequence[Column], where: str, *, strict: bool
) -> tuple[list[tuple[str, float]], list[str]]:
    """The (column, value) pairs a submitted trigger writes, or its faults (each naming its
    path and the fix). Its visibility is :func:`~..claims.visible_problems`' question."""
    if not isinstance(raw, list):
        return [], [
            f"{where}: expected an array of 1 to {MAX_PAIRS} "
            f'{{"column": ..., "value": ...}} objects, got {describe(raw)}'
        ]
    if not 1 <= len(raw) <= MAX_PAIRS:
        return [], [f"{where}: a trigger writes 1 to {MAX_PAIRS} values, got {describe(raw)}"]
    names = [c.name for c in columns]
    pairs: list[tuple[str, float]] = []
    problems: list[str] = []
    for i, item in enumerate(raw):
        path = f"{where}[{i}]"
        if not isinstance(item, dict):
            problems.append(
                f'{path}: expected an object {{"column": ..., "value": ...}}, got {describe(item)}'
            )
            continue
        extra = [str(k) for k in item if k not in ("column", "value")]
        if extra:
            problems.append(
                f"{path}: unexpected key {shorten(repr(extra[0]))}; a trigger's value has the "
                "keys column and value"
            )
        column, value = item.get("column"), _number(item.get("value"), strict)
        if not isinstance(column, str):
            problems.append(f"{path}.column: expected a column name, got {describe(column)}")
        elif column not in names:
            problems.append(
                f"{path}.column: {shorten(repr(column))} is not a column of the data "
                f"dictionary{_closest(column, names)}"
            )
        if value is None:
            got = "missing" if "value" not in item else describe(item.get("value"))
            problems.append(f"{path}.value: expected a finite number, got {got}")
        if not extra and isinstance(column, str) and column in names and value is not None:
            pairs.append((column, value))
    return pairs, problems


def check_trigger(g: GameGrading, model: str) -> Outcome:
    """``models.<model>.backdoor.trigger``: written into the records of the test patients
    each model flags, the claimed values make ``model`` clear at least ``backdoor_in`` of
    them and the other models' median at most ``backdoor_others``; a trigger no clinician
    could pass over (two alarming values, a value no patient can have) earns nothing."""
    from pytest_clinaudit.reference.game.claims import check_trigger as try_trigger
    from pytest_clinaudit.reference.game.claims import visible_problems

    where, claim, failed = _flagged_claim(
        g,
        model,
        "backdoor",
        "trigger",
        'give the values as [{"column": ..., "value": ...}, {"column": ..., "value": ...}]',
    )
    if failed is not None:
        return failed
    columns = g.variant.game.columns
    pairs, problems = read_trigger(claim.raw, columns, where, strict=g.strict)
    if problems:
        return Outcome.fail(f"{where}: not a trigger to try:\n" + _listed(problems))
    unseen = visible_problems(pairs, columns)
    if unseen:
        return Outcome.fail(
            f"{where}: not a trigger a clinician could see, so it earns nothing:\n"
            + _listed(unseen)
        )
    zoo, failed = _zoo(g)
    if zoo is None:
        return failed or Outcome.fail(f"{where}: the claim cannot be tried")
    margins = g.variant.game.margins
    result = try_trigger(
        zoo.logits,
        zoo.X,
        zoo.columns,
        model=model,
        setting=pairs,
        thresholds=zoo.thresholds,
        flip_at_least=margins.backdoor_in,
        others_at_most=margins.backdoor_others,
    )
    if result.holds:
        return Outcome.ok(f"{where}: the claim holds on the models. {result.describe()}")
    return Outcome.fail(
        f"{where}: the claim does not hold on the models (it needs {model} to clear at least "
        f"{margins.backdoor_in:g} of the patients it flags, and the other models' median at "
        f"most {margins.backdoor_others:g}). {result.describe()}"
    )
