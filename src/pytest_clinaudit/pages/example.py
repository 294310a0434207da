"""A realistic, made-up audit page context: the contract of :mod:`.audit_page`, worked.

The numbers are synthetic (a seeded ``RandomState(42)``, never the global NumPy
state), but every figure's data has the exact shape the reference auditor
returns, because it is made by the same functions:
:func:`~pytest_clinaudit.reference.review.diagnostics.reliability_bins` and
:func:`~pytest_clinaudit.reference.attacks.privacy.attack_result`. The tests render the
audit page from it, the screenshot tool draws ``docs/audit-page.png`` from it,
and the own-model audit's integration can compare its context with it key by key.
"""

from __future__ import annotations

from typing import Any

# Sizes of a small clinical test set: 114 test rows, as WDBC's 20% split.
N_TRAIN = 455
N_TEST = 114
N_MEMBERS = 114


def example_audit_context(*, model_name: str = "sepsis-risk-xgb v3") -> dict[str, Any]:
    """A complete context for :func:`~pytest_clinaudit.pages.audit_page.render_audit_page`.

    ``model_name`` lets a test put a hostile string where an untrusted name goes.
    """
    import numpy as np

    from pytest_clinaudit.reference.attacks.privacy import LOW_FPRS, attack_result
    from pytest_clinaudit.reference.review.diagnostics import reliability_bins
    from pytest_clinaudit.reference.review.lowfpr import attack_record, low_fpr_point

    rng = np.random.RandomState(42)
    # Test labels and slightly over-confident probabilities (a logit stretched by 1.4).
    y = (rng.uniform(size=N_TEST) < 0.37).astype(np.int64)
    logit = 2.2 * (y - 0.37) + rng.normal(0.0, 1.3, size=N_TEST)
    p = 1.0 / (1.0 + np.exp(-1.4 * logit))
    # Members were fitted on: their losses are smaller than the non-members'.
    member_loss = rng.gamma(1.2, 0.18, size=N_MEMBERS)
    nonmember_loss = rng.gamma(1.4, 0.24, size=N_TEST)
    loss = attack_result("loss threshold (Yeom et al.)", -member_loss, -nonmember_loss)
    member_lira = rng.normal(0.55, 1.0, size=N_MEMBERS)
    nonmember_lira = rng.normal(0.0, 1.0, size=N_TEST)
    lira = attack_result("LiRA, 8 shadows (Carlini et al.)", member_lira, nonmember_lira)
    distances = rng.lognormal(0.1, 0.45, size=60)
    found = rng.uniform(size=60) > 0.04

    weights = {
        "fgsm_robustness": 0.35,
        "membership_inference_resistance": 0.25,
        "calibration_ece": 0.20,
        "boundary_attack_resistance": 0.20,
    }
    components = {
        "fgsm_robustness": {
            "point": 0.8712,
            "low": 0.8123,
            "high": 0.9208,
            "bias": -0.0031,
            "n_undefined": 0,
        },
        "membership_inference_resistance": {
            "point": 0.9035,
            "low": 0.8421,
            "high": 0.9561,
            "bias": -0.0112,
            "n_undefined": 0,
        },
        "calibration_ece": {
            "point": 0.5500,
            "low": 0.2480,
            "high": 0.8910,
            "bias": -0.0874,
            "n_undefined": 0,
        },
        "boundary_attack_resistance": {
            "point": 0.7833,
            "low": 0.6833,
            "high": 0.8667,
            "bias": 0.0004,
            "n_undefined": 0,
        },
    }
    sps = 100 * sum(weights[k] * v["point"] for k, v in components.items())
    thresholds = {"production": 80.0, "conditional": 65.0}
    verdict = (
        "PRODUCTION"
        if sps >= thresholds["production"]
        else "CONDITIONAL"
        if sps >= thresholds["conditional"]
        else "NOT RECOMMENDED"
    )
    return {
        "title": f"Security audit of {model_name}",
        "generated": "2025-06-02 14:31 UTC",
        "model": {
            "name": model_name,
            "path": "models/sepsis-risk-xgb-v3.pkl",
            "kind": "sklearn Pipeline (StandardScaler, XGBClassifier) via predict_proba",
            "sha256": "9f2c4e1b7a0d83c6e5f41a2b9c7d0e8f1a3b5c7d9e0f2a4b6c8d0e1f3a5b7c9d",
            "positive_class": "died",
            "n_features": 30,
        },
        "data": [
            {
                "role": "train",
                "path": "data/train.csv",
                "sha256": "1c0ffee5a1d2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c",
                "rows": N_TRAIN,
                "positives": 168,
                "label": "died",
            },
            {
                "role": "test",
                "path": "data/test.csv",
                "sha256": "7e57da7a0b1c2d3e4f5061728394a5b6c7d8e9f0a1b2c3d4e5f60718293a4b5c",
                "rows": N_TEST,
                "positives": int(y.sum()),
                "label": "died",
            },
        ],
        "parameters": {
            "profile": "own-data",
            "fgsm": {"epsilon": 0.1, "epsilon_unit": "training std", "rows": 80, "seed": 42},
            "membership": {"members": N_MEMBERS, "nonmembers": N_TEST, "shadows": 8, "seed": 42},
            "calibration": {"n_bins": 10},
            "boundary": {"rows": 60, "max_iter": 40, "seed": 42},
            "bootstrap": {"n_boot": 1000, "seed": 42},
        },
        "uncertainty": {
            "n_boot": 1000,
            "seed": 42,
            "level": 0.95,
            "method": "BCa bootstrap; test rows resampled jointly, members separately",
            "components": components,
            "sps": {
                "point": round(sps, 2),
                "low": 70.41,
                "high": 86.96,
                "bias": -1.21,
                "n_undefined": 0,
            },
            "verdict": verdict,
            "verdict_change_probability": 0.214,
            "verdict_distribution": {
                "PRODUCTION": 0.163,
                "CONDITIONAL": 0.786,
                "NOT RECOMMENDED": 0.051,
            },
        },
        "weights": weights,
        "thresholds": thresholds,
        "samples": {
            "test": N_TEST,
            "members": N_MEMBERS,
            "nonmembers": N_TEST,
            "fgsm": 80,
            "walk": 60,
        },
        "ece": {
            "task": 0.0388,
            "aligned": 0.0602,
            "equal_mass": 0.0715,
            "debiased_rms": 0.0544,
            "n_bins": 10,
            "n_bins_used": 9,
        },
        "diagnostics": [
            {
                "label": "AUROC (all test rows)",
                "value": 0.912,
                "low": 0.861,
                "high": 0.955,
                "note": "discrimination; 0.5 is chance",
            },
            {
                "label": "Brier score",
                "value": 0.118,
                "note": "mean squared error of the probabilities; lower is better",
            },
            {
                "label": "Calibration slope",
                "value": 0.71,
                "digits": 2,
                "note": "1 is ideal; below 1: predictions too extreme",
            },
            {"label": "Calibration intercept", "value": -0.08, "digits": 2, "note": "0 is ideal"},
            {
                "label": "ECE, equal-mass bins",
                "value": 0.0715,
                "digits": 4,
                "note": "15 bins of about 8 rows",
            },
            {
                "label": "Debiased L2 calibration error",
                "value": 0.0544,
                "digits": 4,
                "note": "Kumar et al. 2019",
            },
            {
                "label": f"Membership AUC, {loss.name}",
                "value": loss.auc,
                "note": "0.5: the attacker does no better than chance",
            },
            {
                "label": f"Membership AUC, {lira.name}",
                "value": lira.auc,
                "note": "0.5: the attacker does no better than chance",
            },
            {
                "label": "Membership TPR at 1% FPR (LiRA)",
                "value": low_fpr_point(member_lira, nonmember_lira, 0.01).tpr,
                "note": f"not estimable: needs 1000 non-members; this audit has {N_TEST}",
            },
        ],
        "figures": {
            "reliability": {
                "bins": reliability_bins(y, p, n_bins=15).as_dict(),
                "task_bins": reliability_bins(y, p, n_bins=10, strategy="uniform").as_dict(),
            },
            "membership": [
                attack_record(loss, LOW_FPRS),
                attack_record(lira, LOW_FPRS),
            ],
            "adversarial": {
                "curves": [
                    {
                        "name": "FGSM",
                        "epsilon": [0.0, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5],
                        "auroc": [0.912, 0.901, 0.887, 0.851, 0.812, 0.774, 0.702, 0.583],
                    },
                    {
                        "name": "PGD (10 steps)",
                        "epsilon": [0.0, 0.025, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5],
                        "auroc": [0.912, 0.893, 0.866, 0.806, 0.741, 0.683, 0.577, 0.412],
                    },
                ],
                "clean_auroc": 0.912,
                "audited_epsilon": 0.1,
                "epsilon_unit": "training standard deviations",
            },
            "boundary": {
                "distances": [
                    float(d) if f else None for d, f in zip(distances, found, strict=True)
                ],
                "median": float(np.median(distances[found])),
                "quartiles": np.quantile(distances[found], [0.25, 0.5, 0.75]).tolist(),
                "n_rows": 60,
                "n_found": int(found.sum()),
            },
        },
        "caveats": [
            "The test set was drawn from one hospital's 2019 admissions; the audit says "
            "nothing about patients from elsewhere.",
        ],
    }
