"""Files: written so that a reader sees either the old content or the whole new one, and hashed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def write_atomic(path: Path, data: bytes | str, *, durable: bool = False) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``.

    ``durable`` also flushes the file to disk before the rename (the reference
    cache, which other processes trust). Parent directories are created.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def write_json_atomic(path: Path, document: Any, *, durable: bool = False) -> None:
    """``document`` as indented JSON (ASCII, so lone surrogates cannot break the encoding)."""
    write_atomic(path, json.dumps(document, indent=2, allow_nan=False) + "\n", durable=durable)


def sha256_file(path: Path) -> str:
    """The sha256 of the file at ``path``, read in chunks (files may be large, or grow)."""
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for chunk in iter(lambda: stream.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
