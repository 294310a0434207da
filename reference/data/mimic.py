"""A user's MIMIC-IV in-hospital-mortality extract: locating, validating, loading, writing.

MIMIC-IV is credentialed (PhysioNet) and may not be redistributed, so the
``mimic-*`` variants never ship rows: they read the extract a credentialed user
points to with ``--clinaudit-mimic-dir DIR`` or the environment variable
``CLINAUDIT_MIMIC_DIR``. Nothing here ever falls back to the synthetic cohort
(:mod:`.icu`); a missing extract is an error that says how to provide one.

Two layouts are accepted (the columns are those of :data:`.icu.FEATURES`):

``published``
    ``train_X.csv``, ``train_y.csv``, ``test_X.csv``, ``test_y.csv``: the X
    files hold the 8 features in order, the y files the one column
    ``hospital_expire_flag``, row for row.
``two-file``
    ``mimic_train.csv``, ``mimic_test.csv``: the label column first, then the 8
    features (the layout the agent's workspace uses).

Every feature must already be z-scored (the ICU models have no scaler). The
check is on the training split: each column's mean must lie within
:data:`Z_MEAN_TOLERANCE` of 0 and its population standard deviation within
:data:`Z_STD_TOLERANCE` of 1. Z-scoring with the training statistics gives 0
and 1 up to rounding; z-scoring with the statistics of the whole cohort before
splitting gives deviations of order ``1/sqrt(n_train)`` (below 0.03 for a few
thousand rows); raw units, 0/1 codes and min-max scaling all miss by far more
(min-max: mean ~0.5, std ~0.2; raw sex: std ~0.5).
"""

from __future__ import annotations

import csv
import dataclasses
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .dataset import (
    DataError,
    Dataset,
    LoadContext,
    format_float,
    read_csv_table,
    split_label,
    write_csvs,
)
from .icu import FEATURES

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    Splits = tuple[FloatArray, IntArray, FloatArray, IntArray]  # X_train, y_train, X_test, y_test

OPTION = "--clinaudit-mimic-dir"
"""Command-line option (pytest plugin and CLI) naming the extract's directory."""

ENV_VAR = "CLINAUDIT_MIMIC_DIR"
"""Environment variable naming the extract's directory when the option is not given."""

Layout = Literal["published", "two-file"]

LAYOUT_FILES: dict[str, tuple[str, ...]] = {
    "published": ("train_X.csv", "train_y.csv", "test_X.csv", "test_y.csv"),
    "two-file": ("mimic_train.csv", "mimic_test.csv"),
}
"""The files of each accepted layout, in the order they are hashed."""

LAYOUT_HELP = (
    "either the published layout (train_X.csv, train_y.csv, test_X.csv, test_y.csv; "
    "the X files hold the 8 features, the y files the label column) or the two-file "
    "layout (mimic_train.csv, mimic_test.csv; the label column first, then the 8 "
    f"features). The features, in order: {', '.join(FEATURES)}"
)

Z_MEAN_TOLERANCE = 0.1
"""Largest accepted ``|mean|`` of a training column (see the module docstring)."""

Z_STD_TOLERANCE = 0.1
"""Largest accepted ``|std - 1|`` of a training column (population std, ddof=0)."""


def _data_error(message: str) -> DataError:

    return DataError(message)


def resolve_mimic_dir(explicit: Path | None) -> Path | None:
    """The extract's directory: ``explicit`` if given, else ``$CLINAUDIT_MIMIC_DIR``, else None.

    An empty environment variable counts as unset; ``~`` is expanded in both.
    """
    if explicit is not None:
        return Path(explicit).expanduser()
    value = os.environ.get(ENV_VAR, "").strip()
    return Path(value).expanduser() if value else None


def no_extract_message() -> str:
    """What to do when no extract directory was given at all."""
    return (
        "the mimic-* variants audit your own MIMIC-IV extract, which is credentialed and "
        f"never shipped, and no extract directory was given: pass {OPTION} DIR or set the "
        f"environment variable {ENV_VAR}=DIR. DIR must hold {LAYOUT_HELP}. "
        "Without MIMIC-IV access, use the icu-synth-* variants (a synthetic cohort with "
        "the same schema)."
    )


def find_layout(directory: Path | None) -> tuple[Layout, tuple[Path, ...]]:
    """Which layout ``directory`` holds, and its files in :data:`LAYOUT_FILES` order.

    Raises
    ------
    DataError
        No directory given, the directory does not exist, neither layout is
        complete, or both are present (which one is meant would be a guess).
    """
    if directory is None:
        raise _data_error(no_extract_message())
    if not directory.exists():
        raise _data_error(
            f"{directory}: the MIMIC-IV extract directory does not exist; check the path "
            f"given with {OPTION} or {ENV_VAR}"
        )
    if not directory.is_dir():
        raise _data_error(
            f"{directory}: not a directory; {OPTION} and {ENV_VAR} name the directory "
            "that holds the extract's CSV files, not a file"
        )
    present = {
        layout: [name for name in names if (directory / name).is_file()]
        for layout, names in LAYOUT_FILES.items()
    }
    complete = [
        layout for layout, names in LAYOUT_FILES.items() if len(present[layout]) == len(names)
    ]
    if len(complete) == 2:
        raise _data_error(
            f"{directory}: holds both the published and the two-file layout; keep only "
            "one of them so that it is clear which rows are audited"
        )
    if complete:
        layout: Layout = "published" if complete[0] == "published" else "two-file"
        return layout, tuple(directory / name for name in LAYOUT_FILES[layout])
    for name, names in LAYOUT_FILES.items():
        if present[name]:
            missing = [n for n in names if n not in present[name]]
            raise _data_error(
                f"{directory}: incomplete {name} layout: {', '.join(missing)} missing "
                f"(found {', '.join(present[name])}); the {name} layout needs "
                f"{', '.join(names)}"
            )
    found = sorted(entry.name for entry in directory.iterdir())
    shown = ", ".join(found[:10]) + (f" and {len(found) - 10} more" if len(found) > 10 else "")
    raise _data_error(
        f"{directory}: no MIMIC-IV extract found (the directory holds "
        f"{shown or 'nothing'}); expected {LAYOUT_HELP}"
    )


def check_columns(path: Path, found: list[str], expected: tuple[str, ...]) -> None:
    """Raise a DataError unless ``found`` is exactly ``expected``, in order.

    Missing columns are reported first, then unexpected ones, then a wrong
    order, each with both lists, since the models read features by position.
    """
    if found == list(expected):
        return
    listing = f"expected the columns {list(expected)} in this order, found {found}"
    missing = [name for name in expected if name not in found]
    if missing:
        raise _data_error(f"{path}: missing column(s) {', '.join(map(repr, missing))}; {listing}")
    extra = [name for name in found if name not in expected]
    if extra:
        hint = ""
        if any(name == "" or name.startswith("Unnamed") for name in extra):
            hint = " (an unnamed column is usually a pandas index: write with index=False)"
        raise _data_error(
            f"{path}: unexpected column(s) {', '.join(map(repr, extra))}{hint}; {listing}; "
            "drop them"
        )
    raise _data_error(
        f"{path}: columns in the wrong order; {listing}; reorder them (models read the "
        "features by position)"
    )


def check_z_scored(path: Path, X: FloatArray, names: tuple[str, ...]) -> None:
    """Raise a DataError naming every training column that is not z-scored.

    Thresholds: :data:`Z_MEAN_TOLERANCE` on ``|mean|`` and :data:`Z_STD_TOLERANCE`
    on ``|std - 1|`` (population std), see the module docstring for why.
    """
    import numpy as np

    mean = X.mean(axis=0)
    std = X.std(axis=0)
    bad = (np.abs(mean) > Z_MEAN_TOLERANCE) | (np.abs(std - 1.0) > Z_STD_TOLERANCE)
    if not bad.any():
        return
    shown = ", ".join(
        f"{names[j]!r} (mean {mean[j]:.4g}, std {std[j]:.4g})" for j in np.flatnonzero(bad)
    )
    raise _data_error(
        f"{path}: column(s) not z-scored: {shown}; every feature needs training mean "
        f"within {Z_MEAN_TOLERANCE:g} of 0 and standard deviation within {Z_STD_TOLERANCE:g} "
        "of 1. Standardize each feature with the training split's mean and standard "
        "deviation (test rows too, with the same statistics): the ICU models have no scaler"
    )


def _check_rows(path: Path, n_rows: int) -> None:
    if n_rows == 0:
        raise _data_error(f"{path}: no data rows after the header; export the split's stays")


def _read_features(path: Path) -> FloatArray:
    """An X file of the published layout: exactly the 8 features, in order."""

    header, table = read_csv_table(path)
    check_columns(path, header, FEATURES)
    _check_rows(path, len(table))
    return table


def _read_labels(path: Path, label: str) -> IntArray:
    """A y file of the published layout: exactly the label column, 0/1."""

    header, table = read_csv_table(path)
    check_columns(path, header, (label,))
    _check_rows(path, len(table))
    return split_label(path, header, table, label)[2]


def _read_published(paths: tuple[Path, ...], label: str) -> Splits:
    x_train, y_train, x_test, y_test = paths
    splits = []
    for x_path, y_path in ((x_train, y_train), (x_test, y_test)):
        X, y = _read_features(x_path), _read_labels(y_path, label)
        if len(X) != len(y):
            raise _data_error(
                f"{y_path}: {len(y)} label rows, but {x_path.name} has {len(X)} feature rows; "
                "the X and y files must describe the same stays, row for row"
            )
        splits.append((X, y))
    (X_train, y_train_), (X_test, y_test_) = splits
    return X_train, y_train_, X_test, y_test_


def _read_two_file(paths: tuple[Path, ...], label: str) -> Splits:

    splits = []
    for path in paths:
        header, table = read_csv_table(path)
        check_columns(path, header, (label, *FEATURES))
        _check_rows(path, len(table))
        _, X, y = split_label(path, header, table, label)
        splits.append((X, y))
    (X_train, y_train), (X_test, y_test) = splits
    return X_train, y_train, X_test, y_test


def load_mimic_extract(directory: Path | None, *, label: str) -> Dataset:
    """Load and validate an extract in either layout (see the module docstring).

    Parameters
    ----------
    directory
        The extract's directory, or None when none was given (an error that
        says how to give one).
    label
        Name of the label column, ``hospital_expire_flag`` in MIMIC-IV.

    Returns
    -------
    Dataset
        Named ``"mimic"``; features as :data:`.icu.FEATURES`, z-scored.

    Raises
    ------
    DataError
        Naming the file, line or column, what was expected and what was found.
    """
    import numpy as np

    layout, paths = find_layout(directory)
    reader = _read_published if layout == "published" else _read_two_file
    X_train, y_train, X_test, y_test = reader(paths, label)
    train_path = paths[0]
    if np.unique(y_train).size < 2:
        raise _data_error(
            f"{paths[1] if layout == 'published' else train_path}: every training label is "
            f"{int(y_train[0])}; the training split needs both survivors (0) and deaths (1)"
        )
    check_z_scored(train_path, X_train, FEATURES)
    return Dataset(
        name="mimic",
        label=label,
        feature_names=FEATURES,
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
    )


def _write_rows(path: Path, header: list[str], rows: list[list[str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)


def write_mimic_layout(
    data: Dataset, directory: Path, *, layout: Layout = "published"
) -> tuple[Path, ...]:
    """Write a cohort (synthetic or real) in one of the accepted extract layouts.

    Floats are written with their shortest round-trip text, so loading the files
    with :class:`MimicSource` gives back a dataset with the same ``sha256``.

    Parameters
    ----------
    data
        A cohort with the extract's features (:data:`.icu.FEATURES`, in order).
    directory
        Created if missing; existing files of the layout are overwritten.
    layout
        ``"published"`` (four files) or ``"two-file"`` (label first).

    Returns
    -------
    tuple of Path
        The files written, in :data:`LAYOUT_FILES` order.
    """

    if data.feature_names != FEATURES:
        raise _data_error(
            f"{data.name}: features {list(data.feature_names)} are not the extract's "
            f"{list(FEATURES)}; only an ICU cohort can be written as a MIMIC-IV extract"
        )
    if layout == "two-file":
        train_name, test_name = LAYOUT_FILES["two-file"]
        return write_csvs(data, directory, train_name=train_name, test_name=test_name)
    if layout != "published":
        raise ValueError(f"layout must be 'published' or 'two-file', got {layout!r}")
    directory.mkdir(parents=True, exist_ok=True)
    paths = tuple(directory / name for name in LAYOUT_FILES["published"])
    for (x_path, y_path), X, y in (
        (paths[0:2], data.X_train, data.y_train),
        (paths[2:4], data.X_test, data.y_test),
    ):
        _write_rows(x_path, list(FEATURES), [[format_float(v) for v in row] for row in X.tolist()])
        _write_rows(y_path, [data.label], [[str(int(v))] for v in y.tolist()])
    return paths


@dataclasses.dataclass(frozen=True)
class MimicSource:
    """A user's MIMIC-IV extract as a variant's ``[dataset]`` (``source = "mimic"``).

    The directory comes from the load context (``--clinaudit-mimic-dir``), else
    from ``$CLINAUDIT_MIMIC_DIR``, so the error for a missing extract is right
    whichever way the caller built the context.
    """

    label: str

    def load(self, context: LoadContext) -> Dataset:
        return load_mimic_extract(resolve_mimic_dir(context.mimic_dir), label=self.label)

    def fingerprint(self, context: LoadContext) -> dict[str, Any]:
        # The rows are exactly the files' bytes; hashing them is far cheaper than
        # parsing and validating 70,000 rows, and any edit changes the key.
        from pytest_clinaudit.files import sha256_file

        layout, paths = find_layout(resolve_mimic_dir(context.mimic_dir))
        return {
            "source": "mimic",
            "label": self.label,
            "layout": layout,
            "files": {path.name: sha256_file(path) for path in paths},
        }
