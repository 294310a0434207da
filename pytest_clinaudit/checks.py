"""The grading checks: one small function per question asked of a submission.

Each check answers one question ("is ``components.fgsm_robustness`` within 0.10
of the reference?") with an :class:`Outcome`: passed or not, the credit earned
in [0, 1], and a message written for the person reading the grade (metric,
variant, submitted value, reference, tolerance, difference, and the fix). The
built-in checks never raise for any submission; they read only the parsed JSON.

:func:`builtin_checks` lists the checks of a profile in report order;
:func:`evaluate` runs checks without pytest (tests, benchmarks, other tools)
and gives the same :class:`~pytest_clinaudit.scoring.Grade` as a pytest session.

Invariant checks run Hypothesis property tests over this session's own objects
(the variant's SPS function, the model's cached test probabilities), so a
custom variant or a tampered cache that breaks them is caught where the grade
is made. Hypothesis and NumPy are imported only when an invariant runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import math
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit import scoring
from pytest_clinaudit.reference.params import COMPONENTS
from pytest_clinaudit.reference.sps import VERDICTS, security_posture_score, verdict
from pytest_clinaudit.scoring import CATEGORIES, INVARIANT, CheckRecord, Grade, Kind, metr_number
from pytest_clinaudit.submission import Submission, describe, join, real_number, shorten

if TYPE_CHECKING:
    import hypothesis

    from pytest_clinaudit.catalog import Variant
    from pytest_clinaudit.references import Reference

DETAILS_TOLERANCE = 0.01
"""How far a component may sit from the value its ``details`` imply (component units).

Covers details rounded to 3 decimals: the ECE is multiplied by 12, so a 3-decimal
ECE moves its component by up to 0.006; nothing else is amplified that much.
"""
AGGREGATION_SLACK = 1e-9
"""Float noise allowed on top of ``tolerance.aggregation``: the worst honest case,
components rounded to 4 decimals and the SPS to 2, reaches 0.01 exactly."""
INVARIANT_EXAMPLES = 30
"""Examples per invariant: enough to exercise edges, cheap enough for a 1-second session."""
SCHEMA_ERRORS_SHOWN = 8

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+(\[[A-Za-z0-9_.,=\-]+\])?$")

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
        The failure category: one of :data:`~pytest_clinaudit.scoring.CATEGORIES`,
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
    """

    name: str
    category: str
    run: Callable[[], CheckResult]
    weight: float = 0.0
    kind: Kind = "info"
    description: str = ""

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ValueError(
                f"check name {self.name!r}: use letters, digits, '_', '.', '-' and at most one "
                "[...] suffix, e.g. 'units' or 'component[fgsm_robustness]'"
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


# ------------------------------------------------------------ submission stages

_READ_CATEGORY = {"too-large": "unparseable"}


def _stage_category(submission: Submission) -> str:
    if submission.status in ("empty", "empty-object"):
        return "empty"
    if not submission.present:
        return _READ_CATEGORY.get(submission.status, "no-submission")
    return "unparseable"


def check_present(g: Grading) -> Outcome:
    s = g.submission
    if s.present:
        return Outcome.ok(f"{s.path}: {s.size} bytes, sha256 {s.sha256}")
    return Outcome.fail(s.message, category=_stage_category(s), missing=s.status == "missing")


def _not_checked(g: Grading, stage: str) -> Outcome:
    s = g.submission
    return Outcome.fail(f"not checked: {s.reason} (see {g.id(stage)})", category=_stage_category(s))


def check_utf8(g: Grading) -> Outcome:
    s = g.submission
    if not s.present:
        return _not_checked(g, "present")
    if not s.decoded:
        return Outcome.fail(s.message, category="unparseable")
    return Outcome.ok(
        "UTF-8 text" + (" (a leading byte order mark is tolerated)" if s.had_bom else "")
    )


def check_json_object(g: Grading) -> Outcome:
    s = g.submission
    if not s.decoded:
        return _not_checked(g, "present" if not s.present else "utf8")
    if not s.ok:
        return Outcome.fail(s.message, category=_stage_category(s))
    keys = [shorten(repr(key), 40) for key in list(s.document)[:10]]
    more = ", ..." if len(s.document) > 10 else ""
    return Outcome.ok(f"a JSON object with the keys {', '.join(keys)}{more}")


def _report(g: Grading) -> tuple[dict[str, Any] | None, Outcome | None]:
    """The report object, or the failing outcome of a check that needs one."""
    if g.submission.ok:
        return g.submission.document, None
    s = g.submission
    stage = "present" if not s.present else "utf8" if not s.decoded else "json-object"
    return None, _not_checked(g, stage)


# ----------------------------------------------------------------------- schema


@functools.lru_cache(maxsize=1)
def report_schema() -> dict[str, Any]:
    """The shipped JSON Schema (Draft 2020-12) of a report."""
    text = resources.files("pytest_clinaudit").joinpath("report.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    base = jsonschema.Draft202012Validator
    # JSON Schema's "number" admits NaN and Infinity when Python parsed them, and
    # every range keyword is false for NaN, so NaN would slip through; a number
    # here is what RFC 8259 calls one.
    checker = base.TYPE_CHECKER.redefine_many(
        {
            "number": lambda _, value: real_number(value) is not None,
            "integer": lambda _, value: (
                real_number(value) is not None and float(value).is_integer()
            ),
        }
    )
    validator_class = jsonschema.validators.extend(base, type_checker=checker)
    return validator_class(report_schema())


def _bounds(schema: dict[str, Any]) -> str:
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None and high is not None:
        return f"a number in [{low:g}, {high:g}]"
    return "a number"


_SCHEMA_FIXES = {
    "type": 'write plain JSON numbers (0.52, not "0.52"; no true/false, NaN or Infinity)',
    "bounds": "components lie in [0, 1] and the SPS in [0, 100]",
    "required": "the report needs sps, components (all four) and verdict",
    "additionalProperties": (
        "extra information belongs under details; check the spelling of the keys"
    ),
    "enum": "the verdict is exactly PRODUCTION, CONDITIONAL or NOT RECOMMENDED",
    "duplicate": "write each key once",
}


def _path_of(error: Any) -> str:
    where = ""
    for part in error.absolute_path:
        where = join(where, part)
    return str(where)


def _schema_messages(error: Any) -> tuple[str, str]:
    """(message, fix key) for one jsonschema error."""
    at = _path_of(error) or "the top level"
    schema: dict[str, Any] = error.schema if isinstance(error.schema, dict) else {}
    kind = error.validator
    if kind == "type":
        expected = schema.get("type")
        wanted = (
            _bounds(schema)
            if expected == "number"
            else f"an {expected}"
            if expected == "object"
            else f"a {expected}"
        )
        return f"{at}: expected {wanted}, got {describe(error.instance)}", "type"
    if kind in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        return f"{at}: expected {_bounds(schema)}, got {describe(error.instance)}", "bounds"
    if kind == "required":
        missing = [key for key in error.validator_value if key not in error.instance]
        return (
            f"{at}: missing key{'s' if len(missing) > 1 else ''} {', '.join(map(repr, missing))}",
            "required",
        )
    if kind == "additionalProperties":
        allowed = ", ".join(schema.get("properties", {}))
        extra = [key for key in error.instance if key not in schema.get("properties", {})]
        shown = ", ".join(shorten(repr(k), 40) for k in extra[:5]) + (
            " ..." if len(extra) > 5 else ""
        )
        return (
            f"{at}: unknown key{'s' if len(extra) > 1 else ''} {shown} (allowed: {allowed})",
            "additionalProperties",
        )
    if kind == "enum":
        choices = ", ".join(repr(c) for c in error.validator_value)
        return f"{at}: expected one of {choices}, got {describe(error.instance)}", "enum"
    return (
        f"{at}: {shorten(error.message, 120)}",
        "",
    )  # pragma: no cover - the schema uses no other keywords


def schema_problems(submission: Submission) -> list[str]:
    """Every way the parsed report departs from the schema, each naming its field.

    Duplicate keys and non-finite numbers come first (Python's parser hides them),
    then the JSON Schema errors in document order. Fix hints follow once each.
    """
    problems: list[str] = []
    fixes: list[str] = []
    for duplicate in submission.duplicates:
        values = ", ".join(describe(v) for v in duplicate.values[:4])
        problems.append(
            f"{duplicate.where}: duplicate key (values {values}); a JSON parser keeps the last"
        )
        fixes.append("duplicate")
    errors = sorted(
        _validator().iter_errors(submission.document),
        key=lambda e: [str(p) for p in e.absolute_path],
    )
    reported: set[str] = set()
    for error in errors:
        message, fix = _schema_messages(error)
        reported.add(_path_of(error))
        problems.append(message)
        fixes.append(fix)
    # NaN and Infinity where the schema asks for no number (details, unknown keys)
    # are still not JSON; where it asks for one, the error above names them.
    for where, literal in submission.nonfinite:
        if where not in reported:
            problems.append(
                f"{where or 'the top level'}: got {literal}, which is not a JSON number "
                "(write null or leave it out)"
            )
            fixes.append("type")
    unique_fixes = [_SCHEMA_FIXES[f] for f in dict.fromkeys(fixes) if f in _SCHEMA_FIXES]
    if unique_fixes:
        problems.append("Fix: " + "; ".join(unique_fixes) + ".")
    return problems


def check_schema(g: Grading) -> Outcome:
    report, blocked = _report(g)
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
        number = real_number(value)
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
    report, blocked = _report(g)
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
    report, blocked = _report(g)
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
    report, blocked = _report(g)
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
    report, blocked = _report(g)
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
        number = real_number(details[key])
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
    report, blocked = _report(g)
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


# -------------------------------------------------------------------- invariants


def _hypothesis_settings(examples: int) -> hypothesis.settings:
    from hypothesis import HealthCheck, Phase, settings

    # derandomize: the same examples in every run and on every xdist worker.
    # database=None: nothing is written into the grader's working directory.
    return settings(
        database=None,
        derandomize=True,
        max_examples=examples,
        deadline=None,
        print_blob=False,
        phases=(Phase.explicit, Phase.generate, Phase.shrink),
        # Slow or large examples are the grader's data, not a bug to report.
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
            HealthCheck.large_base_example,
        ],
    )


@contextlib.contextmanager
def _hypothesis_home(directory: Path | None) -> Iterator[None]:
    """Point Hypothesis' storage at ``directory`` while an invariant runs.

    ``database=None`` keeps the example database out of the grader's working
    directory, but Hypothesis also caches constants it finds in local modules
    under ``./.hypothesis``. The storage directory is a module global without a
    getter, so the previous value is read from the module and restored after.
    """
    from hypothesis import configuration

    previous = vars(configuration).get("__hypothesis_home_directory")
    directory = directory or Path(tempfile.gettempdir()) / "pytest-clinaudit-hypothesis"
    configuration.set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)


def _run_property(test: Callable[[], None], what: str, home: Path | None = None) -> Outcome:
    """Run a Hypothesis test; its falsifying example becomes the failure message."""
    try:
        with _hypothesis_home(home):
            test()
    except AssertionError as exc:
        notes = "\n".join(getattr(exc, "__notes__", ()))
        return Outcome.fail(f"invariant violated: {what}\n{exc}\n{notes}".rstrip())
    except Exception as exc:  # noqa: BLE001 - any failure of the property is the finding
        notes = "\n".join(getattr(exc, "__notes__", ()))
        return Outcome.fail(
            f"invariant could not be checked: {what}\n{type(exc).__name__}: {exc}\n{notes}".rstrip()
        )
    return Outcome.ok(what)


def _centre(g: Grading) -> dict[str, float]:
    """The submitted components where they are numbers in [0, 1], else the reference's."""
    submitted = g.submission.report or {}
    components = submitted.get("components")
    centre: dict[str, float] = {}
    for name in COMPONENTS:
        value = real_number(components.get(name)) if isinstance(components, dict) else None
        centre[name] = (
            value
            if value is not None and 0.0 <= value <= 1.0
            else float(g.reference.components[name])
        )
    return centre


def _component_vectors(g: Grading) -> Any:
    from hypothesis import strategies as st

    centre = _centre(g)
    return st.tuples(
        *(
            st.floats(max(0.0, centre[n] - 0.25), min(1.0, centre[n] + 0.25), allow_nan=False)
            for n in COMPONENTS
        )
    ).map(lambda values: dict(zip(COMPONENTS, values, strict=True)))


def invariant_reference(g: Grading) -> Outcome:
    """The reference report is consistent with itself and with the cached probabilities."""
    import numpy as np

    from pytest_clinaudit.reference import attacks

    params = g.variant.params
    report = g.reference.report
    problems: list[str] = []
    try:
        unrounded = g.reference.unrounded_components
        sps = security_posture_score(unrounded, params.weights)
        if not all(0.0 <= float(unrounded[n]) <= 1.0 for n in COMPONENTS):
            problems.append(f"a reference component leaves [0, 1]: {unrounded}")
        if round(sps, 2) != report["sps"]:
            problems.append(
                f"reference sps {report['sps']} != round(SPS of its components, 2) "
                f"= {round(sps, 2)}"
            )
        if report["verdict"] != verdict(report["sps"], params.verdict):
            problems.append(
                f"reference verdict {report['verdict']!r} does not follow from sps {report['sps']}"
            )
        for name in COMPONENTS:
            if round(float(unrounded[name]), 4) != report["components"][name]:
                problems.append(
                    f"reference components.{name} is not its unrounded value to 4 decimals"
                )
        y = np.asarray(g.reference.y_test, dtype=np.int64)
        p = np.asarray(g.reference.test_probabilities, dtype=np.float64)
        if len(y) != len(p) or len(p) == 0:
            problems.append(f"{len(p)} cached test probabilities for {len(y)} test labels")
        else:
            ece = attacks.task_ece(y, p, params.calibration.n_bins)
            again = attacks.calibration_score(ece, params.calibration)
            if abs(again - float(unrounded["calibration_ece"])) > 1e-12:
                problems.append(
                    f"calibration recomputed from the cached probabilities is {again!r}, "
                    f"the reference says {unrounded['calibration_ece']!r}"
                )
    except (KeyError, TypeError, ValueError) as exc:
        problems.append(f"the reference is malformed: {type(exc).__name__}: {exc}")
    if problems:
        return Outcome.fail(
            "the reference of this session is inconsistent; delete the cache entry and rerun "
            f"({g.reference.artifact_sha256[:12]}):\n  - " + "\n  - ".join(problems)
        )
    return Outcome.ok(
        "reference report consistent with its unrounded components and cached probabilities"
    )


def invariant_calibration_bounded(g: Grading, examples: int = INVARIANT_EXAMPLES) -> Outcome:
    """Calibration score and ECE stay in [0, 1] on resampled rows of the model's own predictions."""
    import numpy as np
    from hypothesis import given
    from hypothesis import strategies as st

    from pytest_clinaudit.reference import attacks

    params = g.variant.params.calibration
    y_all = np.asarray(g.reference.y_test, dtype=np.int64)
    p_all = np.asarray(g.reference.test_probabilities, dtype=np.float64)
    n = len(p_all)
    if n == 0 or len(y_all) != n:
        return Outcome.fail(
            f"no usable test predictions to resample ({n} probabilities, {len(y_all)} labels)"
        )
    edges = [k / params.n_bins for k in range(params.n_bins + 1)]

    @_hypothesis_settings(examples)
    @given(
        size=st.integers(1, n),
        seed=st.integers(0, 2**32 - 1),
        replace=st.booleans(),
        snapped=st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from(edges)), max_size=5),
    )
    def calibration_stays_in_unit_interval(
        size: int, seed: int, replace: bool, snapped: list[tuple[int, float]]
    ) -> None:
        # Resample the model's rows; snap a few probabilities onto bin edges, where
        # the task's binning quirks live (SPEC §3.3).
        rows = np.random.RandomState(seed).choice(n, size, replace=replace or size > n)
        p = p_all[rows].copy()
        for index, edge in snapped:
            p[index % size] = edge
        ece = attacks.task_ece(y_all[rows], p, params.n_bins)
        score = attacks.calibration_score(ece, params)
        assert 0.0 <= ece <= 1.0, (
            f"task ECE {ece!r} outside [0, 1] on {size} resampled rows (seed {seed})"
        )
        assert 0.0 <= score <= 1.0, f"calibration score {score!r} outside [0, 1]"

    return _run_property(
        calibration_stays_in_unit_interval,
        "calibration score and ECE stay in [0, 1] on rows resampled from the model's "
        f"{n} test predictions",
        g.scratch_dir,
    )


def invariant_sps_bounded(g: Grading, examples: int = INVARIANT_EXAMPLES) -> Outcome:
    from hypothesis import given

    weights = g.variant.params.weights

    @_hypothesis_settings(examples)
    @given(components=_component_vectors(g))
    def sps_stays_in_range(components: dict[str, float]) -> None:
        sps = security_posture_score(components, weights)
        assert 0.0 <= sps <= 100.0, f"SPS {sps!r} outside [0, 100] for {components}"
        assert verdict(round(sps, 2), g.variant.params.verdict) in VERDICTS

    return _run_property(
        sps_stays_in_range,
        "the SPS stays in [0, 100] near the submitted components",
        g.scratch_dir,
    )


def invariant_sps_monotone(g: Grading, examples: int = INVARIANT_EXAMPLES) -> Outcome:
    from hypothesis import given
    from hypothesis import strategies as st

    weights = g.variant.params.weights

    @_hypothesis_settings(examples)
    @given(
        components=_component_vectors(g),
        which=st.sampled_from(COMPONENTS),
        increase=st.floats(0.0, 1.0, allow_nan=False),
    )
    def raising_a_component_never_lowers_the_sps(
        components: dict[str, float], which: str, increase: float
    ) -> None:
        higher = dict(components, **{which: min(1.0, components[which] + increase)})
        before, after = (
            security_posture_score(components, weights),
            security_posture_score(higher, weights),
        )
        assert after >= before, (
            f"raising {which} by {increase} lowered the SPS from {before!r} to {after!r}"
        )
        rank = {v: i for i, v in enumerate(reversed(VERDICTS))}
        thresholds = g.variant.params.verdict
        assert rank[verdict(after, thresholds)] >= rank[verdict(before, thresholds)], (
            "the verdict got worse"
        )

    return _run_property(
        raising_a_component_never_lowers_the_sps,
        "raising any component never lowers the SPS or the verdict",
        g.scratch_dir,
    )


def invariant_sps_weighted_sum(g: Grading, examples: int = INVARIANT_EXAMPLES) -> Outcome:
    from hypothesis import given

    weights = g.variant.params.weights

    @_hypothesis_settings(examples)
    @given(components=_component_vectors(g))
    def sps_is_the_weighted_sum(components: dict[str, float]) -> None:
        sps = security_posture_score(components, weights)
        exact = 100.0 * math.fsum(
            w * components[n] for n, w in zip(COMPONENTS, weights.as_tuple(), strict=True)
        )
        assert abs(sps - exact) <= 1e-9, (
            f"SPS {sps!r} != 100 x weighted sum {exact!r} for {components}"
        )

    return _run_property(
        sps_is_the_weighted_sum,
        "the SPS equals 100 x the weighted sum of the components",
        g.scratch_dir,
    )


INVARIANTS: tuple[tuple[str, Callable[[Grading], Outcome], str], ...] = (
    ("reference-consistent", invariant_reference, "the cached reference is consistent with itself"),
    (
        "calibration-bounded",
        invariant_calibration_bounded,
        "calibration stays in [0, 1] on resampled predictions",
    ),
    ("sps-bounded", invariant_sps_bounded, "the SPS stays in [0, 100]"),
    ("sps-monotone", invariant_sps_monotone, "the SPS is monotone in every component"),
    (
        "sps-weighted-sum",
        invariant_sps_weighted_sum,
        "the SPS is the weighted sum of the components",
    ),
)


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
                    functools.partial(function, g),
                    description=description,
                    **_slot(g, "invariant", invariants=len(INVARIANTS)),
                )
            )
    return checks


def run_check(check: Check, test_id: str) -> CheckRecord:
    """Run one check outside pytest; a crash in the check fails it with the exception text."""
    try:
        outcome = normalize(check.run(), check)
    except AssertionError as exc:
        outcome = Outcome.fail(str(exc) or f"{check.name} failed")
    except Exception as exc:  # noqa: BLE001 - a crashing check is a failed check, never a crash
        outcome = Outcome.fail(f"the check raised {type(exc).__name__}: {shorten(str(exc), 300)}")
    return record(check, outcome, test_id)


def evaluate(g: Grading, *, invariants: bool = False, extra: Iterable[Check] = ()) -> Grade:
    """Grade without pytest: run the built-in checks (and ``extra``) and score them.

    Invariants are off by default because they test the grader, not the
    submission; when they pass they do not change the score.
    """
    checks: Sequence[Check] = [*builtin_checks(g, invariants=invariants), *extra]
    return scoring.compute((run_check(c, g.id(c.name)) for c in checks), g.profile)
