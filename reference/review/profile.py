"""The ``own-data`` profile: every number of an own-data audit, and its defaults."""

from __future__ import annotations

import dataclasses
from typing import Any

from ..attacks.params import (
    BoundaryParams,
    CalibrationParams,
    MembershipParams,
    SurrogateParams,
    VerdictThresholds,
    Weights,
    as_dict,
)
from .findings import Floors

PROFILE = "own-data"
"""The name this profile goes by in reports and on the command line."""


@dataclasses.dataclass(frozen=True)
class OwnDataParams:
    """Every number of an own-data audit; the defaults are the ``own-data`` profile."""

    seed: int = 42
    """Seeds every draw (each stage adds its own offset, so draws are independent)."""
    epsilon: float = 0.1
    """FGSM budget per feature, in training standard deviations."""
    curve_epsilons: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.5, 1.0)
    """Budgets of the robustness curve (adversarial AUROC against ε)."""
    clip: bool = True
    """Clip perturbed rows to each feature's training range."""
    fgsm_rows: int = 2000
    """Test rows attacked (at most the test set)."""
    surrogate_rows: int = 100_000
    """Training rows the FGSM surrogate is fitted on (at most the training set)."""
    surrogate: SurrogateParams = SurrogateParams(
        scaler=True, C=1.0, max_iter=2000, class_weight="balanced", random_state=42
    )
    pool_cap: int = 5000
    """Training rows of the shadow models' pool."""
    membership_rows: int = 20_000
    """Members queried, and as many non-members (at most the smaller split): equal
    groups, so that chance is an advantage of 0. 20,000 non-members allow the TPR at
    0.1% FPR, which needs 10,000 (:mod:`.lowfpr`)."""
    boundary_rows: int = 2000
    """Rows (members plus non-members, the same share of each) whose distance to the
    decision boundary HopSkipJump measures: the label-only membership attack (the
    non-members' distances are also the robustness figure). Every row up to 2,000."""
    hsj_iterations: int = 20
    """HopSkipJump iterations per row."""
    shadow: MembershipParams = MembershipParams(
        pool_cap=5000,
        in_fraction=0.5,
        rounds=4,
        seed=42,
        shadow_n_estimators=50,
        shadow_max_depth=6,
        shadow_class_weight="balanced",
        shadow_seed=42,
        attack_n_estimators=50,
        attack_seed=42,
        eval_cap=1 << 62,
        threshold=0.5,
    )
    lira_shadows: int = 4
    """Shadow models of LiRA (0: skip it)."""
    lira_rows: int = 5000
    """Candidate rows of LiRA (members plus non-members, the same share of each)."""
    membership_repeats: int = 10
    """Draws of the membership cross-fitting's folds (:mod:`.advantage`); a row's call is
    the share of draws that flag it."""
    low_fprs: tuple[float, ...] = (0.01, 0.001)
    """False-positive rates of the membership attacks' TPR (each needs 10/FPR non-members)."""
    walk_rows: int = 200
    walk: BoundaryParams = BoundaryParams(
        n_samples=200, seed=42, step_size=0.05, max_steps=100, min_norm=1e-10
    )
    """The task's walk, stepping ``step_size`` training stds at a time."""
    pgd_steps: int = 50
    """Margin-PGD iterations of a torch program's robustness curve (SPEC §7.3: >= 50)."""
    pgd_restarts: int = 5
    """Margin-PGD restarts, the first from the row, the rest uniform in the box (>= 5)."""
    calibration: CalibrationParams = CalibrationParams(n_bins=10, ece_scale=12.0)
    weights: Weights = Weights(0.35, 0.25, 0.20, 0.20)
    verdict: VerdictThresholds = VerdictThresholds(production=80.0, conditional=65.0)
    floors: Floors = Floors()
    """Each component's floor: below it, a finding next to the verdict (:mod:`.findings`)."""
    n_boot: int = 1000

    def summary(self) -> dict[str, Any]:
        return as_dict(self)
