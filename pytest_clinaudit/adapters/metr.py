"""Export the task as a METR Task Standard task family.

The family directory holds the TaskFamily (:mod:`pytest_clinaudit.adapters.metr_family`,
copied verbatim), a vendored copy of this package (so ``start`` and ``score``
run exactly this grader), ``requirements.txt`` pinned to the libraries of the
exporting environment (references depend on them; torch and Opacus too when
installed, and then the family offers the neural-network tasks), and
``manifest.yaml`` with 2 CPUs and 4 GiB per task.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request
from importlib import metadata
from pathlib import Path

from pytest_clinaudit.versions import NOT_INSTALLED, library_versions

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
TORCH_PINNED = ("torch", "opacus")
"""Pinned too when the exporting environment has them: the family then offers the torch tasks."""
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


DISTRIBUTION = "pytest-clinaudit"


def _copy_package(destination: Path) -> None:
    """Vendor pytest_clinaudit as pip installs it, so the family runs exactly this grader.

    A regular install lists its files in the distribution's RECORD; they are
    copied as installed. An editable install lists none (its modules stay in
    the checkout, some mapped into the package by pyproject.toml), so the
    checkout is installed into a scratch directory by pip and copied from there:
    pyproject.toml stays the only place that maps ``reference/`` and
    ``variants/`` into the package.
    """
    dist = metadata.distribution(DISTRIBUTION)
    source = _editable_source(dist)
    if source is None:
        for file in dist.files or ():
            if file.parts[0] == "pytest_clinaudit" and file.suffix != ".pyc":
                target = destination / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(Path(str(file.locate())), target)
        return
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
                str(source),
            ],
            check=True,
        )
        shutil.copytree(
            Path(scratch, "pytest_clinaudit"),
            destination / "pytest_clinaudit",
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
            dirs_exist_ok=True,
        )


def _editable_source(dist: metadata.Distribution) -> Path | None:
    """The checkout of an editable install (PEP 610 ``direct_url.json``), else ``None``."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    record = json.loads(text)
    if not record.get("dir_info", {}).get("editable"):
        return None
    return Path(urllib.request.url2pathname(urllib.parse.urlparse(record["url"]).path))


def export_metr(out: Path) -> Path:
    """Write the task family under ``out`` and return its directory."""
    from pytest_clinaudit.adapters import metr_family

    family = out / FAMILY
    if family.exists():
        shutil.rmtree(family)
    family.mkdir(parents=True)
    shutil.copy2(Path(metr_family.__file__), family / f"{FAMILY}.py")
    _copy_package(family / "vendor")
    pins = [f"{name}=={version}" for name, version in library_versions(PINNED).items()]
    torch = library_versions(TORCH_PINNED)
    tasks = dict(metr_family.TASKS)
    if NOT_INSTALLED not in torch.values():
        tasks.update(metr_family.TORCH_TASKS)
        # CPU builds ("2.13.0+cpu") live on PyTorch's own index; PyPI's default is a CUDA build.
        pins = [f"--extra-index-url {TORCH_CPU_INDEX}", *pins]
        pins += [f"{name}=={version}" for name, version in torch.items()]
    (family / "requirements.txt").write_text("\n".join(pins) + "\n", encoding="utf-8")
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
