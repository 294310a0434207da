"""What an attempt after an ambiguous one trains (``[game] retrain``), with the training,
the measuring and the verdicts replaced by scripts: which models are trained again, on
which base, and what the instance records of it."""

from __future__ import annotations

import copy
import dataclasses
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from game_helpers import game_variant

from pytest_clinaudit.catalog.instances import recipe
from pytest_clinaudit.reference.game import build
from pytest_clinaudit.reference.game.build import Base, BuiltModel, GameBuildError, build_instance
from pytest_clinaudit.reference.game.draw import draw_plan, new_secret
from pytest_clinaudit.reference.game.verdicts import Ambiguity

Script = Callable[[int, dict[str, int]], set[str]]
"""(attempt, the attempt each model was trained by) -> the models left ambiguous."""


@dataclasses.dataclass
class Recorded:
    bases: list[int] = dataclasses.field(default_factory=list)
    """The attempts that trained a base."""
    trained: list[tuple[int, str, int]] = dataclasses.field(default_factory=list)
    """(attempt, model, the attempt of the base it was fine-tuned from)."""
    measured: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    batches: list[list[tuple[int, str]]] = dataclasses.field(default_factory=list)
    """(attempt, model) of the models each call trained side by side."""


@pytest.fixture
def scripted(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """``run(script, retrain, alone=, jobs=)``: a build whose verdicts follow ``script``."""
    recorded = Recorded()

    def base(settings: Any, data: Any, scale: Any, secret: str, attempt: int) -> Base:
        recorded.bases.append(attempt)
        return Base(np.arange(3), {"attempt": attempt})

    def train(
        planted: Any,
        index: int,
        settings: Any,
        data: Any,
        scale: Any,
        secret: str,
        attempt: int,
        base: Base,
    ) -> BuiltModel:
        recorded.trained.append((attempt, planted.name, base.state["attempt"]))
        program = f"{planted.name}@{attempt}".encode()
        return BuiltModel(planted.name, np.arange(2), program, None, (1.0, 0.0), None, attempt)  # type: ignore[arg-type]

    def measure(task: tuple[Any, ...]) -> tuple[str, int]:
        name, program = task[0], task[1]
        attempt = int(program.decode().split("@")[1])
        recorded.measured.append((attempt, name))
        return name, attempt

    monkeypatch.setattr(build, "train_shared_base", base)
    monkeypatch.setattr(build, "train_model", train)
    monkeypatch.setattr(build, "_measure_task", measure)
    monkeypatch.setattr(build, "_scale", lambda data, settings: None)

    # here, whatever the processes: what ``jobs`` changes is which models are trained when
    def side_by_side(function: Callable[[Any], Any], tasks: list[Any], jobs: int) -> list[Any]:
        if function is build._train_task:
            recorded.batches.append([(t[6], t[0].name) for t in tasks])
        return [function(task) for task in tasks]

    monkeypatch.setattr(build, "_map", side_by_side)

    def run(
        script: Script, retrain: str, *, alone: int = 1, jobs: int = 1
    ) -> tuple[build.Instance | None, Recorded]:
        settings = dataclasses.replace(game_variant().game, retrain=retrain, alone=alone)

        def verdicts(measured: list[tuple[str, int]], plan: Any, data: Any, s: Any) -> Any:
            # the attempt judged: the latest that trained a model of the zoo judged
            ambiguous = script(max(attempt for _, attempt in measured), dict(measured))
            last = [
                Ambiguity(name, "leaky", "loss-attack AUC", 0.6, ">= 0.65 (in)")
                for name in sorted(ambiguous)
            ]
            return {}, last, {}

        monkeypatch.setattr(build, "_verdicts", verdicts)
        data = types.SimpleNamespace(
            feature_names=list(settings.column_names), X_train=None, y_train=None
        )
        try:
            made = build_instance(settings, data, 1, SECRET, jobs=jobs)  # type: ignore[arg-type]
        except GameBuildError:
            made = None
        return made, recorded

    return run


SECRET = new_secret()


def _names() -> list[str]:
    return [p.name for p in draw_plan(game_variant().game, 1, SECRET).models]


def test_an_ambiguous_model_is_trained_again_alone_on_the_zoos_base(
    scripted: Callable[..., Any],
) -> None:
    names = _names()
    made, recorded = scripted(lambda attempt, _: {names[1]} if attempt == 0 else set(), "ambiguous")
    assert made is not None
    assert made.attempt == 1
    assert recorded.bases == [0]
    assert recorded.trained[len(names) :] == [(1, names[1], 0)]
    assert [m.attempt for m in made.models] == [1 if n == names[1] else 0 for n in names]
    assert [m.name for m in made.models] == names
    assert recorded.measured[len(names) :] == [(1, names[1])]
    assert len(made.rejected) == 1
    assert names[1] in made.rejected[0][0]
    assert set(made.seconds) == {"train", "measure"}


def test_the_measurements_judged_are_the_new_models_beside_the_kept_ones(
    scripted: Callable[..., Any],
) -> None:
    names = _names()
    seen: list[dict[str, int]] = []

    def script(attempt: int, trained: dict[str, int]) -> set[str]:
        seen.append(trained)
        return {names[0], names[2]} if attempt == 0 else set()

    made, _ = scripted(script, "ambiguous")
    assert made is not None
    assert seen[1] == {n: 1 if n in (names[0], names[2]) else 0 for n in names}


def test_a_model_ambiguous_twice_on_one_base_retrains_the_zoo_on_a_new_one(
    scripted: Callable[..., Any],
) -> None:
    names = _names()
    made, recorded = scripted(lambda attempt, _: {names[1]} if attempt < 2 else set(), "ambiguous")
    assert made is not None
    assert made.attempt == 2
    assert recorded.bases == [0, 2]
    assert [t for t in recorded.trained if t[0] == 2] == [(2, n, 2) for n in names]
    assert {m.attempt for m in made.models} == {2}


@pytest.mark.parametrize(
    ("ambiguous", "retrain"),
    [(slice(0, 3), "ambiguous"), (slice(1, 2), "zoo")],
    ids=["half the zoo ambiguous at once", "retrain zoo"],
)
def test_the_zoo_is_trained_again_on_a_new_base(
    scripted: Callable[..., Any], ambiguous: slice, retrain: str
) -> None:
    names = _names()
    first = set(names[ambiguous])
    made, recorded = scripted(lambda attempt, _: first if attempt == 0 else set(), retrain)
    assert made is not None
    assert recorded.bases == [0, 1]
    assert len(recorded.trained) == 2 * len(names)


def test_every_attempt_ambiguous_still_fails_after_the_settings_attempts(
    scripted: Callable[..., Any],
) -> None:
    names = _names()
    made, recorded = scripted(lambda attempt, _: {names[attempt % len(names)]}, "ambiguous")
    assert made is None
    assert sorted({t[0] for t in recorded.trained}) == list(range(game_variant().game.attempts))


def test_retrain_left_as_builds_did_before_it_leaves_the_cache_key_as_it_was() -> None:
    game = game_variant().game
    assert "retrain" not in recipe(dataclasses.replace(game, retrain="zoo"))
    assert recipe(dataclasses.replace(game, retrain="ambiguous"))["retrain"] == "ambiguous"


def _built(made: build.Instance | None) -> Any:
    """What an instance is made of: its models and the attempts it rejected."""
    assert made is not None
    return made.attempt, [(m.name, m.program, m.attempt) for m in made.models], made.rejected


def test_a_second_try_alone_is_trained_ahead_on_the_spare_process(
    scripted: Callable[..., Any],
) -> None:
    """``alone = 2`` on two processes: the attempt that trains a model again alone trains it
    for the next attempt too, which uses it when the model is ambiguous again."""
    names = _names()
    made, recorded = scripted(
        lambda attempt, _: {names[1]} if attempt < 2 else set(), "ambiguous", alone=2, jobs=2
    )
    assert made is not None
    assert made.attempt == 2
    assert recorded.bases == [0]  # never the zoo again
    # attempt 1 trained its model and attempt 2's side by side, and attempt 2 trained nothing
    assert recorded.batches[1:] == [[(1, names[1]), (2, names[1])]]
    assert recorded.trained[len(names) :] == [(1, names[1], 0), (2, names[1], 0)]
    assert [m.attempt for m in made.models] == [2 if n == names[1] else 0 for n in names]
    assert len(made.rejected) == 2


@pytest.mark.parametrize(
    "ambiguous",
    [
        lambda names, attempt: {names[1]} if attempt < 2 else set(),  # the same model twice
        lambda names, attempt: {names[1]} if attempt == 0 else set(),  # built alone at once
        lambda names, attempt: (
            {names[1]} if attempt == 0 else {names[2]} if attempt == 1 else set()
        ),
        lambda names, attempt: {names[1]} if attempt < 3 else set(),  # then the zoo
        lambda names, attempt: {names[attempt % 6]},  # never built
    ],
    ids=["twice", "once", "another model next", "three times", "never"],
)
@pytest.mark.parametrize("alone", [1, 2])
def test_an_instance_is_the_same_on_one_process_or_two(
    scripted: Callable[..., Any], ambiguous: Callable[[list[str], int], set[str]], alone: int
) -> None:
    names = _names()

    def script(attempt: int, _: Any) -> set[str]:
        return ambiguous(names, attempt)

    one, sequential = scripted(script, "ambiguous", alone=alone, jobs=1)
    sequential = copy.deepcopy(sequential)  # the fixture records every run in one
    two, ahead = scripted(script, "ambiguous", alone=alone, jobs=2)
    assert (one is None) == (two is None)
    if one is not None:
        assert _built(one) == _built(two)
    if alone == 1:  # nothing trained ahead
        assert ahead.batches[len(sequential.batches) :] == sequential.batches
    assert all(len({a for a, _ in batch}) == 1 for batch in sequential.batches)
