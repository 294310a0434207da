"""Which intervals are shown: those whose coverage was measured to hold at the audit's size.

A "95%" interval is a claim that can be checked: on a population with known
values, it should cover the value in 92-98% of audits. The coverage study
(``benchmarks/bench_owner_coverage.py``, its table in docs/own-model-audit.md)
audits 120-200 independent test sets at each of 150, 500, 2,000 and 10,000
rows. Where a statistic's BCa interval covered less than 92% at a size, this
module keeps the interval from being shown there, and says why in its place
(the interval's ``withheld``, the report's ``undefined``, the summary and the
page):

- **never shown**, when the largest size failed too: the SPS (it takes in the
  task's ECE's upward bias; so the verdict's stability, read off the SPS's
  interval, is not computed either), Kumar et al.'s debiased error, the
  membership component and the boundary attack's AUC;
- **shown from a size on**, when small test sets failed and every larger one
  held: the task's ECE and the calibration component from 10,000 rows (the
  calibration test of :mod:`.consistency`, whose error rate is known, answers
  below that), the walk component from 500.

The rule applies after :func:`~.bca.held`: an interval already withheld keeps
that reason.
"""

from __future__ import annotations

import dataclasses
import math

from .bca import BCaInterval

STUDY = "benchmarks/bench_owner_coverage.py"


@dataclasses.dataclass(frozen=True)
class Measured:
    """Where a statistic's interval held in the coverage study, and why not elsewhere."""

    min_rows: int | None
    """The smallest test set at which the interval is shown; None: never."""
    why: str
    """Why it does not hold, with the coverage measured (a clause, no final stop)."""


_ECE = (
    "the task's ECE is a plug-in of absolute gaps, biased upward on a finite test set by about "
    "its interval's half-width or more, a bias the bootstrap does not see, and its BCa interval "
    "covered the population value in 37% of simulated audits at 150 test rows, 56% at 500 and "
    "82% at 2,000 (94% at 10,000); the calibration test (consistency resampling) asks instead "
    "whether the gaps exceed what chance gives"
)

RULES: dict[str, Measured] = {
    "ece": Measured(10_000, _ECE),
    "calibration_ece": Measured(
        10_000, "the calibration component is 1 - 12 x the task's ECE, and " + _ECE
    ),
    "sps": Measured(
        None,
        "the SPS takes in the calibration component's bias (the task's ECE, biased upward), and "
        "its BCa interval covered the population SPS in 46% of simulated audits at 150 test "
        "rows, 67% at 500, 84% at 2,000 and 91.7% at 10,000 (2.5% standard error), short of "
        "92%; the verdict's stability, read off this interval, is not computed either",
    ),
    "debiased_l2": Measured(
        None,
        "Kumar et al.'s debiased error is a difference of two small terms, near 0 for a "
        "well-calibrated model, and its BCa interval covered the population value in 70% to 76% "
        "of simulated audits at 150 to 10,000 test rows, not 95%",
    ),
    "membership_inference_resistance": Measured(
        None,
        "the interval holds the cross-fitted attacks' rules fixed and resamples the rows they "
        "decided, and it covered the rules' population value in 77% to 87% of simulated audits "
        "at 150 to 10,000 test rows, not 95% (at 150 and 500 rows mostly where the attacks did "
        "no better than chance and the component reads 1.0); each attack's AUC interval remains",
    ),
    "boundary_attack_resistance": Measured(
        500,
        "the walk component's interval covered its population value in 91.5% of simulated "
        "audits at 150 test rows (2.0% standard error), short of 92%",
    ),
    "auc.boundary_distance": Measured(
        None,
        "the boundary attack's scores share the test rows HopSkipJump starts from, so they "
        "are not independent draws, and with 100 scored rows its AUC's interval covered 81% of "
        "simulated audits at 150 test rows and 89-92% at 500 to 10,000, short of 92%",
    ),
}
"""Statistic (component, ``"sps"``, diagnostic, or ``"auc.<attack>"``) to its rule;
a statistic not listed held at every size measured and is always shown."""


def reason(name: str, n_rows: int) -> str | None:
    """Why ``name``'s interval is not shown on ``n_rows`` test rows, or None when it is.

    Worded as :func:`~.bca.held`'s reasons are, ending ": no interval is shown".
    """
    rule = RULES.get(name)
    if rule is None:
        return None
    if rule.min_rows is not None and n_rows >= rule.min_rows:
        return None
    where = (
        ""
        if rule.min_rows is None
        else f"; it holds from {rule.min_rows:,} test rows, and this audit has {n_rows:,}"
    )
    return f"{rule.why}{where} (coverage study, {STUDY}): no interval is shown"


def shown(name: str, n_rows: int, interval: BCaInterval) -> BCaInterval:
    """``interval``, or the same with its ends withheld (NaN) where it was measured not to hold."""
    if interval.withheld or not (math.isfinite(interval.low) and math.isfinite(interval.high)):
        return interval
    why = reason(name, n_rows)
    if why is None:
        return interval
    return dataclasses.replace(interval, low=math.nan, high=math.nan, withheld=why)
