"""Model adapters: every supported kind answers the same interface, every bad one a line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_clinaudit.reference import models
from pytest_clinaudit.reference.models import ModelError

NAMES = ("age", "heart_rate", "sbp")


def _data(n: int = 200, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    X = rng.standard_normal((n, len(NAMES)))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.standard_normal(n) > 0).astype(np.int64)
    return X, y


def test_an_svc_without_probabilities_is_a_one_line_error_that_says_how_to_fix_it() -> None:
    from sklearn.svm import SVC

    X, y = _data()
    with pytest.raises(ModelError) as info:
        models.adapt_model(SVC().fit(X, y), feature_names=NAMES, positive_class=1)
    assert str(info.value) == (
        "SVC has no predict_proba; the audit needs class probabilities "
        "(an SVC gives probabilities only when fitted with probability=True)"
    )


def test_a_string_label_model_is_audited_on_the_column_of_the_class_the_user_names() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    words = np.where(y == 1, "died", "survived")
    estimator = LogisticRegression().fit(X, words)
    assert list(estimator.classes_) == ["died", "survived"]  # died is column 0
    adapted = models.adapt_model(estimator, feature_names=NAMES, positive_class="died")
    proba = adapted.predict_proba(X)
    assert proba.shape == (len(X), 2)
    assert proba.dtype == np.float64
    np.testing.assert_array_equal(proba[:, 1], estimator.predict_proba(X)[:, 0])
    np.testing.assert_array_equal(proba[:, 0], 1.0 - estimator.predict_proba(X)[:, 0])
    np.testing.assert_array_equal(adapted.predict(X), (estimator.predict(X) == "died").astype(int))


def test_a_string_label_model_without_a_named_positive_class_is_refused() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    estimator = LogisticRegression().fit(X, np.where(y == 1, "died", "survived"))
    with pytest.raises(ModelError) as info:
        models.adapt_model(estimator, feature_names=NAMES)
    assert str(info.value) == (
        "LogisticRegression has classes 'died', 'survived': "
        "name the positive (adverse) class with --positive-class"
    )
    with pytest.raises(ModelError) as info:
        models.adapt_model(estimator, feature_names=NAMES, positive_class="dead")
    assert str(info.value) == (
        "positive class 'dead' is not one of LogisticRegression's classes ('died', 'survived'); "
        "pass one of them with --positive-class"
    )


def test_the_string_one_from_a_command_line_names_the_integer_class_one() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    estimator = LogisticRegression().fit(X, y)
    adapted = models.adapt_model(estimator, feature_names=NAMES, positive_class="1")
    np.testing.assert_array_equal(adapted.predict_proba(X), estimator.predict_proba(X))


def test_a_multiclass_model_is_refused() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    estimator = LogisticRegression().fit(X, y + (X[:, 2] > 1))
    with pytest.raises(
        ModelError,
        match=r"^LogisticRegression has 3 classes \(0, 1, 2\); the audit needs a binary classifier$",
    ):
        models.adapt_model(estimator, feature_names=NAMES, positive_class=1)


def test_a_pipeline_selecting_columns_by_name_gets_a_dataframe_in_its_own_column_order() -> None:
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data()
    fitted_order = ["sbp", "age"]  # a subset, in another order than the data's
    frame = pd.DataFrame(X[:, [2, 0]], columns=fitted_order)
    pipeline = make_pipeline(
        ColumnTransformer([("scale", StandardScaler(), ["age", "sbp"])]), LogisticRegression()
    ).fit(frame, y)
    adapted = models.adapt_model(pipeline, feature_names=NAMES, positive_class=1)
    np.testing.assert_array_equal(adapted.predict_proba(X), pipeline.predict_proba(frame))
    np.testing.assert_array_equal(adapted.predict(X), pipeline.predict(frame))


def test_a_model_fitted_on_a_column_the_data_lacks_names_the_column() -> None:
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    estimator = LogisticRegression().fit(
        pd.DataFrame(X, columns=["age", "heart_rate", "lactate"]), y
    )
    with pytest.raises(ModelError) as info:
        models.adapt_model(estimator, feature_names=NAMES, positive_class=1)
    assert str(info.value) == (
        "LogisticRegression was fitted with feature(s) lactate that the data does not have; "
        "the data's columns are age, heart_rate, sbp"
    )


def test_a_model_fitted_on_another_number_of_features_is_refused() -> None:
    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    estimator = LogisticRegression().fit(X[:, :2], y)
    with pytest.raises(
        ModelError, match=r"^LogisticRegression was fitted on 2 features; the data has 3$"
    ):
        models.adapt_model(estimator, feature_names=NAMES, positive_class=1)


def _booster(objective: str, *, names: bool) -> Any:
    import xgboost

    X, y = _data()
    matrix = xgboost.DMatrix(X, label=y, feature_names=list(NAMES) if names else None)
    params = {"objective": objective, "max_depth": 2, "nthread": 1, "seed": 0}
    return xgboost.train(params, matrix, num_boost_round=5)


@pytest.mark.parametrize("names", [True, False])
def test_a_booster_is_audited_on_its_probability_of_label_one(names: bool) -> None:
    import xgboost

    booster = _booster("binary:logistic", names=names)
    X, _ = _data(50, seed=1)
    adapted = models.adapt_model(booster, feature_names=NAMES, positive_class="1")
    expected = booster.predict(xgboost.DMatrix(X, feature_names=list(NAMES) if names else None))
    np.testing.assert_allclose(adapted.predict_proba(X)[:, 1], expected, rtol=0, atol=0)
    np.testing.assert_array_equal(adapted.predict(X), (expected > 0.5).astype(int))


def test_a_logitraw_booster_is_turned_into_probabilities() -> None:
    import xgboost

    booster = _booster("binary:logitraw", names=False)
    X, _ = _data(50, seed=1)
    logits = booster.predict(xgboost.DMatrix(X)).astype(np.float64)
    adapted = models.adapt_model(booster, feature_names=NAMES)
    np.testing.assert_allclose(adapted.predict_proba(X)[:, 1], 1 / (1 + np.exp(-logits)))


def test_a_regression_booster_is_refused() -> None:
    booster = _booster("reg:squarederror", names=False)
    with pytest.raises(ModelError) as info:
        models.adapt_model(booster, feature_names=NAMES)
    assert str(info.value) == (
        "Booster objective 'reg:squarederror' is not a binary probability; "
        "expected one of binary:logistic, reg:logistic, binary:logitraw"
    )


def test_a_booster_cannot_be_audited_on_label_zero() -> None:
    booster = _booster("binary:logistic", names=False)
    with pytest.raises(
        ModelError, match=r"^a Booster predicts the probability of label 1; positive class '0'"
    ):
        models.adapt_model(booster, feature_names=NAMES, positive_class="0")


def test_a_booster_saved_as_json_loads_from_the_path_the_user_named(tmp_path: Path) -> None:
    booster = _booster("binary:logistic", names=True)
    path = tmp_path / "model.json"
    booster.save_model(str(path))
    loaded = models.load_model_file(path)
    X, _ = _data(20, seed=2)
    adapted = models.adapt_model(loaded, feature_names=NAMES)
    np.testing.assert_array_equal(
        adapted.predict_proba(X), models.adapt_model(booster, feature_names=NAMES).predict_proba(X)
    )


def test_a_json_file_that_is_not_a_booster_is_a_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    path.write_text(json.dumps({"not": "a model"}))
    with pytest.raises(ModelError, match=r"model\.json: not an XGBoost model"):
        models.load_model_file(path)


class _Answers:
    """A model that answers whatever it was given, for the probability checks."""

    classes_ = np.array([0, 1])

    def __init__(self, proba: np.ndarray) -> None:
        self.proba = proba

    def predict_proba(self, X: np.ndarray) -> np.ndarray:
        return self.proba

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.zeros(len(X), dtype=int)


@pytest.mark.parametrize(
    ("proba", "message"),
    [
        (np.full((4, 3), 1 / 3), None),  # three columns: column 1 still exists, accepted
        (
            np.full((3, 2), 0.5),
            "_Answers.predict_proba returned shape (3, 2) for 4 rows; expected (4, 2)",
        ),
        (np.full(4, 0.5), "_Answers.predict_proba returned shape (4,) for 4 rows; expected (4, 2)"),
        (
            np.array([[0.5, 0.5], [np.nan, np.nan], [0.2, 0.8], [np.nan, np.nan]]),
            "_Answers.predict_proba returned NaN or infinite probabilities for 2 of 4 rows "
            "(first at row 1); the audit needs finite probabilities",
        ),
        (
            np.array([[0.5, 0.5], [-1.0, 2.0], [0.2, 0.8], [1.5, -0.5]]),
            "_Answers.predict_proba returned values outside [0, 1] (min -0.5, max 2); "
            "expected probabilities, not scores or logits",
        ),
    ],
)
def test_probabilities_are_checked_for_shape_nan_and_range(
    proba: np.ndarray, message: str | None
) -> None:
    adapted = models.adapt_model(_Answers(proba), feature_names=NAMES, positive_class=1)
    X = np.zeros((4, 3))
    if message is None:
        np.testing.assert_array_equal(adapted.predict_proba(X)[:, 1], proba[:, 1])
        return
    with pytest.raises(ModelError) as info:
        adapted.predict_proba(X)
    assert str(info.value) == message


def test_probabilities_a_rounding_error_outside_the_unit_interval_are_clipped() -> None:
    proba = np.array([[-1e-9, 1.0 + 1e-9], [1.0 + 1e-9, -1e-9]])
    adapted = models.adapt_model(_Answers(proba), feature_names=NAMES, positive_class=1)
    np.testing.assert_array_equal(adapted.predict_proba(np.zeros((2, 3)))[:, 1], [1.0, 0.0])


def test_a_model_that_fails_on_the_rows_is_reported_in_one_line_naming_the_call() -> None:
    class Broken(_Answers):
        def predict_proba(self, X: np.ndarray) -> np.ndarray:
            raise RuntimeError("matrix is singular\nmore detail")

    adapted = models.adapt_model(Broken(np.zeros(1)), feature_names=NAMES, positive_class=1)
    with pytest.raises(ModelError) as info:
        adapted.predict_proba(np.zeros((2, 3)))
    assert str(info.value) == "Broken.predict_proba failed on the audit's rows: matrix is singular"


def test_a_torch_object_that_is_not_an_exported_program_says_how_to_export_it() -> None:
    fake = type("ExportedProgram", (), {"__module__": "torch.export.exported_program"})()
    with pytest.raises(ModelError) as info:
        models.adapt_model(fake, feature_names=NAMES)
    assert str(info.value) == (
        "ExportedProgram is a torch object; torch models are audited as exported programs: "
        "torch.export.save(torch.export.export(model, (x,)), 'model.pt2')"
    )


def test_a_pt2_program_is_audited_on_its_class_1_logit_and_must_take_the_data(
    tmp_path: Path,
) -> None:
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    module = torch.nn.Sequential(torch.nn.Linear(len(NAMES), 1), torch.nn.Flatten(0))
    program = torch.export.export(
        module,
        (torch.zeros(2, len(NAMES)),),
        dynamic_shapes=({0: torch.export.Dim("batch", min=1)},),
    )
    path = tmp_path / "model.pt2"
    torch.export.save(program, str(path))
    loaded = models.load_model_file(path)
    assert isinstance(loaded, TorchClassifier)
    adapted = models.adapt_model(loaded, feature_names=NAMES)
    X, _ = _data(20)
    with torch.no_grad():
        logits = module(torch.as_tensor(X, dtype=torch.float32))
    np.testing.assert_array_equal(
        adapted.predict_proba(X)[:, 1], torch.sigmoid(logits).double().numpy()
    )
    with pytest.raises(ModelError, match="positive class 'survived' cannot be audited"):
        models.adapt_model(loaded, feature_names=NAMES, positive_class="survived")
    with pytest.raises(
        ModelError,
        match=rf"^the torch program takes {len(NAMES)} features per row; the data has "
        rf"{len(NAMES) + 2}$",
    ):
        models.adapt_model(loaded, feature_names=(*NAMES, "a", "b"))


def test_a_file_named_pt2_that_is_not_a_program_is_refused(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    path = tmp_path / "model.pt2"
    path.write_bytes(b"not a zip")
    with pytest.raises(ModelError, match=rf"^{path}: not a torch exported program \("):
        models.load_model_file(path)


def test_label_columns_become_zero_one_with_the_named_class_as_one() -> None:
    labels = models.binary_labels(["died", "survived", "died"], "died", column="outcome")
    np.testing.assert_array_equal(labels, [1, 0, 1])
    np.testing.assert_array_equal(
        models.binary_labels(np.array([0, 1, 1]), "1", column="y"), [0, 1, 1]
    )
    with pytest.raises(ModelError, match=r"^label column 'y' is not binary: it holds 0, 1, 2$"):
        models.binary_labels([0, 1, 2], 1, column="y")
    with pytest.raises(
        ModelError,
        match=r"^positive class 'dead' does not occur in label column 'y' \(values: died, survived\)$",
    ):
        models.binary_labels(["died", "survived"], "dead", column="y")


def test_an_adapted_model_runs_through_the_existing_attack_kernels() -> None:
    from sklearn.linear_model import LogisticRegression

    from pytest_clinaudit.reference import attacks
    from pytest_clinaudit.reference.attacks.params import CalibrationParams

    X, y = _data()
    words = np.where(y == 1, "died", "survived")
    adapted = models.adapt_model(
        LogisticRegression().fit(X, words), feature_names=NAMES, positive_class="died"
    )
    prob = attacks.positive_proba(adapted, X)
    result = attacks.calibration(y, prob, params=CalibrationParams(n_bins=10, ece_scale=12.0))
    assert 0.0 <= result.score <= 1.0


def test_a_pickled_estimator_loads_from_the_path_the_user_named(tmp_path: Path) -> None:
    import pickle

    from sklearn.linear_model import LogisticRegression

    X, y = _data()
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(LogisticRegression().fit(X, y)))  # our own test artifact
    loaded = models.load_model_file(path)
    assert list(loaded.classes_) == [0, 1]
    with pytest.raises(ModelError, match=r"missing\.pkl: no such model file$"):
        models.load_model_file(tmp_path / "missing.pkl")
    (tmp_path / "junk.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ModelError, match=r"junk\.pkl: cannot be unpickled \(UnpicklingError: "):
        models.load_model_file(tmp_path / "junk.pkl")
