"""Models that break the input contract in one way each, for the own-model audit's tests.

Not a test module: pickles of these classes must find them on import, and
``tests/`` is on the path of every test process.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class _Broken:
    """Fitted-looking: binary classes, predict_proba and predict, with one flaw."""

    classes_ = np.array([0, 1])

    def predict(self, X: Any) -> Any:
        return np.zeros(len(X), dtype=np.int64)


class NaNProbabilities(_Broken):
    def predict_proba(self, X: Any) -> Any:
        out = np.full((len(X), 2), 0.5)
        out[3, 1] = np.nan
        return out


class Scores(_Broken):
    """Returns decision scores where probabilities belong."""

    def predict_proba(self, X: Any) -> Any:
        scores = np.linspace(-3.0, 3.0, len(X))
        return np.column_stack([-scores, scores])


class OneColumn(_Broken):
    def predict_proba(self, X: Any) -> Any:
        return np.full((len(X), 1), 0.5)


class ThreeClasses(_Broken):
    classes_ = np.array([0, 1, 2])

    def predict_proba(self, X: Any) -> Any:
        return np.full((len(X), 3), 1 / 3)


class Constant(_Broken):
    """The same probability for every row (0 and 1 included): no discrimination at all."""

    def __init__(self, p: float) -> None:
        self.p = p

    def predict_proba(self, X: Any) -> Any:
        return np.column_stack([np.full(len(X), 1.0 - self.p), np.full(len(X), self.p)])

    def predict(self, X: Any) -> Any:
        return np.full(len(X), int(self.p > 0.5), dtype=np.int64)


class Threshold(_Broken):
    """Probability exactly 1 where feature ``j`` exceeds ``t``, else exactly 0."""

    def __init__(self, j: int, t: float) -> None:
        self.j, self.t = j, t

    def predict_proba(self, X: Any) -> Any:
        p = (np.asarray(X, dtype=np.float64)[:, self.j] > self.t).astype(np.float64)
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> Any:
        return (np.asarray(X, dtype=np.float64)[:, self.j] > self.t).astype(np.int64)


class RoundedLogistic(_Broken):
    """A logistic score rounded to one decimal: many ties, and exactly 0 or 1 far out."""

    def __init__(self, w: float) -> None:
        self.w = w

    def _p(self, X: Any) -> Any:
        z = self.w * np.asarray(X, dtype=np.float64).sum(axis=1)
        with np.errstate(over="ignore", invalid="ignore"):
            # tanh never overflows; inf - inf (huge values of both signs) is NaN, refused.
            return np.round(0.5 * (1.0 + np.tanh(0.5 * z)), 1)

    def predict_proba(self, X: Any) -> Any:
        p = self._p(X)
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> Any:
        return (self._p(X) > 0.5).astype(np.int64)


def wdbc_files(directory: Any, wdbc: Any) -> dict[str, Any]:
    """The WDBC splits as CSV files and a logistic pipeline pickled next to them."""
    import pickle

    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from pytest_clinaudit.reference.data import write_csvs

    train, test = write_csvs(wdbc, directory, train_name="train.csv", test_name="test.csv")
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
    model.fit(wdbc.X_train, wdbc.y_train)
    path = directory / "model.pkl"
    path.write_bytes(pickle.dumps(model))
    return {"train": train, "test": test, "model": path, "dir": directory}


class Warns:
    """A fitted estimator whose every answer raises a library-style FutureWarning."""

    MESSAGE = "the default of 'strategy' will change in version 9.9"

    def __init__(self, estimator: Any) -> None:
        self.estimator = estimator
        self.classes_ = estimator.classes_
        self.feature_names_in_ = estimator.feature_names_in_

    def predict_proba(self, X: Any) -> Any:
        import warnings

        warnings.warn(self.MESSAGE, FutureWarning, stacklevel=2)
        return self.estimator.predict_proba(X)

    def predict(self, X: Any) -> Any:
        return self.estimator.predict(X)
