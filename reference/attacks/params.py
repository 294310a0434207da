"""Parameter records of the "sps-v1" semantics (SPEC §3) and its white-box form (§7).

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

SEMANTICS = "sps-v1"
"""Version of the attack semantics; part of every reference cache key."""

SEMANTICS_WHITE_BOX = "sps-v1-wb2"
"""SPEC §7 as revised: "sps-v1" with FGSM along ``(1 - 2y) sign(d logit / dx)``, the
audited model's own logit gradient, and the strong margin PGD in the details."""

ALL_SEMANTICS = (SEMANTICS, SEMANTICS_WHITE_BOX)

RETIRED_SEMANTICS = {
    "sps-v1-wb": (
        "it took the sign of the float32 cross-entropy gradient, which is exactly 0 "
        "where |logit| > ~17, so the auditor masked its own gradients (SPEC §7)"
    ),
}
"""Semantics no code path computes any more, and why: a variant naming one is refused."""

STRONG_PGD_MIN_STEPS = 50
STRONG_PGD_MIN_RESTARTS = 5
"""SPEC §7.3: the strong attack takes at least this many steps and restarts."""


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


_ABSENT_IF_NONE = {"absent_if_none": True}
"""Field metadata of keys added after sps-v1: :func:`as_dict` leaves them out when unset."""

Gradient = Literal["surrogate", "model"]
EpsilonUnits = Literal["raw", "std"]
Clip = Literal["none", "train-range"]


@dataclasses.dataclass(frozen=True)
class FGSMParams:
    """FGSM robustness: AUROC drop under a one-step sign perturbation.

    With the optional keys absent this is SPEC §3.1 ("sps-v1") exactly: the
    surrogate's coefficient signs, ``epsilon`` in raw units, no clipping. The
    optional keys select SPEC §7.2 ("sps-v1-wb2", ``gradient = "model"``), its
    strong PGD (§7.3), and the per-feature budgets and clipping a model
    owner's audit needs.
    """

    epsilon: float
    """Perturbation size: raw feature units, or training standard deviations (``epsilon_units``)."""
    n_samples: int
    """Test rows drawn without replacement (at most the test size)."""
    seed: int
    """Seed of the fresh ``RandomState`` that draws those rows."""
    single_class_score: float
    """Score when the drawn rows hold one class, so AUROC is undefined."""
    surrogate: SurrogateParams
    gradient: Gradient | None = dataclasses.field(default=None, metadata=_ABSENT_IF_NONE)
    """``"surrogate"`` (absent: §3.1) or ``"model"``: the target's own input gradient (§7.2)."""
    epsilon_units: EpsilonUnits | None = dataclasses.field(default=None, metadata=_ABSENT_IF_NONE)
    """``"raw"`` (absent) or ``"std"``: feature j moves ``epsilon * s_j``, ``s_j`` its
    training standard deviation (ddof=0)."""
    clip: Clip | None = dataclasses.field(default=None, metadata=_ABSENT_IF_NONE)
    """``"none"`` (absent) or ``"train-range"``: perturbed rows are clipped to each
    feature's [min, max] over the training rows."""
    pgd_steps: int | None = dataclasses.field(default=None, metadata=_ABSENT_IF_NONE)
    """Steps of the strong margin PGD (§7.3, at least 50); absent: no PGD diagnostic."""
    pgd_restarts: int | None = dataclasses.field(default=None, metadata=_ABSENT_IF_NONE)
    """Restarts of the strong PGD (§7.3, at least 5): the first from the drawn rows,
    the others from uniform points of the box drawn by ``RandomState(seed)``."""

    @property
    def white_box(self) -> bool:
        """True when the perturbation follows the audited model's own gradient."""
        return self.gradient == "model"

    @property
    def in_std_units(self) -> bool:
        return self.epsilon_units == "std"

    @property
    def clipped(self) -> bool:
        return self.clip == "train-range"


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


def _drop_absent(record: Any, data: dict[str, Any]) -> None:
    for field in dataclasses.fields(record):
        value = getattr(record, field.name)
        if value is None and field.metadata.get("absent_if_none"):
            del data[field.name]
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            _drop_absent(value, data[field.name])


def as_dict(record: Any) -> dict[str, Any]:
    """A parameter record as plain JSON-ready data (nested records become dicts).

    Keys added after sps-v1 (the optional FGSM keys) are left out while unset,
    as they are left out of the variant file: an sps-v1 record gives the same
    data, and so the same cache keys, as before those keys existed. Any other
    ``None`` stays, as ``dataclasses.asdict`` gives it.
    """
    data = dataclasses.asdict(record)
    _drop_absent(record, data)
    return data


def semantics_of(fgsm: FGSMParams) -> str:
    """The semantics a parameter set implements: white-box FGSM makes it "sps-v1-wb2"."""
    return SEMANTICS_WHITE_BOX if fgsm.white_box else SEMANTICS
