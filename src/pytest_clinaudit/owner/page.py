"""The own-model audit report as the context of its page (:mod:`pytest_clinaudit.pages`).

Everything on the page comes from the report ``clinaudit audit --model ...``
writes, so the page and the JSON always show the same numbers.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from pytest_clinaudit.owner.audit import caveat_items, membership_attacks

NO_DISTANCES: dict[str, Any] = {
    "distances": [],
    "median": None,
    "quartiles": None,
    "n_rows": 0,
    "n_found": 0,
}
"""The boundary figure's data when HopSkipJump measured no row."""

PAGE_WRITES_CAVEATS = ("sample-size", "ece", "low-fpr")
"""Caveat kinds the audit page states itself, from the same numbers."""

NO_CAP = 2**53
"""A row cap at or above this is the code's way of saying "no cap" (``eval_cap = 1 << 62``);
the page says that in words instead of printing the sentinel."""


def shown_parameters(parameters: Any) -> Any:
    """The parameters as a reader should see them: a "no cap" sentinel in words."""
    if isinstance(parameters, dict):
        return {key: shown_parameters(value) for key, value in parameters.items()}
    if isinstance(parameters, int) and not isinstance(parameters, bool) and parameters >= NO_CAP:
        return "no cap (every row)"
    return parameters


DIAGNOSTIC_NOTES = {
    "auroc": "discrimination over every test row; 0.5 is chance",
    "brier": "mean squared error of the probabilities; lower is better",
    "slope": "logistic recalibration; 1 is ideal, below 1: predictions too extreme",
    "intercept": "logistic recalibration; 0 is ideal",
}


def _interval(report: dict[str, Any], name: str) -> dict[str, Any]:
    interval: dict[str, Any] = report["uncertainty"].get("diagnostics", {}).get(name, {})
    return {"low": interval.get("low"), "high": interval.get("high")}


def _withheld(report: dict[str, Any], name: str, note: str) -> str:
    """``note``, and why the diagnostic's interval is not shown when it is not."""
    interval = report["uncertainty"].get("diagnostics", {}).get(name, {})
    why = interval.get("withheld")
    return f"{note}; no interval: {why.removesuffix(': no interval is shown')}" if why else note


def _rms(interval: dict[str, Any]) -> dict[str, Any]:
    """A squared error's interval on the RMS scale (a negative end means 0)."""
    return {
        key: None if value is None else max(0.0, value) ** 0.5 for key, value in interval.items()
    }


def _undefined_note(report: dict[str, Any], path: str, note: str) -> str:
    """``note``, or why the value at ``path`` is undefined when it is."""
    reason = report.get("undefined", {}).get(path)
    return f"undefined: {reason}" if reason else note


def _consistency_row(test: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The calibration test as a diagnostics row (none in a report from before it)."""
    if not test:
        return []
    return [
        {
            "label": "Calibration test: p-value of the task ECE",
            "value": test["p_value"],
            "note": f"consistency resampling: {test['n_resamples']} draws of the outcomes from "
            f"the model's own probabilities give a calibrated model's task ECE (median "
            f"{test['null_median']:.4f} on these rows, against {test['observed']:.4f}); a small "
            "p-value says the gaps are larger than chance, at the stated error rate",
        }
    ]


def _diagnostics(report: dict[str, Any]) -> list[dict[str, Any]]:
    d = report["diagnostics"]
    recalibration = d["recalibration"]
    rows: list[dict[str, Any]] = [
        {
            "label": "AUROC (all test rows)",
            "value": d["auroc"],
            **_interval(report, "auroc"),
            "note": _withheld(
                report,
                "auroc",
                _undefined_note(report, "diagnostics.auroc", DIAGNOSTIC_NOTES["auroc"]),
            ),
        },
        {
            "label": "Brier score",
            "value": d["brier"],
            **_interval(report, "brier"),
            "note": _withheld(report, "brier", DIAGNOSTIC_NOTES["brier"]),
        },
        {
            "label": "Task ECE (the calibration component's)",
            "value": d["ece_task"],
            **_interval(report, "ece"),
            "digits": 4,
            "note": _withheld(report, "ece", "10 equal-width bins, the task's quirks included"),
        },
        *_consistency_row(d.get("calibration_test")),
        {
            "label": "Calibration slope",
            "value": recalibration["slope"],
            "digits": 2,
            "note": recalibration.get("reason") or DIAGNOSTIC_NOTES["slope"],
        },
        {
            "label": "Calibration intercept",
            "value": recalibration["intercept"],
            "digits": 2,
            "note": recalibration.get("reason") or DIAGNOSTIC_NOTES["intercept"],
        },
        {
            "label": "Debiased L2 calibration error",
            "value": d["debiased_l2"]["rms"],
            **_rms(_interval(report, "debiased_l2")),
            "digits": 4,
            "note": _withheld(
                report,
                "debiased_l2",
                "Kumar et al. 2019, equal-mass bins; a one-row bin counts 0; the interval "
                "is the squared error's, as an RMS",
            ),
        },
    ]
    component = report["membership"]["component"]
    choices = component["folds"] * component.get("repeats", 1)
    chosen = ", ".join(f"{name} first in {n} of {choices} fold choices"
                       for name, n in component["attacks_chosen"].items())  # fmt: skip
    rows.append(
        {
            "label": "Membership advantage (TPR − FPR)",
            "value": component["advantage"],
            "note": f"0: no better than chance; the component is 1 − this. TPR "
            f"{component['tpr']:.3f} on {component['n_members']} members, FPR "
            f"{component['fpr']:.3f} on {component['n_nonmembers']} non-members; {chosen}",
        }
    )
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
                    "low": point.get("tpr_low"),
                    "high": point.get("tpr_high"),
                    "note": "members found while that share of non-members is accused "
                    "(Clopper-Pearson interval)"
                    if point["estimable"]
                    else f"{point['reason']}; this audit has {point['n_nonmembers']}",
                }
            )
    distance = report["robustness"]["distance"] or {}
    rows.append(
        {
            "label": "Median minimal flipping distance (HopSkipJump)",
            "value": distance.get("median"),
            "note": _undefined_note(
                report,
                "robustness.distance.median",
                "training standard deviations (L2); lower: a smaller change flips the class",
            ),
        }
    )
    return rows


def _adversarial(report: dict[str, Any]) -> dict[str, Any]:
    curve = report["robustness"]["fgsm_curve"]
    order = sorted(range(len(curve["epsilon"])), key=lambda i: curve["epsilon"][i])
    epsilons = [curve["epsilon"][i] for i in order]
    white_box = curve["attack"] == "white-box"
    curves: list[dict[str, Any]] = [
        {
            "name": "FGSM (model's own gradient)" if white_box else "FGSM (surrogate's signs)",
            "epsilon": epsilons,
            "auroc": [curve["fgsm_auroc"][i] for i in order],
        }
    ]
    if white_box:
        curves.append(
            {
                "name": f"margin PGD ({curve['pgd_steps']} steps, "
                f"{curve['pgd_restarts']} restarts)",
                "epsilon": epsilons,
                "auroc": [curve["pgd_auroc"][i] for i in order],
            }
        )
    return {
        "curves": curves,
        "clean_auroc": curve["clean_auroc"],
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
                "positives": data[role].get(
                    "positives", diagnostics["n_positive"] if role == "test" else None
                ),
            }
            for role in ("train", "test")
        ],
        "parameters": shown_parameters({"profile": report["profile"], **parameters}),
        "uncertainty": report["uncertainty"],
        "findings": [
            {
                "text": f["text"],
                "reason": f["reason"] + (f" ({f['note']})" if f.get("note") else ""),
            }
            for f in report.get("findings", ())
        ],
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
            "membership": [
                {**attack, "name": name}
                for name, attack in membership_attacks(report["membership"])
            ],
            "adversarial": _adversarial(report),
            "boundary": {
                **(report["robustness"]["distance"] or NO_DISTANCES),
                "unit": "training standard deviations",
            },
        },
        # The page writes its own caveats on sample sizes, the task's ECE and
        # inestimable low-FPR points; the report's other ones are added.
        "caveats": [
            text
            for kind, text in caveat_items(report)
            if kind not in PAGE_WRITES_CAVEATS
            # the page says itself which component and SPS intervals are not shown
            and not (kind == "undefined" and text.startswith("uncertainty."))
        ],
    }
    if title is not None:
        context["title"] = title
    return context


def write_audit_html(report: dict[str, Any], path: Path) -> None:
    """The self-contained audit page of ``report`` at ``path``."""
    from pytest_clinaudit.pages.audit_page import write_audit_page

    write_audit_page(audit_page_context(report), path)
