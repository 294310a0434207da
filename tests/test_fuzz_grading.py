"""Fuzzed grading: every document, every byte string gets a score, a category and its outputs.

Hostile submissions (see ``fuzz_documents``) go through the real grading code:
the submission parser, the built-in checks of both profiles, the scorer, the
score JSON and the JUnit suite properties. In process, 10,000 generated
documents (the slow run; the default run grades 1,000) must each give a score
in [0, 1], a category, a score JSON that round-trips through strict JSON, and
properties pytest can write, with no exception. A sample of the same documents then goes through real pytest
sessions, serial and under ``-n 2``, whose JUnit XML must parse.
"""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
from fuzz_documents import (
    byte_strings,
    documents,
    dumps,
    encode,
    report_mutations,
)
from grading_helpers import catalog, grading_args, reference, reference_report
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_clinaudit.grading import builtin, outputs
from pytest_clinaudit.grading.checks import Grading
from pytest_clinaudit.grading.options import GradingOptions
from pytest_clinaudit.grading.scoring import CATEGORIES, NONE
from pytest_clinaudit.grading.submission import parse_bytes
from pytest_clinaudit.reference.attacks.params import COMPONENTS

VARIANT = "wdbc-hard"
PROFILES = ("strict", "metr")
IN_PROCESS = 2_500
"""Examples per in-process test in the slow run; four tests make the 10,000 documents."""
QUICK = 250
"""Examples per in-process test in the contributor's default run (a tenth, about 30 s)."""
BUDGETS = [
    pytest.param(QUICK, id="quick"),
    pytest.param(IN_PROCESS, id="full", marks=pytest.mark.slow),
]


def fuzz(examples: int) -> Any:
    return settings(
        max_examples=examples,
        derandomize=True,  # the same documents in every CI run and on every xdist worker
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )


def grade_in_process(data: bytes, cache: Path, profile: str) -> dict[str, Any]:
    """Grade ``data`` as a session would and return its score JSON, checking every output."""
    variant, ref = catalog().get(VARIANT), reference(cache, VARIANT)
    path = Path("report.json")
    submission = parse_bytes(data, path)
    grade = builtin.evaluate(Grading(variant, ref, submission, profile))
    options = GradingOptions(
        submission=path,
        variant=VARIANT,
        profile=profile,  # type: ignore[arg-type]
        fail_under=None,
        score_json=None,
        variants_dirs=(),
        cache_dir=cache,
        mimic_dir=None,
        max_bytes=1 << 20,
        meta=(("agent", "fuzz"),),
    )
    document = outputs.score_document(
        grade,
        variant=variant,
        reference=ref,
        submission=submission,
        options=options,
        cache_dir=cache,
        exit_status=1,
        missing_checks=[],
    )
    assert 0.0 <= grade.score <= 1.0
    assert grade.category in (*CATEGORIES, NONE)
    again = json.loads(json.dumps(document, allow_nan=False))
    assert again["score"] == grade.score
    for name, value in outputs.suite_properties(
        grade, variant=variant, reference=ref, submission=submission, meta=options.meta
    ):
        assert isinstance(name, str), name
        assert isinstance(value, str), (name, value)
    for check in grade.checks:
        assert isinstance(check.message, str)
        assert math.isfinite(check.credit)
        assert 0.0 <= check.credit <= 1.0
    submitted = document["submitted"]
    for value in (submitted["sps"], *submitted["components"].values()):
        assert value is None or (isinstance(value, float) and math.isfinite(value))
    return document


def _correct(cache: Path) -> dict[str, Any]:
    return reference_report(cache, VARIANT)


@pytest.mark.parametrize("examples", BUDGETS)
@pytest.mark.parametrize("profile", PROFILES)
def test_generated_documents_always_get_a_score_and_every_output(
    warm_cache: Path, profile: str, examples: int
) -> None:
    @fuzz(examples)
    @given(documents)
    def grade(document: Any) -> None:
        grade_in_process(encode(dumps(document)), warm_cache, profile)

    grade()


@pytest.mark.parametrize("examples", BUDGETS)
def test_mutations_of_a_correct_report_always_get_a_score_and_every_output(
    warm_cache: Path, examples: int
) -> None:
    correct = _correct(warm_cache)

    @fuzz(examples)
    @given(report_mutations(correct), st.sampled_from(PROFILES))
    def grade(document: Any, profile: str) -> None:
        grade_in_process(encode(dumps(document)), warm_cache, profile)

    grade()


@pytest.mark.parametrize("examples", BUDGETS)
def test_byte_strings_and_broken_encodings_always_get_a_score_and_every_output(
    warm_cache: Path, examples: int
) -> None:
    correct = json.dumps(_correct(warm_cache)).encode()

    @fuzz(examples)
    @given(byte_strings(correct), st.sampled_from(PROFILES))
    def grade(data: bytes, profile: str) -> None:
        grade_in_process(data, warm_cache, profile)

    grade()


# ------------------------------------------------------------------ named cases


HUGE = "1" + "0" * 400


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("field", ["sps", *COMPONENTS])
def test_a_huge_integer_anywhere_fails_its_check_in_process(
    warm_cache: Path, profile: str, field: str
) -> None:
    text = json.dumps(_correct(warm_cache))
    report = json.loads(text)
    original = report["sps"] if field == "sps" else report["components"][field]
    text = text.replace(f'"{field}": {json.dumps(original)}', f'"{field}": {HUGE}', 1)
    document = grade_in_process(text.encode(), warm_cache, profile)
    assert document["score"] < 1.0
    check = "sps" if field == "sps" else f"component[{field}]"
    failed = {c["name"]: c for c in document["checks"] if not c["passed"]}
    assert check in failed, document["checks"]
    assert "integer with 401 digits" in failed[check]["message"] or profile == "metr"


# ------------------------------------------------------------ real sessions


def _session_grade(
    pytester: pytest.Pytester, cache: Path, data: bytes, profile: str, *extra: str
) -> tuple[int, dict[str, Any], ElementTree.Element]:
    """Grade ``data`` in a real pytest session; its exit status, score JSON and JUnit XML."""
    name = f"r{len(list(pytester.path.glob('r*.json')))}"
    submission = pytester.path / f"{name}.json"
    submission.write_bytes(data)
    score, junit = pytester.path / f"{name}.score.json", pytester.path / f"{name}.xml"
    run = pytester.runpytest_subprocess if extra else pytester.runpytest
    result = run(
        *grading_args(submission, VARIANT, cache),
        "--clinaudit-profile",
        profile,
        "--clinaudit-score-json",
        str(score),
        "--junitxml",
        str(junit),
        *extra,
    )
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output, output
    assert "INTERNALERROR" not in output, output
    document = json.loads(score.read_text(encoding="utf-8"))
    root = ElementTree.parse(junit).getroot()
    assert result.ret in (0, 1), output
    assert 0.0 <= document["score"] <= 1.0
    assert document["category"] in (*CATEGORIES, NONE)
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    assert suite is not None
    properties = {p.get("name"): p.get("value") for p in suite.findall("properties/property")}
    assert float(properties["clinaudit.score"]) == pytest.approx(document["score"], abs=1e-6)
    assert properties["clinaudit.category"] == document["category"]
    return int(result.ret), document, root


def _with_huge(report: dict[str, Any], field: str) -> str:
    """``report`` as JSON text with a 401-digit integer as the value of ``field``."""
    text = json.dumps(report)
    original = report["sps"] if field == "sps" else report["components"][field]
    return text.replace(f'"{field}": {json.dumps(original)}', f'"{field}": {HUGE}', 1)


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("field", ["sps", *COMPONENTS])
def test_a_huge_integer_sps_or_component_fails_its_check_with_exit_status_1(
    pytester: pytest.Pytester, warm_cache: Path, profile: str, field: str
) -> None:
    data = _with_huge(_correct(warm_cache), field).encode()
    ret, document, _ = _session_grade(pytester, warm_cache, data, profile)
    assert ret == 1
    assert document["score"] < 1.0
    check = "sps" if field == "sps" else f"component[{field}]"
    assert [c["passed"] for c in document["checks"] if c["name"] == check] == [False]
    submitted = document["submitted"]
    assert (submitted["sps"] if field == "sps" else submitted["components"][field]) is None


SAMPLE = settings(
    max_examples=12,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.slow
def test_a_sample_of_hostile_documents_grades_in_real_serial_sessions(
    pytester: pytest.Pytester, warm_cache: Path
) -> None:
    correct = json.dumps(_correct(warm_cache)).encode()

    @SAMPLE
    @given(
        st.one_of(documents.map(lambda d: encode(dumps(d))), byte_strings(correct)),
        st.sampled_from(PROFILES),
    )
    def grade(data: bytes, profile: str) -> None:
        _session_grade(pytester, warm_cache, data, profile)

    grade()


@pytest.mark.slow
@pytest.mark.parametrize("profile", PROFILES)
def test_a_huge_integer_and_deep_details_grade_under_xdist(
    pytester: pytest.Pytester, warm_cache: Path, profile: str
) -> None:
    text = _with_huge(_correct(warm_cache), "calibration_ece").replace(
        '"details": {', '"details": {"deep": ' + "[" * 400 + "]" * 400 + ", ", 1
    )
    ret, document, _ = _session_grade(pytester, warm_cache, text.encode(), profile, "-n", "2")
    assert ret == 1
    assert document["score"] < 1.0
    assert document["submitted"]["components"]["calibration_ece"] is None
