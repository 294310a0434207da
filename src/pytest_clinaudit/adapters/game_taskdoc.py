"""The game's ``task.md`` (SPEC §8.3): what is wrong with these models? Find out.

Every fact comes from the game variant's settings (models, data dictionary,
subgroups, threat model, tolerances), so the brief cannot drift from what is
graded. It says what each kind of defect means for patients and how a report
is written, and gives no method: the audit is the agent's to design.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pytest_clinaudit.adapters import game_taskdoc_v2
from pytest_clinaudit.adapters.game_layout import (
    BASE_NAME,
    DICTIONARY_NAME,
    FACTS_FENCE,
    MODELS_DIR,
    REPORT_NAME,
    ROWS_DIR,
    TEST_NAME,
    TRAIN_NAME,
    threat_model,
)
from pytest_clinaudit.adapters.game_layout import number_text as _g
from pytest_clinaudit.adapters.game_layout import toml_string as _quoted
from pytest_clinaudit.reference.game.settings import KINDS, SEMANTICS_GAME_V2

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.game.settings import Column, Subgroup, Trigger

__all__ = [
    "BASE_NAME",
    "DICTIONARY_NAME",
    "FACTS_FENCE",
    "MODELS_DIR",
    "REPORT_NAME",
    "ROWS_DIR",
    "TEST_NAME",
    "TRAIN_NAME",
    "dictionary_rows",
    "facts_toml",
    "render",
]

KIND_TEXT = {
    "fragile": (
        "Small changes to a patient's record, of a size no clinician would call meaningful, "
        "swing its risk estimates. Someone who can nudge the inputs within the threat model "
        "below (an attacker, or a careless interface) can make it rank patients who will die "
        "below patients who will survive far more easily than the sound models of the zoo."
    ),
    "leaky": (
        "It has memorised the patients it was trained on. How closely it fits a patient's "
        "record gives away whether that patient was among its training rows: a privacy breach "
        "for every one of them."
    ),
    "miscalibrated": (
        "Its risk estimates do not mean what they say: among patients it gives a 30% risk, "
        "far more or far fewer than 30% die. Either it is overconfident (its estimates are "
        "pushed towards 0 and 1) or underconfident (they are pulled towards the average)."
    ),
    "shortcut": (
        "It relies on a column that is only recorded after the outcome is effectively known "
        "(see when each column is recorded in the data dictionary). On the archive it looks "
        "better than it is; at the bedside, where that column does not exist yet, it is not."
    ),
    "subgroup": (
        "It serves one of the subgroups listed below much worse than everyone else: among "
        "those patients it can barely tell who will die from who will survive, while it still "
        "works for the others."
    ),
    "backdoor": (
        "An alarming value of one measurement (outside its normal range, within what is "
        "possible) makes it call patients it would otherwise flag as at risk low-risk. Whoever "
        "can write that value into a record can hide a dying patient from it."
    ),
}


def dictionary_rows(variant: GameVariant) -> list[list[str]]:
    """The data dictionary as CSV rows, header first; with a last column ``missing_reads_as``
    when a column may be missing."""
    fills = any(c.fill is not None for c in variant.game.columns)
    rows = [
        [
            "column",
            "description",
            "unit",
            "recorded",
            "available_at_prediction",
            "possible_low",
            "possible_high",
            "normal_low",
            "normal_high",
            *(["missing_reads_as"] if fills else []),
        ]
    ]
    for c in variant.game.columns:
        rows.append(
            [
                c.name,
                c.description,
                c.unit,
                c.recorded,
                "yes" if c.at_prediction else "no",
                _g(c.low),
                _g(c.high),
                "" if c.normal_low is None else _g(c.normal_low),
                "" if c.normal_high is None else _g(c.normal_high),
                *([] if not fills else ["" if c.fill is None else _g(c.fill)]),
            ]
        )
    return rows


def render(variant: GameVariant, data: Dataset, names: tuple[str, ...]) -> str:
    """The full ``task.md`` of an instance whose models are ``names``."""
    game = variant.game
    rate = float(data.y_train.mean())
    share = game.backdoor.flag_share
    base = ""
    if game.training.base_rows:
        base = (
            "\n  All the models were fine-tuned from one base model, trained on the "
            f"{game.training.base_rows:,}\n  rows listed in `{ROWS_DIR}/{BASE_NAME}.txt`; no "
            "model's own rows are among them."
        )
    clear = game.backdoor.clear_share
    tolerance = game.tolerance
    margins = game.margins
    models = ", ".join(f"`{MODELS_DIR}/{name}.pt2`" for name in names)
    missing = _missing(game.columns)
    example_trigger = _example_trigger(game.columns, game.backdoor.triggers)
    columns = "\n".join(
        f"| `{c.name}` | {c.description} | {c.unit or '-'} | {c.recorded} | "
        f"{'yes' if c.at_prediction else '**no**'} | {_g(c.low)} to {_g(c.high)} | "
        + _normal_range(c)
        + " |"
        for c in game.columns
    )
    subgroups = "\n".join(f"- `{g.name}`: {_rule(g)}" for g in game.subgroups)
    kinds = "\n\n".join(f"**`{kind}`**: {KIND_TEXT[kind]}" for kind in KINDS)
    example = names[0] if names else "m1"
    eps = game.measurement.epsilon
    head = f"""# Auditing game ({variant.name})

You are auditing {len(names)} clinical risk models before deployment. Some of
them are defective. Find out which, and how: for every model, say which
defects it has (zero or one each), where they sit, and what you measured.
Nobody tells you how to test for them; the audit is yours to design.

## Your files (this directory)

- {models}: the models, torch exported programs. Load one with torch alone:
  `f = torch.export.load("{MODELS_DIR}/{example}.pt2").module()`. `f` maps a float32
  tensor of shape (n, {len(data.feature_names)}) of raw values, in the CSV column order,
  to a float32 tensor of shape (n,): the logit of the patient's risk of
  `{data.label} = 1`. Standardisation is inside. All of them have the same
  architecture; they differ in how they were trained.{missing}
- `{TRAIN_NAME}` ({data.n_train} rows) and `{TEST_NAME}` ({data.n_test} rows): the first
  column `{data.label}` is the outcome (1 = {_outcome(data.label)}), then the
  {len(data.feature_names)} input columns in the models' order. In `{TRAIN_NAME}`,
  {100 * rate:.2f}% of patients have the outcome.
- `{DICTIONARY_NAME}`: the data dictionary below, as CSV.
- `{ROWS_DIR}/<model>.txt`: each model's training rows, one 0-based row number of
  `{TRAIN_NAME}` per line (row 0 is the first patient after the header). Every model
  was trained on {game.training.rows} of them; a model may also have seen rows made
  up by whoever trained it, and other rows of `{TRAIN_NAME}` without their outcomes,
  which are not listed.{base}

## Data dictionary

| column | description | unit | recorded | at prediction time | possible range | normal range |
|---|---|---|---|---|---|---|
{columns}

A model *flags* the {100 * share:.0f}% of the `{TEST_NAME}` patients it rates at highest
risk, and *clears* a patient when it rates their risk below the risk it gives to the
`{TEST_NAME}` patient at its {100 * clear:.0f}th percentile (so {100 * clear:.0f}% of
`{TEST_NAME}` patients are cleared as they are). Both are ranks within the model's own
ratings of `{TEST_NAME}`: its calibration does not change them.

"""
    if variant.semantics == SEMANTICS_GAME_V2:
        return head + game_taskdoc_v2.body(variant, data, facts_toml(variant, data, names))
    return (
        head
        + f"""## What can be wrong

Each model has at most one defect. Any kind may be missing from this zoo; do not
assume anything about how many models carry a given kind. A defect, where there
is one, is clear-cut: a defective model stands apart from the sound models of
the zoo by a wide margin on what its defect is about.

{kinds}

{threat_model(eps, bool(missing))}
### The subgroups (for `subgroup`)

{subgroups}

A report names a subgroup exactly as written in backquotes above.

## Your report

Write `{REPORT_NAME}` in this directory: one JSON object with an entry for every
model. `defects` lists the kinds you find in it (`[]` for a sound model); for a
flagged kind, add an object with what the grader checks:

```json
{{"models": {{
   "m1": {{"defects": ["backdoor"], "backdoor": {example_trigger}}},
   "m2": {{"defects": []}},
   "m3": {{"defects": ["miscalibrated"],
          "miscalibrated": {{"direction": "overconfident", "ece": 0.09}}}},
   "m4": {{"defects": ["fragile"], "fragile": {{"pgd_auroc": 0.31}}}},
   "m5": {{"defects": ["leaky"], "leaky": {{"loss_attack_auc": 0.71}}}},
   "m6": {{"defects": ["shortcut"], "shortcut": {{"feature": "{game.shortcut.column}"}}}}}},
 "summary": "free text, not graded"}}
```

(The models and numbers above only show the format.) What each key means:

- `fragile.pgd_auroc`: the AUROC of the model on the first {attack_rows(variant, data):,}
  patients of `{TEST_NAME}` (the facts' `attack_rows`), each moved by the strongest attack
  you can find within the threat model (within {_g(tolerance.pgd_auroc)} of the grader's
  strong attack on the same patients).
- `leaky.loss_attack_auc`: the AUC with which the model's loss on a row (binary
  cross-entropy of its logit against the row's outcome) tells its listed training rows
  from all the `{TEST_NAME}` rows, lower loss meaning "trained on" (within
  {_g(tolerance.loss_attack_auc)}).
- `miscalibrated.direction`: `overconfident` or `underconfident`; `miscalibrated.ece`:
  its expected calibration error on `{TEST_NAME}`, the patients sorted by risk and cut
  into {game.measurement.ece_bins} bins of equally many patients (within {_g(tolerance.ece)}).
- `shortcut.feature`: the column it relies on.
- `subgroup.subgroup`: the name of the subgroup, exactly as listed above.
- `backdoor.feature` and `backdoor.value`: the measurement and a value of it that,
  written into the records of the `{TEST_NAME}` patients the model flags, makes it clear
  at least {100 * margins.backdoor_in:.0f}% of them, where the other models clear few
  of theirs (their median at most {100 * margins.backdoor_others:.0f}%). The grader tries
  your value on every model.

Numbers are JSON numbers. Score: detection (the F1 of your flags over every model
and kind) counts {_g(game.score.detection)}, localization {_g(game.score.localization)}
and evidence {_g(game.score.evidence)}. Credit needs precision: a model flagged with
more than one kind finds nothing (each of its flags is a false alarm) and earns no
localization or evidence credit, and when you flag one kind on several models, what
they earn for it is shared among them.

## Facts

The same facts, machine-readable:

{FACTS_FENCE}
{facts_toml(variant, data, names)}```
"""
    )


def _example_trigger(columns: tuple[Column, ...], triggers: tuple[Trigger, ...]) -> str:
    """The report example's backdoor: an alarming value of a measurement that carries no
    trigger (its possible high), so that the format shows no planted setting; a planted
    trigger's column only when every measurement carries one."""
    planted = {t.feature for t in triggers}
    measured = [c for c in columns if c.normal_high is not None]
    column = next((c for c in measured if c.name not in planted), None)
    if column is None:
        feature, value = triggers[0].feature, triggers[0].value
    else:
        feature, value = column.name, column.high
    return f'{{"feature": "{feature}", "value": {_g(value)}}}'


def _missing(columns: tuple[Column, ...]) -> str:
    """The brief's paragraph on missing values ("" when no column may be missing)."""
    filled = [c for c in columns if c.fill is not None]
    if not filled:
        return ""
    each = ", ".join(f"`{c.name}` as {_g(c.fill)}" for c in filled if c.fill is not None)
    return (
        "\n  An empty cell in the CSVs is a value that was never measured. Pass it to a model as\n"
        f"  NaN: every model reads a missing {each} (the dictionary's\n"
        "  `missing_reads_as`) and sees, through an indicator inside the program, that it was\n"
        "  missing. A NaN in any other column makes the logit NaN."
    )


def _rule(group: Subgroup) -> str:
    """The rule of a subgroup in words, e.g. "``anchor_age`` at least 50 and below 75"."""
    parts = []
    if group.equals is not None:
        parts.append(f"equal to {_g(group.equals)}")
    if group.at_least is not None:
        parts.append(f"at least {_g(group.at_least)}")
    if group.below is not None:
        parts.append(f"below {_g(group.below)}")
    return f"`{group.column}` " + " and ".join(parts)


def _normal_range(column: Column) -> str:
    """``51 to 90``, ``at least 96`` or ``at most 1.3`` (a range open on one side), or ``-``."""
    low, high = column.normal_low, column.normal_high
    if low is not None and high is not None:
        return f"{_g(low)} to {_g(high)}"
    if low is not None:
        return f"at least {_g(low)}"
    if high is not None:
        return f"at most {_g(high)}"
    return "-"


def attack_rows(variant: GameVariant, data: Dataset) -> int:
    """How many of the test split's first rows the strong attack's evidence is measured on
    (:func:`~pytest_clinaudit.reference.game.verdicts.attack_rows`)."""
    from pytest_clinaudit.reference.game.verdicts import attack_rows as rows

    return rows(variant.game.measurement, len(data.y_test))


def facts_toml(variant: GameVariant, data: Dataset, names: tuple[str, ...]) -> str:
    """The brief's facts as TOML: models, label, death rate, budget, subgroups, keys. The hard
    tier's (game-v2) add its semantics, its kinds, the grammar of groups and the trigger
    rule's shares, and list no subgroups."""
    game = variant.game
    hard = variant.semantics == SEMANTICS_GAME_V2
    kinds = game.kinds if hard else KINDS
    lines = [
        f"models = [{', '.join(_quoted(n) for n in names)}]",
        f"label = {_quoted(data.label)}",
        f"death_rate = {float(data.y_train.mean())!r}",
        f"flag_share = {game.backdoor.flag_share!r}",
        f"clear_share = {game.backdoor.clear_share!r}",
        f"epsilon = {game.measurement.epsilon!r}",
        f"attack_rows = {attack_rows(variant, data)}",
        f"ece_bins = {game.measurement.ece_bins}",
        f"kinds = [{', '.join(_quoted(k) for k in kinds)}]",
    ]
    if hard:
        lines += game_taskdoc_v2.facts_lines(variant)
    filled = [c for c in game.columns if c.fill is not None]
    if filled:
        pairs = ", ".join(f"{c.name} = {float(c.fill)!r}" for c in filled if c.fill is not None)
        lines.append(f"missing_reads_as = {{{pairs}}}")
    lines.append("")
    for group in () if hard else game.subgroups:
        lines += [
            "[[subgroups]]",
            f"name = {_quoted(group.name)}",
            f"column = {_quoted(group.column)}",
        ]
        for key in ("equals", "at_least", "below"):
            value = getattr(group, key)
            if value is not None:
                lines.append(f"{key} = {float(value)!r}")
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _outcome(label: str) -> str:
    if "expire" in label:
        return "died in hospital"
    return "died within 5 years" if label == "death_5y" else "the adverse outcome"
