"""WDBC, the Wisconsin breast cancer data that ships with scikit-learn (SPEC §2)."""

from __future__ import annotations

import dataclasses
from typing import Any

from .dataset import Dataset, LoadContext


def load_wdbc(*, test_size: float, split_seed: int, label: str = "label") -> Dataset:
    """The Wisconsin Diagnostic Breast Cancer data, split as the task specifies.

    scikit-learn ships the UCI file, so nothing is downloaded. The label is
    ``1 - target`` so that 1 means malignant (the adverse class), and the split is
    stratified with ``random_state=split_seed``.
    """
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    bunch = load_breast_cancer()
    X = bunch.data
    y = 1 - bunch.target
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=test_size, random_state=split_seed, stratify=y
    )
    return Dataset(
        name="wdbc",
        label=label,
        feature_names=tuple(str(name) for name in bunch.feature_names),
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
    )


@dataclasses.dataclass(frozen=True)
class WDBCSource:
    """WDBC from ``sklearn.datasets.load_breast_cancer``, stratified split."""

    label: str
    test_size: float
    split_seed: int

    def load(self, context: LoadContext) -> Dataset:
        return load_wdbc(test_size=self.test_size, split_seed=self.split_seed, label=self.label)

    def fingerprint(self, context: LoadContext) -> dict[str, Any]:
        # The rows are fixed by scikit-learn's bundled file, covered by its version.
        return {"source": "wdbc", **dataclasses.asdict(self)}
