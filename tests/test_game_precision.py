"""Credit that needs precision (SPEC §8.7): a report that does not audit buys almost nothing.

Fake instances (tests/game_helpers.py: the real variant, plans drawn from fixed
secrets, hand-made networks) graded in-process as a session grades them. The
bounds are computed in the adversary's favour: every value a constant report
gives (a direction, a subgroup, a trigger, an evidence number) is taken to be
right whenever its kind is, so no constant, however chosen, can do better.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from game_helpers import FAKE_EVIDENCE, game_variant, grade, install_fake_instance, truth_report

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.instances import GameReference, get_game_reference
from pytest_clinaudit.reference.game.settings import EVIDENCE, KINDS

INSTANCES = tuple(range(1, 11))
BEST_CONSTANT = 0.15
FLAG_EVERYTHING = 0.10


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[GameReference]]:
    directory = tmp_path_factory.mktemp("precision-cache")
    for seed in INSTANCES:
        install_fake_instance(directory, seed)
    cache = ReferenceCache(directory)
    return directory, [get_game_reference(game_variant(), s, cache=cache) for s in INSTANCES]


def _details(reference: GameReference, kind: str) -> dict[str, Any]:
    """What a report says of ``kind``, right for this instance (the adversary's best case)."""
    carrier = next((n for n, e in reference.truth.items() if e["kind"] == kind), None)
    if carrier is None:
        right = {"subgroup": "female", "direction": "overconfident", "feature": "heart_rate"}
        details: dict[str, Any] = {}
        if kind == "miscalibrated":
            details["direction"] = right["direction"]
        elif kind == "subgroup":
            details["subgroup"] = right["subgroup"]
        elif kind == "shortcut":
            details["feature"] = game_variant().game.shortcut.column
        elif kind == "backdoor":
            details.update(feature="heart_rate", value=220.0)
    else:
        details = dict(truth_report(reference)["models"][carrier][kind])
    if kind in EVIDENCE:
        details[EVIDENCE[kind]] = FAKE_EVIDENCE[EVIDENCE[kind]]
    return details


def _report(reference: GameReference, flags: dict[str, list[str]]) -> dict[str, Any]:
    models = {}
    for name in reference.truth:
        kinds = flags.get(name, [])
        models[name] = {"defects": kinds, **{k: _details(reference, k) for k in kinds}}
    return {"models": models}


def _mean_score(directory: Path, references: list[GameReference], flags: Any) -> float:
    return statistics.fmean(grade(_report(r, flags(r)), r, directory)[0].score for r in references)


def test_flagging_every_kind_on_every_model_scores_at_most_a_tenth(
    zoo: tuple[Path, list[GameReference]],
) -> None:
    directory, references = zoo
    score = _mean_score(directory, references, lambda r: {n: list(KINDS) for n in r.truth})
    assert score <= FLAG_EVERYTHING, score


@pytest.mark.parametrize("kind", KINDS)
def test_one_kind_on_every_model_with_hindsight_scores_at_most_the_bound(
    zoo: tuple[Path, list[GameReference]], kind: str
) -> None:
    """Every model flagged with one kind, its values right for each instance: the best a
    constant report can do, over every kind."""
    directory, references = zoo
    score = _mean_score(directory, references, lambda r: {n: [kind] for n in r.truth})
    assert score <= BEST_CONSTANT, (kind, score)


def test_a_hedged_model_finds_nothing_and_earns_no_credit(
    zoo: tuple[Path, list[GameReference]],
) -> None:
    directory, references = zoo
    reference = references[0]
    carrier, planted = next((n, e["kind"]) for n, e in reference.truth.items() if e["kind"])
    other = next(k for k in KINDS if k != planted)
    truth = truth_report(reference)
    hedged = {
        "models": {
            **truth["models"],
            carrier: {**truth["models"][carrier], "defects": [planted, other]},
        }
    }
    exact, _ = grade(truth, reference, directory)
    got, parts = grade(hedged, reference, directory)
    assert exact.score == 1.0
    assert got.score < exact.score
    by_name = {r.name: r for r in got.checks}
    found = by_name[f"{carrier}::{planted}"]
    assert not found.passed
    assert "a hedged flag is not a find" in found.message
    assert parts["fp"] == 1
    assert parts["fn"] == 1
    for record in got.checks:
        if record.name.startswith(f"{carrier}::{planted}."):
            assert record.credit == 0.0, record.message


def test_a_kind_flagged_on_several_models_shares_its_credit(
    zoo: tuple[Path, list[GameReference]],
) -> None:
    directory, references = zoo
    reference, carrier = next(
        (r, n) for r in references for n, e in r.truth.items() if e["kind"] == "shortcut"
    )
    report = truth_report(reference)
    sound = [n for n, e in reference.truth.items() if e["kind"] is None]
    for name in sound:
        report["models"][name] = {
            "defects": ["shortcut"],
            "shortcut": _details(reference, "shortcut"),
        }
    got, _ = grade(report, reference, directory)
    (record,) = [r for r in got.checks if r.name == f"{carrier}::shortcut.feature"]
    assert not record.passed
    assert record.credit == pytest.approx(1 / (1 + len(sound)))
    assert "the credit is shared" in record.message
