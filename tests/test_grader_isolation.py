"""A workspace cannot configure its own grading (issue 26, part 5).

An agent writes an ini file (``pytest.ini``, ``pyproject.toml``, ``tox.ini``,
``setup.cfg``) or a ``conftest.py`` beside its report, each loading a plugin of
its own that forges the grade to 1.0. The report is an empty JSON object,
which deserves 0. It is graded by every command the project documents:
``clinaudit grade`` (the command ``clinaudit build`` prints), run from outside
the workspace and from inside it; the bare ``pytest --submission ...`` from
both places; and the runner behind the METR task family, the Inspect scorer
and ``clinaudit grade-many`` (both executors), under an environment that
points PYTEST_ADDOPTS, PYTEST_PLUGINS and PYTHONPATH at the workspace. No
route scores above 0; the isolated ones never load the plugin, and the bare
form refuses with one line where pytest would take the workspace's ini file,
conftest.py or plugin.

The control test shows that the plugin does forge 1.0 once it is loaded, so the
other tests would fail if any route loaded it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import warm_cache_dir
from hostile_workspace import CONFIGURATIONS, FORGER, PLUGIN, loaded, plant, point_at
from workspace_helpers import workspace_copy

from pytest_clinaudit.adapters.workspace import GRADER_DIR, MANIFEST_NAME, WORKSPACE_DIR
from pytest_clinaudit.batch.executor import Session, make_executor
from pytest_clinaudit.grading import isolation, runner

VARIANT = "wdbc-hard"
REFUSAL = "clinaudit: refusing to grade:"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return warm_cache_dir(tmp_path_factory)


def _hostile_run(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, files: list[str]
) -> Path:
    """A built wdbc-hard run whose workspace holds an empty report, the forger and ``files``."""
    run = workspace_copy(tmp_path_factory, VARIANT, tmp_path / "run")
    workspace = run / WORKSPACE_DIR
    (workspace / "report.json").write_text("{}\n", encoding="utf-8")
    plant(workspace, files)
    return run


def _loaded(run: Path) -> list[Path]:
    return loaded(run / WORKSPACE_DIR)


def _score(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> Any:
    return subprocess.run(
        command,
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def _environment(cache: Path) -> dict[str, str]:
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in isolation.CONFIGURING_VARIABLES and not name.startswith("PYTEST_XDIST")
    }
    env["CLINAUDIT_CACHE_DIR"] = str(cache)
    return env


def _hostile_environment(cache: Path, workspace: Path) -> dict[str, str]:
    return point_at(_environment(cache), workspace)


def _clinaudit() -> str:
    script = Path(sys.executable).with_name("clinaudit")
    return str(script) if script.exists() else shutil.which("clinaudit") or "clinaudit"


# ------------------------------------------------------------------------ control


def test_the_forger_scores_an_empty_report_one_once_it_is_loaded(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cache: Path
) -> None:
    # Loaded from a folder of the grader's (not the submission's), the forger works:
    # the other tests would see 1.0 if any route loaded it from the workspace.
    run = _hostile_run(tmp_path_factory, tmp_path, [])
    grader_side = tmp_path / "grader-plugins"
    grader_side.mkdir()
    (grader_side / f"{PLUGIN}.py").write_text(FORGER, encoding="utf-8")
    env = _environment(cache)
    env["PYTHONPATH"] = str(grader_side)
    score = tmp_path / "score.json"
    args = runner.session_args(
        run / WORKSPACE_DIR / "report.json", VARIANT, score_json=score, extra=("-p", PLUGIN)
    )
    finished = runner.run_session(args, timeout=600, env=env)
    assert finished.exit_code == 1, finished.output
    assert _score(score)["score"] == 1.0
    assert list(grader_side.glob("LOADED-*"))


# ----------------------------------------------------------------- clinaudit grade


@pytest.mark.parametrize("inside", [False, True], ids=["from-outside", "from-inside"])
@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_clinaudit_grade_reads_nothing_the_workspace_wrote(
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    cache: Path,
    name: str,
    inside: bool,
) -> None:
    run = _hostile_run(tmp_path_factory, tmp_path, [name])
    workspace = run / WORKSPACE_DIR
    score = tmp_path / "score.json"
    result = _run(
        [
            _clinaudit(),
            "grade",
            str(workspace / "report.json"),
            "--variant",
            VARIANT,
            "--manifest",
            str(run / GRADER_DIR / MANIFEST_NAME),
            "--score-json",
            str(score),
        ],
        cwd=workspace if inside else tmp_path,
        env=_hostile_environment(cache, workspace),
    )
    assert result.returncode == 1, result.stdout + result.stderr  # graded; checks failed
    assert f"clinaudit: {VARIANT} score 0.000 (profile strict) category empty" in result.stdout
    assert f"FAIL {VARIANT}::json-object:" in result.stdout
    assert _score(score)["score"] == 0.0
    assert _loaded(run) == []


# ------------------------------------------------------------------- bare pytest


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_bare_pytest_from_inside_the_workspace_refuses_to_grade(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cache: Path, name: str
) -> None:
    run = _hostile_run(tmp_path_factory, tmp_path, [name])
    workspace = run / WORKSPACE_DIR
    score, junit = tmp_path / "score.json", tmp_path / "junit.xml"
    result = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--submission",
            "report.json",
            "--variant",
            VARIANT,
            "--clinaudit-manifest",
            str(run / GRADER_DIR / MANIFEST_NAME),
            "--clinaudit-score-json",
            str(score),
            "--junitxml",
            str(junit),
        ],
        cwd=workspace,
        env=_environment(cache),
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    refusals = [line for line in result.stderr.splitlines() if REFUSAL in line]
    assert len(refusals) == 1, result.stderr
    assert f"inside {workspace.resolve()}, the submission's folder" in refusals[0]
    document = _score(score)
    assert (document["score"], document["category"], document["refused"]) == (0.0, "refused", True)
    assert REFUSAL in document["error"]
    assert 'name="clinaudit.score" value="0.000000"' in junit.read_text(encoding="utf-8")


@pytest.mark.parametrize("name", sorted(CONFIGURATIONS))
def test_bare_pytest_from_outside_the_workspace_refuses_or_grades_without_the_agents_code(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cache: Path, name: str
) -> None:
    run = _hostile_run(tmp_path_factory, tmp_path, [name])
    score = tmp_path / "score.json"
    result = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--submission",
            str(Path(WORKSPACE_DIR) / "report.json"),
            "--variant",
            VARIANT,
            "--clinaudit-manifest",
            str(Path(GRADER_DIR) / MANIFEST_NAME),
            "--clinaudit-score-json",
            str(score),
        ],
        cwd=run,
        env=_environment(cache),
    )
    document = _score(score)
    assert document["score"] == 0.0
    if name == "conftest.py":
        # No ini file: rootdir is the run's folder, and pytest loads no conftest.py from
        # a path that is only an option's value. Graded, by the grader's code alone.
        assert result.returncode == 1, result.stdout + result.stderr
        assert _loaded(run) == []
    else:
        # pytest finds the ini file from --submission's value and loads the forger;
        # the plugin sees the ini file in the workspace and refuses.
        assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
        assert [line for line in result.stderr.splitlines() if REFUSAL in line]
        assert document["refused"] is True


# ------------------------------------------------- the runner: METR, Inspect, grade-many


def test_the_runner_grades_without_the_workspaces_files_or_a_hostile_environment(
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = _hostile_run(tmp_path_factory, tmp_path, sorted(CONFIGURATIONS))
    workspace = run / WORKSPACE_DIR
    monkeypatch.chdir(workspace)  # the caller's working directory is the workspace
    document = runner.grade(
        workspace / "report.json",
        VARIANT,
        manifest=run / GRADER_DIR / MANIFEST_NAME,
        cache_dir=cache,
        env=_hostile_environment(cache, workspace),
    )
    assert (document["score"], document["exit_status"]) == (0.0, 1)
    assert _loaded(run) == []


@pytest.mark.parametrize("executor", ["subprocess", "fork"])
def test_both_executors_of_grade_many_grade_without_the_workspaces_files(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cache: Path, executor: str
) -> None:
    run = _hostile_run(tmp_path_factory, tmp_path, sorted(CONFIGURATIONS))
    workspace = run / WORKSPACE_DIR
    score = tmp_path / "score.json"
    args = runner.session_args(
        workspace / "report.json",
        VARIANT,
        score_json=score,
        manifest=run / GRADER_DIR / MANIFEST_NAME,
        cache_dir=cache,
    )
    pool = make_executor(executor, 1, env=_hostile_environment(cache, workspace))
    try:
        finished = pool.run(Session(tuple(args), 600.0))
    finally:
        pool.close()
    assert finished.exit_code == 1, finished.output
    assert _score(score)["score"] == 0.0
    assert _loaded(run) == []


# ------------------------------------------------------------ the folder and its parts


def test_a_path_through_a_symlink_names_the_folder_it_resolves_to(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, cache: Path
) -> None:
    run = _hostile_run(tmp_path_factory, tmp_path, ["pytest.ini"])
    workspace = run / WORKSPACE_DIR
    link = tmp_path / "link"
    link.symlink_to(workspace, target_is_directory=True)
    score = tmp_path / "score.json"
    result = _run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--submission",
            str(link / "report.json"),
            "--variant",
            VARIANT,
            "--clinaudit-score-json",
            str(score),
        ],
        cwd=workspace,
        env=_environment(cache),
    )
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    assert f"inside {workspace.resolve()}, the submission's folder" in result.stderr
    assert _score(score)["score"] == 0.0


def test_a_symlinked_report_makes_its_targets_folder_the_agents_too(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "graded").mkdir()
    (tmp_path / "ws" / "report.json").write_text("{}")
    (tmp_path / "graded" / "report.json").symlink_to(tmp_path / "ws" / "report.json")
    folders = isolation.submission_folders(tmp_path / "graded" / "report.json")
    assert folders == ((tmp_path / "graded").resolve(), (tmp_path / "ws").resolve())
    assert isolation.inside(tmp_path / "ws" / "conftest.py", folders)
    assert not isolation.inside(tmp_path, folders)


def test_the_session_environment_drops_what_configures_pytest_and_paths_into_the_folder(
    tmp_path: Path,
) -> None:
    workspace, library = tmp_path / "ws", tmp_path / "lib"
    workspace.mkdir()
    library.mkdir()
    env = {
        "PYTEST_ADDOPTS": "-p mine",
        "PYTEST_PLUGINS": "mine",
        "PYTHONPATH": os.pathsep.join([str(workspace / "sub"), str(library), "relative"]),
        "CLINAUDIT_CACHE_DIR": "/c",
    }
    cleaned = isolation.session_environment(env, workspace / "report.json")
    assert cleaned == {
        "PYTHONPATH": os.pathsep.join([str(library), "relative"]),
        "CLINAUDIT_CACHE_DIR": "/c",
    }


def test_a_report_in_the_temporary_directory_gets_a_scratch_directory_elsewhere() -> None:
    report = Path(tempfile.gettempdir()) / "report.json"
    parent = isolation.scratch_parent(report)
    assert not isolation.inside(parent, isolation.submission_folders(report))
    with pytest.raises(RuntimeError, match="move the report into a folder of its own"):
        isolation.scratch_parent(Path("/report.json"))


def test_the_submission_is_read_from_either_spelling_of_the_flag() -> None:
    assert isolation.submission_argument(["-q", "--submission", "a/r.json"]) == Path("a/r.json")
    assert isolation.submission_argument(["--submission=b.json", "-q"]) == Path("b.json")
    assert isolation.submission_argument(["-q"]) is None


def test_imported_code_is_found_through_symlinks_and_a_relative_file_name_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import types

    workspace = tmp_path / "ws"
    (workspace / "pkg").mkdir(parents=True)
    (tmp_path / "link").symlink_to(workspace, target_is_directory=True)
    planted = types.ModuleType("planted")
    planted.__file__ = str(tmp_path / "link" / "pkg" / "planted.py")
    named = types.ModuleType("named")  # torch's _classes and _ops are named "_classes.py"
    named.__file__ = "named.py"
    monkeypatch.setitem(sys.modules, "planted", planted)
    monkeypatch.setitem(sys.modules, "named", named)
    monkeypatch.chdir(workspace)
    folders = isolation.submission_folders(workspace / "report.json")
    assert isolation.imported_from(folders) == [planted.__file__]
