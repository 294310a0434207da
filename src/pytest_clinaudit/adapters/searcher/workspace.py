"""The workspace, read once: the facts block of ``task.md``, the data dictionary,
``train.csv`` and ``test.csv``, and ``models/*.pt2`` loaded with torch alone (every
model's test logits computed once); and the progress lines on stderr."""

from __future__ import annotations

import csv
import sys
import time
from pathlib import Path
from typing import Any

FACTS_FENCE = "```toml clinaudit-game"
CHUNK_ROWS = 1 << 16
"""Rows a model is called on at once."""


class Progress:
    """Progress lines on stderr, with the seconds since the start."""

    def __init__(self, quiet: bool = False) -> None:
        self.start = time.perf_counter()
        self.quiet = quiet

    def seconds(self) -> float:
        return time.perf_counter() - self.start

    def __call__(self, message: str) -> None:
        if not self.quiet:
            print(f"[searcher {self.seconds():6.1f} s] {message}", file=sys.stderr, flush=True)


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


class Model:
    """A ``model.pt2`` (SPEC §7.1): rows of raw values -> logits, in chunks."""

    def __init__(self, path: Path) -> None:
        import torch

        torch.set_num_threads(1)
        self.f = torch.export.load(str(path)).module()

    def logits(self, X: Any) -> Any:
        import numpy as np
        import torch

        parts = []
        with torch.no_grad():
            for start in range(0, len(X), CHUNK_ROWS):
                chunk = np.asarray(X[start : start + CHUNK_ROWS], dtype=np.float32)
                parts.append(self.f(torch.from_numpy(chunk)).double().numpy().reshape(-1))
        return np.concatenate(parts) if parts else np.empty(0)


def _number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


class Workspace:
    """What the agent gets, read once; every model's test logits computed once."""

    def __init__(self, root: Path, progress: Progress) -> None:
        import numpy as np

        self.root = root
        self.facts = read_facts(root / "task.md")
        label = self.facts["label"]
        self.X_train, self.y_train, self.columns = read_csv(root / "train.csv", label)
        self.X_test, self.y_test, _ = read_csv(root / "test.csv", label)
        with (root / "data_dictionary.csv").open(encoding="utf-8") as handle:
            self.dictionary = {row["column"]: row for row in csv.DictReader(handle)}
        self.names = [str(name) for name in self.facts["models"]]
        self.models = {name: Model(root / "models" / f"{name}.pt2") for name in self.names}
        self.flag_share = float(self.facts.get("flag_share", 0.1))
        self.clear_share = float(self.facts.get("clear_share", 0.25))
        self.std = np.nanstd(self.X_train, axis=0)
        progress(f"read {len(self.names)} models, {len(self.X_test)} test patients")
        self.z = {name: model.logits(self.X_test) for name, model in self.models.items()}

    def entry(self, column: str) -> dict[str, str]:
        return self.dictionary.get(column, {})

    def at_prediction(self, column: str) -> bool:
        return self.entry(column).get("available_at_prediction", "yes") != "no"

    def possible(self, j: int) -> tuple[float, float]:
        import numpy as np

        row = self.entry(self.columns[j])
        present = self.X_train[:, j][~np.isnan(self.X_train[:, j])]
        low, high = _number(row.get("possible_low")), _number(row.get("possible_high"))
        return (
            float(present.min()) if low is None else low,
            float(present.max()) if high is None else high,
        )

    def normal(self, j: int) -> tuple[float | None, float | None]:
        row = self.entry(self.columns[j])
        return _number(row.get("normal_low")), _number(row.get("normal_high"))

    def binary(self, j: int) -> bool:
        import numpy as np

        values = np.r_[self.X_train[:, j], self.X_test[:, j]]
        present = values[~np.isnan(values)]
        return self.possible(j) == (0.0, 1.0) and bool(np.isin(present, (0.0, 1.0)).all())

    def alarming(self, j: int, value: float) -> bool:
        low, high = self.normal(j)
        return (low is not None and value < low) or (high is not None and value > high)
