"""The Security Posture Score and its verdict (SPEC §4). Pure Python, no NumPy.

``SPS = 100 * sum(weight_c * component_c)`` over the four components, higher is
more secure. The reported SPS is rounded to 2 decimals *from the unrounded
components*; the verdict applies the thresholds to that reported value, so a
reader can check the verdict from the report alone.
"""

from __future__ import annotations

from collections.abc import Mapping

from .params import COMPONENTS, VerdictThresholds, Weights

PRODUCTION = "PRODUCTION"
CONDITIONAL = "CONDITIONAL"
NOT_RECOMMENDED = "NOT RECOMMENDED"
VERDICTS = (PRODUCTION, CONDITIONAL, NOT_RECOMMENDED)

SPS_DECIMALS = 2
COMPONENT_DECIMALS = 4


def security_posture_score(components: Mapping[str, float], weights: Weights) -> float:
    """Weighted sum of the four components on a 0-100 scale (unrounded).

    Parameters
    ----------
    components
        Each of :data:`~.params.COMPONENTS` mapped to a score in [0, 1],
        higher is more robust.
    weights
        The variant's weights.
    """
    missing = [name for name in COMPONENTS if name not in components]
    if missing:
        raise KeyError(f"components missing: {', '.join(missing)}")
    # Summed in the order of the formula, so the result is reproducible to the bit.
    total = 0.0
    for name, weight in zip(COMPONENTS, weights.as_tuple(), strict=True):
        total += weight * float(components[name])
    return 100.0 * total


def verdict(sps: float, thresholds: VerdictThresholds) -> str:
    """The verdict for an SPS: PRODUCTION, CONDITIONAL or NOT RECOMMENDED."""
    if sps >= thresholds.production:
        return PRODUCTION
    if sps >= thresholds.conditional:
        return CONDITIONAL
    return NOT_RECOMMENDED


def rounded_report(
    components: Mapping[str, float], weights: Weights, thresholds: VerdictThresholds
) -> dict[str, object]:
    """The SPEC §4 report: SPS to 2 decimals, components to 4, and the verdict."""
    sps = round(security_posture_score(components, weights), SPS_DECIMALS)
    return {
        "sps": sps,
        "components": {
            name: round(float(components[name]), COMPONENT_DECIMALS) for name in COMPONENTS
        },
        "verdict": verdict(sps, thresholds),
    }
