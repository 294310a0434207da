"""Shared fixtures: the catalog, WDBC data and the three WDBC models, built once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from pytest_clinaudit.catalog.variants import Catalog, default_catalog
from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.models.recipes import Artifact, build_model

# Hypothesis' per-example deadline (200 ms) is a wall-clock assertion: on a shared,
# loaded machine it fails tests that are right. Timing belongs to benchmarks/.
settings.register_profile("clinaudit", deadline=None)
settings.load_profile("clinaudit")


@pytest.fixture(scope="session")
def catalog() -> Catalog:
    return default_catalog()


@pytest.fixture(scope="session")
def wdbc(catalog: Catalog) -> Dataset:
    variant = catalog.get("wdbc-baseline")
    data: Dataset = variant.dataset.load(variant.context)
    return data


@pytest.fixture(scope="session")
def wdbc_artifacts(catalog: Catalog, wdbc: Dataset) -> dict[str, Artifact]:
    """Each WDBC variant's model, pickled, as an agent receives it."""
    return {
        name: Artifact.from_model(build_model(v.model, v.params.fgsm.surrogate, wdbc))
        for name, v in (
            (n, catalog.get(n)) for n in ("wdbc-baseline", "wdbc-calibrated", "wdbc-hard")
        )
    }


@pytest.fixture
def cache_dir(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A private reference cache, also exported so subprocesses use it."""
    directory = tmp_path / "cache"
    monkeypatch.setenv("CLINAUDIT_CACHE_DIR", str(directory))
    return directory


@pytest.fixture(scope="session")
def warm_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reference cache holding the WDBC references, computed once per test run
    (shared by xdist workers behind a file lock)."""
    from grading_helpers import warm_cache_dir

    return warm_cache_dir(tmp_path_factory)


@pytest.fixture(scope="session")
def graded_batch(tmp_path_factory: pytest.TempPathFactory, warm_cache: Path) -> Any:
    """The synthetic batch of runs, graded once by grade-many."""
    from batch_helpers import graded_plan_once

    return graded_plan_once(tmp_path_factory, warm_cache)


@pytest.fixture(scope="session", autouse=True)
def _run_wide_builds(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Lets helper modules reach the run's shared builds (workspace_helpers)."""
    from workspace_helpers import remember_factory

    remember_factory(tmp_path_factory)
