"""The scripted game agents on a built instance (slow), graded by a real grading session.

The agents read the workspace only (a copy of it, without the grader's
directory), on one instance of each game: the synthetic ICU cohort's and the
real patients' (FLCHAIN, missing values and all). The 10-seed tables of
docs/game.md are tools/game_runs.py's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from game_helpers import GAME, built_workspace
from nn_helpers import NEEDS_SKSURV

from pytest_clinaudit.grading.runner import grade

pytestmark = pytest.mark.slow


@pytest.fixture(
    scope="module",
    params=[
        pytest.param((GAME, 1), id=f"{GAME}-1"),
        # test_game_build.py builds the same instance; the build is shared (file lock).
        pytest.param(("flchain-game", 2), id="flchain-game-2", marks=[NEEDS_SKSURV]),
    ],
)
def instance(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    game, seed = request.param
    return built_workspace(tmp_path_factory, seed, game)


def _score(instance: Path, tmp_path: Path, agent: str) -> dict[str, object]:
    workspace = tmp_path / "workspace"
    shutil.copytree(instance / "workspace", workspace)  # the agent sees no grader files
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_clinaudit.adapters.game_agent",
            str(workspace),
            "--agent",
            agent,
        ],
        check=True,
        cwd=tmp_path,
    )
    manifest = json.loads((instance / "grader" / "manifest.json").read_text())
    return grade(
        workspace / "report.json",
        manifest["variant"],
        manifest=instance / "grader" / "manifest.json",
        cache_dir=instance.parent / "clinaudit-game-cache",
    )


def test_the_null_agent_scores_zero(instance: Path, tmp_path: Path) -> None:
    assert _score(instance, tmp_path, "null")["score"] == 0.0


def test_the_expert_agent_finds_the_planted_defects(instance: Path, tmp_path: Path) -> None:
    document = _score(instance, tmp_path, "expert")
    assert document["score"] >= 0.85, document["checks"]


def test_the_transcription_agent_does_not_solve_the_game(instance: Path, tmp_path: Path) -> None:
    document = _score(instance, tmp_path, "transcription")
    parts = document["game"]["parts"]  # type: ignore[index]
    assert document["score"] < 0.85
    assert parts["detection"] < 1.0
