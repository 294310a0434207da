"""The terminal summary of an own-model audit: intervals first, points second."""

from __future__ import annotations

import math
from typing import Any

from pytest_clinaudit.owner.audit import membership_attacks
from pytest_clinaudit.reference.attacks.params import COMPONENTS


def _number(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def _interval(interval: dict[str, Any], digits: int = 4) -> str:
    if interval.get("withheld"):
        return "[no interval: see undefined below]"
    return f"[{_number(interval['low'], digits)}, {_number(interval['high'], digits)}]"


def _bias(interval: dict[str, Any], digits: int = 4) -> str:
    bias = interval.get("bias")
    return "" if bias is None else f"  bias {bias:+.{digits}f}"


def _rms(interval: dict[str, Any] | None) -> str:
    """The squared error's interval on the RMS scale (a negative end means 0)."""
    if interval is None or interval["low"] is None or interval["high"] is None:
        return ""
    low, high = (max(0.0, interval[k]) ** 0.5 for k in ("low", "high"))
    return f" [{low:.4f}, {high:.4f}]"


def _point(point: dict[str, Any]) -> str:
    """A low-FPR point: TPR with its Clopper-Pearson interval, or why there is none."""
    if not point["estimable"]:
        return f"TPR@{point['fpr']:.1%} {point['reason']}"
    return (
        f"TPR@{point['fpr']:.1%} {point['tpr']:.3f} "
        f"[{point['tpr_low']:.3f}, {point['tpr_high']:.3f}]"
    )


def _consistency(test: dict[str, Any] | None) -> str:
    """The calibration test's line: the task's ECE against a calibrated model's."""
    if not test:
        return ""
    return (
        f"    calibration test (consistency resampling, {test['n_resamples']} draws of the "
        f"outcomes from the model's own probabilities): task ECE {_number(test['observed'])} "
        f"against a calibrated model's median {_number(test['null_median'])}, "
        f"p = {_number(test['p_value'], 3)}"
    )


def format_own_audit(title: str, report: dict[str, Any]) -> str:
    """What the terminal shows after an own-model audit."""
    boot = report["uncertainty"]
    level = f"{boot['level']:.0%}"
    change = boot["verdict_change_probability"]
    undefined = report.get("undefined", {})
    sps_interval = (
        "(no interval: see undefined below)"
        if boot["sps"].get("withheld")
        else f"{_interval(boot['sps'], 2)} ({level} BCa interval)"
    )
    lines = [f"{title}: SPS {report['sps']:.2f} {sps_interval}, {report['verdict']}"]
    if change is None:
        lines.append("  verdict stability not computed: the SPS's interval is not shown")
    else:
        stability = 1.0 - change
        lines.append(
            f"  verdict held with {stability:.1%} confidence (BCa, {boot['n_boot']} bootstrap "
            "resamples)"
            + (
                ""
                if stability >= 0.95
                else "  <- the verdict is not stable: more evaluation rows would settle it"
            )
        )
    found = report.get("findings", [])
    if "verdict_line" in report:
        lines.append(f"  {report['verdict_line']}")
    lines += [
        f"    - {f['text']}: {f['reason']}" + (f" ({f['note']})" if f.get("note") else "")
        for f in found
    ]
    lines.append(f"  {'component':<33}{'value':>8}  {level} interval    bootstrap bias")
    for name in COMPONENTS:
        interval = boot["components"][name]
        lines.append(
            f"  {name:<33}{report['components'][name]:>8.4f}  {_interval(interval)}"
            f"{_bias(interval)}"
        )
    d, intervals = report["diagnostics"], boot.get("diagnostics", {})
    recal = d["recalibration"]

    def diagnostic(name: str, value: Any) -> str:
        interval = intervals.get(name)
        shown = _number(value)
        return shown if interval is None else f"{shown} {_interval(interval)}"

    lines += [
        "  diagnostics (not part of the SPS):",
        f"    AUROC {diagnostic('auroc', d['auroc'])}, Brier {diagnostic('brier', d['brier'])}, "
        f"task ECE {diagnostic('ece', d['ece_task'])}",
        f"    calibration slope {_number(recal['slope'], 3)}, intercept "
        f"{_number(recal['intercept'], 3)}"
        + (f" ({recal['reason']})" if recal.get("reason") else ""),
        _consistency(d.get("calibration_test")),
        f"    ECE: equal-mass {_number(d['ece_equal_mass'])}, "
        f"debiased L2 (RMS, Kumar et al.) {_number(d['debiased_l2']['rms'])}"
        + _rms(intervals.get("debiased_l2")),
    ]
    mi = report["membership"]["component"]
    chosen = ", ".join(f"{name} x{count}" for name, count in mi["attacks_chosen"].items())
    lines.append(
        f"    membership advantage (TPR - FPR) {mi['advantage']:+.4f}: TPR {mi['tpr']:.3f}, "
        f"FPR {mi['fpr']:.3f} over {mi['n_members']} members and {mi['n_nonmembers']} "
        f"non-members; attack ranked first per fold, over {mi.get('repeats', 1)} draws of the "
        f"folds: {chosen}"
    )
    for name, attack in membership_attacks(report["membership"]):
        points = "; ".join(_point(p) for p in attack["low_fpr"])
        lines.append(f"    membership, {name}: AUC {_number(attack['auc'])}; {points}")
    curve = report["robustness"]["fgsm_curve"]
    if curve["attack"] == "white-box":
        lines.append(
            "    FGSM through the model's own gradient (sps-v1-wb2 direction); margin PGD "
            f"({curve['pgd_steps']} steps, {curve['pgd_restarts']} restarts) at "
            f"eps {curve['epsilon'][0]:g}: AUROC {_number(curve['pgd_auroc'][0])}"
        )
    distance = report["robustness"]["distance"]
    if distance is not None and distance["median"] is not None:
        lines.append(
            f"    minimal flipping distance (HopSkipJump, training-std L2): median "
            f"{distance['median']:.3f} over {distance['n_found']} of {distance['n_rows']} rows"
        )
    held = report.get("features", {}).get("held_fixed")
    if held:
        lines.append(f"    held fixed: {held}")
    if undefined:
        lines.append("  undefined (null in the report):")
        lines += [f"    - {path}: {reason}" for path, reason in undefined.items()]
    lines.append("  caveats:")
    lines += [
        f"    - {caveat}"
        for caveat in report.get("caveats", ())
        if not caveat.endswith(tuple(undefined.values()))
    ]
    model, data = report["model"], report["data"]
    lines.append(f"  model sha256 {model['sha256']} ({model['kind']})")
    lines.append(
        f"  data: {data['train']['rows']} training rows (sha256 {data['train']['sha256'][:16]}), "
        f"{data['test']['rows']} test rows (sha256 {data['test']['sha256'][:16]}); "
        f"positive class {data['positive_class']!r} of {data['label']!r}"
    )
    return "\n".join(line.rstrip() for line in lines if line)
