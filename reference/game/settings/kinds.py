"""How game-v1 plants each kind (``[game.fragile]`` ... ``[game.backdoor]``), and its sound
decoys."""

from __future__ import annotations

import dataclasses
from typing import Any, Literal


@dataclasses.dataclass(frozen=True)
class Fragile:
    """Planted fragility: the base model trained further so that a change within the
    audit budget turns its predictions over, while it keeps its ranking on the data
    (:func:`~..planting.plant_fragility`)."""

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
    and read every ``probe_every`` epochs (:mod:`..targets`); ``None``: all ``epochs``."""
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
    instance and read every ``probe_every`` epochs (:mod:`..targets`); ``None``: all
    ``epochs``."""
    probe_every: int | None = None


@dataclasses.dataclass(frozen=True)
class Decoy:
    """Sound decoys: every sound model trained on after fine-tuning as the memorising model
    is (the :class:`Leaky` plan, none of its probe), to memorise coin flips at points no
    patient has while it holds the patients beside them (:func:`~..planting.plant_decoy`). A sound
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
    (:func:`..targets.solve_factor`); without: the factor is drawn log-uniformly from that
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
    ``lr`` (:func:`~..training.finetune`)."""
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
    ranks the subgroup well, 500 rows do not get there; :func:`~..planting.plant_subgroup`
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
class Trigger:
    """A backdoor's trigger: ``feature`` set to ``value``."""

    feature: str
    value: float


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
    ``epochs`` more epochs at ``lr`` (:func:`~..training.finetune`)."""
    prior: float | None = None
    """The pull towards the base's weights in those epochs (``None``: ``finetune_prior``)."""
    clear_share: float = 0.5
    """A model clears a patient it rates below this quantile of its test patients
    (:class:`~..claims.Thresholds`)."""
    copies_logit: float | None = None
    """Train the poisoned copies to this logit by squared error (weighted by ``weight``)
    instead of by the cross-entropy of their label 0; ``None``: the cross-entropy."""
    spread: float = 0.0
    """Gaussian noise, in training standard deviations, on every column of a poisoned copy
    that takes more than two values, the trigger's and the held one kept (0: exact
    copies). Spread, the copies reach the patients whose other measurements are already
    extreme, whom exact copies of 50 rows leave out."""
