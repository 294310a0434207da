"""The reference auditor: pure numeric code for the four attacks and the SPS.

Importing this package is cheap. NumPy, scikit-learn and XGBoost are imported by
the functions that need them, so a grading session with a warm reference cache
never pays for scikit-learn.

Modules
-------
params
    Frozen parameter records for every attack, the weights and the verdict.
sps
    The Security Posture Score and its verdict (pure Python).
data
    Datasets: WDBC, CSV files, hashing and CSV export.
recipes
    Deterministic model recipes, the FGSM surrogate and model artifacts.
attacks
    The four attacks, vectorized.
whitebox
    FGSM and PGD through a differentiable model's own gradient (SPEC §7.2, §7.3).
privacy
    The loss-threshold membership attack and TPR at a low FPR (SPEC §7.3).
nn
    Torch MLP recipes, deterministic training, ``model.pt2`` artifacts and their
    adapter (imports torch, and only inside its functions).
audit
    Runs the four attacks on one model and assembles the report.
models
    Adapters: any model kind behind one ``predict_proba`` / ``predict`` interface.
sampling
    Own-data rows drawn independently of file order; FGSM in training-std units.
diagnostics
    AUROC, Brier, calibration slope/intercept, equal-mass and debiased ECE.
lira
    Membership diagnostics: loss-threshold attack and few-shadow LiRA.
hopskipjump
    Decision-based minimal perturbation distance, batched.
uncertainty
    Joint bootstrap intervals of the components, the SPS and the verdict.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .params import FGSMParams

SEMANTICS = "sps-v1"
"""Version of the attack semantics; part of every reference cache key."""

SEMANTICS_WHITE_BOX = "sps-v1-wb"
"""SPEC §7: "sps-v1" with FGSM through the audited model's own gradient."""

ALL_SEMANTICS = (SEMANTICS, SEMANTICS_WHITE_BOX)


def semantics_of(fgsm: FGSMParams) -> str:
    """The semantics a parameter set implements: white-box FGSM makes it "sps-v1-wb"."""
    return SEMANTICS_WHITE_BOX if fgsm.white_box else SEMANTICS
