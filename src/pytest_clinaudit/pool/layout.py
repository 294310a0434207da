"""The pool folder: one instance folder per seed, the journal and the index.

``POOL/<variant>-<seed>/``
    Exactly what ``clinaudit build --out`` writes: ``workspace/`` for the agent,
    ``grader/manifest.json`` (with the instance's secret) for the grader only.
``POOL/journal.jsonl``
    One line per instance finished or failed (with its reason), appended as each
    ends; the last line of an instance is its state. A line is written only
    after its folder is complete, so a pool stopped at any moment resumes.
``POOL/index.json``
    The instances, their program hashes and state, the CPU capability and the
    library versions the pool was built with. Neither file holds a secret or
    any ground truth.

An instance folder is written into ``POOL/.staging`` and renamed into place,
so no reader ever sees half of one.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import uuid
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_clinaudit.files import write_json_atomic

JOURNAL = "journal.jsonl"
INDEX = "index.json"
STAGING = ".staging"
INDEX_FORMAT = 1
FINISHED, FAILED = "finished", "failed"
TOP_FOLDERS = ("workspace", "grader")
"""An instance's files live under these two (agent's and grader's), nowhere else."""
MANIFEST = "grader/manifest.json"


class PoolError(Exception):
    """The pool folder cannot be used as asked; one line for the user."""


def parse_seeds(text: str) -> list[int]:
    """``1-200``, ``3``, ``1,5,9-12``: the seeds, in order, each once."""
    seeds: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        try:
            first = int(low)
            last = int(high) if dash else first
        except ValueError:
            raise PoolError(f"--seeds {text!r}: expected seeds like 1-200 or 1,4,7-9") from None
        if first < 0 or last < first:
            raise PoolError(f"--seeds {text!r}: {part.strip()!r} is not a range of seeds >= 0")
        seeds += [seed for seed in range(first, last + 1) if seed not in seeds]
    return seeds


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def safe_relative(name: str) -> PurePosixPath:
    """A returned file's path, refused unless it lies under ``workspace/`` or ``grader/``."""
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        raise ValueError(f"the worker returned a file outside the instance: {name!r}")
    if path.parts[0] not in TOP_FOLDERS or len(path.parts) < 2:
        raise ValueError(f"the worker returned a file outside workspace/ and grader/: {name!r}")
    return path


class PoolDir:
    """A pool folder: its instances, journal and index."""

    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def journal_path(self) -> Path:
        return self.root / JOURNAL

    @property
    def index_path(self) -> Path:
        return self.root / INDEX

    def prepare(self) -> None:
        """Create the folder; remove what an interrupted run left in staging."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PoolError(f"cannot use --out {self.root}: {exc.strerror or exc}") from None
        if not self.root.is_dir():
            raise PoolError(f"--out {self.root} is not a folder")
        shutil.rmtree(self.root / STAGING, ignore_errors=True)

    def tidy(self) -> None:
        """Remove the staging folder once nothing is in it."""
        with contextlib.suppress(OSError):
            (self.root / STAGING).rmdir()

    # -------------------------------------------------------------- journal

    def journal(self) -> dict[str, dict[str, Any]]:
        """Instance name -> its last journal line; unreadable lines (a torn last line of a
        killed run) are skipped."""
        states: dict[str, dict[str, Any]] = {}
        try:
            text = self.journal_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return states
        for line in text.splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("instance"), str):
                states[entry["instance"]] = entry
        return states

    def finished(self) -> set[str]:
        """Instances journaled as finished whose manifest is still in place."""
        return {
            name
            for name, entry in self.journal().items()
            if entry.get("status") == FINISHED and (self.root / name / MANIFEST).is_file()
        }

    def failed(self) -> dict[str, str]:
        """Instances whose last line says failed -> the reason."""
        return {
            name: str(entry.get("reason", ""))
            for name, entry in self.journal().items()
            if entry.get("status") == FAILED
        }

    def append(self, entry: dict[str, Any]) -> None:
        """Append one line and flush it to disk (a torn earlier line gets its own end)."""
        line = json.dumps({**entry, "at": _now()}, sort_keys=True) + "\n"
        with open(self.journal_path, "a+b") as journal:
            if journal.tell() > 0:
                journal.seek(-1, os.SEEK_END)
                if journal.read(1) != b"\n":
                    line = "\n" + line
            journal.write(line.encode("utf-8"))
            journal.flush()
            os.fsync(journal.fileno())

    # ------------------------------------------------------------ instances

    def write_instance(self, name: str, files: dict[str, bytes]) -> dict[str, Any]:
        """Put an instance's files in place as one folder; return its grader manifest."""
        if MANIFEST not in files:
            raise ValueError("the worker returned no grader/manifest.json")
        manifest = json.loads(files[MANIFEST])
        staging = self.root / STAGING / f"{name}.{uuid.uuid4().hex[:8]}"
        for relative, data in files.items():
            path = staging.joinpath(*safe_relative(relative).parts)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        target = self.root / name
        if target.exists():
            old = self.root / STAGING / f"{name}.old.{uuid.uuid4().hex[:8]}"
            target.rename(old)
            staging.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            staging.rename(target)
        return dict(manifest)

    # ----------------------------------------------------------------- index

    def read_index(self) -> dict[str, Any] | None:
        try:
            index = json.loads(self.index_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except ValueError:
            raise PoolError(f"{self.index_path} is not JSON: move it away to rebuild it") from None
        if not isinstance(index, dict) or index.get("format") != INDEX_FORMAT:
            raise PoolError(f"{self.index_path} is not a pool index of format {INDEX_FORMAT}")
        return index

    def check_compatible(self, capability: str, libraries: dict[str, str]) -> None:
        """Refuse to add to a pool built on other kernels or other library versions: its
        instances would not be rebuilt byte for byte by one environment."""
        index = self.read_index()
        if index is None:
            return
        if index.get("capability") != capability:
            raise PoolError(
                f"{self.root} was built on the {index.get('capability')} torch kernels, not "
                f"{capability}: pass --capability {index.get('capability')} or use a new --out"
            )
        recorded = index.get("libraries", {})
        for name, version in libraries.items():
            if recorded.get(name) != version:
                raise PoolError(
                    f"{self.root} was built with {name} {recorded.get(name)}, here it is "
                    f"{version}: build a new pool (--out) with these libraries"
                )

    def write_index(self, capability: str, libraries: dict[str, str]) -> dict[str, Any]:
        """``index.json`` from the journal: every instance journaled, in name order."""
        instances = []
        for name, entry in sorted(self.journal().items(), key=lambda item: _order(item[0])):
            row = {
                "name": name,
                "variant": entry.get("variant"),
                "seed": entry.get("seed"),
                "status": entry.get("status"),
            }
            if entry.get("status") == FINISHED:
                row["artifact_sha256"] = entry.get("artifact_sha256")
                row["programs"] = entry.get("programs")
                row["capability"] = entry.get("capability")
            else:
                row["reason"] = entry.get("reason")
            instances.append(row)
        index = {
            "format": INDEX_FORMAT,
            "capability": capability,
            "libraries": libraries,
            "counts": {
                FINISHED: sum(row["status"] == FINISHED for row in instances),
                FAILED: sum(row["status"] == FAILED for row in instances),
            },
            "instances": instances,
        }
        write_json_atomic(self.index_path, index)
        return index


def _order(name: str) -> tuple[str, int]:
    variant, _, seed = name.rpartition("-")
    return (variant, int(seed)) if seed.isdigit() else (name, -1)
