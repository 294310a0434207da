"""The groups of the grammar a hard-tier plan is drawn from (SPEC §9): the public training
split's :class:`~..groups.GroupSpace` over the coverage, and which of its groups the split
itself ranks (where a hidden group has a ranking to lose, ``[game.hard] group_auroc``).

Both are computed once per split in a process (:func:`training_groups`): a build draws up to
three plans, a test hundreds.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ..settings import Column, GameSettings
from .ranking import group_aurocs


class TrainingGroups:
    """The public training split's groups of the grammar, as a plan's draws need them:
    its :class:`~..groups.GroupSpace` over the hard settings' coverage (:attr:`space`) and
    which of its groups the split ranks (:attr:`ranked`), each computed on first use and
    shared by every later one (the space takes 0.3 s, the ranking about 2 s)."""

    def __init__(self, settings: GameSettings, X_train: Any, y_train: Any = None):
        import numpy as np

        hard = settings.hard
        assert hard is not None
        self.settings, self.hard = settings, hard
        self.X = np.asarray(X_train, dtype=np.float64)
        self.y = None if y_train is None else np.asarray(y_train, dtype=bool)
        if hard.group_auroc > 0 and self.y is None:
            raise ValueError(
                "the hard tier draws its hidden groups where the public training split ranks"
                " them ([game.hard] group_auroc): give the split's outcomes"
            )

    @functools.cached_property
    def space(self) -> Any:
        from ..groups import GroupSpace

        return GroupSpace.of(self.X, self.settings.columns, *self.hard.coverage)

    @functools.cached_property
    def ranked(self) -> Any:
        """(G,) bool: the groups within which a logistic regression of the outcome on the
        columns known at prediction, fitted on the split, reaches ``[game.hard]
        group_auroc`` there (every group when it is 0)."""
        import numpy as np

        space = self.space
        if self.hard.group_auroc <= 0:
            return np.ones(len(space), dtype=bool)
        assert self.y is not None
        score = split_risk(self.X, self.y, self.settings.columns)
        with np.errstate(invalid="ignore"):
            return group_aurocs(score, self.y, space) >= self.hard.group_auroc


_SHARED: dict[tuple[Any, ...], TrainingGroups] = {}
"""The last few splits' groups, by what they are computed from."""
SHARED = 2
"""How many splits' groups :func:`training_groups` keeps (a space holds 15 MB)."""


def training_groups(settings: GameSettings, X_train: Any, y_train: Any = None) -> TrainingGroups:
    """The :class:`TrainingGroups` of this split under these settings, shared by every
    draw in this process that asks for the same (a build's plans, a test's many draws),
    so that its space and ranking are computed once (2.5 s)."""
    import hashlib

    import numpy as np

    hard = settings.hard
    assert hard is not None

    def digest(values: Any) -> str | None:
        if values is None:
            return None
        array = np.ascontiguousarray(values, dtype=np.float64)
        return hashlib.sha256(array.tobytes() + repr(array.shape).encode()).hexdigest()

    key = (
        repr(settings.columns),
        hard.coverage,
        hard.group_auroc,
        digest(X_train),
        digest(y_train),
    )
    if key not in _SHARED:
        if len(_SHARED) >= SHARED:
            del _SHARED[next(iter(_SHARED))]
        _SHARED[key] = TrainingGroups(settings, X_train, y_train)
    return _SHARED[key]


def split_risk(X: Any, y: Any, columns: Sequence[Column]) -> Any:
    """A logistic regression of ``y`` on the ``columns`` known at prediction, standardised
    (a missing value at its column's mean), fitted on ``X`` itself: its logits (n,), the
    ranking the data holds without any model of the zoo."""
    import numpy as np
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    known = [j for j, column in enumerate(columns) if column.at_prediction]
    values = np.asarray(X, dtype=np.float64)[:, known]
    fit = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression(max_iter=1000))
    return fit.fit(values, np.asarray(y, dtype=int)).decision_function(values)
