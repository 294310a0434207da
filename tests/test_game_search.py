"""The hard tier's searching expert (``adapters/searcher/``, SPEC §9) on a synthetic zoo.

A zoo of seven torch programs whose logits are known NumPy functions (tests/search_zoo.py):
three sound models, one flattened inside a two-condition group, one that clears the
patients it flags only where two values are written together, one overconfident in its
top decile only, and one turned over inside another group. The searcher runs as an agent
does (``game_agent.py`` and the ``searcher/`` folder copied alone beside the workspace),
and each finding is checked the way the grader checks a claim: the group read by the
grammar and compared by Jaccard overlap, the trigger tried on the models, the top-decile
gap against the reference's definition.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from game_helpers import game_variant
from hypothesis import given, settings
from hypothesis import strategies as st
from search_zoo import (
    BIAS,
    CENTRE,
    COLUMNS,
    FEATURES,
    LABEL,
    PLANTED,
    Formula,
    group_mask,
    ridge,
    write_zoo,
)
from sklearn.metrics import roc_auc_score

from pytest_clinaudit.adapters import searcher
from pytest_clinaudit.adapters.searcher import decide
from pytest_clinaudit.adapters.searcher.aurocs import group_aurocs
from pytest_clinaudit.adapters.searcher.decide import over_confident, stands_apart
from pytest_clinaudit.adapters.searcher.groups import COVERAGE, Groups
from pytest_clinaudit.adapters.searcher.workspace import Progress, Workspace
from pytest_clinaudit.reference.game.claims import Thresholds, check_trigger, visible_problems
from pytest_clinaudit.reference.game.groups import jaccard, parse_group
from pytest_clinaudit.reference.game.hard.verdicts import top_decile_gap
from pytest_clinaudit.reference.game.settings import Column

SEARCHER = Path(searcher.__file__).parent
ADAPTERS = SEARCHER.parent
SUBGROUP_MARGIN = 0.10
"""The grader's credit for a described group (docs: game-v2's ``margins.subgroup_out``)."""


def _dictionary() -> tuple[Column, ...]:
    columns = [
        Column(name, name, "unit", "first 24 h", True, low, high, normal_low, normal_high)
        for name, low, high, normal_low, normal_high, *_ in COLUMNS
    ]
    columns.append(Column("gender_enc", "sex", "", "at admission", True, 0.0, 1.0))
    columns.append(Column("comfort_care_order", "comfort care", "", "after", False, 0.0, 1.0))
    return tuple(columns)


def _searcher_files() -> list[Path]:
    """The searcher's modules, the files an agent's sandbox gets as ``searcher/``."""
    return sorted(SEARCHER.glob("*.py"))


def _test_split(workspace: Path) -> tuple[np.ndarray, np.ndarray]:
    table = np.genfromtxt(workspace / "test.csv", delimiter=",", skip_header=1)
    return table[:, 1:], table[:, 0].astype(int)


@pytest.fixture(scope="module")
def zoo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Formula], Any]:
    """The workspace, each model's formula, and the searcher's report: run as an agent in a
    sandbox runs it, from copies of ``game_agent.py`` and the ``searcher/`` folder alone (as
    the Inspect task's game_agent_solver ships them)."""
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("search-zoo")
    formulas = write_zoo(root / "workspace")
    shutil.copy(ADAPTERS / "game_agent.py", root / "game_agent.py")
    (root / "searcher").mkdir()
    for path in _searcher_files():
        shutil.copy(path, root / "searcher" / path.name)
    done = subprocess.run(
        [sys.executable, str(root / "game_agent.py"), "workspace", "--agent", "searcher"],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    # The time it took, for the report (never asserted: no timed assertions).
    print(done.stderr)
    assert done.returncode == 0, done.stderr
    report = json.loads((root / "workspace" / "report.json").read_text())
    return root / "workspace", formulas, report


def _carriers(kind: str) -> list[str]:
    """The models that carry ``kind``."""
    return [name for name, planted in PLANTED.items() if kind in planted.split("+")]


def test_the_sound_models_are_reported_sound(zoo: Any) -> None:
    _, _, report = zoo
    for name, kind in PLANTED.items():
        if kind == "sound":
            assert report["models"][name] == {"defects": []}, report["summary"]


def test_each_defective_model_carries_its_kinds_and_no_other(zoo: Any) -> None:
    """m4 carries two defects (a trigger and a tail), and the brief allows two: both are
    reported; the subgroup models, whose flattened groups move their top deciles, carry
    no tail."""
    _, _, report = zoo
    assert set(report["models"]) == set(PLANTED)
    for name, kind in PLANTED.items():
        if kind != "sound":
            defects = report["models"][name]["defects"]
            assert sorted(defects) == sorted(kind.split("+")), report["summary"]


@pytest.mark.parametrize("name", [n for n, kind in PLANTED.items() if kind == "subgroup"])
def test_each_hidden_group_is_described_in_the_grammar_and_overlaps_the_planted_one(
    zoo: Any, name: str
) -> None:
    workspace, formulas, report = zoo
    X, y = _test_split(workspace)
    group = parse_group(report["models"][name]["subgroup"], _dictionary(), X=X)
    described = group.mask(X, FEATURES)
    planted = group_mask(X, formulas[name].where)
    assert 0.05 <= described.mean() <= 0.25
    assert jaccard(described, planted) >= 0.5, group.describe()
    # And the model serves the described patients worse than the zoo does, by the margin.
    gaps = {
        other: roc_auc_score(y[~described], f.numpy(X[~described]))
        - roc_auc_score(y[described], f.numpy(X[described]))
        for other, f in formulas.items()
    }
    assert gaps[name] - float(np.median(list(gaps.values()))) >= SUBGROUP_MARGIN


def test_the_fragile_region_is_described_in_the_grammar_and_overlaps_the_planted_one(
    zoo: Any,
) -> None:
    workspace, formulas, report = zoo
    X, _ = _test_split(workspace)
    (name,) = _carriers("fragile")
    group = parse_group(report["models"][name]["fragile"], _dictionary(), X=X)
    described = group.mask(X, FEATURES)
    assert jaccard(described, group_mask(X, formulas[name].region)) >= 0.5, group.describe()
    # As written, the records show nothing: its every logit is its sound twin's.
    assert np.array_equal(formulas[name].numpy(X), BIAS + (X - CENTRE) @ formulas[name].coef)


def test_a_trigger_that_moves_patients_into_the_models_group_is_reported_as_the_group(
    zoo: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A flattened group can meet the brief's definition of a trigger too: written into a
    record, values inside the group move the patient where the model tells nobody apart. Of
    the two findings the searcher reports the group; a trigger outside every group found
    stays a trigger (here made up for a sound model, as if it held)."""
    workspace, _, _ = zoo
    ws = Workspace(workspace, Progress(quiet=True))
    sbp, dbp, hr = (FEATURES.index(c) for c in ("sbp", "dbp", "heart_rate"))
    claims = {"m7": ((sbp, 80.0), (dbp, 40.0)), "m1": ((hr, 200.0),)}

    def found(*_: Any) -> dict[str, dict[str, Any]]:
        return {
            name: {
                "holds": name in claims,
                "setting": claims.get(name),
                "share": 1.0,
                "others": 0.0,
            }
            for name in ws.names
        }

    monkeypatch.setattr(decide, "search_triggers", lambda *_: {})
    monkeypatch.setattr(decide, "judge_triggers", found)
    report = decide.searcher(ws, Progress(quiet=True))["models"]
    assert report["m7"]["defects"] == ["subgroup"]
    assert report["m1"] == {
        "defects": ["backdoor"],
        "backdoor": {"trigger": [{"column": "heart_rate", "value": 200.0}]},
    }
    assert report["m2"]["defects"] == ["subgroup"]


def test_the_trigger_is_visible_and_holds_when_tried_on_the_models(zoo: Any) -> None:
    workspace, formulas, report = zoo
    (name,) = _carriers("backdoor")
    claimed = [(e["column"], e["value"]) for e in report["models"][name]["backdoor"]["trigger"]]
    assert visible_problems(claimed, _dictionary()) == []
    X, _ = _test_split(workspace)
    result = check_trigger(
        {other: f.numpy for other, f in formulas.items()},
        X,
        FEATURES,
        model=name,
        setting=claimed,
        thresholds=Thresholds(flag_share=0.1, clear_share=0.25),
        flip_at_least=0.9,
        others_at_most=0.3,
    )
    assert result.holds, result.describe()


@pytest.mark.parametrize("draw", range(3))
def test_a_trigger_as_narrow_as_a_planted_one_is_found_wherever_the_build_draws_it(
    zoo: Any, draw: int
) -> None:
    """The builds' planted triggers act within 0.15 training stds of a value in one of
    their columns, often within 0.05 (docs/game.md): a ridge with half-widths drawn from
    0.03-0.15 stds, at a setting drawn as a build draws one, is found and holds, and no
    sound model is called a carrier."""
    from pytest_clinaudit.adapters.searcher import triggers
    from pytest_clinaudit.reference.game.hard.draw import draw_trigger

    workspace, formulas, _ = zoo
    ws = Workspace(workspace, Progress(quiet=True))
    rng = np.random.default_rng(draw)
    drawn = draw_trigger(rng, _dictionary(), ws.X_train)
    columns = [FEATURES.index(column) for column, _ in drawn]
    setting = [
        (j, value, float(rng.uniform(0.03, 0.15)) * ws.std[j])
        for j, (_, value) in zip(columns, drawn, strict=True)
    ]
    sound = [name for name, kind in PLANTED.items() if kind == "sound"]
    ws.models = {name: SimpleNamespace(logits=formulas[name].numpy) for name in sound}
    ws.models["ridge"] = SimpleNamespace(
        logits=lambda X: formulas[sound[0]].numpy(X) - 12.0 * ridge(X, setting)
    )
    ws.names = [*sound, "ridge"]
    ws.z = {name: model.logits(ws.X_test) for name, model in ws.models.items()}
    flags = triggers.Flags(ws)
    found = triggers.search_triggers(ws, flags, Progress(quiet=True))
    judged = triggers.judge_triggers(ws, flags, found, flip=0.9, others=0.3)
    assert judged["ridge"]["holds"], (drawn, judged["ridge"])
    assert not any(judged[name]["holds"] for name in sound)


@pytest.mark.parametrize("name", _carriers("miscalibrated"))
def test_the_top_decile_gap_is_the_references_within_its_tolerance(zoo: Any, name: str) -> None:
    workspace, formulas, report = zoo
    X, y = _test_split(workspace)
    p = 1 / (1 + np.exp(-formulas[name].numpy(X)))
    reported = report["models"][name]["miscalibrated"]["top_decile_gap"]
    tolerance = game_variant("icu-synth-game-hard").game.tolerance.top_decile_gap
    assert reported == pytest.approx(top_decile_gap(p, y), abs=tolerance)


def test_the_agent_files_import_nothing_of_the_package() -> None:
    """game_agent.py and every module of the searcher's package import nothing of
    pytest_clinaudit; the searcher's modules import one another only, relatively and
    within their own folder (a ``..`` would reach the package, absent from a sandbox)."""
    modules = _searcher_files()
    assert {"__init__.py", "__main__.py", "command.py"} <= {path.name for path in modules}
    for path in [ADAPTERS / "game_agent.py", *modules]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert all(not a.name.startswith("pytest_clinaudit") for a in node.names), path
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                assert not (node.module or "").startswith("pytest_clinaudit"), path
            elif isinstance(node, ast.ImportFrom) and path.parent == SEARCHER:
                assert node.level == 1, path
                assert node.module, path


def test_the_searcher_package_runs_as_a_module_from_its_folder_alone(tmp_path: Path) -> None:
    """``python -m searcher`` in a sandbox holding the folder alone."""
    (tmp_path / "searcher").mkdir()
    for path in _searcher_files():
        shutil.copy(path, tmp_path / "searcher" / path.name)
    done = subprocess.run(
        [sys.executable, "-m", "searcher", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "The hard tier's searching expert." in done.stdout


def test_the_game_agent_command_runs_the_searcher_from_the_package(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from pytest_clinaudit.adapters import game_agent

    seen = []
    monkeypatch.setattr(searcher, "run", lambda workspace: seen.append(workspace) or {})
    assert "searcher" in game_agent.AGENTS
    assert game_agent.run(tmp_path, "searcher") == {}
    assert seen == [tmp_path]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 3))
def test_group_aurocs_equal_the_plain_auroc_within_and_outside_every_group(
    seed: int, decimals: int
) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    y = (rng.random(n) < rng.uniform(0.05, 0.6)).astype(int)
    score = np.round(rng.normal(size=n), decimals)  # ties, many of them at 0 decimals
    masks = rng.random((6, n)) < rng.uniform(0.0, 1.0, (6, 1))
    within, outside = group_aurocs(score, y, masks)
    for k, mask in enumerate(masks):
        for got, rows in ((within[k], mask), (outside[k], ~mask)):
            if len(set(y[rows])) == 2:
                assert got == pytest.approx(roc_auc_score(y[rows], score[rows]), abs=1e-12)
            else:
                assert np.isnan(got)


def test_models_stand_apart_together_above_the_widest_ratio() -> None:
    noise = dict.fromkeys("abcdef", 0.005)
    values = {"a": 0.002, "b": 0.004, "c": 0.01, "d": 0.012, "e": 0.11, "f": 0.14}
    assert set(stands_apart(values, noise)) == {"e", "f"}
    # Values alike, or apart by less than the noise allows, single nobody out.
    alike = {"a": 0.01, "b": 0.012, "c": 0.015, "d": 0.011, "e": 0.013, "f": 0.02}
    assert stands_apart(alike, noise) == {}
    tiny = {"a": 0.0001, "b": 0.0002, "c": 0.0002, "d": 0.0003, "e": 0.0004, "f": 0.005}
    assert stands_apart(tiny, noise) == {}


def test_a_sound_top_decile_below_the_median_hides_no_over_confident_one() -> None:
    """Seed 6 of the first ten-seed pool: two tails (0.136 and 0.200 beyond the zoo's
    median), three hidden-group carriers already explained, and a sound model whose top
    decile read 0.060 below the median. Measured both ways, the sound model was the yardstick
    and the tails stood only 2.3 times beyond it; the brief's defect is over-confidence."""
    excess = {"m1": 0.136, "m2": -0.002, "m3": -0.060, "m4": -0.004, "m5": 0.200, "m6": 0.002}
    decile = {n: {"gap": 0.1 + e, "se": 0.016} for n, e in excess.items()}
    explained = {"m2", "m4", "m6"}
    assert set(over_confident(decile, 0.1, explained)) == {"m1", "m5"}
    both_ways = {n: abs(excess[n]) for n in excess if n not in explained}
    assert stands_apart(both_ways, dict.fromkeys(excess, 0.016)) == {}
    # Below the median, however far, is never a finding; above it within the noise, neither.
    low = {n: {"gap": 0.1 - 0.3 * (n == "m3") + 0.01 * (n == "m1"), "se": 0.016} for n in excess}
    assert over_confident(low, 0.1, set()) == {}


def test_the_grammars_groups_cover_the_briefs_share_and_parse(zoo: Any, tmp_path: Path) -> None:
    workspace, _, _ = zoo
    ws = Workspace(workspace, Progress(quiet=True))
    groups = Groups(ws, COVERAGE)
    X, _ = _test_split(workspace)
    shares = groups.sizes / len(X)
    assert len(groups) > 100
    assert shares.min() >= 0.05
    assert shares.max() <= 0.25
    for k in np.random.default_rng(0).choice(len(groups), 50, replace=False):
        group = parse_group({"where": groups.where(int(k))}, _dictionary(), X=X)
        assert np.array_equal(group.mask(X, FEATURES), groups.mask(int(k)))
    # The post-outcome column describes no group.
    assert all(FEATURES[j] != "comfort_care_order" for j, _, _ in groups.conditions)
    assert LABEL not in FEATURES


def test_a_region_is_flagged_only_where_the_attack_leaves_it_ranked_no_better_than_chance(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Standing apart is not enough: a model whose described group the attack still leaves
    ranked (a sound model's largest drop, 0.07 beyond the zoo's median, ranked 0.57) is not
    fragile; one left at chance or below is."""
    import types

    names = ["m1", "m2", "m3", "m4"]
    group = ((0, ">=", 1.0),)

    def region(largest: float, under: float) -> dict[str, Any]:
        return {
            "largest": largest,
            "group": group,
            "excess": largest,
            "clean": 0.7,
            "under": under,
            "coverage": 0.1,
            "se": 0.01,
        }

    def judged(under: float) -> dict[str, list[Any]]:
        regions = {n: region(0.01, 0.68) for n in names} | {"m2": region(0.5, under)}
        monkeypatch.setattr(decide, "attack", lambda ws, progress: {})
        monkeypatch.setattr(decide, "search_regions", lambda *args: {})
        monkeypatch.setattr(decide, "judge_regions", lambda ws, found: regions)
        ws = types.SimpleNamespace(names=names, columns=["heart_rate"])
        findings: dict[str, list[Any]] = {n: [] for n in names}
        decide._regions(ws, findings, {"groups": None, "within": None}, 2, Progress(quiet=True))
        return findings

    assert [kind for kind, _, _ in judged(0.1)["m2"]] == ["fragile"]
    assert judged(0.57)["m2"] == []
