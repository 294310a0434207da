"""Datasets: where the rows come from, their canonical hash, and CSV files.

A :class:`Dataset` is a train/test split with named features and a binary label.
Its :meth:`Dataset.sha256` hashes the exact numbers (float64 features, int64
labels, little-endian) together with the column names, so the hash identifies
what a model was trained and audited on, independently of how a CSV spells it.
CSV files written here round-trip exactly: every float is written with Python's
shortest round-trip ``repr``.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import hashlib
import io
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


class DataError(ValueError):
    """A dataset is missing or malformed; the message says where and how to fix it."""


@dataclasses.dataclass(frozen=True, eq=False)
class Dataset:
    """A binary classification split.

    Attributes
    ----------
    name
        Human-readable origin, e.g. ``"wdbc"``.
    label
        Name of the label column in the CSV files (1 = the positive, adverse class).
    feature_names
        Column names of the features, in model input order.
    X_train, X_test
        float64 arrays of shape (n_train, n_features) and (n_test, n_features).
    y_train, y_test
        int64 arrays of 0/1 labels, shapes (n_train,) and (n_test,).
    """

    name: str
    label: str
    feature_names: tuple[str, ...]
    X_train: FloatArray
    y_train: IntArray
    X_test: FloatArray
    y_test: IntArray

    def __post_init__(self) -> None:
        import numpy as np

        for attr in ("X_train", "X_test"):
            array = np.ascontiguousarray(getattr(self, attr), dtype=np.float64)
            if array.ndim != 2 or array.shape[1] != len(self.feature_names):
                raise DataError(
                    f"{self.name}: {attr} has shape {array.shape}, "
                    f"expected (n, {len(self.feature_names)})"
                )
            array.setflags(write=False)
            object.__setattr__(self, attr, array)
        for attr, rows in (("y_train", self.X_train), ("y_test", self.X_test)):
            labels = np.ascontiguousarray(getattr(self, attr), dtype=np.int64)
            if labels.shape != (rows.shape[0],):
                raise DataError(
                    f"{self.name}: {attr} has shape {labels.shape}, expected ({rows.shape[0]},)"
                )
            labels.setflags(write=False)
            object.__setattr__(self, attr, labels)

    @property
    def n_train(self) -> int:
        return int(self.X_train.shape[0])

    @property
    def n_test(self) -> int:
        return int(self.X_test.shape[0])

    @functools.cached_property
    def sha256(self) -> str:
        """Hash of the column names and the exact numbers of both splits."""
        digest = hashlib.sha256()
        header = {"label": self.label, "features": list(self.feature_names)}
        digest.update(json.dumps(header, sort_keys=True).encode())
        for array in (self.X_train, self.y_train, self.X_test, self.y_test):
            digest.update(str(array.shape).encode())
            digest.update(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())
        return digest.hexdigest()

    def summary(self) -> dict[str, Any]:
        """Sizes, positive rates and hash, for reports and manifests."""
        return {
            "name": self.name,
            "label": self.label,
            "features": list(self.feature_names),
            "n_train": self.n_train,
            "n_test": self.n_test,
            "positive_rate_train": float(self.y_train.mean()) if self.n_train else 0.0,
            "positive_rate_test": float(self.y_test.mean()) if self.n_test else 0.0,
            "sha256": self.sha256,
        }


def format_float(value: float) -> str:
    """Shortest text that reads back as exactly ``value``."""
    return repr(float(value))


def csv_text(features: FloatArray, labels: IntArray, label: str, names: tuple[str, ...]) -> str:
    """One split as CSV text: the label column first, then the features; an empty cell
    where a value is missing (NaN)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([label, *names])
    for y, row in zip(labels.tolist(), features.tolist(), strict=True):
        writer.writerow([str(int(y)), *("" if math.isnan(v) else format_float(v) for v in row)])
    return out.getvalue()


def write_csvs(
    data: Dataset, directory: Path, *, train_name: str, test_name: str
) -> tuple[Path, Path]:
    """Write both splits as CSV files (label first) and return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = (directory / train_name, directory / test_name)
    for path, X, y in (
        (paths[0], data.X_train, data.y_train),
        (paths[1], data.X_test, data.y_test),
    ):
        path.write_text(csv_text(X, y, data.label, data.feature_names), encoding="utf-8")
    return paths


def read_csv_table(path: Path) -> tuple[list[str], FloatArray]:
    """Read a numeric CSV with a header row; every problem names the file, row and column."""
    import numpy as np

    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            try:
                header = [name.strip() for name in next(reader)]
            except StopIteration:
                raise DataError(f"{path}: the file is empty; expected a header row") from None
            rows: list[list[float]] = []
            for line_no, row in enumerate(reader, start=2):
                if not row:
                    continue
                if len(row) != len(header):
                    raise DataError(
                        f"{path}, line {line_no}: {len(row)} values, expected {len(header)} "
                        f"(one per header column)"
                    )
                values = []
                for column, cell in zip(header, row, strict=True):
                    try:
                        value = float(cell)
                    except ValueError:
                        shown = cell if cell.strip() else "an empty cell"
                        raise DataError(
                            f"{path}, line {line_no}, column {column!r}: expected a number, "
                            f"got {shown!r}; fill or drop missing values before auditing"
                        ) from None
                    if not math.isfinite(value):
                        raise DataError(
                            f"{path}, line {line_no}, column {column!r}: {cell!r} is not a finite "
                            "number; impute or drop it before auditing"
                        )
                    values.append(value)
                rows.append(values)
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if len(set(header)) != len(header):
        raise DataError(f"{path}: duplicate column names in the header {header}")
    return header, np.asarray(rows, dtype=np.float64).reshape(len(rows), len(header))


def split_label(
    path: Path, header: list[str], table: FloatArray, label: str
) -> tuple[tuple[str, ...], FloatArray, IntArray]:
    """Separate the label column (checked to be 0/1) from the features."""
    import numpy as np

    if label not in header:
        raise DataError(f"{path}: no label column {label!r}; the columns are {header}")
    column = header.index(label)
    y = table[:, column]
    bad = ~np.isin(y, (0.0, 1.0))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(
            # float() first: NumPy 2 scalars repr as "np.float64(2.0)".
            f"{path}, line {row + 2}, column {label!r}: labels must be 0 or 1, got "
            f"{float(y[row])!r}; code the adverse outcome as 1 and every other as 0"
        )
    names = tuple(name for i, name in enumerate(header) if i != column)
    X = np.delete(table, column, axis=1)
    return names, X, y.astype(np.int64)


def load_csv_pair(train: Path, test: Path, *, label: str, name: str | None = None) -> Dataset:
    """A dataset from a train and a test CSV that share their columns."""
    train_header, train_table = read_csv_table(train)
    test_header, test_table = read_csv_table(test)
    names, X_train, y_train = split_label(train, train_header, train_table, label)
    test_names, X_test, y_test = split_label(test, test_header, test_table, label)
    if test_names != names:
        raise DataError(
            f"{test}: feature columns {list(test_names)} differ from {train}: {list(names)}; "
            "both files need the same columns in the same order"
        )
    return Dataset(
        name=name or train.stem,
        label=label,
        feature_names=names,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
    )


@dataclasses.dataclass(frozen=True)
class LoadContext:
    """Where relative paths and user-provided data live."""

    base_dir: Path | None = None
    """Directory of the variant file; relative CSV paths start here."""
    mimic_dir: Path | None = None
    """A user's MIMIC-IV extract (credentialed data is never shipped)."""


@dataclasses.dataclass(frozen=True)
class CSVSource:
    """A train and a test CSV with a label column (paths relative to the variant file)."""

    label: str
    train: str
    test: str

    def paths(self, context: LoadContext) -> tuple[Path, Path]:
        base = context.base_dir or Path.cwd()
        return base / self.train, base / self.test

    def load(self, context: LoadContext) -> Dataset:
        train, test = self.paths(context)
        return load_csv_pair(train, test, label=self.label, name=train.parent.name or "csv")

    def fingerprint(self, context: LoadContext) -> dict[str, Any]:
        from pytest_clinaudit.files import sha256_file

        train, test = self.paths(context)
        for path in (train, test):
            if not path.is_file():
                raise DataError(f"{path}: no such file (named by the variant's [dataset] table)")
        return {
            "source": "csv",
            "label": self.label,
            "train_sha256": sha256_file(train),
            "test_sha256": sha256_file(test),
        }
