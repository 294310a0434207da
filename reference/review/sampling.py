"""Own-data sampling: which rows the audit uses, independent of the file's row order.

The task's semantics take members and the shadow pool as the *first* rows of the
training file, so sorting a file by label changed a model's membership score
(issue 12: 0.94 against 0.887 for the same model). Here every sample is drawn as
``canonical[RandomState(seed).permutation(n)[:k]]`` where ``canonical`` orders
rows by their content. Reordering the file's rows leaves the set of rows, and so
``canonical`` as a sequence of rows, unchanged; the seeded draw then picks the
same rows, in the same order, whatever the file order was.

Why a hash of the content rather than a lexicographic sort: both are functions of
the content only, which is all invariance needs, but a hash order is one
``argsort`` of a uint64 key instead of a sort over every column, and it does not
line rows up by their first feature (a sorted prefix would be a biased sample
should anyone ever take one). Rows with equal hashes are equal rows (a 64-bit
collision between different rows, about 3e-8 likely at a million rows, is
detected and then resolved by the content itself), and equal rows are
interchangeable, so the drawn *content* is the same for every file order.

The training rows' per-feature standard deviation and range, the units of every
ε and step in training standard deviations, are :func:`~..attacks.budget.training_scale`.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..data import Dataset

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]
    UIntArray = npt.NDArray[np.uint64]

_MIX_1 = 0xBF58476D1CE4E5B9
_MIX_2 = 0x94D049BB133111EB
_GOLDEN = 0x9E3779B97F4A7C15


def _mix(z: UIntArray) -> UIntArray:
    """The splitmix64 finaliser: a bijection of uint64 that spreads every input bit."""
    import numpy as np

    z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX_1)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX_2)
    mixed: UIntArray = z ^ (z >> np.uint64(31))
    return mixed


def _content(X: FloatArray, y: IntArray | None) -> FloatArray:
    """The rows as float64 with the label as a last column, in a canonical bit pattern.

    ``-0.0`` becomes ``0.0`` and every NaN the one quiet NaN, so rows that compare
    as equal numbers (what a CSV parser may spell either way) hash equally.
    """
    import numpy as np

    rows = np.asarray(X, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"rows must be 2-D, got shape {rows.shape}")
    if y is not None:
        labels = np.asarray(y, dtype=np.float64)
        if labels.shape != (rows.shape[0],):
            raise ValueError(f"labels have shape {labels.shape}, expected ({rows.shape[0]},)")
        rows = np.column_stack([rows, labels])
    rows = rows + 0.0  # -0.0 + 0.0 == +0.0
    return np.where(np.isnan(rows), np.nan, rows)


def row_hashes(X: FloatArray, y: IntArray | None = None) -> UIntArray:
    """A 64-bit hash of each row's content (features, then label), shape (n,)."""
    import numpy as np

    content = np.ascontiguousarray(_content(X, y))
    words = content.view(np.uint64)
    h = np.full(content.shape[0], _GOLDEN, dtype=np.uint64)
    for j in range(words.shape[1]):  # a loop over columns, never over rows
        h = _mix(h ^ _mix(words[:, j] + np.uint64(j + 1)))
    return h


def canonical_order(X: FloatArray, y: IntArray | None = None) -> IntArray:
    """Row indices ordered by content hash: a function of the set of rows, not their order.

    Returns indices into ``X``, shape (n,). Any permutation of the rows gives the
    indices of the same rows in the same order (equal rows are interchangeable).
    """
    import numpy as np

    hashes = row_hashes(X, y)
    order = np.argsort(hashes, kind="stable")
    sorted_hashes = hashes[order]
    same = sorted_hashes[1:] == sorted_hashes[:-1]
    if same.any():
        content = _content(X, y)[order]
        left, right = content[:-1][same], content[1:][same]
        equal = (left == right) | (np.isnan(left) & np.isnan(right))
        if not equal.all():
            # A real collision: order by hash, then by content, column after column.
            content = _content(X, y)
            keys = [content[:, j] for j in range(content.shape[1] - 1, -1, -1)]
            order = np.lexsort([*keys, hashes])
    result: IntArray = order.astype(np.int64)
    return result


def sample_rows(
    X: FloatArray, y: IntArray | None, size: int | None, *, seed: int, presorted: bool = False
) -> IntArray:
    """``size`` row indices drawn at random with ``seed``, independent of row order.

    Parameters
    ----------
    X, y
        The rows (n, d) and their labels (n,), or None when labels do not matter.
    size
        How many rows to draw (all of them, shuffled, when None or at least n).
    seed
        Seed of a fresh ``numpy.random.RandomState``; its streams are frozen
        across NumPy releases (NEP 19), so a seed names the same rows everywhere.
    presorted
        The rows are already in :func:`canonical_order` (an audit sorts each split
        once), so hashing them again is skipped: it would give the identity.

    Returns
    -------
    Indices into ``X``, shape (min(size, n),), in draw order.
    """
    import numpy as np

    if size is not None and size < 0:
        raise ValueError(f"size must be >= 0, got {size}")
    n = int(np.asarray(X).shape[0])
    k = n if size is None else min(size, n)
    permutation = np.random.RandomState(seed).permutation(n)[:k]
    drawn: IntArray = permutation if presorted else canonical_order(X, y)[permutation]
    return drawn


@dataclasses.dataclass(frozen=True)
class MembershipSample:
    """Rows of a membership evaluation; every index array in draw order.

    Attributes
    ----------
    members
        Training-row indices queried as members, shape (n_members,).
    nonmembers
        Test-row indices queried as non-members, shape (n_nonmembers,).
    pool
        Training-row indices of the shadow-model pool, shape (n_pool,). The pool
        and the members are prefixes of one seeded permutation, as the task's
        pool and members are prefixes of the file: only the order changes.
    """

    members: IntArray
    nonmembers: IntArray
    pool: IntArray


def membership_sample(
    X_train: FloatArray,
    y_train: IntArray,
    X_test: FloatArray,
    y_test: IntArray,
    *,
    seed: int,
    pool_cap: int,
    size: int | None = None,
    presorted: bool = False,
) -> MembershipSample:
    """Members, non-members and the shadow pool of the own-data profile.

    ``min(n_train, size)`` members and ``min(n_test, size)`` non-members. The
    groups may differ in size: the membership component is the attack's
    advantage, TPR - FPR, which weighs each group by its own size (a balanced
    accuracy), so guessing scores 0 whatever the sizes. (Plain accuracy over
    100 members and 469 non-members let an attack that calls every row a member
    score 0.176, and the task's formula a perfect component, issue 18.) The
    shadow pool is ``min(pool_cap, n_train)`` training rows.
    """
    import numpy as np

    n_train, n_test = len(X_train), len(X_test)
    cap = max(n_train, n_test) if size is None else size
    n_members, n_nonmembers = min(n_train, cap), min(n_test, cap)
    train_order = sample_rows(X_train, y_train, None, seed=seed, presorted=presorted)
    # A different stream for the test rows: with one seed the two permutations
    # would be equal whenever the splits have equal sizes.
    test_order = sample_rows(X_test, y_test, None, seed=seed + 1, presorted=presorted)
    return MembershipSample(
        members=np.ascontiguousarray(train_order[:n_members]),
        nonmembers=np.ascontiguousarray(test_order[:n_nonmembers]),
        pool=np.ascontiguousarray(train_order[: min(pool_cap, n_train)]),
    )


def draw_canonical(n: int, k: int, seed: int) -> IntArray:
    """``k`` of ``n`` rows in canonical order, by a seeded permutation (order-free draws)."""
    import numpy as np

    permutation: IntArray = np.random.RandomState(seed).permutation(n)[: min(k, n)]
    return permutation


def canonical(data: Dataset) -> Dataset:
    """``data`` with each split in canonical row order (a function of its rows' content)."""
    from ..data import Dataset as Split

    train = canonical_order(data.X_train, data.y_train)
    test = canonical_order(data.X_test, data.y_test)
    return Split(
        name=data.name,
        label=data.label,
        feature_names=data.feature_names,
        X_train=data.X_train[train],
        y_train=data.y_train[train],
        X_test=data.X_test[test],
        y_test=data.y_test[test],
    )
