"""A literal, row-at-a-time transcription of SPEC §3 and §7: the differential oracle.

Written from the specification's steps, one statement per step, with loops
where the task loops and single-row predictions where the task predicts one
row. It shares no code with ``pytest_clinaudit.reference`` except the
parameter records, so a vectorization mistake there cannot hide here. It is
slow on purpose (wdbc-calibrated: about 5 minutes for the full walk).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.calibration import calibration_curve
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from pytest_clinaudit.reference.attacks.params import AuditParams


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
    return _audit_with(f, model, X_train, y_train, X_test, y_test, params, walk_rows)


def _audit_with(
    f: dict[str, Any],
    model: Any,
    X_train: Any,
    y_train: Any,
    X_test: Any,
    y_test: Any,
    params: AuditParams,
    walk_rows: Sequence[int] | None,
) -> dict[str, Any]:
    """§3.2-3.4 on ``model`` and the SPS (§4), given the FGSM result ``f``."""
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


# ----------------------------------------------- SPEC §7: torch variants, "sps-v1-wb2"


class SpecProgram:
    """A ``model.pt2`` used exactly as SPEC §7.1 writes it, one call per ``p``/``pred``.

    ``f = torch.export.load(path).module()``; no chunking, no padding: a call
    with one row evaluates one row.
    """

    def __init__(self, path: Any) -> None:
        import torch

        self.f = torch.export.load(str(path)).module()

    def logit(self, X: Any) -> Any:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # §7.1: the reference evaluates with one intra-op thread
        try:
            with torch.no_grad():
                return self.f(torch.as_tensor(np.array(X), dtype=torch.float32))
        finally:
            torch.set_num_threads(threads)

    def predict_proba(self, X: Any) -> Any:
        import torch

        p = torch.sigmoid(self.logit(X)).double().numpy()
        return np.column_stack([1 - p, p])

    def predict(self, X: Any) -> Any:
        return (self.logit(X) > 0).long().numpy()

    def logit_gradient(self, X: Any) -> Any:
        """§7.2 step 3, as written: one call on all the rows, the summed logits' gradient."""
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            x = torch.tensor(np.array(X), dtype=torch.float32, requires_grad=True)
            return torch.autograd.grad(self.f(x).sum(), x)[0].numpy()
        finally:
            torch.set_num_threads(threads)


def white_box_budget(params: AuditParams, X_train: Any) -> tuple[Any, Any, Any]:
    """§7.2 step 1 and step 5's box: e_j, and the training min and max per feature (or None)."""
    p = params.fgsm
    d = X_train.shape[1]
    e = np.zeros(d)
    for j in range(d):
        column = X_train[:, j]
        if p.epsilon_units == "std":
            e[j] = p.epsilon * np.sqrt(np.mean((column - np.mean(column)) ** 2))  # ddof=0
        else:
            e[j] = p.epsilon
    if p.clip == "train-range":
        return (
            e,
            np.array([X_train[:, j].min() for j in range(d)]),
            np.array([X_train[:, j].max() for j in range(d)]),
        )
    return e, None, None


def _clip_rows(X: Any, low: Any, high: Any) -> Any:
    if low is None:
        return X
    out = np.array(X, dtype=np.float64)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            out[i, j] = min(max(out[i, j], low[j]), high[j])
    return out


def _sign(value: float) -> float:
    return 1.0 if value > 0 else -1.0 if value < 0 else 0.0


def fgsm_white_box(
    model: SpecProgram, X_train: Any, X_test: Any, y_test: Any, params: AuditParams
) -> dict[str, Any]:
    p = params.fgsm
    # 1. Budget.
    e, low, high = white_box_budget(params, X_train)
    # 2. Draw rows as §3.1 step 2.
    idx = np.random.RandomState(p.seed).choice(
        len(X_test), min(p.n_samples, len(X_test)), replace=False
    )
    X_drawn, y_drawn = X_test[idx], y_test[idx]
    # 3. The gradient of each row's own logit.
    g = model.logit_gradient(X_drawn)
    # 4. Direction (1 - 2y) * sign(g), row by row.
    direction = np.zeros(X_drawn.shape)
    for i in range(X_drawn.shape[0]):
        for j in range(X_drawn.shape[1]):
            direction[i, j] = (1 - 2 * int(y_drawn[i])) * _sign(float(g[i, j]))
    zero_rows = sum(1 for i in range(len(direction)) if not any(direction[i] != 0))
    # 5. Step and clip, in float64.
    X_adv = np.array(X_drawn, dtype=np.float64)
    for i in range(X_adv.shape[0]):
        for j in range(X_adv.shape[1]):
            X_adv[i, j] = X_drawn[i, j] + e[j] * direction[i, j]
    X_adv = _clip_rows(X_adv, low, high)
    result = {
        "idx": idx,
        "gradient": g,
        "direction": direction,
        "X_adv": X_adv,
        "zero_gradient_fraction": zero_rows / len(direction),
    }
    if len(set(y_drawn.tolist())) < 2:
        return {**result, "score": p.single_class_score}
    # 6. AUROC drop.
    auc_clean = roc_auc_score(y_drawn, model.predict_proba(X_drawn)[:, 1])
    auc_adv = roc_auc_score(y_drawn, model.predict_proba(X_adv)[:, 1])
    return {
        **result,
        "score": max(0, 1 - max(0, auc_clean - auc_adv)),
        "auroc_clean": auc_clean,
        "auroc_adversarial": auc_adv,
    }


def strong_pgd_white_box(
    model: SpecProgram, X_train: Any, X_test: Any, y_test: Any, params: AuditParams
) -> dict[str, Any]:
    """§7.3's strong attack, restart after restart, step after step.

    Margin ``(1 - 2y) f(x)``; ``alpha = 2.5 e / steps``; the first restart from
    the drawn rows, restart r >= 1 from ``uniform(X_drawn - e, X_drawn + e)``
    (one row after another, from one ``RandomState(seed)``), clipped to the
    training range; per row the restart with the highest final margin (the
    first on a tie). Records, per row, the smallest gradient component
    relative to the row's largest that a step took the sign of.
    """
    p = params.fgsm
    steps, restarts = p.pgd_steps, p.pgd_restarts
    assert steps is not None
    assert restarts is not None
    e, low, high = white_box_budget(params, X_train)
    idx = np.random.RandomState(p.seed).choice(
        len(X_test), min(p.n_samples, len(X_test)), replace=False
    )
    X_drawn, y_drawn = X_test[idx], y_test[idx]
    n, d = X_drawn.shape
    alpha = 2.5 * e / steps
    rng = np.random.RandomState(p.seed)
    finals, margins = [], []
    smallest = np.full(n, np.inf)
    for r in range(restarts):
        x = np.array(X_drawn, dtype=np.float64)
        if r > 0:
            for i in range(n):
                x[i] = rng.uniform(X_drawn[i] - e, X_drawn[i] + e)
        x = _clip_rows(x, low, high)
        for _ in range(steps):
            g = model.logit_gradient(x)
            for i in range(n):
                largest = float(np.max(np.abs(g[i])))
                for j in range(d):
                    if g[i, j] != 0 and largest > 0:
                        smallest[i] = min(smallest[i], abs(float(g[i, j])) / largest)
                    moved = x[i, j] + alpha[j] * (1 - 2 * int(y_drawn[i])) * _sign(float(g[i, j]))
                    x[i, j] = min(max(moved, X_drawn[i, j] - e[j]), X_drawn[i, j] + e[j])
            x = _clip_rows(x, low, high)
        finals.append(x)
        z = model.logit(x).double().numpy()
        margins.append([(1 - 2 * int(y_drawn[i])) * float(z[i]) for i in range(n)])
    best = [max(range(restarts), key=lambda r, i=i: (margins[r][i], -r)) for i in range(n)]
    X_adv = np.array([finals[best[i]][i] for i in range(n)])
    auroc = None
    if len(set(y_drawn.tolist())) == 2:
        auroc = float(roc_auc_score(y_drawn, model.predict_proba(X_adv)[:, 1]))
    return {"X_adv": X_adv, "auroc": auroc, "smallest_relative_gradient": smallest}


def _bce(logit: float, label: int) -> float:
    """Binary cross-entropy of one logit, computed stably in double precision."""
    t = -logit if label == 1 else logit  # loss = softplus(t)
    return max(t, 0.0) + math.log1p(math.exp(-abs(t)))


def loss_attack(
    model: SpecProgram, X_train: Any, y_train: Any, X_test: Any, y_test: Any, params: AuditParams
) -> dict[str, Any]:
    """§7.3: members and non-members as §3.2 step 4, score = -BCE, one row per call."""
    n_eval = min(params.membership_inference.eval_cap, len(X_train), len(X_test))
    members = [
        -_bce(float(model.logit(X_train[i : i + 1])[0]), int(y_train[i])) for i in range(n_eval)
    ]
    nonmembers = [
        -_bce(float(model.logit(X_test[i : i + 1])[0]), int(y_test[i])) for i in range(n_eval)
    ]
    truth = [1] * n_eval + [0] * n_eval
    scores = members + nonmembers
    auc = roc_auc_score(truth, scores)
    # TPR at 1% FPR: every threshold "score >= t" over the observed scores.
    best = 0.0
    for t in sorted(set(scores)):
        fpr = sum(s >= t for s in nonmembers) / n_eval
        tpr = sum(s >= t for s in members) / n_eval
        if fpr <= 0.01 and tpr > best:
            best = tpr
    return {"auc": auc, "tpr_at_1pct_fpr": best, "members": members, "nonmembers": nonmembers}


def audit_white_box(
    model: SpecProgram,
    X_train: Any,
    y_train: Any,
    X_test: Any,
    y_test: Any,
    params: AuditParams,
    walk_rows: Sequence[int] | None = None,
) -> dict[str, Any]:
    """SPEC §7: white-box FGSM, then §3.2-3.4 with the program's p and pred."""
    f = fgsm_white_box(model, X_train, X_test, y_test, params)
    return _audit_with(f, model, X_train, y_train, X_test, y_test, params, walk_rows)
