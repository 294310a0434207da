"""Run many grading sessions: one pytest session per submission, by subprocess or by fork.

``clinaudit grade-many`` grades every submission in its own pytest session, the
same session a grader runs by hand, with the arguments of
:func:`pytest_clinaudit.grading.runner.session_args`. Two executors run those
sessions; both take pytest's arguments and return how the session ended
(:class:`~pytest_clinaudit.grading.runner.Finished`), and both run each session
in a fresh empty directory:

``subprocess``
    ``python -m pytest ...`` per submission, started by
    :func:`pytest_clinaudit.grading.runner.run_session` as every grading
    process outside a batch is. Simple and portable; each session pays for a
    new interpreter and for importing pytest, NumPy, Hypothesis and jsonschema
    (most of a warm session's time).
``fork``
    Long-lived worker processes (``python -m pytest_clinaudit.batch.executor``)
    import those libraries once, then ``os.fork()`` one child per submission
    that runs ``pytest.main([...])`` with the same arguments (plus
    :data:`FORK_EXTRA_ARGS`) in a fresh directory and exits. Each child
    starts from the same pristine worker state (the worker itself never runs a
    session), so sessions cannot leak into one another. Workers cap BLAS and
    OpenMP at one thread *before* importing NumPy, so they fork from a
    single-threaded process. The default on Linux (see :func:`default_executor`);
    where ``fork`` is unavailable ``subprocess`` is used.

The worker protocol is one JSON object per line on the worker's stdin (a
session to run) and on a private copy of its stdout (the result).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import importlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Protocol

from pytest_clinaudit.grading import isolation
from pytest_clinaudit.grading.runner import Finished, output_tail, run_session

THREAD_CAPS = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
"""Set (unless the user set them) for every session and worker: sessions run side by
side, one per core, so a BLAS thread pool per session only oversubscribes the cores;
and a worker must be single-threaded when it forks."""
WORKER_START_TIMEOUT = 120.0
"""Seconds a fork worker may take to import its libraries before it counts as broken."""
PRELOAD = (
    "pytest",
    "numpy",
    "hypothesis",
    "jsonschema",
    "pytest_clinaudit.plugin",
    "pytest_clinaudit.grading.session",
    "pytest_clinaudit.grading.checks",
    "pytest_clinaudit.grading.submission",
    "pytest_clinaudit.grading.scoring",
    "pytest_clinaudit.catalog.references",
)
"""What a fork worker imports before forking: the bulk of a warm session's start-up."""
# Modules imported before pytest starts cannot be assertion-rewritten, and pytest warns
# about each such plugin module. Rewriting only changes the messages of failing asserts
# inside those libraries (the grading plugin turns it off for itself and Hypothesis
# anyway), so fork children silence exactly that warning.
FORK_EXTRA_ARGS = ("-W", "ignore::pytest.PytestAssertRewriteWarning")
EXECUTORS = ("fork", "subprocess")


def fork_available() -> bool:
    """Whether the fork executor can run here (POSIX ``fork`` and ``select`` on pipes)."""
    return hasattr(os, "fork") and sys.platform != "win32"


def default_executor() -> str:
    """``fork`` on Linux, else ``subprocess``.

    macOS can fork, but its system frameworks (Accelerate under NumPy, the
    Objective-C runtime) are documented as unsafe after ``fork`` without
    ``exec``, so the fork executor is opt-in there.
    """
    return "fork" if sys.platform.startswith("linux") and fork_available() else "subprocess"


def session_environment(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of grading sessions: ``base`` (default ``os.environ``) plus thread caps.

    Less the variables that configure pytest
    (:data:`~pytest_clinaudit.grading.isolation.CONFIGURING_VARIABLES`).
    """
    env = isolation.session_environment(base)
    for name, value in THREAD_CAPS.items():
        env.setdefault(name, value)
    return env


@dataclasses.dataclass(frozen=True)
class Session:
    """One pytest session to run: its arguments (from ``runner.session_args``) and a time limit."""

    args: tuple[str, ...]
    timeout: float


class Executor(Protocol):
    """Runs sessions; :meth:`run` may be called from several threads at once."""

    name: str

    def run(self, session: Session) -> Finished: ...

    def close(self) -> None: ...


# ------------------------------------------------------------------ subprocess


class SubprocessExecutor:
    """``python -m pytest ...`` in a fresh temporary directory per session (:func:`run_session`)."""

    name = "subprocess"

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = session_environment(env)

    def run(self, session: Session) -> Finished:
        return run_session(session.args, timeout=session.timeout, env=self.env)

    def close(self) -> None:
        pass


# ------------------------------------------------------------------------ fork


class WorkerError(RuntimeError):
    """A fork worker could not start or stopped answering."""


class _Worker:
    """The parent's handle on one fork worker process."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.scratch = Path(tempfile.mkdtemp(prefix="clinaudit-worker-"))
        self.log_path = self.scratch / "worker.log"
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "pytest_clinaudit.batch.executor"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.scratch,  # so that `-m` puts an empty directory first on sys.path
                env=dict(env),
                bufsize=0,
            )
        self._buffer = b""
        self.ready = False

    def _log_tail(self) -> str:
        try:
            return output_tail(self.log_path.read_bytes())
        except OSError:
            return ""

    def _exited(self) -> WorkerError:
        """The error for a worker that is gone, with its status and the end of its log."""
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return WorkerError("the worker stopped answering")
        return WorkerError(
            f"the worker exited (status {self.process.returncode}): "
            f"{self._log_tail().strip() or 'no output'}"
        )

    def _read_message(self, timeout: float) -> dict[str, Any]:
        import select

        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise WorkerError(f"no answer within {timeout:g} s")
            readable, _, _ = select.select([fd], [], [], remaining)
            if not readable:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._exited()
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def wait_ready(self) -> None:
        if not self.ready:
            self._read_message(WORKER_START_TIMEOUT)
            self.ready = True

    def run(self, session: Session) -> Finished:
        self.wait_ready()
        assert self.process.stdin is not None
        request = {"args": [*session.args, *FORK_EXTRA_ARGS], "timeout": session.timeout}
        try:
            self.process.stdin.write((json.dumps(request) + "\n").encode())
        except OSError:  # a broken pipe: the worker is gone
            raise self._exited() from None
        # The worker enforces the session's time limit itself; the margin covers a
        # worker that is itself stuck.
        answer = self._read_message(session.timeout + 60.0)
        return Finished(
            answer["exit"], answer["output"], float(answer["seconds"]), answer.get("problem", "")
        )

    def stop(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


class ForkExecutor:
    """A pool of fork workers; each :meth:`run` borrows one worker for one session."""

    name = "fork"

    def __init__(self, workers: int, env: Mapping[str, str] | None = None) -> None:
        if not fork_available():
            raise WorkerError("os.fork is not available on this platform")
        self.env = session_environment(env)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._lock = threading.Lock()
        self._workers: list[_Worker] = []
        self._closed = False
        for _ in range(max(1, workers)):
            self._add_worker()

    def _add_worker(self) -> _Worker:
        worker = _Worker(self.env)
        with self._lock:
            self._workers.append(worker)
        self._idle.put(worker)
        return worker

    def check_started(self) -> None:
        """Wait until every worker has imported its libraries.

        Raises
        ------
        WorkerError
            A worker failed to start (its log says why); the caller may fall back
            to :class:`SubprocessExecutor`.
        """
        for worker in list(self._workers):
            worker.wait_ready()

    def run(self, session: Session) -> Finished:
        worker = self._idle.get()
        start = time.perf_counter()
        try:
            finished = worker.run(session)
        except (WorkerError, OSError, ValueError) as exc:
            # The worker is unusable: replace it, and report this session as not graded.
            worker.process.kill()
            worker.stop()
            with self._lock:
                if worker in self._workers:
                    self._workers.remove(worker)
                closed = self._closed
            if not closed:
                self._add_worker()
            return Finished(
                None, "", time.perf_counter() - start, f"the grading worker failed: {exc}"
            )
        self._idle.put(worker)
        return finished

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._workers = self._workers, []
        for worker in workers:
            worker.stop()


def make_executor(name: str, jobs: int, env: Mapping[str, str] | None = None) -> Executor:
    """The executor called ``name`` (``fork`` or ``subprocess``).

    ``fork`` falls back to ``subprocess`` (with a warning on stderr) where fork is
    unavailable or its workers cannot start.
    """
    if name == "fork":
        try:
            executor = ForkExecutor(jobs, env)
        except WorkerError as exc:
            print(f"clinaudit: {exc}; grading with subprocesses instead", file=sys.stderr)
        else:
            try:
                executor.check_started()
            except WorkerError as exc:
                executor.close()
                print(
                    f"clinaudit: the fork workers did not start ({exc}); grading with "
                    "subprocesses instead",
                    file=sys.stderr,
                )
            else:
                return executor
    elif name != "subprocess":
        raise ValueError(f"unknown executor {name!r}; choose one of {', '.join(EXECUTORS)}")
    return SubprocessExecutor(env)


# ---------------------------------------------------------------- worker side


def plugin_modules() -> list[str]:
    """The modules of the installed pytest11 plugins, which every session imports."""
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return []
    from importlib import metadata

    return sorted({entry.module for entry in metadata.entry_points(group="pytest11")})


def _preload() -> list[str]:
    """Import what every session needs, so that forked children start with it loaded."""
    import pytest

    # `pytest --version` imports pytest's built-in plugins. It does not load the
    # installed pytest11 plugins (pytest 9), which every session loads: imported by
    # each session, a plugin's whole distribution is assertion-rewritten from source
    # again (inspect-ai's anyio plugin alone costs about 0.55 s a session), so they
    # are imported here, once.
    pytest.main(["--version"])
    loaded = []
    for name in (*plugin_modules(), *PRELOAD):
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - a plugin that fails here fails in the session too
            continue
        loaded.append(name)
    # What every session reads first, read once: the catalog of variant files, the
    # library versions that key the reference cache and the hash of the invariants'
    # code that keys their memo (all memoized per process).
    from pytest_clinaudit.catalog.references import reference_libraries
    from pytest_clinaudit.catalog.variants import default_catalog
    from pytest_clinaudit.grading.invariants import MEMO_LIBRARIES, code_fingerprint
    from pytest_clinaudit.grading.outputs import GRADING_LIBRARIES
    from pytest_clinaudit.versions import library_versions

    default_catalog()
    reference_libraries()
    library_versions((*GRADING_LIBRARIES, *MEMO_LIBRARIES))
    code_fingerprint()
    # Every object alive now outlives every session: move it out of the collector's
    # reach, so that the full collections pytest runs at the end of each session
    # (its unraisable-exception check) walk only what that session made, and the
    # forked children do not copy pages just to update reference counts for it.
    gc.freeze()
    return loaded


def _run_forked(args: Sequence[str], timeout: float, private_fds: Sequence[int]) -> dict[str, Any]:
    """Fork a child that runs one pytest session in a fresh directory; wait for it."""
    import signal

    import pytest

    start = time.perf_counter()
    submission = isolation.submission_argument(args)
    try:
        scratch = tempfile.mkdtemp(
            prefix="clinaudit-grade-", dir=isolation.scratch_parent(submission)
        )
    except RuntimeError as exc:
        return {"exit": None, "output": "", "seconds": 0.0, "problem": str(exc)}
    log_fd, log_path = tempfile.mkstemp(prefix="clinaudit-session-", suffix=".log")
    # Flush before forking so that the child does not inherit (and write out again)
    # anything buffered.
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        status_of_child = 70  # EX_SOFTWARE, should pytest.main itself raise
        try:
            os.chdir(scratch)
            if submission is not None:
                # Nothing of the submission's folder on the path, here or in a subprocess.
                folders = isolation.submission_folders(submission)
                sys.path[:] = [p for p in sys.path if not (p and isolation.inside(p, folders))]
                environment = isolation.session_environment(None, submission)
                os.environ.clear()
                os.environ.update(environment)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.dup2(log_fd, 1)
            os.dup2(log_fd, 2)
            for fd in (devnull, log_fd, *private_fds):
                os.close(fd)  # the child must not hold the protocol pipes open
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            # The worker ignores Ctrl-C; a session reacts to it as pytest always does.
            signal.signal(signal.SIGINT, signal.default_int_handler)
            status_of_child = int(pytest.main(list(args)))
        except BaseException:  # noqa: BLE001 - report anything, then exit without cleanup
            import traceback

            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(status_of_child)
    os.close(log_fd)
    timed_out = False

    def kill(_signum: int, _frame: Any) -> None:
        nonlocal timed_out
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    previous = signal.signal(signal.SIGALRM, kill)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        _, status = os.waitpid(pid, 0)  # retried after the alarm handler (PEP 475)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    seconds = time.perf_counter() - start
    try:
        with open(log_path, "rb") as log:
            output = output_tail(log.read())
    finally:
        os.unlink(log_path)
        shutil.rmtree(scratch, ignore_errors=True)
    exit_status = os.waitstatus_to_exitcode(status)
    code: int | None = exit_status
    problem = ""
    if timed_out:
        code, problem = None, f"timed out after {timeout:g} s"
    elif exit_status < 0:
        code, problem = None, f"the session was killed by signal {-exit_status}"
    return {"exit": code, "output": output, "seconds": seconds, "problem": problem}


def serve(requests: IO[bytes] | None = None) -> int:
    """The fork worker's main loop: preload, say ready, run one session per request line."""
    requests = requests if requests is not None else sys.stdin.buffer
    # Answers go to a private copy of stdout; fd 1 itself goes to stderr (the worker
    # log), so that nothing a library prints can corrupt the protocol.
    answers = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)

    def send(message: dict[str, Any]) -> None:
        answers.write((json.dumps(message) + "\n").encode())

    import signal

    # Ctrl-C at the terminal reaches the whole process group: the running session
    # stops (pytest's own handling) and reports back; the worker stays to be closed.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    loaded = _preload()
    send({"ready": True, "pid": os.getpid(), "preloaded": len(loaded)})
    # The child replaces fd 0 by /dev/null; any other protocol descriptor it closes.
    private = [fd for fd in (requests.fileno(), answers.fileno()) if fd > 2]
    for line in requests:
        if not line.strip():
            continue
        request = json.loads(line)
        send(_run_forked(request["args"], float(request["timeout"]), private))
    return 0


if __name__ == "__main__":
    for _name, _value in THREAD_CAPS.items():  # before NumPy is imported, whatever the caller set
        os.environ.setdefault(_name, _value)
    sys.exit(serve())
