"""Own-data sampling: seeded, content-defined, and blind to the file's row order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_clinaudit.reference.attacks.budget import training_scale
from pytest_clinaudit.reference.review import sampling


def _cohort(n: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    X = np.round(rng.standard_normal((n, 4)), 1)  # rounding makes duplicate rows likely
    y = (X[:, 0] > 0.3).astype(np.int64)
    return X, y


def test_permuting_the_training_rows_draws_the_same_rows_in_the_same_order() -> None:
    X, y = _cohort()
    drawn = sampling.sample_rows(X, y, 50, seed=7)
    for permutation_seed in range(5):
        p = np.random.RandomState(100 + permutation_seed).permutation(len(X))
        redrawn = sampling.sample_rows(X[p], y[p], 50, seed=7)
        np.testing.assert_array_equal(X[p][redrawn], X[drawn])
        np.testing.assert_array_equal(y[p][redrawn], y[drawn])


def test_sorting_the_file_by_label_does_not_change_the_membership_rows() -> None:
    X_train, y_train = _cohort(400, seed=1)
    X_test, y_test = _cohort(150, seed=2)
    sample = sampling.membership_sample(X_train, y_train, X_test, y_test, seed=42, pool_cap=200)
    by_label = np.argsort(y_train, kind="stable")
    test_shuffle = np.random.RandomState(3).permutation(len(X_test))
    moved = sampling.membership_sample(
        X_train[by_label],
        y_train[by_label],
        X_test[test_shuffle],
        y_test[test_shuffle],
        seed=42,
        pool_cap=200,
    )
    np.testing.assert_array_equal(X_train[by_label][moved.members], X_train[sample.members])
    np.testing.assert_array_equal(X_train[by_label][moved.pool], X_train[sample.pool])
    np.testing.assert_array_equal(X_test[test_shuffle][moved.nonmembers], X_test[sample.nonmembers])


def test_membership_uses_every_row_of_each_split_up_to_the_cap() -> None:
    X_train, y_train = _cohort(400, seed=1)
    X_test, y_test = _cohort(150, seed=2)
    sample = sampling.membership_sample(X_train, y_train, X_test, y_test, seed=0, pool_cap=1000)
    assert sorted(sample.nonmembers.tolist()) == list(range(150))
    assert sorted(sample.members.tolist()) == list(range(400))
    assert len(sample.pool) == 400  # the cap is above the training size
    # Members and pool are prefixes of one permutation, as the task's are of the file.
    np.testing.assert_array_equal(sample.pool, sample.members)
    capped = sampling.membership_sample(
        X_train, y_train, X_test, y_test, seed=0, pool_cap=100, size=60
    )
    assert (len(capped.members), len(capped.nonmembers), len(capped.pool)) == (60, 60, 100)
    np.testing.assert_array_equal(capped.pool[:60], capped.members)


def test_a_training_set_smaller_than_the_test_set_keeps_every_non_member() -> None:
    X_train, y_train = _cohort(40, seed=1)
    X_test, y_test = _cohort(90, seed=2)
    sample = sampling.membership_sample(X_train, y_train, X_test, y_test, seed=0, pool_cap=500)
    assert (len(sample.members), len(sample.nonmembers)) == (40, 90)


def test_the_draw_is_not_the_first_rows_of_a_file_sorted_by_label() -> None:
    X, y = _cohort(400, seed=4)
    order = np.argsort(y, kind="stable")  # all negatives first
    drawn = sampling.sample_rows(X[order], y[order], 100, seed=42)
    assert 0 < y[order][drawn].sum() < 100


def test_different_seeds_draw_different_rows_and_one_seed_the_same() -> None:
    X, y = _cohort()
    a = sampling.sample_rows(X, y, 30, seed=1)
    np.testing.assert_array_equal(a, sampling.sample_rows(X, y, 30, seed=1))
    assert not np.array_equal(a, sampling.sample_rows(X, y, 30, seed=2))


def test_minus_zero_and_zero_are_the_same_content() -> None:
    X = np.array([[0.0, 1.0], [2.0, 3.0]])
    Y = np.array([[-0.0, 1.0], [2.0, 3.0]])
    np.testing.assert_array_equal(sampling.row_hashes(X), sampling.row_hashes(Y))


def test_a_hash_collision_between_different_rows_is_resolved_by_content(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    X, y = _cohort(60, seed=5)
    # Every row collides: the order must still be a function of the content only.
    monkeypatch.setattr(sampling, "row_hashes", lambda X, y=None: np.zeros(len(X), np.uint64))
    order = sampling.canonical_order(X, y)
    p = np.random.RandomState(9).permutation(len(X))
    np.testing.assert_array_equal(X[p][sampling.canonical_order(X[p], y[p])], X[order])


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 40),
    size=st.integers(0, 50),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_row_order_never_changes_what_is_drawn(
    n: int, size: int, seed: int, data: st.DataObject
) -> None:
    values = data.draw(
        st.lists(st.sampled_from([-1.5, 0.0, 2.0, 7.25]), min_size=2 * n, max_size=2 * n)
    )
    X = np.array(values).reshape(n, 2)
    y = (X[:, 0] > 0).astype(np.int64)
    p = np.array(data.draw(st.permutations(range(n))), dtype=np.int64)
    a = sampling.sample_rows(X, y, size, seed=seed)
    b = sampling.sample_rows(X[p], y[p], size, seed=seed)
    np.testing.assert_array_equal(X[p][b], X[a])
    assert len(a) == min(size, n)
    assert len(set(a.tolist())) == len(a)


def test_the_training_scale_is_the_population_std_and_the_range_of_each_feature() -> None:
    X_train = np.array([[0.0, 10.0, 5.0], [2.0, 30.0, 5.0], [4.0, 50.0, 5.0]])
    scale = training_scale(X_train)
    np.testing.assert_allclose(scale.std, [np.sqrt(8 / 3), np.sqrt(800 / 3), 0.0])
    np.testing.assert_array_equal(scale.low, [0.0, 10.0, 5.0])
    np.testing.assert_array_equal(scale.high, [4.0, 50.0, 5.0])


def test_the_tasks_walk_ignores_the_test_files_order_once_rows_are_put_in_canonical_order() -> None:
    from sklearn.linear_model import LogisticRegression

    from pytest_clinaudit.reference import attacks
    from pytest_clinaudit.reference.attacks.params import BoundaryParams

    # The task's walk draws rows and picks targets in file order; on rows put in
    # canonical order first, the file's order no longer matters.
    X, y = _cohort(200, seed=6)
    model = LogisticRegression().fit(X, y)
    params = BoundaryParams(n_samples=20, seed=42, step_size=0.05, max_steps=100, min_norm=1e-10)

    def steps(rows: np.ndarray, labels: np.ndarray) -> tuple[int, ...]:
        ordered = rows[sampling.canonical_order(rows, labels)]
        result = attacks.boundary_attack_resistance(
            model, ordered, test_predictions=model.predict(ordered), params=params
        )
        return result.steps

    p = np.random.RandomState(1).permutation(len(X))
    assert steps(X[p], y[p]) == steps(X, y)
