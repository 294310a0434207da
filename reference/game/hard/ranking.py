"""AUROCs of many groups of patients at once: how a model ranks within each group (SPEC §9).

A hidden group is measured by its *gap* (the other patients' AUROC less the group's,
:func:`group_gaps`, :func:`mask_gap`), a fragile region by its *drop* (the group's AUROC
less its AUROC under the audit's attack, :func:`group_drops`, :func:`mask_drop`). The
build measures every group of the grammar for every model, thousands of AUROCs per score;
they are computed from one sort of the scores, a group's AUROC being the Mann-Whitney U
of its rows in that order. Ties in a score are broken by row order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..groups import GroupSpace

    FloatArray = npt.NDArray[np.float64]

_CHUNK = 256
"""Groups unpacked at once."""


def aurocs(order_masks: Any, ys: Any) -> Any:
    """AUROC within each row of ``order_masks`` (g, n) bool, whose columns are the rows sorted
    by increasing score; ``ys`` (n,) bool, the labels in that order. NaN where a group has
    no positive or no negative."""
    u, positives, negatives = _u_statistics(order_masks, ys)
    return _ratio(u, positives * negatives)


def _u_statistics(order_masks: Any, ys: Any) -> tuple[Any, Any, Any]:
    """Within each row of ``order_masks`` (:func:`aurocs`): the Mann-Whitney U (over its
    positives, the count of its negatives earlier in the order), its positives and its
    negatives, each (g,) float64 (exact: every count is an integer below 2**53).

    The running count of negatives is summed in place in the narrowest unsigned type that
    holds n: a cumulative sum of booleans into a wider type took 5 times as long."""
    import numpy as np

    positive = order_masks & ys
    negative = order_masks & ~ys
    below = negative.astype(np.uint16 if ys.shape[0] < 2**16 else np.uint32)
    np.cumsum(below, axis=1, out=below)
    u = (below * positive).sum(axis=1, dtype=np.float64)
    return u, positive.sum(axis=1, dtype=np.float64), negative.sum(axis=1, dtype=np.float64)


def _ratio(u: Any, pairs: Any) -> Any:
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, u / np.maximum(pairs, 1), np.nan)


class _Ordered:
    """Rows in the order of one score (ties broken by row order), and what every group's
    AUROCs in that order need.

    A group's complement's U follows from the group's without a pass of its own: of all
    the (positive, negative) pairs in order, those with both in the complement are all of
    them, plus the group's own, less those with the positive in the group (its positives'
    counts of negatives earlier) and less those with the negative in the group (its
    negatives' counts of positives later): one product of the masks with :attr:`weight`."""

    def __init__(self, score: Any, y: Any):
        import numpy as np

        self.order = np.argsort(np.asarray(score), kind="stable")
        ys = np.asarray(y, dtype=bool)[self.order]
        self.ys = ys
        self.positives, self.negatives = float(ys.sum()), float((~ys).sum())
        earlier_negatives = np.cumsum(~ys) - ~ys
        later_positives = self.positives - np.cumsum(ys)
        self.weight = np.where(ys, earlier_negatives, later_positives).astype(np.float64)
        self.u_all = float(earlier_negatives[ys].sum())

    def within(self, masks: Any) -> Any:
        """The AUROC within each group of ``masks`` (g, n), in row order, (g,)."""
        u, p_in, n_in = _u_statistics(masks[:, self.order], self.ys)
        return _ratio(u, p_in * n_in)

    def within_and_outside(self, masks: Any) -> tuple[Any, Any]:
        """:meth:`within`, and the AUROC within each group's complement, each (g,)."""
        import numpy as np

        ordered = masks[:, self.order]
        u, p_in, n_in = _u_statistics(ordered, self.ys)
        u_out = self.u_all + u - np.einsum("ij,j->i", ordered, self.weight)
        inside = _ratio(u, p_in * n_in)
        outside = _ratio(u_out, (self.positives - p_in) * (self.negatives - n_in))
        return inside, outside


def _chunks(space: GroupSpace) -> Any:
    """``(part, masks)`` over ``space``'s groups, :data:`_CHUNK` at a time."""
    for start in range(0, len(space), _CHUNK):
        part = slice(start, min(start + _CHUNK, len(space)))
        yield part, _masks(space, part)


def group_gaps(z: Any, y: Any, space: GroupSpace) -> FloatArray:
    """The AUROC gap (complement less group) of scores ``z`` (n,) on every group of
    ``space`` (built on the same n rows), (G,). Ties in ``z`` are broken by row order."""
    import numpy as np

    clean = _Ordered(z, y)
    gaps = np.empty(len(space))
    for part, masks in _chunks(space):
        inside, outside = clean.within_and_outside(masks)
        gaps[part] = outside - inside
    return gaps


def group_aurocs(z: Any, y: Any, space: GroupSpace) -> FloatArray:
    """The AUROC of scores ``z`` (n,) within every group of ``space`` (built on the same n
    rows), (G,); NaN where a group has no positive or no negative."""
    import numpy as np

    ordered = _Ordered(z, y)
    found = np.empty(len(space))
    for part, masks in _chunks(space):
        found[part] = ordered.within(masks)
    return found


def group_gaps_and_drops(
    z: Any, attacked: Any, y: Any, space: GroupSpace
) -> tuple[FloatArray, FloatArray]:
    """:func:`group_gaps` and :func:`group_drops` at once, (G,) each: the untouched pass
    serves both."""
    import numpy as np

    clean, under = _Ordered(z, y), _Ordered(attacked, y)
    gaps, drops = np.empty(len(space)), np.empty(len(space))
    for part, masks in _chunks(space):
        inside, outside = clean.within_and_outside(masks)
        gaps[part] = outside - inside
        drops[part] = inside - under.within(masks)
    return gaps, drops


def mask_gap(z: Any, y: Any, mask: Any) -> float:
    """The AUROC gap of scores ``z`` on the rows of ``mask``."""
    import numpy as np

    order = np.argsort(np.asarray(z), kind="stable")
    ys = np.asarray(y, dtype=bool)[order]
    inside = np.asarray(mask, dtype=bool)[order][None, :]
    return float((aurocs(~inside, ys) - aurocs(inside, ys))[0])


def _masks(space: GroupSpace, part: slice) -> Any:
    import numpy as np

    return np.unpackbits(space.packed[part], axis=1, count=space.rows).view(bool)


def group_drops(z: Any, attacked: Any, y: Any, space: GroupSpace) -> FloatArray:
    """The AUROC of scores ``z`` (n,) less that of ``attacked`` (n,), the scores of the same
    rows under attack, within every group of ``space``, (G,)."""
    return group_gaps_and_drops(z, attacked, y, space)[1]


def mask_drop(z: Any, attacked: Any, y: Any, mask: Any) -> float:
    """The AUROC of scores ``z`` less that of ``attacked`` within the rows of ``mask``."""
    import numpy as np

    inside = np.asarray(mask, dtype=bool)[None, :]
    labels = np.asarray(y, dtype=bool)
    found = []
    for score in (z, attacked):
        order = np.argsort(np.asarray(score), kind="stable")
        found.append(float(aurocs(inside[:, order], labels[order])[0]))
    return found[0] - found[1]
