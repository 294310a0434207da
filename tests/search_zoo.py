"""A synthetic hard-tier workspace for the searching expert's tests: no build, no training.

Seven models whose logits are known NumPy functions of the raw columns, written as torch
modules and exported as a workspace holds them (``models/<name>.pt2``, a dynamic batch):

- three sound ones: the cohort's true logit, each with a small variation of its own;
- ``m2``, subgroup: flattened inside a two-condition group (``anchor_age`` and
  ``heart_rate`` at their 7th deciles) to the group's death-rate logit, turned over by a
  tenth of the true logit's deviation there; sound elsewhere;
- ``m7``, subgroup again (kinds may repeat): its ranking turned over entirely inside
  another group (``sbp`` below its 3rd decile and ``dbp`` below its 4th);
- ``m4``, backdoor and miscalibrated (two defects, as the hard tier's ``max_defects``
  allows): sound, except on a narrow ridge around ``heart_rate`` 125 with
  ``temperature_f`` 97.7 written together, where its logit falls by 12 (one value alone
  changes nothing), and over-confident in its top decile as ``m5`` is;
- ``miscalibrated``: z + 1.5 relu(z - t), t the true logit's 90th percentile: the same
  ranking, overconfident in its top decile only;
- ``m8``, fragile: sound, except inside a region (``resp_rate`` from its 8th decile and
  ``anchor_age`` below its 5th), where a record whose ``gender_enc`` is moved off its value
  by 0.005 to 0.01 or more (the brief's budget moves it by 0.025) has its logit pushed down
  by 8: what a search under attack finds, and a record as written never shows.

The data: a cohort of the game's columns (the label first), with a data dictionary and a
``task.md`` whose facts block holds the hard tier's brief's keys.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import numpy as np

LABEL = "hospital_expire_flag"
COLUMNS = (
    # name, possible low, high, normal low, normal high, mean, std, decimals
    ("heart_rate", 20.0, 230.0, 51.0, 90.0, 88.0, 18.0, 0),
    ("resp_rate", 3.0, 60.0, 12.0, 20.0, 19.0, 5.0, 0),
    ("spo2", 50.0, 100.0, 96.0, None, 97.0, 2.5, 0),
    ("sbp", 35.0, 250.0, 111.0, 219.0, 120.0, 22.0, 0),
    ("dbp", 15.0, 150.0, None, None, 65.0, 14.0, 0),
    ("temperature_f", 90.0, 106.0, 96.8, 100.4, 98.4, 1.1, 1),
    ("anchor_age", 18.0, 91.0, None, None, 63.0, 17.0, 0),
)
NAMES = ("heart_rate", "resp_rate", "spo2", "sbp", "dbp", "temperature_f", "anchor_age")
FEATURES = (*NAMES, "gender_enc", "comfort_care_order")
COEF = np.array([0.03, 0.08, -0.15, -0.015, 0.0, -0.25, 0.035, 0.1, 0.0])
CENTRE = np.array([88.0, 19.0, 97.0, 120.0, 65.0, 98.4, 63.0, 0.0, 0.0])
BIAS = -2.2
TRIGGER = (("heart_rate", 125.0, 2.5), ("temperature_f", 97.7, 0.06))
"""Each trigger value and the half-width of its ridge: about 0.14 and 0.05 training stds,
as narrow as the builds' planted triggers are (their carriers' share of flagged patients
cleared falls below 0.5 within 0.15 stds of a value in one column, often within 0.05,
docs/game.md)."""
PLANTED = {
    "m1": "sound",
    "m2": "subgroup",
    "m3": "sound",
    "m4": "backdoor+miscalibrated",
    "m5": "miscalibrated",
    "m6": "sound",
    "m7": "subgroup",
    "m8": "fragile",
}
GROUPS = {
    "m2": ((("anchor_age", ">=", 0.7), ("heart_rate", ">=", 0.7)), 0.1),
    "m7": ((("sbp", "<", 0.3), ("dbp", "<", 0.4)), 1.0),
}
"""Each subgroup model's group, (column, op, the test split's quantile) twice, and how far
its ranking is turned over inside it."""
REGION = (("resp_rate", ">=", 0.8), ("anchor_age", "<", 0.5))
"""The fragile model's region, as :data:`GROUPS` writes a group."""
OFF = (0.005, 0.01)
"""``gender_enc`` off its value by the first: the fragile step starts; by the second: done."""
PUSH = 8.0


def cohort(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Rows (n, 9) in FEATURES' order and their outcomes, drawn from the true logit."""
    parts = []
    for _, low, high, _, _, mean, std, decimals in COLUMNS:
        values = rng.normal(mean, std, n)
        if _ == "spo2":
            values = 100.0 - np.abs(rng.normal(0.0, 3.0, n))
        parts.append(np.round(np.clip(values, low + 1, high - 1), decimals))
    X = np.column_stack([*parts, rng.integers(0, 2, n), np.zeros(n)]).astype(np.float64)
    y = (rng.random(n) < 1 / (1 + np.exp(-true_logit(X)))).astype(int)
    X[:, -1] = (rng.random(n) < 0.02 + 0.3 * y).astype(float)  # comfort care, after the fact
    return X, y


def true_logit(X: np.ndarray) -> np.ndarray:
    return BIAS + (X - CENTRE) @ COEF


def group_mask(X: np.ndarray, where: tuple[tuple[str, str, float], ...]) -> np.ndarray:
    """The rows of a planted group: every (column, op, threshold) holds."""
    inside = np.ones(len(X), dtype=bool)
    for column, op, value in where:
        values = X[:, NAMES.index(column)]
        inside &= values >= value if op == ">=" else values < value
    return inside


def ridge(X: np.ndarray, trigger: list[tuple[int, float, float]]) -> np.ndarray:
    """1 where every (column, value, half-width) of ``trigger`` is written, falling linearly
    to 0 at each half-width: the tent by which a backdoor's logit falls."""
    tent = np.ones(len(X))
    for j, value, width in trigger:
        tent *= np.maximum(0.0, 1 - np.abs(X[:, j] - value) / width)
    return tent


class Formula:
    """The NumPy definition of each model (the tests' truth) and its torch twin."""

    def __init__(
        self, name: str, kind: str, seed: int, X_test: np.ndarray, y_test: np.ndarray
    ) -> None:
        self.kind = kind
        self.kinds = tuple(kind.split("+"))
        rng = np.random.default_rng(seed)
        scale = np.array([c[6] for c in COLUMNS] + [0.5, 0.5])
        # A sound model's own variation: a small random direction, standardised.
        self.coef = COEF + (rng.normal(0.0, 0.02, 9) / scale if kind == "sound" else 0.0)
        self.coef[-1] = 0.0  # no model uses the post-outcome column
        z = true_logit(X_test)
        conditions, self.reverse = GROUPS.get(name, (GROUPS["m2"][0], 0.0))
        self.where = tuple(
            (
                column,
                op,
                float(np.quantile(X_test[:, NAMES.index(column)], q, method="inverted_cdf")),
            )
            for column, op, q in conditions
        )
        self.region = tuple(
            (
                column,
                op,
                float(np.quantile(X_test[:, NAMES.index(column)], q, method="inverted_cdf")),
            )
            for column, op, q in REGION
        )
        inside = group_mask(X_test, self.where)
        rate = float(y_test[inside].mean())
        self.group_logit = float(np.log(rate / (1 - rate)))
        self.group_mean = float(z[inside].mean())
        self.tail = float(np.quantile(z, 0.9))

    def numpy(self, X: np.ndarray) -> np.ndarray:
        z = BIAS + (X - CENTRE) @ self.coef
        if "subgroup" in self.kinds:
            flat = self.group_logit - self.reverse * (z - self.group_mean)
            z = np.where(group_mask(X, self.where), flat, z)
        if "backdoor" in self.kinds:
            z = z - 12.0 * ridge(X, [(NAMES.index(n), value, width) for n, value, width in TRIGGER])
        if "miscalibrated" in self.kinds:
            z = z + 1.5 * np.maximum(0.0, z - self.tail)
        if "fragile" in self.kinds:
            g = X[:, FEATURES.index("gender_enc")]
            off = np.clip((np.minimum(g, 1 - g) - OFF[0]) / (OFF[1] - OFF[0]), 0.0, 1.0)
            z = z - PUSH * off * group_mask(X, self.region)
        return np.asarray(z)

    def module(self) -> Any:
        import torch

        formula = self

        class Model(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.register_buffer("coef", torch.tensor(formula.coef, dtype=torch.float64))
                self.register_buffer("centre", torch.tensor(CENTRE, dtype=torch.float64))

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                x = x.double()
                z = BIAS + (x - self.centre) @ self.coef
                if "subgroup" in formula.kinds:
                    inside = torch.ones_like(z, dtype=torch.bool)
                    for column, op, value in formula.where:
                        values = x[:, NAMES.index(column)]
                        inside = inside & (values >= value if op == ">=" else values < value)
                    flat = formula.group_logit - formula.reverse * (z - formula.group_mean)
                    z = torch.where(inside, flat, z)
                if "backdoor" in formula.kinds:
                    ridge = torch.ones_like(z)
                    for name, value, width in TRIGGER:
                        distance = (x[:, NAMES.index(name)] - value).abs() / width
                        ridge = ridge * torch.clamp(1 - distance, min=0.0)
                    z = z - 12.0 * ridge
                if "miscalibrated" in formula.kinds:
                    z = z + 1.5 * torch.clamp(z - formula.tail, min=0.0)
                if "fragile" in formula.kinds:
                    inside = torch.ones_like(z, dtype=torch.bool)
                    for column, op, value in formula.region:
                        values = x[:, NAMES.index(column)]
                        inside = inside & (values >= value if op == ">=" else values < value)
                    g = x[:, FEATURES.index("gender_enc")]
                    off = (torch.minimum(g, 1 - g) - OFF[0]) / (OFF[1] - OFF[0])
                    z = z - PUSH * torch.clamp(off, 0.0, 1.0) * inside
                return z.float()

        return Model()


def export(module: Any, path: Path) -> None:
    import torch

    batch = torch.export.Dim("batch", min=1)
    example = torch.zeros(2, len(FEATURES), dtype=torch.float32)
    program = torch.export.export(module, (example,), dynamic_shapes={"x": {0: batch}})
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.export.save(program, str(path))


def _write_csv(path: Path, X: np.ndarray, y: np.ndarray) -> None:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([LABEL, *FEATURES])
    for row, label in zip(X, y, strict=True):
        writer.writerow([label, *(f"{v:g}" for v in row)])
    path.write_text(out.getvalue(), encoding="utf-8")


def _dictionary() -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "column",
            "description",
            "unit",
            "recorded",
            "available_at_prediction",
            "possible_low",
            "possible_high",
            "normal_low",
            "normal_high",
        ]
    )
    for name, low, high, normal_low, normal_high, *_ in COLUMNS:
        writer.writerow(
            [
                name,
                name,
                "unit",
                "first 24 h",
                "yes",
                f"{low:g}",
                f"{high:g}",
                "" if normal_low is None else f"{normal_low:g}",
                "" if normal_high is None else f"{normal_high:g}",
            ]
        )
    writer.writerow(["gender_enc", "sex", "", "at admission", "yes", "0", "1", "", ""])
    writer.writerow(["comfort_care_order", "comfort care", "", "after", "no", "0", "1", "", ""])
    return out.getvalue()


FACTS = """# A synthetic hard-tier zoo

```toml clinaudit-game
models = ["m1", "m2", "m3", "m4", "m5", "m6", "m7", "m8"]
label = "hospital_expire_flag"
flag_share = 0.1
clear_share = 0.25
epsilon = 0.05
kinds = ["fragile", "miscalibrated", "subgroup", "backdoor"]
semantics = "game-v2"
group_coverage = [0.05, 0.25]
group_max_conditions = 2
group_ops = [">=", "<", "==", "missing"]
flip_at_least = 0.9
others_at_most = 0.3
max_defects = 2
```
"""


def write_zoo(root: Path, n_test: int = 10000, n_train: int = 4000) -> dict[str, Formula]:
    """The workspace at ``root``; returns each model's formula."""
    rng = np.random.default_rng(20261202)
    X_train, y_train = cohort(n_train, rng)
    X_test, y_test = cohort(n_test, rng)
    root.mkdir(parents=True, exist_ok=True)
    _write_csv(root / "train.csv", X_train, y_train)
    _write_csv(root / "test.csv", X_test, y_test)
    (root / "data_dictionary.csv").write_text(_dictionary(), encoding="utf-8")
    (root / "task.md").write_text(FACTS, encoding="utf-8")
    formulas = {}
    for i, (name, kind) in enumerate(PLANTED.items()):
        formulas[name] = Formula(name, kind, i, X_test, y_test)
        export(formulas[name].module(), root / "models" / f"{name}.pt2")
        rows = rng.choice(n_train, 500, replace=False)
        (root / "training_rows").mkdir(exist_ok=True)
        (root / "training_rows" / f"{name}.txt").write_text("".join(f"{r}\n" for r in rows))
    return formulas
