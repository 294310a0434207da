"""What a grade becomes: the score JSON and the JUnit XML properties.

Both are built from plain records (the grade, the variant, the reference,
the submission, the options), so tests and tools can make them without a
pytest session. Every submitted value is read through
:mod:`~pytest_clinaudit.grading.values`: a report can hold anything, and
nothing it holds may stop these outputs from being written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.files import write_atomic, write_json_atomic
from pytest_clinaudit.grading.values import json_number
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.versions import library_versions

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.references import Reference
    from pytest_clinaudit.catalog.variants import Variant
    from pytest_clinaudit.grading.options import GradingOptions
    from pytest_clinaudit.grading.scoring import Grade
    from pytest_clinaudit.grading.submission import Submission

SCORE_FORMAT = 1
"""Version of the score JSON layout."""
GRADING_LIBRARIES = ("pytest", "pytest-xdist", "hypothesis", "jsonschema")


def _text(value: float | None) -> str:
    return "none" if value is None else repr(value)


def submitted_values(submission: Submission) -> dict[str, Any]:
    """The submitted SPS, components and verdict where they are JSON numbers and a string.

    ``None`` stands for missing or unusable; the checks say why. Batch reports
    compare these with the reference.
    """
    report = submission.report or {}
    components = report.get("components")
    components = components if isinstance(components, dict) else {}
    verdict = report.get("verdict")
    return {
        "sps": json_number(report.get("sps")),
        "components": {name: json_number(components.get(name)) for name in COMPONENTS},
        "verdict": verdict if isinstance(verdict, str) else None,
    }


def compared_values(
    check: str, *, reference: Reference, submitted: dict[str, Any]
) -> tuple[Any, Any] | None:
    """(reference, submitted) value a built-in check compares, or ``None`` for other checks.

    ``submitted`` is :func:`submitted_values` of the session's submission: ``sps``
    and ``component[NAME]`` compare numbers, ``verdict`` the verdict string. A
    submitted ``None`` is missing or not a JSON number.
    """
    if check == "sps":
        return reference.sps, submitted["sps"]
    if check == "verdict":
        return reference.report.get("verdict"), submitted["verdict"]
    if check.startswith("component[") and check.endswith("]"):
        name = check[len("component[") : -1]
        if name in reference.components:
            return reference.components[name], submitted["components"].get(name)
    return None


def score_document(
    grade: Grade,
    *,
    variant: Variant,
    reference: Reference,
    submission: Submission,
    options: GradingOptions,
    cache_dir: Path,
    exit_status: int | None,
    missing_checks: list[str] | None,
) -> dict[str, Any]:
    """The score JSON (``--clinaudit-score-json``): the grade, every check, the reference used."""
    r, v, o = reference, variant, options
    return {
        "format": SCORE_FORMAT,
        "score": grade.score,
        "raw_score": grade.raw_score,
        "no_submission": grade.no_submission,
        "profile": grade.profile,
        "variant": v.name,
        "variant_file": str(v.path),
        "category": grade.category,
        "invariants_ok": grade.invariants_ok,
        "fail_under": o.fail_under,
        "exit_status": exit_status,
        "manifest": None if o.manifest is None else str(o.manifest),
        "meta": dict(o.meta),
        "submission": submission.summary(),
        "submitted": submitted_values(submission),
        "reference": {
            "artifact_sha256": r.artifact_sha256,
            "data_sha256": r.data_sha256,
            "sps": r.sps,
            "components": dict(r.components),
            "verdict": r.report.get("verdict"),
            "semantics": v.semantics,
            "from_cache": r.from_cache,
            "cache_dir": str(cache_dir),
        },
        "libraries": {**r.libraries, **library_versions(GRADING_LIBRARIES)},
        "checks": [c.as_dict() for c in grade.checks],
        "missing_checks": missing_checks,
    }


def suite_properties(
    grade: Grade,
    *,
    variant: Variant,
    reference: Reference,
    submission: Submission,
    meta: tuple[tuple[str, str], ...],
) -> Iterator[tuple[str, object]]:
    """The JUnit XML suite properties: the grade, the reference and what was submitted."""
    yield "clinaudit.score", f"{grade.score:.6f}"
    yield "clinaudit.raw_score", "none" if grade.raw_score is None else f"{grade.raw_score:.6f}"
    yield "clinaudit.profile", grade.profile
    yield "clinaudit.variant", variant.name
    yield "clinaudit.category", grade.category
    yield "clinaudit.invariants_ok", str(grade.invariants_ok).lower()
    yield "clinaudit.reference_sha256", reference.artifact_sha256
    yield "clinaudit.reference_sps", f"{reference.sps:.2f}"
    for name in COMPONENTS:
        yield f"clinaudit.reference.{name}", f"{reference.components[name]:.4f}"
    submitted = submitted_values(submission)
    yield "clinaudit.submitted.sps", _text(submitted["sps"])
    for name in COMPONENTS:
        yield f"clinaudit.submitted.{name}", _text(submitted["components"][name])
    yield "clinaudit.submitted.verdict", submitted["verdict"] or "none"
    for key, value in meta:
        yield f"clinaudit.meta.{key}", value


def write_error_score(path: Path | None, options: GradingOptions | None, message: str) -> None:
    """The score JSON of a session that could not grade (a usage error): score null, the reason."""
    if path is None:
        return
    document: dict[str, Any] = {
        "format": SCORE_FORMAT,
        "score": None,
        "raw_score": None,
        "error": message,
        "profile": None if options is None else options.profile,
        "variant": None if options is None else options.variant,
        "category": None,
        "checks": [],
    }
    with contextlib.suppress(OSError):  # the usage error itself is what the user must see
        write_json_atomic(path, document)


REFUSED = "refused"
"""The category of a session that refused to grade (:mod:`~pytest_clinaudit.grading.isolation`)."""


def write_refused(
    score_json: Path | None, junit_xml: Path | None, options: GradingOptions, message: str
) -> None:
    """The outputs of a session that refused to grade: score 0, ``error`` and ``refused`` set.

    The score JSON carries ``"score": 0`` and the reason under ``error`` (so a
    pipeline counts the run as not graded) and ``refused``; the JUnit XML, which
    pytest does not write for a session stopped before it starts, gets one
    erroring test case and the suite properties ``clinaudit.score`` 0 and
    ``clinaudit.category`` ``refused``.
    """
    import xml.etree.ElementTree as ET

    if score_json is not None:
        document: dict[str, Any] = {
            "format": SCORE_FORMAT,
            "score": 0.0,
            "raw_score": 0.0,
            "error": message,
            "refused": True,
            "profile": options.profile,
            "variant": options.variant,
            "category": REFUSED,
            "meta": dict(options.meta),
            "checks": [],
        }
        with contextlib.suppress(OSError):  # the refusal itself is what the user must see
            write_json_atomic(score_json, document)
    if junit_xml is None:
        return
    suites = ET.Element("testsuites")
    suite = ET.SubElement(
        suites, "testsuite", name="pytest", errors="1", failures="0", skipped="0", tests="1"
    )
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("clinaudit.score", f"{0.0:.6f}"),
        ("clinaudit.raw_score", f"{0.0:.6f}"),
        ("clinaudit.profile", options.profile),
        ("clinaudit.variant", options.variant),
        ("clinaudit.category", REFUSED),
        *((f"clinaudit.meta.{key}", value) for key, value in options.meta),
    ):
        ET.SubElement(properties, "property", name=name, value=value)
    case = ET.SubElement(suite, "testcase", classname=options.variant, name=REFUSED)
    ET.SubElement(case, "error", message=message).text = message
    with contextlib.suppress(OSError):
        write_atomic(junit_xml, ET.tostring(suites, encoding="utf-8", xml_declaration=True))
