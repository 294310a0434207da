"""Hypothesis: the auditor on generated problems, against the oracle and the invariants."""

from __future__ import annotations

import dataclasses
import math

import literal_oracle
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from xgboost import XGBClassifier

from pytest_clinaudit.reference import attacks
from pytest_clinaudit.reference.attacks.audit import audit
from pytest_clinaudit.reference.attacks.params import (
    COMPONENTS,
    AuditParams,
    BoundaryParams,
    CalibrationParams,
    FGSMParams,
    MembershipParams,
    SurrogateParams,
    VerdictThresholds,
    Weights,
)
from pytest_clinaudit.reference.attacks.sps import (
    VERDICTS,
    rounded_report,
    security_posture_score,
    verdict,
)
from pytest_clinaudit.reference.data import Dataset

SMALL = AuditParams(
    fgsm=FGSMParams(0.3, 15, 42, 0.5, SurrogateParams(True, 1.0, 500, "none", 42)),
    membership_inference=MembershipParams(40, 0.5, 2, 42, 5, 3, "balanced", 42, 5, 42, 15, 0.5),
    calibration=CalibrationParams(10, 12.0),
    boundary=BoundaryParams(8, 42, 0.2, 30, 1e-10),
    weights=Weights(0.35, 0.25, 0.20, 0.20),
    verdict=VerdictThresholds(80.0, 65.0),
)

MODELS = {
    "logistic_regression": lambda: LogisticRegression(max_iter=500),
    "random_forest": lambda: RandomForestClassifier(n_estimators=8, max_depth=4, random_state=0),
    "xgboost": lambda: XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1, verbosity=0),
}


@st.composite
def problems(draw: st.DrawFn) -> Dataset:
    """A small binary problem with both classes in train and test."""
    seed = draw(st.integers(0, 2**31 - 1))
    n_train = draw(st.integers(24, 70))
    n_test = draw(st.integers(12, 40))
    d = draw(st.integers(2, 5))
    rng = np.random.default_rng(seed)
    w = rng.normal(size=d)
    X = rng.normal(size=(n_train + n_test, d)) * rng.uniform(0.5, 3, size=d)
    score = X @ w + rng.normal(scale=draw(st.sampled_from([0.1, 1.0, 3.0])), size=len(X))
    y = (score > np.median(score)).astype(int)
    train, test = np.arange(n_train), np.arange(n_train, n_train + n_test)
    assume(0 < y[train].sum() < n_train and 0 < y[test].sum() < n_test)
    return Dataset(
        "generated", "label", tuple(f"x{i}" for i in range(d)), X[train], y[train], X[test], y[test]
    )


def _differential(kind: str, data: Dataset) -> None:
    model = MODELS[kind]().fit(data.X_train, data.y_train)
    result = audit(model, data, SMALL)
    expected = literal_oracle.audit(
        model, data.X_train, data.y_train, data.X_test, data.y_test, SMALL
    )
    assert result.components["fgsm_robustness"] == pytest.approx(
        expected["fgsm"]["score"], abs=1e-12
    )
    assert result.components["membership_inference_resistance"] == expected["membership"]["score"]
    assert result.components["calibration_ece"] == pytest.approx(
        expected["calibration"]["score"], abs=1e-12
    )
    assert list(result.details["steps_to_flip"]) == expected["boundary"]["steps"]
    assert result.sps == pytest.approx(expected["sps"], abs=1e-9)
    for name in COMPONENTS:
        assert 0.0 <= result.components[name] <= 1.0
    assert 0.0 <= result.sps <= 100.0


slow_examples = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow],
)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(MODELS))
@given(data=problems())
@slow_examples
def test_vectorized_auditor_equals_the_oracle_on_generated_problems(
    kind: str, data: Dataset
) -> None:
    _differential(kind, data)


# --------------------------------------------------------------- closed form


def _closed_form_steps(
    w: np.ndarray, b: float, x: np.ndarray, t: np.ndarray, params: BoundaryParams
) -> tuple[int, float]:
    """First k whose point x + k·step·u lies across the hyperplane, and how far the
    crossing is from a whole step (to skip knife edges where rounding decides)."""
    u = (t - x) / np.linalg.norm(t - x)
    f0, slope = float(w @ x + b), float(params.step_size * (w @ u))
    crossing = -f0 / slope  # g(k) = f0 + k * slope changes sign here
    k = math.floor(crossing) + 1 if f0 <= 0 else math.ceil(crossing)
    return min(max(k, 1), params.max_steps), abs(crossing - round(crossing))


@given(data=problems(), step=st.sampled_from([0.05, 0.1, 0.3]))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
def test_for_a_logistic_regression_the_walk_crosses_the_hyperplane_at_the_closed_form_step(
    data: Dataset, step: float
) -> None:
    model = LogisticRegression(max_iter=500).fit(data.X_train, data.y_train)
    params = BoundaryParams(n_samples=10, seed=1, step_size=step, max_steps=100, min_norm=1e-10)
    predictions = model.predict(data.X_test)
    result = attacks.boundary_attack_resistance(
        model, data.X_test, test_predictions=predictions, params=params
    )
    w, b = model.coef_[0], float(model.intercept_[0])
    idx = np.random.RandomState(params.seed).choice(
        data.n_test, min(10, data.n_test), replace=False
    )
    for i, steps in zip(idx, result.steps, strict=True):
        others = np.flatnonzero(predictions != predictions[i])
        if others.size == 0:
            assert steps == params.max_steps  # no row predicted otherwise: no target
            continue
        target = int(others[0])
        expected, slack = _closed_form_steps(w, b, data.X_test[i], data.X_test[target], params)
        if slack < 1e-6:
            continue  # the crossing sits on a step; accumulated rounding decides
        assert steps == expected


# ----------------------------------------------------------------- SPS, verdict

unit = st.floats(0.0, 1.0)
components = st.fixed_dictionaries(dict.fromkeys(COMPONENTS, unit))


@st.composite
def weights(draw: st.DrawFn) -> Weights:
    raw = [draw(st.integers(0, 100)) for _ in COMPONENTS]
    assume(sum(raw) > 0)
    return Weights(*(r / sum(raw) for r in raw))


@given(c=components, w=weights())
def test_sps_is_the_weighted_sum_and_stays_in_0_100(c: dict[str, float], w: Weights) -> None:
    sps = security_posture_score(c, w)
    assert sps == pytest.approx(
        100 * sum(wi * c[n] for n, wi in zip(COMPONENTS, w.as_tuple(), strict=True))
    )
    assert -1e-9 <= sps <= 100 + 1e-9


@given(c=components, name=st.sampled_from(COMPONENTS), delta=st.floats(0, 1))
def test_sps_never_decreases_when_a_component_improves(
    c: dict[str, float], name: str, delta: float
) -> None:
    w = SMALL.weights
    better = dict(c, **{name: min(1.0, c[name] + delta)})
    assert security_posture_score(better, w) >= security_posture_score(c, w) - 1e-12


@given(sps=st.floats(0, 100), cut=st.tuples(st.floats(0, 100), st.floats(0, 100)))
def test_verdict_follows_the_thresholds(sps: float, cut: tuple[float, float]) -> None:
    low, high = sorted(cut)
    thresholds = VerdictThresholds(production=high, conditional=low)
    expected = "PRODUCTION" if sps >= high else "CONDITIONAL" if sps >= low else "NOT RECOMMENDED"
    assert verdict(sps, thresholds) == expected
    assert verdict(sps, thresholds) in VERDICTS


@given(c=components)
def test_the_rounded_report_is_consistent_with_its_own_numbers(c: dict[str, float]) -> None:
    report = rounded_report(c, SMALL.weights, SMALL.verdict)
    assert report["sps"] == round(security_posture_score(c, SMALL.weights), 2)
    assert report["verdict"] == verdict(report["sps"], SMALL.verdict)
    assert all(report["components"][n] == round(c[n], 4) for n in COMPONENTS)


# ------------------------------------------------------------- per component

PROPERTY_CHECKS = {
    "fgsm_robustness": "test_fgsm_score_is_bounded_and_is_one_without_an_auroc_drop",
    "membership_inference_resistance": "test_membership_score_is_bounded_and_falls_as_accuracy_rises",
    "calibration_ece": "test_calibration_score_is_bounded_and_invariant_to_row_order",
    "boundary_attack_resistance": "test_boundary_score_is_bounded_and_invariant_to_the_label",
}


def test_every_component_has_a_property_test() -> None:
    assert set(PROPERTY_CHECKS) == set(COMPONENTS)
    for test_name in PROPERTY_CHECKS.values():
        assert callable(globals()[test_name])


@given(y=st.lists(st.integers(0, 1), min_size=2, max_size=40), data=st.data())
def test_fgsm_score_is_bounded_and_is_one_without_an_auroc_drop(
    y: list[int], data: st.DataObject
) -> None:
    assume(0 < sum(y) < len(y))
    p = np.array(data.draw(st.lists(unit, min_size=len(y), max_size=len(y))))
    q = np.array(data.draw(st.lists(unit, min_size=len(y), max_size=len(y))))
    result = attacks.fgsm_score(np.array(y), p, q, params=SMALL.fgsm)
    assert 0.0 <= result.score <= 1.0
    assert attacks.fgsm_score(np.array(y), p, p, params=SMALL.fgsm).score == 1.0


@given(accuracies=st.lists(st.integers(0, 40), min_size=2, max_size=2))
def test_membership_score_is_bounded_and_falls_as_accuracy_rises(accuracies: list[int]) -> None:
    params = dataclasses.replace(SMALL.membership_inference, threshold=0.5)

    class Fixed:
        def __init__(self, correct: int) -> None:
            self.correct = correct

        def predict_proba(self, X: np.ndarray) -> np.ndarray:
            truth = np.r_[np.ones(20), np.zeros(20)]
            guess = truth.copy()
            guess[self.correct :] = 1 - guess[self.correct :]
            return np.column_stack([1 - guess, guess])

    queries = np.zeros((20, 2))
    low, high = sorted(accuracies)
    s_low = attacks.membership_score(Fixed(low), queries, queries, n_pool=40, params=params).score
    s_high = attacks.membership_score(Fixed(high), queries, queries, n_pool=40, params=params).score
    assert 0.0 <= s_high <= s_low <= 1.0


@given(y=st.lists(st.integers(0, 1), min_size=1, max_size=60), data=st.data())
def test_calibration_score_is_bounded_and_invariant_to_row_order(
    y: list[int], data: st.DataObject
) -> None:
    p = np.array(data.draw(st.lists(unit, min_size=len(y), max_size=len(y))))
    order = np.array(data.draw(st.permutations(range(len(y)))))
    result = attacks.calibration(np.array(y), p, params=SMALL.calibration)
    shuffled = attacks.calibration(np.array(y)[order], p[order], params=SMALL.calibration)
    assert 0.0 <= result.score <= 1.0
    assert 0.0 <= result.ece <= 1.0
    assert shuffled.ece == pytest.approx(result.ece, abs=1e-12)


@given(data=problems())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
def test_boundary_score_is_bounded_and_invariant_to_the_label(data: Dataset) -> None:
    model = LogisticRegression(max_iter=500).fit(data.X_train, data.y_train)
    predictions = model.predict(data.X_test)
    result = attacks.boundary_attack_resistance(
        model, data.X_test, test_predictions=predictions, params=SMALL.boundary
    )
    assert 0.0 <= result.score <= 1.0
    assert all(1 <= s <= SMALL.boundary.max_steps for s in result.steps)
    # The walk never reads the labels: flipping them changes nothing.
    flipped = Dataset(
        data.name,
        data.label,
        data.feature_names,
        data.X_train,
        data.y_train,
        data.X_test,
        1 - data.y_test,
    )
    again = attacks.boundary_attack_resistance(
        model, flipped.X_test, test_predictions=predictions, params=SMALL.boundary
    )
    assert again.steps == result.steps
