"""Helpers of the pool tests: a fast fake builder, a fake client, and a command runner.

``fake_build`` is injected where ``clinaudit pool build`` runs
:func:`~pytest_clinaudit.pool.task.build_on_worker`: it returns, in a
fraction of a second, the files of an instance (a workspace and a grader
manifest) whose bytes depend on the spec's variant, seed and secret only, as
a real build's do. Environment variables steer it (they reach a local
cluster's workers, which inherit this process's environment):

``CLINAUDIT_FAKE_FAIL``
    seeds (``3,5``) whose build raises, as an ambiguous instance does;
``CLINAUDIT_FAKE_INTERRUPT``
    a seed whose build raises KeyboardInterrupt (Ctrl-C, as the coordinator sees it);
``CLINAUDIT_FAKE_SECONDS``
    how long each build takes;
``CLINAUDIT_FAKE_STARTED``
    a folder where each build drops ``<seed>.<pid>`` when it starts;
``CLINAUDIT_FAKE_PIN``
    ``1``: pin the worker (versions, capability, one thread) as the real task does.

Run as a script (``python tests/pool_helpers.py ARGS``) it is ``clinaudit pool build``
with the fake builder on a real cluster, for the tests that signal the command.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pytest_clinaudit.pool.task import BuildSpec, Built, pin_worker, worker_name

MODELS = ("m1", "m2", "m3")


def _seeds(variable: str) -> set[int]:
    return {int(s) for s in os.environ.get(variable, "").split(",") if s.strip()}


def fake_files(spec: BuildSpec) -> dict[str, bytes]:
    """The files a fake build of ``spec`` returns: a function of variant, seed and secret."""

    def blob(name: str, size: int = 2000) -> bytes:
        seed = f"{spec.variant}:{spec.seed}:{spec.secret}:{name}".encode()
        return hashlib.shake_256(seed).digest(size)

    programs = {m: hashlib.sha256(blob(m)).hexdigest() for m in MODELS}
    joined = ",".join(f"{name}:{sha}" for name, sha in sorted(programs.items()))
    manifest = {
        "variant": spec.variant,
        "seed": spec.seed,
        "secret": spec.secret,
        "programs": programs,
        "artifact_sha256": hashlib.sha256(joined.encode()).hexdigest(),
        "truth": {m: {"kind": None} for m in MODELS},
    }
    files = {f"workspace/models/{m}.pt2": blob(m) for m in MODELS}
    files["workspace/task.md"] = f"# instance {spec.seed}\n".encode()
    files["workspace/training_rows/m1.txt"] = b"1\n2\n3\n"
    files["grader/manifest.json"] = json.dumps(manifest, indent=2).encode()
    return files


def fake_build(spec: BuildSpec) -> Built:
    start = time.perf_counter()
    capability = spec.capability
    if os.environ.get("CLINAUDIT_FAKE_PIN") == "1":
        capability = pin_worker(spec)
    started = os.environ.get("CLINAUDIT_FAKE_STARTED")
    if started:
        Path(started, f"{spec.seed}.{os.getpid()}").touch()
    time.sleep(float(os.environ.get("CLINAUDIT_FAKE_SECONDS", "0")))
    if spec.seed in _seeds("CLINAUDIT_FAKE_INTERRUPT"):
        raise KeyboardInterrupt
    if spec.seed in _seeds("CLINAUDIT_FAKE_FAIL"):
        raise RuntimeError(f"instance {spec.seed}: 8 attempt(s) left measurements ambiguous")
    return Built(
        spec.name, fake_files(spec), worker_name(), capability, time.perf_counter() - start
    )


class FakeClient:
    """What ``pool build`` uses of ``distributed.Client``, over a thread pool in this process.

    ``facts``: each fake worker's answer to ``worker_facts`` (default: this machine's)."""

    def __init__(self, facts: dict[str, dict[str, Any]] | None = None) -> None:
        self.facts = facts
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=2)
        self.submitted = 0
        """Tasks submitted through ``get_executor()`` (builds, agents)."""
        self.sessions = 0
        """Tasks submitted through ``submit`` (grading sessions)."""

    def wait_for_workers(self, n: int, timeout: float) -> None:
        pass

    def run(self, function: Callable[..., Any], *args: Any) -> dict[str, Any]:
        if self.facts is not None:
            return self.facts
        # This process's answer, on the pool's kernels as a pinned worker's would be.
        return {"inproc://fake-worker": {**function(*args), "capability": "default"}}

    def nthreads(self) -> dict[str, int]:
        return {"inproc://fake-worker": 2}

    def submit(self, fn: Any, /, *args: Any, pure: bool = True) -> Any:
        self.sessions += 1
        return self.executor.submit(fn, *args)

    def get_executor(self, **_: Any) -> concurrent.futures.Executor:
        client = self

        class Counting(concurrent.futures.ThreadPoolExecutor):
            def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
                client.submitted += 1
                return client.executor.submit(fn, *args, **kwargs)

        return Counting(max_workers=1)


def fake_agent(workspace: str, agent: str) -> str:
    """A report in no time: every model sound (as the null agent says), named from the
    instance's grader manifest (a real agent reads task.md)."""
    if agent == "expert":
        raise RuntimeError("the expert gave up")
    manifest = json.loads((Path(workspace).parent / "grader" / "manifest.json").read_text())
    return json.dumps({"models": {name: {"defects": []} for name in manifest["programs"]}})


def fake_opener(client: FakeClient) -> Any:
    @contextlib.contextmanager
    def opener(scheduler: str | None, **_: Any) -> Iterator[tuple[FakeClient, None]]:
        try:
            yield client, None
        finally:
            client.executor.shutdown(wait=True)

    return opener


def run_pool_build(argv: list[str], builder: Any = fake_build, opener: Any = None) -> int:
    """``clinaudit pool build ARGV`` with ``builder`` as the task (default: a real cluster)."""
    from pytest_clinaudit.cli import build_parser
    from pytest_clinaudit.cli.pool import pool_build
    from pytest_clinaudit.pool.cluster import open_client

    args = build_parser().parse_args(["pool", "build", *argv])
    try:
        return pool_build(args, builder, opener or open_client)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    import sys

    sys.exit(run_pool_build(sys.argv[1:]))
