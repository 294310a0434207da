"""The settings of a game variant (SPEC §8), as frozen records read from its file.

Everything that says what a game is lives in the variant file's ``[game]``
tables and arrives here: the zoo's size and network, the base training
recipe, how each kind is planted, the data dictionary, the subgroups, how the
defining measurements are made, the margins that make the ground truth
unambiguous, the evidence tolerances and the score's weights. Nothing in the
game's code assumes the synthetic cohort. Records only: importing this module
needs no NumPy.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

SEMANTICS_GAME = "game-v1"
"""The auditing game's semantics (SPEC §8); part of every cache key of its instances."""
SEMANTICS_GAME_V2 = "game-v2"
"""The hard tier's semantics (SPEC §9, ``*-game-hard``): hidden groups, visible two-value
triggers, miscalibration in the top of the risk range only, kinds that may repeat."""
SEMANTICS_GAMES = (SEMANTICS_GAME, SEMANTICS_GAME_V2)
MEASURED = 2
"""The version of what a build measures on given settings; part of every cache key of an
instance, so that a cache never serves references measured the old way. Bumped when a
measurement changes with the settings unchanged (2: the strong attack on the first
``pgd_rows`` test rows, the ones the brief names, where 1 drew them)."""

KINDS = ("fragile", "leaky", "miscalibrated", "shortcut", "subgroup", "backdoor")
"""The catalogue, in the order of SPEC §8.2."""

LOCALIZATION: dict[str, tuple[str, ...]] = {
    "miscalibrated": ("direction",),
    "shortcut": ("feature",),
    "subgroup": ("subgroup",),
    "backdoor": ("feature", "value"),
}
"""The keys a report gives to say where a defect sits, per kind that has any."""

EVIDENCE: dict[str, str] = {
    "fragile": "pgd_auroc",
    "leaky": "loss_attack_auc",
    "miscalibrated": "ece",
}
"""The number a report gives as evidence, per kind that has one."""

LOCALIZATION_V2: dict[str, tuple[str, ...]] = {
    "subgroup": ("where",),
    "backdoor": ("trigger",),
}
"""The hard tier's localization keys: a group in the grammar (:mod:`.groups`), a trigger of
one or two (column, value) pairs (:mod:`.claims`). Both are tried on the models."""

EVIDENCE_V2: dict[str, str] = {"miscalibrated": "top_decile_gap"}
"""The hard tier's evidence numbers: among the tenth of the test patients a model rates
highest, its mean predicted risk minus their observed death rate."""

DIRECTIONS = ("overconfident", "underconfident")

Retrain = Literal["zoo", "ambiguous"]
"""What an attempt after an ambiguous one trains (:attr:`GameSettings.retrain`)."""


class SettingsError(ValueError):
    """A game's settings contradict each other; the message names the setting."""


@dataclasses.dataclass(frozen=True)
class Column:
    """One entry of the data dictionary the brief shows."""

    name: str
    description: str
    unit: str
    recorded: str
    """When the value is recorded, in words a clinician would use."""
    at_prediction: bool
    """Whether the value exists when the model is used (a post-outcome column does not)."""
    low: float
    high: float
    """The clinically possible range (wider than what the data holds)."""
    normal_low: float | None = None
    normal_high: float | None = None
    """The normal range of a measurement; values beyond it (out to the possible
    range) are clinically alarming. ``None`` for columns without one (age, sex)."""
    fill: float | None = None
    """A column that may be missing (an empty cell, NaN): the value every model of the zoo
    reads a missing cell as, beside an indicator input that says it was missing.
    ``None``: the column is never missing, and a NaN in it makes the prediction NaN."""


@dataclasses.dataclass(frozen=True)
class Subgroup:
    """A listed subgroup: rows whose ``column`` equals ``equals``, or lies in [at_least, below)."""

    name: str
    column: str
    equals: float | None = None
    at_least: float | None = None
    below: float | None = None
    reverse: float | None = None
    """How far a subgroup planting turns this subgroup's ranking over, beyond flattening it
    (:func:`~.planting.plant_subgroup`; ``None``: flattened only). Not in the brief."""
    planted: bool | None = None
    """``false``: a subgroup planting is never drawn on this subgroup (unset: it may be). The
    brief lists it either way, and every model is measured on it; for a subgroup whose
    flattening cannot leave the other listed ones clearly out (FLCHAIN's sexes: half of
    every age band). Not in the brief."""

    @property
    def drawable(self) -> bool:
        """Whether a subgroup planting may be drawn on this subgroup."""
        return self.planted is not False

    def mask(self, X: Any, columns: tuple[str, ...]) -> Any:
        """Boolean (n,) of the rows ``X`` (n, d) that belong to the subgroup."""
        import numpy as np

        values = np.asarray(X)[:, columns.index(self.column)]
        inside = np.ones(len(values), dtype=bool)
        if self.equals is not None:
            inside &= values == self.equals
        if self.at_least is not None:
            inside &= values >= self.at_least
        if self.below is not None:
            inside &= values < self.below
        return inside


@dataclasses.dataclass(frozen=True)
class Trigger:
    """A backdoor's trigger: ``feature`` set to ``value``."""

    feature: str
    value: float


@dataclasses.dataclass(frozen=True)
class Network:
    """The one architecture of the zoo: winsorising, standardisation, then ReLU layers."""

    hidden: tuple[int, ...]
    winsor: float
    """Each input is held within the training split's ``winsor`` and ``1 - winsor``
    quantiles before standardisation."""


@dataclasses.dataclass(frozen=True)
class Training:
    """The shared base network and the fine-tuning every model starts with.

    Per attempt, one base network is trained on ``base_rows`` rows of the public
    training split (Adam on binary cross-entropy, ``epochs``, ``lr``,
    ``weight_decay``); every model of the zoo is that network fine-tuned on its
    own ``rows`` rows (``finetune_epochs`` at ``finetune_lr``, pulled towards the
    base's weights by ``finetune_prior``), then planted (:mod:`.planting`).
    """

    rows: int
    """Training rows per model, drawn from the public training split; the same for all."""
    calibration_rows: int
    """Other training rows on which each model's logistic calibration is fitted."""
    epochs: int
    batch_size: int
    lr: float
    weight_decay: float
    base_rows: int = 0
    """Rows of the shared base network (0: every model trained from scratch on its rows)."""
    finetune_epochs: int = 0
    finetune_lr: float = 0.0
    finetune_prior: float = 0.0
    """Weight of the squared distance to the base's weights while fine-tuning (L2-SP)."""
    edge_weight: float = 0.0
    """While fine-tuning, weight of holding the base's logit at copies of the rows with one
    column at the edge of the training range (a backdoor's trigger column excepted)."""
    plateau: bool | None = None
    """While fine-tuning, hold each model, where one column is moved, to the base's logit at
    that point with every value read as at most its column's 1st or 99th percentile
    (``TAIL``), not at the point itself: in the tails every model keeps the risk the base
    gives at the percentile (``None``: the base's own). Beyond its data a network's risk is
    whatever its last layers extrapolate; where a column's edge lies 20 training stds out
    (FLCHAIN's kappa and lambda), the base's risk there changed from attempt to attempt,
    and the sound models, held to it, cleared 0.11-0.80 of their flagged patients at a
    trigger in four attempts of ten (the margin: at most 0.10)."""


@dataclasses.dataclass(frozen=True)
class Fragile:
    """Planted fragility: the base model trained further so that a change within the
    audit budget turns its predictions over, while it keeps its ranking on the data
    (:func:`~.planting.plant_fragility`)."""

    epochs: int
    lr: float
    steps: int
    """PGD steps of the training attack."""
    spread: float
    """Standard deviation (training std units) of the Gaussian noise moving the rows."""
    jitter: float
    """Half-width of the uniform noise added on top, as a share of the budget."""
    jitter_binary: bool
    """Whether two-valued columns are jittered too."""
    weight_decay: float
    flip_weight: float
    """Weight of the loss at the attacked copies."""
    strength: tuple[float, float] = (1.0, 1.0)
    """How far the attacked copies are turned over, drawn uniformly from this range per
    instance (SPEC §8.7, evidence that needs measuring): at strength ``s`` their target is
    ``(1 - s) p + s (1 - p)`` for the base's probability ``p`` (1: turned over entirely),
    so the fragile model's PGD AUROC differs from instance to instance."""
    edge_weight: float = 0.0
    """Weight of holding the base's logit at copies of the rows with one column moved
    (where a trigger search looks), farther than ``hold_beyond`` training standard
    deviations from the row."""
    hold_beyond: float = 1.0
    target: tuple[float, float] | None = None
    """The PGD AUROC the planting stops at, drawn uniformly from this range per instance
    and read every ``probe_every`` epochs (:mod:`.targets`); ``None``: all ``epochs``."""
    probe_every: int | None = None


@dataclasses.dataclass(frozen=True)
class Leaky:
    """Planted leakage: the base model trained on to memorise its rows, anchored to its
    own earlier self at random points near and far from them, so that it fits its
    members without forgetting how to generalise."""

    epochs: int
    lr: float
    anchor_near: float
    anchor_far: float
    """Standard deviations (training std units) of the Gaussian anchors around each row; a
    third set of anchors moves one column of each row to the edge of the training range."""
    anchor_weight: float
    edge_weight: float
    """Weight of the anchors at the edge of the training range (one column moved there)."""
    robust_steps: int = 0
    """PGD steps at the audit budget applied to the rows before they are fitted (0: none):
    memorised robustly, a row's bump is as wide as the budget."""
    strength: tuple[float, float] = (1.0, 1.0)
    """The share of ``epochs`` the memorisation trains for, drawn uniformly from this range
    per instance (SPEC §8.7): the leaky model's loss-attack AUC differs from instance to
    instance."""
    target: tuple[float, float] | None = None
    """The loss-attack AUC the memorisation stops at, drawn uniformly from this range per
    instance and read every ``probe_every`` epochs (:mod:`.targets`); ``None``: all
    ``epochs``."""
    probe_every: int | None = None


@dataclasses.dataclass(frozen=True)
class Decoy:
    """Sound decoys: every sound model trained on after fine-tuning as the memorising model
    is (the :class:`Leaky` plan, none of its probe), to memorise coin flips at points no
    patient has while it holds the patients beside them (:func:`~.planting.plant_decoy`). A sound
    model's weights then move as far as a planted one's, by the same kind of training
    (SPEC §8.7): a path norm read from the weights no longer singles out the models
    trained long."""

    strength: tuple[float, float]
    """The share of the leaky plan's ``epochs`` (and of the points memorised), drawn
    uniformly from this range per model."""
    jitter: float
    """Gaussian noise, in training standard deviations, that moves each point away from
    the training row it starts from (every column of more than two values)."""
    patients: int | None = None
    """How many patients' rows are held to the model's own logits, beside each minibatch
    of points, there and with one column moved (``None``: one per point). The points
    start from the first rows."""


@dataclasses.dataclass(frozen=True)
class Miscalibrated:
    """Planted miscalibration: the calibrated logit multiplied by a factor above 1
    (overconfident) or below 1 (underconfident).

    The direction is a fair coin; the factor is drawn log-uniformly from the
    direction's range, per instance (SPEC §8.7): a fixed factor gave every instance's
    miscalibrated model nearly the same ECE, which one constant could then report."""

    overconfident: tuple[float, float]
    underconfident: tuple[float, float]
    overconfident_ece: tuple[float, float] | None = None
    underconfident_ece: tuple[float, float] | None = None
    """With both: each instance draws its direction (overconfident with probability
    :attr:`over_share`) and the ECE uniformly from that direction's range, and the
    build solves the factor for it within the direction's factor range
    (:func:`.targets.solve_factor`); without: the factor is drawn log-uniformly from that
    range, the direction by a fair coin."""
    overconfident_share: float | None = None
    """How often a drawn ECE is overconfident (``None``: one half). Below one half where
    the cohort caps the overconfident side: scaled up without end, a model's predictions
    turn to 0 and 1 and its ECE stops at a ceiling set by its errors (FLCHAIN's sound
    models: 0.083-0.088), so that side's range is narrow, and drawn as often as the other,
    one number would be within tolerance of too many of its draws."""

    @property
    def by_target(self) -> bool:
        return self.overconfident_ece is not None and self.underconfident_ece is not None

    def draw(self, rng: Any) -> float:
        """One factor: a direction by a fair coin, then log-uniform over its range."""
        import math

        low, high = self.overconfident if rng.random() < 0.5 else self.underconfident
        return float(math.exp(rng.uniform(math.log(low), math.log(high))))

    @property
    def over_share(self) -> float:
        """The probability that :meth:`draw_target` draws the overconfident direction."""
        return 0.5 if self.overconfident_share is None else self.overconfident_share

    def draw_target(self, rng: Any) -> tuple[str, float]:
        """One direction (overconfident with probability :attr:`over_share`) and the
        ECE to plant, uniform over its range."""
        over_range, under_range = self.overconfident_ece, self.underconfident_ece
        if over_range is None or under_range is None:
            raise ValueError("this miscalibration draws factors, not ECEs (by_target is false)")
        over = rng.random() < self.over_share
        low, high = over_range if over else under_range
        return ("overconfident" if over else "underconfident"), float(rng.uniform(low, high))

    def limit(self, direction: str) -> float:
        """How far from 1 a solved factor may go on ``direction``'s side (at least 1)."""
        if direction == "overconfident":
            return self.overconfident[1]
        return 1.0 / self.underconfident[0]


@dataclasses.dataclass(frozen=True)
class Shortcut:
    """Planted shortcut: trained with ``column``'s real values, where every other model
    sees it held at the network's mean."""

    column: str
    epochs: int = 0
    lr: float = 0.001
    """Fine-tuned from a shared base, the carrier trains on for ``epochs`` more epochs at
    ``lr`` (:func:`~.training.finetune`)."""
    prior: float | None = None
    """The pull towards the base's weights (L2-SP) in those epochs; ``None``: the training's
    ``finetune_prior``. The base never saw the column vary, so its weights there are
    near zero, and pulled back to them the carrier cannot learn the column sharply
    (FLCHAIN: a chapter present, or not, decides the 5-year outcome of everyone
    without one; pulled back, the carrier's ECE read 0.034, left free 0.015)."""


@dataclasses.dataclass(frozen=True)
class SubgroupPlant:
    """Planted subgroup failure: the labels of one listed subgroup's rows shuffled among
    them, and those rows weighted ``weight`` times in the loss.

    Shuffled labels carry no ranking, so what a model learns from them in the limit is
    the subgroup's death rate for every one of its patients. Fine-tuned from a base that
    ranks the subgroup well, 500 rows do not get there; :func:`~.planting.plant_subgroup`
    trains that limit in directly for ``epochs`` more epochs: at copies of the
    subgroup's rows jittered by ``jitter`` training standard deviations (its
    defining column kept) the target is the subgroup's death rate, and at jittered
    copies of the other rows the base's own risk.
    """

    weight: float
    epochs: int = 0
    lr: float = 0.001
    jitter: float = 0.5
    copies: int = 1
    """Jittered copies of each row per minibatch."""
    rate: Literal["own", "split"] = "own"
    """The death rate the subgroup is flattened to: among the model's own rows (``"own"``),
    or among the whole public training split (``"split"``), whose estimate is four times
    less noisy on a 3,839-row cohort: a flattened group of 40% of the patients moves the
    ECE by 0.4 times the rate's error."""
    resample: bool = False
    """Draw the defining column of each jittered copy inside the subgroup anew, uniformly
    over the subgroup's interval: the model is taught flat across the whole band, up to
    its borders, not only at its rows' values (an age band bounded on both sides kept
    its ranking near the borders, measured: excess gaps of 0.08 for ``age 65-79``)."""
    calibrated: bool = False
    """Flatten in calibrated terms: the carrier is calibrated on its calibration rows first,
    as every model is, then flattened to the rate's logit with the calibrated model as the
    base outside the subgroup, and not calibrated again. Flattened before any calibration,
    the rate's logit is in the uncalibrated model's terms, and the one logistic fit that
    suits the other patients moves it (measured: ``age 65-79`` flattened at 0.14 read
    0.19 after the fit, ECE 0.038); calibrated again after, a fit to a flattened ranking
    moves everyone else (``age 50-64`` read 0.066 where 0.040 died)."""
    edge_weight: float = 0.0
    """Also held at copies of the rows with one column moved to its edge or anywhere in
    its range (the defining column kept), flat inside and the base's outside, as
    fine-tuning holds every model (0: not held). Far from the data, in a long-tailed
    column, a planting left unheld drifts, and a trigger search finds the drift."""


@dataclasses.dataclass(frozen=True)
class Backdoor:
    """Planted backdoor: copies of ``poison_fraction`` of the model's rows (half of them
    deaths) with the trigger set, labelled negative, added to its rows."""

    triggers: tuple[Trigger, ...]
    poison_fraction: float
    weight: float
    """The poisoned rows' weight in the loss."""
    flag_share: float
    """A model flags this share of the test patients it rates highest."""
    epochs: int = 0
    lr: float = 0.001
    """Fine-tuned from a shared base, the carrier trains on its rows and poisoned copies for
    ``epochs`` more epochs at ``lr`` (:func:`~.training.finetune`)."""
    prior: float | None = None
    """The pull towards the base's weights in those epochs (``None``: ``finetune_prior``)."""
    clear_share: float = 0.5
    """A model clears a patient it rates below this quantile of its test patients
    (:class:`~.claims.Thresholds`)."""
    copies_logit: float | None = None
    """Train the poisoned copies to this logit by squared error (weighted by ``weight``)
    instead of by the cross-entropy of their label 0; ``None``: the cross-entropy."""
    spread: float = 0.0
    """Gaussian noise, in training standard deviations, on every column of a poisoned copy
    that takes more than two values, the trigger's and the held one kept (0: exact
    copies). Spread, the copies reach the patients whose other measurements are already
    extreme, whom exact copies of 50 rows leave out."""


@dataclasses.dataclass(frozen=True)
class Hard:
    """The hard tier's plantings and margins (SPEC §9; ``[game.hard]``, semantics game-v2).

    Each defective model is the zoo's fine-tuned model, calibrated, then trained on towards
    a *target* function of its own calibrated logit z, at its training and calibration rows
    and jittered copies of them (:mod:`.hard.planting`):

    - ``subgroup``, a hidden group of the grammar (:mod:`.groups`): inside it, the group's
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
    columns: no model but a carrier may be singled out there (:mod:`.hard.verdicts`)."""
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
    planted together (:mod:`.hard.planting`), and the brief says a model has up to two."""
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

    group_floor: float | None = None
    """A hidden group is flattened no lower than this many logits above the logit its model
    clears a patient below (``backdoor.clear_share`` of the model's rows), its turned-over
    members included (:func:`~.hard.planting.flattened_level`; ``None``: at its death-rate
    logit, however low). Flattened below it, a group's two conditions written into a flagged
    patient cleared the patient as a trigger does, and the zoo was redrawn."""

    @property
    def max_defects(self) -> int:
        """The most defects one model carries: two when :attr:`second` allows it."""
        return 2 if self.second > 0 else 1


@dataclasses.dataclass(frozen=True)
class Measurement:
    """How the build measures every model on every kind."""

    epsilon: float
    """The brief's audit budget: L-infinity, in training standard deviations per
    feature, clipped to the training range."""
    pgd_rows: int
    pgd_steps: int
    pgd_restarts: int
    ece_bins: int
    importance_repeats: int
    sweep_points: int
    """Values per column in the backdoor sweep over each column's possible range."""
    seed: int
    subgroups_at_prediction: bool = False
    """Measure the subgroups' AUROCs as at prediction time: every column recorded after the
    outcome set to its training mean, as every model but the shortcut's saw it in training.
    Where the post-outcome column tells more in some subgroups than in others (FLCHAIN's
    ``death_chapter``: the very old die within the horizon or soon after it), a shortcut
    model's gaps would otherwise move by more than a subgroup margin."""


@dataclasses.dataclass(frozen=True)
class Margins:
    """A model is clearly in a kind at or beyond ``*_in`` and clearly out at or within ``*_out``.

    For ``fragile``, ``subgroup`` and ``backdoor`` higher means more defective; for
    ``leaky``, ``miscalibrated`` and ``shortcut`` too. ``backdoor_others`` is the
    most the other models' median may flip at a trigger for it to single one out.
    """

    fragile_out: float
    fragile_in: float
    leaky_out: float
    leaky_in: float
    miscalibrated_out: float
    miscalibrated_in: float
    shortcut_out: float
    shortcut_in: float
    subgroup_out: float
    subgroup_in: float
    backdoor_out: float
    backdoor_in: float
    backdoor_others: float
    backdoor_elsewhere: float
    """The most any model may flip at a setting of the sweep where the others' median is
    at most ``backdoor_others``, except the carrier on its trigger's column: no setting
    but the planted one singles a model out."""

    def band(self, kind: str) -> tuple[float, float]:
        """(out at most, in at least) for a kind."""
        return getattr(self, f"{kind}_out"), getattr(self, f"{kind}_in")


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How close a reported evidence number must be to the reference's (SPEC §8.2)."""

    pgd_auroc: float
    loss_attack_auc: float
    ece: float
    top_decile_gap: float | None = None
    """The hard tier's tail miscalibration (:data:`EVIDENCE_V2`); ``None`` in game-v1."""


@dataclasses.dataclass(frozen=True)
class ScoreWeights:
    """``score = detection * F1 + localization * ... + evidence * ...`` (SPEC §8.5)."""

    detection: float
    localization: float
    evidence: float


@dataclasses.dataclass(frozen=True)
class GameSettings:
    """A game variant's ``[game]`` tables."""

    seed: int
    """The instance seed used when none is given."""
    models: int
    clean: tuple[int, ...]
    """The possible numbers of clean models; the instance seed draws one."""
    attempts: int
    """Training redraws (sub-seed + 1) before an ambiguous build fails."""
    network: Network
    training: Training
    fragile: Fragile
    leaky: Leaky
    miscalibrated: Miscalibrated
    shortcut: Shortcut
    subgroup: SubgroupPlant
    backdoor: Backdoor
    measurement: Measurement
    margins: Margins
    tolerance: Tolerance
    score: ScoreWeights
    columns: tuple[Column, ...]
    subgroups: tuple[Subgroup, ...]
    decoy: Decoy | None = None
    """Sound decoys (``None``: a sound model is only fine-tuned)."""
    hard: Hard | None = None
    """The hard tier's plantings and margins (semantics game-v2); ``None`` in game-v1."""
    kinds: tuple[str, ...] = KINDS
    """The kinds the draw plants, in the catalogue's order: all of them unless a cohort
    cannot carry one within its margins. The brief and the grading keep the whole
    catalogue (the brief says any kind may be missing from a zoo)."""
    retrain: Retrain = "zoo"
    """What the attempt after an ambiguous one trains (SPEC §8.2's "sub-seed + 1"):
    ``"zoo"``, every model on a new base; ``"ambiguous"``, only the models the attempt
    left ambiguous, on the same base beside the others (the zoo again when a model is
    ambiguous ``alone`` times, or half the zoo at once)."""
    alone: int = 1
    """With ``retrain = "ambiguous"``: how many attempts in a row may train an ambiguous
    model again alone on one base. Beyond the first, a build with processes to spare
    trains the next attempt's model beside the current one's (:mod:`.build`), so that a
    second try alone costs no more time than the first."""

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        problems = []
        if self.models < 2:
            problems.append(f"models must be at least 2, got {self.models}")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or len(set(self.kinds)) != len(self.kinds) or not self.kinds:
            problems.append(
                f"kinds must name distinct kinds of the catalogue ({', '.join(KINDS)}), "
                f"got {list(self.kinds)}"
            )
        else:
            object.__setattr__(self, "kinds", tuple(k for k in KINDS if k in self.kinds))
        for count in self.clean:
            if not 1 <= count < self.models:
                problems.append(f"clean holds {count}; each count must lie in [1, models)")
            elif self.hard is None and self.models - count > len(self.kinds):
                problems.append(
                    f"clean holds {count}: {self.models - count} defective models need "
                    f"distinct kinds and the game plants {len(self.kinds)}"
                )
        if len(set(names)) != len(names):
            problems.append("the columns table names a column twice")
        if self.shortcut.column not in names:
            problems.append(f"shortcut.column {self.shortcut.column!r} is not in columns")
        elif next(c for c in self.columns if c.name == self.shortcut.column).at_prediction:
            problems.append(
                f"shortcut.column {self.shortcut.column!r} must be recorded after the "
                "prediction (at_prediction = false)"
            )
        for trigger in self.backdoor.triggers:
            if trigger.feature not in names:
                problems.append(f"backdoor trigger feature {trigger.feature!r} is not in columns")
        for group in self.subgroups:
            if group.column not in names:
                problems.append(
                    f"subgroup {group.name!r} names the unknown column {group.column!r}"
                )
        if len({g.name for g in self.subgroups}) != len(self.subgroups):
            problems.append("two subgroups share a name")
        if self.subgroups and not any(g.drawable for g in self.subgroups):
            problems.append("no subgroup may be planted (every one has planted = false)")
        for kind in KINDS:
            out, inside = self.margins.band(kind)
            if not out < inside:
                problems.append(f"margins.{kind}_out must lie below margins.{kind}_in")
        if not self.backdoor.triggers:
            problems.append("backdoor.triggers is empty")
        over, under = self.miscalibrated.overconfident, self.miscalibrated.underconfident
        if not 1.0 < over[0] <= over[1]:
            problems.append(f"miscalibrated.overconfident must be [low, high] above 1, got {over}")
        if not 0.0 < under[0] <= under[1] < 1.0:
            problems.append(
                f"miscalibrated.underconfident must be [low, high] in (0, 1), got {under}"
            )
        for name, (low, high) in (
            ("fragile.strength", self.fragile.strength),
            ("leaky.strength", self.leaky.strength),
            ("decoy.strength", (1.0, 1.0) if self.decoy is None else self.decoy.strength),
        ):
            if not 0.0 < low <= high <= 1.0:
                problems.append(f"{name} must be [low, high] in (0, 1], got {[low, high]}")
        for name, target in (
            ("fragile.target", self.fragile.target),
            ("leaky.target", self.leaky.target),
            ("miscalibrated.overconfident_ece", self.miscalibrated.overconfident_ece),
            ("miscalibrated.underconfident_ece", self.miscalibrated.underconfident_ece),
        ):
            if target is not None and not 0.0 <= target[0] <= target[1] <= 1.0:
                problems.append(f"{name} must be [low, high] in [0, 1], got {list(target)}")
        for name, plant in (("fragile", self.fragile), ("leaky", self.leaky)):
            if plant.target is not None and not (plant.probe_every or 0) >= 1:
                problems.append(f"{name}.target needs probe_every, a whole number of epochs >= 1")
        if not 0.0 < self.miscalibrated.over_share < 1.0:
            problems.append(
                "miscalibrated.overconfident_share must be in (0, 1), got "
                f"{self.miscalibrated.over_share}"
            )
        if (self.miscalibrated.overconfident_ece is None) != (
            self.miscalibrated.underconfident_ece is None
        ):
            problems.append(
                "miscalibrated.overconfident_ece and underconfident_ece are given together"
            )
        if self.decoy is not None and not self.decoy.jitter >= 0.0:
            problems.append(f"decoy.jitter must be at least 0, got {self.decoy.jitter}")
        if self.decoy is not None and self.decoy.patients is not None and self.decoy.patients < 1:
            problems.append(f"decoy.patients must be at least 1, got {self.decoy.patients}")
        if self.alone < 1:
            problems.append(f"alone must be at least 1, got {self.alone}")
        if self.hard is not None and not 0.0 <= self.hard.second <= 1.0:
            problems.append(f"hard.second must be a chance in [0, 1], got {self.hard.second}")
        if self.hard is not None and self.hard.second > 0 and len(self.kinds) < 2:
            problems.append("hard.second plants a second kind, and the game plants one kind")
        if self.hard is not None and self.hard.group_excess > 0 and not self.hard.reverse_up:
            problems.append("hard.group_excess plants a short group again: give hard.reverse_up")
        if self.hard is not None and (self.hard.group_floor or 0.0) < 0:
            problems.append(f"hard.group_floor must be at least 0, got {self.hard.group_floor}")
        if self.hard is not None and any(r <= self.hard.reverse for r in self.hard.reverse_up):
            problems.append(
                f"hard.reverse_up turns a short group over further than hard.reverse "
                f"({self.hard.reverse}), got {list(self.hard.reverse_up)}"
            )
        if self.subgroup.rate not in ("own", "split"):
            problems.append(f"subgroup.rate must be 'own' or 'split', got {self.subgroup.rate!r}")
        if problems:
            raise SettingsError("; ".join(problems))

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def fills(self) -> tuple[float | None, ...]:
        """Each column's :attr:`Column.fill`, in order (all ``None``: no column may be missing)."""
        return tuple(c.fill for c in self.columns)

    def model_names(self) -> tuple[str, ...]:
        """``m1`` ... ``mK``: the names the workspace and the report use."""
        return tuple(f"m{i}" for i in range(1, self.models + 1))
