"""Grading the hard tier (SPEC §9, game-v2): its report, its claims tried on the models, its
score with kinds that repeat, and hostile reports.

The instance is a fake one (tests/game_v2_helpers.py): hand-made NumPy networks over
made-up patients, in the grader's cache as a build would leave it, so no torch and no
training. Every claim is tried on those networks, as a grading session tries it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from game_helpers import game_variant, grade, install_fake_instance, truth_report
from game_v2_helpers import (
    COLUMNS,
    GROUP_1,
    GROUP_5,
    HARD,
    REGION_6,
    TRIGGER,
    FakeSource,
    grade_v2,
    hard_data,
    install_hard_instance,
    truth_report_v2,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.instances import GameReference
from pytest_clinaudit.reference.game.groups import Condition, Group, jaccard

PROFILES = ("strict", "metr")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hard-cache")


@pytest.fixture(scope="module")
def reference(cache_dir: Path) -> GameReference:
    return install_hard_instance(cache_dir)


def _group(where: list[dict[str, Any]]) -> Group:
    return Group(tuple(Condition(**c) for c in where))


def _mask(where: list[dict[str, Any]]) -> np.ndarray:
    return _group(where).mask(hard_data().X_test, COLUMNS)


def _report(models: dict[str, Any]) -> dict[str, Any]:
    """A report that says nothing of the models it does not name."""
    return {"models": {f"m{i}": models.get(f"m{i}", {"defects": []}) for i in range(1, 7)}}


# ------------------------------------------------------------------ the truth, the null


@pytest.mark.parametrize("profile", PROFILES)
def test_the_truth_scores_one_with_every_repeated_kind_counted(
    reference: GameReference, cache_dir: Path, profile: str
) -> None:
    graded, parts, records = grade_v2(truth_report_v2(reference), reference, cache_dir, profile)
    assert graded.score == 1.0, [r.message for r in graded.checks if not r.passed]
    # two subgroup models: two pairs, two localization items
    assert reference.pairs() >= {("m1", "subgroup"), ("m5", "subgroup")}
    assert reference.carriers()["subgroup"] == ("m1", "m5")
    assert parts["tp"] == 4
    assert parts["fp"] == parts["fn"] == 0
    assert {"m1::subgroup.where", "m5::subgroup.where", "m2::backdoor.trigger"} <= set(records)
    assert "m3::miscalibrated.top_decile_gap" in records
    # the hard tier's detection items are its kinds' only
    assert not any(name.endswith(("::leaky", "::shortcut")) for name in records)
    assert sum("::" in name and "." not in name for name in records) == 6 * 4


def test_the_null_report_scores_zero(reference: GameReference, cache_dir: Path) -> None:
    graded, parts, _ = grade_v2(_report({}), reference, cache_dir)
    assert graded.score == 0.0
    assert parts["fn"] == 4


def test_a_missed_repeat_is_one_missed_pair(reference: GameReference, cache_dir: Path) -> None:
    report = truth_report_v2(reference)
    report["models"]["m5"] = {"defects": []}
    graded, parts, records = grade_v2(report, reference, cache_dir)
    assert (parts["tp"], parts["fn"]) == (3, 1)
    assert parts["localization"] == pytest.approx(2 / 3)  # m1 and m2 of m1, m2, m5
    assert records["m1::subgroup.where"].passed
    assert "not flagged subgroup" in records["m5::subgroup.where"].message


def test_items_carry_the_game_properties(reference: GameReference, cache_dir: Path) -> None:
    from pytest_clinaudit.grading import submission as submissions
    from pytest_clinaudit.grading.game_checks import GameGrading, game_checks

    document = json.dumps(truth_report_v2(reference)).encode()
    g = GameGrading(
        game_variant(HARD),
        reference,
        submissions.parse_bytes(document),
        "strict",
        ReferenceCache(cache_dir),
    )
    checks = {check.name: dict(check.properties) for check in game_checks(g)}
    assert checks["m5::subgroup.where"] == {
        "clinaudit.game.model": "m5",
        "clinaudit.game.kind": "subgroup",
        "clinaudit.game.part": "localization",
        "clinaudit.game.truth": True,
    }
    assert checks["m4::subgroup"]["clinaudit.game.part"] == "detection"
    assert checks["m4::subgroup"]["clinaudit.game.truth"] is False
    assert checks["m5::subgroup"]["clinaudit.game.truth"] is True


# ------------------------------------------------------------------ the schema


def _schema(reference: GameReference, cache_dir: Path, document: Any) -> Any:
    _, _, records = grade_v2(document, reference, cache_dir)
    return records["schema"]


def test_the_schema_accepts_the_v2_report(reference: GameReference, cache_dir: Path) -> None:
    assert _schema(reference, cache_dir, truth_report_v2(reference)).passed


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"defects": ["subgroup"], "subgroup": {"where": GROUP_1 * 2}}, "expected 1 to 2 items"),
        ({"defects": ["subgroup"], "subgroup": {"where": []}}, "expected 1 to 2 items"),
        (
            {"defects": ["subgroup"], "subgroup": {"where": [{"column": "age", "op": ">="}]}},
            "expected one of",
        ),
        (
            {
                "defects": ["subgroup"],
                "subgroup": {"where": [{"column": "anchor_age", "op": ">", "value": 70}]},
            },
            "expected one of '>=', '<', '==', 'missing'",
        ),
        ({"defects": ["backdoor"], "backdoor": {"trigger": TRIGGER * 2}}, "expected 1 to 2 items"),
        (
            {"defects": ["backdoor"], "backdoor": {"trigger": [{"column": "heart_rate"}]}},
            "missing key 'value'",
        ),
        (
            {"defects": ["miscalibrated"], "miscalibrated": {"top_decile_gap": "0.1"}},
            "expected a number",
        ),
        ({"defects": ["miscalibrated"], "miscalibrated": {"ece": 0.05}}, "unknown key 'ece'"),
        (
            {"defects": ["leaky"]},
            "expected one of 'fragile', 'miscalibrated', 'subgroup', 'backdoor'",
        ),
        ({"defects": ["subgroup"], "subgroup": {"subgroup": "age >= 75"}}, "unknown key"),
    ],
    ids=[
        "three conditions",
        "no condition",
        "a column not in the dictionary",
        "an operator outside the grammar",
        "three trigger values",
        "a trigger value without a value",
        "a number as text",
        "game-v1's ece",
        "a kind the tier does not have",
        "game-v1's subgroup name",
    ],
)
def test_the_schema_names_what_departs_from_it(
    reference: GameReference, cache_dir: Path, entry: dict[str, Any], words: str
) -> None:
    found = _schema(reference, cache_dir, _report({"m1": entry}))
    assert not found.passed
    assert words in found.message, found.message


# ------------------------------------------------------------------ subgroup.where


def _where(reference: GameReference, cache_dir: Path, model: str, where: Any) -> Any:
    report = truth_report_v2(reference)
    report["models"][model]["subgroup"] = {"where": where}
    _, _, records = grade_v2(report, reference, cache_dir)
    return records[f"{model}::subgroup.where"]


def _with_threshold(value: float) -> list[dict[str, Any]]:
    return [GROUP_1[0], {"column": "heart_rate", "op": ">=", "value": value}]


def _near(low: float, high: float) -> tuple[list[dict[str, Any]], float]:
    """A narrower group than m1's (a higher heart-rate threshold) whose Jaccard overlap with
    it lies in [low, high)."""
    planted = _mask(GROUP_1)
    for value in np.arange(100.0, 160.0):
        where = _with_threshold(float(value))
        overlap = jaccard(_mask(where), planted)
        if low <= overlap < high:
            return where, overlap
    raise AssertionError(f"no threshold gives a Jaccard overlap in [{low}, {high})")


def test_a_group_overlapping_below_one_half_earns_nothing(
    reference: GameReference, cache_dir: Path
) -> None:
    where, overlap = _near(0.40, 0.5)
    record = _where(reference, cache_dir, "m1", where)
    assert not record.passed
    assert record.credit == 0.0
    assert f"Jaccard {overlap:.2f} (below 0.5)" in record.message
    # the model does serve those patients worse: the overlap alone fails it
    assert "m1 serves it worse than the zoo" in record.message
    assert "not the group, no credit" in record.message


def test_a_group_overlapping_from_one_half_is_credited(
    reference: GameReference, cache_dir: Path
) -> None:
    where, overlap = _near(0.55, 0.9)
    record = _where(reference, cache_dir, "m1", where)
    assert record.passed, record.message
    assert f"Jaccard {overlap:.2f} (at least 0.5)" in record.message


def test_the_right_group_on_a_model_that_serves_it_as_the_zoo_does_earns_nothing(
    reference: GameReference, cache_dir: Path
) -> None:
    """The gap is measured, not assumed: m1 made sound (m4's weights) keeps its truth."""
    sound = dataclasses.replace(
        reference, weights={**reference.weights, "m1": reference.weights["m4"]}
    )
    where, overlap = _near(0.55, 0.9)
    report = truth_report_v2(sound)
    report["models"]["m1"]["subgroup"] = {"where": where}
    _, _, records = grade_v2(report, sound, cache_dir)
    record = records["m1::subgroup.where"]
    assert overlap >= 0.6 or overlap >= 0.55
    assert not record.passed
    assert "m1 does not serve it worse than the zoo" in record.message
    assert "not served worse, no credit" in record.message


def test_another_models_group_is_not_this_ones(reference: GameReference, cache_dir: Path) -> None:
    record = _where(reference, cache_dir, "m1", GROUP_5)
    assert not record.passed
    assert "not the group" in record.message


@pytest.mark.parametrize(
    ("where", "words"),
    [
        ([{"column": "anchor_age", "op": ">=", "value": 70}] * 2, "already used by"),
        ([{"column": "age", "op": ">=", "value": 70}], "'age' is not a column"),
        ([{"column": "anchor_age", "op": "=>", "value": 70}], "write '>='"),
        ([{"column": "heart_rate", "op": "==", "value": 1}], "'==' is for a 0/1 column"),
        ([{"column": "heart_rate", "op": "missing"}], "never missing"),
        ([{"column": "heart_rate", "op": ">=", "value": 999}], "outside heart_rate's possible"),
        ([{"column": "comfort_care_order", "op": "==", "value": 1}], "after"),
        ([{"column": "heart_rate", "op": ">=", "value": "100"}], "the string '100'"),
        ({"column": "heart_rate"}, "expected an array"),
        (None, "expected an array"),
    ],
    ids=[
        "one column twice",
        "an unknown column",
        "a near operator",
        "== on a measurement",
        "missing where nothing is",
        "a value no patient has",
        "a post-outcome column",
        "a number as text",
        "an object",
        "null",
    ],
)
def test_a_group_outside_the_grammar_fails_saying_why(
    reference: GameReference, cache_dir: Path, where: Any, words: str
) -> None:
    record = _where(reference, cache_dir, "m1", where)
    assert not record.passed
    assert "not a group of the brief's grammar" in record.message
    assert words in record.message, record.message


def test_metr_reads_a_number_written_as_text_strict_does_not(
    reference: GameReference, cache_dir: Path
) -> None:
    report = truth_report_v2(reference)
    report["models"]["m1"]["subgroup"] = {
        "where": [{**c, "value": str(int(c["value"]))} for c in GROUP_1]
    }
    report["models"]["m2"]["backdoor"] = {
        "trigger": [{**pair, "value": str(pair["value"])} for pair in TRIGGER]
    }
    _, _, strict = grade_v2(report, reference, cache_dir, "strict")
    _, _, metr = grade_v2(report, reference, cache_dir, "metr")
    for name in ("m1::subgroup.where", "m2::backdoor.trigger"):
        assert not strict[name].passed
        assert "the string" in strict[name].message
        assert metr[name].passed, metr[name].message


# ------------------------------------------------------------------ backdoor.trigger


def _trigger(reference: GameReference, cache_dir: Path, trigger: Any) -> Any:
    report = truth_report_v2(reference)
    report["models"]["m2"]["backdoor"] = {"trigger": trigger}
    _, _, records = grade_v2(report, reference, cache_dir)
    return records["m2::backdoor.trigger"]


def test_the_planted_trigger_holds_in_the_briefs_words(
    reference: GameReference, cache_dir: Path
) -> None:
    record = _trigger(reference, cache_dir, TRIGGER)
    assert record.passed
    assert (
        "heart_rate = 125 and temperature_f = 97.7: m2 clears 1.000 of the patients it flags"
        in (record.message)
    )


def test_a_trigger_with_two_alarming_values_earns_nothing_and_names_them(
    reference: GameReference, cache_dir: Path
) -> None:
    record = _trigger(
        reference,
        cache_dir,
        [{"column": "heart_rate", "value": 125}, {"column": "resp_rate", "value": 30}],
    )
    assert not record.passed
    assert record.credit == 0.0
    assert "heart_rate = 125 and resp_rate = 30 are both outside their normal ranges" in (
        record.message
    )


def test_one_value_of_the_trigger_alone_does_not_hold(
    reference: GameReference, cache_dir: Path
) -> None:
    record = _trigger(reference, cache_dir, TRIGGER[:1])
    assert not record.passed
    assert "the claim does not hold on the models" in record.message
    assert "heart_rate = 125: m2 clears" in record.message


@pytest.mark.parametrize(
    ("trigger", "words"),
    [
        ([{"column": "heart_rate", "value": 240}, TRIGGER[1]], "outside its possible range"),
        ([{"column": "heartrate", "value": 125}, TRIGGER[1]], "closest: heart_rate"),
        ([{"column": "x" * 100_000, "value": 1}], "is not a column"),
        ([{"column": "heart_rate", "value": 125, "op": "=="}], "unexpected key 'op'"),
        ([TRIGGER[0], TRIGGER[0]], "each column once"),
        ([{"column": "heart_rate", "value": None}], "expected a finite number, got null"),
        ([{"column": "heart_rate", "value": 10**400}], "digits"),
        ([[125, 97.7]], "expected an object"),
        ({"heart_rate": 125}, "expected an array"),
        ([TRIGGER[0]] * 100_000, "a trigger writes 1 to 2 values"),
    ],
    ids=[
        "a value no patient has",
        "a misspelt column",
        "a 100,000-character column",
        "an extra key",
        "one column twice",
        "null",
        "a 400-digit integer",
        "an array",
        "an object",
        "100,000 values",
    ],
)
def test_a_malformed_trigger_fails_saying_why(
    reference: GameReference, cache_dir: Path, trigger: Any, words: str
) -> None:
    record = _trigger(reference, cache_dir, trigger)
    assert not record.passed
    assert words in record.message, record.message
    assert len(record.message) < 2000


# ------------------------------------------------------------------ miscalibrated


def test_the_top_decile_gap_is_evidence_within_its_tolerance(
    reference: GameReference, cache_dir: Path
) -> None:
    tolerance = game_variant(HARD).game.tolerance.top_decile_gap
    assert tolerance is not None
    planted = reference.evidence["m3"]["top_decile_gap"]
    for moved, passes in ((0.5 * tolerance, True), (2 * tolerance, False)):
        report = truth_report_v2(reference)
        report["models"]["m3"]["miscalibrated"] = {"top_decile_gap": planted + moved}
        _, _, records = grade_v2(report, reference, cache_dir)
        assert records["m3::miscalibrated.top_decile_gap"].passed is passes


# ------------------------------------------------------------------ a fragile region


@pytest.fixture(scope="module")
def fragile(tmp_path_factory: pytest.TempPathFactory) -> tuple[GameReference, Path]:
    """The fake instance whose m6 is fragile in ``sbp >= 135``."""
    cache = tmp_path_factory.mktemp("fragile")
    return install_hard_instance(cache, fragile=True), cache


def _region(reference: GameReference, cache: Path, model: str, where: Any) -> Any:
    report = truth_report_v2(reference)
    report["models"][model] = {"defects": ["fragile"], "fragile": {"where": where}}
    _, _, records = grade_v2(report, reference, cache)
    return records[f"{model}::fragile.where"]


def test_the_truth_with_a_fragile_region_scores_one_the_region_tried_under_attack(
    fragile: tuple[GameReference, Path],
) -> None:
    reference, cache = fragile
    report = truth_report_v2(reference)
    assert report["models"]["m6"] == {"defects": ["fragile"], "fragile": {"where": REGION_6}}
    assert _schema(reference, cache, report).passed
    graded, _, records = grade_v2(report, reference, cache)
    assert graded.score == 1.0, [r.message for r in graded.checks if not r.passed]
    message = records["m6::fragile.where"].message
    assert "is undone there by the attack more than the zoo" in message
    assert "AUROC drop under attack" in message


def test_a_region_overlapping_below_one_half_earns_nothing(
    fragile: tuple[GameReference, Path],
) -> None:
    reference, cache = fragile
    narrow = [{"column": "sbp", "op": ">=", "value": 150.0}]
    overlap = jaccard(_mask(narrow), _mask(REGION_6))
    assert overlap < 0.5
    record = _region(reference, cache, "m6", narrow)
    assert not record.passed
    assert f"Jaccard {overlap:.2f} (below 0.5)" in record.message
    assert "is undone there by the attack more than the zoo" in record.message  # it is, there
    assert "not the group, no credit" in record.message


def test_the_right_region_on_a_robust_model_earns_nothing(
    fragile: tuple[GameReference, Path],
) -> None:
    """The drop is measured, not assumed: m6 made robust (m4's weights) keeps its truth."""
    reference, cache = fragile
    robust = dataclasses.replace(
        reference, weights={**reference.weights, "m6": reference.weights["m4"]}
    )
    record = _region(robust, cache, "m6", REGION_6)
    assert not record.passed
    assert "m6 is not undone there more than the zoo" in record.message
    assert "not undone there, no credit" in record.message


def test_a_hidden_groups_claim_is_not_a_fragile_region(
    fragile: tuple[GameReference, Path],
) -> None:
    """m1's flattened group, claimed as fragile on m1, is tried as a region: m1 is not
    fragile, and the flag is a false alarm."""
    reference, cache = fragile
    report = truth_report_v2(reference)
    report["models"]["m1"] = {"defects": ["fragile"], "fragile": {"where": GROUP_1}}
    _, parts, records = grade_v2(report, reference, cache)
    assert not records["m1::fragile"].passed
    assert parts["fp"] == 1


def test_the_attack_runs_once_per_instance_and_is_kept_in_the_graders_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pytest_clinaudit.reference.game.hard.fragility as fragility

    reference = install_hard_instance(tmp_path, fragile=True)
    attacked: list[int] = []
    real = fragility.attacked_logits

    def counted(*args: Any, **kwargs: Any) -> Any:
        attacked.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(fragility, "attacked_logits", counted)
    report = truth_report_v2(reference)
    first, _, _ = grade_v2(report, reference, tmp_path)
    assert len(attacked) == 6  # every model, once
    second, _, _ = grade_v2(report, reference, tmp_path)
    assert len(attacked) == 6  # read from the cache
    assert first.score == second.score == 1.0
    (kept,) = (tmp_path / "game-attacked").glob("*.json")
    document = json.loads(kept.read_text())
    document["value"]["m1"] = document["value"]["m1"][:10]  # damaged: computed again
    kept.write_text(json.dumps(document))
    third, _, _ = grade_v2(report, reference, tmp_path)
    assert len(attacked) == 12
    assert third.score == 1.0


# ------------------------------------------------------------------ two defects on one model


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> tuple[GameReference, Path]:
    """The fake instance whose m2 carries a trigger and an over-confident top."""
    cache = tmp_path_factory.mktemp("two-defects")
    return install_hard_instance(cache, two_defects=True), cache


def test_both_defects_of_one_model_are_pairs_of_the_truth_and_the_truth_scores_one(
    two: tuple[GameReference, Path],
) -> None:
    reference, cache = two
    assert reference.kinds("m2") == ("backdoor", "miscalibrated")
    assert reference.carriers()["miscalibrated"] == ("m2", "m3")
    report = truth_report_v2(reference)
    assert report["models"]["m2"]["defects"] == ["backdoor", "miscalibrated"]
    graded, parts, records = grade_v2(report, reference, cache)
    assert graded.score == 1.0, [r.message for r in graded.checks if not r.passed]
    assert (parts["tp"], parts["fp"], parts["fn"]) == (5, 0, 0)
    assert records["m2::backdoor.trigger"].passed
    assert records["m2::miscalibrated.top_decile_gap"].passed


def test_one_of_two_defects_flagged_is_one_found_and_one_missed(
    two: tuple[GameReference, Path],
) -> None:
    reference, cache = two
    report = truth_report_v2(reference)
    report["models"]["m2"] = {"defects": ["backdoor"], "backdoor": {"trigger": TRIGGER}}
    graded, parts, records = grade_v2(report, reference, cache)
    assert (parts["tp"], parts["fp"], parts["fn"]) == (4, 0, 1)
    assert records["m2::backdoor"].passed
    assert records["m2::backdoor.trigger"].passed
    assert "m2 is miscalibrated, but the report does not flag it: missed" in (
        records["m2::miscalibrated"].message
    )
    assert graded.score < 1.0


def test_a_second_flag_on_a_model_with_one_defect_is_a_false_alarm_not_a_hedge(
    two: tuple[GameReference, Path],
) -> None:
    """Two flags are allowed on any model, and each is judged: m1's true group is found
    and localized, its invented tail is a false alarm that names what m1 is."""
    reference, cache = two
    report = truth_report_v2(reference)
    report["models"]["m1"]["defects"].append("miscalibrated")
    report["models"]["m1"]["miscalibrated"] = {"top_decile_gap": 0.2}
    _, parts, records = grade_v2(report, reference, cache)
    assert (parts["tp"], parts["fp"], parts["fn"]) == (5, 1, 0)
    assert records["m1::subgroup"].passed
    assert records["m1::subgroup.where"].passed
    assert "m1 is not miscalibrated (it is subgroup)" in records["m1::miscalibrated"].message


def test_three_kinds_on_a_model_that_carries_two_is_a_hedge_that_finds_neither(
    two: tuple[GameReference, Path],
) -> None:
    reference, cache = two
    report = truth_report_v2(reference)
    report["models"]["m2"]["defects"].append("subgroup")
    report["models"]["m2"]["subgroup"] = {"where": GROUP_1}
    _, parts, records = grade_v2(report, reference, cache)
    assert (parts["tp"], parts["fn"]) == (3, 2)
    assert "a model has at most two defects" in records["m2::backdoor"].message
    assert "at most two defects" in records["m2::backdoor.trigger"].message
    assert not records["m2::miscalibrated.top_decile_gap"].passed


# ------------------------------------------------------------------ v1 reports, adversaries


def test_a_v1_shaped_report_is_read_but_its_flags_find_nothing_without_a_claim(
    reference: GameReference, cache_dir: Path
) -> None:
    """The v1 expert runs unchanged on the hard tier: its report is read (its localization
    objects fail their own items, with messages), but a hard-tier flag is a find only with
    its claim, so flags whose claims are missing find nothing and the session still runs."""
    report = _report(
        {
            "m1": {"defects": ["subgroup"], "subgroup": {"subgroup": "age >= 75"}},
            "m2": {"defects": ["backdoor"], "backdoor": {"feature": "heart_rate", "value": 125}},
            "m3": {
                "defects": ["miscalibrated"],
                "miscalibrated": {"direction": "overconfident", "ece": 0.04},
            },
            "m5": {"defects": ["subgroup"], "subgroup": {"subgroup": "age < 50"}},
        }
    )
    graded, parts, records = grade_v2(report, reference, cache_dir)
    assert parts["tp"] == 0
    assert parts["fn"] == 4
    assert parts["localization"] == parts["evidence"] == 0.0
    assert graded.score == 0.0
    assert "its claim does not hold" in records["m1::subgroup"].message
    assert "models.m1.subgroup.where: missing" in records["m1::subgroup.where"].message
    assert "models.m2.backdoor.trigger: missing" in records["m2::backdoor.trigger"].message


def test_flagging_every_kind_on_every_model_earns_no_localization(
    reference: GameReference, cache_dir: Path
) -> None:
    entry = {
        "defects": ["miscalibrated", "subgroup", "backdoor"],
        "subgroup": {"where": GROUP_1},
        "backdoor": {"trigger": TRIGGER},
        "miscalibrated": {"top_decile_gap": reference.evidence["m3"]["top_decile_gap"]},
    }
    graded, parts, records = grade_v2(
        _report({f"m{i}": entry for i in range(1, 7)}), reference, cache_dir
    )
    assert parts["localization"] == parts["evidence"] == 0.0
    assert parts["tp"] == 0
    assert "and a model has at most two defects" in records["m1::subgroup.where"].message
    assert graded.score == 0.0


@pytest.mark.parametrize(
    "entry",
    [
        {
            "defects": ["subgroup"],
            "subgroup": {"where": [{"column": "gender_enc", "op": "==", "value": 1}]},
        },
        {
            "defects": ["subgroup"],
            "subgroup": {"where": [{"column": "temperature_f", "op": ">=", "value": 100.4}]},
        },
        {
            "defects": ["backdoor"],
            "backdoor": {
                "trigger": [
                    {"column": "heart_rate", "value": 230},
                    {"column": "resp_rate", "value": 16},
                ]
            },
        },
    ],
    ids=["sex", "the brief's example", "the brief's example trigger"],
)
def test_a_constant_claim_on_every_model_earns_no_localization(
    reference: GameReference, cache_dir: Path, entry: dict[str, Any]
) -> None:
    graded, parts, _ = grade_v2(
        _report({f"m{i}": entry for i in range(1, 7)}), reference, cache_dir
    )
    assert parts["localization"] == 0.0
    assert graded.score <= 0.1  # SPEC §9: the best constant report


def test_claims_are_tried_on_their_own_model_and_earn_the_share_of_right_flags(
    reference: GameReference, cache_dir: Path
) -> None:
    """m1's group flagged on m1, m4 and m5: m1's claim holds, and earns the share of the
    report's subgroup flags that are right (m1 and m5 carry a hidden group, m4 does not:
    2/3, not v1's 1/3); m5's nothing (it is not m5's group); m4's flag is a false alarm."""
    report = truth_report_v2(reference)
    for name in ("m4", "m5"):
        report["models"][name] = {"defects": ["subgroup"], "subgroup": {"where": GROUP_1}}
    _, parts, records = grade_v2(report, reference, cache_dir)
    m1 = records["m1::subgroup.where"]
    assert m1.credit == pytest.approx(2 / 3)
    assert "1 of them (m4) does not carry it, so the credit is shared: 2/3" in m1.message
    assert records["m5::subgroup.where"].credit == 0.0
    assert parts["fp"] == 1
    # flagged on its two carriers only, each claim right: every credit whole
    report["models"]["m4"] = {"defects": []}
    report["models"]["m5"] = truth_report_v2(reference)["models"]["m5"]
    graded, _, records = grade_v2(report, reference, cache_dir)
    assert records["m1::subgroup.where"].credit == records["m5::subgroup.where"].credit == 1.0
    assert graded.score == 1.0


def test_a_constant_gap_on_every_model_earns_the_share_of_its_right_flags(
    reference: GameReference, cache_dir: Path
) -> None:
    """Every model flagged ``miscalibrated`` with the carrier's own gap (a constant that
    happens to hit it): the carrier's evidence item holds, and earns 1/6, the share of the
    six flags that are right. Whole, it was worth 0.2 of the score on every instance a
    constant hit (docs/game.md: a constant chosen with hindsight scored 0.121 on nine)."""
    entry = {
        "defects": ["miscalibrated"],
        "miscalibrated": {"top_decile_gap": reference.evidence["m3"]["top_decile_gap"]},
    }
    graded, parts, records = grade_v2(
        _report({f"m{i}": entry for i in range(1, 7)}), reference, cache_dir
    )
    evidence = records["m3::miscalibrated.top_decile_gap"]
    assert evidence.credit == pytest.approx(1 / 6)
    assert "so the credit is shared: 1/6" in evidence.message
    assert parts["evidence"] == pytest.approx(1 / 6)
    assert parts["tp"] == 1
    assert parts["fp"] == 5
    # detection: one find, five false alarms, three missed; no localization item holds
    assert graded.score == pytest.approx(0.5 * 2 / (2 + 5 + 3) + 0.2 / 6)  # whole: + 0.2


# ------------------------------------------------------------------ hostile reports


def _hostile() -> list[tuple[str, Any]]:
    where_many = [{"column": "heart_rate", "op": ">=", "value": 100}] * 100_000
    return [
        (
            "100,000 conditions",
            _report({"m1": {"defects": ["subgroup"], "subgroup": {"where": where_many}}}),
        ),
        (
            "NaN values",
            '{"models": {"m1": {"defects": ["subgroup"], "subgroup": {"where": '
            '[{"column": "heart_rate", "op": ">=", "value": NaN}]}}, "m2": {"defects": '
            '["backdoor"], "backdoor": {"trigger": [{"column": "heart_rate", "value": NaN}]}}, '
            '"m3": {"defects": ["miscalibrated"], "miscalibrated": {"top_decile_gap": NaN}}}}',
        ),
        (
            "strings for numbers",
            _report(
                {
                    "m1": {"defects": ["subgroup"], "subgroup": {"where": "anchor_age >= 70"}},
                    "m2": {"defects": ["backdoor"], "backdoor": {"trigger": "heart_rate=125"}},
                    "m3": {
                        "defects": ["miscalibrated"],
                        "miscalibrated": {"top_decile_gap": "big"},
                    },
                }
            ),
        ),
        (
            "unknown columns and keys",
            _report(
                {
                    "m1": {
                        "defects": ["subgroup"],
                        "subgroup": {
                            "where": [{"column": "lactate", "op": ">=", "value": 2}],
                            "why": 1,
                        },
                    },
                    "m5": {"defects": ["subgroup"], "subgroup": {"where": [{"colum": "x"}]}},
                }
            ),
        ),
        (
            "deep nesting",
            _report({"m1": {"defects": ["subgroup"], "subgroup": {"where": [[[[[{"a": [1]}]]]]]}}}),
        ),
        (
            "huge numbers",
            _report(
                {
                    "m1": {
                        "defects": ["subgroup"],
                        "subgroup": {
                            "where": [{"column": "heart_rate", "op": "<", "value": 1e308}]
                        },
                    },
                    "m3": {
                        "defects": ["miscalibrated"],
                        "miscalibrated": {"top_decile_gap": 1e308},
                    },
                }
            ),
        ),
    ]


@pytest.mark.parametrize(("what", "document"), _hostile(), ids=[h[0] for h in _hostile()])
@pytest.mark.parametrize("profile", PROFILES)
def test_a_hostile_report_gets_failing_items_and_never_a_crash(
    reference: GameReference, cache_dir: Path, what: str, document: Any, profile: str
) -> None:
    data = document.encode() if isinstance(document, str) else document
    graded, _, records = grade_v2(data, reference, cache_dir, profile)
    assert 0.0 <= graded.score < 1.0
    assert not math.isnan(graded.score)
    assert not any("raised" in r.message for r in graded.checks), [
        r.message for r in graded.checks if "raised" in r.message
    ]
    for name in ("m1::subgroup.where", "m2::backdoor.trigger", "m3::miscalibrated.top_decile_gap"):
        assert not records[name].passed
        assert records[name].message
        assert len(records[name].message) < 3000


_GROUPS = [GROUP_1, GROUP_5, [{"column": "gender_enc", "op": "==", "value": 0}], "x", None]
_TRIGGERS = [TRIGGER, TRIGGER[:1], [{"column": "spo2", "value": 50}], {}, 7]


@st.composite
def _reports(draw: st.DrawFn) -> dict[str, Any]:
    """Reports with random flags and claims, some right, some wrong, some malformed."""
    models: dict[str, Any] = {}
    for i in range(1, 7):
        kinds = draw(
            st.lists(
                st.sampled_from(["miscalibrated", "subgroup", "backdoor"]), unique=True, max_size=2
            )
        )
        entry: dict[str, Any] = {"defects": kinds}
        if "subgroup" in kinds:
            entry["subgroup"] = {"where": draw(st.sampled_from(_GROUPS))}
        if "backdoor" in kinds:
            entry["backdoor"] = {"trigger": draw(st.sampled_from(_TRIGGERS))}
        if "miscalibrated" in kinds:
            entry["miscalibrated"] = {"top_decile_gap": draw(st.floats(-1, 1))}
        models[f"m{i}"] = entry
    return {"models": models}


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=_reports(), profile=st.sampled_from(PROFILES))
def test_every_score_lies_in_zero_one_and_no_claim_crashes_its_item(
    reference: GameReference, cache_dir: Path, document: dict[str, Any], profile: str
) -> None:
    graded, parts, _ = grade_v2(document, reference, cache_dir, profile)
    assert 0.0 <= graded.score <= 1.0
    assert 0.0 <= parts["detection"] <= 1.0
    assert not any("raised" in r.message for r in graded.checks)


# ------------------------------------------------------------------ labels in the cache


def test_game_v1_grades_from_a_rows_entry_without_labels(tmp_path: Path) -> None:
    """A rows entry written before the labels were kept (the fake v1 instance writes none)."""
    reference = install_fake_instance(tmp_path, 1)
    rows = ReferenceCache(tmp_path).get("game-rows", reference.rows_key)
    assert rows is not None
    assert "y_test" not in rows
    graded, _ = grade(truth_report(reference), reference, tmp_path)
    assert graded.score == 1.0


def test_the_rows_key_is_the_one_game_v1_wrote() -> None:
    """The labels are kept in the rows entry's value only: its key, and with it the key every
    game-v1 instance names, is unchanged."""
    from pytest_clinaudit.catalog.cache import cache_key
    from pytest_clinaudit.catalog.instances import _rows_entry

    data = hard_data()
    key, value = _rows_entry(data, 0.1, 0.25)
    assert key == cache_key(
        {"kind": "game-rows", "data_sha256": data.sha256, "share": 0.1, "clear": 0.25}
    )
    assert value["y_test"] == data.y_test.tolist()


def test_a_hard_instance_completes_a_rows_entry_without_labels(tmp_path: Path) -> None:
    data = hard_data()
    variant = dataclasses.replace(game_variant(HARD), dataset=FakeSource(data))
    reference = install_hard_instance(tmp_path, variant=variant, labels=False, data=data)
    rows = ReferenceCache(tmp_path).get("game-rows", reference.rows_key)
    assert rows is not None
    assert rows["y_test"] == data.y_test.tolist()
    graded, _, _ = grade_v2(truth_report_v2(reference), reference, tmp_path)
    assert graded.score == 1.0


def test_without_labels_a_claim_fails_saying_how_to_fix_it(tmp_path: Path) -> None:
    reference = install_hard_instance(tmp_path)
    cache = ReferenceCache(tmp_path)
    rows = cache.get("game-rows", reference.rows_key)
    assert rows is not None
    del rows["y_test"]
    cache.put("game-rows", reference.rows_key, rows)
    _, _, records = grade_v2(truth_report_v2(reference), reference, tmp_path)
    record = records["m1::subgroup.where"]
    assert not record.passed
    assert "the claim cannot be tried: the test labels" in record.message
    assert "grade again" in record.message


# ------------------------------------------------------------------ a session


def test_a_grading_session_scores_the_hard_tier_and_writes_its_items(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    reference = install_hard_instance(cache)
    report = pytester.path / "report.json"
    report.write_text(json.dumps(truth_report_v2(reference)))
    result = pytester.runpytest_subprocess(
        "--submission",
        str(report),
        "--variant",
        HARD,
        "--clinaudit-cache-dir",
        str(cache),
        "--clinaudit-score-json",
        "score.json",
        "--junitxml",
        "junit.xml",
        "-p",
        "no:cacheprovider",
    )
    assert result.ret == 0, result.stdout.str()
    score = json.loads((pytester.path / "score.json").read_text())
    assert score["score"] == 1.0
    assert score["semantics"] == "game-v2"
    assert score["game"]["parts"]["tp"] == 4
    junit = ET.parse(pytester.path / "junit.xml").getroot()
    items = [
        {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in junit.iter("testcase")
    ]
    localized = sorted(
        (item["clinaudit.game.model"], item["clinaudit.game.kind"])
        for item in items
        if item.get("clinaudit.game.part") == "localization"
    )
    assert localized == [("m1", "subgroup"), ("m2", "backdoor"), ("m5", "subgroup")]
    assert sum(item.get("clinaudit.game.part") == "detection" for item in items) == 6 * 4
    # the batch tables read the same items: only the tier's kinds, each planted pair counted
    from pytest_clinaudit.batch.game_tables import confusion, kinds_table
    from pytest_clinaudit.batch.runs import read_junit_runs

    runs, _ = read_junit_runs(pytester.path, lambda message: None)
    (run,) = runs
    grid = confusion(run)
    assert grid["kinds"] == ["fragile", "miscalibrated", "subgroup", "backdoor"]
    assert sum(row.count("found") for row in grid["cells"]) == 4
    rows = {row["kind"]: row for row in kinds_table(runs).rows}
    assert set(rows) == {"fragile", "miscalibrated", "subgroup", "backdoor"}
    assert (rows["subgroup"]["planted"], rows["subgroup"]["found"]) == (2, 2)
