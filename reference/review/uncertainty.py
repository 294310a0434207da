"""Bootstrap uncertainty of the four components, the SPS, the verdict and the diagnostics.

On a 114-row test set the task's ECE has a 95% interval of about [0.012, 0.085],
a calibration component anywhere from about 0 to 0.86: a point value next to a
deployment verdict hides that. This module resamples the *evaluation rows* and
recomputes every component from per-row data:

- FGSM robustness from the drawn rows' paired clean / adversarial probabilities;
- membership resistance from the attack's per-row decisions (member or not);
- calibration from the test rows' (y, p), through the task's ECE, quirks included;
- the boundary walk from the per-row steps;
- the full test set's AUROC, Brier score and task ECE (diagnostics).

What is held fixed: the model, the FGSM surrogate, the membership attacks and
their thresholds, and the walk targets. The intervals therefore say how much
the numbers depend on *which patients* were evaluated, given the fitted
models, which is the question a reviewer asks of a point estimate; refitting
variability is not included.

Intervals are BCa (:mod:`.bca`): the statistics are biased (the task's ECE is
a plug-in of absolute gaps, the components are clipped to [0, 1]), and a
percentile interval of a biased statistic is centred on the bias, not on the
value. Each interval reports the bootstrap's bias, ``mean(replicates) -
point``. Components are bootstrapped before their clip to [0, 1] and the
interval's ends clipped after. The verdict's stability is the BCa confidence
that the SPS lies in each verdict's band (:func:`.bca.confidence_below`), so
it is corrected for the bias rather than shifted by it, and agrees with the
SPS interval: an interval inside one band means a stability of at least 95%.
The coverage of these intervals is measured by ``benchmarks/bench_owner_coverage.py``.

The resampling itself, per-row data in and replicate statistics out, is
:mod:`.replicates`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from ..attacks.params import COMPONENTS, VerdictThresholds, Weights
from . import coverage
from .bca import BCaInterval, bca_interval, confidence_below, held
from .replicates import (
    DIAGNOSTICS,
    ComponentRows,
    Prepared,
    component_replicates,
    count_chunks,
    jackknife_chunks,
    jackknife_groups,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


LEVEL = 0.95

JACKKNIFE_GROUPS = 200
"""Groups of the jackknife that estimates BCa's acceleration; exact below this many rows."""

METHOD = (
    "BCa bootstrap (components before their clip to [0, 1]); test rows resampled jointly, "
    "members separately; fitted models and attacks held fixed, except the attack-seed "
    "variation of the membership component (seed_sd), added to its replicates"
)


@dataclasses.dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Intervals for every component, the SPS and the diagnostics, and the verdict's stability.

    ``replicates`` maps each component, diagnostic and ``"sps"`` to its (n_boot,)
    values, for plots and checks; :meth:`as_dict` leaves them out.
    """

    n_boot: int
    seed: int
    level: float
    components: dict[str, BCaInterval]
    sps: BCaInterval
    diagnostics: dict[str, BCaInterval]
    verdict: str
    verdict_change_probability: float
    verdict_distribution: dict[str, float]
    replicates: dict[str, FloatArray]
    seed_sd: dict[str, float] = dataclasses.field(default_factory=dict)
    """Per component, the standard deviation of the attack-seed noise added to its replicates."""

    def reasons(self) -> dict[str, str]:
        """Why an interval, or the verdict's stability, is not shown, by report path."""
        found: dict[str, str] = {}
        for section, intervals in (
            ("components", self.components),
            ("diagnostics", self.diagnostics),
        ):
            for name, interval in intervals.items():
                if interval.withheld:
                    found[f"uncertainty.{section}.{name}"] = interval.withheld
        if self.sps.withheld:
            found["uncertainty.sps"] = self.sps.withheld
            found["uncertainty.verdict_change_probability"] = (
                "not computed: the SPS's interval is not shown (" + self.sps.withheld + ")"
            )
        return found

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_boot": self.n_boot,
            "seed": self.seed,
            "level": self.level,
            "method": METHOD,
            "components": {k: dataclasses.asdict(v) for k, v in self.components.items()},
            "sps": dataclasses.asdict(self.sps),
            "diagnostics": {k: dataclasses.asdict(v) for k, v in self.diagnostics.items()},
            "verdict": self.verdict,
            "verdict_change_probability": self.verdict_change_probability,
            "verdict_distribution": dict(self.verdict_distribution),
            "seed_sd": dict(self.seed_sd),
        }


def _check(rows: ComponentRows) -> None:
    import numpy as np

    for name, index in (
        ("fgsm", rows.fgsm.test_index),
        ("membership", rows.membership.nonmember_test_index),
        ("calibration", rows.calibration.test_index),
        ("walk", rows.walk.test_index),
    ):
        index = np.asarray(index)
        if index.size and (index.min() < 0 or index.max() >= rows.n_test):
            raise ValueError(f"{name}: test-row indices must lie in [0, {rows.n_test})")


def _clipped(interval: BCaInterval) -> BCaInterval:
    """A component's interval on its reported scale: point and ends clipped to [0, 1]."""

    def clip(value: float) -> float:
        return value if math.isnan(value) else min(1.0, max(0.0, value))

    return dataclasses.replace(
        interval, point=clip(interval.point), low=clip(interval.low), high=clip(interval.high)
    )


def _sps(values: dict[str, Any], weights: Weights) -> Any:
    """The SPS of clipped components, summed in the formula's order (as security_posture_score)."""
    import numpy as np

    total: Any = 0.0
    for name, weight in zip(COMPONENTS, weights.as_tuple(), strict=True):
        total = total + weight * np.clip(values[name], 0.0, 1.0)
    return 100.0 * total


def _gather(chunks: Any, prepared: Prepared) -> dict[str, FloatArray]:
    import numpy as np

    parts: dict[str, list[FloatArray]] = {}
    for test_counts, member_counts in chunks:
        for name, values in component_replicates(prepared, test_counts, member_counts).items():
            parts.setdefault(name, []).append(values)
    return {name: np.concatenate(values) for name, values in parts.items()}


def _jackknife(prepared: Prepared, seed: int) -> list[dict[str, FloatArray]]:
    """Leave-one-group-out values of every statistic: test rows, then members."""
    import numpy as np

    rows = prepared.rows
    n_test, n_members = rows.n_test, len(rows.membership.member_flagged)
    samples = []
    for side, n in (("test", n_test), ("members", n_members)):
        if n < 2:
            continue
        groups = jackknife_groups(n, JACKKNIFE_GROUPS, seed=seed + (side == "members"))
        n_groups = int(groups.max()) + 1

        def pairs(side: str = side, groups: IntArray = groups, n_groups: int = n_groups) -> Any:
            for counts in jackknife_chunks(groups, n_groups):
                other = np.ones((len(counts), n_members if side == "test" else n_test), np.int32)
                yield (counts, other) if side == "test" else (other, counts)

        samples.append(_gather(pairs(), prepared))
    return samples


def _verdict_distribution(
    sps: BCaInterval, replicates: FloatArray, thresholds: VerdictThresholds
) -> dict[str, float]:
    """BCa confidence of each verdict band; the SPS is rounded to 2 decimals first."""
    from ..attacks.sps import CONDITIONAL, NOT_RECOMMENDED, PRODUCTION

    # An SPS rounds up into a band from half a unit of the last decimal below it.
    below_conditional = confidence_below(thresholds.conditional - 0.005, sps, replicates)
    below_production = confidence_below(thresholds.production - 0.005, sps, replicates)
    shares = {
        NOT_RECOMMENDED: below_conditional,
        CONDITIONAL: max(0.0, below_production - below_conditional),
        PRODUCTION: 1.0 - below_production,
    }
    return {name: share for name, share in sorted(shares.items()) if share > 0.0}


def bootstrap(
    rows: ComponentRows,
    *,
    weights: Weights,
    thresholds: VerdictThresholds,
    n_boot: int = 1000,
    seed: int = 42,
    level: float = LEVEL,
    seed_sd: dict[str, float] | None = None,
) -> BootstrapResult:
    """BCa intervals of the components, the SPS and the diagnostics, and verdict stability.

    Parameters
    ----------
    rows
        Every component's per-row data (see :class:`ComponentRows`).
    weights, thresholds
        The SPS weights and verdict thresholds of the audit's parameters.
    n_boot
        Replicates; 1,000 puts the 2.5% quantile on the 25th value.
    seed
        Seed of the ``RandomState`` that draws every replicate (and, plus 2 and
        3, the jackknife's groups; plus 5, the attack-seed noise).
    seed_sd
        Per component, the standard deviation of its value over the audit's own
        random choices (the membership component's fold draws and LiRA's shadows,
        :attr:`~.advantage.Decisions.seed_sd`). Each replicate of that component
        gets a draw of ``N(0, seed_sd^2)`` added before the SPS is formed, so its
        interval, the SPS's and the verdict's stability take in that variation
        as well as the patients'.

    Returns
    -------
    BootstrapResult
        ``verdict_change_probability`` is the BCa confidence that the SPS lies
        outside the band of the audit's own verdict.
    """
    import numpy as np

    from ..attacks.sps import SPS_DECIMALS, verdict

    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    _check(rows)
    prepared = Prepared.of(rows)
    n_members = len(rows.membership.member_flagged)
    one = component_replicates(
        prepared, np.ones((1, rows.n_test), np.int64), np.ones((1, n_members), np.int64)
    )
    point = {name: float(values[0]) for name, values in one.items()}
    point_sps = float(_sps(point, weights))
    point_verdict = verdict(round(point_sps, SPS_DECIMALS), thresholds)

    replicates = _gather(count_chunks(seed, n_boot, rows.n_test, n_members), prepared)
    noise = {name: sd for name, sd in (seed_sd or {}).items() if sd > 0.0}
    for offset, (name, sd) in enumerate(sorted(noise.items())):
        draws = np.random.RandomState(seed + 5 + offset).normal(0.0, sd, n_boot)
        replicates[name] = replicates[name] + draws
    replicates["sps"] = _sps(replicates, weights)
    jackknife = _jackknife(prepared, seed + 2)
    point["sps"] = point_sps
    for sample in jackknife:
        sample["sps"] = _sps(sample, weights)

    def interval(name: str) -> BCaInterval:
        found = bca_interval(
            point[name], replicates[name], [sample[name] for sample in jackknife], level=level
        )
        # Withheld: an interval that excludes its point, or one measured not to cover at
        # this size (:mod:`.coverage`).
        return coverage.shown(name, rows.n_test, held(found, replicates[name]))

    sps = interval("sps")
    # The verdict's stability only from an SPS interval that holds.
    distribution = {} if sps.withheld else _verdict_distribution(sps, replicates["sps"], thresholds)
    changed = 1.0 - distribution.get(point_verdict, 0.0) if distribution else math.nan
    return BootstrapResult(
        n_boot=n_boot,
        seed=seed,
        level=level,
        components={name: _clipped(interval(name)) for name in COMPONENTS},
        sps=sps,
        diagnostics={name: interval(name) for name in DIAGNOSTICS},
        verdict=point_verdict,
        verdict_change_probability=changed if math.isnan(changed) else min(1.0, max(0.0, changed)),
        verdict_distribution=distribution,
        replicates=replicates,
        seed_sd=noise,
    )


def auc_interval(
    member_scores: FloatArray,
    nonmember_scores: FloatArray,
    *,
    n_boot: int = 1000,
    seed: int = 42,
    level: float = LEVEL,
    name: str = "",
    n_rows: int = 0,
) -> BCaInterval:
    """BCa interval of a membership attack's AUC.

    ``name`` (the attack) and ``n_rows`` (the audit's test rows) say whether the
    coverage study found the interval to hold there (:mod:`.coverage`, as
    ``"auc.<name>"``).

    Members and non-members are resampled separately (each group keeps its size),
    the design of an attack evaluation with fixed group sizes; the sort is shared
    by every replicate (:class:`~.replicates.AUCPlan`), and the jackknife leaves
    out groups of each side in turn.
    """
    import numpy as np

    from .replicates import AUCPlan

    members = np.asarray(member_scores, dtype=np.float64)
    nonmembers = np.asarray(nonmember_scores, dtype=np.float64)
    n_m, n_n = len(members), len(nonmembers)
    plan = AUCPlan.of(
        np.concatenate([members, nonmembers]),
        np.r_[np.ones(n_m, np.int64), np.zeros(n_n, np.int64)],
    )
    point = float(plan.auc(np.ones((1, n_m + n_n)))[0][0])
    values: list[FloatArray] = []
    for nonmember_counts, member_counts in count_chunks(seed, n_boot, n_n, n_m):
        values.append(plan.auc(np.concatenate([member_counts, nonmember_counts], axis=1))[0])
    jackknife: list[FloatArray] = []
    for side, n in ((0, n_m), (1, n_n)):
        if n < 2:
            continue
        groups = jackknife_groups(n, JACKKNIFE_GROUPS, seed=seed + 2 + side)
        out: list[FloatArray] = []
        for counts in jackknife_chunks(groups, int(groups.max()) + 1):
            other = np.ones((len(counts), n_n if side == 0 else n_m), np.int32)
            both: list[Any] = [counts, other] if side == 0 else [other, counts]
            out.append(plan.auc(np.concatenate(both, axis=1))[0])
        jackknife.append(np.concatenate(out))
    replicates = np.concatenate(values)
    found = held(bca_interval(point, replicates, jackknife, level=level), replicates)
    return coverage.shown(f"auc.{name}", n_rows, found) if name else found
