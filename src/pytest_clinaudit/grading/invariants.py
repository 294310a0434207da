"""Invariant checks: Hypothesis properties of the grader's own objects, run in-session.

They test the variant's SPS function and the model's cached test probabilities
near the submitted components, so a custom variant or a tampered cache that
breaks them is caught where the grade is made. A failure says the grade itself
is suspect, not the submission. Hypothesis and NumPy are imported only when an
invariant runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.grading import pytest_internals
from pytest_clinaudit.grading.checks import Grading, Outcome
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.reference.attacks.sps import VERDICTS, security_posture_score, verdict

if TYPE_CHECKING:
    import hypothesis

INVARIANT_EXAMPLES = 30
"""Examples per invariant: enough to exercise edges, cheap enough for a 1-second session."""
MEMO_LIBRARIES = ("pytest-clinaudit", "hypothesis", "numpy")
"""Libraries whose versions key the memoized outcomes."""
CACHE_KIND = "invariants"
"""Entries of the reference cache that hold invariant outcomes."""


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


def _run_property(test: Callable[[], None], what: str, home: Path | None = None) -> Outcome:
    """Run a Hypothesis test; its falsifying example becomes the failure message."""
    try:
        with pytest_internals.hypothesis_home(home):
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


def _component_vectors(g: Grading) -> Any:
    """Component vectors anywhere in [0, 1]^4, and often within 0.25 of the reference's."""
    from hypothesis import strategies as st

    centre = {name: float(g.reference.components[name]) for name in COMPONENTS}
    near = st.tuples(
        *(
            st.floats(max(0.0, centre[n] - 0.25), min(1.0, centre[n] + 0.25), allow_nan=False)
            for n in COMPONENTS
        )
    )
    anywhere = st.tuples(*(st.floats(0.0, 1.0, allow_nan=False) for _ in COMPONENTS))
    return st.one_of(near, anywhere).map(lambda values: dict(zip(COMPONENTS, values, strict=True)))


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


# ------------------------------------------------------------------ memoizing


@functools.lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """sha256 of the code an invariant's outcome depends on: this module and the SPS and ECE."""
    from pytest_clinaudit.reference import attacks
    from pytest_clinaudit.reference.attacks import sps

    digest = hashlib.sha256()
    for module in (sys.modules[__name__], attacks, sps):
        digest.update(Path(str(module.__file__)).read_bytes())
    return digest.hexdigest()


def _memo_payload(name: str, g: Grading) -> dict[str, Any]:
    """Everything invariant ``name``'s outcome depends on, and nothing of the submission."""
    from pytest_clinaudit.catalog.cache import canonical_json
    from pytest_clinaudit.reference.attacks.params import as_dict
    from pytest_clinaudit.versions import library_versions

    reference = g.reference
    content = canonical_json(
        {"report": reference.report, "p": reference.test_probabilities, "y": reference.y_test}
    )
    return {
        "kind": "invariant",
        "invariant": name,
        "examples": INVARIANT_EXAMPLES,
        "params": as_dict(g.variant.params),
        "reference": hashlib.sha256(content.encode()).hexdigest(),
        "code": code_fingerprint(),
        "libraries": library_versions(MEMO_LIBRARIES, python=True),
    }


def memoized(name: str, invariant: Callable[[Grading], Outcome], g: Grading) -> Outcome:
    """``invariant(g)``, computed once per reference and kept in the reference cache.

    An invariant is a deterministic function (Hypothesis runs derandomized) of
    the variant's parameters, the reference and this code, never of the
    submission, so its outcome is keyed on all of those, the reference by the
    sha256 of its content: a tampered or rebuilt reference is checked afresh.
    Every session still has the check; most read its outcome instead of
    running Hypothesis again (about 0.3 s of a 0.35 s session). Without a
    cache (``g.cache is None``) it always runs.
    """
    if g.cache is None:
        return invariant(g)
    from pytest_clinaudit.catalog.cache import cache_key

    payload = _memo_payload(name, g)
    key = cache_key(payload)
    found = g.cache.get(CACHE_KIND, key)
    if found is not None:
        try:
            return Outcome(**found)
        except TypeError:  # an entry of another layout: compute afresh
            pass
    outcome = invariant(g)
    with contextlib.suppress(OSError):  # an unwritable cache costs time, never the grade
        g.cache.put(CACHE_KIND, key, dataclasses.asdict(outcome), payload=payload)
    return outcome
