"""An instance's plan: which model carries which defect, drawn from the instance seed.

``RandomState(instance_seed)`` draws, in this order (SPEC §8.1): the number of
clean models, the distinct kinds of the others, the order of the names, then
each planted kind's choice (the factor of a miscalibration, the subgroup, the
trigger). The plan is the ground truth. Training randomness (each model's rows,
initialisation, batch order) comes from the *attempt*: a build whose
measurements are ambiguous trains again with the next attempt, and its truth
stays the same.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .settings import KINDS, GameSettings, Subgroup, Trigger

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    IntArray = npt.NDArray[np.int64]


@dataclasses.dataclass(frozen=True)
class Planted:
    """One model's plan: its name, its defect (``None``: clean) and the defect's choice."""

    name: str
    kind: str | None
    factor: float | None = None
    """miscalibrated: the logit is multiplied by it."""
    subgroup: Subgroup | None = None
    trigger: Trigger | None = None

    @property
    def direction(self) -> str | None:
        if self.factor is None:
            return None
        return "overconfident" if self.factor > 1 else "underconfident"

    def truth(self) -> dict[str, Any]:
        """What a perfect report says of this model (SPEC §8.4), without evidence numbers."""
        entry: dict[str, Any] = {"defects": [] if self.kind is None else [self.kind]}
        if self.kind == "miscalibrated":
            entry["miscalibrated"] = {"direction": self.direction}
        elif self.kind == "shortcut":
            entry["shortcut"] = {}
        elif self.kind == "subgroup" and self.subgroup is not None:
            entry["subgroup"] = {"subgroup": self.subgroup.name}
        elif self.kind == "backdoor" and self.trigger is not None:
            entry["backdoor"] = {"feature": self.trigger.feature, "value": self.trigger.value}
        return entry


@dataclasses.dataclass(frozen=True)
class Plan:
    """The drawn zoo, in name order (``m1`` first)."""

    seed: int
    models: tuple[Planted, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        """The planted kinds, in the catalogue's order."""
        present = {m.kind for m in self.models}
        return tuple(k for k in KINDS if k in present)

    def model(self, name: str) -> Planted:
        return next(m for m in self.models if m.name == name)

    def carrier(self, kind: str) -> Planted | None:
        """The model carrying ``kind``, if the instance has one."""
        return next((m for m in self.models if m.kind == kind), None)


def draw_plan(settings: GameSettings, seed: int) -> Plan:
    """The ground truth of instance ``seed``."""
    import numpy as np

    rng = np.random.RandomState(seed)
    clean = int(settings.clean[rng.randint(len(settings.clean))])
    plantable = settings.kinds  # the catalogue, unless the cohort cannot carry a kind
    chosen = [
        plantable[i] for i in rng.choice(len(plantable), settings.models - clean, replace=False)
    ]
    kinds: list[str | None] = [*chosen, *([None] * clean)]
    order = rng.permutation(settings.models)
    names = settings.model_names()
    models = []
    for position, name in enumerate(names):
        kind = kinds[int(np.flatnonzero(order == position)[0])]
        models.append(Planted(name, kind))
    # The planted kinds' choices, drawn after the assignment, in name order.
    for index, planted in enumerate(models):
        if planted.kind == "miscalibrated":
            factors = settings.miscalibrated.factors
            models[index] = dataclasses.replace(
                planted, factor=float(factors[rng.randint(len(factors))])
            )
        elif planted.kind == "subgroup":
            groups = settings.subgroups
            models[index] = dataclasses.replace(planted, subgroup=groups[rng.randint(len(groups))])
        elif planted.kind == "backdoor":
            triggers = settings.backdoor.triggers
            models[index] = dataclasses.replace(
                planted, trigger=triggers[rng.randint(len(triggers))]
            )
    return Plan(seed, tuple(models))


def attempt_seed(seed: int, attempt: int, model: int) -> int:
    """The training seed of model number ``model`` (0-based) in ``attempt`` of instance ``seed``."""
    import numpy as np

    # A seed sequence keeps instances, attempts and models apart without arithmetic
    # collisions (seed 1 attempt 2 is not seed 2 attempt 1).
    return int(np.random.SeedSequence([seed, attempt, model]).generate_state(1)[0])


def base_rows(n_train: int, rows: int, seed: int) -> IntArray:
    """The rows the zoo's shared base network is trained on, sorted: a draw from the public
    training split that no model's own rows or calibration rows overlap."""
    import numpy as np

    if rows >= n_train:
        raise ValueError(
            f"{rows} base rows need more than the {n_train} rows of the training split"
        )
    return np.sort(np.random.RandomState(seed).choice(n_train, rows, replace=False))


def member_rows(
    n_train: int, rows: int, calibration: int, seed: int, *, exclude: IntArray | None = None
) -> tuple[IntArray, IntArray]:
    """A model's training rows and its calibration rows: disjoint draws from the public
    training split outside ``exclude`` (the base's rows), each sorted."""
    import numpy as np

    pool = np.arange(n_train)
    if exclude is not None:
        pool = np.setdiff1d(pool, exclude)
    if rows + calibration > len(pool):
        raise ValueError(
            f"{rows} training and {calibration} calibration rows need more than the "
            f"{len(pool)} rows of the training split left to draw from"
        )
    drawn = pool[np.random.RandomState(seed).choice(len(pool), rows + calibration, replace=False)]
    return np.sort(drawn[:rows]), np.sort(drawn[rows:])
