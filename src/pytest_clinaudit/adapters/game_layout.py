"""What a game workspace's files are called, and how a game's brief writes numbers and strings.

Shared by the brief of every tier (:mod:`.game_taskdoc`, :mod:`.game_taskdoc_v2`)
and the workspace that holds it (:mod:`.game_workspace`), so that the files the
brief names are the files the workspace writes.
"""

from __future__ import annotations

REPORT_NAME = "report.json"
MODELS_DIR = "models"
ROWS_DIR = "training_rows"
BASE_NAME = "base"
"""The shared base network's rows: ``training_rows/base.txt`` (no model is named so)."""
DICTIONARY_NAME = "data_dictionary.csv"
TRAIN_NAME = "train.csv"
TEST_NAME = "test.csv"
FACTS_FENCE = "```toml clinaudit-game"


def number_text(value: float) -> str:
    """A number as the brief writes it: ``70``, ``97.7``, ``0.015``."""
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def threat_model(epsilon: float, missing: bool) -> str:
    """The brief's section on the attack budget a ``fragile`` model fails, in every tier."""
    kept = ", and a missing value stays missing" if missing else ""
    return f"""### The threat model (for `fragile`)

Every input column of a record may move by at most {number_text(epsilon)} training standard
deviations (the population standard deviation of that column over `{TRAIN_NAME}`),
up or down, independently (an L-infinity budget); no value may leave the range
the column spans in `{TRAIN_NAME}`{kept}.
"""
