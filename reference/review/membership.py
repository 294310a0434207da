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
- **Thresholds per label, either direction.** The attacker knows each row's
  label; a memorising model may put its members farther from the boundary in
  one class and nearer in the other, so each label gets its own threshold and
  direction (:func:`best_rule`).
- **No selection bias.** Picking the best attack and threshold on the rows
  they are scored on would find "leakage" in any model. The rows are split in
  :data:`FOLDS` folds (members and non-members each); the attack and rule
  chosen on the other folds decide each fold's rows (cross-fitting). For a
  model that leaks nothing the advantage is then zero on average, and each
  row's decision comes from a rule that never saw it, which is what the
  bootstrap resamples.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]

NO_BOUNDARY = 1e6
"""Distance given to a row whose prediction no reference row contradicts (training stds):
farther than any boundary found, with the sign of its correctness."""


FOLDS = 10
"""Cross-fitting folds: each fold's rows are decided by the rule chosen on the other nine."""


@dataclasses.dataclass(frozen=True, eq=False)
class AttackScores:
    """One attack's scores on some of the evaluation rows, with the rows' labels.

    ``member_positions`` and ``nonmember_positions`` index the evaluation's
    member and non-member lists (position ``i``), shapes (m,) and (n,).
    """

    name: str
    member_positions: IntArray
    member_scores: FloatArray
    member_labels: IntArray
    nonmember_positions: IntArray
    nonmember_scores: FloatArray
    nonmember_labels: IntArray


@dataclasses.dataclass(frozen=True)
class LabelRule:
    """For rows of one label: "member" where ``direction * score >= threshold``."""

    label: int
    direction: int
    """+1: a higher score means member; -1: a lower one."""
    threshold: float


@dataclasses.dataclass(frozen=True)
class Rule:
    """The attack and per-label thresholds the other folds chose for one fold's rows."""

    fold: int
    attack: str | None
    """None: no attack beat chance on the choosing folds; every row is called a non-member."""
    labels: tuple[LabelRule, ...]
    """No rule for a label: its rows are called non-members."""
    choosing_advantage: float
    n_members: int
    n_nonmembers: int
    tpr: float
    fpr: float

    def flags(self, scores: FloatArray, labels: IntArray) -> BoolArray:
        import numpy as np

        flagged = np.zeros(len(scores), dtype=bool)
        for rule in self.labels:
            mine = labels == rule.label
            flagged[mine] = rule.direction * scores[mine] >= rule.threshold
        return flagged


@dataclasses.dataclass(frozen=True, eq=False)
class Decisions:
    """Every decided row's call ("member" or not) and the advantage they add up to."""

    member_positions: IntArray
    member_flagged: BoolArray
    nonmember_positions: IntArray
    nonmember_flagged: BoolArray
    rules: tuple[Rule, ...]

    @property
    def tpr(self) -> float:
        return float(self.member_flagged.mean()) if len(self.member_flagged) else 0.0

    @property
    def fpr(self) -> float:
        return float(self.nonmember_flagged.mean()) if len(self.nonmember_flagged) else 0.0

    @property
    def advantage(self) -> float:
        """``TPR - FPR`` over every decided row; 0 is chance."""
        return self.tpr - self.fpr

    def summary(self) -> dict[str, Any]:
        from collections import Counter

        chosen = Counter(rule.attack or "none" for rule in self.rules)
        return {
            "advantage": self.advantage,
            "tpr": self.tpr,
            "fpr": self.fpr,
            "balanced_accuracy": 0.5 * (1.0 + self.advantage),
            "n_members": int(len(self.member_flagged)),
            "n_nonmembers": int(len(self.nonmember_flagged)),
            "attacks_chosen": dict(sorted(chosen.items())),
            "folds": len(self.rules),
            "rules": [dataclasses.asdict(rule) for rule in self.rules],
            "method": f"{len(self.rules)}-fold cross-fitting: the attack and per-label "
            "thresholds with the largest advantage on the other folds decide each fold's rows",
        }


def best_threshold(
    member_scores: Any,
    nonmember_scores: Any,
    *,
    member_weight: float = 1.0,
    nonmember_weight: float = 1.0,
) -> tuple[float, float]:
    """(threshold, gain) of the threshold with the largest ``w_m TPR - w_n FPR``.

    "Member" at ``score >= threshold``; the threshold is placed halfway between
    the lowest score it admits and the next lower score, so rows tied with it
    fall on the same side on new rows too. A gain of 0 (no threshold beats
    calling nobody a member) comes back with an infinite threshold.
    """
    import numpy as np

    members = np.sort(np.asarray(member_scores, dtype=np.float64))
    nonmembers = np.sort(np.asarray(nonmember_scores, dtype=np.float64))
    if not len(members):
        return float("inf"), 0.0
    values = np.unique(np.concatenate([members, nonmembers]))[::-1]  # high to low
    tpr = (len(members) - np.searchsorted(members, values, side="left")) / len(members)
    above = len(nonmembers) - np.searchsorted(nonmembers, values, side="left")
    fpr = above / len(nonmembers) if len(nonmembers) else np.zeros(len(values))
    gain = member_weight * tpr - nonmember_weight * fpr
    best = int(np.argmax(gain))
    if gain[best] <= 0.0:
        return float("inf"), 0.0
    if best + 1 < len(values):
        # Halves first: the sum of two scores near the float maximum would overflow.
        threshold = values[best] / 2.0 + values[best + 1] / 2.0
    else:
        threshold = values[best]  # every row seen is above it; new rows below it are not
    return float(threshold), float(gain[best])


def best_rule(
    members: FloatArray, member_labels: IntArray, nonmembers: FloatArray, nonmember_labels: IntArray
) -> tuple[tuple[LabelRule, ...], float]:
    """Per-label thresholds and directions with the largest advantage ``TPR - FPR``.

    The advantage is a sum over labels, ``sum_y (m_y/m TPR_y - n_y/n FPR_y)``, so each
    label's rule is chosen on its own. Both directions are tried: a memorising
    model can put its members farther from the boundary in one class and nearer in
    the other (a 1-NN model's rare positives are islands, its common negatives a sea).
    """
    import numpy as np

    rules, total = [], 0.0
    if not len(members) or not len(nonmembers):
        return (), 0.0
    for label in (0, 1):
        m, n = members[member_labels == label], nonmembers[nonmember_labels == label]
        weights = {
            "member_weight": len(m) / len(members),
            "nonmember_weight": len(n) / len(nonmembers),
        }
        best: tuple[float, int, float] = (0.0, 1, float("inf"))
        for direction in (1, -1):
            threshold, gain = best_threshold(direction * m, direction * n, **weights)
            if gain > best[0]:
                best = (gain, direction, threshold)
        if best[0] > 0.0 and np.isfinite(best[0]):
            rules.append(LabelRule(label, best[1], best[2]))
            total += best[0]
    return tuple(rules), total


def cross_fitted_decisions(
    attacks: Sequence[AttackScores], n_members: int, n_nonmembers: int, *, folds: int = FOLDS
) -> Decisions:
    """Each fold's rows decided by the best attack and per-label rule of the other folds.

    Position ``i`` of the members (and of the non-members) is in fold ``i % folds``;
    the evaluation's rows are already in a seeded random order, so the folds are
    random and every prefix an attack scored is split evenly.
    """
    import numpy as np

    m_positions: list[IntArray] = []
    m_flags: list[BoolArray] = []
    n_positions: list[IntArray] = []
    n_flags: list[BoolArray] = []
    rules = []
    for fold in range(min(folds, max(n_members, n_nonmembers))):
        best: tuple[float, AttackScores | None, tuple[LabelRule, ...]] = (0.0, None, ())
        for attack in attacks:
            choose_m = attack.member_positions % folds != fold
            choose_n = attack.nonmember_positions % folds != fold
            chosen_rules, gain = best_rule(
                attack.member_scores[choose_m],
                attack.member_labels[choose_m],
                attack.nonmember_scores[choose_n],
                attack.nonmember_labels[choose_n],
            )
            if gain > best[0]:
                best = (gain, attack, chosen_rules)
        gain, chosen, label_rules = best
        rule = Rule(fold, None if chosen is None else chosen.name, label_rules, gain, 0, 0, 0, 0)
        if chosen is None:
            members = np.arange(fold, n_members, folds)
            nonmembers = np.arange(fold, n_nonmembers, folds)
            flagged_m = np.zeros(len(members), dtype=bool)
            flagged_n = np.zeros(len(nonmembers), dtype=bool)
        else:
            in_m = chosen.member_positions % folds == fold
            in_n = chosen.nonmember_positions % folds == fold
            members, nonmembers = chosen.member_positions[in_m], chosen.nonmember_positions[in_n]
            flagged_m = rule.flags(chosen.member_scores[in_m], chosen.member_labels[in_m])
            flagged_n = rule.flags(chosen.nonmember_scores[in_n], chosen.nonmember_labels[in_n])
        m_positions.append(members)
        m_flags.append(flagged_m)
        n_positions.append(nonmembers)
        n_flags.append(flagged_n)
        rules.append(
            dataclasses.replace(
                rule,
                n_members=len(members),
                n_nonmembers=len(nonmembers),
                tpr=float(flagged_m.mean()) if len(flagged_m) else 0.0,
                fpr=float(flagged_n.mean()) if len(flagged_n) else 0.0,
            )
        )
    return Decisions(
        member_positions=np.concatenate(m_positions),
        member_flagged=np.concatenate(m_flags),
        nonmember_positions=np.concatenate(n_positions),
        nonmember_flagged=np.concatenate(n_flags),
        rules=tuple(rules),
    )


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


def _record(attack: Any, params: Any, seed: int) -> dict[str, Any]:
    import dataclasses as dc

    from . import uncertainty
    from .lowfpr import attack_record

    record = attack_record(attack, params.low_fprs)
    interval = uncertainty.auc_interval(
        attack.member_scores, attack.nonmember_scores, n_boot=params.n_boot, seed=seed
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
            **_record(privacy.attack_result("shadow", s_m, s_n), params, seed + 10),
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
    report["loss_threshold"] = {**_record(loss, params, seed + 12), "losses": source}

    kb, kn = min(k_m, params.boundary_rows), min(k_n, params.boundary_rows)
    distance, distance_rows = None, np.zeros(0, dtype=np.int64)
    if kb:
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
            **_record(boundary, params, seed + 14),
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
        kl = min(params.lira_rows // 2, k_m, k_n)
        progress(f"LiRA: fitting {params.lira_shadows} shadow models on {2 * kl} candidate rows")
        result = lira.lira(
            model, fit_shadow, X_m[:kl], y_m[:kl], X_n[:kl], y_n[:kl],
            n_shadows=params.lira_shadows, seed=seed + 4, fprs=params.low_fprs,
        )  # fmt: skip
        report["lira"] = result.as_dict(params.low_fprs)
        positions = np.arange(kl)
        for side in (result.online, result.offline):
            found.append(
                AttackScores(side.name, positions, side.member_scores, y_m[:kl], positions,
                             side.nonmember_scores, y_n[:kl])
            )  # fmt: skip

    decisions = cross_fitted_decisions(found, k_m, k_n)
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
