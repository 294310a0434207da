"""Bootstrap uncertainty of the four components, the SPS and the verdict.

On a 114-row test set the task's ECE has a 95% interval of about [0.012, 0.085],
a calibration component anywhere from about 0 to 0.86: a point value next to a
deployment verdict hides that. This module resamples the *evaluation rows* and
recomputes every component from per-row data:

- FGSM robustness from the drawn rows' paired clean / adversarial probabilities;
- membership resistance from the shadow attack's per-row guesses (right or wrong);
- calibration from the test rows' (y, p), through the task's ECE, quirks included;
- the boundary walk from the per-row steps.

What is held fixed: the model, the FGSM surrogate, the shadow attack and the walk
targets. The intervals therefore say how much the numbers depend on *which
patients* were evaluated, given the fitted models, which is the question a
reviewer asks of a point estimate; refitting variability is not included.

The resampling itself, per-row data in and replicate components out, is
:mod:`.replicates`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..attacks.params import COMPONENTS, VerdictThresholds, Weights
from .replicates import ComponentRows, component_replicates, count_chunks, row_design, weighted_auc

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


LEVEL = 0.95


@dataclasses.dataclass(frozen=True)
class Interval:
    """A point estimate with its percentile bootstrap interval.

    ``n_undefined`` replicates held none of the statistic's rows and are left out.
    """

    point: float
    low: float
    high: float
    n_undefined: int


@dataclasses.dataclass(frozen=True, eq=False)
class BootstrapResult:
    """Intervals for every component and the SPS, and how stable the verdict is.

    ``replicates`` maps each component and ``"sps"`` to its (n_boot,) values, for
    plots; :meth:`as_dict` leaves them out.
    """

    n_boot: int
    seed: int
    level: float
    components: dict[str, Interval]
    sps: Interval
    verdict: str
    verdict_change_probability: float
    verdict_distribution: dict[str, float]
    replicates: dict[str, FloatArray]

    def as_dict(self) -> dict[str, Any]:
        return {
            "n_boot": self.n_boot,
            "seed": self.seed,
            "level": self.level,
            "method": "percentile bootstrap; test rows resampled jointly, members separately",
            "components": {k: dataclasses.asdict(v) for k, v in self.components.items()},
            "sps": dataclasses.asdict(self.sps),
            "verdict": self.verdict,
            "verdict_change_probability": self.verdict_change_probability,
            "verdict_distribution": dict(self.verdict_distribution),
        }


def _interval(point: float, values: FloatArray, level: float) -> Interval:
    import numpy as np

    finite = values[~np.isnan(values)]
    if not finite.size:
        return Interval(point, math.nan, math.nan, int(values.size))
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(finite, [tail, 1.0 - tail])
    return Interval(point, float(low), float(high), int(values.size - finite.size))


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


def bootstrap(
    rows: ComponentRows,
    *,
    weights: Weights,
    thresholds: VerdictThresholds,
    n_boot: int = 1000,
    seed: int = 42,
    level: float = LEVEL,
) -> BootstrapResult:
    """Percentile bootstrap CIs of the components and the SPS, and verdict stability.

    Parameters
    ----------
    rows
        Every component's per-row data (see :class:`ComponentRows`).
    weights, thresholds
        The SPS weights and verdict thresholds of the audit's parameters.
    n_boot
        Replicates; 1,000 puts the 2.5% quantile on the 25th value.
    seed
        Seed of the ``RandomState`` that draws every replicate.

    Returns
    -------
    BootstrapResult
        ``verdict_change_probability`` is the fraction of replicates whose verdict
        (on the SPS rounded as reported) differs from the audit's own.
    """
    import numpy as np

    from ..attacks.sps import SPS_DECIMALS, security_posture_score, verdict

    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    _check(rows)
    n_members = len(rows.membership.member_correct)
    design = row_design(rows)
    one = component_replicates(
        rows,
        np.ones((1, rows.n_test), np.int64),
        np.ones((1, n_members), np.int64),
        design=design,
    )
    point = {name: float(one[name][0]) for name in COMPONENTS}
    point_sps = security_posture_score(point, weights)
    point_verdict = verdict(round(point_sps, SPS_DECIMALS), thresholds)

    parts: dict[str, list[FloatArray]] = {name: [] for name in COMPONENTS}
    for test_counts, member_counts in count_chunks(seed, n_boot, rows.n_test, n_members):
        replicate = component_replicates(rows, test_counts, member_counts, design=design)
        for name, values in replicate.items():
            parts[name].append(values)
    replicates = {name: np.concatenate(parts[name]) for name in COMPONENTS}
    # The SPS of a replicate: summed in the formula's order, as security_posture_score does.
    sps = np.zeros(n_boot)
    for name, weight in zip(COMPONENTS, weights.as_tuple(), strict=True):
        sps = sps + weight * replicates[name]
    sps = 100.0 * sps
    replicates["sps"] = sps

    defined = ~np.isnan(sps)
    rounded = np.round(sps[defined], SPS_DECIMALS)
    verdicts = Counter(verdict(float(v), thresholds) for v in rounded)
    total = max(sum(verdicts.values()), 1)
    distribution = {name: count / total for name, count in verdicts.items()}
    changed = (total - verdicts[point_verdict]) / total if verdicts else math.nan
    return BootstrapResult(
        n_boot=n_boot,
        seed=seed,
        level=level,
        components={name: _interval(point[name], replicates[name], level) for name in COMPONENTS},
        sps=_interval(point_sps, sps, level),
        verdict=point_verdict,
        verdict_change_probability=float(changed),
        verdict_distribution=dict(sorted(distribution.items())),
        replicates=replicates,
    )


def auc_interval(
    member_scores: FloatArray,
    nonmember_scores: FloatArray,
    *,
    n_boot: int = 1000,
    seed: int = 42,
    level: float = LEVEL,
) -> Interval:
    """Percentile bootstrap interval of a membership attack's AUC.

    Members and non-members are resampled separately (each group keeps its size),
    the design of an attack evaluation with fixed group sizes; the sort is shared
    by every replicate (:func:`weighted_auc`).
    """
    import numpy as np

    members = np.asarray(member_scores, dtype=np.float64)
    nonmembers = np.asarray(nonmember_scores, dtype=np.float64)
    scores = np.concatenate([members, nonmembers])
    labels = np.r_[np.ones(len(members), np.int64), np.zeros(len(nonmembers), np.int64)]
    point = weighted_auc(scores, labels, np.ones((1, len(scores))))[0][0]
    values = []
    for nonmember_counts, member_counts in count_chunks(
        seed, n_boot, len(nonmembers), len(members)
    ):
        counts = np.concatenate([member_counts, nonmember_counts], axis=1)
        values.append(weighted_auc(scores, labels, counts)[0])
    return _interval(float(point), np.concatenate(values), level)
