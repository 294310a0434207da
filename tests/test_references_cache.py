"""The reference cache: JSON only, atomic, self-healing, and free of scikit-learn when warm."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from grading_helpers import reference

from pytest_clinaudit.catalog import references
from pytest_clinaudit.catalog.cache import ReferenceCache, cache_key, default_cache_dir
from pytest_clinaudit.catalog.references import get_reference
from pytest_clinaudit.catalog.variants import Catalog


def test_a_cold_lookup_computes_and_a_warm_one_reads_the_cache(
    catalog: Catalog, tmp_path: Path, warm_cache: Path
) -> None:
    cache = ReferenceCache(tmp_path)
    messages: list[str] = []
    cold = get_reference(catalog.get("wdbc-baseline"), cache=cache, progress=messages.append)
    warm = get_reference(catalog.get("wdbc-baseline"), cache=cache, progress=messages.append)
    assert (cold.from_cache, warm.from_cache) == (False, True)
    assert warm.report == json.loads(json.dumps(cold.report))
    assert (
        cold.report == reference(warm_cache, "wdbc-baseline").report
    )  # another cache, same numbers
    assert len(warm.test_probabilities) == 114
    assert any("building the model" in m for m in messages)
    assert all(
        p.suffix == ".json" for p in tmp_path.rglob("*") if p.is_file() and p.parent.name != "locks"
    )


def test_a_corrupted_entry_is_recomputed(catalog: Catalog, tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path)
    first = get_reference(catalog.get("wdbc-baseline"), cache=cache)
    for entry in (tmp_path / "references").glob("*.json"):
        entry.write_text('{"format": 1, "key": "trunc', encoding="utf-8")
    again = get_reference(catalog.get("wdbc-baseline"), cache=cache)
    assert not again.from_cache
    assert again.report == first.report
    assert get_reference(catalog.get("wdbc-baseline"), cache=cache).from_cache


def test_an_entry_filed_under_another_key_is_ignored(tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path)
    cache.put("references", "a" * 64, {"x": 1})
    (tmp_path / "references" / ("a" * 64 + ".json")).rename(
        tmp_path / "references" / ("b" * 64 + ".json")
    )
    assert cache.get("references", "b" * 64) is None
    assert cache.get("references", "a" * 64) is None


def test_writes_are_atomic_and_leave_no_temporary_files(tmp_path: Path) -> None:
    cache = ReferenceCache(tmp_path)
    cache.put("builds", "k" * 64, {"v": [1, 2]})
    assert [p.name for p in (tmp_path / "builds").iterdir()] == ["k" * 64 + ".json"]
    assert cache.get("builds", "k" * 64) == {"v": [1, 2]}


def test_new_library_versions_give_a_new_key(
    catalog: Catalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = ReferenceCache(tmp_path)
    get_reference(catalog.get("wdbc-baseline"), cache=cache)
    versions = references.reference_libraries()
    monkeypatch.setattr(
        references, "reference_libraries", lambda variant=None: dict(versions, xgboost="99.0")
    )
    assert not get_reference(catalog.get("wdbc-baseline"), cache=cache).from_cache


def test_only_torch_variants_key_their_references_on_torch_and_opacus(catalog: Catalog) -> None:
    torch_keys = references.reference_libraries(catalog.get("wdbc-mlp-dp")).keys()
    plain_keys = references.reference_libraries(catalog.get("wdbc-hard")).keys()
    assert {"torch", "opacus"} <= torch_keys
    assert not {"torch", "opacus"} & plain_keys
    assert plain_keys < torch_keys


def test_the_cache_location_follows_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLINAUDIT_CACHE_DIR", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    monkeypatch.delenv("CLINAUDIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "pytest-clinaudit"


def test_cache_keys_do_not_depend_on_key_order() -> None:
    assert cache_key({"a": 1, "b": [1, 2]}) == cache_key({"b": [1, 2], "a": 1})


def test_a_warm_lookup_imports_neither_numpy_nor_scikit_learn(
    catalog: Catalog, tmp_path: Path
) -> None:
    get_reference(catalog.get("wdbc-hard"), cache=ReferenceCache(tmp_path))
    script = (
        "import sys\n"
        "from pytest_clinaudit.catalog.cache import ReferenceCache\n"
        "from pytest_clinaudit.catalog.variants import default_catalog\n"
        "from pytest_clinaudit.catalog.references import get_reference\n"
        f"r = get_reference(default_catalog().get('hardened'), cache=ReferenceCache({str(tmp_path)!r}))\n"
        "assert r.from_cache, 'cache miss'\n"
        "heavy = sorted(m for m in ('numpy', 'sklearn', 'xgboost', 'scipy') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"
