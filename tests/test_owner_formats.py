"""Issue 28, part 4: the model formats hospitals ship, on real cohorts.

- ``HistGradientBoostingClassifier`` with native categorical features and
  XGBoost models saved with ``enable_categorical`` get their data as fitted,
  from the model's own record of its categorical features and categories;
- a torch ``.pt2`` returning two logits per row, or (n, 1), is audited under
  the documented contract (``--positive-output`` picks the positive class's
  of two outputs); a fixed-batch export is one line saying to export a
  dynamic batch dimension;
- ``--categorical COL,...`` declares number-coded categories, held fixed.

Each audit's AUROC is checked against the model's own ``predict_proba`` on the
test file as the model was fitted: the audit asked the model what it would
answer.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from owner_cohorts import LABEL, CohortFiles, write_cohort

from pytest_clinaudit.cli import main

FAST = ["--bootstrap", "50", "--no-lira", "-q"]

GBSG2_TEXT = ["horTh", "menostat", "tgrade"]
AIDS_CODED = ["hemophil", "ivdrug", "karnof", "raceth", "sex", "strat2", "tx", "txgrp"]


def _as_categories(frame: Any, columns: list[str], *, as_text: bool) -> Any:
    """``frame`` with ``columns`` as pandas categories (number codes as strings: '70')."""
    frame = frame.copy()
    for column in columns:
        values = frame[column]
        if as_text:
            values = values.map(lambda v: str(int(v)))
        frame[column] = values.astype("category")
    return frame


def _audit(
    files: CohortFiles, model: Path, out: Path, *extra: str, fast: list[str] = FAST
) -> dict[str, Any]:
    argv = [
        "audit", "--model", str(model), "--train", str(files.train_csv),
        "--test", str(files.test_csv), "--label", LABEL, *fast, *extra, "--out", str(out),
    ]  # fmt: skip
    assert main(argv) == 0
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def _refused(
    capsys: pytest.CaptureFixture[str], files: CohortFiles, model: Path, *extra: str
) -> str:
    argv = [
        "audit", "--model", str(model), "--train", str(files.train_csv),
        "--test", str(files.test_csv), "--label", LABEL, *FAST, *extra,
    ]  # fmt: skip
    assert main(argv) == 2
    err = [
        line
        for line in capsys.readouterr().err.splitlines()
        if not line.startswith("clinaudit: unpickling")
    ]
    assert len(err) == 1, err
    return err[0].removeprefix("clinaudit audit: error: ")


def _auroc(y: Any, p: Any) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, p))


@pytest.fixture(scope="module")
def gbsg2(tmp_path_factory: pytest.TempPathFactory) -> CohortFiles:
    return write_cohort(tmp_path_factory.mktemp("gbsg2"), "gbsg2")


@pytest.fixture(scope="module")
def aids(tmp_path_factory: pytest.TempPathFactory) -> CohortFiles:
    return write_cohort(tmp_path_factory.mktemp("aids"), "aids")


@pytest.fixture(scope="module")
def whas(tmp_path_factory: pytest.TempPathFactory) -> CohortFiles:
    return write_cohort(tmp_path_factory.mktemp("whas500"), "whas500")


# ------------------------------------------------------ native categoricals


@pytest.mark.parametrize(
    ("cohort", "columns", "as_text", "lira"),
    [("gbsg2", GBSG2_TEXT, False, False), ("aids", AIDS_CODED, True, True)],
    ids=["gbsg2-text-levels", "aids-number-coded-levels"],
)
def test_a_native_categorical_hist_gradient_boosting_model_gets_its_data_as_fitted(
    request: pytest.FixtureRequest, tmp_path: Path, cohort: str, columns: list[str],
    as_text: bool, lira: bool,
) -> None:  # fmt: skip
    from sklearn.ensemble import HistGradientBoostingClassifier

    files: CohortFiles = request.getfixturevalue(cohort)
    X, y = files.xy("train")
    model = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=0)
    model.fit(_as_categories(X, columns, as_text=as_text), y)
    path = tmp_path / "hgb.pkl"
    path.write_bytes(pickle.dumps(model))
    fast = ["--bootstrap", "50", "-q"] + ([] if lira else ["--no-lira"])
    report = _audit(files, path, tmp_path / "report.json", fast=fast)
    X_test, y_test = files.xy("test")
    expected = model.predict_proba(_as_categories(X_test, columns, as_text=as_text))[:, 1]
    assert report["diagnostics"]["auroc"] == pytest.approx(_auroc(y_test, expected), abs=1e-12)
    # The model's own record says which columns are categories: every attack holds them.
    assert report["features"]["categorical_from"]["model"] == columns
    assert set(columns) <= set(report["features"]["categorical_columns"])
    if lira:  # the shadow models are refitted on the rows as the model was given them
        assert "online" in report["membership"]["lira"]


def test_a_categorical_xgboost_booster_gets_its_data_as_fitted(
    gbsg2: CohortFiles, tmp_path: Path
) -> None:
    import xgboost

    X, y = gbsg2.xy("train")
    fitted = _as_categories(X, GBSG2_TEXT, as_text=False)
    model = xgboost.XGBClassifier(
        enable_categorical=True, n_estimators=40, max_depth=3, tree_method="hist", n_jobs=1
    ).fit(fitted, y)
    path = tmp_path / "booster.json"
    model.save_model(path)
    report = _audit(gbsg2, path, tmp_path / "report.json")
    X_test, y_test = gbsg2.xy("test")
    expected = model.predict_proba(_as_categories(X_test, GBSG2_TEXT, as_text=False))[:, 1]
    assert report["diagnostics"]["auroc"] == pytest.approx(_auroc(y_test, expected), abs=1e-9)
    assert report["features"]["categorical_from"]["model"] == GBSG2_TEXT


def test_a_pickled_categorical_xgb_classifier_with_number_coded_levels_is_audited(
    aids: CohortFiles, tmp_path: Path
) -> None:
    import xgboost

    X, y = aids.xy("train")
    model = xgboost.XGBClassifier(
        enable_categorical=True, n_estimators=40, max_depth=3, tree_method="hist", n_jobs=1
    ).fit(_as_categories(X, AIDS_CODED, as_text=True), y)
    path = tmp_path / "xgb.pkl"
    path.write_bytes(pickle.dumps(model))
    report = _audit(aids, path, tmp_path / "report.json")
    X_test, y_test = aids.xy("test")
    expected = model.predict_proba(_as_categories(X_test, AIDS_CODED, as_text=True))[:, 1]
    assert report["diagnostics"]["auroc"] == pytest.approx(_auroc(y_test, expected), abs=1e-9)
    assert report["features"]["categorical_from"]["model"] == AIDS_CODED


# ------------------------------------------------------------------ torch


def _export(module: Any, path: Path, *, batch: int = 4, dynamic: bool = True) -> Path:
    import torch

    example = torch.zeros(batch, module.n_features)
    shapes = {"x": {0: torch.export.Dim("batch", min=1)}} if dynamic else None
    torch.export.save(torch.export.export(module, (example,), dynamic_shapes=shapes), path)
    return path


def _trained(files: CohortFiles, outputs: int, *, softmax: bool = False) -> Any:
    """A linear model on standardised rows with ``outputs`` logits per row, trained briefly."""
    import torch

    X, y = files.xy("train")
    rows = torch.tensor(X.to_numpy(np.float32))
    labels = torch.tensor(y)

    class Linear(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.n_features = rows.shape[1]
            self.linear = torch.nn.Linear(rows.shape[1], outputs)
            self.register_buffer("mean", rows.mean(0))
            self.register_buffer("std", rows.std(0))
            self.softmax = softmax

        def forward(self, x: Any) -> Any:
            z = self.linear((x - self.mean) / self.std)
            return torch.softmax(z, dim=1) if self.softmax else z

    torch.manual_seed(0)
    module = Linear()
    optimiser = torch.optim.Adam(module.parameters(), lr=0.05)
    for _ in range(100):
        optimiser.zero_grad()
        z = module(rows)
        if outputs == 2:
            loss = torch.nn.functional.cross_entropy(z, labels)
        else:
            loss = torch.nn.functional.binary_cross_entropy_with_logits(z[:, 0], labels.float())
        loss.backward()
        optimiser.step()
    return module.eval()


def _torch_auroc(module: Any, files: CohortFiles, positive: int = 1) -> float:
    import torch

    X_test, y_test = files.xy("test")
    with torch.no_grad():
        z = module(torch.tensor(X_test.to_numpy(np.float32))).double()
    score = z[:, positive] - z[:, 1 - positive] if z.shape[1] == 2 else z[:, 0]
    return _auroc(y_test, score.numpy())


def test_a_torch_program_with_two_logits_per_row_is_audited_under_its_contract(
    whas: CohortFiles, tmp_path: Path
) -> None:
    pytest.importorskip("torch")
    module = _trained(whas, 2)
    path = _export(module, tmp_path / "two.pt2")
    report = _audit(whas, path, tmp_path / "report.json")
    # float32 logits: the ranking, not the last bit
    assert report["diagnostics"]["auroc"] == pytest.approx(_torch_auroc(module, whas), abs=1e-3)
    assert report["model"]["output"].startswith("two class logits per row, shape (n, 2); output 1")
    assert report["robustness"]["fgsm_curve"]["attack"] == "white-box"
    flipped = _audit(whas, path, tmp_path / "flipped.json", "--positive-output", "0")
    assert flipped["diagnostics"]["auroc"] == pytest.approx(
        _torch_auroc(module, whas, positive=0), abs=1e-3
    )
    assert flipped["diagnostics"]["auroc"] < 0.5 < report["diagnostics"]["auroc"]


def test_a_torch_program_with_one_column_per_row_is_the_positive_class_logit(
    whas: CohortFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    module = _trained(whas, 1)
    path = _export(module, tmp_path / "one.pt2")
    report = _audit(whas, path, tmp_path / "report.json")
    assert report["diagnostics"]["auroc"] == pytest.approx(_torch_auroc(module, whas), abs=1e-3)
    assert (
        report["model"]["output"] == "the positive class's logit per row, shape (n, 1); p = sigmoid"
    )
    assert _refused(capsys, whas, path, "--positive-output", "0") == (
        "--positive-output chooses between two outputs per row; the torch program returns one "
        "per row"
    )


def test_a_fixed_batch_export_is_told_to_export_a_dynamic_batch(
    whas: CohortFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    path = _export(_trained(whas, 2), tmp_path / "fixed.pt2", batch=32, dynamic=False)
    assert _refused(capsys, whas, path) == (
        "the torch program was exported for a fixed batch of 32 rows; export it with a dynamic "
        "batch dimension: torch.export.export(model, (x,), "
        "dynamic_shapes={'x': {0: torch.export.Dim('batch')}})"
    )


def test_a_program_that_outputs_probabilities_is_told_to_drop_its_softmax(
    whas: CohortFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    path = _export(_trained(whas, 2, softmax=True), tmp_path / "softmax.pt2")
    assert _refused(capsys, whas, path) == (
        "the torch program's two outputs per row sum to 1: they look like probabilities, not "
        "logits; export the model without its final softmax"
    )


# ------------------------------------------------------------ --categorical


def test_declared_number_coded_categories_are_held_fixed(
    aids: CohortFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = aids.xy("train")
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000)).fit(X, y)
    path = tmp_path / "logistic.pkl"
    path.write_bytes(pickle.dumps(model))
    plain = _audit(aids, path, tmp_path / "plain.json")
    assert plain["features"]["categorical_columns"] == []
    declared = _audit(
        aids, path, tmp_path / "declared.json", "--categorical", "karnof, raceth,txgrp"
    )
    assert declared["features"]["categorical_from"]["declared"] == ["karnof", "raceth", "txgrp"]
    assert declared["features"]["categorical_columns"] == ["karnof", "raceth", "txgrp"]
    assert (
        "held fixed categorical columns karnof, raceth, txgrp"
        in (declared["features"]["held_fixed"])
    )
    # Nothing about the model's answers changes, only what the attacks may move.
    assert declared["diagnostics"]["auroc"] == plain["diagnostics"]["auroc"]
    message = _refused(capsys, aids, path, "--categorical", "karnof,grade")
    assert message.startswith("--categorical names 'grade', which the data does not have as a ")


def test_the_torch_and_categorical_options_are_refused_where_they_mean_nothing(
    aids: CohortFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = aids.xy("train")
    path = tmp_path / "logistic.pkl"
    path.write_bytes(pickle.dumps(LogisticRegression(max_iter=3000).fit(X.to_numpy(), y)))
    assert _refused(capsys, aids, path, "--positive-output", "0") == (
        f"--positive-output chooses between a torch program's two outputs per row; {path} is "
        "not a torch program"
    )
    assert _refused(capsys, aids, path, "--categorical", "karnof", "--params", "wdbc-baseline") == (
        "--categorical is part of the own-data profile; it cannot go with --params"
    )
