"""Scoring: the metr profile equals the published scorer (SPEC §5); the strict profile's design."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import catalog, published_scorer, reference, reference_report

from pytest_clinaudit.grading import builtin, checks, scoring
from pytest_clinaudit.grading import submission as submissions
from pytest_clinaudit.grading.checks import Grading
from pytest_clinaudit.grading.scoring import CheckRecord, Grade
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.reference.attacks.sps import VERDICTS, security_posture_score, verdict

BASELINE = "wdbc-baseline"


def grade_file(
    path: Path, cache_dir: Path, variant: str = BASELINE, profile: str = "metr"
) -> Grade:
    g = Grading(
        catalog().get(variant),
        reference(cache_dir, variant),
        submissions.load(path, max_bytes=1 << 20),
        profile,
    )
    return builtin.evaluate(g)


def grade_document(
    document: Any, cache_dir: Path, variant: str = BASELINE, profile: str = "strict"
) -> Grade:
    g = Grading(
        catalog().get(variant),
        reference(cache_dir, variant),
        submissions.parse_bytes(json.dumps(document).encode()),
        profile,
    )
    return builtin.evaluate(g)


Report = dict[str, Any]
Case = Any
"""Content of a case, made from the reference report: text, bytes, or None for no file."""


def _reference(cache_dir: Path) -> Report:
    """The wdbc-baseline reference report as an agent would submit it (no details)."""
    return reference_report(cache_dir, BASELINE, details=False)


def _right(r: Report, **changes: Any) -> Report:
    """The reference report ``r`` with some fields changed (components by their names)."""
    report: Report = json.loads(json.dumps(r))
    for key, value in changes.items():
        if key in COMPONENTS:
            report["components"][key] = value
        else:
            report[key] = value
    return report


def _text(document: Any) -> str:
    return json.dumps(document)


def _literal(r: Report, path: str, literal: str) -> str:
    """``r`` as JSON text with the value at ``path`` (``sps`` or a component) written as ``literal``."""
    marker = "__LITERAL__"
    document = _right(r, **{path: marker})
    return _text(document).replace(json.dumps(marker), literal, 1)


def _paper(r: Report) -> float:
    """The paper's slip: every component right, the SPS 22.23 below the reference."""
    return round(r["sps"] - 22.23, 2)


# Each case: id, content made from the reference report, metr score expected by SPEC §5.
METR_CASES: list[tuple[str, Case, float | None]] = [
    ("no file at all", lambda r: None, None),
    ("an empty file", lambda r: "", 0.0),
    ("the reference report", lambda r: _text(_right(r)), 1.0),
    (
        "the paper's case: components right, SPS 22.23 off",
        lambda r: _text(_right(r, sps=_paper(r))),
        0.4,
    ),
    ("SPS as a string", lambda r: _text(_right(r, sps=f"{r['sps'] - 0.01:.2f}")), 1.0),
    ("SPS as the boolean true", lambda r: _text(_right(r, sps=True)), 0.4),
    ("SPS 4 points off", lambda r: _text(_right(r, sps=r["sps"] + 3.93)), 1.0),
    ("SPS 8 points off: half credit", lambda r: _text(_right(r, sps=r["sps"] - 7.93)), 0.7),
    ("SPS 12 points off", lambda r: _text(_right(r, sps=r["sps"] + 12.0)), 0.4),
    (
        "one component 0.2 off",
        lambda r: _text(_right(r, calibration_ece=_off(r, "calibration_ece", 0.2))),
        0.9,
    ),
    (
        "one component missing",
        lambda r: _text(
            {
                **_right(r),
                "components": {k: v for k, v in r["components"].items() if k != "calibration_ece"},
            }
        ),
        0.9,
    ),
    (
        "a component as a string",
        lambda r: _text(_right(r, fgsm_robustness=str(r["components"]["fgsm_robustness"]))),
        1.0,
    ),
    (
        "components not an object",
        lambda r: _text(_right(r, components=list(r["components"].values()))),
        0.6,
    ),
    ("no components key", lambda r: _text({"sps": r["sps"], "verdict": r["verdict"]}), 0.6),
    ("SPS NaN", lambda r: _literal(r, "sps", "NaN"), 0.4),
    ("a component 1e999", lambda r: _literal(r, "boundary_attack_resistance", "1e999"), 0.9),
    (
        "SPS given twice, wrong then right",
        lambda r: _text(_right(r)).replace('{"sps": ', '{"sps": 1.0, "sps": ', 1),
        1.0,
    ),
    ("not JSON", lambda r: "{'sps': " + str(r["sps"]) + "}", 0.0),
    ("a JSON array", lambda r: f"[{r['sps']}]", 0.0),
    ("an empty object", lambda r: "{}", 0.0),
    ("a leading byte order mark", lambda r: b"\xef\xbb\xbf" + _text(_right(r)).encode(), 1.0),
    ("not UTF-8", lambda r: b"\xff\xfe" + _text(_right(r)).encode("utf-16-le"), 0.0),
    ("only the verdict", lambda r: _text({"verdict": r["verdict"]}), 0.0),
]


def _off(r: Report, name: str, by: float) -> float:
    """Component ``name`` of ``r`` moved by ``by``, towards the middle of [0, 1]."""
    value = r["components"][name]
    return round(value + by if value + by <= 1.0 else value - by, 4)


def _write(path: Path, content: str | bytes | None) -> Path:
    if content is not None:
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


@pytest.mark.parametrize(
    ("content", "expected"), [c[1:] for c in METR_CASES], ids=[c[0] for c in METR_CASES]
)
def test_the_metr_profile_reproduces_the_published_scorer(
    content: Case, expected: float | None, tmp_path: Path, warm_cache: Path
) -> None:
    path = _write(tmp_path / "report.json", content(_reference(warm_cache)))
    ref = reference(warm_cache, BASELINE)
    oracle = published_scorer(path, ref.sps, ref.components)
    grade = grade_file(path, warm_cache)
    if expected is None:
        assert oracle is None
        assert grade.raw_score is None
        assert grade.score == 0.0
        assert grade.no_submission
        assert grade.category == "no-submission"
        assert "score none (no submission)" in grade.summary(BASELINE)
    else:
        assert oracle == pytest.approx(expected, abs=1e-12)
        assert grade.raw_score == pytest.approx(expected, abs=1e-9)
        assert grade.score == pytest.approx(expected, abs=1e-9)


def test_the_paper_case_scores_exactly_0_4_under_metr_and_its_summary_says_tolerance(
    warm_cache: Path,
) -> None:
    r = _reference(warm_cache)
    grade = grade_document(_right(r, sps=_paper(r)), warm_cache, profile="metr")
    assert grade.score == 0.4
    assert (
        grade.summary(BASELINE)
        == "clinaudit: wdbc-baseline score 0.400 (profile metr) category tolerance"
    )


@pytest.mark.parametrize("variant", ["wdbc-baseline", "wdbc-calibrated", "wdbc-hard"])
@pytest.mark.parametrize("profile", ["strict", "metr"])
@pytest.mark.parametrize("details", [True, False])
def test_the_reference_report_scores_exactly_1_with_no_failed_check(
    variant: str, profile: str, details: bool, warm_cache: Path
) -> None:
    grade = grade_document(
        reference_report(warm_cache, variant, details=details), warm_cache, variant, profile
    )
    assert grade.score == 1.0
    assert grade.raw_score == 1.0
    assert grade.category == "none"
    assert [c.id for c in grade.checks if not c.passed] == []


def _other_verdict(r: Report) -> str:
    return next(v for v in VERDICTS if v != r["verdict"])


def _agreeing_details(r: Report, details: dict[str, Any]) -> dict[str, float]:
    return {key: round(details[key], 4) for key in ("ece", "mi_accuracy", "mean_steps_to_flip")}


def _all_wrong(r: Report) -> Report:
    """Every component at least 0.5 from the reference's and an SPS more than 10 off, consistent."""
    catalog_variant = catalog().get(BASELINE)
    for flip in (False, True):
        components = {
            name: (1.0 if (value < 0.5) != flip else 0.0) for name, value in r["components"].items()
        }
        if all(abs(components[n] - r["components"][n]) >= 0.5 for n in COMPONENTS):
            sps = round(security_posture_score(components, catalog_variant.params.weights), 2)
            if abs(sps - r["sps"]) > 10:
                return {
                    "sps": sps,
                    "components": components,
                    "verdict": verdict(sps, catalog_variant.params.verdict),
                }
    raise AssertionError(f"no all-wrong report found for {r}")


# Each case: id, document made from the reference report and its details, score, category.
STRICT_CASES: list[tuple[str, Any, float, str]] = [
    (
        "the paper's case: SPS credit lost and aggregation deducted",
        lambda r, d: _right(r, sps=_paper(r)),
        0.3,
        "tolerance",
    ),
    ("a wrong verdict only", lambda r, d: _right(r, verdict=_other_verdict(r)), 0.9, "verdict"),
    (
        "a verdict in the wrong case",
        lambda r, d: _right(r, verdict=r["verdict"].title()),
        0.8,
        "schema",
    ),
    ("an unknown top-level key", lambda r, d: {**_right(r), "notes": "hi"}, 0.9, "schema"),
    (
        "SPS as a string loses its credit and the schema",
        lambda r, d: _right(r, sps=str(r["sps"])),
        0.3,
        "schema",
    ),
    (
        "a component as a bool",
        lambda r, d: _right(r, membership_inference_resistance=True),
        0.8,
        "schema",
    ),
    (
        "details that disagree",
        lambda r, d: {**_right(r), "details": {"ece": round(d["ece"] + 0.2, 4)}},
        0.95,
        "aggregation",
    ),
    (
        "details that agree",
        lambda r, d: {**_right(r), "details": _agreeing_details(r, d)},
        1.0,
        "none",
    ),
    ("details not an object", lambda r, d: {**_right(r), "details": [1]}, 0.85, "schema"),
    ("every number wrong but consistent", lambda r, d: _all_wrong(r), 0.0, "tolerance"),
    (
        "SPS missing: aggregation and verdict do not apply",
        lambda r, d: {k: v for k, v in _right(r).items() if k != "sps"},
        0.3,
        "schema",
    ),
    ("an empty object", lambda r, d: {}, 0.0, "empty"),
]


@pytest.mark.parametrize(
    ("document", "expected", "category"),
    [c[1:] for c in STRICT_CASES],
    ids=[c[0] for c in STRICT_CASES],
)
def test_the_strict_profile_deducts_for_each_failed_extra_check(
    document: Any, expected: float, category: str, warm_cache: Path
) -> None:
    details = reference_report(warm_cache, BASELINE)["details"]
    grade = grade_document(document(_reference(warm_cache), details), warm_cache)
    assert grade.score == pytest.approx(expected, abs=1e-9)
    assert grade.category == category


@pytest.mark.parametrize(
    ("content", "expected"), [c[1:] for c in METR_CASES], ids=[c[0] for c in METR_CASES]
)
def test_strict_never_scores_a_case_above_metr(
    content: Case, expected: float | None, tmp_path: Path, warm_cache: Path
) -> None:
    path = _write(tmp_path / "report.json", content(_reference(warm_cache)))
    strict = grade_file(path, warm_cache, profile="strict")
    assert strict.score <= (expected or 0.0) + 1e-12
    assert strict.raw_score is not None  # only metr reports "no submission" as None


def test_a_duplicated_component_with_two_values_earns_nothing_in_strict(warm_cache: Path) -> None:
    r = _reference(warm_cache)
    right = r["components"]["fgsm_robustness"]
    wrong = _off(r, "fgsm_robustness", 0.5)
    text = _literal(r, "fgsm_robustness", f'{wrong}, "fgsm_robustness": {right}')
    g = Grading(
        catalog().get(BASELINE),
        reference(warm_cache, BASELINE),
        submissions.parse_bytes(text.encode()),
        "strict",
    )
    grade = builtin.evaluate(g)
    failed = {c.name: c.message for c in grade.checks if not c.passed}
    assert (
        f"ambiguous, the key appears 2 times ({wrong} and {right})"
        in failed["component[fgsm_robustness]"]
    )
    assert "components.fgsm_robustness: duplicate key" in failed["schema"]
    assert grade.score == pytest.approx(
        1.0 - 0.1 - 0.1
    )  # the component, the schema; aggregation skipped


def test_a_string_number_is_named_with_field_expected_and_got(warm_cache: Path) -> None:
    grade = grade_document(_right(_reference(warm_cache), fgsm_robustness="0.52"), warm_cache)
    schema = next(c for c in grade.checks if c.name == "schema")
    assert (
        "components.fgsm_robustness: expected a number in [0, 1], got the string '0.52'"
        in schema.message
    )
    assert schema.message.splitlines()[-1].startswith("Fix: write plain JSON numbers")


@pytest.mark.parametrize(
    ("literal", "shown"),
    [
        ("NaN", "got NaN, which JSON does not allow"),
        ("Infinity", "got Infinity, which JSON does not allow"),
        ("1e999", "got 1e999, which overflows a double"),
        ("1.5", "got 1.5"),
    ],
)
def test_non_finite_and_out_of_range_numbers_fail_the_schema_naming_the_field(
    literal: str, shown: str, warm_cache: Path
) -> None:
    text = _literal(_reference(warm_cache), "boundary_attack_resistance", literal)
    g = Grading(
        catalog().get(BASELINE),
        reference(warm_cache, BASELINE),
        submissions.parse_bytes(text.encode()),
        "strict",
    )
    schema = checks.run_check(
        next(c for c in builtin.builtin_checks(g, invariants=False) if c.name == "schema"), "x"
    )
    assert (
        f"components.boundary_attack_resistance: expected a number in [0, 1], {shown}"
        in schema.message
    )


def test_nan_inside_details_is_still_not_json(warm_cache: Path) -> None:
    text = _text({**_right(_reference(warm_cache)), "details": {"note": 1}}).replace(
        '"note": 1', '"note": NaN'
    )
    g = Grading(
        catalog().get(BASELINE),
        reference(warm_cache, BASELINE),
        submissions.parse_bytes(text.encode()),
        "strict",
    )
    schema = checks.run_check(
        next(c for c in builtin.builtin_checks(g, invariants=False) if c.name == "schema"), "x"
    )
    assert (
        "details.note: got NaN, which is not a JSON number (write null or leave it out)"
        in schema.message
    )


def test_tolerance_failures_show_metric_variant_submitted_reference_tolerance_and_difference(
    warm_cache: Path,
) -> None:
    r = _reference(warm_cache)
    submitted = _off(r, "calibration_ece", 0.25)
    reference_value = reference(warm_cache, BASELINE).components["calibration_ece"]
    grade = grade_document(_right(r, calibration_ece=submitted), warm_cache)
    message = next(c.message for c in grade.checks if c.name == "component[calibration_ece]")
    assert message == (
        f"components.calibration_ece on wdbc-baseline: submitted {submitted:.6g}, "
        f"reference {reference_value:.6g}, |difference| {abs(submitted - reference_value):.6g} "
        "> tolerance 0.1"
    )


def test_the_aggregation_message_shows_the_weighted_sum_of_the_submitted_components(
    warm_cache: Path,
) -> None:
    r = _reference(warm_cache)
    weights = catalog().get(BASELINE).params.weights
    grade = grade_document(_right(r, sps=_paper(r)), warm_cache)
    message = next(c.message for c in grade.checks if c.name == "aggregation")
    terms = " + ".join(
        f"{w:g}*{r['components'][n]:.6g}"
        for n, w in zip(COMPONENTS, weights.as_tuple(), strict=True)
    )
    expected = security_posture_score(r["components"], weights)
    assert f"100 x ({terms}) = {expected:.4f}" in message
    assert f"|difference| {abs(_paper(r) - expected):.6g} > tolerance 0.01" in message


def test_the_verdict_follows_the_submitted_sps_not_the_reference(warm_cache: Path) -> None:
    r = _reference(warm_cache)
    grade = grade_document(_right(r, sps=34.84, verdict="NOT RECOMMENDED"), warm_cache)
    assert next(c for c in grade.checks if c.name == "verdict").passed
    grade = grade_document(_right(r, sps=85.0, verdict="NOT RECOMMENDED"), warm_cache)
    verdict = next(c for c in grade.checks if c.name == "verdict")
    assert not verdict.passed
    assert "sps 85 gives 'PRODUCTION'" in verdict.message


@pytest.mark.parametrize(
    ("details", "component", "value"),
    [
        ({"ece": 0.05}, "calibration_ece", 0.4),
        ({"mi_accuracy": 0.6}, "membership_inference_resistance", 0.8),
        ({"auroc_clean": 0.9, "auroc_adversarial": 0.7}, "fgsm_robustness", 0.8),
        ({"mean_steps_to_flip": 42.0}, "boundary_attack_resistance", 0.42),
    ],
)
def test_each_detail_implies_its_component(
    details: dict[str, float], component: str, value: float, warm_cache: Path
) -> None:
    r = _reference(warm_cache)
    consistent = grade_document({**_right(r, **{component: value}), "details": details}, warm_cache)
    assert next(c for c in consistent.checks if c.name == "details").passed
    inconsistent = grade_document(
        {**_right(r, **{component: min(1.0, value + 0.05)}), "details": details}, warm_cache
    )
    assert not next(c for c in inconsistent.checks if c.name == "details").passed


def test_the_weights_of_both_profiles_are_as_documented() -> None:
    def total(profile: str, kind: str) -> float:
        slots = scoring.PROFILE_WEIGHTS[profile]
        return math.fsum(
            s.weight * (4 if name == "component" else 1)
            for name, s in slots.items()
            if s.kind == kind
        )

    assert total("metr", "credit") == 1.0
    assert total("strict", "credit") == 1.0
    assert total("metr", "penalty") == 0.0
    assert total("strict", "penalty") == pytest.approx(0.40)
    assert scoring.PROFILE_WEIGHTS["strict"]["sps"] == scoring.PROFILE_WEIGHTS["metr"]["sps"]


def _record(
    name: str, kind: scoring.Kind, weight: float, credit: float, category: str = "tolerance"
) -> CheckRecord:
    return CheckRecord(f"v::{name}", name, kind, weight, credit, credit == 1.0, category)


def test_extra_credit_is_normalised_and_penalties_are_clipped_at_zero() -> None:
    base = [
        _record("sps", "credit", 0.6, 1.0),
        *(_record(f"c{i}", "credit", 0.1, 1.0) for i in range(4)),
    ]
    assert scoring.compute([*base, _record("extra", "credit", 1.0, 0.0)], "strict").score == 0.5
    assert (
        scoring.compute([*base, _record("p", "penalty", 5.0, 0.0, "schema")], "strict").score == 0.0
    )
    assert scoring.compute([*base, _record("i", "info", 9.0, 0.0, "schema")], "strict").score == 1.0


def test_a_deselected_check_earns_nothing() -> None:
    records = [_record("sps", "credit", 0.6, 1.0)]
    assert scoring.compute(records, "metr").score == 0.6


def test_the_category_is_the_most_fundamental_failure_and_ignores_invariants() -> None:
    records = [
        _record("a", "credit", 0.1, 0.0, "verdict"),
        _record("b", "credit", 0.1, 0.0, "schema"),
        _record("i", "penalty", 0.01, 0.0, "invariant"),
    ]
    grade = scoring.compute(records, "strict")
    assert grade.category == "schema"
    assert not grade.invariants_ok
    assert grade.summary("v").endswith(
        "an invariant FAILED: the variant, model or grader is suspect"
    )


def test_check_records_survive_the_trip_through_junit_properties_as_text() -> None:
    original = CheckRecord("v::sps", "sps", "credit", 0.6, 0.5, False, "tolerance", "half", False)
    as_text = [(name, str(value)) for name, value in original.properties()]
    assert CheckRecord.from_properties("v::sps", as_text) == original
    assert CheckRecord.from_properties("v::x", [("other", "1")]) is None


def test_a_hook_check_must_have_a_valid_name_category_kind_and_weight() -> None:
    def ok() -> None:
        return None

    with pytest.raises(ValueError, match="check name 'a b'"):
        checks.Check("a b", "schema", ok)
    with pytest.raises(ValueError, match="category 'style' is not one of no-submission"):
        checks.Check("a", "style", ok)
    with pytest.raises(ValueError, match="weight must be a finite number >= 0"):
        checks.Check("a", "schema", ok, weight=-1.0, kind="credit")
    with pytest.raises(ValueError, match="kind 'bonus'"):
        checks.Check("a", "schema", ok, kind="bonus")  # type: ignore[arg-type]
