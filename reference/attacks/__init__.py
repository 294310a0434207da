"""The graded semantics: the four attacks of SPEC §3 and §7, the SPS and the audit.

The face re-exports the attack kernels; parameter records are :mod:`.params`,
the SPS and verdict :mod:`.sps`, one whole audit :mod:`.audit`.
"""

from .boundary import BoundaryResult, boundary_attack_resistance, walk_candidates
from .budget import Budget, FeatureScale, fgsm_budget, training_scale
from .classifier import Classifier, draw_rows, positive_proba
from .ece import aligned_ece, calibration, calibration_curve_uniform, calibration_score, task_ece
from .fgsm import (
    FGSMResult,
    fgsm_perturb,
    fgsm_robustness,
    fgsm_sample,
    fgsm_score,
    fit_surrogate_sign,
)
from .membership import (
    MembershipResult,
    fit_membership_attack,
    membership_eval_size,
    membership_inference_resistance,
    membership_score,
)

__all__ = [
    "BoundaryResult",
    "Budget",
    "Classifier",
    "FGSMResult",
    "FeatureScale",
    "MembershipResult",
    "aligned_ece",
    "boundary_attack_resistance",
    "calibration",
    "calibration_curve_uniform",
    "calibration_score",
    "draw_rows",
    "fgsm_budget",
    "fgsm_perturb",
    "fgsm_robustness",
    "fgsm_sample",
    "fgsm_score",
    "fit_membership_attack",
    "fit_surrogate_sign",
    "membership_eval_size",
    "membership_inference_resistance",
    "membership_score",
    "positive_proba",
    "task_ece",
    "training_scale",
    "walk_candidates",
]
