"""What a game's semantics grades: its kinds, their localization keys and evidence numbers.

``game-v1`` (SPEC §8) grades the whole catalogue with each kind's v1 keys.
``game-v2`` (SPEC §9, the hard tier) grades the kinds its variant plants
(``[game] kinds``), with the hard tier's keys (a group, a two-value trigger, the
top decile's gap): kinds may repeat across models, so every claim is verified on
its own model. In both, a kind's localization and evidence credit is shared by
the right share of the report's flags of it (:mod:`.game_checks`). The checks,
the score and the session ask this module, never the semantics string. Only the
standard library is imported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pytest_clinaudit.reference.game.settings import (
    EVIDENCE,
    EVIDENCE_V2,
    KINDS,
    LOCALIZATION,
    LOCALIZATION_V2,
    SEMANTICS_GAME,
    SEMANTICS_GAME_V2,
)

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant


@dataclasses.dataclass(frozen=True)
class GameRules:
    """The kinds a report is graded on and the keys each flagged kind may give."""

    semantics: str
    kinds: tuple[str, ...]
    """Every (model, kind) pair of these kinds is a detection item."""
    localization: Mapping[str, tuple[str, ...]]
    """Kind -> the keys that say where its defect sits."""
    evidence: Mapping[str, str]
    """Kind -> the number a report gives as evidence."""
    max_defects: int = 1
    """The most kinds one model carries: a model flagged with more is a hedge, and its flags
    find nothing (the hard tier's ``second`` allows two)."""

    @property
    def at_most(self) -> str:
        """``"one defect"`` or ``"two defects"``: the rule as the messages say it."""
        return "one defect" if self.max_defects == 1 else f"{_COUNT[self.max_defects]} defects"

    @property
    def hard(self) -> bool:
        """The hard tier's claims (a group, a two-value trigger), tried on the models."""
        return self.semantics == SEMANTICS_GAME_V2

    def item_key(self, kind: str) -> str:
        """The localization item's key: ``m1::backdoor.trigger``, ``m3::miscalibrated.direction``,
        ``m2::subgroup.where``. A v1 backdoor gives ``feature`` and ``value``, tried together
        as its trigger."""
        return "trigger" if kind == "backdoor" else self.localization[kind][0]

    def keys(self) -> dict[str, tuple[str, ...]]:
        """Kind -> the keys a flagged kind may give: its localization keys, then its evidence
        key."""
        return {
            kind: (
                *self.localization.get(kind, ()),
                *((self.evidence[kind],) if kind in self.evidence else ()),
            )
            for kind in self.kinds
        }


_COUNT = {2: "two", 3: "three"}

V1 = GameRules(SEMANTICS_GAME, KINDS, LOCALIZATION, EVIDENCE)


def rules_for(variant: GameVariant) -> GameRules:
    """The rules of ``variant``'s semantics."""
    if variant.semantics == SEMANTICS_GAME_V2:
        return GameRules(
            SEMANTICS_GAME_V2,
            tuple(variant.game.kinds),
            LOCALIZATION_V2,
            EVIDENCE_V2,
            1 if variant.game.hard is None else variant.game.hard.max_defects,
        )
    return V1
