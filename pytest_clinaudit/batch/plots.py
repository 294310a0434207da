"""PNG plots of ``clinaudit report``: completion rate by agent, SPS error by variant and agent.

Drawn on matplotlib's Agg canvas directly (a :class:`~matplotlib.figure.Figure`
without pyplot), so no GUI backend is chosen or needed and no global pyplot
state is touched. Only :mod:`pytest_clinaudit.batch.tables` imports this module, and
only when plots are asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

# No timestamp or version in the PNG: the same runs give the same file.
_METADATA = {"Software": None}
# matplotlib's "tab10" colours, spelled out so that agent colours never depend on a style.
_PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
)


def _save(figure: Figure, path: Path) -> Path:
    FigureCanvasAgg(figure)
    figure.tight_layout()
    figure.savefig(path, dpi=120, metadata=_METADATA)
    return path


def completion_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Bars: completion rate (score 1.0) per agent, labelled ``completed/runs``.

    ``rows`` are Table 1's rows (:func:`pytest_clinaudit.batch.tables.agents_table`).
    """
    figure = Figure(figsize=(max(4.0, 1.2 * len(rows) + 2.0), 3.6))
    axes = figure.add_subplot()
    agents = [str(r["agent"]) for r in rows]
    rates = [100.0 * (r["completion_rate"] or 0.0) for r in rows]
    bars = axes.bar(agents, rates, color="#4c72b0")
    for bar, row in zip(bars, rows, strict=True):
        axes.annotate(
            f"{row['completed']}/{row['runs']}",
            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=9,
        )
    axes.set_ylim(0, 110)
    axes.set_ylabel("completion rate (%)")
    axes.set_title("Runs scoring 1.0, by agent")
    return _save(figure, path)


def sps_error_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Grouped bars: mean (submitted - reference) SPS per variant (x) and agent (colour).

    Error bars are the population sigma of the submitted SPS over the runs that
    submitted one (``n`` above each bar); a group without a numeric SPS shows
    ``n=0`` and no bar. ``rows`` are Table 2's rows.
    """
    variants = sorted({str(r["variant"]) for r in rows})
    agents = sorted({str(r["agent"]) for r in rows})
    by_key = {(str(r["agent"]), str(r["variant"])): r for r in rows}
    figure = Figure(figsize=(max(5.0, 1.0 + 0.9 * len(variants) * max(1, len(agents))), 4.0))
    axes = figure.add_subplot()
    width = 0.8 / max(1, len(agents))
    handles: list[Patch] = []
    for index, agent in enumerate(agents):
        positions, heights, sigmas, labels = [], [], [], []
        for position, variant in enumerate(variants):
            row = by_key.get((agent, variant))
            if row is None:
                continue
            x = position - 0.4 + width * (index + 0.5)
            error = row["sps_error_mean"]
            labels.append((x, 0.0 if error is None else error, f"n={row['sps_runs']}"))
            if error is not None:
                positions.append(x)
                heights.append(error)
                sigmas.append(row["sps_std"] or 0.0)
        # An explicit colour per agent: an agent without any bar still gets its own legend entry.
        colour = _PALETTE[index % len(_PALETTE)]
        axes.bar(positions, heights, width=width, yerr=sigmas, capsize=3, color=colour)
        handles.append(Patch(color=colour, label=agent))
        for x, y, text in labels:
            axes.annotate(text, (x, y), ha="center", va="bottom" if y >= 0 else "top", fontsize=8)
    axes.axhline(0.0, color="black", linewidth=0.8)
    axes.set_xlim(-0.5, len(variants) - 0.5)
    axes.set_xticks(range(len(variants)))
    axes.set_xticklabels(variants)
    axes.set_ylabel("submitted − reference SPS")
    axes.set_title("SPS error by variant and agent (mean ± σ)")
    if handles:
        axes.legend(handles=handles, title="agent", fontsize=8)
    return _save(figure, path)
