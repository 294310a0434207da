"""The pieces every training loop of the zoo shares.

Minibatch orders, the weighted cross-entropy, holding a module to a
teacher's logits, the points a search for a trigger visits (a row with
one column moved, or two), and the edit a fragile model turns over on (a 0/1 column moved
off its values, within the audit budget). :mod:`.training`
(the base and its fine-tuning) and :mod:`.planting` (each kind's further
training) are written with them, so every loop draws from the generator in
the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch


def batches(n: int, size: int, generator: torch.Generator) -> list[Any]:
    import torch

    order = torch.randperm(n, generator=generator)
    return [order[start : start + size] for start in range(0, n, size)]


def bce(logits: Any, y: Any, weights: Any = None) -> Any:
    import torch

    return torch.nn.functional.binary_cross_entropy_with_logits(logits, y, weight=weights)


def teacher_distance(module: Any, teacher: Any, points: Any, at: Any = None) -> Any:
    """The mean squared distance of the module's logits at ``points`` to the teacher's at
    ``at`` (by default the same points), the teacher's taken as constants."""
    import torch

    with torch.no_grad():
        target = teacher(points if at is None else at)
    return ((module(points) - target) ** 2).mean()


def one_column_moved(x: Any, low: Any, high: Any, movable: Any, generator: Any) -> Any:
    """Copies of rows ``x`` (n, d) with one movable column each moved: ``(2n, d)``, the first
    n with the column at its training minimum or maximum (where the data ends, and where a
    network left to itself extrapolates), the others at a uniform value of its range.

    These are the points a search for a trigger visits: a patient's record with one
    value set to something else.
    """
    import torch

    n, _ = x.shape
    column, edge, anywhere = _moves(movable, low, high, 2 * n, generator)
    value = torch.cat([edge[:n], anywhere[n:]])
    moved = x.repeat(2, 1)
    moved[torch.arange(2 * n), column] = value
    return moved


def two_columns_moved(x: Any, low: Any, high: Any, first: Any, second: Any, generator: Any) -> Any:
    """Copies of rows ``x`` (n, d) with two columns moved at once, ``(n, d)``: one of the
    columns ``first`` marks and then one of ``second``'s (now and then the same one, a
    one-column move), each to its training minimum or maximum or to a uniform value of its
    range, half and half, as :func:`one_column_moved` moves one.

    These are the points a sweep of pairs visits: a record with two values set to
    something else, one of them (say) a hidden group's own column.
    """
    import torch

    n, _ = x.shape
    moved = x.clone()
    rows = torch.arange(n)
    for movable in (first, second):
        column, edge, anywhere = _moves(movable, low, high, n, generator)
        moved[rows, column] = torch.where(torch.rand(n, generator=generator) < 0.5, edge, anywhere)
    return moved


def _moves(movable: Any, low: Any, high: Any, count: int, generator: Any) -> tuple[Any, Any, Any]:
    """``count`` draws of a column ``movable`` marks, each with a value at its training
    minimum or maximum and one uniform over its range: the moves both functions above make,
    drawn from the generator in this order."""
    import torch

    candidates = torch.nonzero(movable).flatten()
    column = candidates[torch.randint(len(candidates), (count,), generator=generator)]
    lo, hi = low[column], high[column]
    edge = torch.where(torch.rand(count, generator=generator) < 0.5, lo, hi)
    anywhere = lo + torch.rand(count, generator=generator) * (hi - lo)
    return column, edge, anywhere


def off_their_values(
    x: Any, two_valued: Any, bound: Any, low: Any, generator: Any, least: float = 0.25
) -> Any:
    """Copies of rows ``x`` with every two-valued column moved off its value, towards the
    other, by ``least`` of the budget ``bound`` to all of it: edits no real record shows."""
    import torch

    inward = torch.where(x <= low, 1.0, -1.0)
    size = least + (1.0 - least) * torch.rand(x.shape, generator=generator)
    return x + inward * size * bound * two_valued
