"""FGSM budgets, white-box FGSM and PGD (SPEC §7.2, §7.3) on hand-checkable models."""

from __future__ import annotations

import dataclasses

import nn_helpers
import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pytest_clinaudit.reference import attacks
from pytest_clinaudit.reference.attacks import whitebox
from pytest_clinaudit.reference.attacks.audit import audit
from pytest_clinaudit.reference.attacks.params import (
    FGSMParams,
    SurrogateParams,
    as_dict,
    semantics_of,
)
from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.models.program import export_program
from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

SURROGATE = SurrogateParams(True, 1.0, 100, "none", 42)


def _params(**changes: object) -> FGSMParams:
    return dataclasses.replace(FGSMParams(0.5, 6, 42, 0.5, SURROGATE), **changes)  # type: ignore[arg-type]


class Linear(torch.nn.Module):
    """``f(x) = x @ w + b``: its loss gradient has the sign of ``(sigmoid(f) - y) * w``."""

    def __init__(self, w: list[float], b: float = 0.0) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(w))
        self.b = torch.nn.Parameter(torch.tensor(b))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.w + self.b


def _program(module: torch.nn.Module, d: int) -> TorchClassifier:
    return TorchClassifier.from_bytes(export_program(module, d))


X_TRAIN = np.array([[0.0, 10.0, 5.0], [2.0, 30.0, 5.0], [4.0, 20.0, 5.0]])


# ------------------------------------------------------------------ budgets


def test_absent_optional_keys_leave_the_sps_v1_records_and_their_cache_data_unchanged() -> None:
    params = nn_helpers.variant("wdbc-baseline").params
    assert set(as_dict(params)["fgsm"]) == {
        "epsilon",
        "n_samples",
        "seed",
        "single_class_score",
        "surrogate",
    }
    assert semantics_of(params.fgsm) == "sps-v1"
    assert semantics_of(nn_helpers.variant("wdbc-mlp").params.fgsm) == "sps-v1-wb"


def test_a_raw_unclipped_budget_perturbs_bit_for_bit_as_sps_v1() -> None:
    data = nn_helpers.dataset("wdbc-baseline")
    params = nn_helpers.variant("wdbc-baseline").params.fgsm
    sign = attacks.fit_surrogate_sign(params.surrogate, data.X_train, data.y_train)
    budget = attacks.fgsm_budget(params, data.X_train)
    plain = attacks.fgsm_sample(data.X_test, data.y_test, sign=sign, params=params)
    budgeted = attacks.fgsm_sample(
        data.X_test, data.y_test, sign=sign, params=params, budget=budget
    )
    np.testing.assert_array_equal(plain[0], budgeted[0])
    assert plain[1].tobytes() == budgeted[1].tobytes()


def test_a_std_budget_moves_feature_j_by_epsilon_population_stds() -> None:
    budget = attacks.fgsm_budget(_params(epsilon_units="std"), X_TRAIN)
    # Column stds (ddof=0): sqrt(8/3), sqrt(200/3), 0; a constant feature never moves.
    np.testing.assert_allclose(budget.step, 0.5 * np.sqrt([8 / 3, 200 / 3, 0.0]), rtol=1e-15)
    assert budget.low is None
    assert budget.high is None


def test_train_range_clipping_keeps_every_perturbed_feature_in_the_training_range() -> None:
    budget = attacks.fgsm_budget(_params(epsilon=100.0, clip="train-range"), X_TRAIN)
    moved = attacks.fgsm_perturb(X_TRAIN, np.array([1, 0, 1]), budget.step, np.ones(3))
    clipped = budget.clip(moved)
    np.testing.assert_array_equal(clipped.min(axis=0), [0.0, 10.0, 5.0])
    np.testing.assert_array_equal(clipped.max(axis=0), [4.0, 30.0, 5.0])


def test_the_surrogate_path_takes_std_units_and_clipping_too() -> None:
    data = nn_helpers.dataset("wdbc-baseline")
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(data.X_train, data.y_train)
    raw = _params(epsilon=0.5, n_samples=100)
    std = _params(epsilon=0.5, n_samples=100, epsilon_units="std", clip="train-range")
    sign = attacks.fit_surrogate_sign(SURROGATE, data.X_train, data.y_train)
    _, X_raw = attacks.fgsm_sample(
        data.X_test,
        data.y_test,
        sign=sign,
        params=raw,
        budget=attacks.fgsm_budget(raw, data.X_train),
    )
    idx, X_std = attacks.fgsm_sample(
        data.X_test,
        data.y_test,
        sign=sign,
        params=std,
        budget=attacks.fgsm_budget(std, data.X_train),
    )
    moved = np.abs(X_std - data.X_test[idx])
    low, high = data.X_train.min(axis=0), data.X_train.max(axis=0)
    # Clipping may move a test value that lies outside the training range by more.
    inside = (data.X_test[idx] >= low) & (data.X_test[idx] <= high)
    budget = np.broadcast_to(0.5 * data.X_train.std(axis=0), moved.shape)
    assert (moved[inside] <= budget[inside] * (1 + 1e-12)).all()
    assert (X_std >= low).all()
    assert (X_std <= high).all()
    assert not np.array_equal(X_raw, X_std)
    result = attacks.fgsm_robustness(
        model,
        data.X_test,
        data.y_test,
        sign=sign,
        params=std,
        budget=attacks.fgsm_budget(std, data.X_train),
    )
    assert 0.0 <= result.score <= 1.0


# ---------------------------------------------------------------- white box

X = np.array([[0.0, 0.0, 0.0], [1.0, -1.0, 2.0], [-2.0, 0.5, 0.0], [0.3, 0.3, 0.3]])
Y = np.array([1, 0, 1, 0])
W = [0.7, -1.3, 0.2]


def test_white_box_fgsm_on_a_linear_model_is_the_surrogate_rule_with_its_weights() -> None:
    model = _program(Linear(W), 3)
    params = _params(gradient="model", n_samples=4)
    budget = attacks.fgsm_budget(params, X_TRAIN)
    idx, X_adv = whitebox.fgsm_whitebox_sample(model, X, Y, params=params, budget=budget)
    # The loss rises by moving a positive against sign(w) and a negative along it.
    expected = attacks.fgsm_perturb(X[idx], Y[idx], budget.step, np.sign(W))
    np.testing.assert_array_equal(X_adv, expected)


def test_pgd_on_a_linear_model_ends_in_the_corner_fgsm_jumps_to() -> None:
    model = _program(Linear(W), 3)
    budget = attacks.Budget(np.array([0.5, 0.2, 0.1]))
    for steps in (1, 3, 10):
        corner = attacks.fgsm_perturb(X, Y, budget.step, np.sign(W))
        np.testing.assert_allclose(
            whitebox.pgd_perturb(model, X, Y, budget=budget, steps=steps), corner, atol=1e-15
        )


def test_pgd_stays_in_the_box_and_the_training_range() -> None:
    data = nn_helpers.dataset("wdbc-mlp")
    model = nn_helpers.built("wdbc-mlp").artifact.load()
    params = nn_helpers.variant("wdbc-mlp").params.fgsm
    budget = attacks.fgsm_budget(params, data.X_train)
    assert budget.low is not None
    assert budget.high is not None
    X0, y0 = data.X_test[:40], data.y_test[:40]
    X_adv = whitebox.pgd_perturb(model, X0, y0, budget=budget, steps=7)
    assert (np.abs(X_adv - X0) <= budget.step * (1 + 1e-12)).all()
    assert (X_adv >= budget.low).all()
    assert (X_adv <= budget.high).all()


def test_a_saturated_confidently_right_row_has_a_zero_gradient_and_does_not_move() -> None:
    # f = 40 on a positive row: sigmoid(40) rounds to 1.0 in float32, so the
    # loss gradient (sigmoid(f) - 1) * w is exactly 0 and FGSM cannot move it.
    model = _program(Linear([1.0, 0.0, 0.0], b=40.0), 3)
    params = _params(gradient="model", n_samples=2)
    rows, labels = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), np.array([1, 0])
    idx, X_adv = whitebox.fgsm_whitebox_sample(
        model, rows, labels, params=params, budget=attacks.Budget(np.full(3, 0.5))
    )
    saturated = int(np.flatnonzero(idx == 0)[0])
    np.testing.assert_array_equal(X_adv[saturated], rows[0])
    np.testing.assert_array_equal(X_adv[1 - saturated], [0.5, 1.0, 0.0])  # the negative moves
    assert model.loss_gradient(rows[:1], labels[:1]).tolist() == [[0.0, 0.0, 0.0]]


def test_white_box_fgsm_names_the_model_it_cannot_differentiate() -> None:
    data = nn_helpers.dataset("wdbc-mlp")
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(data.X_train, data.y_train)
    with pytest.raises(
        TypeError,
        match="needs a differentiable model such as a loaded model.pt2; got Pipeline",
    ):
        audit(model, data, nn_helpers.variant("wdbc-mlp").params)


def test_a_white_box_audit_reports_the_spec_diagnostics_and_its_semantics() -> None:
    details = nn_helpers.audited("wdbc-mlp").details
    assert details["semantics"] == "sps-v1-wb"
    for key in ("pgd_auroc_adversarial", "loss_attack_auc", "loss_attack_tpr_at_1pct_fpr"):
        assert 0.0 <= details[key] <= 1.0, key
    assert details["pgd_steps"] == nn_helpers.variant("wdbc-mlp").params.fgsm.pgd_steps
    assert details["parameters"]["fgsm"]["gradient"] == "model"


def test_the_pgd_diagnostic_needs_a_step_count() -> None:
    data = Dataset("t", "label", ("a", "b", "c"), X_TRAIN, np.array([0, 1, 0]), X, Y)
    with pytest.raises(ValueError, match="fgsm.pgd_steps is not set"):
        whitebox.pgd_auroc(
            _program(Linear(W), 3),
            data.X_test,
            data.y_test,
            params=_params(),
            budget=attacks.Budget(np.ones(3)),
        )
