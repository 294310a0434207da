"""Reference reports, recomputed on the exact artifact and cached as JSON.

Two kinds of cache entries make a warm lookup free of NumPy and scikit-learn:

``builds``
    recipe + dataset fingerprint + library versions -> artifact and data sha256.
    Building is deterministic, so this maps a recipe to the model it produces.
``references``
    artifact sha256 + data sha256 + attack parameters + semantics + library
    versions -> the reference report and the model's test probabilities.

A cold lookup loads the data, builds the model from its recipe, serializes it
(a pickle, or a torch ``model.pt2`` for the neural-network variants), hashes
the bytes, audits the model loaded back from them (the model an agent
receives) and stores both entries. A torch variant's entries also record its
training (Opacus' achieved ε for DP-SGD) and key on the torch and Opacus
versions; the other variants never import or key on torch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pytest_clinaudit import versions
from pytest_clinaudit.catalog.cache import ReferenceCache, cache_key
from pytest_clinaudit.catalog.variants import VariantError
from pytest_clinaudit.reference.attacks.params import as_dict, semantics_of
from pytest_clinaudit.reference.data import LoadContext
from pytest_clinaudit.reference.models.mlp import MLPRecipe

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.variants import Variant
    from pytest_clinaudit.reference.attacks.params import AuditParams
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.models.program import TorchArtifact
    from pytest_clinaudit.reference.models.recipes import Artifact

    ModelArtifact = Artifact | TorchArtifact

Progress = Callable[[str], None]

LIBRARIES = ("pytest-clinaudit", "numpy", "scipy", "scikit-learn", "xgboost")
TORCH_LIBRARIES = ("torch", "opacus")
"""Also key the references of torch variants: they train, export and run with these."""
TORCH_EXTRA = "pip install 'pytest-clinaudit[torch]'"


def quiet(_: str) -> None:
    """A progress callback that says nothing."""


def reference_libraries(variant: Variant | None = None) -> dict[str, str]:
    """Versions of everything that can move a reference, without importing it."""
    torch = variant is not None and variant.is_torch
    return versions.library_versions(LIBRARIES + (TORCH_LIBRARIES if torch else ()), python=True)


def require_torch(variant: Variant) -> None:
    """A torch variant without torch installed is a usage error naming the extra."""
    if not variant.is_torch:
        return
    try:
        import torch  # noqa: F401 - building the variant imports it anyway
    except ImportError:
        raise VariantError(
            f"{variant.name} is a torch variant and torch is not installed: {TORCH_EXTRA}"
        ) from None


@dataclasses.dataclass(frozen=True)
class Reference:
    """A reference report and where it came from.

    Attributes
    ----------
    report
        ``sps``, ``components``, ``verdict`` and ``details`` (SPEC §4).
    test_probabilities, y_test
        The model's ``p(X_test)`` and the test labels, for grading-time
        property checks that must not rebuild the model.
    training
        A torch variant's training record (steps, final loss, Opacus' achieved
        ε and δ for DP-SGD, torch and Opacus versions); ``None`` otherwise.
    """

    variant: str
    report: dict[str, Any]
    artifact_sha256: str
    data_sha256: str
    test_probabilities: tuple[float, ...]
    y_test: tuple[int, ...]
    libraries: dict[str, str]
    from_cache: bool
    training: dict[str, Any] | None = None

    @property
    def components(self) -> dict[str, float]:
        components: dict[str, float] = self.report["components"]
        return components

    @property
    def unrounded_components(self) -> dict[str, float]:
        unrounded: dict[str, float] = self.report["details"]["components_unrounded"]
        return unrounded

    @property
    def sps(self) -> float:
        return float(self.report["sps"])


def _build_payload(
    variant: Variant, context: LoadContext, libraries: dict[str, str]
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "kind": "build",
        "dataset": variant.dataset.fingerprint(context),
        "recipe": dataclasses.asdict(variant.model),
        "libraries": libraries,
    }
    if variant.model.augmentation is not None:
        # Augmentation reuses the FGSM surrogate, so its settings shape the model.
        payload["surrogate"] = as_dict(variant.params.fgsm.surrogate)
    return payload


def _reference_payload(
    artifact_sha256: str, data_sha256: str, params: AuditParams, libraries: dict[str, str]
) -> dict[str, Any]:
    return {
        "kind": "reference",
        "semantics": semantics_of(params.fgsm),
        "artifact_sha256": artifact_sha256,
        "data_sha256": data_sha256,
        "params": as_dict(params),
        "libraries": libraries,
    }


@dataclasses.dataclass(frozen=True, eq=False)
class Built:
    """A variant's model as an agent receives it, the data it was built on, its training."""

    artifact: ModelArtifact
    data: Dataset
    training: dict[str, Any] | None


def build_artifact(
    variant: Variant, context: LoadContext | None = None, *, progress: Progress = quiet
) -> Built:
    """Load the variant's data and build its model: a pickle, or a torch ``model.pt2``.

    Raises
    ------
    VariantError
        A torch variant and torch is not installed (the message names the extra).
    """
    require_torch(variant)
    context = context or variant.context
    progress(f"{variant.name}: loading data ({type(variant.dataset).__name__})")
    data = variant.dataset.load(context)
    progress(f"{variant.name}: building the model ({variant.model.describe()})")
    if isinstance(variant.model, MLPRecipe):
        from pytest_clinaudit.reference.models.program import build_mlp

        built = build_mlp(variant.model, data)
        return Built(built.artifact, data, built.record.as_dict())
    from pytest_clinaudit.reference.models.recipes import Artifact, build_model

    model = build_model(variant.model, variant.params.fgsm.surrogate, data)
    return Built(Artifact.from_model(model), data, None)


def audit_artifact(
    name: str,
    artifact: ModelArtifact,
    data: Dataset,
    params: AuditParams,
    *,
    cache: ReferenceCache,
    libraries: dict[str, str] | None = None,
    training: dict[str, Any] | None = None,
    progress: Progress = quiet,
) -> Reference:
    """The reference for a concrete artifact, from the cache or by auditing it.

    ``training`` (a torch build's record) is stored with the reference.
    """
    from pytest_clinaudit.reference.attacks.audit import audit

    libraries = libraries or reference_libraries()
    payload = _reference_payload(artifact.sha256, data.sha256, params, libraries)
    key = cache_key(payload)
    with cache.lock(key):
        cached = cache.get("references", key)
        if cached is not None:
            return _reference_from_entry(name, cached, from_cache=True)
        progress(f"{name}: auditing artifact {artifact.sha256[:12]}")
        result = audit(
            artifact.load(),
            data,
            params,
            artifact_sha256=artifact.sha256,
            progress=lambda message: progress(f"{name}: {message}"),
        )
        entry = {
            "variant": name,
            "report": result.report(),
            "artifact_sha256": artifact.sha256,
            "data_sha256": data.sha256,
            "test_probabilities": list(result.test_probabilities),
            "y_test": data.y_test.tolist(),
            "libraries": libraries,
            "training": training,
        }
        cache.put("references", key, entry, payload=payload)
    return _reference_from_entry(name, entry, from_cache=False)


def _reference_from_entry(name: str, entry: dict[str, Any], *, from_cache: bool) -> Reference:
    return Reference(
        variant=name,
        report=entry["report"],
        artifact_sha256=entry["artifact_sha256"],
        data_sha256=entry["data_sha256"],
        test_probabilities=tuple(entry["test_probabilities"]),
        y_test=tuple(entry["y_test"]),
        libraries=entry["libraries"],
        from_cache=from_cache,
        training=entry.get("training"),
    )


def build_reference(
    variant: Variant,
    *,
    cache: ReferenceCache,
    context: LoadContext | None = None,
    progress: Progress = quiet,
) -> tuple[Reference, ModelArtifact, Dataset]:
    """Build the variant's model, audit it (or read its audit from the cache), record the build.

    Returns the reference with the artifact and data it was computed on, for
    callers that hand them on (:func:`pytest_clinaudit.adapters.workspace.build_workspace`).
    Recording the build lets later :func:`get_reference` calls skip building.
    """
    context = context or variant.context
    libraries = reference_libraries(variant)
    build_payload = _build_payload(variant, context, libraries)
    built = build_artifact(variant, context, progress=progress)
    artifact, data = built.artifact, built.data
    reference = audit_artifact(
        variant.name,
        artifact,
        data,
        variant.params,
        cache=cache,
        libraries=libraries,
        training=built.training,
        progress=progress,
    )
    cache.put(
        "builds",
        cache_key(build_payload),
        {"artifact_sha256": artifact.sha256, "data_sha256": data.sha256, "variant": variant.name},
        payload=build_payload,
    )
    return reference, artifact, data


def get_reference(
    variant: Variant,
    *,
    cache: ReferenceCache | None = None,
    context: LoadContext | None = None,
    progress: Progress = quiet,
) -> Reference:
    """The variant's reference, computed at most once per artifact and library set.

    A warm call reads two small JSON files and imports nothing numeric. A cold
    call holds a lock on the build while it works, so concurrent graders of the
    same variant wait for one computation instead of repeating it.
    """
    cache = cache if cache is not None else ReferenceCache.default()
    context = context or variant.context
    libraries = reference_libraries(variant)
    build_key = cache_key(_build_payload(variant, context, libraries))

    def cached_reference() -> Reference | None:
        build = cache.get("builds", build_key)
        if build is None:
            return None
        reference_key = cache_key(
            _reference_payload(
                build["artifact_sha256"], build["data_sha256"], variant.params, libraries
            )
        )
        entry = cache.get("references", reference_key)
        return (
            None if entry is None else _reference_from_entry(variant.name, entry, from_cache=True)
        )

    found = cached_reference()
    if found is not None:
        return found
    with cache.lock(build_key):
        found = cached_reference()  # another process may have finished meanwhile
        if found is not None:
            return found
        reference, _, _ = build_reference(variant, cache=cache, context=context, progress=progress)
    return reference
