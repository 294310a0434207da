"""A small coverage study of the own-data audit's intervals: only gross failures fail it.

``benchmarks/bench_owner_coverage.py`` measures coverage with the whole audit
on a population with known values, 200 test sets per size, and takes an hour
per size. This is the same question at the level of the bootstrap the audit
calls (:func:`~.uncertainty.bootstrap`): a population with known probabilities
and known per-row attack outcomes, 30 test sets of 500 rows, 200 replicates
each. With 30 samples a 95% interval covers 24 or more times with
probability 0.99, so coverage below 0.6 (18 of 30) is a broken interval, not
chance; and no interval shown may ever exclude its own point.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from scipy.special import expit, logit

from pytest_clinaudit.reference.attacks.params import COMPONENTS, VerdictThresholds, Weights
from pytest_clinaudit.reference.review import bca, coverage, diagnostics, replicates, uncertainty

WEIGHTS = Weights(0.35, 0.25, 0.20, 0.20)
THRESHOLDS = VerdictThresholds(80.0, 65.0)
ECE_SCALE, N_BINS, MAX_STEPS = 12.0, 10, 100
TPR, FPR = 0.30, 0.20
"""The membership attack's true rates: each member (non-member) is flagged with this chance."""
SAMPLES, N_TEST, N_MEMBERS, N_BOOT = 30, 500, 300, 200


def _rows(n: int, rng: np.random.RandomState) -> dict[str, np.ndarray]:
    """Rows of the population: the true risk ``pi``, the model's ``p``, labels, attack outcomes."""
    z = rng.standard_normal(n)
    pi = expit(-2.4 + 1.3 * z)
    p = expit(-2.1 + 1.0 * z)  # a model that is a little off, so the ECE is not zero
    y = (rng.uniform(size=n) < pi).astype(np.int64)
    # FGSM moves each row's logit 0.4 towards the wrong class.
    p_adv = expit(logit(p) + 0.4 * (1 - 2 * y))
    steps = np.minimum(MAX_STEPS, np.round(15 + 10 * np.abs(z))).astype(np.int64)
    return {"pi": pi, "p": p, "y": y, "p_adv": p_adv, "steps": steps}


def _auc(scores: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> float:
    order = np.argsort(scores)
    pos, neg = positive[order], negative[order]
    return float(np.sum(pos * (np.cumsum(neg) - neg)) / (pos.sum() * neg.sum()))


def _task_ece(p: np.ndarray, expected: np.ndarray) -> float:
    """The task's ECE with each label replaced by its expectation (no bin is empty here)."""
    bins = np.minimum((p * N_BINS).astype(np.int64), N_BINS - 1)
    counts = np.bincount(bins, minlength=N_BINS)
    full = counts > 0
    gap = np.abs(np.bincount(bins, weights=expected, minlength=N_BINS)[full]
                 - np.bincount(bins, weights=p, minlength=N_BINS)[full])  # fmt: skip
    return float(gap.sum() / counts.sum())


@pytest.fixture(scope="module")
def population() -> dict[str, Any]:
    """The population's values, on 400,000 rows (labels' expectations where the truth allows)."""
    rows = _rows(400_000, np.random.RandomState(7))
    p, pi, y = rows["p"], rows["pi"], rows["y"]
    positive, negative = (y == 1).astype(float), (y == 0).astype(float)
    components = {
        "fgsm_robustness": 1.0
        - (_auc(p, positive, negative) - _auc(rows["p_adv"], positive, negative)),
        "membership_inference_resistance": 1.0 - (TPR - FPR),
        "calibration_ece": 1.0 - ECE_SCALE * _task_ece(p, pi),
        "boundary_attack_resistance": float(np.mean(rows["steps"])) / MAX_STEPS,
    }
    return {
        **components,
        "sps": 100.0
        * sum(w * components[c] for w, c in zip(WEIGHTS.as_tuple(), COMPONENTS, strict=True)),
        "auroc": _auc(p, pi, 1.0 - pi),
        "brier": float(np.mean(p**2 - 2.0 * p * pi + pi)),
        "ece": _task_ece(p, pi),
        "p": p,
        "pi": pi,
    }


def _debiased_truth(population: dict[str, Any], p_sample: np.ndarray) -> float:
    """The squared calibration error over the sample's equal-mass bins, on the population."""
    ranked = np.sort(p_sample)
    k = diagnostics.EQUAL_MASS_BINS
    cuts = ranked[(np.arange(1, k) * len(ranked)) // k]
    ids = np.searchsorted(cuts, population["p"], side="right")
    counts = np.bincount(ids, minlength=k)
    full = counts > 0
    gap = (np.bincount(ids, weights=population["p"], minlength=k)[full]
           - np.bincount(ids, weights=population["pi"], minlength=k)[full]) / counts[full]  # fmt: skip
    return float(np.sum(counts[full] * gap**2) / counts.sum())


def _one_audit(
    seed: int, n_test: int = N_TEST, n_boot: int = N_BOOT
) -> tuple[uncertainty.BootstrapResult, np.ndarray]:
    rng = np.random.RandomState(seed)
    rows = _rows(n_test, rng)
    index = np.arange(n_test)
    fgsm = index[: min(2000, n_test // 2)]
    walked = index[:200]
    per_row = replicates.ComponentRows(
        n_test=n_test,
        fgsm=replicates.FGSMRows(fgsm, rows["y"][fgsm], rows["p"][fgsm], rows["p_adv"][fgsm], 0.5),
        membership=replicates.MembershipRows(
            rng.uniform(size=N_MEMBERS) < TPR, index, rng.uniform(size=n_test) < FPR
        ),
        calibration=replicates.CalibrationRows(index, rows["y"], rows["p"], N_BINS, ECE_SCALE),
        walk=replicates.WalkRows(walked, rows["steps"][walked], MAX_STEPS),
    )
    boot = uncertainty.bootstrap(
        per_row, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=n_boot, seed=seed
    )
    return boot, rows["p"]


def _intervals(boot: uncertainty.BootstrapResult) -> dict[str, Any]:
    return {**boot.components, "sps": boot.sps, **boot.diagnostics}


def test_shown_intervals_cover_and_never_exclude_their_point(
    population: dict[str, Any],
) -> None:
    shown: dict[str, int] = {}
    covered: dict[str, int] = {}
    for sample in range(SAMPLES):
        boot, p = _one_audit(1000 + sample)
        truth = {**population, "debiased_l2": _debiased_truth(population, p)}
        for name, interval in _intervals(boot).items():
            if np.isnan(interval.low) or np.isnan(interval.high):
                assert interval.withheld, f"{name}: an interval with no ends must say why"
                continue
            assert interval.low <= interval.point <= interval.high, (
                f"{name}: the interval [{interval.low}, {interval.high}] excludes its point "
                f"{interval.point}"
            )
            shown[name] = shown.get(name, 0) + 1
            covered[name] = covered.get(name, 0) + bool(
                interval.low <= truth[name] <= interval.high
            )
    # Not vacuous: the intervals that hold at this size are shown.
    for name in ("auroc", "brier", "fgsm_robustness", "boundary_attack_resistance"):
        assert shown.get(name, 0) >= SAMPLES - 3, f"{name}: shown {shown.get(name, 0)}/{SAMPLES}"
    for name, count in shown.items():
        if count >= 10:
            rate = covered[name] / count
            assert rate >= 0.6, f"{name}: covered {covered[name]} of {count} shown intervals"


def _interval(point: float = 0.5, low: float = 0.4, high: float = 0.6) -> bca.BCaInterval:
    return bca.BCaInterval(point, low, high, bias=0.0, z0=0.1, acceleration=0.0, n_undefined=0)


def test_a_statistic_measured_not_to_hold_is_shown_without_its_interval_and_says_why(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        coverage,
        "RULES",
        {
            "never": coverage.Measured(None, "it covered 0.40"),
            "large": coverage.Measured(2000, "it covered 0.80 at 500 rows"),
        },
    )
    never = coverage.shown("never", 10_000, _interval())
    assert np.isnan(never.low)
    assert np.isnan(never.high)
    assert never.point == 0.5
    assert never.withheld == (
        "it covered 0.40 (coverage study, benchmarks/bench_owner_coverage.py): no interval is shown"
    )
    small = coverage.shown("large", 500, _interval())
    assert small.withheld == (
        "it covered 0.80 at 500 rows; it holds from 2,000 test rows, and this audit has 500 "
        "(coverage study, benchmarks/bench_owner_coverage.py): no interval is shown"
    )
    assert coverage.shown("large", 2000, _interval()) == _interval()
    assert coverage.shown("unlisted", 150, _interval()) == _interval()
    # An interval already withheld (it excluded its point) keeps that reason.
    excluded = dataclasses.replace(_interval(), low=np.nan, high=np.nan, withheld="excludes")
    assert coverage.shown("never", 150, excluded).withheld == "excludes"


@pytest.mark.parametrize("n_test", [2000, 10_000])
def test_the_verdict_stability_is_read_only_off_an_sps_interval_shown_at_that_size(
    n_test: int,
) -> None:
    boot, _ = _one_audit(5, n_test=n_test, n_boot=100)
    reasons = boot.reasons()
    if coverage.reason("sps", n_test) is None:
        assert not boot.sps.withheld
        assert 0.0 <= boot.verdict_change_probability <= 1.0
        assert "uncertainty.verdict_change_probability" not in reasons
    else:
        assert boot.sps.withheld == coverage.reason("sps", n_test)
        assert np.isnan(boot.verdict_change_probability)
        assert reasons["uncertainty.verdict_change_probability"].startswith("not computed")
    for name in ("ece", "debiased_l2"):
        assert (boot.diagnostics[name].withheld is None) == (coverage.reason(name, n_test) is None)
