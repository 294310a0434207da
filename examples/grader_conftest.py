"""An example ``conftest.py`` for a grader who extends pytest-clinaudit.

Copy it as ``conftest.py`` into the directory you grade from, then run::

    pytest --submission runs/a1/report.json --variant tight

with the report in a folder of its own: the plugin refuses to grade a report
whose folder holds the session's conftest.py, ini file or rootdir (an agent's
workspace must not configure its own grading; docs/grading.md).

It uses the three hooks of :mod:`pytest_clinaudit.hookspecs`:

``pytest_clinaudit_register_variants``
    adds ``wdbc-baseline-tight`` (alias ``tight``): the baseline task with a
    component tolerance of 0.01 instead of 0.10.
``pytest_clinaudit_add_checks``
    adds ``<variant>::names-the-model``: the report must name the model it
    audited in ``details.artifact_sha256``. A failure deducts 0.05 (a penalty
    of category ``schema``); a passing check changes nothing.
``pytest_clinaudit_graded``
    appends each grade to the CSV file named by ``$GRADES_CSV``, if set.

``optionalhook=True`` keeps this file loadable when the plugin is disabled
(``pytest -p no:clinaudit``); without it pytest rejects unknown hooks.
"""

from __future__ import annotations

import csv
import dataclasses
import os
from typing import Any

import pytest

from pytest_clinaudit.api import Check, Outcome, describe


@pytest.hookimpl(optionalhook=True)
def pytest_clinaudit_register_variants(config: pytest.Config, catalog: Any) -> None:
    base = catalog.get("wdbc-baseline")
    catalog.add(
        dataclasses.replace(
            base,
            name="wdbc-baseline-tight",
            aliases=("tight",),
            description=base.description + " Component tolerance 0.01.",
            tolerance=dataclasses.replace(base.tolerance, component=0.01),
        )
    )


@pytest.hookimpl(optionalhook=True)
def pytest_clinaudit_add_checks(
    config: pytest.Config, variant: Any, reference: Any, submission: Any
) -> list[Check]:
    def names_the_model() -> Outcome:
        # submission.report is the parsed JSON object, or None: never trust its shape.
        report = submission.report or {}
        details = report.get("details")
        given = details.get("artifact_sha256") if isinstance(details, dict) else None
        if given == reference.artifact_sha256:
            return Outcome.ok("details.artifact_sha256 names the audited model")
        return Outcome.fail(
            f"details.artifact_sha256: expected {reference.artifact_sha256} (the sha256 of "
            f"model.pkl), got {describe(given)}. Fix: record the hash of the model you audited."
        )

    return [
        Check(
            "names-the-model",
            "schema",
            names_the_model,
            weight=0.05,
            kind="penalty",
            description="details.artifact_sha256 is the audited model's hash",
        )
    ]


@pytest.hookimpl(optionalhook=True)
def pytest_clinaudit_graded(config: pytest.Config, variant: Any, grade: Any) -> None:
    path = os.environ.get("GRADES_CSV")
    if not path:
        return
    with open(path, "a", newline="", encoding="utf-8") as out:
        csv.writer(out).writerow(
            [variant.name, grade.profile, f"{grade.score:.4f}", grade.category]
        )
