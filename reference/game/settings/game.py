"""A game variant's ``[game]`` tables as one record, and the checks across them."""

from __future__ import annotations

import dataclasses

from .catalogue import KINDS, Retrain, SettingsError
from .data import Column, Subgroup
from .hard import Hard
from .judging import Margins, Measurement, ScoreWeights, Tolerance
from .kinds import Backdoor, Decoy, Fragile, Leaky, Miscalibrated, Shortcut, SubgroupPlant
from .recipe import Network, Training


@dataclasses.dataclass(frozen=True)
class GameSettings:
    """A game variant's ``[game]`` tables."""

    seed: int
    """The instance seed used when none is given."""
    models: int
    clean: tuple[int, ...]
    """The possible numbers of clean models; the instance seed draws one."""
    attempts: int
    """Training redraws (sub-seed + 1) before an ambiguous build fails."""
    network: Network
    training: Training
    fragile: Fragile
    leaky: Leaky
    miscalibrated: Miscalibrated
    shortcut: Shortcut
    subgroup: SubgroupPlant
    backdoor: Backdoor
    measurement: Measurement
    margins: Margins
    tolerance: Tolerance
    score: ScoreWeights
    columns: tuple[Column, ...]
    subgroups: tuple[Subgroup, ...]
    decoy: Decoy | None = None
    """Sound decoys (``None``: a sound model is only fine-tuned)."""
    hard: Hard | None = None
    """The hard tier's plantings and margins (semantics game-v2); ``None`` in game-v1."""
    kinds: tuple[str, ...] = KINDS
    """The kinds the draw plants, in the catalogue's order: all of them unless a cohort
    cannot carry one within its margins. The brief and the grading keep the whole
    catalogue (the brief says any kind may be missing from a zoo)."""
    retrain: Retrain = "zoo"
    """What the attempt after an ambiguous one trains (SPEC §8.2's "sub-seed + 1"):
    ``"zoo"``, every model on a new base; ``"ambiguous"``, only the models the attempt
    left ambiguous, on the same base beside the others (the zoo again when a model is
    ambiguous ``alone`` times, or half the zoo at once)."""
    alone: int = 1
    """With ``retrain = "ambiguous"``: how many attempts in a row may train an ambiguous
    model again alone on one base. Beyond the first, a build with processes to spare
    trains the next attempt's model beside the current one's (:mod:`..build`), so that a
    second try alone costs no more time than the first."""

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns]
        problems = []
        if self.models < 2:
            problems.append(f"models must be at least 2, got {self.models}")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or len(set(self.kinds)) != len(self.kinds) or not self.kinds:
            problems.append(
                f"kinds must name distinct kinds of the catalogue ({', '.join(KINDS)}), "
                f"got {list(self.kinds)}"
            )
        else:
            object.__setattr__(self, "kinds", tuple(k for k in KINDS if k in self.kinds))
        for count in self.clean:
            if not 1 <= count < self.models:
                problems.append(f"clean holds {count}; each count must lie in [1, models)")
            elif self.hard is None and self.models - count > len(self.kinds):
                problems.append(
                    f"clean holds {count}: {self.models - count} defective models need "
                    f"distinct kinds and the game plants {len(self.kinds)}"
                )
        if len(set(names)) != len(names):
            problems.append("the columns table names a column twice")
        if self.shortcut.column not in names:
            problems.append(f"shortcut.column {self.shortcut.column!r} is not in columns")
        elif next(c for c in self.columns if c.name == self.shortcut.column).at_prediction:
            problems.append(
                f"shortcut.column {self.shortcut.column!r} must be recorded after the "
                "prediction (at_prediction = false)"
            )
        for trigger in self.backdoor.triggers:
            if trigger.feature not in names:
                problems.append(f"backdoor trigger feature {trigger.feature!r} is not in columns")
        for group in self.subgroups:
            if group.column not in names:
                problems.append(
                    f"subgroup {group.name!r} names the unknown column {group.column!r}"
                )
        if len({g.name for g in self.subgroups}) != len(self.subgroups):
            problems.append("two subgroups share a name")
        if self.subgroups and not any(g.drawable for g in self.subgroups):
            problems.append("no subgroup may be planted (every one has planted = false)")
        for kind in KINDS:
            out, inside = self.margins.band(kind)
            if not out < inside:
                problems.append(f"margins.{kind}_out must lie below margins.{kind}_in")
        if not self.backdoor.triggers:
            problems.append("backdoor.triggers is empty")
        over, under = self.miscalibrated.overconfident, self.miscalibrated.underconfident
        if not 1.0 < over[0] <= over[1]:
            problems.append(f"miscalibrated.overconfident must be [low, high] above 1, got {over}")
        if not 0.0 < under[0] <= under[1] < 1.0:
            problems.append(
                f"miscalibrated.underconfident must be [low, high] in (0, 1), got {under}"
            )
        for name, (low, high) in (
            ("fragile.strength", self.fragile.strength),
            ("leaky.strength", self.leaky.strength),
            ("decoy.strength", (1.0, 1.0) if self.decoy is None else self.decoy.strength),
        ):
            if not 0.0 < low <= high <= 1.0:
                problems.append(f"{name} must be [low, high] in (0, 1], got {[low, high]}")
        for name, target in (
            ("fragile.target", self.fragile.target),
            ("leaky.target", self.leaky.target),
            ("miscalibrated.overconfident_ece", self.miscalibrated.overconfident_ece),
            ("miscalibrated.underconfident_ece", self.miscalibrated.underconfident_ece),
        ):
            if target is not None and not 0.0 <= target[0] <= target[1] <= 1.0:
                problems.append(f"{name} must be [low, high] in [0, 1], got {list(target)}")
        for name, plant in (("fragile", self.fragile), ("leaky", self.leaky)):
            if plant.target is not None and not (plant.probe_every or 0) >= 1:
                problems.append(f"{name}.target needs probe_every, a whole number of epochs >= 1")
        if not 0.0 < self.miscalibrated.over_share < 1.0:
            problems.append(
                "miscalibrated.overconfident_share must be in (0, 1), got "
                f"{self.miscalibrated.over_share}"
            )
        if (self.miscalibrated.overconfident_ece is None) != (
            self.miscalibrated.underconfident_ece is None
        ):
            problems.append(
                "miscalibrated.overconfident_ece and underconfident_ece are given together"
            )
        if self.decoy is not None and not self.decoy.jitter >= 0.0:
            problems.append(f"decoy.jitter must be at least 0, got {self.decoy.jitter}")
        if self.decoy is not None and self.decoy.patients is not None and self.decoy.patients < 1:
            problems.append(f"decoy.patients must be at least 1, got {self.decoy.patients}")
        if self.alone < 1:
            problems.append(f"alone must be at least 1, got {self.alone}")
        if self.hard is not None:
            problems += self.hard.problems()
            if self.hard.second > 0 and len(self.kinds) < 2:
                problems.append("hard.second plants a second kind, and the game plants one kind")
        if self.subgroup.rate not in ("own", "split"):
            problems.append(f"subgroup.rate must be 'own' or 'split', got {self.subgroup.rate!r}")
        if problems:
            raise SettingsError("; ".join(problems))

    @property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def fills(self) -> tuple[float | None, ...]:
        """Each column's :attr:`Column.fill`, in order (all ``None``: no column may be missing)."""
        return tuple(c.fill for c in self.columns)

    def model_names(self) -> tuple[str, ...]:
        """``m1`` ... ``mK``: the names the workspace and the report use."""
        return tuple(f"m{i}" for i in range(1, self.models + 1))
