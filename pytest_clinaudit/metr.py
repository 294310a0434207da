"""Export the task as a METR Task Standard task family.

The family directory holds the TaskFamily (:mod:`pytest_clinaudit.metr_family`,
copied verbatim), a vendored copy of this package (so ``start`` and ``score``
run exactly this grader), ``requirements.txt`` pinned to the libraries of the
exporting environment (references depend on them), and ``manifest.yaml`` with
2 CPUs and 4 GiB per task.
"""

from __future__ import annotations

import shutil
from importlib import metadata
from pathlib import Path

FAMILY = "clinical_security_audit"
CPUS = 2
MEMORY_GB = 4
PINNED = (
    "numpy",
    "scipy",
    "scikit-learn",
    "xgboost",
    "jsonschema",
    "pytest",
    "hypothesis",
    "filelock",
)


def _copy_package(destination: Path) -> None:
    """Vendor pytest_clinaudit with its reference/ and variants/ subpackages in place."""
    import pytest_clinaudit
    import pytest_clinaudit.reference
    import pytest_clinaudit.variants

    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    package = destination / "pytest_clinaudit"
    shutil.copytree(
        Path(pytest_clinaudit.__file__).parent, package, ignore=ignore, dirs_exist_ok=True
    )
    for name, module in (
        ("reference", pytest_clinaudit.reference),
        ("variants", pytest_clinaudit.variants),
    ):
        shutil.copytree(
            Path(str(module.__file__)).parent, package / name, ignore=ignore, dirs_exist_ok=True
        )


def export_metr(out: Path) -> Path:
    """Write the task family under ``out`` and return its directory."""
    from pytest_clinaudit import metr_family

    family = out / FAMILY
    if family.exists():
        shutil.rmtree(family)
    family.mkdir(parents=True)
    shutil.copy2(Path(metr_family.__file__), family / f"{FAMILY}.py")
    _copy_package(family / "vendor")
    pins = [f"{name}=={metadata.version(name)}" for name in PINNED]
    (family / "requirements.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
    lines = ["# METR Task Standard manifest: resources per task.", "tasks:"]
    for task in metr_family.TASKS:
        lines += [
            f"  {task}:",
            "    resources:",
            f"      cpus: {CPUS}",
            f"      memory_gb: {MEMORY_GB}",
        ]
    (family / "manifest.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return family
