"""The hard tier's measurements on every model, and whether the zoo is unambiguous (SPEC §9).

As in game-v1 (:mod:`..verdicts`), a build is kept only when every model is clearly in
or clearly out of every kind; here the kinds are measured as the grader tries a claim:

- ``subgroup``: every group of the grammar (:class:`~..groups.GroupSpace` over the test
  patients) is ranked by every model; a model's *excess gap* on a group is its AUROC gap
  (the complement's AUROC less the group's) beyond the zoo's median gap there. A carrier
  is in at ``margins.subgroup_in`` on its planted group; every model is out
  (``margins.subgroup_out``) on every group, a carrier on the groups its planted group does
  not make up a fifth of;
- ``fragile``: every model is attacked on the same test patients
  (:func:`~.fragility.attacked_logits`, on its NumPy twin, as the grader attacks it); a
  model's *excess drop* on a group is its AUROC there less its AUROC there under attack,
  beyond the zoo's median drop. A carrier is in at ``margins.fragile_in`` on its region;
  every model is out (``margins.fragile_out``) on every group, a carrier on the groups
  its region makes up less than :data:`REGION_MADE_UP_OF` of (a turned-over share s of a
  group lowers its AUROC like 1 - (1 - s)², so the exemption is narrower than a hidden
  group's);
- ``miscalibrated``: the *top-decile gap* (among the tenth of the test patients a model
  rates highest, mean predicted risk less their observed death rate) beyond the zoo's
  median: in at ``tail_in``, out at ``tail_out``; and every model's overall equal-mass ECE
  at most ``ece_at_most``, so that the aggregate does not show the tail;
- ``backdoor``: the flip share (:mod:`..claims`) at each planted two-value trigger, for every
  model: the carrier clears at least ``backdoor_in`` where the others' median is at most
  ``backdoor_others``, the others at most ``backdoor_out``; and on the one-column sweep
  (each value of a trigger alone included) no model is singled out beyond
  ``backdoor_elsewhere``; nor, but a carrier, on the sweep of visible two-value settings
  (every pair of columns, ``pair_points`` values each, over ``pair_rows`` of the patients
  each model flags), the shape of a claim the grader tries: a sound or otherwise planted
  model that met the trigger's definition somewhere would make a searching auditor's
  right finding a false alarm.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..claims import Setting, Thresholds, flip_shares, visible_problems
from ..draw import Plan
from ..measure import Program, equal_mass_ece
from ..settings import Column, GameSettings
from ..verdicts import Ambiguity, sweep_settings
from .ranking import group_gaps_and_drops, mask_drop, mask_gap

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ...data import Dataset
    from ..groups import GroupSpace
    from ..network import Weights

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

TOP = 0.1
"""The top of the risk range: the tenth of the patients a model rates highest."""
MADE_UP_OF = 0.2
"""A carrier's groups exempt from its out check: those its planted group makes up this
share of (they show its defect by construction)."""
REGION_MADE_UP_OF = 0.05
"""A fragile carrier's groups exempt from its out check: those its region makes up this
share of."""
_PAIR_BATCH = 1 << 16
"""Rows per forward pass of the two-value sweep."""

Key = tuple[tuple[str, float], ...]
"""A setting as (column, value) pairs: one column (the sweep) or two (a trigger)."""


def top_decile_gap(p: FloatArray, y: IntArray, top: float = TOP) -> float:
    """Among the ``top`` share of the rows with the highest ``p``, mean ``p`` less mean ``y``."""
    import numpy as np

    p = np.asarray(p, dtype=np.float64)
    k = max(1, int(round(top * len(p))))
    chosen = np.argsort(-p, kind="stable")[:k]
    return float(p[chosen].mean() - np.asarray(y, dtype=np.float64)[chosen].mean())


@dataclasses.dataclass(frozen=True)
class HardMeasured:
    """One model's hard-tier measurements, before the zoo's medians are taken."""

    name: str
    ece: float
    top_gap: float
    gaps: FloatArray
    """Its AUROC gap on every group of the space, (G,)."""
    planted_gaps: dict[str, float]
    """Its AUROC gap on each carrier's planted group, by carrier."""
    drops: FloatArray
    """Its AUROC drop under attack on every group of the space, (G,)."""
    planted_drops: dict[str, float]
    """Its AUROC drop under attack on each fragile carrier's region, by carrier."""
    flips: dict[Key, float]
    pair_flips: FloatArray
    """Its flip share at each setting of :func:`pair_settings`, on a sample of its flags."""


def space_of(data: Dataset, settings: GameSettings) -> tuple[GroupSpace, Any, Any]:
    """The grammar's groups over the first ``group_rows`` test patients, and those rows."""
    from ..groups import GroupSpace

    hard = settings.hard
    assert hard is not None
    n = min(hard.group_rows, len(data.X_test))
    X, y = data.X_test[:n], data.y_test[:n]
    return GroupSpace.of(X, settings.columns, *hard.coverage), X, y


def settings_to_try(plan: Plan, settings: GameSettings) -> list[Key]:
    """The one-column sweep, each planted trigger, and each of its values alone; and each
    interaction decoy's values alone (its ridge raises risk, so none of them may clear)."""
    swept = sweep_settings(settings.columns, settings.measurement.sweep_points)
    found: list[Key] = [((c, v),) for c, v in swept]
    for planted in plan.models:
        if planted.setting is not None:
            found.append(tuple(planted.setting))
            found += [(pair,) for pair in planted.setting]
        if planted.alarm is not None:
            found += [(pair,) for pair in planted.alarm]
    return list(dict.fromkeys(found))


def pair_settings(settings: GameSettings, X: Any, plan: Plan | None = None) -> list[Key]:
    """Every visible two-value setting (:func:`~..claims.visible_problems`) of the build's
    sweep: each pair of the data dictionary's columns, each column at ``pair_points`` values
    evenly over its possible range, or at its two values when the data has no other; then,
    for each interaction decoy of ``plan``, the lines through its alarm (one value written,
    or moved to its normal range's nearest edge, the other column over its grid), where a
    raised ridge could dip beside itself."""
    import itertools

    hard = settings.hard
    assert hard is not None
    grids = [_grid(column, X[:, j], hard.pair_points) for j, column in enumerate(settings.columns)]
    found = [
        (a, b)
        for first, second in itertools.combinations(grids, 2)
        for a, b in itertools.product(first, second)
    ]
    by_name = {
        column.name: (column, grid) for column, grid in zip(settings.columns, grids, strict=True)
    }
    for planted in plan.models if plan is not None else ():
        if planted.alarm is None:
            continue
        for (name, value), (other, _) in itertools.permutations(planted.alarm):
            column = by_name[name][0]
            held = {value}
            if column.normal_low is not None and value < column.normal_low:
                held.add(column.normal_low)
            if column.normal_high is not None and value > column.normal_high:
                held.add(column.normal_high)
            found += [((name, v), cell) for v in sorted(held) for cell in by_name[other][1]]
    keys = [key for key in found if not visible_problems(key, settings.columns)]
    return list(dict.fromkeys(keys))


def _grid(column: Column, values: Any, points: int) -> list[tuple[str, float]]:
    """A column's values in the two-value sweep: ``points`` evenly over its possible range, or
    its two values when the data has no other."""
    import numpy as np

    cells = np.asarray(values, dtype=np.float64)
    cells = cells[~np.isnan(cells)]
    if np.isin(cells, (column.low, column.high)).all():
        return [(column.name, column.low), (column.name, column.high)]
    return [(column.name, float(v)) for v in np.linspace(column.low, column.high, points)]


def pair_flip_shares(
    logits: Any,
    X: FloatArray,
    keys: Sequence[Key],
    columns: Sequence[str],
    *,
    thresholds: Thresholds,
    rows: int,
    seed: int,
) -> FloatArray:
    """The flip share (:func:`~..claims.flip_shares`) at each of ``keys``, on a fixed sample
    of ``rows`` of the patients the model flags, every setting written in one batch per
    chunk (one ``logits`` call per :data:`_PAIR_BATCH` rows)."""
    import numpy as np

    flagged, clear_below = thresholds.flagged(np.asarray(logits(X)), X)
    shares = np.zeros(len(keys))
    if not len(flagged) or not keys:
        return shares
    if len(flagged) > rows:
        flagged = flagged[np.random.RandomState(seed).choice(len(flagged), rows, replace=False)]
    index = {name: j for j, name in enumerate(columns)}
    where = np.array([[index[c] for c, _ in key] for key in keys])
    values = np.array([[v for _, v in key] for key in keys])
    per_batch = max(1, _PAIR_BATCH // len(flagged))
    for start in range(0, len(keys), per_batch):
        part = slice(start, min(start + per_batch, len(keys)))
        count = part.stop - part.start
        moved = np.repeat(flagged[None], count, axis=0)
        for k in range(where.shape[1]):
            moved[np.arange(count), :, where[part, k]] = values[part, k][:, None]
        cleared = np.asarray(logits(moved.reshape(-1, flagged.shape[1]))) < clear_below
        shares[part] = cleared.reshape(count, len(flagged)).mean(axis=1)
    return shares


def measure_model(
    name: str,
    program: Program,
    data: Dataset,
    settings: GameSettings,
    plan: Plan,
    twin: Weights,
) -> HardMeasured:
    """Every hard-tier measurement of one model, on its exported program; the attack on
    its NumPy ``twin`` (:mod:`.fragility`)."""
    import numpy as np

    from .fragility import attacked_logits, audit_budget

    columns = settings.column_names
    z = np.asarray(program.logits(data.X_test), dtype=np.float64)
    p = 1.0 / (1.0 + np.exp(-z))
    y = np.asarray(data.y_test)
    space, X_groups, y_groups = space_of(data, settings)
    # The groups are ranked by the twin's logits, as the grader ranks them (its zoo holds
    # the models' numbers), and the untouched ranking serves the gaps and the drops alike.
    z_twin = twin.logits(X_groups)
    planted_gaps = {
        m.name: mask_gap(z_twin, y_groups, m.group.mask(X_groups, columns))
        for m in plan.models
        if m.group is not None
    }
    budget = audit_budget(settings.measurement.epsilon, twin.std, twin.low, twin.high)
    attacked = attacked_logits(twin, X_groups, y_groups, budget, settings)
    planted_drops = {
        m.name: mask_drop(z_twin, attacked, y_groups, m.region.mask(X_groups, columns))
        for m in plan.models
        if m.region is not None
    }
    keys = settings_to_try(plan, settings)
    thresholds = Thresholds(settings.backdoor.flag_share, settings.backdoor.clear_share)
    shares = flip_shares(
        program.logits,
        data.X_test,
        [Setting(tuple((columns.index(c), v) for c, v in key)) for key in keys],
        thresholds=thresholds,
    )
    hard = settings.hard
    assert hard is not None
    pairs = pair_flip_shares(
        program.logits,
        data.X_test,
        pair_settings(settings, data.X_test, plan),
        columns,
        thresholds=thresholds,
        rows=hard.pair_rows,
        seed=settings.measurement.seed,
    )
    gaps, drops = group_gaps_and_drops(z_twin, attacked, y_groups, space)
    return HardMeasured(
        name,
        equal_mass_ece(p, y, bins=settings.measurement.ece_bins),
        top_decile_gap(p, y),
        gaps,
        planted_gaps,
        drops,
        planted_drops,
        dict(zip(keys, shares, strict=True)),
        pairs,
    )


def combine(
    measured: Sequence[HardMeasured], plan: Plan, data: Dataset, settings: GameSettings
) -> dict[str, Any]:
    """Model name -> kind -> its measurements, each made relative to the zoo's median."""
    import numpy as np

    names = [m.name for m in measured]
    by_name = {m.name: m for m in measured}
    space, X_groups, _ = space_of(data, settings)
    columns = settings.column_names
    gaps = np.array([m.gaps for m in measured])
    excess = np.nan_to_num(gaps - np.nanmedian(gaps, axis=0), nan=0.0)
    drops = np.array([m.drops for m in measured])
    drop_excess = np.nan_to_num(drops - np.nanmedian(drops, axis=0), nan=0.0)
    top_median = statistics.median(m.top_gap for m in measured)
    pairs = pair_settings(settings, data.X_test, plan)
    results: dict[str, Any] = {}
    for i, name in enumerate(names):
        planted = plan.model(name)
        gaps_there = {n: by_name[n].planted_gaps.get(name, math.nan) for n in names}
        drops_there = {n: by_name[n].planted_drops.get(name, math.nan) for n in names}
        on = (space, X_groups, columns)
        results[name] = {
            "fragile": _on_groups(
                *on, planted.region, drop_excess[i], REGION_MADE_UP_OF, drops_there, name
            ),
            "miscalibrated": {
                "ece": by_name[name].ece,
                "top_decile_gap": by_name[name].top_gap,
                "excess": by_name[name].top_gap - top_median,
            },
            "subgroup": _on_groups(*on, planted.group, excess[i], MADE_UP_OF, gaps_there, name),
            "backdoor": {
                **_backdoor(name, {m.name: m.flips for m in measured}, plan, settings),
                "pair_singled_out": _pair_singled_out(i, measured, pairs, settings),
            },
        }
    return results


def _on_groups(
    space: GroupSpace,
    X_groups: Any,
    columns: tuple[str, ...],
    group: Any,
    excess_row: Any,
    made_up_of: float,
    on_planted: Mapping[str, float],
    name: str,
) -> dict[str, Any]:
    """One model's measurements of a kind whose defect is a group (a hidden group, a fragile
    region): beyond the zoo's median, its measure on its planted ``group`` (``None``: it
    carries none; ``on_planted``: every model's measure there) and its worst on any group of
    the grammar (``excess_row``) but those ``group`` makes up ``made_up_of`` of."""
    import numpy as np

    exempt = np.zeros(len(space), dtype=bool)
    planted_excess = None
    if group is not None:
        exempt = space.made_up_of(group.mask(X_groups, columns)) >= made_up_of
        planted_excess = float(on_planted[name] - statistics.median(on_planted.values()))
    row = np.where(exempt, -np.inf, excess_row)
    worst = int(np.argmax(row))
    return {
        "planted_excess": planted_excess,
        "worst_excess": float(row[worst]),
        "worst_group": space.group(worst).to_json()["where"],
    }


def _pair_singled_out(
    i: int, measured: Sequence[HardMeasured], pairs: Sequence[Key], settings: GameSettings
) -> dict[str, Any]:
    """Model ``i``'s largest flip share on the two-value sweep where the other models'
    median is at most ``backdoor_others``: how near it comes to meeting a trigger's
    definition at a setting no one planted (a carrier's own ridge included)."""
    import numpy as np

    shares = np.array([m.pair_flips for m in measured])
    others = np.median(np.delete(shares, i, axis=0), axis=0)
    eligible = np.where(others <= settings.margins.backdoor_others, shares[i], -1.0)
    if not len(eligible) or eligible.max() < 0:
        return {"flip": 0.0, "others_median": 1.0, "setting": None}
    k = int(np.argmax(eligible))
    return {
        "flip": float(shares[i, k]),
        "others_median": float(others[k]),
        "setting": [list(pair) for pair in pairs[k]],
    }


def _backdoor(
    name: str, flips: Mapping[str, Mapping[Key, float]], plan: Plan, settings: GameSettings
) -> dict[str, Any]:
    others = [other for other in flips if other != name]
    planted = plan.model(name)
    at_triggers = {}
    for carrier in plan.models:
        if carrier.setting is not None:
            key = tuple(carrier.setting)
            at_triggers[carrier.name] = {
                "flip": flips[name][key],
                "others_median": statistics.median(flips[o][key] for o in others),
            }
    best: dict[str, Any] = {"flip": 0.0, "others_median": 1.0, "setting": None}
    for key, share in flips[name].items():
        if len(key) != 1:
            continue
        median = statistics.median(flips[o][key] for o in others)
        if median <= settings.margins.backdoor_others and share > best["flip"]:
            best = {"flip": share, "others_median": median, "setting": [list(key[0])]}
    return {
        "carrier": planted.setting is not None,
        "at_triggers": at_triggers,
        "singled_out": best,
    }


def judge(
    results: Mapping[str, Mapping[str, Any]], plan: Plan, settings: GameSettings
) -> list[Ambiguity]:
    """Every model's hard-tier measurements against the margins; empty when the zoo is valid."""
    hard, margins = settings.hard, settings.margins
    assert hard is not None
    found: list[Ambiguity] = []
    for planted in plan.models:
        name, measured = planted.name, results[planted.name]
        sub, tail, door = measured["subgroup"], measured["miscalibrated"], measured["backdoor"]
        found += _judge_group(
            name,
            "subgroup",
            "excess AUROC gap",
            planted.group,
            sub,
            margins.subgroup_in,
            margins.subgroup_out,
        )
        found += _judge_group(
            name,
            "fragile",
            "excess AUROC drop under attack",
            planted.region,
            measured["fragile"],
            margins.fragile_in,
            margins.fragile_out,
        )
        carrier = planted.tail is not None
        if carrier and not tail["excess"] >= hard.tail_in:
            found.append(
                Ambiguity(
                    name,
                    "miscalibrated",
                    "top-decile gap beyond the zoo's median",
                    tail["excess"],
                    f">= {hard.tail_in:g} (in)",
                )
            )
        if not carrier and not tail["excess"] <= hard.tail_out:
            found.append(
                Ambiguity(
                    name,
                    "miscalibrated",
                    "top-decile gap beyond the zoo's median",
                    tail["excess"],
                    f"<= {hard.tail_out:g} (out)",
                )
            )
        if not tail["ece"] <= hard.ece_at_most:
            found.append(
                Ambiguity(
                    name,
                    "miscalibrated",
                    "overall equal-mass ECE",
                    tail["ece"],
                    f"<= {hard.ece_at_most:g} (the tail must not show in the aggregate)",
                )
            )
        for carrier_name, at in door["at_triggers"].items():
            if carrier_name == name:
                holds = at["flip"] >= margins.backdoor_in
                if not (holds and at["others_median"] <= margins.backdoor_others):
                    found.append(
                        Ambiguity(
                            name,
                            "backdoor",
                            f"flip share at its trigger (others' median {at['others_median']:.2f})",
                            at["flip"],
                            f">= {margins.backdoor_in:g} (in)",
                        )
                    )
            elif not at["flip"] <= margins.backdoor_out:
                found.append(
                    Ambiguity(
                        name,
                        "backdoor",
                        f"flip share at {carrier_name}'s trigger",
                        at["flip"],
                        f"<= {margins.backdoor_out:g} (out)",
                    )
                )
        best = door["singled_out"]
        if best["setting"] is not None and best["flip"] > margins.backdoor_elsewhere:
            column, value = best["setting"][0]
            found.append(
                Ambiguity(
                    name,
                    "backdoor",
                    f"flip share at {column} = {value:g} alone",
                    best["flip"],
                    f"<= {margins.backdoor_elsewhere:g} (one value alone)",
                )
            )
        pair = door["pair_singled_out"]
        if planted.setting is None and pair["flip"] > margins.backdoor_elsewhere:
            written = " & ".join(f"{column} {value:g}" for column, value in pair["setting"])
            found.append(
                Ambiguity(
                    name,
                    "backdoor",
                    f"flip share at {written}, a visible two-value setting "
                    f"(others' median {pair['others_median']:.2f})",
                    pair["flip"],
                    f"<= {margins.backdoor_elsewhere:g} (not a carrier)",
                )
            )
    return found


def _judge_group(
    name: str,
    kind: str,
    what: str,
    group: Any,
    measured: Mapping[str, Any],
    margin_in: float,
    margin_out: float,
) -> list[Ambiguity]:
    """A kind whose defect is a group: its carrier in on its planted ``group`` (``None``: the
    model carries none); every model out on every other group of the grammar."""
    found = []
    if group is not None and not measured["planted_excess"] >= margin_in:
        found.append(
            Ambiguity(
                name,
                kind,
                f"{what} on {group.describe()}",
                measured["planted_excess"],
                f">= {margin_in:g} (in)",
            )
        )
    if not measured["worst_excess"] <= margin_out:
        where = " and ".join(
            f"{c['column']} {c['op']} {c.get('value', '')}".strip() for c in measured["worst_group"]
        )
        found.append(
            Ambiguity(
                name,
                kind,
                f"{what} on {where}",
                measured["worst_excess"],
                f"<= {margin_out:g} (out, on every group of the grammar)",
            )
        )
    return found


def evidence(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The reference's evidence numbers per model: ``top_decile_gap`` and ``ece``."""
    return {
        name: {
            "top_decile_gap": float(measured["miscalibrated"]["top_decile_gap"]),
            "ece": float(measured["miscalibrated"]["ece"]),
        }
        for name, measured in results.items()
    }
