"""The game's parts that need no training: the variant file, the plan, the cohort's options,
claims, measurements, the brief and the agents' report format."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from game_helpers import GAME, edited_variant, game_variant, secret_for
from hypothesis import given, settings
from hypothesis import strategies as st
from nn_helpers import NEEDS_SKSURV

from pytest_clinaudit.catalog.games import GameVariant
from pytest_clinaudit.catalog.variants import VariantError, default_catalog, load_variant
from pytest_clinaudit.grading.game_checks import report_schema
from pytest_clinaudit.reference.data import LoadContext
from pytest_clinaudit.reference.data.icu import ICUSynthSource, generate_icu_cohort
from pytest_clinaudit.reference.game.claims import (
    Setting,
    Thresholds,
    alarming,
    check_claim,
    check_trigger,
    flip_share,
    flip_shares,
    visible_problems,
)
from pytest_clinaudit.reference.game.draw import base_rows, draw_plan, member_rows
from pytest_clinaudit.reference.game.measure import equal_mass_ece
from pytest_clinaudit.reference.game.settings import KINDS

# ------------------------------------------------------------------ the variant


def test_the_game_is_in_the_catalog_but_not_an_audit_task_variant() -> None:
    catalog = default_catalog()
    assert isinstance(catalog.find(GAME), GameVariant)
    assert catalog.find("icu_synth_game").name == GAME
    assert GAME not in {v.name for v in catalog}  # iterating gives audit-task variants
    with pytest.raises(VariantError, match=r"is an auditing game .*`clinaudit build"):
        catalog.get(GAME)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("models = 6", "models = 6\ncolour = 3", "game: unknown key 'colour'"),
        ("base_rows = 8000", "base_rows = 'many'", "game.training.base_rows: expected an integer"),
        ("fragile_in = 0.45", "fragile_in = 0.2", "margins.fragile_out must lie below"),
        ("overconfident = [1.6, 8.0]", "overconfident = [0.9, 8.0]", "overconfident must be"),
        ("underconfident = [0.1, 0.5]", "underconfident = [0.1, 1.5]", "underconfident must be"),
        ("overconfident = [1.6, 8.0]", "overconfident = [1.6]", "expected a range [low, high]"),
        ("strength = [1.0, 1.0]", "strength = [0.0, 1.0]", "fragile.strength must be"),
        ("target = [0.655, 0.775]", "target = [0.655, 1.2]", "leaky.target must be"),
        ("target = [0.02, 0.24]", "target = [0.3, 0.24]", "fragile.target must be"),
        ("probe_every = 10", "", "fragile.target needs probe_every"),
        (
            "overconfident_ece = [0.066, 0.104]",
            "",
            "overconfident_ece and underconfident_ece are given together",
        ),
        (
            "overconfident_ece = [0.066, 0.104]",
            "overconfident_ece = [0.066, 0.104]\noverconfident_share = 1.0",
            "miscalibrated.overconfident_share must be in (0, 1), got 1.0",
        ),
        ('column = "comfort_care_order"', 'column = "heart_rate"', "must be recorded after"),
        (
            "strength = [0.2, 1.0]",
            "strength = [0.0, 1.0]",
            "decoy.strength must be",
        ),
        (
            "jitter = 1.0                  # patients",
            "jitter = -1.0  # patients",
            "decoy.jitter must be at least 0",
        ),
        ("patients = 2000", "patients = 0", "decoy.patients must be at least 1, got 0"),
        (
            'retrain = "ambiguous"',
            'retrain = "sometimes"',
            "game.retrain: expected one of 'zoo', 'ambiguous'",
        ),
        ('retrain = "ambiguous"', 'retrain = "ambiguous"\nalone = 0', "alone must be at least 1"),
        ("clean = [1, 2]", "clean = [6]", "each count must lie in [1, models)"),
        ("detection = 0.5", "detection = 0.6", "game.score: must be non-negative and sum to 1"),
        ('{ feature = "spo2", value = 55.0 }', '{ feature = "lactate", value = 9.0 }', "lactate"),
        ('column = "gender_enc"\nequals = 1.0', 'column = "sex"\nequals = 1.0', "'sex'"),
        ("models = 6", 'models = 6\nkinds = ["leaky", "toxic"]', "distinct kinds of the catalogue"),
        ("models = 6", 'models = 6\nkinds = ["leaky", "leaky"]', "distinct kinds of the catalogue"),
        ("models = 6", 'models = 6\nkinds = ["leaky", "shortcut"]', "the game plants 2"),
        ("models = 6", "models = 6\nkinds = [3]", "game.kinds: expected an array of strings"),
        ('rate = "own"', 'rate = "test"', "game.subgroup.rate: expected one of 'own', 'split'"),
        (
            "spread = 0.0                  # exact copies, labelled 0 (no copies_logit)",
            "spread = 'wide'",
            "game.backdoor.spread: expected a number",
        ),
    ],
)
def test_a_contradictory_game_file_is_refused_naming_the_setting(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(VariantError) as raised:
        load_variant(edited_variant(tmp_path, old, new))
    assert message in str(raised.value)
    assert "game.toml" in str(raised.value)


# ------------------------------------------------------------------ the plan


@settings(max_examples=200, deadline=None)
@given(secret=st.binary(min_size=16, max_size=16).map(bytes.hex))
def test_a_plan_has_one_or_two_clean_models_and_distinct_kinds(secret: str) -> None:
    plan = draw_plan(game_variant().game, 1, secret)
    kinds = [m.kind for m in plan.models if m.kind is not None]
    assert len(plan.models) == 6
    assert 6 - len(kinds) in (1, 2)
    assert len(set(kinds)) == len(kinds)
    assert [m.name for m in plan.models] == [f"m{i}" for i in range(1, 7)]
    for m in plan.models:
        assert m.factor is None  # solved at build time for the drawn ECE
        assert (m.target is not None) == (m.kind in ("fragile", "leaky", "miscalibrated"))
        assert (m.subgroup is not None) == (m.kind == "subgroup")
        assert (m.trigger is not None) == (m.kind == "backdoor")


def test_over_many_secrets_every_kind_is_sometimes_absent_and_sometimes_planted() -> None:
    plans = [draw_plan(game_variant().game, 1, secret_for(seed)) for seed in range(1, 60)]
    for kind in KINDS:
        present = [p.carrier(kind) is not None for p in plans]
        assert any(present)
        assert not all(present)
    game = game_variant().game
    assert draw_plan(game, 7, secret_for(7)) == draw_plan(game, 7, secret_for(7))


def test_a_subgroup_marked_not_planted_is_listed_and_never_drawn() -> None:
    game = game_variant("flchain-game")
    listed = {g.name: g.drawable for g in game.game.subgroups}
    assert listed == {
        "age 50-64": True,
        "age 65-79": True,
        "age >= 80": True,
        "female": False,
        "male": False,
    }
    carriers = [draw_plan(game.game, 1, secret_for(s)).carrier("subgroup") for s in range(1, 120)]
    drawn = {c.subgroup.name for c in carriers if c is not None and c.subgroup is not None}
    assert drawn == {"age 50-64", "age 65-79", "age >= 80"}
    # A report may still name any of them.
    model = report_schema(game, ("m1",))["properties"]["models"]["properties"]["m1"]
    named = model["properties"]["subgroup"]["properties"]["subgroup"]["enum"]
    assert sorted(named) == sorted(listed)


def test_a_game_whose_subgroups_are_all_marked_not_planted_is_refused(tmp_path: Path) -> None:
    text = game_variant().path.read_text(encoding="utf-8")
    path = tmp_path / "game.toml"
    path.write_text(
        text.replace("[[game.subgroups]]\n", "[[game.subgroups]]\nplanted = false\n"),
        encoding="utf-8",
    )
    with pytest.raises(VariantError, match="no subgroup may be planted"):
        load_variant(path)


def test_a_game_plants_only_the_kinds_its_cohort_can_carry(tmp_path: Path) -> None:
    carried = ["fragile", "miscalibrated", "shortcut", "subgroup", "backdoor"]
    edited = edited_variant(
        tmp_path, "models = 6", f"models = 6\nkinds = {carried}".replace("'", '"')
    )
    game = load_variant(edited)
    assert isinstance(game, GameVariant)
    assert game.game.kinds == tuple(carried)
    plans = [draw_plan(game.game, 1, secret_for(seed)) for seed in range(1, 60)]
    assert not any(p.carrier("leaky") for p in plans)
    for kind in carried:
        assert any(p.carrier(kind) for p in plans)
    # Without the key, every kind of the catalogue is drawn, and the plans are the ones the
    # key would draw if it listed the whole catalogue.
    assert game_variant().game.kinds == KINDS


def test_a_models_training_and_calibration_rows_are_disjoint_and_sized() -> None:
    rows, calibration = member_rows(40_000, 500, 4_000, seed=3)
    assert len(rows) == 500
    assert len(calibration) == 4_000
    assert not set(rows.tolist()) & set(calibration.tolist())
    with pytest.raises(ValueError, match="need more than the 100 rows"):
        member_rows(100, 500, 4_000, seed=3)


def test_no_models_rows_are_the_shared_bases() -> None:
    base = base_rows(40_000, 8_000, seed=5)
    assert len(base) == len(set(base.tolist())) == 8_000
    for model in range(6):
        rows, calibration = member_rows(40_000, 500, 4_000, seed=model, exclude=base)
        assert not set(base.tolist()) & (set(rows.tolist()) | set(calibration.tolist()))
    with pytest.raises(ValueError, match="the 4 rows of the training split left"):
        member_rows(10, 3, 3, seed=0, exclude=np.arange(6))


# ------------------------------------------------------------------ the cohort


def test_the_game_options_leave_the_extract_shaped_cohort_and_its_key_unchanged() -> None:
    plain = generate_icu_cohort(seed=5, n_train=3_000, n_test=700)
    both = generate_icu_cohort(
        seed=5, n_train=3_000, n_test=700, comfort_care_order=True, raw_units=True
    )
    np.testing.assert_array_equal(both.dataset.X_train[:, :8], plain.raw_train)
    np.testing.assert_array_equal(both.dataset.X_test[:, :8], plain.raw_test)
    np.testing.assert_array_equal(both.dataset.y_train, plain.dataset.y_train)
    zscored = generate_icu_cohort(seed=5, n_train=3_000, n_test=700, comfort_care_order=True)
    np.testing.assert_array_equal(zscored.dataset.X_train[:, :8], plain.dataset.X_train)
    source = ICUSynthSource("hospital_expire_flag", 42, 57_839, 12_395)
    assert set(source.fingerprint(LoadContext())) == {
        "source",
        "generator_version",
        "label",
        "seed",
        "n_train",
        "n_test",
    }


def test_the_comfort_care_order_follows_the_outcome() -> None:
    cohort = generate_icu_cohort(
        seed=11, n_train=20_000, n_test=1_000, comfort_care_order=True, raw_units=True
    )
    data = cohort.dataset
    assert data.feature_names[-1] == "comfort_care_order"
    order, died = data.X_train[:, -1], data.y_train
    assert set(np.unique(order).tolist()) == {0.0, 1.0}
    assert 0.03 < order.mean() < 0.10
    assert died[order == 1].mean() > 0.6
    assert died[order == 0].mean() < 0.1


def test_the_game_variant_names_the_columns_of_its_data_in_order() -> None:
    variant = game_variant()
    data = dataclasses.replace(variant.dataset, n_train=500, n_test=200).load(variant.context)
    assert data.feature_names == variant.game.column_names


# ------------------------------------------------------------------ claims


def _line(bias: float, weight: float, column: int) -> Any:
    return lambda X: bias + weight * np.asarray(X)[:, column]


def test_a_flip_share_counts_the_flagged_rows_a_setting_clears() -> None:
    X = np.array([[0.0], [1.0], [2.0], [3.0]])
    thresholds = Thresholds(flag_share=0.5, clear_share=0.25)
    # Logits -1, 0, 1, 2: the top half, rows 2 and 3, is flagged; the first quartile is
    # -0.25, below which a patient is cleared.
    logits = _line(-1.0, 1.0, 0)
    assert flip_share(logits, X, 0, 0.5, thresholds=thresholds) == 1.0  # -0.5 < -0.25
    assert flip_share(logits, X, 0, 1.5, thresholds=thresholds) == 0.0  # 0.5 >= -0.25
    # Ranks, not risks: a shifted or scaled model (miscalibrated) flags and clears the same.
    for shifted in (_line(-9.0, 1.0, 0), _line(-4.0, 4.0, 0)):
        assert flip_share(shifted, X, 0, 0.5, thresholds=thresholds) == 1.0
    # A model that ranks nobody above anybody flags nobody.
    assert flip_share(_line(3.0, 0.0, 0), X, 0, 0.5, thresholds=thresholds) == 0.0


def test_a_claim_holds_only_if_the_other_models_mostly_keep_flagging() -> None:
    X = np.linspace(0, 10, 50)[:, None]
    thresholds = Thresholds(flag_share=0.5, clear_share=0.25)
    zoo = {
        "m1": lambda X: np.where(np.asarray(X)[:, 0] > 9, -5.0, np.asarray(X)[:, 0] - 2),
        "m2": _line(-2.0, 1.0, 0),
        "m3": _line(-2.0, 1.0, 0),
    }
    kept = check_claim(
        zoo,
        X,
        ("x",),
        model="m1",
        feature="x",
        value=9.5,
        thresholds=thresholds,
        flip_at_least=0.9,
        others_at_most=0.3,
    )
    assert kept.holds
    everyone = check_claim(
        zoo,
        X,
        ("x",),
        model="m1",
        feature="x",
        value=0.0,
        thresholds=thresholds,
        flip_at_least=0.9,
        others_at_most=0.3,
    )
    assert everyone.flip == 1.0
    assert not everyone.holds  # every model clears at x = 0: it singles nobody out


def _ridge(X: Any) -> Any:
    """Risk column 2, less 6 on a ridge where column 0 is near 5 and column 1 near 3 (each
    within 1): a two-value trigger, which neither value alone pulls the risk down by much."""
    X = np.asarray(X)
    near_a = np.clip(1 - np.abs(X[:, 0] - 5.0), 0, None)
    near_b = np.clip(1 - np.abs(X[:, 1] - 3.0), 0, None)
    return X[:, 2] - 6.0 * near_a * near_b


def _ridge_rows() -> Any:
    return np.random.default_rng(0).uniform(0, 10, size=(2_000, 3))


def test_a_two_value_trigger_clears_where_neither_value_alone_does() -> None:
    X = _ridge_rows()
    thresholds = Thresholds(flag_share=0.2, clear_share=0.5)
    # The flagged (risk about 8 to 10) fall to 2 to 4 at the ridge, below the median (about
    # 5). One value alone leaves 6 times the other's nearness: only the flagged patients
    # whose other value already lies within about 0.5 of the ridge (about 10%) are cleared.
    both, a_only, b_only = flip_shares(
        _ridge, X, [Setting(((0, 5.0), (1, 3.0))), (0, 5.0), (1, 3.0)], thresholds=thresholds
    )
    assert both == 1.0
    assert a_only <= 0.3
    assert b_only <= 0.3
    # A pair is a one-column setting, the same as its Setting.
    assert flip_share(_ridge, X, 0, 5.0, thresholds=thresholds) == a_only
    assert flip_shares(_ridge, X, [Setting(((0, 5.0),))], thresholds=thresholds) == [a_only]
    # The rows given are not moved.
    assert np.array_equal(X, _ridge_rows())


def test_a_two_value_claim_is_tried_on_the_zoo_with_both_values_written_at_once() -> None:
    X = _ridge_rows()
    thresholds = Thresholds(flag_share=0.2, clear_share=0.5)
    zoo = {"m1": lambda X: np.asarray(X)[:, 2], "m2": _ridge, "m3": lambda X: np.asarray(X)[:, 2]}
    columns = ("a", "b", "risk")
    margins = {"thresholds": thresholds, "flip_at_least": 0.9, "others_at_most": 0.3}
    claim = check_trigger(zoo, X, columns, model="m2", setting=[("a", 5), ("b", 3)], **margins)
    assert claim.holds
    assert claim.shares == {"m1": 0.0, "m2": 1.0, "m3": 0.0}
    assert claim.setting == (("a", 5.0), ("b", 3.0))
    assert claim.describe().startswith("a = 5 and b = 3: m2 clears 1.000")
    reversed_ = check_trigger(zoo, X, columns, model="m2", setting=[("b", 3), ("a", 5)], **margins)
    assert reversed_.shares == claim.shares
    for feature, value in (("a", 5.0), ("b", 3.0)):
        alone = check_claim(zoo, X, columns, model="m2", feature=feature, value=value, **margins)
        assert not alone.holds
        assert alone.setting == ((feature, value),)
    # Off the ridge, both values together clear nobody.
    off = check_trigger(zoo, X, columns, model="m2", setting=[("a", 8), ("b", 3)], **margins)
    assert off.flip == 0.0


@pytest.mark.parametrize("pairs", [(), ((0, 1.0), (1, 2.0), (2, 3.0)), ((0, 1.0), (0, 2.0))])
def test_a_setting_writes_one_or_two_distinct_columns(pairs: Any) -> None:
    with pytest.raises(ValueError, match="a setting writes 1 to 2 distinct columns"):
        Setting(pairs)


@pytest.mark.parametrize(
    ("setting", "problem"),
    [
        ([("heart_rate", 125.0), ("temperature_f", 97.7)], None),  # one alarming value
        ([("heart_rate", 90.0), ("anchor_age", 91.0)], None),  # none: 90 is still normal
        ([("heart_rate", 220.0)], None),  # a v1 trigger: one value
        ([("heart_rate", 125.0), ("spo2", 80.0)], "heart_rate = 125 and spo2 = 80 are both"),
        ([("heart_rate", 240.0), ("spo2", 97.0)], "heart_rate = 240 is outside its possible"),
        ([("heart_rate", float("nan"))], "heart_rate = nan is outside its possible range"),
        ([("pulse", 80.0), ("spo2", 97.0)], "'pulse' is not a column of the data dictionary"),
        ([("spo2", 97.0), ("spo2", 99.0)], "a trigger sets each column once"),
        ([], "a trigger sets 1 to 2 columns, got 0"),
        ([("sbp", 120.0), ("dbp", 80.0), ("spo2", 97.0)], "a trigger sets 1 to 2 columns, got 3"),
    ],
)
def test_a_visible_trigger_has_at_most_one_alarming_value_within_the_possible_ranges(
    setting: list[tuple[str, float]], problem: str | None
) -> None:
    problems = visible_problems(setting, game_variant().game.columns)
    if problem is None:
        assert problems == []
    else:
        assert len(problems) == 1
        assert problem in problems[0]


def test_a_value_is_alarming_outside_the_normal_range_only() -> None:
    columns = {c.name: c for c in game_variant().game.columns}
    assert [alarming(columns["heart_rate"], v) for v in (50, 51, 90, 91)] == [
        True,
        False,
        False,
        True,
    ]
    assert not alarming(columns["spo2"], 100.0)  # a normal range open above
    assert not alarming(columns["anchor_age"], 91.0)  # no normal range


# ------------------------------------------------------------------ measurements


def _literal_ece(p: list[float], y: list[int], bins: int) -> float:
    order = sorted(range(len(p)), key=lambda i: (p[i], i))
    size, extra = divmod(len(p), bins)
    total, start = 0.0, 0
    for b in range(bins):
        n = size + (1 if b < extra else 0)
        part = order[start : start + n]
        start += n
        if part:
            mean_p = sum(p[i] for i in part) / n
            mean_y = sum(y[i] for i in part) / n
            total += n / len(p) * abs(mean_y - mean_p)
    return total


@settings(max_examples=100, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.floats(0, 1, allow_nan=False), st.integers(0, 1)), min_size=1, max_size=80
    ),
    bins=st.integers(1, 20),
)
def test_the_equal_mass_ece_equals_a_literal_transcription(
    data: list[tuple[float, int]], bins: int
) -> None:
    p, y = [d[0] for d in data], [d[1] for d in data]
    assert equal_mass_ece(np.array(p), np.array(y), bins=bins) == pytest.approx(
        _literal_ece(p, y, bins), abs=1e-12
    )


def test_a_perfectly_calibrated_model_has_a_small_ece_and_a_distorted_one_a_large() -> None:
    rng = np.random.RandomState(0)
    z = rng.normal(-2.0, 1.0, 20_000)
    y = (rng.random_sample(len(z)) < 1 / (1 + np.exp(-z))).astype(int)
    calibrated = equal_mass_ece(1 / (1 + np.exp(-z)), y, bins=15)
    overconfident = equal_mass_ece(1 / (1 + np.exp(-4 * z)), y, bins=15)
    assert calibrated < 0.015
    assert overconfident > 0.06


# ------------------------------------------------------------------ the brief


def test_the_brief_describes_every_kind_and_gives_no_method() -> None:
    from pytest_clinaudit.adapters import game_taskdoc

    variant = game_variant()
    data = dataclasses.replace(variant.dataset, n_train=500, n_test=200).load(variant.context)
    text = game_taskdoc.render(variant, data, variant.game.model_names())
    for kind in KINDS:
        assert f"**`{kind}`**" in text
    for column in variant.game.column_names:
        assert f"`{column}`" in text
    for group in variant.game.subgroups:
        assert f"`{group.name}`" in text
    lowered = text.lower()
    # The report key `pgd_auroc` (SPEC §8.4) names an attack; nothing else names a method.
    for method in ("projected", "gradient", "permutation", "shadow model", "roc_auc", "sweep"):
        assert method not in lowered, method
    facts = game_taskdoc.facts_toml(variant, data, variant.game.model_names())
    assert "epsilon = 0.05" in facts
    # A normal range open on one side reads as such, and the base's rows are named.
    assert "| at least 96 |" in text  # spo2: nothing above 96 is abnormal
    assert "| 51 to 90 |" in text  # heart_rate
    assert "`training_rows/base.txt`" in text


@pytest.mark.parametrize("name", [GAME, pytest.param("flchain-game", marks=NEEDS_SKSURV)])
def test_the_briefs_report_example_shows_no_planted_trigger(name: str) -> None:
    """The format's example backdoor is an alarming value of a measurement that no trigger
    is planted on: an example must not hand an agent a setting to try first."""
    from pytest_clinaudit.adapters import game_taskdoc

    variant = default_catalog().find(name)
    assert isinstance(variant, GameVariant)
    data = variant.dataset.load(variant.context)
    text = game_taskdoc.render(variant, data, variant.game.model_names())
    example = text[text.index("## Your report") :]
    example = example[: example.index("(The models and numbers above")]
    for trigger in variant.game.backdoor.triggers:
        assert f'"feature": "{trigger.feature}"' not in example
    assert '"backdoor": {"feature": ' in example


# ------------------------------------------------------------------ training sets


def _rows(n: int = 400, seed: int = 0) -> tuple[Any, Any, Any]:
    """Random rows in the ICU game's columns, a 0/1 gender column among them, and their
    scale; deaths three times as common from age 75."""
    from pytest_clinaudit.reference.game.training import Scale

    game = game_variant().game
    columns = game.column_names
    rng = np.random.RandomState(seed)
    X = rng.normal(size=(n, len(columns))) * 10 + 50
    X[:, columns.index("anchor_age")] = rng.uniform(18, 90, n)
    X[:, columns.index("gender_enc")] = rng.randint(0, 2, n)
    X[:, columns.index("comfort_care_order")] = rng.randint(0, 2, n)
    old = X[:, columns.index("anchor_age")] >= 75
    y = (rng.rand(n) < np.where(old, 0.45, 0.15)).astype(np.int64)
    scale = Scale(X.mean(0), X.std(0), X.min(0), X.max(0), (X.min(0), X.max(0)))
    return X, y, scale


def _planted(kind: str, **choices: Any) -> Any:
    from pytest_clinaudit.reference.game.draw import Planted

    return Planted("m1", kind, **choices)


def test_a_subgroup_is_flattened_to_its_own_rows_rate_or_the_splits() -> None:
    from pytest_clinaudit.reference.game.training import training_set

    game = game_variant().game
    X, y, scale = _rows()
    own = np.arange(100)  # the model's rows: the first hundred of the "split"
    groups = {g.name: g for g in game.subgroups}
    oldest = float(X[:, game.column_names.index("anchor_age")].max())
    for name, interval in (("age >= 75", (75.0, oldest)), ("female", None)):
        group = groups[name]
        planted = _planted("subgroup", subgroup=group)
        inside = group.mask(X, game.column_names)
        for rate, expected in (("own", y[own][inside[own]].mean()), ("split", y[inside].mean())):
            settings = dataclasses.replace(
                game, subgroup=dataclasses.replace(game.subgroup, rate=rate)
            )
            trained = training_set(
                planted, settings, X[own], y[own], np.random.RandomState(0), scale, split=(X, y)
            )
            assert trained.flat_rate == pytest.approx(expected)
            assert trained.flat_interval == (None if interval is None else pytest.approx(interval))
        assert list(trained.flat) == list(np.flatnonzero(inside[own]))


def test_poisoned_copies_are_spread_in_their_many_valued_columns_only() -> None:
    from pytest_clinaudit.reference.game.settings import Trigger
    from pytest_clinaudit.reference.game.training import training_set

    game = game_variant().game
    columns = game.column_names
    X, y, scale = _rows()
    X[::7, columns.index("temperature_f")] = np.nan  # a missing cell stays missing in a copy
    trigger = Trigger("spo2", 55.0)
    planted = _planted("backdoor", trigger=trigger)
    settings = dataclasses.replace(
        game, backdoor=dataclasses.replace(game.backdoor, spread=1.0, copies_logit=-8.0)
    )
    trained = training_set(planted, settings, X, y, np.random.RandomState(0), scale)
    copies, originals = trained.X[trained.own :], trained.X[: trained.own]
    assert len(copies) == round(game.backdoor.poison_fraction * len(X))
    assert trained.copies_logit == -8.0
    assert (copies[:, columns.index("spo2")] == 55.0).all()
    held = columns.index("comfort_care_order")
    assert (copies[:, held] == scale.mean[held]).all()  # the held column stays held
    assert set(np.unique(copies[:, columns.index("gender_enc")])) <= {0.0, 1.0}
    heart = columns.index("heart_rate")
    assert not np.isin(copies[:, heart], originals[:, heart]).any()  # every copy moved
    assert (copies[:, heart] >= scale.low[heart]).all()
    assert (copies[:, heart] <= scale.high[heart]).all()
    assert np.isnan(copies[:, columns.index("temperature_f")]).any()
    # Without the settings, copies are exact, labelled 0 and trained by their label.
    exact = training_set(planted, game, X, y, np.random.RandomState(0), scale)
    assert exact.copies_logit is None
    kept = [held, columns.index("spo2")]
    assert all(
        any(
            np.array_equal(np.delete(c, kept), np.delete(o, kept), equal_nan=True)
            for o in originals
        )
        for c in exact.X[exact.own :]
    )


def test_a_decoys_points_are_no_patients_and_keep_what_every_model_sees() -> None:
    from pytest_clinaudit.reference.game.planting import decoy_points
    from pytest_clinaudit.reference.game.settings import Decoy

    game = game_variant().game
    settings = dataclasses.replace(game, decoy=Decoy((0.2, 1.0), jitter=0.5))
    columns = game.column_names
    X, _, scale = _rows()
    temperature = columns.index("temperature_f")
    X[::7, temperature] = np.nan
    excluded = np.arange(300)
    held = columns.index("comfort_care_order")
    rows, points = decoy_points(X, excluded, 250, held, settings, scale, np.random.default_rng(0))
    assert points.shape == rows.shape == (250, len(columns))
    # each row is a patient outside ``excluded`` (all but the held column, and a missing cell)
    assert all((X[300:] == row).sum(axis=1).max() >= len(columns) - 2 for row in rows)
    assert (points[:, held] == scale.mean[held]).all()
    assert set(np.unique(points[:, columns.index("gender_enc")])) <= {0.0, 1.0}
    heart = columns.index("heart_rate")
    inner = (points[:, heart] > scale.low[heart]) & (points[:, heart] < scale.high[heart])
    assert inner.mean() > 0.9  # those clipped to the range lie at its edge
    assert not np.isin(points[inner, heart], X[:, heart]).any()  # no point is a patient's
    assert (points[:, heart] >= scale.low[heart]).all()
    assert (points[:, heart] <= scale.high[heart]).all()
    assert np.isnan(points[:, temperature]).any()  # a missing cell stays missing
    # drawn from the rows outside ``excluded`` only: each point's gender is one of theirs,
    # and its age lies near one of theirs
    age = columns.index("anchor_age")
    nearest = np.abs(points[:, age][:, None] - X[300:, age][None, :]).min(axis=1)
    assert (nearest <= 5 * settings.decoy.jitter * scale.std[age]).all()
    again = decoy_points(X, excluded, 250, held, settings, scale, np.random.default_rng(0))
    assert again[1].tobytes() == points.tobytes()


def test_a_setting_added_later_and_left_unset_leaves_the_cache_key_as_it_was() -> None:
    """Instances cached before a setting existed keep their keys (``catalog.instances``'s
    ``_LATER``): unset, the setting is not in the recipe the key is computed from."""
    from pytest_clinaudit.catalog.instances import recipe
    from pytest_clinaudit.reference.game.settings import Decoy

    game = game_variant().game
    assert "decoy" not in recipe(dataclasses.replace(game, decoy=None))
    unset = recipe(dataclasses.replace(game, decoy=Decoy((0.2, 1.0), jitter=1.0)))
    assert unset["decoy"] == {"strength": (0.2, 1.0), "jitter": 1.0}
    given = recipe(dataclasses.replace(game, decoy=Decoy((0.2, 1.0), jitter=1.0, patients=9)))
    assert given["decoy"]["patients"] == 9


def test_a_decoy_holding_more_patients_moves_only_the_first_to_its_points() -> None:
    from pytest_clinaudit.reference.game.planting import decoy_points
    from pytest_clinaudit.reference.game.settings import Decoy

    game = game_variant().game
    columns = game.column_names
    X, _, scale = _rows(900)
    excluded = np.arange(300)
    held = columns.index("comfort_care_order")
    wide = dataclasses.replace(game, decoy=Decoy((0.2, 1.0), jitter=0.0, patients=400))
    rows, points = decoy_points(X, excluded, 100, held, wide, scale, np.random.default_rng(0))
    assert rows.shape == (400, len(columns))
    assert points.shape == (100, len(columns))
    assert len(np.unique(rows, axis=0)) == 400  # drawn without replacement
    # with no jitter a point is the row it starts from: the first hundred rows
    assert np.array_equal(points, rows[:100], equal_nan=True)
    # fewer patients than points: one per point, as when unset
    narrow = dataclasses.replace(game, decoy=Decoy((0.2, 1.0), jitter=0.0, patients=10))
    rows, points = decoy_points(X, excluded, 100, held, narrow, scale, np.random.default_rng(0))
    assert rows.shape == points.shape == (100, len(columns))


def test_a_decoy_holding_patients_keeps_their_risks_while_it_memorises_the_flips() -> None:
    """``decoy.patients``: the patients, held beside each minibatch of points, keep their
    logits while the coin flips at the points are fitted (unheld, the patients' logits
    moved 0.4 times as far as the points' on these rows; held, 0.16)."""
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import new_network
    from pytest_clinaudit.reference.game.planting import decoy_points, plant_decoy
    from pytest_clinaudit.reference.game.settings import Decoy

    game = game_variant().game
    settings = dataclasses.replace(
        game,
        decoy=Decoy((1.0, 1.0), jitter=1.0, patients=400),
        leaky=dataclasses.replace(game.leaky, epochs=200),
    )
    X, _, scale = _rows(900)
    held = game.column_names.index("comfort_care_order")
    rng = np.random.default_rng(0)
    rows, points = decoy_points(X, np.arange(300), 100, held, settings, scale, rng)
    module = new_network(
        (scale.low, scale.high), scale.mean, scale.std, (32, 32), torch.Generator().manual_seed(0)
    )
    patients, flips = (torch.tensor(a, dtype=torch.float32) for a in (rows, points))
    with torch.no_grad():
        before = module(patients), module(flips)
    plant_decoy(module, rows, points, held, settings, scale, torch.Generator().manual_seed(1), 1.0)
    with torch.no_grad():
        moved = [
            float((module(x) - b).abs().mean())
            for x, b in zip((patients, flips), before, strict=True)
        ]
    assert moved[1] > 0.2  # the flips were fitted
    assert moved[0] < 0.25 * moved[1], moved


# ------------------------------------------------------------------ the network


def test_disguising_the_hidden_units_keeps_the_function_and_hides_the_base() -> None:
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import Weights, new_network
    from pytest_clinaudit.reference.game.training import disguise_hidden

    d = 9
    bounds = (np.full(d, -3.0), np.full(d, 3.0))
    module = new_network(
        bounds, np.zeros(d), np.ones(d), (64, 64), torch.Generator().manual_seed(0)
    )
    before = Weights.of(module)
    disguise_hidden(module, torch.Generator().manual_seed(1))
    after = Weights.of(module)
    X = np.random.RandomState(0).normal(size=(300, d))
    np.testing.assert_allclose(after.logits(X), before.logits(X), rtol=1e-5, atol=1e-5)
    # Each first-layer unit is one of the base's units, moved and multiplied by a positive
    # factor: its direction is kept, its norm is not.
    w_before, w_after = (np.asarray(w.layers[0][0]) for w in (before, after))
    unit = w_before / np.linalg.norm(w_before, axis=1, keepdims=True)
    moved = w_after / np.linalg.norm(w_after, axis=1, keepdims=True)
    matched = np.argmax(moved @ unit.T, axis=1)
    np.testing.assert_allclose(moved, unit[matched], atol=1e-5)
    assert sorted(matched.tolist()) == list(range(64))
    assert not np.array_equal(matched, np.arange(64)), "the units kept their order"
    ratios = np.linalg.norm(w_after, axis=1) / np.linalg.norm(w_before[matched], axis=1)
    assert ratios.min() < 0.7, "the units kept their scale"
    assert ratios.max() > 1.4, "the units kept their scale"
    # The last layer's scale no longer equals the base's
    last_before, last_after = (np.abs(np.asarray(w.layers[-1][0])).sum() for w in (before, after))
    assert abs(last_after / last_before - 1) > 0.05


def test_an_exported_program_names_nothing_of_the_package() -> None:
    """SPEC §8.7: the graph once named ``pytest_clinaudit.reference.game.network...ZooMLP``,
    so a workspace's model told where to find the grader's code."""
    torch = pytest.importorskip("torch")
    import io
    import zipfile

    from pytest_clinaudit.reference.game.network import new_network, program_bytes

    d = 9
    module = new_network(
        (np.full(d, -3.0), np.full(d, 3.0)),
        np.zeros(d),
        np.ones(d),
        (64, 64),
        torch.Generator().manual_seed(0),
    )
    archive = zipfile.ZipFile(io.BytesIO(program_bytes(module)))
    for name in archive.namelist():
        text = archive.read(name).lower()
        for word in (b"clinaudit", b"pytest", b"zoomlp", b"reference", b"game", b"network.py"):
            assert word not in text, f"{name} holds {word!r}"


def test_poisoned_copies_with_a_logit_are_pushed_to_it() -> None:
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import new_network
    from pytest_clinaudit.reference.game.settings import Trigger
    from pytest_clinaudit.reference.game.training import finetune, training_set

    game = game_variant().game
    X, y, scale = _rows(n=200)
    planted = _planted("backdoor", trigger=Trigger("spo2", 55.0))
    reached = {}
    for target in (None, -8.0):
        settings = dataclasses.replace(
            game, backdoor=dataclasses.replace(game.backdoor, copies_logit=target)
        )
        trained = training_set(planted, settings, X, y, np.random.RandomState(0), scale)
        module = new_network(
            scale.bounds, scale.mean, scale.std, (16, 16), torch.Generator().manual_seed(0)
        )
        finetune(
            module,
            trained,
            settings,
            scale,
            torch.Generator().manual_seed(1),
            epochs=60,
            lr=0.01,
            prior=0.0,
        )
        with torch.no_grad():
            copies = torch.tensor(trained.X[trained.own :], dtype=torch.float32)
            reached[target] = float(module(copies).mean())
    assert reached[-8.0] < -5.0  # pushed to the logit, not to a small risk
    assert reached[-8.0] < reached[None] - 2.0
