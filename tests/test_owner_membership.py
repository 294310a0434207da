"""Membership in the own-data profile: the advantage (TPR - FPR) of the strongest attack.

Issue 18, case 2: on 100 training and 469 test rows the task's attack called
every row a member (accuracy 0.176, component 1.0), and a 1-nearest-neighbour
model and a full-depth tree both scored 1.0 while their loss-attack AUCs were
0.59 and 0.58.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_clinaudit.reference.review.advantage import (
    AttackScores,
    best_rule,
    cross_fitted_decisions,
)


def _scores(name: str, members: np.ndarray, nonmembers: np.ndarray, **labels: Any) -> AttackScores:
    y_m = labels.get("y_m", np.zeros(len(members), np.int64))
    y_n = labels.get("y_n", np.zeros(len(nonmembers), np.int64))
    return AttackScores(
        name, np.arange(len(members)), members, y_m, np.arange(len(nonmembers)), nonmembers, y_n
    )


def test_calling_every_row_a_member_is_an_advantage_of_zero_whatever_the_group_sizes() -> None:
    # The attack: every one of 100 members and 469 non-members called a member.
    constant = _scores("everyone", np.ones(100), np.ones(469))
    decisions = cross_fitted_decisions([constant], 100, 469)
    assert decisions.advantage == 0.0  # not the accuracy of 0.176, nor 1.0 by clipping


def test_choosing_the_attack_and_threshold_on_other_folds_leaves_no_leakage_where_there_is_none() -> (
    None
):
    rng = np.random.RandomState(0)
    held_out, in_sample = [], []
    for _ in range(200):
        attacks = [
            _scores(f"noise{k}", rng.normal(size=60), rng.normal(size=80),
                    y_m=rng.randint(0, 2, 60), y_n=rng.randint(0, 2, 80))
            for k in range(3)
        ]  # fmt: skip
        held_out.append(cross_fitted_decisions(attacks, 60, 80).advantage)
        # The same choice made and measured on the same rows finds "leakage" in noise.
        in_sample.append(
            max(best_rule(a.member_scores, a.member_labels, a.nonmember_scores,
                          a.nonmember_labels)[1] for a in attacks)
        )  # fmt: skip
    se = np.std(held_out) / np.sqrt(len(held_out))
    assert abs(np.mean(held_out)) < 3 * se
    assert np.mean(in_sample) > 0.2


def test_a_label_whose_members_sit_nearer_the_boundary_gets_the_other_direction() -> None:
    rng = np.random.RandomState(1)
    y_m, y_n = np.repeat([0, 1], 200), np.repeat([0, 1], 200)
    # Label 0: members score lower; label 1: members score higher.
    members = np.r_[rng.normal(-1.5, 1.0, 200), rng.normal(1.5, 1.0, 200)]
    nonmembers = rng.normal(0.0, 1.0, 400)
    rules, gain = best_rule(members, y_m, nonmembers, y_n)
    assert {(r.label, r.direction) for r in rules} == {(0, -1), (1, 1)}
    decisions = cross_fitted_decisions([_scores("both", members, nonmembers, y_m=y_m, y_n=y_n)],
                                       400, 400)  # fmt: skip
    # Each label's best threshold separates N(1.5, 1) from N(0, 1): Phi(0.75) - Phi(-0.75) = 0.55.
    assert decisions.advantage > 0.45
    assert gain == pytest.approx(decisions.advantage, abs=0.1)


@pytest.fixture(scope="module")
def icu_100_469(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The issue's sizes on the synthetic ICU cohort: 100 training and 469 test rows."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    from pytest_clinaudit.reference.data import write_csvs
    from pytest_clinaudit.reference.data.icu import generate_icu_cohort

    data = generate_icu_cohort(seed=42, n_train=100, n_test=469).dataset
    directory = tmp_path_factory.mktemp("icu-100-469")
    train, test = write_csvs(data, directory, train_name="train.csv", test_name="test.csv")
    files = {"train": train, "test": test, "dir": directory}
    for name, model in (
        ("1nn", make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=1))),
        ("tree", DecisionTreeClassifier(random_state=0)),
        ("logistic", make_pipeline(StandardScaler(), LogisticRegression(C=0.1))),
    ):
        files[name] = directory / f"{name}.pkl"
        files[name].write_bytes(pickle.dumps(model.fit(data.X_train, data.y_train)))
    return files


def _membership(files: dict[str, Path], name: str) -> dict[str, Any]:
    from pytest_clinaudit.cli import main

    out = files["dir"] / f"{name}.json"
    argv = [
        "audit", "--model", str(files[name]), "--train", str(files["train"]),
        "--test", str(files["test"]), "--label", "hospital_expire_flag",
        "--bootstrap", "100", "-q", "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    report: dict[str, Any] = json.loads(out.read_text())
    return report


@pytest.mark.slow
def test_a_one_nearest_neighbour_model_on_100_training_rows_gets_a_low_component(
    icu_100_469: dict[str, Path],
) -> None:
    report = _membership(icu_100_469, "1nn")
    component = report["membership"]["component"]
    assert report["components"]["membership_inference_resistance"] <= 0.6
    assert report["components"]["membership_inference_resistance"] == pytest.approx(
        1.0 - component["advantage"], abs=1e-4
    )
    assert component["n_members"] == 100
    # The label-only attack sees it: a training row sits at the centre of its own region.
    assert component["attacks_chosen"].get("boundary_distance", 0) >= 5


@pytest.mark.slow
def test_a_full_depth_tree_gets_a_lower_component_than_a_regularised_logistic_model(
    icu_100_469: dict[str, Path],
) -> None:
    tree = _membership(icu_100_469, "tree")["components"]["membership_inference_resistance"]
    logistic = _membership(icu_100_469, "logistic")["components"]["membership_inference_resistance"]
    assert tree < 0.95
    assert logistic >= 0.9
    assert tree < logistic


def test_a_strong_attack_on_a_few_rows_decides_them_and_the_next_attack_the_rest() -> None:
    """Issue 28: the 200-row boundary attack winning a fold dropped every other scored row."""
    from pytest_clinaudit.reference.review.advantage import covered

    rng = np.random.RandomState(2)
    n = 1000
    k_m, k_n = covered(n, n, 100)
    assert (k_m, k_n) == (50, 50)
    # A perfect attack on a 5% share of each group, and a weak one (members N(0.5, 1)) on all.
    few = AttackScores("few", np.arange(k_m), np.ones(k_m), np.zeros(k_m, np.int64),
                       np.arange(k_n), np.zeros(k_n), np.zeros(k_n, np.int64))  # fmt: skip
    weak = _scores("weak", rng.normal(0.5, 1.0, n), rng.normal(0.0, 1.0, n))
    decisions = cross_fitted_decisions([few, weak], n, n)
    summary = decisions.summary()
    assert (summary["n_members"], summary["n_nonmembers"]) == (n, n)
    assert summary["attacks_chosen"] == {"few": 10 * summary["repeats"]}
    assert summary["rows_decided_by"]["few"] == {"members": 50.0, "nonmembers": 50.0}
    assert summary["rows_decided_by"]["weak"] == {"members": 950.0, "nonmembers": 950.0}
    # One attacker: the perfect attack on 5% of the rows, the weak one (2 Phi(0.25) - 1 =
    # 0.197 at its best threshold) on the other 95%.
    assert decisions.advantage == pytest.approx(0.05 + 0.95 * 0.197, abs=0.05)


def test_an_attack_scores_the_same_share_of_members_and_non_members() -> None:
    from pytest_clinaudit.reference.review.advantage import covered

    assert covered(100, 469, 2000) == (100, 469)  # every row, up to 2,000
    assert covered(100, 469, 200) == (36, 165)  # 200 / 569 of each, rounded up
    assert covered(20_000, 20_000, 2000) == (1000, 1000)
    assert covered(10, 10, 0) == (0, 0)


def test_the_component_averages_fold_draws_and_reports_their_spread() -> None:
    rng = np.random.RandomState(3)
    attack = _scores("weak", rng.normal(0.3, 1.0, 300), rng.normal(0.0, 1.0, 300))
    one = cross_fitted_decisions([attack], 300, 300, repeats=1)
    many = cross_fitted_decisions([attack], 300, 300, repeats=10, seed=5)
    assert one.seed_sd == 0.0
    assert one.member_flagged.tolist() == [float(f) for f in one.member_flagged]
    assert set(np.unique(one.member_flagged)) <= {0.0, 1.0}
    # The first draw is the single draw's; the others reshuffle the folds.
    assert many.repeat_advantages[0] == one.advantage
    assert len(set(many.repeat_advantages)) > 1
    assert many.advantage == pytest.approx(np.mean(many.repeat_advantages), abs=1e-12)
    assert many.seed_sd == pytest.approx(np.std(many.repeat_advantages, ddof=1) / np.sqrt(10))
    assert many.member_flagged.min() >= 0.0
    assert many.member_flagged.max() <= 1.0
