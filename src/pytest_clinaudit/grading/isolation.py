"""What a grading session may not take from the submission's folder, and the check that it did not.

The folder a report lies in is the agent's: it can write a ``pytest.ini``,
``pyproject.toml``, ``tox.ini``, ``setup.cfg`` or ``conftest.py`` there, and a
module for any of them to load. pytest finds a rootdir and an ini file from
every path-like argument, ``--submission``'s value included, so a bare
``pytest --submission WORKSPACE/report.json`` run anywhere takes the agent's
ini file as its configuration (``addopts = -p mine`` with ``pythonpath = .``
loads the agent's plugin into the grader).

Two defences, in this order of strength:

- :mod:`~pytest_clinaudit.grading.runner` starts every session it runs in a
  fresh empty directory outside the submission's folder, with ``-c /dev/null
  --rootdir .`` and an environment from :func:`session_environment`, so
  nothing of the folder is read (``clinaudit grade`` and every adapter use it).
- The plugin refuses to grade (:func:`refusal`) when the session's rootdir or
  ini file lies inside the folder, or when code was imported from it. That
  stops the bare form above with one line instead of a forged score. It runs
  in the process the agent's code may already be in, so it cannot stop a
  plugin written to defeat it; only the first defence can.

Only the standard library is imported here: the plugin imports this module on
every grading run, before anything else.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_clinaudit.grading import options

if TYPE_CHECKING:
    import pytest

CONFIGURING_VARIABLES = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
"""Environment variables that add arguments or plugins to every pytest session."""


def submission_folders(submission: Path) -> tuple[Path, ...]:
    """The folders the agent owns: the report's parent directory, symlinks resolved.

    When the report is itself a symlink, the folder of its target is the
    agent's too. Relative paths start at the working directory.
    """
    path = Path(os.path.abspath(submission))
    folders = [Path(os.path.realpath(path.parent))]
    target = Path(os.path.realpath(path)).parent
    if target not in folders:
        folders.append(target)
    return tuple(folders)


def inside(path: Path | str, folders: Iterable[Path]) -> bool:
    """Whether ``path`` (symlinks resolved) is one of ``folders`` or lies below one."""
    real = Path(os.path.realpath(path))
    return any(real == folder or folder in real.parents for folder in folders)


def refusal(config: pytest.Config, submission: Path, variant: str) -> str | None:
    """Why this session may not grade ``submission``: a one-line message, or ``None``.

    Refused when pytest's rootdir or ini file lies inside the submission's
    folder, or when a module (a plugin, a conftest.py, anything on a path set
    up from there) was imported from inside it.
    """
    folders = submission_folders(submission)
    found: list[str] = []
    if inside(config.rootpath, folders):
        found.append(f"pytest's rootdir {config.rootpath}")
    if config.inipath is not None and inside(config.inipath, folders):
        found.append(f"the ini file {config.inipath}")
    modules = imported_from(folders)
    if modules:
        more = f" (and {len(modules) - 3} more)" if len(modules) > 3 else ""
        found.append(f"code imported from {', '.join(modules[:3])}{more}")
    if not found:
        return None
    listed = found[0] if len(found) == 1 else f"{', '.join(found[:-1])} and {found[-1]}"
    verb = "is" if len(found) == 1 else "are"
    return (
        f"clinaudit: refusing to grade: {listed} {verb} inside {folders[0]}, the submission's "
        "folder, which must not configure its own grading; grade with `clinaudit grade "
        f"{submission} {options.VARIANT} {variant}`, which reads nothing from that folder"
    )


def imported_from(folders: Sequence[Path]) -> list[str]:
    """Files of the imported modules that lie inside ``folders`` (symlinks resolved), sorted."""
    real = _RealPaths()
    prefixes = [str(folder).rstrip(os.sep) + os.sep for folder in folders]
    verdicts: dict[str, bool] = {}
    found = []
    for module in list(sys.modules.values()):
        filename = getattr(module, "__file__", None)
        if not isinstance(filename, str) or not os.path.isabs(filename):
            continue
        directory = os.path.dirname(filename)
        if directory not in verdicts:
            resolved = real(directory) + os.sep
            verdicts[directory] = any(resolved.startswith(prefix) for prefix in prefixes)
        if verdicts[directory]:
            found.append(filename)
    return sorted(found)


class _RealPaths:
    """``os.path.realpath`` of many directories that share their ancestors, each resolved once.

    A grading session has a few hundred modules in a few hundred directories;
    resolving each whole path anew costs about 20 ms a session.
    """

    def __init__(self) -> None:
        self.known: dict[str, str] = {}

    def __call__(self, path: str) -> str:
        path = os.path.normpath(path)
        if path in self.known:
            return self.known[path]
        parent, name = os.path.split(path)
        if not name or parent == path:
            result = path
        else:
            candidate = os.path.join(self(parent), name)
            result = os.path.realpath(candidate) if os.path.islink(candidate) else candidate
        self.known[path] = result
        return result


def session_environment(
    env: Mapping[str, str] | None = None, submission: Path | None = None
) -> dict[str, str]:
    """``env`` (default: this process's) for a grading session that nothing configures.

    Drops :data:`CONFIGURING_VARIABLES` and, given the submission, every
    ``PYTHONPATH`` entry inside its folder.
    """
    result = {
        name: value
        for name, value in (os.environ if env is None else env).items()
        if name not in CONFIGURING_VARIABLES
    }
    if submission is not None and result.get("PYTHONPATH"):
        folders = submission_folders(submission)
        kept = [
            entry
            for entry in result["PYTHONPATH"].split(os.pathsep)
            if not (entry and os.path.isabs(entry) and inside(entry, folders))
        ]
        result["PYTHONPATH"] = os.pathsep.join(kept)
    return result


def scratch_parent(submission: Path | None) -> Path:
    """A directory outside the submission's folder for a session's empty working directory.

    The system's temporary directory, unless the report lies in it (say
    ``/tmp/report.json``): then ``/var/tmp`` or ``/dev/shm``.

    Raises
    ------
    RuntimeError
        Every candidate lies inside the submission's folder (a report in ``/``).
    """
    base = Path(tempfile.gettempdir())
    if submission is None:
        return base
    folders = submission_folders(submission)
    for candidate in (base, Path("/var/tmp"), Path("/dev/shm")):
        if candidate.is_dir() and os.access(candidate, os.W_OK) and not inside(candidate, folders):
            return candidate
    raise RuntimeError(
        f"no temporary directory lies outside {folders[0]}, the folder of the submission; "
        "move the report into a folder of its own"
    )


def submission_argument(args: Sequence[str]) -> Path | None:
    """The value of ``--submission`` in a session's arguments (``None`` if absent)."""
    for index, arg in enumerate(args):
        if arg == options.SUBMISSION and index + 1 < len(args):
            return Path(args[index + 1])
        if arg.startswith(options.SUBMISSION + "="):
            return Path(arg.partition("=")[2])
    return None
