"""The torch variants' builds and references for the tests/test_nn_*.py modules.

Building an MLP takes seconds (WDBC) to tens of seconds (ICU), so each variant
is built and audited once per test run, by the real path, whichever process
asks first (``workspace_helpers``), and read back here.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pytest

from pytest_clinaudit.catalog.variants import Catalog, Variant, default_catalog

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.references import Reference
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.models.mlp import MLPRecipe
    from pytest_clinaudit.reference.models.program import BuiltMLP

SUFFIXES = ("", "-pgd", "-dp", "-clip")
"""A family's four variants (SPEC §7.4): plain, PGD-trained, DP-trained, clipping only."""
FAMILIES = ("wdbc-mlp", "icu-synth-mlp", "mimic-mlp", "flchain-mlp")
WDBC_MLP = tuple(f"wdbc-mlp{s}" for s in SUFFIXES)
ICU_MLP = tuple(f"icu-synth-mlp{s}" for s in SUFFIXES)
MIMIC_MLP = tuple(f"mimic-mlp{s}" for s in SUFFIXES)
FLCHAIN_MLP = tuple(f"flchain-mlp{s}" for s in SUFFIXES)
TORCH_VARIANTS = WDBC_MLP + ICU_MLP + MIMIC_MLP + FLCHAIN_MLP

NEEDS_SKSURV = pytest.mark.skipif(
    importlib.util.find_spec("sksurv") is None,
    reason="FLCHAIN ships inside scikit-survival: pip install 'pytest-clinaudit[cohorts]'",
)


def cases(names: Iterable[str]) -> list[Any]:
    """``names`` as parameters, each FLCHAIN one skipped without scikit-survival."""
    return [
        pytest.param(name, marks=NEEDS_SKSURV) if name.startswith("flchain") else name
        for name in names
    ]


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


@functools.cache
def seeded(name: str, offset: int) -> Any:
    """The variant's model trained with seed ``recipe.seed + offset``, loaded for the attacks.

    Offset 0 is the variant's own build. Other seeds are the ladder's replicates:
    the same recipe and rows, another initialisation, batch order and noise.
    Each is trained once per test run, whichever process asks first, and kept as
    ``model.pt2`` bytes beside the run's workspaces.
    """
    import os

    from filelock import FileLock
    from workspace_helpers import run_factory

    from pytest_clinaudit.reference.models.program import TorchArtifact, build_mlp

    if offset == 0:
        return built(name).artifact.load()
    base = run_factory().getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by all workers of this run
    seed = recipe(name).seed + offset
    path = base / "clinaudit-seeded" / f"{name}-seed{seed}.pt2"
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):
        if not path.exists():
            again = build_mlp(dataclasses.replace(recipe(name), seed=seed), dataset(name))
            again.artifact.write(path)
    return TorchArtifact(path.read_bytes()).load()


@dataclasses.dataclass(frozen=True)
class Audited:
    """What the tests read of an audit: unrounded components and the details."""

    components: dict[str, float]
    details: dict[str, Any]


@functools.cache
def reference(name: str) -> Reference:
    """The variant's reference as the run's shared build cached it (no second audit)."""
    from grading_helpers import warm_cache_dir
    from workspace_helpers import built_workspace, run_factory

    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference

    built_workspace(run_factory(), name)
    found = get_reference(variant(name), cache=ReferenceCache(warm_cache_dir(run_factory())))
    assert found.from_cache
    return found


@functools.cache
def audited(name: str) -> Audited:
    """The variant's reference report: unrounded components and details."""
    details = reference(name).report["details"]
    return Audited(dict(details["components_unrounded"]), details)


def art_margin_pgd(model: Any, X: Any, y: Any, *, budget: Any, steps: int) -> Any:
    """ART's ``ProjectedGradientDescent`` on the program, ascending the same margin loss.

    The program is wrapped as a two-class model ``[0, f(x)]``; the loss
    ``sum((y0 - y1) * (z1 - z0)) = sum((1 - 2y) f(x))`` is SPEC §7.3's margin, with
    ART's one-hot labels. One start (the rows), ``alpha = 2.5 e / steps``, the box
    ``e`` per feature and the training range as ART's ``clip_values``.
    """
    import warnings

    import numpy as np
    import torch

    class TwoClass(torch.nn.Module):
        def __init__(self, f: Any) -> None:
            super().__init__()
            # Not a submodule: ART switches its model between train() and eval(),
            # which an exported program refuses; the program is always in eval mode.
            self.__dict__["f"] = f

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            z = self.f(x)
            return torch.stack([torch.zeros_like(z), z], dim=1)

    class Margin(torch.nn.Module):
        def forward(self, out: torch.Tensor, onehot: torch.Tensor) -> torch.Tensor:
            return ((onehot[:, 0] - onehot[:, 1]) * (out[:, 1] - out[:, 0])).sum()

    with warnings.catch_warnings():
        # ART's modules import optional backends and warn about those absent.
        warnings.simplefilter("ignore")
        from art.attacks.evasion import ProjectedGradientDescent
        from art.estimators.classification import PyTorchClassifier

        X = np.asarray(X, dtype=np.float32)
        clip = None
        if budget.low is not None:
            clip = (budget.low.astype(np.float32), budget.high.astype(np.float32))
        classifier = PyTorchClassifier(
            model=TwoClass(model.module),
            loss=Margin(),
            input_shape=(X.shape[1],),
            nb_classes=2,
            clip_values=clip,
            device_type="cpu",
        )
        attack = ProjectedGradientDescent(
            classifier,
            norm=np.inf,
            eps=budget.step.astype(np.float32),
            eps_step=(2.5 * budget.step / steps).astype(np.float32),
            max_iter=steps,
            targeted=False,
            num_random_init=0,
            batch_size=len(X),
            verbose=False,
        )
        onehot = np.eye(2, dtype=np.float32)[np.asarray(y)]
        return attack.generate(X, y=onehot).astype(np.float64)
