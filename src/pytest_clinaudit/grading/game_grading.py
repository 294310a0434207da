"""One grading of a game report: the variant, the instance, the report and what it says.

:class:`GameGrading` is what every check of a game report receives
(:mod:`.game_checks`, :mod:`.game_checks_v2`): the report's decisions read once
under the semantics' rules (:mod:`.game_rules`), the zoo once when a claim is
tried on it (:mod:`.game_zoo`), and the precision rule every localization and
evidence item shares (a model flagged with more kinds than a model carries earns
nothing).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

from pytest_clinaudit.grading.checks import Outcome
from pytest_clinaudit.grading.game_report import Decisions, read_decisions
from pytest_clinaudit.grading.game_rules import GameRules, rules_for

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.catalog.instances import GameReference
    from pytest_clinaudit.grading.game_zoo import Zoo
    from pytest_clinaudit.grading.submission import Submission


@dataclasses.dataclass(frozen=True)
class GameGrading:
    """Everything the game's checks compare: the report against the instance."""

    variant: GameVariant
    reference: GameReference
    submission: Submission
    profile: str
    cache: ReferenceCache

    @property
    def strict(self) -> bool:
        return self.profile == "strict"

    def id(self, name: str) -> str:
        return f"{self.variant.name}::{name}"

    @functools.cached_property
    def rules(self) -> GameRules:
        return rules_for(self.variant)

    @functools.cached_property
    def decisions(self) -> Decisions:
        return read_decisions(
            self.submission,
            self.reference.names,
            self.rules.kinds,
            self.rules.keys(),
            strict=self.strict,
        )

    @functools.cached_property
    def zoo(self) -> Zoo:
        """The test patients and the models, in NumPy (:mod:`.game_zoo`); a ``VariantError``
        when the cache no longer holds the test rows or their labels."""
        from pytest_clinaudit.grading.game_zoo import load_zoo

        return load_zoo(self.reference, self.cache, self.variant.game)

    def unreadable(self) -> Outcome | None:
        """A skip when the report has no decisions to read: the stage and schema checks count
        it, and a skipped item is neither found nor a false alarm."""
        if not self.decisions.readable:
            return Outcome.skip(f"not applicable: {self.decisions.why_unreadable}")
        return None

    def hedge(self, model: str) -> str:
        """``"3 kinds (a, b, c)"`` when the report flags ``model`` with more kinds than a model
        carries (:attr:`.GameRules.max_defects`), else ``""``."""
        kinds = sorted(self.decisions.flags.get(model, frozenset()))
        hedged = len(kinds) > self.rules.max_defects
        return f"{len(kinds)} kinds ({', '.join(kinds)})" if hedged else ""

    def needs_flag(self, model: str, kind: str, key: str) -> Outcome | None:
        """The failing outcome of a localization or evidence item whose model is not flagged
        with ``kind`` alone (``None`` when it is)."""
        blocked = self.unreadable()
        if blocked is not None:
            return blocked
        if not self.decisions.flagged(model, kind):
            return Outcome.fail(
                f"models.{model}.{kind}.{key}: no credit, {model} is not flagged {kind}"
            )
        hedge = self.hedge(model)
        if hedge:
            return Outcome.fail(
                f"models.{model}.{kind}.{key}: no credit, the report flags {model} with {hedge} "
                f"and a model has at most {self.rules.at_most}"
            )
        return None
