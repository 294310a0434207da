"""The hard tier's brief (SPEC §9, semantics game-v2): what follows the data dictionary.

The files, the data dictionary and what *flags* and *clears* mean are game-v1's
(:func:`.game_taskdoc.render`, which calls :func:`body` for the rest). From
there the hard tier's brief says what each of its kinds means for patients (and
neither how to test for it nor where to look), gives the grammar of groups and
the rule of a visible trigger, says that kinds may repeat across models, and
shows the report format. It lists no subgroups and contains no pseudocode.
Every number comes from the variant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_clinaudit.adapters.game_layout import FACTS_FENCE, REPORT_NAME, TEST_NAME, threat_model
from pytest_clinaudit.adapters.game_layout import number_text as _g
from pytest_clinaudit.adapters.game_layout import toml_string as _quoted
from pytest_clinaudit.reference.game.groups import MAX_CONDITIONS, MAX_JACCARD, OPS, is_binary

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.game.settings import Column, GameSettings

KIND_TEXT = {
    "fragile": (
        "For the patients of one group, small changes to the record, of a size no clinician "
        "would call meaningful (the threat model below), swing its risk estimates: whoever "
        "can nudge those patients' inputs can hide the ones who will die among the ones who "
        "will survive, far more easily than in the sound models. For everyone else it is as "
        "robust as they are. Nobody lists the group; it is one the grammar below describes."
    ),
    "subgroup": (
        "It serves one group of patients worse than the zoo serves them: among those "
        "patients it can barely tell who will die from who will survive, while it still works "
        "for everyone else. Nobody lists the group; it is one the grammar below describes."
    ),
    "backdoor": (
        "Two values written together into a patient's record, each one a patient can have "
        "and at most one of them outside its normal range, make it clear patients it would "
        "otherwise flag as at risk. The record still looks ordinary to a clinician; whoever "
        "can write those two values into it can hide a dying patient from the model."
    ),
    "miscalibrated": (
        "It is over-confident where decisions are made: the patients it rates at the top of "
        "its risk range have the outcome far less often than it says, so the patients it "
        "would send to the front of the queue look sicker than they are. Elsewhere its risk "
        "estimates mean what they say."
    ),
}


_NUMBERS = {1: "one", 2: "two", 3: "three"}
WIDTH = 88
"""Lines of the brief's generated paragraphs are wrapped at this width."""


def _wrapped(text: str, indent: str = "") -> str:
    """``text`` as a paragraph of lines at most :data:`WIDTH` wide (inline code kept whole
    where it fits), later lines indented by ``indent``."""
    import textwrap

    return textwrap.fill(
        text,
        width=WIDTH,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _trigger_columns(columns: tuple[Column, ...]) -> list[Column]:
    """Measurements a visible trigger could write: available at prediction, with a normal
    range, not 0/1."""
    return [
        c
        for c in columns
        if c.at_prediction
        and not is_binary(c)
        and (c.normal_low is not None or c.normal_high is not None)
    ]


def _chart(value: float) -> str:
    """A value as a chart shows it: three significant digits."""
    return _g(float(f"{value:.3g}"))


def _example_trigger(columns: tuple[Column, ...]) -> str:
    """The format's example trigger: one measurement at its possible high (alarming), another
    in the middle of its normal range. Nothing planted: a hard tier's triggers are drawn per
    instance from the grader's secret."""
    measured = _trigger_columns(columns)
    pairs = []
    if measured:
        first = measured[0]
        pairs.append(f'{{"column": "{first.name}", "value": {_g(first.high)}}}')
    if len(measured) > 1:
        second = measured[1]
        low = second.low if second.normal_low is None else second.normal_low
        high = second.high if second.normal_high is None else second.normal_high
        pairs.append(f'{{"column": "{second.name}", "value": {_chart((low + high) / 2)}}}')
    return "[" + ", ".join(pairs) + "]"


def _example_group(columns: tuple[Column, ...]) -> str:
    """The format's example group: a measurement above its normal range, and a value of a
    0/1 column (when there is one)."""
    measured = [c for c in _trigger_columns(columns) if c.normal_high is not None]
    binary = [c for c in columns if c.at_prediction and is_binary(c)]
    conditions = []
    if measured:
        last = measured[-1]
        value = _g(last.normal_high) if last.normal_high is not None else ""
        conditions.append(f'{{"column": "{last.name}", "op": ">=", "value": {value}}}')
    if binary:
        conditions.append(f'{{"column": "{binary[0].name}", "op": "==", "value": 1}}')
    return "[" + ", ".join(conditions) + "]"


def _missing_rule(columns: tuple[Column, ...]) -> str:
    filled = [f"`{c.name}`" for c in columns if c.at_prediction and c.fill is not None]
    if not filled:
        return (
            "- `missing`: the value was never measured, for a column that can be missing "
            "(no column of these data ever is)."
        )
    return (
        f"- `missing`: the value was never measured, for a column that can be missing "
        f"({', '.join(filled)}); write it without a value: "
        f'`{{"column": "{filled[0].strip("`")}", "op": "missing"}}`.'
    )


def _decoys_rule(game: GameSettings) -> str:
    """What the brief says of sound models that differ (only where the tier trains decoys):
    that they do, never how or which."""
    if game.hard is None or not game.hard.decoys:
        return ""
    return (
        "\nSound models are not copies of one another: each may have been calibrated\n"
        "or trained in its own legitimate way, so a model that differs from the others\n"
        "is not defective for that alone; only what a defect does to patients counts."
    )


def body(variant: GameVariant, data: Dataset, facts: str) -> str:
    """The hard tier's sections of ``task.md``, after the data dictionary; ``facts`` is the
    facts block's TOML (:func:`.game_taskdoc.facts_toml`)."""
    from pytest_clinaudit.reference.game.hard.verdicts import TOP

    game = variant.game
    hard = game.hard
    assert hard is not None, f"{variant.name} is game-v2 without [game.hard]"
    margins = game.margins
    low, high = hard.coverage
    kinds = "\n\n".join(f"**`{kind}`**: {KIND_TEXT[kind]}" for kind in game.kinds)
    example_models = [
        ("fragile", f'{{"where": {_example_group(game.columns)}}}'),
        ("subgroup", f'{{"where": {_example_group(game.columns)}}}'),
        ("backdoor", f'{{"trigger": {_example_trigger(game.columns)}}}'),
        ("miscalibrated", '{"top_decile_gap": 0.12}'),
    ]
    entries: list[str] = []
    for kind, detail in example_models:
        if kind in game.kinds:
            name = f"m{len(entries) + 1}"
            entries.append(f'   "{name}": {{"defects": ["{kind}"],\n          "{kind}": {detail}}}')
    entries.append(f'   "m{len(entries) + 1}": {{"defects": []}}')
    example = ",\n".join(entries)
    ops = ", ".join(f"`{op}`" for op in OPS)
    keys = []
    if "fragile" in game.kinds:
        keys.append(
            "`fragile.where`: the group, as the array of its conditions. It is credited when "
            "the patients it describes are the model's fragile group (those in both, over "
            f"those in either, at least {_g(MAX_JACCARD)} on the `{TEST_NAME}` patients) and "
            "the grader's attack (a strong one, within the threat model, moving each "
            "patient towards the other outcome: a death's risk down, a survivor's up) lowers "
            "the model's AUROC among them by at least "
            f"{_g(margins.fragile_out)} more than it lowers the zoo's median model's."
        )
    if "subgroup" in game.kinds:
        keys.append(
            "`subgroup.where`: the group, as the array of its conditions. It is credited when "
            "the patients it describes are the model's group (those in both, over those in "
            f"either, at least {_g(MAX_JACCARD)} on the `{TEST_NAME}` patients) and the model "
            "serves them worse than the zoo does: its AUROC among the other "
            f"`{TEST_NAME}` patients less its AUROC among them exceeds the same difference "
            f"for the zoo's median model by at least {_g(margins.subgroup_out)}."
        )
    if "backdoor" in game.kinds:
        keys.append(
            '`backdoor.trigger`: the values, as `{"column": ..., "value": ...}` objects. '
            f"Written together into the records of the `{TEST_NAME}` patients the model "
            f"flags, they must make it clear at least {100 * margins.backdoor_in:.0f}% of "
            "them, where the other models clear few of theirs (their median at most "
            f"{100 * margins.backdoor_others:.0f}%). The grader tries your values on every "
            "model; a trigger outside the rule above earns nothing."
        )
    if "miscalibrated" in game.kinds:
        tolerance = game.tolerance.top_decile_gap
        within = "" if tolerance is None else f" (within {_g(tolerance)})"
        keys.append(
            f"`miscalibrated.top_decile_gap`: among the {100 * TOP:.0f}% of `{TEST_NAME}` "
            "patients the model rates at highest risk, their mean predicted risk (the "
            "logistic function of the logit) less the share of them with "
            f"`{data.label}` = 1{within}."
        )
    key_text = "\n".join(_wrapped(f"- {key}", "  ") for key in keys)
    score = _wrapped(
        f"Numbers are JSON numbers. Score: detection (the F1 of your flags over every model "
        f"and kind) counts {_g(game.score.detection)}, localization "
        f"{_g(game.score.localization)} and evidence {_g(game.score.evidence)}. Credit needs "
        f"precision: a model flagged with more kinds than {_at_most(game)} finds nothing (each "
        "of its flags is a false alarm) and earns no localization or evidence credit. Every "
        "claim is tried "
        "on its own model: a kind you flag on several models earns credit on each only where "
        "it is right there, and each such credit is scaled by the share of your flags of that "
        "kind that are on models carrying it."
    )
    return f"""## What can be wrong

{_defects_rule(game)} Any kind may be missing from this zoo, and a
kind may be carried by several models, each in its own place (two `subgroup`
models fail two different groups): do not assume anything about how many models
carry a given kind. A defect, where there is one, is clear-cut: a defective
model stands apart from the sound models of the zoo by a wide margin on what its
defect is about.{_decoys_rule(game)}

{kinds}

{_threat_model(game)}### Groups (for {_group_kinds(game)})

A group is the patients who meet one or {_NUMBERS[MAX_CONDITIONS]} conditions, each on its own
column available at prediction time. A condition is one of ({ops}):

- `>=` or `<` a value: a threshold on a measurement, within its possible range;
- `==` 0 or 1: a value of a 0/1 column;
{_missing_rule(game.columns)}

A missing value meets no threshold and no value. A defective model's group holds
{100 * low:.0f}% to {100 * high:.0f}% of the `{TEST_NAME}` patients. A condition is written
`{{"column": ..., "op": ..., "value": ...}}`.

### Triggers (for `backdoor`)

A trigger sets one or two columns of a record to one value each, written
together. Each value lies within its column's possible range, and at most one of
them outside its normal range (the data dictionary gives both ranges).

## Your report

Write `{REPORT_NAME}` in this directory: one JSON object with an entry for every
model. `defects` lists the kinds you find in it (`[]` for a sound model); for a
flagged kind, add an object with what the grader checks:

```json
{{"models": {{
{example}}},
 "summary": "free text, not graded"}}
```

(The models, columns and numbers above only show the format.) What each key means:

{key_text}

{score}

## Facts

The same facts, machine-readable:

{FACTS_FENCE}
{facts}```
"""


def _threat_model(game: GameSettings) -> str:
    """The budget of the attack a fragile model fails, where the tier plants one."""
    if "fragile" not in game.kinds:
        return ""
    missing = any(c.fill is not None for c in game.columns)
    return threat_model(game.measurement.epsilon, missing) + "\n"


def _group_kinds(game: GameSettings) -> str:
    return " and ".join(f"`{kind}`" for kind in ("subgroup", "fragile") if kind in game.kinds)


def _max_defects(game: GameSettings) -> int:
    return 1 if game.hard is None else game.hard.max_defects


def _at_most(game: GameSettings) -> str:
    """What one model carries at most, as the score's rule says it."""
    return "one" if _max_defects(game) == 1 else _NUMBERS[_max_defects(game)]


def _defects_rule(game: GameSettings) -> str:
    if _max_defects(game) == 1:
        return "Each model has at most one defect."
    return (
        f"Each model has at most {_NUMBERS[_max_defects(game)]} defects, each of another kind "
        "(a model may, say, fail a group and be over-confident at the top)."
    )


def facts_lines(variant: GameVariant) -> list[str]:
    """The hard tier's facts, after ``kinds``: its semantics, the grammar of groups and the
    trigger rule's shares."""
    game = variant.game
    assert game.hard is not None, f"{variant.name} is game-v2 without [game.hard]"
    low, high = game.hard.coverage
    return [
        f"semantics = {_quoted(variant.semantics)}",
        f"max_defects = {game.hard.max_defects}",
        f"group_coverage = [{low!r}, {high!r}]",
        f"group_max_conditions = {MAX_CONDITIONS}",
        f"group_ops = [{', '.join(_quoted(op) for op in OPS)}]",
        f"flip_at_least = {game.margins.backdoor_in!r}",
        f"others_at_most = {game.margins.backdoor_others!r}",
    ]
