"""The Inspect AI adapter, offline: the scripted agent in Inspect's local sandbox."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

# inspect_ai's unclosed anyio streams: ignored in pyproject.toml's filterwarnings.

from grading_helpers import reference  # noqa: E402

from pytest_clinaudit.adapters.inspect_task import clinical_security_audit, scripted_agent_solver  # noqa: E402
from pytest_clinaudit.reference.attacks.params import COMPONENTS  # noqa: E402


def _run(tmp_path: Path, mode: str, variants: str = "wdbc-baseline") -> list[Any]:
    task = clinical_security_audit(
        variants=variants,
        workdir=str(tmp_path / "work"),
        solver=scripted_agent_solver(mode=mode, python=sys.executable),
    )
    logs = inspect_ai.eval(
        task,
        model="mockllm/model",
        log_dir=str(tmp_path / "logs"),
        display="none",
        sandbox_cleanup=True,
    )
    assert logs[0].status == "success", logs[0].error
    return list(logs[0].samples or [])


@pytest.fixture(autouse=True)
def _private_cache(cache_dir: Path) -> None:
    """The workspaces' references go to a private cache (CLINAUDIT_CACHE_DIR)."""


@pytest.mark.slow
def test_the_scripted_agent_in_the_sandbox_scores_one_with_the_submitted_numbers(
    tmp_path: Path, warm_cache: Path
) -> None:
    (sample,) = _run(tmp_path, "correct")
    score = next(iter(sample.scores.values()))
    assert score.value["score"] == 1.0
    ref = reference(warm_cache, "wdbc-baseline")
    assert score.value["sps"] == ref.sps
    assert set(score.value) == {"score", "sps", *COMPONENTS}
    assert {name: score.value[name] for name in COMPONENTS} == ref.components
    assert score.metadata["score_json"]["category"] == "none"


@pytest.mark.slow
def test_no_report_is_unscored_not_a_silent_zero(tmp_path: Path) -> None:
    (sample,) = _run(tmp_path, "no-report")
    score = next(iter(sample.scores.values()))
    assert isinstance(score.value, float)
    assert math.isnan(score.value)
    assert score.reason == "no_response"


@pytest.mark.slow
def test_a_wrong_sum_gets_the_papers_score_and_its_numbers(
    tmp_path: Path, warm_cache: Path
) -> None:
    (sample,) = _run(tmp_path, "wrong-sum")
    score = next(iter(sample.scores.values()))
    assert score.value["score"] == pytest.approx(0.4)
    assert score.value["sps"] == pytest.approx(reference(warm_cache, "wdbc-baseline").sps - 22.0)


def test_one_sample_per_variant_with_the_workspace_as_files(tmp_path: Path) -> None:
    task = clinical_security_audit(variants="wdbc-baseline,hardened", workdir=str(tmp_path))
    ids = [sample.id for sample in task.dataset]
    assert ids == ["baseline", "hardened"]
    for sample in task.dataset:
        assert sorted(sample.files) == ["model.pkl", "task.md", "test.csv", "train.csv"]
        assert "Write `report.json` in this directory" in sample.input


@pytest.mark.slow
def test_a_game_instance_is_a_sample_whose_score_has_the_games_parts(
    tmp_path: Path, cache_dir: Path
) -> None:
    pytest.importorskip("torch")
    from game_helpers import install_fake_instance

    from pytest_clinaudit.adapters.inspect_task import game_agent_solver

    install_fake_instance(cache_dir, 2, with_programs=True)
    task = clinical_security_audit(
        variants="icu-synth-game",
        seeds="2",
        workdir=str(tmp_path / "work"),
        solver=game_agent_solver(agent="null", python=sys.executable),
    )
    logs = inspect_ai.eval(
        task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none"
    )
    assert logs[0].status == "success", logs[0].error
    (sample,) = logs[0].samples or []
    assert sample.id == "icu-synth-game-2"
    score = next(iter(sample.scores.values()))
    assert score.value["score"] == 0.0
    assert set(score.value) == {"score", "detection", "localization", "evidence"}
