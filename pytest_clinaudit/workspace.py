"""Agent workspaces and the grader-side manifest.

``build_workspace`` writes two directories under one output directory:

``workspace/``
    What the agent receives: ``model.pkl`` (the exact artifact the references
    are keyed on), ``train.csv``, ``test.csv`` and ``task.md``.
``grader/manifest.json``
    What only the grader sees: artifact, data and file hashes, the recipe, the
    library versions and the reference report. ``pytest --clinaudit-manifest``
    grades against exactly that artifact.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit import __version__, taskdoc
from pytest_clinaudit.cache import ReferenceCache
from pytest_clinaudit.files import write_atomic, write_json_atomic
from pytest_clinaudit.reference import SEMANTICS
from pytest_clinaudit.reference.data import LoadContext, write_csvs
from pytest_clinaudit.reference.params import as_dict

if TYPE_CHECKING:
    from pytest_clinaudit.catalog import Variant
    from pytest_clinaudit.references import Progress

MANIFEST_FORMAT = "clinaudit-manifest-1"
WORKSPACE_DIR = "workspace"
GRADER_DIR = "grader"
MANIFEST_NAME = "manifest.json"


class ManifestError(ValueError):
    """A manifest is unreadable or does not match what is being graded."""


def _quiet(_: str) -> None:
    pass


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_workspace(
    variant: Variant,
    out: Path,
    *,
    context: LoadContext | None = None,
    cache: ReferenceCache | None = None,
    progress: Progress = _quiet,
) -> dict[str, Any]:
    """Write the agent's workspace and the grader's manifest under ``out``; return the manifest."""
    from pytest_clinaudit.references import build_reference

    context = context or variant.context
    cache = cache if cache is not None else ReferenceCache.default()
    reference, artifact, data = build_reference(
        variant, cache=cache, context=context, progress=progress
    )

    workspace = out / WORKSPACE_DIR
    grader = out / GRADER_DIR
    workspace.mkdir(parents=True, exist_ok=True)
    grader.mkdir(parents=True, exist_ok=True)
    progress(f"{variant.name}: writing the workspace to {workspace}")
    write_atomic(workspace / taskdoc.MODEL_NAME, artifact.data)
    write_csvs(data, workspace, train_name=taskdoc.TRAIN_NAME, test_name=taskdoc.TEST_NAME)
    write_atomic(workspace / "task.md", taskdoc.render(variant, data))
    stale = workspace / taskdoc.REPORT_NAME
    if stale.exists():
        stale.unlink()  # a report from an earlier run must not be graded as this one's

    manifest = {
        "format": MANIFEST_FORMAT,
        "variant": variant.name,
        "variant_file_sha256": _sha256(variant.path),
        "semantics": SEMANTICS,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "pytest_clinaudit": __version__,
        "artifact_sha256": artifact.sha256,
        "data_sha256": data.sha256,
        "dataset": data.summary(),
        "recipe": dataclasses.asdict(variant.model),
        "params": as_dict(variant.params),
        "libraries": reference.libraries,
        "files": {
            name: _sha256(workspace / name)
            for name in (taskdoc.MODEL_NAME, taskdoc.TRAIN_NAME, taskdoc.TEST_NAME, "task.md")
        },
        "report_path": taskdoc.REPORT_NAME,
        "reference": reference.report,
    }
    write_json_atomic(grader / MANIFEST_NAME, manifest)
    return manifest


def read_manifest(path: Path) -> dict[str, Any]:
    """A manifest written by :func:`build_workspace`, checked for the fields grading needs."""
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ManifestError(f"{path}: cannot read the manifest ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise ManifestError(f"{path}: not a JSON manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ManifestError(
            f"{path}: not a clinaudit manifest (format {MANIFEST_FORMAT!r} expected)"
        )
    for key in ("variant", "artifact_sha256", "data_sha256", "libraries"):
        if key not in manifest:
            raise ManifestError(f"{path}: the manifest has no {key!r}")
    return manifest


def check_reference_matches(
    manifest: dict[str, Any], path: Path, variant: str, reference: Any
) -> None:
    """Refuse to grade when the reference was computed on another artifact than the manifest's."""
    if manifest["variant"] != variant:
        raise ManifestError(
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
                else "the recipe or data changed"
            )
            raise ManifestError(
                f"{path}: the {kind} sha256 in the manifest is {expected[:16]}..., but this "
                f"environment builds {actual[:16]}...: {why}. Grade where the workspace was "
                "built, or rebuild the workspace here with `clinaudit build`."
            )
