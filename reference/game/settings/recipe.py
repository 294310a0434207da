"""How every model of a zoo is trained before any planting: the network and the base's
and fine-tunes' training."""

from __future__ import annotations

import dataclasses


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
    base's weights by ``finetune_prior``), then planted (:mod:`..planting`).
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
