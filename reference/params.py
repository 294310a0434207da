"""Parameter records of the "sps-v1" semantics (SPEC §3).

Every number an attack uses lives here, filled from a variant file; the attack
code holds no constants of its own. All records are frozen and hashable so they
can key caches, and :func:`as_dict` turns any of them into JSON-ready data.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

COMPONENTS = (
    "fgsm_robustness",
    "membership_inference_resistance",
    "calibration_ece",
    "boundary_attack_resistance",
)
"""The four components, in the order of the SPS formula and the report."""


@dataclasses.dataclass(frozen=True)
class SurrogateParams:
    """The white-box surrogate whose coefficient signs drive FGSM (§3.1).

    A logistic regression, optionally behind a ``StandardScaler``; the sign of
    its coefficients is taken in its own (possibly scaled) space and applied to
    the raw features. Model recipes reuse it for FGSM augmentation.
    """

    scaler: bool
    C: float
    max_iter: int
    class_weight: Literal["balanced", "none"]
    random_state: int


@dataclasses.dataclass(frozen=True)
class FGSMParams:
    """FGSM robustness (§3.1): AUROC drop under a surrogate's sign perturbation."""

    epsilon: float
    """Perturbation size, in the raw (unscaled) units of the features."""
    n_samples: int
    """Test rows drawn without replacement (at most the test size)."""
    seed: int
    """Seed of the fresh ``RandomState`` that draws those rows."""
    single_class_score: float
    """Score when the drawn rows hold one class, so AUROC is undefined."""
    surrogate: SurrogateParams


@dataclasses.dataclass(frozen=True)
class MembershipParams:
    """Membership-inference resistance (§3.2), shadow-model attack."""

    pool_cap: int
    """The pool is the first ``min(pool_cap, n_train)`` training rows."""
    in_fraction: float
    """Each round marks ``int(in_fraction * n_pool)`` pool rows as members."""
    rounds: int
    seed: int
    """One ``RandomState(seed)`` draws the members of every round."""
    shadow_n_estimators: int
    shadow_max_depth: int
    shadow_class_weight: Literal["balanced", "none"]
    shadow_seed: int
    """Round ``i`` fits its shadow forest with ``random_state=shadow_seed + i``."""
    attack_n_estimators: int
    attack_seed: int
    eval_cap: int
    """Members and non-members queried: ``min(eval_cap, n_train, n_test)`` each."""
    threshold: float
    """An attack probability at or above this says "member"."""


@dataclasses.dataclass(frozen=True)
class CalibrationParams:
    """Calibration (§3.3): the task's binned ECE, quirks included."""

    n_bins: int
    ece_scale: float
    """Score is ``max(0, 1 - ece_scale * ece)``."""


@dataclasses.dataclass(frozen=True)
class BoundaryParams:
    """Boundary-attack resistance (§3.4): walk towards a differently predicted row."""

    n_samples: int
    seed: int
    step_size: float
    max_steps: int
    min_norm: float
    """A walk whose remaining distance falls below this stops and counts as ``max_steps``."""


@dataclasses.dataclass(frozen=True)
class Weights:
    """SPS weights; they must sum to 1 so that the SPS lies in [0, 100]."""

    fgsm_robustness: float
    membership_inference_resistance: float
    calibration_ece: float
    boundary_attack_resistance: float

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (
            self.fgsm_robustness,
            self.membership_inference_resistance,
            self.calibration_ece,
            self.boundary_attack_resistance,
        )


@dataclasses.dataclass(frozen=True)
class VerdictThresholds:
    """SPS thresholds of the verdict: at or above ``production`` is PRODUCTION."""

    production: float
    conditional: float


@dataclasses.dataclass(frozen=True)
class AuditParams:
    """Everything one audit needs besides the model and the data."""

    fgsm: FGSMParams
    membership_inference: MembershipParams
    calibration: CalibrationParams
    boundary: BoundaryParams
    weights: Weights
    verdict: VerdictThresholds


def as_dict(record: Any) -> dict[str, Any]:
    """A parameter record as plain JSON-ready data (nested records become dicts)."""
    return dataclasses.asdict(record)
