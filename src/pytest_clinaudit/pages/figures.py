"""Figures as inline SVG: matplotlib draws, this module makes the SVG fit a page.

Each public function takes plain data (the shapes below, which are what the
reference auditor's ``as_dict``/``summary`` methods return) and returns SVG
text ready to inline in a page: no XML prolog, ``role="img"``, a ``<title>`` and
a ``<desc>`` that say in words what the figure shows (read by screen readers
and shown as a tooltip), and element ids prefixed with the figure's name so
several figures share a page without clashing ids.

Figures are drawn on a :class:`~matplotlib.figure.Figure` without pyplot, with
text kept as SVG ``<text>`` (small, sharp, selectable) in the page's fonts.
Every label that came from data is escaped by matplotlib's SVG writer and by
:mod:`xml.etree.ElementTree`, which re-serialises the SVG.

Functions
---------
reliability_diagram(bins, *, task_bins=None) -> str
    ``bins``: ``{"mean_predicted": [...], "observed_frequency": [...], "count": [...],
    "lower": [...], "upper": [...], "strategy": "equal-mass"}`` (one entry per
    non-empty bin, as :class:`pytest_clinaudit.reference.review.diagnostics.ReliabilityBins`);
    ``task_bins`` the same for the task's uniform bins, drawn for comparison.
membership_roc(attacks) -> str
    ``attacks``: ``[{"name": "loss", "auc": 0.61, "roc": {"fpr": [...], "tpr": [...]},
    "low_fpr": [{"fpr": 0.01, "tpr": 0.03, "estimable": true, ...}], "n_members": 400,
    "n_nonmembers": 400}, ...]``
    (:class:`~pytest_clinaudit.reference.attacks.privacy.MembershipAttack`).
adversarial_auroc(curves, *, clean_auroc=None, audited_epsilon=None, epsilon_unit=...) -> str
    ``curves``: ``[{"name": "FGSM", "epsilon": [0.0, 0.1, ...], "auroc": [0.97, 0.9, ...]},
    {"name": "PGD", ...}]``; an AUROC may be ``None`` (undefined at that ε).
boundary_histogram(summary) -> str
    ``summary``: ``{"distances": [0.8, None, ...], "median": 1.2, "n_rows": 60,
    "n_found": 58}``
    (:meth:`~pytest_clinaudit.reference.review.hopskipjump.DistanceResult.summary`).
score_heatmap(rows) -> str
    Table 2's rows of ``clinaudit report``: mean score per agent x variant.
"""

from __future__ import annotations

import contextlib
import io
import math
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"

# Colours of the curves, in order (matplotlib's tab10, spelled out as batch/plots does).
_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")
_REFERENCE_LINE: dict[str, Any] = {"color": "#777777", "linestyle": "--", "linewidth": 1.0}
_NAME = re.compile(r"[^a-z0-9-]+")
_URL = re.compile(r"url\(#([^)]+)\)")


@contextlib.contextmanager
def _style() -> Iterator[None]:
    """matplotlib settings of every page figure, undone afterwards (no lasting global state)."""
    import matplotlib

    with matplotlib.rc_context(
        {
            # Text as <text> elements: a tenth of the size of glyph paths, and readable.
            "svg.fonttype": "none",
            # Fixed salt: the same data gives the same SVG (ids are hashes).
            "svg.hashsalt": "clinaudit",
            "font.family": "sans-serif",
            "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial"],
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.grid": True,
            "grid.color": "#e5e5e5",
            "grid.linewidth": 0.8,
            "axes.axisbelow": True,
            "legend.frameon": False,
        }
    ):
        yield


def _new_figure(width: float, height: float, **kwargs: Any) -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained", **kwargs)


def svg_of(figure: Figure, *, name: str, title: str, description: str) -> str:
    """``figure`` as inline SVG with ``role="img"``, a ``<title>`` and a ``<desc>``.

    ``name`` prefixes every id of the SVG (and is the SVG's own id), so
    figures never share ids on a page. ``title`` and ``description`` are
    plain text; they are escaped here.
    """
    import xml.etree.ElementTree as ET

    prefix = _NAME.sub("-", name.lower()).strip("-") or "figure"
    buffer = io.BytesIO()
    with _style():
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(buffer.getvalue())  # our own matplotlib output, not input
    _prefix_ids(root, prefix)
    for unwanted in root.findall(f"{{{SVG_NS}}}metadata"):
        root.remove(unwanted)
    root.set("id", prefix)
    root.set("role", "img")
    root.set("aria-labelledby", f"{prefix}-title {prefix}-desc")
    root.set("class", "figure-svg")
    # Scale with the page, never beyond the drawn size (text would grow past the
    # page's): the viewBox keeps the aspect ratio; its width is in points.
    width = root.attrib.pop("width", "")
    root.attrib.pop("height", None)
    if width.endswith("pt"):
        root.set("style", f"max-width: {width}")
    title_element = ET.Element(f"{{{SVG_NS}}}title", {"id": f"{prefix}-title"})
    title_element.text = title
    desc_element = ET.Element(f"{{{SVG_NS}}}desc", {"id": f"{prefix}-desc"})
    desc_element.text = description
    root.insert(0, desc_element)
    root.insert(0, title_element)
    return ET.tostring(root, encoding="unicode")


def _prefix_ids(root: Any, prefix: str) -> None:
    """Prefix every id and every reference to one (``url(#id)``, ``href="#id"``)."""
    href = f"{{{XLINK_NS}}}href"
    for element in root.iter():
        if "id" in element.attrib:
            element.set("id", f"{prefix}-{element.get('id')}")
        for attribute in (href, "href"):
            value = element.get(attribute)
            if value is not None and value.startswith("#"):
                element.set(attribute, f"#{prefix}-{value[1:]}")
        for attribute, value in list(element.attrib.items()):
            if "url(#" in value:
                element.set(attribute, _URL.sub(lambda m: f"url(#{prefix}-{m.group(1)})", value))


def _fmt(value: float | None, digits: int = 3) -> str:
    return "undefined" if value is None else f"{value:.{digits}f}"


def finite(value: Any) -> float | None:
    """``value`` as a finite float; ``None`` when missing, boolean, not a number or not finite."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


# ------------------------------------------------------------------ reliability


def _wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion: honest at 0, 1 and small n, unlike p ± z*se."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # The interval holds p; at p = 0 or 1 rounding can put an end a hair past it, and a
    # negative error bar is an error in matplotlib.
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def reliability_diagram(
    bins: Mapping[str, Sequence[Any]],
    *,
    task_bins: Mapping[str, Sequence[Any]] | None = None,
    name: str = "reliability",
) -> str:
    """Observed frequency against mean prediction per bin, with 95% intervals and counts.

    Upper panel: one point per bin at (mean prediction, observed frequency),
    with the bin's Wilson 95% interval, on the diagonal of perfect calibration;
    lower panel: rows per bin, spanning the probabilities the bin's rows hold.
    ``task_bins`` (the task's uniform bins) are drawn as hollow squares.
    """
    predicted = [float(x) for x in bins["mean_predicted"]]
    observed = [float(x) for x in bins["observed_frequency"]]
    counts = [int(x) for x in bins["count"]]
    lower = [float(x) for x in bins.get("lower", predicted)]
    upper = [float(x) for x in bins.get("upper", predicted)]
    strategy = str(bins.get("strategy", "equal-mass"))
    with _style():
        figure = _new_figure(6.0, 5.4)
        top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 1))
        top.plot([0, 1], [0, 1], label="perfect calibration", **_REFERENCE_LINE)
        intervals = [_wilson(o * n, n) for o, n in zip(observed, counts, strict=True)]
        top.errorbar(
            predicted,
            observed,
            yerr=[
                [o - lo for o, (lo, _) in zip(observed, intervals, strict=True)],
                [hi - o for o, (_, hi) in zip(observed, intervals, strict=True)],
            ],
            fmt="o-",
            color=_COLOURS[0],
            ecolor="#9ecae1",
            elinewidth=2,
            capsize=0,
            markersize=5,
            label=f"{strategy} bins (95% interval)",
        )
        if task_bins is not None and task_bins.get("mean_predicted"):
            top.plot(
                [float(x) for x in task_bins["mean_predicted"]],
                [float(x) for x in task_bins["observed_frequency"]],
                "s",
                markerfacecolor="none",
                markeredgecolor=_COLOURS[1],
                markersize=7,
                label=f"{task_bins.get('strategy', 'uniform')} bins (the task's)",
            )
        top.set_xlim(0, 1)
        top.set_ylim(-0.02, 1.02)
        top.set_ylabel("observed frequency of the positive class")
        top.legend(loc="upper left", fontsize=8)
        widths = [max(u - lo, 0.006) for lo, u in zip(lower, upper, strict=True)]
        bottom.bar(
            lower, counts, width=widths, align="edge", color="#9ecae1", edgecolor=_COLOURS[0]
        )
        bottom.set_ylabel("rows")
        bottom.set_xlabel("mean predicted probability")
        bottom.set_ylim(0, max(counts, default=1) * 1.25)
        bottom.grid(axis="x", visible=False)
    worst = max(range(len(counts)), key=lambda i: abs(observed[i] - predicted[i]), default=None)
    description = f"{len(counts)} {strategy} bins over {sum(counts)} rows. " + (
        ""
        if worst is None
        else f"The largest gap: rows predicted {predicted[worst]:.2f} on average were "
        f"positive {observed[worst]:.2f} of the time ({counts[worst]} rows)."
    )
    return svg_of(figure, name=name, title="Reliability diagram", description=description)


# ---------------------------------------------------------------- membership ROC


def membership_roc(attacks: Sequence[Mapping[str, Any]], *, name: str = "membership-roc") -> str:
    """ROC curves of membership attacks, both axes logarithmic, with the diagonal of chance.

    Points at FPR 0 cannot sit on a log axis and are left out; the axis starts
    at the smallest FPR the non-members can measure (1 / non-members). The
    reported low-FPR points (TPR at 1%, 0.1%) are marked where estimable.
    """
    smallest = min((1.0 / max(int(a["n_nonmembers"]), 1) for a in attacks), default=1e-3)
    lowest_tpr = min((1.0 / max(int(a["n_members"]), 1) for a in attacks), default=1e-3)
    floor = min(smallest, lowest_tpr)
    parts = []
    with _style():
        figure = _new_figure(6.0, 4.8)
        axes = figure.add_subplot()
        axes.plot([floor, 1], [floor, 1], label="chance (TPR = FPR)", **_REFERENCE_LINE)
        for index, attack in enumerate(attacks):
            colour = _COLOURS[index % len(_COLOURS)]
            pairs = [
                (float(f), float(t))
                for f, t in zip(attack["roc"]["fpr"], attack["roc"]["tpr"], strict=True)
                if float(f) > 0
            ]
            # A TPR of 0 sits below a log axis; draw it on the axis floor instead.
            fpr = [f for f, _ in pairs]
            tpr = [max(t, floor) for _, t in pairs]
            auc = finite(attack.get("auc"))
            label = f"{attack['name']} (AUC {_fmt(auc)})"
            axes.step(fpr, tpr, where="post", color=colour, linewidth=1.8, label=label)
            marked = []
            for point in attack.get("low_fpr", ()):
                tpr_at = finite(point.get("tpr"))
                if point.get("estimable") and tpr_at is not None:
                    axes.plot(
                        [float(point["fpr"])],
                        [max(tpr_at, floor)],
                        "o",
                        color=colour,
                        markersize=6,
                        markeredgecolor="white",
                    )
                    marked.append(f"TPR {tpr_at:.3f} at FPR {float(point['fpr']):g}")
                else:
                    marked.append(
                        f"TPR at FPR {float(point['fpr']):g} not estimable with "
                        f"{attack['n_nonmembers']} non-members"
                    )
            parts.append(
                f"{attack['name']}: AUC {_fmt(auc)}"
                + (f"; {'; '.join(marked)}" if marked else "")
                + "."
            )
        axes.set_xscale("log")
        axes.set_yscale("log")
        axes.set_xlim(smallest, 1.0)
        axes.set_ylim(floor, 1.05)
        axes.set_xlabel("false-positive rate (non-members called members), log scale")
        axes.set_ylabel("true-positive rate (members found), log scale")
        axes.legend(loc="lower right", fontsize=8)
    return svg_of(
        figure,
        name=name,
        title="Membership-inference ROC, log scale",
        description=" ".join(parts) or "No attack to show.",
    )


# ------------------------------------------------------------ adversarial AUROC


def adversarial_auroc(
    curves: Sequence[Mapping[str, Any]],
    *,
    clean_auroc: float | None = None,
    audited_epsilon: float | None = None,
    epsilon_unit: str = "training standard deviations",
    name: str = "adversarial-auroc",
) -> str:
    """AUROC under attack against the perturbation size ε, one line per attack."""
    parts = []
    lowest = 1.0
    with _style():
        figure = _new_figure(6.0, 4.4)
        axes = figure.add_subplot()
        axes.axhline(0.5, color="#bbbbbb", linestyle=":", linewidth=1.0, label="chance (0.5)")
        clean = finite(clean_auroc)
        if clean is not None:
            axes.axhline(clean, label=f"no attack ({clean:.3f})", **_REFERENCE_LINE)
            lowest = min(lowest, clean)
        audited = finite(audited_epsilon)
        if audited is not None:
            axes.axvline(audited, color="#444444", linewidth=1.0, linestyle="-.")
            axes.annotate(
                f"audited ε = {audited:g}",
                (audited, 0.98),
                xycoords=("data", "axes fraction"),
                xytext=(4, 0),
                textcoords="offset points",
                va="top",
                fontsize=8,
                color="#444444",
            )
        for index, curve in enumerate(curves):
            points = [
                (float(e), value)
                for e, a in zip(curve["epsilon"], curve["auroc"], strict=True)
                if (value := finite(a)) is not None
            ]
            if not points:
                parts.append(f"{curve['name']}: no defined AUROC.")
                continue
            axes.plot(
                [e for e, _ in points],
                [a for _, a in points],
                "o-" if index == 0 else "s--",
                color=_COLOURS[index % len(_COLOURS)],
                linewidth=1.8,
                markersize=4,
                label=str(curve["name"]),
            )
            lowest = min(lowest, *(a for _, a in points))
            parts.append(
                f"{curve['name']}: AUROC {points[0][1]:.3f} at ε {points[0][0]:g} to "
                f"{points[-1][1]:.3f} at ε {points[-1][0]:g}."
            )
        axes.set_ylim(max(0.0, min(0.45, lowest - 0.05)), 1.01)
        axes.set_xlabel(f"perturbation size ε ({epsilon_unit})")
        axes.set_ylabel("AUROC on perturbed test rows")
        axes.legend(loc="lower left", fontsize=8)
    return svg_of(
        figure,
        name=name,
        title="Adversarial AUROC against perturbation size",
        description=" ".join(parts) or "No attack to show.",
    )


# ------------------------------------------------------------ boundary distance


def boundary_histogram(
    summary: Mapping[str, Any],
    *,
    unit: str = "training standard deviations, L2",
    name: str = "boundary-histogram",
) -> str:
    """Histogram of per-row minimal perturbation distances, with the median marked."""
    import numpy as np

    distances = np.array(
        [d for d in (finite(x) for x in summary.get("distances", ())) if d is not None]
    )
    n_rows = int(summary.get("n_rows", len(summary.get("distances", ()))))
    median = finite(summary.get("median"))
    with _style():
        figure = _new_figure(6.0, 4.0)
        axes = figure.add_subplot()
        if distances.size:
            edges = np.histogram_bin_edges(distances, bins="auto")
            if len(edges) > 41:  # the Freedman-Diaconis rule on a long tail: too thin to read
                edges = np.histogram_bin_edges(distances, bins=40)
            axes.hist(distances, bins=edges.tolist(), color="#9ecae1", edgecolor=_COLOURS[0])
        if median is not None:
            axes.axvline(median, color=_COLOURS[1], linewidth=1.5, label=f"median {median:.3g}")
            axes.legend(loc="upper right", fontsize=8)
        axes.set_xlabel(f"distance to a changed prediction ({unit})")
        axes.set_ylabel("test rows")
        axes.grid(axis="x", visible=False)
    missing = n_rows - int(distances.size)
    description = (
        f"{distances.size} of {n_rows} rows reached a changed prediction"
        + (f"; median distance {median:.3g}" if median is not None else "")
        + (f"; {missing} rows found no changed prediction and are not shown" if missing else "")
        + "."
    )
    return svg_of(
        figure,
        name=name,
        title="Minimal perturbation distances",
        description=description,
    )


# ------------------------------------------------------------------------ batch


def score_heatmap(rows: Sequence[Mapping[str, Any]], *, name: str = "score-heatmap") -> str:
    """Mean score per agent x variant (Table 2's rows), as drawn by the batch report."""
    from pytest_clinaudit.batch.plots import score_heatmap_figure

    with _style():
        figure = score_heatmap_figure(rows)
    cells = [
        f"{r['agent']} on {r['variant']}: {_fmt(finite(r['mean_score']))} over {r['runs']} runs"
        for r in rows
    ]
    return svg_of(
        figure,
        name=name,
        title="Mean score per agent and variant",
        description="; ".join(cells) + "." if cells else "No runs.",
    )


def batch_figure(kind: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """The Markdown report's two plots, as SVG: ``kind`` is "completion" or "sps-error"."""
    from pytest_clinaudit.batch.plots import completion_figure, sps_error_figure

    if kind == "completion":
        with _style():
            figure = completion_figure(rows)
        cells = [f"{r['agent']}: {r['completed']} of {r['runs']} runs scored 1.0" for r in rows]
        title = "Completion rate by agent"
    elif kind == "sps-error":
        with _style():
            figure = sps_error_figure(rows)
        cells = [
            f"{r['agent']} on {r['variant']}: mean error {_fmt(finite(r['sps_error_mean']), 2)}"
            f" over {r['sps_runs']} runs with a numeric SPS"
            for r in rows
        ]
        title = "SPS error by variant and agent"
    else:
        raise ValueError(f"kind must be 'completion' or 'sps-error', got {kind!r}")
    return svg_of(
        figure,
        name=kind,
        title=title,
        description="; ".join(cells) + "." if cells else "No runs.",
    )
