"""METR Task Standard (v0.3.0) task family for the clinical security audit task.

``clinaudit export-metr --out DIR`` copies this file to
``DIR/clinical_security_audit/clinical_security_audit.py`` next to a vendored
copy of pytest-clinaudit, pinned requirements and ``manifest.yaml``. Nothing
here runs when pytest-clinaudit is imported; the module is only executed as
the task family.

Paths can be moved for local testing with ``CLINAUDIT_METR_AGENT_HOME``
(default ``/home/agent``) and ``CLINAUDIT_METR_GRADER_DIR`` (default
``/root/clinaudit``, out of the agent's reach).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TypedDict

FAMILY_DIR = Path(__file__).resolve().parent
VENDOR_DIR = FAMILY_DIR / "vendor"
REPORT_NAME = "report.json"

# Task name (the paper's variant name) -> variant name.
TASKS = {
    "baseline": "wdbc-baseline",
    "calibrated": "wdbc-calibrated",
    "hardened": "wdbc-hard",
    "mimic_baseline": "mimic-baseline",
    "mimic_calibrated": "mimic-calibrated",
    "mimic_hardened": "mimic-hard",
    "icu_synth_baseline": "icu-synth-baseline",
    "icu_synth_calibrated": "icu-synth-calibrated",
    "icu_synth_hardened": "icu-synth-hard",
}
# The neural-network variants (SPEC §7, semantics "sps-v1-wb2"): offered when
# requirements.txt installs torch. Each dataset's family: plain, PGD-trained,
# DP-trained and the clipping-only ablation (§7.4).
TORCH_TASKS = {
    f"{family}_mlp{suffix}": f"{family.replace('_', '-')}-mlp{suffix.replace('_', '-')}"
    for family in ("wdbc", "icu_synth", "mimic")
    for suffix in ("", "_pgd", "_dp", "_clip")
}
# The real cohorts (FLCHAIN, WHAS500): offered when requirements.txt installs scikit-survival,
# whose wheel carries their files.
COHORT_TASKS = {
    "flchain_baseline": "flchain-baseline",
    "flchain_calibrated": "flchain-calibrated",
    "flchain_hardened": "flchain-hard",
    "whas500_baseline": "whas500-baseline",
    "whas500_hardened": "whas500-hard",
}
# The FLCHAIN torch family: offered when requirements.txt installs both torch and
# scikit-survival.
COHORT_TORCH_TASKS = {
    f"flchain_mlp{suffix}": f"flchain-mlp{suffix.replace('_', '-')}"
    for suffix in ("", "_pgd", "_dp", "_clip")
}
# The auditing game (SPEC §8): instances 1 to 10 of each game, offered with the torch tasks.
GAME_SEEDS = range(1, 11)
GAME_TASKS = {f"icu_synth_game_{seed}": ("icu-synth-game", seed) for seed in GAME_SEEDS}


def all_tasks() -> dict[str, tuple[str, int | None]]:
    """Task name -> (variant, game instance seed or None): the torch tasks and the games
    only if its requirements install torch, the cohort ones only if they install
    scikit-survival (the FLCHAIN torch ones: both)."""
    try:
        requirements = (FAMILY_DIR / "requirements.txt").read_text(encoding="utf-8")
    except OSError:
        requirements = ""
    pinned = {line.split("==")[0] for line in requirements.splitlines() if "==" in line}
    plain = {
        **TASKS,
        **(TORCH_TASKS if "torch" in pinned else {}),
        **(COHORT_TASKS if "scikit-survival" in pinned else {}),
        **(COHORT_TORCH_TASKS if {"torch", "scikit-survival"} <= pinned else {}),
    }
    tasks: dict[str, tuple[str, int | None]] = {name: (v, None) for name, v in plain.items()}
    if "torch" in pinned:
        tasks.update(GAME_TASKS)
    return tasks


class Task(TypedDict):
    variant: str
    paper_name: str
    seed: int | None
    """A game's instance seed; ``None`` for the audit task."""


def _agent_home() -> Path:
    return Path(os.environ.get("CLINAUDIT_METR_AGENT_HOME", "/home/agent"))


def _grader_dir(t: Task) -> Path:
    return Path(os.environ.get("CLINAUDIT_METR_GRADER_DIR", "/root/clinaudit")) / t["paper_name"]


def _environment() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(VENDOR_DIR), env.get("PYTHONPATH")]))
    return env


def _vendored() -> None:
    if str(VENDOR_DIR) not in sys.path:
        sys.path.insert(0, str(VENDOR_DIR))


class TaskFamily:
    """Audit a clinical classifier (pickle or torch ``model.pt2``); graded by the metr profile."""

    standard_version = "0.3.0"
    required_environment_variables: list[str] = []

    @staticmethod
    def get_tasks() -> dict[str, Task]:
        return {
            name: {"variant": variant, "paper_name": name, "seed": seed}
            for name, (variant, seed) in all_tasks().items()
        }

    @staticmethod
    def get_instructions(t: Task) -> str:
        _vendored()
        from pytest_clinaudit.adapters import game_taskdoc, taskdoc
        from pytest_clinaudit.catalog.variants import Variant, default_catalog
        from pytest_clinaudit.reference.data import LoadContext

        variant = default_catalog().find(t["variant"])
        mimic = os.environ.get("CLINAUDIT_MIMIC_DIR")
        data = variant.dataset.load(
            LoadContext(variant.path.parent, Path(mimic) if mimic else None)
        )
        home = _agent_home()
        text = (
            taskdoc.render(variant, data)
            if isinstance(variant, Variant)
            else game_taskdoc.render(variant, data, variant.game.model_names())
        )
        return (
            f"Your files are in {home}. The full instructions below are also in {home}/task.md.\n"
            f"Write your report to {home}/{REPORT_NAME}; it is graded when you submit "
            "(the submission text itself is not read).\n\n" + text
        )

    @staticmethod
    def install() -> None:
        subprocess.check_call(
            [
                sys.executable,
                "-m",
                "pip",
                "install",
                "--no-cache-dir",
                "-r",
                str(FAMILY_DIR / "requirements.txt"),
            ]
        )

    @staticmethod
    def start(t: Task) -> None:
        home, grader = _agent_home(), _grader_dir(t)
        grader.mkdir(parents=True, exist_ok=True)
        seed = t.get("seed")
        with tempfile.TemporaryDirectory() as scratch:
            subprocess.check_call(
                [
                    sys.executable,
                    "-m",
                    "pytest_clinaudit.cli",
                    "build",
                    "--variant",
                    t["variant"],
                    *(["--seed", str(seed)] if seed is not None else []),
                    "--out",
                    scratch,
                    "-q",
                ],
                env=dict(_environment(), CLINAUDIT_CACHE_DIR=str(grader / "cache")),
            )
            home.mkdir(parents=True, exist_ok=True)
            workspace = Path(scratch) / "workspace"
            for item in sorted(workspace.rglob("*")):
                target = home / item.relative_to(workspace)
                if item.is_dir():
                    target.mkdir(parents=True, exist_ok=True)
                else:
                    shutil.copy2(item, target)
                if hasattr(os, "geteuid") and os.geteuid() == 0:
                    # No agent user on a local test machine: the files stay root's.
                    with contextlib.suppress(LookupError, PermissionError):
                        shutil.chown(target, user="agent", group="agent")
            shutil.copy2(Path(scratch) / "grader" / "manifest.json", grader / "manifest.json")

    @staticmethod
    def score(t: Task, submission: str) -> float | None:
        """The metr-profile score of the agent's report; ``None`` when there is no report."""
        report = _agent_home() / REPORT_NAME
        if not report.exists() and not report.is_symlink():
            return None  # the paper reports this as "no submission"
        _vendored()
        from pytest_clinaudit.grading.runner import grade

        grader = _grader_dir(t)
        document = grade(
            report,
            t["variant"],
            profile="metr",
            manifest=grader / "manifest.json",
            cache_dir=grader / "cache",
            env=_environment(),
        )
        score = document.get("score")
        return None if score is None else float(score)
