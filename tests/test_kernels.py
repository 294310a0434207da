"""Numeric kernels on tiny hand-computed cases, and against scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.calibration import calibration_curve

from pytest_clinaudit.reference import attacks
from pytest_clinaudit.reference.attacks.params import (
    BoundaryParams,
    CalibrationParams,
    MembershipParams,
)

EDGES = np.linspace(0.0, 1.0, 11)


class Constant:
    """A model that predicts one class everywhere."""

    def __init__(self, label: int) -> None:
        self.label = label

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.full(len(X), self.label)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return np.tile([1.0 - self.label, float(self.label)], (len(X), 1))


class Threshold:
    """Class 1 where the first feature exceeds ``at``."""

    def __init__(self, at: float) -> None:
        self.at = at

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X)[:, 0] > self.at).astype(int)


def test_task_ece_pairs_counts_with_the_wrong_bins_when_a_middle_bin_is_empty() -> None:
    prob = np.array([0.05, 0.05, 0.25, 0.95])
    y = np.array([0, 1, 1, 1])
    # Curve bins: [0.0,0.1) -> (0.5, 0.05); [0.2,0.3) -> (1, 0.25); [0.9,1] -> (1, 0.95).
    # Counts by index, truncated to 3 entries: [2, 0, 1]. So the 0 of bin 1 is paired
    # with the curve's second bin and the 1 of bin 2 with the curve's third.
    expected = 2 / 3 * 0.45 + 0 / 3 * 0.75 + 1 / 3 * 0.05
    assert attacks.task_ece(y, prob, 10) == pytest.approx(expected, abs=1e-15)
    # The aligned diagnostic pairs them correctly: (|1 - 0.1| + |1 - 0.25| + |1 - 0.95|) / 4.
    assert attacks.aligned_ece(y, prob, 10) == pytest.approx((0.9 + 0.75 + 0.05) / 4)


def test_a_probability_of_exactly_one_is_never_counted() -> None:
    prob = np.array([1.0, 1.0, 0.05])
    y = np.array([1, 1, 0])
    # Curve: [0,0.1) -> (0, 0.05); top bin -> (1, 1.0). Counts [1, 0]: 1.0 is in no
    # half-open bin, so only the first term remains.
    assert attacks.task_ece(y, prob, 10) == pytest.approx(0.05, abs=1e-15)


def test_an_inner_edge_value_is_binned_low_by_the_curve_and_high_by_the_counts() -> None:
    edge = EDGES[3]  # 0.30000000000000004, the edge as np.linspace spells it
    frac, mean = attacks.calibration_curve_uniform(np.array([1]), np.array([edge]), 10)
    assert (frac.tolist(), mean.tolist()) == ([1.0], [edge])  # one non-empty bin: [0.2, 0.3]
    # The counts put it in bin 3, which truncation to one entry drops: total 0, ECE 0.
    assert attacks.task_ece(np.array([1]), np.array([edge]), 10) == 0.0


def test_calibration_score_is_one_minus_scaled_ece_floored_at_zero() -> None:
    params = CalibrationParams(n_bins=10, ece_scale=12.0)
    assert attacks.calibration_score(0.0, params) == 1.0
    assert attacks.calibration_score(0.05, params) == pytest.approx(0.4)
    assert attacks.calibration_score(0.2, params) == 0.0


probabilities = hnp.arrays(
    np.float64,
    st.integers(1, 60),
    elements=st.one_of(st.sampled_from([0.0, 1.0, *EDGES.tolist(), 0.3, 0.7]), st.floats(0, 1)),
)


@given(prob=probabilities, data=st.data())
@settings(max_examples=200, deadline=None)
def test_numpy_calibration_curve_equals_scikit_learn(prob: np.ndarray, data: st.DataObject) -> None:
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=len(prob), max_size=len(prob))))
    ours = attacks.calibration_curve_uniform(y, prob, 10)
    theirs = calibration_curve(y, prob, n_bins=10, strategy="uniform")
    np.testing.assert_array_equal(ours[0], theirs[0])
    np.testing.assert_array_equal(ours[1], theirs[1])


@given(prob=probabilities, data=st.data())
@settings(max_examples=200, deadline=None)
def test_task_ece_equals_the_literal_loop(prob: np.ndarray, data: st.DataObject) -> None:
    y = np.array(data.draw(st.lists(st.integers(0, 1), min_size=len(prob), max_size=len(prob))))
    frac, mean = calibration_curve(y, prob, n_bins=10, strategy="uniform")
    counts = [sum(1 for p in prob if EDGES[k] <= p < EDGES[k + 1]) for k in range(10)][: len(frac)]
    total = sum(counts)
    literal = (
        sum(c / total * abs(f - m) for c, f, m in zip(counts, frac, mean, strict=True))
        if total
        else 0.0
    )
    assert attacks.task_ece(y, prob, 10) == pytest.approx(literal, abs=1e-15)
    assert 0.0 <= attacks.task_ece(y, prob, 10) <= 1.0


def test_fgsm_moves_positives_against_the_sign_and_negatives_along_it() -> None:
    X = np.array([[1.0, 1.0], [1.0, 1.0]])
    y = np.array([1, 0])
    sign = np.array([1.0, -1.0])
    moved = attacks.fgsm_perturb(X, y, 0.5, sign)
    np.testing.assert_array_equal(moved, [[0.5, 1.5], [1.5, 0.5]])


def test_fgsm_scores_a_single_class_sample_with_the_configured_coin_flip() -> None:
    from pytest_clinaudit.reference.attacks.params import FGSMParams, SurrogateParams

    params = FGSMParams(0.1, 5, 42, 0.5, SurrogateParams(True, 1.0, 100, "none", 42))
    result = attacks.fgsm_score(np.ones(5, dtype=int), np.ones(5), np.ones(5), params=params)
    assert (result.score, result.single_class, result.auroc_clean) == (0.5, True, None)


def test_membership_score_is_one_at_or_below_chance_and_zero_for_a_perfect_attack() -> None:
    params = MembershipParams(10, 0.5, 1, 42, 5, 3, "balanced", 42, 5, 42, 10, 0.5)

    class Oracle:
        def __init__(self, answer: float) -> None:
            self.answer = answer

        def predict_proba(self, X: np.ndarray) -> np.ndarray:
            # Members were queried first: answer "member" for the first half.
            p = np.where(np.arange(len(X)) < len(X) // 2, self.answer, 1 - self.answer)
            return np.column_stack([1 - p, p])

    member = nonmember = np.zeros((4, 2))
    assert (
        attacks.membership_score(Oracle(1.0), member, nonmember, n_pool=10, params=params).score
        == 0.0
    )
    assert (
        attacks.membership_score(Oracle(0.0), member, nonmember, n_pool=10, params=params).score
        == 1.0
    )


WALK = BoundaryParams(n_samples=5, seed=0, step_size=0.05, max_steps=100, min_norm=1e-10)


def test_a_model_with_one_prediction_everywhere_resists_for_all_max_steps() -> None:
    X = np.random.RandomState(0).normal(size=(20, 3))
    model = Constant(1)
    result = attacks.boundary_attack_resistance(
        model, X, test_predictions=model.predict(X), params=WALK
    )
    assert result.steps == (100,) * 5
    assert result.score == 1.0
    assert result.n_candidates == 0


def test_the_walk_counts_steps_to_a_threshold_along_the_first_differing_row() -> None:
    # Points on a line, a threshold at 0.5 and a step of 1/8: all exact in binary.
    # Row 0 is the first row predicted 1 (the target of class-0 rows), row 1 the
    # first predicted 0 (the target of row 0).
    X = np.array([[1.0, 0.0], [0.0, 0.0], [0.25, 0.0], [0.375, 0.0], [-1.0, 0.0]])
    model = Threshold(0.5)
    params = BoundaryParams(n_samples=5, seed=3, step_size=0.125, max_steps=100, min_norm=1e-10)
    result = attacks.boundary_attack_resistance(
        model, X, test_predictions=model.predict(X), params=params
    )
    # 1.0 -> 0.875, 0.75, 0.625, 0.5 (not above 0.5): flips at step 4. Class-0 rows
    # need the first point above 0.5: 0.625 is 5 steps from 0.0, 3 from 0.25,
    # 2 from 0.375 and 13 from -1.0.
    by_row = {0: 4, 1: 5, 2: 3, 3: 2, 4: 13}
    idx = np.random.RandomState(3).choice(5, 5, replace=False)
    assert result.steps == tuple(by_row[int(i)] for i in idx)
    assert result.mean_steps == pytest.approx(27 / 5)


@given(
    rows=hnp.arrays(
        np.float64, st.tuples(st.integers(1, 12), st.integers(1, 6)), elements=st.floats(-1e3, 1e3)
    ),
)
@settings(max_examples=100, deadline=None)
def test_walk_norms_are_bit_for_bit_numpy_linalg_norm(rows: np.ndarray) -> None:
    targets = rows[::-1].copy() + 1.0
    params = BoundaryParams(
        n_samples=len(rows), seed=0, step_size=0.05, max_steps=3, min_norm=1e-10
    )
    candidates, stop = attacks.walk_candidates(rows, targets, params)
    for i in range(len(rows)):
        current = rows[i].copy()
        for step in range(params.max_steps):
            d = targets[i] - current
            norm = np.linalg.norm(d)
            if norm < params.min_norm:
                assert stop[i] == step
                break
            current = current + params.step_size * d / norm
            np.testing.assert_array_equal(candidates[step, i], current)
