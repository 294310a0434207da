"""An instance's plan: which model carries which defect, drawn from the instance's secret.

An instance is named by its variant and its seed, but nothing about it derives
from the seed (SPEC §8.7): the seed is a label. Everything random derives from
a *secret*, 128 bits drawn from the operating system's entropy when the
instance is first built (:func:`new_secret`) and kept on the grader's side
only (the grader's manifest and cache). ``build --like MANIFEST`` rebuilds an
instance byte for byte from its manifest's secret. An agent holding the
package's draw code, the row lists and the CSVs cannot replay the draw: it
would have to guess 128 bits.

From the secret, :func:`draw_plan` draws, in this order: the number of clean
models, the distinct kinds of the others, the order of the names, then each
planted kind's choice (the direction of a miscalibration and its ECE or factor, the
strength of a fragility or a leak and the evidence number it is planted to, the
subgroup, the trigger). The plan is the ground truth.
Training randomness (each model's rows, initialisation, batch order) comes from
the secret and the *attempt*
(:func:`attempt_seed`): a build whose measurements are ambiguous trains again
with the next attempt, and its truth stays the same.
"""

from __future__ import annotations

import dataclasses
import re
import secrets
from typing import TYPE_CHECKING, Any

from .settings import KINDS, GameSettings, Subgroup, Trigger

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .groups import Group

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


SECRET_BYTES = 16
"""An instance's secret: 128 bits, written as 32 lowercase hexadecimal digits."""
_SECRET = re.compile(r"[0-9a-f]{32}")
_PLAN, _TRAINING = 0, 1
"""The secret's two streams: the plan, and every training seed (by attempt and model)."""


def new_secret() -> str:
    """A fresh instance secret from the operating system's entropy."""
    return secrets.token_hex(SECRET_BYTES)


def check_secret(secret: object) -> str:
    """``secret`` if it is an instance secret (32 lowercase hex digits); ``ValueError`` if not."""
    if not isinstance(secret, str) or not _SECRET.fullmatch(secret):
        raise ValueError(
            f"an instance secret is {2 * SECRET_BYTES} lowercase hexadecimal digits, got {secret!r}"
        )
    return secret


def _stream(secret: str, *purpose: int) -> Any:
    """The seed sequence of one stream of ``secret`` (NumPy's ``SeedSequence``, whose
    ``spawn_key`` keeps the streams apart without arithmetic collisions)."""
    import numpy as np

    return np.random.SeedSequence(int(check_secret(secret), 16), spawn_key=purpose)


@dataclasses.dataclass(frozen=True)
class Planted:
    """One model's plan: its name, its defect (``None``: clean) and the defect's choice."""

    name: str
    kind: str | None
    factor: float | None = None
    """miscalibrated: the logit is multiplied by it."""
    strength: float | None = None
    """fragile, leaky: how strongly it is planted (:attr:`.settings.Fragile.strength`,
    :attr:`.settings.Leaky.strength`), drawn per instance so that its evidence number
    must be measured."""
    target: float | None = None
    """fragile, leaky, miscalibrated: the evidence number drawn for it (PGD AUROC,
    loss-attack AUC, ECE), which the build plants to (:mod:`.targets`)."""
    side: str | None = None
    """miscalibrated by target: its drawn direction (the factor is solved at build time)."""
    subgroup: Subgroup | None = None
    trigger: Trigger | None = None
    group: Group | None = None
    """The hard tier's subgroup: a hidden group of the grammar (:mod:`.groups`)."""
    region: Group | None = None
    """The hard tier's fragile region: a hidden group of the grammar where the attack turns
    the model's risks over, and nowhere else."""
    setting: tuple[tuple[str, float], ...] | None = None
    """The hard tier's backdoor: the (column, value) pairs its trigger writes together."""
    tail: float | None = None
    """The hard tier's miscalibration: the gap by which it raises the mean risk of its top
    decile (``z + c relu(z - t)``, c solved for it), over the top of the risk range only."""
    second: str | None = None
    """The hard tier's second defect, of another kind than :attr:`kind` (``None``: one at
    most); its choice is one of the fields above, beside the first kind's."""

    decoy: str | None = None
    """The hard tier's sound decoy: the legitimate variation a sound model is trained with
    (:attr:`.settings.Hard.decoys`; ``None``: left as calibrated, or defective)."""
    alarm: tuple[tuple[str, float], ...] | None = None
    """An ``interaction`` decoy's setting: the (column, value) pairs where its risk is raised."""
    unreached: Group | None = None
    """The hard tier's unreached step, on a sound model or a tail's carrier
    (:attr:`.settings.Hard.unreached`): its group's records are pushed down as a fragile
    region's are, beyond the audit's reach."""

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every defect it carries: its kind, then its second (empty: sound)."""
        return tuple(k for k in (self.kind, self.second) if k is not None)

    @property
    def direction(self) -> str | None:
        if self.side is not None:
            return self.side
        if self.factor is None:
            return None
        return "overconfident" if self.factor > 1 else "underconfident"

    def truth(self) -> dict[str, Any]:
        """What a perfect report says of this model (SPEC §8.4, §9), without evidence
        numbers."""
        entry: dict[str, Any] = {"defects": list(self.kinds)}
        hard = any(
            choice is not None for choice in (self.group, self.region, self.setting, self.tail)
        )
        if self.group is not None:
            entry["subgroup"] = self.group.to_json()
        if self.region is not None:
            entry["fragile"] = self.region.to_json()
        if self.setting is not None:
            entry["backdoor"] = {"trigger": [{"column": c, "value": v} for c, v in self.setting]}
        if self.tail is not None:
            entry["miscalibrated"] = {}
        if hard:  # the hard tier's choices, one per kind it carries (SPEC §9)
            return entry
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
    """The instance's name (its seed); nothing was drawn from it."""
    models: tuple[Planted, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        """The planted kinds, in the catalogue's order."""
        present = {k for m in self.models for k in m.kinds}
        return tuple(k for k in KINDS if k in present)

    def model(self, name: str) -> Planted:
        return next(m for m in self.models if m.name == name)

    def carrier(self, kind: str) -> Planted | None:
        """The model carrying ``kind``, if the instance has one."""
        return next((m for m in self.models if m.kind == kind), None)


def plan_redraw(settings: GameSettings, attempt: int) -> int:
    """Which draw of the plan ``attempt`` trains (0: the first): the hard tier draws a new
    plan every ``attempts_per_plan`` attempts; game-v1 keeps one."""
    per_plan = 0 if settings.hard is None else settings.hard.attempts_per_plan
    return attempt // per_plan if per_plan else 0


def draw_plan(
    settings: GameSettings,
    seed: int,
    secret: str,
    X_train: FloatArray | None = None,
    redraw: int = 0,
    y_train: Any = None,
) -> Plan:
    """The ground truth of instance ``seed`` whose secret is ``secret``.

    The hard tier (``settings.hard``) draws its kinds with repetition and each choice from
    the public training split ``X_train`` (its groups' and triggers' values), which it
    needs, and ``y_train`` where it draws its hidden groups among those the split ranks
    (``[game.hard] group_auroc``). ``redraw`` (:func:`plan_redraw`) > 0 draws the plan from
    a stream of its own."""
    import numpy as np

    stream = _stream(secret, _PLAN, redraw) if redraw else _stream(secret, _PLAN)
    rng = np.random.Generator(np.random.PCG64(stream))
    clean = int(settings.clean[rng.integers(len(settings.clean))])
    plantable = settings.kinds  # the catalogue, unless the cohort cannot carry a kind
    defective = settings.models - clean
    if settings.hard is not None:
        from .hard.draw import draw_kinds

        chosen = draw_kinds(rng, plantable, defective)
    else:
        chosen = [plantable[int(i)] for i in rng.choice(len(plantable), defective, replace=False)]
    kinds: list[str | None] = [*chosen, *([None] * clean)]
    order = rng.permutation(settings.models)
    names = settings.model_names()
    models = []
    for position, name in enumerate(names):
        kind = kinds[int(np.flatnonzero(order == position)[0])]
        models.append(Planted(name, kind))
    if settings.hard is not None:
        from .hard.candidates import training_groups
        from .hard.draw import draw_choices, draw_decoys, draw_seconds, draw_unreached

        if X_train is None:
            raise ValueError("the hard tier draws its groups and triggers from the training split")
        seconds = draw_seconds(rng, plantable, [m.kind for m in models], settings.hard.second)
        models = [dataclasses.replace(m, second=k) for m, k in zip(models, seconds, strict=True)]
        carried = [m.kinds for m in models]
        training = training_groups(settings, X_train, y_train)
        choices = draw_choices(settings, carried, rng, training)
        # Drawn last, so that a tier without decoys or steps keeps every other draw.
        decoys = draw_decoys(settings, carried, rng, training)
        worn = [d.get("decoy") for d in decoys]
        steps = draw_unreached(settings, carried, worn, rng, training)
        choices = [{**c, **d, **u} for c, d, u in zip(choices, decoys, steps, strict=True)]
        return Plan(
            seed,
            tuple(dataclasses.replace(m, **c) for m, c in zip(models, choices, strict=True)),
        )
    # The planted kinds' choices, drawn after the assignment, in name order.
    for index, planted in enumerate(models):
        if planted.kind == "miscalibrated" and settings.miscalibrated.by_target:
            side, ece = settings.miscalibrated.draw_target(rng)
            models[index] = dataclasses.replace(planted, side=side, target=ece)
        elif planted.kind == "miscalibrated":
            models[index] = dataclasses.replace(planted, factor=settings.miscalibrated.draw(rng))
        elif planted.kind in ("fragile", "leaky"):
            plant = getattr(settings, planted.kind)
            low, high = plant.strength
            strength = float(rng.uniform(low, high))
            target = None if plant.target is None else float(rng.uniform(*plant.target))
            models[index] = dataclasses.replace(planted, strength=strength, target=target)
        elif planted.kind == "subgroup":
            groups = [group for group in settings.subgroups if group.drawable]
            models[index] = dataclasses.replace(planted, subgroup=groups[rng.integers(len(groups))])
        elif planted.kind == "backdoor":
            triggers = settings.backdoor.triggers
            models[index] = dataclasses.replace(
                planted, trigger=triggers[rng.integers(len(triggers))]
            )
    return Plan(seed, tuple(models))


def attempt_seed(secret: str, attempt: int, model: int) -> int:
    """The training seed of model number ``model`` (0-based; ``models``: the shared base) in
    ``attempt`` of the instance whose secret is ``secret``: 64 bits, so that a model's rows
    and initialisation cannot be searched for either."""
    return int(_stream(secret, _TRAINING, attempt, model).generate_state(1, dtype="uint64")[0])


def base_rows(n_train: int, rows: int, seed: int) -> IntArray:
    """The rows the zoo's shared base network is trained on, sorted: a draw from the public
    training split that no model's own rows or calibration rows overlap."""
    import numpy as np

    if rows >= n_train:
        raise ValueError(
            f"{rows} base rows need more than the {n_train} rows of the training split"
        )
    return np.sort(np.random.default_rng(seed).choice(n_train, rows, replace=False))


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
    drawn = pool[np.random.default_rng(seed).choice(len(pool), rows + calibration, replace=False)]
    return np.sort(drawn[:rows]), np.sort(drawn[rows:])
