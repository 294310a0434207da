"""Missing values and categorical columns pass through to the model (issue 18, case 6).

XGBoost takes NaN natively and a Pipeline(ColumnTransformer(OneHotEncoder))
takes a string ``sex`` column; the audit used to refuse both before asking
the model. Now the model is asked, and every attack perturbs only numeric
cells that hold a number: categories and missing cells are held fixed, and
the summary and the page say so.
"""

from __future__ import annotations

import html
import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_clinaudit.cli import main
from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.data.icu import LABEL, generate_icu_cohort

FAST = ["--bootstrap", "100", "-q"]


def _cohort() -> Dataset:
    return generate_icu_cohort(seed=7, n_train=1500, n_test=500).dataset


def _write(path: Path, header: list[str], columns: list[Any]) -> Path:
    """A CSV with ``repr`` floats, an empty cell for NaN, strings as they are."""
    rows = zip(*columns, strict=True)
    lines = [",".join(header)]
    for row in rows:
        cells = []
        for value in row:
            if isinstance(value, str):
                cells.append(value)
            elif isinstance(value, float) and np.isnan(value):
                cells.append("")
            else:
                cells.append(repr(value) if isinstance(value, float) else str(value))
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


def _audit(model: Path, train: Path, test: Path, out: Path, *extra: str) -> list[str]:
    return [
        "audit", "--model", str(model), "--train", str(train), "--test", str(test),
        "--label", LABEL, *FAST, "--out", str(out), *extra,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def missing(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The cohort with 10% of its numeric cells blanked, and XGBoost fitted on it as it is."""
    from xgboost import XGBClassifier

    data = _cohort()
    rng = np.random.RandomState(0)
    blank = []
    for X in (data.X_train, data.X_test):
        holes = np.array(X, copy=True)
        holes[rng.uniform(size=X.shape) < 0.1] = np.nan
        blank.append(holes)
    directory = tmp_path_factory.mktemp("missing")
    header = [LABEL, *data.feature_names]
    files: dict[str, Any] = {"dir": directory, "X": blank}
    for name, X, y in (("train", blank[0], data.y_train), ("test", blank[1], data.y_test)):
        files[name] = _write(directory / f"{name}.csv", header, [list(y), *X.T.tolist()])
    model = XGBClassifier(n_estimators=30, max_depth=3, n_jobs=1, random_state=0, verbosity=0)
    files["xgboost"] = directory / "xgboost.pkl"
    files["xgboost"].write_bytes(pickle.dumps(model.fit(blank[0], data.y_train)))
    from sklearn.linear_model import LogisticRegression

    complete = LogisticRegression(max_iter=2000).fit(data.X_train, data.y_train)
    files["logistic"] = directory / "logistic.pkl"
    files["logistic"].write_bytes(pickle.dumps(complete))
    return files


def test_xgboost_on_ten_percent_missing_cells_is_audited_with_them_held_fixed(
    missing: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out, page = missing["dir"] / "xgb.json", missing["dir"] / "xgb.html"
    argv = _audit(missing["xgboost"], missing["train"], missing["test"], out, "--html", str(page))
    assert main(argv) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    cells = report["features"]["missing_cells"]
    expected = [int(np.isnan(X).sum()) for X in missing["X"]]
    assert [cells["train"], cells["test"]] == expected
    assert 0.08 < expected[1] / missing["X"][1].size < 0.12
    held = report["features"]["held_fixed"]
    assert held.startswith("every attack perturbs only numeric cells that hold a number")
    assert f"missing cells ({expected[0]} in training, {expected[1]} in test rows" in held
    assert f"held fixed: {held}" in printed
    assert held[1:] in html.unescape(page.read_text())
    assert report["diagnostics"]["auroc"] > 0.6
    assert report["membership"]["lira"]["n_shadows"] == 4  # XGBClassifier clones with its NaN


def test_a_model_that_cannot_take_missing_cells_is_refused_in_its_own_words(
    missing: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    out = missing["dir"] / "logistic.json"
    assert main(_audit(missing["logistic"], missing["train"], missing["test"], out)) == 2
    err = [
        line
        for line in capsys.readouterr().err.splitlines()
        if not line.startswith("clinaudit: unpickling")
    ]
    assert len(err) == 1
    assert err[0].startswith(
        "clinaudit audit: error: LogisticRegression.predict_proba failed on the audit's rows: "
        "Input X contains NaN."
    )
    assert "(the data holds missing cells in 'heart_rate' (" in err[0]
    assert not out.exists()


@pytest.fixture(scope="module")
def categorical(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The cohort with ``gender_enc`` as a string ``sex`` column, and a one-hot pipeline."""
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    data = _cohort()
    numeric = [n for n in data.feature_names if n != "gender_enc"]
    sex_column = data.feature_names.index("gender_enc")
    directory = tmp_path_factory.mktemp("categorical")
    frames = {}
    for name, X, y in (("train", data.X_train, data.y_train), ("test", data.X_test, data.y_test)):
        frame = pd.DataFrame(X[:, [data.feature_names.index(n) for n in numeric]], columns=numeric)
        frame.insert(3, "sex", np.where(X[:, sex_column] > 0, "M", "F"))
        frames[name] = frame
        columns = [list(y), *(frame[c].tolist() for c in frame.columns)]
        _write(directory / f"{name}.csv", [LABEL, *frame.columns], columns)
    encoder = ColumnTransformer(
        [("sex", OneHotEncoder(), ["sex"]), ("vitals", StandardScaler(), numeric)]
    )
    model = make_pipeline(encoder, LogisticRegression(max_iter=2000))
    model.fit(frames["train"], data.y_train)
    path = directory / "pipeline.pkl"
    path.write_bytes(pickle.dumps(model))
    return {"dir": directory, "model": path, "frames": frames, "y": data.y_test}


def test_a_one_hot_pipeline_takes_its_string_sex_column_and_sex_is_held_fixed(
    categorical: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    directory = categorical["dir"]
    out, page = directory / "report.json", directory / "report.html"
    argv = _audit(
        categorical["model"], directory / "train.csv", directory / "test.csv", out,
        "--html", str(page),
    )  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert report["data"]["categorical"] == {"sex": ["F", "M"]}
    assert report["features"]["categorical_columns"] == ["sex"]
    assert "categorical columns sex" in report["features"]["held_fixed"]
    assert "held fixed: every attack perturbs only numeric cells" in printed
    assert "categorical columns sex" in html.unescape(page.read_text())
    # The model's own probabilities on the file's strings are what the audit measured.
    from sklearn.metrics import roc_auc_score

    model = pickle.loads(categorical["model"].read_bytes())
    truth = roc_auc_score(
        categorical["y"], model.predict_proba(categorical["frames"]["test"])[:, 1]
    )
    assert report["diagnostics"]["auroc"] == pytest.approx(truth, abs=1e-12)
    assert report["membership"]["lira"]["n_shadows"] == 4  # shadows refitted on the strings


# ---------------------------------------------------------------- the attacks hold them fixed


class Recording:
    """A model that records every row it is asked about; probability from column 0."""

    def __init__(self) -> None:
        self.seen: list[np.ndarray] = []

    def predict_proba(self, X: Any) -> Any:
        rows = np.asarray(X, dtype=np.float64)
        self.seen.append(rows.copy())
        p = 1.0 / (1.0 + np.exp(-np.nan_to_num(rows[:, 0])))
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> Any:
        return (self.predict_proba(X)[:, 1] > 0.5).astype(np.int64)


def _held_data() -> Dataset:
    rng = np.random.RandomState(3)
    X = rng.normal(size=(200, 3))
    X[:, 2] = rng.randint(0, 3, 200)  # a categorical column: codes 0, 1, 2
    X[rng.uniform(size=200) < 0.2, 1] = np.nan  # missing cells in column 1
    y = (X[:, 0] + 0.5 * rng.normal(size=200) > 0).astype(np.int64)
    return Dataset("held", "y", ("a", "b", "c"), X[:120], y[:120], X[120:], y[120:])


def test_fgsm_the_walk_and_hopskipjump_never_move_a_category_or_a_missing_cell() -> None:
    import dataclasses

    from pytest_clinaudit.reference.review.own_data import audit_own_data
    from pytest_clinaudit.reference.review.profile import OwnDataParams

    data = _held_data()
    model = Recording()
    params = dataclasses.replace(OwnDataParams(), lira_shadows=0, boundary_rows=20, n_boot=20)
    audit_own_data(model, data, params, categorical=(2,))
    asked = np.concatenate(model.seen)
    known = np.concatenate([data.X_train, data.X_test])
    # Every row the model was asked about keeps a category code the data holds ...
    assert set(np.unique(asked[:, 2]).tolist()) <= {0.0, 1.0, 2.0}
    # ... and a missing cell stays missing: as many NaN rows in column 1 as queried
    # rows started from one (each row's NaN survives every perturbation).
    assert np.isnan(asked[:, 1]).any()
    # Column 0 moved (the attacks did work), column 2 never left its codes.
    assert len(np.unique(asked[:, 0])) > len(np.unique(known[:, 0]))


def test_a_perturbation_keeps_each_rows_own_category_and_missing_cells() -> None:
    from pytest_clinaudit.reference.attacks.budget import Budget
    from pytest_clinaudit.reference.review.features import feature_view
    from pytest_clinaudit.reference.review.robustness import perturb

    data = _held_data()
    view = feature_view(data, categorical=(2,))
    X, y = data.X_test, data.y_test
    budget = Budget.of(0.5, view.scale, std_units=True, clip=True)
    (copy,) = perturb(
        Recording(), X, y, [budget], view=view, surrogate_sign=lambda: np.ones(3)
    ).copies
    np.testing.assert_array_equal(copy[:, 2], X[:, 2])
    assert np.array_equal(np.isnan(copy[:, 1]), np.isnan(X[:, 1]))
    moved = ~np.isnan(X[:, 1])
    assert (copy[moved, 1] != X[moved, 1]).all()
    assert (copy[:, 0] != X[:, 0]).all()
