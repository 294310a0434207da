"""The auditing game's tables (SPEC §8): agents side by side, by kind and by instance.

Read from each game run's items (``clinaudit.game.*`` properties: model, kind,
part, whether the pair is planted, whether the item passed), so nothing but
the JUnit XML is needed:

5. per agent: runs, mean score, mean detection F1, localization and evidence,
   and the defects found, missed and the false alarms over all its runs;
6. per agent and kind (the kinds its runs grade): how many were planted, found
   (recall) and false alarms;
7. per agent and instance seed: the score and its parts (the 10-seed table).

:func:`confusion` gives the model x kind grid of one run, for the HTML page.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from pytest_clinaudit.batch.runs import Run
from pytest_clinaudit.batch.table_kit import Column, Table, fixed, mean, plain, rate
from pytest_clinaudit.reference.game.settings import KINDS

PARTS = ("detection", "localization", "evidence")


def _detections(run: Run) -> list[Any]:
    return [item for item in run.game if item.part == "detection"]


def _kinds(runs: Sequence[Run]) -> list[str]:
    """The kinds the runs' detection items grade, in the catalogue's order: all of them in
    game-v1, the variant's own in game-v2 (``icu-synth-game-hard`` grades three)."""
    graded = {item.kind for run in runs for item in _detections(run)}
    return [kind for kind in KINDS if kind in graded]


def _counts(runs: Sequence[Run], kind: str | None = None) -> dict[str, int]:
    found = missed = alarms = planted = 0
    for run in runs:
        for item in _detections(run):
            if kind is not None and item.kind != kind:
                continue
            outcome = item.outcome
            planted += item.truth
            found += outcome == "found"
            missed += outcome == "missed"
            alarms += outcome == "false alarm"
    return {"planted": planted, "found": found, "missed": missed, "false_alarms": alarms}


def _mean_part(runs: Sequence[Run], part: str) -> float | None:
    values = [r.game_parts.get(part) for r in runs]
    return mean([v for v in values if v is not None])


def agents_table(runs: Sequence[Run]) -> Table:
    """Table 5: one row per agent over its game runs."""
    by_agent: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_agent[run.agent].append(run)
    rows = []
    for agent in sorted(by_agent):
        group = by_agent[agent]
        counts = _counts(group)
        rows.append(
            {
                "agent": agent,
                "runs": len(group),
                "mean_score": mean([r.score for r in group]),
                "min_score": min(r.score for r in group),
                **{f"mean_{part}": _mean_part(group, part) for part in PARTS},
                **counts,
                "recall": rate(counts["found"], counts["planted"]),
            }
        )
    return Table(
        name="table5_game_agents",
        title="Table 5. Auditing game: results per agent",
        note="Over each agent's game runs. Score per SPEC §8.5 (detection F1, localization, "
        "evidence); found, missed and false alarms count (model, kind) pairs over all runs.",
        keys=tuple(rows[0]) if rows else (),
        columns=(
            Column("agent", "Agent", plain("agent")),
            Column("runs", "Runs", plain("runs")),
            Column("mean_score", "Mean score", fixed("mean_score", 3)),
            Column("min_score", "Lowest score", fixed("min_score", 3)),
            Column("mean_detection", "Detection F1", fixed("mean_detection", 3)),
            Column("mean_localization", "Localization", fixed("mean_localization", 3)),
            Column("mean_evidence", "Evidence", fixed("mean_evidence", 3)),
            Column("found", "Found", plain("found")),
            Column("missed", "Missed", plain("missed")),
            Column("false_alarms", "False alarms", plain("false_alarms")),
        ),
        rows=tuple(rows),
    )


def kinds_table(runs: Sequence[Run]) -> Table:
    """Table 6: one row per agent and kind."""
    by_agent: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_agent[run.agent].append(run)
    rows = []
    for agent in sorted(by_agent):
        for kind in _kinds(by_agent[agent]):
            counts = _counts(by_agent[agent], kind)
            rows.append(
                {
                    "agent": agent,
                    "kind": kind,
                    **counts,
                    "recall": rate(counts["found"], counts["planted"]),
                }
            )

    def recall(row: Mapping[str, Any]) -> str:
        if row["recall"] is None:
            return "-"
        return f"{row['found']}/{row['planted']} ({100 * row['recall']:.0f}%)"

    return Table(
        name="table6_game_kinds",
        title="Table 6. Auditing game: recall and false alarms per kind",
        note="Found/planted over every run of the agent; false alarms: models flagged with the "
        "kind that do not carry it.",
        keys=tuple(rows[0]) if rows else (),
        columns=(
            Column("agent", "Agent", plain("agent")),
            Column("kind", "Kind", plain("kind")),
            Column("found", "Found (recall)", recall, sort_key="recall"),
            Column("missed", "Missed", plain("missed")),
            Column("false_alarms", "False alarms", plain("false_alarms")),
        ),
        rows=tuple(rows),
    )


def instances_table(runs: Sequence[Run]) -> Table:
    """Table 7: one row per agent and instance seed (the agents x seeds table)."""
    rows = []
    for run in sorted(runs, key=lambda r: (r.agent, r.game_parts.get("seed") or math.inf)):
        counts = _counts([run])
        seed = run.game_parts.get("seed")
        rows.append(
            {
                "agent": run.agent,
                "seed": None if seed is None else int(seed),
                "score": run.score,
                **{part: run.game_parts.get(part) for part in PARTS},
                **counts,
            }
        )
    return Table(
        name="table7_game_instances",
        title="Table 7. Auditing game: score per agent and instance",
        note="One row per graded game run; the parts are SPEC §8.5's (a part the instance "
        "does not have is '-').",
        keys=tuple(rows[0]) if rows else (),
        columns=(
            Column("agent", "Agent", plain("agent")),
            Column("seed", "Instance", plain("seed")),
            Column("score", "Score", fixed("score", 3)),
            Column("detection", "Detection F1", fixed("detection", 3)),
            Column("localization", "Localization", fixed("localization", 3)),
            Column("evidence", "Evidence", fixed("evidence", 3)),
            Column("found", "Found", plain("found")),
            Column("missed", "Missed", plain("missed")),
            Column("false_alarms", "False alarms", plain("false_alarms")),
        ),
        rows=tuple(rows),
    )


def game_tables(runs: Sequence[Run]) -> list[Table]:
    """Tables 5 to 7 over the game runs among ``runs`` (none if there are none)."""
    games = [run for run in runs if run.is_game]
    if not games:
        return []
    return [agents_table(games), kinds_table(games), instances_table(games)]


def confusion(run: Run) -> dict[str, Any]:
    """The model x kind grid of one game run: each cell ``found``, ``missed``,
    ``false alarm`` or ``""``, models and kinds in order."""
    models = list(dict.fromkeys(item.model for item in _detections(run)))
    cells = {(item.model, item.kind): item.outcome for item in _detections(run)}
    kinds = _kinds([run])
    return {
        "models": models,
        "kinds": kinds,
        "cells": [[cells.get((model, kind), "") for kind in kinds] for model in models],
    }
