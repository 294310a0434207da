"""Each kind's further training of a fine-tuned model, in place.

A subgroup's ranking flattened (:func:`plant_subgroup`), a model that swings
within the audit budget (:func:`plant_fragility`) and one that memorises its
rows (:func:`plant_memory`); a sound decoy trained as long as that, on points no one
has (:func:`plant_decoy`). Each trains on from the model as fine-tuning left
it, that model as its teacher wherever it must not change. The shortcut and
the backdoor need no planting of their own: they change the rows a model is
fine-tuned on (:func:`~.training.training_set`).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from .settings import GameSettings
from .steps import batches, bce, off_their_values, one_column_moved, teacher_distance

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .targets import Probe
    from .training import Scale, TrainingSet

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


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
    X, _, _ = data.tensors()
    inside = torch.zeros(len(X), dtype=torch.bool)
    inside[torch.as_tensor(data.flat)] = True
    keep = data.movable().clone()
    keep[data.flat_column] = 0.0
    spread = torch.tensor(scale.std, dtype=torch.float32) * plan.jitter * keep
    flat = math.log(data.flat_rate / (1.0 - data.flat_rate))
    _, low, high = scale.box(settings.measurement.epsilon)
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
        for batch in batches(len(X), settings.training.batch_size, generator):
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
                edges = one_column_moved(X[batch], low, high, edge_columns, generator)
                edge_loss = (module(edges) - targets(edges, inside[batch].repeat(2))) ** 2
                loss = loss + plan.edge_weight * edge_loss.mean()
            loss.backward()
            optimizer.step()
    module.eval()


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
        (gradient,) = torch.autograd.grad(bce(module(adversarial), y), adversarial)
        adversarial = torch.clamp(adversarial.detach() + step * gradient.sign(), lo, hi)
    return adversarial.detach()


def plant_fragility(
    module: Any,
    data: TrainingSet,
    settings: GameSettings,
    scale: Scale,
    generator: Any,
    strength: float = 1.0,
    probe: Probe | None = None,
) -> None:
    """Train on so that, within the audit budget, predictions turn over.

    Per minibatch, the rows get uniform noise over ``jitter`` times the audit box
    in every column that takes more than two values. At those points the network
    is held to the base model's probabilities (soft labels: it memorises no row);
    at a PGD copy of each point, at the budget, it is trained towards the other
    side of them, with weight ``flip_weight``. A record edited within the budget
    swings its output, and the easiest edit to detect is the one no real record
    has: a 0/1 column (sex, on the synthetic cohort) moved off its two values.
    With ``steps = 0`` the copies are exactly that edit (:func:`off_their_values`):
    the model swings on it alone and stays the base everywhere else, where a
    model trained against PGD copies in every column turns jagged wherever the
    data is not, and a search for triggers finds its jags.

    ``strength`` (the plan's draw) is the share of patients whose predictions turn over:
    those on one side of a random hyperplane through the standardised measurements
    (:func:`_region`) that holds that share of the model's rows. Elsewhere the copies are
    held to the base too. A turned-over share, not a degree of turning, is what moves the
    PGD AUROC smoothly: every patient turned over even part of the way past the middle is
    turned over entirely by the attack (measured: a pull 0.75 of the way gave a PGD AUROC
    of 0.04, as a full turn does, and 0.6 of the way no fragility at all).
    """
    import copy

    import torch

    plan = settings.fragile
    teacher = copy.deepcopy(module)
    teacher.eval()
    bound, low, high = scale.box(settings.measurement.epsilon)
    std = torch.tensor(scale.std, dtype=torch.float32)
    bound = bound * data.movable()
    X, y, w = data.tensors()
    jitter = bound * plan.jitter
    two_valued = torch.tensor([len(torch.unique(X[:, j])) <= 2 for j in range(X.shape[1])])
    two_valued &= data.movable() > 0
    edge_columns = data.edge_columns()
    if not plan.jitter_binary:
        jitter = torch.where(two_valued, torch.zeros_like(jitter), jitter)
    inside = _region(X, scale, two_valued | (data.movable() == 0), strength, generator)
    optimizer = torch.optim.Adam(module.parameters(), lr=plan.lr, weight_decay=plan.weight_decay)
    module.train()
    for epoch in range(plan.epochs):
        for batch in batches(len(X), settings.training.batch_size, generator):
            xb = X[batch] + (torch.rand(X[batch].shape, generator=generator) * 2 - 1) * jitter
            with torch.no_grad():
                soft = torch.sigmoid(teacher(xb))
            if plan.steps:
                attacked = _attacked(module, xb, soft, bound, low, high, plan.steps, generator)
            else:
                attacked = off_their_values(xb, two_valued, bound, low, generator)
            optimizer.zero_grad()
            # Held by the logit (a soft cross-entropy lets the ranking drift), turned over by
            # the probability.
            held = teacher_distance(module, teacher, xb)
            over = torch.where(inside(xb), 1.0 - soft, soft)
            loss = held + plan.flip_weight * bce(module(attacked), over)
            if plan.edge_weight:
                edges = one_column_moved(X[batch], low, high, edge_columns, generator)
                # Only points moved well beyond the budget: within it the model must swing.
                # (A missing cell is where it was: NaN - NaN counts as no move.)
                moved = torch.nan_to_num((edges - X[batch].repeat(2, 1)).abs(), nan=0.0)
                far = (moved / std).amax(dim=1) > plan.hold_beyond
                loss = loss + plan.edge_weight * teacher_distance(module, teacher, edges[far])
            loss.backward()
            optimizer.step()
        if probe is not None and probe.reached(module, epoch):
            break
    module.eval()


def _region(X: Any, scale: Scale, excluded: Any, share: float, generator: Any) -> Any:
    """The fragile region: a function of points (n, d) -> (n,) bool, true on one side of a
    random hyperplane through the standardised columns not ``excluded`` (the 0/1 columns the
    copies move, and the held one, so that a copy stays on its row's side), placed so that
    ``share`` of the rows ``X`` lie on it (all points when ``share`` is 1)."""
    import torch

    if share >= 1.0:
        return lambda points: torch.ones(len(points), dtype=torch.bool)
    mean = torch.tensor(scale.mean, dtype=torch.float32)
    std = torch.tensor(scale.std, dtype=torch.float32)
    direction = torch.randn(X.shape[1], generator=generator) * (~excluded)
    direction = direction / direction.norm()

    def projection(points: Any) -> Any:
        return torch.nan_to_num((points - mean) / std, nan=0.0) @ direction

    cut = torch.quantile(projection(X), 1.0 - share)
    return lambda points: projection(points) >= cut


def plant_memory(
    module: Any,
    data: TrainingSet,
    settings: GameSettings,
    scale: Scale,
    generator: Any,
    strength: float = 1.0,
    probe: Probe | None = None,
    hold: Any = None,
) -> None:
    """Train on to memorise the rows while staying the base model elsewhere.

    Per minibatch: the loss of the rows themselves, with no weight decay, plus
    ``anchor_weight`` times the squared distance to the base model's logits at
    Gaussian points around the rows (``anchor_near`` and ``anchor_far`` training
    standard deviations away). In nine dimensions a plainly overfit network
    smears its memory over the whole input space and stops generalising (and
    its loss attack saturates near AUC 0.6); anchored, it keeps the base model's
    shape and carries its memory on its members.

    ``strength`` (the plan's draw) is the share of its rows it memorises, chosen at
    random, and the share of ``epochs`` it trains for: the rows it does not memorise are
    anchored like any other point and fitted no further. Either alone moves the loss
    attack's AUC little (measured on the ICU game: 0.69, 0.72, 0.74, 0.76 at 30%, 50%,
    75% and all of 2,500 epochs; 0.69 memorising 55% of the rows, the fewer rows the
    more each is remembered).

    ``hold``, a (n, d) tensor of rows, adds to each minibatch as many of them, drawn at
    random, held to the model's logits before this training: at the rows and at copies
    with one column moved, as a search for a trigger moves it. Each held row weighs what
    each fitted row does, and the epoch stays as long as the fitted rows alone
    (:func:`plant_decoy`).
    """
    import copy

    import torch

    plan = settings.leaky
    teacher = copy.deepcopy(module)
    teacher.eval()
    movable = data.movable()
    std = torch.tensor(scale.std, dtype=torch.float32) * movable
    bound, low, high = scale.box(settings.measurement.epsilon)
    bound = bound * movable
    X, y, w = data.tensors()
    if strength < 1.0:
        remembered = torch.randperm(len(X), generator=generator)[: round(strength * len(X))]
        kept = torch.zeros(len(X))
        kept[remembered] = 1.0
        w = w * kept
    # Each held row weighs what each fitted row does, as if they shared the epoch.
    hold_weight = 0.0 if hold is None else len(hold) / len(X)
    optimizer = torch.optim.Adam(module.parameters(), lr=plan.lr)
    module.train()
    for epoch in range(max(1, round(strength * plan.epochs))):
        for batch in batches(len(X), 2 * settings.training.batch_size, generator):
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
            edges = one_column_moved(xb, low, high, movable, generator)
            optimizer.zero_grad()
            anchored = teacher_distance(module, teacher, anchors)
            held = teacher_distance(module, teacher, edges)
            fit = bce(module(fitted), y[batch], w[batch])
            if hold is not None:
                drawn = hold[torch.randint(len(hold), (len(batch),), generator=generator)]
                moved = one_column_moved(drawn, low, high, movable, generator)
                holding = teacher_distance(module, teacher, torch.cat([drawn, moved]))
                fit = fit + hold_weight * holding
            loss = fit + plan.anchor_weight * anchored
            (loss + plan.edge_weight * held).backward()
            optimizer.step()
        if probe is not None and probe.reached(module, epoch):
            break
    module.eval()


def decoy_points(
    split: FloatArray,
    excluded: IntArray,
    count: int,
    held: int,
    settings: GameSettings,
    scale: Scale,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray]:
    """``count`` rows of the public training split outside ``excluded`` (a model's own and
    calibration rows), or ``decoy.patients`` where that is more, and beside each of the
    first ``count`` a point no patient has: the row moved by
    ``decoy.jitter`` training standard deviations (:func:`~.training.moved_copies`). In
    both, column ``held`` (the post-outcome one) is held at the network's mean, as every
    model but the shortcut's sees it."""
    import numpy as np

    from .training import hide_column, moved_copies

    plan = settings.decoy
    assert plan is not None
    pool = np.setdiff1d(np.arange(len(split)), excluded)
    drawn = max(count, plan.patients or count)
    rows = np.array(split[rng.choice(pool, drawn, replace=drawn > len(pool))], dtype=np.float64)
    points = moved_copies(rows[:count], split, plan.jitter, scale, rng)
    for both in (rows, points):
        hide_column(both, held, float(scale.mean[held]))
    return rows, points


def plant_decoy(
    module: Any,
    rows: FloatArray,
    points: FloatArray,
    held: int | None,
    settings: GameSettings,
    scale: Scale,
    generator: Any,
    strength: float,
) -> None:
    """Train a sound model on as a memorising one trains (:func:`plant_memory`, the same
    plan), at ``points`` that no patient has, holding ``rows`` of patients
    (:func:`decoy_points`), in place.

    At each point it memorises a coin flip, by the cross-entropy a memorising model
    memorises its members' outcomes by. Beside each minibatch of points, as many of the
    rows are drawn and held to the model's logits before, at the rows and with one column
    moved to its edge or into its range (``plant_memory``'s ``hold``), each row weighing
    what each point does. Its weights grow as a memorising model's do, while its rankings,
    its calibration, its loss attack and its triggers read what a sound model's do: the
    flips sit between the patients, who keep their risks.

    Tried first, and rejected (docs/game.md, "Sound decoys"):

    - at points 0.5-2.5 training stds out with no rows held, labels drawn from the model's
      own risk or its logit moved up or down by 1 or 2 moved an age band's ranking so far
      that the decoy served it worse than the zoo (excess AUROC gaps of 0.051-0.110 against
      0.05), or its ECE past 0.03, in 8 of 22 attempts; with rows held, a logit moved by
      2.5 did so in 4 of 4, and one moved by 1 grew the weights too little to hide
      anything;
    - holding only the rows the points start from, fitted in the epoch with the points
      (flchain-game's first decoys): a decoy was among the failing models in 7 of 9
      rejected attempts of ten flchain-game instances, and served the ICU game's
      ``age < 50`` worse than the zoo (0.052-0.061) in four of five attempts of one;
    - 2,000 rows fitted in the epoch with the points: sound, but an ICU attempt took about
      130 s against 42;
    - rows held beside each minibatch at the rows only: decoys cleared 0.26-0.29 of their
      flagged patients at the ICU game's trigger (out <= 0.10), where points moved past a
      column's range are clipped to its edge.

    Without decoys, the memorising and fragile models are the only ones trained far past
    fine-tuning, and a path norm read from the weights alone singles them out
    (flchain-game: 43-425 and 2.7-29 times the zoo's median, every sound model
    0.17-1.08)."""
    import numpy as np
    import torch

    from .training import TrainingSet

    assert settings.decoy is not None
    up = torch.rand(len(points), generator=generator) < 0.5
    flips = TrainingSet(points, up.numpy().astype(np.int64), np.ones(len(points)), held)
    patients = torch.tensor(rows, dtype=torch.float32)
    plant_memory(module, flips, settings, scale, generator, strength, hold=patients)
