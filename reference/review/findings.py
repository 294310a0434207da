"""Findings: every component below its floor, named next to the SPS verdict.

The verdict stays the paper's: the weighted SPS against 80 and 65. A weighted
sum lets a strong component hide a failing one (an overfit FLCHAIN forest with
a membership component of 0.545 scores an SPS of 81.05, PRODUCTION). So each
component also has a **floor**, and every component below its floor is a
finding, reported beside the verdict:

    PRODUCTION by the SPS; membership: fails (0.545 < 0.70)

The floors and why (docs/own-model-audit.md gives the same table):

- **FGSM robustness 0.90**: the component is ``1 - (AUROC drop)`` under FGSM at
  ε = 0.1 training standard deviations. Below 0.90 a nudge of a tenth of a
  standard deviation per feature, inside the measurement error of most
  clinical variables, costs more than 0.10 of AUROC: the difference between a
  useful and a useless risk score.
- **Membership 0.70**: the component is ``1 - advantage`` (TPR - FPR). An
  advantage of 0.30 is the most that ε ≈ 0.62 differential privacy allows
  (``(e^ε - 1) / (e^ε + 1)``); above it the model tells its training patients
  from others far better than a strong privacy guarantee would permit.
- **Calibration 0.40**: the component is ``1 - 12 ECE``, so 0.40 is an ECE of
  0.05: predicted risks off by five percentage points on average, the size of
  a difference that changes treatment thresholds.
- **Boundary walk 0.20**: the component is the mean number of 0.05-std steps to
  a changed prediction over 100; below 0.20 the predicted class flips, on
  average, within one training standard deviation of walking towards a
  patient predicted otherwise.

A finding compares the point estimate with the floor, as the verdict compares
the SPS with its thresholds; the component's interval is given with it, and
``clearly`` says whether the whole interval lies below the floor.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ..attacks.params import COMPONENTS

SHORT_NAMES = {
    "fgsm_robustness": "FGSM robustness",
    "membership_inference_resistance": "membership",
    "calibration_ece": "calibration",
    "boundary_attack_resistance": "boundary walk",
}
"""How a finding names each component."""

REASONS = {
    "fgsm_robustness": "FGSM at the audited ε costs more than 0.10 of AUROC",
    "membership_inference_resistance": "an attacker's TPR - FPR exceeds 0.30, more than "
    "ε ≈ 0.62 differential privacy would allow",
    "calibration_ece": "the task's ECE exceeds 0.05: predicted risks are off by more than five "
    "percentage points on average",
    "boundary_attack_resistance": "the predicted class flips within one training standard "
    "deviation of walking towards a patient predicted otherwise, on average",
}
"""Why a component below its floor fails, in one line."""


@dataclasses.dataclass(frozen=True)
class Floors:
    """The value below which each component is a finding (see the module docstring)."""

    fgsm_robustness: float = 0.90
    membership_inference_resistance: float = 0.70
    calibration_ece: float = 0.40
    boundary_attack_resistance: float = 0.20

    def of(self, component: str) -> float:
        value: float = getattr(self, component)
        return value


def findings(
    components: Mapping[str, float],
    intervals: Mapping[str, Mapping[str, Any]],
    floors: Floors,
) -> list[dict[str, Any]]:
    """One finding per component below its floor, in the components' order.

    ``intervals`` maps each component to its interval (``low``, ``high``; either
    may be None when the interval is not shown).
    """
    found = []
    for name in COMPONENTS:
        value, floor = float(components[name]), floors.of(name)
        if value >= floor:
            continue
        interval = intervals.get(name, {})
        low, high = (_finite(interval.get(end)) for end in ("low", "high"))
        found.append(
            {
                "component": name,
                "value": round(value, 4),
                "floor": floor,
                "low": low,
                "high": high,
                "clearly": high is not None and high < floor,
                "text": f"{SHORT_NAMES[name]}: fails ({value:.3f} < {floor:.2f})",
                "reason": REASONS[name],
            }
        )
    return found


def _finite(value: Any) -> float | None:
    """A number, or None for a missing or withheld (NaN) interval end."""
    return None if value is None or value != value else float(value)


def verdict_line(verdict: str, found: list[dict[str, Any]]) -> str:
    """``"PRODUCTION by the SPS; membership: fails (0.545 < 0.70)"``, or every floor met."""
    if not found:
        return f"{verdict} by the SPS; every component at or above its floor"
    return f"{verdict} by the SPS; " + "; ".join(f["text"] for f in found)
