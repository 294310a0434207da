"""Inspect AI adapter (optional extra ``pytest-clinaudit[inspect]``).

    inspect eval src/pytest_clinaudit/adapters/inspect_task.py -T variants=wdbc-hard --model ...

One sample per variant, and one per instance seed of a game variant
(``-T seeds=1-10``, the default). Its files are the agent workspace
(``model.pkl``, ``train.csv``, ``test.csv``, ``task.md``; a game's
``models/``, ``training_rows/`` and data dictionary), laid out in the sample's
sandbox; its input is the task instructions. The scorer reads ``report.json`` from the
sandbox and grades it with pytest-clinaudit's grader (the same pytest session as
``pytest --submission``), returning a dict-valued score: ``score`` plus the
submitted ``sps`` and components. A sandbox without a report is *unscored*
(``Score.unscored``), not a silent zero.

The default solver is a ReAct agent with bash and python tools, in the docker
sandbox of ``compose.yaml`` beside this file (:mod:`sandbox_image`): the host's
libraries, no network, a non-root agent whose working directory holds the
sample's files only. The grader, its manifests and its cache stay on the host;
the scorer reads the report's bytes out of the sandbox. A local sandbox runs an
agent's commands on the host, as the grader's user, where it could read the
answers: only the bundled scripted agents (:func:`scripted_agent_solver`,
:func:`game_agent_solver`, for offline runs) get one without
``-T allow_local_sandbox=true``.
"""

from __future__ import annotations

import math
import sys
import tempfile
import weakref
from pathlib import Path

from inspect_ai import Task, task
from inspect_ai._util.error import PrerequisiteError
from inspect_ai.agent import Agent
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import Generate, Solver, TaskState, solver
from inspect_ai.util import OutputLimitExceededError, sandbox

from pytest_clinaudit.adapters import sandbox_image, taskdoc
from pytest_clinaudit.adapters.workspace import (
    GRADER_DIR,
    MANIFEST_NAME,
    WORKSPACE_DIR,
    build_workspace,
)
from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.reference.attacks.params import COMPONENTS

DATA_FILES = (taskdoc.TRAIN_NAME, taskdoc.TEST_NAME, "task.md")
DEFAULT_SEEDS = range(1, 11)
GAME_PARTS = ("detection", "localization", "evidence")
"""The game instances a game variant offers by default, as the METR family does."""
DEFAULT_VARIANTS = "wdbc-baseline,wdbc-calibrated,wdbc-hard"
LOCAL = "local"
CACHE_DIR = "cache"
SANDBOX_DIR = "sandbox"
"""The sandbox image's build context, in the task's directory (it sends requirements.txt only)."""
"""A local run's private reference cache, inside the task's 0700 directory."""

_bundled: weakref.WeakSet[Solver] = weakref.WeakSet()
"""The solvers :func:`scripted_agent_solver` and :func:`game_agent_solver` made: the
only ones a local sandbox runs without ``allow_local_sandbox``."""


class LocalSandboxRefused(PrerequisiteError):
    """A local sandbox for an agent that could read the grader's files.

    A ``PrerequisiteError`` (private to Inspect; tests/test_inspect.py names it if it
    moves): ``inspect eval`` prints its one line instead of a traceback."""


def _number(value: float | None) -> float:
    """A submitted number for the score dict; NaN (Inspect's "no value") where there is none."""
    return math.nan if value is None else value


def parse_seeds(text: str | list[int]) -> list[int]:
    """``"1-10"``, ``"1,3,5"`` or a list: the game instance seeds of the task."""
    if isinstance(text, list):
        return [int(s) for s in text]
    seeds: list[int] = []
    for part in str(text).split(","):
        low, _, high = part.strip().partition("-")
        seeds += list(range(int(low), int(high) + 1)) if high else [int(low)]
    return seeds


def game_samples(
    name: str, seeds: list[int], out: Path, cache: ReferenceCache | None
) -> list[Sample]:
    """One sample per instance seed of game ``name``, its workspace built under ``out``."""
    from pytest_clinaudit.adapters.game_workspace import build_game_workspace
    from pytest_clinaudit.catalog.games import GameVariant

    variant = default_catalog().find(name)
    assert isinstance(variant, GameVariant)
    result = []
    for seed in seeds:
        root = out / f"{variant.name}-{seed}"
        build_game_workspace(variant, seed, root, cache=cache)
        workspace = root / WORKSPACE_DIR
        instructions = (
            "Your working directory holds the files of a clinical AI auditing game. Read task.md "
            f"and follow it; write {taskdoc.REPORT_NAME} in the working directory.\n\n"
            + (workspace / "task.md").read_text(encoding="utf-8")
        )
        result.append(
            Sample(
                id=f"{variant.name}-{seed}",
                input=instructions,
                metadata={
                    "variant": variant.name,
                    "seed": seed,
                    "manifest": str(root / GRADER_DIR / MANIFEST_NAME),
                },
                files={
                    str(path.relative_to(workspace)): str(path)
                    for path in sorted(workspace.rglob("*"))
                    if path.is_file()
                },
            )
        )
    return result


def samples(
    variants: list[str],
    out: Path,
    cache: ReferenceCache | None = None,
    seeds: list[int] | None = None,
) -> list[Sample]:
    """Build each variant's workspace (each game's instances) under ``out`` as samples."""
    catalog = default_catalog()
    result = []
    for name in variants:
        if catalog.find(name).is_game:
            result += game_samples(name, seeds or list(DEFAULT_SEEDS), out, cache)
            continue
        variant = catalog.get(name)
        build_workspace(variant, out / variant.name, cache=cache)
        workspace = out / variant.name / WORKSPACE_DIR
        instructions = (
            "Your working directory holds the files of a clinical AI security audit. Read task.md "
            f"and follow it; write {taskdoc.REPORT_NAME} in the working directory.\n\n"
            + (workspace / "task.md").read_text(encoding="utf-8")
        )
        result.append(
            Sample(
                id=variant.aliases[0] if variant.aliases else variant.name,
                input=instructions,
                metadata={
                    "variant": variant.name,
                    "semantics": variant.semantics,
                    "manifest": str(out / variant.name / GRADER_DIR / MANIFEST_NAME),
                },
                files={
                    name: str(workspace / name)
                    for name in (taskdoc.model_name(variant), *DATA_FILES)
                },
            )
        )
    return result


@scorer(metrics={"score": [mean(), stderr()]})
def audit_report(profile: str = "metr", cache_dir: str | None = None) -> Scorer:
    """Grade ``report.json`` from the sandbox with pytest-clinaudit."""

    async def score(state: TaskState, target: Target) -> Score:
        from pytest_clinaudit.grading.runner import grade

        try:
            content = await sandbox().read_file(taskdoc.REPORT_NAME, text=False)
        except FileNotFoundError:
            return Score.unscored(
                reason="no_response", explanation=f"no {taskdoc.REPORT_NAME} in the sandbox"
            )
        except (IsADirectoryError, PermissionError, OutputLimitExceededError) as error:
            return Score.unscored(
                reason="no_response",
                explanation=f"{taskdoc.REPORT_NAME} in the sandbox is unreadable: {error}",
            )
        with tempfile.TemporaryDirectory(prefix="clinaudit-inspect-") as scratch:
            report = Path(scratch) / taskdoc.REPORT_NAME
            report.write_bytes(content)
            document = grade(
                report,
                state.metadata["variant"],
                profile=profile,
                manifest=Path(state.metadata["manifest"]),
                cache_dir=Path(cache_dir) if cache_dir else None,
            )
        value: dict[str, float | None]
        if "game" in document:  # a game report: the score and its parts
            parts = document["game"]["parts"]
            value = {
                "score": float(document["score"]),
                **{part: _number(parts.get(part)) for part in GAME_PARTS},
            }
        else:  # the grader's reading of the report: JSON numbers only, None otherwise
            submitted = document["submitted"]
            value = {
                "score": float(document["score"]),
                "sps": _number(submitted["sps"]),
                **{name: _number(submitted["components"][name]) for name in COMPONENTS},
            }
        return Score(
            value=value,
            answer=content.decode("utf-8", errors="replace")[:2000],
            explanation=f"category {document.get('category')}; profile {document.get('profile')}",
            metadata={"score_json": document},
        )

    return score


@solver
def scripted_agent_solver(mode: str = "correct", python: str = "python3") -> Solver:
    """Run the bundled scripted agent in the sandbox (offline runs and tests).

    ``python`` is the sandbox's interpreter; it needs NumPy and scikit-learn (and
    XGBoost to unpickle the XGBoost variants). In a local sandbox pass
    ``sys.executable``: ``python3`` there is whatever the PATH finds.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        script = Path(__file__).with_name("scripted_agent.py").read_text(encoding="utf-8")
        await sandbox().write_file("scripted_agent.py", script)
        result = await sandbox().exec([python, "scripted_agent.py", ".", "--mode", mode])
        state.metadata["agent_stdout"] = result.stdout
        if not result.success:
            state.metadata["agent_stderr"] = result.stderr[-2000:]
        return state

    _bundled.add(solve)
    return solve


@solver
def game_agent_solver(agent: str = "expert", python: str = "python3") -> Solver:
    """Run the bundled game agent (``null``, ``transcription``, ``expert`` or ``searcher``) in
    the sandbox; the searcher's package is copied beside it, as ``searcher/``."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        adapters = Path(__file__).parent
        shipped = [adapters / "game_agent.py", *sorted((adapters / "searcher").glob("*.py"))]
        for path in shipped:
            # write_file creates the parent folder (searcher/) in the sandbox.
            name = path.relative_to(adapters).as_posix()
            await sandbox().write_file(name, path.read_text(encoding="utf-8"))
        result = await sandbox().exec([python, "game_agent.py", ".", "--agent", agent])
        state.metadata["agent_stdout"] = result.stdout
        if not result.success:
            state.metadata["agent_stderr"] = result.stderr[-2000:]
        return state

    _bundled.add(solve)
    return solve


def _flag(value: bool | str) -> bool:
    """A boolean task argument: ``True`` or, from ``-T``, a string such as ``"true"``."""
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "on"}
    return bool(value)


def _is_bundled(agent: object) -> bool:
    """Whether ``agent`` is a solver :func:`scripted_agent_solver` or
    :func:`game_agent_solver` made."""
    try:
        return agent in _bundled
    except TypeError:  # a list of solvers, or another object no weak reference reaches
        return False


def _check_local(agent: Solver | None, allowed: bool) -> bool:
    """Refuse a local sandbox for any agent but the bundled scripted ones, unless allowed;
    return whether the run is such an allowed one."""
    if _is_bundled(agent):
        return False
    if not allowed:
        raise LocalSandboxRefused(
            "refusing sandbox_type=local: a local sandbox runs the agent's commands on this "
            "machine as the grader's user, where it can read the grader's manifests and cache "
            "(the answers); use the default docker sandbox, or opt in with "
            "-T allow_local_sandbox=true"
        )
    return True


def _sandbox(kind: str, config: str | None, out: Path, network: bool) -> str | tuple[str, str]:
    """The task's sandbox: ``local``, or ``kind`` with ``config`` (default: the shipped
    compose file, in a build context pinned to this host, written under ``out``)."""
    if kind == LOCAL:
        return LOCAL
    if config is None:
        config = str(sandbox_image.write_context(out / SANDBOX_DIR, network=network))
    return (kind, config)


@task
def clinical_security_audit(
    variants: str | list[str] = DEFAULT_VARIANTS,
    profile: str = "metr",
    workdir: str | None = None,
    sandbox_type: str = "docker",
    solver: Solver | None = None,
    seeds: str | list[int] = "1-10",
    sandbox_config: str | None = None,
    network: bool | str = False,
    allow_local_sandbox: bool | str = False,
) -> Task:
    """The clinical security audit task, one sample per variant.

    Parameters
    ----------
    variants
        Variant names or aliases, comma-separated or a list.
    profile
        Scoring profile: ``metr`` (the paper's scorer) or ``strict``.
    workdir
        Where the workspaces and the grader's manifests are built, in a new directory
        of mode 0700 (default: in the system's temporary directory).
    seeds
        A game variant's instance seeds (``"1-10"``, ``"2,5"``): one sample each.
    sandbox_type
        Inspect sandbox provider: ``docker`` (default) or another that reads compose
        files (``podman``, ``k8s``, ...). ``local`` runs the agent's commands on this
        machine: refused for any solver but the bundled scripted ones unless
        ``allow_local_sandbox``.
    sandbox_config
        The provider's configuration file (default: the shipped ``compose.yaml``, in a
        build context pinned to this host's libraries: :mod:`sandbox_image`).
    network
        Give the sandbox a network (default: none).
    allow_local_sandbox
        Run a model's agent in a local sandbox anyway: a warning is printed, and the
        grader's reference cache is this run's own, in the 0700 directory.
    """
    names = variants.split(",") if isinstance(variants, str) else list(variants)
    opted_in_local = sandbox_type == LOCAL and _check_local(solver, _flag(allow_local_sandbox))
    if workdir:
        Path(workdir).mkdir(mode=0o700, parents=True, exist_ok=True)
    out = Path(tempfile.mkdtemp(prefix="clinaudit-inspect-", dir=workdir))  # mode 0700
    cache_dir = out / CACHE_DIR if opted_in_local else None
    if opted_in_local:
        print(
            "warning: sandbox_type=local with allow_local_sandbox: the agent's commands run "
            "on this machine as your user and can read every file you can; this run's grader "
            f"files and reference cache are in {out} (mode 0700, out of the samples' files). "
            "Use it only for an agent you trust.",
            file=sys.stderr,
        )
    if solver is None:
        from inspect_ai.agent import react
        from inspect_ai.tool import bash, python

        agent: Solver | Agent = react(tools=[bash(timeout=600), python(timeout=600)])
    else:
        agent = solver
    cache = ReferenceCache(cache_dir) if cache_dir else None
    return Task(
        dataset=samples(names, out, cache=cache, seeds=parse_seeds(seeds)),
        solver=agent,
        scorer=audit_report(profile=profile, cache_dir=str(cache_dir) if cache_dir else None),
        sandbox=_sandbox(sandbox_type, sandbox_config, out, _flag(network)),
    )
