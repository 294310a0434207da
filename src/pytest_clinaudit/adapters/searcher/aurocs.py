"""AUROCs within every group at once: one model's scores sorted once, each group's
negatives counted along them (Mann-Whitney, ties counted half), and their standard
errors."""

from __future__ import annotations

from typing import Any


class Ranked:
    """One model's scores, sorted once: what every group's AUROC needs (Mann-Whitney counts,
    ties counted half)."""

    def __init__(self, score: Any, y: Any) -> None:
        import numpy as np

        self.order = np.argsort(score, kind="stable")
        s = np.asarray(score, dtype=np.float64)[self.order]
        positive = np.asarray(y)[self.order] == 1
        self.negative = ~positive
        n = len(s)
        self.positives = np.flatnonzero(positive)
        # Each row's tie block [start, end): the rows with exactly its score.
        new = np.r_[True, s[1:] != s[:-1]] if n else np.zeros(0, dtype=bool)
        starts = np.flatnonzero(new)
        block = np.cumsum(new) - 1
        start = starts[block]
        end = np.r_[starts[1:], n][block]
        tied = (end - start > 1)[self.positives]
        self.tied = np.flatnonzero(tied)
        self.tied_start = start[self.positives][tied]
        self.tied_end = end[self.positives][tied]
        # Twice the negatives below each positive, ties counted half.
        every = np.r_[0, np.cumsum(self.negative)]
        self.A2 = (every[start] + every[end])[self.positives].astype(np.float64)
        self.n1, self.n0 = len(self.positives), int(self.negative.sum())
        self.total2 = float(self.A2.sum())
        # A group's negatives are counted between consecutive points: the positives and
        # the ends of their tie blocks. Column k of the counts: the negatives before
        # points[k]; the last column: all of them.
        ends = self.tied_end[self.tied_end < n]
        self.points = np.unique(np.r_[0, self.positives, self.tied_start, ends]).astype(np.intp)
        self.at_positive = np.searchsorted(self.points, self.positives)
        self.at_start = np.searchsorted(self.points, self.tied_start)
        self.at_end = np.searchsorted(self.points, self.tied_end)  # n: the last column

    def aurocs(self, M: Any) -> tuple[Any, Any]:
        """AUROC within each group of ``M`` (G, n), rows in this order, and within the rest."""
        import numpy as np

        G, n = M.shape
        counted = np.zeros((G, len(self.points) + 1), dtype=np.int32)
        if n:
            between = np.add.reduceat(
                (M & self.negative).view(np.uint8), self.points, axis=1, dtype=np.int32
            )
            np.cumsum(between, axis=1, out=counted[:, 1:])
        # Twice each group's negatives below each positive (ties counted half).
        B2 = 2 * counted[:, self.at_positive]
        if len(self.tied):
            B2[:, self.tied] = counted[:, self.at_start] + counted[:, self.at_end]
        inside = M[:, self.positives]
        within2 = np.where(inside, B2, 0).sum(axis=1, dtype=np.float64)
        n1g = inside.sum(axis=1)
        n0g = counted[:, -1].astype(np.int64)
        # The rest's pairs: every pair, less those with the positive inside the group or
        # the negative inside it, plus those with both inside (counted twice).
        rest2 = (
            self.total2
            - inside.astype(np.float64) @ self.A2
            - B2.sum(axis=1, dtype=np.float64)
            + within2
        )
        n1c, n0c = self.n1 - n1g, self.n0 - n0g
        with np.errstate(invalid="ignore", divide="ignore"):
            auc_in = np.where((n1g > 0) & (n0g > 0), within2 / (2.0 * n1g * n0g), np.nan)
            auc_out = np.where((n1c > 0) & (n0c > 0), rest2 / (2.0 * n1c * n0c), np.nan)
        return auc_in, auc_out


def group_aurocs(score: Any, y: Any, masks: Any) -> tuple[Any, Any]:
    """AUROC of ``score`` (n,) against ``y`` (n,) within each group of ``masks`` (G, n) and
    within its complement: two (G,) arrays, NaN where a side lacks a class.

    The Mann-Whitney count with ties as halves, for every group at once: the rows sorted
    by score once, each group's negatives counted cumulatively along them.
    """
    import numpy as np

    ranked = Ranked(score, y)
    return ranked.aurocs(np.asarray(masks, dtype=bool)[:, ranked.order])


def auroc_se(auc: Any, n1: Any, n0: Any) -> Any:
    """Hanley and McNeil's standard error of AUROCs ``auc`` measured on ``n1`` positives and
    ``n0`` negatives (arrays alike; infinite where a class is absent)."""
    import numpy as np

    auc, n1, n0 = (np.asarray(v, dtype=np.float64) for v in (auc, n1, n0))
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = auc * (1 - auc) + (n1 - 1) * (q1 - auc * auc) + (n0 - 1) * (q2 - auc * auc)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(np.maximum(var, 0.0) / (n1 * n0))
    return np.where((n1 > 0) & (n0 > 0) & np.isfinite(auc), se, np.inf)
