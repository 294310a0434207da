"""The input contract of an own-model audit: the data files, checked before any attack runs.

A model owner names a model file, two CSV files and a label column. Everything
that can be wrong with them is found here and said in one line
(:class:`InputError`), never as a traceback from deep inside an attack:

- the CSV files: readable, a header row, the label column present, the same
  columns in both files, no infinite values. A column of text is *categorical*
  and an empty (or ``NA``) cell is *missing*: both are passed to the model as
  they are, the model asked about them on a sample of rows that shows every
  category and every column's missing cells, and refused only if it cannot
  take them, with its own error in one line;
- the label: two classes at most, the positive class explicit. A numeric 0/1
  label defaults to 1 (the adverse outcome, as the task codes it); any other
  label needs ``--positive-class``;
- the model (:mod:`pytest_clinaudit.owner.model`): a kind the auditor can call,
  its classes holding the positive class, and its answers on a sample of rows
  checked for shape, range and NaN.

Reading is vectorized (NumPy's C parser), so a million-row file costs seconds;
only a file with text or empty cells is read again column by column.
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
    from pytest_clinaudit.reference.models.categories import Categories

    FloatArray = npt.NDArray[np.float64]

SHOWN_COLUMNS = 6

MIN_ROWS_PER_CLASS = 10
"""Rows of each class the test file needs. A bootstrap resample of a file with ``k``
rows of a class lacks that class with probability about ``exp(-k)``: with 10, one
resample in 22,000 (every interval is defined); with 3, one in 20; with 2 rows in
all, the AUROC of a resample is undefined or 0 or 1."""

DELIMITERS = {";": "semicolon", "\t": "tab", "|": "pipe"}
"""Delimiters a header that reads as one column is checked for (the file must use commas)."""

MISSING = frozenset(
    {"", "NA", "N/A", "n/a", "NaN", "nan", "-nan", "NULL", "null", "None", "<NA>", "#N/A"}
)
"""Cells read as a missing value (the markers pandas' ``read_csv`` reads as missing)."""


class InputError(ValueError):
    """A model or data file cannot be audited as given; ``str(error)`` is one actionable line."""


@dataclasses.dataclass(frozen=True)
class CSVFile:
    """A data file as read: its path, sha256, rows, feature columns and raw labels."""

    path: Path
    sha256: str
    header: tuple[str, ...]
    features: FloatArray
    """(n, d) float64 in feature order; NaN where missing (and in text columns)."""
    labels: Any
    """The label column's values as read (strings, or numbers when all are numeric)."""
    text: dict[int, Any] = dataclasses.field(default_factory=dict)
    """Feature position -> that column's cells as stripped strings ("" where missing),
    for every column that holds text."""


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
    categories: Categories
    """The text columns, held as codes in ``dataset``."""

    def summary(self) -> dict[str, Any]:
        return {
            "label": self.dataset.label,
            "positive_class": str(self.positive_class),
            "classes": list(self.classes),
            "features": list(self.dataset.feature_names),
            "categorical": self.categories.summary(self.dataset.feature_names),
            "train": {
                "path": str(self.train.path),
                "sha256": self.train.sha256,
                "rows": self.dataset.n_train,
                "positives": int(self.dataset.y_train.sum()),
            },
            "test": {
                "path": str(self.test.path),
                "sha256": self.test.sha256,
                "rows": self.dataset.n_test,
                "positives": int(self.dataset.y_test.sum()),
            },
        }


# ----------------------------------------------------------------------- CSV


def listed(names: Sequence[str]) -> str:
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
    if len(names) == 1:
        found = [(names[0].count(d), d) for d in DELIMITERS if d in names[0]]
        if found:
            _, delimiter = max(found)
            raise InputError(
                f"{path}: the header reads as one column ({names[0][:60]!r}); the file looks "
                f"{DELIMITERS[delimiter]}-separated ({delimiter!r}): save it with commas as the "
                "delimiter"
            )
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        raise InputError(f"{path}: duplicate column names {listed(duplicated)}")
    return names


def _load_columns(path: Path, columns: Sequence[int], dtype: Any) -> Any:
    import warnings

    import numpy as np

    with warnings.catch_warnings():
        # "loadtxt: input contained no data": a header-only file, said below in one line.
        warnings.simplefilter("ignore", UserWarning)
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


def _ragged(path: Path, header: list[str]) -> InputError:
    return InputError(
        f"{path}: rows have different numbers of values; every row needs one per "
        f"header column ({len(header)})"
    )


def _text_column(path: Path, header: list[str], column: int) -> Any:
    """One column's cells as stripped strings; numbers where every present cell is one.

    Returns ``(values, text)``: float64 values (NaN where missing) and, for a
    column with a cell that is not a number, its strings ("" where missing).
    """
    import numpy as np

    try:
        cells = np.char.strip(_load_columns(path, [column], str)[:, 0].astype(str))
    except ValueError:
        raise _ragged(path, header) from None
    missing = np.isin(cells, list(MISSING))
    try:
        values = np.where(missing, "nan", cells).astype(np.float64)
    except ValueError:
        return np.full(len(cells), np.nan), np.where(missing, "", cells)
    return values, None


def _features(
    path: Path, header: list[str], columns: list[int]
) -> tuple[FloatArray, dict[int, Any]]:
    import numpy as np

    text: dict[int, Any] = {}
    try:
        X = _load_columns(path, columns, np.float64)
    except ValueError:
        # Empty cells or text: read again column by column (the fast path's error
        # does not say which column, and most columns are fine).
        parts = []
        for position, column in enumerate(columns):
            values, strings = _text_column(path, header, column)
            parts.append(values)
            if strings is not None:
                text[position] = strings
        if len({len(p) for p in parts}) > 1:
            raise _ragged(path, header) from None
        X = np.column_stack(parts) if parts else np.zeros((0, 0))
    if X.shape[0] == 0:
        raise InputError(f"{path}: no data rows under the header")
    infinite = np.isinf(X)
    if infinite.any():
        # A missing value is NaN and passes through; an infinite one is a broken number.
        row, column = (int(i) for i in np.argwhere(infinite)[0])
        value, name = float(X[row, column]), header[columns[column]]
        raise InputError(
            f"{path}, line {row + 2}, column {name!r}: {value!r} is not a finite number; "
            "impute or drop it before auditing"
        )
    result: FloatArray = np.ascontiguousarray(X, dtype=np.float64)
    return result, text


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
            f"{path}: no label column {label!r}; the columns are {listed(header)} "
            "(pass the label's column name with --label)"
        )
    column = header.index(label)
    features = [i for i in range(len(header)) if i != column]
    if not features:
        raise InputError(f"{path}: only the label column {label!r}; no features to audit")
    X, text = _features(path, header, features)
    return CSVFile(
        path=path,
        sha256=sha256_file(path),
        header=tuple(header),
        features=X,
        labels=_labels(path, column, X.shape[0]),
        text=text,
    )


def _categorical(
    train: CSVFile, test: CSVFile, label: str
) -> tuple[FloatArray, FloatArray, Categories]:
    """Both files' features with every text column coded by its sorted levels.

    A column with text in either file is categorical in both (a file whose
    cells there all look like numbers gives their text).
    """
    import numpy as np

    from pytest_clinaudit.reference.models.categories import Categories

    positions = sorted(set(train.text) | set(test.text))
    X_train, X_test = train.features.copy(), test.features.copy()
    levels = {}
    names = [n for n in train.header if n != label]
    for position in positions:
        columns = []
        for file in (train, test):
            if position in file.text:
                columns.append(file.text[position])
            else:
                column = file.header.index(names[position])
                cells = _load_columns(file.path, [column], str)[:, 0].astype(str)
                stripped = np.char.strip(cells)
                columns.append(np.where(np.isin(stripped, list(MISSING)), "", stripped))
        found = np.unique(np.concatenate(columns))
        found = found[found != ""]
        levels[position] = found.tolist()
        for X, cells in zip((X_train, X_test), columns, strict=True):
            codes = np.searchsorted(found, cells).astype(np.float64)
            X[:, position] = np.where(cells == "", np.nan, codes)
    return X_train, X_test, Categories.of(levels)


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
            f"lacks {listed(missing)}"
            if missing
            else f"has extra columns {listed(extra)}"
            if extra
            else "has the same columns in another order"
        )
        raise InputError(
            f"{test}: the test file {what} compared with {train}; both need the same columns"
        )
    seen = np.concatenate([train_file.labels.astype(str), test_file.labels.astype(str)])
    classes = tuple(sorted({_shown(v) for v in np.unique(seen)}))
    if len(classes) > 2:
        raise InputError(f"label column {label!r} is not binary: it holds {listed(list(classes))}")
    if positive_class is None:
        if set(classes) <= {"0", "1"}:
            positive_class = "1"
        else:
            raise InputError(
                f"label column {label!r} holds {listed(list(classes))}: name the positive "
                "(adverse) class with --positive-class"
            )
    elif str(positive_class) not in classes:
        raise InputError(
            f"positive class {positive_class!r} does not occur in label column {label!r} "
            f"(values: {listed(list(classes))})"
        )
    y_train = _code(train_file.labels, str(positive_class))
    y_test = _code(test_file.labels, str(positive_class))
    for split, y in (("training", y_train), ("test", y_test)):
        if np.unique(y).size < 2:
            raise InputError(
                f"the {split} file holds one class only; an audit needs both classes in each file"
            )
    positives = int(y_test.sum())
    negatives = len(y_test) - positives
    if min(positives, negatives) < MIN_ROWS_PER_CLASS:
        raise InputError(
            f"{test}: the test file is too small to audit: {positives} positive and {negatives} "
            f"negative rows, and an audit needs at least {MIN_ROWS_PER_CLASS} rows of each class"
        )
    X_train, X_test, categories = _categorical(train_file, test_file, label)
    dataset = Dataset(
        name=train.stem,
        label=label,
        feature_names=names,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
    )
    return OwnData(dataset, positive_class, classes, train_file, test_file, categories)


def _code(labels: Any, positive: str) -> Any:
    """1 where a label prints as ``positive``, else 0; one conversion per distinct value."""
    import numpy as np

    distinct, inverse = np.unique(labels, return_inverse=True)
    flags = np.asarray([_shown(v) == positive for v in distinct], dtype=np.int64)
    return flags[inverse.reshape(-1)]


# --------------------------------------------------------------------- model
