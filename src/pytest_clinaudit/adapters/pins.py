"""The library pins of an agent's environment: one source for every image an agent runs in.

An agent loads the very artifacts this host built (pickles, torch programs) and
recomputes what the references computed, so its libraries must be this
environment's, version for version. The METR family's ``requirements.txt``
(:mod:`pytest_clinaudit.adapters.metr`) and the Inspect sandbox image
(:mod:`pytest_clinaudit.adapters.sandbox_image`) both take their pins from
:func:`agent_pins`; ``tests/test_inspect.py`` fails when the two drift.
"""

from __future__ import annotations

import dataclasses

from pytest_clinaudit.versions import NOT_INSTALLED, library_versions

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
"""Always pinned: what builds, loads and grades the artifacts."""
TORCH_PINNED = ("torch", "opacus")
"""Pinned too when this environment has them: the torch tasks and the game need them."""
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
"""PyTorch's index of CPU-only builds: PyPI's Linux torch is a multi-GB CUDA build."""
COHORT_PINNED = ("scikit-survival",)
"""Pinned too when this environment has it: the cohort tasks need it."""
AGENT_PINNED = ("pandas",)
"""Pinned too when this environment has it: not needed to load an artifact, but an agent's
first tool for the CSVs, at the version the host runs."""


@dataclasses.dataclass(frozen=True)
class AgentPins:
    """An agent environment's pins, and what they make available."""

    lines: tuple[str, ...]
    """``requirements.txt`` lines: an index option first when torch is pinned, then
    ``name==version``, one per installed library, the version without its local label
    (``2.13.0``, not the host's ``2.13.0+cpu`` or ``2.13.0+cu126``)."""
    torch: bool
    cohorts: bool

    @property
    def torch_version(self) -> str:
        """The pinned torch version, ``""`` without torch."""
        return self.versions.get("torch", "")

    @property
    def versions(self) -> dict[str, str]:
        """``{distribution: version}`` of the pinned libraries."""
        return dict(line.split("==", 1) for line in self.lines if "==" in line)

    def requirements_txt(self) -> str:
        return "\n".join(self.lines) + "\n"


def _pin(name: str, version: str) -> str:
    """``name==version``, less the version's local label: the label names the build the host
    installed (``+cpu``, ``+cu126``), which need not exist for the agent's platform; the
    version alone fixes what the artifacts depend on."""
    return f"{name}=={version.split('+', 1)[0]}"


def agent_pins() -> AgentPins:
    """This environment's pins (asked of package metadata; nothing is imported)."""
    lines = [_pin(name, version) for name, version in library_versions(PINNED).items()]
    torch = library_versions(TORCH_PINNED)
    has_torch = NOT_INSTALLED not in torch.values()
    if has_torch:
        # CPU builds ("2.13.0+cpu") live on PyTorch's own index; PyPI's default is a CUDA
        # build. pip prefers 2.13.0+cpu to PyPI's 2.13.0 for torch==2.13.0; the Inspect image
        # installs torch from the CPU index alone first (its Dockerfile), so that never varies.
        lines = [f"--extra-index-url {TORCH_CPU_INDEX}", *lines]
        lines += [_pin(name, version) for name, version in torch.items()]
    cohorts = library_versions(COHORT_PINNED)
    has_cohorts = NOT_INSTALLED not in cohorts.values()
    if has_cohorts:
        lines += [_pin(name, version) for name, version in cohorts.items()]
    lines += [
        _pin(name, version)
        for name, version in library_versions(AGENT_PINNED).items()
        if version != NOT_INSTALLED
    ]
    return AgentPins(tuple(lines), torch=has_torch, cohorts=has_cohorts)
