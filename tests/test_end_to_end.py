"""End to end: build a workspace, run the scripted agent inside it, grade its report.

Every available variant is covered: the WDBC and icu-synth variants, and the
mimic-* variants on the synthetic cohort written as a MIMIC-IV extract.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import warm_cache_dir

from pytest_clinaudit.adapters import scripted_agent
from pytest_clinaudit.adapters.workspace import build_workspace
from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.grading.runner import grade
from pytest_clinaudit.reference.data import LoadContext
from pytest_clinaudit.reference.mimic import write_mimic_layout

AGENT = Path(scripted_agent.__file__)
VARIANTS = [
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


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("e2e")
    extract = root / "mimic-extract"
    synth = default_catalog().get("icu-synth-baseline")
    write_mimic_layout(synth.dataset.load(synth.context), extract, layout="two-file")
    return {"root": root, "cache": warm_cache_dir(tmp_path_factory), "mimic": extract}


def _build(world: dict[str, Path], name: str) -> tuple[Path, Path]:
    variant = default_catalog().get(name)
    out = world["root"] / name
    build_workspace(
        variant,
        out,
        context=LoadContext(variant.path.parent, world["mimic"]),
        cache=ReferenceCache(world["cache"]),
    )
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
    world: dict[str, Path], workspace: Path, manifest: Path, name: str, profile: str
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
    world: dict[str, Path], name: str
) -> None:
    workspace, manifest = _build(world, name)
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
    world: dict[str, Path], mode: str, metr_score: float, category: str
) -> None:
    workspace, manifest = _build(world, "wdbc-baseline")
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
