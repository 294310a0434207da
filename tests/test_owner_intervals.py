"""Issue 28, part 1 (first step): no interval shown excludes its point.

At 125-172 test rows the bootstrap put 98-99% of its replicates on one side of
the point and BCa took the interval from the far tail: WHAS500's logistic model
(C = 0.1) had an SPS of 71.87 with a "95%" interval of [72.71, 76.22] and a
verdict "held with 100.0% confidence". Such an interval (and a zero-width one
whose replicates vary) is withheld with its reason, and the verdict's stability
is computed only from an SPS interval that holds.
"""

from __future__ import annotations

import html
import json
import math
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from owner_cohorts import LABEL, write_cohort

from pytest_clinaudit.cli import main
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.reference.review.bca import BCaInterval, held


def _interval(point: float, low: float, high: float) -> BCaInterval:
    return BCaInterval(point, low, high, bias=0.0, z0=2.4, acceleration=0.1, n_undefined=0)


def test_an_interval_that_excludes_its_point_is_withheld_with_the_reason() -> None:
    replicates = np.linspace(0.20, 0.38, 100)  # 96% of them below the point
    found = held(_interval(0.373, 0.491, 0.678), replicates)
    assert math.isnan(found.low)
    assert math.isnan(found.high)
    assert found.point == 0.373
    assert found.withheld == (
        "the bootstrap puts 96% of its replicates below the point (z0 = +2.4), so its BCa "
        "interval [0.491, 0.678] excludes the point: no interval is shown"
    )


def test_a_zero_width_interval_of_varying_replicates_is_withheld() -> None:
    replicates = np.r_[np.full(90, -0.0148), np.linspace(-0.02, 0.0, 10)]
    found = held(_interval(-0.0148, -0.0148, -0.0148), replicates)
    assert math.isnan(found.low)
    assert "zero width although the replicates vary" in str(found.withheld)


def test_an_interval_that_holds_its_point_is_kept() -> None:
    replicates = np.linspace(0.4, 0.7, 100)
    interval = _interval(0.55, 0.42, 0.69)
    assert held(interval, replicates) == interval
    constant = _interval(1.0, 1.0, 1.0)  # every replicate equal: no uncertainty to show
    assert held(constant, np.ones(50)) == constant


def _logistic(files: Any) -> Any:
    from sklearn.compose import make_column_transformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    X, y = files.xy("train")
    text = [c for c in X.columns if X[c].dtype == object]
    encode = make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), text),
        remainder=make_pipeline(SimpleImputer(), StandardScaler()),
    )
    return make_pipeline(encode, LogisticRegression(C=0.1, max_iter=2000)).fit(X, y)


def _shown(report: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Every interval of the report with its path: components, SPS, diagnostics, attack AUCs."""
    boot = report["uncertainty"]
    found = [(f"uncertainty.components.{n}", boot["components"][n]) for n in COMPONENTS]
    found.append(("uncertainty.sps", boot["sps"]))
    found += [(f"uncertainty.diagnostics.{n}", v) for n, v in boot["diagnostics"].items()]
    for key in ("loss_threshold", "shadow", "boundary_distance"):
        attack = report["membership"].get(key, {})
        if "auc_interval" in attack:
            interval = dict(attack["auc_interval"])
            found.append((f"membership.{key}.auc_interval", interval))
    return found


@pytest.mark.parametrize("cohort", ["whas500", "gbsg2", "aids"])
def test_every_interval_shown_holds_its_point_and_every_other_says_why(
    cohort: str, tmp_path: Path
) -> None:
    files = write_cohort(tmp_path, cohort)
    model = tmp_path / "logistic.pkl"
    model.write_bytes(pickle.dumps(_logistic(files)))
    out, page = tmp_path / "report.json", tmp_path / "report.html"
    argv = [
        "audit", "--model", str(model), "--train", str(files.train_csv),
        "--test", str(files.test_csv), "--label", LABEL, "--bootstrap", "1000", "--no-lira",
        "-q", "--out", str(out), "--html", str(page),
    ]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(out.read_text())
    undefined = report["undefined"]
    for path, interval in _shown(report):
        low, high, point = interval["low"], interval["high"], interval["point"]
        if interval.get("withheld"):
            assert low is None, path
            assert high is None, path
            assert undefined[path] == interval["withheld"]
        elif low is not None and high is not None:
            assert low - 1e-9 <= point <= high + 1e-9, (path, interval)
            # Zero width only where nothing varies on the reported scale: constant
            # replicates (no bias), or a component whose whole interval before the clip
            # lies beyond its bound (a membership advantage below 0 reads 1.0 [1.0, 1.0]).
            clipped = path.startswith("uncertainty.components.") and point in (0.0, 1.0)
            assert high > low or interval["bias"] == 0.0 or clipped, (path, interval)
    stability = report["uncertainty"]["verdict_change_probability"]
    text = html.unescape(page.read_text())
    if report["uncertainty"]["sps"].get("withheld"):
        assert stability is None
        assert "not computed" in undefined["uncertainty.verdict_change_probability"]
        assert "Stability under resampling: not computed." in text
    else:
        assert 0.0 <= stability <= 1.0
    if cohort == "whas500":
        # The case: 125 test rows; its interval sat above the SPS, [72.71, 76.22]
        # around 71.87, with 98% of the replicates below the point.
        assert report["data"]["test"]["rows"] == 125
        assert report["uncertainty"]["sps"]["withheld"].startswith("the bootstrap puts 9")
        assert "of its replicates below the point" in report["uncertainty"]["sps"]["withheld"]
        assert "verdict held with" not in text
