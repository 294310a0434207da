"""The membership advantage without selection bias: attacks and thresholds chosen on other folds.

Picking the best attack and threshold on the rows they are scored on finds
"leakage" in any model (on noise, the in-sample best advantage averages above
0.2). Here the members and non-members are split into :data:`FOLDS` folds, and
the attack and per-label rule with the largest advantage ``TPR - FPR`` on the
other folds decide each fold's rows (cross-fitting): for a model that leaks
nothing the advantage is zero on average, and each row is decided by a rule
that never saw it, which is what the bootstrap resamples.

Each label gets its own threshold and direction (:func:`best_rule`): the
attacker knows the row's label, and a memorising model can put its members
farther from the boundary in one class and nearer in the other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]


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
