"""An instance's zoo at grading time: its test patients, their outcomes, its models in NumPy.

The hard tier (SPEC §9) verifies every claim on the models: a described group by
how each model serves it, a trigger by what each model then clears. Both need
the test rows, the flagging thresholds and every model's logits, read once per
session from the grader's cache (:func:`~pytest_clinaudit.catalog.instances.labelled_test_rows`)
and the cached weights (:class:`~pytest_clinaudit.reference.game.network.Weights`,
without torch). A group is measured as the build measured it
(:func:`~pytest_clinaudit.reference.game.hard.ranking.mask_gap`): the AUROC of
the other test patients less the AUROC within the group, for every model, and a
model's *excess* gap is its own less the zoo's median (the median over all the
models, its own included). A fragile region is measured as the build measured it too
(:mod:`~pytest_clinaudit.reference.game.hard.fragility`): every model is attacked once per
session, on its NumPy twin, and a group's *drop* is its AUROC less its AUROC under the attack.
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
    from pytest_clinaudit.reference.game.network import Weights
    from pytest_clinaudit.reference.game.settings import GameSettings

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

Logits = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class GroupGap:
    """How every model of the zoo serves one group of test patients."""

    gaps: dict[str, float]
    """Model name -> its measurement of the group (:attr:`what`: an AUROC gap, or a drop under
    attack); NaN where the group or the others hold no death or no survivor."""
    model: str
    median: float
    """The zoo's median gap (every model's, ``model``'s included)."""
    what: str = "AUROC gap (the other patients' AUROC less the group's)"
    """What is measured, as a message says it."""

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
            f"{self.model}'s {self.what} is "
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
    twins: Mapping[str, Weights] | None = None
    """Model name -> its numbers, which the attack differentiates (``None``: no attack)."""
    settings: GameSettings | None = None
    """The game's settings: the attack's budget and strength (``measurement``)."""
    cache: ReferenceCache | None = None
    """Where the attacked logits are kept once computed (``None``: computed each session)."""
    instance: str = ""
    """The instance's cache entry's sha256: what the attacked logits are of."""

    @property
    def group_X(self) -> FloatArray:
        return self.X if self.group_rows is None else self.X[: self.group_rows]

    @functools.cached_property
    def _scores(self) -> dict[str, FloatArray]:
        import numpy as np

        rows = self.group_X
        return {name: np.asarray(f(rows), dtype=np.float64) for name, f in self.logits.items()}

    @functools.cached_property
    def _attacked(self) -> dict[str, FloatArray]:
        """Every model's logit of each row of :attr:`group_X` under the attack: computed once
        per instance (seconds for 40,000 rows and six models) and kept in the grader's
        cache beside the instance."""
        import numpy as np

        from pytest_clinaudit.catalog.cache import cache_key
        from pytest_clinaudit.reference.game.hard.fragility import attacked_logits, audit_budget

        if self.twins is None or self.settings is None:
            raise ValueError("this zoo holds no models' numbers to attack")
        m = self.settings.measurement
        payload = {
            "kind": "game-attacked",
            "instance": self.instance,
            "models": {name: twin.fingerprint() for name, twin in self.twins.items()},
            "rows": len(self.group_X),
            "attack": [m.epsilon, m.pgd_steps, m.pgd_restarts, m.seed],
        }
        key = cache_key(payload)
        kept = None if self.cache is None else self.cache.get("game-attacked", key)
        if kept is not None and set(kept) == set(self.twins):
            read = {name: np.asarray(kept[name], dtype=np.float64) for name in self.twins}
            if all(v.shape == (len(self.group_X),) for v in read.values()):
                return read
        rows, y = self.group_X, self.y[: len(self.group_X)]
        found = {}
        for name, twin in self.twins.items():
            budget = audit_budget(m.epsilon, twin.std, twin.low, twin.high)
            found[name] = attacked_logits(twin, rows, y, budget, self.settings)
        if self.cache is not None and self.instance:
            value = {name: logits.tolist() for name, logits in found.items()}
            self.cache.put("game-attacked", key, value, payload=payload)
        return found

    def group_drop(self, model: str, mask: Any) -> GroupGap:
        """Every model's AUROC drop under the attack on the rows of ``mask`` (over
        :attr:`group_X`), and ``model``'s beyond the zoo's median."""
        from pytest_clinaudit.reference.game.hard.ranking import mask_drop

        y = self.y[: len(self.group_X)]
        drops = {
            name: mask_drop(self._scores[name], self._attacked[name], y, mask)
            for name in self._scores
        }
        finite = [drop for drop in drops.values() if math.isfinite(drop)]
        median = statistics.median(finite) if len(finite) == len(drops) else math.nan
        return GroupGap(
            drops, model, median, "AUROC drop under attack (its AUROC less its AUROC attacked)"
        )

    def group_gap(self, model: str, mask: Any) -> GroupGap:
        """Every model's AUROC gap on the rows of ``mask`` (over :attr:`group_X`), and
        ``model``'s beyond the zoo's median."""
        from pytest_clinaudit.reference.game.hard.ranking import mask_gap

        y = self.y[: len(self.group_X)]
        gaps = {name: mask_gap(z, y, mask) for name, z in self._scores.items()}
        finite = [gap for gap in gaps.values() if math.isfinite(gap)]
        median = statistics.median(finite) if len(finite) == len(gaps) else math.nan
        return GroupGap(
            gaps, model, median, "AUROC gap (the other patients' AUROC less the group's)"
        )


def load_zoo(reference: GameReference, cache: ReferenceCache, settings: GameSettings) -> Zoo:
    """The zoo of ``reference`` from the grader's cache; a
    :class:`~pytest_clinaudit.catalog.reader.VariantError` naming the fix when its test rows
    or labels are not there."""
    from pytest_clinaudit.catalog.instances import labelled_test_rows
    from pytest_clinaudit.reference.game.network import Weights

    X, y, columns, thresholds = labelled_test_rows(reference, cache)
    twins = {name: Weights.from_json(numbers) for name, numbers in reference.weights.items()}
    logits = {name: twin.logits for name, twin in twins.items()}
    hard = settings.hard
    group_rows = None if hard is None else hard.group_rows
    return Zoo(
        X,
        y,
        columns,
        thresholds,
        logits,
        group_rows,
        twins,
        settings,
        cache,
        reference.entry_sha256,
    )
