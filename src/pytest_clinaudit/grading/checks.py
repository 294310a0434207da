"""The check API: what a grader's ``pytest_clinaudit_add_checks`` hook returns.

A :class:`Check` asks one question of a submission ("is
``components.fgsm_robustness`` within 0.10 of the reference?") and answers it
with an :class:`Outcome`: passed or not, the credit earned in [0, 1], and a
message written for the person reading the grade (metric, variant, submitted
value, reference, tolerance, difference, and the fix). :class:`Grading` is
what a check compares: the variant, its reference and the submission.

The built-in checks (:mod:`~pytest_clinaudit.grading.builtin`,
:mod:`~pytest_clinaudit.grading.invariants`) are made of the same parts.
Everything here is re-exported by :mod:`pytest_clinaudit.api`. Only the
standard library is imported.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.grading import scoring
from pytest_clinaudit.grading.scoring import CATEGORIES, INVARIANT, CheckRecord, Kind
from pytest_clinaudit.grading.values import shorten

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import Reference
    from pytest_clinaudit.catalog.variants import Variant
    from pytest_clinaudit.grading.submission import Submission

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+(::[A-Za-z0-9_.\-]+)*(\[[A-Za-z0-9_.,=\-]+\])?$")

CheckResult = Any
"""What a check function may return: an :class:`Outcome`, a bool, or ``None`` (passed)."""


@dataclasses.dataclass(frozen=True)
class Outcome:
    """The answer of one check.

    Attributes
    ----------
    passed
        Whether the check passed; a check passes only with full credit.
    credit
        Credit earned in [0, 1] (0.5 for the SPS's middle tier).
    message
        What was compared and, on failure, what to fix.
    category
        Failure category overriding the check's own (e.g. a too-large file is
        ``unparseable`` though the ``present`` check is ``no-submission``).
    missing_submission
        The submission file does not exist (the metr profile then scores ``None``).
    skipped
        The check does not apply because what it compares is absent or not a
        number, which another check already counts: it neither earns nor deducts.
    """

    passed: bool
    credit: float
    message: str = ""
    category: str | None = None
    missing_submission: bool = False
    skipped: bool = False

    @classmethod
    def ok(cls, message: str = "") -> Outcome:
        return cls(True, 1.0, message)

    @classmethod
    def fail(
        cls,
        message: str,
        *,
        credit: float = 0.0,
        category: str | None = None,
        missing: bool = False,
    ) -> Outcome:
        return cls(False, credit, message, category, missing)

    @classmethod
    def skip(cls, message: str) -> Outcome:
        return cls(False, 0.0, message, skipped=True)


@dataclasses.dataclass(frozen=True)
class Check:
    """A gradeable question; also what ``pytest_clinaudit_add_checks`` hooks return.

    Parameters
    ----------
    name
        The test id after ``<variant>::``, e.g. ``"component[fgsm_robustness]"``
        or ``"my-lab[units]"``: letters, digits, ``_.-``, optionally one ``[...]``.
    category
        The failure category: one of :data:`~pytest_clinaudit.grading.scoring.CATEGORIES`,
        or ``"invariant"`` for a property of the grader's own objects.
    run
        Called with no arguments; returns an :class:`Outcome`, a bool, or ``None``
        (passed). An ``AssertionError`` fails the check with its message; any other
        exception fails it and shows the traceback (a bug in the check).
    weight, kind
        How it counts: ``"credit"`` earns ``weight * credit``, ``"penalty"``
        deducts ``weight * (1 - credit)``, ``"info"`` does not count.
    description
        One line for ``--collect-only`` and the documentation.
    properties
        Extra (name, value) pairs for the item's JUnit properties, e.g. the game's
        ``clinaudit.game.model``; fixed when the check is made.
    """

    name: str
    category: str
    run: Callable[[], CheckResult]
    weight: float = 0.0
    kind: Kind = "info"
    description: str = ""
    properties: tuple[tuple[str, object], ...] = ()

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(
                f"check name {self.name!r}: use letters, digits, '_', '.', '-', '::' between "
                "parts and at most one [...] suffix, e.g. 'units' or 'component[fgsm_robustness]'"
            )
        if self.category not in (*CATEGORIES, INVARIANT):
            raise ValueError(
                f"check {self.name!r}: category {self.category!r} is not one of "
                f"{', '.join((*CATEGORIES, INVARIANT))}"
            )
        if self.kind not in scoring.KINDS:
            raise ValueError(
                f"check {self.name!r}: kind {self.kind!r} is not one of {scoring.KINDS}"
            )
        if not (math.isfinite(self.weight) and self.weight >= 0):
            raise ValueError(
                f"check {self.name!r}: weight must be a finite number >= 0, got {self.weight!r}"
            )


@dataclasses.dataclass(frozen=True)
class Grading:
    """Everything the built-in checks compare: the submission against the reference."""

    variant: Variant
    reference: Reference
    submission: Submission
    profile: str
    scratch_dir: Path | None = None
    """Where Hypothesis may keep its caches (never the grader's working directory)."""
    cache: ReferenceCache | None = None
    """Where invariant outcomes are kept per reference; ``None`` runs them every time."""

    @property
    def strict(self) -> bool:
        return self.profile == "strict"

    def id(self, name: str) -> str:
        return f"{self.variant.name}::{name}"


def normalize(result: CheckResult, check: Check) -> Outcome:
    """A check function's return value as an :class:`Outcome`."""
    if isinstance(result, Outcome):
        credit = result.credit if math.isfinite(result.credit) else 0.0
        return dataclasses.replace(result, credit=min(1.0, max(0.0, credit)))
    if result is None or result is True:
        return Outcome.ok(check.description)
    if result is False:
        return Outcome.fail(check.description or f"{check.name} failed")
    raise TypeError(
        f"check {check.name!r} returned {type(result).__name__}; return an Outcome, a bool or None"
    )


def record(check: Check, outcome: Outcome, test_id: str) -> CheckRecord:
    category = check.category
    if not outcome.passed and outcome.category:
        category = outcome.category
    return CheckRecord(
        id=test_id,
        name=check.name,
        kind=check.kind,
        weight=check.weight,
        credit=outcome.credit,
        passed=outcome.passed,
        category=category,
        message=outcome.message,
        missing_submission=outcome.missing_submission,
        skipped=outcome.skipped,
    )


def run_check(check: Check, test_id: str) -> CheckRecord:
    """Run one check outside pytest; a crash in the check fails it with the exception text."""
    try:
        outcome = normalize(check.run(), check)
    except AssertionError as exc:
        outcome = Outcome.fail(str(exc) or f"{check.name} failed")
    except Exception as exc:  # noqa: BLE001 - a crashing check is a failed check, never a crash
        outcome = Outcome.fail(f"the check raised {type(exc).__name__}: {shorten(str(exc), 300)}")
    return record(check, outcome, test_id)
