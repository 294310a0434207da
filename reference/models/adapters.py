"""Model adapters: one interface the auditor calls, whatever kind of model it audits.

Every adapter answers ``predict_proba(X) -> (n, 2)`` float64 with the *positive*
class in column 1, and ``predict(X) -> (n,)`` int64 with 1 meaning the positive
class, on float64 rows in the data's column order. That is the interface the
attacks already call (:class:`~.attacks.Classifier`), so an adapted model goes
through the same batched kernels as the graded variants.

Kinds adapted here:

- anything with ``predict_proba`` (scikit-learn estimators and pipelines,
  ``XGBClassifier``), called with a pandas DataFrame carrying the feature names
  when the estimator was fitted with them (``feature_names_in_``), so pipelines
  that select columns by name work;
- ``xgboost.Booster`` with a ``binary:logistic`` (or ``binary:logitraw``) objective;
- torch ``.pt2`` exported programs (SPEC §7.1), loaded by
  :class:`~.torch_adapter.TorchClassifier`, whose logits and their gradient also
  allow white-box attacks.

Rows may hold NaN (a missing value) and category codes (:mod:`.categories`):
an estimator is given the level strings back, as it was fitted; whether it
takes either is its own business, and the input contract asks it.

Checks raise :class:`ModelError` with a one-line message that says what was
expected, what arrived, and what fixes it; the CLI prints it and exits 2.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .categories import NO_CATEGORIES, Categories
from .fitted import NONE as NO_FITTED
from .fitted import Fitted, as_fitted, of_booster, of_estimator

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


PROBABILITY_TOLERANCE = 1e-6
"""How far outside [0, 1] a probability may stray (float rounding of a softmax or a
calibrator) before it is an error; values within it are clipped to [0, 1]."""


class ModelError(ValueError):
    """A model cannot be audited as given; ``str(error)`` is one line a person can act on."""


class AuditedModel(Protocol):
    """What the auditor calls: the positive class's probability in column 1, 0/1 predictions."""

    def predict_proba(self, X: FloatArray) -> FloatArray: ...

    def predict(self, X: FloatArray) -> IntArray: ...


def check_probabilities(raw: Any, n_rows: int, *, column: int | None, source: str) -> FloatArray:
    """The positive-class probabilities of a model's answer, shape (n_rows,), checked.

    Parameters
    ----------
    raw
        What the model returned: shape (n_rows, k) with the positive class in
        ``column``, or shape (n_rows,) when ``column`` is None.
    source
        Names the call in messages, e.g. ``"SVC.predict_proba"``.

    Raises
    ------
    ModelError
        Wrong shape, a non-numeric answer, NaN or infinite values, or values
        outside [0, 1] by more than :data:`PROBABILITY_TOLERANCE`.
    """
    import numpy as np

    try:
        answer = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        raise ModelError(f"{source} returned non-numeric values; expected probabilities") from None
    if column is None:
        ok, expected = answer.shape == (n_rows,), f"({n_rows},)"
    else:
        ok = answer.ndim == 2 and answer.shape[0] == n_rows and answer.shape[1] > column
        expected = f"({n_rows}, 2)"
    if not ok:
        raise ModelError(
            f"{source} returned shape {answer.shape} for {n_rows} rows; expected {expected}"
        )
    prob = answer if column is None else answer[:, column]
    bad = ~np.isfinite(prob)
    if bad.any():
        first = int(np.argmax(bad))
        raise ModelError(
            f"{source} returned NaN or infinite probabilities for {int(bad.sum())} of "
            f"{n_rows} rows (first at row {first}); the audit needs finite probabilities"
        )
    if prob.size:
        low, high = float(prob.min()), float(prob.max())
        if low < -PROBABILITY_TOLERANCE or high > 1.0 + PROBABILITY_TOLERANCE:
            raise ModelError(
                f"{source} returned values outside [0, 1] (min {low:.6g}, max {high:.6g}); "
                "expected probabilities, not scores or logits"
            )
    return np.clip(prob, 0.0, 1.0)


def _two_columns(prob: FloatArray) -> FloatArray:
    import numpy as np

    return np.column_stack([1.0 - prob, prob])


def _as_rows(X: Any) -> FloatArray:
    import numpy as np

    return np.ascontiguousarray(X, dtype=np.float64)


def _select(X: FloatArray, columns: tuple[int, ...]) -> FloatArray:
    """The model's columns of ``X``; the array itself when they are all of them, in order.

    Not copying matters beyond speed: a copy can be aligned differently in memory,
    and BLAS kernels may then round a dot product differently in the last bit.
    """
    rows = _as_rows(X)
    if columns == tuple(range(rows.shape[1])):
        return rows
    return rows[:, list(columns)]


def match_positive_class(classes: Sequence[Any], positive_class: Any, *, model: str) -> int:
    """Index of ``positive_class`` in a binary model's ``classes_``.

    A class matches when it equals the value or when both print the same, so the
    string ``"1"`` from a command line names the integer class ``1``.

    Raises
    ------
    ModelError
        The model is not binary, or no class (or more than one) matches.
    """
    shown = ", ".join(repr(_plain(c)) for c in classes)
    if len(classes) != 2:
        raise ModelError(
            f"{model} has {len(classes)} classes ({shown}); the audit needs a binary classifier"
        )
    if positive_class is None:
        raise ModelError(
            f"{model} has classes {shown}: name the positive (adverse) class with --positive-class"
        )
    matches = [
        i
        for i, c in enumerate(classes)
        if _plain(c) == positive_class or str(c) == str(positive_class)
    ]
    if len(matches) != 1:
        raise ModelError(
            f"positive class {positive_class!r} is not one of {model}'s classes ({shown}); "
            "pass one of them with --positive-class"
        )
    return matches[0]


def _plain(value: Any) -> Any:
    """NumPy scalars as Python values, so messages show ``'died'``, not ``np.str_('died')``."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


@dataclasses.dataclass(frozen=True, eq=False)
class EstimatorAdapter:
    """An estimator with ``predict_proba`` and ``classes_`` (scikit-learn's interface).

    Attributes
    ----------
    estimator
        The fitted model.
    positive_index
        Column of ``predict_proba`` (and index of ``classes_``) of the positive class.
    columns
        Data columns to pass, in the order the estimator was fitted with.
    frame_names
        Feature names to put on a DataFrame, or None to pass a NumPy array.
    categories
        Categorical data columns, given to the estimator as their level strings.
    """

    estimator: Any
    positive_index: int
    positive_label: Any
    columns: tuple[int, ...]
    frame_names: tuple[str, ...] | None
    name: str
    categories: Categories = NO_CATEGORIES
    fitted: Fitted = NO_FITTED
    """The features the estimator records as categorical (:mod:`.fitted`)."""

    @property
    def categorical_columns(self) -> tuple[int, ...]:
        """Data columns the model itself treats as categories (never moved by an attack)."""
        names = self.fitted.names
        if self.frame_names is None:
            return ()
        return tuple(c for c, n in zip(self.columns, self.frame_names, strict=True) if n in names)

    def inputs(self, X: FloatArray) -> Any:
        """Rows ``X`` (data column order, codes for categories) as the estimator takes them."""
        rows = _select(X, self.columns)
        if self.categories and set(self.categories.columns) & set(self.columns):
            if self.frame_names is None:
                return self.categories.objects(rows, self.columns)
            frame = self.categories.frame(rows, self.columns, self.frame_names)
        elif self.frame_names is None:
            return rows
        else:
            import importlib

            # pandas ships no type stubs; scikit-learn needs a real DataFrame to see names.
            pandas: Any = importlib.import_module("pandas")
            frame = pandas.DataFrame(rows, columns=list(self.frame_names), copy=False)
        for name, levels in self.fitted.as_categories().items():
            # The model was fitted on pandas categories: given them, with its own levels.
            frame[name] = as_fitted(frame[name].to_numpy(), levels)
        return frame

    def predict_proba(self, X: FloatArray) -> FloatArray:
        source = f"{self.name}.predict_proba"
        prob = check_probabilities(
            _call(self.estimator.predict_proba, self.inputs(X), source),
            len(X),
            column=self.positive_index,
            source=source,
        )
        return _two_columns(prob)

    def predict(self, X: FloatArray) -> IntArray:
        import numpy as np

        source = f"{self.name}.predict"
        labels = np.asarray(_call(self.estimator.predict, self.inputs(X), source))
        if labels.shape != (len(X),):
            raise ModelError(
                f"{source} returned shape {labels.shape} for {len(X)} rows; expected ({len(X)},)"
            )
        positive: IntArray = (labels == self.positive_label).astype(np.int64)
        return positive


def _call(method: Any, inputs: Any, source: str) -> Any:
    """Call a model method; turn a library's complaint into one line that names the call."""
    try:
        return method(inputs)
    except ModelError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure inside a user's model is reported, not raised
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"{source} failed on the audit's rows: {first}") from exc


@dataclasses.dataclass(frozen=True, eq=False)
class BoosterAdapter:
    """An ``xgboost.Booster`` whose output is a probability (or a logit) of label 1."""

    booster: Any
    columns: tuple[int, ...]
    feature_names: tuple[str, ...] | None
    logit_output: bool
    categories: Categories = NO_CATEGORIES
    fitted: Fitted = NO_FITTED
    """The features the booster records as categorical (feature type ``"c"``)."""

    @property
    def categorical_columns(self) -> tuple[int, ...]:
        """Data columns the model itself treats as categories (never moved by an attack)."""
        names = self.fitted.names
        own = self.feature_names or tuple(f"f{i}" for i in range(len(self.columns)))
        return tuple(c for c, n in zip(self.columns, own, strict=True) if n in names)

    def _categorical_frame(self, rows: FloatArray) -> Any:
        """Rows as a DataFrame whose categorical features are pandas categories."""
        import importlib

        pandas: Any = importlib.import_module("pandas")
        names = list(self.feature_names or [f"f{i}" for i in range(len(self.columns))])
        kept = dict(self.fitted.features)
        frame = {}
        for position, (column, name) in enumerate(zip(self.columns, names, strict=True)):
            cells = self.categories.decoded(rows[:, position], column)
            if name in kept:
                levels = kept[name]
                if levels is None:  # an older XGBoost: categories are their codes
                    text = dict(self.categories.levels).get(column)
                    levels = text if text is not None else None
                if levels is not None:
                    cells = as_fitted(cells, levels)
            frame[name] = cells
        return pandas.DataFrame(frame)

    def _positive(self, X: FloatArray) -> FloatArray:
        import numpy as np
        import xgboost

        rows: Any = _select(X, self.columns)
        names = None if self.feature_names is None else list(self.feature_names)
        if self.fitted:
            frame = self._categorical_frame(rows)
            matrix = _call(
                lambda data: xgboost.DMatrix(data, enable_categorical=True),
                frame,
                "xgboost.DMatrix",
            )
        else:
            if self.categories and set(self.categories.columns) & set(self.columns):
                # DMatrix says what it makes of text
                rows = self.categories.objects(rows, self.columns)
            matrix = _call(
                lambda data: xgboost.DMatrix(data, feature_names=names), rows, "xgboost.DMatrix"
            )
        raw = _call(self.booster.predict, matrix, "Booster.predict")
        if self.logit_output:
            raw = 1.0 / (1.0 + np.exp(-np.asarray(raw, dtype=np.float64)))
        return check_probabilities(raw, len(X), column=None, source="Booster.predict")

    def predict_proba(self, X: FloatArray) -> FloatArray:
        return _two_columns(self._positive(X))

    def predict(self, X: FloatArray) -> IntArray:
        import numpy as np

        # XGBClassifier.predict's rule: class 1 where the probability exceeds 0.5.
        return (self._positive(X) > 0.5).astype(np.int64)


BOOSTER_OBJECTIVES = {"binary:logistic": False, "reg:logistic": False, "binary:logitraw": True}
"""Booster objectives the audit accepts, mapped to "the output is a logit"."""


def _column_map(wanted: Sequence[str], available: Sequence[str], *, model: str) -> tuple[int, ...]:
    missing = [name for name in wanted if name not in available]
    if missing:
        raise ModelError(
            f"{model} was fitted with feature(s) {', '.join(missing)} that the data does not "
            f"have; the data's columns are {', '.join(available)}"
        )
    return tuple(list(available).index(name) for name in wanted)


def adapt_estimator(
    estimator: Any,
    *,
    feature_names: Sequence[str],
    positive_class: Any,
    categories: Categories = NO_CATEGORIES,
) -> EstimatorAdapter:
    """Adapt an estimator with ``predict_proba`` and ``classes_``.

    Parameters
    ----------
    feature_names
        The data's feature columns, in the order of the rows the auditor passes.
    positive_class
        The class whose probability is audited (must be one of ``classes_``).
    """
    name = type(estimator).__name__
    if not callable(getattr(estimator, "predict_proba", None)):
        hint = (
            " (an SVC gives probabilities only when fitted with probability=True)"
            if name in {"SVC", "NuSVC"}
            else " (wrap it in sklearn.calibration.CalibratedClassifierCV to get probabilities)"
        )
        raise ModelError(f"{name} has no predict_proba; the audit needs class probabilities{hint}")
    if not callable(getattr(estimator, "predict", None)):
        raise ModelError(f"{name} has no predict; the audit needs predicted classes")
    classes = getattr(estimator, "classes_", None)
    if classes is None:
        raise ModelError(f"{name} has no classes_; fit it before auditing it")
    index = match_positive_class(list(classes), positive_class, model=name)
    fitted_names = getattr(estimator, "feature_names_in_", None)
    if fitted_names is not None:
        frame = tuple(str(n) for n in fitted_names)
        columns = _column_map(frame, feature_names, model=name)
        import importlib.util

        if importlib.util.find_spec("pandas") is None:
            raise ModelError(
                f"{name} was fitted with feature names, which needs pandas to pass them: "
                "pip install pandas"
            )
        record = of_estimator(estimator)
        return EstimatorAdapter(
            estimator, index, classes[index], columns, frame, name, categories, record
        )
    n_in = getattr(estimator, "n_features_in_", None)
    if n_in is not None and int(n_in) != len(feature_names):
        raise ModelError(
            f"{name} was fitted on {int(n_in)} features; the data has {len(feature_names)}"
        )
    columns = tuple(range(len(feature_names)))
    return EstimatorAdapter(estimator, index, classes[index], columns, None, name, categories)


def adapt_booster(
    booster: Any,
    *,
    feature_names: Sequence[str],
    positive_class: Any,
    categories: Categories = NO_CATEGORIES,
) -> BoosterAdapter:
    """Adapt an ``xgboost.Booster``; its positive class is the label 1 it was trained on."""
    import json

    config = json.loads(booster.save_config())
    objective = config["learner"]["objective"]["name"]
    if objective not in BOOSTER_OBJECTIVES:
        raise ModelError(
            f"Booster objective {objective!r} is not a binary probability; "
            f"expected one of {', '.join(BOOSTER_OBJECTIVES)}"
        )
    if positive_class is not None and str(positive_class) != "1":
        raise ModelError(
            f"a Booster predicts the probability of label 1; positive class {positive_class!r} "
            "cannot be audited (re-encode the label so that 1 is the positive class)"
        )
    names = booster.feature_names
    record = of_booster(booster)
    if names:
        columns = _column_map(list(names), feature_names, model="Booster")
        return BoosterAdapter(
            booster, columns, tuple(names), BOOSTER_OBJECTIVES[objective], categories, record
        )
    n_in = int(booster.num_features())
    if n_in != len(feature_names):
        raise ModelError(
            f"Booster was fitted on {n_in} features; the data has {len(feature_names)}"
        )
    return BoosterAdapter(
        booster,
        tuple(range(len(feature_names))),
        None,
        BOOSTER_OBJECTIVES[objective],
        categories,
        record,
    )


def adapt_torch_program(
    program: Any,
    *,
    feature_names: Sequence[str],
    positive_class: Any,
    categories: Categories = NO_CATEGORIES,
) -> AuditedModel:
    """Adapt a loaded torch ``.pt2`` program (:class:`~.torch_adapter.TorchClassifier`, SPEC §7.1).

    The program gives the logit of class 1, so the positive class is 1; a
    probe of two zero rows checks that it takes the data's features. It takes a
    float tensor, so a text column is given to it as text and refused with what
    it says.
    """
    import numpy as np

    if positive_class is not None and str(positive_class) != "1":
        raise ModelError(
            f"a torch program gives the logit of class 1; positive class {positive_class!r} "
            "cannot be audited (re-encode the label so that 1 is the positive class)"
        )
    d = len(feature_names)
    shape = getattr(program, "input_shape", None)
    if shape is not None and len(shape) == 2:
        batch, width = shape
        if width is not None and width != d:
            raise ModelError(f"the torch program takes {width} features per row; the data has {d}")
        if batch is not None:
            raise ModelError(
                f"the torch program was exported for a fixed batch of {batch} rows; export it "
                "with a dynamic batch dimension: torch.export.export(model, (x,), "
                "dynamic_shapes={'x': {0: torch.export.Dim('batch')}})"
            )
    if categories:  # the program is given the text, and says what it makes of it
        text = categories.objects(np.zeros((2, d)), range(d))
        _call(program.predict_proba, text, "the torch program")
    rng = np.random.RandomState(0)
    rows = np.concatenate([np.zeros((2, d)), rng.normal(size=(6, d))])
    try:
        outputs = program.raw_outputs(rows)
    except Exception as exc:  # noqa: BLE001 - torch's shape guards raise several kinds
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelError(
            f"the torch program failed on rows of the data's {d} features ({first[:160]})"
        ) from None
    if outputs.ndim == 2 and outputs.shape[1] == 2:
        sums = outputs.sum(axis=1)
        if np.all((outputs >= 0) & (outputs <= 1)) and np.allclose(sums, 1.0, atol=1e-5):
            raise ModelError(
                "the torch program's two outputs per row sum to 1: they look like probabilities, "
                "not logits; export the model without its final softmax"
            )
    adapted: AuditedModel = program
    return adapted


def adapt_model(
    model: Any,
    *,
    feature_names: Sequence[str],
    positive_class: Any = None,
    categories: Categories = NO_CATEGORIES,
) -> AuditedModel:
    """The :class:`AuditedModel` for any supported model kind.

    Parameters
    ----------
    model
        A fitted estimator with ``predict_proba``, an ``xgboost.Booster``, or a
        torch exported program / module.
    feature_names
        The data's feature columns, in the order of the rows the auditor passes.
    positive_class
        The class whose probability is audited, checked against the model's
        ``classes_``; None is accepted only where the model has no class names
        (a Booster or a torch program predict label 1).
    categories
        Categorical columns of the rows (codes), given to the model as text.

    Raises
    ------
    ModelError
        The model kind is unsupported, or it does not fit the data or the class.
    """
    from .torch_adapter import TorchClassifier

    module = type(model).__module__ or ""
    kind = {"feature_names": feature_names, "positive_class": positive_class}
    if module.startswith("xgboost") and type(model).__name__ == "Booster":
        return adapt_booster(model, **kind, categories=categories)
    if isinstance(model, TorchClassifier):
        return adapt_torch_program(model, **kind, categories=categories)
    if module.split(".")[0] == "torch":
        raise ModelError(
            f"{type(model).__name__} is a torch object; torch models are audited as "
            "exported programs: torch.export.save(torch.export.export(model, (x,)), 'model.pt2')"
        )
    return adapt_estimator(model, **kind, categories=categories)


def binary_labels(values: Sequence[Any], positive_class: Any, *, column: str) -> IntArray:
    """A label column as 0/1 (1 = ``positive_class``), checked to hold two classes at most.

    Values are compared as they print, as :func:`match_positive_class` does, so the
    string ``"1"`` names the integer label 1. Only the distinct values are
    converted to strings, so a million-row column costs one ``np.unique``.

    Raises
    ------
    ModelError
        The column holds more than two distinct values, or the positive class is
        not among them.
    """
    import numpy as np

    distinct, inverse = np.unique(np.asarray(values), return_inverse=True)
    shown = [str(_plain(v)) for v in distinct]
    if len(shown) > 2:
        listed = ", ".join(shown[:5]) + (", ..." if len(shown) > 5 else "")
        raise ModelError(f"label column {column!r} is not binary: it holds {listed}")
    if str(positive_class) not in shown:
        raise ModelError(
            f"positive class {positive_class!r} does not occur in label column {column!r} "
            f"(values: {', '.join(shown)})"
        )
    positive = np.asarray([s == str(positive_class) for s in shown], dtype=np.int64)
    return positive[inverse.reshape(-1)]
