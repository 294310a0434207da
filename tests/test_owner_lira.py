"""Membership diagnostics: the ROC helper against scikit-learn, attacks on known leakage."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score, roc_curve

from pytest_clinaudit.reference import models
from pytest_clinaudit.reference.attacks import privacy
from pytest_clinaudit.reference.review import lira


def _scores(n_m: int, n_n: int, seed: int, shift: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    return np.round(rng.standard_normal(n_m) + shift, 1), np.round(rng.standard_normal(n_n), 1)


@settings(max_examples=30, deadline=None)
@given(n_m=st.integers(1, 60), n_n=st.integers(1, 60), seed=st.integers(0, 10_000))
def test_the_roc_helper_agrees_with_scikit_learn_with_ties(n_m: int, n_n: int, seed: int) -> None:
    members, nonmembers = _scores(n_m, n_n, seed)
    result = privacy.attack_result("test", members, nonmembers)
    truth = np.r_[np.ones(n_m), np.zeros(n_n)]
    scores = np.r_[members, nonmembers]
    assert result.auc == pytest.approx(roc_auc_score(truth, scores), abs=1e-12)
    fpr, tpr = privacy._roc(members, nonmembers)
    ref_fpr, ref_tpr, _ = roc_curve(truth, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, ref_fpr, atol=1e-12)
    np.testing.assert_allclose(tpr, ref_tpr, atol=1e-12)


def test_the_tpr_at_a_low_fpr_is_the_best_threshold_with_at_most_that_many_false_alarms() -> None:
    members, nonmembers = _scores(500, 2000, seed=1, shift=1.5)
    result = privacy.attack_result("test", members, nonmembers)
    for target in (0.01, 0.001):
        # Brute force over every threshold: flag scores >= t.
        best = 0.0
        for t in np.unique(np.r_[members, nonmembers]):
            if np.mean(nonmembers >= t) <= target:
                best = max(best, float(np.mean(members >= t)))
        point = result.tpr_at(target)
        assert point.estimable
        assert point.tpr == pytest.approx(best)


def test_too_few_non_members_for_a_low_fpr_is_said_not_printed_as_a_number() -> None:
    members, nonmembers = _scores(200, 114, seed=2)
    result = privacy.attack_result("test", members, nonmembers)
    one_percent, tenth = result.tpr_at(0.01), result.tpr_at(0.001)
    assert one_percent.estimable
    assert one_percent.tpr is not None
    assert (tenth.estimable, tenth.tpr, tenth.n_nonmembers, tenth.min_nonmembers) == (
        False,
        None,
        114,
        1000,
    )
    assert json.loads(json.dumps(result.as_dict()))["low_fpr"][1]["tpr"] is None


def test_the_plot_curve_is_short_log_spaced_and_a_lower_envelope_of_the_roc() -> None:
    members, nonmembers = _scores(5000, 20000, seed=3)
    members = members + np.random.RandomState(0).uniform(0, 0.01, 5000)  # break ties: many points
    result = privacy.attack_result("test", members, nonmembers)
    assert len(result.roc_fpr) <= privacy.PLOT_POINTS + 1
    fpr, tpr = privacy._roc(result.member_scores, result.nonmember_scores)
    for f, t in zip(result.roc_fpr, result.roc_tpr, strict=True):
        assert t == pytest.approx(np.max(tpr[fpr <= f + 1e-15]))
    assert result.roc_fpr[1] == pytest.approx(1 / 20000, rel=0.5)


def test_the_loss_attack_scores_minus_the_cross_entropy_of_the_true_label() -> None:
    y = np.array([1, 0, 1])
    p = np.array([0.9, 0.9, 1.0])
    np.testing.assert_allclose(
        -privacy.log_loss_per_row(p, y), [np.log(0.9), np.log(0.1), np.log(1.0 - 1e-12)]
    )


def _icu_like(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, 6))
    logit = X[:, 0] - 0.8 * X[:, 1] + 0.5 * X[:, 2] ** 2 - 1.0
    y = (rng.uniform(size=n) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    return X, y


NAMES = tuple(f"f{j}" for j in range(6))


def test_an_overfit_forest_leaks_and_both_attacks_see_it() -> None:
    from sklearn.ensemble import RandomForestClassifier

    X, y = _icu_like(1200, seed=4)
    X_train, y_train, X_out, y_out = X[:600], y[:600], X[600:], y[600:]
    forest = RandomForestClassifier(n_estimators=30, min_samples_leaf=1, random_state=0)
    forest.fit(X_train, y_train)
    target = models.adapt_model(forest, feature_names=NAMES, positive_class=1)
    loss = privacy.loss_threshold_attack(
        y_train, target.predict_proba(X_train)[:, 1], y_out, target.predict_proba(X_out)[:, 1]
    )
    assert loss.auc > 0.7
    fit = lira.sklearn_shadow_fitter(forest, feature_names=NAMES, positive_class=1)
    result = lira.lira(target, fit, X_train, y_train, X_out, y_out, n_shadows=4, seed=0)
    assert result.online.auc > 0.7
    assert result.offline.auc > 0.6
    assert result.shadow_train_rows == 600
    # LiRA's point is the low-FPR regime: it finds members with few false alarms.
    assert result.online.tpr_at(0.01).tpr > 0.01


def test_a_regularised_linear_model_on_many_rows_leaks_nothing_measurable() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = _icu_like(8000, seed=5)
    model = LogisticRegression(C=0.1).fit(X[:4000], y[:4000])
    p = model.predict_proba(X)[:, 1]
    loss = privacy.loss_threshold_attack(y[:4000], p[:4000], y[4000:], p[4000:])
    # AUC standard error with 4000 + 4000 rows is about 0.0065.
    assert abs(loss.auc - 0.5) < 0.03


def test_every_row_is_in_exactly_half_of_the_shadow_models() -> None:
    keep = lira.balanced_keep(6, 1000, seed=3)
    assert (keep.sum(axis=0) == 3).all()
    assert abs(keep.sum(axis=1).mean() - 500) < 1e-9
    with pytest.raises(ValueError, match="even"):
        lira.balanced_keep(3, 10, seed=0)


def test_shadows_of_a_string_label_pipeline_are_fitted_as_the_target_was() -> None:
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _icu_like(300, seed=6)
    frame = pd.DataFrame(X[:, [3, 0, 1]], columns=["f3", "f0", "f1"])
    words = np.where(y == 1, "died", "survived")
    pipeline = make_pipeline(
        ColumnTransformer([("s", StandardScaler(), ["f0", "f1", "f3"])]), LogisticRegression()
    ).fit(frame, words)
    fit = lira.sklearn_shadow_fitter(pipeline, feature_names=NAMES, positive_class="died")
    shadow = fit(X, y)
    target = models.adapt_model(pipeline, feature_names=NAMES, positive_class="died")
    # Refitted on the same rows with the same recipe, the shadow is the target.
    np.testing.assert_allclose(shadow.predict_proba(X), target.predict_proba(X), atol=1e-12)
