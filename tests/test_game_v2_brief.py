"""The hard tier's brief (SPEC §9): what it says and leaves out, its facts, and that game-v1's
brief did not move by a byte."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
import tomllib
from game_helpers import game_variant

from pytest_clinaudit.adapters import game_taskdoc
from pytest_clinaudit.catalog.games import GameVariant
from pytest_clinaudit.reference.data import Dataset

HARD = "icu-synth-game-hard"
GOLDEN = Path(__file__).parent / "golden" / "icu-synth-game-task.md"
"""The game-v1 brief of ``icu-synth-game`` on a 500/200-row split, as the version before the
hard tier wrote it (commit 7b0fc17), with the loss-attack tolerance of issue 26 (0.012) and
the strong attack's patients named (the first `attack_rows` of test.csv)."""


def _flat(text: str) -> str:
    """``text`` with every run of whitespace one space: what it says, however it is wrapped."""
    return " ".join(text.split())


def _small(variant: GameVariant) -> Dataset:
    return dataclasses.replace(variant.dataset, n_train=500, n_test=200).load(variant.context)


@pytest.fixture(scope="module")
def hard() -> tuple[GameVariant, str]:
    variant = game_variant(HARD)
    return variant, game_taskdoc.render(variant, _small(variant), variant.game.model_names())


def test_the_game_v1_brief_is_unchanged_to_the_byte() -> None:
    variant = game_variant("icu-synth-game")
    text = game_taskdoc.render(variant, _small(variant), variant.game.model_names())
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_the_hard_brief_says_what_each_of_its_kinds_means_and_no_other(
    hard: tuple[GameVariant, str],
) -> None:
    variant, text = hard
    kinds = variant.game.kinds
    for kind in ("fragile", "leaky", "miscalibrated", "shortcut", "subgroup", "backdoor"):
        assert (f"**`{kind}`**" in text) is (kind in kinds), kind
    said = _flat(text)
    assert "serves one group of patients worse than the zoo" in said
    assert "For the patients of one group, small changes to the record" in said
    assert "`fragile.where`: the group" in said
    epsilon = variant.game.measurement.epsilon
    assert f"at most {epsilon:g} training standard deviations" in said
    assert "make it clear patients it would otherwise flag as at risk" in said
    assert "over-confident where decisions are made" in said
    assert "at the top of its risk range" in said
    assert "a kind may be carried by several models" in said
    assert "Each model has at most two defects, each of another kind" in _flat(text)
    assert "max_defects = 2" in text  # the facts say it too


def test_the_hard_brief_gives_no_method_no_list_and_no_attack(
    hard: tuple[GameVariant, str],
) -> None:
    variant, text = hard
    lowered = text.lower()
    for method in (
        "projected",
        "gradient",
        "permutation",
        "shadow model",
        "roc_auc",
        "sweep",
        "deciles",
        "search",
        "brute",
        "```python",
    ):
        assert method not in lowered, method
    assert "### The subgroups" not in text
    for group in variant.game.subgroups:
        assert f"`{group.name}`" not in text, group.name
    # the threat model (a budget) where a fragile region is a kind, never the attack's recipe
    assert ("### the threat model" in lowered) is ("fragile" in variant.game.kinds)
    for recipe in ("steps", "restarts", "pgd", "fgsm"):
        assert recipe not in lowered, recipe
    assert "pgd_auroc" not in text
    assert "loss_attack_auc" not in text


def test_the_hard_brief_states_the_grammar_and_the_trigger_rule(
    hard: tuple[GameVariant, str],
) -> None:
    from pytest_clinaudit.reference.game.groups import OPS

    variant, text = hard
    game = variant.game
    assert game.hard is not None
    low, high = game.hard.coverage
    said = _flat(text)
    assert f"{100 * low:.0f}% to {100 * high:.0f}% of the `test.csv` patients" in said
    assert "one or two conditions" in said
    for op in OPS:
        assert f"`{op}`" in said
    assert "at most one of them outside its normal range" in said
    assert f"at least {100 * game.margins.backdoor_in:.0f}% of them" in said
    assert f"their median at most {100 * game.margins.backdoor_others:.0f}%" in said


def test_the_hard_brief_says_sound_models_differ_and_never_how(
    hard: tuple[GameVariant, str],
) -> None:
    """With decoys, the brief warns that a model apart is not defective for that alone; it
    names no variation, and a tier without decoys says nothing of them."""
    from pytest_clinaudit.reference.game.settings.hard import DECOYS

    variant, text = hard
    warning = "a model that differs from the others is not defective for that alone"
    assert variant.game.hard is not None
    assert variant.game.hard.decoys
    assert warning in _flat(text)
    for decoy in (*DECOYS, "isotonic", "regularis", "interaction rule"):
        assert decoy not in text.lower(), decoy
    hard_table = dataclasses.replace(variant.game.hard, decoys=())
    plain = dataclasses.replace(variant, game=dataclasses.replace(variant.game, hard=hard_table))
    rendered = game_taskdoc.render(plain, _small(variant), variant.game.model_names())
    assert warning not in _flat(rendered)


def test_the_hard_brief_states_how_precision_scales_credit(hard: tuple[GameVariant, str]) -> None:
    """The grading's rules, as the grader applies them (grading/game_checks.py): a hedge
    finds nothing, and a right claim's credit is scaled by the share of right flags."""
    variant, text = hard
    said = _flat(text)
    assert "a model flagged with more kinds than two finds nothing" in said
    assert (
        "each such credit is scaled by the share of your flags of that kind that are on "
        "models carrying it" in said
    )
    tolerance = variant.game.tolerance.top_decile_gap
    assert f"(within {tolerance:g})" in said


def _facts(text: str) -> dict[str, object]:
    block = text[text.index(game_taskdoc.FACTS_FENCE) + len(game_taskdoc.FACTS_FENCE) :]
    return tomllib.loads(block[: block.index("```")])


def test_the_hard_facts_add_the_grammar_and_list_no_subgroups(
    hard: tuple[GameVariant, str],
) -> None:
    from pytest_clinaudit.reference.game.groups import MAX_CONDITIONS, OPS

    variant, text = hard
    game = variant.game
    assert game.hard is not None
    facts = _facts(text)
    assert facts["semantics"] == variant.semantics == "game-v2"
    assert facts["kinds"] == list(game.kinds)
    assert facts["group_coverage"] == list(game.hard.coverage)
    assert facts["group_max_conditions"] == MAX_CONDITIONS
    assert facts["group_ops"] == list(OPS)
    assert facts["flip_at_least"] == game.margins.backdoor_in
    assert facts["others_at_most"] == game.margins.backdoor_others
    assert "subgroups" not in facts
    v1 = game_variant("icu-synth-game")
    v1_facts = _facts(game_taskdoc.render(v1, _small(v1), v1.game.model_names()))
    assert "semantics" not in v1_facts
    assert len(v1_facts["subgroups"]) == len(v1.game.subgroups)


def test_the_hard_briefs_example_is_a_report_the_grader_reads(
    hard: tuple[GameVariant, str],
) -> None:
    """The format's example validates against the hard tier's schema, its group is in the
    grammar and its trigger keeps the rule: the brief and the grader speak one language."""
    from pytest_clinaudit.grading.game_checks import report_schema
    from pytest_clinaudit.grading.schema import validator_for
    from pytest_clinaudit.reference.game.claims import visible_problems
    from pytest_clinaudit.reference.game.groups import parse_group

    variant, text = hard
    example = re.search(r"```json\n(.*?)```", text, re.S)
    assert example is not None
    report = json.loads(example.group(1))
    names = tuple(report["models"])
    errors = list(validator_for(report_schema(variant, names)).iter_errors(report))
    assert errors == []
    flagged = {kind for entry in report["models"].values() for kind in entry["defects"]}
    assert flagged == set(variant.game.kinds)
    for entry in report["models"].values():
        if "subgroup" in entry:
            parse_group(entry["subgroup"], variant.game.columns)
        if "backdoor" in entry:
            pairs = [(p["column"], p["value"]) for p in entry["backdoor"]["trigger"]]
            assert len(pairs) == 2
            assert visible_problems(pairs, variant.game.columns) == []
