"""Model recipes and the artifacts they build.

A recipe is declarative: an estimator kind with its hyper-parameters, an
optional ``StandardScaler`` in front, optional Platt/isotonic calibration around
it, and optional FGSM augmentation of the training rows. Building is
deterministic: the same recipe, data and library versions give the same pickled
bytes, and the sha256 of those bytes identifies the model everywhere
(references, cache keys, manifests).
"""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..attacks.params import SurrogateParams

if TYPE_CHECKING:
    from ..data import Dataset

PICKLE_PROTOCOL = 4
"""Fixed so that the artifact bytes do not change with Python's default protocol."""

ESTIMATORS = ("logistic_regression", "random_forest", "xgboost")


class RecipeError(ValueError):
    """A recipe cannot be built as written; the message names the setting."""


@dataclasses.dataclass(frozen=True)
class Calibration:
    """``CalibratedClassifierCV(<estimator>, method=method, cv=cv)``."""

    method: Literal["sigmoid", "isotonic"]
    cv: int


@dataclasses.dataclass(frozen=True)
class Augmentation:
    """Training rows plus their FGSM copies (the FGSM surrogate's sign, ``epsilon``)."""

    method: Literal["fgsm"]
    epsilon: float


@dataclasses.dataclass(frozen=True)
class ModelRecipe:
    """How to build the audited model from the training rows."""

    estimator: str
    params: tuple[tuple[str, Any], ...]
    scaler: bool
    calibration: Calibration | None
    augmentation: Augmentation | None

    @classmethod
    def create(
        cls,
        estimator: str,
        params: Mapping[str, Any],
        *,
        scaler: bool,
        calibration: Calibration | None = None,
        augmentation: Augmentation | None = None,
    ) -> ModelRecipe:
        if estimator not in ESTIMATORS:
            raise RecipeError(f"estimator {estimator!r} is not one of {', '.join(ESTIMATORS)}")
        return cls(estimator, tuple(sorted(params.items())), scaler, calibration, augmentation)

    def describe(self) -> str:
        """A one-line summary, e.g. ``scaler + calibrated(sigmoid, cv=5) random_forest``."""
        parts = ["scaler"] if self.scaler else []
        core = self.estimator
        if self.calibration:
            core = f"{self.calibration.method}-calibrated(cv={self.calibration.cv}) {core}"
        parts.append(core)
        text = " + ".join(parts)
        if self.augmentation:
            text += f", {self.augmentation.method}-augmented (eps={self.augmentation.epsilon:g})"
        return text


def make_estimator(recipe: ModelRecipe) -> Any:
    """The unfitted estimator (pipeline) a recipe describes."""
    params = dict(recipe.params)
    if recipe.estimator == "logistic_regression":
        from sklearn.linear_model import LogisticRegression as factory
    elif recipe.estimator == "random_forest":
        from sklearn.ensemble import RandomForestClassifier as factory
    else:
        from xgboost import XGBClassifier as factory
    try:
        model: Any = factory(**params)
    except TypeError as exc:
        raise RecipeError(f"{recipe.estimator}: {exc}") from None
    # scikit-learn accepts unknown keywords lazily for some estimators; check now.
    unknown = sorted(set(params) - set(model.get_params(deep=False)))
    if unknown:
        raise RecipeError(f"{recipe.estimator} has no parameter(s) {', '.join(unknown)}")
    if recipe.calibration is not None:
        from sklearn.calibration import CalibratedClassifierCV

        model = CalibratedClassifierCV(
            model, method=recipe.calibration.method, cv=recipe.calibration.cv
        )
    if recipe.scaler:
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        model = make_pipeline(StandardScaler(), model)
    return model


def build_model(recipe: ModelRecipe, surrogate: SurrogateParams, data: Dataset) -> Any:
    """Fit the recipe on the training rows (plus their FGSM copies if it says so)."""
    import numpy as np

    from ..attacks.fgsm import fgsm_perturb, fit_surrogate_sign

    if not isinstance(recipe, ModelRecipe):
        # A torch model is never pickled: its artifact is a model.pt2.
        raise RecipeError(
            "mlp recipes are built by pytest_clinaudit.reference.models.program.build_mlp "
            "into a model.pt2, not pickled"
        )

    X, y = data.X_train, data.y_train
    if recipe.augmentation is not None:
        sign = fit_surrogate_sign(surrogate, X, y)
        X = np.vstack([X, fgsm_perturb(X, y, recipe.augmentation.epsilon, sign)])
        y = np.concatenate([y, y])
    return make_estimator(recipe).fit(X, y)


@dataclasses.dataclass(frozen=True, eq=False)
class Artifact:
    """A pickled model and the sha256 of its bytes."""

    data: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    @classmethod
    def from_model(cls, model: Any) -> Artifact:
        return cls(pickle.dumps(model, protocol=PICKLE_PROTOCOL))

    def load(self) -> Any:
        """Unpickle the model. Only ever called on bytes this package built."""
        return pickle.loads(self.data)  # noqa: S301 - our own artifact, never a submission's
