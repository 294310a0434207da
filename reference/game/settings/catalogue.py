"""The catalogue of a game: its semantics, kinds, what a report localizes and gives as
evidence, and the error a contradictory file raises."""

from __future__ import annotations

from typing import Literal

SEMANTICS_GAME = "game-v1"
"""The auditing game's semantics (SPEC §8); part of every cache key of its instances."""

SEMANTICS_GAME_V2 = "game-v2"
"""The hard tier's semantics (SPEC §9, ``*-game-hard``): hidden groups, visible two-value
triggers, miscalibration in the top of the risk range only, kinds that may repeat."""

SEMANTICS_GAMES = (SEMANTICS_GAME, SEMANTICS_GAME_V2)

MEASURED = 2
"""The version of what a build measures on given settings; part of every cache key of an
instance, so that a cache never serves references measured the old way. Bumped when a
measurement changes with the settings unchanged (2: the strong attack on the first
``pgd_rows`` test rows, the ones the brief names, where 1 drew them)."""

KINDS = ("fragile", "leaky", "miscalibrated", "shortcut", "subgroup", "backdoor")
"""The catalogue, in the order of SPEC §8.2."""

LOCALIZATION: dict[str, tuple[str, ...]] = {
    "miscalibrated": ("direction",),
    "shortcut": ("feature",),
    "subgroup": ("subgroup",),
    "backdoor": ("feature", "value"),
}
"""The keys a report gives to say where a defect sits, per kind that has any."""

EVIDENCE: dict[str, str] = {
    "fragile": "pgd_auroc",
    "leaky": "loss_attack_auc",
    "miscalibrated": "ece",
}
"""The number a report gives as evidence, per kind that has one."""

LOCALIZATION_V2: dict[str, tuple[str, ...]] = {
    "fragile": ("where",),
    "subgroup": ("where",),
    "backdoor": ("trigger",),
}
"""The hard tier's localization keys: a group in the grammar (:mod:`..groups`: a hidden group,
or a fragile model's region), a trigger of
one or two (column, value) pairs (:mod:`..claims`). Both are tried on the models."""

EVIDENCE_V2: dict[str, str] = {"miscalibrated": "top_decile_gap"}
"""The hard tier's evidence numbers: among the tenth of the test patients a model rates
highest, its mean predicted risk minus their observed death rate."""

DIRECTIONS = ("overconfident", "underconfident")

Retrain = Literal["zoo", "ambiguous"]
"""What an attempt after an ambiguous one trains (:attr:`GameSettings.retrain`)."""


class SettingsError(ValueError):
    """A game's settings contradict each other; the message names the setting."""
