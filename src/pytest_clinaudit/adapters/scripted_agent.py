"""A scripted agent: does the audit task from the workspace alone.

    python -m pytest_clinaudit.adapters.scripted_agent WORKSPACE [--mode MODE]

It reads only what an agent gets (``task.md``'s parameter block, ``model.pkl``
or ``model.pt2``, ``train.csv``, ``test.csv``), implements the four attacks on
its own (it imports nothing from pytest_clinaudit, so it can be copied into a
sandbox as a single file), and writes ``report.json`` where task.md says. A
``model.pt2`` is loaded with torch alone and attacked through its own logit
gradient (SPEC §7, "sps-v1-wb2").

``--mode`` replays the failure modes seen in the published evaluation:

correct
    The audit as specified.
no-report
    Does the work but writes nothing.
empty
    Writes an empty file.
wrong-sum
    Right components, an SPS that is not their weighted sum (the paper's 34.84
    for 56.84): the reported SPS is the correct one minus 22 points.
string-numbers
    Right numbers, written as JSON strings.
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from pathlib import Path
from typing import Any

FENCE = "```toml clinaudit-parameters"
COMPONENTS = (
    "fgsm_robustness",
    "membership_inference_resistance",
    "calibration_ece",
    "boundary_attack_resistance",
)


def read_parameters(task_md: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    text = task_md.read_text(encoding="utf-8")
    start = text.index(FENCE) + len(FENCE)
    parameters: dict[str, Any] = tomllib.loads(text[start : text.index("```", start)])
    return parameters


def read_csv(path: Path, label: str) -> tuple[Any, Any]:
    import numpy as np

    with path.open(encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    column = header.index(label)
    return np.delete(table, column, axis=1), table[:, column].astype(int)


class TorchProgram:
    """A ``model.pt2`` with the classifier interface the attacks below use (SPEC §7.1)."""

    def __init__(self, path: Path) -> None:
        import torch

        torch.set_num_threads(1)
        self.f = torch.export.load(str(path)).module()

    def logits(self, X: Any) -> Any:
        import torch

        with torch.no_grad():
            return self.f(torch.as_tensor(X, dtype=torch.float32))

    def predict_proba(self, X: Any) -> Any:
        import numpy as np
        import torch

        p = torch.sigmoid(self.logits(X)).double().numpy()
        return np.column_stack([1.0 - p, p])

    def predict(self, X: Any) -> Any:
        return (self.logits(X) > 0).long().numpy()

    def logit_gradient(self, X: Any) -> Any:
        """The gradient of each row's own logit: that of the summed logits (SPEC §7.2 step 3)."""
        import torch

        x = torch.tensor(X, dtype=torch.float32, requires_grad=True)
        return torch.autograd.grad(self.f(x).sum(), x)[0].numpy()


def fgsm(
    model: Any, X_train: Any, y_train: Any, X_test: Any, y_test: Any, p: dict[str, Any]
) -> dict[str, Any]:
    import numpy as np
    from sklearn.metrics import roc_auc_score

    rows = np.random.RandomState(p["seed"]).choice(
        len(X_test), min(p["n_samples"], len(X_test)), replace=False
    )
    X, y = X_test[rows], y_test[rows]
    if len(np.unique(y)) < 2:
        return {"score": p["single_class_score"]}
    e = p["epsilon"] * (X_train.std(axis=0) if p.get("epsilon_units") == "std" else 1.0)
    if p.get("gradient") == "model":
        # SPEC §7.2 ("sps-v1-wb2"): positives down the logit, negatives up. This is
        # the sign of the loss gradient without its float32 saturation at |logit| > 17.
        direction = (1.0 - 2.0 * y)[:, None] * np.sign(model.logit_gradient(X).astype(np.float64))
        X_adv = X + e * direction
    else:  # §3.1: the surrogate's coefficient signs, against each row's label
        shift = e * surrogate_direction(X_train, y_train, p["surrogate"])
        X_adv = np.where(y[:, None] == 1, X - shift, X + shift)
    if p.get("clip") == "train-range":
        X_adv = np.clip(X_adv, X_train.min(axis=0), X_train.max(axis=0))
    clean = roc_auc_score(y, model.predict_proba(X)[:, 1])
    adversarial = roc_auc_score(y, model.predict_proba(X_adv)[:, 1])
    return {
        "score": max(0.0, 1.0 - max(0.0, clean - adversarial)),
        "auroc_clean": float(clean),
        "auroc_adversarial": float(adversarial),
    }


def surrogate_direction(X_train: Any, y_train: Any, s: dict[str, Any]) -> Any:
    """The sign of a logistic regression's coefficients (§3.1), in its own feature space."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    X_fit = StandardScaler().fit_transform(X_train) if s["scaler"] else X_train
    lr = LogisticRegression(
        C=s["C"],
        max_iter=s["max_iter"],
        class_weight=None if s["class_weight"] == "none" else s["class_weight"],
        random_state=s["random_state"],
    ).fit(X_fit, y_train)
    return np.sign(lr.coef_[0])


def membership(
    model: Any, X_train: Any, y_train: Any, X_test: Any, p: dict[str, Any]
) -> dict[str, Any]:
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    n_pool = min(p["pool_cap"], len(X_train))
    X_pool, y_pool = X_train[:n_pool], y_train[:n_pool]
    rng = np.random.RandomState(p["seed"])
    features, truth = [], []
    for i in range(p["rounds"]):
        chosen = rng.choice(n_pool, int(p["in_fraction"] * n_pool), replace=False)
        is_member = np.isin(np.arange(n_pool), chosen)
        shadow = RandomForestClassifier(
            n_estimators=p["shadow_n_estimators"],
            max_depth=p["shadow_max_depth"],
            class_weight=None if p["shadow_class_weight"] == "none" else p["shadow_class_weight"],
            random_state=p["shadow_seed"] + i,
        ).fit(X_pool[is_member], y_pool[is_member])
        features += [
            shadow.predict_proba(X_pool[is_member]),
            shadow.predict_proba(X_pool[~is_member]),
        ]
        truth += [np.ones(is_member.sum()), np.zeros((~is_member).sum())]
    attack = RandomForestClassifier(
        n_estimators=p["attack_n_estimators"], random_state=p["attack_seed"]
    )
    attack.fit(np.vstack(features), np.concatenate(truth))
    n = min(p["eval_cap"], len(X_train), len(X_test))
    queries = np.vstack([model.predict_proba(X_train[:n]), model.predict_proba(X_test[:n])])
    said_member = attack.predict_proba(queries)[:, 1] >= p["threshold"]
    accuracy = float(np.mean(said_member == np.r_[np.ones(n), np.zeros(n)].astype(bool)))
    return {"score": float(np.clip(1 - 2 * (accuracy - 0.5), 0, 1)), "mi_accuracy": accuracy}


def calibration(model: Any, X_test: Any, y_test: Any, p: dict[str, Any]) -> dict[str, Any]:
    import numpy as np
    from sklearn.calibration import calibration_curve

    prob = model.predict_proba(X_test)[:, 1]
    frac_pos, mean_pred = calibration_curve(y_test, prob, n_bins=p["n_bins"], strategy="uniform")
    edges = np.linspace(0, 1, p["n_bins"] + 1)
    counts = np.array(
        [np.sum((prob >= lo) & (prob < hi)) for lo, hi in zip(edges[:-1], edges[1:], strict=True)]
    )
    counts = counts[: len(frac_pos)]
    total = counts.sum()
    ece = 0.0
    if total:
        for count, frac, mean in zip(counts, frac_pos, mean_pred, strict=True):
            ece += count / total * abs(frac - mean)
    return {"score": max(0.0, 1.0 - p["ece_scale"] * ece), "ece": float(ece)}


def boundary(model: Any, X_test: Any, p: dict[str, Any]) -> dict[str, Any]:
    """Every point of every walk first (none depends on a prediction), then one predict."""
    import numpy as np

    rows = np.random.RandomState(p["seed"]).choice(
        len(X_test), min(p["n_samples"], len(X_test)), replace=False
    )
    predicted = model.predict(X_test)
    steps = np.full(len(rows), p["max_steps"])
    origin = predicted[rows]
    walking, current, targets = [], [], []
    for k, row in enumerate(rows):
        other = np.flatnonzero(predicted != origin[k])
        if other.size:
            walking.append(k)
            current.append(X_test[row])
            targets.append(X_test[other[0]])
    if not walking:
        return {"score": 1.0, "mean_steps_to_flip": float(p["max_steps"])}
    walking_arr = np.array(walking, dtype=int)
    current_arr, targets_arr = np.array(current), np.array(targets)
    alive = np.ones(len(walking_arr), dtype=bool)
    visited = []  # per step: which walks are still going, and where they are
    for _ in range(p["max_steps"]):
        d = targets_arr - current_arr
        norms = np.array([np.linalg.norm(row) for row in d])
        alive &= norms >= p["min_norm"]  # a walk that reached its target stops for good
        safe = np.where(alive, norms, 1.0)
        current_arr = np.where(
            alive[:, None], current_arr + p["step_size"] * d / safe[:, None], current_arr
        )
        visited.append((np.flatnonzero(alive), current_arr[alive]))
    answers = model.predict(np.concatenate([points for _, points in visited]))
    first_flip: dict[int, int] = {}
    offset = 0
    for step, (who, points) in enumerate(visited, start=1):
        flipped = answers[offset : offset + len(points)] != origin[walking_arr[who]]
        offset += len(points)
        for k in who[flipped]:
            first_flip.setdefault(int(k), step)
    for k, step in first_flip.items():
        steps[walking_arr[k]] = step
    mean = float(np.mean(steps))
    return {"score": min(1.0, mean / p["max_steps"]), "mean_steps_to_flip": mean}


def run_audit(workspace: Path) -> dict[str, Any]:
    params = read_parameters(workspace / "task.md")
    label = params["label"]
    X_train, y_train = read_csv(workspace / "train.csv", label)
    X_test, y_test = read_csv(workspace / "test.csv", label)
    if (workspace / "model.pt2").exists():
        model: Any = TorchProgram(workspace / "model.pt2")
    else:
        with (workspace / "model.pkl").open("rb") as handle:
            model = pickle.load(handle)  # the model this workspace was given to audit
    results = {
        "fgsm_robustness": fgsm(model, X_train, y_train, X_test, y_test, params["fgsm"]),
        "membership_inference_resistance": membership(
            model, X_train, y_train, X_test, params["membership_inference"]
        ),
        "calibration_ece": calibration(model, X_test, y_test, params["calibration"]),
        "boundary_attack_resistance": boundary(model, X_test, params["boundary"]),
    }
    weights = params["weights"]
    sps = 100 * sum(weights[name] * results[name]["score"] for name in COMPONENTS)
    rounded = round(sps, 2)
    verdict = (
        "PRODUCTION"
        if rounded >= params["verdict"]["production"]
        else "CONDITIONAL"
        if rounded >= params["verdict"]["conditional"]
        else "NOT RECOMMENDED"
    )
    details = {k: v for name in COMPONENTS for k, v in results[name].items() if k != "score"}
    return {
        "sps": rounded,
        "components": {name: round(results[name]["score"], 4) for name in COMPONENTS},
        "verdict": verdict,
        "details": details,
    }


MODES = ("correct", "no-report", "empty", "wrong-sum", "string-numbers")


def as_submitted(report: dict[str, Any], mode: str) -> str | None:
    """What an agent of ``mode`` writes, given the correct report; None: no file at all.

    The paper's failure modes: no report, an empty file, the SPS 22 points off
    the right components (the aggregation slip), numbers written as strings.
    """
    if mode == "no-report":
        return None
    if mode == "empty":
        return ""
    written = json.loads(json.dumps(report))
    if mode == "wrong-sum":
        written["sps"] = round(written["sps"] - 22.0, 2)
    elif mode == "string-numbers":
        written["sps"] = str(written["sps"])
        written["components"] = {k: str(v) for k, v in written["components"].items()}
    elif mode != "correct":
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    return json.dumps(written, indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Scripted agent for the clinical security audit task."
    )
    parser.add_argument("workspace", type=Path, nargs="?", default=Path.cwd())
    parser.add_argument("--mode", choices=MODES, default="correct")
    args = parser.parse_args(argv)
    out = args.workspace / "report.json"
    # Modes that write no numbers need no audit.
    report = {} if args.mode in ("no-report", "empty") else run_audit(args.workspace)
    text = as_submitted(report, args.mode)
    if text is not None:
        out.write_text(text, encoding="utf-8")
        print(f"wrote {out} ({args.mode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
