"""The own-data audit: the four components on a model owner's data, with what a reviewer needs.

The graded variants keep the task's exact semantics (``sps-v1``: raw-unit ε,
the file's first rows as members). A hospital team auditing its own model gets
the same four components computed the way its data deserves, and everything a
reviewer asks next to them:

- **Row order does not matter.** Each split is first put in a canonical order
  (rows sorted by a hash of their content, :func:`~.sampling.canonical_order`),
  and every sample after that is a seeded permutation of it: sorting the
  training CSV by label, or shuffling it, gives the same audit.
- **FGSM in training-std units**: ``epsilon`` standard deviations per feature
  against each row's label (the surrogate's signs, as in the task), clipped to
  the training range; the AUROC is also traced against ε for a robustness curve.
- **Membership** is the task's shadow-model attack with the pool and the members
  sampled at random, evaluated on as many non-members as the test set has; a
  label-aware loss-threshold attack (Yeom et al. 2018) and, for scikit-learn
  estimators, a few-shadow LiRA (Carlini et al. 2022) give AUC and TPR at low
  false-positive rates.
- **Calibration** is the task's component (its ECE, quirks included) on every
  test row, next to the diagnostics of :mod:`.diagnostics`.
- **The boundary walk** steps in training-std units (a raw 0.05 step means
  nothing on a feature measured in thousands), and HopSkipJump
  (:mod:`.hopskipjump`) measures the minimal distance that flips a prediction.
- **Uncertainty**: bootstrap intervals of every component and the SPS, and the
  probability that the verdict changes under resampling (:mod:`.uncertainty`).

Only NumPy and scikit-learn are needed; everything runs in batched kernels.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..attacks.params import COMPONENTS, FGSMParams
from .profile import PROFILE, OwnDataParams
from .robustness import StandardizedModel, white_box_curves
from .sampling import draw_canonical

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..attacks.budget import Budget, FeatureScale
    from ..attacks.fgsm import FGSMResult
    from ..data import Dataset
    from ..models.adapters import AuditedModel
    from .lira import FitShadow
    from .sampling import MembershipSample

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclasses.dataclass(frozen=True, eq=False)
class OwnDataAudit:
    """Everything one own-data audit found; :meth:`report` is the JSON document."""

    params: OwnDataParams
    components: dict[str, float]
    sps: float
    verdict: str
    details: dict[str, Any]
    uncertainty: Any
    diagnostics: Any
    membership: dict[str, Any]
    robustness: dict[str, Any]
    seconds: dict[str, float]

    def report(self) -> dict[str, Any]:
        """The SPEC §4 report of this audit plus its uncertainty, diagnostics and curves."""
        from ..attacks.sps import rounded_report

        report = rounded_report(self.components, self.params.weights, self.params.verdict)
        report.update(
            {
                "profile": PROFILE,
                "uncertainty": self.uncertainty.as_dict(),
                "diagnostics": self.diagnostics.as_dict(),
                "membership": self.membership,
                "robustness": self.robustness,
                "details": self.details,
                "parameters": self.params.summary(),
            }
        )
        return report


class _Clock:
    """Reports each stage before it starts and records the seconds it took."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.seconds: dict[str, float] = {}
        self._last = time.perf_counter()

    def done(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 3)
        self._last = now


@dataclasses.dataclass(frozen=True, eq=False)
class _Rows:
    """The canonical data, its training scale, and the rows every stage queries, drawn up front."""

    data: Dataset
    scale: FeatureScale
    unit: FloatArray
    """Each feature's training std, 1 for a constant feature (the walk's coordinates)."""
    membership: MembershipSample
    fgsm: IntArray
    surrogate: IntArray


def _draw_rows(data: Dataset, params: OwnDataParams) -> _Rows:
    import numpy as np

    from ..attacks.budget import training_scale
    from . import sampling

    data = sampling.canonical(data)
    scale = training_scale(data.X_train)
    seed = params.seed
    return _Rows(
        data=data,
        scale=scale,
        # A constant feature has std 0; in standardized coordinates it keeps unit scale.
        unit=np.where(scale.std > 0, scale.std, 1.0),
        membership=sampling.membership_sample(
            data.X_train,
            data.y_train,
            data.X_test,
            data.y_test,
            seed=seed,
            pool_cap=params.pool_cap,
            nonmember_cap=params.nonmember_cap,
            presorted=True,
        ),
        fgsm=draw_canonical(data.n_test, params.fgsm_rows, seed + 2),
        surrogate=draw_canonical(data.n_train, params.surrogate_rows, seed + 3),
    )


@dataclasses.dataclass(frozen=True, eq=False)
class _Answers:
    """The model's answers to every row the audit asks about, from one batched query."""

    proba: FloatArray
    """(n_test + n_members + n_eps * n_fgsm, 2): test rows, members, FGSM copies."""
    p_test: FloatArray
    member_proba: FloatArray
    p_adversarial: FloatArray
    """(n_eps, n_fgsm): the FGSM copies' probabilities, one row per budget."""
    pred_test: IntArray


def _query(model: AuditedModel, rows: _Rows, adversarial: list[FloatArray]) -> _Answers:
    import numpy as np

    data, members = rows.data, rows.membership.members
    n_test = data.n_test
    proba = model.predict_proba(np.concatenate([data.X_test, data.X_train[members], *adversarial]))
    return _Answers(
        proba=proba,
        p_test=proba[:n_test, 1],
        member_proba=proba[n_test : n_test + len(members)],
        p_adversarial=proba[n_test + len(members) :, 1].reshape(len(adversarial), len(rows.fgsm)),
        pred_test=model.predict(data.X_test),
    )


@dataclasses.dataclass(frozen=True, eq=False)
class _FGSM:
    params: FGSMParams
    result: FGSMResult
    curve: list[dict[str, Any]]
    white_box: dict[str, Any] | None


def _fgsm(
    model: AuditedModel,
    rows: _Rows,
    answers: _Answers,
    epsilons: tuple[float, ...],
    budgets: list[Budget],
    params: OwnDataParams,
    clock: _Clock,
) -> _FGSM:
    """The FGSM component at ``params.epsilon``, the surrogate's robustness curve and,
    for a differentiable model, the white-box curves."""
    from ..attacks.fgsm import fgsm_score

    fgsm_params = FGSMParams(
        epsilon=params.epsilon,
        n_samples=len(rows.fgsm),
        seed=params.seed + 2,
        single_class_score=0.5,
        surrogate=params.surrogate,
    )
    y_fgsm, p_clean = rows.data.y_test[rows.fgsm], answers.p_test[rows.fgsm]
    curve = []
    for e, p_adv in zip(epsilons, answers.p_adversarial, strict=True):
        point = fgsm_score(y_fgsm, p_clean, p_adv, params=fgsm_params)
        curve.append({"epsilon": e, "auroc": point.auroc_adversarial, "score": point.score})
    result = fgsm_score(y_fgsm, p_clean, answers.p_adversarial[0], params=fgsm_params)
    white_box = None
    if callable(getattr(model, "loss_gradient", None)):
        clock.progress("white-box FGSM and PGD through the model's own gradient")
        X = rows.data.X_test[rows.fgsm]
        white_box = white_box_curves(model, X, y_fgsm, epsilons, budgets, params)
    return _FGSM(fgsm_params, result, curve, white_box)


@dataclasses.dataclass(frozen=True, eq=False)
class _Membership:
    score: float
    accuracy: float
    member_right: Any
    nonmember_right: Any
    report: dict[str, Any]


def _membership(
    rows: _Rows, answers: _Answers, params: OwnDataParams, clock: _Clock
) -> _Membership:
    """The task's shadow-model attack on sampled rows, and the loss-threshold attack."""
    import numpy as np

    from ..attacks import privacy
    from ..attacks.membership import fit_membership_attack
    from . import replicates, uncertainty

    data, sample = rows.data, rows.membership
    members, nonmembers = sample.members, sample.nonmembers
    clock.progress(f"fitting the shadow-model attack on a pool of {len(sample.pool)} rows")
    shadow_params = dataclasses.replace(params.shadow, pool_cap=params.pool_cap)
    shadow_attack = fit_membership_attack(
        data.X_train[sample.pool], data.y_train[sample.pool], shadow_params
    )
    member_right, nonmember_right = replicates.membership_guesses(
        shadow_attack,
        answers.member_proba,
        answers.proba[nonmembers],
        threshold=shadow_params.threshold,
    )
    n_queried = len(member_right) + len(nonmember_right)
    accuracy = float((member_right.sum() + nonmember_right.sum()) / n_queried)
    loss_attack = privacy.loss_threshold_attack(
        data.y_train[members],
        answers.member_proba[:, 1],
        data.y_test[nonmembers],
        answers.p_test[nonmembers],
    )
    report: dict[str, Any] = {
        "shadow": {
            "accuracy": accuracy,
            "n_members": len(member_right),
            "n_nonmembers": len(nonmember_right),
            "n_pool": len(sample.pool),
        },
        "loss_threshold": {
            **loss_attack.as_dict(),
            "auc_interval": dataclasses.asdict(
                uncertainty.auc_interval(
                    loss_attack.member_scores,
                    loss_attack.nonmember_scores,
                    n_boot=params.n_boot,
                    seed=params.seed + 10,
                )
            ),
        },
    }
    return _Membership(
        score=float(np.clip(1.0 - 2.0 * (accuracy - 0.5), 0.0, 1.0)),
        accuracy=accuracy,
        member_right=member_right,
        nonmember_right=nonmember_right,
        report=report,
    )


def _lira(
    model: AuditedModel,
    fit_shadow: FitShadow | None,
    rows: _Rows,
    params: OwnDataParams,
    clock: _Clock,
) -> dict[str, Any]:
    """Few-shadow LiRA where a shadow fitter is known, else why it was skipped."""
    from . import lira

    if fit_shadow is None or not params.lira_shadows:
        why = "LiRA disabled" if not params.lira_shadows else "no shadow fitter for this model kind"
        return {"skipped": why}
    data, members, nonmembers = rows.data, rows.membership.members, rows.membership.nonmembers
    k = min(params.lira_rows // 2, len(members), len(nonmembers))
    clock.progress(f"LiRA: fitting {params.lira_shadows} shadow models on {2 * k} candidate rows")
    result = lira.lira(
        model,
        fit_shadow,
        data.X_train[members[:k]],
        data.y_train[members[:k]],
        data.X_test[nonmembers[:k]],
        data.y_test[nonmembers[:k]],
        n_shadows=params.lira_shadows,
        seed=params.seed + 4,
    )
    return result.as_dict()


def audit_own_data(
    model: AuditedModel,
    data: Dataset,
    params: OwnDataParams | None = None,
    *,
    fit_shadow: FitShadow | None = None,
    progress: Progress = _quiet,
) -> OwnDataAudit:
    """Audit ``model`` on a model owner's ``data`` with the own-data profile.

    Parameters
    ----------
    model
        An adapted model (:func:`~..models.adapters.adapt_model`): the positive class's
        probability in column 1 of ``predict_proba``, 0/1 from ``predict``.
    data
        The owner's training and test rows, in any order.
    fit_shadow
        Fits a model of the target's recipe on given rows, for LiRA
        (:func:`~.lira.sklearn_shadow_fitter`); None skips LiRA with a note.
    progress
        Called with a short message before each stage.

    Returns
    -------
    OwnDataAudit
        Components (higher is more robust), SPS, verdict, bootstrap intervals,
        diagnostics, membership attacks and robustness curves.
    """
    import numpy as np

    from ..attacks.boundary import boundary_attack_resistance
    from ..attacks.budget import Budget
    from ..attacks.ece import calibration as task_calibration
    from ..attacks.fgsm import fgsm_perturb, fit_surrogate_sign
    from ..attacks.sps import SPS_DECIMALS, security_posture_score
    from ..attacks.sps import verdict as verdict_of
    from . import diagnostics, hopskipjump, replicates, uncertainty

    params = params or OwnDataParams()
    clock = _Clock(progress)
    seed = params.seed

    progress(f"ordering {data.n_train + data.n_test} rows by content")
    rows = _draw_rows(data, params)
    data = rows.data
    X_train, y_train, X_test, y_test = data.X_train, data.y_train, data.X_test, data.y_test
    n_test = data.n_test
    clock.done("order")

    progress(f"fitting the FGSM surrogate on {len(rows.surrogate)} training rows")
    sign = fit_surrogate_sign(params.surrogate, X_train[rows.surrogate], y_train[rows.surrogate])
    epsilons = tuple(dict.fromkeys((params.epsilon, *params.curve_epsilons)))
    budgets = [Budget.of(e, rows.scale, std_units=True, clip=params.clip) for e in epsilons]
    adversarial = [
        b.clip(fgsm_perturb(X_test[rows.fgsm], y_test[rows.fgsm], b.step, sign)) for b in budgets
    ]
    clock.done("surrogate")

    n_queried = n_test + len(rows.membership.members) + len(rows.fgsm) * len(epsilons)
    progress(f"querying the model on {n_queried} rows")
    answers = _query(model, rows, adversarial)
    clock.done("predict")

    fgsm = _fgsm(model, rows, answers, epsilons, budgets, params, clock)
    clock.done("fgsm")

    membership = _membership(rows, answers, params, clock)
    membership_report = dict(membership.report)
    clock.done("membership")
    membership_report["lira"] = _lira(model, fit_shadow, rows, params, clock)
    clock.done("lira")

    progress("calibration and diagnostics")
    calibration = task_calibration(y_test, answers.p_test, params=params.calibration)
    diag = diagnostics.diagnose(y_test, answers.p_test, task_bins=params.calibration.n_bins)
    clock.done("calibration")

    progress(f"boundary walk ({params.walk_rows} rows x {params.walk.max_steps} steps)")
    walk_params = dataclasses.replace(params.walk, n_samples=params.walk_rows, seed=seed + 5)
    walk = boundary_attack_resistance(
        StandardizedModel(model, rows.unit),
        X_test / rows.unit,
        test_predictions=answers.pred_test,
        params=walk_params,
    )
    walk_rows = np.random.RandomState(walk_params.seed).choice(
        n_test, min(walk_params.n_samples, n_test), replace=False
    )
    clock.done("walk")
    distance_rows = draw_canonical(n_test, params.distance_rows, seed + 6)
    reference_rows = draw_canonical(n_test, 5000, seed + 7)
    progress(f"HopSkipJump distances of {len(distance_rows)} rows")
    distances = hopskipjump.minimal_perturbation_distance(
        model,
        X_test[distance_rows],
        std=rows.scale.std,
        reference_rows=X_test[reference_rows],
        reference_predictions=answers.pred_test[reference_rows],
        low=rows.scale.low,
        high=rows.scale.high,
        seed=seed + 8,
    )
    clock.done("distance")

    scores = (fgsm.result.score, membership.score, calibration.score, walk.score)
    components = dict(zip(COMPONENTS, scores, strict=True))
    sps = security_posture_score(components, params.weights)

    progress(f"bootstrap ({params.n_boot} replicates)")
    per_row = replicates.ComponentRows(
        n_test=n_test,
        fgsm=replicates.FGSMRows(
            rows.fgsm,
            y_test[rows.fgsm],
            answers.p_test[rows.fgsm],
            answers.p_adversarial[0],
            fgsm.params.single_class_score,
        ),
        membership=replicates.MembershipRows(
            membership.member_right, rows.membership.nonmembers, membership.nonmember_right
        ),
        calibration=replicates.CalibrationRows(
            np.arange(n_test),
            y_test,
            answers.p_test,
            params.calibration.n_bins,
            params.calibration.ece_scale,
        ),
        walk=replicates.WalkRows(walk_rows, np.asarray(walk.steps), walk_params.max_steps),
    )
    boot = uncertainty.bootstrap(
        per_row,
        weights=params.weights,
        thresholds=params.verdict,
        n_boot=params.n_boot,
        seed=seed + 9,
    )
    clock.done("bootstrap")

    robustness = {
        "fgsm_curve": fgsm.curve,
        "white_box": fgsm.white_box,
        "distance": distances.summary(),
        "walk_steps": list(walk.steps),
    }
    details: dict[str, Any] = {
        "auroc_clean": fgsm.result.auroc_clean,
        "auroc_adversarial": fgsm.result.auroc_adversarial,
        "fgsm_single_class": fgsm.result.single_class,
        "mi_accuracy": membership.accuracy,
        "ece": calibration.ece,
        "mean_steps_to_flip": walk.mean_steps,
        "sps_unrounded": sps,
        "components_unrounded": dict(components),
        "n": {
            "train": data.n_train,
            "test": n_test,
            "fgsm_rows": len(rows.fgsm),
            "mi_members": len(rows.membership.members),
            "mi_nonmembers": len(rows.membership.nonmembers),
            "mi_pool": len(rows.membership.pool),
            "walk_rows": len(walk_rows),
            "distance_rows": len(distance_rows),
        },
        "data": data.summary(),
    }
    return OwnDataAudit(
        params=params,
        components=components,
        sps=sps,
        verdict=verdict_of(round(sps, SPS_DECIMALS), params.verdict),
        details=details,
        uncertainty=boot,
        diagnostics=diag,
        membership=membership_report,
        robustness=robustness,
        seconds=clock.seconds,
    )
