"""The reference cache: JSON documents keyed by what determines them.

Entries live in ``<dir>/<kind>/<key>.json`` where ``key`` is the sha256 of the
canonical JSON of everything the entry depends on (artifact and data hashes,
parameters, semantics version, library versions). The cache never holds a
pickle: a model is always rebuilt from its recipe, and only numbers are reused.

Writes are atomic (write to a temporary file, then ``os.replace``), so a reader
sees either the old entry or the new one. An entry that cannot be read, is not
JSON, or does not carry the key it is filed under is treated as missing and is
recomputed. Concurrent processes computing the same entry serialize on a file
lock and the later ones read what the first wrote.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pytest_clinaudit.files import write_json_atomic

ENV_CACHE_DIR = "CLINAUDIT_CACHE_DIR"
FORMAT = 1
"""Version of the entry layout; entries of another format are ignored."""


def default_cache_dir() -> Path:
    """``$CLINAUDIT_CACHE_DIR``, else ``$XDG_CACHE_HOME/pytest-clinaudit``, else ``~/.cache/``."""
    explicit = os.environ.get(ENV_CACHE_DIR)
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-clinaudit"


def canonical_json(payload: Any) -> str:
    """Key-sorted, compact JSON: the same payload always gives the same text."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False)


def cache_key(payload: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


class ReferenceCache:
    """A directory of JSON entries; ``None`` as directory disables caching."""

    def __init__(self, directory: Path | str | None) -> None:
        self.directory = None if directory is None else Path(directory).expanduser()

    @classmethod
    def default(cls) -> ReferenceCache:
        return cls(default_cache_dir())

    def _path(self, kind: str, key: str) -> Path:
        assert self.directory is not None
        return self.directory / kind / f"{key}.json"

    def get(self, kind: str, key: str) -> dict[str, Any] | None:
        """The entry's value, or ``None`` if absent, unreadable or corrupted."""
        if self.directory is None:
            return None
        try:
            document = json.loads(self._path(kind, key).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        if (
            not isinstance(document, dict)
            or document.get("format") != FORMAT
            or document.get("key") != key
            or not isinstance(document.get("value"), dict)
        ):
            return None
        value: dict[str, Any] = document["value"]
        return value

    def put(self, kind: str, key: str, value: Mapping[str, Any], *, payload: Any = None) -> None:
        """Store ``value`` atomically; ``payload`` (what the key hashes) is kept for humans."""
        if self.directory is None:
            return
        document = {"format": FORMAT, "key": key, "payload": payload, "value": value}
        write_json_atomic(self._path(kind, key), document, durable=True)

    @contextlib.contextmanager
    def lock(self, key: str) -> Iterator[None]:
        """Hold an inter-process lock on ``key`` (no-op when caching is off)."""
        if self.directory is None:
            yield
            return
        from filelock import FileLock

        locks = self.directory / "locks"
        locks.mkdir(parents=True, exist_ok=True)
        with FileLock(str(locks / f"{key}.lock")):
            yield
