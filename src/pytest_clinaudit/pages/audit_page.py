"""The own-model audit as one self-contained page, for a model-risk committee.

:func:`render_audit_page` takes a plain context dict (JSON-ready data: strings,
numbers, lists, mappings) and returns the page; :func:`write_audit_page` writes
it. Every value is escaped. A missing required key raises
:class:`AuditContextError` naming it; keys marked optional may be left out.
:func:`pytest_clinaudit.pages.example.example_audit_context` is a complete,
realistic example.

Context keys
------------
title : str, optional
    The page's heading; default ``"Security audit of <model.name>"``.
generated : str, optional
    When the audit ran, as the page should show it (the page adds no clock).
model : mapping
    ``name``, ``kind`` (how it was called, e.g. "xgboost.Booster"), ``sha256`` of
    the model file; optional ``path``, ``positive_class``, ``n_features``.
data : list of mappings
    One per data file: ``role`` ("train", "test"), ``sha256``, ``rows``;
    optional ``path``, ``positives`` (rows of the positive class), ``label``
    (the label column).
parameters : mapping
    The audit's parameters (profile, ε, seeds, row counts); nested mappings
    are shown with dotted keys (``fgsm.epsilon``).
uncertainty : mapping
    As :meth:`pytest_clinaudit.reference.review.uncertainty.BootstrapResult.as_dict`:
    ``n_boot``, ``level`` (0.95), ``components`` ({component: {``point``,
    ``low``, ``high``, optional ``bias``}}), ``sps`` ({``point``, ``low``,
    ``high``, optional ``bias``}), ``verdict``, ``verdict_change_probability``
    (the BCa confidence that the SPS lies outside the verdict's band),
    ``verdict_distribution`` ({verdict: BCa confidence of its band}); optional
    ``seed``, ``method``.
findings : list of mappings, optional
    Components below their floor, shown in the verdict box next to the SPS's
    verdict: ``text`` ("membership: fails (0.545 < 0.70)"), optional ``reason``.
    An empty list says every component met its floor; leaving the key out says
    nothing about floors.
weights : mapping
    Component -> its weight in the SPS (they sum to 1).
thresholds : mapping
    ``production`` and ``conditional``: the SPS at or above which the verdict is
    PRODUCTION, CONDITIONAL.
samples : mapping
    Rows behind each estimate: ``test``, ``members``, ``nonmembers``, ``fgsm``,
    ``walk`` (the boundary attack's rows).
ece : mapping
    ``task`` (the task's quirky ECE, which the calibration component uses),
    ``aligned`` (the same bins, counts aligned), ``equal_mass``, ``n_bins``
    (the task's bins), ``n_bins_used`` (non-empty ones); optional
    ``debiased_rms``.
diagnostics : list of mappings, optional
    Rows of the diagnostics table: ``label``, ``value`` (number or None);
    optional ``low``, ``high`` (an interval), ``digits`` (default 3), ``note``.
figures : mapping
    The four figures' data, in the shapes :mod:`pytest_clinaudit.pages.figures`
    documents:

    - ``reliability``: {``bins``, optional ``task_bins``} (ReliabilityBins dicts);
    - ``membership``: list of MembershipAttack dicts (loss attack, LiRA, ...);
    - ``adversarial``: {``curves``, optional ``clean_auroc``,
      ``audited_epsilon``, ``epsilon_unit``};
    - ``boundary``: a DistanceResult summary, optional ``unit``.
caveats : list of str, optional
    Added to the caveats the page writes itself (sample sizes, ECE quirk).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_clinaudit.batch.tables import COMPONENT_LABELS
from pytest_clinaudit.pages.figures import finite
from pytest_clinaudit.pages.render import render, write_page
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.versions import installed_version

REQUIRED: Mapping[str, tuple[str, ...]] = {
    "model": ("name", "kind", "sha256"),
    "data": (),
    "parameters": (),
    "uncertainty": (
        "n_boot",
        "level",
        "components",
        "sps",
        "verdict",
        "verdict_change_probability",
        "verdict_distribution",
    ),
    "weights": COMPONENTS,
    "thresholds": ("production", "conditional"),
    "samples": ("test", "members", "nonmembers", "fgsm", "walk"),
    "ece": ("task", "aligned", "equal_mass", "n_bins", "n_bins_used"),
    "figures": ("reliability", "membership", "adversarial", "boundary"),
}
"""Required keys of the context, and the keys required inside each."""

MEANINGS = {
    "fgsm_robustness": "How much of the model's AUROC survives a small worst-case nudge of "
    "every feature (FGSM). 1: none is lost.",
    "membership_inference_resistance": "How well the model hides which patients it was "
    "trained on. 1: an attacker does no better than a coin.",
    "calibration_ece": "Whether predicted risks match how often the outcome happens, from "
    "the task's ECE. 1: perfectly calibrated.",
    "boundary_attack_resistance": "How far patients' features must move before the "
    "predicted class flips. 1: far.",
}
"""What each component measures, in a committee's words; higher is better for all four."""

HOW_TO_READ = {
    "reliability": "Each dot is a group of test patients with similar predicted risk: across, "
    "their average prediction; up, how often the outcome happened. On the dashed diagonal, "
    "predictions mean what they say; below it the model over-estimates risk, above it "
    "under-estimates. Bars are 95% intervals (wide bars: few patients); the lower panel "
    "counts patients per group.",
    "membership": "How well an attacker tells patients who were in the training data from "
    "those who were not. Across: how often the attacker wrongly accuses a non-member; up: "
    "how many members it finds. The dashed line is guessing. Both axes are logarithmic so "
    "that the region that matters for privacy, very few false accusations (left), is visible; "
    "dots mark the reported true-positive rates at 1% and 0.1%.",
    "adversarial": "How the model's discrimination (AUROC) falls as an attacker perturbs "
    "the features more (ε, right). The dashed line is the AUROC without attack, the dotted "
    "line chance; the vertical line is the ε this audit scored. A curve that stays flat is "
    "robust; PGD, a stronger iterative attack, shows the worst case where available.",
    "boundary": "For each test patient, the smallest change of the features (in training "
    "standard deviations) that flips the predicted class, found by a decision-based attack. "
    "Mass on the left means many patients sit near the decision boundary, where small "
    "measurement errors or tampering change the decision. Distances are upper bounds.",
}

_VERDICT_CLASSES = {"PRODUCTION": "production", "CONDITIONAL": "conditional"}
_VERDICT_ORDER = {"PRODUCTION": 0, "CONDITIONAL": 1, "NOT RECOMMENDED": 2}
"""Verdicts from best to worst: the stability bar reads green to red."""


class AuditContextError(ValueError):
    """The context lacks a required key or holds the wrong kind of value; says which."""


def check_context(context: Mapping[str, Any]) -> None:
    """Raise :class:`AuditContextError` listing every missing required key."""
    if not isinstance(context, Mapping):
        raise AuditContextError(f"the context must be a mapping, got {type(context).__name__}")
    problems = []
    for key, inner in REQUIRED.items():
        if key not in context:
            problems.append(f"context[{key!r}]: missing")
            continue
        value = context[key]
        expected = list if key == "data" else Mapping
        if not isinstance(value, expected):
            problems.append(
                f"context[{key!r}]: expected a {'list' if key == 'data' else 'mapping'}, "
                f"got {type(value).__name__}"
            )
            continue
        problems += [f"context[{key!r}][{name!r}]: missing" for name in inner if name not in value]
    if problems:
        raise AuditContextError(
            "the audit page's context is incomplete (keys documented in "
            "pytest_clinaudit.pages.audit_page): " + "; ".join(problems)
        )


def _fixed(value: Any, digits: int = 3) -> str:
    number = finite(value)
    return "-" if number is None else f"{number:.{digits}f}"


def _signed(value: Any, digits: int = 4) -> str:
    number = finite(value)
    return "-" if number is None else f"{number:+.{digits}f}"


def _percent(value: Any, digits: int = 1) -> str:
    number = finite(value)
    return "-" if number is None else f"{100 * number:.{digits}f}%"


def verdict_class(verdict: str) -> str:
    """The CSS class of a verdict: a fixed set, so no data ever becomes a class name."""
    if verdict in _VERDICT_CLASSES:
        return _VERDICT_CLASSES[verdict]
    return (
        "not-recommended" if re.sub(r"[^A-Z]", "", verdict.upper()) == "NOTRECOMMENDED" else "other"
    )


def _flatten(parameters: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    rows: list[tuple[str, str]] = []
    for key, value in parameters.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows += _flatten(value, f"{name}.")
        elif isinstance(value, (list, tuple)):
            rows.append((name, ", ".join(str(v) for v in value)))
        else:
            rows.append((name, str(value)))
    return rows


def _interval_bar(point: Any, low: Any, high: Any, scale: float) -> dict[str, str] | None:
    """Positions (percent of the bar) of an interval and its point on [0, scale]."""
    values = [finite(point), finite(low), finite(high)]
    if any(v is None for v in values):
        return None
    p, lo, hi = (min(100.0, max(0.0, 100.0 * v / scale)) for v in values if v is not None)
    return {"left": f"{lo:.2f}%", "width": f"{max(hi - lo, 0.6):.2f}%", "point": f"{p:.2f}%"}


def _components(context: Mapping[str, Any]) -> list[dict[str, Any]]:
    intervals = context["uncertainty"]["components"]
    weights = context["weights"]
    samples = context["samples"]
    rows_used = {
        "fgsm_robustness": samples["fgsm"],
        "membership_inference_resistance": f"{samples['members']} + {samples['nonmembers']}",
        "calibration_ece": samples["test"],
        "boundary_attack_resistance": samples["walk"],
    }
    found = []
    for name in COMPONENTS:
        interval = intervals.get(name, {})
        point = finite(interval.get("point"))
        weight = finite(weights.get(name))
        found.append(
            {
                "label": COMPONENT_LABELS[name],
                "meaning": MEANINGS[name],
                "point": _fixed(point, 4),
                "point_value": point,
                "interval": "not shown"
                if interval.get("withheld")
                else f"{_fixed(interval.get('low'), 4)} – {_fixed(interval.get('high'), 4)}",
                "withheld": interval.get("withheld"),
                "bar": _interval_bar(point, interval.get("low"), interval.get("high"), 1.0),
                "bias": _signed(interval.get("bias"), 4),
                "weight": _fixed(weight, 2),
                "contribution": "-"
                if point is None or weight is None
                else f"{100 * point * weight:.2f}",
                "rows": str(rows_used[name]),
            }
        )
    return found


def _verdict(context: Mapping[str, Any]) -> dict[str, Any]:
    u = context["uncertainty"]
    thresholds = context["thresholds"]
    change = finite(u["verdict_change_probability"])
    distribution = [
        {
            "verdict": str(name),
            "share": finite(share) or 0.0,
            "percent": _percent(share),
            "class": verdict_class(str(name)),
        }
        for name, share in sorted(
            u["verdict_distribution"].items(), key=lambda item: _VERDICT_ORDER.get(item[0], 3)
        )
    ]
    sps = u["sps"]
    findings = context.get("findings")
    return {
        "findings": None
        if findings is None
        else [{"text": str(f["text"]), "reason": str(f.get("reason", ""))} for f in findings],
        "word": str(u["verdict"]),
        "class": verdict_class(str(u["verdict"])),
        "sps": _fixed(sps.get("point"), 2),
        "sps_interval": "not shown"
        if sps.get("withheld")
        else f"{_fixed(sps.get('low'), 2)} – {_fixed(sps.get('high'), 2)}",
        "level": _percent(u["level"], 0),
        "n_boot": u["n_boot"],
        "seed": u.get("seed"),
        "method": u.get("method"),
        "holds": _percent(None if change is None else 1.0 - change),
        "stability_shown": change is not None,
        "withheld": sps.get("withheld"),
        "change": _percent(change),
        "unstable": change is not None and change > 0.05,
        "distribution": distribution,
        "production": _fixed(thresholds["production"], 2),
        "conditional": _fixed(thresholds["conditional"], 2),
    }


def _caveats(context: Mapping[str, Any], verdict: Mapping[str, Any]) -> list[str]:
    samples = context["samples"]
    ece = context["ece"]
    calibration = context["uncertainty"]["components"].get("calibration_ece", {})
    caveats = [
        f"Sample sizes. The test set has {samples['test']} rows; FGSM used {samples['fgsm']}, "
        f"the boundary attack {samples['walk']}, and the membership attacks "
        f"{samples['members']} members against {samples['nonmembers']} non-members. Every "
        f"number above is an estimate from these rows; the intervals ({verdict['level']}, "
        f"{verdict['n_boot']} bootstrap resamples of the patients) say how far it could move "
        "with other patients from the same population. They do not cover refitting the model "
        "or the attacks.",
    ]
    caveats.append(
        f"The task's ECE. The calibration component is computed from the task's ECE on "
        f"{ece['n_bins']} equal-width bins, reproduced with its quirks so that audits stay "
        f"comparable: when a bin in the middle is empty the counts shift against the bins "
        f"they belong to, a probability of exactly 1.0 is never counted, and a probability "
        f"on a bin edge is counted in one bin and averaged in the next. Here "
        f"{ece['n_bins_used']} of {ece['n_bins']} bins hold rows; the task's ECE is "
        f"{_fixed(ece['task'], 4)}, the same bins with aligned counts give "
        f"{_fixed(ece['aligned'], 4)}, and equal-mass bins {_fixed(ece['equal_mass'], 4)}"
        + (
            f" (debiased L2 error {_fixed(ece['debiased_rms'], 4)})"
            if ece.get("debiased_rms") is not None
            else ""
        )
        + (
            f". With {samples['test']} rows the calibration component's interval is "
            f"{_fixed(calibration.get('low'), 3)} – {_fixed(calibration.get('high'), 3)}: read "
            "it as a range, not a point; the reliability diagram shows where the gaps are."
            if not calibration.get("withheld")
            else ". The reliability diagram shows where the gaps are."
        )
    )
    withheld = [
        (COMPONENT_LABELS[name], interval["withheld"])
        for name, interval in context["uncertainty"]["components"].items()
        if name in COMPONENT_LABELS and interval.get("withheld")
    ]
    if context["uncertainty"]["sps"].get("withheld"):
        withheld.append(("SPS", context["uncertainty"]["sps"]["withheld"]))
    for label, why in withheld:
        caveats.append(
            f"{label}: no interval is shown, because {why.removesuffix(': no interval is shown')}."
            + (
                " The verdict's stability is not computed either: it is read off the SPS's "
                "interval."
                if label == "SPS"
                else ""
            )
        )
    caveats += [str(c) for c in context.get("caveats", ())]
    inestimable = _not_estimable(context["figures"]["membership"])
    if inestimable:
        caveats.append(inestimable)  # last: one line for what the sample sizes cannot show
    return caveats


def _not_estimable(attacks: Sequence[Mapping[str, Any]]) -> str | None:
    """One sentence for every low-FPR point no attack could estimate, or None."""
    rates: dict[float, tuple[Any, Any]] = {}
    names: list[str] = []
    for attack in attacks:
        for point in attack.get("low_fpr", ()):
            if not point.get("estimable", True):
                rates[float(point["fpr"])] = (point["min_nonmembers"], point["n_nonmembers"])
                names.append(str(attack["name"]))
    if not rates:
        return None
    order = sorted(rates, reverse=True)
    had = sorted({str(there) for _, there in rates.values()})
    return (
        f"Low false-positive rates: the true-positive rate at "
        f"{_joined([_percent(fpr, 1) for fpr in order])} false positives is not estimable "
        f"for {_joined(list(dict.fromkeys(names)))}: "
        f"{'it needs' if len(order) == 1 else 'they need'} at least "
        f"{_joined([str(rates[fpr][0]) for fpr in order])} non-members (ten allowed false "
        f"positives), and this audit had {_joined(had)}."
    )


def _joined(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _diagnostics(rows: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    shown = []
    for row in rows:
        digits = int(row.get("digits", 3))
        low, high = row.get("low"), row.get("high")
        shown.append(
            {
                "label": str(row["label"]),
                "value": _fixed(row.get("value"), digits),
                "interval": ""
                if low is None or high is None
                else f"{_fixed(low, digits)} – {_fixed(high, digits)}",
                "note": str(row.get("note", "")),
            }
        )
    return shown


def _figures(context: Mapping[str, Any]) -> list[dict[str, Any]]:
    from markupsafe import Markup

    from pytest_clinaudit.pages import figures

    data = context["figures"]
    adversarial = data["adversarial"]
    boundary = data["boundary"]
    # Markup: SVG that pages.figures serialised itself, every data label escaped there.
    return [
        {
            "id": "reliability",
            "caption": "Calibration: reliability diagram",
            "svg": Markup(
                figures.reliability_diagram(
                    data["reliability"]["bins"], task_bins=data["reliability"].get("task_bins")
                )
            ),
        },
        {
            "id": "membership",
            "caption": "Privacy: membership-inference ROC",
            "svg": Markup(figures.membership_roc(data["membership"])),
        },
        {
            "id": "adversarial",
            "caption": "Robustness: AUROC under attack against ε",
            "svg": Markup(
                figures.adversarial_auroc(
                    adversarial["curves"],
                    clean_auroc=adversarial.get("clean_auroc"),
                    audited_epsilon=adversarial.get("audited_epsilon"),
                    epsilon_unit=str(
                        adversarial.get("epsilon_unit", "training standard deviations")
                    ),
                )
            ),
        },
        {
            "id": "boundary",
            "caption": "Robustness: distance to a changed decision",
            "svg": Markup(
                figures.boundary_histogram(
                    boundary, unit=str(boundary.get("unit", "training standard deviations, L2"))
                )
            ),
        },
    ]


def render_audit_page(context: Mapping[str, Any]) -> str:
    """The audit page of ``context`` (keys in this module's docstring)."""
    check_context(context)
    model = context["model"]
    verdict = _verdict(context)
    figures = _figures(context)
    for figure in figures:
        figure["how"] = HOW_TO_READ[figure["id"]]
    return render(
        "audit.html.j2",
        version=installed_version("pytest-clinaudit"),
        title=str(context.get("title") or f"Security audit of {model['name']}"),
        generated=str(context.get("generated") or ""),
        model=[
            (label, str(model[key]))
            for key, label in (
                ("name", "Model"),
                ("kind", "Kind"),
                ("path", "File"),
                ("positive_class", "Positive class"),
                ("n_features", "Features"),
            )
            if model.get(key) is not None
        ],
        model_sha256=str(model["sha256"]),
        data=[
            {
                "role": str(d.get("role", "")),
                "path": str(d.get("path", "")),
                "rows": str(d.get("rows", "")),
                "positives": "" if d.get("positives") is None else str(d["positives"]),
                "label": str(d.get("label", "")),
                "sha256": str(d.get("sha256", "")),
            }
            for d in context["data"]
        ],
        parameters=_flatten(context["parameters"]),
        verdict=verdict,
        components=_components(context),
        diagnostics=_diagnostics(context.get("diagnostics", ())),
        figures=figures,
        caveats=_caveats(context, verdict),
    )


def write_audit_page(context: Mapping[str, Any], path: Path) -> Path:
    """Render the audit page of ``context`` into ``path``."""
    return write_page(path, render_audit_page(context))
