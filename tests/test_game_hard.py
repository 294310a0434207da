"""The hard tier's builder (SPEC §9): its draws keep to the rules the brief states, and its
measurements agree with the plain definitions they vectorise."""

from __future__ import annotations

import numpy as np
import pytest
from game_helpers import game_variant
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import roc_auc_score

from pytest_clinaudit.reference.game.claims import visible_problems
from pytest_clinaudit.reference.game.draw import draw_plan, new_secret
from pytest_clinaudit.reference.game.groups import GroupSpace, jaccard
from pytest_clinaudit.reference.game.hard.verdicts import group_gaps, mask_gap, top_decile_gap
from pytest_clinaudit.reference.game.settings import Column

HARD = "icu-synth-game-hard"


def _gap(z: np.ndarray, y: np.ndarray, mask: np.ndarray) -> float:
    return float(roc_auc_score(y[~mask], z[~mask]) - roc_auc_score(y[mask], z[mask]))


def _columns() -> tuple[Column, ...]:
    return tuple(Column(f"c{j}", f"c{j}", "", "at admission", True, -10.0, 10.0) for j in range(3))


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_group_gaps_equal_the_plain_auroc_gap_on_every_group(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 400
    X = rng.normal(size=(n, 3))
    y = (rng.random(n) < 1 / (1 + np.exp(-X[:, 0]))).astype(int)
    z = X[:, 0] + rng.normal(size=n)  # continuous: no ties
    space = GroupSpace.of(X, _columns(), 0.05, 0.25)
    gaps = group_gaps(z, y, space)
    for k in rng.choice(len(space), size=min(10, len(space)), replace=False):
        mask = space.mask(int(k))
        if 0 < y[mask].sum() < mask.sum():
            assert gaps[k] == pytest.approx(_gap(z, y, mask), abs=1e-12)
            assert mask_gap(z, y, mask) == pytest.approx(gaps[k], abs=1e-12)


def test_top_decile_gap_is_the_top_tenths_predicted_less_observed_rate() -> None:
    p = np.linspace(0.0, 0.99, 100)
    y = np.zeros(100, dtype=int)
    y[-10:] = [1, 1, 1, 1, 1, 0, 0, 0, 0, 0]  # the ten highest: half died
    assert top_decile_gap(p, y) == pytest.approx(p[-10:].mean() - 0.5)


@pytest.fixture(scope="module")
def hard_split() -> tuple[object, np.ndarray]:
    variant = game_variant(HARD)
    return variant, np.asarray(variant.dataset.load(variant.context).X_train)


def test_the_hard_draw_keeps_to_the_briefs_rules(hard_split: tuple[object, np.ndarray]) -> None:
    variant, X = hard_split
    game = variant.game  # type: ignore[attr-defined]
    names = game.column_names
    listed = [g.mask(X, names) for g in game.subgroups]
    seen_kinds: set[str | None] = set()
    for _ in range(12):
        plan = draw_plan(game, 1, new_secret(), X)
        groups = [m.group.mask(X, names) for m in plan.models if m.group is not None]
        for m in plan.models:
            seen_kinds.add(m.kind)
            assert (m.group is not None) == (m.kind == "subgroup")
            assert (m.setting is not None) == (m.kind == "backdoor")
            assert (m.tail is not None) == (m.kind == "miscalibrated")
            if m.group is not None:
                share = m.group.mask(X, names).mean()
                assert game.hard.coverage[0] <= share <= game.hard.coverage[1]
                assert all(jaccard(m.group.mask(X, names), other) < 0.5 for other in listed)
            if m.setting is not None:
                assert visible_problems(m.setting, game.columns) == []
                alarming = [c for c, v in m.setting if _alarming(game, c, v)]
                assert len(alarming) == 1  # one value alarming, the other normal
            if m.tail is not None:
                assert game.hard.tail[0] <= m.tail <= game.hard.tail[1]
        for i, a in enumerate(groups):  # two hidden groups of one zoo are told apart
            assert all(jaccard(a, b) < game.hard.max_jaccard for b in groups[i + 1 :])
    assert seen_kinds == {None, "miscalibrated", "subgroup", "backdoor"}


def _alarming(game: object, column: str, value: float) -> bool:
    from pytest_clinaudit.reference.game.claims import alarming

    return alarming(next(c for c in game.columns if c.name == column), value)  # type: ignore[attr-defined]


def test_kinds_repeat_in_the_hard_tier_and_never_in_game_v1(
    hard_split: tuple[object, np.ndarray],
) -> None:
    variant, X = hard_split
    repeated = 0
    for _ in range(20):
        kinds = [m.kind for m in draw_plan(variant.game, 1, new_secret(), X).models if m.kind]  # type: ignore[attr-defined]
        repeated += len(kinds) != len(set(kinds))
    assert repeated > 0
    v1 = game_variant("icu-synth-game").game
    for _ in range(20):
        kinds = [m.kind for m in draw_plan(v1, 1, new_secret()).models if m.kind]
        assert len(kinds) == len(set(kinds))
