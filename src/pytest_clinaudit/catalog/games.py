"""Game variant files (semantics "game-v1", SPEC §8; "game-v2", §9): loading and validation.

A game variant names its cohort under ``[dataset]`` exactly as an audit-task
variant does, and everything else under ``[game]``: the zoo, the base
recipe, each kind's planting, the measurements and their margins, the
tolerances, the score's weights, the data dictionary (``[[game.columns]]``)
and the subgroups (``[[game.subgroups]]``). The tables are read into the
records of :mod:`pytest_clinaudit.reference.game.settings`; a key too many, a
key missing or a value of the wrong type is a :class:`VariantError` naming the
file and the key, and so is a setting that contradicts another.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_clinaudit.catalog.reader import TableReader, VariantError, describe_value, read_dataset
from pytest_clinaudit.reference.data import LoadContext
from pytest_clinaudit.reference.game.settings import (
    SEMANTICS_GAME_V2,
    SEMANTICS_GAMES,
    Backdoor,
    Column,
    Decoy,
    Fragile,
    GameSettings,
    Hard,
    Leaky,
    Margins,
    Measurement,
    Miscalibrated,
    Network,
    Retrain,
    ScoreWeights,
    SettingsError,
    Shortcut,
    Subgroup,
    SubgroupPlant,
    Tolerance,
    Training,
)

TOP_KEYS = {"name", "aliases", "description", "semantics", "dataset", "game"}
_TABLES: dict[str, Any] = {
    "network": Network,
    "training": Training,
    "fragile": Fragile,
    "leaky": Leaky,
    "miscalibrated": Miscalibrated,
    "shortcut": Shortcut,
    "subgroup": SubgroupPlant,
    "backdoor": Backdoor,
    "measurement": Measurement,
    "margins": Margins,
    "tolerance": Tolerance,
    "score": ScoreWeights,
}
_SCALARS = {"seed": int, "models": int, "attempts": int}


@dataclasses.dataclass(frozen=True)
class GameVariant:
    """An auditing game: its cohort and the settings of its instances."""

    name: str
    aliases: tuple[str, ...]
    description: str
    semantics: str
    dataset: Any
    game: GameSettings
    path: Path

    is_game = True
    is_torch = True
    """Its models are torch programs (``models/m1.pt2`` ...): building one needs torch."""

    @property
    def context(self) -> LoadContext:
        return LoadContext(base_dir=self.path.parent)

    def describe(self) -> str:
        """One line, e.g. ``game: 6 MLPs 64-64, 1-2 clean, 500 rows each``."""
        g = self.game
        clean = "-".join(str(c) for c in g.clean)
        hidden = "-".join(str(w) for w in g.network.hidden)
        return (
            f"game: {g.models} MLPs {hidden}, {clean} clean, {g.training.rows} training rows each"
        )

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "semantics": self.semantics,
            "dataset": type(self.dataset).__name__,
            "recipe": self.describe(),
            "paper_reference_sps": None,
            "file": str(self.path),
        }


def _positive(reader: TableReader, where: str, **values: float) -> None:
    for key, value in values.items():
        if not value > 0:
            raise reader.error(f"{where}.{key}", f"must be positive, got {value!r}")


def _check_ranges(reader: TableReader, settings: GameSettings) -> None:
    """Values the records' types cannot express: sizes, shares, weights."""
    t, m, s = settings.training, settings.measurement, settings.score
    _positive(reader, "game", models=settings.models, attempts=settings.attempts)
    _positive(
        reader,
        "game.training",
        rows=t.rows,
        calibration_rows=t.calibration_rows,
        epochs=t.epochs,
        batch_size=t.batch_size,
        lr=t.lr,
    )
    _positive(
        reader,
        "game.measurement",
        epsilon=m.epsilon,
        pgd_rows=m.pgd_rows,
        pgd_steps=m.pgd_steps,
        pgd_restarts=m.pgd_restarts,
        ece_bins=m.ece_bins,
        importance_repeats=m.importance_repeats,
        sweep_points=m.sweep_points,
    )
    if not 0 < settings.backdoor.poison_fraction < 1:
        raise reader.error("game.backdoor.poison_fraction", "must lie in (0, 1)")
    weights = (s.detection, s.localization, s.evidence)
    if any(w < 0 for w in weights) or abs(sum(weights) - 1.0) > 1e-9:
        raise reader.error("game.score", f"must be non-negative and sum to 1, got {list(weights)}")
    if not settings.clean:
        raise reader.error("game.clean", "must hold at least one count of clean models")


def read_game_variant(reader: TableReader, document: Mapping[str, Any], path: Path) -> GameVariant:
    """A game variant from a parsed file whose ``semantics`` is "game-v1" or "game-v2"."""
    reader.check_keys(document, "top level", TOP_KEYS)
    aliases = document["aliases"]
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise reader.error(
            "aliases", f"expected an array of strings, got {describe_value(aliases)}"
        )
    game = document["game"]
    if not isinstance(game, dict):
        raise reader.error("game", f"expected a table, got {describe_value(game)}")
    semantics = document["semantics"]
    reader.check_keys(
        game,
        "game",
        {*_SCALARS, "clean", *_TABLES, "columns", "subgroups"},
        {"kinds", "hard", "decoy", "retrain", "alone"},
    )
    if ("hard" in game) != (semantics == SEMANTICS_GAME_V2):
        raise reader.error(
            "game.hard",
            f"a {SEMANTICS_GAME_V2} game (the hard tier) needs [game.hard], and only it "
            f"takes one; this file's semantics is {semantics!r}",
        )
    values: dict[str, Any] = {
        key: reader.value(game, key, kind, "game") for key, kind in _SCALARS.items()
    }
    values["clean"] = reader.value(game, "clean", tuple[int, ...], "game")
    if "kinds" in game:
        values["kinds"] = reader.value(game, "kinds", tuple[str, ...], "game")
    if "retrain" in game:
        values["retrain"] = reader.value(game, "retrain", Retrain, "game")
    if "alone" in game:
        values["alone"] = reader.value(game, "alone", int, "game")
    values.update({key: reader.value(game, key, record, "game") for key, record in _TABLES.items()})
    if "decoy" in game:
        values["decoy"] = reader.value(game, "decoy", Decoy, "game")
    if "hard" in game:
        values["hard"] = reader.value(game, "hard", Hard, "game")
    values["columns"] = reader.value(game, "columns", tuple[Column, ...], "game")
    values["subgroups"] = reader.value(game, "subgroups", tuple[Subgroup, ...], "game")
    try:
        settings = GameSettings(**values)
    except SettingsError as exc:
        raise reader.error("game", str(exc)) from None
    _check_ranges(reader, settings)
    return GameVariant(
        name=reader.value(document, "name", str, ""),
        aliases=tuple(aliases),
        description=reader.value(document, "description", str, ""),
        semantics=semantics,
        dataset=read_dataset(reader, document["dataset"]),
        game=settings,
        path=path,
    )


def is_game_document(document: Mapping[str, Any]) -> bool:
    """Whether a parsed variant file declares a game's semantics (game-v1 or game-v2)."""
    return document.get("semantics") in SEMANTICS_GAMES


__all__ = ["GameVariant", "VariantError", "is_game_document", "read_game_variant"]
