"""TPR at low FPR only where the non-members allow it, always with a Clopper-Pearson interval.

Issue 18, case 4: with 114 members, 114 non-members and no leakage at all, the
TPR at 1% FPR read off one allowed false positive had a 95th percentile of
0.053, the very value an audit of a logistic model reported as leakage.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.review import lowfpr


@pytest.fixture(scope="module")
def wdbc_owner_files(tmp_path_factory: pytest.TempPathFactory, wdbc: Dataset) -> dict[str, Path]:
    import owner_models

    files: dict[str, Path] = owner_models.wdbc_files(tmp_path_factory.mktemp("lowfpr"), wdbc)
    return files


def test_with_114_non_members_the_tpr_at_one_percent_is_not_estimable_and_says_why() -> None:
    rng = np.random.RandomState(0)
    point = lowfpr.low_fpr_point(rng.normal(size=114), rng.normal(size=114), 0.01)
    assert not point.estimable
    assert point.tpr is None
    assert point.tpr_low is None
    assert point.reason == "not estimable: needs 1000 non-members"
    assert point.min_nonmembers == 1000


def test_the_rule_is_ten_false_positives_whatever_the_rate() -> None:
    assert [lowfpr.min_nonmembers(f) for f in (0.1, 0.01, 0.001)] == [100, 1000, 10000]
    scores = np.zeros(999)
    assert not lowfpr.low_fpr_point(np.ones(5), scores, 0.01).estimable
    assert lowfpr.low_fpr_point(np.ones(5), np.zeros(1000), 0.01).estimable


def test_the_threshold_lets_through_at_most_the_allowed_non_members_ties_excluded_whole() -> None:
    # 1000 non-members: 10 allowed. Scores 1..990 once, then 991 eleven times: the tie
    # at the top would let 11 through, so the threshold sits above it and none pass.
    nonmembers = np.r_[np.arange(1.0, 990.0), np.full(11, 991.0)]
    members = np.array([995.0, 991.0, 990.5, 0.0])
    point = lowfpr.low_fpr_point(members, nonmembers, 0.01)
    assert point.fpr_achieved == 0.0
    assert point.tpr == 0.25  # only the member above every non-member
    # Without the tie, the ten highest non-members are allowed through.
    untied = lowfpr.low_fpr_point(members, np.arange(1000.0), 0.01)
    assert untied.fpr_achieved == 0.01
    assert untied.tpr == 0.75


def test_the_interval_is_scipys_clopper_pearson_of_the_members_found() -> None:
    rng = np.random.RandomState(1)
    members, nonmembers = rng.normal(0.7, 1.0, 300), rng.normal(size=2000)
    point = lowfpr.low_fpr_point(members, nonmembers, 0.01)
    assert point.tpr is not None
    found = round(point.tpr * 300)
    exact = stats.binomtest(found, 300).proportion_ci(0.95, method="exact")
    assert (point.tpr_low, point.tpr_high) == pytest.approx((exact.low, exact.high), abs=1e-12)


def test_the_interval_covers_the_true_tpr_of_the_chosen_threshold_at_least_95_percent() -> None:
    """Known truth: members N(0.5, 1), non-members N(0, 1); the TPR of a threshold t is
    1 - Phi(t - 0.5). Clopper-Pearson is conservative, so coverage is at least 95%."""
    rng = np.random.RandomState(2)
    covered = []
    for _ in range(300):
        members, nonmembers = rng.normal(0.5, 1.0, 1000), rng.normal(size=1000)
        point = lowfpr.low_fpr_point(members, nonmembers, 0.01)
        cut = np.sort(nonmembers)[::-1][10]
        truth = 1.0 - stats.norm.cdf(np.nextafter(cut, np.inf) - 0.5)
        covered.append(point.tpr_low <= truth <= point.tpr_high)
    # 300 draws: a true coverage of 0.95 falls below 0.92 with probability < 1%.
    assert np.mean(covered) >= 0.92


def test_an_audit_of_114_non_members_reports_no_tpr_at_one_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], wdbc_owner_files: dict[str, Path]
) -> None:
    from pytest_clinaudit.cli import main

    out, page = tmp_path / "report.json", tmp_path / "report.html"
    argv = [
        "audit", "--model", str(wdbc_owner_files["model"]),
        "--train", str(wdbc_owner_files["train"]), "--test", str(wdbc_owner_files["test"]),
        "--label", "label", "--bootstrap", "50", "--no-lira", "-q",
        "--out", str(out), "--html", str(page),
    ]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    for key in ("loss_threshold", "shadow", "boundary_distance"):
        one_percent = report["membership"][key]["low_fpr"][0]
        assert one_percent["fpr"] == 0.01
        assert one_percent["estimable"] is False, key
        assert one_percent["tpr"] is None
        assert one_percent["reason"] == "not estimable: needs 1000 non-members"
    assert "TPR@1.0% not estimable: needs 1000 non-members" in printed
    assert "not estimable: needs 1000 non-members" in page.read_text()
