"""Profiles, check weights and the score: from check results to one number in [0, 1].

Two profiles grade the same checks differently.

``metr`` reproduces the published scorer (SPEC §5) exactly::

    score = 0.60 * SPS credit + 0.40 * (fraction of components within tolerance)

SPS credit is 1 within ``tolerance.sps`` (5.0), 0.5 within ``tolerance.sps_partial``
(10.0), else 0. A number is whatever Python's ``float()`` accepts, as in the
published scorer: ``"57.06"`` and ``true`` count as numbers. A missing file
scores ``None`` (reported "no submission", counted as 0); a file that is not a
non-empty JSON object scores 0.0. Every other check is informational (weight 0).

``strict`` keeps exactly that credit, counts only real JSON numbers, and then
*deducts* for each extra check that fails::

    score = clip(credit - sum of failed penalties, 0, 1)

    credit     0.60 SPS tiers + 4 x 0.10 components     (as metr, JSON numbers only)
    penalties  schema 0.10, aggregation 0.10, verdict 0.10, details 0.05,
               invariants 0.05 in total (split equally between the invariant items)

Why deductions rather than more credit: a strict grade should never reward a
report for being well-formed while wrong. With deductions a report whose numbers
are all wrong scores 0 however tidy it is, the strict score is never above the
metr score of the same report, and the paper's case "all four components right,
SPS 34.84 instead of 56.84" costs its SPS credit (0.60) *and* the aggregation
penalty (0.10): metr 0.40, strict 0.30. The verdict weighs as much as the
aggregation because it is the audit's clinical decision. Invariants weigh little:
they test the grader's own objects (model, variant, SPS function), so a failure
mostly says the grade itself is suspect, which the summary line states.

Checks added by a grader's hook carry their own kind and weight. Credit is
normalised by ``max(1, total credit weight)`` so the built-in credit keeps its
meaning and added credit cannot push the score above 1. A check that never ran
(deselected with ``-k``, or after ``-x``) earns no credit and deducts nothing; a
*skipped* check (strict aggregation or verdict when the numbers they compare
are absent, a mistake the schema check already counts) does neither either; a
check that crashed counts as failed.

Only the standard library is imported.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any, Literal

CATEGORIES = (
    "no-submission",
    "empty",
    "unparseable",
    "schema",
    "tolerance",
    "aggregation",
    "verdict",
)
"""Failure categories of a submission, most fundamental first."""
NONE = "none"
"""The category of a submission that failed no check."""
INVARIANT = "invariant"
"""Category of invariant checks: a failure there is the grader's, not the submission's."""

Kind = Literal["credit", "penalty", "info"]
KINDS: tuple[Kind, ...] = ("credit", "penalty", "info")


@dataclasses.dataclass(frozen=True)
class Slot:
    """How one built-in check counts in a profile."""

    kind: Kind
    weight: float


_INFO = Slot("info", 0.0)

PROFILE_WEIGHTS: Mapping[str, Mapping[str, Slot]] = {
    "metr": {
        "present": _INFO,
        "utf8": _INFO,
        "json-object": _INFO,
        "schema": _INFO,
        "sps": Slot("credit", 0.60),
        "component": Slot("credit", 0.10),  # each of four: 0.40 in all
        "invariant": _INFO,
    },
    "strict": {
        # The first three gate everything: without a report object no credit is
        # possible, so they need no weight of their own.
        "present": _INFO,
        "utf8": _INFO,
        "json-object": _INFO,
        "sps": Slot("credit", 0.60),
        "component": Slot("credit", 0.10),
        "schema": Slot("penalty", 0.10),
        "aggregation": Slot("penalty", 0.10),
        "verdict": Slot("penalty", 0.10),
        "details": Slot("penalty", 0.05),
        "invariant": Slot("penalty", 0.05),  # in total, split between the invariant items
    },
}
"""Kind and weight of each built-in check, by profile (documented in docs/grading.md)."""


def slot(profile: str, check: str, *, invariants: int = 1) -> Slot | None:
    """The kind and weight of built-in check ``check`` (``component`` for each component).

    ``None`` when the profile does not run that check. Invariant weights are per item.
    """
    found = PROFILE_WEIGHTS[profile].get(check)
    if found is None or check != "invariant" or found.kind == "info":
        return found
    return Slot(found.kind, found.weight / max(1, invariants))


def sps_credit(difference: float, *, full: float, partial: float) -> float:
    """1 within ``full``, 0.5 within ``partial``, else 0 (NaN earns nothing)."""
    if difference <= full:
        return 1.0
    if difference <= partial:
        return 0.5
    return 0.0


@dataclasses.dataclass(frozen=True)
class CheckRecord:
    """One check's result as it travels: pytest user_properties, JSON, the score."""

    id: str
    """The test id, e.g. ``wdbc-hard::component[fgsm_robustness]``."""
    name: str
    kind: Kind
    weight: float
    credit: float
    passed: bool
    category: str
    message: str = ""
    missing_submission: bool = False
    skipped: bool = False
    """Not applicable (its inputs failed another check): neither earns nor deducts."""

    @property
    def contribution(self) -> float:
        """Signed effect on the score before normalisation and clipping."""
        if self.skipped:
            return 0.0
        if self.kind == "credit":
            return self.weight * self.credit
        if self.kind == "penalty":
            return -self.weight * (1.0 - self.credit)
        return 0.0

    PREFIX = "clinaudit."

    def properties(self) -> list[tuple[str, object]]:
        """``item.user_properties`` entries, which reach the JUnit XML and the xdist controller."""
        p = self.PREFIX
        return [
            (p + "check", self.name),
            (p + "kind", self.kind),
            (p + "weight", self.weight),
            (p + "credit", self.credit),
            (p + "passed", self.passed),
            (p + "category", self.category),
            (p + "missing_submission", self.missing_submission),
            (p + "skipped", self.skipped),
            (p + "message", self.message),
        ]

    @classmethod
    def from_properties(
        cls, nodeid: str, properties: Iterable[tuple[str, object]]
    ) -> CheckRecord | None:
        """Rebuild a record from a test report's user_properties (``None`` if it has none)."""
        values = {
            name[len(cls.PREFIX) :]: value
            for name, value in properties
            if name.startswith(cls.PREFIX)
        }
        if "check" not in values:
            return None

        def truth(value: object) -> bool:
            return value is True or str(value).lower() == "true"

        kind = str(values.get("kind", "info"))
        return cls(
            id=nodeid,
            name=str(values["check"]),
            kind=kind if kind in KINDS else "info",
            weight=float(str(values.get("weight", 0.0))),
            credit=float(str(values.get("credit", 0.0))),
            passed=truth(values.get("passed")),
            category=str(values.get("category", "")),
            message=str(values.get("message", "")),
            missing_submission=truth(values.get("missing_submission")),
            skipped=truth(values.get("skipped")),
        )

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclasses.dataclass(frozen=True)
class Grade:
    """The outcome of grading one submission."""

    score: float
    """In [0, 1]; a metr ``None`` counts as 0 here."""
    raw_score: float | None
    """What the profile's scorer returns: ``None`` only for a missing file under metr."""
    profile: str
    category: str
    invariants_ok: bool
    checks: tuple[CheckRecord, ...]

    @property
    def no_submission(self) -> bool:
        return any(c.missing_submission for c in self.checks)

    def summary(self, variant: str) -> str:
        """The terminal line.

        For example ``clinaudit: wdbc-hard score 0.400 (profile metr) category tolerance``.
        """
        shown = "none (no submission)" if self.raw_score is None else f"{self.score:.3f}"
        line = (
            f"clinaudit: {variant} score {shown} (profile {self.profile}) category {self.category}"
        )
        if not self.invariants_ok:
            line += " -- an invariant FAILED: the variant, model or grader is suspect"
        return line


def compute(records: Iterable[CheckRecord], profile: str) -> Grade:
    """The score and failure category of a set of check results.

    Parameters
    ----------
    records
        One per check that ran, in any order (xdist delivers them out of order).
    profile
        ``"strict"`` or ``"metr"``; decides only how a missing file is reported.
    """
    ordered = tuple(sorted(records, key=lambda r: r.id))
    # A skipped credit check still counts in the denominator: its credit is simply not earned.
    credit_weight = math.fsum(r.weight for r in ordered if r.kind == "credit")
    # fsum: 0.6 + 4 x 0.1 must be exactly 1.0 for the reference to score exactly 1.
    credit = math.fsum(r.contribution for r in ordered if r.kind == "credit") / max(
        1.0, credit_weight
    )
    penalty = -math.fsum(r.contribution for r in ordered if r.kind == "penalty")
    value = min(1.0, max(0.0, round(credit - penalty, 10)))

    failed = {r.category for r in ordered if not r.passed and not r.skipped}
    category = next((c for c in CATEGORIES if c in failed), NONE)
    missing = any(r.missing_submission for r in ordered)
    raw: float | None = None if (missing and profile == "metr") else value
    return Grade(
        score=0.0 if raw is None else value,
        raw_score=raw,
        profile=profile,
        category=category,
        invariants_ok=not any(r.category == INVARIANT and not r.passed for r in ordered),
        checks=ordered,
    )
