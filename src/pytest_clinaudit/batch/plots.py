"""Figures of ``clinaudit report``: completion rate by agent, SPS error by variant and agent,
mean score per agent x variant.

Each ``*_figure`` function builds a :class:`~matplotlib.figure.Figure` without
pyplot, so no GUI backend is chosen or needed and no global pyplot state is
touched; ``*_plot`` saves one as PNG on matplotlib's Agg canvas (the Markdown
report), and :mod:`pytest_clinaudit.pages` inlines the same figures as SVG (the
HTML report). Only :mod:`pytest_clinaudit.batch.tables` and the pages import
this module, and only when figures are asked for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

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


LABEL_CHARACTERS = 24
"""Longest agent or variant name drawn in full; the tables show every name whole."""


def _label(name: str) -> str:
    """A tick or legend label: a long name (agent names come from manifests) is cut short."""
    return name if len(name) <= LABEL_CHARACTERS else name[: LABEL_CHARACTERS - 1] + "…"


def _save(figure: Figure, path: Path) -> Path:
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=120, metadata=_METADATA)
    return path


def completion_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """:func:`completion_figure` as a PNG file."""
    return _save(completion_figure(rows), path)


def sps_error_plot(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """:func:`sps_error_figure` as a PNG file."""
    return _save(sps_error_figure(rows), path)


def completion_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Bars: completion rate (score 1.0) per agent, labelled ``completed/runs``.

    ``rows`` are Table 1's rows (:func:`pytest_clinaudit.batch.tables.agents_table`).
    """
    figure = Figure(figsize=(max(4.0, 1.2 * len(rows) + 2.0), 3.6), layout="constrained")
    axes = figure.add_subplot()
    agents = [_label(str(r["agent"])) for r in rows]
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
    return figure


def sps_error_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Grouped bars: mean (submitted - reference) SPS per variant (x) and agent (colour).

    Error bars are the population sigma of the submitted SPS over the runs that
    submitted one (``n`` above each bar); a group without a numeric SPS shows
    ``n=0`` and no bar. ``rows`` are Table 2's rows.
    """
    variants = sorted({str(r["variant"]) for r in rows})
    agents = sorted({str(r["agent"]) for r in rows})
    by_key = {(str(r["agent"]), str(r["variant"])): r for r in rows}
    figure = Figure(
        figsize=(max(5.0, 1.0 + 0.9 * len(variants) * max(1, len(agents))), 4.0),
        layout="constrained",
    )
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
        handles.append(Patch(color=colour, label=_label(agent)))
        for x, y, text in labels:
            axes.annotate(text, (x, y), ha="center", va="bottom" if y >= 0 else "top", fontsize=8)
    axes.axhline(0.0, color="black", linewidth=0.8)
    # Room above and below the bars for the n= labels, also when every error is 0
    # (bars pin the axis to 0, so margins() alone would add none there).
    low, high = axes.get_ylim()
    pad = 0.1 * ((high - low) or 1.0)
    axes.set_ylim(low - pad, high + pad)
    axes.set_xlim(-0.5, len(variants) - 0.5)
    axes.set_xticks(range(len(variants)))
    axes.set_xticklabels([_label(v) for v in variants])
    axes.set_ylabel("submitted − reference SPS")
    axes.set_title("SPS error by variant and agent (mean ± σ)")
    if handles:
        axes.legend(handles=handles, title="agent", fontsize=8)
    return figure


def score_heatmap_figure(rows: Sequence[Mapping[str, Any]]) -> Figure:
    """Cells: mean score per agent (row) x variant (column), labelled with the score and ``n``.

    ``rows`` are Table 2's rows. A pair without runs is a hatched grey cell
    labelled "no runs", so an empty cell is never read as a score of 0. The
    colour scale is fixed to [0, 1] (the score's range), so two reports' colours
    mean the same; viridis stays ordered for colour-blind readers and in grey.
    """
    import numpy as np

    variants = sorted({str(r["variant"]) for r in rows})
    agents = sorted({str(r["agent"]) for r in rows})
    by_key = {(str(r["agent"]), str(r["variant"])): r for r in rows}
    scores = np.full((len(agents), len(variants)), np.nan)
    for i, agent in enumerate(agents):
        for j, variant in enumerate(variants):
            row = by_key.get((agent, variant))
            if row is not None and row["mean_score"] is not None:
                scores[i, j] = row["mean_score"]
    figure = Figure(
        figsize=(max(6.0, 2.5 + 1.5 * len(variants)), max(3.0, 1.4 + 0.65 * len(agents))),
        layout="constrained",
    )
    axes = figure.add_subplot()
    axes.set_facecolor("#eeeeee")
    axes.grid(False)
    image = axes.imshow(
        np.ma.masked_invalid(scores), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto"
    )
    colormap = image.get_cmap()
    for i, agent in enumerate(agents):
        for j, variant in enumerate(variants):
            row = by_key.get((agent, variant))
            if row is None or row["mean_score"] is None:
                axes.add_patch(
                    Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, hatch="//", edgecolor="#bbbbbb")
                )
                axes.text(j, i, "no runs", ha="center", va="center", fontsize=8, color="#555555")
                continue
            score = float(row["mean_score"])
            red, green, blue, _ = colormap(score)
            # Dark text on the light (yellow-green) end, white on the dark (purple) end.
            luminance = 0.2126 * red + 0.7152 * green + 0.0722 * blue
            axes.text(
                j,
                i,
                f"{score:.3f}\nn={row['runs']}",
                ha="center",
                va="center",
                fontsize=9,
                color="black" if luminance > 0.45 else "white",
            )
    axes.set_xticks(range(len(variants)))
    tilted = len(variants) > 4 or max((len(v) for v in variants), default=0) > 14
    axes.set_xticklabels(
        [_label(v) for v in variants],
        rotation=20 if tilted else 0,
        ha="right" if tilted else "center",
    )
    axes.set_yticks(range(len(agents)))
    axes.set_yticklabels([_label(a) for a in agents])
    axes.set_xlabel("variant")
    axes.set_ylabel("agent")
    axes.set_title("Mean score per agent and variant")
    colorbar = figure.colorbar(image, ax=axes, fraction=0.05)
    colorbar.set_label("mean score")
    return figure
