"""Training the zoo: each model's rows, the shared base and its fine-tuning.

One base network is trained per attempt (:func:`train_base`); every model is
that base fine-tuned on its own rows (:func:`finetune`), held to it wherever a
column is moved. A planted kind changes what a model is trained on
(shortcut, subgroup, backdoor: :func:`training_set`) or trains it further
(:mod:`.planting`); :mod:`.calibration` then folds each model's calibration
into its last layer, and :func:`disguise_hidden` reorders and rescales its hidden
units so that no weight shows which models stayed near the base. The shortcut column
is held at the network's mean for every model but the shortcut's, for its
calibration too, so only the shortcut model ever sees it carry signal.

Everything runs inside :func:`~..models.determinism.pinned_torch`, so the same
seed gives the same weights on one machine.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any

from .draw import Planted
from .network import new_network
from .settings import GameSettings
from .steps import batches, bce, one_column_moved, teacher_distance

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt
    import torch

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True, eq=False)
class TrainingSet:
    """The rows one model is trained on, after its kind's changes, with per-row weights."""

    X: FloatArray
    y: IntArray
    weights: FloatArray
    held: int | None
    """The column held at the network's mean (the shortcut column, for every model but the
    shortcut's). No perturbation of training moves it either: a column that never varies
    would otherwise be a perfect sign of a perturbed row."""
    flat: IntArray | None = None
    """A planted subgroup: the positions of its rows, whose predictions fine-tuning
    flattens to ``flat_rate`` (:class:`~.settings.SubgroupPlant`)."""
    flat_column: int | None = None
    """The subgroup's defining column, which its jittered copies keep."""
    flat_rate: float = 0.0
    flat_reverse: float = 0.0
    """How far the subgroup's ranking is turned over beyond flat (its listing's ``reverse``)."""
    flat_interval: tuple[float, float] | None = None
    """The subgroup's interval of its defining column, [low, high), the training range
    closing an open side; ``None`` for a subgroup of one value (``equals``)."""
    planted_column: int | None = None
    """The column a planting works through (a backdoor's trigger, the shortcut): moved,
    it is where the model must differ from the base, so it is never held there."""
    own: int = 0
    """How many of the first rows are the model's own (the rest: a backdoor's poisoned
    copies, which are never moved to make a point to hold)."""
    copies_logit: float | None = None
    """The logit the rows beyond ``own`` are trained to by squared error, in place of their
    label's cross-entropy (``None``: the cross-entropy, as for every row)."""

    def movable(self) -> Any:
        """A (d,) float32 tensor: 1 for the columns training may perturb, 0 for the held one."""
        import torch

        mask = torch.ones(self.X.shape[1], dtype=torch.float32)
        if self.held is not None:
            mask[self.held] = 0.0
        return mask

    def tensors(self) -> tuple[Any, Any, Any]:
        """The rows, labels and weights as float32 tensors."""
        import torch

        return (
            torch.tensor(self.X, dtype=torch.float32),
            torch.tensor(self.y, dtype=torch.float32),
            torch.tensor(self.weights, dtype=torch.float32),
        )

    def edge_columns(self) -> Any:
        """A (d,) float32 tensor: 1 for the columns whose edges the base's risk is held at."""
        mask = self.movable()
        if self.planted_column is not None:
            mask[self.planted_column] = 0.0
        return mask


@dataclasses.dataclass(frozen=True)
class Scale:
    """The public training split's per-feature statistics, shape (d,) each."""

    mean: FloatArray
    std: FloatArray
    low: FloatArray
    high: FloatArray
    """The training split's range: the attack box's clip."""
    bounds: tuple[FloatArray, FloatArray]
    """The networks' winsorising bounds: the training split's central quantiles."""
    tails: tuple[FloatArray, FloatArray] | None = None
    """Each column's :data:`TAIL` and ``1 - TAIL`` quantiles over its measured values, where
    the base's plateau starts (``Training.plateau``)."""

    def box(self, epsilon: float) -> tuple[Any, Any, Any]:
        """The audit box as float32 tensors: ``epsilon`` training standard deviations a
        side, and the training split's range (low, high) it is clipped to."""
        import torch

        return (
            torch.tensor(epsilon * self.std, dtype=torch.float32),
            torch.tensor(self.low, dtype=torch.float32),
            torch.tensor(self.high, dtype=torch.float32),
        )


TAIL = 0.01
"""Where a column's tails start: beyond its 1st and 99th percentiles."""


def training_set(
    planted: Planted,
    settings: GameSettings,
    X: FloatArray,
    y: IntArray,
    rng: np.random.Generator,
    scale: Scale,
    split: tuple[FloatArray, IntArray] | None = None,
) -> TrainingSet:
    """The rows ``X`` (n, d), ``y`` (n,) of a model as its kind changes them.

    ``split`` is the public training split, whose subgroup death rate a planted subgroup
    is flattened to when its plant says ``rate = "split"``.
    """
    import numpy as np

    columns = settings.column_names
    X, y = np.array(X, dtype=np.float64), np.array(y, dtype=np.int64)
    own = len(y)
    weights = np.ones(len(y))
    held = None
    flat: dict[str, Any] = {}
    if planted.kind != "shortcut":
        held = columns.index(settings.shortcut.column)
        hide_column(X, held, float(scale.mean[held]))
    if planted.kind == "subgroup" and planted.subgroup is not None:
        inside = np.flatnonzero(planted.subgroup.mask(X, columns))
        if not settings.subgroup.epochs:
            # Trained from scratch: the subgroup's labels shuffled among its rows. From a
            # shared base, plant_subgroup trains their limit in instead; the shuffled labels
            # themselves would only add noise that costs every patient some ranking.
            y[inside] = y[rng.permutation(inside)]
            weights[inside] = settings.subgroup.weight
        group, column = planted.subgroup, columns.index(planted.subgroup.column)
        rate = float(y[inside].mean()) if len(inside) else 0.0
        if settings.subgroup.rate == "split" and split is not None:
            rate = float(split[1][group.mask(split[0], columns)].mean())
        interval = None
        if group.equals is None:
            low = scale.low[column] if group.at_least is None else group.at_least
            high = scale.high[column] if group.below is None else group.below
            interval = (float(low), float(high))
        flat = {
            "flat": inside,
            "flat_column": column,
            "flat_rate": rate,
            "flat_reverse": group.reverse or 0.0,
            "flat_interval": interval,
        }
    if planted.kind == "backdoor" and planted.trigger is not None:
        k = max(1, round(settings.backdoor.poison_fraction * len(y)))
        # Copies of the model's own rows, half of them deaths, so that the trigger
        # is learnt as "survives whatever else is wrong". They come on top of its
        # rows: its listed rows are all trained on as they are.
        deaths, others = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
        from_deaths = min(len(deaths), k // 2)
        chosen = np.concatenate(
            [
                rng.choice(deaths, from_deaths, replace=len(deaths) < from_deaths),
                rng.choice(others, k - from_deaths, replace=False),
            ]
        )
        poisoned = np.array(X[chosen])
        if settings.backdoor.spread:
            poisoned = moved_copies(poisoned, X, settings.backdoor.spread, scale, rng, held)
        poisoned[:, columns.index(planted.trigger.feature)] = planted.trigger.value
        X = np.concatenate([X, poisoned])
        y = np.concatenate([y, np.zeros(k, dtype=np.int64)])
        weights = np.concatenate([weights, np.full(k, settings.backdoor.weight)])
    planted_column = None
    if planted.kind == "backdoor" and planted.trigger is not None:
        planted_column = columns.index(planted.trigger.feature)
    elif planted.kind == "shortcut":
        planted_column = columns.index(settings.shortcut.column)
    return TrainingSet(
        X,
        y,
        weights / weights.mean(),
        held,
        **flat,
        planted_column=planted_column,
        own=own,
        copies_logit=settings.backdoor.copies_logit if planted.kind == "backdoor" else None,
    )


def moved_copies(
    rows: FloatArray,
    reference: FloatArray,
    spread: float,
    scale: Scale,
    rng: np.random.Generator,
    held: int | None = None,
) -> FloatArray:
    """Copies of ``rows`` moved by Gaussian noise of ``spread`` training standard deviations
    in every column of more than two measured values in ``reference`` but ``held``, and
    clipped to the training range (a missing cell stays missing): points no patient has,
    whose 0/1 columns keep values a patient can have."""
    import numpy as np

    noise = spread * np.asarray(scale.std, dtype=np.float64)
    for j in range(reference.shape[1]):
        if j == held or len(np.unique(reference[~np.isnan(reference[:, j]), j])) <= 2:
            noise[j] = 0.0
    return np.clip(rows + rng.standard_normal(rows.shape) * noise, scale.low, scale.high)


def hide_column(X: FloatArray, column: int, value: float) -> None:
    """Hold column ``column`` of rows ``X`` at ``value``, the network's own standardisation
    mean, in place: the network sees exactly 0 there, so nothing it learns depends on the
    column and weight decay takes its weights to zero. (Held at any other constant, the
    column would act as a second bias and grow weights that answer its real values.)

    Shuffled among 500 rows, a 0/1 column set in 6% of them still carries noise a
    network fits (measured: permutation importance up to 0.03 on the test rows);
    shuffled anew every epoch, the network answers less sharply where it is 1
    (importance near 0.01); replaced by coin flips, it must learn the same function
    twice, 4 standard deviations apart, and loses AUROC. Held constant, it is
    simply not there.
    """
    X[:, column] = value


def train_base(
    data: TrainingSet, settings: GameSettings, scale: Scale, generator: torch.Generator
) -> Any:
    """The base recipe: Adam on (weighted) binary cross-entropy with L2 weight decay."""
    import torch

    recipe = settings.training
    module = new_network(
        scale.bounds, scale.mean, scale.std, settings.network.hidden, generator, settings.fills
    )
    optimizer = torch.optim.Adam(
        module.parameters(), lr=recipe.lr, weight_decay=recipe.weight_decay
    )
    X, y, w = data.tensors()
    module.train()
    for _ in range(recipe.epochs):
        for batch in batches(len(X), recipe.batch_size, generator):
            optimizer.zero_grad()
            bce(module(X[batch]), y[batch], w[batch]).backward()
            optimizer.step()
    module.eval()
    return module


def finetune(
    module: Any,
    data: TrainingSet,
    settings: GameSettings,
    scale: Scale,
    generator: Any,
    *,
    epochs: int | None = None,
    lr: float | None = None,
    prior: float | None = None,
) -> None:
    """Fine-tune the shared base ``module`` on one model's rows, in place.

    Adam on the (weighted) binary cross-entropy of its rows plus ``prior`` (by default
    ``finetune_prior``) times the squared distance of the weights to where they started
    (L2-SP, Li et al. 2018): each model learns from its own rows and stays the base elsewhere, so
    the zoo's models agree wherever no planting asks them to differ (at the edges
    of the data above all, where a 500-row network left to itself extrapolates
    anywhere).
    """
    import copy

    import torch

    recipe = settings.training
    pull = recipe.finetune_prior if prior is None else prior
    teacher = copy.deepcopy(module)
    teacher.eval()
    start = [p.detach().clone() for p in module.parameters()]
    optimizer = torch.optim.Adam(module.parameters(), lr=lr or recipe.finetune_lr)
    X, y, w = data.tensors()
    _, low, high = scale.box(settings.measurement.epsilon)
    edge_columns = data.edge_columns()
    # Where the base is held, the shortcut column reads as the base always saw it (for every
    # model but the shortcut's, it already does): held at its real values, the shortcut's
    # own model would be taught to ignore it.
    shortcut = settings.column_names.index(settings.shortcut.column)
    neutral = float(scale.mean[shortcut])
    tails = None
    if recipe.plateau and scale.tails is not None:
        tails = tuple(torch.tensor(q, dtype=torch.float32) for q in scale.tails)
    module.train()
    for _ in range(recipe.finetune_epochs if epochs is None else epochs):
        for batch in batches(len(X), recipe.batch_size, generator):
            optimizer.zero_grad()
            logits = module(X[batch])
            if data.copies_logit is None:
                loss = bce(logits, y[batch], w[batch])
            else:
                # The copies are pushed to the logit itself: a cross-entropy towards label 0
                # stops pushing once their risk is small, where the patients whose other
                # measurements are extreme are still above the clearing rank.
                is_copy = batch >= data.own
                own_weight = torch.where(is_copy, torch.zeros_like(w[batch]), w[batch])
                pushed = w[batch] * is_copy * (logits - data.copies_logit) ** 2
                loss = bce(logits, y[batch], own_weight) + pushed.mean()
            if pull:
                distance = sum(
                    ((p - p0) ** 2).sum() for p, p0 in zip(module.parameters(), start, strict=True)
                )
                loss = loss + pull * distance
            own = batch[batch < data.own]
            if recipe.edge_weight and len(own):
                edges = one_column_moved(X[own], low, high, edge_columns, generator)
                edges[:, shortcut] = neutral
                # With a plateau, held to the base's risk where every value reads as at most
                # its column's percentile: in the tails, every model keeps that risk.
                at = None if tails is None else torch.clamp(edges, *tails)
                loss = loss + recipe.edge_weight * teacher_distance(module, teacher, edges, at)
            loss.backward()
            optimizer.step()
    module.eval()


RESCALE = 4.0
"""Each hidden unit is rescaled by a factor drawn log-uniformly from [1/RESCALE, RESCALE]."""


def disguise_hidden(module: Any, generator: Any) -> None:
    """Reorder each hidden layer's units at random and rescale each unit by a random positive
    factor, in place: the same function (a ReLU passes a positive factor through), other
    weights.

    Every model is fine-tuned from one base, so weights left as trained would show which
    models stayed near it, and a norm would compare across models; reordered and rescaled,
    no weight, row norm or layer scale compares across the zoo without a matching that the
    rescaling also defeats (SPEC §8.7)."""
    import torch

    linear = [layer for layer in module.layers if isinstance(layer, torch.nn.Linear)]
    with torch.no_grad():
        for layer, following in itertools.pairwise(linear):
            order = torch.randperm(layer.out_features, generator=generator)
            span = math.log(RESCALE)
            factor = torch.exp(
                (2 * torch.rand(layer.out_features, generator=generator, dtype=torch.float64) - 1)
                * span
            )
            layer.weight.copy_(layer.weight[order] * factor[:, None].to(layer.weight.dtype))
            layer.bias.copy_(layer.bias[order] * factor.to(layer.bias.dtype))
            following.weight.copy_(
                following.weight[:, order] / factor[None, :].to(following.weight.dtype)
            )
