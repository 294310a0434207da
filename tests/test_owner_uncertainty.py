"""The vectorised bootstrap and jackknife against slow, obvious ones built from the scalar attacks."""

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
    COMPONENTS,
    BoundaryParams,
    CalibrationParams,
    FGSMParams,
    MembershipParams,
    SurrogateParams,
    VerdictThresholds,
    Weights,
)
from pytest_clinaudit.reference.attacks.sps import security_posture_score, verdict
from pytest_clinaudit.reference.review import bca, coverage, diagnostics, replicates, uncertainty

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


@pytest.fixture
def all_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every interval shown: these tests check the BCa machinery itself. Which intervals
    the coverage study lets an audit show is tests/test_owner_coverage.py's."""
    monkeypatch.setattr(coverage, "RULES", {})


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
    member_flagged = attack.predict_proba(member_proba)[:, 1] >= MEMBERSHIP.threshold
    non_flagged = attack.predict_proba(non_proba)[:, 1] >= MEMBERSHIP.threshold
    advantage = member_flagged.mean() - non_flagged.mean()

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
        membership=replicates.MembershipRows(member_flagged, np.arange(n_eval), non_flagged),
        calibration=replicates.CalibrationRows(np.arange(n_test), y_test, p_test, 10, 12.0),
        walk=replicates.WalkRows(walk_idx, np.array(walk.steps), 100),
    )
    components = {
        "fgsm_robustness": fgsm.score,
        "membership_inference_resistance": float(np.clip(1.0 - advantage, 0.0, 1.0)),
        "calibration_ece": calibration.score,
        "boundary_attack_resistance": walk.score,
    }
    return Audit(rows, components)


def _slow_replicate(
    rows: replicates.ComponentRows, test_counts: np.ndarray, member_counts: np.ndarray
) -> dict[str, float]:
    """One replicate the obvious way: materialise the resampled rows, compute each statistic.

    Components before their clip to [0, 1], as :mod:`.replicates` returns them.
    """

    def copies(index: np.ndarray) -> np.ndarray:
        return np.repeat(np.arange(len(index)), test_counts[index])

    def auroc(y: np.ndarray, p: np.ndarray) -> float:
        return float(roc_auc_score(y, p)) if len(np.unique(y)) == 2 else np.nan

    f = rows.fgsm
    r = copies(f.test_index)
    clean, adversarial = auroc(f.y[r], f.p_clean[r]), auroc(f.y[r], f.p_adversarial[r])
    fgsm = f.single_class_score if np.isnan(clean) else 1.0 - (clean - adversarial)

    m = rows.membership
    members = np.repeat(m.member_flagged, member_counts)
    nonmembers = m.nonmember_flagged[copies(m.nonmember_test_index)]
    defined = members.size and nonmembers.size
    mi = 1.0 - (members.mean() - nonmembers.mean()) if defined else np.nan

    c = rows.calibration
    r = copies(c.test_index)
    ece = attacks.task_ece(c.y[r], c.p[r], c.n_bins)

    # Kumar et al.'s debiased error over the sample's equal-mass bins, held fixed.
    ids = diagnostics.equal_mass_bin_ids(c.p, diagnostics.EQUAL_MASS_BINS)[r]
    debiased = 0.0
    for b in np.unique(ids):
        mine = ids == b
        if mine.sum() >= 2:
            label = c.y[r][mine].mean()
            gap = (c.p[r][mine].mean() - label) ** 2
            debiased += mine.sum() / len(r) * (gap - label * (1 - label) / (mine.sum() - 1))

    w = rows.walk
    r_walk = copies(w.test_index)
    walk = min(1.0, w.steps[r_walk].mean() / w.max_steps) if r_walk.size else np.nan
    return {
        "fgsm_robustness": fgsm,
        "membership_inference_resistance": mi,
        "calibration_ece": 1 - c.ece_scale * ece,
        "boundary_attack_resistance": walk,
        "auroc": auroc(c.y[r], c.p[r]),
        "brier": float(np.mean((c.p[r] - c.y[r]) ** 2)) if r.size else np.nan,
        "ece": ece,
        "debiased_l2": debiased if r.size else np.nan,
    }


def _sps(values: dict[str, float]) -> float:
    clipped = {name: min(1.0, max(0.0, values[name])) for name in COMPONENTS}
    return security_posture_score(clipped, WEIGHTS)


def test_with_every_row_counted_once_the_replicate_is_the_audit_itself() -> None:
    audit = _audit()
    n_members = len(audit.rows.membership.member_flagged)
    one = replicates.component_replicates(
        audit.rows, np.ones((1, audit.rows.n_test), np.int64), np.ones((1, n_members), np.int64)
    )
    for name, value in audit.components.items():
        assert min(1.0, max(0.0, one[name][0])) == pytest.approx(value, abs=1e-12), name


def test_each_replicate_equals_a_slow_obvious_bootstrap_of_the_scalar_attacks() -> None:
    audit = _audit()
    n_members = len(audit.rows.membership.member_flagged)
    for test_counts, member_counts in replicates.count_chunks(7, 60, audit.rows.n_test, n_members):
        fast = replicates.component_replicates(audit.rows, test_counts, member_counts)
        for b in range(len(test_counts)):
            slow = _slow_replicate(audit.rows, test_counts[b], member_counts[b])
            for name, value in slow.items():
                assert fast[name][b] == pytest.approx(value, abs=1e-12, nan_ok=True), (name, b)


@pytest.mark.usefixtures("all_shown")
def test_the_intervals_and_verdict_stability_equal_a_slow_bca_of_the_same_draws() -> None:
    audit = _audit(seed=1)
    result = uncertainty.bootstrap(
        audit.rows, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=200, seed=3
    )
    rows = audit.rows
    n_test, n_members = rows.n_test, len(rows.membership.member_flagged)
    names = [*COMPONENTS, "auroc", "brier", "ece", "debiased_l2"]
    slow: dict[str, list[float]] = {name: [] for name in [*names, "sps"]}
    # The slow loop draws its own indices with the same generators, row by row.
    test_rng, member_rng = np.random.RandomState(3), np.random.RandomState(4)
    for _ in range(200):
        test_idx = test_rng.randint(0, n_test, size=n_test, dtype=np.int32)
        member_idx = member_rng.randint(0, n_members, size=n_members, dtype=np.int32)
        replicate = _slow_replicate(
            rows,
            np.bincount(test_idx, minlength=n_test),
            np.bincount(member_idx, minlength=n_members),
        )
        for name in names:
            slow[name].append(replicate[name])
        slow["sps"].append(_sps(replicate))
    # The jackknife: every test row left out once, then every member (both under 200).
    ones_t, ones_m = np.ones(n_test, np.int64), np.ones(n_members, np.int64)
    jackknife: list[dict[str, list[float]]] = []
    for side, n in (("test", n_test), ("members", n_members)):
        values: dict[str, list[float]] = {name: [] for name in [*names, "sps"]}
        for i in range(n):
            counts = np.ones(n, np.int64)
            counts[i] = 0
            replicate = _slow_replicate(
                rows, counts if side == "test" else ones_t, counts if side == "members" else ones_m
            )
            for name in names:
                values[name].append(replicate[name])
            values["sps"].append(_sps(replicate))
        jackknife.append(values)
    point = _slow_replicate(rows, ones_t, ones_m)
    point["sps"] = _sps(point)
    for name in [*names, "sps"]:
        expected = bca.held(
            bca.bca_interval(
                point[name], np.array(slow[name]), [np.array(j[name]) for j in jackknife]
            ),
            np.array(slow[name]),
        )
        got = (
            result.components.get(name)
            or result.diagnostics.get(name)
            or (result.sps if name == "sps" else None)
        )
        assert got is not None, name
        clip = (
            (lambda v: v if np.isnan(v) else min(1.0, max(0.0, v)))
            if name in COMPONENTS
            else (lambda v: v)
        )
        assert got.withheld == expected.withheld, name
        assert got.low == pytest.approx(clip(expected.low), abs=1e-9, nan_ok=True), name
        assert got.high == pytest.approx(clip(expected.high), abs=1e-9, nan_ok=True), name
        assert got.bias == pytest.approx(expected.bias, abs=1e-9), name
    sps_interval = bca.bca_interval(
        point["sps"], np.array(slow["sps"]), [np.array(j["sps"]) for j in jackknife]
    )
    below = bca.confidence_below(THRESHOLDS.production - 0.005, sps_interval, np.array(slow["sps"]))
    point_verdict = verdict(round(point["sps"], 2), THRESHOLDS)
    assert result.verdict == point_verdict
    if result.sps.withheld:  # stability only from an SPS interval that holds
        assert np.isnan(result.verdict_change_probability)
        assert result.verdict_distribution == {}
        return
    if point_verdict == "PRODUCTION":
        assert result.verdict_change_probability == pytest.approx(below, abs=1e-9)
    assert sum(result.verdict_distribution.values()) == pytest.approx(1.0)


@pytest.mark.usefixtures("all_shown")
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
    # The jackknife's sums are matrix products of another shape per chunk size, and
    # BLAS may round those in the last bit: the intervals agree to that.
    for name, interval in whole.components.items():
        assert chunked.components[name].low == pytest.approx(interval.low, abs=1e-12), name
        assert chunked.components[name].high == pytest.approx(interval.high, abs=1e-12), name


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


@pytest.mark.usefixtures("all_shown")
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


def test_the_attack_auc_interval_equals_a_slow_bca_of_roc_auc_score() -> None:
    rng = np.random.RandomState(5)
    members, nonmembers = rng.standard_normal(70) + 0.4, rng.standard_normal(90)
    result = uncertainty.auc_interval(members, nonmembers, n_boot=100, seed=11)
    truth = np.r_[np.ones(70), np.zeros(90)]
    slow = []
    nonmember_rng, member_rng = np.random.RandomState(11), np.random.RandomState(12)
    for _ in range(100):
        n_idx = nonmember_rng.randint(0, 90, size=90, dtype=np.int32)
        m_idx = member_rng.randint(0, 70, size=70, dtype=np.int32)
        slow.append(roc_auc_score(truth, np.r_[members[m_idx], nonmembers[n_idx]]))
    jackknife = [
        np.array([roc_auc_score(truth[1:], np.r_[np.delete(members, i), nonmembers])
                  for i in range(70)]),
        np.array([roc_auc_score(truth[:-1], np.r_[members, np.delete(nonmembers, i)])
                  for i in range(90)]),
    ]  # fmt: skip
    point = roc_auc_score(truth, np.r_[members, nonmembers])
    expected = bca.bca_interval(point, np.array(slow), jackknife)
    assert result.point == pytest.approx(point)
    assert result.low == pytest.approx(expected.low, abs=1e-12)
    assert result.high == pytest.approx(expected.high, abs=1e-12)
    assert result.acceleration == pytest.approx(expected.acceleration, abs=1e-12)


@pytest.mark.usefixtures("all_shown")
def test_the_attack_seed_variation_is_added_to_the_membership_replicates_only() -> None:
    """Issue 28: the membership interval takes in its attacks' own seed variation."""
    audit = _audit(seed=4)
    name = "membership_inference_resistance"
    plain = uncertainty.bootstrap(
        audit.rows, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=200, seed=1
    )
    noisy = uncertainty.bootstrap(
        audit.rows, weights=WEIGHTS, thresholds=THRESHOLDS, n_boot=200, seed=1,
        seed_sd={name: 0.05},
    )  # fmt: skip
    added = noisy.replicates[name] - plain.replicates[name]
    np.testing.assert_allclose(added, np.random.RandomState(1 + 5).normal(0.0, 0.05, 200))
    for other in ("fgsm_robustness", "calibration_ece", "boundary_attack_resistance"):
        np.testing.assert_array_equal(noisy.replicates[other], plain.replicates[other])
    assert noisy.components[name].point == plain.components[name].point
    width = noisy.components[name].high - noisy.components[name].low
    assert width > plain.components[name].high - plain.components[name].low
    assert noisy.as_dict()["seed_sd"] == {name: 0.05}


def test_a_share_of_fold_draws_counts_as_that_share_of_a_member() -> None:
    """A row flagged in half the cross-fitting's draws is half a flag: replicates are linear."""
    audit = _audit(seed=5)
    m = audit.rows.membership
    rng = np.random.RandomState(0)
    other_m = rng.uniform(size=len(m.member_flagged)) < 0.5
    other_n = rng.uniform(size=len(m.nonmember_flagged)) < 0.5
    T = rng.randint(0, 3, size=(7, audit.rows.n_test))
    M = rng.randint(0, 3, size=(7, len(m.member_flagged)))

    def membership(member: Any, nonmember: Any) -> np.ndarray:
        rows = dataclasses.replace(
            audit.rows,
            membership=replicates.MembershipRows(member, m.nonmember_test_index, nonmember),
        )
        values: np.ndarray = replicates.component_replicates(rows, T, M, diagnostics=False)[
            "membership_inference_resistance"
        ]
        return values

    first = membership(m.member_flagged, m.nonmember_flagged)
    second = membership(other_m, other_n)
    half = membership(
        (m.member_flagged + other_m.astype(float)) / 2,
        (m.nonmember_flagged + other_n.astype(float)) / 2,
    )
    np.testing.assert_allclose(half, (first + second) / 2, atol=1e-12)
