"""clinaudit pool build and grade-many --scheduler on real local Dask clusters (slow).

A real instance built on a Dask worker, one of whose workers is killed with
SIGKILL mid-build, is byte-identical to ``clinaudit build --like`` of its
manifest run here without a cache; fake builds (tests/pool_helpers.py) on a
real cluster survive a killed worker and Ctrl-C; ``grade-many --scheduler``
grades as the fork executor does.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from game_helpers import GAME, game_variant, secret_for
from pool_helpers import fake_files

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.instances import _secret_key
from pytest_clinaudit.pool.task import BuildSpec

pytestmark = pytest.mark.slow
HELPER = Path(__file__).parent / "pool_helpers.py"
VOLATILE = ("created", "seconds")
"""Manifest fields a rebuild of the same instance changes (when, and how long)."""


def _env(**more: str) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **more}
    env.pop("ATEN_CPU_CAPABILITY", None)
    return {**env, **more}


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def _journal(pool: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (pool / "journal.jsonl").read_text().splitlines()]


def _children(pid: int) -> list[Any]:
    import psutil

    return psutil.Process(pid).children(recursive=True)


def _wait(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(0.2)


def test_an_instance_built_on_a_killed_cluster_is_the_instance_build_like_makes_here(
    tmp_path: Path,
) -> None:
    """The real build: a worker is killed (SIGKILL) while it trains, Dask reruns the task,
    and the pool's instance is byte for byte what `clinaudit build --like` makes here."""
    cache = ReferenceCache(tmp_path / "cache")
    variant = game_variant()
    # The test suite's known-good secret for instance 1, as if this cache had drawn it.
    cache.put(
        "game-secrets",
        _secret_key(variant, 1),
        {"secret": secret_for(1)},
        payload={"variant": GAME, "seed": 1},
    )
    pool = tmp_path / "pool"
    command = [sys.executable, "-m", "pytest_clinaudit.cli", "pool", "build", "--variant", GAME]
    command += ["--seeds", "1", "--out", str(pool), "--workers", "2"]
    command += ["--cache-dir", str(cache.directory)]
    process = subprocess.Popen(command, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    killed = None
    deadline = time.monotonic() + 900
    while process.poll() is None and time.monotonic() < deadline:
        busy = [c for c in _children(process.pid) if c.cpu_times().user > 15]
        if busy and killed is None:
            killed = busy[0].pid
            os.kill(killed, signal.SIGKILL)  # as the OOM killer would, mid-training
        time.sleep(1)
    stdout, stderr = process.communicate(timeout=60)
    assert killed is not None, "no worker was ever busy building"
    assert process.returncode == 0, stderr.decode()[-3000:]
    (entry,) = _journal(pool)
    assert entry["status"] == "finished"
    folder = pool / f"{GAME}-1"
    manifest = json.loads((folder / "grader" / "manifest.json").read_text())
    assert manifest["secret"] == secret_for(1)

    local = tmp_path / "local"
    rebuild = [sys.executable, "-m", "pytest_clinaudit.cli", "build", "--variant", GAME]
    rebuild += ["--like", str(folder / "grader" / "manifest.json"), "--out", str(local)]
    rebuild += ["--no-cache", "-q"]
    subprocess.run(rebuild, env=_env(ATEN_CPU_CAPABILITY="default"), check=True)
    built, here = _files(folder), _files(local)
    assert sorted(built) == sorted(here)
    for name in built:
        if name != "grader/manifest.json":
            assert built[name] == here[name], name
    again = json.loads(here["grader/manifest.json"])
    assert {k: v for k, v in manifest.items() if k not in VOLATILE} == {
        k: v for k, v in again.items() if k not in VOLATILE
    }
    index = json.loads((pool / "index.json").read_text())
    assert index["capability"] == "default"
    assert index["instances"][0]["programs"] == manifest["programs"]


def test_fake_builds_on_a_local_cluster_survive_a_killed_worker(tmp_path: Path) -> None:
    started = tmp_path / "started"
    started.mkdir()
    pool = tmp_path / "pool"
    env = _env(
        CLINAUDIT_FAKE_SECONDS="4", CLINAUDIT_FAKE_STARTED=str(started), CLINAUDIT_FAKE_PIN="1"
    )
    command = [sys.executable, str(HELPER), "--variant", GAME, "--seeds", "1-4"]
    command += ["--out", str(pool), "--workers", "2", "--cache-dir", str(tmp_path / "cache")]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait(lambda: any(started.iterdir()), 120, "a build to start")
    first = next(started.iterdir())
    os.kill(int(first.suffix[1:]), signal.SIGKILL)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr.decode()[-3000:]
    journal = _journal(pool)
    assert sorted(e["instance"] for e in journal) == [f"{GAME}-{s}" for s in (1, 2, 3, 4)]
    assert {e["status"] for e in journal} == {"finished"}
    # The killed build's instance ran again, and made the same bytes.
    killed_seed = int(first.stem)
    assert len([p for p in started.iterdir() if p.stem == str(killed_seed)]) >= 2
    for seed in (1, 2, 3, 4):
        folder = pool / f"{GAME}-{seed}"
        secret = json.loads((folder / "grader" / "manifest.json").read_text())["secret"]
        assert _files(folder) == fake_files(BuildSpec(GAME, seed, secret, "default", {}))


def test_ctrl_c_on_a_local_cluster_keeps_the_journal_whole_and_a_rerun_resumes(
    tmp_path: Path,
) -> None:
    pool = tmp_path / "pool"
    command = [sys.executable, str(HELPER), "--variant", GAME, "--seeds", "1-8"]
    command += ["--out", str(pool), "--workers", "2", "--cache-dir", str(tmp_path / "cache")]
    process = subprocess.Popen(
        command,
        env=_env(CLINAUDIT_FAKE_SECONDS="4"),  # 2 s: in one loaded CI run all 8 ended first
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    journal = pool / "journal.jsonl"
    _wait(lambda: journal.is_file() and journal.read_text().count("\n") >= 1, 120, "an instance")
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 130, stderr.decode()[-3000:]
    assert "interrupted" in stderr.decode()
    done = {e["instance"] for e in _journal(pool)}
    assert 1 <= len(done) < 8
    for name in done:
        assert (pool / name / "grader" / "manifest.json").is_file()
    rerun = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    names = [e["instance"] for e in _journal(pool)]
    assert sorted(names) == sorted(f"{GAME}-{s}" for s in range(1, 9))  # each exactly once


def test_grade_many_on_a_scheduler_grades_as_the_fork_executor_does(
    graded_batch: Any, tmp_path: Path
) -> None:
    import distributed

    out = tmp_path / "out"
    argv = ["grade-many", str(graded_batch.directory / "manifest.jsonl"), "--out", str(out)]
    argv += ["--cache-dir", str(graded_batch.cache_dir), "-q"]
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
    ) as cluster:
        command = [sys.executable, "-m", "pytest_clinaudit.cli", *argv]
        command += ["--scheduler", cluster.scheduler_address]
        result = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=900)
    assert result.returncode == graded_batch.exit_status, result.stderr[-3000:]
    fork = graded_batch.out
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in fork.iterdir())
    for path in sorted(fork.glob("*.score.json")):
        assert json.loads((out / path.name).read_text()) == json.loads(path.read_text()), path.name

    def records(folder: Path, name: str) -> list[dict[str, Any]]:
        lines = (folder / name).read_text().splitlines()
        found = [{k: v for k, v in json.loads(line).items() if k != "seconds"} for line in lines]
        return sorted(found, key=lambda record: json.dumps(record, sort_keys=True))

    for name in ("runs.jsonl", "errors.jsonl"):
        assert records(out, name) == records(fork, name), name
