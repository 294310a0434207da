"""The graded runs a batch report reads: one record per grading session's JUnit XML.

Every grading session writes its grade into its JUnit XML: the suite
properties ``clinaudit.score``, ``.category``, ``.variant``, ``.profile``,
``.reference_sps``, ``.submitted.sps``, ``.semantics`` and ``.meta.<key>``
(agent, run, tokens, turns), a game's ``clinaudit.game.*`` parts, and per test
case ``clinaudit.check`` and ``.passed`` (and a game item's ``clinaudit.game.*``).
This module reads them (with junitparser, imported here and only when a report
is made) into :class:`Run` records.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_clinaudit.grading.scoring import NONE
from pytest_clinaudit.grading.values import text_number
from pytest_clinaudit.reference.attacks.params import COMPONENTS

UNKNOWN_AGENT = "unknown"
"""The agent of a run graded without ``--clinaudit-meta agent=...``."""
COMPLETION_SCORE = 1.0
"""A run is complete when it scores exactly this (every check passed)."""

Warn = Callable[[str], None]


class ReportError(ValueError):
    """No report can be made (no such directory, no graded runs); the message says why."""


@dataclasses.dataclass(frozen=True)
class GameItem:
    """One item of a graded game report (its ``clinaudit.game.*`` properties)."""

    model: str
    kind: str
    part: str
    """``detection``, ``localization`` or ``evidence``."""
    truth: bool
    """The pair is planted (always true for localization and evidence)."""
    passed: bool
    skipped: bool

    @property
    def outcome(self) -> str:
        """A detection item's outcome: ``found``, ``missed``, ``false alarm`` or ``""`` (right)."""
        flagged = not self.skipped and self.passed == self.truth
        if self.truth:
            return "found" if flagged else "missed"
        return "false alarm" if flagged else ""


@dataclasses.dataclass(frozen=True)
class Run:
    """One graded submission, as its JUnit XML records it."""

    source: Path
    agent: str
    run: str | None
    variant: str
    profile: str
    score: float
    category: str
    reference_sps: float | None
    submitted_sps: float | None
    """The submitted SPS when it was a JSON number, else ``None``."""
    passed: Mapping[str, bool]
    """Check name (``sps``, ``component[fgsm_robustness]``, ...) -> passed."""
    tokens: float | None
    turns: float | None
    semantics: str = ""
    """``game-v1`` for a game report; empty for the audit task (older files say nothing)."""
    game: tuple[GameItem, ...] = ()
    game_parts: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    """``detection``, ``localization``, ``evidence`` and ``seed`` of a game run."""

    @property
    def is_game(self) -> bool:
        return self.semantics.startswith("game")

    @property
    def completed(self) -> bool:
        return self.score >= COMPLETION_SCORE

    def component_passed(self, component: str) -> bool:
        """The component's check passed (a check that did not run did not pass)."""
        return self.passed.get(f"component[{component}]", False)

    def record(self) -> dict[str, Any]:
        return {
            "file": str(self.source),
            "agent": self.agent,
            "run": self.run,
            "variant": self.variant,
            "profile": self.profile,
            "score": self.score,
            "category": self.category,
            "reference_sps": self.reference_sps,
            "submitted_sps": self.submitted_sps,
            "tokens": self.tokens,
            "turns": self.turns,
            **{f"{c}_passed": self.component_passed(c) for c in COMPONENTS},
        }


def _properties(element: Any) -> dict[str, str]:
    from junitparser import Properties

    found = element.child(Properties)
    if found is None:
        return {}
    return {str(p.name): str(p.value) for p in found}


def _runs_of_file(path: Path, warn: Warn) -> list[Run]:
    from junitparser import JUnitXml, TestSuite

    try:
        document = JUnitXml.fromfile(str(path))
    except Exception as exc:  # noqa: BLE001 - junitparser raises ParseError, JUnitXmlError, lxml's...
        warn(f"skipped {path}: not a JUnit XML file ({type(exc).__name__}: {exc})")
        return []
    suites = [document] if isinstance(document, TestSuite) else list(document)
    runs = []
    for suite in suites:
        properties = _properties(suite)
        if "clinaudit.score" not in properties:
            continue
        score = text_number(properties["clinaudit.score"])
        if score is None:
            warn(f"skipped a suite of {path}: clinaudit.score {properties['clinaudit.score']!r}")
            continue
        passed: dict[str, bool] = {}
        items: list[GameItem] = []
        for case in suite:
            case_properties = _properties(case)
            if "clinaudit.check" in case_properties:
                passed[case_properties["clinaudit.check"]] = (
                    case_properties.get("clinaudit.passed", "").lower() == "true"
                )
            if "clinaudit.game.part" in case_properties:
                items.append(
                    GameItem(
                        model=case_properties.get("clinaudit.game.model", "?"),
                        kind=case_properties.get("clinaudit.game.kind", "?"),
                        part=case_properties["clinaudit.game.part"],
                        truth=case_properties.get("clinaudit.game.truth", "").lower() == "true",
                        passed=case_properties.get("clinaudit.passed", "").lower() == "true",
                        skipped=case_properties.get("clinaudit.skipped", "").lower() == "true",
                    )
                )
        runs.append(
            Run(
                source=path,
                agent=properties.get("clinaudit.meta.agent") or UNKNOWN_AGENT,
                run=properties.get("clinaudit.meta.run"),
                variant=properties.get("clinaudit.variant", "?"),
                profile=properties.get("clinaudit.profile", "?"),
                score=score,
                category=properties.get("clinaudit.category", NONE),
                reference_sps=text_number(properties.get("clinaudit.reference_sps")),
                submitted_sps=text_number(properties.get("clinaudit.submitted.sps")),
                passed=passed,
                tokens=text_number(properties.get("clinaudit.meta.tokens")),
                turns=text_number(properties.get("clinaudit.meta.turns")),
                semantics=properties.get("clinaudit.semantics", ""),
                game=tuple(items),
                game_parts={
                    key: text_number(properties.get(f"clinaudit.game.{key}"))
                    for key in ("seed", "detection", "localization", "evidence")
                    if f"clinaudit.game.{key}" in properties
                },
            )
        )
    if not runs:
        warn(f"skipped {path}: not a clinaudit grading run (no clinaudit.score property)")
    return runs


def read_junit_runs(directory: Path, warn: Warn) -> tuple[list[Run], int]:
    """Every graded run in the ``*.xml`` files under ``directory`` (recursively).

    Returns
    -------
    runs, files
        The runs, in file-name order, and how many XML files were read.

    Raises
    ------
    ReportError
        ``directory`` is missing, holds no XML file, or none of them is a grading run.
    """
    if not directory.is_dir():
        raise ReportError(f"{directory} is not a directory")
    files = sorted(directory.rglob("*.xml"))
    if not files:
        raise ReportError(
            f"{directory} holds no JUnit XML files (*.xml); grade submissions first with "
            f"`clinaudit grade-many MANIFEST --out {directory}` (or pytest --junitxml)"
        )
    runs = [run for path in files for run in _runs_of_file(path, warn)]
    if not runs:
        raise ReportError(
            f"none of the {len(files)} XML file(s) under {directory} is a clinaudit grading run "
            "(a JUnit XML with the clinaudit.score suite property)"
        )
    return runs, len(files)
