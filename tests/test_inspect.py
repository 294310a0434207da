"""The Inspect AI adapter, offline: the scripted agent in Inspect's local sandbox."""

from __future__ import annotations

import math
import os
import shutil
import stat
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

inspect_ai = pytest.importorskip("inspect_ai")

# inspect_ai's unclosed anyio streams: ignored in pyproject.toml's filterwarnings.

from grading_helpers import reference  # noqa: E402
from inspect_ai.solver import Generate, TaskState, solver  # noqa: E402
from inspect_ai.util import sandbox  # noqa: E402

from pytest_clinaudit.adapters import sandbox_image  # noqa: E402
from pytest_clinaudit.adapters.inspect_task import (  # noqa: E402
    LocalSandboxRefused,
    clinical_security_audit,
    game_agent_solver,
    scripted_agent_solver,
)
from pytest_clinaudit.adapters.pins import agent_pins  # noqa: E402
from pytest_clinaudit.grading.runner import grade  # noqa: E402
from pytest_clinaudit.reference.attacks.params import COMPONENTS  # noqa: E402


def _run(tmp_path: Path, mode: str, variants: str = "wdbc-baseline") -> list[Any]:
    task = clinical_security_audit(
        variants=variants,
        workdir=str(tmp_path / "work"),
        solver=scripted_agent_solver(mode=mode, python=sys.executable),
        sandbox_type="local",
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

    install_fake_instance(cache_dir, 2, with_programs=True)
    task = clinical_security_audit(
        variants="icu-synth-game",
        seeds="2",
        workdir=str(tmp_path / "work"),
        solver=game_agent_solver(agent="null", python=sys.executable),
        sandbox_type="local",
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


# ---- issue 30: real agents in a sandbox that cannot reach the grader -------------------

ADAPTERS = Path(sandbox_image.__file__).parent


def _only_directory(parent: Path) -> Path:
    """The one directory a task made in ``workdir``: its 0700 directory."""
    (out,) = parent.iterdir()
    return out


def test_the_compose_file_parses_as_inspects_portable_compose_offline_and_pinned(
    tmp_path: Path,
) -> None:
    from inspect_ai.util import parse_compose_yaml  # yaml.safe_load, then Inspect's model

    shipped = parse_compose_yaml(str(ADAPTERS / "compose.yaml"), multiple_services=False)
    compose = sandbox_image.write_context(tmp_path / "context")
    (service,) = parse_compose_yaml(str(compose), multiple_services=False).services.values()
    assert service.network_mode == "none"
    assert service.build is not None
    assert not isinstance(service.build, str)
    assert service.build.context == "."
    requirements = (tmp_path / "context" / "requirements.txt").read_text()
    tag = sandbox_image.image_tag(requirements, sandbox_image.python_version())
    assert service.image == f"pytest-clinaudit-sandbox:{tag}"
    # Everything else is the shipped file's, which names no user or mount of the host.
    assert service.model_dump(exclude={"image"}) == shipped.services["default"].model_dump(
        exclude={"image"}
    )
    assert service.volumes is None
    assert service.privileged is None
    (networked,) = parse_compose_yaml(
        str(sandbox_image.write_context(tmp_path / "networked", network=True))
    ).services.values()
    assert networked.network_mode == "bridge"


def test_the_dockerfile_parses_installs_the_pins_only_and_runs_the_agent_unprivileged(
    tmp_path: Path,
) -> None:
    from dockerfile_parse import DockerfileParser

    sandbox_image.write_context(tmp_path)
    parser = DockerfileParser(path=str(tmp_path / "Dockerfile"))
    assert parser.baseimage == f"python:{sandbox_image.python_version()}-slim"
    steps = [(step["instruction"], step["value"]) for step in parser.structure]
    # The host's only file in the image is requirements.txt: nothing of the grader.
    assert [value for kind, value in steps if kind in {"COPY", "ADD"}] == [
        "requirements.txt /tmp/requirements.txt"
    ]
    runs = [value for kind, value in steps if kind == "RUN"]
    assert runs[0] == "python -m pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt"
    assert [value for kind, value in steps if kind == "USER"] == [sandbox_image.AGENT_USER]
    assert [value for kind, value in steps if kind == "WORKDIR"] == [sandbox_image.AGENT_WORKDIR]
    # The build sends requirements.txt alone (the Dockerfile always goes).
    ignore = (tmp_path / ".dockerignore").read_text().splitlines()
    assert [line for line in ignore if not line.startswith("#")] == ["*", "!requirements.txt"]


def test_the_images_pins_are_the_metr_familys_and_this_environments(tmp_path: Path) -> None:
    from pytest_clinaudit.adapters.metr import export_metr

    family = export_metr(tmp_path / "metr")
    sandbox_image.write_context(tmp_path / "context")
    image = (tmp_path / "context" / "requirements.txt").read_text()
    assert image == (family / "requirements.txt").read_text()
    pins = dict(line.split("==") for line in image.splitlines() if "==" in line)
    for name in ("numpy", "scipy", "scikit-learn", "xgboost", "torch", "pandas"):
        assert pins[name] == metadata.version(name), name  # the test extra installs them all
    # The installed package (pip's copy, vendored into the family) ships the image's files.
    for name in sandbox_image.SHIPPED:
        assert (family / "vendor" / "pytest_clinaudit" / "adapters" / name).is_file(), name


def test_the_default_sandbox_is_docker_with_the_shipped_compose_file_pinned_to_this_host(
    tmp_path: Path,
) -> None:
    task = clinical_security_audit(variants="wdbc-baseline", workdir=str(tmp_path / "work"))
    assert task.sandbox is not None
    assert task.sandbox.type == "docker"
    compose = Path(str(task.sandbox.config))
    assert compose.name == "compose.yaml"
    assert (compose.parent / "requirements.txt").read_text() == agent_pins().requirements_txt()
    # The build context is the image's files only, never the grader's directory.
    assert sorted(path.name for path in compose.parent.iterdir()) == sorted(
        [*sandbox_image.SHIPPED, "requirements.txt"]
    )
    assert compose.parent.parent == _only_directory(tmp_path / "work")
    assert stat.S_IMODE(compose.parent.parent.stat().st_mode) == 0o700
    assert "network_mode: none\n" in compose.read_text()


def test_a_network_and_another_provider_are_asked_for_by_task_arguments(tmp_path: Path) -> None:
    task = clinical_security_audit(
        variants="wdbc-baseline", workdir=str(tmp_path / "work"), network="true"
    )
    assert task.sandbox is not None
    assert "network_mode: bridge\n" in Path(str(task.sandbox.config)).read_text()
    task = clinical_security_audit(
        variants="wdbc-baseline",
        workdir=str(tmp_path / "work"),
        sandbox_type="k8s",
        sandbox_config="values.yaml",
    )
    assert task.sandbox is not None
    assert (task.sandbox.type, task.sandbox.config) == ("k8s", "values.yaml")


REFUSAL = (
    "refusing sandbox_type=local: a local sandbox runs the agent's commands on this machine "
    "as the grader's user, where it can read the grader's manifests and cache (the answers); "
    "use the default docker sandbox, or opt in with -T allow_local_sandbox=true"
)


def test_a_local_sandbox_is_refused_to_the_default_react_agent_before_anything_is_built(
    tmp_path: Path,
) -> None:
    with pytest.raises(LocalSandboxRefused) as refused:
        inspect_ai.eval(
            clinical_security_audit,
            task_args={
                "sandbox_type": "local",
                "variants": "wdbc-baseline",
                "workdir": str(tmp_path / "work"),
            },
            model="mockllm/model",
            log_dir=str(tmp_path / "logs"),
            display="none",
        )
    assert str(refused.value) == REFUSAL
    assert not (tmp_path / "work").exists()


def test_inspect_eval_prints_the_refusal_as_one_line(tmp_path: Path) -> None:
    """The refusal is Inspect's PrerequisiteError (a private class): the command line
    prints its message, not a traceback."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "inspect_ai",
            "eval",
            "inspect_task.py",
            "--model",
            "mockllm/model",
            "--log-dir",
            str(tmp_path / "logs"),
            "-T",
            "sandbox_type=local",
            "-T",
            f"workdir={tmp_path / 'work'}",
        ],
        cwd=ADAPTERS,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "COLUMNS": "1000"},
    )
    assert result.returncode != 0
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert lines == [REFUSAL]
    assert not (tmp_path / "work").exists()


@solver
def _report_writer(content: str | None) -> Any:
    """Not a bundled solver: writes ``content`` as report.json, or a directory there."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if content is None:
            await sandbox().exec(["mkdir", "report.json"])
        else:
            await sandbox().write_file("report.json", content)
        return state

    return solve


def test_only_the_bundled_solvers_get_a_local_sandbox_unasked(tmp_path: Path) -> None:
    from inspect_ai.agent import react
    from inspect_ai.tool import bash

    for refused in (react(tools=[bash()]), _report_writer("{}")):
        with pytest.raises(LocalSandboxRefused):
            clinical_security_audit(variants="wdbc-baseline", solver=refused, sandbox_type="local")
    for bundled in (scripted_agent_solver(), game_agent_solver()):
        task = clinical_security_audit(
            variants="wdbc-baseline",
            workdir=str(tmp_path / "work"),
            solver=bundled,
            sandbox_type="local",
        )
        assert task.sandbox is not None
        assert task.sandbox.type == "local"


def test_an_allowed_local_run_warns_and_grades_from_its_own_0700_directory(
    tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = clinical_security_audit(
        variants="wdbc-baseline",
        workdir=str(tmp_path / "work"),
        sandbox_type="local",
        solver=_report_writer('{"sps": 50}'),
        allow_local_sandbox="true",  # as -T passes it
    )
    out = _only_directory(tmp_path / "work")
    warning = capsys.readouterr().err
    assert warning.startswith("warning: sandbox_type=local with allow_local_sandbox:")
    assert str(out) in warning
    assert stat.S_IMODE(out.stat().st_mode) == 0o700
    assert (out / "cache").is_dir()  # this run's references, in its own directory
    logs = inspect_ai.eval(
        task, model="mockllm/model", log_dir=str(tmp_path / "logs"), display="none"
    )
    assert logs[0].status == "success", logs[0].error
    (sample,) = logs[0].samples or []
    score = next(iter(sample.scores.values()))
    # Graded on the host as the grader grades those bytes, against the run's own cache...
    report = tmp_path / "report.json"
    report.write_text('{"sps": 50}')
    manifest = out / "wdbc-baseline" / "grader" / "manifest.json"
    expected = grade(
        report, "wdbc-baseline", profile="metr", manifest=manifest, cache_dir=out / "cache"
    )
    assert score.value["score"] == expected["score"]
    assert score.value["sps"] == 50
    assert not cache_dir.exists()  # ... never the shared one
    # A directory where the report should be is unscored, with the reason.
    logs = inspect_ai.eval(
        task,
        solver=_report_writer(None),
        model="mockllm/model",
        log_dir=str(tmp_path / "logs"),
        display="none",
    )
    (sample,) = logs[0].samples or []
    score = next(iter(sample.scores.values()))
    assert score.reason == "no_response"
    assert "report.json in the sandbox is unreadable" in (score.explanation or "")


def test_a_samples_files_are_its_workspace_and_nothing_of_the_grader(
    tmp_path: Path, cache_dir: Path
) -> None:
    pytest.importorskip("torch")
    from game_helpers import install_fake_instance

    install_fake_instance(cache_dir, 2, with_programs=True)
    task = clinical_security_audit(
        variants="wdbc-baseline,icu-synth-game", seeds="2", workdir=str(tmp_path / "work")
    )
    out = _only_directory(tmp_path / "work")
    grader_side = [
        path
        for root in (out, cache_dir)
        for path in root.rglob("*")
        if path.is_file() and (root == cache_dir or "grader" in path.relative_to(out).parts)
    ]
    assert any(path.name == "manifest.json" for path in grader_side)
    assert any(path.is_relative_to(cache_dir) for path in grader_side)
    grader_bytes = {path.read_bytes() for path in grader_side}
    shipped = 0
    for sample in task.dataset:
        assert sample.files is not None
        workspace = Path(sample.metadata["manifest"]).parents[1] / "workspace"
        on_disk = sorted(
            path.relative_to(workspace).as_posix()
            for path in workspace.rglob("*")
            if path.is_file()
        )
        assert sorted(sample.files) == on_disk  # the whole workspace, and nothing else
        for name, source in sample.files.items():
            path = Path(source).resolve()
            assert path.is_relative_to(workspace.resolve()), name
            assert path.read_bytes() not in grader_bytes, name
            shipped += 1
    assert [sample.id for sample in task.dataset] == ["baseline", "icu-synth-game-2"]
    assert shipped > 8  # the audit's four files and the game's models, rows and dictionary


def _no_docker_daemon() -> str | None:
    """Why the Docker sandbox cannot run here, or None."""
    if shutil.which("docker") is None:
        return "no docker command on this machine"
    try:
        info = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "docker info timed out"
    if info.returncode != 0:
        return "no Docker daemon (docker info failed)"
    return None


@pytest.mark.slow
def test_the_scripted_agent_scores_one_in_the_shipped_docker_image(tmp_path: Path) -> None:
    reason = _no_docker_daemon()
    if reason:
        pytest.skip(f"{reason}: the sandbox image is not built and run here")
    task = clinical_security_audit(
        variants="wdbc-baseline",
        workdir=str(tmp_path / "work"),
        solver=scripted_agent_solver(),  # the image's python3
    )
    logs = inspect_ai.eval(
        task,
        model="mockllm/model",
        log_dir=str(tmp_path / "logs"),
        display="none",
        sandbox_cleanup=True,
    )
    assert logs[0].status == "success", logs[0].error
    (sample,) = logs[0].samples or []
    score = next(iter(sample.scores.values()))
    assert score.value["score"] == 1.0, sample.metadata.get("agent_stderr")
