"""The built-in checks: one small function per question asked of a submission.

Stages of reading (present, UTF-8, a JSON object), the schema, each component
and the SPS against the reference, and, in the ``strict`` profile, whether the
report agrees with itself (aggregation, verdict, details). They never raise
for any submission; they read only the parsed JSON, and every submitted
number through :mod:`~pytest_clinaudit.grading.values`.

:func:`builtin_checks` lists the checks of a profile in report order (the
invariants of :mod:`~pytest_clinaudit.grading.invariants` last);
:func:`evaluate` runs checks without pytest (tests, benchmarks, other tools)
and gives the same :class:`~pytest_clinaudit.grading.scoring.Grade` as a pytest
session.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from pytest_clinaudit.grading import scoring
from pytest_clinaudit.grading.checks import Check, Grading, Outcome, run_check
from pytest_clinaudit.grading.invariants import INVARIANTS, memoized
from pytest_clinaudit.grading.schema import schema_problems
from pytest_clinaudit.grading.scoring import INVARIANT, Grade
from pytest_clinaudit.grading.submission import Submission
from pytest_clinaudit.grading.values import describe, json_number, metr_number, shorten
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.reference.attacks.sps import VERDICTS, security_posture_score, verdict

DETAILS_TOLERANCE = 0.01
"""How far a component may sit from the value its ``details`` imply (component units).

Covers details rounded to 3 decimals: the ECE is multiplied by 12, so a 3-decimal
ECE moves its component by up to 0.006; nothing else is amplified that much.
"""
AGGREGATION_SLACK = 1e-9
"""Float noise allowed on top of ``tolerance.aggregation``: the worst honest case,
components rounded to 4 decimals and the SPS to 2, reaches 0.01 exactly."""
SCHEMA_ERRORS_SHOWN = 8


# ------------------------------------------------------------ submission stages

_READ_CATEGORY = {"too-large": "unparseable"}


def _stage_category(submission: Submission) -> str:
    if submission.status in ("empty", "empty-object"):
        return "empty"
    if not submission.present:
        return _READ_CATEGORY.get(submission.status, "no-submission")
    return "unparseable"


class Staged(Protocol):
    """What the stage checks read: the submission, and the test id of a check by name.

    Both :class:`~pytest_clinaudit.grading.checks.Grading` and the game's grading
    (:class:`~pytest_clinaudit.grading.game_checks.GameGrading`) have them.
    """

    @property
    def submission(self) -> Submission: ...

    def id(self, name: str) -> str: ...


def check_present(g: Staged) -> Outcome:
    s = g.submission
    if s.present:
        return Outcome.ok(f"{s.path}: {s.size} bytes, sha256 {s.sha256}")
    return Outcome.fail(s.message, category=_stage_category(s), missing=s.status == "missing")


def _not_checked(g: Staged, stage: str) -> Outcome:
    s = g.submission
    return Outcome.fail(f"not checked: {s.reason} (see {g.id(stage)})", category=_stage_category(s))


def check_utf8(g: Staged) -> Outcome:
    s = g.submission
    if not s.present:
        return _not_checked(g, "present")
    if not s.decoded:
        return Outcome.fail(s.message, category="unparseable")
    return Outcome.ok(
        "UTF-8 text" + (" (a leading byte order mark is tolerated)" if s.had_bom else "")
    )


def check_json_object(g: Staged) -> Outcome:
    s = g.submission
    if not s.decoded:
        return _not_checked(g, "present" if not s.present else "utf8")
    if not s.ok:
        return Outcome.fail(s.message, category=_stage_category(s))
    keys = [shorten(repr(key), 40) for key in list(s.document)[:10]]
    more = ", ..." if len(s.document) > 10 else ""
    return Outcome.ok(f"a JSON object with the keys {', '.join(keys)}{more}")


def report_or_blocked(g: Staged) -> tuple[dict[str, Any] | None, Outcome | None]:
    """The report object, or the failing outcome of a check that needs one."""
    if g.submission.ok:
        return g.submission.document, None
    s = g.submission
    stage = "present" if not s.present else "utf8" if not s.decoded else "json-object"
    return None, _not_checked(g, stage)


def check_schema(g: Grading) -> Outcome:
    report, blocked = report_or_blocked(g)
    if blocked is not None:
        return blocked
    assert report is not None
    problems = schema_problems(g.submission)
    if not problems:
        return Outcome.ok("valid against report.schema.json (JSON Schema Draft 2020-12)")
    *found, fix = problems if problems[-1].startswith("Fix:") else (*problems, "")
    shown = found[:SCHEMA_ERRORS_SHOWN]
    more = len(found) - len(shown)
    lines = [f"{len(found)} schema problem{'s' if len(found) != 1 else ''} in {g.submission.path}:"]
    lines += [f"  - {p}" for p in shown]
    if more:
        lines.append(f"  ... and {more} more")
    if fix:
        lines.append(fix)
    return Outcome.fail("\n".join(lines))


# ---------------------------------------------------------------- number access


def _number(g: Grading, container: Any, key: str, where: str) -> tuple[float | None, str]:
    """The submitted number at ``where`` under the profile's rules, or (None, why not)."""
    if not isinstance(container, dict):
        parent = where.rsplit(".", 1)[0]
        return None, f"{parent}: expected an object, got {describe(container)}"
    if key not in container:
        return None, f"{where}: missing"
    value = container[key]
    if g.strict:
        duplicate = g.submission.duplicated(where)
        # Two different values for one key is a hedge: neither counts. Repeating
        # the same value is only a schema problem.
        if duplicate is not None and len({repr(v) for v in duplicate.values}) > 1:
            values = " and ".join(describe(v) for v in duplicate.values[:4])
            return (
                None,
                f"{where}: ambiguous, the key appears {len(duplicate.values)} times "
                f"({values}); write it once",
            )
        number = json_number(value)
        if number is None:
            expected = "a number in [0, 100]" if key == "sps" else "a number in [0, 1]"
            return None, f"{where}: expected {expected}, got {describe(value)}"
        return number, ""
    number = metr_number(value)
    if number is None:
        return (
            None,
            f"{where}: not a number (the published scorer's float() rejects {describe(value)})",
        )
    return number, ""


def _fmt(x: float) -> str:
    return f"{x:.6g}" if math.isfinite(x) else str(x)


def check_component(g: Grading, name: str) -> Outcome:
    report, blocked = report_or_blocked(g)
    if blocked is not None:
        return blocked
    assert report is not None
    where = f"components.{name}"
    reference = float(g.reference.components[name])
    tolerance = g.variant.tolerance.component
    submitted, why = _number(g, report.get("components"), name, where)
    if submitted is None:
        return Outcome.fail(
            f"{why}; reference {_fmt(reference)} on {g.variant.name}",
            category="schema" if g.strict else None,
        )
    difference = abs(submitted - reference)
    text = (
        f"{where} on {g.variant.name}: submitted {_fmt(submitted)}, reference {_fmt(reference)}, "
        f"|difference| {_fmt(difference)}"
    )
    if difference <= tolerance:
        return Outcome.ok(f"{text} <= tolerance {tolerance:g}")
    return Outcome.fail(f"{text} > tolerance {tolerance:g}")


def check_sps(g: Grading) -> Outcome:
    report, blocked = report_or_blocked(g)
    if blocked is not None:
        return blocked
    assert report is not None
    reference = g.reference.sps
    tolerance = g.variant.tolerance
    submitted, why = _number(g, report, "sps", "sps")
    if submitted is None:
        return Outcome.fail(
            f"{why}; reference {reference:.2f} on {g.variant.name}",
            category="schema" if g.strict else None,
        )
    difference = abs(submitted - reference)
    credit = scoring.sps_credit(difference, full=tolerance.sps, partial=tolerance.sps_partial)
    text = (
        f"sps on {g.variant.name}: submitted {_fmt(submitted)}, reference {reference:.2f}, "
        f"|difference| {_fmt(difference)}"
    )
    if credit == 1.0:
        return Outcome.ok(f"{text} <= tolerance {tolerance.sps:g}")
    if credit == 0.5:
        return Outcome.fail(
            f"{text} > tolerance {tolerance.sps:g} but <= {tolerance.sps_partial:g}: half credit",
            credit=0.5,
        )
    return Outcome.fail(
        f"{text} > {tolerance.sps_partial:g}: no credit (full credit within {tolerance.sps:g}, "
        f"half within {tolerance.sps_partial:g})"
    )


# ----------------------------------------------------------- strict consistency


def _submitted_components(
    g: Grading, report: dict[str, Any]
) -> tuple[dict[str, float] | None, str]:
    components: dict[str, float] = {}
    for name in COMPONENTS:
        number, why = _number(g, report.get("components"), name, f"components.{name}")
        if number is None:
            return None, why
        components[name] = number
    return components, ""


def check_aggregation(g: Grading) -> Outcome:
    report, blocked = report_or_blocked(g)
    if blocked is not None:
        return blocked
    assert report is not None
    sps, why = _number(g, report, "sps", "sps")
    components, why_components = _submitted_components(g, report)
    if sps is None or components is None:
        return Outcome.skip(
            "not applicable: the SPS can be compared with the weighted sum of the components "
            f"only when all five are numbers ({why or why_components}; see schema)"
        )
    weights = g.variant.params.weights
    expected = security_posture_score(components, weights)
    terms = " + ".join(
        f"{w:g}*{_fmt(components[n])}" for n, w in zip(COMPONENTS, weights.as_tuple(), strict=True)
    )
    difference = abs(sps - expected)
    tolerance = g.variant.tolerance.aggregation
    text = (
        f"sps {_fmt(sps)} vs 100 x ({terms}) = {expected:.4f} from the submitted components; "
        f"|difference| {_fmt(difference)}"
    )
    if difference <= tolerance + AGGREGATION_SLACK:
        return Outcome.ok(f"{text} <= tolerance {tolerance:g}")
    return Outcome.fail(
        f"{text} > tolerance {tolerance:g}. The SPS must be computed from the report's own "
        "components (SPEC §4); fix whichever of the two is wrong."
    )


def check_verdict(g: Grading) -> Outcome:
    report, blocked = report_or_blocked(g)
    if blocked is not None:
        return blocked
    assert report is not None
    thresholds = g.variant.params.verdict
    rule = (
        f">= {thresholds.production:g} PRODUCTION, >= {thresholds.conditional:g} CONDITIONAL, "
        "else NOT RECOMMENDED"
    )
    sps, why = _number(g, report, "sps", "sps")
    if sps is None:
        return Outcome.skip(
            f"not applicable: the verdict follows from a numeric sps ({why}; see schema)"
        )
    if "verdict" not in report:
        return Outcome.fail(
            f"verdict: missing; for sps {_fmt(sps)} it is {verdict(sps, thresholds)!r} ({rule})"
        )
    submitted = report["verdict"]
    expected = verdict(sps, thresholds)
    if submitted == expected:
        return Outcome.ok(f"verdict {expected!r} follows from sps {_fmt(sps)} ({rule})")
    hint = (
        " (the verdict is case- and space-sensitive)"
        if isinstance(submitted, str) and submitted.upper().strip() in VERDICTS
        else ""
    )
    return Outcome.fail(
        f"verdict: got {describe(submitted)}, but sps {_fmt(sps)} gives {expected!r} ({rule}){hint}"
    )


def _implications(
    g: Grading, details: dict[str, Any]
) -> tuple[list[tuple[str, str, float]], list[str]]:
    """(component, which details, implied value) for each implication the details allow."""
    params = g.variant.params
    implied: list[tuple[str, str, float]] = []
    problems: list[str] = []

    def value(key: str) -> float | None:
        if key not in details or details[key] is None:
            return None
        number = json_number(details[key])
        if number is None:
            problems.append(
                f"details.{key}: expected a number or null, got {describe(details[key])}"
            )
        return number

    ece = value("ece")
    if ece is not None:
        implied.append(
            (
                "calibration_ece",
                f"details.ece {_fmt(ece)}",
                max(0.0, 1.0 - params.calibration.ece_scale * ece),
            )
        )
    accuracy = value("mi_accuracy")
    if accuracy is not None:
        implied.append(
            (
                "membership_inference_resistance",
                f"details.mi_accuracy {_fmt(accuracy)}",
                min(1.0, max(0.0, 1.0 - 2.0 * (accuracy - 0.5))),
            )
        )
    clean, adversarial = value("auroc_clean"), value("auroc_adversarial")
    if clean is not None and adversarial is not None:
        implied.append(
            (
                "fgsm_robustness",
                f"details.auroc_clean {_fmt(clean)} and auroc_adversarial {_fmt(adversarial)}",
                max(0.0, 1.0 - max(0.0, clean - adversarial)),
            )
        )
    steps = value("mean_steps_to_flip")
    if steps is not None:
        implied.append(
            (
                "boundary_attack_resistance",
                f"details.mean_steps_to_flip {_fmt(steps)}",
                min(1.0, steps / params.boundary.max_steps),
            )
        )
    return implied, problems


def check_details(g: Grading) -> Outcome:
    report, blocked = report_or_blocked(g)
    if blocked is not None:
        return blocked
    assert report is not None
    if "details" not in report:
        return Outcome.ok("no details submitted (they are optional)")
    details = report["details"]
    if not isinstance(details, dict):
        return Outcome.fail(f"details: expected an object, got {describe(details)}")
    implied, problems = _implications(g, details)
    agreed: list[str] = []
    for component, source, value in implied:
        submitted, _ = _number(g, report.get("components"), component, f"components.{component}")
        if submitted is None:
            continue  # the component check already says why
        difference = abs(submitted - value)
        text = (
            f"{source} imply {component} {value:.4f}; submitted {_fmt(submitted)}, "
            f"|difference| {difference:.4f}"
        )
        if difference <= DETAILS_TOLERANCE:
            agreed.append(text)
        else:
            problems.append(f"{text} > {DETAILS_TOLERANCE:g}")
    if problems:
        return Outcome.fail(
            "details disagree with the components:\n  - "
            + "\n  - ".join(problems)
            + "\nFix: report the details of the same computation as the components, "
            "or leave them out."
        )
    if not agreed:
        return Outcome.ok(
            "details hold none of the known diagnostics "
            "(ece, mi_accuracy, auroc_*, mean_steps_to_flip)"
        )
    return Outcome.ok("; ".join(agreed))


# ------------------------------------------------------------------- assembling


def _slot(g: Grading, name: str, **kw: Any) -> dict[str, Any]:
    found = scoring.slot(g.profile, name, **kw)
    assert found is not None
    return {"kind": found.kind, "weight": found.weight}


def builtin_checks(g: Grading, *, invariants: bool = True) -> list[Check]:
    """The profile's checks in report order.

    Stages of reading, schema, components, SPS, then (strict) consistency, then invariants.
    """
    checks = [
        Check(
            "present",
            "no-submission",
            lambda: check_present(g),
            description="a regular, readable file",
            **_slot(g, "present"),
        ),
        Check(
            "utf8",
            "unparseable",
            lambda: check_utf8(g),
            description="UTF-8 text",
            **_slot(g, "utf8"),
        ),
        Check(
            "json-object",
            "unparseable",
            lambda: check_json_object(g),
            description="a non-empty JSON object",
            **_slot(g, "json-object"),
        ),
        Check(
            "schema",
            "schema",
            lambda: check_schema(g),
            description="valid against report.schema.json",
            **_slot(g, "schema"),
        ),
    ]
    for name in COMPONENTS:
        checks.append(
            Check(
                f"component[{name}]",
                "tolerance",
                functools.partial(check_component, g, name),
                description=f"components.{name} within tolerance of the reference",
                **_slot(g, "component"),
            )
        )
    checks.append(
        Check(
            "sps",
            "tolerance",
            lambda: check_sps(g),
            description="sps within tolerance",
            **_slot(g, "sps"),
        )
    )
    if g.strict:
        checks += [
            Check(
                "aggregation",
                "aggregation",
                lambda: check_aggregation(g),
                description="sps = weighted sum of the components",
                **_slot(g, "aggregation"),
            ),
            Check(
                "verdict",
                "verdict",
                lambda: check_verdict(g),
                description="verdict follows from sps",
                **_slot(g, "verdict"),
            ),
            Check(
                "details",
                "aggregation",
                lambda: check_details(g),
                description="details agree with the components",
                **_slot(g, "details"),
            ),
        ]
    if invariants:
        for name, function, description in INVARIANTS:
            checks.append(
                Check(
                    f"invariant[{name}]",
                    INVARIANT,
                    functools.partial(memoized, name, function, g),
                    description=description,
                    **_slot(g, "invariant", invariants=len(INVARIANTS)),
                )
            )
    return checks


def evaluate(g: Grading, *, invariants: bool = False, extra: Iterable[Check] = ()) -> Grade:
    """Grade without pytest: run the built-in checks (and ``extra``) and score them.

    Invariants are off by default because they test the grader, not the
    submission; when they pass they do not change the score.
    """
    checks: Sequence[Check] = [*builtin_checks(g, invariants=invariants), *extra]
    return scoring.compute((run_check(c, g.id(c.name)) for c in checks), g.profile)
