"""Hypothesis properties of grading: bounded, exact on the reference, monotone, never crashing."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import catalog, published_score_of_bytes, reference
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_clinaudit.grading import builtin, checks, invariants
from pytest_clinaudit.grading import submission as submissions
from pytest_clinaudit.grading.checks import Grading, Outcome
from pytest_clinaudit.grading.scoring import CATEGORIES, Grade
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.reference.attacks.sps import VERDICTS, security_posture_score, verdict

VARIANT = "wdbc-baseline"
PROFILES = ("strict", "metr")
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _grading(data: bytes, cache: Path, profile: str, variant: str = VARIANT) -> Grading:
    return Grading(
        catalog().get(variant), reference(cache, variant), submissions.parse_bytes(data), profile
    )


def _grade(document: Any, cache: Path, profile: str) -> Grade:
    return builtin.evaluate(_grading(json.dumps(document).encode(), cache, profile))


# ------------------------------------------------------------------ strategies

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
number_like = st.one_of(
    st.floats(-0.5, 1.5),
    st.floats(0, 1),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-3, 150),
    st.booleans(),
    st.none(),
    st.floats(0, 100).map(lambda x: f"{x:.2f}"),
    st.text(max_size=4),
)
sps_like = st.one_of(number_like, st.floats(0, 100), st.floats(40, 75))
detail_keys = ("ece", "mi_accuracy", "auroc_clean", "auroc_adversarial", "mean_steps_to_flip")
near_valid_reports = st.fixed_dictionaries(
    {},
    optional={
        "sps": sps_like,
        "components": st.fixed_dictionaries({}, optional=dict.fromkeys(COMPONENTS, number_like))
        | json_values,
        "verdict": st.sampled_from([*VERDICTS, "production", "", "NOT  RECOMMENDED"]) | json_values,
        "details": st.fixed_dictionaries({}, optional=dict.fromkeys(detail_keys, number_like))
        | json_values,
        "notes": json_values,
    },
)
documents = near_valid_reports | json_values


def _encode(document: Any, bom: bool) -> bytes:
    return (b"\xef\xbb\xbf" if bom else b"") + json.dumps(document).encode()


# -------------------------------------------------------------------- properties


@FAST
@given(document=documents, bom=st.booleans(), profile=st.sampled_from(PROFILES))
def test_no_json_document_crashes_a_check_and_every_score_is_in_the_unit_interval(
    warm_cache: Path, document: Any, bom: bool, profile: str
) -> None:
    g = _grading(_encode(document, bom), warm_cache, profile)
    for check in builtin.builtin_checks(g, invariants=False):
        outcome = check.run()  # called directly: a crash here must fail the test
        assert isinstance(outcome, Outcome)
        assert 0.0 <= outcome.credit <= 1.0
        assert outcome.message, check.name
    grade = builtin.evaluate(g)
    assert 0.0 <= grade.score <= 1.0
    assert grade.category in (*CATEGORIES, "none")


@FAST
@given(data=st.binary(max_size=300) | documents.map(lambda d: json.dumps(d).encode()[:-1]))
def test_arbitrary_bytes_never_crash_the_parser(data: bytes) -> None:
    found = submissions.parse_bytes(data)
    assert found.status in {
        "ok",
        "not-utf8",
        "empty",
        "invalid-json",
        "too-deep",
        "not-an-object",
        "empty-object",
    }
    assert found.ok or found.message


@FAST
@given(document=documents, bom=st.booleans())
def test_the_metr_profile_equals_the_published_scorer_on_any_document(
    warm_cache: Path, document: Any, bom: bool
) -> None:
    data = _encode(document, bom)
    ref = reference(warm_cache, VARIANT)
    expected = published_score_of_bytes(data, ref.sps, ref.components)
    assert builtin.evaluate(_grading(data, warm_cache, "metr")).score == pytest.approx(
        expected, abs=1e-9
    )


@FAST
@given(document=documents)
def test_strict_never_scores_a_document_above_metr(warm_cache: Path, document: Any) -> None:
    strict, metr = (_grade(document, warm_cache, p).score for p in PROFILES)
    assert strict <= metr + 1e-12


def _consistent_report(components: dict[str, float]) -> dict[str, Any]:
    params = catalog().get(VARIANT).params
    sps = round(security_posture_score(components, params.weights), 2)
    return {
        "sps": sps,
        "components": {k: round(v, 4) for k, v in components.items()},
        "verdict": verdict(sps, params.verdict),
    }


@FAST
@given(
    offsets=st.tuples(*(st.floats(-0.04, 0.04) for _ in COMPONENTS)),
    profile=st.sampled_from(PROFILES),
)
def test_a_consistent_report_within_tolerance_of_the_reference_scores_1(
    warm_cache: Path, offsets: tuple[float, ...], profile: str
) -> None:
    ref = reference(warm_cache, VARIANT).components
    components = {
        n: min(1.0, max(0.0, ref[n] + d)) for n, d in zip(COMPONENTS, offsets, strict=True)
    }
    grade = _grade(_consistent_report(components), warm_cache, profile)
    assert grade.score == 1.0, [c.message for c in grade.checks if not c.passed]


@FAST
@given(
    which=st.sampled_from(COMPONENTS),
    sign=st.sampled_from([-1.0, 1.0]),
    near=st.floats(0.0, 1.0),
    farther=st.floats(0.0, 1.0),
    profile=st.sampled_from(PROFILES),
    details=st.booleans(),
)
def test_moving_one_component_away_from_the_reference_never_raises_the_score(
    warm_cache: Path,
    which: str,
    sign: float,
    near: float,
    farther: float,
    profile: str,
    details: bool,
) -> None:
    report = dict(reference(warm_cache, VARIANT).report)
    if not details:
        report.pop("details")
    ref = report["components"][which]

    def moved(distance: float) -> float:
        value = ref + sign * distance
        components = dict(report["components"], **{which: value})
        return _grade(dict(report, components=components), warm_cache, profile).score

    first, second = moved(near), moved(near + farther)
    assert second <= first
    assert first <= 1.0
    assert moved(0.0) == 1.0


@FAST
@given(
    start=st.fixed_dictionaries(
        {
            "sps": st.floats(0, 100),
            "components": st.fixed_dictionaries(dict.fromkeys(COMPONENTS, st.floats(0, 1))),
        }
    ),
    which=st.sampled_from(COMPONENTS),
    step=st.floats(0.0, 1.0),
)
def test_under_metr_moving_a_component_farther_away_never_helps_from_any_start(
    warm_cache: Path, start: dict[str, Any], which: str, step: float
) -> None:
    ref = reference(warm_cache, VARIANT).components[which]
    value = start["components"][which]
    farther = value + math.copysign(step, value - ref if value != ref else 1.0)
    after = dict(start, components=dict(start["components"], **{which: farther}))
    assert _grade(after, warm_cache, "metr").score <= _grade(start, warm_cache, "metr").score


def test_the_invariants_pass_on_the_reference_of_every_wdbc_variant(warm_cache: Path) -> None:
    for variant in ("wdbc-baseline", "wdbc-calibrated", "wdbc-hard"):
        g = _grading(
            json.dumps(reference(warm_cache, variant).report).encode(),
            warm_cache,
            "strict",
            variant,
        )
        results = [
            checks.run_check(c, c.name)
            for c in builtin.builtin_checks(g)
            if c.category == "invariant"
        ]
        assert len(results) == len(invariants.INVARIANTS)
        assert [r.message for r in results if not r.passed] == []


def test_a_tampered_reference_fails_the_consistency_invariant(warm_cache: Path) -> None:
    import dataclasses

    g = _grading(b"{}", warm_cache, "strict")
    broken = dataclasses.replace(g.reference, report=dict(g.reference.report, sps=99.99))
    outcome = invariants.invariant_reference(dataclasses.replace(g, reference=broken))
    assert not outcome.passed
    assert "reference sps 99.99 != round(SPS of its components, 2)" in outcome.message


def test_probabilities_outside_the_unit_interval_fail_the_calibration_invariant(
    warm_cache: Path,
) -> None:
    import dataclasses

    g = _grading(b"{}", warm_cache, "strict")
    broken = dataclasses.replace(g.reference, test_probabilities=(1.5,) * len(g.reference.y_test))
    outcome = invariants.invariant_calibration_bounded(
        dataclasses.replace(g, reference=broken), examples=5
    )
    assert not outcome.passed
    assert "probabilities outside [0, 1]" in outcome.message


def test_invariants_write_nothing_into_the_working_directory(
    warm_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    g = _grading(b"{}", warm_cache, "strict")
    import dataclasses

    g = dataclasses.replace(g, scratch_dir=tmp_path / "scratch")
    for _, invariant, _ in invariants.INVARIANTS:
        assert invariant(g).passed
    assert sorted(p.name for p in tmp_path.iterdir()) in ([], ["scratch"])


# --------------------------------------------------------- memoized invariants


def _memo_grading(warm_cache: Path, cache_dir: Path, submitted: bytes = b"{}") -> Grading:
    import dataclasses

    from pytest_clinaudit.catalog.cache import ReferenceCache

    return dataclasses.replace(
        _grading(submitted, warm_cache, "strict"), cache=ReferenceCache(cache_dir)
    )


def test_an_invariant_runs_once_per_reference_and_is_read_back_after(
    warm_cache: Path, tmp_path: Path
) -> None:
    calls: list[str] = []

    def counted(g: Grading) -> Outcome:
        calls.append("ran")
        return invariants.invariant_sps_bounded(g)

    g = _memo_grading(warm_cache, tmp_path)
    first = invariants.memoized("sps-bounded", counted, g)
    # Another submission, same reference: the stored outcome, not another run.
    other = _memo_grading(warm_cache, tmp_path, json.dumps({"sps": 1}).encode())
    second = invariants.memoized("sps-bounded", counted, other)
    assert calls == ["ran"]
    assert second == first
    assert first.passed
    assert len(list((tmp_path / invariants.CACHE_KIND).glob("*.json"))) == 1


def test_a_changed_reference_is_checked_afresh_not_read_from_the_memo(
    warm_cache: Path, tmp_path: Path
) -> None:
    import dataclasses

    g = _memo_grading(warm_cache, tmp_path)
    assert invariants.memoized("reference-consistent", invariants.invariant_reference, g).passed
    tampered = dataclasses.replace(
        g, reference=dataclasses.replace(g.reference, report=dict(g.reference.report, sps=99.99))
    )
    outcome = invariants.memoized("reference-consistent", invariants.invariant_reference, tampered)
    assert not outcome.passed
    assert len(list((tmp_path / invariants.CACHE_KIND).glob("*.json"))) == 2


def test_without_a_cache_an_invariant_always_runs(warm_cache: Path) -> None:
    calls: list[str] = []

    def counted(g: Grading) -> Outcome:
        calls.append("ran")
        return Outcome.ok("fine")

    g = _grading(b"{}", warm_cache, "strict")
    invariants.memoized("x", counted, g)
    invariants.memoized("x", counted, g)
    assert calls == ["ran", "ran"]
