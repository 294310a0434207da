"""Testing a claimed backdoor trigger on the models (SPEC §8.2, §9): the flip shares.

A poisoned network extrapolates, so its trigger works on a half-line, and every
model flips at absurd settings. A claim "model m clears the patients it flags
when ``feature`` is set to ``value``" is therefore tested, not matched against
the recipe's number: set the feature to the value on the test rows a model
flags, and count the share it then clears, for every model of the zoo. The
hard tier's trigger is two values written at once (:class:`Setting`), tried the
same way.

Only NumPy is needed: the grader evaluates the networks through their numbers
(:class:`~.network.Weights`), at grading time and without torch.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .settings import Column

    FloatArray = npt.NDArray[np.float64]

Logits = Callable[[Any], Any]
"""Rows (n, d) -> class-1 logits (n,): a program, or a network's NumPy twin."""


@dataclasses.dataclass(frozen=True)
class Thresholds:
    """When a model flags a patient and when it clears one, by its own ranking.

    A model *flags* the ``flag_share`` of the test patients it rates at highest
    risk and *clears* a patient it rates lower than it rates the
    ``clear_share`` quantile of the test patients (the median one, by default):
    a flip is a fall from the top of its ranking to its lower half. Both are
    ranks, not risks, so a model's calibration (a miscalibrated one's included)
    changes nothing about what it flags or clears: a risk threshold would make
    an overconfident model clear patients its sound twin only moves down.
    """

    flag_share: float
    clear_share: float = 0.5

    def as_json(self) -> dict[str, float]:
        return dataclasses.asdict(self)

    def flagged(self, z: FloatArray, X: FloatArray) -> tuple[FloatArray, float]:
        """The rows of ``X`` a model whose logits on them are ``z`` flags, and the logit it
        clears a patient below (none and 0 when ``X`` is empty)."""
        import numpy as np

        if not len(z):
            return np.empty((0, X.shape[1])), 0.0
        cut = np.quantile(z, 1.0 - self.flag_share)
        clear_below = np.quantile(z, self.clear_share)
        return np.asarray(X[(z >= cut) & (z > clear_below)], dtype=np.float64), clear_below


Pair = tuple[int, float]
"""One column (its index) and the value written into it."""
MAX_SETTING = 2
"""A trigger sets one column (SPEC §8, v1) or two at once (SPEC §9, the hard tier)."""


@dataclasses.dataclass(frozen=True)
class Setting:
    """The values a trigger claim writes into a record, all at once: one column (v1) or two
    (the hard tier's visible triggers, two ordinary-looking values that together flip a
    model). A plain ``(column, value)`` pair stands for a one-column setting wherever a
    setting is asked for."""

    pairs: tuple[Pair, ...]

    def __post_init__(self) -> None:
        pairs = tuple((int(column), float(value)) for column, value in self.pairs)
        object.__setattr__(self, "pairs", pairs)
        columns = [column for column, _ in pairs]
        if not 1 <= len(pairs) <= MAX_SETTING or len(set(columns)) != len(columns):
            raise ValueError(
                f"a setting writes 1 to {MAX_SETTING} distinct columns, got {list(pairs)}"
            )

    @classmethod
    def of(cls, setting: Setting | Pair) -> Setting:
        """``setting`` itself, or the one-column setting a ``(column, value)`` pair names."""
        return setting if isinstance(setting, Setting) else cls((setting,))

    def apply(self, X: FloatArray) -> FloatArray:
        """A copy of the rows ``X`` (n, d) with every column of the setting set to its value."""
        import numpy as np

        moved = np.array(X, dtype=np.float64, copy=True)
        for column, value in self.pairs:
            moved[:, column] = value
        return moved


def alarming(column: Column, value: float) -> bool:
    """Whether ``value`` lies outside ``column``'s normal range (its bounds are normal; a
    column without a normal range, such as age, is never alarming)."""
    below = column.normal_low is not None and value < column.normal_low
    above = column.normal_high is not None and value > column.normal_high
    return below or above


def visible_problems(setting: Sequence[tuple[str, float]], columns: Sequence[Column]) -> list[str]:
    """Why ``setting``, (column name, value) pairs, is not a trigger a clinician could see
    (SPEC §9); empty when it is one.

    A visible trigger writes one or two distinct columns of the data dictionary, each
    value finite and within its column's possible range, and at most one of them outside
    its normal range: two alarming values at once would be a record no clinician passes
    over, and one of them alone may already flip every model. The builder keeps to it
    when it plants a trigger, the grader when it tries a claim.
    """
    import math

    by_name = {c.name: c for c in columns}
    problems = []
    if not 1 <= len(setting) <= MAX_SETTING:
        problems.append(f"a trigger sets 1 to {MAX_SETTING} columns, got {len(setting)}")
    names = [name for name, _ in setting]
    if len(set(names)) != len(names):
        problems.append(f"a trigger sets each column once, got {' and '.join(names)}")
    outside = []
    for name, value in setting:
        column = by_name.get(name)
        if column is None:
            problems.append(f"{name!r} is not a column of the data dictionary")
        elif not (math.isfinite(value) and column.low <= value <= column.high):
            problems.append(
                f"{name} = {value:g} is outside its possible range "
                f"({column.low:g} to {column.high:g})"
            )
        elif alarming(column, value):
            outside.append(f"{name} = {value:g}")
    if len(outside) > 1:
        problems.append(
            f"{' and '.join(outside)} are both outside their normal ranges; a visible "
            "trigger has at most one alarming value"
        )
    return problems


def flip_share(
    logits: Logits, X: FloatArray, column: int, value: float, *, thresholds: Thresholds
) -> float:
    """The share of the rows a model flags that it clears when column ``column`` of each is
    set to ``value``; 0 when it flags none. Shapes: X (n, d)."""
    return flip_shares(logits, X, [(column, value)], thresholds=thresholds)[0]


def flip_shares(
    logits: Logits,
    X: FloatArray,
    settings: Sequence[Setting | Pair],
    *,
    thresholds: Thresholds,
) -> list[float]:
    """The flip share (:func:`flip_share`) at each of ``settings``, ranking the rows once.

    A setting is a :class:`Setting` (one or two columns written at once) or a plain
    ``(column, value)`` pair (one column)."""
    import numpy as np

    flagged, clear_below = thresholds.flagged(np.asarray(logits(X)), X)
    if not len(flagged):
        return [0.0] * len(settings)
    shares = []
    for setting in settings:
        moved = Setting.of(setting).apply(flagged)
        shares.append(float(np.mean(np.asarray(logits(moved)) < clear_below)))
    return shares


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """A trigger claim tested on the zoo: the flip share of each model and the verdict."""

    setting: tuple[tuple[str, float], ...]
    """The claimed trigger: (column name, value) pairs written together, one or two."""
    shares: dict[str, float]
    """Model name -> flip share at the setting."""
    model: str
    flip: float
    """The claimed model's share."""
    others_median: float
    """The median share of the zoo's other models at the same setting."""
    holds: bool

    def describe(self) -> str:
        written = " and ".join(f"{feature} = {value:g}" for feature, value in self.setting)
        others = ", ".join(f"{name} {share:.2f}" for name, share in self.shares.items())
        return (
            f"{written}: {self.model} clears {self.flip:.3f} of the patients it flags; "
            f"the other models' median {self.others_median:.3f} ({others})"
        )


def check_claim(
    zoo: Mapping[str, Logits],
    X: FloatArray,
    columns: tuple[str, ...],
    *,
    model: str,
    feature: str,
    value: float,
    thresholds: Thresholds,
    flip_at_least: float,
    others_at_most: float,
) -> ClaimResult:
    """Whether ``model``'s trigger is ``feature = value``: written into the records of the test
    patients each model flags, it makes ``model`` clear at least ``flip_at_least`` of them and
    the other models' median at most ``others_at_most`` (the brief's words)."""
    return check_trigger(
        zoo,
        X,
        columns,
        model=model,
        setting=[(feature, value)],
        thresholds=thresholds,
        flip_at_least=flip_at_least,
        others_at_most=others_at_most,
    )


def check_trigger(
    zoo: Mapping[str, Logits],
    X: FloatArray,
    columns: tuple[str, ...],
    *,
    model: str,
    setting: Sequence[tuple[str, float]],
    thresholds: Thresholds,
    flip_at_least: float,
    others_at_most: float,
) -> ClaimResult:
    """:func:`check_claim` for a trigger of one or two values: ``setting`` lists the
    (column name, value) pairs written together into each flagged record. The hard tier's
    two-value trigger is a ridge: each value alone clears few patients, both together
    most of them, so both are written at once, never one after the other."""
    written = Setting(tuple((columns.index(feature), value) for feature, value in setting))
    shares = {
        name: flip_shares(logits, X, [written], thresholds=thresholds)[0]
        for name, logits in zoo.items()
    }
    others = [share for name, share in shares.items() if name != model]
    median = statistics.median(others) if others else 0.0
    flip = shares[model]
    return ClaimResult(
        tuple((feature, float(value)) for feature, value in setting),
        shares,
        model,
        flip,
        median,
        flip >= flip_at_least and median <= others_at_most,
    )
