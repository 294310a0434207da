"""The input contract of an own-model audit: the model, asked about the owner's own rows.

- a kind the auditor can call (:func:`~pytest_clinaudit.reference.models.adapt_model`:
  ``predict_proba`` estimators, called with feature names when fitted with them
  and with the level strings of categorical columns; ``xgboost.Booster``; torch
  ``.pt2``), its classes holding the positive class;
- its answers on a sample of rows that shows every category and every
  column's missing cells (:func:`probe_rows`), checked for shape, range and
  NaN. A model that cannot take the data as it is (a logistic regression and a
  missing cell, a torch program and a text column) is refused with its own
  error, in one line, next to what the data holds;
- how LiRA refits its recipe, or why it cannot.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.files import sha256_file
from pytest_clinaudit.owner.inputs import InputError, OwnData

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pytest_clinaudit.reference.models import AuditedModel
    from pytest_clinaudit.reference.review.lira import FitShadow

    FloatArray = npt.NDArray[np.float64]

PROBE_ROWS = 16
"""Rows the model answers before any attack, to check its probabilities (plus one
row for each category and each column's missing cells)."""


@dataclasses.dataclass(frozen=True)
class OwnModel:
    """The checked model: its adapter, what it is, and (for LiRA) how to refit its recipe."""

    path: Path
    sha256: str
    kind: str
    model: AuditedModel
    fit_shadow: FitShadow | None
    lira_skipped: str | None = None
    """Why LiRA cannot refit this model's recipe, when ``fit_shadow`` is None."""
    categorical: tuple[int, ...] = ()
    """Data columns the model itself records as categorical (:mod:`~pytest_clinaudit.reference.
    models.fitted`): given to it as categories, and held fixed by every attack."""

    output: str | None = None
    """What a torch program's output means (the contract it was audited under)."""

    def summary(self) -> dict[str, Any]:
        found = {"path": str(self.path), "sha256": self.sha256, "kind": self.kind}
        if self.output is not None:
            found["output"] = self.output
        return found


def probe_rows(data: OwnData) -> FloatArray:
    """The rows the model is asked about before any attack, shape (k, d).

    The first :data:`PROBE_ROWS` test rows, then, from either file, the first
    row with a missing cell in each column that has one and the first row with
    each category: whatever the audit will pass the model, it is asked here.
    """
    import numpy as np

    dataset = data.dataset
    rows = np.concatenate([dataset.X_test, dataset.X_train])
    picked = list(range(min(PROBE_ROWS, len(rows))))
    missing = np.isnan(rows)
    for column in np.flatnonzero(missing.any(axis=0)).tolist():
        picked.append(int(np.argmax(missing[:, column])))
    for j, names in data.categories.levels:
        codes = rows[:, j]
        for code in range(len(names)):
            hit = np.flatnonzero(codes == code)
            if hit.size:
                picked.append(int(hit[0]))
    probe: FloatArray = rows[sorted(set(picked), key=picked.index)]
    return probe


def _unusual(data: OwnData) -> str:
    """What the model is given that not every model takes: text columns, missing cells."""
    import numpy as np

    names = data.dataset.feature_names
    parts = []
    for j, levels in data.categories.levels:
        # Words first: in a column of numbers with one stray word, the word is the news.
        shown = sorted(levels, key=lambda level: _is_number(level))[:2]
        more = ", ..." if len(levels) > 2 else ""
        parts.append(f"text in {names[j]!r} ({', '.join(map(repr, shown))}{more})")
    both = np.concatenate([data.dataset.X_train, data.dataset.X_test])
    numeric = [j for j in range(len(names)) if j not in data.categories.columns]
    cells = np.isnan(both[:, numeric]).sum(axis=0) if numeric else np.zeros(0)
    missing = [f"{names[j]!r} ({int(c)})" for j, c in zip(numeric, cells, strict=True) if c]
    if missing:
        parts.append("missing cells in " + ", ".join(missing))
    return "; ".join(parts)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_own_model(
    path: Path, data: OwnData, *, recipe: Any = None, positive_output: int | None = None
) -> OwnModel:
    """Load the model file the owner named, adapt it to the data and probe its answers.

    Unpickling runs code from the file: only ever called on the path the user
    passed with ``--model``. ``recipe`` is the torch MLP recipe that trained a
    ``.pt2`` program (``--recipe``), so that LiRA can refit its shadows;
    ``positive_output`` is which of such a program's two outputs per row is the
    positive class's (``--positive-output``; default 1).
    """
    from pytest_clinaudit.reference import models

    try:
        raw = models.load_model_file(path)
    except models.ModelError as exc:
        raise InputError(str(exc)) from None  # not a model: that, and only that
    _check_is_model(path, raw)
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    torch_program = isinstance(raw, TorchClassifier)
    if positive_output is not None:
        if not torch_program:
            raise InputError(
                "--positive-output chooses between a torch program's two outputs per row; "
                f"{path} is not a torch program"
            )
        raw.positive_output = positive_output
    try:
        model = models.adapt_model(
            raw,
            feature_names=data.dataset.feature_names,
            positive_class=data.positive_class,
            categories=data.categories,
        )
        probe = probe_rows(data)
        answer = model.predict_proba(probe)
        models.check_probabilities(answer, len(probe), column=1, source="the adapted model")
        predicted = model.predict(probe)
        if getattr(predicted, "shape", None) != (len(probe),):
            raise models.ModelError(
                f"predict returned shape {getattr(predicted, 'shape', None)} for {len(probe)} rows"
            )
    except models.ModelError as exc:
        # The model's own words first; then what the data holds that it may not take.
        unusual = _unusual(data)
        context = (
            f" (the data holds {unusual}: the model cannot take it as it is)" if unusual else ""
        )
        raise InputError(f"{exc}{context}") from None
    output = None
    if torch_program:
        width = raw.output_width
        if positive_output is not None and width != 2:
            raise InputError(
                f"--positive-output chooses between two outputs per row; the torch program "
                f"returns {'one' if width is None or width == 1 else width} per row"
            )
        output = _torch_contract(width, raw.positive_output)
    fit_shadow, skipped = _shadow_fitter(raw, model, data, recipe)
    categorical = tuple(getattr(model, "categorical_columns", ()))
    return OwnModel(
        path, sha256_file(path), _kind(raw), model, fit_shadow, skipped, categorical, output
    )


def _torch_contract(width: int | None, positive: int) -> str:
    """What the program's output was audited as, for the report."""
    if width == 2:
        return (
            f"two class logits per row, shape (n, 2); output {positive} is the positive "
            f"class's (--positive-output), p = softmax, the class-1 logit z[{positive}] - "
            f"z[{1 - positive}]"
        )
    shape = "(n,)" if width is None else "(n, 1)"
    return f"the positive class's logit per row, shape {shape}; p = sigmoid"


def _check_is_model(path: Path, raw: Any) -> None:
    """Refuse a file that unpickled to something that is no model at all (a dict, an array)."""
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    if isinstance(raw, TorchClassifier) or type(raw).__name__ == "Booster":
        return
    if not any(callable(getattr(raw, name, None)) for name in ("predict_proba", "predict")):
        raise InputError(
            f"{path}: holds a {type(raw).__module__.split('.')[0]}.{type(raw).__name__}, not a "
            "model (it has neither predict_proba nor predict)"
        )


def _shadow_fitter(raw: Any, model: Any, data: OwnData, recipe: Any) -> tuple[Any, str | None]:
    """LiRA's shadow fitter for this model, or why there is none."""
    from pytest_clinaudit.reference import models
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier
    from pytest_clinaudit.reference.review import lira

    names = data.dataset.feature_names
    if isinstance(raw, TorchClassifier):
        if recipe is None:
            return None, (
                "a torch program carries no training recipe, so its shadow models cannot be "
                "refitted; name the recipe that trained it with --recipe VARIANT"
            )
        return lira.torch_shadow_fitter(recipe, feature_names=names), None
    if isinstance(model, models.EstimatorAdapter) and _clonable(model.estimator):
        fit = lira.sklearn_shadow_fitter(
            model.estimator,
            feature_names=names,
            positive_class=data.positive_class,
            categories=data.categories,
        )
        return fit, None
    return None, (
        f"{_kind(raw)} is not a scikit-learn estimator, so its recipe cannot be refitted "
        "(sklearn.base.clone)"
    )


def _kind(raw: Any) -> str:
    """What the model is, for the report: ``sklearn.Pipeline``, ``torch.export program``, ..."""
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    if isinstance(raw, TorchClassifier):
        return "torch.export program"
    return type(raw).__module__.split(".")[0] + "." + type(raw).__name__


def _clonable(estimator: Any) -> bool:
    """Whether scikit-learn can refit the estimator's recipe (for LiRA's shadow models)."""
    try:
        from sklearn.base import clone

        clone(estimator)
    except Exception:  # noqa: BLE001 - not a scikit-learn estimator: LiRA is skipped
        return False
    return True
