"""Shared, cached builds of the torch variants for the tests/test_nn_*.py modules.

Building an MLP takes seconds (WDBC) to tens of seconds (ICU), so each variant
is built and audited once per test process, whichever module asks first.
Session fixtures would be defined once per importing module; these caches are
process-wide.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from pytest_clinaudit.catalog.variants import Catalog, Variant, default_catalog

if TYPE_CHECKING:
    from pytest_clinaudit.reference.audit import AuditResult
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.nn import BuiltMLP, MLPRecipe

WDBC_MLP = ("wdbc-mlp", "wdbc-mlp-pgd", "wdbc-mlp-dp")
ICU_MLP = ("icu-synth-mlp", "icu-synth-mlp-pgd", "icu-synth-mlp-dp")
MIMIC_MLP = ("mimic-mlp", "mimic-mlp-pgd", "mimic-mlp-dp")


@functools.cache
def catalog() -> Catalog:
    return default_catalog()


def variant(name: str) -> Variant:
    return catalog().get(name)


def recipe(name: str) -> MLPRecipe:
    from pytest_clinaudit.reference.nn import MLPRecipe

    model = variant(name).model
    assert isinstance(model, MLPRecipe)
    return model


@functools.cache
def _dataset(source: object) -> Dataset:
    # Keyed by the (frozen, hashable) source record: the three variants of a
    # dataset share one load, the ICU cohort is generated once.
    from pytest_clinaudit.reference.data import LoadContext

    loaded: Dataset = source.load(LoadContext())  # type: ignore[attr-defined]
    return loaded


def dataset(name: str) -> Dataset:
    return _dataset(variant(name).dataset)


@functools.cache
def built(name: str) -> BuiltMLP:
    from pytest_clinaudit.reference.nn import build_mlp

    return build_mlp(recipe(name), dataset(name))


@functools.cache
def audited(name: str) -> AuditResult:
    from pytest_clinaudit.reference.audit import audit

    artifact = built(name).artifact
    return audit(
        artifact.load(), dataset(name), variant(name).params, artifact_sha256=artifact.sha256
    )
