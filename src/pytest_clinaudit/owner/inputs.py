"""The input contract of an own-model audit, checked before any attack runs.

A model owner names a model file, two CSV files and a label column. Everything
that can be wrong with them is found here and said in one line
(:class:`InputError`), never as a traceback from deep inside an attack:

- the CSV files: readable, a header row, the label column present, every other
  column numeric (the message names *all* the offending columns), no missing or
  infinite values, the same columns in both files;
- the label: two classes at most, the positive class explicit. A numeric 0/1
  label defaults to 1 (the adverse outcome, as the task codes it); any other
  label needs ``--positive-class``;
- the model: a kind the auditor can call (:func:`~pytest_clinaudit.reference.models.adapt_model`:
  ``predict_proba`` estimators, called with feature names when fitted with them;
  ``xgboost.Booster``; torch ``.pt2``), its classes holding the positive class,
  and its answers on a few rows checked for shape, range and NaN.

Reading is vectorized (NumPy's C parser), so a million-row file costs seconds.
"""

from __future__ import annotations

import csv
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.files import sha256_file

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.models import AuditedModel
    from pytest_clinaudit.reference.review.lira import FitShadow

    FloatArray = npt.NDArray[np.float64]

PROBE_ROWS = 16
"""Rows the model answers before any attack, to check its probabilities."""
SHOWN_COLUMNS = 6


class InputError(ValueError):
    """A model or data file cannot be audited as given; ``str(error)`` is one actionable line."""


@dataclasses.dataclass(frozen=True)
class CSVFile:
    """A data file as read: its path, sha256, rows, feature columns and raw labels."""

    path: Path
    sha256: str
    header: tuple[str, ...]
    features: FloatArray
    labels: Any
    """The label column's values as read (strings, or numbers when all are numeric)."""


@dataclasses.dataclass(frozen=True)
class OwnData:
    """The checked data of an own-model audit."""

    dataset: Dataset
    positive_class: Any
    """The label value audited as the positive (adverse) class."""
    classes: tuple[str, ...]
    """The label values found, as they print."""
    train: CSVFile
    test: CSVFile

    def summary(self) -> dict[str, Any]:
        return {
            "label": self.dataset.label,
            "positive_class": str(self.positive_class),
            "classes": list(self.classes),
            "features": list(self.dataset.feature_names),
            "train": {
                "path": str(self.train.path),
                "sha256": self.train.sha256,
                "rows": self.dataset.n_train,
            },
            "test": {
                "path": str(self.test.path),
                "sha256": self.test.sha256,
                "rows": self.dataset.n_test,
            },
        }


# ----------------------------------------------------------------------- CSV


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(repr(n) for n in names[:SHOWN_COLUMNS])
    return shown + (f" and {len(names) - SHOWN_COLUMNS} more" if len(names) > SHOWN_COLUMNS else "")


def _header(path: Path) -> list[str]:
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            header = next(csv.reader(handle), None)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: a directory, not a CSV file") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    if not header:
        raise InputError(f"{path}: the file is empty; expected a header row of column names")
    names = [name.strip() for name in header]
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InputError(f"{path}: duplicate column names {_listed(duplicated)}")
    return names


def _load_columns(path: Path, columns: Sequence[int], dtype: Any) -> Any:
    import numpy as np

    return np.loadtxt(
        path,
        delimiter=",",
        skiprows=1,
        usecols=list(columns),
        dtype=dtype,
        ndmin=2,
        encoding="utf-8-sig",
        quotechar='"',
    )


def _first_bad_cell(path: Path, column: int) -> tuple[int, str]:
    """(line, cell) of the first cell of ``column`` that is not a number: the error path only."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        for line, row in enumerate(csv.reader(handle), start=1):
            if line == 1 or not row:
                continue
            cell = row[column] if column < len(row) else ""
            try:
                float(cell)
            except ValueError:
                return line, cell
    return 0, ""


def _features(path: Path, header: list[str], columns: list[int]) -> FloatArray:
    import numpy as np

    try:
        X = _load_columns(path, columns, np.float64)
    except ValueError:
        bad = []
        for column in columns:
            try:
                _load_columns(path, [column], np.float64)
            except ValueError:
                bad.append(column)
        if not bad:  # rows of different lengths, rather than a bad cell
            raise InputError(
                f"{path}: rows have different numbers of values; every row needs one per "
                f"header column ({len(header)})"
            ) from None
        line, cell = _first_bad_cell(path, bad[0])
        shown = repr(cell) if cell.strip() else "an empty cell"
        raise InputError(
            f"{path}: feature column{'s' if len(bad) > 1 else ''} "
            f"{_listed([header[c] for c in bad])} {'are' if len(bad) > 1 else 'is'} not numeric "
            f"(e.g. {shown} on line {line}); encode categories as numbers and fill missing "
            "values before auditing"
        ) from None
    if X.shape[0] == 0:
        raise InputError(f"{path}: no data rows under the header")
    finite = np.isfinite(X)
    if not finite.all():
        row, column = (int(i) for i in np.argwhere(~finite)[0])
        value, name = float(X[row, column]), header[columns[column]]
        raise InputError(
            f"{path}, line {row + 2}, column {name!r}: {value!r} is not a finite number; "
            "impute or drop it before auditing"
        )
    result: FloatArray = np.ascontiguousarray(X, dtype=np.float64)
    return result


def _labels(path: Path, column: int, n_rows: int) -> Any:
    import numpy as np

    values = _load_columns(path, [column], str)[:, 0]
    if len(values) != n_rows:  # pragma: no cover - the feature read checked the row count
        raise InputError(f"{path}: {len(values)} labels for {n_rows} rows")
    stripped = np.char.strip(values.astype(str))
    if (stripped == "").any():
        line = int(np.argmax(stripped == "")) + 2
        raise InputError(f"{path}, line {line}: the label is empty; every row needs a label")
    try:
        numbers = stripped.astype(np.float64)
    except ValueError:
        return stripped
    # Numeric labels: 1.0 and 1 are one class; show integers as integers.
    if np.all(numbers == np.round(numbers)) and np.all(np.abs(numbers) < 2**53):
        return numbers.astype(np.int64)
    return numbers


def read_csv(path: Path, label: str) -> CSVFile:
    """One data file: its features (float64, (n, d)) and raw labels, checked."""
    header = _header(path)
    if label not in header:
        raise InputError(
            f"{path}: no label column {label!r}; the columns are {_listed(header)} "
            "(pass the label's column name with --label)"
        )
    column = header.index(label)
    features = [i for i in range(len(header)) if i != column]
    if not features:
        raise InputError(f"{path}: only the label column {label!r}; no features to audit")
    X = _features(path, header, features)
    return CSVFile(
        path=path,
        sha256=sha256_file(path),
        header=tuple(header),
        features=X,
        labels=_labels(path, column, X.shape[0]),
    )


def _shown(value: Any) -> str:
    item = getattr(value, "item", None)
    return str(item() if callable(item) else value)


def read_own_data(train: Path, test: Path, *, label: str, positive_class: str | None) -> OwnData:
    """Both data files, checked against each other, with labels coded 1 = the positive class."""
    import numpy as np

    from pytest_clinaudit.reference.data import Dataset

    train_file, test_file = read_csv(train, label), read_csv(test, label)
    names = tuple(n for n in train_file.header if n != label)
    test_names = tuple(n for n in test_file.header if n != label)
    if test_names != names:
        missing = [n for n in names if n not in test_names]
        extra = [n for n in test_names if n not in names]
        what = (
            f"lacks {_listed(missing)}"
            if missing
            else f"has extra columns {_listed(extra)}"
            if extra
            else "has the same columns in another order"
        )
        raise InputError(
            f"{test}: the test file {what} compared with {train}; both need the same columns"
        )
    seen = np.concatenate([train_file.labels.astype(str), test_file.labels.astype(str)])
    classes = tuple(sorted({_shown(v) for v in np.unique(seen)}))
    if len(classes) > 2:
        raise InputError(f"label column {label!r} is not binary: it holds {_listed(list(classes))}")
    if positive_class is None:
        if set(classes) <= {"0", "1"}:
            positive_class = "1"
        else:
            raise InputError(
                f"label column {label!r} holds {_listed(list(classes))}: name the positive "
                "(adverse) class with --positive-class"
            )
    elif str(positive_class) not in classes:
        raise InputError(
            f"positive class {positive_class!r} does not occur in label column {label!r} "
            f"(values: {_listed(list(classes))})"
        )
    y_train = _code(train_file.labels, str(positive_class))
    y_test = _code(test_file.labels, str(positive_class))
    for split, y in (("training", y_train), ("test", y_test)):
        if np.unique(y).size < 2:
            raise InputError(
                f"the {split} file holds one class only; an audit needs both classes in each file"
            )
    dataset = Dataset(
        name=train.stem,
        label=label,
        feature_names=names,
        X_train=train_file.features,
        y_train=y_train,
        X_test=test_file.features,
        y_test=y_test,
    )
    return OwnData(dataset, positive_class, classes, train_file, test_file)


def _code(labels: Any, positive: str) -> Any:
    """1 where a label prints as ``positive``, else 0; one conversion per distinct value."""
    import numpy as np

    distinct, inverse = np.unique(labels, return_inverse=True)
    flags = np.asarray([_shown(v) == positive for v in distinct], dtype=np.int64)
    return flags[inverse.reshape(-1)]


# --------------------------------------------------------------------- model


@dataclasses.dataclass(frozen=True)
class OwnModel:
    """The checked model: its adapter, what it is, and (for LiRA) how to refit its recipe."""

    path: Path
    sha256: str
    kind: str
    model: AuditedModel
    fit_shadow: FitShadow | None

    def summary(self) -> dict[str, Any]:
        return {"path": str(self.path), "sha256": self.sha256, "kind": self.kind}


def load_own_model(path: Path, data: OwnData) -> OwnModel:
    """Load the model file the owner named, adapt it to the data and probe its answers.

    Unpickling runs code from the file: only ever called on the path the user
    passed with ``--model``.
    """
    from pytest_clinaudit.reference import models

    try:
        raw = models.load_model_file(path)
        model = models.adapt_model(
            raw, feature_names=data.dataset.feature_names, positive_class=data.positive_class
        )
        probe = data.dataset.X_test[:PROBE_ROWS]
        answer = model.predict_proba(probe)
        models.check_probabilities(answer, len(probe), column=1, source="the adapted model")
        predicted = model.predict(probe)
        if getattr(predicted, "shape", None) != (len(probe),):
            raise models.ModelError(
                f"predict returned shape {getattr(predicted, 'shape', None)} for {len(probe)} rows"
            )
    except models.ModelError as exc:
        raise InputError(str(exc)) from None
    fit_shadow = None
    if isinstance(model, models.EstimatorAdapter) and _clonable(model.estimator):
        from pytest_clinaudit.reference.review.lira import sklearn_shadow_fitter

        fit_shadow = sklearn_shadow_fitter(
            model.estimator,
            feature_names=data.dataset.feature_names,
            positive_class=data.positive_class,
        )
    return OwnModel(path, sha256_file(path), _kind(raw), model, fit_shadow)


def _kind(raw: Any) -> str:
    """What the model is, for the report: ``sklearn.Pipeline``, ``torch.export program``, ..."""
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    if isinstance(raw, TorchClassifier):
        return "torch.export program"
    return type(raw).__module__.split(".")[0] + "." + type(raw).__name__


def _clonable(estimator: Any) -> bool:
    """Whether scikit-learn can refit the estimator's recipe (for LiRA's shadow models)."""
    try:
        from sklearn.base import clone

        clone(estimator)
    except Exception:  # noqa: BLE001 - not a scikit-learn estimator: LiRA is skipped
        return False
    return True
