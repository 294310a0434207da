"""Agent workspaces and the grader-side manifest.

``build_workspace`` writes two directories under one output directory:

``workspace/``
    What the agent receives: ``model.pkl`` or, for a torch variant, ``model.pt2``
    (the exact artifact the references are keyed on), ``train.csv``, ``test.csv``
    and ``task.md``.
``grader/manifest.json``
    What only the grader sees: artifact, data and file hashes, the recipe, the
    library versions, a torch model's training record (Opacus' achieved ε for
    DP-SGD) and the reference report. ``pytest --clinaudit-manifest``
    grades against exactly that artifact.
"""

from __future__ import annotations

import dataclasses
import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit import __version__
from pytest_clinaudit.adapters import taskdoc
from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.manifest import MANIFEST_FORMAT
from pytest_clinaudit.catalog.references import quiet
from pytest_clinaudit.files import sha256_file, write_atomic, write_json_atomic
from pytest_clinaudit.reference.attacks.params import as_dict
from pytest_clinaudit.reference.data import LoadContext, write_csvs

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.references import Progress
    from pytest_clinaudit.catalog.variants import Variant

WORKSPACE_DIR = "workspace"
GRADER_DIR = "grader"
MANIFEST_NAME = "manifest.json"


def build_workspace(
    variant: Variant,
    out: Path,
    *,
    context: LoadContext | None = None,
    cache: ReferenceCache | None = None,
    progress: Progress = quiet,
) -> dict[str, Any]:
    """Write the agent's workspace and the grader's manifest under ``out``; return the manifest."""
    from pytest_clinaudit.catalog.references import build_reference

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
    model_file = taskdoc.model_name(variant)
    for other in {taskdoc.MODEL_NAME, taskdoc.TORCH_MODEL_NAME} - {model_file}:
        (workspace / other).unlink(missing_ok=True)  # a model of an earlier build
    write_atomic(workspace / model_file, artifact.data)
    write_csvs(data, workspace, train_name=taskdoc.TRAIN_NAME, test_name=taskdoc.TEST_NAME)
    write_atomic(workspace / "task.md", taskdoc.render(variant, data))
    stale = workspace / taskdoc.REPORT_NAME
    if stale.exists():
        stale.unlink()  # a report from an earlier run must not be graded as this one's

    manifest = {
        "format": MANIFEST_FORMAT,
        "variant": variant.name,
        "variant_file_sha256": sha256_file(variant.path),
        "semantics": variant.semantics,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "pytest_clinaudit": __version__,
        "artifact_sha256": artifact.sha256,
        "data_sha256": data.sha256,
        "dataset": data.summary(),
        "recipe": dataclasses.asdict(variant.model),
        "params": as_dict(variant.params),
        "libraries": reference.libraries,
        "training": reference.training,
        "files": {
            name: sha256_file(workspace / name)
            for name in (model_file, taskdoc.TRAIN_NAME, taskdoc.TEST_NAME, "task.md")
        },
        "report_path": taskdoc.REPORT_NAME,
        "reference": reference.report,
    }
    write_json_atomic(grader / MANIFEST_NAME, manifest)
    return manifest
