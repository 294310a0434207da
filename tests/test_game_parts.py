"""The game's parts that need no training: the variant file, the plan, the cohort's options,
claims, measurements, the brief and the agents' report format."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from game_helpers import GAME, game_variant
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_clinaudit.catalog.games import GameVariant
from pytest_clinaudit.catalog.variants import VariantError, default_catalog, load_variant
from pytest_clinaudit.reference.data import LoadContext
from pytest_clinaudit.reference.data.icu import ICUSynthSource, generate_icu_cohort
from pytest_clinaudit.reference.game.claims import Thresholds, check_claim, flip_share
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


def _edited(tmp_path: Path, old: str, new: str) -> Path:
    text = game_variant().path.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "game.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("models = 6", "models = 6\ncolour = 3", "game: unknown key 'colour'"),
        ("base_rows = 8000", "base_rows = 'many'", "game.training.base_rows: expected an integer"),
        ("fragile_in = 0.55", "fragile_in = 0.2", "margins.fragile_out must lie below"),
        ('column = "comfort_care_order"', 'column = "heart_rate"', "must be recorded after"),
        ("clean = [1, 2]", "clean = [6]", "each count must lie in [1, models)"),
        ("detection = 0.5", "detection = 0.6", "game.score: must be non-negative and sum to 1"),
        ('{ feature = "spo2", value = 55.0 }', '{ feature = "lactate", value = 9.0 }', "lactate"),
        ('column = "gender_enc"\nequals = 1.0', 'column = "sex"\nequals = 1.0', "'sex'"),
    ],
)
def test_a_contradictory_game_file_is_refused_naming_the_setting(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(VariantError) as raised:
        load_variant(_edited(tmp_path, old, new))
    assert message in str(raised.value)
    assert "game.toml" in str(raised.value)


# ------------------------------------------------------------------ the plan


@settings(max_examples=200, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_a_plan_has_one_or_two_clean_models_and_distinct_kinds(seed: int) -> None:
    plan = draw_plan(game_variant().game, seed)
    kinds = [m.kind for m in plan.models if m.kind is not None]
    assert len(plan.models) == 6
    assert 6 - len(kinds) in (1, 2)
    assert len(set(kinds)) == len(kinds)
    assert [m.name for m in plan.models] == [f"m{i}" for i in range(1, 7)]
    for m in plan.models:
        assert (m.factor is not None) == (m.kind == "miscalibrated")
        assert (m.subgroup is not None) == (m.kind == "subgroup")
        assert (m.trigger is not None) == (m.kind == "backdoor")


def test_over_many_seeds_every_kind_is_sometimes_absent_and_sometimes_planted() -> None:
    plans = [draw_plan(game_variant().game, seed) for seed in range(1, 60)]
    for kind in KINDS:
        present = [p.carrier(kind) is not None for p in plans]
        assert any(present)
        assert not all(present)
    assert draw_plan(game_variant().game, 7) == draw_plan(game_variant().game, 7)


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


# ------------------------------------------------------------------ the network


def test_reordering_the_hidden_units_keeps_the_function_and_hides_the_base() -> None:
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import Weights, new_network
    from pytest_clinaudit.reference.game.training import permute_hidden

    d = 9
    bounds = (np.full(d, -3.0), np.full(d, 3.0))
    module = new_network(
        bounds, np.zeros(d), np.ones(d), (64, 64), torch.Generator().manual_seed(0)
    )
    before = Weights.of(module)
    permute_hidden(module, torch.Generator().manual_seed(1))
    after = Weights.of(module)
    X = np.random.RandomState(0).normal(size=(300, d))
    np.testing.assert_allclose(after.logits(X), before.logits(X), rtol=1e-5, atol=1e-5)
    (first_before, _), (first_after, _) = before.layers[0], after.layers[0]
    assert first_before != first_after
    assert sorted(first_before) == sorted(first_after)  # the same units, in another order
