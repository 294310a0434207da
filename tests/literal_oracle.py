"""A literal, row-at-a-time transcription of SPEC §3: the differential oracle.

Written from the specification's steps, one statement per step, with loops
where the task loops and single-row predictions where the task predicts one
row. It shares no code with ``pytest_clinaudit.reference`` except the
parameter records, so a vectorization mistake there cannot hide here. It is
slow on purpose (wdbc-calibrated: about 5 minutes for the full walk).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pytest_clinaudit.reference.params import AuditParams


def surrogate_coefficients(params: AuditParams, X_train: Any, y_train: Any) -> Any:
    s = params.fgsm.surrogate
    lr = LogisticRegression(
        max_iter=s.max_iter,
        C=s.C,
        class_weight=None if s.class_weight == "none" else s.class_weight,
        random_state=s.random_state,
    )
    model = make_pipeline(StandardScaler(), lr) if s.scaler else lr
    model.fit(X_train, y_train)
    return lr.coef_[0]


def fgsm(
    model: Any, X_train: Any, y_train: Any, X_test: Any, y_test: Any, params: AuditParams
) -> dict[str, Any]:
    p = params.fgsm
    # 1. Fit the surrogate; W = its coefficient row.
    W = surrogate_coefficients(params, X_train, y_train)
    # 2. Sample test rows.
    idx = np.random.RandomState(p.seed).choice(
        len(X_test), min(p.n_samples, len(X_test)), replace=False
    )
    X_s = X_test[idx]
    y_s = y_test[idx]
    if len(set(y_s.tolist())) < 2:
        return {"score": p.single_class_score}
    # 3. Perturb each sampled row in raw space.
    X_adv = []
    for x, label in zip(X_s, y_s, strict=True):
        if label == 1:
            X_adv.append(x - p.epsilon * np.sign(W))
        else:
            X_adv.append(x + p.epsilon * np.sign(W))
    X_adv = np.array(X_adv)
    # 4. AUROC drop.
    auc_clean = roc_auc_score(y_s, model.predict_proba(X_s)[:, 1])
    auc_adv = roc_auc_score(y_s, model.predict_proba(X_adv)[:, 1])
    drop = max(0, auc_clean - auc_adv)
    return {"score": max(0, 1 - drop), "auroc_clean": auc_clean, "auroc_adversarial": auc_adv}


def membership(
    model: Any, X_train: Any, y_train: Any, X_test: Any, params: AuditParams
) -> dict[str, Any]:
    p = params.membership_inference
    # 1. The pool.
    n_pool = min(p.pool_cap, len(X_train))
    X_pool = X_train[:n_pool]
    y_pool = y_train[:n_pool]
    # 2. Shadow rounds, one generator for all of them.
    rng = np.random.RandomState(p.seed)
    attack_X = []
    attack_y = []
    for i in range(p.rounds):
        in_idx = rng.choice(n_pool, int(p.in_fraction * n_pool), replace=False)
        in_mask = np.zeros(n_pool, dtype=bool)
        in_mask[in_idx] = True
        X_in, y_in = X_pool[in_mask], y_pool[in_mask]
        X_out = X_pool[~in_mask]
        shadow = RandomForestClassifier(
            n_estimators=p.shadow_n_estimators,
            max_depth=p.shadow_max_depth,
            class_weight=None if p.shadow_class_weight == "none" else "balanced",
            random_state=p.shadow_seed + i,
        )
        shadow.fit(X_in, y_in)
        for row in shadow.predict_proba(X_in):
            attack_X.append(row)
            attack_y.append(1)
        for row in shadow.predict_proba(X_out):
            attack_X.append(row)
            attack_y.append(0)
    # 3. Attack model.
    attack = RandomForestClassifier(n_estimators=p.attack_n_estimators, random_state=p.attack_seed)
    attack.fit(np.array(attack_X), np.array(attack_y))
    # 4. Query the target.
    n_eval = min(p.eval_cap, len(X_train), len(X_test))
    member_features = model.predict_proba(X_train[:n_eval])
    nonmember_features = model.predict_proba(X_test[:n_eval])
    correct = 0
    for row in member_features:
        if attack.predict_proba(row.reshape(1, -1))[0, 1] >= p.threshold:
            correct += 1
    for row in nonmember_features:
        if attack.predict_proba(row.reshape(1, -1))[0, 1] < p.threshold:
            correct += 1
    acc = correct / (2 * n_eval)
    # 5. Score.
    return {"score": float(np.clip(1 - 2 * (acc - 0.5), 0, 1)), "accuracy": acc}


def calibration(model: Any, X_test: Any, y_test: Any, params: AuditParams) -> dict[str, Any]:
    p = params.calibration
    prob = model.predict_proba(X_test)[:, 1]
    # 1. The curve (drops empty bins).
    frac_pos, mean_pred = calibration_curve(y_test, prob, n_bins=p.n_bins, strategy="uniform")
    # 2. Counts per bin index over half-open bins, truncated.
    edges = np.linspace(0, 1, p.n_bins + 1)
    counts = []
    for k in range(p.n_bins):
        count = 0
        for value in prob:
            if edges[k] <= value < edges[k + 1]:
                count += 1
        counts.append(count)
    counts = counts[: len(frac_pos)]
    total = sum(counts)
    # 3. ECE and score.
    ece = 0.0
    if total > 0:
        for j in range(len(counts)):
            ece += counts[j] / total * abs(frac_pos[j] - mean_pred[j])
    return {"score": max(0, 1 - p.ece_scale * ece), "ece": ece}


def boundary(
    model: Any, X_test: Any, params: AuditParams, rows: Sequence[int] | None = None
) -> dict[str, Any]:
    """``rows`` limits the walk to those positions of the drawn sample (for CI time)."""
    p = params.boundary
    idx = np.random.RandomState(p.seed).choice(
        len(X_test), min(p.n_samples, len(X_test)), replace=False
    )
    positions = range(len(idx)) if rows is None else rows
    steps = []
    for position in positions:
        x = X_test[idx[position]]
        o = model.predict(x.reshape(1, -1))[0]
        target = None
        for j in range(len(X_test)):
            if model.predict(X_test[j].reshape(1, -1))[0] != o:
                target = X_test[j]
                break
        if target is None:
            steps.append(p.max_steps)
            continue
        cur = x.copy()
        taken = p.max_steps
        for step in range(1, p.max_steps + 1):
            d = target - cur
            norm = np.linalg.norm(d)
            if norm < p.min_norm:
                break
            cand = cur + p.step_size * d / norm
            if model.predict(cand.reshape(1, -1))[0] != o:
                taken = step
                break
            cur = cand
        steps.append(taken)
    mean = float(np.mean(steps))
    return {"score": min(1, mean / p.max_steps), "mean_steps": mean, "steps": steps}


def audit(
    model: Any,
    X_train: Any,
    y_train: Any,
    X_test: Any,
    y_test: Any,
    params: AuditParams,
    walk_rows: Sequence[int] | None = None,
) -> dict[str, Any]:
    f = fgsm(model, X_train, y_train, X_test, y_test, params)
    m = membership(model, X_train, y_train, X_test, params)
    c = calibration(model, X_test, y_test, params)
    b = boundary(model, X_test, params, walk_rows)
    w = params.weights
    sps = 100 * (
        w.fgsm_robustness * f["score"]
        + w.membership_inference_resistance * m["score"]
        + w.calibration_ece * c["score"]
        + w.boundary_attack_resistance * b["score"]
    )
    return {"fgsm": f, "membership": m, "calibration": c, "boundary": b, "sps": sps}
