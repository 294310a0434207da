"""The terminal summary of an own-model audit: intervals first, points second."""

from __future__ import annotations

import math
from typing import Any

from pytest_clinaudit.owner.audit import membership_attacks
from pytest_clinaudit.reference.attacks.params import COMPONENTS


def _number(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:.{digits}f}"


def _interval(interval: dict[str, Any], digits: int = 4) -> str:
    return f"[{_number(interval['low'], digits)}, {_number(interval['high'], digits)}]"


def format_own_audit(title: str, report: dict[str, Any]) -> str:
    """What the terminal shows after an own-model audit."""
    boot = report["uncertainty"]
    level = f"{boot['level']:.0%}"
    stability = 1.0 - boot["verdict_change_probability"]
    lines = [
        f"{title}: SPS {report['sps']:.2f} {_interval(boot['sps'], 2)} ({level} CI), "
        f"{report['verdict']}",
        f"  verdict unchanged in {stability:.1%} of {boot['n_boot']} bootstrap resamples"
        + (
            ""
            if stability >= 0.95
            else "  <- the verdict is not stable: more evaluation rows would settle it"
        ),
        f"  {'component':<33}{'value':>8}  {level} CI",
    ]
    for name in COMPONENTS:
        lines.append(
            f"  {name:<33}{report['components'][name]:>8.4f}  {_interval(boot['components'][name])}"
        )
    d = report["diagnostics"]
    recal = d["recalibration"]
    lines += [
        "  diagnostics (not part of the SPS):",
        f"    AUROC {_number(d['auroc'])}, Brier {_number(d['brier'])}, calibration slope "
        f"{_number(recal['slope'], 3)}, intercept {_number(recal['intercept'], 3)}",
        f"    ECE: task {_number(d['ece_task'])}, equal-mass {_number(d['ece_equal_mass'])}, "
        f"debiased L2 (RMS) {_number(d['debiased_l2']['rms'])}",
    ]
    for name, attack in membership_attacks(report["membership"]):
        points = ", ".join(
            f"TPR@{p['fpr']:.1%} {_number(p['tpr'], 3) if p['estimable'] else 'n/a'}"
            for p in attack["low_fpr"]
        )
        lines.append(f"    membership, {name}: AUC {_number(attack['auc'])}, {points}")
    distance = report["robustness"]["distance"]
    if distance["median"] is not None:
        lines.append(
            f"    minimal flipping distance (HopSkipJump, training-std L2): median "
            f"{distance['median']:.3f} over {distance['n_found']} of {distance['n_rows']} rows"
        )
    lines.append("  caveats:")
    lines += [f"    - {caveat}" for caveat in report.get("caveats", ())]
    model, data = report["model"], report["data"]
    lines.append(f"  model sha256 {model['sha256']} ({model['kind']})")
    lines.append(
        f"  data: {data['train']['rows']} training rows (sha256 {data['train']['sha256'][:16]}), "
        f"{data['test']['rows']} test rows (sha256 {data['test']['sha256'][:16]}); "
        f"positive class {data['positive_class']!r} of {data['label']!r}"
    )
    return "\n".join(line.rstrip() for line in lines)
