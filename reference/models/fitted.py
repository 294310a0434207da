"""A model's own record of its categorical features, and the data given back to it that way.

A model fitted on pandas ``category`` columns takes them only as categories:
``HistGradientBoostingClassifier(categorical_features="from_dtype")`` fails on
the number 70 where it was fitted on the category ``"70"`` ("ufunc 'isnan'"),
and an XGBoost model saved with ``enable_categorical`` refuses text ("could not
convert string to float"). Which features are categorical, and their
categories, are read from the model itself, never guessed from the data:

- scikit-learn's ``HistGradientBoosting*``: ``is_categorical_`` and, when it
  was fitted on ``category`` columns, the ``categories_`` of the ordinal
  encoder it fitted on them (fitted on numbers, it takes numbers: only
  ``is_categorical_`` is used);
- XGBoost (a ``Booster`` or an ``XGBClassifier``): the feature types ``"c"``,
  and the categories the model stores (``gradient_booster.model.cats`` of its
  JSON, XGBoost 3.1 on). An older model stores none; it is given the levels
  the data holds, sorted, which is what ``astype("category")`` gave it.

:func:`as_fitted` turns a data column (text levels, or numbers for a
number-coded column) into a pandas ``Categorical`` with the model's categories:
a cell matches the category that prints the same (``70.0`` is ``"70"`` and
``70``); a cell the model never saw becomes missing.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any

FittedCategories = tuple[tuple[str, "tuple[Any, ...] | None"], ...]
"""(feature name, its categories as the model holds them, or None: it takes numbers)."""


@dataclasses.dataclass(frozen=True)
class Fitted:
    """The categorical features a model records, by name, with their categories."""

    features: FittedCategories = ()

    def __bool__(self) -> bool:
        return bool(self.features)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.features)

    def as_categories(self) -> dict[str, tuple[Any, ...]]:
        """Features whose categories the model must be given as pandas categories."""
        return {name: levels for name, levels in self.features if levels is not None}


NONE = Fitted()


def _key(value: Any) -> str | None:
    """How a cell or a category prints, numbers without a trailing ``.0``; None if missing."""
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            return text
        return _key(number) if math.isfinite(number) else text
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(number):
        return None
    return str(int(number)) if number.is_integer() else repr(number)


def as_fitted(values: Any, categories: Sequence[Any]) -> Any:
    """A column as a pandas ``Categorical`` with the model's ``categories``; unseen -> missing."""
    import importlib

    import numpy as np

    pandas: Any = importlib.import_module("pandas")
    lookup = {_key(c): c for c in categories}
    # One key per distinct cell, not per row: a million rows hold a handful of levels.
    codes, distinct = pandas.factorize(np.asarray(values), use_na_sentinel=True)
    found = [lookup.get(_key(v)) for v in distinct]
    index = {c: i for i, c in enumerate(categories)}
    table = np.array([-1 if c is None else index[c] for c in found] + [-1], dtype=np.int64)
    return pandas.Categorical.from_codes(table[codes], categories=list(categories))


def of_estimator(estimator: Any) -> Fitted:
    """The categorical features a scikit-learn estimator (or an ``XGBClassifier``) records."""
    get_booster = getattr(estimator, "get_booster", None)
    if callable(get_booster) and type(estimator).__module__.startswith("xgboost"):
        try:
            booster = get_booster()
        except Exception:  # noqa: BLE001 - an unfitted wrapper: the adapter says so later
            return NONE
        return of_booster(booster)
    flags = getattr(estimator, "is_categorical_", None)
    names = getattr(estimator, "feature_names_in_", None)
    if flags is None or names is None or not any(flags):
        return NONE
    categorical = [str(n) for n, flag in zip(names, flags, strict=True) if flag]
    levels = _hgb_categories(estimator)
    if levels is None:  # fitted on numbers: it takes numbers
        return Fitted(tuple((name, None) for name in categorical))
    return Fitted(
        tuple((name, tuple(found)) for name, found in zip(categorical, levels, strict=True))
    )


def _hgb_categories(estimator: Any) -> list[Any] | None:
    """The categories a ``HistGradientBoosting*`` fitted ``from_dtype`` encodes, if any.

    scikit-learn keeps them in the ordinal encoder it fitted on the category
    columns (``_preprocessor``, scikit-learn 1.4 on); without it the model was
    fitted on numbers.
    """
    preprocessor = getattr(estimator, "_preprocessor", None)
    if preprocessor is None:
        return None
    encoder = getattr(preprocessor, "named_transformers_", {}).get("encoder")
    found = getattr(encoder, "categories_", None)
    return None if found is None else [list(c) for c in found]


def of_booster(booster: Any) -> Fitted:
    """The categorical features an ``xgboost.Booster`` records (feature type ``"c"``)."""
    types = booster.feature_types or []
    names = booster.feature_names or [f"f{i}" for i in range(len(types))]
    positions = [i for i, kind in enumerate(types) if kind == "c"]
    if not positions:
        return NONE
    try:
        model = json.loads(bytes(booster.save_raw(raw_format="json")))
        encoded = model["learner"]["gradient_booster"]["model"].get("cats", {}).get("enc", [])
    except (ValueError, KeyError, TypeError):
        encoded = []
    return Fitted(
        tuple(
            (str(names[i]), _decoded(encoded[i]) if i < len(encoded) else None) for i in positions
        )
    )


def _decoded(entry: Any) -> tuple[Any, ...] | None:
    """One feature's categories from XGBoost's JSON: UTF-8 strings by offsets, or numbers."""
    values = entry.get("values") or []
    if not values:
        return None  # the model stores no categories (XGBoost before 3.1)
    offsets = entry.get("offsets")
    if offsets is None:
        return tuple(values)
    raw = bytes(values)
    return tuple(
        raw[start:end].decode("utf-8") for start, end in zip(offsets, offsets[1:], strict=False)
    )
