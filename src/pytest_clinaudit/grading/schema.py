"""The report's JSON Schema and the messages its violations become.

The schema (``report.schema.json``, Draft 2020-12) is validated with
jsonschema; this module adds what a grader needs on top: a number is what
RFC 8259 calls one (Python's parser also yields NaN and Infinity), duplicate
keys are reported (Python's parser keeps the last silently), and every problem
names its field, what was expected, what arrived, and the fix.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from typing import Any

from pytest_clinaudit.grading.submission import Submission
from pytest_clinaudit.grading.values import describe, join, json_number, shorten


@functools.lru_cache(maxsize=1)
def report_schema() -> dict[str, Any]:
    """The shipped JSON Schema (Draft 2020-12) of a report."""
    text = resources.files(__package__).joinpath("report.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@functools.lru_cache(maxsize=1)
def _validator() -> Any:
    return validator_for(report_schema())


def validator_for(schema: dict[str, Any]) -> Any:
    """A Draft 2020-12 validator of ``schema`` whose "number" is what RFC 8259 calls one."""
    import jsonschema

    base = jsonschema.Draft202012Validator
    # JSON Schema's "number" admits NaN and Infinity when Python parsed them, and
    # every range keyword is false for NaN, so NaN would slip through; a number
    # here is what RFC 8259 calls one.
    checker = base.TYPE_CHECKER.redefine_many(
        {
            "number": lambda _, value: json_number(value) is not None,
            "integer": lambda _, value: (
                json_number(value) is not None and float(value).is_integer()
            ),
        }
    )
    validator_class = jsonschema.validators.extend(base, type_checker=checker)
    return validator_class(schema)


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
            if expected in ("object", "array")
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
    if kind in ("minItems", "maxItems"):
        low, high = schema.get("minItems", 0), schema.get("maxItems")
        wanted = f"at least {low}" if high is None else f"{low} to {high}"
        return f"{at}: expected {wanted} items, got {describe(error.instance)}", "items"
    return (
        f"{at}: {shorten(error.message, 120)}",
        "",
    )  # pragma: no cover - the schema uses no other keywords


def schema_problems(
    submission: Submission,
    *,
    validator: Any = None,
    fixes: dict[str, str] | None = None,
    max_errors: int | None = None,
) -> list[str]:
    """Every way the parsed report departs from the schema, each naming its field.

    Duplicate keys and non-finite numbers come first (Python's parser hides them),
    then the JSON Schema errors in document order. Fix hints follow once each.
    ``validator`` and ``fixes`` default to the audit report's; ``max_errors``
    stops collecting schema errors after that many (a report of 10,000 models
    has 10,000 of them).
    """
    validator = validator if validator is not None else _validator()
    hints = _SCHEMA_FIXES if fixes is None else fixes
    problems: list[str] = []
    used: list[str] = []
    for duplicate in submission.duplicates:
        values = ", ".join(describe(v) for v in duplicate.values[:4])
        problems.append(
            f"{duplicate.where}: duplicate key (values {values}); a JSON parser keeps the last"
        )
        used.append("duplicate")
    found = validator.iter_errors(submission.document)
    if max_errors is not None:
        import itertools

        found = itertools.islice(found, max_errors)
    errors = sorted(found, key=lambda e: [str(p) for p in e.absolute_path])
    reported: set[str] = set()
    for error in errors:
        message, fix = _schema_messages(error)
        reported.add(_path_of(error))
        problems.append(message)
        used.append(fix)
    # NaN and Infinity where the schema asks for no number (details, unknown keys)
    # are still not JSON; where it asks for one, the error above names them.
    for where, literal in submission.nonfinite:
        if where not in reported:
            problems.append(
                f"{where or 'the top level'}: got {literal}, which is not a JSON number "
                "(write null or leave it out)"
            )
            used.append("type")
    unique_fixes = [hints[f] for f in dict.fromkeys(used) if f in hints]
    if unique_fixes:
        problems.append("Fix: " + "; ".join(unique_fixes) + ".")
    return problems
