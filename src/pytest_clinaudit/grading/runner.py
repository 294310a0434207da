"""Start grading sessions in fresh pytest processes: their arguments, and running one.

Every route to a score from outside a pytest run is the session a grader runs by
hand, ``pytest --submission FILE --variant NAME``: :func:`grade` (the METR task
family, the Inspect scorer) and both executors of ``clinaudit grade-many``.
:func:`session_args` is the one place that argument list is written, from the
flag constants of :mod:`~pytest_clinaudit.grading.options`; :func:`run_session`
is the one place such a session is started, as ``python -m pytest`` in a fresh
empty directory outside the submission's folder, so no project's conftest.py or
pytest configuration can change it, nor any file an agent wrote beside its report
(:mod:`~pytest_clinaudit.grading.isolation`). ``clinaudit grade`` is this session
on the command line. (The fork executor runs the same arguments with
``pytest.main`` in a forked child, also in a fresh empty directory.)
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from pytest_clinaudit.grading import isolation, options

OUTPUT_TAIL = 4000
"""Characters of a session's terminal output kept: enough for pytest's usage errors."""
JUNIT_XML = "--junitxml"
"""pytest's own flag for the JUnit XML (it carries the grade as suite properties)."""
ISOLATED = ("-p", "no:cacheprovider", "-q", "-c", os.devnull, "--rootdir", ".")
"""No cache folder, no configuration file, and the (empty) working directory as rootdir:
otherwise pytest finds a rootdir and an ini file from the submission's path, and a
submission stored inside a project would be graded under that project's addopts and
warning filters."""


def plugin_arguments() -> list[str]:
    """``-p pytest_clinaudit.plugin`` unless an installed distribution registers it already.

    A vendored copy (the METR task family) has no entry point; loading the
    plugin twice would be an error.
    """
    installed = any(ep.name == "clinaudit" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "pytest_clinaudit.plugin"]


def session_args(
    submission: Path,
    variant: str,
    *,
    score_json: Path,
    profile: str = options.DEFAULT_PROFILE,
    manifest: Path | None = None,
    junit_xml: Path | None = None,
    cache_dir: Path | None = None,
    variants_dirs: Sequence[Path] = (),
    mimic_dir: Path | None = None,
    meta: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """pytest's arguments for grading ``submission`` (no interpreter), to run in an empty directory.

    :func:`run_session` runs them as ``python -m pytest``; the fork executor
    passes them to ``pytest.main``.
    """
    args = [
        *plugin_arguments(),
        *ISOLATED,
        options.SUBMISSION,
        str(submission),
        options.VARIANT,
        variant,
        options.PROFILE,
        profile,
        options.SCORE_JSON,
        str(score_json),
    ]
    if manifest is not None:
        args += [options.MANIFEST, str(manifest)]
    if junit_xml is not None:
        args += [JUNIT_XML, str(junit_xml)]
    if cache_dir is not None:
        args += [options.CACHE_DIR, str(cache_dir)]
    for directory in variants_dirs:
        args += [options.VARIANTS_DIR, str(directory)]
    if mimic_dir is not None:
        args += [options.MIMIC_DIR, str(mimic_dir)]
    for key, value in (meta or {}).items():
        args += [options.META, f"{key}={value}"]
    return [*args, *extra]


def output_tail(text: str | bytes | None) -> str:
    """The last :data:`OUTPUT_TAIL` characters of a session's output (bytes decoded leniently)."""
    if text is None:
        return ""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return text[-OUTPUT_TAIL:]


@dataclasses.dataclass(frozen=True)
class Finished:
    """How a session ended.

    Attributes
    ----------
    exit_code
        pytest's exit status; ``None`` when the session did not end by itself
        (``problem`` says why: a timeout, a dead worker).
    output
        The last :data:`OUTPUT_TAIL` characters of its terminal output
        (stdout and stderr as they were interleaved).
    seconds
        Wall-clock time of the session.
    problem
        Why the session has no exit status; empty when it has one.
    """

    exit_code: int | None
    output: str
    seconds: float
    problem: str = ""


def run_session(
    args: Sequence[str], *, timeout: float | None, env: Mapping[str, str] | None = None
) -> Finished:
    """Run ``python -m pytest *args`` in a fresh empty directory; never raises for the session.

    The directory lies outside the folder of the submission the arguments name,
    and the environment has no variable that configures pytest nor a
    ``PYTHONPATH`` entry in that folder
    (:func:`~pytest_clinaudit.grading.isolation.session_environment`).

    Parameters
    ----------
    args
        From :func:`session_args`.
    timeout
        Seconds before the session is killed and reported as timed out; ``None``: no limit.
    env
        The session's environment, less what configures pytest; default: this process's.
    """
    start = time.perf_counter()
    submission = isolation.submission_argument(args)
    try:
        parent = isolation.scratch_parent(submission)
    except RuntimeError as exc:
        return Finished(None, "", time.perf_counter() - start, str(exc))
    with tempfile.TemporaryDirectory(prefix="clinaudit-grade-", dir=parent) as scratch:
        try:
            result = subprocess.run(
                [sys.executable, "-m", "pytest", *args],
                cwd=scratch,
                env=isolation.session_environment(env, submission),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            return Finished(
                None,
                output_tail(exc.output),
                time.perf_counter() - start,
                f"timed out after {timeout:g} s",
            )
    return Finished(result.returncode, output_tail(result.stdout), time.perf_counter() - start)


def grade(
    submission: Path,
    variant: str,
    *,
    timeout: float | None = 600,
    env: Mapping[str, str] | None = None,
    score_json: Path | None = None,
    **session: Any,
) -> dict[str, Any]:
    """Grade ``submission`` in a fresh pytest process; returns the score JSON document.

    ``session`` holds the other keywords of :func:`session_args`; the score
    JSON goes to ``score_json`` if given, else to a temporary file. The
    document gets the session's pytest ``exit_status``.

    Raises
    ------
    RuntimeError
        The session wrote no score (a usage error such as an unknown variant, a
        crash, or more than ``timeout`` seconds); the message carries pytest's output.
    """
    with tempfile.TemporaryDirectory(prefix="clinaudit-grade-") as scratch:
        score_path = Path(score_json or Path(scratch) / "score.json")
        args = session_args(Path(submission).absolute(), variant, score_json=score_path, **session)
        finished = run_session(args, timeout=timeout, env=env)
        if finished.problem or not score_path.exists():
            status = finished.problem or f"exit {finished.exit_code}"
            output = finished.output.strip()[-2000:]
            raise RuntimeError(
                f"grading {submission} as {variant} wrote no score ({status}):\n{output}"
            )
        document: dict[str, Any] = json.loads(score_path.read_text(encoding="utf-8"))
    if document.get("error"):
        # A usage error (unknown variant, missing data, manifest mismatch): not graded,
        # which is neither a zero nor "no submission".
        raise RuntimeError(f"grading {submission} as {variant} failed: {document['error']}")
    document["exit_status"] = finished.exit_code
    return document
