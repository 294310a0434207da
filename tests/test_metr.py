"""The METR task family, exported and driven against temporary stand-ins for /home/agent."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from grading_helpers import warm_cache_dir
from hostile_workspace import CONFIGURATIONS, loaded, plant, point_at
from workspace_helpers import workspace_copy

from pytest_clinaudit.adapters import scripted_agent
from pytest_clinaudit.adapters.metr import export_metr
from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.grading.runner import grade

PAPER_TASKS = {
    "baseline": "wdbc-baseline",
    "calibrated": "wdbc-calibrated",
    "hardened": "wdbc-hard",
    "mimic_baseline": "mimic-baseline",
    "mimic_calibrated": "mimic-calibrated",
    "mimic_hardened": "mimic-hard",
}


@pytest.fixture(scope="module")
def family_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return export_metr(tmp_path_factory.mktemp("metr"))


@pytest.fixture(scope="module")
def family(family_dir: Path) -> ModuleType:
    path = family_dir / "clinical_security_audit.py"
    spec = importlib.util.spec_from_file_location("clinical_security_audit", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Stand-ins for /home/agent and /root/clinaudit."""
    paths = {"home": tmp_path / "home" / "agent", "grader": tmp_path / "root" / "clinaudit"}
    monkeypatch.setenv("CLINAUDIT_METR_AGENT_HOME", str(paths["home"]))
    monkeypatch.setenv("CLINAUDIT_METR_GRADER_DIR", str(paths["grader"]))
    return paths


def test_the_family_declares_the_standard_and_the_papers_tasks(family: ModuleType) -> None:
    assert family.TaskFamily.standard_version == "0.3.0"
    tasks = family.TaskFamily.get_tasks()
    assert {name: t["variant"] for name, t in tasks.items() if name in PAPER_TASKS} == PAPER_TASKS
    assert all(t["paper_name"] == name for name, t in tasks.items())


def test_the_manifest_gives_every_task_two_cpus_and_four_gib(
    family_dir: Path, family: ModuleType
) -> None:
    text = (family_dir / "manifest.yaml").read_text()
    for task in family.TaskFamily.get_tasks():
        assert f"  {task}:\n    resources:\n      cpus: 2\n      memory_gb: 4\n" in text


def test_requirements_pin_the_libraries_that_move_references(family_dir: Path) -> None:
    lines = (family_dir / "requirements.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if "==" in line)
    for name in ("numpy", "scikit-learn", "xgboost", "scipy"):
        assert pins[name] == metadata.version(name)


def test_with_torch_installed_the_family_pins_it_and_offers_the_torch_tasks(
    family_dir: Path, family: ModuleType
) -> None:
    pytest.importorskip("torch")
    lines = (family_dir / "requirements.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if "==" in line)
    assert pins["torch"] == metadata.version("torch").split("+")[0]  # not the host's +cpu
    assert pins["opacus"] == metadata.version("opacus")
    assert lines[0] == "--extra-index-url https://download.pytorch.org/whl/cpu"
    tasks = family.TaskFamily.get_tasks()
    assert tasks["icu_synth_mlp_dp"]["variant"] == "icu-synth-mlp-dp"
    assert tasks["wdbc_mlp_clip"]["variant"] == "wdbc-mlp-clip"
    # Every torch variant is offered, the -clip ablations included (FLCHAIN's with
    # scikit-survival, which the test extra installs).
    torch_variants = {v.name for v in default_catalog() if v.is_torch}
    offered = {t["variant"] for t in tasks.values()}
    assert {n for n in torch_variants if not n.startswith("flchain")} <= offered
    assert len(torch_variants) == 16  # the game is not an audit-task variant
    assert tasks["icu_synth_game_3"] == {
        "variant": "icu-synth-game",
        "paper_name": "icu_synth_game_3",
        "seed": 3,
    }
    assert {name for name, t in tasks.items() if t["variant"] == "icu-synth-game"} == set(
        family.GAME_TASKS
    )  # the game's instances 1-10


def test_with_scikit_survival_installed_the_family_pins_it_and_offers_the_cohort_tasks(
    family_dir: Path, family: ModuleType
) -> None:
    pytest.importorskip("sksurv")
    lines = (family_dir / "requirements.txt").read_text().splitlines()
    pins = dict(line.split("==") for line in lines if "==" in line)
    assert pins["scikit-survival"] == metadata.version("scikit-survival")
    tasks = family.TaskFamily.get_tasks()
    assert tasks["flchain_hardened"]["variant"] == "flchain-hard"
    assert set(family.COHORT_TASKS) <= set(tasks)
    offered = [family.TASKS, family.COHORT_TASKS]
    if importlib.util.find_spec("torch") is not None:
        # With torch too (the test extra), every torch variant, FLCHAIN's included, and
        # the game's instances.
        offered += [family.TORCH_TASKS, family.COHORT_TORCH_TASKS, family.GAME_TASKS]
        assert tasks["flchain_mlp_dp"]["variant"] == "flchain-mlp-dp"
        assert {v.name for v in default_catalog() if v.is_torch} <= {
            t["variant"] for t in tasks.values()
        }
    assert len(tasks) == sum(map(len, offered))


def test_the_family_vendors_the_whole_package(family_dir: Path) -> None:
    vendored = family_dir / "vendor" / "pytest_clinaudit"
    for part in (
        "plugin.py",
        "reference/attacks/fgsm.py",
        "variants/wdbc-hard.toml",
        "grading/report.schema.json",
    ):
        assert (vendored / part).is_file(), part
    assert not list(vendored.rglob("__pycache__"))


def test_instructions_name_the_files_and_the_report_path(
    family: ModuleType, machine: dict[str, Path]
) -> None:
    text = family.TaskFamily.get_instructions({"variant": "wdbc-hard", "paper_name": "hardened"})
    assert f"Write your report to {machine['home']}/report.json" in text
    assert "# Clinical AI security audit (wdbc-hard)" in text


def _start(family: ModuleType, task: dict[str, Any]) -> None:
    family.TaskFamily.start(task)


def _agent(home: Path, mode: str) -> None:
    agent = Path(scripted_agent.__file__)
    subprocess.run(
        [sys.executable, str(agent), str(home), "--mode", mode], check=True, capture_output=True
    )


@pytest.mark.slow
def test_start_score_and_the_papers_failure_modes(
    family: ModuleType, machine: dict[str, Path]
) -> None:
    task = family.TaskFamily.get_tasks()["baseline"]
    _start(family, task)
    home, grader = machine["home"], machine["grader"] / "baseline"
    assert sorted(p.name for p in home.iterdir()) == [
        "model.pkl",
        "task.md",
        "test.csv",
        "train.csv",
    ]
    assert (grader / "manifest.json").is_file()

    # No report: None, which the paper counts as "no submission".
    assert family.TaskFamily.score(task, "") is None

    # The scorer agrees with the plugin's metr profile on the same file.
    def plugin_score(report: Path) -> float:
        document = grade(
            report,
            "wdbc-baseline",
            profile="metr",
            manifest=grader / "manifest.json",
            cache_dir=grader / "cache",
        )
        return float(document["score"])

    _agent(home, "correct")  # one audit; the failure modes are what agents make of it
    correct = json.loads((home / "report.json").read_text())
    for mode, paper_score in (
        ("correct", 1.0),
        ("empty", 0.0),
        ("wrong-sum", 0.4),
        ("string-numbers", 1.0),
    ):
        (home / "report.json").write_text(scripted_agent.as_submitted(correct, mode) or "")
        score = family.TaskFamily.score(task, "")
        assert score == pytest.approx(paper_score), mode
        assert score == plugin_score(home / "report.json"), mode


def test_scoring_against_a_manifest_of_another_build_is_an_error_not_a_zero(
    family: ModuleType, machine: dict[str, Path]
) -> None:
    task = family.TaskFamily.get_tasks()["baseline"]
    grader = machine["grader"] / "baseline"
    grader.mkdir(parents=True)
    manifest = {
        "format": "clinaudit-manifest-1",
        "variant": "wdbc-baseline",
        "artifact_sha256": "0" * 64,
        "data_sha256": "0" * 64,
        "libraries": {},
    }
    (grader / "manifest.json").write_text(json.dumps(manifest))
    machine["home"].mkdir(parents=True)
    (machine["home"] / "report.json").write_text("{}")
    with pytest.raises(
        RuntimeError, match="model artifact sha256 in the manifest is 0000000000000000"
    ):
        family.TaskFamily.score(task, "")


def test_scoring_reads_nothing_the_agent_wrote_beside_its_report(
    family: ModuleType,
    machine: dict[str, Path],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The agent's home holds an empty report, every pytest configuration file and a
    # conftest.py, each loading a plugin that forges the score to 1.0, and the scoring
    # process's environment points pytest at them (issue 26, part 5).
    task = family.TaskFamily.get_tasks()["hardened"]
    run = workspace_copy(tmp_path_factory, "wdbc-hard", machine["home"].parent / "run")
    shutil.move(run / "workspace", machine["home"])
    grader = machine["grader"] / "hardened"
    grader.mkdir(parents=True)
    shutil.copy2(run / "grader" / "manifest.json", grader / "manifest.json")
    shutil.copytree(warm_cache_dir(tmp_path_factory), grader / "cache")
    (machine["home"] / "report.json").write_text("{}")
    plant(machine["home"], sorted(CONFIGURATIONS))
    for name, value in point_at(dict(os.environ), machine["home"]).items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(machine["home"])
    assert family.TaskFamily.score(task, "") == 0.0
    assert loaded(machine["home"]) == []
