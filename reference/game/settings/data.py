"""What the brief shows of the data: the dictionary's columns and the listed subgroups."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass(frozen=True)
class Column:
    """One entry of the data dictionary the brief shows."""

    name: str
    description: str
    unit: str
    recorded: str
    """When the value is recorded, in words a clinician would use."""
    at_prediction: bool
    """Whether the value exists when the model is used (a post-outcome column does not)."""
    low: float
    high: float
    """The clinically possible range (wider than what the data holds)."""
    normal_low: float | None = None
    normal_high: float | None = None
    """The normal range of a measurement; values beyond it (out to the possible
    range) are clinically alarming. ``None`` for columns without one (age, sex)."""
    fill: float | None = None
    """A column that may be missing (an empty cell, NaN): the value every model of the zoo
    reads a missing cell as, beside an indicator input that says it was missing.
    ``None``: the column is never missing, and a NaN in it makes the prediction NaN."""


@dataclasses.dataclass(frozen=True)
class Subgroup:
    """A listed subgroup: rows whose ``column`` equals ``equals``, or lies in [at_least, below)."""

    name: str
    column: str
    equals: float | None = None
    at_least: float | None = None
    below: float | None = None
    reverse: float | None = None
    """How far a subgroup planting turns this subgroup's ranking over, beyond flattening it
    (:func:`~..planting.plant_subgroup`; ``None``: flattened only). Not in the brief."""
    planted: bool | None = None
    """``false``: a subgroup planting is never drawn on this subgroup (unset: it may be). The
    brief lists it either way, and every model is measured on it; for a subgroup whose
    flattening cannot leave the other listed ones clearly out (FLCHAIN's sexes: half of
    every age band). Not in the brief."""

    @property
    def drawable(self) -> bool:
        """Whether a subgroup planting may be drawn on this subgroup."""
        return self.planted is not False

    def mask(self, X: Any, columns: tuple[str, ...]) -> Any:
        """Boolean (n,) of the rows ``X`` (n, d) that belong to the subgroup."""
        import numpy as np

        values = np.asarray(X)[:, columns.index(self.column)]
        inside = np.ones(len(values), dtype=bool)
        if self.equals is not None:
            inside &= values == self.equals
        if self.at_least is not None:
            inside &= values >= self.at_least
        if self.below is not None:
            inside &= values < self.below
        return inside
