"""Issue 28, part 1: a test of calibration whose error rate is measured.

Consistency resampling draws each row's outcome from the model's own
probability and reads the task's ECE against those draws. It reproduces the
task's ECE exactly, rejects about 5% of calibrated samples at 0.05 (only
gross failures are asserted here: a few hundred samples), and rejects a
miscalibrated model most of the time.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from owner_cohorts import LABEL, write_cohort

from pytest_clinaudit.cli import main
from pytest_clinaudit.reference.attacks.ece import task_ece
from pytest_clinaudit.reference.review.consistency import _TaskBins, consistency_test


def _task_ece_of(y: np.ndarray, p: np.ndarray) -> float:
    bins = _TaskBins.of(p, 10)
    indicator = np.zeros((len(p), len(bins.totals)))
    indicator[np.arange(len(p)), bins.bins] = 1.0
    return float(bins.ece((y.astype(float) @ indicator)[None, :])[0])


@pytest.mark.parametrize(
    "probabilities",
    [
        np.r_[np.linspace(0.01, 0.35, 60), np.linspace(0.8, 0.95, 20)],  # empty middle bins
        np.r_[np.full(5, 1.0), np.full(5, 0.3), np.linspace(0.0, 0.99, 40)],  # p of exactly 1
        np.r_[np.full(10, 0.5), np.full(10, 0.2)],  # values on the bin edges
    ],
    ids=["empty-middle-bins", "probability-one", "edges"],
)
def test_the_resampled_statistic_is_the_tasks_ece_quirks_included(
    probabilities: np.ndarray,
) -> None:
    rng = np.random.RandomState(0)
    for _ in range(5):
        y = (rng.uniform(size=len(probabilities)) < 0.4).astype(np.int64)
        assert _task_ece_of(y, probabilities) == pytest.approx(
            task_ece(y, probabilities, 10), abs=1e-12
        )


def test_calibrated_samples_are_rejected_at_about_the_nominal_rate() -> None:
    rng = np.random.RandomState(2028)
    rejected = []
    for k in range(300):
        p = rng.beta(1.0, 6.0, size=150)
        y = (rng.uniform(size=150) < p).astype(np.int64)
        rejected.append(consistency_test(y, p, n_bins=10, n_resamples=200, seed=k).p_value <= 0.05)
    # 300 samples: the rate's standard error is 0.013; a gross failure lies far outside.
    assert 0.015 <= np.mean(rejected) <= 0.10


def test_a_model_that_overstates_risk_is_rejected() -> None:
    rng = np.random.RandomState(7)
    rejected = []
    for k in range(50):
        truth = rng.beta(1.0, 6.0, size=500)
        y = (rng.uniform(size=500) < truth).astype(np.int64)
        p = np.clip(1.6 * truth, 0.0, 1.0)
        rejected.append(consistency_test(y, p, n_bins=10, n_resamples=200, seed=k).p_value <= 0.05)
    assert np.mean(rejected) >= 0.7


def test_the_audit_reports_the_test_next_to_the_ece_it_tests(tmp_path: Path) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    files = write_cohort(tmp_path, "whas500")
    X, y = files.xy("train")
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000)).fit(X, y)
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(model))
    out = tmp_path / "report.json"
    argv = [
        "audit", "--model", str(path), "--train", str(files.train_csv), "--test",
        str(files.test_csv), "--label", LABEL, "--bootstrap", "400", "--no-lira", "-q",
        "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(out.read_text())
    test = report["diagnostics"]["calibration_test"]
    assert test["observed"] == pytest.approx(report["diagnostics"]["ece_task"], abs=1e-12)
    assert test["n_rows"] == 125
    assert test["n_resamples"] == 400
    assert 0.0 < test["p_value"] <= 1.0
    # On 125 rows a calibrated model's task ECE is itself large: the bias the
    # bootstrap interval could not correct.
    assert test["null_median"] > 0.05
    calibration = [f for f in report["findings"] if f["component"] == "calibration_ece"]
    if calibration and test["p_value"] > 0.05:
        assert calibration[0]["note"].startswith("the consistency test does not reject")
