"""What every attack asks of a model, and the seeded row draws of SPEC §3."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


class Classifier(Protocol):
    """What the auditor needs of a model: scikit-learn's classifier interface."""

    def predict_proba(self, X: Any) -> Any: ...

    def predict(self, X: Any) -> Any: ...


def positive_proba(model: Classifier, X: FloatArray) -> FloatArray:
    """``p(X)``: the model's probability of class 1, shape (n,)."""
    import numpy as np

    return np.asarray(model.predict_proba(X), dtype=np.float64)[:, 1]


def draw_rows(seed: int, population: int, size: int) -> IntArray:
    """``RandomState(seed).choice(population, min(size, population), replace=False)``.

    A fresh generator per draw, as the task does: draws never depend on each other
    or on the global NumPy state.
    """
    import numpy as np

    return np.random.RandomState(seed).choice(population, min(size, population), replace=False)
