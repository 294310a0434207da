"""Own torch programs are audited white-box (issue 18, case 5).

For ``icu-synth-mlp.pt2`` the own-data FGSM component was 0.929, through a
logistic surrogate, while the model's own gradient at the same ε took the
AUROC from 0.664 to 0.463; the loss attack used clipped probabilities, so
saturated rows tied. The fast tests use a NumPy stand-in with a torch
program's interface (logits, their gradient, float64 losses) and, on purpose,
no ``loss_gradient``: the retired float32 cross-entropy gradient must not be used.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from pytest_clinaudit.reference.attacks.budget import Budget
from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.review.own_data import audit_own_data
from pytest_clinaudit.reference.review.profile import OwnDataParams


class SaturatedLogistic:
    """A steep logistic 'program': float32 logits and sigmoid, so |logit| > 17 gives
    probabilities of exactly 0 or 1, as a saturated network's do."""

    def __init__(self, w: np.ndarray, b: float) -> None:
        self.w, self.b = w.astype(np.float32), np.float32(b)
        self.loss_calls = 0

    def logits(self, X: Any) -> Any:
        return np.asarray(X, dtype=np.float32) @ self.w + self.b

    def predict_proba(self, X: Any) -> Any:
        z = self.logits(X)
        p = (1.0 / (1.0 + np.exp(-z.astype(np.float64)))).astype(np.float32).astype(np.float64)
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> Any:
        return (self.logits(X) > 0).astype(np.int64)

    def logit_gradient(self, X: Any) -> Any:
        return np.tile(self.w.astype(np.float64), (len(X), 1))

    def row_losses(self, X: Any, y: Any) -> Any:
        self.loss_calls += 1
        z = self.logits(X).astype(np.float64)
        return np.logaddexp(0.0, np.where(np.asarray(y) == 1, -z, z))


PARAMS = dataclasses.replace(
    OwnDataParams(), lira_shadows=0, boundary_rows=40, n_boot=100, pgd_steps=10, pgd_restarts=2
)


@pytest.fixture(scope="module")
def steep(wdbc: Dataset) -> tuple[SaturatedLogistic, Dataset]:
    from sklearn.linear_model import LogisticRegression

    scale = wdbc.X_train.std(axis=0)
    fitted = LogisticRegression(max_iter=5000).fit(wdbc.X_train / scale, wdbc.y_train)
    # Twenty times steeper than the fit: most rows saturate in float32.
    model = SaturatedLogistic(20.0 * fitted.coef_[0] / scale, 20.0 * fitted.intercept_[0])
    return model, wdbc


def test_a_model_with_a_gradient_is_attacked_through_it_with_sps_v1_wb2s_direction(
    steep: tuple[SaturatedLogistic, Dataset],
) -> None:
    from sklearn.metrics import roc_auc_score

    from pytest_clinaudit.reference.attacks.budget import training_scale
    from pytest_clinaudit.reference.attacks.whitebox import fgsm_direction
    from pytest_clinaudit.reference.review.sampling import canonical, draw_canonical

    model, data = steep
    audit = audit_own_data(model, data, PARAMS)
    report = audit.report()
    assert report["details"]["fgsm_attack"] == "white-box"
    # The component by hand: the canonical FGSM rows, (1 - 2y) sign(d logit / dx), clipped.
    rows = canonical(data)
    picked = draw_canonical(rows.n_test, PARAMS.fgsm_rows, PARAMS.seed + 2)
    X, y = rows.X_test[picked], rows.y_test[picked]
    budget = Budget.of(PARAMS.epsilon, training_scale(rows.X_train), std_units=True, clip=True)
    X_adv = budget.clip(X + budget.step * fgsm_direction(model, X, y))
    clean = roc_auc_score(y, model.predict_proba(X)[:, 1])
    adversarial = roc_auc_score(y, model.predict_proba(X_adv)[:, 1])
    assert audit.components["fgsm_robustness"] == pytest.approx(
        min(1.0, 1.0 - (clean - adversarial)), abs=1e-12
    )
    curve = report["robustness"]["fgsm_curve"]
    assert curve["attack"] == "white-box"
    assert curve["zero_gradient_fraction"] == 0.0  # the logit's gradient never saturates
    # Margin PGD is never weaker than FGSM on the same rows (AUROC ties aside).
    for pgd, fgsm in zip(curve["pgd_auroc"], curve["fgsm_auroc"], strict=True):
        assert pgd <= fgsm + 1e-9


def test_its_loss_attack_ranks_by_float64_losses_from_the_logits(
    steep: tuple[SaturatedLogistic, Dataset],
) -> None:
    model, data = steep
    saturated = np.isin(model.predict_proba(data.X_train)[:, 1], (0.0, 1.0)).mean()
    assert saturated > 0.5  # the stand-in does saturate
    model.loss_calls = 0
    report = audit_own_data(model, data, PARAMS).report()
    loss = report["membership"]["loss_threshold"]
    assert loss["losses"] == "float64 cross-entropy from the model's logits"
    assert model.loss_calls == 2  # members, then non-members
    # Losses from logits do not tie where the probabilities do: the ROC keeps its points.
    assert len(loss["roc"]["fpr"]) > 50


def test_a_surrogate_still_attacks_a_model_without_a_gradient(wdbc: Dataset) -> None:
    from sklearn.linear_model import LogisticRegression

    from pytest_clinaudit.reference.models import adapt_model

    model = adapt_model(
        LogisticRegression(max_iter=5000).fit(wdbc.X_train, wdbc.y_train),
        feature_names=wdbc.feature_names,
        positive_class=1,
    )
    report = audit_own_data(model, wdbc, PARAMS).report()
    assert report["details"]["fgsm_attack"] == "surrogate"
    assert "pgd_auroc" not in report["robustness"]["fgsm_curve"]
