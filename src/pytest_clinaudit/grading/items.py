"""The test items of a grading session: one pytest item per check.

:class:`GradingCollector` is the session's only collector; each
:class:`CheckItem` runs one check and carries its result in
``user_properties``, which reach the JUnit XML and, under pytest-xdist, the
controller, where :class:`Results` gathers them for the grade.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

import pytest

from pytest_clinaudit.grading import checks
from pytest_clinaudit.grading.scoring import CheckRecord
from pytest_clinaudit.grading.values import shorten


class CheckSource(Protocol):
    """What the collector asks of a grading session (:class:`~.session.GradingSession`)."""

    @property
    def checks(self) -> list[checks.Check]:
        """Every check of the session, built-in ones first."""
        ...

    @property
    def builtin_names(self) -> set[str]:
        """The names of the built-in checks, known once :attr:`checks` was read."""
        ...


class Results:
    """A plugin object that keeps the check result carried by each test report."""

    def __init__(self) -> None:
        self.records: dict[str, CheckRecord] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        found = CheckRecord.from_properties(report.nodeid, report.user_properties)
        if found is not None:
            self.records[report.nodeid] = found


class CheckFailed(Exception):
    """A check's verdict, not a crash: reported as its message alone."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class GradingCollector(pytest.Collector):
    """The only collector of a grading session: one item per check."""

    def __init__(self, *, grading: CheckSource, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.grading = grading

    def collect(self) -> list[pytest.Item]:
        try:
            found = self.grading.checks
        except (TypeError, ValueError) as exc:  # a grader's hook returned something unusable
            raise self.CollectError(str(exc)) from None
        builtin = self.grading.builtin_names
        return [
            CheckItem.from_parent(self, name=check.name, check=check, builtin=check.name in builtin)
            for check in found
        ]


class CheckItem(pytest.Item):
    """One check as a test item, e.g. ``wdbc-hard::component[fgsm_robustness]``."""

    def __init__(self, *, check: checks.Check, builtin: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.builtin = builtin

    def runtest(self) -> None:
        __tracebackhide__ = True
        try:
            outcome = checks.normalize(self.check.run(), self.check)
        except AssertionError as exc:
            outcome = checks.Outcome.fail(str(exc) or f"{self.check.name} failed")
        except Exception as exc:
            if not self.builtin:
                # A grader's own check crashed: record no credit and show the traceback.
                failed = checks.Outcome.fail(f"the check raised {type(exc).__name__}: {exc}")
                self.user_properties.extend(
                    checks.record(self.check, failed, self.nodeid).properties()
                )
                raise
            outcome = checks.Outcome.fail(
                f"internal error in pytest-clinaudit while checking {self.check.name}: "
                f"{type(exc).__name__}: {shorten(str(exc), 300)}. Please report it; "
                "the check earns no credit."
            )
        result = checks.record(self.check, outcome, self.nodeid)
        self.user_properties.extend(result.properties())
        self.user_properties.extend(self.check.properties)
        if outcome.skipped:
            pytest.skip(outcome.message)
        if not outcome.passed:
            raise CheckFailed(self._failure_text(result))

    def _failure_text(self, result: CheckRecord) -> str:
        how = {
            "credit": f"credit {result.credit:g} of weight {result.weight:g}",
            "penalty": f"deducts {result.weight * (1 - result.credit):g}",
            "info": "informational in this profile",
        }[result.kind]
        return f"{result.message}\n[{result.category}; {how}]"

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | Any:
        if isinstance(excinfo.value, CheckFailed):
            return excinfo.value.message
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.parent.name if self.parent else ''}::{self.name}"
