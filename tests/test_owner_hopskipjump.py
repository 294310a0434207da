"""Batched HopSkipJump against closed forms and against ART's implementation."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pytest

from pytest_clinaudit.reference.review.hopskipjump import minimal_perturbation_distance

D = 6
STD = np.array([1.0, 2.0, 0.5, 10.0, 1.0, 3.0])


class Hyperplane:
    """Class 1 where ``w . x + b > 0``; counts its predict calls."""

    def __init__(self, w: np.ndarray, b: float) -> None:
        self.w, self.b, self.calls = w, b, 0

    def predict(self, X: np.ndarray) -> np.ndarray:
        self.calls += 1
        return (np.asarray(X) @ self.w + self.b > 0).astype(np.int64)

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        p = 1 / (1 + np.exp(-(np.asarray(X) @ self.w + self.b)))
        return np.column_stack([1 - p, p])

    def exact(self, X: np.ndarray, std: np.ndarray) -> np.ndarray:
        # In u = x / std the rule is (w * std) . u + b: distance |w.x + b| / ||w * std||.
        return np.abs(X @ self.w + self.b) / np.linalg.norm(self.w * std)


class Sphere:
    """Class 1 inside a ball of radius r around c, in standardised units."""

    def __init__(self, centre: np.ndarray, radius: float, std: np.ndarray) -> None:
        self.c, self.r, self.std = centre, radius, std

    def predict(self, X: np.ndarray) -> np.ndarray:
        return (np.linalg.norm(np.asarray(X) / self.std - self.c, axis=1) < self.r).astype(np.int64)

    def exact(self, X: np.ndarray) -> np.ndarray:
        return np.abs(np.linalg.norm(X / self.std - self.c, axis=1) - self.r)


def _rows(n: int, seed: int) -> np.ndarray:
    return np.random.RandomState(seed).standard_normal((n, D)) * STD


def test_distances_to_a_hyperplane_match_the_closed_form_from_above() -> None:
    rng = np.random.RandomState(0)
    model = Hyperplane(rng.standard_normal(D) / STD, 0.3)
    X, reference = _rows(40, 1), _rows(500, 2)
    result = minimal_perturbation_distance(
        model, X, std=STD, reference_rows=reference, reference_predictions=model.predict(reference)
    )
    exact = model.exact(X, STD)
    assert result.found.all()
    assert (result.distance >= exact * (1 - 1e-9)).all()  # every point found is adversarial
    assert np.median(result.distance / exact) < 1.01
    assert (result.distance / exact).max() < 1.05
    flipped = model.predict(result.adversarial) != model.predict(X)
    assert flipped.all()


def test_distances_to_a_sphere_match_the_closed_form_from_above() -> None:
    model = Sphere(np.zeros(D), 1.5, STD)
    X, reference = _rows(40, 3), _rows(500, 4)
    result = minimal_perturbation_distance(
        model, X, std=STD, reference_rows=reference, reference_predictions=model.predict(reference)
    )
    exact = model.exact(X)
    assert (result.distance >= exact * (1 - 1e-9)).all()
    assert np.median(result.distance / exact) < 1.05


def test_the_work_is_batched_a_few_predict_calls_per_iteration_for_all_rows() -> None:
    rng = np.random.RandomState(5)
    model = Hyperplane(rng.standard_normal(D), 0.0)
    X, reference = _rows(30, 6), _rows(200, 7)
    predictions = model.predict(reference)
    model.calls = 0
    result = minimal_perturbation_distance(
        model, X, std=STD, reference_rows=reference, reference_predictions=predictions, n_iter=10
    )
    # Per iteration: gradient probes, step search, 3 bisection rounds; then the start.
    assert model.calls <= 10 * 5 + 6
    assert result.queries > 30 * 10 * 50


def test_a_model_predicting_one_class_everywhere_has_no_distance() -> None:
    class Constant:
        def predict(self, X: np.ndarray) -> np.ndarray:
            return np.zeros(len(X), dtype=np.int64)

        def predict_proba(self, X: np.ndarray) -> np.ndarray:
            return np.tile([1.0, 0.0], (len(X), 1))

    X = _rows(5, 8)
    result = minimal_perturbation_distance(
        Constant(), X, std=STD, reference_rows=X, reference_predictions=np.zeros(5, dtype=np.int64)
    )
    assert not result.found.any()
    assert np.isinf(result.distance).all()
    assert result.summary()["distances"] == [None] * 5


def test_every_query_stays_inside_the_bounds_it_is_given() -> None:
    rng = np.random.RandomState(9)
    inner = Hyperplane(rng.standard_normal(D), 0.2)
    low, high = -2.0 * STD, 2.0 * STD

    class Guarded(Hyperplane):
        def predict(self, X: np.ndarray) -> np.ndarray:
            assert (np.asarray(X) >= low - 1e-9).all()
            assert (np.asarray(X) <= high + 1e-9).all()
            return super().predict(X)

    model = Guarded(inner.w, inner.b)
    X = np.clip(_rows(20, 10), low, high)
    reference = np.clip(_rows(200, 11), low, high)
    result = minimal_perturbation_distance(
        model,
        X,
        std=STD,
        reference_rows=reference,
        reference_predictions=model.predict(reference),
        low=low,
        high=high,
        n_iter=5,
    )
    assert result.found.all()


def _art_distances(
    model: Any, X: np.ndarray, std: np.ndarray, reference: np.ndarray, max_iter: int
) -> tuple[np.ndarray, np.ndarray]:
    """ART's distances (standardised units) and whether ART found an adversarial point.

    ART starts from the same points as ours (the nearest differently predicted
    reference row), so the comparison is of the iterations, not of the start.
    """
    with warnings.catch_warnings():
        # ART warns at import that torch is missing; nothing here needs torch.
        warnings.simplefilter("ignore")
        from art.attacks.evasion import HopSkipJump
        from art.estimators.classification import BlackBoxClassifier

    def predict(U: np.ndarray) -> np.ndarray:
        labels = model.predict(U * std)
        return np.eye(2)[labels]

    # A box (in standardised units) lets ART draw its random starting points.
    classifier = BlackBoxClassifier(
        predict, input_shape=(X.shape[1],), nb_classes=2, clip_values=(-6.0, 6.0)
    )
    attack = HopSkipJump(
        classifier,
        targeted=False,
        norm=2,
        max_iter=max_iter,
        max_eval=400,
        init_eval=50,
        verbose=False,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        U, R = X / std, reference / std
        other = model.predict(reference)[None, :] != model.predict(X)[:, None]
        gaps = np.where(other, ((U[:, None, :] - R[None, :, :]) ** 2).sum(axis=2), np.inf)
        U_adv = attack.generate(U, x_adv_init=R[np.argmin(gaps, axis=1)])
    found = model.predict(U_adv * std) != model.predict(X)
    return np.linalg.norm(U_adv - X / std, axis=1), found


@pytest.mark.parametrize("kind", ["hyperplane", "sphere"])
def test_our_distances_are_no_worse_than_arts_hopskipjump(kind: str) -> None:
    rng = np.random.RandomState(12)
    if kind == "hyperplane":
        model: Any = Hyperplane(rng.standard_normal(D) / STD, 0.3)
        X = _rows(15, 13)
        exact = model.exact(X, STD)
    else:
        model = Sphere(np.zeros(D), 1.5, STD)
        X = _rows(15, 13)
        exact = model.exact(X)
    reference = _rows(300, 14)
    ours = minimal_perturbation_distance(
        model, X, std=STD, reference_rows=reference, reference_predictions=model.predict(reference)
    ).distance
    art, found = _art_distances(model, X, STD, reference, max_iter=20)
    assert found.sum() >= 10
    # Both are upper bounds; ours should be at least as tight, up to a small margin.
    assert (art[found] >= exact[found] * (1 - 1e-6)).all()
    assert np.median(ours[found] / exact[found]) <= np.median(art[found] / exact[found]) + 0.02
