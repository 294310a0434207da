"""The graders' public API: everything a ``conftest.py`` or plugin needs to extend grading.

Checks
    :class:`Check` (a question asked of a submission), :class:`Outcome` (its
    answer), :data:`CheckResult`, and :class:`Grading` (what a check compares:
    variant, reference, submission, profile).
Hooks
    Declared in :mod:`pytest_clinaudit.hookspecs`:
    ``pytest_clinaudit_register_variants(config, catalog)``,
    ``pytest_clinaudit_add_checks(config, variant, reference, submission)`` (return
    a list of :class:`Check`), ``pytest_clinaudit_graded(config, variant, grade)``.
The objects hooks receive
    :class:`Catalog` and :class:`Variant`, :class:`Reference`,
    :class:`Submission`, and :class:`Grade` with its :class:`CheckRecord`\\ s.
Reading submitted values
    :func:`json_number` (a finite JSON number or ``None``) and :func:`describe`
    (a value, briefly and safely, for a message): a submission is untrusted.

See ``examples/grader_conftest.py`` and docs/grading.md. Names imported from
here keep working when the modules behind them move.
"""

from __future__ import annotations

from pytest_clinaudit.catalog.references import Reference
from pytest_clinaudit.catalog.variants import Catalog, Variant
from pytest_clinaudit.grading.checks import Check, CheckResult, Grading, Outcome
from pytest_clinaudit.grading.scoring import CheckRecord, Grade
from pytest_clinaudit.grading.submission import Submission
from pytest_clinaudit.grading.values import describe, json_number

__all__ = [
    "Catalog",
    "Check",
    "CheckRecord",
    "CheckResult",
    "Grade",
    "Grading",
    "Outcome",
    "Reference",
    "Submission",
    "Variant",
    "describe",
    "json_number",
]
