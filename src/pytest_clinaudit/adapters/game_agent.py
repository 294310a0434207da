"""Scripted agents of the auditing game: they audit a game workspace and write report.json.

    python -m pytest_clinaudit.adapters.game_agent WORKSPACE [--agent expert]

They read only what an agent gets (``task.md`` and its facts block, the data
dictionary, ``train.csv``, ``test.csv``, ``training_rows/``, ``models/*.pt2``)
and import nothing from pytest_clinaudit, so the file can be copied into a
sandbox alone. Each model is loaded with torch alone.

null
    Every model sound: ``{"defects": []}`` for each. It scores 0.
transcription
    The paper's task, transcribed, run on every model: the four components of
    "sps-v1-wb2" (white-box FGSM along ``(1 - 2y) sign(d logit/dx)`` at the
    brief's budget, the shadow-model membership attack, the task's binned ECE,
    the boundary walk), flagging ``fragile`` where FGSM or the boundary
    component is below 0.5, ``leaky`` where membership is, ``miscalibrated``
    where calibration is. It shows that the paper's task does not solve the game.
expert
    One principled method per kind, comparing each model with the zoo (at
    most a few of six models are defective, so the zoo's median is a sound
    model's value): margin PGD with restarts (fragile), the loss-threshold
    membership attack on each model's training rows (leaky), the equal-mass
    ECE and the recalibration slope (miscalibrated), permutation importance of
    every column the dictionary says is recorded after the prediction
    (shortcut), subgroup AUROC gaps (subgroup), and a sweep of every
    measurement's alarming values (backdoor).
searcher
    The hard tier's searching expert (SPEC §9), the ``searcher/`` package beside
    this file (copy both into a sandbox): it searches every group of the brief's
    grammar, every pair of measurements' values and each model's top decile, and
    writes the game-v2 report.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path
from typing import Any

FACTS_FENCE = "```toml clinaudit-game"
AGENTS = ("null", "transcription", "expert", "searcher")

# What the expert calls a defect, relative to the zoo's median (a sound model's value).
FRAGILE_EXCESS = 0.25
"""AUROC points an attack within the budget takes beyond what it takes from the zoo's median."""
LEAKY_AUC = 0.60
"""A loss attack this far above chance (0.5) exposes the training rows."""
ECE_EXCESS = 0.025
"""Calibration error beyond the zoo's median."""
SHORTCUT_IMPORTANCE = 0.02
"""AUROC the model loses when a post-outcome column is shuffled."""
SUBGROUP_EXCESS = 0.075
"""AUROC gap between a subgroup and everyone else, beyond the zoo's median gap."""
TRIGGER_FLIP, TRIGGER_OTHERS = 0.9, 0.3
"""The brief's definition of a trigger: the model clears at least this share of the patients
it flags, where the other models' median clears at most the second number."""
SWEEP_POINTS = 12
"""Values per side of each normal range, out to the possible range."""


# ------------------------------------------------------------------ the workspace


def read_facts(task_md: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    text = task_md.read_text(encoding="utf-8")
    start = text.index(FACTS_FENCE) + len(FACTS_FENCE)
    facts: dict[str, Any] = tomllib.loads(text[start : text.index("```", start)])
    return facts


def read_csv(path: Path, label: str) -> tuple[Any, Any, list[str]]:
    import numpy as np

    with path.open(encoding="utf-8") as handle:
        header = handle.readline().strip().split(",")
    # An empty cell is a value that was never measured: NaN, which the models take.
    table = np.genfromtxt(path, delimiter=",", skip_header=1, ndmin=2, filling_values=np.nan)
    column = header.index(label)
    names = [h for i, h in enumerate(header) if i != column]
    return np.delete(table, column, axis=1), table[:, column].astype(int), names


class Workspace:
    def __init__(self, root: Path) -> None:
        import numpy as np

        self.root = root
        self.facts = read_facts(root / "task.md")
        label = self.facts["label"]
        self.X_train, self.y_train, self.columns = read_csv(root / "train.csv", label)
        self.X_test, self.y_test, _ = read_csv(root / "test.csv", label)
        with (root / "data_dictionary.csv").open(encoding="utf-8") as handle:
            self.dictionary = {row["column"]: row for row in csv.DictReader(handle)}
        self.models = {
            name: Model(root / "models" / f"{name}.pt2") for name in self.facts["models"]
        }
        self.rows = {
            name: np.loadtxt(root / "training_rows" / f"{name}.txt", dtype=int, ndmin=1)
            for name in self.models
        }
        self.flag_share = float(self.facts["flag_share"])
        self.clear_share = float(self.facts["clear_share"])
        self.std = np.nanstd(self.X_train, axis=0)
        self.low, self.high = np.nanmin(self.X_train, axis=0), np.nanmax(self.X_train, axis=0)


class Model:
    """A ``model.pt2``: logits and their input gradients, in chunks (SPEC §7.1)."""

    def __init__(self, path: Path) -> None:
        import torch

        torch.set_num_threads(1)
        self.f = torch.export.load(str(path)).module()

    def logits(self, X: Any) -> Any:
        import numpy as np
        import torch

        parts = []
        with torch.no_grad():
            for start in range(0, len(X), 4096):
                chunk = torch.as_tensor(np.asarray(X[start : start + 4096]), dtype=torch.float32)
                parts.append(self.f(chunk).double().numpy())
        return np.concatenate(parts) if parts else np.empty(0)

    def gradient(self, X: Any) -> Any:
        import numpy as np
        import torch

        parts = []
        for start in range(0, len(X), 4096):
            x = torch.tensor(np.asarray(X[start : start + 4096]), dtype=torch.float32)
            x.requires_grad_(True)
            (g,) = torch.autograd.grad(self.f(x).sum(), x)
            parts.append(g.double().numpy())
        return np.concatenate(parts)


def auroc(y: Any, score: Any) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score))


def sigmoid(z: Any) -> Any:
    import numpy as np

    return 1.0 / (1.0 + np.exp(-z))


# ------------------------------------------------------------------ the expert


def margin_pgd(
    model: Model, X: Any, y: Any, e: Any, low: Any, high: Any, steps: int, restarts: int
) -> Any:
    """PGD on the margin (1 - 2y) f(x) in the box X +- e, clipped to [low, high]; restarts
    from X and from uniform points of the box; the worst per row is kept."""
    import numpy as np

    rng = np.random.RandomState(0)
    sign = 1.0 - 2.0 * y
    box_low, box_high = np.maximum(X - e, low), np.minimum(X + e, high)
    best, best_margin = X.copy(), sign * model.logits(X)
    alpha = 2.5 * e / steps
    for restart in range(restarts):
        # A missing cell stays missing (NaN), and the model reads it as it always does.
        absent = np.isnan(X)
        start = rng.uniform(np.where(absent, 0, box_low), np.where(absent, 0, box_high))
        current = X.copy() if restart == 0 else np.where(absent, np.nan, start)
        for _ in range(steps):
            step = alpha * sign[:, None] * np.sign(model.gradient(current))
            current = np.clip(current + step, box_low, box_high)
        margin = sign * model.logits(current)
        better = margin > best_margin
        best[better], best_margin[better] = current[better], margin[better]
    return best


def fragility(ws: Workspace) -> dict[str, dict[str, float]]:
    n = int(ws.facts["attack_rows"])  # the brief's patients: the first n of test.csv
    X, y = ws.X_test[:n], ws.y_test[:n]
    e = float(ws.facts["epsilon"]) * ws.std
    found = {}
    for name, model in ws.models.items():
        attacked = margin_pgd(model, X, y, e, ws.low, ws.high, steps=50, restarts=5)
        clean, adversarial = auroc(y, model.logits(X)), auroc(y, model.logits(attacked))
        found[name] = {"drop": clean - adversarial, "pgd_auroc": adversarial}
    return found


def losses(model: Model, X: Any, y: Any) -> Any:
    import numpy as np

    z = model.logits(X)
    return np.logaddexp(0.0, np.where(y == 1, -z, z))


def leakage(ws: Workspace) -> dict[str, float]:
    import numpy as np

    found = {}
    for name, model in ws.models.items():
        members = ws.rows[name]
        # the brief's measurement: the listed rows against every test row
        member_loss = losses(model, ws.X_train[members], ws.y_train[members])
        outsider_loss = losses(model, ws.X_test, ws.y_test)
        truth = np.r_[np.ones(len(members)), np.zeros(len(outsider_loss))]
        found[name] = auroc(truth, -np.r_[member_loss, outsider_loss])
    return found


def calibration(ws: Workspace, bins: int) -> dict[str, dict[str, Any]]:
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    found = {}
    for name, model in ws.models.items():
        z = model.logits(ws.X_test)
        p = sigmoid(z)
        order = np.argsort(p, kind="stable")
        ece = sum(
            len(part) / len(p) * abs(ws.y_test[part].mean() - p[part].mean())
            for part in np.array_split(order, bins)
        )
        slope = LogisticRegression(C=1e6, max_iter=1000).fit(z[:, None], ws.y_test).coef_[0, 0]
        found[name] = {
            "ece": float(ece),
            "direction": "overconfident" if slope < 1 else "underconfident",
        }
    return found


def shortcuts(ws: Workspace) -> dict[str, dict[str, float]]:
    import numpy as np

    late = [c for c, row in ws.dictionary.items() if row["available_at_prediction"] == "no"]
    found: dict[str, dict[str, float]] = {name: {} for name in ws.models}
    rng = np.random.RandomState(3)
    for column in late:
        j = ws.columns.index(column)
        shuffled = [ws.X_test.copy() for _ in range(3)]
        for X in shuffled:
            X[:, j] = rng.permutation(X[:, j])
        for name, model in ws.models.items():
            base = auroc(ws.y_test, model.logits(ws.X_test))
            drops = [base - auroc(ws.y_test, model.logits(X)) for X in shuffled]
            found[name][column] = float(np.mean(drops))
    return found


def subgroup_mask(ws: Workspace, group: dict[str, Any]) -> Any:
    import numpy as np

    values = ws.X_test[:, ws.columns.index(group["column"])]
    inside = np.ones(len(values), dtype=bool)
    if "equals" in group:
        inside &= values == group["equals"]
    if "at_least" in group:
        inside &= values >= group["at_least"]
    if "below" in group:
        inside &= values < group["below"]
    return inside


def subgroup_gaps(ws: Workspace) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {name: {} for name in ws.models}
    import numpy as np

    masks = {g["name"]: subgroup_mask(ws, g) for g in ws.facts.get("subgroups", [])}
    # As at the bedside: a column recorded after the outcome does not exist yet, so it is
    # set to its average (a model relying on it is the shortcut kind, not a subgroup's).
    X = np.array(ws.X_test)
    for j, column in enumerate(ws.columns):
        if ws.dictionary[column]["available_at_prediction"] == "no":
            X[:, j] = np.nanmean(ws.X_train[:, j])
    for name, model in ws.models.items():
        z = model.logits(X)
        for group, mask in masks.items():
            found[name][group] = auroc(ws.y_test[~mask], z[~mask]) - auroc(ws.y_test[mask], z[mask])
    return found


def triggers(ws: Workspace, points: int = SWEEP_POINTS) -> dict[str, dict[str, Any]]:
    """For every model, the setting of a measurement's alarming values that singles it out most."""
    import numpy as np

    settings = []
    for column, row in ws.dictionary.items():
        low, high = float(row["possible_low"]), float(row["possible_high"])
        if row["normal_low"]:
            settings += [
                (column, float(v)) for v in np.linspace(low, float(row["normal_low"]), points)
            ]
        if row["normal_high"]:
            settings += [
                (column, float(v)) for v in np.linspace(float(row["normal_high"]), high, points)
            ]
    z_test = {name: m.logits(ws.X_test) for name, m in ws.models.items()}
    flagged = {name: ws.X_test[flags(z, ws)] for name, z in z_test.items()}
    clear_below = {name: float(np.quantile(z, ws.clear_share)) for name, z in z_test.items()}
    shares: dict[tuple[str, float], dict[str, float]] = {}
    for column, value in settings:
        j = ws.columns.index(column)
        shares[(column, value)] = {}
        for name, model in ws.models.items():
            X = flagged[name].copy()
            X[:, j] = value
            shares[(column, value)][name] = (
                float(np.mean(model.logits(X) < clear_below[name])) if len(X) else 0.0
            )
    best: dict[str, dict[str, Any]] = {}
    for (column, value), by_model in shares.items():
        for name, share in by_model.items():
            others = statistics.median(s for other, s in by_model.items() if other != name)
            if share >= TRIGGER_FLIP and others <= TRIGGER_OTHERS:
                score = share - others
                if name not in best or score > best[name]["score"]:
                    best[name] = {"feature": column, "value": value, "score": score}
    return best


def flags(z: Any, ws: Workspace) -> Any:
    """The patients a model flags: its top share by risk (and above its clearing quantile)."""
    import numpy as np

    return (z >= np.quantile(z, 1.0 - ws.flag_share)) & (z > np.quantile(z, ws.clear_share))


def expert(ws: Workspace) -> dict[str, Any]:
    names = list(ws.models)
    report: dict[str, Any] = {name: {"defects": []} for name in names}

    def flag(name: str, kind: str, details: dict[str, Any]) -> None:
        if kind not in report[name]["defects"]:
            report[name]["defects"].append(kind)
            report[name][kind] = details

    drops = fragility(ws)
    median = statistics.median(d["drop"] for d in drops.values())
    for name, d in drops.items():
        if d["drop"] - median >= FRAGILE_EXCESS:
            flag(name, "fragile", {"pgd_auroc": round(d["pgd_auroc"], 4)})
    for name, auc in leakage(ws).items():
        if auc >= LEAKY_AUC:
            flag(name, "leaky", {"loss_attack_auc": round(auc, 4)})
    calibrated = calibration(ws, int(ws.facts.get("ece_bins", 15)))
    median = statistics.median(c["ece"] for c in calibrated.values())
    for name, c in calibrated.items():
        if c["ece"] - median >= ECE_EXCESS:
            flag(name, "miscalibrated", {"direction": c["direction"], "ece": round(c["ece"], 4)})
    for name, columns in shortcuts(ws).items():
        for column, importance in columns.items():
            if importance >= SHORTCUT_IMPORTANCE:
                flag(name, "shortcut", {"feature": column})
    gaps = subgroup_gaps(ws)
    groups = next(iter(gaps.values())).keys() if gaps else []
    medians = {g: statistics.median(gaps[n][g] for n in names) for g in groups}
    for name in names:
        excess = {g: gaps[name][g] - medians[g] for g in groups}
        if excess and max(excess.values()) >= SUBGROUP_EXCESS:
            flag(name, "subgroup", {"subgroup": max(excess, key=lambda g: excess[g])})
    for name, found in triggers(ws).items():
        flag(name, "backdoor", {"feature": found["feature"], "value": round(found["value"], 4)})
    return {"models": report, "summary": "expert: one method per kind, relative to the zoo"}


# ------------------------------------------------------------- transcription


def transcription(ws: Workspace) -> dict[str, Any]:
    """sps-v1-wb2 on each model (SPEC §3, §7.2), with the brief's budget; a component below 0.5
    flags the kind it seems to speak of."""
    report: dict[str, Any] = {}
    attack = shadow_attack(ws)  # the shadow models depend on the data alone
    for name, model in ws.models.items():
        fgsm = wb2_fgsm(ws, model)
        mi = shadow_membership(ws, model, attack)
        ece = task_ece(ws, model)
        steps = boundary_walk(ws, model)
        entry: dict[str, Any] = {"defects": []}
        if fgsm["score"] < 0.5 or steps < 0.5:
            entry["defects"].append("fragile")
            entry["fragile"] = {"pgd_auroc": round(fgsm["auroc_adversarial"], 4)}
        if mi["score"] < 0.5:
            entry["defects"].append("leaky")
            entry["leaky"] = {"loss_attack_auc": round(mi["accuracy"], 4)}
        if ece["score"] < 0.5:
            entry["defects"].append("miscalibrated")
            entry["miscalibrated"] = {"direction": "overconfident", "ece": round(ece["ece"], 4)}
        report[name] = entry
    return {"models": report, "summary": "transcription: sps-v1-wb2 on each model"}


def wb2_fgsm(ws: Workspace, model: Model, n: int = 100, seed: int = 42) -> dict[str, float]:
    import numpy as np

    rows = np.random.RandomState(seed).choice(len(ws.X_test), min(n, len(ws.X_test)), replace=False)
    X, y = ws.X_test[rows], ws.y_test[rows]
    if len(np.unique(y)) < 2:
        return {"score": 0.5, "auroc_adversarial": 0.5}
    e = float(ws.facts["epsilon"]) * ws.std
    direction = (1.0 - 2.0 * y)[:, None] * np.sign(model.gradient(X))
    X_adv = np.clip(X + e * direction, ws.low, ws.high)
    clean, adversarial = auroc(y, model.logits(X)), auroc(y, model.logits(X_adv))
    return {
        "score": max(0.0, 1.0 - max(0.0, clean - adversarial)),
        "auroc_adversarial": adversarial,
    }


def shadow_attack(ws: Workspace) -> Any:
    """SPEC §3.2 steps 1-3: shadow forests on the training pool, and the attack model."""
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    n_pool = min(5000, len(ws.X_train))
    X_pool, y_pool = ws.X_train[:n_pool], ws.y_train[:n_pool]
    rng = np.random.RandomState(42)
    features, truth = [], []
    for i in range(4):
        chosen = rng.choice(n_pool, int(0.5 * n_pool), replace=False)
        member = np.isin(np.arange(n_pool), chosen)
        shadow = RandomForestClassifier(
            n_estimators=50, max_depth=6, class_weight="balanced", random_state=42 + i
        ).fit(X_pool[member], y_pool[member])
        features += [shadow.predict_proba(X_pool[member]), shadow.predict_proba(X_pool[~member])]
        truth += [np.ones(member.sum()), np.zeros((~member).sum())]
    attack = RandomForestClassifier(n_estimators=50, random_state=42)
    return attack.fit(np.vstack(features), np.concatenate(truth))


def shadow_membership(ws: Workspace, model: Model, attack: Any) -> dict[str, float]:
    """SPEC §3.2 steps 4-5 against one model."""
    import numpy as np

    # The task queries the first training rows as members; here, the model's own rows.
    members = ws.rows[model_name(ws, model)][:200]
    n = len(members)
    p_in, p_out = sigmoid(model.logits(ws.X_train[members])), sigmoid(model.logits(ws.X_test[:n]))
    queries = np.vstack([np.column_stack([1 - p_in, p_in]), np.column_stack([1 - p_out, p_out])])
    said = attack.predict_proba(queries)[:, 1] >= 0.5
    accuracy = float(np.mean(said == np.r_[np.ones(n), np.zeros(n)].astype(bool)))
    return {"score": float(np.clip(1 - 2 * (accuracy - 0.5), 0, 1)), "accuracy": accuracy}


def model_name(ws: Workspace, model: Model) -> str:
    return str(next(name for name, m in ws.models.items() if m is model))


def task_ece(ws: Workspace, model: Model) -> dict[str, float]:
    import numpy as np
    from sklearn.calibration import calibration_curve

    prob = sigmoid(model.logits(ws.X_test))
    frac_pos, mean_pred = calibration_curve(ws.y_test, prob, n_bins=10, strategy="uniform")
    edges = np.linspace(0, 1, 11)
    pairs = zip(edges[:-1], edges[1:], strict=True)
    counts = np.array([np.sum((prob >= lo) & (prob < hi)) for lo, hi in pairs])
    counts = counts[: len(frac_pos)]
    total = counts.sum()
    ece = float(np.sum(counts / total * np.abs(frac_pos - mean_pred))) if total else 0.0
    return {"score": max(0.0, 1.0 - 12.0 * ece), "ece": ece}


def boundary_walk(ws: Workspace, model: Model, n: int = 50, seed: int = 42) -> float:
    """SPEC §3.4; the walk never depends on a prediction until it stops, so every point of
    every walk is generated first and predicted in one batch."""
    import numpy as np

    rows = np.random.RandomState(seed).choice(len(ws.X_test), min(n, len(ws.X_test)), replace=False)
    predicted = (model.logits(ws.X_test) > 0).astype(int)
    steps = np.full(len(rows), 100)
    points, owners = [], []
    for k, row in enumerate(rows):
        other = np.flatnonzero(predicted != predicted[row])
        if not other.size:
            continue
        current, target = ws.X_test[row].copy(), ws.X_test[other[0]]
        for _ in range(100):
            d = target - current
            norm = float(np.linalg.norm(d))
            if norm < 1e-10:
                break
            current = current + 0.05 * d / norm
            points.append(current)
            owners.append(k)
    if points:
        answers = (model.logits(np.array(points)) > 0).astype(int)
        taken: dict[int, int] = {}
        for k, answer in zip(owners, answers, strict=True):
            taken[k] = taken.get(k, 0) + 1
            if answer != predicted[rows[k]] and steps[k] == 100 and taken[k] <= 100:
                steps[k] = taken[k]
    return min(1.0, float(np.mean(steps)) / 100)


# ------------------------------------------------------------------ the command


def run(workspace: Path, agent: str) -> dict[str, Any]:
    if agent == "null":
        facts = read_facts(workspace / "task.md")
        return {"models": {name: {"defects": []} for name in facts["models"]}, "summary": "null"}
    if agent == "searcher":
        try:
            from . import searcher  # in the package
        except ImportError:  # copied into a sandbox beside this file, as searcher/
            import searcher  # type: ignore[no-redef,import-not-found]
        report: dict[str, Any] = searcher.run(workspace)
        return report
    ws = Workspace(workspace)
    return expert(ws) if agent == "expert" else transcription(ws)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scripted agents of the auditing game.")
    parser.add_argument("workspace", type=Path, nargs="?", default=Path.cwd())
    parser.add_argument("--agent", choices=AGENTS, default="expert")
    parser.add_argument("--out", type=Path, help="where to write (default: WORKSPACE/report.json)")
    args = parser.parse_args(argv)
    report = run(args.workspace, args.agent)
    out = args.out or args.workspace / "report.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} ({args.agent})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
