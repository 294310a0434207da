"""Export the task as a METR Task Standard task family.

The family directory holds the TaskFamily (:mod:`pytest_clinaudit.adapters.metr_family`,
copied verbatim), a vendored copy of this package (so ``start`` and ``score``
run exactly this grader), ``requirements.txt`` pinned to the libraries of the
exporting environment (references depend on them; torch and Opacus too when
installed, and then the family offers the neural-network tasks; the pins of
:mod:`pytest_clinaudit.adapters.pins`, which the Inspect sandbox image shares), and
``manifest.yaml`` with 2 CPUs and 4 GiB per task.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pytest_clinaudit.adapters.pins import agent_pins

FAMILY = "clinical_security_audit"
CPUS = 2
MEMORY_GB = 4


def _copy_package(destination: Path) -> None:
    """Vendor pytest_clinaudit as pip installs it, so the family runs exactly this grader.

    An installed package is complete (pyproject.toml maps ``reference/`` and
    ``variants/`` into it) and is copied as it is. An editable install imports
    the checkout's ``src/pytest_clinaudit``, which holds neither, so the
    checkout is installed into a scratch directory by pip and copied from
    there: pyproject.toml stays the only place that maps them.
    """
    import pytest_clinaudit

    package = Path(pytest_clinaudit.__file__).parent
    if (package / "reference" / "__init__.py").is_file():
        _copy_tree(package, destination / "pytest_clinaudit")
        return
    checkout = package.parents[1]
    if not (checkout / "pyproject.toml").is_file():
        raise RuntimeError(f"{package} lacks reference/ and is not in a checkout to install")
    with tempfile.TemporaryDirectory(prefix="clinaudit-vendor-") as scratch:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--target",
                scratch,
                str(checkout),
            ],
            check=True,
        )
        _copy_tree(Path(scratch, "pytest_clinaudit"), destination / "pytest_clinaudit")


def _copy_tree(source: Path, target: Path) -> None:
    shutil.copytree(
        source,
        target,
        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
        dirs_exist_ok=True,
    )


def export_metr(out: Path) -> Path:
    """Write the task family under ``out`` and return its directory."""
    from pytest_clinaudit.adapters import metr_family

    family = out / FAMILY
    if family.exists():
        shutil.rmtree(family)
    family.mkdir(parents=True)
    shutil.copy2(Path(metr_family.__file__), family / f"{FAMILY}.py")
    _copy_package(family / "vendor")
    pins = agent_pins()  # the Inspect sandbox image installs the same (adapters/pins.py)
    tasks = dict(metr_family.TASKS)
    if pins.torch:
        tasks.update(metr_family.TORCH_TASKS)
        tasks.update({name: variant for name, (variant, _) in metr_family.GAME_TASKS.items()})
    if pins.cohorts:
        tasks.update(metr_family.COHORT_TASKS)
        if pins.torch:
            tasks.update(metr_family.COHORT_TORCH_TASKS)
    (family / "requirements.txt").write_text(pins.requirements_txt(), encoding="utf-8")
    lines = ["# METR Task Standard manifest: resources per task.", "tasks:"]
    for task in tasks:
        lines += [
            f"  {task}:",
            "    resources:",
            f"      cpus: {CPUS}",
            f"      memory_gb: {MEMORY_GB}",
        ]
    (family / "manifest.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return family
