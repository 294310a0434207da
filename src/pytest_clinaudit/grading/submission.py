"""Reading an untrusted submission: bytes, text, JSON, without surprises.

A submission is whatever an agent left at the ``--submission`` path: a report,
nothing, a directory, a FIFO that never ends, 100 MB of zeros, binary garbage,
JSON nested 100,000 levels deep or full of duplicate keys. This module turns
each of those into a :class:`Submission` whose ``status`` names the first stage
that failed and whose ``message`` says what a person can do about it. Nothing
here raises for bad input, and nothing from a submission is ever evaluated or
unpickled: the only parser is :func:`json.loads`.

Stages
------
1. **read**: open with ``O_NOFOLLOW | O_NONBLOCK`` (a symlink or a FIFO cannot
   redirect or block the grader), ``fstat`` the open descriptor and require a
   regular file no larger than ``max_bytes``; read at most ``max_bytes + 1`` bytes.
2. **decode**: UTF-8, one leading byte order mark tolerated (SPEC §5).
3. **parse**: reject nesting deeper than :data:`MAX_DEPTH` *before* parsing
   (``json.loads`` would recurse once per level), then parse while recording
   duplicate keys and non-finite numbers (``NaN``, ``Infinity``, ``1e999``),
   which Python's parser accepts silently and RFC 8259 does not.
4. **shape**: a non-empty JSON object.

Only the standard library is imported.
"""

from __future__ import annotations

import codecs
import dataclasses
import errno
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pytest_clinaudit.grading.values import NonFinite, join, shorten

MAX_DEPTH = 512
"""Deepest nesting parsed. A report needs 3 levels; ``details`` may add a few.

Deep enough that every document Python's own parser handles under pytest (whose
stack is already ~100 frames deep) is accepted, so the ``metr`` profile agrees
with the published scorer; shallow enough that parsing never recurses out of
the interpreter's limit.
"""

Status = Literal[
    "ok",
    "missing",
    "symlink",
    "not-a-file",
    "unreadable",
    "too-large",
    "not-utf8",
    "empty",
    "invalid-json",
    "too-deep",
    "not-an-object",
    "empty-object",
]

READ_FAILURES: frozenset[str] = frozenset(
    {"missing", "symlink", "not-a-file", "unreadable", "too-large"}
)
DECODE_FAILURES: frozenset[str] = frozenset({"not-utf8"})

_BOM = codecs.BOM_UTF8
_OTHER_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_MAGIC = (
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x1f\x8b", "gzip-compressed data"),
    (b"\x80", "a Python pickle"),
    (b"\x7fELF", "an executable"),
)


@dataclasses.dataclass(frozen=True)
class Duplicate:
    """A key that occurs more than once in one object; the parser keeps the last value."""

    path: str
    """Where the object is, e.g. ``components`` (``""`` for the top level)."""
    key: str
    values: tuple[Any, ...]
    """Every value given for the key, in file order."""

    @property
    def where(self) -> str:
        return join(self.path, self.key)


@dataclasses.dataclass(frozen=True)
class Submission:
    """What was found at the submission path, stage by stage.

    Attributes
    ----------
    status
        ``"ok"`` or the first failure (see :data:`Status`).
    message
        For a failure: what is wrong, where, and how to fix it. Empty when ok.
    document
        The parsed JSON value once parsing succeeded (an object when ok), else ``None``.
    """

    path: Path
    status: Status
    message: str = ""
    size: int | None = None
    sha256: str | None = None
    had_bom: bool = False
    document: Any = None
    duplicates: tuple[Duplicate, ...] = ()
    nonfinite: tuple[tuple[str, str], ...] = ()
    """(path, literal) of each ``NaN``/``Infinity``/overflowing number, in file order."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def present(self) -> bool:
        """The file could be read (within the size limit)."""
        return self.status not in READ_FAILURES

    @property
    def decoded(self) -> bool:
        return self.present and self.status not in DECODE_FAILURES

    @property
    def report(self) -> dict[str, Any] | None:
        """The JSON object, when there is one (empty or not)."""
        return self.document if isinstance(self.document, dict) else None

    @property
    def reason(self) -> str:
        """A short phrase for the failure, for checks that could not run because of it."""
        return _REASONS.get(self.status, "{path} was graded").format(path=self.path)

    def duplicated(self, path: str) -> Duplicate | None:
        """The duplicate record of the key at ``path`` (e.g. ``components.fgsm_robustness``)."""
        for duplicate in self.duplicates:
            if duplicate.where == path:
                return duplicate
        return None

    def summary(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "status": self.status,
            "size": self.size,
            "sha256": self.sha256,
            "message": self.message,
        }


_REASONS = {
    "missing": "there is no file at {path}",
    "symlink": "{path} is a symbolic link",
    "not-a-file": "{path} is not a regular file",
    "unreadable": "{path} cannot be read",
    "too-large": "{path} is over the size limit",
    "not-utf8": "{path} is not UTF-8 text",
    "empty": "{path} is empty",
    "empty-object": "{path} holds an empty object",
    "invalid-json": "{path} is not valid JSON",
    "too-deep": "{path} nests too deeply to parse",
    "not-an-object": "{path} is not a JSON object",
}

# ------------------------------------------------------------------------ read


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "character device"
    if stat.S_ISBLK(mode):
        return "block device"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "special file"  # pragma: no cover - every other mode is listed above


def _read(path: Path, max_bytes: int) -> tuple[bytes | None, Submission | None]:
    """The file's bytes, or a failed :class:`Submission` saying why not."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except (FileNotFoundError, NotADirectoryError):
        if path.is_symlink():  # a dangling link: say so rather than "no such file"
            return None, _symlink(path)
        return None, Submission(
            path,
            "missing",
            f"{path}: no such file. The agent wrote no report, or wrote it somewhere else: "
            "check the path passed to --submission.",
        )
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            return None, _symlink(path)
        if exc.errno in (errno.EACCES, errno.EPERM):
            return None, Submission(
                path,
                "unreadable",
                f"{path}: permission denied. Fix: make the report readable by the grader "
                f"(e.g. chmod a+r {path}).",
            )
        return None, Submission(
            path,
            "unreadable",
            f"{path}: cannot be opened ({exc.strerror or exc}); nothing was graded.",
        )
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = _kind(info.st_mode)
            hint = (
                f" Fix: pass the report file inside it (e.g. {path / 'report.json'})."
                if kind == "directory"
                else " A pipe or device may never end or may block, so it is not read."
            )
            return None, Submission(
                path,
                "not-a-file",
                f"{path} is a {kind}, not a regular file; the grader reads only "
                f"regular files.{hint}",
            )
        if info.st_size > max_bytes:
            return None, _too_large(path, info.st_size, max_bytes)
        # Read one byte past the limit: st_size can lie (files that grow, procfs).
        chunks: list[bytes] = []
        remaining = max_bytes + 1
        while remaining > 0:
            chunk = os.read(fd, min(remaining, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            remaining -= len(chunk)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            return None, _too_large(path, None, max_bytes)
        return data, None
    except OSError as exc:
        return None, Submission(
            path,
            "unreadable",
            f"{path}: cannot be read ({exc.strerror or exc}); nothing was graded.",
        )
    finally:
        os.close(fd)


def _symlink(path: Path) -> Submission:
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:  # pragma: no cover - raced away
        target = ""
    return Submission(
        path,
        "symlink",
        f"{path} is a symbolic link{target}; the grader does not follow links in submissions, "
        "so a link cannot point it at another file. Fix: pass the report file itself.",
    )


def _too_large(path: Path, size: int | None, limit: int) -> Submission:
    shown = f"{size} bytes" if size is not None else "larger than the limit"
    return Submission(
        path,
        "too-large",
        f"{path} is {shown}; the grader reads at most {limit} bytes (--clinaudit-max-bytes) and "
        "a report is a few hundred. Fix: write only the report to this file.",
        size=size,
    )


# ---------------------------------------------------------------------- decode


def _decode(path: Path, data: bytes) -> tuple[str | None, bool, str]:
    """(text, had_bom, error message)."""
    for bom, name in _OTHER_BOMS:
        if data.startswith(bom):
            return (
                None,
                False,
                (
                    f"{path} starts with a {name} byte order mark: it is {name} text, not UTF-8. "
                    "Fix: save the report as UTF-8."
                ),
            )
    had_bom = data.startswith(_BOM)
    body = data[len(_BOM) :] if had_bom else data
    try:
        return body.decode("utf-8"), had_bom, ""
    except UnicodeDecodeError as exc:
        offset = exc.start + (len(_BOM) if had_bom else 0)
        looks = next((what for magic, what in _MAGIC if data.startswith(magic)), None)
        guess = f" It looks like {looks}." if looks else ""
        return (
            None,
            had_bom,
            (
                f"{path} is not UTF-8 text: byte 0x{data[offset]:02x} at offset {offset} "
                f"({exc.reason}).{guess} Fix: write the report as UTF-8 JSON."
            ),
        )


# ----------------------------------------------------------------------- parse


_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string, escapes included; runs of plain characters are consumed in one step."""
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


def nesting_depth(text: str, limit: int) -> int:
    """How deeply arrays and objects nest in ``text``, counting at most to ``limit + 1``.

    String contents (escapes included) are removed first, and an unterminated
    string ends the text, as it does for a parser; then only the brackets are
    walked, stopping as soon as the limit is exceeded, so a megabyte of ``[``
    costs ``limit`` steps and a flood of quoted keys costs regex time only.
    Invalid JSON gets some number; the parser rejects it afterwards anyway.
    """
    outside = _STRING.sub("", text)
    outside = outside.split('"', 1)[0]  # what follows an unterminated quote is string
    depth = deepest = 0
    for char in _NOT_A_BRACKET.sub("", outside):
        if char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > limit:
                    return deepest
        else:
            depth -= 1
    return deepest


class _Recorder:
    """Hooks for :func:`json.loads` that note what Python's parser would hide."""

    def __init__(self) -> None:
        # Objects are kept alive here so that their ids stay unique while we look them up.
        self.objects: list[tuple[dict[str, Any], dict[str, list[Any]]]] = []

    def object_pairs(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        seen: dict[str, list[Any]] = {}
        for key, value in pairs:
            if key in result:
                seen.setdefault(key, [result[key]]).append(value)
            result[key] = value  # last one wins, as in json.loads
        if seen:
            self.objects.append((result, seen))
        return result

    @staticmethod
    def number(literal: str) -> float:
        value = float(literal)
        return value if math.isfinite(value) else NonFinite(literal)

    @staticmethod
    def constant(literal: str) -> float:
        return NonFinite(literal)


def _walk(document: Any) -> Iterator[tuple[str, Any]]:
    """(path, value) of every value, depth first, in file order, without recursion."""
    stack: list[tuple[str, Any]] = [("", document)]
    while stack:
        path, value = stack.pop()
        yield path, value
        if isinstance(value, dict):
            stack.extend((join(path, key), item) for key, item in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend(
                (join(path, index), item) for index, item in reversed(list(enumerate(value)))
            )


def _json_error(path: Path, text: str, exc: json.JSONDecodeError) -> str:
    line = (
        text.splitlines()[exc.lineno - 1] if text and exc.lineno <= len(text.splitlines()) else ""
    )
    start = max(0, exc.colno - 1 - 30)
    excerpt = shorten(repr(line[start : start + 60]), 70)
    near = f" near {excerpt}" if line.strip() else ""
    return (
        f"{path} is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}{near}. "
        'Fix: write one JSON object, e.g. {"sps": 57.07, "components": {...}, "verdict": "..."}.'
    )


_KINDS = {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}


def parse_bytes(
    data: bytes, path: Path | str = "<submission>", *, max_depth: int = MAX_DEPTH
) -> Submission:
    """Decode and parse submission bytes (stages 2 to 4); never raises for bad input."""
    path = Path(path)
    size, digest = len(data), hashlib.sha256(data).hexdigest()
    common: dict[str, Any] = {"size": size, "sha256": digest}
    text, had_bom, error = _decode(path, data)
    if text is None:
        return Submission(path, "not-utf8", error, **common)
    common["had_bom"] = had_bom
    if not text.strip():
        if not data:
            what = "empty (0 bytes)"
        elif not text:
            what = "empty apart from a byte order mark"
        else:
            what = "blank: it holds only whitespace"
        return Submission(
            path,
            "empty",
            f"{path} is {what}. The agent created the file but wrote no report.",
            **common,
        )
    depth = nesting_depth(text, max_depth)
    if depth > max_depth:
        return Submission(
            path,
            "too-deep",
            f"{path} nests arrays and objects more than {max_depth} levels deep; a report needs 3. "
            "It was not parsed.",
            **common,
        )
    recorder = _Recorder()
    try:
        document = json.loads(
            text,
            object_pairs_hook=recorder.object_pairs,
            parse_float=recorder.number,
            parse_constant=recorder.constant,
        )
    except json.JSONDecodeError as exc:
        return Submission(path, "invalid-json", _json_error(path, text, exc), **common)
    except RecursionError:  # the depth bound should prevent this; never let it escape
        return Submission(path, "too-deep", f"{path} nests too deeply to parse.", **common)
    except ValueError as exc:  # e.g. an integer literal longer than Python's digit limit
        return Submission(
            path, "invalid-json", f"{path} is not parseable: {shorten(str(exc), 200)}.", **common
        )

    duplicates: list[Duplicate] = []
    nonfinite: list[tuple[str, str]] = []
    by_id = {id(obj): seen for obj, seen in recorder.objects}
    for where, value in _walk(document):
        if isinstance(value, NonFinite):
            nonfinite.append((where, value.literal))
        elif isinstance(value, dict) and id(value) in by_id:
            duplicates.extend(
                Duplicate(where, key, tuple(values)) for key, values in by_id[id(value)].items()
            )
    common.update(document=document, duplicates=tuple(duplicates), nonfinite=tuple(nonfinite))
    if not isinstance(document, dict):
        kind = _KINDS.get(type(document), "a number")
        return Submission(
            path,
            "not-an-object",
            f"{path} holds {kind}, not a JSON object. Expected "
            '{"sps": ..., "components": {...}, "verdict": ...}.',
            **common,
        )
    if not document:
        return Submission(
            path,
            "empty-object",
            f"{path} holds an empty JSON object {{}}: nothing to grade. "
            "Expected the keys sps, components and verdict.",
            **common,
        )
    return Submission(path, "ok", **common)


def load(path: Path | str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Submission:
    """Read, decode and parse the submission at ``path``; never raises for bad input."""
    path = Path(path)
    data, failure = _read(path, max_bytes)
    if failure is not None:
        return failure
    assert data is not None
    return parse_bytes(data, path, max_depth=max_depth)
