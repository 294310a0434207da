"""The Inspect AI adapter, offline: the scripted agent in Inspect's local sandbox."""

from __future__ import annotations

import io
import math
import os
import re
import shlex
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
    assert "python -m pip install -r /tmp/requirements.txt && rm /tmp/requirements.txt" in runs
    assert [value for kind, value in steps if kind == "USER"] == [sandbox_image.AGENT_USER]
    assert [value for kind, value in steps if kind == "WORKDIR"] == [sandbox_image.AGENT_WORKDIR]
    # The build sends requirements.txt alone (the Dockerfile always goes).
    ignore = (tmp_path / ".dockerignore").read_text().splitlines()
    assert [line for line in ignore if not line.startswith("#")] == ["*", "!requirements.txt"]


TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _pip_installs(dockerfile: str) -> list[list[str]]:
    """The arguments after ``pip install`` of every such command in the RUN steps, in
    order, with ``$NAME`` and ``${NAME}`` of the Dockerfile's ARGs expanded."""
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(fileobj=io.BytesIO(dockerfile.encode()))
    args = parser.args
    installs = []
    for step in parser.structure:
        if step["instruction"] != "RUN":
            continue
        value = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), step["value"])
        lexer = shlex.shlex(value, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True  # split at blanks and ;&| only
        words = list(lexer)
        command: list[str] = []
        for word in [*words, ";"]:
            if word not in {";", "&&", "||", "|", "&"}:
                command.append(word)
                continue
            for at in range(len(command) - 1):
                if command[at].endswith("pip") and command[at + 1] == "install":
                    installs.append(command[at + 2 :])
            command = []
    return installs


def _torch_problems(dockerfile: str, requirements: str, torch: str) -> list[str]:
    """What would let the image's torch be unpinned or PyPI's CUDA build, given the pinned
    ``torch`` version: torch installs from PyTorch's CPU index alone, pinned, before
    ``requirements.txt``, whose torch line is the same pin."""
    problems = []
    name = re.compile(r"^torch(?![\w.-])")
    pinned = [line for line in requirements.splitlines() if name.match(line)]
    if pinned != [f"torch=={torch}"]:
        problems.append(f"requirements.txt's torch lines {pinned} are not torch=={torch}")
    installs = _pip_installs(dockerfile)
    from_requirements = [at for at, words in enumerate(installs) if "-r" in words]
    for at, words in enumerate(installs):
        wanted = [word for word in words if name.match(word)]
        if not wanted:
            continue
        if wanted != [f"torch=={torch}"]:
            problems.append(f"pip install {words}: torch is not pinned to torch=={torch}")
        indexes = [
            words[i + 1] for i, word in enumerate(words[:-1]) if word in {"-i", "--index-url"}
        ]
        if indexes != [TORCH_CPU_INDEX]:
            problems.append(f"pip install {words}: not from {TORCH_CPU_INDEX} alone")
        if {"--extra-index-url", "-f", "--find-links"} & set(words) or "--no-index" in words:
            problems.append(f"pip install {words}: another index can offer torch")
        if not from_requirements or at > from_requirements[0]:
            problems.append(f"pip install {words}: not before requirements.txt's install")
    if not any(any(name.match(word) for word in words) for words in installs):
        problems.append("torch is only installed from requirements.txt, PyPI's CUDA build too")
    return problems


def test_the_image_installs_the_pinned_torch_from_the_cpu_index_alone(tmp_path: Path) -> None:
    """PyPI's Linux torch is a multi-GB CUDA build: the image installs the pinned version's
    CPU build from PyTorch's CPU index, and requirements.txt's torch is then satisfied."""
    pytest.importorskip("torch")
    sandbox_image.write_context(tmp_path)
    torch = metadata.version("torch").split("+")[0]
    assert torch == "2.13.0"  # the [torch] extra's pin
    dockerfile = (tmp_path / "Dockerfile").read_text()
    requirements = (tmp_path / "requirements.txt").read_text()
    assert _torch_problems(dockerfile, requirements, torch) == []
    assert "ARG TORCH_VERSION=2.13.0\n" in dockerfile


def test_without_torch_the_image_installs_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dockerfile_parse import DockerfileParser

    from pytest_clinaudit.adapters.pins import AgentPins

    pins = AgentPins(("numpy==2.0.0",), torch=False, cohorts=False)
    monkeypatch.setattr(sandbox_image, "agent_pins", lambda: pins)
    sandbox_image.write_context(tmp_path)
    parser = DockerfileParser(path=str(tmp_path / "Dockerfile"))
    assert parser.args == {"TORCH_VERSION": ""}
    # The one RUN that names torch installs it only when TORCH_VERSION is set.
    (run,) = [
        s["value"] for s in parser.structure if s["instruction"] == "RUN" and "torch" in s["value"]
    ]
    assert run.startswith('if [ -n "$TORCH_VERSION" ]; then ')
    assert run.endswith("fi")


_PINNED = "torch==2.13.0\n"
_REQUIREMENTS = "RUN python -m pip install -r /tmp/requirements.txt\n"


@pytest.mark.parametrize(
    ("dockerfile", "requirements"),
    [
        pytest.param(_REQUIREMENTS, _PINNED, id="from-requirements-alone"),
        pytest.param(_REQUIREMENTS, "torch\n", id="unpinned-requirement"),
        pytest.param(f"RUN pip install torch\n{_REQUIREMENTS}", _PINNED, id="unpinned"),
        pytest.param(f"RUN pip install torch==2.13.0\n{_REQUIREMENTS}", _PINNED, id="pypi"),
        pytest.param(
            f"RUN pip install --extra-index-url {TORCH_CPU_INDEX} torch==2.13.0\n{_REQUIREMENTS}",
            _PINNED,
            id="extra-index",
        ),
        pytest.param(
            f"RUN pip install --index-url {TORCH_CPU_INDEX} torch>=2.13\n{_REQUIREMENTS}",
            _PINNED,
            id="range",
        ),
        pytest.param(
            f"{_REQUIREMENTS}RUN pip install --index-url {TORCH_CPU_INDEX} torch==2.13.0\n",
            _PINNED,
            id="after-requirements",
        ),
        pytest.param(
            f"ARG T=2.12.0\nRUN pip install -i {TORCH_CPU_INDEX} torch==$T\n{_REQUIREMENTS}",
            _PINNED,
            id="another-version",
        ),
    ],
)
def test_an_unpinned_or_cuda_torch_in_the_image_is_a_problem(
    dockerfile: str, requirements: str
) -> None:
    """The check above fails on each way the image could get an unpinned or CUDA torch."""
    good = f"FROM python:3.12-slim\nARG T=2.13.0\nRUN pip install -i {TORCH_CPU_INDEX} torch==${{T}}\n{_REQUIREMENTS}"
    assert _torch_problems(good, _PINNED, "2.13.0") == []  # the control
    assert _torch_problems(f"FROM python:3.12-slim\n{dockerfile}", requirements, "2.13.0")


def test_the_images_pins_are_the_metr_familys_and_this_environments(tmp_path: Path) -> None:
    from pytest_clinaudit.adapters.metr import export_metr

    family = export_metr(tmp_path / "metr")
    sandbox_image.write_context(tmp_path / "context")
    image = (tmp_path / "context" / "requirements.txt").read_text()
    assert image == (family / "requirements.txt").read_text()
    pins = dict(line.split("==") for line in image.splitlines() if "==" in line)
    for name in ("numpy", "scipy", "scikit-learn", "xgboost", "torch", "pandas"):
        # The test extra installs them all; a local label (+cpu) names the host's build.
        assert pins[name] == metadata.version(name).split("+")[0], name
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
