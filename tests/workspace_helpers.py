"""Workspaces built once per test run, shared by every test process.

Building a variant trains its model: seconds for WDBC, tens of seconds for an
ICU MLP. The end-to-end tests, the torch ladder and the oracle comparisons all
need the same builds, so each variant is built once per ``pytest`` run by the
real path (:func:`pytest_clinaudit.adapters.workspace.build_workspace`, which
also caches its reference in the run's warm cache), under a file lock that
xdist workers share. Tests that write into a workspace get a copy.

Not a test module.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from grading_helpers import warm_cache_dir

from pytest_clinaudit.adapters.workspace import GRADER_DIR, MANIFEST_NAME, WORKSPACE_DIR

_FACTORY: list[pytest.TempPathFactory] = []


def remember_factory(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Called by tests/conftest.py once per process, so helpers without fixtures reach the run."""
    _FACTORY[:] = [tmp_path_factory]


def run_factory() -> pytest.TempPathFactory:
    assert _FACTORY, "tests/conftest.py's session fixture sets the run's temp path factory"
    return _FACTORY[0]


def _shared_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by all workers of this run
    return base


def mimic_extract(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic ICU cohort written as a MIMIC-IV extract (two-file layout), once per run."""
    from pytest_clinaudit.catalog.variants import default_catalog
    from pytest_clinaudit.reference.data.mimic import write_mimic_layout

    base = _shared_base(tmp_path_factory)
    extract = base / "clinaudit-mimic-extract"
    with FileLock(str(base / "clinaudit-mimic-extract.lock")):
        if not (extract / "done").exists():
            synth = default_catalog().get("icu-synth-baseline")
            write_mimic_layout(synth.dataset.load(synth.context), extract, layout="two-file")
            (extract / "done").write_text("")
    return extract


def built_workspace(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """The directory of ``name``'s workspace and grader manifest, built once per test run.

    Holds ``workspace/`` (what the agent receives) and ``grader/manifest.json``;
    do not write into it (copy it with :func:`workspace_copy`).
    """
    from pytest_clinaudit.adapters.workspace import build_workspace
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.variants import default_catalog
    from pytest_clinaudit.reference.data import LoadContext

    base = _shared_base(tmp_path_factory)
    out = base / "clinaudit-workspaces" / name
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f"{name}.lock")):
        if not (out / GRADER_DIR / MANIFEST_NAME).exists():
            variant = default_catalog().get(name)
            context = LoadContext(variant.path.parent, mimic_extract(tmp_path_factory))
            cache = ReferenceCache(warm_cache_dir(tmp_path_factory))
            build_workspace(variant, out / "building", context=context, cache=cache)
            for part in (WORKSPACE_DIR, GRADER_DIR):
                (out / "building" / part).rename(out / part)
            (out / "building").rmdir()
    return out


def workspace_copy(tmp_path_factory: pytest.TempPathFactory, name: str, to: Path) -> Path:
    """A private copy of ``name``'s built workspace and manifest under ``to``."""
    shutil.copytree(built_workspace(tmp_path_factory, name), to)
    return to


def manifest(tmp_path_factory: pytest.TempPathFactory, name: str) -> dict[str, Any]:
    path = built_workspace(tmp_path_factory, name) / GRADER_DIR / MANIFEST_NAME
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document
