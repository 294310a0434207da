"""``clinaudit report DIR --html``: the batch report as one self-contained page.

The page shows exactly what ``report.md`` and ``report.json`` hold: each of
the four tables with the Markdown's cell texts (from the same
:class:`~pytest_clinaudit.batch.tables.Column` functions), each cell carrying
its report.json value in ``data-value`` so the tables sort by the numbers, not
the text. Then the two plots of the Markdown report and a heatmap of mean score
per agent x variant, as inline SVG, and every run that was read. Game runs add
a model x kind grid per run (found, missed, false alarm), grouped by agent.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.pages.render import render, write_page
from pytest_clinaudit.versions import installed_version

if TYPE_CHECKING:
    from pytest_clinaudit.batch.tables import Report, Run, Table

SCORE_DIGITS = 3


@dataclass(frozen=True)
class Header:
    text: str
    numeric: bool
    key: str = ""
    """The report.json key of the values the column sorts by (``data-key``)."""
    wrap: bool = False
    """Long text (file names): may wrap inside the cell."""


@dataclass(frozen=True)
class Cell:
    text: str
    value: str
    """What the column sorts by: a JSON number, a string, or empty for "not applicable"."""


def sort_value(value: Any) -> str:
    """A report.json value as the text a sortable cell carries (``""`` for ``None``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float)):
        return json.dumps(value) if math.isfinite(value) else ""
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def table_view(table: Table) -> dict[str, Any]:
    """Headers and cells of a table: the Markdown's texts, report.json's values."""
    headers = [
        Header(
            column.header,
            key=column.order_key,
            numeric=all(
                row[column.order_key] is None or _is_number(row[column.order_key])
                for row in table.rows
            )
            and any(_is_number(row[column.order_key]) for row in table.rows),
        )
        for column in table.columns
    ]
    rows = [
        [Cell(column.cell(row), sort_value(row[column.order_key])) for column in table.columns]
        for row in table.rows
    ]
    return {
        "id": table.name,
        "caption": table.title,
        "note": table.note,
        "headers": headers,
        "rows": rows,
    }


def _runs_view(report: Report) -> dict[str, Any]:
    def relative(run: Run) -> str:
        try:
            return str(run.source.relative_to(report.source))
        except ValueError:
            return str(run.source)

    def fixed(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    headers = [
        Header("Agent", False, "agent"),
        Header("Run", False, "run", wrap=True),
        Header("Variant", False, "variant"),
        Header("Score", True, "score"),
        Header("Category", False, "category"),
        Header("Submitted SPS", True, "submitted_sps"),
        Header("Ref. SPS", True, "reference_sps"),
        Header("File", False, "file", wrap=True),
    ]
    rows = [
        [
            Cell(run.agent, run.agent),
            Cell(run.run or "-", run.run or ""),
            Cell(run.variant, run.variant),
            Cell(fixed(run.score, SCORE_DIGITS), sort_value(run.score)),
            Cell(run.category, run.category),
            Cell(fixed(run.submitted_sps, 2), sort_value(run.submitted_sps)),
            Cell(fixed(run.reference_sps, 2), sort_value(run.reference_sps)),
            Cell(relative(run), relative(run)),
        ]
        for run in report.runs
    ]
    return {
        "id": "runs",
        "caption": "Every graded run",
        "note": "One row per grading session read, in file order; run is the run metadata.",
        "headers": headers,
        "rows": rows,
    }


def _cards(report: Report) -> list[dict[str, str]]:
    runs = report.runs
    agents = sorted({r.agent for r in runs})
    variants = sorted({r.variant for r in runs})
    completed = sum(r.completed for r in runs)
    mean = math.fsum(r.score for r in runs) / len(runs) if runs else None
    return [
        {
            "label": "Graded runs",
            "value": str(len(runs)),
            "sub": f"from {report.files} XML file(s)",
        },
        {"label": "Agents", "value": str(len(agents)), "sub": f"{len(variants)} variant(s)"},
        {
            "label": "Mean score",
            "value": "-" if mean is None else f"{mean:.{SCORE_DIGITS}f}",
            "sub": "no submission counts as 0",
        },
        {
            "label": "Completed",
            "value": f"{completed}/{len(runs)}",
            "sub": "runs scoring 1.0",
        },
    ]


def _figures(report: Report) -> list[dict[str, Any]]:
    from markupsafe import Markup

    from pytest_clinaudit.pages import figures

    agents_rows: Sequence[Mapping[str, Any]] = report.tables[0].rows
    pair_rows: Sequence[Mapping[str, Any]] = report.tables[1].rows
    # Markup: SVG that pages.figures serialised itself, every data label escaped there.
    return [
        {
            "svg": Markup(figures.score_heatmap(pair_rows)),
            "caption": "Mean score per agent and variant",
            "how": "Each cell is the mean score of an agent's runs on a variant (Table 2's "
            "last column), with the number of runs; yellow is 1.0, dark purple 0. Hatched "
            "grey cells had no runs: they are not a score of 0.",
            "wide": False,
        },
        {
            "svg": Markup(figures.batch_figure("completion", agents_rows)),
            "caption": "Completion rate by agent",
            "how": "The share of an agent's runs that scored exactly 1.0 (every check "
            "passed), labelled completed/runs (Table 1).",
            "wide": False,
        },
        {
            "svg": Markup(figures.batch_figure("sps-error", pair_rows)),
            "caption": "SPS error by variant and agent",
            "how": "Mean submitted minus reference SPS; 0 is a right answer. Error bars are "
            "the population σ of the submitted SPS; n counts the runs that submitted a "
            "numeric SPS (Table 2).",
            "wide": True,
        },
    ]


def _games_view(report: Report) -> list[dict[str, Any]]:
    """Per agent, each game run's model x kind grid (empty without game runs)."""
    from pytest_clinaudit.batch.game_tables import confusion

    by_agent: dict[str, list[dict[str, Any]]] = {}
    for run in report.runs:
        if not run.is_game:
            continue
        seed = run.game_parts.get("seed")
        caption = (
            f"{run.variant} instance {'?' if seed is None else int(seed)}"
            + (f", run {run.run}" if run.run else "")
            + f": score {run.score:.{SCORE_DIGITS}f}"
        )
        by_agent.setdefault(run.agent, []).append({"caption": caption, "grid": confusion(run)})
    return [{"agent": agent, "runs": runs} for agent, runs in sorted(by_agent.items())]


def render_batch_page(report: Report, *, figures: bool = True) -> str:
    """The page of a batch report: summary cards, heatmap and plots, the four tables, the runs.

    ``figures=False`` leaves out the figures (and does not import matplotlib).
    """
    profiles = Counter(r.profile for r in report.runs)
    return render(
        "batch.html.j2",
        version=installed_version("pytest-clinaudit"),
        source=str(report.source),
        files=report.files,
        runs=len(report.runs),
        profiles=", ".join(f"{p} ({n})" for p, n in sorted(profiles.items())),
        mixed_profiles=len(profiles) > 1,
        cards=_cards(report),
        figures=_figures(report) if figures else [],
        tables=[table_view(t) for t in report.tables],
        run_table=_runs_view(report),
        games=_games_view(report),
    )


def write_batch_page(report: Report, path: Path, *, figures: bool = True) -> Path:
    """Render the batch page of ``report`` into ``path``."""
    return write_page(path, render_batch_page(report, figures=figures))
