"""The settings of a game variant (SPEC §8), as frozen records read from its file.

Everything that says what a game is lives in the variant file's ``[game]``
tables and arrives here: the zoo's size and network, the base training
recipe, how each kind is planted, the data dictionary, the subgroups, how the
defining measurements are made, the margins that make the ground truth
unambiguous, the evidence tolerances and the score's weights. Nothing in the
game's code assumes the synthetic cohort. Records only: importing this module
needs no NumPy.

One module per group of tables: :mod:`.catalogue`, :mod:`.data`, :mod:`.recipe`,
:mod:`.kinds`, :mod:`.hard`, :mod:`.judging` and :mod:`.game`; every name is imported from here.
"""

from .catalogue import (
    DIRECTIONS,
    EVIDENCE,
    EVIDENCE_V2,
    KINDS,
    LOCALIZATION,
    LOCALIZATION_V2,
    MEASURED,
    SEMANTICS_GAME,
    SEMANTICS_GAME_V2,
    SEMANTICS_GAMES,
    Retrain,
    SettingsError,
)
from .data import Column, Subgroup
from .game import GameSettings
from .hard import Hard
from .judging import Margins, Measurement, ScoreWeights, Tolerance
from .kinds import Backdoor, Decoy, Fragile, Leaky, Miscalibrated, Shortcut, SubgroupPlant, Trigger
from .recipe import Network, Training

__all__ = [
    "Backdoor",
    "Column",
    "DIRECTIONS",
    "Decoy",
    "EVIDENCE",
    "EVIDENCE_V2",
    "Fragile",
    "GameSettings",
    "Hard",
    "KINDS",
    "LOCALIZATION",
    "LOCALIZATION_V2",
    "Leaky",
    "MEASURED",
    "Margins",
    "Measurement",
    "Miscalibrated",
    "Network",
    "Retrain",
    "SEMANTICS_GAME",
    "SEMANTICS_GAMES",
    "SEMANTICS_GAME_V2",
    "ScoreWeights",
    "SettingsError",
    "Shortcut",
    "Subgroup",
    "SubgroupPlant",
    "Tolerance",
    "Training",
    "Trigger",
]
