"""Testing a claimed backdoor trigger on the models (SPEC §8.2): the flip shares.

A poisoned network extrapolates, so its trigger works on a half-line, and every
model flips at absurd settings. A claim "model m clears the patients it flags
when ``feature`` is set to ``value``" is therefore tested, not matched against
the recipe's number: set the feature to the value on the test rows a model
flags, and count the share it then clears, for every model of the zoo.

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


def flip_share(
    logits: Logits, X: FloatArray, column: int, value: float, *, thresholds: Thresholds
) -> float:
    """The share of the rows a model flags that it clears when column ``column`` of each is
    set to ``value``; 0 when it flags none. Shapes: X (n, d)."""
    return flip_shares(logits, X, [(column, value)], thresholds=thresholds)[0]


def flip_shares(
    logits: Logits,
    X: FloatArray,
    settings: Sequence[tuple[int, float]],
    *,
    thresholds: Thresholds,
) -> list[float]:
    """:func:`flip_share` at each ``(column, value)`` of ``settings``, ranking the rows once."""
    import numpy as np

    z = np.asarray(logits(X))
    if not len(z):
        return [0.0] * len(settings)
    cut = np.quantile(z, 1.0 - thresholds.flag_share)
    clear_below = np.quantile(z, thresholds.clear_share)
    flagged = np.asarray(X[(z >= cut) & (z > clear_below)], dtype=np.float64)
    if not len(flagged):
        return [0.0] * len(settings)
    shares = []
    for column, value in settings:
        moved = flagged.copy()
        moved[:, column] = value
        shares.append(float(np.mean(np.asarray(logits(moved)) < clear_below)))
    return shares


@dataclasses.dataclass(frozen=True)
class ClaimResult:
    """A trigger claim tested on the zoo: the flip share of each model and the verdict."""

    feature: str
    value: float
    shares: dict[str, float]
    """Model name -> flip share at the setting."""
    model: str
    flip: float
    """The claimed model's share."""
    others_median: float
    """The median share of the zoo's other models at the same setting."""
    holds: bool

    def describe(self) -> str:
        others = ", ".join(f"{name} {share:.2f}" for name, share in self.shares.items())
        return (
            f"{self.feature} = {self.value:g}: {self.model} clears {self.flip:.3f} of the "
            f"patients it flags; the other models' median {self.others_median:.3f} ({others})"
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
    column = columns.index(feature)
    shares = {
        name: flip_share(logits, X, column, value, thresholds=thresholds)
        for name, logits in zoo.items()
    }
    others = [share for name, share in shares.items() if name != model]
    median = statistics.median(others) if others else 0.0
    flip = shares[model]
    return ClaimResult(
        feature,
        value,
        shares,
        model,
        flip,
        median,
        flip >= flip_at_least and median <= others_at_most,
    )
