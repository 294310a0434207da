"""Installed import names stay inside the pytest_clinaudit namespace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import importlib.util, json
from importlib import metadata
names = ("reference", "variants", "tests", "benchmarks", "tools")
# Another distribution may own one of these top-level names (Opacus installs a
# `benchmarks` package): what matters is that pytest-clinaudit installs none of them.
owners = metadata.packages_distributions()
ours = {name: "pytest-clinaudit" in owners.get(name, []) for name in names}
inside = {name: importlib.util.find_spec("pytest_clinaudit." + name) is not None for name in ("tests", "conftest", "benchmarks", "tools")}
import pytest_clinaudit.reference.attacks, pytest_clinaudit.variants
entry = [e.value for e in metadata.entry_points(group="pytest11") if e.name == "clinaudit"]
print(json.dumps({"ours": ours, "inside": inside, "entry": entry}))
"""


def test_only_the_pytest_clinaudit_namespace_is_importable_after_install(tmp_path: Path) -> None:
    # Run from an empty directory so the checkout is not on sys.path.
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    import json

    result = json.loads(out.stdout)
    assert result["ours"] == {
        "reference": False,
        "variants": False,
        "tests": False,
        "benchmarks": False,
        "tools": False,
    }
    assert result["inside"] == {
        "tests": False,
        "conftest": False,
        "benchmarks": False,
        "tools": False,
    }
    assert result["entry"] == ["pytest_clinaudit.plugin"]


def test_the_shipped_variant_files_are_package_data() -> None:
    from pytest_clinaudit.catalog.variants import builtin_variant_files

    names = {path.name for path in builtin_variant_files()}
    assert {"wdbc-baseline.toml", "wdbc-calibrated.toml", "wdbc-hard.toml"} <= names


def test_every_package_of_the_checkout_is_listed_for_installation() -> None:
    """pyproject.toml lists packages by name; a new room left out would not be installed."""
    import sys

    from grading_helpers import REPO

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib

    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    listed = set(config["setuptools"]["packages"])
    mapped = config["setuptools"]["package-dir"]
    found = {
        ".".join(init.parent.relative_to(REPO / "src").parts)
        for init in (REPO / "src" / "pytest_clinaudit").rglob("__init__.py")
    }
    for package, directory in mapped.items():
        root = REPO / directory
        if package != "pytest_clinaudit" and root.is_dir():
            found.add(package)
            found |= {
                ".".join([package, *init.parent.relative_to(root).parts])
                for init in root.rglob("*/__init__.py")
            }
    assert found == listed, f"packages not listed: {sorted(found - listed)}"
