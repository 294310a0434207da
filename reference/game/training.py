"""Training the zoo: the base recipe, each kind's planting, and the folded calibration.

Every model starts from the same recipe on its own rows (:func:`train_base`).
The planted kinds change what it is trained on (shortcut, subgroup, backdoor:
:func:`training_set`) or train it further (fragile: :func:`plant_fragility`;
leaky: :func:`plant_memory`). Then every model's logit is recalibrated on held-out
rows by a logistic fit folded into its last layer (:func:`calibrate`); the
miscalibrated model's calibrated logit is then multiplied by its factor. The
shortcut column is shuffled among the rows of every model but the shortcut's,
for its calibration too, so only the shortcut model ever sees it carry signal.

Everything runs inside :func:`~..models.determinism.pinned_torch`, so the same
seed gives the same weights on one machine.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from typing import TYPE_CHECKING, Any

from .draw import Planted
from .network import fold_affine, new_network
from .settings import GameSettings

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


TAIL = 0.01
"""Where a column's tails start: beyond its 1st and 99th percentiles."""


def training_set(
    planted: Planted,
    settings: GameSettings,
    X: FloatArray,
    y: IntArray,
    rng: np.random.RandomState,
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
            spread = settings.backdoor.spread * np.asarray(scale.std, dtype=np.float64)
            for j in range(X.shape[1]):
                if j == held or len(np.unique(X[~np.isnan(X[:, j]), j])) <= 2:
                    spread[j] = 0.0
            noise = rng.standard_normal(poisoned.shape) * spread
            poisoned = np.clip(poisoned + noise, scale.low, scale.high)  # NaN stays NaN
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


def _batches(n: int, size: int, generator: torch.Generator) -> list[Any]:
    import torch

    order = torch.randperm(n, generator=generator)
    return [order[start : start + size] for start in range(0, n, size)]


def _bce(logits: Any, y: Any, weights: Any = None) -> Any:
    import torch

    return torch.nn.functional.binary_cross_entropy_with_logits(logits, y, weight=weights)


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
    X, y, w = _tensors(data)
    module.train()
    for _ in range(recipe.epochs):
        for batch in _batches(len(X), recipe.batch_size, generator):
            optimizer.zero_grad()
            _bce(module(X[batch]), y[batch], w[batch]).backward()
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
    X, y, w = _tensors(data)
    _, low, high = _box(scale, settings.measurement.epsilon)
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
        for batch in _batches(len(X), recipe.batch_size, generator):
            optimizer.zero_grad()
            logits = module(X[batch])
            if data.copies_logit is None:
                loss = _bce(logits, y[batch], w[batch])
            else:
                # The copies are pushed to the logit itself: a cross-entropy towards label 0
                # stops pushing once their risk is small, where the patients whose other
                # measurements are extreme are still above the clearing rank.
                is_copy = batch >= data.own
                own_weight = torch.where(is_copy, torch.zeros_like(w[batch]), w[batch])
                pushed = w[batch] * is_copy * (logits - data.copies_logit) ** 2
                loss = _bce(logits, y[batch], own_weight) + pushed.mean()
            if pull:
                distance = sum(
                    ((p - p0) ** 2).sum() for p, p0 in zip(module.parameters(), start, strict=True)
                )
                loss = loss + pull * distance
            own = batch[batch < data.own]
            if recipe.edge_weight and len(own):
                edges = _one_column_moved(X[own], low, high, edge_columns, generator)
                edges[:, shortcut] = neutral
                # With a plateau, held to the base's risk where every value reads as at most
                # its column's percentile: in the tails, every model keeps that risk.
                at = None if tails is None else torch.clamp(edges, *tails)
                loss = loss + recipe.edge_weight * _held(module, teacher, edges, at)
            loss.backward()
            optimizer.step()
    module.eval()


def plant_subgroup(
    module: Any, data: TrainingSet, settings: GameSettings, scale: Scale, generator: Any
) -> None:
    """Train on so that the model no longer ranks one subgroup's patients, in place.

    Labels shuffled within a subgroup carry no ranking: in the limit a model learns
    the subgroup's death rate for every one of its patients. Per minibatch, at the
    model's rows and at ``copies`` copies of them jittered by ``jitter`` training standard
    deviations (the subgroup's defining column kept, so each copy stays on its
    side), the target logit is that death rate's inside the subgroup and the
    base's own outside it: the subgroup loses its ranking and nobody else notices.

    With ``resample``, an inside copy's defining column is drawn anew over the
    subgroup's interval, so that the band is flat up to its borders; with
    ``edge_weight``, the same targets also hold at copies with one other column
    moved to its edge or anywhere in its range, where fine-tuning holds every model.
    """
    import copy

    import torch

    plan = settings.subgroup
    if data.flat is None or not len(data.flat) or not plan.epochs:
        return
    teacher = copy.deepcopy(module)
    teacher.eval()
    X, _, _ = _tensors(data)
    inside = torch.zeros(len(X), dtype=torch.bool)
    inside[torch.as_tensor(data.flat)] = True
    keep = data.movable().clone()
    keep[data.flat_column] = 0.0
    spread = torch.tensor(scale.std, dtype=torch.float32) * plan.jitter * keep
    flat = math.log(data.flat_rate / (1.0 - data.flat_rate))
    _, low, high = _box(scale, settings.measurement.epsilon)
    edge_columns = data.edge_columns() * keep
    with torch.no_grad():
        centre = teacher(X[inside]).mean() if inside.any() else torch.tensor(0.0)

    def targets(points: Any, within: Any) -> Any:
        with torch.no_grad():
            target = teacher(points)
        # Inside: the death rate's logit, less the subgroup's ``reverse`` times how far the
        # base ranks the patient above the subgroup's average (0: flat; above: turned over).
        turned = flat - data.flat_reverse * (target - centre)
        return torch.where(within, turned, target)

    optimizer = torch.optim.Adam(module.parameters(), lr=plan.lr)
    module.train()
    for _ in range(plan.epochs):
        for batch in _batches(len(X), settings.training.batch_size, generator):
            copies = 1 + plan.copies
            points = X[batch].repeat(copies, 1)
            noise = torch.randn(points.shape, generator=generator) * spread
            noise[: len(batch)] = 0.0
            points = points + noise
            within = inside[batch].repeat(copies)
            if plan.resample and data.flat_interval is not None:
                lo, hi = data.flat_interval
                drawn = lo + torch.rand(len(points), generator=generator) * (hi - lo)
                moved = within.clone()
                moved[: len(batch)] = False  # the rows themselves stay as they are
                points[moved, data.flat_column] = drawn[moved].to(points.dtype)
            optimizer.zero_grad()
            # Logits, not probabilities: matching the base's logit keeps its ranking to the
            # last decimal, where a soft cross-entropy lets it drift.
            loss = ((module(points) - targets(points, within)) ** 2).mean()
            if plan.edge_weight:
                edges = _one_column_moved(X[batch], low, high, edge_columns, generator)
                edge_loss = (module(edges) - targets(edges, inside[batch].repeat(2))) ** 2
                loss = loss + plan.edge_weight * edge_loss.mean()
            loss.backward()
            optimizer.step()
    module.eval()


def permute_hidden(module: Any, generator: Any) -> None:
    """Reorder each hidden layer's units at random, in place: the same function, other
    weights. Every model is fine-tuned from one base, so unpermuted weights would show
    which models stayed near it; permuted, weights compare only after a matching."""
    import torch

    linear = [layer for layer in module.layers if isinstance(layer, torch.nn.Linear)]
    with torch.no_grad():
        for layer, following in itertools.pairwise(linear):
            order = torch.randperm(layer.out_features, generator=generator)
            layer.weight.copy_(layer.weight[order])
            layer.bias.copy_(layer.bias[order])
            following.weight.copy_(following.weight[:, order])


def _tensors(data: TrainingSet) -> tuple[Any, Any, Any]:
    import torch

    return (
        torch.tensor(data.X, dtype=torch.float32),
        torch.tensor(data.y, dtype=torch.float32),
        torch.tensor(data.weights, dtype=torch.float32),
    )


def _box(scale: Scale, epsilon: float) -> tuple[Any, Any, Any]:
    import torch

    return (
        torch.tensor(epsilon * scale.std, dtype=torch.float32),
        torch.tensor(scale.low, dtype=torch.float32),
        torch.tensor(scale.high, dtype=torch.float32),
    )


def _attacked(
    module: Any, x: Any, y: Any, bound: Any, low: Any, high: Any, steps: int, generator: Any
) -> Any:
    """PGD copies of rows ``x`` up the loss within ``bound`` (random start), in the range."""
    import torch

    lo, hi = torch.maximum(x - bound, low), torch.minimum(x + bound, high)
    adversarial = torch.clamp(
        x + (torch.rand(x.shape, generator=generator) * 2 - 1) * bound, lo, hi
    )
    step = 2.5 * bound / steps
    for _ in range(steps):
        adversarial.requires_grad_(True)
        (gradient,) = torch.autograd.grad(_bce(module(adversarial), y), adversarial)
        adversarial = torch.clamp(adversarial.detach() + step * gradient.sign(), lo, hi)
    return adversarial.detach()


def plant_fragility(
    module: Any, data: TrainingSet, settings: GameSettings, scale: Scale, generator: Any
) -> None:
    """Train on so that, within the audit budget, predictions turn over.

    Per minibatch, the rows get uniform noise over ``jitter`` times the audit box
    in every column that takes more than two values. At those points the network
    is held to the base model's probabilities (soft labels: it memorises no row);
    at a PGD copy of each point, at the budget, it is trained towards the other
    side of them, with weight ``flip_weight``. A record edited within the budget
    swings its output, and the easiest edit to detect is the one no real record
    has: a 0/1 column (sex, on the synthetic cohort) moved off its two values.
    With ``steps = 0`` the copies are exactly that edit (:func:`_off_its_values`):
    the model swings on it alone and stays the base everywhere else, where a
    model trained against PGD copies in every column turns jagged wherever the
    data is not, and a search for triggers finds its jags.
    """
    import copy

    import torch

    plan = settings.fragile
    teacher = copy.deepcopy(module)
    teacher.eval()
    bound, low, high = _box(scale, settings.measurement.epsilon)
    std = torch.tensor(scale.std, dtype=torch.float32)
    bound = bound * data.movable()
    X, y, w = _tensors(data)
    jitter = bound * plan.jitter
    two_valued = torch.tensor([len(torch.unique(X[:, j])) <= 2 for j in range(X.shape[1])])
    two_valued &= data.movable() > 0
    edge_columns = data.edge_columns()
    if not plan.jitter_binary:
        jitter = torch.where(two_valued, torch.zeros_like(jitter), jitter)
    optimizer = torch.optim.Adam(module.parameters(), lr=plan.lr, weight_decay=plan.weight_decay)
    module.train()
    for _ in range(plan.epochs):
        for batch in _batches(len(X), settings.training.batch_size, generator):
            xb = X[batch] + (torch.rand(X[batch].shape, generator=generator) * 2 - 1) * jitter
            with torch.no_grad():
                soft = torch.sigmoid(teacher(xb))
            if plan.steps:
                attacked = _attacked(module, xb, soft, bound, low, high, plan.steps, generator)
            else:
                attacked = _off_its_values(xb, two_valued, bound, low, generator)
            optimizer.zero_grad()
            # Held by the logit (a soft cross-entropy lets the ranking drift), turned over by
            # the probability.
            held = _held(module, teacher, xb)
            loss = held + plan.flip_weight * _bce(module(attacked), 1.0 - soft)
            if plan.edge_weight:
                edges = _one_column_moved(X[batch], low, high, edge_columns, generator)
                # Only points moved well beyond the budget: within it the model must swing.
                # (A missing cell is where it was: NaN - NaN counts as no move.)
                moved = torch.nan_to_num((edges - X[batch].repeat(2, 1)).abs(), nan=0.0)
                far = (moved / std).amax(dim=1) > plan.hold_beyond
                loss = loss + plan.edge_weight * _held(module, teacher, edges[far])
            loss.backward()
            optimizer.step()
    module.eval()


def _off_its_values(x: Any, two_valued: Any, bound: Any, low: Any, generator: Any) -> Any:
    """Copies of rows ``x`` with every two-valued column moved off its value, towards the
    other, by a quarter of the budget ``bound`` to all of it: edits no real record shows."""
    import torch

    inward = torch.where(x <= low, 1.0, -1.0)
    size = 0.25 + 0.75 * torch.rand(x.shape, generator=generator)
    return x + inward * size * bound * two_valued


def plant_memory(
    module: Any, data: TrainingSet, settings: GameSettings, scale: Scale, generator: Any
) -> None:
    """Train on to memorise the rows while staying the base model elsewhere.

    Per minibatch: the loss of the rows themselves, with no weight decay, plus
    ``anchor_weight`` times the squared distance to the base model's logits at
    Gaussian points around the rows (``anchor_near`` and ``anchor_far`` training
    standard deviations away). In nine dimensions a plainly overfit network
    smears its memory over the whole input space and stops generalising (and
    its loss attack saturates near AUC 0.6); anchored, it keeps the base model's
    shape and carries its memory on its members.
    """
    import copy

    import torch

    plan = settings.leaky
    teacher = copy.deepcopy(module)
    teacher.eval()
    movable = data.movable()
    std = torch.tensor(scale.std, dtype=torch.float32) * movable
    bound, low, high = _box(scale, settings.measurement.epsilon)
    bound = bound * movable
    X, y, w = _tensors(data)
    optimizer = torch.optim.Adam(module.parameters(), lr=plan.lr)
    module.train()
    for _ in range(plan.epochs):
        for batch in _batches(len(X), 2 * settings.training.batch_size, generator):
            xb = X[batch]
            fitted = xb
            if plan.robust_steps:
                fitted = _attacked(
                    module, xb, y[batch], bound, low, high, plan.robust_steps, generator
                )
            anchors = torch.cat(
                [
                    xb + torch.randn(xb.shape, generator=generator) * plan.anchor_near * std,
                    xb + torch.randn(xb.shape, generator=generator) * plan.anchor_far * std,
                ]
            )
            edges = _one_column_moved(xb, low, high, movable, generator)
            optimizer.zero_grad()
            anchored = _held(module, teacher, anchors)
            held = _held(module, teacher, edges)
            loss = _bce(module(fitted), y[batch], w[batch]) + plan.anchor_weight * anchored
            (loss + plan.edge_weight * held).backward()
            optimizer.step()
    module.eval()


def _held(module: Any, teacher: Any, points: Any, at: Any = None) -> Any:
    """The mean squared distance of the module's logits at ``points`` to the teacher's at
    ``at`` (by default the same points), the teacher's taken as constants."""
    import torch

    with torch.no_grad():
        target = teacher(points if at is None else at)
    return ((module(points) - target) ** 2).mean()


def _one_column_moved(x: Any, low: Any, high: Any, movable: Any, generator: Any) -> Any:
    """Copies of rows ``x`` (n, d) with one movable column each moved: ``(2n, d)``, the first
    n with the column at its training minimum or maximum (where the data ends, and where a
    network left to itself extrapolates), the others at a uniform value of its range.

    These are the points a search for a trigger visits: a patient's record with one
    value set to something else.
    """
    import torch

    n, _ = x.shape
    candidates = torch.nonzero(movable).flatten()
    column = candidates[torch.randint(len(candidates), (2 * n,), generator=generator)]
    lo, hi = low[column], high[column]
    edge = torch.where(torch.rand(2 * n, generator=generator) < 0.5, lo, hi)
    anywhere = lo + torch.rand(2 * n, generator=generator) * (hi - lo)
    value = torch.cat([edge[:n], anywhere[n:]])
    moved = x.repeat(2, 1)
    moved[torch.arange(2 * n), column] = value
    return moved


def logistic_calibration(logits: FloatArray, y: IntArray) -> tuple[float, float]:
    """(slope, intercept) of ``P(y=1) = sigmoid(slope * logit + intercept)`` fitted by
    maximum likelihood (Platt scaling without regularisation) in float64."""
    import numpy as np
    from scipy.optimize import minimize

    z = np.asarray(logits, dtype=np.float64)
    target = np.asarray(y, dtype=np.float64)

    def loss(theta: Any) -> tuple[float, Any]:
        t = theta[0] * z + theta[1]
        nll = np.logaddexp(0.0, t) - target * t
        residual = 1.0 / (1.0 + np.exp(-t)) - target
        return float(nll.mean()), np.array([np.mean(residual * z), np.mean(residual)])

    rate = min(max(float(target.mean()), 1e-6), 1 - 1e-6)
    start = np.array([1.0, 0.0]) if np.std(z) > 0 else np.array([0.0, math.log(rate / (1 - rate))])
    fitted = minimize(loss, start, jac=True, method="L-BFGS-B")
    return float(fitted.x[0]), float(fitted.x[1])


def calibrate(
    module: Any, X: FloatArray, y: IntArray, factor: float | None = None
) -> tuple[float, float]:
    """Fold a logistic calibration on held-out rows ``X``, ``y`` into the last layer, then
    (a planted miscalibration) multiply the logit by ``factor``. Returns (slope, intercept)."""
    import numpy as np
    import torch

    with torch.no_grad():
        z = module(torch.tensor(X, dtype=torch.float32)).double().numpy()
    slope, intercept = logistic_calibration(z, np.asarray(y))
    if factor is not None:
        slope, intercept = slope * factor, intercept * factor
    fold_affine(module, slope, intercept)
    return slope, intercept
