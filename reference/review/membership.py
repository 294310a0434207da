"""Membership inference in the own-data profile: the advantage of the strongest attack.

The task's component is ``1 - 2 (accuracy - 0.5)`` of one shadow-model attack
with a fixed threshold. On 100 training and 469 test rows that attack called
every row a member: accuracy 0.176 (the members' share), component 1.0, while
calling every row a non-member would have scored 0.82. Accuracy has a 50%
chance level only when members and non-members are equally many, and a fixed
threshold can be wrong for a model it was never fitted to (issue 18).

Here:

- **The advantage.** The component is ``1 - (TPR - FPR)``, one minus the
  membership advantage of Yeom et al. (2018): 1 when the attacker does no
  better than chance, 0 when it tells every member from every non-member.
  ``(1 + TPR - FPR) / 2`` is the attack's balanced accuracy, so this is the
  task's formula with each group weighed by its own size; members (training
  rows) and non-members (test rows) are drawn at random
  (:func:`~.sampling.membership_sample`), as many as the cap allows.
- **Several attacks, chosen fairly.** A memorising model can fool one attack
  and not another: a 1-nearest-neighbour pipeline answers 0 or 1 on every row,
  so a confidence-based attack sees no difference between a member and a
  correctly predicted non-member. Its training rows, however, sit at the centre
  of their own decision region, while a new patient sits anywhere in it, so
  the distance to the decision boundary (signed: negative when the prediction
  is wrong) separates them: the label-only attack of Choquette-Choo et al.
  (2021), measured with HopSkipJump (:mod:`.hopskipjump`). The candidates are
  the task's shadow-model attack, the loss-threshold attack (Yeom et al. 2018;
  float64 losses from logits for a torch program), that boundary-distance
  attack, and LiRA (Carlini et al. 2022) where its shadows could be refitted.
- **No selection bias, thresholds per label.** The attack and its per-label
  thresholds are chosen on other folds of the rows than those they decide
  (:mod:`.advantage`).
- **Every scored row counts, and the seed barely moves it.** The loss and
  shadow attacks score every member and non-member; HopSkipJump and LiRA score
  the same random share of each group (every row up to ``boundary_rows`` and
  ``lira_rows``). Each row is decided by the best-ranked attack that scored it,
  and the folds are drawn ``membership_repeats`` times (:mod:`.advantage`), so
  the component rests on all the rows scored, not on the winning attack's
  sample, and a different seed moves it less than its interval is wide.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import TYPE_CHECKING, Any

from .advantage import AttackScores, Decisions, covered, cross_fitted_decisions

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]

NO_BOUNDARY = 1e6
"""Distance given to a row whose prediction no reference row contradicts (training stds):
farther than any boundary found, with the sign of its correctness."""


def boundary_scores(distance: FloatArray, found: BoolArray, correct: BoolArray) -> FloatArray:
    """The label-only score: the distance to the boundary, negative where the prediction
    is wrong (a wrongly predicted row is no evidence of membership); shape (n,)."""
    import numpy as np

    reach = np.where(found & np.isfinite(distance), distance, NO_BOUNDARY)
    scores: FloatArray = np.where(correct, reach, -reach)
    return scores


@dataclasses.dataclass(frozen=True, eq=False)
class MembershipOutcome:
    """The membership component, its per-row decisions, and every attack's record."""

    score: float
    """``clip(1 - advantage, 0, 1)``."""
    decisions: Decisions
    member_rows: IntArray
    """Training-row indices of the decided members, in decision order."""
    nonmember_rows: IntArray
    """Test-row indices of the decided non-members, in decision order."""
    report: dict[str, Any]
    distance: Any
    """HopSkipJump's :class:`~.hopskipjump.DistanceResult` of the non-members measured
    (test rows: the robustness figure), or None when none were."""
    distance_rows: IntArray


def _record(attack: Any, params: Any, seed: int, n_rows: int) -> dict[str, Any]:
    import dataclasses as dc

    from . import uncertainty
    from .lowfpr import attack_record

    record = attack_record(attack, params.low_fprs)
    interval = uncertainty.auc_interval(
        attack.member_scores,
        attack.nonmember_scores,
        n_boot=params.n_boot,
        seed=seed,
        name=attack.name,
        n_rows=n_rows,
    )
    record["auc_interval"] = dc.asdict(interval)
    return record


def run_membership(
    model: Any,
    data: Any,
    *,
    view: Any,
    sample: Any,
    member_proba: FloatArray,
    nonmember_proba: FloatArray,
    reference_rows: IntArray,
    reference_predictions: IntArray,
    params: Any,
    fit_shadow: Any,
    lira_skipped: str | None,
    progress: Any,
) -> MembershipOutcome:
    """Every membership attack of the own-data profile, and the component they give.

    Parameters
    ----------
    data
        The canonical :class:`~..data.Dataset`; ``sample`` its
        :class:`~.sampling.MembershipSample` (equal groups, in draw order).
    member_proba, nonmember_proba
        The model's ``predict_proba`` rows on the members and non-members.
    reference_rows, reference_predictions
        Test rows and the model's predictions on them, where HopSkipJump starts.
    fit_shadow
        LiRA's shadow fitter, or None with ``lira_skipped`` saying why.
    """
    import numpy as np

    from ..attacks import privacy
    from ..attacks.membership import fit_membership_attack
    from . import hopskipjump, lira

    members, nonmembers = sample.members, sample.nonmembers
    k_m, k_n = len(members), len(nonmembers)
    y_m, y_n = data.y_train[members], data.y_test[nonmembers]
    X_m, X_n = data.X_train[members], data.X_test[nonmembers]
    all_m, all_n = np.arange(k_m), np.arange(k_n)
    found: list[AttackScores] = []
    report: dict[str, Any] = {}
    seed = params.seed

    progress(f"fitting the shadow-model attack on a pool of {len(sample.pool)} rows")
    shadow_params = dataclasses.replace(params.shadow, pool_cap=params.pool_cap)
    try:
        with warnings.catch_warnings():
            # Forests cast rows to float32; a value beyond its range is refused below.
            warnings.simplefilter("ignore", RuntimeWarning)
            shadow = fit_membership_attack(
                data.X_train[sample.pool], data.y_train[sample.pool], shadow_params
            )
        s_m = np.asarray(shadow.predict_proba(member_proba)[:, 1], dtype=np.float64)
        s_n = np.asarray(shadow.predict_proba(nonmember_proba)[:, 1], dtype=np.float64)
    except ValueError as exc:
        # On a tiny pool a shadow model can see one class only and answer one column,
        # which the attack cannot be trained on; float32 forests refuse values near 1e300.
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        report["shadow"] = {
            "skipped": f"the shadow models cannot be fitted on these {len(sample.pool)} "
            f"training rows ({first})"
        }
    else:
        found.append(AttackScores("shadow", all_m, s_m, y_m, all_n, s_n, y_n))
        threshold = shadow_params.threshold
        report["shadow"] = {
            **_record(privacy.attack_result("shadow", s_m, s_n), params, seed + 10, data.n_test),
            "n_pool": len(sample.pool),
            # The task's own rule (threshold 0.5), as a balanced accuracy, for comparison.
            "task_rule_balanced_accuracy": float(
                0.5 * (np.mean(s_m >= threshold) + np.mean(s_n < threshold))
            ),
        }

    if callable(getattr(model, "row_losses", None)):
        # A torch program: float64 losses from its logits, which never tie at 0
        # the way float32 probabilities of saturated rows do.
        losses_m = np.asarray(model.row_losses(X_m, y_m), dtype=np.float64)
        losses_n = np.asarray(model.row_losses(X_n, y_n), dtype=np.float64)
        loss = privacy.attack_result("loss_threshold", -losses_m, -losses_n)
        source = "float64 cross-entropy from the model's logits"
    else:
        loss = privacy.loss_threshold_attack(y_m, member_proba[:, 1], y_n, nonmember_proba[:, 1])
        source = "cross-entropy from the model's probabilities (clipped to [1e-12, 1 - 1e-12])"
    found.append(
        AttackScores("loss_threshold", all_m, loss.member_scores, y_m, all_n,
                     loss.nonmember_scores, y_n)
    )  # fmt: skip
    report["loss_threshold"] = {**_record(loss, params, seed + 12, data.n_test), "losses": source}

    # The same share of the members and of the non-members (see advantage.covered).
    kb, kn = covered(k_m, k_n, params.boundary_rows)
    distance, distance_rows = None, np.zeros(0, dtype=np.int64)
    if kb or kn:
        progress(f"HopSkipJump distances of {kb} members and {kn} non-members")
        rows = np.concatenate([X_m[:kb], X_n[:kn]])
        truth = np.concatenate([y_m[:kb], y_n[:kn]])
        measured = hopskipjump.minimal_perturbation_distance(
            model,
            rows,
            std=view.scale.std,
            reference_rows=data.X_test[reference_rows],
            reference_predictions=reference_predictions,
            low=view.scale.low,
            high=view.scale.high,
            n_iter=params.hsj_iterations,
            seed=seed + 8,
            movable=None if view.all_movable else view.movable(rows),
        )
        correct = np.asarray(model.predict(rows)) == truth
        scores = boundary_scores(measured.distance, measured.found, correct)
        found.append(
            AttackScores("boundary_distance", np.arange(kb), scores[:kb], y_m[:kb],
                         np.arange(kn), scores[kb:], y_n[:kn])
        )  # fmt: skip
        boundary = privacy.attack_result("boundary_distance", scores[:kb], scores[kb:])
        report["boundary_distance"] = {
            **_record(boundary, params, seed + 14, data.n_test),
            "score": "distance to the decision boundary in training stds (HopSkipJump), "
            "negative where the model's prediction is wrong",
        }
        distance = dataclasses.replace(
            measured,
            distance=measured.distance[kb:],
            adversarial=measured.adversarial[kb:],
            found=measured.found[kb:],
        )
        distance_rows = nonmembers[:kn]
    else:
        report["boundary_distance"] = {"skipped": "boundary_rows is 0"}

    if fit_shadow is None or not params.lira_shadows:
        why = "LiRA disabled" if not params.lira_shadows else lira_skipped
        report["lira"] = {"skipped": why or "no shadow fitter for this model kind"}
    else:
        lm, ln = covered(k_m, k_n, params.lira_rows)
        draws = max(1, params.membership_repeats)
        shadows = draws * params.lira_shadows
        progress(f"LiRA: {shadows} shadow models ({draws} draws) on {lm + ln} candidate rows")
        aucs: list[dict[str, float]] = []
        for draw in range(draws):
            # Fresh shadow models for each draw of the folds: the component averages
            # over LiRA's own randomness instead of resting on one set of shadows.
            result = lira.lira(
                model, fit_shadow, X_m[:lm], y_m[:lm], X_n[:ln], y_n[:ln],
                n_shadows=params.lira_shadows, seed=seed + 4 + 1000 * draw,
                fprs=params.low_fprs,
            )  # fmt: skip
            if not draw:
                report["lira"] = result.as_dict(params.low_fprs)
            aucs.append({"online": result.online.auc, "offline": result.offline.auc})
            for side in (result.online, result.offline):
                found.append(
                    AttackScores(side.name, np.arange(lm), side.member_scores, y_m[:lm],
                                 np.arange(ln), side.nonmember_scores, y_n[:ln], repeat=draw)
                )  # fmt: skip
        report["lira"]["draws"] = draws
        report["lira"]["draw_aucs"] = aucs
        report["lira"]["note"] = (
            "online and offline records are the first draw's shadow models; each draw of the "
            "cross-fitting's folds uses its own draw"
        )

    decisions = cross_fitted_decisions(
        found, k_m, k_n, repeats=params.membership_repeats, seed=seed + 15
    )
    report["component"] = decisions.summary()
    return MembershipOutcome(
        score=min(1.0, max(0.0, 1.0 - decisions.advantage)),
        decisions=decisions,
        member_rows=members[decisions.member_positions],
        nonmember_rows=nonmembers[decisions.nonmember_positions],
        report=report,
        distance=distance,
        distance_rows=distance_rows,
    )
