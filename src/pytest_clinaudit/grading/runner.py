"""Run one grading session in a fresh pytest process and read its score.

The METR and Inspect adapters and ``clinaudit grade-many`` grade through this
function, so every route to a score is the same pytest session a grader runs by
hand: ``pytest --submission FILE --variant NAME``. The session runs in an empty
directory, so no project's conftest.py or pytest configuration can change it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any


def plugin_arguments() -> list[str]:
    """``-p pytest_clinaudit.plugin`` unless an installed distribution registers it already.

    A vendored copy (the METR task family) has no entry point; loading the
    plugin twice would be an error.
    """
    installed = any(ep.name == "clinaudit" for ep in entry_points(group="pytest11"))
    return [] if installed else ["-p", "pytest_clinaudit.plugin"]


def grade_command(
    submission: Path,
    variant: str,
    *,
    score_json: Path,
    profile: str = "strict",
    manifest: Path | None = None,
    junit_xml: Path | None = None,
    cache_dir: Path | None = None,
    variants_dirs: Sequence[Path] = (),
    mimic_dir: Path | None = None,
    meta: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The pytest command line of one grading session, to run in an empty directory."""
    # No configuration file, and the (empty) working directory as rootdir: otherwise
    # pytest finds one from the submission's path, and a submission stored inside a
    # project would be graded under that project's addopts and warning filters.
    command = [
        sys.executable,
        "-m",
        "pytest",
        *plugin_arguments(),
        "-p",
        "no:cacheprovider",
        "-q",
        "-c",
        os.devnull,
        "--rootdir",
        ".",
        "--submission",
        str(submission),
        "--variant",
        variant,
        "--clinaudit-profile",
        profile,
        "--clinaudit-score-json",
        str(score_json),
    ]
    if manifest is not None:
        command += ["--clinaudit-manifest", str(manifest)]
    if junit_xml is not None:
        command += ["--junitxml", str(junit_xml)]
    if cache_dir is not None:
        command += ["--clinaudit-cache-dir", str(cache_dir)]
    for directory in variants_dirs:
        command += ["--clinaudit-variants-dir", str(directory)]
    if mimic_dir is not None:
        command += ["--clinaudit-mimic-dir", str(mimic_dir)]
    for key, value in (meta or {}).items():
        command += ["--clinaudit-meta", f"{key}={value}"]
    return [*command, *extra]


def grade(
    submission: Path,
    variant: str,
    *,
    timeout: float | None = 600,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Grade ``submission`` in a fresh pytest process; returns the score JSON document.

    Raises
    ------
    RuntimeError
        The session wrote no score (a usage error such as an unknown variant,
        or a crash); the message carries pytest's output.
    """
    with tempfile.TemporaryDirectory(prefix="clinaudit-grade-") as scratch:
        score_json = Path(options.pop("score_json", None) or Path(scratch) / "score.json")
        command = grade_command(
            Path(submission).absolute(), variant, score_json=score_json, **options
        )
        result = subprocess.run(
            command,
            cwd=scratch,
            env=dict(env) if env is not None else dict(os.environ),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if not score_json.exists():
            output = (result.stdout + result.stderr).strip()[-2000:]
            raise RuntimeError(
                f"grading {submission} as {variant} wrote no score "
                f"(exit {result.returncode}):\n{output}"
            )
        document: dict[str, Any] = json.loads(score_json.read_text(encoding="utf-8"))
    if document.get("error"):
        # A usage error (unknown variant, missing data, manifest mismatch): not graded,
        # which is neither a zero nor "no submission".
        raise RuntimeError(f"grading {submission} as {variant} failed: {document['error']}")
    document["exit_status"] = result.returncode
    return document
