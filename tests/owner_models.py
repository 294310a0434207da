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
