"""The membership advantage without selection bias: attacks and thresholds chosen on other folds.

Picking the best attack and threshold on the rows they are scored on finds
"leakage" in any model (on noise, the in-sample best advantage averages above
0.2). Here the members and non-members are split into :data:`FOLDS` folds, and
the attacks are ranked by the advantage ``TPR - FPR`` of their best per-label
rule on the other folds (cross-fitting): for a model that leaks nothing the
advantage is zero on average, and each row is decided by a rule that never saw
it, which is what the bootstrap resamples.

**Every scored row counts.** Attacks score different rows: the loss and shadow
attacks every member and non-member, the boundary-distance attack and LiRA a
random share of each group (the same share of both, :func:`covered`). Each row
of a fold is decided by the highest-ranked attack that scored it, so a fold the
200-row boundary attack wins still decides its other rows with the next attack
instead of dropping them (issue 28). Because an attack's rows are the same
random share ``q`` of the members and of the non-members, the result is the
advantage of one attacker: the ranked attack on its share, the next one on the
rest; with every attack scoring every row it is the strongest attack's.

**Folds drawn several times.** Which rows share a fold is random, and on a few
hundred rows a different draw moved the component by more than a third of its
interval (issue 28: 0.824, 0.920, 0.967 at three seeds). The cross-fitting is
repeated over :data:`REPEATS` fold draws and each row's decision is the share
of draws that called it a member: the mean of the repeats' advantages, with the
fold-draw noise averaged down (the remedy of Chernozhukov et al. 2018 for the
randomness of sample splitting). An attack with randomness of its own (LiRA's
shadow models) is drawn afresh for each draw of the folds, so the average takes
in its randomness too, and the spread of the draws' advantages, reported next to
it, is the attack-seed variation that the component's interval takes in
(:func:`~.uncertainty.bootstrap`'s ``seed_sd``).

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
"""Cross-fitting folds: each fold's rows are decided by the rules chosen on the other nine."""

REPEATS = 10
"""Fold draws of the cross-fitting; a row's decision is the share of draws that flag it."""


def covered(n_members: int, n_nonmembers: int, rows: int) -> tuple[int, int]:
    """Members and non-members an attack of ``rows`` rows scores: the same share of each.

    ``q = min(1, rows / (n_members + n_nonmembers))`` of each group (rounded up),
    so the rows an attack scores are a random share of the members *and* of the
    non-members alike, and its TPR and FPR on them describe one population.
    """
    import math

    total = n_members + n_nonmembers
    if rows >= total:
        return n_members, n_nonmembers
    if rows <= 0:
        return 0, 0
    share = rows / total
    return min(n_members, math.ceil(share * n_members)), min(
        n_nonmembers, math.ceil(share * n_nonmembers)
    )


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
    repeat: int | None = None
    """None: a candidate in every draw of the folds; ``r``: only in draw ``r`` (an attack
    with randomness of its own, such as LiRA's shadow models, drawn afresh per draw)."""


@dataclasses.dataclass(frozen=True)
class LabelRule:
    """For rows of one label: "member" where ``direction * score >= threshold``."""

    label: int
    direction: int
    """+1: a higher score means member; -1: a lower one."""
    threshold: float


@dataclasses.dataclass(frozen=True)
class Rule:
    """An attack and the per-label thresholds the other folds chose for some of a fold's rows.

    A fold has one rule per attack that decided some of its rows, in rank order
    (``rank`` 0 is the attack that won the fold), and a rule with ``attack`` None
    for rows no attack that beat chance had scored (called non-members).
    """

    fold: int
    attack: str | None
    """None: no attack that beat chance on the choosing folds scored these rows."""
    labels: tuple[LabelRule, ...]
    """No rule for a label: its rows are called non-members."""
    choosing_advantage: float
    n_members: int
    """Member rows this rule decided in this fold (in this draw of the folds)."""
    n_nonmembers: int
    tpr: float
    fpr: float
    repeat: int = 0
    """Which draw of the folds (:data:`REPEATS`)."""
    rank: int = 0

    def flags(self, scores: FloatArray, labels: IntArray) -> BoolArray:
        import numpy as np

        flagged = np.zeros(len(scores), dtype=bool)
        for rule in self.labels:
            mine = labels == rule.label
            flagged[mine] = rule.direction * scores[mine] >= rule.threshold
        return flagged


@dataclasses.dataclass(frozen=True, eq=False)
class Decisions:
    """Every row's call and the advantage they add up to.

    ``member_flagged`` and ``nonmember_flagged`` are, for each row (in position
    order), the share of the fold draws that called it a member: 0 or 1 with one
    draw; their means are the TPR and the FPR.
    """

    member_positions: IntArray
    member_flagged: FloatArray
    nonmember_positions: IntArray
    nonmember_flagged: FloatArray
    rules: tuple[Rule, ...]
    repeat_advantages: tuple[float, ...] = ()
    """The advantage of each draw of the folds (their mean is :attr:`advantage`)."""

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

    @property
    def repeat_sd(self) -> float:
        """Standard deviation of the draws' advantages (0 with one draw)."""
        import statistics

        spread = self.repeat_advantages
        return statistics.stdev(spread) if len(spread) > 1 else 0.0

    @property
    def seed_sd(self) -> float:
        """Standard error of the mean advantage over the draws: how much another seed of
        the folds and of the attacks' own randomness would move it, ``repeat_sd / sqrt(R)``."""
        import math

        return self.repeat_sd / math.sqrt(max(1, len(self.repeat_advantages)))

    def summary(self) -> dict[str, Any]:
        from collections import Counter

        winners = [rule for rule in self.rules if rule.rank == 0]
        chosen = Counter(rule.attack or "none" for rule in winners)
        repeats = max(1, len(self.repeat_advantages))
        counts: dict[str, list[int]] = {}
        for rule in self.rules:
            rows = counts.setdefault(rule.attack or "none", [0, 0])
            rows[0] += rule.n_members
            rows[1] += rule.n_nonmembers
        # Rows each attack decided, on average over the draws of the folds.
        decided = {
            name: {"members": m / repeats, "nonmembers": n / repeats}
            for name, (m, n) in counts.items()
        }
        spread = self.repeat_advantages
        folds = len({rule.fold for rule in self.rules})
        return {
            "advantage": self.advantage,
            "tpr": self.tpr,
            "fpr": self.fpr,
            "balanced_accuracy": 0.5 * (1.0 + self.advantage),
            "n_members": int(len(self.member_flagged)),
            "n_nonmembers": int(len(self.nonmember_flagged)),
            "attacks_chosen": dict(sorted(chosen.items())),
            "rows_decided_by": dict(sorted(decided.items())),
            "folds": folds,
            "repeats": repeats,
            "repeat_advantages": list(spread),
            "repeat_sd": self.repeat_sd,
            "seed_sd": self.seed_sd,
            "rules": [dataclasses.asdict(rule) for rule in self.rules],
            "method": f"{folds}-fold cross-fitting over {repeats} draws of the folds: the "
            "attacks are ranked by the advantage of their best per-label thresholds on the other "
            "folds, each row is decided by the highest-ranked attack that scored it, and its "
            "call is the share of draws that flagged it",
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


def _fold_of(positions: IntArray, order: IntArray | None, folds: int) -> IntArray:
    """Fold of each position: ``position % folds`` in the first draw, a seeded shuffle after."""
    folded: IntArray = (positions if order is None else order[positions]) % folds
    return folded


def cross_fitted_decisions(
    attacks: Sequence[AttackScores],
    n_members: int,
    n_nonmembers: int,
    *,
    folds: int = FOLDS,
    repeats: int = REPEATS,
    seed: int = 0,
) -> Decisions:
    """Every row decided by the best attack, chosen on other folds, that scored it.

    Parameters
    ----------
    attacks
        Each attack's scores on some of the rows; every member position in
        ``range(n_members)`` and non-member position in ``range(n_nonmembers)``
        should be scored by at least one attack (a row none scored is called a
        non-member).
    folds, repeats, seed
        Cross-fitting folds, draws of them, and the seed of the draws after the
        first. In the first draw, position ``i`` is in fold ``i % folds`` (the
        rows are already in a seeded random order, so every prefix an attack
        scored splits evenly); each later draw shuffles the positions first.

    Returns
    -------
    Decisions
        Each row's share of draws that flagged it, every draw's rules, and every
        draw's advantage.
    """
    import numpy as np

    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    flags_m, flags_n = np.zeros(n_members), np.zeros(n_nonmembers)
    rules: list[Rule] = []
    advantages: list[float] = []
    rng = np.random.RandomState(seed)
    for repeat in range(repeats):
        order_m = None if repeat == 0 else rng.permutation(n_members)
        order_n = None if repeat == 0 else rng.permutation(n_nonmembers)
        fold_m = _fold_of(np.arange(n_members), order_m, folds)
        fold_n = _fold_of(np.arange(n_nonmembers), order_n, folds)
        drawn_m, drawn_n = np.zeros(n_members, bool), np.zeros(n_nonmembers, bool)
        for fold in range(min(folds, max(n_members, n_nonmembers))):
            ranked = []
            for attack in attacks:
                if attack.repeat is not None and attack.repeat != repeat:
                    continue
                choose_m = fold_m[attack.member_positions] != fold
                choose_n = fold_n[attack.nonmember_positions] != fold
                chosen_rules, gain = best_rule(
                    attack.member_scores[choose_m],
                    attack.member_labels[choose_m],
                    attack.nonmember_scores[choose_n],
                    attack.nonmember_labels[choose_n],
                )
                if gain > 0.0:
                    ranked.append((gain, attack, chosen_rules))
            # Stable: equal advantages keep the attacks' order.
            ranked.sort(key=lambda entry: -entry[0])
            open_m, open_n = fold_m == fold, fold_n == fold
            for rank, (gain, attack, label_rules) in enumerate(ranked):
                take_m = open_m[attack.member_positions]
                take_n = open_n[attack.nonmember_positions]
                if not take_m.any() and not take_n.any():
                    continue
                rule = Rule(fold, attack.name, label_rules, gain, 0, 0, 0.0, 0.0, repeat, rank)
                hit_m = rule.flags(attack.member_scores[take_m], attack.member_labels[take_m])
                hit_n = rule.flags(attack.nonmember_scores[take_n], attack.nonmember_labels[take_n])
                rows_m = attack.member_positions[take_m]
                rows_n = attack.nonmember_positions[take_n]
                drawn_m[rows_m], drawn_n[rows_n] = hit_m, hit_n
                open_m[rows_m], open_n[rows_n] = False, False
                rules.append(_counted(rule, hit_m, hit_n))
            if open_m.any() or open_n.any() or not ranked:
                # Rows no attack that beat chance scored: called non-members.
                nobody = Rule(fold, None, (), 0.0, 0, 0, 0.0, 0.0, repeat, len(ranked))
                rest_m = np.zeros(int(open_m.sum()), dtype=bool)
                rest_n = np.zeros(int(open_n.sum()), dtype=bool)
                rules.append(_counted(nobody, rest_m, rest_n))
        flags_m += drawn_m
        flags_n += drawn_n
        tpr = float(drawn_m.mean()) if n_members else 0.0
        fpr = float(drawn_n.mean()) if n_nonmembers else 0.0
        advantages.append(tpr - fpr)
    return Decisions(
        member_positions=np.arange(n_members, dtype=np.int64),
        member_flagged=flags_m / repeats,
        nonmember_positions=np.arange(n_nonmembers, dtype=np.int64),
        nonmember_flagged=flags_n / repeats,
        rules=tuple(rules),
        repeat_advantages=tuple(advantages),
    )


def _counted(rule: Rule, flagged_m: BoolArray, flagged_n: BoolArray) -> Rule:
    return dataclasses.replace(
        rule,
        n_members=len(flagged_m),
        n_nonmembers=len(flagged_n),
        tpr=float(flagged_m.mean()) if len(flagged_m) else 0.0,
        fpr=float(flagged_n.mean()) if len(flagged_n) else 0.0,
    )
