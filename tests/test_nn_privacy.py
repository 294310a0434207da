"""The loss-threshold membership attack's metrics: hand cases, scikit-learn, brute force."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import log_loss, roc_auc_score

from pytest_clinaudit.reference.attacks import privacy

# Scores on a coarse grid, so that ties between members and non-members are common.
scores = st.lists(st.integers(-4, 4).map(float), min_size=1, max_size=30)


def _brute_force_tpr(members: list[float], nonmembers: list[float], fpr: float) -> float:
    """Every threshold "score >= t" over the observed scores (and one above them all)."""
    best = 0.0
    for t in [*sorted(set(members + nonmembers)), float("inf")]:
        false_positive_rate = sum(s >= t for s in nonmembers) / len(nonmembers)
        if false_positive_rate <= fpr:
            best = max(best, sum(s >= t for s in members) / len(members))
    return best


def test_tpr_at_fpr_on_a_hand_computed_case() -> None:
    members, nonmembers = [3.0, 2.0, 1.0], [0.0, 2.5]
    # No false positive allowed: only the member above 2.5 is caught.
    assert privacy.tpr_at_fpr(members, nonmembers, 0.0) == pytest.approx(1 / 3)
    # One of two non-members may be flagged: everything above 0 is caught.
    assert privacy.tpr_at_fpr(members, nonmembers, 0.5) == 1.0


def test_one_percent_of_two_hundred_non_members_allows_exactly_two_false_positives() -> None:
    nonmembers = np.arange(200.0)  # the top three are 197, 198, 199
    members = np.array([197.5, 196.5])
    # Two false positives allowed (198, 199): a threshold just above 197 catches 197.5 only.
    assert privacy.tpr_at_fpr(members, nonmembers, 0.01) == 0.5


@settings(max_examples=200, deadline=None)
@given(scores, scores, st.sampled_from([0.0, 0.01, 0.1, 0.25, 0.5, 1.0]))
def test_tpr_at_fpr_equals_a_brute_force_sweep_of_thresholds(
    members: list[float], nonmembers: list[float], fpr: float
) -> None:
    assert privacy.tpr_at_fpr(members, nonmembers, fpr) == pytest.approx(
        _brute_force_tpr(members, nonmembers, fpr)
    )


@settings(max_examples=200, deadline=None)
@given(scores, scores)
def test_attack_auc_equals_scikit_learns_roc_auc_with_ties(
    members: list[float], nonmembers: list[float]
) -> None:
    truth = [1] * len(members) + [0] * len(nonmembers)
    expected = roc_auc_score(truth, members + nonmembers)
    assert privacy.attack_auc(members, nonmembers) == pytest.approx(expected, abs=1e-12)


def test_a_perfect_loss_attack_scores_auc_one_and_catches_every_member() -> None:
    result = privacy.loss_attack(member_losses=[0.01, 0.02], nonmember_losses=[1.0, 2.0, 3.0])
    assert (result.auc, result.tpr_at_low_fpr) == (1.0, 1.0)
    assert (result.n_members, result.n_nonmembers) == (2, 3)


def test_lower_loss_means_member_so_an_inverted_attack_scores_zero() -> None:
    result = privacy.loss_attack(member_losses=[5.0, 6.0], nonmember_losses=[0.1, 0.2])
    assert result.auc == 0.0


def test_attacks_refuse_empty_or_non_finite_scores() -> None:
    with pytest.raises(ValueError, match="need members and non-members, got 0 and 1 scores"):
        privacy.attack_auc([], [1.0])
    with pytest.raises(ValueError, match="attack scores must be finite"):
        privacy.tpr_at_fpr([np.nan], [1.0], 0.01)


def test_per_row_log_loss_averages_to_scikit_learns_log_loss() -> None:
    rng = np.random.default_rng(0)
    prob = rng.uniform(0.01, 0.99, size=50)
    y = rng.integers(0, 2, size=50)
    losses = privacy.log_loss_per_row(prob, y)
    assert losses.mean() == pytest.approx(log_loss(y, prob), rel=1e-12)
    # A confident mistake stays finite.
    assert np.isfinite(privacy.log_loss_per_row([0.0, 1.0], [1, 0])).all()


def test_the_bootstrap_difference_of_an_attack_with_itself_is_exactly_zero() -> None:
    rng = np.random.default_rng(1)
    m, n = rng.normal(size=40), rng.normal(size=40)
    difference = privacy.bootstrap_auc_difference(m, n, m, n, n_resamples=200)
    assert (difference.estimate, difference.low, difference.high) == (0.0, 0.0, 0.0)
    assert not difference.excludes_zero


def test_the_bootstrap_difference_excludes_zero_for_a_clearly_better_attack() -> None:
    rng = np.random.default_rng(2)
    noise_m, noise_n = rng.normal(size=300), rng.normal(size=300)
    strong = privacy.bootstrap_auc_difference(
        noise_m + 1.0, noise_n, noise_m, noise_n + 0.0, n_resamples=300
    )
    assert strong.estimate == pytest.approx(
        privacy.attack_auc(noise_m + 1.0, noise_n) - privacy.attack_auc(noise_m, noise_n)
    )
    assert strong.low <= strong.estimate <= strong.high
    assert strong.excludes_zero


def test_the_bootstrap_pairs_the_same_rows_for_both_attacks() -> None:
    with pytest.raises(ValueError, match="same members and non-members"):
        privacy.bootstrap_auc_difference([1.0, 2.0], [0.0], [1.0], [0.0])


def test_the_seed_averaged_bootstrap_of_one_replicate_is_the_paired_bootstrap() -> None:
    rng = np.random.default_rng(3)
    a = (rng.normal(1.0, size=60), rng.normal(size=50))
    b = (rng.normal(0.5, size=60), rng.normal(size=50))
    one = privacy.bootstrap_mean_auc_difference([a], [b], n_resamples=300, seed=5)
    pair = privacy.bootstrap_auc_difference(*a, *b, n_resamples=300, seed=5)
    assert (one.estimate, one.low, one.high) == pytest.approx(
        (pair.estimate, pair.low, pair.high), abs=1e-15
    )


def test_the_seed_averaged_bootstrap_averages_the_replicates_on_shared_rows() -> None:
    rng = np.random.default_rng(4)
    replicates = [(rng.normal(0.3 * k, size=40), rng.normal(size=30)) for k in range(3)]
    baseline = [(rng.normal(size=40), rng.normal(size=30)) for _ in range(3)]
    result = privacy.bootstrap_mean_auc_difference(replicates, baseline, n_resamples=200)
    expected = np.mean(
        [
            privacy.attack_auc(*x) - privacy.attack_auc(*y)
            for x, y in zip(replicates, baseline, strict=True)
        ]
    )
    assert result.estimate == pytest.approx(expected, abs=1e-12)
    assert result.low <= result.estimate <= result.high
    with pytest.raises(ValueError, match="same positives and negatives"):
        privacy.bootstrap_mean_auc_difference(
            [replicates[0]], [(rng.normal(size=39), rng.normal(size=30))]
        )
    with pytest.raises(ValueError, match="as many replicates of a as of b, got 3 and 2"):
        privacy.bootstrap_mean_auc_difference(replicates, baseline[:2])


@pytest.mark.slow
def test_the_seed_averaged_bootstraps_95_percent_interval_covers_a_known_difference() -> None:
    """A simulation with known truth: scores N(d, 1) vs N(0, 1) have AUC Phi(d / sqrt 2),
    so two scorers with shifts 0.6 and 0.3 differ by a known amount. Over 200 draws of
    rows (three replicates each), the 95% interval should cover it about 95% of the
    time; 0.90-0.99 allows for the simulation's own binomial noise (sd 0.015)."""
    from scipy.stats import norm

    truth = norm.cdf(0.6 / np.sqrt(2)) - norm.cdf(0.3 / np.sqrt(2))
    rng = np.random.default_rng(7)
    covered = 0
    for trial in range(200):
        # Each replicate scores the same rows: its own small training noise on top.
        base_pos, base_neg = rng.normal(size=80), rng.normal(size=120)
        a = [(base_pos + 0.6 + 0.05 * rng.normal(size=80), base_neg) for _ in range(3)]
        b = [(base_pos + 0.3 + 0.05 * rng.normal(size=80), base_neg) for _ in range(3)]
        result = privacy.bootstrap_mean_auc_difference(a, b, n_resamples=200, seed=trial)
        covered += result.low <= truth <= result.high
    assert 0.90 <= covered / 200 <= 0.99
