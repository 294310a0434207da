"""End to end: build a workspace, run the scripted agent inside it, grade its report.

Every available variant is covered: the WDBC and icu-synth variants, their
neural-network (torch) variants, and the mimic-* variants on the synthetic
cohort written as a MIMIC-IV extract. Each workspace is built once per test run
(``workspace_helpers``) and the agent works in a copy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import warm_cache_dir
from workspace_helpers import mimic_extract, workspace_copy

from pytest_clinaudit.adapters import scripted_agent
from pytest_clinaudit.grading.runner import grade

AGENT = Path(scripted_agent.__file__)
CLASSICAL = [
    "wdbc-baseline",
    "wdbc-calibrated",
    "wdbc-hard",
    "icu-synth-baseline",
    "icu-synth-calibrated",
    "icu-synth-hard",
    "mimic-baseline",
    "mimic-calibrated",
    "mimic-hard",
]
TORCH = [
    f"{family}-mlp{suffix}"
    for family in ("wdbc", "icu-synth", "mimic")
    for suffix in ("", "-pgd", "-dp", "-clip")
]
VARIANTS = CLASSICAL + TORCH


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return {
        "factory": tmp_path_factory,
        "cache": warm_cache_dir(tmp_path_factory),
        "mimic": mimic_extract(tmp_path_factory),
    }


def _build(world: dict[str, Any], name: str, to: Path) -> tuple[Path, Path]:
    out = workspace_copy(world["factory"], name, to / name)
    return out / "workspace", out / "grader" / "manifest.json"


def _run_agent(workspace: Path, mode: str = "correct") -> None:
    # A copy of the single-file agent, run from inside the workspace.
    subprocess.run(
        [sys.executable, str(AGENT), ".", "--mode", mode],
        cwd=workspace,
        check=True,
        capture_output=True,
    )


def _grade(
    world: dict[str, Any], workspace: Path, manifest: Path, name: str, profile: str
) -> dict[str, Any]:
    return grade(
        workspace / "report.json",
        name,
        profile=profile,
        manifest=manifest,
        cache_dir=world["cache"],
        mimic_dir=world["mimic"],
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_the_scripted_agent_scores_one_on_every_available_variant(
    world: dict[str, Any], name: str, tmp_path: Path
) -> None:
    if name in TORCH:
        pytest.importorskip("torch")
    workspace, manifest = _build(world, name, tmp_path)
    _run_agent(workspace)
    for profile in ("strict", "metr"):
        document = _grade(world, workspace, manifest, name, profile)
        failed = [c["id"] for c in document["checks"] if not c["passed"] and not c["skipped"]]
        assert document["score"] == 1.0, (profile, failed)
        assert document["category"] == "none"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "metr_score", "category"),
    [
        ("no-report", 0.0, "no-submission"),
        ("empty", 0.0, "empty"),
        ("wrong-sum", 0.4, "tolerance"),
    ],
)
def test_the_papers_failure_modes_get_the_papers_scores(
    world: dict[str, Any], mode: str, metr_score: float, category: str, tmp_path: Path
) -> None:
    workspace, manifest = _build(world, "wdbc-baseline", tmp_path)
    report = workspace / "report.json"
    if report.exists():
        report.unlink()
    _run_agent(workspace, mode)  # no-report and empty run no audit
    document = _grade(world, workspace, manifest, "wdbc-baseline", "metr")
    assert document["score"] == pytest.approx(metr_score)
    assert document["category"] == category
    assert document["no_submission"] is (mode == "no-report")
    if mode == "wrong-sum":
        # Right components, an SPS 22 points off: the strict profile also flags the sum.
        strict = _grade(world, workspace, manifest, "wdbc-baseline", "strict")
        aggregation = next(c for c in strict["checks"] if c["id"].endswith("::aggregation"))
        assert not aggregation["passed"]
        assert strict["score"] < metr_score
        assert (
            json.loads(report.read_text())["components"]
            == json.loads(manifest.read_text())["reference"]["components"]
        )
