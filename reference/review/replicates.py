"""Bootstrap replicates of the four components from per-row data, resampled jointly.

Joint resampling. The components share test rows: calibration uses all of
them, FGSM, the walk and the non-members subsets of them. One replicate draws
the test set once (``n_test`` row indices with replacement, turned into
per-row counts), and every component weights *its* rows by those counts, so a
patient drawn twice counts twice wherever it is used, and the components'
replicates are correlated as the real sampling correlates them. A component on
a subset of ``k`` rows then sees a resample of random size (mean ``k``), which is
how a random subset of a resampled set behaves. Members (training rows) are
resampled on their own, independently. The SPS and the verdict of a replicate
come from that replicate's four components.

Every statistic is returned *before* any clipping to [0, 1] (a component of
``1 - drop`` can exceed 1 when the attack helps the model): the BCa interval
(:mod:`.bca`) is computed on that scale and its ends clipped after, which is
how an interval of a monotone transform is transformed. Besides the four
components, each replicate gives the full test set's AUROC, Brier score and
the task's ECE, so that those diagnostics get intervals too.

The same function turns the *jackknife*'s count vectors (every row once, one
group of rows left out, :func:`jackknife_chunks`) into the leave-one-out values
BCa's acceleration needs.

Memory and time: a replicate is a vector of integer counts; replicates are
processed in chunks of at most :data:`CHUNK_ENTRIES` counts, so memory does not
grow with ``n_boot``. Per chunk, the calibration, Brier and membership sums
over the test rows are one matrix product with a fixed per-row design
(:func:`row_design`); the AUROC takes a cumulative sum over the rows sorted
once (:class:`AUCPlan`), and only the small FGSM and walk subsets are gathered.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    BoolArray = npt.NDArray[np.bool_]


CHUNK_ENTRIES = 1 << 22
"""Counts per chunk of replicates (4M int64 = 32 MB); bounds memory at any size."""


@dataclasses.dataclass(frozen=True, eq=False)
class FGSMRows:
    """The FGSM component's rows: test-row indices (k,), labels, clean and adversarial p."""

    test_index: IntArray
    y: IntArray
    p_clean: FloatArray
    p_adversarial: FloatArray
    single_class_score: float


@dataclasses.dataclass(frozen=True, eq=False)
class MembershipRows:
    """The membership component's per-row decisions: did the attack say "member"?

    ``member_flagged`` (n_members,) are the member rows in the members' own index
    space; ``nonmember_test_index`` (n_nonmembers,) say which test rows the
    non-members are, so they are resampled with the rest of the test set. A call
    is 0/1, or the share of the cross-fitting's fold draws that said "member"
    (:mod:`.advantage`). The component is ``1 - (TPR - FPR)``: one minus the
    membership advantage.
    """

    member_flagged: FloatArray | BoolArray
    nonmember_test_index: IntArray
    nonmember_flagged: FloatArray | BoolArray


@dataclasses.dataclass(frozen=True, eq=False)
class CalibrationRows:
    """The calibration component's rows: test-row indices, labels, probabilities."""

    test_index: IntArray
    y: IntArray
    p: FloatArray
    n_bins: int
    ece_scale: float


@dataclasses.dataclass(frozen=True, eq=False)
class WalkRows:
    """The boundary walk's rows: test-row indices and steps to the first flip."""

    test_index: IntArray
    steps: IntArray
    max_steps: int


@dataclasses.dataclass(frozen=True, eq=False)
class ComponentRows:
    """Every component's per-row data, as one audit produced it."""

    n_test: int
    fgsm: FGSMRows
    membership: MembershipRows
    calibration: CalibrationRows
    walk: WalkRows


@dataclasses.dataclass(frozen=True, eq=False)
class AUCPlan:
    """Rows sorted once by score, for the AUROC of many count-weighted replicates."""

    order: IntArray
    starts: IntArray
    """First sorted position of each run of tied scores."""
    positive: BoolArray
    """Shape (k,), in sorted order."""

    @classmethod
    def of(cls, scores: Any, labels: Any) -> AUCPlan:
        import numpy as np

        order = np.argsort(np.asarray(scores), kind="stable")
        ranked = np.asarray(scores)[order]
        starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]]) if len(ranked) else order
        return cls(order, starts, np.asarray(labels)[order] == 1)

    def auc(self, weights: Any) -> tuple[FloatArray, BoolArray]:
        """AUROC of each row of ``weights`` (b, k); NaN (and not defined) on one class."""
        import numpy as np

        W = np.asarray(weights)[:, self.order]
        b = W.shape[0]
        if not W.shape[1]:
            return np.full(b, np.nan), np.zeros(b, dtype=bool)
        pos = np.add.reduceat(np.where(self.positive, W, 0), self.starts, axis=1)
        neg = np.add.reduceat(np.where(self.positive, 0, W), self.starts, axis=1)
        pos, neg = pos.astype(np.float64), neg.astype(np.float64)
        below = np.cumsum(neg, axis=1) - neg
        numerator = np.sum(pos * (below + 0.5 * neg), axis=1)
        n_pos, n_neg = pos.sum(axis=1), neg.sum(axis=1)
        defined = (n_pos > 0) & (n_neg > 0)
        safe = np.where(defined, n_pos * n_neg, 1.0)
        auc: FloatArray = np.where(defined, numerator / safe, np.nan)
        return auc, defined


def weighted_auc(
    scores: FloatArray, labels: IntArray, weights: FloatArray
) -> tuple[FloatArray, BoolArray]:
    """AUROC of each replicate, rows weighted by integer counts; shapes (b,).

    ``weights`` is (b, k). A row of weight ``c`` counts as ``c`` copies, so this
    equals ``roc_auc_score`` on the resampled rows; ties count one half. The sort
    is done once for all replicates (:class:`AUCPlan`); each replicate costs a
    cumulative sum. Returns the AUCs and whether each is defined (both classes
    present).
    """
    return AUCPlan.of(scores, labels).auc(weights)


def _fgsm_scores(rows: FGSMRows, W: FloatArray) -> FloatArray:
    """``1 - (AUROC clean - AUROC adversarial)`` per replicate, before clipping to [0, 1]."""
    import numpy as np

    clean, defined = weighted_auc(rows.p_clean, rows.y, W)
    adversarial, _ = weighted_auc(rows.p_adversarial, rows.y, W)
    result: FloatArray = np.where(defined, 1.0 - (clean - adversarial), rows.single_class_score)
    return result


def row_design(rows: ComponentRows) -> FloatArray:
    """Per-test-row columns whose count-weighted sums give calibration and membership.

    Shape (n_test, 4 * n_bins + 4 + 3 * EQUAL_MASS_BINS). For the calibration
    rows: a one-hot of the curve's bin, the same times ``p`` and times ``y``, and
    a one-hot of the half-open count bin (none for ``p == 1.0``); then the
    non-members flagged "member", a 1 for every non-member, the squared error
    ``(p - y)^2`` and a 1 for every calibration row (the Brier score's sums);
    then a one-hot of each row's equal-mass bin, times ``p`` and times ``y`` (the
    debiased L2 error's sums; the bins are the sample's, held fixed, as the
    bins of the task's ECE are). A replicate's sums are then one matrix product
    ``counts @ design`` (BLAS) instead of a pass per statistic, and no (b, n)
    array is copied or gathered.
    """
    import numpy as np

    from .diagnostics import EQUAL_MASS_BINS, equal_mass_bin_ids

    c, m = rows.calibration, rows.membership
    n_bins = c.n_bins
    prob = np.asarray(c.p, dtype=np.float64)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # The curve's bins put an inner edge value in the lower bin (side "left" on
    # the inner edges); the counts' half-open bins put it in the upper one.
    curve_bin = np.searchsorted(edges[1:-1], prob)
    count_bin = np.searchsorted(edges, prob, side="right") - 1
    counted = (count_bin >= 0) & (count_bin < n_bins)
    index = np.asarray(c.test_index)
    k = EQUAL_MASS_BINS
    design = np.zeros((rows.n_test, 4 * n_bins + 4 + 3 * k))
    # np.add.at: a test row listed twice in a component counts twice.
    np.add.at(design, (index, curve_bin), 1.0)
    np.add.at(design, (index, n_bins + curve_bin), prob)
    np.add.at(design, (index, 2 * n_bins + curve_bin), (np.asarray(c.y) == 1).astype(np.float64))
    np.add.at(design, (index[counted], 3 * n_bins + count_bin[counted]), 1.0)
    nonmembers = np.asarray(m.nonmember_test_index)
    np.add.at(design[:, 4 * n_bins], nonmembers, np.asarray(m.nonmember_flagged, dtype=np.float64))
    np.add.at(design[:, 4 * n_bins + 1], nonmembers, 1.0)
    np.add.at(design[:, 4 * n_bins + 2], index, (prob - np.asarray(c.y, dtype=np.float64)) ** 2)
    np.add.at(design[:, 4 * n_bins + 3], index, 1.0)
    mass = 4 * n_bins + 4 + equal_mass_bin_ids(prob, k)
    np.add.at(design, (index, mass), 1.0)
    np.add.at(design, (index, mass + k), prob)
    np.add.at(design, (index, mass + 2 * k), (np.asarray(c.y) == 1).astype(np.float64))
    return design


def _debiased_l2(counts: FloatArray, p_sums: FloatArray, y_sums: FloatArray) -> FloatArray:
    """Kumar et al.'s debiased squared calibration error of each replicate, shape (b,).

    Inputs are per-replicate equal-mass bin sums, each (b, k); as
    :func:`~.diagnostics.debiased_l2_calibration_error`, a bin of fewer than two
    rows counts 0.
    """
    import numpy as np

    total = counts.sum(axis=1)
    safe = np.where(counts > 0, counts, 1.0)
    mean_p, mean_y = p_sums / safe, y_sums / safe
    variance = mean_y * (1.0 - mean_y) / np.maximum(counts - 1.0, 1.0)
    per_bin = np.where(counts > 1, (mean_p - mean_y) ** 2 - variance, 0.0)
    squared: FloatArray = np.where(
        total > 0, np.sum(counts * per_bin, axis=1) / np.where(total > 0, total, 1.0), np.nan
    )
    return squared


def _task_ece(
    totals: FloatArray, sums: FloatArray, trues: FloatArray, counts: FloatArray
) -> FloatArray:
    """The task's ECE (SPEC §3.3, quirks included) of each replicate, shape (b,).

    Inputs are per-replicate bin sums, each (b, n_bins): rows in each curve bin,
    their probabilities and positives, and rows in each half-open count bin.
    Mirrors :func:`~.attacks.task_ece`: the curve over its non-empty bins, the
    counts by bin index truncated to as many entries, paired by position.
    """
    import numpy as np

    n_bins = totals.shape[1]
    nonempty = totals > 0
    safe = np.where(nonempty, totals, 1.0)
    frac, mean = trues / safe, sums / safe
    # Move each replicate's non-empty bins to the front, in bin order.
    front = np.argsort(~nonempty, axis=1, kind="stable")
    gap = np.abs(np.take_along_axis(frac, front, 1) - np.take_along_axis(mean, front, 1))
    used = np.arange(n_bins)[None, :] < nonempty.sum(axis=1)[:, None]
    kept = np.where(used, counts, 0.0)
    total = kept.sum(axis=1)
    weighted = np.sum(kept * np.where(used, gap, 0.0), axis=1)
    ece: FloatArray = np.where(total > 0, weighted / np.where(total > 0, total, 1.0), 0.0)
    return ece


def _walk_scores(rows: WalkRows, W: FloatArray) -> FloatArray:
    import numpy as np

    total = W.sum(axis=1)
    mean = (W @ np.asarray(rows.steps, dtype=np.float64)) / np.where(total > 0, total, 1.0)
    result: FloatArray = np.where(total > 0, np.minimum(1.0, mean / rows.max_steps), np.nan)
    return result


DIAGNOSTICS = ("auroc", "brier", "ece", "debiased_l2")
"""Statistics of the full test set that replicate next to the components."""


@dataclasses.dataclass(frozen=True, eq=False)
class Prepared:
    """What every chunk of replicates of one audit shares: the design and the sort."""

    rows: ComponentRows
    design: FloatArray
    auroc: AUCPlan

    @classmethod
    def of(cls, rows: ComponentRows) -> Prepared:
        c = rows.calibration
        return cls(rows, row_design(rows), AUCPlan.of(c.p, c.y))


def component_replicates(
    rows: ComponentRows | Prepared,
    test_counts: IntArray,
    member_counts: IntArray,
    *,
    diagnostics: bool = True,
) -> dict[str, FloatArray]:
    """The four components (before clipping) and the diagnostics of each replicate.

    Parameters
    ----------
    rows
        Every component's per-row data, or its :class:`Prepared` form (which
        saves rebuilding the design and the sort for every chunk).
    test_counts
        (b, n_test): how many times each test row is drawn in each replicate.
    member_counts
        (b, n_members): the same for the membership component's member rows.
    diagnostics
        Also compute :data:`DIAGNOSTICS` (the AUROC is the costly one).

    Returns
    -------
    Each of :data:`~.params.COMPONENTS` (on the scale before clipping to
    [0, 1]) and of :data:`DIAGNOSTICS` mapped to shape (b,); NaN where a
    replicate holds none of the statistic's rows.
    """
    import numpy as np

    prepared = rows if isinstance(rows, Prepared) else Prepared.of(rows)
    rows = prepared.rows
    T = np.asarray(test_counts, dtype=np.float64)
    M = np.asarray(member_counts, dtype=np.float64)
    sums = T @ prepared.design
    n_bins = rows.calibration.n_bins
    totals, p_sums, trues, counts = (sums[:, k * n_bins : (k + 1) * n_bins] for k in range(4))
    ece = _task_ece(totals, p_sums, trues, counts)

    m = rows.membership
    n_members = M.sum(axis=1)
    flagged_members = M @ np.asarray(m.member_flagged, dtype=np.float64)
    flagged_nonmembers, n_nonmembers = sums[:, 4 * n_bins], sums[:, 4 * n_bins + 1]
    defined = (n_members > 0) & (n_nonmembers > 0)
    tpr = flagged_members / np.where(n_members > 0, n_members, 1.0)
    fpr = flagged_nonmembers / np.where(n_nonmembers > 0, n_nonmembers, 1.0)
    result = {
        "fgsm_robustness": _fgsm_scores(rows.fgsm, T[:, rows.fgsm.test_index]),
        "membership_inference_resistance": np.where(defined, 1.0 - (tpr - fpr), np.nan),
        "calibration_ece": 1.0 - rows.calibration.ece_scale * ece,
        "boundary_attack_resistance": _walk_scores(rows.walk, T[:, rows.walk.test_index]),
    }
    if diagnostics:
        squared, seen = sums[:, 4 * n_bins + 2], sums[:, 4 * n_bins + 3]
        result["auroc"] = prepared.auroc.auc(np.asarray(test_counts))[0]
        result["brier"] = np.where(seen > 0, squared / np.where(seen > 0, seen, 1.0), np.nan)
        result["ece"] = ece
        first, k = 4 * n_bins + 4, (prepared.design.shape[1] - 4 * n_bins - 4) // 3
        result["debiased_l2"] = _debiased_l2(
            sums[:, first : first + k], sums[:, first + k : first + 2 * k], sums[:, first + 2 * k :]
        )
    return result


def resample_counts(rng: np.random.RandomState, n_boot: int, n: int) -> IntArray:
    """(n_boot, n) counts: each replicate draws ``n`` of ``n`` rows with replacement.

    Integer index draws (``rng.randint``, 32-bit: half the memory traffic of the
    default 64-bit draws), then one ``bincount`` per chunk: the classical
    bootstrap, at a fraction of the cost of a multinomial over ``n`` categories.
    """
    import numpy as np

    if n == 0:
        return np.zeros((n_boot, 0), dtype=np.int64)
    dtype = np.int32 if n_boot * n < 2**31 else np.int64
    draws = rng.randint(0, n, size=(n_boot, n), dtype=dtype)
    draws += (np.arange(n_boot, dtype=dtype) * dtype(n))[:, None]
    counts: IntArray = np.bincount(draws.ravel(), minlength=n_boot * n).reshape(n_boot, n)
    return counts


def jackknife_groups(n: int, max_groups: int, *, seed: int) -> IntArray:
    """Group of each of ``n`` rows for the jackknife: each row its own group when
    ``n <= max_groups``, else ``max_groups`` groups of a seeded random partition."""
    import numpy as np

    if n <= max_groups:
        return np.arange(n, dtype=np.int64)
    position = np.empty(n, dtype=np.int64)
    position[np.random.RandomState(seed).permutation(n)] = np.arange(n)
    groups: IntArray = position % max_groups
    return groups


def jackknife_chunks(groups: IntArray, n_groups: int) -> Iterator[IntArray]:
    """(g, n) count chunks: every row once, except one group left out per row of the chunk."""
    import numpy as np

    n = len(groups)
    per_chunk = max(1, min(n_groups, CHUNK_ENTRIES // max(n, 1)))
    for first in range(0, n_groups, per_chunk):
        left_out = np.arange(first, min(first + per_chunk, n_groups))
        counts: IntArray = (groups[None, :] != left_out[:, None]).astype(np.int32)
        yield counts


def count_chunks(
    seed: int, n_boot: int, n_test: int, n_members: int
) -> Iterator[tuple[IntArray, IntArray]]:
    """Seeded (test_counts, member_counts) chunks covering ``n_boot`` replicates.

    Test rows are drawn from ``RandomState(seed)`` and member rows from
    ``RandomState(seed + 1)``; each stream is consumed replicate after replicate,
    so the replicates are the same whatever the chunk size.
    """
    import numpy as np

    test_rng, member_rng = np.random.RandomState(seed), np.random.RandomState(seed + 1)
    per_chunk = max(1, min(n_boot, CHUNK_ENTRIES // max(n_test, n_members, 1)))
    done = 0
    while done < n_boot:
        b = min(per_chunk, n_boot - done)
        yield resample_counts(test_rng, b, n_test), resample_counts(member_rng, b, n_members)
        done += b
