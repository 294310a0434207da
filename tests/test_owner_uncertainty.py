"""The vectorised bootstrap against a slow, obvious one built from the scalar attacks."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score

from pytest_clinaudit.reference import attacks
from pytest_clinaudit.reference.attacks.params import (
    BoundaryParams,
    CalibrationParams,
    FGSMParams,
    MembershipParams,
    SurrogateParams,
    VerdictThresholds,
    Weights,
)
from pytest_clinaudit.reference.attacks.sps import security_posture_score, verdict
from pytest_clinaudit.reference.review import replicates, uncertainty

WEIGHTS = Weights(0.35, 0.25, 0.20, 0.20)
THRESHOLDS = VerdictThresholds(80.0, 65.0)
SURROGATE = SurrogateParams(scaler=True, C=1.0, max_iter=2000, class_weight="none", random_state=42)
FGSM = FGSMParams(epsilon=0.3, n_samples=60, seed=42, single_class_score=0.5, surrogate=SURROGATE)
MEMBERSHIP = MembershipParams(
    pool_cap=200,
    in_fraction=0.5,
    rounds=2,
    seed=42,
    shadow_n_estimators=10,
    shadow_max_depth=4,
    shadow_class_weight="balanced",
    shadow_seed=42,
    attack_n_estimators=10,
    attack_seed=42,
    eval_cap=80,
    threshold=0.5,
)
CALIBRATION = CalibrationParams(n_bins=10, ece_scale=12.0)
BOUNDARY = BoundaryParams(n_samples=30, seed=42, step_size=0.05, max_steps=100, min_norm=1e-10)


@dataclasses.dataclass
class Audit:
    rows: replicates.ComponentRows
    components: dict[str, float]


def _audit(n_train: int = 250, n_test: int = 114, seed: int = 0) -> Audit:
    """A small audit with the scalar attacks, and the per-row data of each component."""
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n_train + n_test, 4))
    y = (X[:, 0] - X[:, 1] + 0.8 * rng.standard_normal(len(X)) > 0).astype(np.int64)
    X_train, y_train, X_test, y_test = X[:n_train], y[:n_train], X[n_train:], y[n_train:]
    model = LogisticRegression(C=0.5).fit(X_train, y_train)

    sign = attacks.fit_surrogate_sign(SURROGATE, X_train, y_train)
    fgsm_idx, X_adv = attacks.fgsm_sample(X_test, y_test, sign=sign, params=FGSM)
    p_clean, p_adv = (
        attacks.positive_proba(model, X_test[fgsm_idx]),
        attacks.positive_proba(model, X_adv),
    )
    fgsm = attacks.fgsm_score(y_test[fgsm_idx], p_clean, p_adv, params=FGSM)

    attack = attacks.fit_membership_attack(X_train, y_train, MEMBERSHIP)
    n_eval = attacks.membership_eval_size(n_train, n_test, MEMBERSHIP)
    member_proba, non_proba = (
        model.predict_proba(X_train[:n_eval]),
        model.predict_proba(X_test[:n_eval]),
    )
    mi = attacks.membership_score(attack, member_proba, non_proba, n_pool=200, params=MEMBERSHIP)
    member_right, non_right = replicates.membership_guesses(
        attack, member_proba, non_proba, threshold=MEMBERSHIP.threshold
    )

    p_test = attacks.positive_proba(model, X_test)
    calibration = attacks.calibration(y_test, p_test, params=CALIBRATION)
    walk = attacks.boundary_attack_resistance(
        model, X_test, test_predictions=model.predict(X_test), params=BOUNDARY
    )
    walk_idx = np.random.RandomState(BOUNDARY.seed).choice(
        n_test, BOUNDARY.n_samples, replace=False
    )

    rows = replicates.ComponentRows(
        n_test=n_test,
        fgsm=replicates.FGSMRows(fgsm_idx, y_test[fgsm_idx], p_clean, p_adv, 0.5),
        membership=replicates.MembershipRows(member_right, np.arange(n_eval), non_right),
        calibration=replicates.CalibrationRows(np.arange(n_test), y_test, p_test, 10, 12.0),
        walk=replicates.WalkRows(walk_idx, np.array(walk.steps), 100),
    )
    components = {
        "fgsm_robustness": fgsm.score,
        "membership_inference_resistance": mi.score,
        "calibration_ece": calibration.score,
        "boundary_attack_resistance": walk.score,
    }
    return Audit(rows, components)


def _slow_replicate(
    rows: replicates.ComponentRows, test_counts: np.ndarray, member_counts: np.ndarray
) -> dict[str, float]:
    """One replicate the obvious way: materialise the resampled rows, call the scalar code."""

    def copies(index: np.ndarray) -> np.ndarray:
        return np.repeat(np.arange(len(index)), test_counts[index])

    f = rows.fgsm
    r = copies(f.test_index)
    fgsm = attacks.fgsm_score(f.y[r], f.p_clean[r], f.p_adversarial[r], params=FGSM).score

    m = rows.membership
    right = np.concatenate(
        [
            np.repeat(m.member_correct, member_counts),
            m.nonmember_correct[copies(m.nonmember_test_index)],
        ]
    )
    mi = float(np.clip(1 - 2 * (right.mean() - 0.5), 0, 1)) if right.size else np.nan

    c = rows.calibration
    r = copies(c.test_index)
    ece = attacks.task_ece(c.y[r], c.p[r], c.n_bins)

    w = rows.walk
    r = copies(w.test_index)
    walk = min(1.0, w.steps[r].mean() / w.max_steps) if r.size else np.nan
    return {
        "fgsm_robustness": fgsm,
        "membership_inference_resistance": mi,
        "calibration_ece": max(0.0, 1 - c.ece_scale * ece),
        "boundary_attack_resistance": walk,
    }


def test_with_every_row_counted_once_the_replicate_is_the_audit_itself() -> None:
    audit = _audit()
    n_members = len(audit.rows.membership.member_correct)
    one = replicates.component_replicates(
        audit.rows, np.ones((1, audit.rows.n_test), np.int64), np.ones((1, n_members), np.int64)
    )
    for name, value in audit.components.items():
        assert one[name][0] == pytest.approx(value, abs=1e-12), name


def test_each_replicate_equals_a_slow_obvious_bootstrap_of_the_scalar_attacks() -> None:
    audit = _audit()
    n_members = len(audit.rows.membership.member_correct)
    for test_counts, member_counts in replicates.count_chunks(7, 60, audit.rows.n_test, n_members):
        fast = replicates.component_replicates(audit.rows, test_counts, member_counts)
        for b in range(len(test_counts)):
            slow = _slow_replicate(audit.rows, test_counts[b], member_counts[b])
            for name, value in slow.items():
                assert fast[name][b] == pytest.approx(value, abs=1e-12, nan_ok=True), (name, b)


def test_the_intervals_and_verdict_stability_equal_the_slow_bootstraps() -> None:
    audit = _audit(seed=1)
    result = uncertainty.bootstrap(
        audit.rows, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=200, seed=3
    )
    n_members = len(audit.rows.membership.member_correct)
    slow: dict[str, list[float]] = {name: [] for name in audit.components}
    slow_sps: list[float] = []
    # The slow loop draws its own indices with the same generators, row by row.
    test_rng, member_rng = np.random.RandomState(3), np.random.RandomState(4)
    for _ in range(200):
        test_idx = test_rng.randint(0, audit.rows.n_test, size=audit.rows.n_test, dtype=np.int32)
        member_idx = member_rng.randint(0, n_members, size=n_members, dtype=np.int32)
        replicate = _slow_replicate(
            audit.rows,
            np.bincount(test_idx, minlength=audit.rows.n_test),
            np.bincount(member_idx, minlength=n_members),
        )
        for name, value in replicate.items():
            slow[name].append(value)
        slow_sps.append(security_posture_score(replicate, WEIGHTS))
    for name, values in slow.items():
        low, high = np.quantile(values, [0.025, 0.975])
        assert result.components[name].low == pytest.approx(low, abs=1e-12)
        assert result.components[name].high == pytest.approx(high, abs=1e-12)
        assert result.components[name].point == pytest.approx(audit.components[name], abs=1e-12)
    assert result.sps.low == pytest.approx(np.quantile(slow_sps, 0.025), abs=1e-9)
    assert result.sps.high == pytest.approx(np.quantile(slow_sps, 0.975), abs=1e-9)
    point = verdict(round(security_posture_score(audit.components, WEIGHTS), 2), THRESHOLDS)
    changed = np.mean([verdict(round(s, 2), THRESHOLDS) != point for s in slow_sps])
    assert result.verdict == point
    assert result.verdict_change_probability == pytest.approx(changed)
    assert sum(result.verdict_distribution.values()) == pytest.approx(1.0)


def test_the_chunk_size_never_changes_the_replicates(monkeypatch: pytest.MonkeyPatch) -> None:
    audit = _audit(seed=2)
    whole = uncertainty.bootstrap(
        audit.rows, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=50, seed=9
    )
    monkeypatch.setattr(replicates, "CHUNK_ENTRIES", 300)  # two or three replicates a chunk
    chunked = uncertainty.bootstrap(
        audit.rows, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=50, seed=9
    )
    for name, values in whole.replicates.items():
        np.testing.assert_array_equal(chunked.replicates[name], values)


def test_the_weighted_auc_counts_a_row_drawn_twice_as_two_rows() -> None:
    rng = np.random.RandomState(4)
    scores = np.round(rng.uniform(size=40), 1)  # ties
    labels = (rng.uniform(size=40) < scores).astype(np.int64)
    counts = rng.poisson(1.0, size=(20, 40))
    auc, defined = replicates.weighted_auc(scores, labels, counts)
    for b in range(20):
        rows = np.repeat(np.arange(40), counts[b])
        if len(np.unique(labels[rows])) == 2:
            assert auc[b] == pytest.approx(roc_auc_score(labels[rows], scores[rows]), abs=1e-12)
        else:
            assert not defined[b]


def test_the_bootstrap_result_is_json_ready() -> None:
    audit = _audit(seed=3)
    result = uncertainty.bootstrap(
        audit.rows, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=50, seed=1
    )
    data: dict[str, Any] = json.loads(json.dumps(result.as_dict()))
    assert set(data["components"]) == set(audit.components)
    assert 0.0 <= data["verdict_change_probability"] <= 1.0


def test_indices_outside_the_test_set_are_refused() -> None:
    audit = _audit()
    bad = dataclasses.replace(audit.rows, n_test=10)
    with pytest.raises(ValueError, match=r"test-row indices must lie in \[0, 10\)"):
        uncertainty.bootstrap(bad, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=5)


def test_the_attack_auc_interval_equals_a_slow_bootstrap_of_roc_auc_score() -> None:
    rng = np.random.RandomState(5)
    members, nonmembers = rng.standard_normal(70) + 0.4, rng.standard_normal(90)
    result = uncertainty.auc_interval(members, nonmembers, n_boot=100, seed=11)
    slow = []
    nonmember_rng, member_rng = np.random.RandomState(11), np.random.RandomState(12)
    for _ in range(100):
        n_idx = nonmember_rng.randint(0, 90, size=90, dtype=np.int32)
        m_idx = member_rng.randint(0, 70, size=70, dtype=np.int32)
        truth = np.r_[np.ones(70), np.zeros(90)]
        slow.append(roc_auc_score(truth, np.r_[members[m_idx], nonmembers[n_idx]]))
    assert result.point == pytest.approx(
        roc_auc_score(np.r_[np.ones(70), np.zeros(90)], np.r_[members, nonmembers])
    )
    assert result.low == pytest.approx(np.quantile(slow, 0.025), abs=1e-12)
    assert result.high == pytest.approx(np.quantile(slow, 0.975), abs=1e-12)
