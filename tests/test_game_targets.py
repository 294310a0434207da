"""Planting to a drawn evidence number (reference/game/targets.py): the factor solved for a
drawn ECE reaches it, and each probe reads what the reference will measure on the exported
model, so that a planting it stops shows the number drawn (SPEC §8.7)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from pytest_clinaudit.reference.attacks.budget import Budget, training_scale  # noqa: E402
from pytest_clinaudit.reference.game.calibration import calibrate  # noqa: E402
from pytest_clinaudit.reference.game.measure import (  # noqa: E402
    equal_mass_ece,
    loss_attack_auc,
    robustness,
)
from pytest_clinaudit.reference.game.network import new_network  # noqa: E402
from pytest_clinaudit.reference.game.targets import (  # noqa: E402
    Probe,
    ece_of_factor,
    loss_auc_probe,
    pgd_auroc_probe,
    solve_factor,
)
from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier  # noqa: E402

BINS = 15


def _cohort(n: int = 3000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)) * [10.0, 2.0, 1.0, 5.0] + [80.0, 0.0, 3.0, 20.0]
    risk = 0.08 * (X[:, 0] - 80) + 0.6 * X[:, 1] - 2.0
    return X, (rng.random(n) < 1 / (1 + np.exp(-risk))).astype(np.int64)


def _network(X: np.ndarray, seed: int = 0) -> object:
    generator = torch.Generator().manual_seed(seed)
    bounds = (X.min(axis=0), X.max(axis=0))
    module = new_network(bounds, X.mean(axis=0), X.std(axis=0), (16, 16), generator)
    module.eval()
    return module


@pytest.mark.parametrize(
    ("overconfident", "target"), [(True, 0.05), (True, 0.08), (False, 0.12), (False, 0.2)]
)
def test_the_solved_factor_gives_the_drawn_ece(overconfident: bool, target: float) -> None:
    rng = np.random.default_rng(1)
    z = rng.normal(-2.0, 1.5, 20000)
    y = (rng.random(len(z)) < 1 / (1 + np.exp(-z))).astype(np.int64)  # calibrated logits
    factor = solve_factor(z, y, target, overconfident, bins=BINS, limit=50.0)
    assert (factor > 1) == overconfident
    assert ece_of_factor(z, y, factor, BINS) == pytest.approx(target, abs=1e-5)


def test_a_target_beyond_reach_gets_the_factor_at_the_limit() -> None:
    rng = np.random.default_rng(2)
    z = rng.normal(-2.0, 1.5, 5000)
    y = (rng.random(len(z)) < 1 / (1 + np.exp(-z))).astype(np.int64)
    assert solve_factor(z, y, 0.9, True, bins=BINS, limit=3.0) == pytest.approx(3.0)
    assert solve_factor(z, y, 0.9, False, bins=BINS, limit=4.0) == pytest.approx(0.25)


def test_a_probe_reads_every_few_epochs_and_stops_at_its_target() -> None:
    readings = iter([0.9, 0.7, 0.5, 0.3])
    probe = Probe(lambda module: next(readings), 0.6, below=True, every=5)
    module = torch.nn.Linear(1, 1)
    stopped = [e for e in range(20) if probe.reached(module, e)]
    assert stopped[0] == 14  # the third reading, after 15 epochs
    assert probe.seen[:3] == [(5, 0.9), (10, 0.7), (15, 0.5)]
    assert module.training  # left as it found it
    rising = Probe(lambda module: 0.7, 0.65, below=False, every=1)
    assert rising.reached(module, 0)


def test_the_fragility_probe_is_the_references_attack_on_the_same_rows() -> None:
    X, y = _cohort()
    module = _network(X)
    budget = Budget.of(0.5, training_scale(X), std_units=True, clip=True)
    read = pgd_auroc_probe(X[:800], y[:800], budget, steps=10, restarts=2, seed=0)(module)
    # The reference, on the exported model's interface, with the probe's steps and restarts.
    reference = robustness(
        TorchClassifier(module), X[:800], y[:800], budget=budget, steps=10, restarts=2, seed=0
    )
    assert read == pytest.approx(reference.adversarial_auroc, abs=1e-6)
    assert read < reference.clean_auroc  # it attacks


def test_the_leak_probe_reads_the_loss_attack_after_the_calibration_the_build_folds_in() -> None:
    X, y = _cohort(4000)
    module = _network(X, seed=3)
    members, outsiders, held = (X[:500], y[:500]), (X[500:2500], y[500:2500]), (X[2500:], y[2500:])
    read = loss_auc_probe(members, outsiders, held)(module)
    folded = copy.deepcopy(module)
    calibrate(folded, *held)
    reference = loss_attack_auc(TorchClassifier(folded), *members, *outsiders)
    assert read == pytest.approx(reference, abs=1e-6)


def test_the_factor_solved_for_a_model_is_the_ece_the_reference_measures() -> None:
    from pytest_clinaudit.reference.game.measure import probabilities

    X, y = _cohort(6000, seed=4)
    module = _network(X, seed=5)
    held, test = (X[:3000], y[:3000]), (X[3000:], y[3000:])
    z = TorchClassifier(module).logits(held[0])
    from pytest_clinaudit.reference.game.calibration import logistic_calibration

    slope, intercept = logistic_calibration(np.asarray(z, dtype=np.float64), held[1])
    calibrated = slope * np.asarray(TorchClassifier(module).logits(test[0]), np.float64) + intercept
    factor = solve_factor(calibrated, test[1], 0.15, False, bins=BINS, limit=20.0)
    folded = copy.deepcopy(module)
    calibrate(folded, *held, factor)
    measured = equal_mass_ece(probabilities(TorchClassifier(folded), test[0]), test[1], bins=BINS)
    assert measured == pytest.approx(0.15, abs=1e-4)
