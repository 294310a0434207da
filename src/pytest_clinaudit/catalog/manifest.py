"""The grader's manifest: the exact model and data a workspace was built with.

``clinaudit build`` writes it beside the agent's workspace
(:mod:`pytest_clinaudit.adapters.workspace`); ``pytest --clinaudit-manifest``
reads it here and refuses to grade against a reference computed on any other
artifact or data.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MANIFEST_FORMAT = "clinaudit-manifest-1"


class GraderManifestError(ValueError):
    """A manifest is unreadable or does not match what is being graded."""


def _quiet(_: str) -> None:
    pass


def read_grader_manifest(path: Path) -> dict[str, Any]:
    """A manifest written by :func:`build_workspace`, checked for the fields grading needs."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GraderManifestError(
            f"{path}: cannot read the manifest ({exc.strerror or exc})"
        ) from None
    except ValueError as exc:
        raise GraderManifestError(f"{path}: not a JSON manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise GraderManifestError(
            f"{path}: not a clinaudit manifest (format {MANIFEST_FORMAT!r} expected)"
        )
    for key in ("variant", "artifact_sha256", "data_sha256", "libraries"):
        if key not in manifest:
            raise GraderManifestError(f"{path}: the manifest has no {key!r}")
    return manifest


def check_reference_matches(
    manifest: dict[str, Any], path: Path, variant: str, reference: Any
) -> None:
    """Refuse to grade when the reference was computed on another artifact than the manifest's."""
    if manifest["variant"] != variant:
        raise GraderManifestError(
            f"{path}: the workspace was built for variant {manifest['variant']!r}, "
            f"but --variant is {variant!r}"
        )
    for kind, expected, actual in (
        ("model artifact", manifest["artifact_sha256"], reference.artifact_sha256),
        ("data", manifest["data_sha256"], reference.data_sha256),
    ):
        if expected != actual:
            moved = {
                name: f"{version} -> {reference.libraries.get(name)}"
                for name, version in manifest["libraries"].items()
                if reference.libraries.get(name) != version
            }
            why = (
                f"library versions differ ({', '.join(f'{k} {v}' for k, v in moved.items())})"
                if moved
                else _other_cpu(manifest) or "the recipe or data changed"
            )
            raise GraderManifestError(
                f"{path}: the {kind} sha256 in the manifest is {expected[:16]}..., but this "
                f"environment builds {actual[:16]}...: {why}. Grade where the workspace was "
                "built, or rebuild the workspace here with `clinaudit build`."
            )


def _other_cpu(manifest: dict[str, Any]) -> str | None:
    """Why a torch artifact differs with equal library versions: another CPU's kernels."""
    training = manifest.get("training")
    built_on = training.get("cpu_capability") if isinstance(training, dict) else None
    if not isinstance(built_on, str):
        return None
    try:
        import torch
    except ImportError:
        return None
    here = torch.backends.cpu.get_cpu_capability()
    if here == built_on:
        return None
    return (
        f"the workspace's model was trained where torch used {built_on} kernels and this "
        f"machine uses {here}; float32 training differs in the last bits between them "
        f"(set ATEN_CPU_CAPABILITY={built_on.lower()} here if this CPU supports it)"
    )
