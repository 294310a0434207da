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
    assert semantics_of(nn_helpers.variant("wdbc-mlp").params.fgsm) == "sps-v1-wb2"


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


class ReLUOfLinear(torch.nn.Module):
    """``f(x) = relu(x @ w)``: a row with ``x @ w < 0`` has an all-zero logit gradient."""

    def __init__(self, w: list[float]) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(w))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.w)


def test_white_box_fgsm_on_a_linear_model_is_the_surrogate_rule_with_its_weights() -> None:
    model = _program(Linear(W), 3)
    params = _params(gradient="model", n_samples=4)
    budget = attacks.fgsm_budget(params, X_TRAIN)
    sample = whitebox.fgsm_whitebox_sample(model, X, Y, params=params, budget=budget)
    # A positive moves against sign(w), a negative along it: the direction is
    # (1 - 2y) sign(w) on every row, as the surrogate rule with the model's weights.
    expected = attacks.fgsm_perturb(X[sample.idx], Y[sample.idx], budget.step, np.sign(W))
    np.testing.assert_array_equal(sample.X_adv, expected)
    np.testing.assert_array_equal(sample.direction, (1 - 2 * Y[sample.idx])[:, None] * np.sign(W))
    assert sample.zero_gradient_fraction == 0.0


def test_a_saturated_confidently_right_row_still_moves_along_its_logit_gradient() -> None:
    # f = 40 on a positive row: sigmoid(40) rounds to 1.0 in float32, so the
    # cross-entropy gradient (sigmoid(f) - 1) * w is exactly 0 there ("sps-v1-wb"
    # moved such a row nothing). The logit gradient is w; the row moves against it.
    module = Linear([1.0, 0.0, -2.0], b=40.0)
    model = _program(module, 3)
    rows, labels = np.array([[0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]), np.array([1, 0])
    x = torch.tensor(rows[:1], dtype=torch.float32, requires_grad=True)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(module(x), torch.ones(1))
    assert torch.autograd.grad(loss, x)[0].tolist() == [[0.0, 0.0, 0.0]]
    direction = whitebox.fgsm_direction(model, rows, labels)
    np.testing.assert_array_equal(direction, [[-1.0, 0.0, 1.0], [1.0, 0.0, -1.0]])
    assert whitebox.zero_gradient_fraction(direction) == 0.0


def test_a_row_whose_logit_gradient_is_all_zero_does_not_move_and_is_counted() -> None:
    model = _program(ReLUOfLinear([1.0, 1.0, 1.0]), 3)
    rows = np.array([[-1.0, -1.0, -1.0], [1.0, 0.0, 0.0], [-2.0, 0.0, 0.0], [0.5, 0.5, 0.5]])
    params = _params(gradient="model", n_samples=4)
    sample = whitebox.fgsm_whitebox_sample(
        model, rows, np.array([1, 0, 0, 1]), params=params, budget=attacks.Budget(np.ones(3))
    )
    dead = np.isin(sample.idx, [0, 2])  # x @ w < 0: relu's gradient is 0
    np.testing.assert_array_equal(sample.X_adv[dead], rows[sample.idx][dead])
    assert not np.array_equal(sample.X_adv[~dead], rows[sample.idx][~dead])
    assert sample.zero_gradient_fraction == 0.5


def _margins(model: TorchClassifier, X_adv: np.ndarray, y: np.ndarray) -> np.ndarray:
    margins: np.ndarray = (1 - 2 * y) * model.logits(X_adv).astype(np.float64)
    return margins


def test_margin_pgd_on_a_linear_model_ends_in_the_corner_fgsm_jumps_to() -> None:
    model = _program(Linear(W), 3)
    budget = attacks.Budget(np.array([0.5, 0.2, 0.1]))
    corner = attacks.fgsm_perturb(X, Y, budget.step, np.sign(W))
    for steps in (1, 3, 10):
        for restarts in (1, 4):
            adversarial = whitebox.margin_pgd(
                model, X, Y, budget=budget, steps=steps, restarts=restarts, seed=0
            )
            # alpha = 2.5 e / steps: ceil(steps / 2.5) steps reach the corner, and
            # every start reaches it: a linear margin has its maximum there.
            np.testing.assert_allclose(adversarial, corner, atol=1e-15)


def test_margin_pgd_repeats_with_its_seed_and_needs_a_step_and_a_restart() -> None:
    model = _program(ReLUOfLinear([1.0, -0.5, 0.25]), 3)
    budget = attacks.Budget(np.full(3, 0.8))
    once = whitebox.margin_pgd(model, X, Y, budget=budget, steps=5, restarts=3, seed=7)
    again = whitebox.margin_pgd(model, X, Y, budget=budget, steps=5, restarts=3, seed=7)
    np.testing.assert_array_equal(once, again)
    with pytest.raises(ValueError, match="steps and restarts must be >= 1, got 0 and 3"):
        whitebox.margin_pgd(model, X, Y, budget=budget, steps=0, restarts=3, seed=7)


def test_white_box_fgsm_names_the_model_it_cannot_differentiate() -> None:
    data = nn_helpers.dataset("wdbc-mlp")
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(data.X_train, data.y_train)
    with pytest.raises(
        TypeError,
        match="needs a differentiable model such as a loaded model.pt2; got Pipeline",
    ):
        audit(model, data, nn_helpers.variant("wdbc-mlp").params)


def test_the_strong_pgd_needs_steps_and_restarts() -> None:
    data = Dataset("t", "label", ("a", "b", "c"), X_TRAIN, np.array([0, 1, 0]), X, Y)
    with pytest.raises(ValueError, match="fgsm.pgd_steps and fgsm.pgd_restarts are not both set"):
        whitebox.strong_pgd_auroc(
            _program(Linear(W), 3),
            data.X_test,
            data.y_test,
            params=_params(pgd_steps=50),
            budget=attacks.Budget(np.ones(3)),
        )


# ------------------------------------- the torch variants: Carlini et al. 2019's checklist

TORCH = nn_helpers.cases(nn_helpers.WDBC_MLP + nn_helpers.ICU_MLP + nn_helpers.FLCHAIN_MLP)
FLOAT32_MARGIN = 1e-4
"""Two evaluations of one row's logit in different float32 orders differ by far less
(a few ulps of |logit| <= ~100, i.e. < 1e-4): below it, two margins are "equal"."""


def _fgsm_rows(name: str) -> tuple[TorchClassifier, np.ndarray, np.ndarray, attacks.Budget]:
    """The variant's program, its FGSM rows and their labels, and its budget."""
    variant, data = nn_helpers.variant(name), nn_helpers.dataset(name)
    idx = attacks.draw_rows(variant.params.fgsm.seed, data.n_test, variant.params.fgsm.n_samples)
    budget = attacks.fgsm_budget(variant.params.fgsm, data.X_train)
    return nn_helpers.built(name).artifact.load(), data.X_test[idx], data.y_test[idx], budget


def _auroc(model: TorchClassifier, X_adv: np.ndarray, y: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, model.predict_proba(X_adv)[:, 1]))


@pytest.mark.slow
def test_a_white_box_audit_reports_the_spec_diagnostics_and_its_semantics() -> None:
    details = nn_helpers.audited("wdbc-mlp").details
    fgsm = nn_helpers.variant("wdbc-mlp").params.fgsm
    assert details["semantics"] == "sps-v1-wb2"
    for key in ("pgd_auroc_adversarial", "loss_attack_auc", "loss_attack_tpr_at_1pct_fpr"):
        assert 0.0 <= details[key] <= 1.0, key
    assert (details["pgd_steps"], details["pgd_restarts"]) == (fgsm.pgd_steps, fgsm.pgd_restarts)
    assert details["zero_gradient_fraction"] == 0.0
    assert details["parameters"]["fgsm"]["gradient"] == "model"


@pytest.mark.slow
@pytest.mark.parametrize("name", TORCH)
def test_no_drawn_row_has_a_zero_logit_gradient(name: str) -> None:
    # wdbc-mlp-dp had 49 of its 100 rows at a zero cross-entropy gradient under sps-v1-wb.
    assert nn_helpers.audited(name).details["zero_gradient_fraction"] == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("name", TORCH)
def test_the_iterative_attack_is_never_weaker_than_the_single_step(name: str) -> None:
    """Carlini et al. 2019: strong PGD's AUROC is at most FGSM's on the same rows.

    Rounding cannot turn this around: both AUROCs come from the same chunked
    evaluation of each row, and an adversarial row's margin either is higher or not.
    """
    details = nn_helpers.audited(name).details
    assert details["pgd_auroc_adversarial"] <= details["auroc_adversarial"]


@pytest.mark.slow
@pytest.mark.parametrize("name", TORCH)
def test_more_restarts_are_never_weaker(name: str) -> None:
    """Restart r uses the same starting point whatever the number of restarts (one
    uniform draw, in order), so five restarts contain the one, row by row: every
    row's margin is at least as high, and so the AUROC at most as high."""
    model, X_rows, y, budget = _fgsm_rows(name)
    steps = nn_helpers.variant(name).params.fgsm.pgd_steps
    assert steps is not None
    margins, aurocs = [], []
    for restarts in (1, 2, 5):
        X_adv = whitebox.margin_pgd(
            model, X_rows, y, budget=budget, steps=steps, restarts=restarts, seed=42
        )
        margins.append(_margins(model, X_adv, y))
        aurocs.append(_auroc(model, X_adv, y))
    assert (margins[1] >= margins[0]).all()
    assert (margins[2] >= margins[1]).all()
    assert aurocs[2] <= aurocs[1] <= aurocs[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", TORCH)
def test_an_unbounded_budget_drives_the_auroc_to_zero(name: str) -> None:
    """Carlini et al. 2019: with no bound every row can be moved to the wrong side;
    an attack that cannot do that is being masked. 100 training stds, no clipping."""
    model, X_rows, y, _ = _fgsm_rows(name)
    scale = attacks.training_scale(nn_helpers.dataset(name).X_train)
    unbounded = attacks.Budget(100.0 * scale.std)
    X_adv = whitebox.margin_pgd(model, X_rows, y, budget=unbounded, steps=50, restarts=1, seed=42)
    assert _auroc(model, X_adv, y) <= 0.05


ART_AGREEMENT = 0.02


@pytest.mark.slow
@pytest.mark.parametrize("name", TORCH)
def test_our_pgd_agrees_with_arts_projected_gradient_descent_on_the_same_program(
    name: str, request: pytest.FixtureRequest
) -> None:
    """A second, independent implementation (ART 1.x, ``ProjectedGradientDescent``)
    of the same attack: the margin loss, the same box, step, steps and clipping,
    from the rows themselves (one restart). ART computes in float32 torch, we in
    float64 NumPy, so a step may land a last bit apart; 0.02 AUROC is the issue's bound."""
    model, X_rows, y, budget = _fgsm_rows(name)
    steps = nn_helpers.variant(name).params.fgsm.pgd_steps
    assert steps is not None
    ours = _auroc(
        model,
        whitebox.margin_pgd(model, X_rows, y, budget=budget, steps=steps, restarts=1, seed=42),
        y,
    )
    art = _auroc(model, nn_helpers.art_margin_pgd(model, X_rows, y, budget=budget, steps=steps), y)
    request.node.user_properties.append(("auroc_ours_art", [ours, art]))
    assert abs(ours - art) <= ART_AGREEMENT
