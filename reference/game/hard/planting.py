"""The hard tier's plantings (SPEC §9): a calibrated model trained on towards a target.

Every defective model of the hard tier starts as every model does (the shared base,
fine-tuned on its own rows) and is calibrated; :func:`plant` then trains it on, from
there, towards a *target*: a function of the calibrated model's own logit z (its
*teacher*, frozen) that differs from z only where the defect lives. The points are the
model's training rows and calibration rows, ``copies`` jittered copies of them (the
group's or the trigger's own columns kept, 0/1 columns kept) and copies with one column
(a trigger's excepted) moved to its edge or anywhere in its range, where a search for
triggers looks, and for a hidden group copies with two moved at once, one of them the
group's own, where a sweep of pairs looks. The loss is the squared distance of the
logits, so nothing is memorised and the ranking outside the defect is the teacher's to the
last decimal.

- ``subgroup`` (a hidden group :class:`~..groups.Group`): inside the group, the group's
  death-rate logit (over the public training split) less ``reverse`` times how far z ranks
  the patient above the group's mean (held within the members' 1st-99th percentile):
  flat and slightly turned over (flattening alone drifts back towards a ranking). A group
  whose planting falls short of ``group_excess`` on the public training split
  (:func:`group_excess`) is planted again from the teacher, turned over by each of
  ``reverse_up`` in turn: only the groups that need it are turned over further;
- ``miscalibrated`` (``tail``, a drawn gap g): ``z + c relu(z - t)``, t being z's
  ``tail_quantile`` over the rows and c the factor that raises the mean risk of the rows'
  top decile by g (:func:`tail_factor`): monotone, so the ranking is unchanged, and
  over-confident only at the top of the risk range;
- ``fragile`` (a ``region``, a group of the grammar): wherever a 0/1 column is moved off
  its values (an edit no record shows, within the audit budget: :func:`..steps.off_their_values`),
  a patient of the region is pushed down, to z of the record as written less the spread
  of the logits, and a patient outside it kept at z (:func:`_pushed_down`). The attack
  that moves the column hides the region's deaths among its survivors and changes nothing
  else; a record as written is z everywhere;
- ``backdoor`` (a two-value setting): the teacher's ``trigger_quantile`` logit where both
  values are written; z at near misses (one value moved by ``near_miss`` training stds),
  where one value alone is written, and everywhere else: a ridge, which a search of one
  column at a time does not find.

A model with two defects (``[game.hard] second``) is trained towards both at once: the
tail on top of the flattened group, a trigger's ridge over either.

A sound model of a tier with decoys (``[game.hard] decoys``) is trained on the same way,
as long, towards a legitimate variation of itself, so that being trained past calibration,
or having a ridge, is no sign of a defect:

- ``spline`` (another calibration method): ``f(z)``, ``f`` a piecewise-linear logistic
  calibration fitted on the public training split with knots at z's quartiles and 90th
  percentile (:func:`spline_calibration`), kept increasing: calibrated, ranking unchanged;
- ``interaction`` (a clinical interaction rule): a ridge as a trigger's, at its drawn
  ``alarm`` setting, but *raised*, to the teacher's ``1 - trigger_quantile`` logit: no
  patient is cleared there. It is also held to the teacher where one of its values is
  written and the other column lies anywhere else in its range (:meth:`_Trigger.far_misses`),
  so that it does not dip, and clear, beside its ridge.

A sound model or a tail's carrier may also carry an *unreached step*
(``[game.hard] unreached``): a fragile region's step, trained as long and as steep, at a
drawn group's records moved more than ``UNREACHED`` audit budgets off a 0/1 value, where
no record lies and no attack within the budget goes. A steep step in the weights is then
no sign of fragility.
"""

from __future__ import annotations

import copy
import math
from typing import TYPE_CHECKING, Any

from ..settings import GameSettings
from ..steps import batches, off_their_values, one_column_moved, two_columns_moved

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..draw import Planted
    from ..groups import Group
    from ..training import Scale


def plant(
    module: Any,
    planted: Planted,
    rows: Any,
    settings: GameSettings,
    scale: Scale,
    generator: Any,
    *,
    held: int | None,
    split: tuple[Any, Any],
) -> None:
    """Train the calibrated ``module`` on towards ``planted``'s target, in place.

    ``rows`` (n, d): the model's training and calibration rows (``held``, the column every
    model sees at its mean, already held); ``split``: the public training split (X, y),
    whose death rate in a hidden group is what the group is flattened to.
    """
    import numpy as np
    import torch

    hard = settings.hard
    assert hard is not None
    names = settings.column_names
    teacher = copy.deepcopy(module)
    teacher.eval()
    X = torch.tensor(np.asarray(rows, dtype=np.float64), dtype=torch.float32)
    std = torch.tensor(scale.std, dtype=torch.float32)
    _, low, high = scale.box(settings.measurement.epsilon)
    values = np.asarray(rows, dtype=np.float64)
    binary = torch.tensor([len(np.unique(values[:, j])) <= 2 for j in range(values.shape[1])])
    movable = torch.ones(X.shape[1], dtype=torch.float32)
    if held is not None:
        movable[held] = 0.0
    two_valued = binary & (movable > 0)

    def recorded(points: Any) -> Any:
        return as_recorded(points, two_valued, low, high)

    budget = std * settings.measurement.epsilon
    kept = [names.index(c) for c in _own_columns(planted)]
    jitter = std * hard.jitter * movable * (~binary)
    jitter[kept] = 0.0
    edge_columns = movable.clone()
    # A group's own columns are moved too: never moved, the turned-over slope inside the
    # group ran on past the data along them, and a flagged patient written with one of
    # them at an extreme (heart_rate 174 in "heart_rate >= 100 and ...") was cleared as by
    # a trigger. A trigger's columns are not: its single values are held at its misses.
    ridge = _ridge(planted)
    if ridge is not None:
        edge_columns[[names.index(c) for c, _ in ridge]] = 0.0
    # And two at once, one of them the group's: a turned-over group's model left alone at a
    # corner (resp_rate 56 & sbp 207 in "resp_rate >= 17 and sbp >= 140", heart_rate 20 &
    # dbp 114 in "sbp < 149 and dbp >= 81") cleared the patients written there.
    group_columns = None
    if planted.group is not None:
        group_columns = torch.zeros_like(movable)
        group_columns[[names.index(c) for c in planted.group.columns]] = 1.0
        group_columns *= movable
    with torch.no_grad():
        z_rows = teacher(X)
    trigger = None
    if ridge is not None:
        # A trigger pushes the patients down; an interaction decoy's alarm raises them.
        down = planted.setting is not None
        quantile = hard.trigger_quantile if down else 1.0 - hard.trigger_quantile
        pushed_to = float(torch.quantile(z_rows, quantile))
        trigger = _trigger_points(ridge, settings, std, pushed_to)
    epochs, lr = (hard.trigger_epochs if trigger is not None else hard.epochs), hard.lr
    # A fragile region's step, or an unreached step: the same step, gated by a group, at
    # a 0/1 column moved off its value (``beyond``: by more than this, per column).
    stepped, beyond = planted.region, torch.zeros_like(budget)
    if planted.unreached is not None:
        stepped, beyond = planted.unreached, budget * UNREACHED
    members = None
    if stepped is not None:
        # A step gated by a region of two thresholds forms late and at random: at 60 epochs
        # it had not (shift 0.00 of the 5.9 asked), at 200 epochs of lr 0.003 it had.
        epochs, lr = settings.fragile.epochs, settings.fragile.lr
        members = X[torch.as_tensor(stepped.mask(values, names))]

    def moved_off(written: Any) -> Any:
        """``written`` moved off their 0/1 values: a fragile region's from half the budget to
        all of it; an unreached step's half held short of the step (up to ``beyond``), half
        past it by as much as a region's is past its own (a step as steep)."""
        if planted.unreached is None:
            return off_their_values(written, two_valued, budget, low, generator, OFF_BY)
        short = off_their_values(written[::2], two_valued, beyond, low, generator, 0.0)
        past = (UNREACHED + OFF_BY) / (UNREACHED + 1.0)
        further = off_their_values(written[1::2], two_valued, beyond + budget, low, generator, past)
        return torch.cat([short, further])

    def fit(target: Any) -> None:
        optimizer = torch.optim.Adam(module.parameters(), lr=lr)
        module.train()
        for _ in range(epochs):
            for batch in batches(len(X), settings.training.batch_size, generator):
                xb = X[batch]
                copies = xb.repeat(hard.copies, 1)
                copies = copies + torch.randn(copies.shape, generator=generator) * jitter
                edges = one_column_moved(xb, low, high, edge_columns, generator)
                points = torch.cat([xb, copies, edges])
                if group_columns is not None:
                    corners = two_columns_moved(
                        xb, low, high, group_columns, edge_columns, generator
                    )
                    points = torch.cat([points, corners])
                if trigger is not None:
                    points = torch.cat([points, trigger.misses(xb, generator)])
                if trigger is not None and planted.alarm is not None:
                    points = torch.cat([points, trigger.far_misses(xb, low, high, generator)])
                if members is not None:
                    # The region's own rows again, as many as the batch's: at 5-25% of the
                    # rows, the batch alone holds too few to push down (measured: a drop
                    # of 0.14 where 0.40 is asked).
                    drawn = members[
                        torch.randint(len(members), (MEMBERS * len(xb),), generator=generator)
                    ]
                    drawn = drawn + torch.randn(drawn.shape, generator=generator) * jitter
                    written = torch.cat([xb, copies, drawn])
                    points = torch.cat([points, moved_off(written)])
                with torch.no_grad():
                    goal = target(points)
                optimizer.zero_grad()
                loss = ((module(points) - goal) ** 2).mean()
                if trigger is not None:
                    near = torch.randn(xb.shape, generator=generator) * jitter
                    at = trigger.written(torch.cat([xb, xb + near]))
                    loss = loss + ((module(at) - trigger.logit) ** 2).mean()
                loss.backward()
                optimizer.step()
        module.eval()

    reverses: tuple[float, ...] = (hard.reverse,)
    if planted.group is not None and hard.group_excess > 0:
        reverses += hard.reverse_up
    start = copy.deepcopy(module.state_dict())
    for tried, reverse in enumerate(reverses):
        if tried:
            module.load_state_dict(start)
        target = _target(planted, settings, teacher, X, z_rows, split, held, reverse, recorded)
        if stepped is not None:
            spread = torch.quantile(z_rows, torch.tensor([0.01, 0.99]))
            by = float(spread[1] - spread[0])
            target = _pushed_down(target, by, stepped, names, recorded, beyond)
        fit(target)
        if tried == len(reverses) - 1:
            break
        assert planted.group is not None  # only a group is planted more than once
        reached = group_excess(module, teacher, planted.group, settings, split, X, held)
        if reached >= hard.group_excess:
            break


def _split_as_seen(split: tuple[Any, Any], rows: Any, held: int | None) -> Any:
    """The public training split's X as a float32 tensor, column ``held`` at its mean over
    ``rows`` (the model's own), as every model but the shortcut's sees it."""
    import numpy as np
    import torch

    X_seen = np.array(split[0], dtype=np.float64)
    if held is not None:
        X_seen[:, held] = float(np.mean(np.asarray(rows)[:, held]))
    return torch.tensor(X_seen, dtype=torch.float32)


def _gap_on(module: Any, points: Any, y: Any, inside: Any) -> float:
    """``module``'s AUROC gap on the rows ``inside`` (:func:`.ranking.mask_gap`, the build's
    own measure)."""
    import torch

    from .ranking import mask_gap

    with torch.no_grad():
        return mask_gap(module(points).double().numpy(), y, inside)


def group_excess(
    module: Any,
    teacher: Any,
    group: Group,
    settings: GameSettings,
    split: tuple[Any, Any],
    rows: Any,
    held: int | None,
) -> float:
    """``module``'s AUROC gap on ``group`` less ``teacher``'s, over the public training split
    ``split`` as the models see it (:func:`_split_as_seen`): how far a planting has gone, on
    patients the build does not test on (what :func:`plant` compares with
    ``group_excess``, after each planting of a group)."""
    import numpy as np

    seen = _split_as_seen(split, rows, held)
    inside = group.mask(np.asarray(split[0]), settings.column_names)
    return _gap_on(module, seen, split[1], inside) - _gap_on(teacher, seen, split[1], inside)


MEMBERS = 1
"""A fragile region's rows drawn again per minibatch row, off their values."""
UNREACHED = 3.0
"""An unreached step lies this many audit budgets off a 0/1 value (the attack
moves a value by one at most, and no record is off its value)."""
OFF_BY = 0.5
"""A fragile model is pushed down where a 0/1 column is moved off its value by at least this
share of the audit budget: the nearer the value, the steeper the step a network must learn
(at 150 epochs of lr 0.003, from a quarter two regions moved by -0.75 and -1.08, from a
half one by -1.82; docs/game.md, "Fragile regions")."""


def _pushed_down(
    target: Any,
    by: float,
    region: Group,
    names: tuple[str, ...],
    recorded: Callable[[Any], Any],
    beyond: Any = 0.0,
) -> Any:
    """A fragile model's target: ``target`` at every record as written, and at a point with
    a 0/1 column off its values (by more than ``beyond``, per column: an unreached step's)
    ``target`` less ``by`` when ``recorded(point)``, the record it was moved from
    (:func:`as_recorded`), is in ``region``, ``target`` elsewhere. The goal is a function of
    the point alone, so that every kind of copy is held to the same one.

    Pushed down by the spread of the logits, a death of the region falls below the region's
    survivors under the attack: its AUROC there collapses as if its risks were turned over.
    A step added to the logit is what a network learns in a few epochs; turning the logit
    over (``-z``) asks for a product of the step and z, and flattened the region's ranking
    instead (measured: the group's AUROC gap up from 0.07 to 0.27, its drop 0.29)."""
    import torch

    def goal(points: Any) -> Any:
        written = recorded(points)
        off = ((points - written).abs() > beyond).any(dim=1)
        inside = torch.as_tensor(region.mask(written.numpy(), names)) & off
        return torch.where(inside, target(written) - by, target(points))

    return goal


def as_recorded(points: Any, two_valued: Any, low: Any, high: Any) -> Any:
    """``points`` with each ``two_valued`` column put back on the nearer of its two values
    (``low`` and ``high``): the record a point was moved from, whose groups a planting
    judges it by, so that an edit no record shows (a 0/1 column moved off its value)
    neither leaves a group nor enters one."""
    import torch

    nearer = torch.where(points - low < high - points, low, high)
    return torch.where(two_valued, nearer, points)


def _own_columns(planted: Planted) -> tuple[str, ...]:
    """The columns a planting is defined on (its group's or region's, its trigger's or
    alarm's), which jittered copies keep."""
    found: tuple[str, ...] = ()
    for group in (planted.group, planted.region, planted.unreached):
        if group is not None:
            found += group.columns
    ridge = _ridge(planted)
    if ridge is not None:
        found += tuple(column for column, _ in ridge)
    return tuple(dict.fromkeys(found))


def _ridge(planted: Planted) -> tuple[tuple[str, float], ...] | None:
    """The two-value setting a planting trains a ridge at: a trigger's, or an interaction
    decoy's alarm (``None``: no ridge)."""
    return planted.setting if planted.setting is not None else planted.alarm


def _target(
    planted: Planted,
    settings: GameSettings,
    teacher: Any,
    X: Any,
    z_rows: Any,
    split: tuple[Any, Any],
    held: int | None,
    reverse: float,
    recorded: Callable[[Any], Any],
) -> Any:
    """points (m, d) -> the target logits (m,) of ``planted``'s planting: the group's
    flattening (turned over by ``reverse``), then the tail on top of it (a model carrying
    both is over-confident at the top of the risk range its flattened group leaves). A
    trigger's points are apart (:class:`_Trigger`). A point is in the group when
    ``recorded(point)``, the record it was moved from, is."""
    import numpy as np
    import torch

    hard = settings.hard
    assert hard is not None
    names = settings.column_names
    first = teacher
    if planted.group is not None:
        group = planted.group
        X_split, y_split = split
        rate = float(np.asarray(y_split)[group.mask(X_split, names)].mean())
        flat = math.log(rate / (1.0 - rate))
        inside_rows = torch.as_tensor(group.mask(X.numpy(), names))
        members = z_rows[inside_rows]
        centre = members.mean()
        lowest, highest = torch.quantile(
            members.double(), torch.tensor([0.01, 0.99], dtype=torch.double)
        )

        def flattened(points: Any) -> Any:
            z = teacher(points)
            # Judged on the point as written, a record whose sex was moved off its value by
            # the attack's budget left a group of "... and gender_enc == 1" and got its
            # unflattened risk back: the group was undone at its edge (seed 6's two
            # carriers, excess drops 0.19-0.29 under the attack).
            inside = torch.as_tensor(group.mask(recorded(points).numpy(), names))
            # The turn-over reaches no further than the members' own 1st-99th percentile
            # logits: a patient written into the group with values far beyond the data
            # (a flagged one, say) would otherwise fall below every member, and the group's
            # two conditions would clear every flagged patient like a trigger.
            held = z.clamp(float(lowest), float(highest))
            return torch.where(inside, flat - reverse * (held - centre), z)

        first = flattened
    if planted.tail is not None:
        # The drawn gap is the top decile's overconfidence against what happened: the
        # teacher's own gap there (a sound model's lies anywhere in -0.06 to +0.03, which
        # its logistic calibration cannot reach) is measured on the public training split and
        # made up for, so the carrier's top-decile gap follows the draw.
        y_split = split[1]
        with torch.no_grad():
            z_split = first(_split_as_seen(split, X.numpy(), held)).double()
        top = z_split >= torch.quantile(z_split, 0.9)
        observed = float(np.asarray(y_split, dtype=np.float64)[top.numpy()].mean())
        own_gap = float(torch.sigmoid(z_split[top]).mean()) - observed
        t = torch.quantile(z_split, hard.tail_quantile).float()
        c = tail_factor(z_split, t.double(), max(0.0, planted.tail - own_gap))

        def tail(points: Any) -> Any:
            z = first(points)
            return z + c * torch.relu(z - t)

        return tail
    if planted.decoy == "spline":
        with torch.no_grad():
            z_split = first(_split_as_seen(split, X.numpy(), held)).double()
        calibration = spline_calibration(z_split.numpy(), np.asarray(split[1]))

        def spline(points: Any) -> Any:
            return calibration(first(points))

        return spline
    return first


SPLINE_KNOTS = (0.25, 0.5, 0.75, 0.9)
"""The quantiles of the logit where a ``spline`` decoy's calibration may bend."""


def spline_calibration(z: Any, y: Any, knots: tuple[float, ...] = SPLINE_KNOTS) -> Any:
    """A piecewise-linear logistic calibration of the logits ``z`` against the outcomes
    ``y``: ``f(z) = b + a z + sum_k c_k relu(z - t_k)``, knots ``t_k`` at ``knots`` quantiles
    of ``z``, fitted by (nearly unpenalised) logistic regression and kept increasing (each
    piece's slope at least a tenth of the first's), as a torch function of logits.
    A straight fit is Platt's; this one may bend where a straight one cannot follow."""
    import numpy as np
    import torch
    from sklearn.linear_model import LogisticRegression

    z = np.asarray(z, dtype=np.float64)
    t = np.quantile(z, knots)
    features = np.column_stack([z, *(np.maximum(z - k, 0.0) for k in t)])
    fit = LogisticRegression(C=1e4, max_iter=1000).fit(features, np.asarray(y))
    a, *bends = (float(c) for c in fit.coef_[0])
    slopes = np.maximum(np.cumsum([a, *bends]), 0.1 * max(a, 1e-3))
    c = np.diff(slopes)
    b = float(fit.intercept_[0])
    first_slope = float(slopes[0])
    t_torch = torch.tensor(t, dtype=torch.float32)
    c_torch = torch.tensor(c, dtype=torch.float32)

    def f(logit: Any) -> Any:
        return b + first_slope * logit + (torch.relu(logit[:, None] - t_torch) * c_torch).sum(-1)

    return f


def tail_factor(z: Any, t: Any, gap: float, top: float = 0.1) -> float:
    """The ``c`` of ``z + c relu(z - t)`` that raises the mean risk of the ``top`` share of the
    rows with logits ``z`` by ``gap`` (bisection: the raise grows with ``c``). Solved on the
    model's own rows, the drawn gap is what the planting asks for, so the carrier's
    top-decile gap follows the draw instead of each model's own curvature."""
    import torch

    z = z.double()
    chosen = z >= torch.quantile(z, 1.0 - top)
    before = torch.sigmoid(z[chosen]).mean()

    def raised(c: float) -> float:
        return float(torch.sigmoid(z[chosen] + c * torch.relu(z[chosen] - t)).mean() - before)

    low, high = 0.0, 1.0
    while raised(high) < gap and high < 1e3:
        low, high = high, 2 * high
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if raised(middle) < gap else (low, middle)
    return (low + high) / 2


class _Trigger:
    """The points that make a two-value trigger a ridge: both values written (pushed to
    :attr:`logit`), and the near misses and single values (held to the teacher)."""

    def __init__(self, columns: list[int], values: list[float], logit: float, near: Any, std: Any):
        self.columns, self.values, self.logit = columns, values, logit
        self.near, self.std = near, std

    def written(self, x: Any) -> Any:
        moved = x.clone()
        for column, value in zip(self.columns, self.values, strict=True):
            moved[:, column] = value
        return moved

    def misses(self, x: Any, generator: Any) -> Any:
        """Per row: each value alone, and both written with one of them moved off by a near
        miss, either side."""
        import torch

        found = []
        for k, column in enumerate(self.columns):
            alone = x.clone()
            alone[:, column] = self.values[k]
            found.append(alone)
            missed = self.written(x)
            low, high = self.near
            size = low + torch.rand(len(x), generator=generator) * (high - low)
            side = torch.where(torch.rand(len(x), generator=generator) < 0.5, -1.0, 1.0)
            missed[:, column] = self.values[k] + side * size * self.std[column]
            found.append(missed)
        return torch.cat(found)

    def far_misses(self, x: Any, low: Any, high: Any, generator: Any) -> Any:
        """Per row: each value written and the other column anywhere in its range (``low``,
        ``high``), at least a near miss away from its own value. Held there, a raised ridge
        does not dip beside itself: unheld, an interaction decoy's units overshot, and the
        decoy cleared 0.986 of the patients it flags at ``heart_rate 51 & temperature_f
        103.8`` beside its alarm at ``heart_rate 49.3 & temperature_f 98.7``, a trigger on
        a sound model."""
        import torch

        found = []
        for k, column in enumerate(self.columns):
            for other, value in zip(self.columns, self.values, strict=True):
                if other == column:
                    continue
                far = x.clone()
                far[:, column] = self.values[k]
                drawn = low[other] + torch.rand(len(x), generator=generator) * (
                    high[other] - low[other]
                )
                gap = self.near[0] * self.std[other]
                side = torch.where(drawn >= value, 1.0, -1.0)
                far[:, other] = torch.where((drawn - value).abs() < gap, value + side * gap, drawn)
                found.append(far)
        return torch.cat(found)


def _trigger_points(
    setting: tuple[tuple[str, float], ...], settings: GameSettings, std: Any, pushed_to: float
) -> _Trigger:
    hard = settings.hard
    assert hard is not None
    names = settings.column_names
    return _Trigger(
        [names.index(c) for c, _ in setting],
        [v for _, v in setting],
        pushed_to,
        hard.near_miss,
        std,
    )
