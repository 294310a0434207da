"""Real clinical cohorts from scikit-survival's bundled files: what FLCHAIN and WHAS500 share.

A cohort module (:mod:`.flchain`, :mod:`.whas500`) reads its rows with
scikit-survival's loader (the files ship inside its wheel; nothing is ever
downloaded), encodes every column as a number in clinical units, and hands the
rows to :func:`prepare`, which does the rest the same way for every cohort:

1. **Label**: death within a fixed horizon, a prognosis a clinician would use.
   A row censored before the horizon is excluded: whether that patient died
   within the horizon is unknown, and counting them as survivors would bias
   the label towards survival (:func:`horizon_label`).
2. **Split**: stratified on the label, ``train_test_split(..., random_state=seed)``
   on row positions, as WDBC's split is.
3. **Imputation** of the columns a cohort names, from the training rows only:
   the training median fills the cell and a 0/1 indicator column
   ``<name>_missing`` records that it was missing (missingness is rarely random
   in clinical data and the indicator keeps what it says). Test rows are filled
   with the training median as well: nothing of the test split is looked at.
4. **z-scoring** of every feature with the training mean and population
   standard deviation (``ddof=0``), sums by ``math.fsum``.

With ``fill`` (public constants per imputed column) and ``zscore=False``,
steps 3 and 4 use no statistic of the training rows: the cells are filled with
the given constant (the indicator is the same) and the features stay in
clinical units. That is the preparation a DP model's data needs, whose epsilon
must cover everything derived from the private rows (SPEC §7.4).

The :class:`Cohort` keeps both faces: ``dataset`` (imputed, z-scored, no
missing cell: the agents' CSVs of the sps-v1 variants) and the raw splits in
clinical units with their missing cells, the survival outcome and the
post-outcome columns, for own-model audits, data dictionaries and the game.
"""

from __future__ import annotations

import csv
import dataclasses
import importlib
import importlib.util
import math
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .dataset import DataError, Dataset, format_float

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]

EXTRA = "pip install 'pytest-clinaudit[cohorts]'"
"""How to install scikit-survival, which ships the real cohorts."""

PREPARATION_VERSION = 1
"""Part of every real cohort's fingerprint: bump it when a change here moves a number."""

MISSING_SUFFIX = "_missing"
"""An imputed column ``c`` gets the indicator column ``c + MISSING_SUFFIX`` (1 = was missing)."""


def sksurv_version(source: str) -> str:
    """scikit-survival's version, without importing it; a one-line DataError when absent.

    ``find_spec`` honours ``sys.modules[name] = None`` (how tests hide a package),
    and package metadata is read without importing anything.
    """
    try:
        found = importlib.util.find_spec("sksurv") is not None
    except (ImportError, ValueError):
        found = False
    if found:
        try:
            return metadata.version("scikit-survival")
        except metadata.PackageNotFoundError:
            pass
    raise DataError(unavailable_message(source))


def unavailable_message(source: str) -> str:
    """Why a real cohort cannot be loaded without scikit-survival, and the fix."""
    return (
        f"the {source} cohort ships inside scikit-survival, which is not installed; "
        f"install it with {EXTRA} (nothing is downloaded, and no other data is used instead)"
    )


def sksurv_loader(name: str, source: str) -> Any:
    """``sksurv.datasets.<name>``, or the one-line DataError of :func:`unavailable_message`."""
    sksurv_version(source)
    try:
        datasets = importlib.import_module("sksurv.datasets")
    except ImportError:
        raise DataError(unavailable_message(source)) from None
    return getattr(datasets, name)


@dataclasses.dataclass(frozen=True)
class Column:
    """One column of a cohort's data dictionary."""

    name: str
    """Its name in the CSV files."""
    meaning: str
    """What it is, with its unit or coding."""
    recorded: str
    """When it becomes known, relative to the moment the prognosis is made."""
    source: str
    """The column of scikit-survival's table it comes from."""
    post_outcome: bool = False
    """Known only after the outcome: never a feature of a standard variant."""

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Subgroup:
    """Rows with ``low <= column < high`` (clinical units): a subgroup a fairness audit names."""

    name: str
    column: str
    low: float
    high: float


@dataclasses.dataclass(frozen=True, eq=False)
class RawSplit:
    """One split in clinical units, before imputation and z-scoring.

    Attributes
    ----------
    X
        float64, shape (n, n_columns): the cohort's ``columns``; NaN where the
        study has no value.
    y
        int64 0/1 labels, shape (n,), row for row the same as the dataset's.
    rows
        Each row's position in scikit-survival's table, shape (n,).
    time, event
        The survival outcome the label comes from: days from the prognosis's
        start to death or last contact, and whether death was observed.
    post_outcome
        Post-outcome columns by name, as text ("" where there is none), shape (n,) each.
    """

    X: FloatArray
    y: IntArray
    rows: IntArray
    time: FloatArray
    event: BoolArray
    post_outcome: dict[str, tuple[str, ...]]

    def __post_init__(self) -> None:
        # Shared by every caller of the cohort, like Dataset's arrays: read-only.
        for array in (self.X, self.y, self.rows, self.time, self.event):
            array.setflags(write=False)


@dataclasses.dataclass(frozen=True, eq=False)
class Cohort:
    """A real cohort prepared for the variants, and its raw rows (see the module docstring)."""

    dataset: Dataset
    """Imputed, with indicators, z-scored: what the sps-v1 variants' agents get."""
    columns: tuple[Column, ...]
    """The raw features, in order (the data dictionary's feature part)."""
    post_outcome_columns: tuple[Column, ...]
    """Columns recorded after the outcome; in no variant's features."""
    train: RawSplit
    test: RawSplit
    horizon_days: float
    excluded_censored: int
    """Rows censored before the horizon, left out of both splits."""
    medians: dict[str, float]
    """The value that fills each imputed column (clinical units): the training median,
    or the public constant given to :func:`prepare` as ``fill``."""
    mean: FloatArray
    std: FloatArray
    """z-scoring statistics of the dataset's features (training rows, ddof=0); 0 and 1
    when the features are left in clinical units (``zscore=False``)."""
    subgroups: tuple[Subgroup, ...]

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(column.name for column in self.columns)

    def data_dictionary(self) -> list[dict[str, Any]]:
        """Every raw column with its meaning, when it is recorded and where it comes from."""
        return [column.as_dict() for column in (*self.columns, *self.post_outcome_columns)]

    def subgroup_masks(self, split: RawSplit) -> dict[str, BoolArray]:
        """Boolean row masks of ``split``, one per subgroup, by name."""
        masks = {}
        for group in self.subgroups:
            values = split.X[:, self.feature_names.index(group.column)]
            masks[group.name] = (values >= group.low) & (values < group.high)
        return masks

    def write_raw_csvs(
        self,
        directory: Path,
        *,
        train_name: str = "train_raw.csv",
        test_name: str = "test_raw.csv",
        post_outcome: bool = False,
    ) -> tuple[Path, Path]:
        """Both raw splits as CSV: the label, the features in clinical units, an empty
        cell where a value is missing; with ``post_outcome`` also the post-outcome columns
        (text). Rows are in the dataset's order, so row i is the same patient in both."""
        directory.mkdir(parents=True, exist_ok=True)
        extra = [column.name for column in self.post_outcome_columns] if post_outcome else []
        paths = (directory / train_name, directory / test_name)
        for path, split in zip(paths, (self.train, self.test), strict=True):
            with path.open("w", newline="", encoding="utf-8") as handle:
                writer = csv.writer(handle, lineterminator="\n")
                writer.writerow([self.dataset.label, *self.feature_names, *extra])
                rows = zip(split.y.tolist(), split.X.tolist(), strict=True)
                for i, (label, row) in enumerate(rows):
                    cells = ["" if math.isnan(v) else format_float(v) for v in row]
                    later = [split.post_outcome[name][i] for name in extra]
                    writer.writerow([str(label), *cells, *later])
        return paths


def horizon_label(event: BoolArray, time: FloatArray, horizon: float) -> tuple[BoolArray, IntArray]:
    """Death within ``horizon`` days: which rows are known, and their 0/1 label.

    A death at ``time <= horizon`` is 1; a row followed to ``time >= horizon``
    without such a death is 0 (a death after the horizon is a survivor of it);
    a censored row with ``time < horizon`` is unknown and excluded.

    Returns
    -------
    keep, label
        Boolean mask of the known rows, shape (n,); int64 labels of all rows,
        meaningful where ``keep``.
    """
    import numpy as np

    positive = event & (time <= horizon)
    keep = positive | (time >= horizon)
    return keep, positive.astype(np.int64)


def _standardize(
    train: FloatArray, test: FloatArray, name: str
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Both splits z-scored with the training mean and population std (ddof=0).

    ``math.fsum`` sums exactly rounded, so the result, and the dataset's sha256,
    does not depend on NumPy's summation order.
    """
    import numpy as np

    n = train.shape[0]
    mean = np.array([math.fsum(column) / n for column in train.T])
    deviations = train - mean
    std = np.sqrt(np.array([math.fsum(column) / n for column in (deviations * deviations).T]))
    if np.any(std == 0):
        raise DataError(f"{name}: a feature is constant in the training split")
    return (train - mean) / std, (test - mean) / std, mean, std


def _impute(
    train: FloatArray,
    test: FloatArray,
    names: tuple[str, ...],
    imputed: tuple[str, ...],
    name: str,
    fill: dict[str, float] | None = None,
) -> tuple[FloatArray, FloatArray, tuple[str, ...], dict[str, float]]:
    """Fill the ``imputed`` columns with their training median, or with ``fill``'s public
    constant; append one indicator each."""
    import numpy as np

    if fill is not None and set(fill) != set(imputed):
        raise DataError(
            f"{name}: fill must give one value for each of {', '.join(imputed)}, "
            f"got {', '.join(sorted(fill)) or 'none'}"
        )
    for j, column in enumerate(names):
        if column not in imputed and (np.isnan(train[:, j]).any() or np.isnan(test[:, j]).any()):
            raise DataError(f"{name}: column {column!r} has missing values but is not imputed")
    medians: dict[str, float] = {}
    filled = [train.copy(), test.copy()]
    indicators: list[list[FloatArray]] = [[], []]
    for column in imputed:
        j = names.index(column)
        observed = train[~np.isnan(train[:, j]), j]
        if fill is not None:
            medians[column] = float(fill[column])  # public: nothing of the rows is read
        elif observed.size == 0:
            raise DataError(f"{name}: column {column!r} is missing in every training row")
        else:
            medians[column] = float(np.median(observed))
        for k, split in enumerate(filled):
            missing = np.isnan(split[:, j])
            indicators[k].append(missing.astype(np.float64))
            split[missing, j] = medians[column]
    train_out, test_out = (
        np.column_stack([split, *extra]) for split, extra in zip(filled, indicators, strict=True)
    )
    return train_out, test_out, (*names, *(c + MISSING_SUFFIX for c in imputed)), medians


def _strata(
    labels: IntArray, X: FloatArray, columns: tuple[Column, ...], subgroups: tuple[Subgroup, ...]
) -> IntArray:
    """Each row's stratum: its label and, for every column a subgroup is defined on, which
    of that column's subgroups it falls in (-1: none, a missing value among them)."""
    import numpy as np

    names = [column.name for column in columns]
    keys = [labels]
    for column in dict.fromkeys(group.column for group in subgroups):
        values = X[:, names.index(column)]
        which = np.full(len(values), -1)
        for k, group in enumerate(g for g in subgroups if g.column == column):
            which[(values >= group.low) & (values < group.high) & (which < 0)] = k
        keys.append(which)
    _, strata = np.unique(np.column_stack(keys), axis=0, return_inverse=True)
    return np.asarray(strata, dtype=np.int64).ravel()


def prepare(
    *,
    name: str,
    label: str,
    columns: tuple[Column, ...],
    post_outcome_columns: tuple[Column, ...],
    X: FloatArray,
    time: FloatArray,
    event: BoolArray,
    post_outcome: dict[str, tuple[str, ...]],
    horizon_days: float,
    imputed: tuple[str, ...],
    subgroups: tuple[Subgroup, ...],
    test_size: float,
    split_seed: int,
    source_rows: IntArray | None = None,
    fill: dict[str, float] | None = None,
    zscore: bool = True,
    stratify_subgroups: bool = False,
) -> Cohort:
    """Label, split, impute and z-score a cohort's encoded rows (the module docstring's steps).

    Parameters
    ----------
    X
        float64, shape (n, len(columns)): the whole table in clinical units, NaN
        where missing, in scikit-survival's row order.
    time, event
        Follow-up in days from the prognosis's start, and whether death was
        observed, shape (n,).
    post_outcome
        Text columns recorded after the outcome, shape (n,) each.
    source_rows
        Each row's position in scikit-survival's table, shape (n,), where the
        cohort module dropped rows before; by default ``0 .. n-1``.
    fill
        Public constants (clinical units) that fill the ``imputed`` columns instead
        of the training medians, one per imputed column.
    zscore
        z-score with the training statistics (the default), or leave the features
        in clinical units.
    stratify_subgroups
        Stratify the split by the outcome within every combination of the ``subgroups``
        (age band and sex, say), not by the outcome alone: each subgroup then has the
        same death rate in both splits, up to one patient, where a draw stratified by
        the outcome alone may leave it two points apart (FLCHAIN's ages 65-79: 16.0%
        of the training split died, 14.0% of the test split).
    """
    import numpy as np
    from sklearn.model_selection import train_test_split

    if not horizon_days > 0:
        raise DataError(f"{name}: horizon_days must be positive, got {horizon_days!r}")
    if not 0 < test_size < 1:
        raise DataError(f"{name}: test_size must lie in (0, 1), got {test_size!r}")
    keep, labels = horizon_label(event, time, horizon_days)
    positions = np.arange(keep.size) if source_rows is None else np.asarray(source_rows)
    rows = np.flatnonzero(keep)
    # Positions, not rows, go through the split, so every raw array follows the same order.
    strata = labels[rows]
    if stratify_subgroups:
        strata = _strata(labels[rows], X[rows], columns, subgroups)
    train_rows, test_rows = train_test_split(
        rows, test_size=test_size, random_state=split_seed, stratify=strata
    )

    def split(at: IntArray) -> RawSplit:
        raw = np.ascontiguousarray(X[at], dtype=np.float64)
        return RawSplit(
            X=raw,
            y=labels[at],
            rows=positions[at].astype(np.int64),
            time=np.asarray(time[at], dtype=np.float64),
            event=np.asarray(event[at], dtype=np.bool_),
            post_outcome={key: tuple(text[i] for i in at) for key, text in post_outcome.items()},
        )

    train, test = split(train_rows), split(test_rows)
    names = tuple(column.name for column in columns)
    filled_train, filled_test, feature_names, medians = _impute(
        train.X, test.X, names, imputed, name, fill
    )
    if zscore:
        z_train, z_test, mean, std = _standardize(filled_train, filled_test, name)
    else:
        width = filled_train.shape[1]
        z_train, z_test, mean, std = filled_train, filled_test, np.zeros(width), np.ones(width)
    dataset = Dataset(
        name=name,
        label=label,
        feature_names=feature_names,
        X_train=z_train,
        y_train=train.y,
        X_test=z_test,
        y_test=test.y,
    )
    return Cohort(
        dataset=dataset,
        columns=columns,
        post_outcome_columns=post_outcome_columns,
        train=train,
        test=test,
        horizon_days=float(horizon_days),
        excluded_censored=int(keep.size - rows.size),
        medians=medians,
        mean=mean,
        std=std,
        subgroups=subgroups,
    )


def cohort_fingerprint(source: str, settings: dict[str, Any]) -> dict[str, Any]:
    """A real cohort's cache key: its settings, this preparation's version, scikit-survival's.

    The rows are scikit-survival's bundled file, covered by its version; reading
    that version imports nothing, so a warm lookup stays cheap.
    """
    return {
        "source": source,
        "preparation_version": PREPARATION_VERSION,
        "scikit-survival": sksurv_version(source),
        **settings,
    }
