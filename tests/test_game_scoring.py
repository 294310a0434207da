"""The game's score (SPEC §8.5) from its checks, without pytest: properties and hostile reports.

The instance is a fake one (tests/game_helpers.py): the real variant and a
drawn plan, hand-made networks, made-up evidence. The checks run as a grading
session runs them (``checks.run_check``) and are scored by ``game_scoring``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from game_helpers import (
    game_variant,
    grade,
    install_fake_instance,
    null_report,
    renamed,
    truth_report,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.instances import GameReference
from pytest_clinaudit.grading.game_scoring import part_weights
from pytest_clinaudit.reference.game.settings import KINDS, ScoreWeights

SEEDS = (1, 2, 3)
PROFILES = ("strict", "metr")
FEW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("game-cache")
    for seed in SEEDS:
        install_fake_instance(directory, seed)
    return directory


def _reference(cache_dir: Path, seed: int) -> GameReference:
    from pytest_clinaudit.catalog.instances import get_game_reference

    return get_game_reference(game_variant(), seed, cache=ReferenceCache(cache_dir))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("profile", PROFILES)
def test_the_truth_scores_one_and_the_null_report_zero(
    cache_dir: Path, seed: int, profile: str
) -> None:
    reference = _reference(cache_dir, seed)
    truth, parts = grade(truth_report(reference), reference, cache_dir, profile)
    assert truth.score == 1.0, [c.message for c in truth.checks if not c.passed]
    assert parts["fp"] == parts["fn"] == 0
    null, _ = grade(null_report(reference), reference, cache_dir, profile)
    assert null.score == 0.0


def test_a_wrong_trigger_value_costs_the_localization_but_not_the_detection(
    cache_dir: Path,
) -> None:
    reference = next(
        r for r in (_reference(cache_dir, s) for s in SEEDS) if "backdoor" in r.carriers()
    )
    grade_right, parts_right = grade(truth_report(reference), reference, cache_dir)
    # 150 bpm is below the fake trigger's hinge at 210: the claim does not hold.
    grade_wrong, parts_wrong = grade(truth_report(reference, trigger=150.0), reference, cache_dir)
    assert parts_wrong["detection"] == parts_right["detection"] == 1.0
    assert parts_wrong["localization"] < parts_right["localization"]
    (carrier,) = reference.carriers()["backdoor"]
    failed = {c.name: c for c in grade_wrong.checks if not c.passed}
    assert f"{carrier}::backdoor.trigger" in failed
    assert "does not hold" in failed[f"{carrier}::backdoor.trigger"].message


@pytest.mark.parametrize("value", [240.0, 1e9, 1e308, -5.0])
def test_a_trigger_value_no_patient_can_have_earns_nothing(cache_dir: Path, value: float) -> None:
    """SPEC §8.7: the networks hold inputs within the training range, so any value past the
    edge acts as the trigger; the brief asks for a value within the possible range."""
    reference = next(
        r for r in (_reference(cache_dir, s) for s in SEEDS) if "backdoor" in r.carriers()
    )
    (carrier,) = reference.carriers()["backdoor"]
    got, _ = grade(truth_report(reference, trigger=value), reference, cache_dir)
    (record,) = [c for c in got.checks if c.name == f"{carrier}::backdoor.trigger"]
    assert not record.passed
    assert record.credit == 0.0
    assert "outside its possible range (20 to 230)" in record.message


def test_a_trigger_on_another_column_is_tried_on_the_models(cache_dir: Path) -> None:
    reference = next(
        r for r in (_reference(cache_dir, s) for s in SEEDS) if "backdoor" in r.carriers()
    )
    (carrier,) = reference.carriers()["backdoor"]
    report = truth_report(reference)
    report["models"][carrier]["backdoor"] = {"feature": "resp_rate", "value": 40.0}
    got, _ = grade(report, reference, cache_dir)
    (record,) = [c for c in got.checks if c.name == f"{carrier}::backdoor.trigger"]
    assert not record.passed
    # tried: every model's share at the setting is reported, in the brief's words
    assert "resp_rate = 40: " in record.message
    assert f"{carrier} clears 0.000 of the patients it flags" in record.message
    assert "the other models' median" in record.message


def test_a_part_without_planted_defects_gives_its_weight_to_detection() -> None:
    score = ScoreWeights(0.5, 0.3, 0.2)
    assert part_weights(score, [("m1", "fragile")]) == {
        "detection": 0.8,
        "localization": 0.0,
        "evidence": 0.2,
    }
    assert part_weights(score, [("m1", "shortcut")]) == {
        "detection": 0.7,
        "localization": 0.3,
        "evidence": 0.0,
    }


def test_an_evidence_number_out_of_tolerance_earns_no_evidence_credit(cache_dir: Path) -> None:
    reference = _reference(cache_dir, 1)
    report = truth_report(reference)
    for entry in report["models"].values():
        for kind in ("fragile", "leaky", "miscalibrated"):
            if kind in entry:
                key = {"fragile": "pgd_auroc", "leaky": "loss_attack_auc"}.get(kind, "ece")
                value = entry[kind][key]  # moved by 0.2, more than any tolerance, within [0, 1]
                entry[kind][key] = value + 0.2 if value <= 0.8 else value - 0.2
    graded, parts = grade(report, reference, cache_dir)
    assert parts["evidence"] == 0.0
    assert graded.score == pytest.approx(
        parts["weights"]["detection"] + parts["weights"]["localization"]
    )


# ------------------------------------------------------------------ properties


@FEW
@given(seed=st.sampled_from(SEEDS), profile=st.sampled_from(PROFILES), data=st.data())
def test_the_score_is_invariant_under_a_consistent_renaming_of_the_models(
    cache_dir: Path, seed: int, profile: str, data: st.DataObject
) -> None:
    reference = _reference(cache_dir, seed)
    names = list(reference.truth)
    order = data.draw(st.permutations(names))
    mapping = dict(zip(names, order, strict=True))
    report = data.draw(reports(reference))
    moved = GameReference(
        **{
            **reference.__dict__,
            **{
                field: {mapping[k]: v for k, v in getattr(reference, field).items()}
                for field in ("truth", "evidence", "rows", "weights", "programs")
            },
        }
    )
    original, _ = grade(report, reference, cache_dir, profile)
    after, _ = grade(renamed(report, mapping), moved, cache_dir, profile)
    assert after.score == pytest.approx(original.score, abs=1e-12)


@st.composite
def reports(draw: st.DrawFn, reference: GameReference) -> dict[str, Any]:
    """Reports with random flags and details, some right, some wrong."""
    models: dict[str, Any] = {}
    for name, truth in reference.truth.items():
        kinds = draw(st.lists(st.sampled_from(KINDS), unique=True, max_size=2))
        if truth["kind"] is not None and draw(st.booleans()):
            kinds = [truth["kind"], *[k for k in kinds if k != truth["kind"]]]
        entry: dict[str, Any] = {"defects": kinds}
        for kind in kinds:
            entry[kind] = {
                "direction": draw(st.sampled_from(["overconfident", "underconfident"])),
                "ece": draw(st.floats(0, 1)),
                "pgd_auroc": draw(st.floats(0, 1)),
                "loss_attack_auc": draw(st.floats(0, 1)),
                "feature": draw(st.sampled_from(["heart_rate", "comfort_care_order", "sbp"])),
                "subgroup": draw(st.sampled_from(["male", "age >= 75", "female"])),
                "value": draw(st.sampled_from([220.0, 150.0])),
            }
        models[name] = entry
    return {"models": models}


@FEW
@given(seed=st.sampled_from(SEEDS), profile=st.sampled_from(PROFILES), data=st.data())
def test_every_score_lies_in_zero_one_and_no_report_beats_the_truth(
    cache_dir: Path, seed: int, profile: str, data: st.DataObject
) -> None:
    reference = _reference(cache_dir, seed)
    graded, parts = grade(data.draw(reports(reference)), reference, cache_dir, profile)
    assert 0.0 <= graded.score <= 1.0
    assert 0.0 <= parts["detection"] <= 1.0
    assert not math.isnan(graded.score)


# -------------------------------------------------------------- hostile reports


def _many_models() -> dict[str, Any]:
    return {"models": {f"m{i}": {"defects": ["leaky"]} for i in range(10_000)}}


HOSTILE: list[tuple[str, Any]] = [
    ("unknown model names", {"models": {"m99": {"defects": ["leaky"]}, "x": {"defects": []}}}),
    ("unknown kinds", {"models": {"m1": {"defects": ["cursed", "leaky"]}}}),
    ("defects as a string", {"models": {"m1": {"defects": "leaky"}}}),
    ("models as an array", {"models": [{"defects": ["leaky"]}]}),
    ("a model that is a number", {"models": {"m1": 7}}),
    (
        "huge numbers",
        {"models": {"m1": {"defects": ["leaky"], "leaky": {"loss_attack_auc": 1e308}}}},
    ),
    ("10,000 models", _many_models()),
    ("no models key", {"summary": "nothing"}),
    ("null everywhere", {"models": {"m1": None, "m2": {"defects": None}}}),
    (
        "a trigger value as text",
        {
            "models": {
                "m1": {
                    "defects": ["backdoor"],
                    "backdoor": {"feature": "heart_rate", "value": "220"},
                }
            }
        },
    ),
]


@pytest.mark.parametrize(("what", "document"), HOSTILE, ids=[h[0] for h in HOSTILE])
@pytest.mark.parametrize("profile", PROFILES)
def test_a_hostile_report_gets_failing_checks_and_never_a_crash(
    cache_dir: Path, what: str, document: Any, profile: str
) -> None:
    reference = _reference(cache_dir, 1)
    graded, _ = grade(document, reference, cache_dir, profile)
    assert 0.0 <= graded.score < 1.0
    assert not any("internal error" in c.message or "raised" in c.message for c in graded.checks)
    schema = next(c for c in graded.checks if c.name == "schema")
    assert not schema.passed


@pytest.mark.parametrize(
    "data",
    [b"", b"\xff\xfe", b"[1, 2]", b"{}", b'{"models": {"m1": {"defects": ["leaky"]}', b"{" * 600],
    ids=["empty", "not utf-8", "an array", "an empty object", "cut short", "too deep"],
)
def test_an_unreadable_report_scores_zero(cache_dir: Path, data: bytes) -> None:
    reference = _reference(cache_dir, 1)
    graded, parts = grade(data, reference, cache_dir)
    assert graded.score == 0.0
    assert parts["fp"] == 0  # an unreadable report flags nothing


def test_a_duplicated_model_key_is_a_hedge_under_strict_and_the_last_copy_under_metr(
    cache_dir: Path,
) -> None:
    reference = _reference(cache_dir, 1)
    name, kind = next((n, e["kind"]) for n, e in reference.truth.items() if e["kind"])
    other = next(k for k in KINDS if k != kind)
    text = (
        f'{{"models": {{"{name}": {{"defects": ["{other}"]}}, '
        f'"{name}": {{"defects": ["{kind}"]}}}}}}'
    ).encode()
    strict, strict_parts = grade(text, reference, cache_dir, "strict")
    metr, metr_parts = grade(text, reference, cache_dir, "metr")
    # strict: the union of both copies' flags, so the hedge adds a false alarm.
    assert strict_parts["fp"] == metr_parts["fp"] + 1
    assert strict.score < metr.score
