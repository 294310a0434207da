"""clinaudit pool build: the pool folder, its journal and index, resuming, refusing workers.

These tests inject a fast fake builder (tests/pool_helpers.py) into the command's own
code path and run its tasks on a fake client's threads; test_pool_cluster.py runs real
local Dask clusters and real builds (slow).
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from pool_helpers import FakeClient, fake_files, fake_opener, run_pool_build

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.instances import instance_libraries, instance_secret
from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.cli import main
from pytest_clinaudit.pool.cluster import refusals, worker_environment
from pytest_clinaudit.pool.layout import PoolDir, PoolError, parse_seeds, safe_relative
from pytest_clinaudit.pool.progress import PoolProgress
from pytest_clinaudit.pool.task import BuildSpec

GAME = "icu-synth-game"


def _build(tmp_path: Path, seeds: str, *more: str, client: FakeClient | None = None) -> int:
    client = client or FakeClient()
    argv = ["--variant", GAME, "--seeds", seeds, "--out", str(tmp_path / "pool")]
    argv += ["--cache-dir", str(tmp_path / "cache"), "-q", *more]
    return run_pool_build(argv, opener=fake_opener(client))


def _journal(pool: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (pool / "journal.jsonl").read_text().splitlines()]


def test_seeds_are_ranges_and_lists_each_seed_once() -> None:
    assert parse_seeds("1-3") == [1, 2, 3]
    assert parse_seeds("5,1-2,2,7-7") == [5, 1, 2, 7]
    for bad in ("", "a", "3-1", "-2", "1-x"):
        with pytest.raises(PoolError, match="--seeds"):
            parse_seeds(bad)


def test_a_pool_holds_one_build_layout_per_instance_and_a_journal_and_an_index(
    tmp_path: Path,
) -> None:
    assert _build(tmp_path, "1-3") == 0
    pool = tmp_path / "pool"
    assert sorted(p.name for p in pool.iterdir()) == [
        f"{GAME}-1",
        f"{GAME}-2",
        f"{GAME}-3",
        "index.json",
        "journal.jsonl",
    ]
    variant = default_catalog().find(GAME)
    cache = ReferenceCache(tmp_path / "cache")
    secrets = set()
    for seed in (1, 2, 3):
        folder = pool / f"{GAME}-{seed}"
        assert sorted(p.name for p in folder.iterdir()) == ["grader", "workspace"]
        manifest = json.loads((folder / "grader" / "manifest.json").read_text())
        # Its own secret, drawn as `clinaudit build` draws it (kept in this machine's cache).
        assert manifest["secret"] == instance_secret(variant, seed, cache)  # type: ignore[arg-type]
        secrets.add(manifest["secret"])
        spec = BuildSpec(GAME, seed, manifest["secret"], "default", {})
        written = {
            p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*")
            if p.is_file()
        }
        assert written == fake_files(spec)
        # The agent's folder holds nothing of the grader's.
        for path in (folder / "workspace").rglob("*"):
            assert not path.is_file() or manifest["secret"].encode() not in path.read_bytes()
    assert len(secrets) == 3
    journal = _journal(pool)
    # One line per instance, in the order they ended.
    assert sorted((e["instance"], e["status"]) for e in journal) == [
        (f"{GAME}-{s}", "finished") for s in (1, 2, 3)
    ]
    index = json.loads((pool / "index.json").read_text())
    assert index["capability"] == "default"
    assert index["libraries"] == instance_libraries()
    assert index["counts"] == {"finished": 3, "failed": 0}
    assert [row["name"] for row in index["instances"]] == [f"{GAME}-{s}" for s in (1, 2, 3)]
    first = json.loads((pool / f"{GAME}-1" / "grader" / "manifest.json").read_text())
    assert index["instances"][0]["programs"] == first["programs"]
    assert index["instances"][0]["artifact_sha256"] == first["artifact_sha256"]
    # Neither the journal nor the index holds a secret or the ground truth.
    for name in ("journal.jsonl", "index.json"):
        text = (pool / name).read_text()
        assert "truth" not in text
        assert not any(secret in text for secret in secrets)


def test_a_rerun_skips_finished_instances_and_failed_ones_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLINAUDIT_FAKE_FAIL", "2")
    assert _build(tmp_path, "1-3") == 1
    pool = tmp_path / "pool"
    (failed,) = [e for e in _journal(pool) if e["status"] == "failed"]
    assert failed["instance"] == f"{GAME}-2"
    assert failed["reason"] == "RuntimeError: instance 2: 8 attempt(s) left measurements ambiguous"
    assert not (pool / f"{GAME}-2").exists()
    before = (pool / f"{GAME}-1" / "grader" / "manifest.json").stat().st_mtime_ns

    client = FakeClient()
    assert _build(tmp_path, "1-4", client=client) == 1  # instance 2 is still failed
    assert client.submitted == 1  # instance 4 only
    assert (pool / f"{GAME}-1" / "grader" / "manifest.json").stat().st_mtime_ns == before

    monkeypatch.delenv("CLINAUDIT_FAKE_FAIL")
    client = FakeClient()
    assert _build(tmp_path, "1-4", "--retry-failed", client=client) == 0
    assert client.submitted == 1
    index = json.loads((pool / "index.json").read_text())
    assert index["counts"] == {"finished": 4, "failed": 0}
    assert [e["status"] for e in _journal(pool) if e["instance"] == f"{GAME}-2"] == [
        "failed",
        "finished",
    ]


def test_ctrl_c_leaves_a_journal_of_whole_instances_and_a_rerun_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLINAUDIT_FAKE_INTERRUPT", "3")
    assert _build(tmp_path, "1-3") == 130
    pool = tmp_path / "pool"
    journaled = {e["instance"] for e in _journal(pool)}
    assert f"{GAME}-3" not in journaled
    for name in journaled:  # every journaled instance is whole
        assert (pool / name / "grader" / "manifest.json").is_file()
    assert not (pool / ".staging").exists() or not any((pool / ".staging").iterdir())
    # Which of 1 and 2 finished before 3's Ctrl-C depends on the threads' timing.
    secrets = {name: _secret(pool, name) for name in journaled}

    monkeypatch.delenv("CLINAUDIT_FAKE_INTERRUPT")
    client = FakeClient()
    assert _build(tmp_path, "1-3", client=client) == 0
    assert client.submitted == 3 - len(journaled)
    assert PoolDir(pool).finished() == {f"{GAME}-{s}" for s in (1, 2, 3)}
    assert {name: _secret(pool, name) for name in journaled} == secrets  # kept, not rebuilt


def _secret(pool: Path, name: str) -> str:
    return str(json.loads((pool / name / "grader" / "manifest.json").read_text())["secret"])


def test_a_torn_journal_line_and_a_half_staged_instance_are_left_behind(tmp_path: Path) -> None:
    assert _build(tmp_path, "1-2") == 0
    pool = tmp_path / "pool"
    with (pool / "journal.jsonl").open("a") as journal:
        journal.write('{"instance": "icu-synth-game-3", "sta')  # killed mid-write
    (pool / ".staging" / "icu-synth-game-3.ab12").mkdir(parents=True)
    client = FakeClient()
    assert _build(tmp_path, "1-3", client=client) == 0
    assert client.submitted == 1
    assert {e["instance"] for e in _journal_lenient(pool)} == {f"{GAME}-{s}" for s in (1, 2, 3)}
    assert not (pool / ".staging").exists()


def _journal_lenient(pool: Path) -> list[dict[str, Any]]:
    found = []
    for line in (pool / "journal.jsonl").read_text().splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def test_a_worker_returning_files_outside_the_instance_fails_that_instance_only(
    tmp_path: Path,
) -> None:
    for bad in ("../x", "/etc/x", "model.pt2", "workspace", "grader/../../x"):
        with pytest.raises(ValueError, match="outside"):
            safe_relative(bad)
    assert safe_relative("workspace/models/m1.pt2").parts[0] == "workspace"


def test_a_pool_built_on_other_kernels_or_libraries_is_not_added_to(tmp_path: Path) -> None:
    assert _build(tmp_path, "1") == 0
    stderr = io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stderr", stderr)
        assert _build(tmp_path, "2", "--capability", "avx2") == 2
    assert stderr.getvalue().strip().splitlines() == [
        f"clinaudit pool build: error: {tmp_path / 'pool'} was built on the default torch "
        "kernels, not avx2: pass --capability default or use a new --out"
    ]
    index = tmp_path / "pool" / "index.json"
    document = json.loads(index.read_text())
    document["libraries"]["torch"] = "2.0.0"
    index.write_text(json.dumps(document))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stderr", stderr := io.StringIO())
        assert _build(tmp_path, "2") == 2
    assert "was built with torch 2.0.0, here it is" in stderr.getvalue()


def test_workers_with_other_libraries_or_kernels_are_refused_by_name() -> None:
    here = {"python": "3.11.2", "numpy": "2.1.0", "torch": "2.13.0"}
    workers = {
        "tcp://10.0.0.2:4000": {"libraries": dict(here), "capability": "default"},
        "tcp://10.0.0.3:4000": {
            "libraries": {"python": "3.11.2", "numpy": "2.1.0", "torch": "not installed"}
        },
        "tcp://10.0.0.4:4000": {
            "libraries": {**here, "numpy": "1.26.4"},
            "capability": "avx512",
        },
    }
    assert refusals(here, workers, capability="default") == [
        "worker tcp://10.0.0.3:4000 has no torch (here: torch 2.13.0)",
        "worker tcp://10.0.0.4:4000 runs numpy 1.26.4, here numpy 2.1.0",
        "worker tcp://10.0.0.4:4000 runs torch on its avx512 kernels, the pool on default: "
        "start it with ATEN_CPU_CAPABILITY=default",
    ]
    assert refusals(here, {"a": workers["tcp://10.0.0.2:4000"]}, capability="default") == []


def test_a_refused_worker_stops_the_command_before_any_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    here = instance_libraries()
    theirs = {**here, "torch": "not installed"}
    client = FakeClient({"tcp://10.0.0.9:4000": {"libraries": theirs}})
    assert _build(tmp_path, "1-2", client=client) == 2
    assert client.submitted == 0
    assert capsys.readouterr().err.splitlines() == [
        f"clinaudit pool build: error: worker tcp://10.0.0.9:4000 has no torch (here: torch "
        f"{here['torch']}): every worker must match this machine"
    ]


def test_a_game_is_required(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--variant", "wdbc-hard", "--seeds", "1", "--out", str(tmp_path / "p"), "-q"]
    assert run_pool_build(argv, opener=fake_opener(FakeClient())) == 2
    assert "wdbc-hard is not a game" in capsys.readouterr().err


def test_the_progress_line_counts_failures_and_gives_an_eta() -> None:
    stream = io.StringIO()
    progress = PoolProgress(4, stream)
    assert progress.line() == "pool: 0/4 done, 0 failed, ETA ?"
    progress.update("g-1")
    progress.update("g-2", "RuntimeError: ambiguous")
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("pool: 1/4 done, 0 failed, ETA ")
    assert lines[0].endswith(" | g-1 built")
    assert lines[1].startswith("pool: 2/4 done, 1 failed, ETA ")
    assert lines[1].endswith(" | g-2 FAILED: RuntimeError: ambiguous")


def test_workers_get_one_thread_and_the_pools_kernels_in_their_environment() -> None:
    env = worker_environment("default")
    assert env["ATEN_CPU_CAPABILITY"] == "default"
    assert env["OMP_NUM_THREADS"] == env["MKL_NUM_THREADS"] == "1"


# --------------------------------------------------------------- the real Dask client


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("command", ["pool", "grade-many"])
def test_an_unreachable_scheduler_is_one_line_and_exit_2_within_30_s(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    address = f"tcp://127.0.0.1:{_closed_port()}"
    if command == "pool":
        argv = ["pool", "build", "--variant", GAME, "--seeds", "1", "-q"]
        argv += ["--out", str(tmp_path / "pool"), "--cache-dir", str(tmp_path / "cache")]
    else:
        manifest = tmp_path / "m.jsonl"
        manifest.write_text('{"submission": "r.json", "variant": "wdbc-hard"}\n')
        argv = ["grade-many", str(manifest), "--out", str(tmp_path / "out"), "-q"]
    start = time.monotonic()
    status = main([*argv, "--scheduler", address, "--connect-timeout", "2"])
    assert time.monotonic() - start < 30
    assert status == 2
    (line,) = capsys.readouterr().err.splitlines()
    prefix = "clinaudit pool build" if command == "pool" else "clinaudit grade-many"
    assert line.startswith(f"{prefix}: error: cannot reach the Dask scheduler at {address}: ")


def test_without_the_cluster_extra_the_command_says_so_in_one_line(tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['distributed'] = None; sys.modules['dask'] = None\n"
        "from pytest_clinaudit.cli import main\n"
        f"sys.exit(main(['pool', 'build', '--variant', '{GAME}', '--seeds', '1', '-q', "
        f"'--out', {str(tmp_path / 'pool')!r}, '--cache-dir', {str(tmp_path / 'cache')!r}]))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "clinaudit pool build: error: this command runs on a Dask cluster, and dask.distributed "
        "is not installed: pip install 'pytest-clinaudit[cluster]'"
    ]


def test_nothing_imports_dask_unless_a_command_asks_for_a_cluster() -> None:
    code = (
        "import sys, pytest_clinaudit.plugin, pytest_clinaudit.cli, pytest_clinaudit.pool, "
        "pytest_clinaudit.pool.run, pytest_clinaudit.pool.cluster, "
        "pytest_clinaudit.batch.dask_executor, pytest_clinaudit.batch.grade_many\n"
        "from pytest_clinaudit.cli import build_parser\n"
        "build_parser().parse_args(['pool', 'build', '--variant', 'g', '--seeds', '1', "
        "'--out', 'p'])\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_pool_run_runs_the_agents_grades_them_on_the_cluster_and_writes_the_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from game_helpers import fake_manifest, install_fake_instance
    from pool_helpers import fake_agent

    from pytest_clinaudit.cli.pool import pool_run

    cache, pool = tmp_path / "cache", PoolDir(tmp_path / "pool")
    pool.prepare()
    for seed in (1, 2):
        reference = install_fake_instance(cache, seed)
        name = f"{GAME}-{seed}"
        pool.write_instance(
            name,
            {
                "grader/manifest.json": json.dumps(fake_manifest(reference)).encode(),
                "workspace/task.md": b"# task\n",
            },
        )
        pool.append({"instance": name, "variant": GAME, "seed": seed, "status": "finished"})
    pool.write_index("default", instance_libraries())
    from pytest_clinaudit.cli import build_parser

    argv = ["pool", "run", str(pool.root), "--agents", "null,expert", "--cache-dir", str(cache)]
    client = FakeClient()
    status = pool_run(build_parser().parse_args([*argv, "-q"]), fake_agent, fake_opener(client))
    out = pool.root / "runs"
    assert status == 1  # the expert failed on both instances, and says so
    stdout = capsys.readouterr().out
    assert f"  expert on {GAME}-1: RuntimeError: the expert gave up" in stdout
    assert sorted(p.name for p in (out / "reports").iterdir()) == [
        f"null-{GAME}-1.json",
        f"null-{GAME}-2.json",
    ]
    records = [
        json.loads(line) for line in (out / "graded" / "runs.jsonl").read_text().splitlines()
    ]
    assert [(r["meta"]["agent"], r["meta"]["run"], r["score"]) for r in records] == [
        ("null", "1", 0.0),
        ("null", "2", 0.0),
    ]
    assert (out / "report" / "report.md").is_file()
    assert client.sessions == 2  # each graded by a task on the cluster
    # A rerun keeps every report (grade-many grades game rows again: it resumes audit rows).
    client = FakeClient()
    rerun = build_parser().parse_args([*argv, "--agents", "null", "-q"])
    assert pool_run(rerun, fake_agent, fake_opener(client)) == 0
    assert client.submitted == 0


def test_dask_is_the_optional_cluster_extra_and_the_tests_install_it() -> None:
    """.ci/run installs '.[dev]', which takes '[test]': the slow cluster tests need Dask."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    from grading_helpers import REPO

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    assert "dask[distributed]>=2024.1" in extras["cluster"]
    assert not any("dask" in d or "distributed" in d for d in project["dependencies"])
    assert "cluster" in extras["test"][0].split("[")[1]


def test_workers_apply_to_the_embedded_cluster_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _build(tmp_path, "1", "--scheduler", "tcp://10.0.0.1:8786", "--workers", "4") == 2
    assert capsys.readouterr().err.splitlines() == [
        "clinaudit pool build: error: --workers sizes the embedded cluster; a --scheduler has "
        "its own"
    ]
