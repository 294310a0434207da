"""Shared fixtures: the catalog, WDBC data and the three WDBC models, built once."""

from __future__ import annotations

from typing import Any

import pytest

from pytest_clinaudit.catalog import Catalog, default_catalog
from pytest_clinaudit.reference.data import Dataset
from pytest_clinaudit.reference.recipes import Artifact, build_model


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
