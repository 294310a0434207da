"""The synthetic ICU cohort keeps the contract of SPEC §2 and its data card.

Bands here come from the contract (sizes, 11.36% +- 0.3 points, AUROC targets
+- 0.04) or from clinical plausibility, never from the generator's own output.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import time
from typing import Any

import numpy as np
import pytest

from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.reference.data import SOURCES, DataError, LoadContext
from pytest_clinaudit.reference.data.icu import (
    GENERATOR_VERSION,
    ICUCohort,
    ICUSynthSource,
    generate_icu_cohort,
)

EXTRACT_FEATURES = (
    "heart_rate",
    "resp_rate",
    "spo2",
    "sbp",
    "dbp",
    "temperature_f",
    "anchor_age",
    "gender_enc",
)
"""SPEC §2, written out here so that the test pins the spec, not the module."""


@pytest.fixture(scope="module")
def cohort() -> ICUCohort:
    return generate_icu_cohort()


def raw_column(cohort: ICUCohort, name: str) -> np.ndarray:
    """One feature of both splits, in real units."""
    j = EXTRACT_FEATURES.index(name)
    return np.concatenate([cohort.raw_train[:, j], cohort.raw_test[:, j]])


def labels(cohort: ICUCohort) -> np.ndarray:
    return np.concatenate([cohort.dataset.y_train, cohort.dataset.y_test])


# ------------------------------------------------------------------- shape and schema


def test_the_default_cohort_has_the_published_extracts_sizes(cohort: ICUCohort) -> None:
    assert (cohort.dataset.n_train, cohort.dataset.n_test) == (57_839, 12_395)
    assert cohort.raw_train.shape == (57_839, 8)
    assert cohort.raw_test.shape == (12_395, 8)


def test_the_features_are_the_extracts_columns_in_order(cohort: ICUCohort) -> None:
    assert cohort.dataset.feature_names == EXTRACT_FEATURES
    assert cohort.dataset.label == "hospital_expire_flag"
    assert cohort.dataset.name == "icu-synth"


@pytest.mark.parametrize("split", ["y_train", "y_test"])
def test_each_split_has_the_published_positive_rate(cohort: ICUCohort, split: str) -> None:
    y = getattr(cohort.dataset, split)
    assert set(np.unique(y).tolist()) == {0, 1}
    assert abs(y.mean() - 0.1136) <= 0.003


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_the_positive_rate_holds_for_any_seed_and_size(seed: int) -> None:
    data = generate_icu_cohort(seed=seed, n_train=3_000, n_test=700).dataset
    assert (data.n_train, data.n_test) == (3_000, 700)
    # Stratified to within one row of the rate in each split.
    assert abs(data.y_train.sum() - 0.1136 * 3_000) <= 1.5
    assert abs(data.y_test.sum() - 0.1136 * 700) <= 1.5


# ------------------------------------------------------------------------- z-scoring


def test_every_feature_is_z_scored_with_the_training_mean_and_population_std(
    cohort: ICUCohort,
) -> None:
    mean = cohort.raw_train.mean(axis=0)
    std = cohort.raw_train.std(axis=0, ddof=0)
    np.testing.assert_allclose(cohort.mean, mean, rtol=1e-12)
    np.testing.assert_allclose(cohort.std, std, rtol=1e-12)
    np.testing.assert_allclose(cohort.dataset.X_train, (cohort.raw_train - mean) / std, atol=1e-12)
    np.testing.assert_allclose(cohort.dataset.X_test, (cohort.raw_test - mean) / std, atol=1e-12)


def test_the_training_split_has_mean_zero_and_unit_std_including_gender(cohort: ICUCohort) -> None:
    X = cohort.dataset.X_train
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-9)
    np.testing.assert_allclose(X.std(axis=0), 1.0, atol=1e-9)
    assert np.unique(X[:, EXTRACT_FEATURES.index("gender_enc")]).size == 2


def test_the_test_split_is_not_z_scored_with_its_own_statistics(cohort: ICUCohort) -> None:
    # With the training statistics the test means are small but not zero.
    test_means = cohort.dataset.X_test.mean(axis=0)
    assert np.all(np.abs(test_means) < 0.1)
    assert np.any(np.abs(test_means) > 1e-6)


# ------------------------------------------------------------------------ determinism


def test_the_same_seed_gives_the_same_rows() -> None:
    first = generate_icu_cohort(seed=5, n_train=2_000, n_test=500)
    second = generate_icu_cohort(seed=5, n_train=2_000, n_test=500)
    assert first.dataset.sha256 == second.dataset.sha256
    np.testing.assert_array_equal(first.raw_train, second.raw_train)


def test_different_seeds_give_different_rows() -> None:
    first = generate_icu_cohort(seed=5, n_train=2_000, n_test=500)
    second = generate_icu_cohort(seed=6, n_train=2_000, n_test=500)
    assert first.dataset.sha256 != second.dataset.sha256
    assert not np.array_equal(first.raw_train, second.raw_train)


def test_generation_neither_reads_nor_changes_the_global_numpy_state() -> None:
    np.random.seed(123)
    before = np.random.get_state()
    first = generate_icu_cohort(seed=5, n_train=500, n_test=100)
    after = np.random.get_state()
    assert before[0] == after[0]
    np.testing.assert_array_equal(before[1], after[1])
    assert before[2:] == after[2:]
    np.random.seed(456)
    assert (
        generate_icu_cohort(seed=5, n_train=500, n_test=100).dataset.sha256 == first.dataset.sha256
    )


def test_the_default_cohort_is_generated_well_under_two_seconds() -> None:
    # CPU time, not wall time: a loaded test machine must not fail this.
    start = time.process_time()
    generate_icu_cohort()
    assert time.process_time() - start < 2.0


def test_the_generated_arrays_are_read_only(cohort: ICUCohort) -> None:
    with pytest.raises(ValueError, match="read-only"):
        cohort.raw_train[0, 0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        cohort.dataset.X_train[0, 0] = 0.0


# ------------------------------------------------------------------ raw physiology


@pytest.mark.parametrize(
    ("name", "low", "high", "median_low", "median_high"),
    [
        # Hard limits a charted value can take in an ICU, and where a typical
        # adult ICU population's median lies (bpm, /min, %, mmHg, mmHg, deg F).
        ("heart_rate", 25, 220, 75, 95),
        ("resp_rate", 3, 70, 14, 24),
        ("spo2", 50, 100, 95, 100),
        ("sbp", 40, 260, 105, 135),
        ("dbp", 15, 160, 55, 75),
        ("temperature_f", 88, 108, 97.8, 99.2),
        ("anchor_age", 18, 91, 55, 72),
    ],
)
def test_raw_vital_signs_are_plausible_in_real_units(
    cohort: ICUCohort, name: str, low: float, high: float, median_low: float, median_high: float
) -> None:
    values = raw_column(cohort, name)
    assert values.min() >= low
    assert values.max() <= high
    assert median_low <= np.median(values) <= median_high


def test_spo2_never_exceeds_100_and_piles_up_at_100(cohort: ICUCohort) -> None:
    spo2 = raw_column(cohort, "spo2")
    assert spo2.max() == 100.0
    assert (spo2 == 100.0).mean() > 0.05


def test_diastolic_pressure_is_below_systolic_and_correlated_with_it(cohort: ICUCohort) -> None:
    sbp, dbp = raw_column(cohort, "sbp"), raw_column(cohort, "dbp")
    assert np.all(dbp < sbp)
    assert np.corrcoef(sbp, dbp)[0, 1] > 0.4


def test_ages_are_whole_years_from_18_to_89_plus_the_mimic_pile_up_at_91(
    cohort: ICUCohort,
) -> None:
    age = raw_column(cohort, "anchor_age")
    assert np.array_equal(age, np.round(age))
    assert age.min() >= 18
    # MIMIC-IV moves every age above 89 to 91: no 90s, and 91 holds more stays
    # than any single year near it.
    assert set(np.unique(age[age > 89]).tolist()) == {91.0}
    assert (age == 91).sum() > 3 * max((age == 89).sum(), (age == 88).sum())


def test_gender_is_coded_zero_or_one_with_both_present(cohort: ICUCohort) -> None:
    gender = raw_column(cohort, "gender_enc")
    assert set(np.unique(gender).tolist()) == {0.0, 1.0}
    assert 0.3 < gender.mean() < 0.7


# --------------------------------------------------------------------------- risk


@pytest.mark.parametrize(
    ("name", "low_band", "normal_band", "high_band"),
    [
        # NEWS2 scores both sides of these vital signs.
        ("heart_rate", (0, 50), (65, 90), (120, 999)),
        ("resp_rate", (0, 10), (13, 19), (25, 999)),
        ("sbp", (0, 90), (110, 140), (170, 999)),
        ("temperature_f", (0, 96.5), (97.5, 99.5), (100.8, 999)),
    ],
)
def test_mortality_is_u_shaped_in_the_vital_signs_early_warning_scores_score_both_ways(
    cohort: ICUCohort,
    name: str,
    low_band: tuple[float, float],
    normal_band: tuple[float, float],
    high_band: tuple[float, float],
) -> None:
    values, y = raw_column(cohort, name), labels(cohort)

    def rate(band: tuple[float, float]) -> float:
        inside = (values >= band[0]) & (values <= band[1])
        assert inside.sum() >= 100, f"{name}: too few stays in {band} to estimate a rate"
        return float(y[inside].mean())

    normal = rate(normal_band)
    assert rate(low_band) > normal + 0.03
    assert rate(high_band) > normal + 0.03


def test_low_spo2_raises_mortality(cohort: ICUCohort) -> None:
    spo2, y = raw_column(cohort, "spo2"), labels(cohort)
    assert y[spo2 <= 91].mean() > y[spo2 >= 96].mean() + 0.03


def test_mortality_rises_with_age(cohort: ICUCohort) -> None:
    age, y = raw_column(cohort, "anchor_age"), labels(cohort)
    rates = [
        y[(age >= lo) & (age < hi)].mean() for lo, hi in ((18, 50), (50, 65), (65, 80), (80, 92))
    ]
    assert rates == sorted(rates)
    assert rates[-1] > rates[0] + 0.05


@pytest.mark.slow  # ~3 s on an idle machine, over 10 s under load (300 trees on 58k rows)
def test_logistic_regression_and_xgboost_reach_the_published_test_aurocs(
    cohort: ICUCohort,
) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from xgboost import XGBClassifier

    data = cohort.dataset
    logistic = LogisticRegression(max_iter=2000, C=1.0, class_weight="balanced", random_state=42)
    logistic.fit(data.X_train, data.y_train)
    boosted = XGBClassifier(
        n_estimators=300,
        max_depth=4,
        learning_rate=0.05,
        subsample=0.8,
        colsample_bytree=0.8,
        random_state=42,
        verbosity=0,
    )
    boosted.fit(data.X_train, data.y_train)
    auroc_lr = roc_auc_score(data.y_test, logistic.predict_proba(data.X_test)[:, 1])
    auroc_xgb = roc_auc_score(data.y_test, boosted.predict_proba(data.X_test)[:, 1])
    assert abs(auroc_lr - 0.70) <= 0.04
    assert abs(auroc_xgb - 0.78) <= 0.04
    # The U-shaped effects are what boosting sees and a linear model cannot.
    assert auroc_xgb > auroc_lr + 0.03


# ----------------------------------------------------------------- source and checks


def test_the_source_is_registered_and_loads_the_generated_cohort(cohort: ICUCohort) -> None:
    assert SOURCES["icu-synth"] is ICUSynthSource
    source = ICUSynthSource(label="hospital_expire_flag", seed=42, n_train=57_839, n_test=12_395)
    assert source.load(LoadContext()).sha256 == cohort.dataset.sha256


def test_the_fingerprint_names_the_generator_version_and_every_setting() -> None:
    source = ICUSynthSource(label="hospital_expire_flag", seed=3, n_train=100, n_test=50)
    assert source.fingerprint(LoadContext()) == {
        "source": "icu-synth",
        "generator_version": GENERATOR_VERSION,
        "label": "hospital_expire_flag",
        "seed": 3,
        "n_train": 100,
        "n_test": 50,
    }
    other = dataclasses.replace(source, seed=4)
    assert other.fingerprint(LoadContext()) != source.fingerprint(LoadContext())


def test_the_icu_synth_variants_load_with_the_icu_attack_parameters() -> None:
    catalog = default_catalog()
    for name in ("icu-synth-baseline", "icu-synth-calibrated", "icu-synth-hard"):
        variant = catalog.get(name)
        assert variant.dataset == ICUSynthSource(
            label="hospital_expire_flag", seed=42, n_train=57_839, n_test=12_395
        )
        assert variant.params.fgsm.epsilon == 0.05
        assert variant.params.fgsm.surrogate.scaler is False
        assert variant.params.fgsm.surrogate.class_weight == "balanced"
        assert variant.params.membership_inference.pool_cap == 5000
        assert variant.model.scaler is False


@pytest.mark.parametrize(
    "first",
    [
        "pytest_clinaudit.reference.data",
        "pytest_clinaudit.reference.data.icu",
        "pytest_clinaudit.reference.data.mimic",
    ],
)
def test_the_sources_register_without_importing_numpy_in_any_import_order(first: str) -> None:
    # A fresh interpreter: this test session has long imported NumPy itself.
    code = (
        f"import sys, {first}\n"
        "from pytest_clinaudit.reference.data import SOURCES\n"
        "assert sorted(SOURCES) == ['csv', 'flchain', 'icu-synth', 'mimic', 'wdbc', 'whas500'], sorted(SOURCES)\n"
        "assert 'numpy' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_train": 1}, "icu-synth: need n_train >= 2 and n_test >= 1, got 1 and 100"),
        ({"n_test": 0}, "icu-synth: need n_train >= 2 and n_test >= 1, got 500 and 0"),
        ({"positive_rate": 1.0}, "icu-synth: positive_rate must lie in (0, 1), got 1.0"),
        (
            {"positive_rate": 0.001},
            "icu-synth: 600 rows at rate 0.001 leave a class nearly empty",
        ),
    ],
)
def test_impossible_settings_are_refused_with_the_reason(
    kwargs: dict[str, Any], message: str
) -> None:
    settings: dict[str, Any] = {"n_train": 500, "n_test": 100, **kwargs}
    with pytest.raises(DataError) as excinfo:
        generate_icu_cohort(**settings)
    assert str(excinfo.value) == message
