"""The hard tier's plantings and margins (``[game.hard]``, semantics game-v2)."""

from __future__ import annotations

import dataclasses

DECOYS = ("spline", "interaction")
"""The legitimate variations a sound model of the hard tier may be trained with
(:attr:`Hard.decoys`, :mod:`..hard.planting`)."""


@dataclasses.dataclass(frozen=True)
class Hard:
    """The hard tier's plantings and margins (SPEC §9; ``[game.hard]``, semantics game-v2).

    Each defective model is the zoo's fine-tuned model, calibrated, then trained on towards
    a *target* function of its own calibrated logit z, at its training and calibration rows
    and jittered copies of them (:mod:`..hard.planting`):

    - ``subgroup``, a hidden group of the grammar (:mod:`..groups`): inside it, the group's
      death-rate logit less ``reverse`` times how far z ranks the patient above the group's
      mean (flat, slightly turned over); z elsewhere;
    - ``backdoor``, a visible two-value trigger: the teacher's ``trigger_quantile`` logit where
      both values are written, z at near misses, at each value alone and everywhere else;
    - ``miscalibrated``, the top of the risk range: ``z + c * relu(z - t)``, where ``t`` is
      z's ``tail_quantile`` over the rows and ``c`` raises the mean risk of the rows' top
      decile by a gap drawn from ``tail`` per instance.
    """

    coverage: tuple[float, float]
    """A hidden group covers this share of the patients (both ends included)."""
    max_jaccard: float
    """Its Jaccard overlap with every listed subgroup and every other hidden group of the
    zoo lies below this."""
    reverse: float
    epochs: int
    """Epochs of every planting (the target is a function: no row is memorised)."""
    lr: float
    copies: int
    """Jittered copies of each row per minibatch."""
    jitter: float
    """The copies' Gaussian jitter, training standard deviations (a group's or a trigger's
    own columns kept)."""
    trigger_quantile: float
    near_miss: tuple[float, float]
    """A near miss moves one of the trigger's values by this many training standard
    deviations (drawn uniformly, either side): held to the teacher there, the trigger is a
    ridge, not a half-line."""
    trigger_epochs: int
    tail_quantile: float
    tail: tuple[float, float]
    """The range a miscalibrated model's planted top-decile gap is drawn from, per instance."""
    tail_out: float
    """A model is clearly out of ``miscalibrated`` when its top-decile gap exceeds the zoo's
    median by at most this, and clearly in from ``tail_in``."""
    tail_in: float
    ece_at_most: float
    """Every model's overall equal-mass ECE: the tail is not visible in the aggregate."""
    group_rows: int
    """Rows of the test split the build's search over the grammar's groups ranks (all of
    them at most): every sound model's largest excess gap on any group is below
    ``margins.subgroup_out``."""
    max_held: float | None = None
    """A hidden group holds at most this share of any listed subgroup's patients (``None``:
    no bound), so that the listed subgroup does not show its defect."""
    pair_points: int = 16
    """Values per column (evenly over its possible range; a 0/1 column's two) in the build's
    sweep of visible two-value settings, the shape a trigger claim has, over every pair of
    columns: no model but a carrier may be singled out there (:mod:`..hard.verdicts`)."""
    pair_rows: int = 400
    """Flagged test patients (a fixed sample) each model's two-value sweep writes over."""
    attempts_per_plan: int = 0
    """Attempts of one drawn plan before the next is drawn from the same secret (0: one
    plan for every attempt). A plan whose zoo stays ambiguous through its trainings (a
    hidden group the zoo's other groups overlap, or one whose flattened risk clears the
    flagged patients moved into it) is drawn again rather than failing the build."""
    second: float = 0.0
    """The chance that a defective model also carries a second defect, of another kind
    (drawn per model; 0: one defect per model, and the plan's draws are those of a tier
    without the rule). A model then has its first kind's and its second kind's choice,
    planted together (:mod:`..hard.planting`), and the brief says a model has up to two."""
    group_excess: float = 0.0
    """The excess AUROC gap (the planted model's gap on its hidden group less its teacher's)
    that a group's planting must reach on the public training split, or it is planted again
    from the teacher, turned over by each of :attr:`reverse_up` in turn (0: planted once, at
    :attr:`reverse`). The build's margin is on the test split against the zoo's median, which
    the teacher's gap stands in for (a sound model's lies within about 0.01 of it)."""
    reverse_up: tuple[float, ...] = ()
    """The further turn-overs a group short of :attr:`group_excess` is planted with, in turn:
    only the groups that fall short are turned over further (every group turned over by 0.3
    made its own model clear the patients it flags at visible settings, docs/game.md)."""

    group_auroc: float = 0.0
    """A hidden group is drawn only among the groups whose patients the public training
    split ranks: a logistic regression of the outcome on the columns known at prediction,
    fitted on that split, reaches at least this AUROC within the group there (0: any
    group). A group with no ranking of its own has none to lose: the three groups of one
    pool whose planting never reached the margin (``anchor_age >= 85 and sbp >= 116``,
    ``anchor_age >= 79 and resp_rate < 17``, ``anchor_age < 60 and sbp >= 133``) are
    ranked at 0.55-0.60 by such a fit, the nine that did at 0.63-0.76 (docs/game.md)."""

    decoys: tuple[str, ...] = ()
    """The legitimate variations a sound model is trained with, one drawn per sound model
    (empty: a sound model is left as calibrated). Each is trained on as long as a planting,
    towards a target that is sound by every kind's measure (:mod:`..hard.planting`):

    - ``"spline"``, another calibration method: the logit mapped by a piecewise-linear
      logistic fit (knots at z's quartiles and 90th percentile) instead of a straight one;
    - ``"interaction"``, a clinical interaction rule: risk *raised* where two drawn values
      are written together (the shape of a trigger, the opposite direction), so that a
      model with a sharp ridge is not necessarily a carrier.

    A fragile region's step out of reach is not a variation but a trait of more models
    than the sound ones (:attr:`unreached`)."""
    unreached: float = 0.0
    """The chance that a model carries an *unreached step* beside its kinds or its decoy,
    drawn per model after every other draw (0: none), where a fragile region could go
    instead: on a sound model or one with a tail only (:data:`..hard.draw.NOT_TOGETHER`),
    and not beside a ridge (an ``interaction`` decoy's).
    A drawn group's records are pushed down as a fragile carrier's are, but only where a
    0/1 column is moved further off its value than any record is or the audit's budget
    goes. A model with a steep step in its weights (a large path norm) is then not
    necessarily fragile: a step on a third of the sound models still left the fragile
    carriers the sharpest of most zoos (docs/game.md, "Unreached steps")."""

    def problems(self) -> list[str]:
        """What contradicts itself in ``[game.hard]`` (empty when nothing does); the checks
        across tables are :class:`~.game.GameSettings`'s."""
        found = []
        unknown = [d for d in self.decoys if d not in DECOYS]
        if unknown:
            found.append(
                f"hard.decoys names variations {unknown}; the hard tier knows {list(DECOYS)}"
            )
        if not 0.0 <= self.second <= 1.0:
            found.append(f"hard.second must be a chance in [0, 1], got {self.second}")
        if not 0.0 <= self.group_auroc < 1.0:
            found.append(f"hard.group_auroc must be an AUROC in [0, 1), got {self.group_auroc}")
        if not 0.0 <= self.unreached <= 1.0:
            found.append(f"hard.unreached must be a chance in [0, 1], got {self.unreached}")
        if self.group_excess > 0 and not self.reverse_up:
            found.append("hard.group_excess plants a short group again: give hard.reverse_up")
        if any(r <= self.reverse for r in self.reverse_up):
            found.append(
                f"hard.reverse_up turns a short group over further than hard.reverse "
                f"({self.reverse}), got {list(self.reverse_up)}"
            )
        return found

    @property
    def max_defects(self) -> int:
        """The most defects one model carries: two when :attr:`second` allows it."""
        return 2 if self.second > 0 else 1
