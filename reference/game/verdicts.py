"""Every model on every kind: the defining measurements and whether they are unambiguous.

:func:`measure_zoo` makes the measurements of SPEC §8.2 on the exported
programs (what an agent receives), and :func:`judge` holds each against the
variant's margins: the build is valid only if every model is clearly in the
kinds it carries and clearly out of every other. Anything between the margins
is an :class:`Ambiguity` that names the model, the kind and the number.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..attacks.budget import Budget, training_scale
from .claims import Thresholds, flip_shares
from .draw import Plan
from .measure import (
    Program,
    equal_mass_ece,
    loss_attack_auc,
    mean_confidence_slope,
    permutation_importance,
    probabilities,
    robustness,
    subgroup_auroc,
)
from .settings import Column, GameSettings, Measurement

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..data import Dataset

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class Ambiguity:
    """A model whose measurement sits between the margins of a kind (or on the wrong side)."""

    model: str
    kind: str
    measurement: str
    value: float
    expected: str

    def describe(self) -> str:
        return (
            f"{self.model} {self.kind}: {self.measurement} = {self.value:.4f}, "
            f"expected {self.expected}"
        )


def sweep_settings(columns: Sequence[Column], points: int) -> list[tuple[str, float]]:
    """The (column, value) settings a trigger search tries: ``points`` values on each side
    of every column's normal range, out to its possible range."""
    import numpy as np

    found: list[tuple[str, float]] = []
    for column in columns:
        if column.normal_low is not None:
            for value in np.linspace(column.low, column.normal_low, points):
                found.append((column.name, float(value)))
        if column.normal_high is not None:
            for value in np.linspace(column.normal_high, column.high, points):
                found.append((column.name, float(value)))
    return found


@dataclasses.dataclass(frozen=True)
class Measured:
    """One model's measurements on every kind but backdoor, and its flip shares at every
    setting of the trigger sweep (the backdoor's verdict needs the whole zoo's)."""

    name: str
    results: dict[str, Any]
    flips: dict[tuple[str, float], float]


def attack_rows(m: Measurement, n_test: int) -> int:
    """How many of the test split's first rows the strong attack runs on
    (:func:`pgd_rows`): the number the brief names."""
    return min(m.pgd_rows, n_test)


def pgd_rows(m: Measurement, n_test: int) -> IntArray:
    """The test rows the strong attack runs on: the first :func:`attack_rows` of the test
    split (in a random order already), as the brief names them.

    A PGD AUROC moves with the rows it is measured on by about its tolerance (FLCHAIN:
    1,000 other rows read 0.03-0.06 higher on every fragile model of ten instances), so an
    auditor can meet the reference only on the same rows; a draw the brief did not name
    made an exact attack miss it."""
    import numpy as np

    return np.arange(attack_rows(m, n_test))


def measure_model(
    name: str, program: Program, rows: IntArray, data: Dataset, settings: GameSettings
) -> Measured:
    """The defining measurements of one model (SPEC §8.2), on its exported program."""
    import numpy as np

    m = settings.measurement
    columns = settings.column_names
    X_test, y_test = data.X_test, data.y_test
    attacked = pgd_rows(m, len(X_test))
    budget = Budget.of(m.epsilon, training_scale(data.X_train), std_units=True, clip=True)
    attack = robustness(
        program,
        X_test[attacked],
        y_test[attacked],
        budget=budget,
        steps=m.pgd_steps,
        restarts=m.pgd_restarts,
        seed=m.seed,
    )
    p = probabilities(program, X_test)
    shortcut = columns.index(settings.shortcut.column)
    X_bedside = X_test
    if m.subgroups_at_prediction:
        X_bedside = np.array(X_test, dtype=np.float64)
        for later in (j for j, c in enumerate(settings.columns) if not c.at_prediction):
            X_bedside[:, later] = np.nanmean(data.X_train[:, later])
    results = {
        "fragile": {
            "drop": attack.drop,
            "clean_auroc": attack.clean_auroc,
            "pgd_auroc": attack.adversarial_auroc,
        },
        "leaky": {
            "loss_attack_auc": loss_attack_auc(
                program,
                data.X_train[rows],
                data.y_train[rows],
                # every test row, so that the reference depends on no draw (SPEC §8.7):
                # an agent who follows the brief computes the same number
                X_test,
                y_test,
            )
        },
        "miscalibrated": {
            "ece": equal_mass_ece(p, y_test, bins=m.ece_bins),
            "slope": mean_confidence_slope(p, y_test),
        },
        "shortcut": {
            "importance": permutation_importance(
                program, X_test, y_test, shortcut, repeats=m.importance_repeats, seed=m.seed
            )
        },
        "subgroup": {
            group.name: dataclasses.asdict(
                subgroup_auroc(program, X_bedside, y_test, group.mask(X_test, columns))
            )
            for group in settings.subgroups
        },
    }
    thresholds = Thresholds(settings.backdoor.flag_share, settings.backdoor.clear_share)
    triggers = [(t.feature, t.value) for t in settings.backdoor.triggers]
    swept = sweep_settings(settings.columns, m.sweep_points)
    every = list(dict.fromkeys([*triggers, *swept]))
    shares = flip_shares(
        program.logits,
        X_test,
        [(columns.index(feature), value) for feature, value in every],
        thresholds=thresholds,
    )
    flips = dict(zip(every, shares, strict=True))
    return Measured(name, results, flips)


def combine(measured: Sequence[Measured], plan: Plan, settings: GameSettings) -> dict[str, Any]:
    """Model name -> kind -> measurements, the backdoor's made relative to the zoo."""
    flips = {m.name: m.flips for m in measured}
    results = {m.name: dict(m.results) for m in measured}
    for name in results:
        results[name]["backdoor"] = _backdoor(name, flips, plan, settings)
    return results


def measure_zoo(
    programs: Mapping[str, Program],
    members: Mapping[str, IntArray],
    data: Dataset,
    settings: GameSettings,
    plan: Plan,
    *,
    progress: Progress = _quiet,
) -> dict[str, dict[str, Any]]:
    """Model name -> kind -> its defining measurement(s), on every model for every kind."""
    measured = []
    for name, program in programs.items():
        progress(f"measuring {name}")
        measured.append(measure_model(name, program, members[name], data, settings))
    return combine(measured, plan, settings)


def _backdoor(
    name: str,
    flips: Mapping[str, Mapping[tuple[str, float], float]],
    plan: Plan,
    settings: GameSettings,
) -> dict[str, Any]:
    """A model's backdoor measurements: its flip share at the planted trigger (if any), and
    the setting of the sweep where it is singled out most (flip share, the others' median)."""
    others = [other for other in flips if other != name]
    carrier = plan.carrier("backdoor")
    planted = None
    if carrier is not None and carrier.trigger is not None:
        setting = (carrier.trigger.feature, carrier.trigger.value)
        planted = {
            "feature": setting[0],
            "value": setting[1],
            "flip": flips[name][setting],
        }
    best: dict[str, Any] = {"flip": 0.0, "others_median": 1.0, "feature": None, "value": None}
    limit = settings.margins.backdoor_others
    for setting, share in flips[name].items():
        median = statistics.median(flips[other][setting] for other in others)
        if median <= limit and share > best["flip"]:
            best = {
                "flip": share,
                "others_median": median,
                "feature": setting[0],
                "value": setting[1],
            }
    return {"planted": planted, "singled_out": best}


def _check(
    found: list[Ambiguity],
    model: str,
    kind: str,
    what: str,
    value: float,
    *,
    inside: bool,
    out: float,
    threshold_in: float,
) -> None:
    if inside and not value >= threshold_in:
        found.append(Ambiguity(model, kind, what, value, f">= {threshold_in:g} (in)"))
    if not inside and not value <= out:
        found.append(Ambiguity(model, kind, what, value, f"<= {out:g} (out)"))


def excess_gaps(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Model -> subgroup -> how much wider its AUROC gap (complement minus subgroup) is than
    the zoo's median gap for that subgroup.

    Some subgroups are naturally harder to rank: within the oldest patients age
    no longer separates them, and on the synthetic cohort even the generator's
    true risk has a gap of about 0.05 for age >= 75. A model fails a subgroup
    when it serves it worse than the zoo does, and at most one model of a zoo
    is planted, so the median is a clean model's gap.
    """
    gaps = {
        name: {
            g: entry["complement"] - entry["within"] for g, entry in measured["subgroup"].items()
        }
        for name, measured in results.items()
    }
    groups = next(iter(gaps.values())).keys() if gaps else ()
    medians = {g: statistics.median(gap[g] for gap in gaps.values()) for g in groups}
    return {name: {g: gap[g] - medians[g] for g in groups} for name, gap in gaps.items()}


def judge(
    results: Mapping[str, Mapping[str, Any]], plan: Plan, settings: GameSettings
) -> list[Ambiguity]:
    """Every model's measurements against the margins; empty when the instance is valid."""
    margins = settings.margins
    excess = excess_gaps(results)
    found: list[Ambiguity] = []
    for planted in plan.models:
        name, measured = planted.name, results[planted.name]

        def check(kind: str, what: str, value: float, inside: bool, model: str = name) -> None:
            out, threshold_in = margins.band(kind)
            _check(
                found, model, kind, what, value, inside=inside, out=out, threshold_in=threshold_in
            )

        check("fragile", "PGD AUROC drop", measured["fragile"]["drop"], planted.kind == "fragile")
        check(
            "leaky",
            "loss-attack AUC",
            measured["leaky"]["loss_attack_auc"],
            planted.kind == "leaky",
        )
        check(
            "miscalibrated",
            "equal-mass ECE",
            measured["miscalibrated"]["ece"],
            planted.kind == "miscalibrated",
        )
        check(
            "shortcut",
            "permutation importance",
            measured["shortcut"]["importance"],
            planted.kind == "shortcut",
        )
        if planted.kind == "miscalibrated":
            slope = measured["miscalibrated"]["slope"]
            if (slope < 1) != (planted.direction == "overconfident"):
                found.append(
                    Ambiguity(
                        name,
                        "miscalibrated",
                        "recalibration slope",
                        slope,
                        f"a slope that says {planted.direction}",
                    )
                )
        target = planted.subgroup.name if planted.subgroup is not None else None
        for group, value in excess[name].items():
            check("subgroup", f"excess AUROC gap of {group!r}", value, group == target)
        backdoor = measured["backdoor"]
        if backdoor["planted"] is not None:
            check(
                "backdoor",
                "flip share at the trigger",
                backdoor["planted"]["flip"],
                planted.kind == "backdoor",
            )
        best = backdoor["singled_out"]
        stray = best["feature"] is not None and not (
            planted.kind == "backdoor" and backdoor["planted"]["feature"] == best["feature"]
        )
        if stray and best["flip"] > margins.backdoor_elsewhere:
            found.append(
                Ambiguity(
                    name,
                    "backdoor",
                    f"flip share at {best['feature']} = {best['value']:g}, where the others' "
                    f"median is {best['others_median']:.2f}",
                    best["flip"],
                    f"<= {margins.backdoor_elsewhere:g} away from a planted trigger",
                )
            )
    return found


def evidence(results: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """The reference's evidence numbers per model: ``pgd_auroc``, ``loss_attack_auc``, ``ece``."""
    return {
        name: {
            "pgd_auroc": float(measured["fragile"]["pgd_auroc"]),
            "loss_attack_auc": float(measured["leaky"]["loss_attack_auc"]),
            "ece": float(measured["miscalibrated"]["ece"]),
        }
        for name, measured in results.items()
    }
