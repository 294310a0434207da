"""Real cohorts as a hospital team would hand them to ``clinaudit audit``, for the owner tests.

FLCHAIN, GBSG2, AIDS and WHAS500 come inside scikit-survival's wheel
(``sksurv.datasets``; nothing is downloaded). Each becomes a binary outcome (the
event indicator, 1 = the event was observed), a 75/25 split stratified by it,
and two CSV files: text categories as text, number-coded categories (``karnof``,
``flc.grp``, WHAS500's 0/1 flags) as the numbers a hospital export holds,
missing cells empty. FLCHAIN's ``chapter`` (the cause of death) is left out: it
is recorded after the outcome and would give the label away.

Not a test module: the owner tests import it (``tests/`` is on their path).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

LABEL = "event"

COHORTS = {
    "flchain": ("load_flchain", "death", ("chapter",)),
    "gbsg2": ("load_gbsg2", "cens", ()),
    "aids": ("load_aids", "censor", ()),
    "whas500": ("load_whas500", "fstat", ()),
}
"""Cohort -> (sksurv loader, event field, columns left out)."""

NUMBER_CODED = {
    "flchain": ("flc.grp", "sample.yr"),
    "aids": ("hemophil", "ivdrug", "karnof", "raceth", "sex", "strat2", "tx", "txgrp"),
    "whas500": ("afb", "av3", "chf", "cvd", "gender", "miord", "mitype", "sho"),
}
"""Categories whose levels are numbers: written as numbers, as a hospital export holds them."""


@dataclasses.dataclass(frozen=True)
class CohortFiles:
    """A cohort's split as frames and as the two CSV files written from them."""

    name: str
    train: Any
    test: Any
    train_csv: Path
    test_csv: Path

    def xy(self, split: str) -> tuple[Any, Any]:
        frame = self.train if split == "train" else self.test
        return frame.drop(columns=LABEL), frame[LABEL].to_numpy()


def cohort_frame(name: str) -> Any:
    """The whole cohort as one DataFrame: features as a hospital file holds them, then the label."""
    sksurv_datasets = pytest.importorskip("sksurv.datasets")
    loader, event, dropped = COHORTS[name]
    X, y = getattr(sksurv_datasets, loader)()
    frame = X.drop(columns=list(dropped)).copy()
    for column in NUMBER_CODED.get(name, ()):
        frame[column] = frame[column].astype(str).astype(float)
    for column in frame.columns:
        if str(frame[column].dtype) == "category":
            frame[column] = frame[column].astype(object)
    frame[LABEL] = y[event].astype(int)
    return frame


def write_cohort(
    directory: Path, name: str, *, seed: int = 0, n_test: Any = 0.25, n_train: Any = None
) -> CohortFiles:
    """``name``'s 75/25 stratified split (``seed``) as ``train.csv`` and ``test.csv``.

    ``n_train`` rows (stratified too) instead of the rest, for a small training set.
    """
    from sklearn.model_selection import train_test_split

    frame = cohort_frame(name)
    train, test = train_test_split(
        frame, test_size=n_test, train_size=n_train, stratify=frame[LABEL], random_state=seed
    )
    directory.mkdir(parents=True, exist_ok=True)
    train_csv, test_csv = directory / "train.csv", directory / "test.csv"
    train.to_csv(train_csv, index=False)
    test.to_csv(test_csv, index=False)
    return CohortFiles(name, train, test, train_csv, test_csv)


def write_gbsg2_forest(directory: Path) -> tuple[Path, CohortFiles]:
    """An unpruned random forest on GBSG2 (its text categories one-hot encoded), pickled as
    ``forest.pkl`` beside the cohort's CSVs: a model that leaks its training rows."""
    import pickle

    from sklearn.compose import make_column_transformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    files = write_cohort(directory, "gbsg2")
    X, y = files.xy("train")
    encode = make_column_transformer(
        (OneHotEncoder(handle_unknown="ignore"), ["horTh", "menostat", "tgrade"]),
        remainder="passthrough",
    )
    forest = RandomForestClassifier(n_estimators=50, random_state=0, n_jobs=1)
    model = directory / "forest.pkl"
    model.write_bytes(pickle.dumps(make_pipeline(encode, forest).fit(X, y)))
    return model, files
