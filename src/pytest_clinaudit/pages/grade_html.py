"""The grade in pytest-html's page: ``pytest --submission r.json --variant v --html=grade.html``.

:class:`GradeColumns` is a pytest plugin object that the grading plugin
registers in ``pytest_configure`` only when pytest-html is installed and active
(``config.pluginmanager.hasplugin("html")``), on the process that sees every
report (not on xdist workers). Its hooks are pytest-html's own (4.x):

``pytest_html_results_table_header``
    adds the columns Kind, Weight, Credit, Reference and Submitted;
``pytest_html_results_table_row``
    fills them for each check from the session's own records: the check's
    :class:`~pytest_clinaudit.grading.scoring.CheckRecord`, and the reference and
    submitted values of :func:`~pytest_clinaudit.grading.outputs.compared_values`;
``pytest_html_results_summary``
    puts the score, category, profile, variant, reference and metadata at the top.

Each hook is an ``optionalhook``, and this module never imports pytest-html.
pytest-html takes cells as HTML text, which is rendered here through the
pages' autoescaping templates (``grade_cells.html.j2``), so a metadata value
such as ``<script>`` shows as text. Cell classes ``col-<name>`` make the new
columns sortable by pytest-html's own sorter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_clinaudit.grading.session import GradingSession

COLUMNS = (
    ("kind", "Kind"),
    ("weight", "Weight"),
    ("credit", "Credit"),
    ("reference", "Reference"),
    ("submitted", "Submitted"),
)
"""(pytest-html column type, header) of each column added, in order."""

INSERT_AT = 2
"""The new columns follow pytest-html's Result and Test columns."""


def _shown(value: Any) -> str:
    """A value for a cell: numbers to 6 significant digits, ``-`` for none."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, ".6g")
    return str(value)


class GradeColumns:
    """pytest-html hooks that show one grading session's checks and grade."""

    def __init__(self, grading: GradingSession) -> None:
        self.grading = grading

    def _macros(self) -> Any:
        from pytest_clinaudit.pages.render import environment

        return environment().get_template("grade_cells.html.j2").module

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        macros = self._macros()
        cells[INSERT_AT:INSERT_AT] = [str(macros.header(kind, text)) for kind, text in COLUMNS]

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        from pytest_clinaudit.grading.outputs import compared_values, submitted_values

        record = self.grading.results.records.get(report.nodeid)
        values: dict[str, str] = dict.fromkeys((kind for kind, _ in COLUMNS), "")
        if record is not None:
            values.update(
                kind=record.kind,
                weight=_shown(record.weight),
                credit="skipped" if record.skipped else _shown(record.credit),
            )
            compared = compared_values(
                record.name,
                reference=self.grading.reference,
                submitted=submitted_values(self.grading.submission),
            )
            if compared is not None:
                values.update(reference=_shown(compared[0]), submitted=_shown(compared[1]))
        macros = self._macros()
        cells[INSERT_AT:INSERT_AT] = [str(macros.cell(kind, values[kind])) for kind, _ in COLUMNS]

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        grading = self.grading
        grade = grading.grade
        reference = grading.reference
        facts = [
            ("Variant", grading.variant.name),
            ("Submission", str(grading.options.submission)),
            ("Reference SPS", f"{reference.sps:.2f}"),
            ("Reference verdict", _shown(reference.report.get("verdict"))),
            ("Reference artifact", reference.artifact_sha256),
            *((f"Meta: {key}", value) for key, value in grading.options.meta),
        ]
        prefix.append(
            str(
                self._macros().summary(
                    score=None if grade is None else f"{grade.score:.3f}",
                    no_submission=grade is not None and grade.raw_score is None,
                    category=None if grade is None else grade.category,
                    profile=grading.options.profile,
                    invariants_ok=grade is None or grade.invariants_ok,
                    facts=facts,
                )
            )
        )
