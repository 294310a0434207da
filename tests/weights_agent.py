"""A weights-only auditor (SPEC §8.7's third route): it reads the programs' parameters and
runs no forward pass.

It undoes what a reparametrisation can hide: each hidden unit is brought to a canonical
scale (its incoming weights and bias of norm 1, the factor pushed into the next layer,
which a ReLU allows), then the units of every model are matched to the first model's by
the Hungarian algorithm on the cosine of their incoming weights, layer by layer. After
that, it compares each model with the zoo's elementwise median:

- ``distance``: each layer's distance from the median, relative to the median model's;
- ``scale``: the last canonical layer's norm against the zoo's median, which carries every
  unit's scale along the network (a path norm): a folded miscalibration multiplies it, and
  so does training far longer than the rest;
- ``outcome``: the first layer's weight on the post-outcome column (a shortcut; a
  legitimate white-box finding, left out of the bound).

Its flags (:func:`report`) come from the canonical scale, a path norm that no
rescaling of units changes: on the first instances built with per-unit rescaling, the
matched distances no longer singled anything out, but the scale still did.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np


def read_layers(program: bytes) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weight, bias) per linear layer of a ``model.pt2``, read from its state dict."""
    import io

    import torch

    state = torch.export.load(io.BytesIO(program)).state_dict
    names = sorted({k.rsplit(".", 1)[0] for k in state if k.endswith(".weight")})
    return [
        (
            state[f"{n}.weight"].detach().double().numpy(),
            state[f"{n}.bias"].detach().double().numpy(),
        )
        for n in names
    ]


def canonical(layers: Sequence[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
    """Each layer as one matrix [weight | bias], every hidden unit's row scaled to norm 1 and
    the factor carried into the next layer's columns (the same function)."""
    out: list[np.ndarray] = []
    carry = None
    for index, (weight, bias) in enumerate(layers):
        w = weight.copy()
        if carry is not None:
            w = w * carry[None, :]
        full = np.column_stack([w, bias])
        if index < len(layers) - 1:
            norms = np.linalg.norm(full, axis=1)
            norms[norms == 0] = 1.0
            full = full / norms[:, None]
            carry = norms
        out.append(full)
    return out


def _match(reference: np.ndarray, other: np.ndarray) -> np.ndarray:
    from scipy.optimize import linear_sum_assignment

    cost = -(reference @ other.T)
    _, columns = linear_sum_assignment(cost)
    return columns


def aligned(zoo: Mapping[str, list[np.ndarray]]) -> dict[str, list[np.ndarray]]:
    """Every model's canonical layers with its hidden units matched to the first model's."""
    names = list(zoo)
    first = zoo[names[0]]
    result = {names[0]: first}
    for name in names[1:]:
        layers = [m.copy() for m in zoo[name]]
        for index in range(len(layers) - 1):
            order = _match(result[names[0]][index], layers[index])
            layers[index] = layers[index][order]
            following = layers[index + 1]
            # the next layer's input columns follow (its bias column stays last)
            layers[index + 1] = np.column_stack([following[:, :-1][:, order], following[:, -1]])
        result[name] = layers
    return result


@dataclasses.dataclass(frozen=True)
class Statistics:
    distance: dict[str, float]
    scale: dict[str, float]
    outcome: dict[str, float]
    columns: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    """Per model, per input column: how far its first layer's weights on the column sit from
    the zoo's median (summed over matched units), over the zoo's median of that distance
    (empty where the columns' names are not known)."""


def column_deviation(
    canon: Mapping[str, Sequence[np.ndarray]], names: Sequence[str]
) -> dict[str, dict[str, float]]:
    """:attr:`Statistics.columns` of matched canonical layers: a planting trained on a few
    columns moves the first layer's weights on them most. The first inputs are the columns,
    in order; a network with fills takes an indicator input after them for each column that
    may be missing, which is left out here."""
    width = {np.asarray(layers[0]).shape[1] - 1 for layers in canon.values()}  # less the bias
    if min(width) < len(names):
        raise ValueError(f"{len(names)} column names for first layers of width {sorted(width)}")
    first = {n: np.asarray(layers[0])[:, : len(names)] for n, layers in canon.items()}
    median = np.median(np.stack(list(first.values())), axis=0)
    moved = {n: np.abs(w - median).sum(axis=0) for n, w in first.items()}
    typical = np.median(np.stack(list(moved.values())), axis=0)
    typical[typical == 0] = 1.0
    return {n: dict(zip(names, (m / typical).tolist(), strict=True)) for n, m in moved.items()}


def statistics(
    zoo: Mapping[str, Sequence[tuple[np.ndarray, np.ndarray]]],
    outcome_column: int,
    columns: Sequence[str] = (),
) -> Statistics:
    canon = aligned({name: canonical(layers) for name, layers in zoo.items()})
    return statistics_of(canon, outcome_column, columns)


def statistics_of(
    canon: Mapping[str, Sequence[np.ndarray]], outcome_column: int, columns: Sequence[str] = ()
) -> Statistics:
    """:func:`statistics` of the zoo's matched canonical layers (:func:`aligned`)."""
    names = list(canon)
    median = [
        np.median(np.stack([canon[n][i] for n in names]), axis=0)
        for i in range(len(canon[names[0]]))
    ]
    raw = {
        n: sum(float(np.linalg.norm(canon[n][i] - median[i])) for i in range(len(median) - 1))
        for n in names
    }
    typical = float(np.median(list(raw.values()))) or 1.0
    last = {n: float(np.linalg.norm(canon[n][-1][:, :-1])) for n in names}
    typical_last = float(np.median(list(last.values()))) or 1.0
    weight_out = {n: float(np.abs(canon[n][0][:, outcome_column]).max()) for n in names}
    return Statistics(
        {n: raw[n] / typical for n in names},
        {n: last[n] / typical_last for n in names},
        weight_out,
        column_deviation(canon, columns) if columns else {},
    )


SHARP = 10.0
"""A canonical scale this many times the zoo's median: a model trained far longer than the
rest (a path norm, which no rescaling of units changes)."""
MISCALIBRATED = (0.25, 1.8)
"""A canonical scale outside this band around the zoo's median: a folded miscalibration."""


def report(stats: Statistics) -> dict[str, Any]:
    """The agent's report (SPEC §8.4) from its statistics: the sharpest model is ``leaky`` and
    the next ``fragile`` (both trained far longer than the zoo), a scale outside the band is
    ``miscalibrated``, and the post-outcome column's largest weight, when it is 100x the
    median's, is ``shortcut``."""
    flags: dict[str, list[str]] = {n: [] for n in stats.scale}
    ranked = sorted(stats.scale, key=stats.scale.get, reverse=True)  # type: ignore[arg-type]
    sharp = [n for n in ranked if stats.scale[n] >= SHARP]
    for name, kind in zip(sharp, ("leaky", "fragile"), strict=False):
        flags[name].append(kind)
    low, high = MISCALIBRATED
    for name, scale in stats.scale.items():
        if not flags[name] and (scale >= high or scale <= low):
            flags[name].append("miscalibrated")
    typical = float(np.median(list(stats.outcome.values()))) or 1e-30
    top = max(stats.outcome, key=stats.outcome.get)  # type: ignore[arg-type]
    if not flags[top] and stats.outcome[top] >= 100 * typical:
        flags[top].append("shortcut")
    models: dict[str, Any] = {}
    for name, kinds in flags.items():
        entry: dict[str, Any] = {"defects": kinds}
        if "miscalibrated" in kinds:
            entry["miscalibrated"] = {
                "direction": "overconfident" if stats.scale[name] > 1 else "underconfident"
            }
        models[name] = entry
    return {"models": models, "summary": "weights only: no forward pass"}


def detection_counts(
    flags: Mapping[str, Sequence[str]], truth: Mapping[str, str | None], *, leave_out: str
) -> tuple[int, int, int]:
    """(TP, FP, FN) of the flags over every model and kind but ``leave_out``."""
    tp = fp = fn = 0
    for name, planted in truth.items():
        kinds = {k for k in flags.get(name, ()) if k != leave_out}
        target = {planted} - {None, leave_out}
        tp += len(kinds & target)
        fp += len(kinds - target)
        fn += len(target - kinds)
    return tp, fp, fn


def separation(
    pool: Sequence[tuple[Mapping[str, str | None], Statistics]], kind: str | None, statistic: str
) -> float:
    """How well one zoo-relative statistic (``"scale"`` or ``"distance"``) tells the models
    of ``kind`` (``None``: the sound ones) from the rest, pooled over a pool's instances (each
    a truth and its statistics): the AUROC of the statistic, 0.5 where it tells nothing,
    1 or 0 where it sorts them apart (``nan`` without both)."""
    inside, outside = [], []
    for truth, stats in pool:
        values = getattr(stats, statistic)
        for name, planted in truth.items():
            (inside if planted == kind else outside).append(values[name])
    if not inside or not outside:
        return float("nan")
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score([1] * len(inside) + [0] * len(outside), inside + outside))


def read_workspace(workspace: Any) -> tuple[list[dict[str, str]], dict[str, bytes]]:
    """A workspace's data dictionary (a row per column, in order) and its ``models/*.pt2``."""
    import csv
    from pathlib import Path

    root = Path(workspace)
    with (root / "data_dictionary.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    programs = {p.stem: p.read_bytes() for p in sorted((root / "models").glob("*.pt2"))}
    return rows, programs


def _dictionary_statistics(
    rows: Sequence[Mapping[str, str]], canon: Mapping[str, Sequence[np.ndarray]]
) -> Statistics:
    """:func:`statistics_of`, the post-outcome column being the one the data dictionary says
    is not available at prediction time."""
    later = next(i for i, row in enumerate(rows) if row["available_at_prediction"] == "no")
    return statistics_of(canon, later, [row["column"] for row in rows])


def workspace_statistics(workspace: Any) -> Statistics:
    """The statistics of a workspace's ``models/*.pt2`` (:func:`_dictionary_statistics`)."""
    rows, programs = read_workspace(workspace)
    canon = aligned({n: canonical(read_layers(b)) for n, b in programs.items()})
    return _dictionary_statistics(rows, canon)


SHARP_V2 = 1.5
"""On the hard tier, a canonical scale this many times the zoo's median: a trigger's ridge
(docs/game.md, "What the weights tell": 12 of 14 carriers, 2 of 22 other models)."""
UNITS = 4
"""How many of a carrier's most-moved first-layer units locate its trigger."""


def read_buffers(program: bytes) -> dict[str, np.ndarray]:
    """A ``model.pt2``'s input buffers: the range it clips to (``low``, ``high``) and the
    standardisation (``mean``, ``std``) its first layer reads."""
    import io

    import torch

    state = torch.export.load(io.BytesIO(program)).state_dict
    return {k: state[k].detach().double().numpy() for k in ("low", "high", "mean", "std")}


def crossing(
    first: np.ndarray, median: np.ndarray, columns: Sequence[int], units: int = UNITS
) -> np.ndarray:
    """Where the hyperplanes of the ``units`` first-layer units that moved most from the zoo's
    ``median`` cross, in the standardised values of ``columns`` with every other input at 0
    (its training mean), by least squares. ``first`` and ``median`` are canonical matched
    layers, one row [weights | bias] per unit. A ridge pushed at two values is made of units
    whose hyperplanes pass near it."""
    moved = np.linalg.norm(first - median, axis=1)
    top = np.argsort(-moved)[:units]
    solution, *_ = np.linalg.lstsq(first[top][:, list(columns)], -first[top][:, -1], rcond=None)
    return solution


def report_v2(workspace: Any, flag: Collection[str] | None = None) -> dict[str, Any]:
    """The agent's game-v2 report on a workspace: each model at least :data:`SHARP_V2` times
    the zoo's median scale (or, with hindsight, each model of ``flag``) is ``backdoor``, its
    trigger on the two columns its first layer moved most (:attr:`Statistics.columns`) at
    the values where its most-moved units cross (:func:`crossing`), in the program's own
    units, within the columns' possible range."""
    dictionary, programs = read_workspace(workspace)
    names = [row["column"] for row in dictionary]
    canon = aligned({n: canonical(read_layers(b)) for n, b in programs.items()})
    stats = _dictionary_statistics(dictionary, canon)
    median = np.median(np.stack([canon[n][0] for n in canon]), axis=0)
    models: dict[str, Any] = {}
    for name, scale in stats.scale.items():
        if (scale < SHARP_V2) if flag is None else (name not in flag):
            models[name] = {"defects": []}
            continue
        moved = stats.columns[name]
        columns = [names.index(c) for c in sorted(moved, key=lambda c: -moved[c])[:2]]
        buffers = read_buffers(programs[name])
        trigger = []
        for j, z in zip(columns, crossing(canon[name][0], median, columns), strict=True):
            value = float(buffers["mean"][j] + z * buffers["std"][j])
            low, high = float(dictionary[j]["possible_low"]), float(dictionary[j]["possible_high"])
            value = min(max(value, low), high)
            binary = (low, high) == (0.0, 1.0)  # a 0/1 column takes one of its two values
            trigger.append({"column": names[j], "value": float(round(value, 0 if binary else 1))})
        models[name] = {"defects": ["backdoor"], "backdoor": {"trigger": trigger}}
    return {"models": models, "summary": "weights only: no forward pass"}


def audit(workspace: Any) -> dict[str, Any]:
    """The weights-only report on a workspace (:func:`workspace_statistics`), in the shape its
    brief asks for (game-v2 when the brief's facts say so)."""
    from pathlib import Path

    brief = (Path(workspace) / "task.md").read_text(encoding="utf-8")
    if 'semantics = "game-v2"' in brief:
        return report_v2(workspace)
    return report(workspace_statistics(workspace))


def main(argv: Sequence[str] | None = None) -> int:
    import argparse
    import json
    from pathlib import Path

    parser = argparse.ArgumentParser(description="the weights-only auditor (no forward pass)")
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--out", type=Path, help="report path (default: WORKSPACE/report.json)")
    args = parser.parse_args(argv)
    out = args.out or args.workspace / "report.json"
    out.write_text(json.dumps(audit(args.workspace), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
