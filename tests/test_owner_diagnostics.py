"""Reviewer diagnostics: hand-computed cases, the estimators' defining properties."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from sklearn.calibration import calibration_curve

from pytest_clinaudit.reference import attacks
from pytest_clinaudit.reference.review import diagnostics

# Two equal-mass bins of four rows: the first predicts 0.25 on average and sees
# 3 of 4 positives, the second predicts 0.75 and sees 1 of 4.
Y = np.array([0, 1, 1, 1, 0, 0, 0, 1])
P = np.array([0.1, 0.2, 0.3, 0.4, 0.6, 0.7, 0.8, 0.9])


def _expit(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def test_the_debiased_l2_error_subtracts_each_bins_label_variance_by_hand() -> None:
    result = diagnostics.debiased_l2_calibration_error(Y, P, n_bins=2)
    # Each bin: plug-in (0.75 - 0.25)^2 = 0.25, variance 0.75 * 0.25 / (4 - 1) = 0.0625.
    assert result.squared == pytest.approx(0.5 * (0.25 - 0.0625) + 0.5 * (0.25 - 0.0625))
    assert result.rms == pytest.approx(math.sqrt(0.1875))
    assert result.plugin_rms == pytest.approx(0.5)
    assert result.n_bins_used == 2


def _kumar_literal(y: np.ndarray, p: np.ndarray, ids: np.ndarray) -> float:
    """Kumar et al. (2019)'s debiased squared error, bin by bin as their library writes it."""
    total = 0.0
    for b in np.unique(ids):
        rows = ids == b
        weight = rows.sum() / len(y)
        if rows.sum() < 2:
            continue  # their bin_error: fewer than two rows count 0
        label = y[rows].mean()
        gap = (p[rows].mean() - label) ** 2
        total += weight * (gap - label * (1.0 - label) / (rows.sum() - 1.0))
    return total


def test_a_bin_of_one_row_counts_zero_as_in_kumar_et_al() -> None:
    # Four rows in four bins: every bin holds one row, so the estimate is exactly 0.
    y, p = np.array([1, 0, 1, 0]), np.array([0.1, 0.3, 0.6, 0.95])
    result = diagnostics.debiased_l2_calibration_error(y, p, n_bins=4)
    assert result.squared == 0.0
    assert result.plugin_rms > 0.5  # the plug-in error is large; the correction is not skipped


def test_the_debiased_error_equals_a_literal_transcription_with_lonely_bins() -> None:
    rng = np.random.RandomState(3)
    for n in (5, 16, 31, 200):
        p = np.round(rng.uniform(size=n), 1)  # ties make bins of uneven size, some of one row
        y = (rng.uniform(size=n) < p).astype(np.int64)
        ids = diagnostics.equal_mass_bin_ids(p, 15)
        result = diagnostics.debiased_l2_calibration_error(y, p, n_bins=15)
        assert result.squared == pytest.approx(_kumar_literal(y, p, ids), abs=1e-15), n


def test_the_equal_mass_ece_of_the_hand_case_is_the_mean_gap() -> None:
    assert diagnostics.equal_mass_ece(Y, P, n_bins=2) == pytest.approx(0.5)


def test_the_debiased_error_is_about_zero_on_average_for_a_calibrated_model_and_the_plugin_is_not() -> (
    None
):
    rng = np.random.RandomState(0)
    squared, plugin = [], []
    for _ in range(300):
        p = rng.uniform(0.05, 0.95, 300)
        y = (rng.uniform(size=300) < p).astype(np.int64)
        result = diagnostics.debiased_l2_calibration_error(y, p, n_bins=15)
        squared.append(result.squared)
        plugin.append(result.plugin_rms**2)
    se = np.std(squared) / np.sqrt(len(squared))
    assert abs(np.mean(squared)) < 3 * se
    assert np.mean(plugin) > 10 * se


def test_the_recalibration_fit_solves_the_logistic_score_equations() -> None:
    rng = np.random.RandomState(1)
    p = rng.uniform(0.01, 0.99, 500)
    y = (rng.uniform(size=500) < _expit(0.3 + 0.6 * np.log(p / (1 - p)))).astype(np.int64)
    fit = diagnostics.recalibration(y, p)
    assert fit.converged
    z = np.log(p / (1 - p))
    mu = _expit(fit.intercept + fit.slope * z)
    # The maximum-likelihood estimate zeroes the gradient: sum(y - mu) = sum((y - mu) z) = 0.
    assert abs(np.sum(y - mu)) < 1e-8
    assert abs(np.sum((y - mu) * z)) < 1e-8
    assert abs(np.sum(y - _expit(z + fit.intercept_in_the_large))) < 1e-8


def test_making_predictions_twice_as_extreme_on_the_logit_halves_the_slope() -> None:
    rng = np.random.RandomState(2)
    p = rng.uniform(0.05, 0.95, 400)
    y = (rng.uniform(size=400) < p).astype(np.int64)
    z = np.log(p / (1 - p))
    base = diagnostics.recalibration(y, p)
    extreme = diagnostics.recalibration(y, _expit(2 * z))
    assert extreme.slope == pytest.approx(base.slope / 2, rel=1e-9)
    assert extreme.intercept == pytest.approx(base.intercept, abs=1e-9)


def test_perfectly_separated_classes_have_no_recalibration_fit() -> None:
    fit = diagnostics.recalibration(np.array([0, 0, 1, 1]), np.array([0.1, 0.2, 0.8, 0.9]))
    assert not fit.converged
    assert math.isnan(fit.slope)


def test_tied_probabilities_always_share_an_equal_mass_bin() -> None:
    p = np.array([0.2, 0.2, 0.2, 0.2, 0.5, 0.7])
    ids = diagnostics.equal_mass_bin_ids(p, 3)
    assert len(set(ids[:4].tolist())) == 1
    # Cut points are the values at ranks 2 and 4: 0.2 and 0.5. Each goes to the
    # upper bin, so the first bin is empty and the four ties fill the second.
    assert diagnostics.reliability_bins(np.array([0, 1, 0, 1, 1, 1]), p, n_bins=3).count == (4, 2)


def test_every_calibration_statistic_ignores_row_order() -> None:
    rng = np.random.RandomState(3)
    p = np.round(rng.uniform(size=200), 2)  # many ties
    y = (rng.uniform(size=200) < p).astype(np.int64)
    perm = rng.permutation(200)
    a, b = diagnostics.diagnose(y, p), diagnostics.diagnose(y[perm], p[perm])
    assert a.ece_equal_mass == pytest.approx(b.ece_equal_mass, abs=1e-15)
    assert a.debiased_l2.squared == pytest.approx(b.debiased_l2.squared, abs=1e-15)
    assert a.reliability_equal_mass.count == b.reliability_equal_mass.count


def test_uniform_reliability_bins_match_scikit_learns_calibration_curve() -> None:
    rng = np.random.RandomState(4)
    p = rng.uniform(size=300)
    y = (rng.uniform(size=300) < p).astype(np.int64)
    frac, mean = calibration_curve(y, p, n_bins=10, strategy="uniform")
    bins = diagnostics.reliability_bins(y, p, n_bins=10, strategy="uniform")
    np.testing.assert_allclose(bins.observed_frequency, frac)
    np.testing.assert_allclose(bins.mean_predicted, mean)
    assert sum(bins.count) == 300


def test_the_brier_score_and_auroc_of_a_tiny_case() -> None:
    y = np.array([0, 1, 1])
    p = np.array([0.2, 0.6, 0.9])
    assert diagnostics.brier_score(y, p) == pytest.approx((0.04 + 0.16 + 0.01) / 3)
    assert diagnostics.auroc(y, p) == 1.0
    assert diagnostics.auroc(np.array([1, 1]), np.array([0.2, 0.3])) is None


def test_the_diagnostics_report_the_tasks_ece_next_to_the_sound_ones_as_json() -> None:
    rng = np.random.RandomState(5)
    p = rng.uniform(size=114)
    y = (rng.uniform(size=114) < p).astype(np.int64)
    result = diagnostics.diagnose(y, p)
    assert result.ece_task == attacks.task_ece(y, p, 10)
    assert result.ece_task_aligned == attacks.aligned_ece(y, p, 10)
    data = json.loads(json.dumps(result.as_dict()))
    assert set(data["reliability_equal_mass"]) == {
        "strategy",
        "lower",
        "upper",
        "mean_predicted",
        "observed_frequency",
        "count",
    }
    assert sum(data["reliability_equal_mass"]["count"]) == 114


def test_labels_other_than_zero_and_one_are_refused() -> None:
    with pytest.raises(ValueError, match="0/1"):
        diagnostics.diagnose(np.array([0, 2]), np.array([0.1, 0.2]))
