"""An instance's zoo at grading time: its test patients, their outcomes, its models in NumPy.

The hard tier (SPEC §9) verifies every claim on the models: a described group by
how each model serves it, a trigger by what each model then clears. Both need
the test rows, the flagging thresholds and every model's logits, read once per
session from the grader's cache (:func:`~pytest_clinaudit.catalog.instances.labelled_test_rows`)
and the cached weights (:class:`~pytest_clinaudit.reference.game.network.Weights`,
without torch). A group is measured as the build measured it
(:func:`~pytest_clinaudit.reference.game.hard.verdicts.mask_gap`): the AUROC of
the other test patients less the AUROC within the group, for every model, and a
model's *excess* gap is its own less the zoo's median (the median over all the
models, its own included).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import statistics
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.instances import GameReference
    from pytest_clinaudit.reference.game.claims import Thresholds

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

Logits = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class GroupGap:
    """How every model of the zoo serves one group of test patients."""

    gaps: dict[str, float]
    """Model name -> its AUROC gap (the other patients' AUROC less the group's); NaN where
    the group or the others hold no death or no survivor."""
    model: str
    median: float
    """The zoo's median gap (every model's, ``model``'s included)."""

    @property
    def excess(self) -> float:
        """``model``'s gap beyond the zoo's median (NaN when it cannot be measured)."""
        return self.gaps[self.model] - self.median

    @property
    def measured(self) -> bool:
        return all(math.isfinite(gap) for gap in self.gaps.values())

    def describe(self) -> str:
        others = ", ".join(f"{name} {gap:+.3f}" for name, gap in self.gaps.items())
        return (
            f"{self.model}'s AUROC gap (the other patients' AUROC less the group's) is "
            f"{self.gaps[self.model]:+.3f}, the zoo's median {self.median:+.3f} ({others})"
        )


@dataclasses.dataclass(frozen=True, eq=False)
class Zoo:
    """The instance's test patients and its models, as the checks measure them."""

    X: FloatArray
    """The test rows (n, d), in the data dictionary's column order."""
    y: IntArray
    """Their outcomes (n,), 0/1."""
    columns: tuple[str, ...]
    thresholds: Thresholds
    """When a model flags and clears a patient (:class:`~.claims.Thresholds`)."""
    logits: Mapping[str, Logits]
    """Model name -> its logits of rows (m, d), in name order."""
    group_rows: int | None = None
    """Groups are measured on the first this many test rows (the build's ``group_rows``;
    ``None``: all of them)."""

    @property
    def group_X(self) -> FloatArray:
        return self.X if self.group_rows is None else self.X[: self.group_rows]

    @functools.cached_property
    def _scores(self) -> dict[str, FloatArray]:
        import numpy as np

        rows = self.group_X
        return {name: np.asarray(f(rows), dtype=np.float64) for name, f in self.logits.items()}

    def group_gap(self, model: str, mask: Any) -> GroupGap:
        """Every model's AUROC gap on the rows of ``mask`` (over :attr:`group_X`), and
        ``model``'s beyond the zoo's median."""
        from pytest_clinaudit.reference.game.hard.verdicts import mask_gap

        y = self.y[: len(self.group_X)]
        gaps = {name: mask_gap(z, y, mask) for name, z in self._scores.items()}
        finite = [gap for gap in gaps.values() if math.isfinite(gap)]
        median = statistics.median(finite) if len(finite) == len(gaps) else math.nan
        return GroupGap(gaps, model, median)


def load_zoo(reference: GameReference, cache: ReferenceCache, group_rows: int | None) -> Zoo:
    """The zoo of ``reference`` from the grader's cache; a
    :class:`~pytest_clinaudit.catalog.reader.VariantError` naming the fix when its test rows
    or labels are not there."""
    from pytest_clinaudit.catalog.instances import labelled_test_rows
    from pytest_clinaudit.reference.game.network import Weights

    X, y, columns, thresholds = labelled_test_rows(reference, cache)
    logits = {
        name: Weights.from_json(numbers).logits for name, numbers in reference.weights.items()
    }
    return Zoo(X, y, columns, thresholds, logits, group_rows)
