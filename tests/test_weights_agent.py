"""``tests/weights_agent.py``'s reading of a trigger from a first layer (no model is built;
the layers are written by hand)."""

from __future__ import annotations

import numpy as np
import pytest
import weights_agent


def _layer_through(point: dict[int, float], rng: np.random.Generator, units: int) -> np.ndarray:
    """``units`` rows [weights | bias] over 4 inputs whose hyperplanes all pass through
    ``point`` (standardised values of some inputs, the others at 0)."""
    rows = rng.normal(size=(units, 5))
    rows[:, -1] = -sum(rows[:, j] * value for j, value in point.items())
    return rows


def test_the_moved_units_hyperplanes_cross_at_the_trigger() -> None:
    rng = np.random.default_rng(0)
    median = rng.normal(size=(12, 5))
    first = median.copy()
    first[[2, 5, 7, 9]] = _layer_through({1: 1.5, 3: -0.5}, rng, 4)  # the planting's units
    first[[0, 1]] += 1e-3  # moved a little: not among the planting's
    assert weights_agent.crossing(first, median, [1, 3]) == pytest.approx([1.5, -0.5])


def test_the_crossing_takes_only_the_units_that_moved_most() -> None:
    rng = np.random.default_rng(1)
    median = rng.normal(size=(12, 5))
    first = median.copy()
    first[[2, 5]] = 3 * _layer_through({0: 2.0, 2: 1.0}, rng, 2)
    first[[7, 9]] = median[[7, 9]] + 0.1 * rng.normal(size=(2, 5))  # drift elsewhere
    assert weights_agent.crossing(first, median, [0, 2], units=2) == pytest.approx([2.0, 1.0])
    assert weights_agent.crossing(first, median, [0, 2], units=4) != pytest.approx([2.0, 1.0])
