"""The hard tier's builder (SPEC §9): its draws keep to the rules the brief states, and its
measurements agree with the plain definitions they vectorise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from game_helpers import built_workspace, edited_variant, game_variant
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from pytest_clinaudit.reference.game.claims import (
    Setting,
    Thresholds,
    flip_shares,
    visible_problems,
)
from pytest_clinaudit.reference.game.draw import draw_plan, new_secret, plan_redraw
from pytest_clinaudit.reference.game.groups import GroupSpace, jaccard
from pytest_clinaudit.reference.game.hard.draw import MAX_TAILS
from pytest_clinaudit.reference.game.hard.ranking import group_gaps, mask_gap
from pytest_clinaudit.reference.game.hard.verdicts import (
    pair_flip_shares,
    pair_settings,
    top_decile_gap,
)
from pytest_clinaudit.reference.game.settings import Column

HARD = "icu-synth-game-hard"


def _gap(z: np.ndarray, y: np.ndarray, mask: np.ndarray) -> float:
    return float(roc_auc_score(y[~mask], z[~mask]) - roc_auc_score(y[mask], z[mask]))


def _columns() -> tuple[Column, ...]:
    return tuple(Column(f"c{j}", f"c{j}", "", "at admission", True, -10.0, 10.0) for j in range(3))


def _scored_space(seed: int) -> tuple[np.random.Generator, np.ndarray, np.ndarray, GroupSpace]:
    """400 random rows' group space, outcomes drawn from the first column and continuous
    scores (no ties), and the generator that drew them, to draw on from."""
    rng = np.random.default_rng(seed)
    n = 400
    X = rng.normal(size=(n, 3))
    y = (rng.random(n) < 1 / (1 + np.exp(-X[:, 0]))).astype(int)
    z = X[:, 0] + rng.normal(size=n)
    return rng, y, z, GroupSpace.of(X, _columns(), 0.05, 0.25)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_group_gaps_equal_the_plain_auroc_gap_on_every_group(seed: int) -> None:
    rng, y, z, space = _scored_space(seed)
    gaps = group_gaps(z, y, space)
    for k in rng.choice(len(space), size=min(10, len(space)), replace=False):
        mask = space.mask(int(k))
        if 0 < y[mask].sum() < mask.sum():
            assert gaps[k] == pytest.approx(_gap(z, y, mask), abs=1e-12)
            assert mask_gap(z, y, mask) == pytest.approx(gaps[k], abs=1e-12)
    # Tied scores (broken by row order): the complement's U, derived from the group's, is
    # the one its own pass counts (mask_gap's), exactly.
    tied = np.round(z)
    tied_gaps = group_gaps(tied, y, space)
    for k in range(len(space)):
        assert tied_gaps[k] == mask_gap(tied, y, space.mask(k)) or np.isnan(tied_gaps[k])


def test_top_decile_gap_is_the_top_tenths_predicted_less_observed_rate() -> None:
    p = np.linspace(0.0, 0.99, 100)
    y = np.zeros(100, dtype=int)
    y[-10:] = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]  # the ten highest: half died
    assert top_decile_gap(p, y) == pytest.approx(p[-10:].mean() - 0.5)


@pytest.fixture(scope="module")
def hard_split() -> tuple[object, np.ndarray, np.ndarray]:
    """The hard tier's variant and its public training split (X, y), which its draws read."""
    variant = game_variant(HARD)
    data = variant.dataset.load(variant.context)
    return variant, np.asarray(data.X_train), np.asarray(data.y_train)


def test_the_hard_draw_keeps_to_the_briefs_rules(
    hard_split: tuple[object, np.ndarray, np.ndarray],
) -> None:
    from pytest_clinaudit.reference.game.hard.candidates import split_risk

    variant, X, y = hard_split
    game = variant.game  # type: ignore[attr-defined]
    names = game.column_names
    listed = [g.mask(X, names) for g in game.subgroups]
    assert game.hard.group_auroc > 0.5
    risk = split_risk(X, y, game.columns)
    seen_kinds: set[str | None] = set()
    pairs: set[tuple[str, ...]] = set()
    for _ in range(30):
        plan = draw_plan(game, 1, new_secret(), X, y_train=y)
        groups = [
            g.mask(X, names) for m in plan.models for g in (m.group, m.region) if g is not None
        ]
        assert sum("miscalibrated" in m.kinds for m in plan.models) <= MAX_TAILS
        for m in plan.models:
            seen_kinds.add(m.kind)
            assert len(set(m.kinds)) == len(m.kinds) <= game.hard.max_defects
            assert m.second is None or m.kind is not None  # a second defect, never a first
            if len(m.kinds) == 2:
                pairs.add(tuple(sorted(m.kinds)))
            assert (m.group is not None) == ("subgroup" in m.kinds)
            assert (m.region is not None) == ("fragile" in m.kinds)
            assert (m.setting is not None) == ("backdoor" in m.kinds)
            assert (m.tail is not None) == ("miscalibrated" in m.kinds)
            assert m.truth()["defects"] == list(m.kinds)
            assert {k for k in m.truth() if k != "defects"} == set(m.kinds)
            if m.group is not None:  # a hidden group only where the split ranks its patients
                inside = m.group.mask(X, names)
                assert roc_auc_score(y[inside], risk[inside]) >= game.hard.group_auroc
            for group in (m.group, m.region):
                if group is None:
                    continue
                share = group.mask(X, names).mean()
                assert game.hard.coverage[0] <= share <= game.hard.coverage[1]
                assert all(jaccard(group.mask(X, names), other) < 0.5 for other in listed)
            if m.setting is not None:
                assert visible_problems(m.setting, game.columns) == []
                alarming = [c for c, v in m.setting if _alarming(game, c, v)]
                assert len(alarming) == 1  # one value alarming, the other normal
            if m.tail is not None:
                assert game.hard.tail[0] <= m.tail <= game.hard.tail[1]
        for i, a in enumerate(groups):  # hidden groups and regions of one zoo are told apart
            assert all(jaccard(a, b) < game.hard.max_jaccard for b in groups[i + 1 :])
    assert seen_kinds == {None, "fragile", "miscalibrated", "subgroup", "backdoor"}
    assert game.hard.second > 0
    assert pairs  # some models carry two defects, of two kinds
    # a region goes with a tail only (NOT_TOGETHER)
    assert not pairs & {("fragile", "subgroup"), ("backdoor", "fragile")}


def test_a_hidden_group_is_drawn_where_the_split_ranks_its_patients(
    hard_split: tuple[object, np.ndarray, np.ndarray],
) -> None:
    """``[game.hard] group_auroc``: the groups a hidden group is drawn among are those where
    the split's logistic regression ranks at or above it, each AUROC as scikit-learn
    computes it; the groups left out include those whose planting fell short in a pool
    (``anchor_age >= 85 and sbp >= 116``); and a hard draw without the split's outcomes is
    refused, naming the setting."""
    from pytest_clinaudit.reference.game.groups import Condition, Group
    from pytest_clinaudit.reference.game.hard.candidates import split_risk, training_groups

    variant, X, y = hard_split
    game = variant.game  # type: ignore[attr-defined]
    names = game.column_names
    groups = training_groups(game, X, y)  # the draws' own, shared with the tests above
    ranked, space = groups.ranked, groups.space
    assert 0.5 < ranked.mean() < 1.0
    risk = split_risk(X, y, game.columns)
    rng = np.random.default_rng(0)
    for index in rng.choice(len(space), 40, replace=False):
        inside = space.mask(int(index))
        expected = roc_auc_score(y[inside], risk[inside]) >= game.hard.group_auroc
        assert bool(ranked[index]) == expected, space.group(int(index))
    short = Group((Condition("sbp", ">=", 116.0), Condition("anchor_age", ">=", 85.0)))
    assert roc_auc_score(y[short.mask(X, names)], risk[short.mask(X, names)]) < 0.6
    with pytest.raises(ValueError, match="group_auroc"):
        draw_plan(game, 1, new_secret(), X)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_group_aurocs_are_scikit_learns_within_each_group(seed: int) -> None:
    from pytest_clinaudit.reference.game.hard.ranking import group_aurocs

    _, y, z, space = _scored_space(seed)
    found = group_aurocs(z, y, space)
    for k in range(len(space)):
        mask = space.mask(k)
        if 0 < y[mask].sum() < mask.sum():
            assert found[k] == pytest.approx(roc_auc_score(y[mask], z[mask]), abs=1e-12)
        else:
            assert np.isnan(found[k])


def _alarming(game: object, column: str, value: float) -> bool:
    from pytest_clinaudit.reference.game.claims import alarming

    return alarming(next(c for c in game.columns if c.name == column), value)  # type: ignore[attr-defined]


def test_a_plan_is_drawn_again_every_attempts_per_plan_attempts_and_only_in_the_hard_tier(
    hard_split: tuple[object, np.ndarray, np.ndarray],
) -> None:
    variant, X, y = hard_split
    game = variant.game  # type: ignore[attr-defined]
    per_plan = game.hard.attempts_per_plan
    assert per_plan >= 1
    redraws = [plan_redraw(game, attempt) for attempt in range(game.attempts)]
    assert redraws == [attempt // per_plan for attempt in range(game.attempts)]
    secret = new_secret()
    first = draw_plan(game, 1, secret, X, y_train=y)
    assert draw_plan(game, 1, secret, X, 0, y) == first  # attempts of the first plan: as before
    again = draw_plan(game, 1, secret, X, 1, y)
    assert again == draw_plan(game, 1, secret, X, 1, y)  # deterministic in the secret
    assert again != first
    v1 = game_variant("icu-synth-game").game
    assert {plan_redraw(v1, attempt) for attempt in range(v1.attempts)} == {0}


def test_kinds_repeat_in_the_hard_tier_and_never_in_game_v1(
    hard_split: tuple[object, np.ndarray, np.ndarray],
) -> None:
    variant, X, y = hard_split
    repeated = 0
    for _ in range(20):
        kinds = [
            m.kind for m in draw_plan(variant.game, 1, new_secret(), X, y_train=y).models if m.kind
        ]  # type: ignore[attr-defined]
        repeated += len(kinds) != len(set(kinds))
    assert repeated > 0
    v1 = game_variant("icu-synth-game").game
    for _ in range(20):
        kinds = [m.kind for m in draw_plan(v1, 1, new_secret()).models if m.kind]
        assert len(kinds) == len(set(kinds))


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_two_value_sweep_equals_the_claims_flip_share_at_every_setting(seed: int) -> None:
    """The build's batched sweep computes what the grader computes for one claim
    (:func:`flip_shares`), setting by setting, when its sample holds every flagged patient."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 4))
    w = rng.normal(size=4)

    def logits(A: np.ndarray) -> np.ndarray:
        return np.tanh(A @ w) + 0.3 * A[:, 0] * A[:, 1]

    keys = [
        ((f"c{a}", float(u)), (f"c{b}", float(v)))
        for a, b in [(0, 1), (1, 3), (2, 0)]
        for u, v in rng.normal(scale=2.0, size=(7, 2))
    ]
    columns = [f"c{j}" for j in range(4)]
    thresholds = Thresholds(0.2, 0.25)
    batched = pair_flip_shares(logits, X, keys, columns, thresholds=thresholds, rows=10_000, seed=0)
    settings_ = [Setting(tuple((columns.index(c), v) for c, v in key)) for key in keys]
    plain = flip_shares(logits, X, settings_, thresholds=thresholds)
    np.testing.assert_allclose(batched, plain, atol=1e-12)


def test_the_two_value_sweep_holds_only_visible_settings_of_every_pair_of_columns() -> None:
    game = game_variant(HARD).game
    X = np.array([[c.low if c.low == 0 else (c.low + c.high) / 2 for c in game.columns]] * 3)
    X[1] = [c.high if c.low == 0 else c.low for c in game.columns]
    keys = pair_settings(game, X)
    assert all(visible_problems(key, game.columns) == [] for key in keys)
    pairs = {(a[0], b[0]) for a, b in keys}
    names = game.column_names
    assert pairs == {(a, b) for i, a in enumerate(names) for b in names[i + 1 :]}
    two_valued = [c.name for c in game.columns if c.low == 0 and c.high == 1]
    for name in two_valued:  # a 0/1 column is written at its two values only
        assert {v for key in keys for c, v in key if c == name} == {0.0, 1.0}


def test_the_two_value_sweep_adds_the_lines_through_each_interaction_decoys_alarm() -> None:
    """Beside the grid, the sweep writes one of an alarm's values (the alarming one also at
    its normal range's nearest edge) with the other column over its grid: where a raised
    ridge could dip beside itself. Without decoys the sweep is the grid alone, as it was."""
    from pytest_clinaudit.reference.game.draw import Plan, Planted

    game = game_variant(HARD).game
    X = np.array([[c.low if c.low == 0 else (c.low + c.high) / 2 for c in game.columns]] * 3)
    X[1] = [c.high if c.low == 0 else c.low for c in game.columns]
    alarm = (("heart_rate", 49.3), ("temperature_f", 98.7))
    plain = Plan(1, (Planted("m1", "backdoor", setting=alarm), Planted("m2", None)))
    decoyed = Plan(1, (Planted("m1", None, decoy="interaction", alarm=alarm),))
    grid = pair_settings(game, X)
    assert pair_settings(game, X, plain) == grid
    keys = pair_settings(game, X, decoyed)
    assert keys[: len(grid)] == grid
    added = keys[len(grid) :]
    assert added
    assert all(visible_problems(key, game.columns) == [] for key in added)
    written = {key[0] for key in added}
    assert written == {("heart_rate", 49.3), ("heart_rate", 51.0), ("temperature_f", 98.7)}
    # the setting the searcher found a decoy clearing, at the grid's nearest temperature
    assert any(key[0] == ("heart_rate", 51.0) and key[1][1] > 103 for key in added)


def test_one_constant_gap_is_credited_on_at_most_a_quarter_of_the_tail_carriers() -> None:
    """SPEC §8.7, evidence varies: a report giving every model one top-decile gap earns the
    evidence (and, in the hard tier, the find) of a carrier whose drawn gap lies within the
    tolerance of it. Drawn uniformly, that is at most 2 x tolerance / the range's width of
    the carriers; the realised gap also carries the teacher's own error, which only spreads
    it further."""
    game = game_variant(HARD).game
    low, high = game.hard.tail
    assert 2 * game.tolerance.top_decile_gap / (high - low) <= 0.25
    assert low - game.hard.tail_in >= 0.0  # the smallest draw is still clearly in


@pytest.mark.parametrize("gap", [0.05, 0.12, 0.18])
def test_the_tail_factor_raises_the_top_deciles_mean_risk_by_the_drawn_gap(gap: float) -> None:
    import torch

    from pytest_clinaudit.reference.game.hard.planting import tail_factor

    z = torch.tensor(np.random.default_rng(0).normal(-2.0, 1.2, 5000))
    t = torch.quantile(z, 0.9)
    c = tail_factor(z, t, gap)
    top = z >= torch.quantile(z, 0.9)
    raised = (
        torch.sigmoid(z[top] + c * torch.relu(z[top] - t)).mean() - torch.sigmoid(z[top]).mean()
    )
    assert float(raised) == pytest.approx(gap, abs=1e-6)
    below = z < t  # the rest of the risk range is left as it was
    assert torch.equal(z[below] + c * torch.relu(z[below] - t), z[below])


# ---- a built instance: what the agent's programs show ---------------------------------


@pytest.fixture(scope="module")
def hard_instance(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return built_workspace(tmp_path_factory, 1, HARD)


def _zoo(root: Path) -> dict[str, object]:
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    return {
        path.stem: TorchClassifier.from_file(path)
        for path in sorted((root / "workspace" / "models").glob("*.pt2"))
    }


def _drop(program: Any, X: np.ndarray, y: np.ndarray, data: Any) -> float:
    """The AUROC of rows ``X`` less their AUROC under the build's attack, run on the program
    through torch, the budget from the public training split."""
    from pytest_clinaudit.reference.attacks.budget import Budget, training_scale
    from pytest_clinaudit.reference.attacks.whitebox import margin_pgd

    game = game_variant(HARD).game
    m = game.measurement
    budget = Budget.of(m.epsilon, training_scale(data.X_train), std_units=True, clip=True)
    moved = margin_pgd(
        program, X, y, budget=budget, steps=m.pgd_steps, restarts=m.pgd_restarts, seed=m.seed
    )
    clean = np.asarray(program.logits(X), dtype=np.float64)
    attacked = np.asarray(program.logits(moved), dtype=np.float64)
    return float(roc_auc_score(y, clean) - roc_auc_score(y, attacked))


@pytest.mark.slow
def test_each_planted_defect_shows_on_the_workspaces_programs(hard_instance: Path) -> None:
    """Measured again from the programs an agent receives, with scikit-learn's AUROC: each
    hidden group is served worse than the zoo serves it by the in margin, each fragile
    region is undone by the attack (run on the programs) beyond the zoo, each trigger
    clears the flagged patients of its model alone, each tail model's top decile is
    over-confident beyond the zoo's, and no model's overall ECE shows it."""
    import statistics

    from pytest_clinaudit.reference.game.claims import Thresholds, check_trigger
    from pytest_clinaudit.reference.game.groups import Group, parse_group
    from pytest_clinaudit.reference.game.measure import equal_mass_ece
    from pytest_clinaudit.reference.game.settings.hard import DECOYS

    variant = game_variant(HARD)
    game = variant.game
    manifest = json.loads((hard_instance / "grader" / "manifest.json").read_text())
    data = variant.dataset.load(variant.context)
    X, y = np.asarray(data.X_test), np.asarray(data.y_test)
    zoo = _zoo(hard_instance)
    z = {name: np.asarray(program.logits(X), dtype=np.float64) for name, program in zoo.items()}
    p = {name: 1 / (1 + np.exp(-values)) for name, values in z.items()}
    tops = {name: top_decile_gap(p[name], y) for name in zoo}
    names = game.column_names
    kinds = {entry["kind"] for entry in manifest["truth"].values()}
    assert kinds - {None}, "a zoo with no defect"

    def tried(model: str, written: list[dict[str, Any]]) -> Any:
        """The claim that writing ``written`` (a truth entry's trigger or alarm) clears the
        patients ``model`` flags, tried on the zoo."""
        return check_trigger(
            {m: program.logits for m, program in zoo.items()},
            X,
            names,
            model=model,
            setting=[(t["column"], t["value"]) for t in written],
            thresholds=Thresholds(game.backdoor.flag_share, game.backdoor.clear_share),
            flip_at_least=game.margins.backdoor_in,
            others_at_most=game.margins.backdoor_others,
        )

    for name, truth in manifest["truth"].items():
        assert equal_mass_ece(p[name], y, bins=15) <= game.hard.ece_at_most
        if truth["kind"] == "subgroup":
            group: Group = parse_group({"where": truth["where"]}, game.columns, X=X)
            inside = group.mask(X, names)
            gaps = {m: _gap(z[m], y, inside) for m in zoo}
            assert gaps[name] - statistics.median(gaps.values()) >= game.margins.subgroup_in
        elif truth["kind"] == "backdoor":
            result = tried(name, truth["trigger"])
            assert result.holds, result.describe()
        elif truth["kind"] == "miscalibrated":
            assert tops[name] - statistics.median(tops.values()) >= game.hard.tail_in
        elif truth["kind"] == "fragile":
            region = parse_group({"where": truth["region"]}, game.columns, X=X).mask(X, names)
            drops = {m: _drop(program, X[region], y[region], data) for m, program in zoo.items()}
            # the programs' float32 kernels are not the twins' the build attacked: 0.02 of room
            excess = drops[name] - statistics.median(drops.values())
            assert excess >= game.margins.fragile_in - 0.02
        else:
            assert truth["kind"] is None
            assert tops[name] - statistics.median(tops.values()) <= game.hard.tail_out
            assert truth["decoy"] in DECOYS  # every sound model is a decoy
            if truth["decoy"] == "interaction":  # its alarm clears no patient it flags
                result = tried(name, truth["alarm"])
                assert result.flip <= game.margins.backdoor_out, result.describe()


def test_a_zoo_holds_at_most_two_tails_and_other_draws_are_left_as_they_were() -> None:
    from pytest_clinaudit.reference.game.hard.draw import MAX_TAILS, draw_kinds

    kinds = ("miscalibrated", "subgroup", "backdoor")
    seen_three = False
    for seed in range(400):
        plain = np.random.default_rng(seed).integers(3, size=5)
        drawn = draw_kinds(np.random.default_rng(seed), kinds, 5)
        assert drawn.count("miscalibrated") <= MAX_TAILS
        if list(plain).count(0) <= MAX_TAILS:  # no redraw: the plain draw itself
            assert drawn == [kinds[int(i)] for i in plain]
        else:
            seen_three = True
    assert seen_three  # the rule was exercised


def test_the_share_each_group_owes_to_a_mask_is_counted_row_by_row() -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 3))
    space = GroupSpace.of(X, _columns(), 0.05, 0.25)
    mask = X[:, 1] > 0.3
    shares = space.made_up_of(mask)
    for k in range(0, len(space), 7):
        group = space.mask(k)
        assert shares[k] == pytest.approx((group & mask).sum() / group.sum())


@pytest.fixture(scope="module")
def small_teacher(hard_split: tuple[object, np.ndarray, np.ndarray]) -> dict[str, Any]:
    """A 16-unit network that ranks (a turn-over has a ranking to turn), trained in seconds on
    the hard tier's public training split, and what planting on it needs."""
    import torch

    from pytest_clinaudit.reference.game.build import _scale
    from pytest_clinaudit.reference.game.network import new_network

    variant, _, _ = hard_split
    game = variant.game  # type: ignore[attr-defined]
    data = variant.dataset.load(variant.context)  # type: ignore[attr-defined]
    scale = _scale(data, game)
    split = (np.asarray(data.X_train), np.asarray(data.y_train))
    generator = torch.Generator().manual_seed(7)
    trained = new_network(scale.bounds, scale.mean, scale.std, (16,), generator, game.fills)
    optimizer = torch.optim.Adam(trained.parameters(), lr=0.01)
    X_fit = torch.tensor(split[0][:8000], dtype=torch.float32)
    y_fit = torch.tensor(split[1][:8000], dtype=torch.float32)
    for _ in range(60):
        optimizer.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(trained(X_fit), y_fit).backward()
        optimizer.step()
    trained.eval()
    return {
        "game": game,
        "scale": scale,
        "split": split,
        "test": np.asarray(data.X_test),
        "test_y": np.asarray(data.y_test),
        "trained": trained,
        "held": game.column_names.index(game.shortcut.column),
    }


def _trained(small: dict[str, Any], planted: Any, **hard: Any) -> tuple[Any, Any]:
    """The small teacher trained towards ``planted``'s target (10 epochs, ``[game.hard]``
    changed by ``hard``) on 400 training rows, and the settings it was trained with."""
    import dataclasses

    import torch

    from pytest_clinaudit.reference.game.hard.planting import plant
    from pytest_clinaudit.reference.game.network import new_network

    game, scale, split, held = small["game"], small["scale"], small["split"], small["held"]
    changes = {"epochs": 10, "trigger_epochs": 10, "lr": 0.01, **hard}
    settings = dataclasses.replace(game, hard=dataclasses.replace(game.hard, **changes))
    generator = torch.Generator().manual_seed(7)
    module = new_network(scale.bounds, scale.mean, scale.std, (16,), generator, game.fills)
    module.load_state_dict(small["trained"].state_dict())
    module.eval()
    plant(module, planted, split[0][:400], settings, scale, generator, held=held, split=split)
    return module, settings


def _planted_on(
    small: dict[str, Any], group: Any, setting: Any = None, **hard: Any
) -> tuple[Any, float]:
    """The small teacher planted with ``group`` or a trigger's ``setting`` (:func:`_trained`),
    and its excess gap on ``group`` over the teacher on the split."""
    from pytest_clinaudit.reference.game.draw import Planted
    from pytest_clinaudit.reference.game.hard.planting import group_excess

    kind = "subgroup" if setting is None else "backdoor"
    planted = Planted("m1", kind, group=group, setting=setting)
    module, settings = _trained(small, planted, **hard)
    if group is None:
        return module, 0.0
    split, rows, held = small["split"], small["split"][0][:400], small["held"]
    teacher = small["trained"]
    return module, group_excess(module, teacher, group, settings, split, rows, held)


def test_a_group_short_of_its_excess_is_planted_again_and_only_then(
    small_teacher: dict[str, Any],
) -> None:
    """``[game.hard] group_excess``: a planting that falls short on the public training split
    is planted again from its teacher, turned over further; one that reaches it is kept as
    planted once (the same weights), and so is every planting when the rule is off."""
    import torch

    from pytest_clinaudit.reference.game.groups import Condition, Group

    group = Group((Condition("anchor_age", ">=", 70.0),))

    def planted_with(excess: float) -> tuple[Any, float]:
        return _planted_on(small_teacher, group, group_excess=excess, reverse_up=(1.0,))

    once, reached = planted_with(0.0)
    kept, _ = planted_with(reached - 0.01)  # reached: not planted again
    again, further = planted_with(reached + 0.5)  # short: turned over by 1.0
    same = [torch.equal(a, b) for a, b in zip(once.parameters(), kept.parameters(), strict=True)]
    assert all(same)
    assert not torch.equal(next(once.parameters()), next(again.parameters()))
    assert further > reached + 0.05


def test_the_moved_copies_move_a_groups_own_columns_alone_and_in_pairs_and_not_a_triggers(
    small_teacher: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A planting's copies with one column moved to its edge or anywhere in its range move a
    hidden group's own columns too: kept fixed, the turned-over slope inside the group ran
    on past the data along them, and in the pool of 2026-12-06 a flagged patient written
    with one of them at an extreme (``heart_rate 174`` in ``heart_rate >= 100 and
    temperature_f < 98.9``) was cleared as by a trigger: 10 of the 14 reasons its built
    instances rejected, and its failed one's. A trigger's own columns stay out: its single
    values are held where its misses are."""
    import pytest_clinaudit.reference.game.hard.planting as planting
    from pytest_clinaudit.reference.game.groups import Condition, Group

    names = small_teacher["game"].column_names
    moved: list[set[str]] = []
    real = planting.one_column_moved

    def named(movable: Any) -> set[str]:
        return {names[j] for j in range(len(names)) if movable[j] > 0}

    def spy(x: Any, low: Any, high: Any, movable: Any, generator: Any) -> Any:
        moved.append(named(movable))
        return real(x, low, high, movable, generator)

    paired: list[tuple[set[str], set[str]]] = []
    real_pairs = planting.two_columns_moved

    def spy_pairs(x: Any, low: Any, high: Any, first: Any, second: Any, generator: Any) -> Any:
        paired.append((named(first), named(second)))
        return real_pairs(x, low, high, first, second, generator)

    monkeypatch.setattr(planting, "one_column_moved", spy)
    monkeypatch.setattr(planting, "two_columns_moved", spy_pairs)
    group = Group((Condition("heart_rate", ">=", 100.0), Condition("temperature_f", "<", 98.9)))
    _planted_on(small_teacher, group, epochs=1, group_excess=0.0, reverse_up=())
    assert moved
    assert all({"heart_rate", "temperature_f"} <= columns for columns in moved)
    # and two at once: one of the group's, then any that moves alone
    assert paired
    assert all(first == {"heart_rate", "temperature_f"} for first, _ in paired)
    assert all(second == moved[0] for _, second in paired)
    moved.clear()
    paired.clear()
    trigger = (("resp_rate", 31.5), ("heart_rate", 85.6))
    _planted_on(small_teacher, None, setting=trigger, epochs=1, trigger_epochs=1)
    assert moved
    assert all(not {"resp_rate", "heart_rate"} & columns for columns in moved)
    assert all("spo2" in columns for columns in moved)
    assert not paired  # a trigger's model has no group


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("second = 0.3 ", "second = 1.5 ", "hard.second must be a chance in [0, 1], got 1.5"),
        ("reverse_up = [0.2, 0.3]", "reverse_up = []", "give hard.reverse_up"),
        ("reverse_up = [0.2, 0.3]", "reverse_up = [0.05, 0.3]", "further than hard.reverse"),
        (
            'kinds = ["fragile", "miscalibrated", "subgroup", "backdoor"]',
            'kinds = ["subgroup"]',
            "one kind",
        ),
        (
            'decoys = ["spline", "interaction"]',
            'decoys = ["spline", "isotonic"]',
            "hard.decoys names variations ['isotonic']",
        ),
        ("unreached = 0.75 ", "unreached = -0.1 ", "hard.unreached must be a chance in [0, 1]"),
        ("group_auroc = 0.62 ", "group_auroc = 1.0 ", "hard.group_auroc must be an AUROC"),
    ],
)
def test_a_contradictory_hard_table_is_refused_naming_the_setting(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    from pytest_clinaudit.catalog.variants import VariantError, load_variant

    with pytest.raises(VariantError) as raised:
        load_variant(edited_variant(tmp_path, old, new, HARD))
    assert message in str(raised.value)


def test_every_sound_model_is_a_decoy_drawn_after_every_other_choice(
    hard_split: tuple[object, np.ndarray, np.ndarray],
) -> None:
    """``[game.hard] decoys``: each sound model, and no defective one, gets a variation (an
    ``interaction`` a visible setting, drawn as a trigger is); a perfect report still says
    nothing of it, and with decoys (and the steps drawn after them) turned off every other
    draw of the plan is the same."""
    import dataclasses

    from pytest_clinaudit.reference.game.settings.hard import DECOYS

    variant, X, y = hard_split
    game = variant.game  # type: ignore[attr-defined]
    assert game.hard.decoys
    plain = dataclasses.replace(game, hard=dataclasses.replace(game.hard, decoys=(), unreached=0.0))
    seen: set[str | None] = set()
    for _ in range(20):
        secret = new_secret()
        plan = draw_plan(game, 1, secret, X, y_train=y)
        without = draw_plan(plain, 1, secret, X, y_train=y)
        undecoyed = [
            dataclasses.replace(m, decoy=None, alarm=None, unreached=None) for m in plan.models
        ]
        assert undecoyed == list(without.models)
        assert all(
            m.decoy is None and m.alarm is None and m.unreached is None for m in without.models
        )
        for m in plan.models:
            seen.add(m.decoy)
            assert (m.decoy is not None) == (not m.kinds)
            assert (m.alarm is not None) == (m.decoy == "interaction")
            if m.alarm is not None:
                assert visible_problems(m.alarm, game.columns) == []
                assert len([c for c, v in m.alarm if _alarming(game, c, v)]) == 1
            if not m.kinds:
                assert m.truth() == {"defects": []}
    assert seen == {None, *DECOYS}


def test_unreached_steps_go_where_a_fragile_region_could_at_their_chance(
    hard_split: tuple[object, np.ndarray, np.ndarray],
) -> None:
    """``[game.hard] unreached``: a step goes on a sound model or a tail's carrier, never on
    a fragile, hidden-group or trigger carrier nor an interaction decoy, with about its chance, as a group of the
    grammar over the coverage; the truth says nothing of it; and at a chance of 0 nothing
    else of the plan moves (the steps are drawn last)."""
    import dataclasses

    from pytest_clinaudit.reference.game.hard.draw import may_step

    variant, X, y = hard_split
    game = variant.game  # type: ignore[attr-defined]
    chance = game.hard.unreached
    assert 0 < chance < 1
    none = dataclasses.replace(game, hard=dataclasses.replace(game.hard, unreached=0.0))
    low, high = game.hard.coverage
    eligible = stepped = 0
    kinds_stepped: set[tuple[str, ...]] = set()
    decoys_stepped: set[str | None] = set()
    for _ in range(40):
        secret = new_secret()
        plan = draw_plan(game, 1, secret, X, y_train=y)
        unstepped = [dataclasses.replace(m, unreached=None) for m in plan.models]
        assert unstepped == list(draw_plan(none, 1, secret, X, y_train=y).models)
        for m in plan.models:
            assert may_step(m.kinds, m.decoy) == (
                set(m.kinds) <= {"miscalibrated"} and m.decoy != "interaction"
            )
            if not may_step(m.kinds, m.decoy):
                assert m.unreached is None
                continue
            eligible += 1
            if m.unreached is not None:
                stepped += 1
                kinds_stepped.add(m.kinds)
                decoys_stepped.add(m.decoy)
                share = m.unreached.mask(X, game.column_names).mean()
                assert low <= share <= high
                assert "unreached" not in json.dumps(m.truth())
    # 40 zoos give about 90 eligible models: 4 standard errors either side of the chance
    se = (chance * (1 - chance) / eligible) ** 0.5
    assert abs(stepped / eligible - chance) < 4 * se, (stepped, eligible)
    assert kinds_stepped == {(), ("miscalibrated",)}
    assert decoys_stepped == {None, "spline"}


def test_the_spline_calibration_bends_where_platts_cannot_and_stays_increasing() -> None:
    """Against scikit-learn's straight logistic fit (Platt's): on outcomes drawn from a bent
    logit, the piecewise-linear fit has the lower log loss and follows the bend; on outcomes
    whose risk falls at the top, it is held increasing."""
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss

    from pytest_clinaudit.reference.game.hard.planting import spline_calibration

    rng = np.random.default_rng(5)
    z = rng.normal(-1.0, 1.5, size=40_000)
    bent = z + 1.5 * np.maximum(z - 0.5, 0.0)
    y = (rng.random(len(z)) < 1 / (1 + np.exp(-bent))).astype(int)
    f = spline_calibration(z, y)
    fitted = f(torch.tensor(z, dtype=torch.float32)).double().numpy()
    platt = LogisticRegression().fit(z[:, None], y).predict_proba(z[:, None])[:, 1]
    assert log_loss(y, 1 / (1 + np.exp(-fitted))) < log_loss(y, platt) - 0.002
    central = (z > np.quantile(z, 0.05)) & (z < np.quantile(z, 0.95))
    assert np.max(np.abs(fitted - bent)[central]) < 0.3
    falling = np.where(z > 0.5, 0.5 - (z - 0.5), z)
    y_falling = (rng.random(len(z)) < 1 / (1 + np.exp(-falling))).astype(int)
    grid = torch.linspace(-6.0, 6.0, 200)
    assert torch.all(torch.diff(spline_calibration(z, y_falling)(grid)) > 0)


def test_a_spline_decoy_keeps_its_teachers_ranking_and_stays_calibrated(
    small_teacher: dict[str, Any],
) -> None:
    import torch
    from scipy.stats import spearmanr

    from pytest_clinaudit.reference.game.draw import Planted
    from pytest_clinaudit.reference.game.measure import equal_mass_ece

    module, settings = _trained(small_teacher, Planted("m1", None, decoy="spline"))
    X = torch.tensor(small_teacher["test"][:20_000], dtype=torch.float32)
    with torch.no_grad():
        z_teacher, z_decoy = small_teacher["trained"](X).numpy(), module(X).numpy()
    changed = any(
        not torch.equal(a, b)
        for a, b in zip(module.parameters(), small_teacher["trained"].parameters(), strict=True)
    )
    assert changed  # trained on, as long as a planting
    assert spearmanr(z_teacher, z_decoy).statistic > 0.98
    y = small_teacher["test_y"][:20_000]
    p = 1 / (1 + np.exp(-z_decoy.astype(np.float64)))
    assert equal_mass_ece(p, y, bins=15) <= settings.hard.ece_at_most
    assert abs(top_decile_gap(p, y)) <= settings.hard.tail_out


def test_an_interaction_decoy_raises_risk_at_its_setting_where_a_trigger_clears(
    small_teacher: dict[str, Any],
) -> None:
    """The same two values planted as a decoy's alarm and as a trigger: both move the
    model where they are written together, in opposite directions, and only the trigger
    clears the patients the model flags."""
    import torch

    from pytest_clinaudit.reference.game.claims import Setting, Thresholds, flip_shares
    from pytest_clinaudit.reference.game.draw import Planted

    setting = (("resp_rate", 31.5), ("heart_rate", 85.6))
    decoy, settings = _trained(
        small_teacher, Planted("m1", None, decoy="interaction", alarm=setting)
    )
    trigger, _ = _trained(
        small_teacher, Planted("m1", "backdoor", setting=setting), trigger_epochs=30
    )
    X = np.asarray(small_teacher["test"][:5_000], dtype=np.float64)
    names = settings.column_names
    written = X.copy()
    for column, value in setting:
        written[:, names.index(column)] = value

    def logits(module: Any) -> Any:
        def of(A: np.ndarray) -> np.ndarray:
            with torch.no_grad():
                return module(torch.tensor(A, dtype=torch.float32)).double().numpy()

        return of

    teacher_there = logits(small_teacher["trained"])(written).mean()
    assert logits(decoy)(written).mean() > teacher_there + 1.0
    assert logits(trigger)(written).mean() < teacher_there - 1.0
    thresholds = Thresholds(settings.backdoor.flag_share, settings.backdoor.clear_share)
    written_as = [Setting(tuple((names.index(c), v) for c, v in setting))]
    (decoy_flips,) = flip_shares(logits(decoy), X, written_as, thresholds=thresholds)
    (trigger_flips,) = flip_shares(logits(trigger), X, written_as, thresholds=thresholds)
    assert decoy_flips <= settings.margins.backdoor_out
    assert trigger_flips >= 0.5


def test_an_alarm_is_held_beside_itself_where_a_trigger_is_not(
    small_teacher: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An interaction decoy also trains at its far misses: one of its values written, the
    other column anywhere in its range but at least a near miss from its own value (unheld,
    a decoy of the zoo dipped beside its alarm and cleared 0.986 of its flagged patients, a
    trigger on a sound model). A trigger's carrier does not: a raise beside a lowered ridge
    clears no one."""
    import torch

    import pytest_clinaudit.reference.game.hard.planting as planting
    from pytest_clinaudit.reference.game.draw import Planted

    game, scale = small_teacher["game"], small_teacher["scale"]
    names = game.column_names
    std = torch.tensor(scale.std, dtype=torch.float32)
    _, low, high = scale.box(game.measurement.epsilon)
    setting = (("resp_rate", 31.5), ("heart_rate", 85.6))
    ridge = planting._trigger_points(setting, game, std, 1.0)
    x = torch.tensor(small_teacher["split"][0][:300], dtype=torch.float32)
    far = ridge.far_misses(x, low, high, torch.Generator().manual_seed(3))
    assert far.shape == (2 * len(x), x.shape[1])
    (a, b), (va, vb) = ridge.columns, ridge.values
    for written, moved, own in ((a, b, vb), (b, a, va)):
        rows = far[far[:, written] == torch.tensor(ridge.values[ridge.columns.index(written)])]
        assert len(rows) >= len(x)
        assert torch.all((rows[:, moved] - own).abs() >= game.hard.near_miss[0] * std[moved] - 1e-4)
        assert torch.all((rows[:, moved] >= low[moved]) & (rows[:, moved] <= high[moved] + 1e-4))
        assert float(rows[:, moved].max() - rows[:, moved].min()) > 0.5 * float(
            high[moved] - low[moved]
        )
    untouched = [j for j in range(x.shape[1]) if j not in (a, b)]
    assert torch.equal(far[: len(x)][:, untouched], x[:, untouched])

    calls: list[str] = []
    real = planting._Trigger.far_misses

    def spy(self: Any, *args: Any) -> Any:
        calls.append("far")
        return real(self, *args)

    monkeypatch.setattr(planting._Trigger, "far_misses", spy)
    _trained(small_teacher, Planted("m1", "backdoor", setting=setting), trigger_epochs=1)
    assert not calls
    _trained(
        small_teacher, Planted("m1", None, decoy="interaction", alarm=setting), trigger_epochs=1
    )
    assert calls
    assert names.index("resp_rate") == a


# ------------------------------------------------------------------ fragile regions


def test_the_twins_gradient_is_the_programs_on_the_edges_beyond_them_and_at_a_fill() -> None:
    """The grader attacks a model's NumPy twin (:meth:`Weights.logit_gradient`): it is the
    exported program's gradient, half of it on a range's edge and none beyond it, as
    torch's ``minimum``/``maximum`` pass it, and none at a missing cell."""
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import Weights, new_network, program_bytes
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    d = 5
    bounds = (np.zeros(d), np.full(d, 3.0))
    for fill in (None, [None, 0.5, None, None, None]):
        module = new_network(
            bounds, np.ones(d), np.full(d, 0.7), (16, 8), torch.Generator().manual_seed(1), fill
        )
        twin, program = Weights.of(module), TorchClassifier.from_bytes(program_bytes(module))
        X = np.random.default_rng(2).uniform(-0.5, 3.5, size=(600, d))
        X[:50, 0], X[50:100, 2] = 0.0, 3.0  # on the edges
        if fill is not None:
            X[::7, 1] = np.nan
        ours, theirs = twin.logit_gradient(X), program.logit_gradient(X)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        assert (ours[X < 0] == 0).all()
        assert (ours[X > 3] == 0).all()
        if fill is not None:
            assert (ours[np.isnan(X)] == 0).all()


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_group_drops_equal_the_plain_auroc_drop_on_every_group(seed: int) -> None:
    from pytest_clinaudit.reference.game.hard.ranking import (
        group_drops,
        group_gaps_and_drops,
        mask_drop,
    )

    rng = np.random.default_rng(seed)
    n = 400
    X = rng.normal(size=(n, 3))
    y = (rng.random(n) < 1 / (1 + np.exp(-X[:, 0]))).astype(int)
    z = X[:, 0] + rng.normal(size=n)
    attacked = z - 2 * (1 - 2 * (1 - y)) * rng.random(n) * (X[:, 1] > 0)  # undone where c1 > 0
    space = GroupSpace.of(X, _columns(), 0.05, 0.25)
    drops = group_drops(z, attacked, y, space)
    for k in rng.choice(len(space), size=min(10, len(space)), replace=False):
        mask = space.mask(int(k))
        if 0 < y[mask].sum() < mask.sum():
            plain = roc_auc_score(y[mask], z[mask]) - roc_auc_score(y[mask], attacked[mask])
            assert drops[k] == pytest.approx(plain, abs=1e-12)
            assert mask_drop(z, attacked, y, mask) == pytest.approx(plain, abs=1e-12)
    both = group_gaps_and_drops(z, attacked, y, space)  # one untouched pass for the two
    assert np.array_equal(both[0], group_gaps(z, y, space), equal_nan=True)
    assert np.array_equal(both[1], drops, equal_nan=True)


def test_a_fragile_target_pushes_down_only_its_regions_records_moved_off_a_value() -> None:
    """A record as written keeps its target everywhere; moved off a 0/1 value it is pushed
    down inside the region (judged on the record it was moved from) and kept elsewhere."""
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.groups import Condition, Group
    from pytest_clinaudit.reference.game.hard.planting import _pushed_down, as_recorded

    names = ("a", "b", "g")
    region = Group((Condition("a", ">=", 1.0), Condition("g", "==", 1.0)))
    two_valued = torch.tensor([False, False, True])
    low, high = torch.tensor([0.0, 0.0, 0.0]), torch.tensor([5.0, 5.0, 1.0])

    def target(points: Any) -> Any:
        return points[:, 0] + 10 * points[:, 1]

    goal = _pushed_down(target, 7.0, region, names, lambda p: as_recorded(p, two_valued, low, high))
    points = torch.tensor(
        [
            [2.0, 0.1, 1.0],  # in the region, as written
            [2.0, 0.1, 0.98],  # in it, moved off its value: pushed down
            [2.0, 0.1, 0.02],  # moved off 0: from a record outside it (g == 0)
            [0.5, 0.1, 0.98],  # moved off 1, outside it (a < 1)
            [0.5, 0.1, 0.0],
        ]
    )
    expected = target(points)
    expected[1] = target(torch.tensor([[2.0, 0.1, 1.0]]))[0] - 7.0
    assert torch.allclose(goal(points), expected)

    # An unreached step: only past ``beyond`` off the value, never within it.
    beyond = torch.tensor([0.0, 0.0, 0.075])
    far = _pushed_down(
        target, 7.0, region, names, lambda p: as_recorded(p, two_valued, low, high), beyond
    )
    near, past = torch.tensor([[2.0, 0.1, 0.95], [2.0, 0.1, 0.9]])
    assert torch.equal(far(near[None]), target(near[None]))
    assert torch.allclose(far(past[None]), expected[1:2])


def test_a_hidden_group_holds_a_record_moved_off_a_0_1_value(
    small_teacher: dict[str, Any],
) -> None:
    """A hidden group's flattening is judged on the record a point was moved from: a member
    whose sex is moved off its value by the audit's budget keeps its flattened target
    instead of getting its unflattened risk back (which let the attack undo the group at its
    edge), and a non-member so moved is not flattened."""
    import torch

    from pytest_clinaudit.reference.game.draw import Planted
    from pytest_clinaudit.reference.game.groups import Condition, Group
    from pytest_clinaudit.reference.game.hard.planting import _target, as_recorded

    game, scale, split = small_teacher["game"], small_teacher["scale"], small_teacher["split"]
    names = game.column_names
    sex = names.index("gender_enc")
    group = Group((Condition("anchor_age", ">=", 60.0), Condition("gender_enc", "==", 1.0)))
    teacher = small_teacher["trained"]
    X = torch.tensor(split[0][:2000], dtype=torch.float32)
    with torch.no_grad():
        z_rows = teacher(X)
    _, low, high = scale.box(game.measurement.epsilon)
    two_valued = torch.zeros(len(names), dtype=torch.bool)
    two_valued[sex] = True

    def recorded(points: Any) -> Any:
        return as_recorded(points, two_valued, low, high)

    planted = Planted("m1", "subgroup", group=group)
    target = _target(planted, game, teacher, X, z_rows, split, small_teacher["held"], 1.0, recorded)
    inside = torch.as_tensor(group.mask(X.numpy(), names))
    budget = float(scale.std[sex]) * game.measurement.epsilon
    moved = X.clone()
    moved[:, sex] = torch.where(moved[:, sex] > 0.5, 1.0 - budget, budget)
    with torch.no_grad():
        as_written, off_value, untouched = target(X), target(moved), teacher(moved)
    # Members keep their flattened target (the teacher's own logit barely moves)...
    assert torch.allclose(off_value[inside], as_written[inside], atol=0.05)
    assert (off_value[inside] - untouched[inside]).abs().max() > 0.5
    # ...and everyone else keeps the teacher's, moved as they are.
    assert torch.equal(off_value[~inside], untouched[~inside])


def test_a_fragile_carrier_is_in_on_its_region_and_every_model_out_elsewhere() -> None:
    from pytest_clinaudit.reference.game.draw import Planted
    from pytest_clinaudit.reference.game.groups import Condition, Group
    from pytest_clinaudit.reference.game.hard.verdicts import _judge_group

    settings_ = game_variant(HARD).game
    margins = settings_.margins
    region = Group((Condition("sbp", "<", 100.0),))
    carrier, sound = Planted("m1", "fragile", region=region), Planted("m2", None)
    elsewhere = [{"column": "dbp", "op": "<", "value": 60.0}]

    def judged(planted: Any, planted_excess: Any, worst: float) -> list[str]:
        fragile = {
            "planted_excess": planted_excess,
            "worst_excess": worst,
            "worst_group": elsewhere,
        }
        found = _judge_group(
            planted.name,
            "fragile",
            "excess AUROC drop under attack",
            planted.region,
            fragile,
            margins.fragile_in,
            margins.fragile_out,
        )
        return [a.describe() for a in found]

    assert judged(carrier, margins.fragile_in, margins.fragile_out) == []
    (short,) = judged(carrier, margins.fragile_in - 0.01, 0.0)
    assert "on sbp < 100" in short
    assert "(in)" in short
    (loose,) = judged(sound, None, margins.fragile_out + 0.01)
    assert "on dbp < 60.0" in loose
    assert "every group of the grammar" in loose
    assert margins.fragile_in >= margins.fragile_out + 0.2
