"""``clinaudit report``: paper-style tables from the JUnit XML of graded runs.

The graded runs are read by :mod:`.runs`; this module aggregates them into
four tables (layout documented in docs/batch.md):

1. per agent: runs, completions (score 1.0), mean score, mean turns and tokens;
2. per agent x variant: the submitted SPS (mean, population sigma, error
   against the reference) and the component pass rates;
3. per agent: the pass rate of each component check;
4. per agent: runs by failure category.

Tables 2 and 3 are about the audit task's SPS and components; runs of the
auditing game get tables of their own (:mod:`.game_tables`: per agent, per
agent and kind, per agent and instance), appended when any run graded a game.
They are written as Markdown (``report.md``), one CSV per table, JSON
(``report.json``) and, through :mod:`pytest_clinaudit.batch.plots`, PNG plots.
junitparser is imported only here, and only when a report is made.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_clinaudit.batch.runs import (
    COMPLETION_SCORE,
    UNKNOWN_AGENT,
    GameItem,
    ReportError,
    Run,
    Warn,
    read_junit_runs,
)
from pytest_clinaudit.batch.table_kit import Column, Table
from pytest_clinaudit.batch.table_kit import count_of as _count_of
from pytest_clinaudit.batch.table_kit import fixed as _fixed
from pytest_clinaudit.batch.table_kit import mean as _mean
from pytest_clinaudit.batch.table_kit import mean_of_some as _mean_of_some
from pytest_clinaudit.batch.table_kit import plain as _plain
from pytest_clinaudit.batch.table_kit import rate as _rate
from pytest_clinaudit.grading.scoring import CATEGORIES, NONE
from pytest_clinaudit.reference.attacks.params import COMPONENTS

REPORT_FORMAT = 1

COMPONENT_LABELS = {
    "fgsm_robustness": "FGSM robustness",
    "membership_inference_resistance": "MI resistance",
    "calibration_ece": "Calibration (ECE)",
    "boundary_attack_resistance": "Boundary attack",
}
CATEGORY_LABELS = {
    NONE: "No failure",
    "no-submission": "No submission",
    "empty": "Empty",
    "unparseable": "Unparseable",
    "schema": "Schema",
    "tolerance": "Out of tolerance",
    "aggregation": "Aggregation error",
    "verdict": "Wrong verdict",
}


# ----------------------------------------------------------------- the tables


def agents_table(runs: Sequence[Run]) -> Table:
    """Table 1: one row per agent."""
    by_agent: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_agent[run.agent].append(run)
    rows = []
    for agent in sorted(by_agent):
        group = by_agent[agent]
        turns = [r.turns for r in group if r.turns is not None]
        tokens = [r.tokens for r in group if r.tokens is not None]
        completed = sum(r.completed for r in group)
        rows.append(
            {
                "agent": agent,
                "runs": len(group),
                "completed": completed,
                "completion_rate": _rate(completed, len(group)),
                "mean_score": _mean([r.score for r in group]),
                "turns_runs": len(turns),
                "mean_turns": _mean(turns),
                "tokens_runs": len(tokens),
                "mean_tokens": _mean(tokens),
            }
        )
    return Table(
        name="table1_agents",
        title="Table 1. Aggregate results per agent",
        note="A run is complete when it scores 1.0. Mean score over all runs (no submission "
        "counts as 0). Turns and tokens: mean over the runs that report them.",
        keys=tuple(rows[0]) if rows else (),
        columns=(
            Column("agent", "Agent", _plain("agent")),
            Column("runs", "Runs", _plain("runs")),
            Column(
                "completed",
                "Completed (score 1.0)",
                _count_of("completed", "runs"),
                sort_key="completion_rate",
            ),
            Column("mean_score", "Mean score", _fixed("mean_score", 3)),
            Column("mean_turns", "Mean turns", _mean_of_some("mean_turns", "turns_runs", 1)),
            Column("mean_tokens", "Mean tokens", _mean_of_some("mean_tokens", "tokens_runs", 0)),
        ),
        rows=tuple(rows),
    )


def agent_variant_table(runs: Sequence[Run], warn: Warn) -> Table:
    """Table 2: one row per agent x variant (game runs have their own tables)."""
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in (r for r in runs if not r.is_game):
        groups[(run.agent, run.variant)].append(run)
    rows = []
    for agent, variant in sorted(groups):
        group = groups[(agent, variant)]
        references = sorted({r.reference_sps for r in group if r.reference_sps is not None})
        if len(references) > 1:
            warn(
                f"{agent} x {variant}: runs were graded against different references "
                f"({', '.join(f'{x:.2f}' for x in references)}); errors use each run's own"
            )
        numeric = [r for r in group if r.submitted_sps is not None]
        sps = [r.submitted_sps for r in numeric if r.submitted_sps is not None]
        errors = [
            r.submitted_sps - r.reference_sps
            for r in numeric
            if r.submitted_sps is not None and r.reference_sps is not None
        ]
        row: dict[str, Any] = {
            "agent": agent,
            "variant": variant,
            "runs": len(group),
            "reference_sps": references[0] if len(references) == 1 else None,
            "sps_runs": len(sps),
            "sps_mean": _mean(sps),
            "sps_std": statistics.pstdev(sps) if sps else None,
            "sps_error_mean": _mean(errors),
            "sps_abs_error_mean": _mean([abs(e) for e in errors]),
        }
        for component in COMPONENTS:
            passed = sum(r.component_passed(component) for r in group)
            row[f"{component}_passed"] = passed
            row[f"{component}_rate"] = _rate(passed, len(group))
        row["mean_score"] = _mean([r.score for r in group])
        rows.append(row)

    def sps_cell(row: Mapping[str, Any]) -> str:
        if row["sps_mean"] is None:
            return "-"
        return f"{row['sps_mean']:.2f} ± {row['sps_std']:.2f}"

    return Table(
        name="table2_agent_variant",
        title="Table 2. Results per agent and variant",
        note="SPS n: runs that submitted the SPS as a JSON number; mean ± population σ over "
        "those runs. Error: submitted − reference SPS (mean, and mean of its absolute value). "
        "A component passes when its check passed (within tolerance); rates over all runs.",
        keys=tuple(rows[0]) if rows else (),
        columns=(
            Column("agent", "Agent", _plain("agent")),
            Column("variant", "Variant", _plain("variant")),
            Column("runs", "Runs", _plain("runs")),
            Column("reference_sps", "Ref. SPS", _fixed("reference_sps", 2)),
            Column("sps_runs", "SPS n", _plain("sps_runs")),
            Column("sps_mean", "SPS mean ± σ", sps_cell),
            Column("sps_error_mean", "Error", _fixed("sps_error_mean", 2, signed=True)),
            Column("sps_abs_error_mean", "abs(Error)", _fixed("sps_abs_error_mean", 2)),
            *(
                Column(
                    f"{c}_passed",
                    COMPONENT_LABELS[c],
                    _count_of(f"{c}_passed", "runs"),
                    sort_key=f"{c}_rate",
                )
                for c in COMPONENTS
            ),
            Column("mean_score", "Mean score", _fixed("mean_score", 3)),
        ),
        rows=tuple(rows),
    )


def components_table(runs: Sequence[Run]) -> Table:
    """Table 3: per agent, the pass rate of each component check over its audit-task runs."""
    by_agent: dict[str, list[Run]] = defaultdict(list)
    for run in (r for r in runs if not r.is_game):
        by_agent[run.agent].append(run)
    rows = []
    for agent in sorted(by_agent):
        group = by_agent[agent]
        row: dict[str, Any] = {"agent": agent, "runs": len(group)}
        for component in COMPONENTS:
            passed = sum(r.component_passed(component) for r in group)
            row[f"{component}_passed"] = passed
            row[f"{component}_rate"] = _rate(passed, len(group))
        everything = sum(all(r.component_passed(c) for c in COMPONENTS) for r in group)
        row["all_passed"] = everything
        row["all_rate"] = _rate(everything, len(group))
        rows.append(row)
    return Table(
        name="table3_components",
        title="Table 3. Component pass rates per agent",
        note="Runs whose component check passed (within tolerance of the reference), over all "
        "runs of every variant; 'All four': runs that got every component right.",
        keys=tuple(rows[0]) if rows else (),
        columns=(
            Column("agent", "Agent", _plain("agent")),
            Column("runs", "Runs", _plain("runs")),
            *(
                Column(
                    f"{c}_passed",
                    COMPONENT_LABELS[c],
                    _count_of(f"{c}_passed", "runs"),
                    sort_key=f"{c}_rate",
                )
                for c in COMPONENTS
            ),
            Column("all_passed", "All four", _count_of("all_passed", "runs"), sort_key="all_rate"),
        ),
        rows=tuple(rows),
    )


def failures_table(runs: Sequence[Run]) -> Table:
    """Table 4: per agent, runs by failure category (the most fundamental failure of each)."""
    by_agent: dict[str, Counter[str]] = defaultdict(Counter)
    for run in runs:
        by_agent[run.agent][run.category] += 1
    rows = []
    for agent in sorted(by_agent):
        counts = by_agent[agent]
        row: dict[str, Any] = {"agent": agent, "runs": sum(counts.values())}
        row.update({name: counts.get(name, 0) for name in (NONE, *CATEGORIES)})
        rows.append(row)
    return Table(
        name="table4_failures",
        title="Table 4. Failure categories per agent",
        note="Each run counts once, under its most fundamental failed check (in column order).",
        keys=tuple(rows[0]) if rows else (),
        columns=(
            Column("agent", "Agent", _plain("agent")),
            Column("runs", "Runs", _plain("runs")),
            *(Column(name, CATEGORY_LABELS[name], _plain(name)) for name in (NONE, *CATEGORIES)),
        ),
        rows=tuple(rows),
    )


@dataclasses.dataclass(frozen=True)
class Report:
    """The four tables of a set of runs."""

    source: Path
    runs: tuple[Run, ...]
    files: int
    tables: tuple[Table, ...]

    def as_json(self) -> dict[str, Any]:
        return {
            "format": REPORT_FORMAT,
            "source": str(self.source),
            "files": self.files,
            "runs": len(self.runs),
            "profiles": dict(Counter(r.profile for r in self.runs)),
            "tables": {t.name: list(t.rows) for t in self.tables},
            "run_records": [r.record() for r in self.runs],
        }

    def markdown(self, plots: Iterable[Path] = ()) -> str:
        profiles = ", ".join(f"{p} ({n})" for p, n in Counter(r.profile for r in self.runs).items())
        parts = [
            "# clinaudit report",
            "",
            f"{len(self.runs)} graded run(s) from {self.files} JUnit XML file(s) in "
            f"`{self.source}`; profile(s): {profiles}.",
        ]
        for table in self.tables:
            parts += ["", table.markdown()]
        for plot in plots:
            parts += ["", f"![{plot.stem}]({plot.name})"]
        return "\n".join(parts) + "\n"


def make_report(directory: Path, warn: Warn) -> Report:
    """Read the runs under ``directory`` and build the four tables."""
    runs, files = read_junit_runs(directory, warn)
    profiles = Counter(r.profile for r in runs)
    if len(profiles) > 1:
        warn(
            "runs were graded with different profiles ("
            + ", ".join(f"{p}: {n}" for p, n in sorted(profiles.items()))
            + "); their scores are not comparable"
        )
    tables = (
        agents_table(runs),
        agent_variant_table(runs, warn),
        components_table(runs),
        failures_table(runs),
        *extra_tables(runs),
    )
    return Report(source=directory, runs=tuple(runs), files=files, tables=tables)


def extra_tables(runs: Sequence[Run]) -> list[Table]:
    """The auditing game's tables (:mod:`.game_tables`) when any run graded a game."""
    if any(run.is_game for run in runs):
        from pytest_clinaudit.batch.game_tables import game_tables

        return game_tables(runs)
    return []


def read_report(directory: Path, warn: Warn = lambda _m: None) -> Report:
    """:func:`make_report`, with a message that says how to install junitparser if it is missing.

    Raises
    ------
    ReportError
        No runs to report on, or junitparser is not installed.
    """
    try:
        import junitparser  # noqa: F401
    except ImportError:
        raise ReportError(
            "clinaudit report reads JUnit XML with junitparser, which is not installed: "
            "pip install 'pytest-clinaudit[report]'"
        ) from None
    return make_report(directory, warn)


def write_report(
    report: Report, out: Path, *, plots: bool = True, warn: Warn = lambda _m: None
) -> list[Path]:
    """Write ``report`` into ``out``: the CSVs, the PNG plots, report.json and report.md."""
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for table in report.tables:
        path = out / f"{table.name}.csv"
        table.write_csv(path)
        written.append(path)
    images: list[Path] = []
    if plots:
        try:
            from pytest_clinaudit.batch.plots import completion_plot, sps_error_plot
        except ImportError:
            warn("matplotlib is not installed, so no plots: pip install 'pytest-clinaudit[report]'")
        else:
            images = [
                completion_plot(report.tables[0].rows, out / "completion_rate.png"),
                sps_error_plot(report.tables[1].rows, out / "sps_error.png"),
            ]
    (out / "report.json").write_text(
        json.dumps(report.as_json(), indent=2, allow_nan=False) + "\n", encoding="utf-8"
    )
    (out / "report.md").write_text(report.markdown(images), encoding="utf-8")
    return written + images + [out / "report.json", out / "report.md"]


__all__ = [
    "COMPLETION_SCORE",
    "UNKNOWN_AGENT",
    "Column",
    "GameItem",
    "Report",
    "ReportError",
    "Run",
    "Table",
    "make_report",
    "read_junit_runs",
    "read_report",
    "write_report",
]
