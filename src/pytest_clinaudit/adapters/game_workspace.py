"""A game instance's workspace and the grader's manifest.

``build_game_workspace`` writes two directories under one output directory:

``workspace/``
    What the agent receives: ``models/m1.pt2`` ... (exported programs),
    ``train.csv`` and ``test.csv`` (raw units, the label first),
    ``data_dictionary.csv``, ``training_rows/<model>.txt`` and ``task.md``.
``grader/manifest.json``
    What only the grader sees: the instance seed, its secret (everything about
    the instance derives from it; ``clinaudit build --like`` rebuilds it from
    here) and attempt, the program and data hashes, the hash of the grader's
    cached entry, the ground truth, the reference's evidence numbers, every
    defining measurement and the library versions.
"""

from __future__ import annotations

import csv
import dataclasses
import datetime
import io
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit import __version__
from pytest_clinaudit.adapters import game_taskdoc as doc
from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.manifest import MANIFEST_FORMAT
from pytest_clinaudit.files import sha256_file, write_atomic, write_json_atomic
from pytest_clinaudit.reference.data import LoadContext, write_csvs

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.catalog.instances import GameReference, Progress

WORKSPACE_DIR = "workspace"
GRADER_DIR = "grader"
MANIFEST_NAME = "manifest.json"


def _quiet(_: str) -> None:
    pass


def _csv(rows: list[list[str]]) -> str:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def build_game_workspace(
    variant: GameVariant,
    seed: int,
    out: Path,
    *,
    secret: str | None = None,
    context: LoadContext | None = None,
    cache: ReferenceCache | None = None,
    progress: Progress = _quiet,
    jobs: int | None = None,
) -> dict[str, Any]:
    """Write instance ``seed``'s workspace and the grader's manifest under ``out``.

    ``secret`` (a manifest's, for ``build --like``) draws the instance; without one,
    the cache's secret for the seed, or a fresh one. A cached instance is not trained
    again: its programs are exported from its cached weights and must hash as they
    did at the build. ``jobs``: processes that train side by side (default: one per CPU).
    """
    from pytest_clinaudit.catalog.instances import (
        build_game_reference,
        get_game_reference,
        programs,
    )

    context = context or variant.context
    cache = cache if cache is not None else ReferenceCache.default()
    if cache.directory is None:  # no cache: build here, once, and keep the programs
        reference, instance, data = build_game_reference(
            variant,
            seed,
            cache=cache,
            secret=secret,
            context=context,
            progress=progress,
            jobs=jobs,
        )
        made = {m.name: m.program for m in instance.models}
    else:
        reference = get_game_reference(
            variant,
            seed,
            secret=secret,
            cache=cache,
            context=context,
            progress=progress,
            jobs=jobs,
        )
        progress(f"{variant.name}: exporting instance {seed}'s programs from their weights")
        made = programs(reference, variant.game.network.hidden)
        data = variant.dataset.load(context)
    return write_game_workspace(variant, reference, made, data, out, progress=progress)


def write_game_workspace(
    variant: GameVariant,
    reference: GameReference,
    made: dict[str, bytes],
    data: Any,
    out: Path,
    *,
    progress: Progress = _quiet,
) -> dict[str, Any]:
    """Write the files of an instance whose programs are ``made``; return the manifest."""
    workspace, grader = out / WORKSPACE_DIR, out / GRADER_DIR
    for stale in (workspace / doc.MODELS_DIR, workspace / doc.ROWS_DIR):
        if stale.is_dir():
            shutil.rmtree(stale)  # the models and rows of an earlier build
    workspace.mkdir(parents=True, exist_ok=True)
    grader.mkdir(parents=True, exist_ok=True)
    progress(f"{variant.name}: writing instance {reference.seed}'s workspace to {workspace}")
    for name, program in made.items():
        write_atomic(workspace / doc.MODELS_DIR / f"{name}.pt2", program)
        rows = "".join(f"{index}\n" for index in reference.rows[name])
        write_atomic(workspace / doc.ROWS_DIR / f"{name}.txt", rows)
    if reference.base_rows:
        base = "".join(f"{index}\n" for index in reference.base_rows)
        write_atomic(workspace / doc.ROWS_DIR / f"{doc.BASE_NAME}.txt", base)
    write_csvs(data, workspace, train_name=doc.TRAIN_NAME, test_name=doc.TEST_NAME)
    write_atomic(workspace / doc.DICTIONARY_NAME, _csv(doc.dictionary_rows(variant)))
    write_atomic(workspace / "task.md", doc.render(variant, data, reference.names))
    (workspace / doc.REPORT_NAME).unlink(missing_ok=True)  # an earlier run's report
    files = sorted(
        str(path.relative_to(workspace)) for path in workspace.rglob("*") if path.is_file()
    )
    manifest = {
        "format": MANIFEST_FORMAT,
        "variant": variant.name,
        "semantics": variant.semantics,
        "variant_file_sha256": sha256_file(variant.path),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "pytest_clinaudit": __version__,
        "seed": reference.seed,
        "secret": reference.secret,
        "attempt": reference.attempt,
        "trained": reference.trained,
        "entry_sha256": reference.entry_sha256,
        "artifact_sha256": reference.instance_id,
        "programs": reference.programs,
        "data_sha256": reference.data_sha256,
        "dataset": data.summary(),
        "game": dataclasses.asdict(variant.game),
        "libraries": reference.libraries,
        "files": {name: sha256_file(workspace / name) for name in files},
        "report_path": doc.REPORT_NAME,
        "truth": reference.truth,
        "evidence": reference.evidence,
        "measurements": reference.measurements,
        "rejected_attempts": reference.rejected,
        "seconds": reference.seconds,
    }
    write_json_atomic(grader / MANIFEST_NAME, manifest)
    return manifest
