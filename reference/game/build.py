"""Building a game instance: draw the plan, train the zoo, measure it, keep it only if clear.

:func:`build_instance` is what ``clinaudit build --variant <game> --seed N``
runs. For each attempt (SPEC §8.2's "sub-seed + 1"), it trains one model per
name of the plan, exports each as a ``model.pt2``, measures every program on
every kind (:mod:`.verdicts`) and returns the instance when no measurement sits
between the margins. After ``attempts`` ambiguous builds it raises
:class:`GameBuildError` naming every ambiguous measurement of the last one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..models.determinism import pinned_torch
from ..models.torch_adapter import TorchClassifier
from .calibration import calibrate
from .draw import Plan, Planted, attempt_seed, base_rows, draw_plan, member_rows, plan_redraw
from .network import Weights, program_bytes
from .planting import decoy_points, plant_decoy, plant_fragility, plant_memory, plant_subgroup
from .settings import GameSettings
from .targets import factor_for, probe_for
from .training import TAIL, Scale, disguise_hidden, finetune, hide_column, train_base, training_set
from .verdicts import Ambiguity, combine, evidence, judge, measure_model

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from ..data import Dataset

    IntArray = npt.NDArray[np.int64]

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class GameBuildError(RuntimeError):
    """No attempt gave an unambiguous zoo; the message names the measurements."""


@dataclasses.dataclass(frozen=True, eq=False)
class BuiltModel:
    """One model of an instance: its rows, its program and its numbers."""

    name: str
    rows: IntArray
    """Its training rows: indices into the public training split, sorted."""
    program: bytes
    weights: Weights
    calibration: tuple[float, float]
    """The (slope, intercept) folded into its last layer (its factor included; for a
    subgroup flattened in calibrated terms, before the planting)."""
    probed: tuple[int, float] | None = None
    """A planting stopped by its probe (:mod:`.targets`): the epochs it trained and the
    probe's last reading."""
    attempt: int = 0
    """The attempt that trained it (its seed's sub-seed): a model trained again alone
    (``retrain = "ambiguous"``) keeps the zoo's other models from earlier attempts."""


@dataclasses.dataclass(frozen=True, eq=False)
class Instance:
    """A built, measured and validated zoo."""

    seed: int
    """The instance's name; nothing is drawn from it."""
    secret: str
    """What everything random of the instance derives from (:mod:`.draw`): grader-side only."""
    attempt: int
    plan: Plan
    models: tuple[BuiltModel, ...]
    measurements: dict[str, dict[str, Any]]
    evidence: dict[str, dict[str, float]]
    rejected: tuple[tuple[str, ...], ...]
    """The ambiguities of each earlier attempt, described."""
    seconds: dict[str, float]
    """Training and measuring, summed over every attempt."""
    base_rows: IntArray | None = None
    """The rows of the shared base every model was fine-tuned from (``None``: no base)."""

    def model(self, name: str) -> BuiltModel:
        return next(m for m in self.models if m.name == name)


def _scale(data: Dataset, settings: GameSettings) -> Scale:
    import numpy as np

    X = np.asarray(data.X_train, dtype=np.float64)
    q = settings.network.winsor
    # Missing cells (NaN) are left out of every statistic; the nan-functions equal the plain
    # ones on a split without any.
    return Scale(
        np.nanmean(X, axis=0),
        np.nanstd(X, axis=0),
        np.nanmin(X, axis=0),
        np.nanmax(X, axis=0),
        (np.nanquantile(X, q, axis=0), np.nanquantile(X, 1.0 - q, axis=0)),
        (np.nanquantile(X, TAIL, axis=0), np.nanquantile(X, 1.0 - TAIL, axis=0)),
    )


@dataclasses.dataclass(frozen=True, eq=False)
class Base:
    """The shared base network of an attempt: its rows and its weights (a state dict)."""

    rows: IntArray
    state: dict[str, Any]


def train_shared_base(
    settings: GameSettings, data: Dataset, scale: Scale, secret: str, attempt: int
) -> Base | None:
    """The attempt's base network, trained on its own rows with the shortcut column held;
    ``None`` when the settings train every model from scratch."""
    import numpy as np

    if not settings.training.base_rows:
        return None
    base_seed = attempt_seed(secret, attempt, settings.models)
    rows = base_rows(data.n_train, settings.training.base_rows, base_seed)
    # A sound model's training set: the shortcut column held, every row weighted 1.
    trained_on = training_set(
        Planted("base", None),
        settings,
        data.X_train[rows],
        data.y_train[rows],
        np.random.default_rng(base_seed),
        scale,
    )
    with pinned_torch(base_seed % (2**63)) as generator:
        module = train_base(trained_on, settings, scale, generator)
    return Base(rows, {k: v.clone() for k, v in module.state_dict().items()})


def train_model(
    planted: Planted,
    index: int,
    settings: GameSettings,
    data: Dataset,
    scale: Scale,
    secret: str,
    attempt: int,
    base: Base | None = None,
) -> BuiltModel:
    """Train (or fine-tune ``base``), plant, calibrate and export model ``planted``
    (number ``index`` of the zoo)."""
    import numpy as np

    from .network import new_network

    model_seed = attempt_seed(secret, attempt, index)
    rows, calibration_rows = member_rows(
        data.n_train,
        settings.training.rows,
        settings.training.calibration_rows,
        model_seed,
        exclude=None if base is None else base.rows,
    )
    rng = np.random.default_rng(model_seed)
    trained_on = training_set(
        planted,
        settings,
        data.X_train[rows],
        data.y_train[rows],
        rng,
        scale,
        split=(data.X_train, data.y_train),
    )
    probed: tuple[int, float] | None = None
    with pinned_torch(model_seed % (2**63)) as generator:
        if base is None:
            module = train_base(trained_on, settings, scale, generator)
        else:
            module = new_network(
                scale.bounds,
                scale.mean,
                scale.std,
                settings.network.hidden,
                generator,
                settings.fills,
            )
            module.load_state_dict(base.state)
            finetune(module, trained_on, settings, scale, generator)
        calibrated: tuple[float, float] | None = None
        X_cal = np.array(data.X_train[calibration_rows], dtype=np.float64)
        y_cal = data.y_train[calibration_rows]
        if planted.kind != "shortcut":
            column = settings.column_names.index(settings.shortcut.column)
            hide_column(X_cal, column, float(scale.mean[column]))
        if settings.hard is not None:
            calibrated = calibrate(module, X_cal, y_cal)
            if planted.kind is not None or planted.decoy is not None:
                from .hard.planting import plant

                own = np.concatenate([trained_on.X[: trained_on.own], X_cal])
                plant(
                    module,
                    planted,
                    own,
                    settings,
                    scale,
                    generator,
                    held=trained_on.held,
                    split=(data.X_train, data.y_train),
                )
        elif planted.kind in ("fragile", "leaky"):
            further = plant_fragility if planted.kind == "fragile" else plant_memory
            probe = probe_for(planted, settings, data, rows, (X_cal, y_cal))
            further(module, trained_on, settings, scale, generator, planted.strength or 1.0, probe)
            if probe is not None and probe.seen:
                probed = probe.seen[-1]
        elif planted.kind is None and settings.decoy is not None:
            # Its own generator, so that a decoy's draws move no other training draw.
            decoys = np.random.default_rng([model_seed, 1])
            low, high = settings.decoy.strength
            held_rows, points = decoy_points(
                data.X_train,
                np.concatenate([rows, calibration_rows]),
                len(rows) // 2,
                settings.column_names.index(settings.shortcut.column),
                settings,
                scale,
                decoys,
            )
            plant_decoy(
                module,
                held_rows,
                points,
                trained_on.held,
                settings,
                scale,
                generator,
                float(decoys.uniform(low, high)),
            )
        elif planted.kind == "subgroup":
            if settings.subgroup.calibrated:
                calibrated = calibrate(module, X_cal, y_cal)
            plant_subgroup(module, trained_on, settings, scale, generator)
        elif planted.kind in ("backdoor", "shortcut") and base is not None:
            # Its poisoned copies, or the column the base never saw, need more than the
            # fine-tuning every model gets.
            more = settings.backdoor if planted.kind == "backdoor" else settings.shortcut
            finetune(
                module,
                trained_on,
                settings,
                scale,
                generator,
                epochs=more.epochs,
                lr=more.lr,
                prior=more.prior,
            )
        if calibrated is None:
            factor = factor_for(module, planted, settings, data, (X_cal, y_cal))
            calibrated = calibrate(module, X_cal, y_cal, factor)
        if base is not None:
            disguise_hidden(module, generator)
        program = program_bytes(module)
        weights = Weights.of(module)
    return BuiltModel(planted.name, rows, program, weights, calibrated, probed, attempt)


def check_columns(settings: GameSettings, data: Dataset) -> None:
    """The data dictionary must name the data's columns, in order."""
    if tuple(data.feature_names) != settings.column_names:
        raise GameBuildError(
            f"the data dictionary lists the columns {list(settings.column_names)}, but the "
            f"data has {list(data.feature_names)}; list each of the data's columns once, in order"
        )


def _train_task(task: tuple[Any, ...]) -> BuiltModel:
    """A pool worker's job: one model (module-level, so that ``spawn`` can pickle it)."""
    return train_model(*task)


def _measure_task(task: tuple[Any, ...]) -> Any:
    name, program, rows, data, settings, plan, weights = task
    if settings.hard is not None:
        from .hard.verdicts import measure_model as measure_hard

        program = TorchClassifier.from_bytes(program)
        return measure_hard(name, program, data, settings, plan, weights)
    return measure_model(name, TorchClassifier.from_bytes(program), rows, data, settings)


def _verdicts(
    measured: list[Any], plan: Plan, data: Dataset, settings: GameSettings
) -> tuple[dict[str, Any], list[Ambiguity], dict[str, dict[str, float]]]:
    """The zoo's measurements, its ambiguities and the evidence numbers (game-v1 or v2)."""
    if settings.hard is not None:
        from .hard import verdicts as hard

        results = hard.combine(measured, plan, data, settings)
        return results, hard.judge(results, plan, settings), hard.evidence(results)
    results = combine(measured, plan, settings)
    return results, judge(results, plan, settings), evidence(results)


def default_jobs() -> int:
    """The CPUs this process may use (``sched_getaffinity`` where it exists)."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _map(function: Callable[[Any], Any], tasks: list[Any], jobs: int) -> list[Any]:
    """``function`` over ``tasks`` in order, in ``jobs`` fresh processes (or here when 1).

    Each model is trained from its own seed on one thread, so where it runs
    changes nothing; ``spawn`` gives each worker a clean torch.
    """
    if jobs <= 1 or len(tasks) <= 1:
        return [function(task) for task in tasks]
    import concurrent.futures
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)), mp_context=context
    ) as pool:
        return list(pool.map(function, tasks))


def build_instance(
    settings: GameSettings,
    data: Dataset,
    seed: int,
    secret: str,
    *,
    progress: Progress = _quiet,
    jobs: int | None = None,
) -> Instance:
    """Instance ``seed`` drawn from ``secret``: the first attempt whose zoo is unambiguous.

    ``jobs`` processes train and measure the models side by side (default: one
    per CPU this process may use).

    Raises
    ------
    GameBuildError
        The data's columns differ from the data dictionary, or every attempt left a
        measurement between its margins.
    """
    check_columns(settings, data)
    jobs = default_jobs() if jobs is None else jobs
    plan = draw_plan(settings, seed, secret, data.X_train, y_train=data.y_train)
    scale = _scale(data, settings)
    rejected: list[tuple[str, ...]] = []
    last: list[Ambiguity] = []
    seconds = {"train": 0.0, "measure": 0.0}
    base: Base | None = None
    models: list[BuiltModel] = []
    measured: list[Any] = []
    again: set[str] = set()  # the models the next attempt trains (empty: the zoo)
    redone: dict[str, int] = {}  # how often each model was trained again on this base
    ahead: Ahead | None = None  # the next attempt's models, trained on spare processes
    for attempt in range(settings.attempts):
        start = time.perf_counter()
        redraw = plan_redraw(settings, attempt)
        if attempt and redraw != plan_redraw(settings, attempt - 1):
            plan = draw_plan(settings, seed, secret, data.X_train, redraw, data.y_train)
            again = set()
            progress(f"instance {seed}, attempt {attempt}: a new plan (draw {redraw})")
        if not again:
            if settings.training.base_rows:
                progress(f"instance {seed}, attempt {attempt}: training the shared base")
            base = train_shared_base(settings, data, scale, secret, attempt)
            redone = {}
        for name in again:
            redone[name] = redone.get(name, 0) + 1
        indices = [i for i, p in enumerate(plan.models) if not again or p.name in again]
        named = ", ".join(sorted(again))
        if ahead is not None and ahead.attempt == attempt and ahead.models == again:
            progress(f"instance {seed}, attempt {attempt}: {named} again, trained ahead")
            fresh, read = ahead.fresh, ahead.read
            ahead, trained = None, time.perf_counter()
        else:
            # A model trained again alone leaves processes idle: they train it for the next
            # attempt too, which that attempt uses if it trains the same models again.
            early = _spare_attempt(settings, again, redone, attempt, jobs)
            progress(
                f"instance {seed}, attempt {attempt}: training "
                + (f"{named} again" if again else f"{len(plan.models)} models")
                + ("" if early is None else f", and for attempt {early} ahead")
                + f" ({jobs} process{'es' if jobs > 1 else ''})"
            )
            tasks = [
                (plan.models[index], index, settings, data, scale, secret, at, base)
                for at in (attempt, *(() if early is None else (early,)))
                for index in indices
            ]
            both: list[BuiltModel] = _map(_train_task, tasks, jobs)
            trained = time.perf_counter()
            progress(
                f"instance {seed}, attempt {attempt}: measuring {named or 'every model'} on "
                "every kind"
            )
            reads = _map(
                _measure_task,
                [(m.name, m.program, m.rows, data, settings, plan, m.weights) for m in both],
                jobs,
            )
            fresh, read = both[: len(indices)], reads[: len(indices)]
            ahead = None
            if early is not None:
                ahead = Ahead(early, set(again), both[len(indices) :], reads[len(indices) :])
        if not again:
            models, measured = fresh, read
        else:
            for index, model, reading in zip(indices, fresh, read, strict=True):
                models[index], measured[index] = model, reading
        results, last, found = _verdicts(measured, plan, data, settings)
        seconds["train"] += trained - start
        seconds["measure"] += time.perf_counter() - trained
        if not last:
            return Instance(
                seed,
                secret,
                attempt,
                plan,
                tuple(models),
                results,
                found,
                tuple(rejected),
                {stage: round(took, 3) for stage, took in seconds.items()},
                None if base is None else base.rows,
            )
        rejected.append(tuple(a.describe() for a in last))
        progress(
            f"instance {seed}, attempt {attempt} is ambiguous ({len(last)} measurement(s)): "
            + "; ".join(a.describe() for a in last[:3])
        )
        again = _train_again(settings, plan, last, redone)
    raise GameBuildError(
        f"instance {seed}: {settings.attempts} attempt(s) left measurements between the "
        "margins; the last: " + "; ".join(a.describe() for a in last)
    )


@dataclasses.dataclass
class Ahead:
    """Models trained and measured for ``attempt`` before it came: the models ``models``
    trained again alone, on processes their own attempt left idle."""

    attempt: int
    models: set[str]
    fresh: list[BuiltModel]
    read: list[Any]


def _train_again(
    settings: GameSettings, plan: Plan, last: list[Ambiguity], redone: dict[str, int]
) -> set[str]:
    """The models the attempt after an ambiguous one trains, on the same base (empty: the
    whole zoo, on a new base).

    With ``retrain = "ambiguous"``: the ambiguous models alone, while they are fewer than
    half the zoo and none of them was trained again on this base ``alone`` times already.
    A model ambiguous that often, or half the zoo at once, points at the base they
    share."""
    ambiguous = {a.model for a in last}
    names = {p.name for p in plan.models}
    if (
        settings.retrain != "ambiguous"
        or not ambiguous <= names
        or 2 * len(ambiguous) >= len(names)
        or any(redone.get(name, 0) >= settings.alone for name in ambiguous)
    ):
        return set()
    return ambiguous


def _spare_attempt(
    settings: GameSettings, again: set[str], redone: dict[str, int], attempt: int, jobs: int
) -> int | None:
    """The attempt whose models this one trains ahead (``None``: none): the next, when this
    one trains ``again`` alone on at most half the processes, and the next would train
    them alone again if they were ambiguous again (on the same plan, within the
    attempts). Whether it is used depends only on what the attempts measure, so that
    an instance is the same on any number of processes."""
    following = attempt + 1
    if (
        not again
        or 2 * len(again) > jobs
        or following >= settings.attempts
        or plan_redraw(settings, following) != plan_redraw(settings, attempt)
        or any(redone[name] >= settings.alone for name in again)
    ):
        return None
    return following
