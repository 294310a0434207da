"""``clinaudit report``: paper-style tables from the JUnit XML of graded runs.

Every grading session writes its grade into its JUnit XML: the suite
properties ``clinaudit.score``, ``.category``, ``.variant``, ``.profile``,
``.reference_sps``, ``.submitted.sps`` and ``.meta.<key>`` (agent, run, tokens,
turns), and per test case ``clinaudit.check`` and ``.passed``. This module
reads those files (with junitparser) into :class:`Run` records and aggregates
them into four tables (layout documented in docs/batch.md):

1. per agent: runs, completions (score 1.0), mean score, mean turns and tokens;
2. per agent x variant: the submitted SPS (mean, population sigma, error
   against the reference) and the component pass rates;
3. per agent: the pass rate of each component check;
4. per agent: runs by failure category.

They are written as Markdown (``report.md``), one CSV per table, JSON
(``report.json``) and, through :mod:`pytest_clinaudit.batch.plots`, PNG plots.
junitparser is imported only here, and only when a report is made.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_clinaudit.grading.scoring import CATEGORIES, NONE
from pytest_clinaudit.grading.values import text_number
from pytest_clinaudit.reference.attacks.params import COMPONENTS

UNKNOWN_AGENT = "unknown"
"""The agent of a run graded without ``--clinaudit-meta agent=...``."""
COMPLETION_SCORE = 1.0
"""A run is complete when it scores exactly this (every check passed)."""
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

Warn = Callable[[str], None]


class ReportError(ValueError):
    """No report can be made (no such directory, no graded runs); the message says why."""


# ------------------------------------------------------------------- the runs


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
        for case in suite:
            case_properties = _properties(case)
            if "clinaudit.check" in case_properties:
                passed[case_properties["clinaudit.check"]] = (
                    case_properties.get("clinaudit.passed", "").lower() == "true"
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


# ----------------------------------------------------------------- the tables


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


@dataclasses.dataclass(frozen=True)
class Column:
    """One column: its key in the rows (CSV, JSON), its Markdown header and cell text."""

    key: str
    header: str
    cell: Callable[[Mapping[str, Any]], str]
    sort_key: str | None = None
    """The row key a sortable table orders this column by (default ``key``): a
    ``k/n (p%)`` cell sorts by its rate, not by its count."""

    @property
    def order_key(self) -> str:
        return self.key if self.sort_key is None else self.sort_key


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: rows of plain values (CSV and JSON) and how Markdown shows them."""

    name: str
    """File stem of its CSV, and its key in report.json."""
    title: str
    note: str
    keys: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]

    def markdown(self) -> str:
        header = "| " + " | ".join(c.header for c in self.columns) + " |"
        rule = "|" + "|".join("---" for _ in self.columns) + "|"
        body = ["| " + " | ".join(c.cell(row) for c in self.columns) + " |" for row in self.rows]
        return "\n".join([f"### {self.title}", "", self.note, "", header, rule, *body])

    def write_csv(self, path: Path) -> None:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(self.keys)
            for row in self.rows:
                # repr-exact floats; an empty cell is "not applicable"
                writer.writerow(["" if row[k] is None else row[k] for k in self.keys])


def _fixed(key: str, digits: int, signed: bool = False) -> Callable[[Mapping[str, Any]], str]:
    def cell(row: Mapping[str, Any]) -> str:
        value = row[key]
        return "-" if value is None else f"{value:{'+' if signed else ''}.{digits}f}"

    return cell


def _count_of(count_key: str, total_key: str) -> Callable[[Mapping[str, Any]], str]:
    """``k/n (p%)``: the paper's way of showing a rate with its counts."""

    def cell(row: Mapping[str, Any]) -> str:
        count, total = row[count_key], row[total_key]
        return f"{count}/{total} ({100 * count / total:.1f}%)" if total else "-"

    return cell


def _plain(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda row: "-" if row[key] is None else str(row[key])


def _mean_of_some(key: str, n_key: str, digits: int) -> Callable[[Mapping[str, Any]], str]:
    """A mean over the runs that report the value; says how many when not all do."""

    def cell(row: Mapping[str, Any]) -> str:
        if row[key] is None:
            return "-"
        text = f"{row[key]:.{digits}f}"
        return text if row[n_key] == row["runs"] else f"{text} ({row[n_key]} of {row['runs']})"

    return cell


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
    """Table 2: one row per agent x variant."""
    groups: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in runs:
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
    """Table 3: per agent, the pass rate of each component check over all its runs."""
    by_agent: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
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
    )
    return Report(source=directory, runs=tuple(runs), files=files, tables=tables)


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
