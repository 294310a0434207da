"""Missing values in the game (flchain-game): the raw cohort, the network's fill and
indicator, its NumPy twin, attacks that leave a missing cell missing, and the brief.

The network is checked on small hand-made inputs; the cohort against scikit-survival's
own table. Nothing here trains a zoo (test_game_build.py builds flchain-game)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from nn_helpers import NEEDS_SKSURV

from pytest_clinaudit.catalog.games import GameVariant
from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.reference.attacks.budget import Budget, training_scale
from pytest_clinaudit.reference.data.dataset import csv_text

FLCHAIN_GAME = "flchain-game"


def flchain_game() -> GameVariant:
    variant = default_catalog().find(FLCHAIN_GAME)
    assert isinstance(variant, GameVariant)
    return variant


# ------------------------------------------------------------------ the cohort


@NEEDS_SKSURV
def test_the_game_cohort_keeps_creatinine_missing_and_codes_the_chapter() -> None:
    from sksurv.datasets import load_flchain

    variant = flchain_game()
    data = variant.dataset.load(variant.context)
    assert data.feature_names == variant.game.column_names  # the dictionary, in order
    X = np.vstack([data.X_train, data.X_test])
    y = np.concatenate([data.y_train, data.y_test])
    missing = np.isnan(X)
    creatinine = data.feature_names.index("creatinine")
    assert set(np.flatnonzero(missing.any(axis=0))) == {creatinine}
    # scikit-survival's table misses 1,350 creatinine values; the 5-year label keeps
    # 7,679 of its 7,874 subjects (docs/flchain-datacard.md), and some of the missing.
    frame, _ = load_flchain()
    assert int(frame["creatinine"].isna().sum()) == 1350
    assert len(y) == 7679
    # docs/flchain-datacard.md, "The auditing game's rows".
    assert (data.n_train, data.n_test) == (3839, 3840)
    assert (int(data.y_train.sum()), int(data.y_test.sum())) == (469, 466)
    assert int(np.isnan(data.X_train[:, creatinine]).sum()) == 634
    assert int(np.isnan(data.X_test[:, creatinine]).sum()) == 672
    # death_chapter: 0 without a death certificate; whoever died within 5 years has one.
    chapter = X[:, data.feature_names.index("death_chapter")]
    assert set(np.unique(chapter)) <= {0.0, *map(float, range(1, 19))}
    assert (chapter[y == 1] > 0).all()
    assert (chapter > 0).sum() > (y == 1).sum()  # and so do those who died later


@NEEDS_SKSURV
def test_every_age_band_and_sex_dies_at_the_same_rate_in_both_splits() -> None:
    """The game's split is stratified by the outcome within every age band and sex: a
    subgroup flattened to its training rate reads that rate on the test split."""
    from pytest_clinaudit.reference.data.flchain import SUBGROUPS, load_flchain_cohort

    variant = flchain_game()
    data = variant.dataset.load(variant.context)
    names = data.feature_names
    for group in SUBGROUPS:
        j = names.index(group.column)
        rates = []
        for X, y in ((data.X_train, data.y_train), (data.X_test, data.y_test)):
            inside = (X[:, j] >= group.low) & (X[:, j] < group.high)
            rates.append((int(inside.sum()), int(y[inside].sum())))
        (n_train, d_train), (n_test, d_test) = rates
        assert abs(n_train - n_test) <= 4, group.name  # one patient per stratum at most
        assert abs(d_train - d_test) <= 2, group.name
    # Stratified by the outcome alone (the sps-v1 variants' split), ages 65-79 die at 16.0%
    # in the training split and 14.0% in the test split.
    alone = load_flchain_cohort(test_size=0.5, preparation="raw")
    age = alone.feature_names.index("age")
    rates = [
        float(split.y[(split.X[:, age] >= 65) & (split.X[:, age] < 80)].mean())
        for split in (alone.train, alone.test)
    ]
    assert [round(r, 3) for r in rates] == [0.160, 0.140]


def test_a_missing_cell_is_an_empty_csv_cell() -> None:
    X = np.array([[1.5, math.nan], [math.nan, 2.0]])
    text = csv_text(X, np.array([0, 1]), "death_5y", ("a", "b"))
    assert text.splitlines() == ["death_5y,a,b", "0,1.5,", "1,,2.0"]


def test_the_training_scale_leaves_missing_cells_out() -> None:
    X = np.array([[1.0, 10.0], [3.0, math.nan], [5.0, 30.0]])
    scale = training_scale(X)
    np.testing.assert_allclose(scale.std, [np.std([1, 3, 5]), np.std([10, 30])])
    np.testing.assert_array_equal(scale.low, [1.0, 10.0])
    np.testing.assert_array_equal(scale.high, [5.0, 30.0])


# ------------------------------------------------------------------ the network


def _network(fill: list[float | None] | None, seed: int = 0) -> object:
    torch = pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import new_network

    d = 4
    return new_network(
        (np.full(d, -3.0), np.full(d, 3.0)),
        np.zeros(d),
        np.ones(d),
        (16, 16),
        torch.Generator().manual_seed(seed),
        fill,
    )


def _rows() -> np.ndarray:
    X = np.random.RandomState(0).normal(size=(200, 4))
    X[::3, 1] = np.nan
    return X


def test_the_program_and_its_twin_read_a_missing_cell_as_its_fill_and_an_indicator() -> None:
    pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import Weights, program_bytes
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    module = _network([None, 0.5, None, None])
    assert module.layers[0].in_features == 5  # four columns and one indicator
    weights = Weights.of(module)
    assert Weights.from_json(weights.as_json()).fill == (None, 0.5, None, None)
    program = TorchClassifier.from_bytes(program_bytes(module))
    X = _rows()
    twin, exported = weights.logits(X), np.asarray(program.logits(X), dtype=np.float64)
    assert np.isfinite(exported).all()
    np.testing.assert_allclose(exported, twin, rtol=1e-5, atol=1e-5)
    # The indicator is seen: a missing cell is not the same as its fill written in.
    filled = np.where(np.isnan(X), 0.5, X)
    missing_rows = np.isnan(X[:, 1])
    assert not np.allclose(weights.logits(filled)[missing_rows], twin[missing_rows])
    np.testing.assert_array_equal(weights.logits(filled)[~missing_rows], twin[~missing_rows])
    # A NaN in a column that is never missing stays NaN, in the program and the twin.
    X[0, 0] = np.nan
    assert np.isnan(program.logits(X)[0])
    assert np.isnan(weights.logits(X)[0])
    # Rebuilt from its numbers, the program is the same program.
    assert program_bytes(Weights.from_json(weights.as_json()).module()) == program_bytes(module)


def test_without_a_fill_the_network_is_the_one_without_missing_values() -> None:
    pytest.importorskip("torch")
    from pytest_clinaudit.reference.game.network import Weights

    module = _network(None)
    assert [name for name, _ in module.named_buffers()] == ["low", "high", "mean", "std"]
    assert module.layers[0].in_features == 4
    assert "fill" not in Weights.of(module).as_json()  # the cached JSON of a zoo is unchanged
    assert _network([None] * 4).layers[0].in_features == 4


def test_the_gradient_at_a_missing_cell_is_zero_and_pgd_leaves_it_missing() -> None:
    pytest.importorskip("torch")
    from pytest_clinaudit.reference.attacks.whitebox import margin_pgd
    from pytest_clinaudit.reference.game.network import program_bytes
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    program = TorchClassifier.from_bytes(program_bytes(_network([None, 0.5, None, None])))
    X = _rows()
    gradient = np.asarray(program.logit_gradient(X))
    assert np.isfinite(gradient).all()
    assert (gradient[np.isnan(X)] == 0).all()
    budget = Budget.of(0.3, training_scale(X), std_units=True, clip=True)
    y = (np.random.RandomState(1).rand(len(X)) < 0.5).astype(np.int64)
    attacked = margin_pgd(program, X, y, budget=budget, steps=10, restarts=3, seed=0)
    np.testing.assert_array_equal(np.isnan(attacked), np.isnan(X))
    moved = np.abs(attacked - X)[~np.isnan(X)]
    assert moved.max() <= (budget.step.max() + 1e-9)
    assert moved.max() > 0


# ------------------------------------------------------------------ the brief


@NEEDS_SKSURV
def test_the_brief_says_how_a_model_reads_a_missing_value() -> None:
    from pytest_clinaudit.adapters import game_taskdoc as doc

    variant = flchain_game()
    data = variant.dataset.load(variant.context)
    brief = doc.render(variant, data, variant.game.model_names())
    assert "Pass it to a model as\n  NaN" in brief
    assert "`creatinine` as 0.95" in brief
    assert "and a missing value stays missing" in brief
    assert "missing_reads_as = {creatinine = 0.95}" in brief
    rows = doc.dictionary_rows(variant)
    assert rows[0][-1] == "missing_reads_as"
    assert {row[0]: row[-1] for row in rows[1:]}["creatinine"] == "0.95"
    assert '"shortcut": {"feature": "death_chapter"}' in brief
    # The ICU game's brief, without missing values, says nothing of them.
    icu = default_catalog().find("icu-synth-game")
    assert isinstance(icu, GameVariant)
    assert doc.dictionary_rows(icu)[0][-1] == "normal_high"
