"""Shared helpers of the grading-plugin tests: a warm reference cache and submissions.

Not a test module. It imports NumPy, Hypothesis, jsonschema and the grading
core up front: pytester's in-process runs remove the modules first imported
inside them afterwards, NumPy refuses to be imported twice in one process, and
a grading module imported afresh in a later run would meet the classes of the
earlier run's copy, so the sessions those runs start must find them imported.

Each test module that needs the warm cache defines a session fixture calling
:func:`warm_cache_dir`; the directory is shared by the whole test run (and by
every xdist worker, behind a file lock), so references are computed once per run.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path
from typing import Any

import hypothesis  # noqa: F401
import jsonschema  # noqa: F401
import numpy  # noqa: F401
import pytest
from filelock import FileLock

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.references import Reference, get_reference
from pytest_clinaudit.catalog.variants import Catalog, default_catalog
from pytest_clinaudit.grading import pytest_internals, session  # noqa: F401

WARM_VARIANTS = ("wdbc-baseline", "wdbc-hard", "wdbc-calibrated")
REPO = Path(__file__).resolve().parents[1]
"""The repository root (tests/ lives directly under it)."""


def warm_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reference cache holding the WDBC references, computed once per test run."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # shared by all workers of this run
    directory = base / "clinaudit-warm-cache"
    with FileLock(str(base / "clinaudit-warm-cache.lock")):
        catalog = default_catalog()
        for name in WARM_VARIANTS:
            get_reference(catalog.get(name), cache=ReferenceCache(directory))
    return directory


@functools.lru_cache(maxsize=1)
def catalog() -> Catalog:
    """The shipped variants, loaded once (property tests grade thousands of reports)."""
    return default_catalog()


@functools.lru_cache(maxsize=16)
def reference(cache_dir: Path, variant: str) -> Reference:
    """A variant's reference from the warm cache, read once per test process."""
    return get_reference(catalog().get(variant), cache=ReferenceCache(cache_dir))


def reference_report(cache_dir: Path, variant: str, *, details: bool = True) -> dict[str, Any]:
    """The reference report of ``variant`` as a submission (a deep copy)."""
    report = copy.deepcopy(reference(cache_dir, variant).report)
    if not details:
        report.pop("details", None)
    return report


def write_json(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def submitted(directory: Path, name: str = "report.json") -> Path:
    """Where a test puts a report it grades: ``directory/submission/name``.

    The plugin refuses to grade when pytest's rootdir, its ini file or a
    conftest.py lies in the report's own folder (the agent's); a pytester
    session's rootdir, ini file and conftest.py are in its top directory.
    """
    folder = directory / "submission"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / name


def grading_args(submission: Path | str, variant: str, cache_dir: Path, *more: str) -> list[str]:
    """The command line of a grading session against the warm cache."""
    return [
        "--submission",
        str(submission),
        "--variant",
        variant,
        "--clinaudit-cache-dir",
        str(cache_dir),
        "-p",
        "no:cacheprovider",
        *more,
    ]


def summary_line(output: str) -> str:
    """The ``clinaudit: <variant> score ...`` line of a session's output."""
    lines = [
        line for line in output.splitlines() if re.match(r"clinaudit: \S+ score (none|\d)", line)
    ]
    assert len(lines) == 1, output
    return lines[0]


def published_scorer(path: Path, ref_sps: float, ref_components: dict[str, float]) -> float | None:
    """SPEC §5, transcribed literally: the differential oracle of the metr profile."""
    if not path.exists():
        return None
    return published_score_of_bytes(path.read_bytes(), ref_sps, ref_components)


def published_score_of_bytes(
    data: bytes, ref_sps: float, ref_components: dict[str, float]
) -> float:
    """The published scorer on a file's bytes (the file exists)."""
    try:
        report = json.loads(data.decode("utf-8-sig"))  # utf-8-sig: a leading BOM is tolerated
    except Exception:
        return 0.0
    if not isinstance(report, dict) or not report:
        return 0.0

    def number(value: Any) -> float | None:
        try:
            return float(value)
        except Exception:
            return None

    sps = number(report.get("sps"))
    sps_credit = 0.0
    if sps is not None:
        difference = abs(sps - ref_sps)
        sps_credit = 1.0 if difference <= 5.0 else 0.5 if difference <= 10.0 else 0.0
    components = report.get("components")
    right = 0
    for name, ref in ref_components.items():
        value = number(components.get(name)) if isinstance(components, dict) else None
        if value is not None and abs(value - ref) <= 0.10:
            right += 1
    return 0.60 * sps_credit + 0.40 * right / 4
