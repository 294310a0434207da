"""One audit: the four attacks on one model, combined into the SPS report."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .boundary import boundary_attack_resistance
from .budget import fgsm_budget
from .ece import calibration as task_calibration
from .fgsm import fgsm_sample, fgsm_score, fit_surrogate_sign
from .membership import fit_membership_attack, membership_eval_size, membership_score
from .params import COMPONENTS, AuditParams, MembershipParams, as_dict, semantics_of
from .sps import rounded_report, security_posture_score

if TYPE_CHECKING:
    from ..data import Dataset
    from .budget import Budget
    from .classifier import Classifier
    from .whitebox import Differentiable

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class AuditResult:
    """Unrounded components, diagnostics and the model's test probabilities."""

    components: dict[str, float]
    details: dict[str, Any]
    test_probabilities: tuple[float, ...]
    params: AuditParams
    seconds: dict[str, float] = dataclasses.field(default_factory=dict)
    """Wall time per stage; kept out of the report so references are reproducible."""

    @property
    def sps(self) -> float:
        return security_posture_score(self.components, self.params.weights)

    def report(self) -> dict[str, Any]:
        """The submission format of SPEC §4 plus ``details``."""
        report = rounded_report(self.components, self.params.weights, self.params.verdict)
        report["details"] = self.details
        return report


_ATTACKS: dict[tuple[str, MembershipParams], Any] = {}


def membership_attack_for(data: Dataset, params: MembershipParams) -> Any:
    """The fitted shadow-model attack for these training rows, fitted once per process.

    It does not depend on the audited model, so the three variants of a dataset
    share it.
    """
    key = (data.sha256, params)
    if key not in _ATTACKS:
        if len(_ATTACKS) >= 8:  # a handful of datasets per process at most
            _ATTACKS.pop(next(iter(_ATTACKS)))
        _ATTACKS[key] = fit_membership_attack(data.X_train, data.y_train, params)
    return _ATTACKS[key]


def audit(
    model: Classifier,
    data: Dataset,
    params: AuditParams,
    *,
    artifact_sha256: str | None = None,
    progress: Progress = _quiet,
) -> AuditResult:
    """Run the four attacks of SPEC §3 (or §7) on ``model`` and combine them.

    With ``params.fgsm.gradient = "model"`` ("sps-v1-wb2") FGSM follows the
    model's own logit gradient and ``details`` gains the §7.3 diagnostics
    (zero-gradient fraction, strong PGD, loss attack); the other three
    components are the same batched kernels either way.

    Parameters
    ----------
    model
        A fitted binary classifier with ``predict_proba`` and ``predict``;
        for white-box FGSM also ``logits``, ``logit_gradient`` and ``row_losses``
        (:class:`~..models.torch_adapter.TorchClassifier`).
    data
        Training rows (surrogate, shadow models, members) and test rows.
    params
        The variant's attack parameters, weights and verdict thresholds.
    artifact_sha256
        Recorded in the details, so a report names the exact model it audited.
    progress
        Called with a short message before each stage.
    """
    import numpy as np

    timings: dict[str, float] = {}

    def timed(name: str, message: str, fn: Callable[[], Any]) -> Any:
        progress(message)
        start = time.perf_counter()
        result = fn()
        timings[name] = round(time.perf_counter() - start, 4)
        return result

    budget = fgsm_budget(params.fgsm, data.X_train)
    white_box = None
    if params.fgsm.white_box:
        from . import whitebox

        white_box = timed(
            "gradient",
            "FGSM through the model's own logit gradient",
            lambda: whitebox.fgsm_whitebox_sample(
                _differentiable(model), data.X_test, data.y_test, params=params.fgsm, budget=budget
            ),
        )
        fgsm_idx, X_adv = white_box.idx, white_box.X_adv
    else:
        sign = timed(
            "surrogate",
            "fitting the FGSM surrogate",
            lambda: fit_surrogate_sign(params.fgsm.surrogate, data.X_train, data.y_train),
        )
        fgsm_idx, X_adv = fgsm_sample(
            data.X_test, data.y_test, sign=sign, params=params.fgsm, budget=budget
        )
    n_eval = membership_eval_size(data.n_train, data.n_test, params.membership_inference)

    # Every probability the attacks need comes from one predict_proba call: the
    # test rows (calibration, FGSM clean rows, non-members), the FGSM copies and
    # the member rows. Per-call overhead dominates for forests of 1,000 trees.
    n_test, n_adv = data.n_test, len(X_adv)
    proba = timed(
        "predict_proba",
        f"querying the model on {n_test + n_adv + n_eval} rows",
        lambda: np.asarray(
            model.predict_proba(np.concatenate([data.X_test, X_adv, data.X_train[:n_eval]])),
            dtype=np.float64,
        ),
    )
    prob_test = proba[:n_test, 1]
    pred_test = timed(
        "predict", "predicting test labels", lambda: np.asarray(model.predict(data.X_test))
    )

    fgsm = timed(
        "fgsm",
        "FGSM robustness",
        lambda: fgsm_score(
            data.y_test[fgsm_idx],
            prob_test[fgsm_idx],
            proba[n_test : n_test + n_adv, 1],
            params=params.fgsm,
        ),
    )
    attack = timed(
        "membership_attack",
        "fitting the shadow-model attack",
        lambda: membership_attack_for(data, params.membership_inference),
    )
    membership = timed(
        "membership",
        "membership inference",
        lambda: membership_score(
            attack,
            proba[n_test + n_adv :],
            proba[:n_eval],
            n_pool=min(params.membership_inference.pool_cap, data.n_train),
            params=params.membership_inference,
        ),
    )
    calibration = timed(
        "calibration",
        "calibration",
        lambda: task_calibration(data.y_test, prob_test, params=params.calibration),
    )
    boundary = timed(
        "boundary",
        f"boundary walk ({params.boundary.n_samples} rows x {params.boundary.max_steps} steps)",
        lambda: boundary_attack_resistance(
            model, data.X_test, test_predictions=pred_test, params=params.boundary
        ),
    )
    components = dict(
        zip(
            COMPONENTS,
            (fgsm.score, membership.score, calibration.score, boundary.score),
            strict=True,
        )
    )
    details: dict[str, Any] = {
        "auroc_clean": fgsm.auroc_clean,
        "auroc_adversarial": fgsm.auroc_adversarial,
        "auroc_drop": fgsm.auroc_drop,
        "fgsm_single_class": fgsm.single_class,
        "mi_accuracy": membership.accuracy,
        "ece": calibration.ece,
        "ece_aligned_diagnostic": calibration.ece_aligned,
        "mean_steps_to_flip": boundary.mean_steps,
        "steps_to_flip": list(boundary.steps),
        "sps_unrounded": security_posture_score(components, params.weights),
        "components_unrounded": dict(components),
        "n": {
            "train": data.n_train,
            "test": data.n_test,
            "fgsm_samples": fgsm.n_samples,
            "mi_pool": membership.n_pool,
            "mi_eval": membership.n_eval,
            "calibration_bins_used": calibration.n_bins_used,
            "walk_samples": boundary.n_samples,
            "walk_candidates": boundary.n_candidates,
        },
        "parameters": as_dict(params),
        "semantics": semantics_of(params.fgsm),
        "artifact_sha256": artifact_sha256,
        "data_sha256": data.sha256,
    }
    if white_box is not None:
        details["zero_gradient_fraction"] = white_box.zero_gradient_fraction
        details.update(
            timed(
                "white_box_diagnostics",
                "strong PGD and the loss-threshold membership attack",
                lambda: white_box_diagnostics(_differentiable(model), data, params, budget, n_eval),
            )
        )
    return AuditResult(components, details, tuple(prob_test.tolist()), params, timings)


def _differentiable(model: Classifier) -> Differentiable:
    """``model`` if it gives logits, their input gradients and row losses, else a usage error."""
    if not all(hasattr(model, name) for name in ("logits", "logit_gradient", "row_losses")):
        raise TypeError(
            f"white-box FGSM (fgsm.gradient = 'model') needs a differentiable model such as "
            f"a loaded model.pt2; got {type(model).__name__}"
        )
    return cast("Differentiable", model)


def white_box_diagnostics(
    model: Differentiable, data: Dataset, params: AuditParams, budget: Budget, n_eval: int
) -> dict[str, Any]:
    """SPEC §7.3, not graded: the strong PGD's adversarial AUROC and the loss-threshold attack.

    The strong PGD attacks the FGSM rows; the loss attack queries the same rows
    as the shadow-model component: the first ``n_eval`` training rows (members)
    and test rows (non-members).
    """
    from . import privacy, whitebox

    details: dict[str, Any] = {}
    if params.fgsm.pgd_steps is not None:
        pgd = whitebox.strong_pgd_auroc(
            model, data.X_test, data.y_test, params=params.fgsm, budget=budget
        )
        details["pgd_auroc_adversarial"] = pgd.auroc_adversarial
        details["pgd_steps"] = pgd.steps
        details["pgd_restarts"] = pgd.restarts
    losses = privacy.loss_attack(
        model.row_losses(data.X_train[:n_eval], data.y_train[:n_eval]),
        model.row_losses(data.X_test[:n_eval], data.y_test[:n_eval]),
    )
    details["loss_attack_auc"] = losses.auc
    details["loss_attack_tpr_at_1pct_fpr"] = losses.tpr_at_low_fpr
    return details
