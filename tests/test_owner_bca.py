"""BCa intervals from given replicates: checked against scipy.stats.bootstrap and by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from scipy import stats

from pytest_clinaudit.reference.review import bca, coverage

B = 40_000
"""Replicates on each side: the 2.5% quantile then has a Monte Carlo error of about
0.012 standard deviations of the statistic, well inside the tolerance below."""


def _ours_one_sample(x: np.ndarray, statistic: Any, seed: int) -> bca.BCaInterval:
    rng = np.random.RandomState(seed)
    replicates = statistic(x[rng.randint(0, len(x), size=(B, len(x)))], axis=1)
    jackknife = np.array([statistic(np.delete(x, i)) for i in range(len(x))])
    return bca.bca_interval(float(statistic(x)), replicates, [jackknife])


@pytest.mark.parametrize("name", ["mean", "variance"])
def test_the_one_sample_interval_agrees_with_scipys_bca(name: str) -> None:
    # A skewed sample, where BCa and the percentile interval differ.
    x = np.random.RandomState(0).exponential(size=40)
    statistic = {"mean": np.mean, "variance": np.var}[name]
    ours = _ours_one_sample(x, statistic, seed=1)
    theirs = stats.bootstrap((x,), statistic, method="BCa", n_resamples=B, random_state=2)
    spread = theirs.standard_error
    assert ours.low == pytest.approx(theirs.confidence_interval.low, abs=0.06 * spread)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, abs=0.06 * spread)
    percentile = np.quantile(theirs.bootstrap_distribution, [0.025, 0.975])
    # The check has teeth: BCa moved the variance's interval away from the percentile one.
    if name == "variance":
        assert abs(ours.high - percentile[1]) > 0.2 * spread


def test_the_two_sample_acceleration_is_scipys_multi_sample_form() -> None:
    rng = np.random.RandomState(3)
    a, b = rng.exponential(size=30), rng.exponential(scale=2.0, size=45)

    def difference(x: np.ndarray, y: np.ndarray, axis: int = -1) -> Any:
        return np.mean(x, axis=axis) - np.mean(y, axis=axis)

    draws_a = rng.randint(0, len(a), size=(B, len(a)))
    draws_b = rng.randint(0, len(b), size=(B, len(b)))
    replicates = a[draws_a].mean(axis=1) - b[draws_b].mean(axis=1)
    jackknife = [
        np.array([difference(np.delete(a, i), b) for i in range(len(a))]),
        np.array([difference(a, np.delete(b, i)) for i in range(len(b))]),
    ]
    ours = bca.bca_interval(float(difference(a, b)), replicates, jackknife)
    theirs = stats.bootstrap((a, b), difference, method="BCa", n_resamples=B, random_state=4)
    spread = theirs.standard_error
    assert ours.low == pytest.approx(theirs.confidence_interval.low, abs=0.06 * spread)
    assert ours.high == pytest.approx(theirs.confidence_interval.high, abs=0.06 * spread)


def test_the_acceleration_of_a_mean_is_the_skewness_over_six_root_n_by_hand() -> None:
    x = np.array([0.0, 1.0, 1.0, 2.0, 7.0])
    jackknife = np.array([np.delete(x, i).mean() for i in range(len(x))])
    d = jackknife.mean() - jackknife
    by_hand = np.sum(d**3) / (6.0 * np.sum(d**2) ** 1.5)  # Efron and Tibshirani, eq. 14.15
    assert bca.acceleration([jackknife]) == pytest.approx(by_hand, rel=1e-12)
    centred = x - x.mean()
    skewness = np.mean(centred**3) / np.mean(centred**2) ** 1.5
    assert by_hand == pytest.approx(skewness / (6.0 * np.sqrt(len(x))), rel=1e-12)


def test_a_statistic_that_never_moves_has_its_point_as_interval() -> None:
    interval = bca.bca_interval(1.0, np.ones(100), [np.ones(10)])
    assert (interval.low, interval.high, interval.bias) == (1.0, 1.0, 0.0)


def test_undefined_replicates_are_left_out_and_counted() -> None:
    values = np.r_[np.random.RandomState(5).normal(size=300), [np.nan] * 7]
    interval = bca.bca_interval(0.0, values, [np.zeros(3)])
    assert interval.n_undefined == 7
    assert interval.low < 0.0 < interval.high


def test_the_confidence_distribution_inverts_the_interval_endpoints() -> None:
    rng = np.random.RandomState(6)
    replicates = rng.gamma(2.0, size=20_000) + 0.6  # skewed, and mostly above the point 2.0
    jackknife = rng.gamma(2.0, size=50)
    interval = bca.bca_interval(2.0, replicates, [jackknife])
    assert interval.z0 != 0.0
    assert interval.acceleration != 0.0
    assert bca.confidence_below(interval.high, interval, replicates) == pytest.approx(
        0.975, abs=2e-3
    )
    assert bca.confidence_below(interval.low, interval, replicates) == pytest.approx(
        0.025, abs=2e-3
    )
    # Corrected for the bias rather than shifted by it: the replicates sit above
    # the point (z0 < 0), so the population value is more likely below it.
    share_below = np.mean(replicates < 2.0)
    assert share_below < 0.5
    confidence = bca.confidence_below(2.0, interval, replicates)
    assert confidence == pytest.approx(stats.norm.cdf(-interval.z0), abs=1e-12)
    assert confidence > 0.5 > share_below


def test_the_wdbc_logistic_audit_reports_each_bias_and_corrects_its_intervals_for_it(
    wdbc: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18, case 3: calibration point 0.622 with a replicate median of 0.520, and a
    verdict-change probability of 0.396 from replicates shifted by that bias."""
    # BCa's correction itself: the coverage study keeps the calibration interval from
    # being shown (reference/review/coverage.py), tested in tests/test_owner_coverage.py.
    monkeypatch.setattr(coverage, "RULES", {})
    import dataclasses

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pytest_clinaudit.reference.attacks.sps import verdict
    from pytest_clinaudit.reference.models import adapt_model
    from pytest_clinaudit.reference.review.own_data import audit_own_data
    from pytest_clinaudit.reference.review.profile import OwnDataParams

    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(wdbc.X_train, wdbc.y_train)
    adapted = adapt_model(model, feature_names=wdbc.feature_names, positive_class=1)
    params = dataclasses.replace(OwnDataParams(), lira_shadows=0, boundary_rows=40)
    audit = audit_own_data(adapted, wdbc, params)
    boot = audit.uncertainty
    calibration = boot.components["calibration_ece"]
    assert audit.components["calibration_ece"] == pytest.approx(0.6219, abs=1e-4)
    replicates = np.clip(boot.replicates["calibration_ece"], 0.0, 1.0)
    # The bootstrap sits below the point (the plug-in ECE is biased upward) ...
    assert calibration.bias < -0.05
    assert np.median(replicates) < calibration.point - 0.05
    # ... and BCa moves the interval up, where the percentile interval would not.
    percentile_low, percentile_high = np.quantile(replicates, [0.025, 0.975])
    assert calibration.low > percentile_low
    assert calibration.high > percentile_high
    assert calibration.low <= calibration.point <= calibration.high
    # The verdict's stability is corrected for the SPS's bias rather than shifted by it.
    assert boot.sps.bias < 0
    shifted = np.mean(
        [verdict(round(s, 2), params.verdict) != boot.verdict for s in boot.replicates["sps"]]
    )
    assert boot.verdict_change_probability < shifted - 0.1
    for interval in [*boot.components.values(), boot.sps, *boot.diagnostics.values()]:
        assert np.isfinite(interval.bias)
