"""Reading a game report (SPEC §8.4): which model the agent flags with which kind, and why.

A report is untrusted JSON, read by :mod:`~pytest_clinaudit.grading.submission`;
this module turns its ``models`` object into decisions and never raises.
Every number goes through :mod:`~pytest_clinaudit.grading.values` under the
profile's rules (``strict``: JSON numbers only; ``metr``: what Python's
``float()`` accepts). What it cannot use (a model name the instance does not
have, a kind not in the catalogue, ``defects`` that is not an array, 10,000
models) is ignored here and reported by the schema check.

A model key or a key inside one that the file repeats is a hedge. Under
``strict`` a repeated model's flags are the union of every copy's (hedging
can only add false alarms), and a localization or evidence value given twice
differently counts as neither; under ``metr`` the last copy wins, as Python's
parser has it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_clinaudit.grading.submission import Submission
from pytest_clinaudit.grading.values import describe, join, json_number, metr_number


@dataclasses.dataclass(frozen=True)
class Claim:
    """One submitted value (localization or evidence) of a flagged kind, as read."""

    raw: Any
    """The value as parsed, or ``None`` when absent."""
    present: bool
    ambiguous: bool = False
    """Given more than once with different values (strict)."""

    def number(self, strict: bool) -> float | None:
        if not self.present or self.ambiguous:
            return None
        return json_number(self.raw) if strict else metr_number(self.raw)

    def text(self, strict: bool) -> str | None:
        if not self.present or self.ambiguous or not isinstance(self.raw, str):
            return None
        return self.raw if strict else self.raw.strip()

    def describe(self) -> str:
        if not self.present:
            return "missing"
        if self.ambiguous:
            return "given twice with different values"
        return describe(self.raw)


ABSENT = Claim(None, False)


@dataclasses.dataclass(frozen=True)
class Decisions:
    """What a report says about an instance's models."""

    readable: bool
    """The report is a JSON object whose ``models`` is an object."""
    flags: dict[str, frozenset[str]]
    """Model name -> the catalogue's kinds it is flagged with (every name of the instance)."""
    claims: dict[tuple[str, str, str], Claim]
    """(model, kind, key) -> the submitted localization or evidence value."""
    why_unreadable: str = ""

    def flagged(self, model: str, kind: str) -> bool:
        return kind in self.flags.get(model, frozenset())

    def claim(self, model: str, kind: str, key: str) -> Claim:
        return self.claims.get((model, kind, key), ABSENT)


def _kinds(value: Any, catalogue: Iterable[str]) -> set[str]:
    """The catalogue's kinds named in a ``defects`` value (other entries are ignored)."""
    known = set(catalogue)
    if not isinstance(value, list):
        return set()
    return {item for item in value if isinstance(item, str) and item in known}


def read_decisions(
    submission: Submission,
    names: Iterable[str],
    catalogue: Iterable[str],
    keys: Mapping[str, Iterable[str]],
    *,
    strict: bool,
) -> Decisions:
    """The decisions of a parsed report about models ``names``.

    ``keys`` maps each kind to the keys a flagged model may give under it
    (localization and evidence, e.g. ``miscalibrated -> direction, ece``).
    """
    names = list(names)
    catalogue = list(catalogue)
    empty = {name: frozenset[str]() for name in names}
    report = submission.report if submission.ok else None
    if report is None:
        return Decisions(False, empty, {}, f"{submission.reason}")
    models = report.get("models")
    if not isinstance(models, dict):
        got = "missing" if "models" not in report else describe(models)
        return Decisions(False, empty, {}, f"models: expected an object, got {got}")
    flags: dict[str, frozenset[str]] = {}
    claims: dict[tuple[str, str, str], Claim] = {}
    for name in names:
        copies = _copies(submission, models, name, strict)
        kinds: set[str] = set()
        for copy in copies:
            if isinstance(copy, dict):
                kinds |= _kinds(copy.get("defects"), catalogue)
                for defects in _repeated(submission, join(join("models", name), "defects"), strict):
                    kinds |= _kinds(defects, catalogue)
        flags[name] = frozenset(kinds)
        for kind, wanted in keys.items():
            for key in wanted:
                claims[(name, kind, key)] = _claim(submission, copies, name, kind, key, strict)
    return Decisions(True, flags, claims)


def _repeated(submission: Submission, where: str, strict: bool) -> list[Any]:
    """Every value a repeated key at ``where`` was given (strict), else nothing extra."""
    if not strict:
        return []
    parent, _, key = where.rpartition(".")
    for duplicate in submission.duplicates:
        if duplicate.path == parent and duplicate.key == key:
            return list(duplicate.values)
    return []


def _copies(submission: Submission, models: dict[str, Any], name: str, strict: bool) -> list[Any]:
    """The model's entry, and under ``strict`` every other copy the file repeated."""
    repeated = _repeated(submission, join("models", name), strict)
    if repeated:
        return repeated
    return [models[name]] if name in models else []


def _claim(
    submission: Submission, copies: list[Any], model: str, kind: str, key: str, strict: bool
) -> Claim:
    seen: list[Any] = []
    for copy in copies:
        if not isinstance(copy, dict):
            continue
        section = copy.get(kind)
        if not isinstance(section, dict) or key not in section:
            continue
        where = join(join(join("models", model), kind), key)
        seen.extend(_repeated(submission, where, strict) or [section[key]])
    if not seen:
        return ABSENT
    distinct = {repr(value) for value in seen}
    if strict and len(distinct) > 1:
        return Claim(seen[-1], True, ambiguous=True)
    return Claim(seen[-1], True)
