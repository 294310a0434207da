"""The torch variants' builds and references for the tests/test_nn_*.py modules.

Building an MLP takes seconds (WDBC) to tens of seconds (ICU), so each variant
is built and audited once per test run, by the real path, whichever process
asks first (``workspace_helpers``), and read back here.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.catalog.variants import Catalog, Variant, default_catalog

if TYPE_CHECKING:
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.models.mlp import MLPRecipe
    from pytest_clinaudit.reference.models.program import BuiltMLP

WDBC_MLP = ("wdbc-mlp", "wdbc-mlp-pgd", "wdbc-mlp-dp")
ICU_MLP = ("icu-synth-mlp", "icu-synth-mlp-pgd", "icu-synth-mlp-dp")
MIMIC_MLP = ("mimic-mlp", "mimic-mlp-pgd", "mimic-mlp-dp")


@functools.cache
def catalog() -> Catalog:
    return default_catalog()


def variant(name: str) -> Variant:
    return catalog().get(name)


def recipe(name: str) -> MLPRecipe:
    from pytest_clinaudit.reference.models.mlp import MLPRecipe

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
    """The variant's build, shared by the whole test run (``workspace_helpers``)."""
    import json

    from workspace_helpers import built_workspace, run_factory

    from pytest_clinaudit.reference.models.mlp import TrainingRecord
    from pytest_clinaudit.reference.models.program import BuiltMLP, TorchArtifact

    directory = built_workspace(run_factory(), name)
    manifest = json.loads((directory / "grader" / "manifest.json").read_text(encoding="utf-8"))
    artifact = TorchArtifact((directory / "workspace" / "model.pt2").read_bytes())
    assert artifact.sha256 == manifest["artifact_sha256"]
    return BuiltMLP(artifact, TrainingRecord(**manifest["training"]), seconds={})


@dataclasses.dataclass(frozen=True)
class Audited:
    """What the tests read of an audit: unrounded components and the details."""

    components: dict[str, float]
    details: dict[str, Any]


@functools.cache
def audited(name: str) -> Audited:
    """The variant's reference, as the run's shared build cached it (no second audit)."""
    from grading_helpers import warm_cache_dir
    from workspace_helpers import built_workspace, run_factory

    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference

    built_workspace(run_factory(), name)
    reference = get_reference(variant(name), cache=ReferenceCache(warm_cache_dir(run_factory())))
    assert reference.from_cache
    details = reference.report["details"]
    return Audited(dict(details["components_unrounded"]), details)
