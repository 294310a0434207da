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
    import numpy as np

    positive = order_masks & ys
    negative = order_masks & ~ys
    below = np.cumsum(negative, axis=1, dtype=np.int32)
    u = (below * positive).sum(axis=1, dtype=np.float64)
    pairs = positive.sum(axis=1, dtype=np.float64) * negative.sum(axis=1, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(pairs > 0, u / np.maximum(pairs, 1), np.nan)


def group_gaps(z: Any, y: Any, space: GroupSpace) -> FloatArray:
    """The AUROC gap (complement less group) of scores ``z`` (n,) on every group of
    ``space`` (built on the same n rows), (G,). Ties in ``z`` are broken by row order."""
    import numpy as np

    order = np.argsort(np.asarray(z), kind="stable")
    ys = np.asarray(y, dtype=bool)[order]
    gaps = np.empty(len(space))
    for start in range(0, len(space), _CHUNK):
        part = slice(start, min(start + _CHUNK, len(space)))
        masks = _masks(space, part)[:, order]
        gaps[part] = aurocs(~masks, ys) - aurocs(masks, ys)
    return gaps


def mask_gap(z: Any, y: Any, mask: Any) -> float:
    """The AUROC gap of scores ``z`` on the rows of ``mask``."""
    import numpy as np

    order = np.argsort(np.asarray(z), kind="stable")
    ys = np.asarray(y, dtype=bool)[order]
    inside = np.asarray(mask, dtype=bool)[order][None, :]
    return float((aurocs(~inside, ys) - aurocs(inside, ys))[0])


def _masks(space: GroupSpace, part: slice) -> Any:
    import numpy as np

    return np.unpackbits(space.packed[part], axis=1, count=space.rows).astype(bool)


def group_drops(z: Any, attacked: Any, y: Any, space: GroupSpace) -> FloatArray:
    """The AUROC of scores ``z`` (n,) less that of ``attacked`` (n,), the scores of the same
    rows under attack, within every group of ``space``, (G,)."""
    import numpy as np

    clean = np.argsort(np.asarray(z), kind="stable")
    under = np.argsort(np.asarray(attacked), kind="stable")
    labels = np.asarray(y, dtype=bool)
    drops = np.empty(len(space))
    for start in range(0, len(space), _CHUNK):
        part = slice(start, min(start + _CHUNK, len(space)))
        masks = _masks(space, part)
        drops[part] = aurocs(masks[:, clean], labels[clean]) - aurocs(
            masks[:, under], labels[under]
        )
    return drops


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
