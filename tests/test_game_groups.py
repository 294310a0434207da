"""The grammar of groups (SPEC §9): masks, the strict reading of a report's group, the space
of candidate groups, and the hidden groups a builder draws, on hand-built rows and on the
games' real test splits."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from game_helpers import game_variant
from hypothesis import given, settings
from hypothesis import strategies as st
from nn_helpers import NEEDS_SKSURV

from pytest_clinaudit.reference.game.groups import (
    DECILES,
    Condition,
    Group,
    GroupError,
    GroupSpace,
    candidate_conditions,
    candidate_groups,
    coverage,
    draw_group,
    jaccard,
    parse_group,
)
from pytest_clinaudit.reference.game.settings import Column, Subgroup

NAN = float("nan")


def _column(name: str, low: float, high: float, **more: Any) -> Column:
    return Column(name, name, "", "at admission", True, low, high, **more)


COLUMNS = (
    _column("age", 18.0, 91.0),
    _column("sex", 0.0, 1.0),
    _column("heart_rate", 20.0, 230.0, normal_low=51.0, normal_high=90.0),
    _column("creatinine", 0.2, 15.0, fill=0.95),
    _column("grade", 1.0, 10.0),
    Column("comfort", "comfort care", "", "when treatment is withdrawn", False, 0.0, 1.0),
)
NAMES = tuple(c.name for c in COLUMNS)

# Five patients: the fourth has no creatinine.
ROWS = np.array(
    [
        [70.0, 0.0, 80.0, 1.0, 1.0, 0.0],
        [45.0, 1.0, 120.0, 2.0, 2.0, 0.0],
        [82.0, 0.0, 95.0, 0.9, 3.0, 1.0],
        [70.0, 1.0, 60.0, NAN, 4.0, 0.0],
        [30.0, 0.0, 100.0, 1.4, 5.0, 0.0],
    ]
)


def _where(*conditions: Any) -> dict[str, Any]:
    return {"where": list(conditions)}


# ------------------------------------------------------------------ masks


def test_each_operator_selects_its_rows_and_a_missing_cell_satisfies_only_missing() -> None:
    def rows(column: str, op: Any, value: float | None = None) -> list[int]:
        return np.flatnonzero(Condition(column, op, value).mask(ROWS, NAMES)).tolist()

    assert rows("age", ">=", 70) == [0, 2, 3]
    assert rows("age", "<", 70) == [1, 4]
    assert rows("sex", "==", 0) == [0, 2, 4]
    assert rows("creatinine", "missing") == [3]
    assert rows("creatinine", ">=", 1.0) == [0, 1, 4]
    assert rows("creatinine", "<", 1.0) == [2]  # the missing cell is in neither


def test_a_group_is_the_patients_in_every_condition() -> None:
    older_women = Group((Condition("age", ">=", 70), Condition("sex", "==", 0)))
    assert np.flatnonzero(older_women.mask(ROWS, NAMES)).tolist() == [0, 2]
    assert older_women.describe() == "age >= 70 and sex == 0"
    assert older_women.columns == ("age", "sex")
    unmeasured = Group((Condition("creatinine", "missing"),))
    assert unmeasured.describe() == "creatinine is missing"
    assert unmeasured.to_json() == {"where": [{"column": "creatinine", "op": "missing"}]}
    assert Group((Condition("heart_rate", "<", 97.7),)).describe() == "heart_rate < 97.7"


def test_a_group_reads_back_from_its_report_form() -> None:
    for group in (
        Group((Condition("age", ">=", 70), Condition("sex", "==", 0))),
        Group((Condition("creatinine", "missing"), Condition("heart_rate", "<", 97.7))),
    ):
        assert parse_group(group.to_json(), COLUMNS) == group
        assert parse_group(group.to_json(), COLUMNS, X=ROWS) == group


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Condition("age", ">", 70), "op must be one of"),  # type: ignore[arg-type]
        (lambda: Condition("age", ">=", None), "needs a finite value"),
        (lambda: Condition("age", "<", math.inf), "needs a finite value"),
        (lambda: Condition("creatinine", "missing", 1.0), "takes no value"),
        (lambda: Group(()), "1 to 2 conditions, got 0"),
        (
            lambda: Group(
                (Condition("age", ">=", 1), Condition("sex", "==", 0), Condition("grade", "<", 3))
            ),
            "1 to 2 conditions, got 3",
        ),
        (
            lambda: Group((Condition("age", ">=", 50), Condition("age", "<", 75))),
            "each column once",
        ),
    ],
)
def test_a_condition_or_group_outside_the_grammar_cannot_be_made(make: Any, message: str) -> None:
    with pytest.raises(GroupError, match=message):
        make()


def test_a_mask_names_a_column_its_rows_do_not_have() -> None:
    with pytest.raises(GroupError, match="'weight' is not one of the columns"):
        Condition("weight", ">=", 70).mask(ROWS, NAMES)


# ------------------------------------------------------------------ reading a report

AGE = {"column": "age", "op": ">=", "value": 70}


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ([AGE], 'the group: expected an object {"where": [...]}, got an array of 1 items'),
        ({"where": [AGE], "gap": 0.2}, "the group: unexpected key 'gap'"),
        ({}, "where: missing; list one or two conditions"),
        ({"where": AGE}, "where: expected an array of 1 to 2 conditions, got an object"),
        (_where(), "where: a group has 1 to 2 conditions, got 0"),
        (_where(AGE, AGE, AGE), "where: a group has 1 to 2 conditions, got 3"),
        (_where("age >= 70"), 'where[0]: expected an object {"column"'),
        (_where({**AGE, "unit": "years"}), "where[0]: unexpected key 'unit'"),
        (_where({"op": ">=", "value": 70}), "where[0].column: missing"),
        (_where({**AGE, "column": 3}), "where[0].column: expected a column name, got 3"),
        (
            _where({**AGE, "column": "hart_rate", "value": 100}),
            "where[0].column: 'hart_rate' is not a column of the data dictionary "
            "(closest: heart_rate)",
        ),
        (_where({**AGE, "column": "weight"}), "is not a column of the data dictionary"),
        (
            _where({"column": "comfort", "op": "==", "value": 1}),
            "where[0].column: comfort is recorded when treatment is withdrawn, after the "
            "prediction",
        ),
        (_where({"column": "age", "value": 70}), "where[0].op: missing; one of >=, <, ==, missing"),
        (_where({**AGE, "op": ">"}), "got the string '>' (for '>' write '>=')"),
        (_where({**AGE, "op": "<="}), "(for '<=' write '<')"),
        (_where({**AGE, "op": "isnull"}), "(for 'isnull' write 'missing')"),
        (_where({**AGE, "op": True}), "where[0].op: expected one of >=, <, ==, missing, got true"),
        (
            _where({"column": "age", "op": ">="}),
            "where[0].value: expected a finite number, got missing",
        ),
        (_where({**AGE, "value": "70"}), "expected a finite number, got the string '70'"),
        (_where({**AGE, "value": None}), "expected a finite number, got null"),
        (_where({**AGE, "value": False}), "expected a finite number, got false"),
        (_where({**AGE, "value": math.inf}), "expected a finite number, got inf"),
        (_where({**AGE, "value": NAN}), "expected a finite number, got nan"),
        (_where({**AGE, "value": 10**400}), "got an integer of about 401 digits"),
        (_where({**AGE, "value": [70]}), "got an array of 1 items"),
        (
            _where({"column": "grade", "op": "==", "value": 3}),
            "where[0].op: '==' is for a 0/1 column and grade is not one",
        ),
        (_where({"column": "sex", "op": "==", "value": 2}), "where[0].value: sex is 0 or 1, got 2"),
        (
            _where({"column": "heart_rate", "op": ">=", "value": 400}),
            "where[0].value: 400 lies outside heart_rate's possible range (20 to 230)",
        ),
        (
            _where({"column": "age", "op": "<", "value": -5}),
            "-5 lies outside age's possible range (18 to 91)",
        ),
        (
            _where({"column": "heart_rate", "op": "missing"}),
            "where[0]: heart_rate is never missing in the data",
        ),
        (
            _where({"column": "creatinine", "op": "missing", "value": 1}),
            "where[0].value: 'missing' takes no value, got 1",
        ),
        (
            _where(AGE, {"column": "age", "op": "<", "value": 80}),
            "where[1].column: age is already used by where[0]; a group uses each column once",
        ),
    ],
)
def test_every_fault_of_a_reported_group_has_its_own_message(obj: Any, message: str) -> None:
    with pytest.raises(GroupError) as raised:
        parse_group(obj, COLUMNS)
    assert message in str(raised.value)
    assert len(raised.value.problems) == 1, raised.value.problems


def test_each_fault_of_a_report_is_listed_under_its_path() -> None:
    with pytest.raises(GroupError) as raised:
        parse_group(
            _where({"column": "hr", "op": ">", "value": 1}, {"column": "sex", "value": "0"}),
            COLUMNS,
            where="models.m3.subgroup.where",
        )
    paths = [problem.split(":")[0] for problem in raised.value.problems]
    assert paths == [
        "models.m3.subgroup.where[0].column",
        "models.m3.subgroup.where[0].op",
        "models.m3.subgroup.where[1].op",
        "models.m3.subgroup.where[1].value",
    ]
    with pytest.raises(GroupError, match=r"^models\.m3\.subgroup: expected an object"):
        parse_group(None, COLUMNS, where="models.m3.subgroup.where")


def test_the_data_decides_which_columns_are_0_1_and_which_are_missing() -> None:
    measured = ROWS.copy()
    measured[3, 3] = 1.1  # every creatinine measured
    with pytest.raises(GroupError, match="creatinine is never missing in the data"):
        parse_group(_where({"column": "creatinine", "op": "missing"}), COLUMNS, X=measured)
    halves = ROWS.copy()
    halves[0, 1] = 0.5  # a column whose range is 0 to 1 but whose values are not 0/1
    with pytest.raises(GroupError, match="'==' is for a 0/1 column and sex is not one"):
        parse_group(_where({"column": "sex", "op": "==", "value": 1}), COLUMNS, X=halves)
    # Without the data, the data dictionary decides: creatinine has a fill, so it may be.
    assert parse_group(_where({"column": "creatinine", "op": "missing", "value": None}), COLUMNS)


def test_a_huge_input_is_refused_briefly() -> None:
    long_name = "x" * 1_000_000
    with pytest.raises(GroupError) as raised:
        parse_group(_where({**AGE, "column": long_name}), COLUMNS)
    assert len(str(raised.value)) < 300
    with pytest.raises(GroupError, match="got 100000"):
        parse_group({"where": [AGE] * 100_000}, COLUMNS)
    with pytest.raises(GroupError) as raised:
        parse_group(_where({str(i): "x" * 100_000 for i in range(10_000)}), COLUMNS)
    assert len(str(raised.value)) < 300
    with pytest.raises(GroupError, match="got an object with 10000 keys"):
        parse_group({"where": {str(i): i for i in range(10_000)}}, COLUMNS)


JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=30)
    | st.sampled_from([*NAMES, *(">=", "<", "==", "missing", "where", "column", "op", "value")]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["where", "column", "op", "value", "other"]) | st.text(max_size=5),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)
VALID = st.sampled_from(
    [
        AGE,
        {"column": "sex", "op": "==", "value": 0},
        {"column": "creatinine", "op": "missing"},
        {"column": "grade", "op": "<", "value": 3},
    ]
) | st.builds(
    lambda value: {"column": "heart_rate", "op": "<", "value": value},
    st.floats(20, 230) | st.integers(20, 230),
)
"""Conditions the grammar allows (with or without the data of ROWS)."""
MESSY = st.fixed_dictionaries(
    {},
    optional={
        "column": st.sampled_from(NAMES) | JSON,
        "op": st.sampled_from([">=", "<", "==", "missing", ">"]) | JSON,
        "value": st.sampled_from([0, 1, 0.5, 70, 97.7, 400, -1]) | JSON,
        "unit": JSON,
    },
)


def _read(obj: Any, X: Any) -> None:
    """Parse ``obj``: a group that reads back the same and has a mask, or a GroupError."""
    try:
        group = parse_group(obj, COLUMNS, X=X)
    except GroupError as error:
        problems = error.problems
    else:
        assert parse_group(group.to_json(), COLUMNS, X=X) == group
        assert group.mask(ROWS, NAMES).shape == (len(ROWS),)
        return
    assert problems
    assert all(isinstance(p, str) and p for p in problems)


@settings(max_examples=300)
@given(obj=JSON, with_data=st.booleans())
def test_any_json_value_is_a_group_or_a_group_error(obj: Any, with_data: bool) -> None:
    _read(obj, ROWS if with_data else None)


@settings(max_examples=300)
@given(
    conditions=st.lists(VALID | MESSY, max_size=3),
    with_data=st.booleans(),
)
def test_any_list_of_conditions_is_a_group_or_a_group_error(
    conditions: list[Any], with_data: bool
) -> None:
    _read({"where": conditions}, ROWS if with_data else None)


# ------------------------------------------------------------------ comparing groups


def test_jaccard_and_coverage_on_hand_counted_masks() -> None:
    a = np.array([1, 1, 0, 0, 1], dtype=bool)
    b = np.array([0, 1, 1, 0, 1], dtype=bool)
    assert jaccard(a, b) == pytest.approx(2 / 4)
    assert jaccard(a, a) == 1.0
    assert jaccard(a, ~a) == 0.0
    none = np.zeros(5, dtype=bool)
    assert jaccard(none, none) == 0.0  # describing nobody is never right
    assert coverage(a) == pytest.approx(3 / 5)
    assert coverage(np.zeros(0, dtype=bool)) == 0.0
    with pytest.raises(ValueError, match="different shapes"):
        jaccard(a, b[:3])


@given(st.lists(st.tuples(st.booleans(), st.booleans()), max_size=50))
def test_jaccard_is_symmetric_bounded_and_one_only_for_the_same_rows(
    pairs: list[tuple[bool, bool]],
) -> None:
    a = np.array([p[0] for p in pairs], dtype=bool)
    b = np.array([p[1] for p in pairs], dtype=bool)
    value = jaccard(a, b)
    assert value == jaccard(b, a)
    assert 0.0 <= value <= 1.0
    assert (value == 1.0) == (bool(a.any()) and bool((a == b).all()))


# ------------------------------------------------------------------ the space of groups


def test_candidate_conditions_are_deciles_both_ways_values_and_missing_deduplicated() -> None:
    n = 10
    X = np.column_stack(
        [
            np.arange(1.0, n + 1),  # age 1..10: deciles 1..9 (as values of the data)
            np.tile([0.0, 1.0], n // 2),  # sex
            np.full(n, 80.0),  # heart_rate: one value, selects everybody or nobody
            [1.0, 2.0, 1.0, 2.0, 1.0, NAN, 2.0, 1.0, 2.0, 1.0],  # creatinine: one missing
            np.arange(1.0, n + 1),  # grade, the same rows as age
            np.tile([0.0, 1.0], n // 2),  # comfort: after the outcome, never a candidate
        ]
    )
    X[:, 0] += 17.0  # ages 18..27, within the possible range
    described = [c.describe() for c in candidate_conditions(X, COLUMNS)]
    ages = [f"age {op} {18 + k}" for k in range(1, 9) for op in (">=", "<")]
    assert described == [
        *ages,
        "sex == 0",
        "sex == 1",
        # creatinine's deciles are 1 (selecting every measured patient: kept, the missing
        # one is not in it) and 2; "< 1" selects nobody
        "creatinine >= 1",
        "creatinine >= 2",
        "creatinine < 2",
        "creatinine is missing",
        # grade selects the same rows as age at every threshold: nothing new
    ]


def _literal_groups(X: Any, columns: Any, low: float, high: float) -> list[Group]:
    """Every candidate condition and every pair of them on distinct columns, one at a time,
    kept when it covers low..high of the rows and selects rows no earlier one did."""
    names = [c.name for c in columns]
    conditions = candidate_conditions(X, columns)
    ones = [(c,) for c in conditions]
    twos = [(c, d) for c, d in itertools.combinations(conditions, 2) if c.column != d.column]
    kept, seen = [], set()
    for conditions_ in [*ones, *twos]:
        group = Group(conditions_)
        mask = group.mask(X, names)
        share = mask.sum() / len(mask)
        if low <= share <= high and mask.tobytes() not in seen:
            seen.add(mask.tobytes())
            kept.append(group)
    return kept


def _random_rows(n: int, seed: int) -> Any:
    rng = np.random.default_rng(seed)
    X = np.column_stack(
        [
            rng.integers(18, 92, n).astype(float),
            rng.integers(0, 2, n).astype(float),
            rng.normal(90, 20, n).round(),
            np.where(rng.random(n) < 0.15, NAN, rng.lognormal(0, 0.4, n).round(1)),
            rng.integers(1, 11, n).astype(float),
            rng.integers(0, 2, n).astype(float),
        ]
    )
    X[:, 3] = np.clip(X[:, 3], 0.2, 15.0)
    return X


@pytest.mark.parametrize(("low", "high"), [(0.05, 0.25), (0.0, 1.0), (0.3, 0.31)])
def test_candidate_groups_are_the_literal_enumeration(low: float, high: float) -> None:
    X = _random_rows(300, seed=1)
    assert candidate_groups(X, COLUMNS, low, high) == _literal_groups(X, COLUMNS, low, high)


SMALL = st.integers(0, 40).flatmap(
    lambda n: st.tuples(
        st.lists(st.sampled_from([18.0, 30.0, 50.0, 70.0, 90.0]), min_size=n, max_size=n),
        st.lists(st.sampled_from([0.0, 1.0]), min_size=n, max_size=n),
        st.lists(st.floats(20, 230) | st.just(90.0), min_size=n, max_size=n),
        st.lists(st.sampled_from([NAN, 0.5, 1.0, 2.0]), min_size=n, max_size=n),
    )
)


@settings(max_examples=100)
@given(columns=SMALL, band=st.sampled_from([(0.05, 0.25), (0.0, 1.0), (0.2, 0.5)]))
def test_on_any_small_rows_candidate_groups_are_the_literal_enumeration(
    columns: Any, band: tuple[float, float]
) -> None:
    n = len(columns[0])
    X = np.column_stack([*map(np.array, columns), np.ones(n), np.zeros(n)]).reshape(n, 6)
    assert candidate_groups(X, COLUMNS, *band) == _literal_groups(X, COLUMNS, *band)


def test_candidate_groups_cover_the_band_select_distinct_rows_and_prefer_one_condition() -> None:
    X = _random_rows(500, seed=2)
    groups = candidate_groups(X, COLUMNS)
    masks = [g.mask(X, NAMES) for g in groups]
    assert len(groups) > 100
    assert all(0.05 <= coverage(m) <= 0.25 for m in masks)
    assert len({m.tobytes() for m in masks}) == len(masks)
    assert all("comfort" not in g.columns for g in groups)
    assert any(g.conditions[0].op == "missing" for g in groups)
    # A pair gives way to one condition that selects the same rows: given a 0/1 column that
    # marks a pair's patients, the pair is described by that column alone.
    pair = next(g for g in groups if len(g.conditions) == 2)
    marked = np.column_stack([X, pair.mask(X, NAMES)])
    columns = (*COLUMNS, _column("marked", 0.0, 1.0))
    again = candidate_groups(marked, columns)
    assert pair not in again
    assert Group((Condition("marked", "==", 1.0),)) in again


def test_a_space_counts_overlaps_as_jaccard_does() -> None:
    X = _random_rows(333, seed=3)  # not a multiple of 8: the packed masks' padding
    space = GroupSpace.of(X, COLUMNS)
    other = Group((Condition("age", ">=", 60), Condition("sex", "==", 1))).mask(X, NAMES)
    overlaps = space.overlaps(other)
    for k in range(0, len(space), 37):
        mask = space.group(k).mask(X, NAMES)
        assert np.array_equal(space.mask(k), mask)
        assert overlaps[k] == pytest.approx(jaccard(mask, other))
    with pytest.raises(ValueError, match="a mask of 333 rows"):
        space.overlaps(other[:10])


# ------------------------------------------------------------------ drawing a hidden group

LISTED = (
    Subgroup("age < 50", "age", below=50.0),
    Subgroup("age >= 75", "age", at_least=75.0),
    Subgroup("female", "sex", equals=0.0),
)


def test_a_draw_is_deterministic_in_its_rng_and_far_from_the_listed_subgroups() -> None:
    X = _random_rows(600, seed=4)
    first = draw_group(np.random.default_rng(7), X, COLUMNS, LISTED)
    assert draw_group(np.random.default_rng(7), X, COLUMNS, LISTED) == first
    drawn = {draw_group(np.random.default_rng(seed), X, COLUMNS, LISTED) for seed in range(20)}
    assert len(drawn) > 10
    for group in drawn:
        mask = group.mask(X, NAMES)
        assert 0.05 <= coverage(mask) <= 0.25
        for listed in LISTED:
            assert jaccard(mask, listed.mask(X, NAMES)) < 0.5, (group.describe(), listed.name)


def test_a_draw_can_also_keep_a_group_from_holding_much_of_a_listed_one() -> None:
    X = _random_rows(600, seed=4)
    space = GroupSpace.of(X, COLUMNS)
    listed = [g.mask(X, NAMES) for g in LISTED]
    # Far by Jaccard, yet holding much of a listed subgroup: the case max_held rules out.
    far = np.all([space.overlaps(m) < 0.5 for m in listed], axis=0)
    holding = np.max([space.held(m) for m in listed], axis=0)
    assert (far & (holding > 0.3)).any()
    for seed in range(20):
        group = space.draw(np.random.default_rng(seed), listed, max_held=0.3)
        mask = group.mask(X, NAMES)
        for m in listed:
            assert (mask & m).sum() / m.sum() <= 0.3
            assert jaccard(mask, m) < 0.5
    assert draw_group(np.random.default_rng(5), X, COLUMNS, LISTED, max_held=0.3) == space.draw(
        np.random.default_rng(5), listed, max_held=0.3
    )
    assert space.draw(np.random.default_rng(5), listed, max_held=1.0) == space.draw(
        np.random.default_rng(5), listed
    )
    assert np.array_equal(space.held(np.zeros(600, dtype=bool)), np.zeros(len(space)))


def test_without_the_listed_subgroups_some_draws_would_be_near_them() -> None:
    """The distance rule does something: the space holds groups a listed subgroup names."""
    X = _random_rows(600, seed=4)
    space = GroupSpace.of(X, COLUMNS)
    near = space.overlaps(LISTED[1].mask(X, NAMES)) >= 0.5
    assert near.any()


def test_a_draw_with_nothing_far_enough_says_so() -> None:
    X = np.zeros((10, len(COLUMNS)))
    X[:, 0] = 40.0
    X[:2, 1] = 1.0  # the only group of the band: the two men
    X[:, 2:5] = 1.0
    men = Subgroup("male", "sex", equals=1.0)
    assert draw_group(np.random.default_rng(0), X, COLUMNS, [], 0.1, 0.25).describe() == "sex == 1"
    with pytest.raises(ValueError, match="none of the 1 groups is below a Jaccard overlap"):
        draw_group(np.random.default_rng(0), X, COLUMNS, [men], 0.1, 0.25)


# ------------------------------------------------------------------ the games' cohorts


@pytest.fixture(
    scope="module", params=["icu-synth-game", pytest.param("flchain-game", marks=NEEDS_SKSURV)]
)
def cohort(request: pytest.FixtureRequest) -> tuple[Any, Any]:
    variant = game_variant(request.param)
    data = variant.dataset.load(variant.context)
    return variant.game, data.X_test


def test_fifty_draws_on_a_games_test_split_are_hidden_groups_of_the_band(
    cohort: tuple[Any, Any],
) -> None:
    game, X = cohort
    names = game.column_names
    space = GroupSpace.of(X, game.columns)
    listed = [g.mask(X, names) for g in game.subgroups]
    drawn = [space.draw(np.random.default_rng(seed), listed) for seed in range(50)]
    assert drawn[3] == draw_group(np.random.default_rng(3), X, game.columns, game.subgroups)
    assert len(set(drawn)) >= 40
    for group in drawn:
        mask = group.mask(X, names)
        assert 0.05 <= coverage(mask) <= 0.25, group.describe()
        assert max(jaccard(mask, m) for m in listed) < 0.5, group.describe()
        # What the builder plants, the grader reads back as the same patients.
        assert parse_group(group.to_json(), game.columns, X=X) == group


def test_a_games_candidates_use_only_pre_outcome_columns_and_cover_the_band(
    cohort: tuple[Any, Any],
) -> None:
    game, X = cohort
    conditions = candidate_conditions(X, game.columns, DECILES)
    later = {c.name for c in game.columns if not c.at_prediction}
    assert later
    assert not later & {c.column for c in conditions}
    groups = candidate_groups(X, game.columns)
    assert len(groups) > 1000
    assert all(0.05 <= coverage(g.mask(X, game.column_names)) <= 0.25 for g in groups[::50])
    missing = any(np.isnan(X).any(axis=0))
    assert any(c.op == "missing" for c in conditions) == missing
