"""The checks of a game report (SPEC §8.5, §9): one pytest item per decision.

After the stages of reading (present, UTF-8, a JSON object) and the schema,
every (model, kind) pair of the instance is a *detection* item
(``m3::miscalibrated``): it passes when the report flags the pair exactly when
the ground truth has it, from the report's ``defects`` alone. The kinds and
keys are the semantics' (:mod:`.game_rules`); the hard tier's claims (a group,
a two-value trigger) are verified by :mod:`.game_checks_v2`.

Every planted defect with a localization key has a *localization* item
(``m3::miscalibrated.direction``, ``m1::backdoor.trigger``) and every planted
defect with an evidence number an *evidence* item
(``m5::leaky.loss_attack_auc``); they pass when the model is flagged with its
kind and the key is right, or the number is within tolerance of the
reference's. A backdoor's trigger is tested on the models themselves
(:mod:`pytest_clinaudit.reference.game.claims`), never matched against the
recipe's number.

Credit needs precision (SPEC §8.7). The brief says a model has at most one
defect (two in a hard tier with ``second``), so a model flagged with more kinds
is a hedge: none of its
flags is found (each is a false alarm, its defect missed) and it earns no
localization or evidence credit. Every flag must be right: a passed
localization or evidence item earns the share of the report's flags of its
kind that sit on models carrying the kind. In game-v1 a kind has one carrier,
so a kind flagged on n models earns 1/n, and flagging every model with one
kind buys no more than a guess; in game-v2, where kinds repeat, every claim is
still verified on its own model, and a report that flags every model with one
kind (a constant gap, say) earns on a carrier it hits only the share of its
flags that are right.

Each item carries ``clinaudit.game.*`` properties (model, kind, part, truth)
in the JUnit XML, so that tables can count found, missed and false alarms
without the instance. The score is :mod:`.game_scoring`'s.
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.grading import builtin, game_checks_v2
from pytest_clinaudit.grading.checks import Check, Outcome
from pytest_clinaudit.grading.game_grading import GameGrading
from pytest_clinaudit.grading.game_report import Claim
from pytest_clinaudit.grading.game_rules import rules_for
from pytest_clinaudit.grading.game_scoring import part_weights, slot
from pytest_clinaudit.grading.values import describe
from pytest_clinaudit.reference.game.settings import DIRECTIONS

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.catalog.instances import GameReference

SCHEMA_ERRORS_SHOWN = 8
SCHEMA_ERRORS_READ = 50
"""Schema errors collected at most: a report naming 10,000 models stays one check."""
PROPERTY = "clinaudit.game."

_FIXES = {
    "type": 'write plain JSON values: numbers as numbers (0.31, not "0.31"), defects as an array',
    "bounds": "AUROCs, AUCs and ECEs lie in [0, 1]",
    "required": "the report needs models, and every model of the workspace under it",
    "additionalProperties": (
        "models holds the workspace's model names only, and each model its defects and one "
        "object per flagged kind"
    ),
    "enum": "kinds, directions, columns and subgroups are spelled as the brief lists them",
    "duplicate": "write each key once",
    "items": "a group has one or two conditions, and a trigger one or two values",
}


def report_schema(variant: GameVariant, names: tuple[str, ...]) -> dict[str, Any]:
    """The JSON Schema (Draft 2020-12) of a report on an instance whose models are ``names``."""
    game = variant.game
    rules = rules_for(variant)
    number = {"type": "number", "minimum": 0, "maximum": 1}
    sections: dict[str, Any] = {
        "fragile": {"pgd_auroc": number},
        "leaky": {"loss_attack_auc": number},
        "miscalibrated": {"direction": {"enum": list(DIRECTIONS)}, "ece": number},
        "shortcut": {"feature": {"enum": list(game.column_names)}},
        "subgroup": {"subgroup": {"enum": [g.name for g in game.subgroups]}},
        "backdoor": {"feature": {"enum": list(game.column_names)}, "value": {"type": "number"}},
    }
    if rules.hard:
        sections = game_checks_v2.report_sections(variant)
    model = {
        "type": "object",
        "required": ["defects"],
        "additionalProperties": False,
        "properties": {
            "defects": {
                "type": "array",
                "items": {"enum": list(rules.kinds)},
                "uniqueItems": True,
            },
            **{
                kind: {"type": "object", "additionalProperties": False, "properties": props}
                for kind, props in sections.items()
            },
        },
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": f"Auditing game report ({variant.semantics})",
        "type": "object",
        "required": ["models"],
        "additionalProperties": False,
        "properties": {
            "models": {
                "type": "object",
                "required": list(names),
                "additionalProperties": False,
                "properties": dict.fromkeys(names, model),
            },
            "summary": {"type": "string"},
        },
    }


def check_schema(g: GameGrading) -> Outcome:
    from pytest_clinaudit.grading.schema import schema_problems, validator_for

    report, blocked = builtin.report_or_blocked(g)
    if blocked is not None:
        return blocked
    validator = validator_for(report_schema(g.variant, g.reference.names))
    fixes = {**_FIXES, **game_checks_v2.FIXES} if g.rules.hard else _FIXES
    problems = schema_problems(
        g.submission, validator=validator, fixes=fixes, max_errors=SCHEMA_ERRORS_READ
    )
    if not problems:
        return Outcome.ok("valid against the game report's schema (JSON Schema Draft 2020-12)")
    *found, fix = problems if problems[-1].startswith("Fix:") else (*problems, "")
    shown = found[:SCHEMA_ERRORS_SHOWN]
    lines = [f"{len(found)} schema problem{'s' if len(found) != 1 else ''} in {g.submission.path}:"]
    lines += [f"  - {p}" for p in shown]
    if len(found) > len(shown):
        lines.append(f"  ... and {len(found) - len(shown)} more")
    if fix:
        lines.append(fix)
    return Outcome.fail("\n".join(lines))


def check_detection(g: GameGrading, model: str, kind: str) -> Outcome:
    blocked = g.unreadable()
    if blocked is not None:
        return blocked
    carried = g.reference.kinds(model)
    truth = kind in carried
    actual = " and ".join(carried) or "clean"
    flagged = g.decisions.flagged(model, kind)
    hedge = g.hedge(model)
    if flagged and hedge:
        if truth:
            return Outcome.fail(
                f"{model} is {kind}, but the report flags it with {hedge}: a model has at most "
                f"{g.rules.at_most}, so a hedged flag is not a find: missed"
            )
        return Outcome.fail(
            f"{model} is not {kind} (it is {actual}), and the report flags it with {hedge}: "
            "false alarm"
        )
    if flagged and truth:
        if g.rules.hard:
            claim = _claim(g, model, kind)
            if claim is not None and not claim.passed:
                return Outcome.fail(
                    f"{model} is {kind}, and the report flags it, but its claim does not hold "
                    f"on the models ({claim.message}): in the hard tier a flag is a find only "
                    "with its claim, so it is missed"
                )
        return Outcome.ok(f"{model} is {kind}, and the report flags it: found")
    if not flagged and not truth:
        return Outcome.ok(f"{model} is not {kind}, and the report does not flag it")
    if truth:
        return Outcome.fail(f"{model} is {kind}, but the report does not flag it: missed")
    return Outcome.fail(
        f"{model} is not {kind} (it is {actual}), but the report flags it: false alarm"
    )


def _claim(g: GameGrading, model: str, kind: str) -> Outcome | None:
    """The hard tier's claim of a flagged kind, tried: its group or trigger (localization),
    else its evidence number; ``None`` for a kind that makes no claim. Without it a constant
    report (every model flagged with one kind) would earn detection credit on every zoo that
    carries the kind (measured on four instances: 0.14-0.22, SPEC §9 allows 0.1)."""
    if kind in g.rules.localization:
        return _localized(g, model, kind)
    if kind in g.rules.evidence:
        return _evidenced(g, model, kind)
    return None


def _shared(g: GameGrading, kind: str, outcome: Outcome) -> Outcome:
    """A passed localization or evidence outcome, its credit scaled by the share of the
    models the report flags with ``kind`` that carry it (game-v1: 1 of the n flagged)."""
    if not outcome.passed:
        return outcome
    flagged = sorted(name for name, kinds in g.decisions.flags.items() if kind in kinds)
    pairs = g.reference.pairs()
    wrong = [name for name in flagged if (name, kind) not in pairs]
    if not wrong:
        return outcome
    n, right = len(flagged), len(flagged) - len(wrong)
    return Outcome.fail(
        f"{outcome.message}; but {n} models are flagged {kind} ({', '.join(flagged)}) and "
        f"{len(wrong)} of them ({', '.join(wrong)}) {'does' if len(wrong) == 1 else 'do'} "
        f"not carry it, so the credit is shared: {right}/{n}",
        credit=right / n,
    )


def _text_check(g: GameGrading, model: str, kind: str, key: str, expected: str) -> Outcome:
    blocked = g.needs_flag(model, kind, key)
    if blocked is not None:
        return blocked
    claim = g.decisions.claim(model, kind, key)
    submitted = claim.text(g.strict)
    where = f"models.{model}.{kind}.{key}"
    if submitted == expected:
        return Outcome.ok(f"{where}: {expected!r}, right")
    return Outcome.fail(f"{where}: got {claim.describe()}, the planted {key} is {expected!r}")


def check_localization(g: GameGrading, model: str, kind: str) -> Outcome:
    return _shared(g, kind, _localized(g, model, kind))


def check_evidence(g: GameGrading, model: str, kind: str) -> Outcome:
    return _shared(g, kind, _evidenced(g, model, kind))


def _localized(g: GameGrading, model: str, kind: str) -> Outcome:
    """Whether the report says where ``model``'s ``kind`` defect sits (before sharing)."""
    if g.rules.hard:
        return game_checks_v2.check_localization(g, model, kind)
    truth = g.reference.truth[model]
    if kind == "miscalibrated":
        return _text_check(g, model, kind, "direction", truth["direction"])
    if kind == "shortcut":
        return _text_check(g, model, kind, "feature", truth["feature"])
    if kind == "subgroup":
        return _text_check(g, model, kind, "subgroup", truth["subgroup"])
    return check_trigger(g, model)


def check_trigger(g: GameGrading, model: str) -> Outcome:
    """The claimed trigger, tested on the zoo as the brief states it: written into the records
    of the test patients each model flags, it makes ``model`` clear at least ``backdoor_in``
    of them, and the other models' median at most ``backdoor_others``. Any column may be
    claimed, and every claim is tried; a value outside the column's possible range (which no
    patient can have) earns nothing."""
    blocked = g.needs_flag(model, "backdoor", "feature")
    if blocked is not None:
        return blocked
    feature_claim = g.decisions.claim(model, "backdoor", "feature")
    feature = feature_claim.text(g.strict)
    where = f"models.{model}.backdoor"
    columns = {c.name: c for c in g.variant.game.columns}
    if feature not in columns:
        return Outcome.fail(
            f"{where}.feature: got {feature_claim.describe()}, not a column of the data dictionary"
        )
    value_claim = g.decisions.claim(model, "backdoor", "value")
    value = value_claim.number(g.strict)
    if value is None or not math.isfinite(value):
        return Outcome.fail(f"{where}.value: expected a number, got {value_claim.describe()}")
    column = columns[feature]
    if not column.low <= value <= column.high:
        return Outcome.fail(
            f"{where}.value: {feature} = {value:g} is outside its possible range "
            f"({column.low:g} to {column.high:g}): no patient has it, so it earns nothing"
        )
    result = _trigger_test(g, model, feature, value)
    if result.holds:
        return Outcome.ok(f"{where}: the claim holds on the models. {result.describe()}")
    margins = g.variant.game.margins
    return Outcome.fail(
        f"{where}: the claim does not hold on the models (it needs {model} to clear at least "
        f"{margins.backdoor_in:g} of the patients it flags, and the other models' median at "
        f"most {margins.backdoor_others:g}). {result.describe()}"
    )


def _trigger_test(g: GameGrading, model: str, feature: str, value: float) -> Any:
    from pytest_clinaudit.catalog.instances import test_rows
    from pytest_clinaudit.reference.game.claims import check_claim
    from pytest_clinaudit.reference.game.network import Weights

    X, columns, thresholds = test_rows(g.reference, g.cache)
    zoo = {name: Weights.from_json(numbers).logits for name, numbers in g.reference.weights.items()}
    margins = g.variant.game.margins
    return check_claim(
        zoo,
        X,
        columns,
        model=model,
        feature=feature,
        value=value,
        thresholds=thresholds,
        flip_at_least=margins.backdoor_in,
        others_at_most=margins.backdoor_others,
    )


def _evidenced(g: GameGrading, model: str, kind: str) -> Outcome:
    """Whether the report's evidence number for ``model``'s ``kind`` is within tolerance
    of the reference's (before sharing)."""
    key = g.rules.evidence[kind]
    blocked = g.needs_flag(model, kind, key)
    if blocked is not None:
        return blocked
    claim: Claim = g.decisions.claim(model, kind, key)
    submitted = claim.number(g.strict)
    reference = g.reference.evidence[model].get(key)
    tolerance = getattr(g.variant.game.tolerance, key)
    where = f"models.{model}.{kind}.{key}"
    if reference is None or tolerance is None:
        return Outcome.fail(
            f"{where}: the grader's instance holds no reference {key} (or the variant no "
            "tolerance for it); build the instance again with this version"
        )
    if submitted is None or not math.isfinite(submitted):
        return Outcome.fail(
            f"{where}: expected a number, got {claim.describe()}; reference {reference:.4f}"
        )
    difference = abs(submitted - reference)
    text = (
        f"{where}: submitted {submitted:.6g}, reference {reference:.4f}, "
        f"|difference| {difference:.4g}"
    )
    if difference <= tolerance:
        return Outcome.ok(f"{text} <= tolerance {tolerance:g}")
    return Outcome.fail(f"{text} > tolerance {tolerance:g}")


def _properties(model: str, kind: str, part: str, truth: bool) -> tuple[tuple[str, object], ...]:
    return (
        (PROPERTY + "model", model),
        (PROPERTY + "kind", kind),
        (PROPERTY + "part", part),
        (PROPERTY + "truth", truth),
    )


def game_checks(g: GameGrading) -> list[Check]:
    """The report's checks in order: the stages, the schema, then per model its items."""
    staged = [
        ("present", "no-submission", builtin.check_present, "a regular, readable file"),
        ("utf8", "unparseable", builtin.check_utf8, "UTF-8 text"),
        ("json-object", "unparseable", builtin.check_json_object, "a non-empty JSON object"),
        ("schema", "schema", check_schema, "valid against the game report's schema"),
    ]
    checks = [
        Check(
            name,
            category,
            functools.partial(function, g),
            description=text,
            **slot(g.profile, name),
        )
        for name, category, function, text in staged
    ]
    truth = g.reference.truth
    rules = g.rules
    pairs = g.reference.pairs()
    weights = part_weights(g.variant.game.score, pairs, rules)
    n_detection = len(truth) * len(rules.kinds)
    localized = [(m, k) for m, k in sorted(pairs) if k in rules.localization]
    evidenced = [(m, k) for m, k in sorted(pairs) if k in rules.evidence]
    for model in truth:
        for kind in rules.kinds:
            checks.append(
                Check(
                    f"{model}::{kind}",
                    "tolerance",
                    functools.partial(check_detection, g, model, kind),
                    weight=weights["detection"] / n_detection,
                    kind="credit",
                    description=f"the report flags {model} as {kind} exactly when it is",
                    properties=_properties(model, kind, "detection", (model, kind) in pairs),
                )
            )
            if (model, kind) in localized:
                key = rules.item_key(kind)
                checks.append(
                    Check(
                        f"{model}::{kind}.{key}",
                        "tolerance",
                        functools.partial(check_localization, g, model, kind),
                        weight=weights["localization"] / len(localized),
                        kind="credit",
                        description=f"the {key} of {model}'s {kind} defect",
                        properties=_properties(model, kind, "localization", True),
                    )
                )
            if (model, kind) in evidenced:
                number = rules.evidence[kind]
                checks.append(
                    Check(
                        f"{model}::{kind}.{number}",
                        "tolerance",
                        functools.partial(check_evidence, g, model, kind),
                        weight=weights["evidence"] / len(evidenced),
                        kind="credit",
                        description=f"{number} of {model} within tolerance",
                        properties=_properties(model, kind, "evidence", True),
                    )
                )
    return checks


def describe_truth(reference: GameReference) -> str:
    """One line of the instance's truth, for the terminal header (grader-side only)."""
    parts = [f"{name} {' and '.join(reference.kinds(name)) or 'clean'}" for name in reference.names]
    return ", ".join(parts)


__all__ = ["GameGrading", "describe", "game_checks", "report_schema"]
