"""``tools/weights_rules.py``: the weights-only rules searched with hindsight (no model is
built; the statistics are written by hand)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import weights_agent

TOOL = Path(__file__).resolve().parent.parent / "tools" / "weights_rules.py"


@pytest.fixture(scope="module")
def rules():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("weights_rules", TOOL)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["weights_rules"] = module
    spec.loader.exec_module(module)
    return module


def _stats(scale: dict[str, float]) -> weights_agent.Statistics:
    return weights_agent.Statistics(dict.fromkeys(scale, 1.0), scale, dict.fromkeys(scale, 0.0))


def _write_truth(instances: Path, truth: dict[str, dict[str, object]]) -> None:
    """A built instance ``i1`` under ``instances`` whose grader's manifest holds ``truth``."""
    (instances / "i1" / "grader").mkdir(parents=True)
    (instances / "i1" / "grader" / "manifest.json").write_text(json.dumps({"truth": truth}))


def test_a_rule_gives_the_sharp_models_its_kinds_in_order_and_a_band_miscalibrated(
    rules,  # type: ignore[no-untyped-def]
) -> None:
    stats = _stats({"m1": 40.0, "m2": 12.0, "m3": 1.0, "m4": 0.05, "m5": 3.0})
    flags = rules.rule(10.0, ("fragile", "leaky"), 0.1, 2.5)(stats)
    assert flags == {
        "m1": ["fragile"],
        "m2": ["leaky"],
        "m3": [],
        "m4": ["miscalibrated"],
        "m5": ["miscalibrated"],
    }


def test_the_search_finds_a_rule_that_the_truth_rewards_and_counts_it_right(
    rules,  # type: ignore[no-untyped-def]
) -> None:
    truth = {"m1": "fragile", "m2": "leaky", "m3": None, "m4": "miscalibrated", "m5": "shortcut"}
    stats = _stats({"m1": 50.0, "m2": 20.0, "m3": 1.0, "m4": 0.01, "m5": 1.0})
    pool = [("x", truth, stats)]
    assert rules.f1(pool, rules.rule(10.0, ("fragile", "leaky"), 0.02, float("inf"))) == (
        1.0,
        (3, 0, 0),
    )
    # the other order swaps the two: two false alarms and two misses
    assert rules.f1(pool, rules.rule(10.0, ("leaky", "fragile"), 0.02, float("inf"))) == (
        pytest.approx(2 / 6),
        (1, 2, 2),
    )


def test_a_statistics_separation_is_the_auroc_of_a_kinds_models_against_the_rest() -> None:
    """Pooled over instances, ties counted half; 1 or 0 where the statistic sorts a kind's
    models apart (either side), 0.5 where it tells nothing, nan without both groups."""
    first = ({"m1": "backdoor", "m2": None, "m3": None}, _stats({"m1": 9.0, "m2": 1.0, "m3": 2.0}))
    second = ({"m1": None, "m2": "backdoor"}, _stats({"m1": 3.0, "m2": 3.0}))
    # backdoor (9, 3) against sound (1, 2, 3): 3 wins for 9, 2 wins and a tie for 3
    assert weights_agent.separation([first, second], "backdoor", "scale") == pytest.approx(5.5 / 6)
    assert weights_agent.separation([first, second], None, "scale") == pytest.approx(0.5 / 6)
    assert weights_agent.separation([first], "backdoor", "distance") == 0.5
    assert np.isnan(weights_agent.separation([first], "leaky", "scale"))


def test_the_columns_a_carriers_first_layer_moved_most_rank_its_triggers_columns(
    rules,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    base = np.array([[1.0, 0.5, -0.2, 0.1], [0.3, -1.0, 0.4, 0.0]])  # 2 units, 3 columns, bias
    moved = base.copy()
    moved[:, 2] += [0.8, -0.6]  # the carrier's planting moved column c most, then b
    moved[:, 1] += [0.1, 0.1]
    other = base + 0.01
    canon = {"m1": [base], "m2": [moved], "m3": [other]}
    columns = weights_agent.column_deviation(canon, ["a", "b", "c"])
    assert max(columns["m2"], key=columns["m2"].get) == "c"  # type: ignore[arg-type]
    assert columns["m2"]["c"] > columns["m2"]["b"] > columns["m2"]["a"]
    # inputs past the named columns (a fill's missing-value indicators) are left out
    assert list(weights_agent.column_deviation(canon, ["a", "b"])["m2"]) == ["a", "b"]
    with pytest.raises(ValueError, match="4 column names"):
        weights_agent.column_deviation(canon, ["a", "b", "c", "d"])

    truth = {
        "m1": {"kind": None},
        "m2": {
            "kind": "backdoor",
            "trigger": [{"column": "b", "value": 1}, {"column": "c", "value": 2}],
        },
        "m3": {
            "kind": "backdoor",
            "trigger": [{"column": "a", "value": 1}, {"column": "b", "value": 2}],
        },
    }
    _write_truth(tmp_path, truth)
    stats = weights_agent.Statistics({}, {}, {}, columns)
    kinds = {n: e["kind"] for n, e in truth.items()}
    ranks = rules.trigger_ranks(tmp_path, [("i1", kinds, stats)])
    assert ranks[0] == [1, 2]
    assert len(ranks) == 2


def test_sound_decoys_are_labelled_by_their_variation_and_nothing_else_moves(
    rules,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    truth = {
        "m1": {"kind": None, "decoy": "spline"},
        "m2": {"kind": None, "decoy": "interaction", "alarm": []},
        "m3": {"kind": "backdoor", "trigger": []},
        "m4": {"kind": None},
    }
    _write_truth(tmp_path, truth)
    stats = _stats({"m1": 1.0, "m2": 5.0, "m3": 4.0, "m4": 0.5})
    kinds = {n: e["kind"] for n, e in truth.items()}
    ((labels, same),) = rules.decoy_labels(tmp_path, [("i1", kinds, stats)])
    assert labels == {
        "m1": "decoy spline",
        "m2": "decoy interaction",
        "m3": "backdoor",
        "m4": None,
    }
    assert same is stats
    assert kinds["m1"] is None  # the truth the F1 is counted on is left as it was
    labelled = [(labels, stats)]
    assert weights_agent.separation(labelled, "decoy interaction", "scale") == 1.0


def test_models_with_an_unreached_step_are_labelled_whatever_else_they_carry(
    rules,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    truth = {
        "m1": {"kind": None, "decoy": "spline", "unreached": [{"column": "a"}]},
        "m2": {"kind": "miscalibrated", "unreached": [{"column": "b"}]},
        "m3": {"kind": "fragile", "region": []},
        "m4": {"kind": None, "decoy": "interaction"},
    }
    _write_truth(tmp_path, truth)
    stats = _stats({"m1": 3.0, "m2": 4.0, "m3": 5.0, "m4": 0.5})
    kinds = {n: e["kind"] for n, e in truth.items()}
    ((labels, same),) = rules.step_labels(tmp_path, [("i1", kinds, stats)])
    assert labels == {
        "m1": "unreached step",
        "m2": "unreached step",
        "m3": "fragile",
        "m4": None,
    }
    assert same is stats
    assert kinds["m2"] == "miscalibrated"
    # each step is below the fragile carrier and above the plain sound model
    assert weights_agent.separation([(labels, stats)], "unreached step", "scale") == 0.5
