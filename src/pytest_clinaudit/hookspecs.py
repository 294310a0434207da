"""Hooks a grader's ``conftest.py`` or plugin can implement to extend grading.

Registered by ``pytest_addhooks``; pytest-clinaudit always calls them with
keyword arguments. Implement them with ``@pytest.hookimpl(optionalhook=True)``
so that the conftest still loads when the plugin is disabled
(``-p no:clinaudit``). See ``examples/grader_conftest.py`` and docs/grading.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pytest_clinaudit.api import Catalog, Check, Grade, Reference, Submission, Variant


@pytest.hookspec()
def pytest_clinaudit_register_variants(config: pytest.Config, catalog: Catalog) -> None:
    """Add variants before ``--variant`` is resolved.

    Called once per process (controller and every xdist worker) with the catalog
    of shipped variants plus ``--clinaudit-variants-dir``. Use ``catalog.add(variant)``
    or ``catalog.add_directory(path)``; a name or alias already taken is an error.
    """


@pytest.hookspec()
def pytest_clinaudit_add_checks(
    config: pytest.Config, variant: Variant, reference: Reference, submission: Submission
) -> list[Check] | None:
    """Return extra checks to grade ``submission`` with.

    Called once per process while the grading items are collected; each check
    becomes a test item ``<variant>::<name>``. Return the same checks in every
    process (xdist workers must collect identical items). ``submission.document``
    is the parsed JSON (``None`` if it could not be read): treat it as untrusted,
    and read its numbers with :func:`pytest_clinaudit.api.json_number`.
    A check's ``kind`` and ``weight`` decide how it counts (see
    :mod:`pytest_clinaudit.grading.scoring`).
    """


@pytest.hookspec()
def pytest_clinaudit_graded(config: pytest.Config, variant: Variant, grade: Grade) -> None:
    """Called once with the final grade, on the process that saw every check.

    That is the controller under pytest-xdist. Runs before the JUnit XML and the
    score JSON are written, so an implementation may not change them; use it to
    post the grade elsewhere.
    """
