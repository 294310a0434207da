"""The own-model audit report as the context of its page (:mod:`pytest_clinaudit.pages`).

Everything on the page comes from the report ``clinaudit audit --model ...``
writes, so the page and the JSON always show the same numbers.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from pytest_clinaudit.owner.audit import caveat_items, membership_attacks

PAGE_WRITES_CAVEATS = ("sample-size", "ece", "low-fpr")
"""Caveat kinds the audit page states itself, from the same numbers."""

DIAGNOSTIC_NOTES = {
    "auroc": "discrimination over every test row; 0.5 is chance",
    "brier": "mean squared error of the probabilities; lower is better",
    "slope": "logistic recalibration; 1 is ideal, below 1: predictions too extreme",
    "intercept": "logistic recalibration; 0 is ideal",
}


def _diagnostics(report: dict[str, Any]) -> list[dict[str, Any]]:
    d = report["diagnostics"]
    recalibration = d["recalibration"]
    rows: list[dict[str, Any]] = [
        {"label": "AUROC (all test rows)", "value": d["auroc"], "note": DIAGNOSTIC_NOTES["auroc"]},
        {"label": "Brier score", "value": d["brier"], "note": DIAGNOSTIC_NOTES["brier"]},
        {
            "label": "Calibration slope",
            "value": recalibration["slope"],
            "digits": 2,
            "note": DIAGNOSTIC_NOTES["slope"],
        },
        {
            "label": "Calibration intercept",
            "value": recalibration["intercept"],
            "digits": 2,
            "note": DIAGNOSTIC_NOTES["intercept"],
        },
        {
            "label": "Debiased L2 calibration error",
            "value": d["debiased_l2"]["rms"],
            "digits": 4,
            "note": "Kumar et al. 2019, equal-mass bins",
        },
    ]
    for name, attack in membership_attacks(report["membership"]):
        interval = attack.get("auc_interval") or {}
        rows.append(
            {
                "label": f"Membership AUC, {name}",
                "value": attack["auc"],
                "low": interval.get("low"),
                "high": interval.get("high"),
                "note": "0.5: the attacker does no better than chance",
            }
        )
        for point in attack["low_fpr"]:
            rows.append(
                {
                    "label": f"Membership TPR at {point['fpr']:.1%} FPR, {name}",
                    "value": point["tpr"] if point["estimable"] else None,
                    "note": "members found while that share of non-members is accused"
                    if point["estimable"]
                    else f"needs at least {point['min_nonmembers']} non-members; "
                    f"this audit has {point['n_nonmembers']}",
                }
            )
    distance = report["robustness"]["distance"]
    rows.append(
        {
            "label": "Median minimal flipping distance (HopSkipJump)",
            "value": distance["median"],
            "note": "training standard deviations (L2); lower: a smaller change flips the class",
        }
    )
    return rows


def _adversarial(report: dict[str, Any]) -> dict[str, Any]:
    surrogate = sorted(report["robustness"]["fgsm_curve"], key=lambda point: point["epsilon"])
    curves: list[dict[str, Any]] = [
        {
            "name": "FGSM (surrogate's signs)",
            "epsilon": [point["epsilon"] for point in surrogate],
            "auroc": [point["auroc"] for point in surrogate],
        }
    ]
    white_box = report["robustness"].get("white_box")
    if white_box:
        order = sorted(range(len(white_box["epsilon"])), key=lambda i: white_box["epsilon"][i])
        epsilons = [white_box["epsilon"][i] for i in order]
        curves += [
            {
                "name": "FGSM (model's own gradient)",
                "epsilon": epsilons,
                "auroc": [white_box["fgsm_auroc"][i] for i in order],
            },
            {
                "name": f"PGD ({white_box['pgd_steps']} steps)",
                "epsilon": epsilons,
                "auroc": [white_box["pgd_auroc"][i] for i in order],
            },
        ]
    return {
        "curves": curves,
        "clean_auroc": report["details"]["auroc_clean"],
        "audited_epsilon": report["parameters"]["epsilon"],
        "epsilon_unit": "training standard deviations",
    }


def audit_page_context(report: dict[str, Any], *, title: str | None = None) -> dict[str, Any]:
    """The page context of an own-data audit report (``profile == "own-data"``)."""
    model, data, details = report["model"], report["data"], report["details"]
    n = details["n"]
    diagnostics = report["diagnostics"]
    parameters = report["parameters"]
    context: dict[str, Any] = {
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "model": {
            "name": Path(model["path"]).name,
            "path": model["path"],
            "kind": model["kind"],
            "sha256": model["sha256"],
            "positive_class": data["positive_class"],
            "n_features": len(data["features"]),
        },
        "data": [
            {
                "role": role,
                "path": data[role]["path"],
                "sha256": data[role]["sha256"],
                "rows": data[role]["rows"],
                "label": data["label"],
                **({"positives": diagnostics["n_positive"]} if role == "test" else {}),
            }
            for role in ("train", "test")
        ],
        "parameters": {"profile": report["profile"], **parameters},
        "uncertainty": report["uncertainty"],
        "weights": parameters["weights"],
        "thresholds": parameters["verdict"],
        "samples": {
            "test": n["test"],
            "members": n["mi_members"],
            "nonmembers": n["mi_nonmembers"],
            "fgsm": n["fgsm_rows"],
            "walk": n["walk_rows"],
        },
        "ece": {
            "task": diagnostics["ece_task"],
            "aligned": diagnostics["ece_task_aligned"],
            "equal_mass": diagnostics["ece_equal_mass"],
            "debiased_rms": diagnostics["debiased_l2"]["rms"],
            "n_bins": parameters["calibration"]["n_bins"],
            "n_bins_used": len(diagnostics["reliability_uniform"]["count"]),
        },
        "diagnostics": _diagnostics(report),
        "figures": {
            "reliability": {
                "bins": diagnostics["reliability_equal_mass"],
                "task_bins": diagnostics["reliability_uniform"],
            },
            "membership": [attack for _, attack in membership_attacks(report["membership"])],
            "adversarial": _adversarial(report),
            "boundary": {
                **report["robustness"]["distance"],
                "unit": "training standard deviations",
            },
        },
        # The page writes its own caveats on sample sizes, the task's ECE and
        # inestimable low-FPR points; the report's other ones are added.
        "caveats": [text for kind, text in caveat_items(report) if kind not in PAGE_WRITES_CAVEATS],
    }
    if title is not None:
        context["title"] = title
    return context


def write_audit_html(report: dict[str, Any], path: Path) -> None:
    """The self-contained audit page of ``report`` at ``path``."""
    from pytest_clinaudit.pages.audit_page import write_audit_page

    write_audit_page(audit_page_context(report), path)
