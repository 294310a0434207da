"""The real cohorts FLCHAIN and WHAS500: labels, split, imputation, encoding, cards, the extra.

The rows come from scikit-survival's bundled files (the ``cohorts`` extra, part
of ``test``). Tests that need them skip without it; the tests of what happens
without it hide the package in a fresh interpreter instead
(``sys.modules["sksurv"] = None``), so they run either way.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from grading_helpers import REPO
from hypothesis import given
from hypothesis import strategies as st

from pytest_clinaudit.catalog.variants import Catalog
from pytest_clinaudit.reference.attacks.ece import task_ece
from pytest_clinaudit.reference.data import SOURCES, DataError, LoadContext, write_csvs
from pytest_clinaudit.reference.data.cohort import (
    EXTRA,
    PREPARATION_VERSION,
    Cohort,
    Column,
    horizon_label,
    prepare,
    unavailable_message,
)
from pytest_clinaudit.reference.data.flchain import FLChainSource, load_flchain_cohort
from pytest_clinaudit.reference.data.whas500 import WHAS500Source, load_whas500_cohort

FLCHAIN_VARIANTS = ("flchain-baseline", "flchain-calibrated", "flchain-hard")
WHAS500_VARIANTS = ("whas500-baseline", "whas500-hard")
BLOCK_SKSURV = "import sys; sys.modules['sksurv'] = None\n"


@pytest.fixture(scope="module")
def flchain() -> Cohort:
    pytest.importorskip("sksurv")
    return load_flchain_cohort()


@pytest.fixture(scope="module")
def whas500() -> Cohort:
    pytest.importorskip("sksurv")
    return load_whas500_cohort()


@pytest.fixture(scope="module")
def sksurv_tables() -> dict[str, Any]:
    datasets = pytest.importorskip("sksurv.datasets")
    return {"flchain": datasets.load_flchain(), "whas500": datasets.load_whas500()}


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


# ------------------------------------------------------------------ the label


def test_a_death_within_the_horizon_is_one_and_a_censoring_before_it_is_excluded() -> None:
    event = np.array([True, True, True, False, False, False])
    time = np.array([0.0, 1826.0, 1827.0, 1825.0, 1826.0, 4000.0])
    keep, label = horizon_label(event, time, 1826)
    assert keep.tolist() == [True, True, True, False, True, True]
    assert label[keep].tolist() == [1, 1, 0, 0, 0]


@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(min_value=0, max_value=5000)), min_size=1, max_size=50
    ),
    st.integers(min_value=1, max_value=5000),
    st.integers(min_value=0, max_value=2000),
)
def test_the_horizon_label_keeps_exactly_the_rows_whose_outcome_is_known(
    rows: list[tuple[bool, int]], horizon: int, later: int
) -> None:
    event = np.array([e for e, _ in rows], dtype=np.bool_)
    time = np.array([t for _, t in rows], dtype=np.float64)
    keep, label = horizon_label(event, time, horizon)
    # Excluded: exactly the rows last seen alive before the horizon.
    assert (~keep).tolist() == ((~event) & (time < horizon)).tolist()
    # A positive is a death by the horizon; a negative was seen alive or dead after it.
    assert np.all(time[label == 1] <= horizon)
    assert np.all(event[label == 1])
    assert np.all(time[keep & (label == 0)] >= horizon)
    # A longer horizon never turns a death it already counted into a survivor.
    _, longer = horizon_label(event, time, horizon + later)
    assert np.all(longer[label == 1] == 1)


# ------------------------------------------------------------ the data cards


def _card_table(card: str, first_header: str) -> dict[str, list[str]]:
    """The rows of the markdown table whose header starts with ``first_header``, by first cell."""
    lines = (REPO / "docs" / card).read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_header} |"))
    rows = {}
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def _count(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.mark.parametrize(
    ("card", "cohort_name", "excluded_extra"),
    [
        ("flchain-datacard.md", "flchain", {}),
        ("whas500-datacard.md", "whas500", {"excluded (died in hospital)": 40}),
    ],
)
def test_the_data_card_counts_are_reproduced(
    card: str,
    cohort_name: str,
    excluded_extra: dict[str, int],
    request: pytest.FixtureRequest,
    sksurv_tables: dict[str, Any],
) -> None:
    cohort: Cohort = request.getfixturevalue(cohort_name)
    table = _card_table(card, "split")
    for name, split in (("train", cohort.train), ("test", cohort.test)):
        rows, deaths, rate = table[name]
        assert (_count(rows), _count(deaths)) == (split.y.size, int(split.y.sum()))
        assert rate == f"{100 * split.y.mean():.2f}%"
    censored = next(key for key in table if key.startswith("excluded (censored"))
    assert _count(table[censored][0]) == cohort.excluded_censored
    for key, expected in excluded_extra.items():
        assert _count(table[key][0]) == expected
    n_source = len(sksurv_tables[cohort_name][1])
    assert n_source == cohort.train.y.size + cohort.test.y.size + cohort.excluded_censored + sum(
        excluded_extra.values()
    )
    subgroups = _card_table(card, "subgroup")
    train_masks, test_masks = (cohort.subgroup_masks(s) for s in (cohort.train, cohort.test))
    assert list(subgroups) == [group.name for group in cohort.subgroups]
    for name, (rows, rate) in subgroups.items():
        labels = np.concatenate(
            [cohort.train.y[train_masks[name]], cohort.test.y[test_masks[name]]]
        )
        assert _count(rows) == labels.size
        assert rate == f"{100 * labels.mean():.1f}%"


def test_the_flchain_card_lists_every_column_with_its_recording_time(flchain: Cohort) -> None:
    table = _card_table("flchain-datacard.md", "column")
    dictionary = {entry["name"]: entry for entry in flchain.data_dictionary()}
    names = [re.sub(r"\*", "", name) for name in table]
    assert names == [*flchain.feature_names, "creatinine_missing", "chapter"]
    assert dictionary["chapter"]["post_outcome"] is True
    assert "after the outcome" in dictionary["chapter"]["recorded"]
    missing = {name: _count(cells[3]) for name, cells in table.items() if cells[3][0].isdigit()}
    X = np.vstack([flchain.train.X, flchain.test.X])
    for j, name in enumerate(flchain.feature_names):
        assert missing[name] == int(np.isnan(X[:, j]).sum())


# ------------------------------------------------------ what the agents get


def test_no_standard_variant_sees_the_post_outcome_chapter(
    catalog: Catalog, flchain: Cohort
) -> None:
    for name in FLCHAIN_VARIANTS:
        variant = catalog.get(name)
        assert "chapter" not in variant.dataset.load(variant.context).feature_names
    assert [c.name for c in flchain.post_outcome_columns] == ["chapter"]
    assert all(c.post_outcome is False for c in flchain.columns)


def test_chapter_is_recorded_for_exactly_the_subjects_who_died(flchain: Cohort) -> None:
    # Why it is a leak: its presence is the death itself.
    for split in (flchain.train, flchain.test):
        recorded = np.array([text != "" for text in split.post_outcome["chapter"]])
        assert recorded.tolist() == split.event.tolist()
        assert recorded[split.y == 1].all()


@pytest.mark.parametrize("cohort_name", ["flchain", "whas500"])
def test_the_agents_rows_hold_no_missing_cell(
    cohort_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    cohort: Cohort = request.getfixturevalue(cohort_name)
    data = cohort.dataset
    assert np.isfinite(data.X_train).all()
    assert np.isfinite(data.X_test).all()
    for path in write_csvs(data, tmp_path, train_name="train.csv", test_name="test.csv"):
        with path.open(newline="", encoding="utf-8") as handle:
            cells = [cell for row in csv.reader(handle) for cell in row]
        assert "" not in cells
        assert not any(cell.lower() == "nan" for cell in cells)


def test_missing_creatinine_is_filled_with_the_training_median_and_flagged(
    flchain: Cohort,
) -> None:
    j = flchain.feature_names.index("creatinine")
    names = flchain.dataset.feature_names
    assert names[-1] == "creatinine_missing"
    assert names[:-1] == flchain.feature_names
    observed = flchain.train.X[:, j][~np.isnan(flchain.train.X[:, j])]
    assert flchain.medians == {"creatinine": float(np.median(observed))}
    assert not flchain.train.X.flags.writeable  # shared by every caller, like Dataset's arrays
    for raw, z in (
        (flchain.train.X, flchain.dataset.X_train),
        (flchain.test.X, flchain.dataset.X_test),
    ):
        unscaled = z * flchain.std + flchain.mean
        missing = np.isnan(raw[:, j])
        assert missing.any()
        np.testing.assert_allclose(unscaled[missing, j], flchain.medians["creatinine"], atol=1e-12)
        np.testing.assert_allclose(unscaled[~missing, j], raw[~missing, j], atol=1e-12)
        np.testing.assert_array_equal(np.round(unscaled[:, -1]), missing.astype(float))


def _toy_cohort(X: np.ndarray[Any, Any]) -> Cohort:
    rng = np.random.RandomState(0)
    n = X.shape[0]
    return prepare(
        name="toy",
        label="death",
        columns=(Column("a", "", "", "a"), Column("b", "", "", "b")),
        post_outcome_columns=(),
        X=X,
        time=rng.uniform(0, 10, n),
        event=rng.uniform(size=n) < 0.6,
        post_outcome={},
        horizon_days=5.0,
        imputed=("b",),
        subgroups=(),
        test_size=0.25,
        split_seed=1,
    )


def test_imputation_and_scaling_never_look_at_the_test_rows() -> None:
    rng = np.random.RandomState(1)
    X = rng.normal(size=(200, 2))
    X[rng.uniform(size=200) < 0.3, 1] = np.nan
    first = _toy_cohort(X)
    changed = X.copy()
    changed[first.test.rows] = rng.normal(loc=50.0, size=(first.test.rows.size, 2))
    changed[first.test.rows[:5], 1] = np.nan
    second = _toy_cohort(changed)
    # The split depends on the labels only, so the same rows are in the test split.
    assert second.test.rows.tolist() == first.test.rows.tolist()
    assert second.medians == first.medians
    np.testing.assert_array_equal(second.mean, first.mean)
    np.testing.assert_array_equal(second.std, first.std)
    np.testing.assert_array_equal(second.dataset.X_train, first.dataset.X_train)


def test_a_missing_value_in_a_column_that_is_not_imputed_is_refused() -> None:
    X = np.ones((40, 2))
    X[:, 1] = np.arange(40.0)
    X[3, 0] = np.nan
    with pytest.raises(DataError, match="toy: column 'a' has missing values but is not imputed"):
        _toy_cohort(X)


@pytest.mark.parametrize("cohort_name", ["flchain", "whas500"])
def test_the_features_are_z_scored_with_training_statistics(
    cohort_name: str, request: pytest.FixtureRequest
) -> None:
    data = request.getfixturevalue(cohort_name).dataset
    np.testing.assert_allclose(data.X_train.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(data.X_train.std(axis=0), 1.0, atol=1e-12)
    # The test rows keep the training statistics, so their own are not exactly 0 and 1.
    assert np.abs(data.X_test.mean(axis=0)).max() > 1e-6


def test_the_raw_csvs_keep_the_missing_cells_empty_and_the_rows_in_order(
    flchain: Cohort, tmp_path: Path
) -> None:
    train, test = flchain.write_raw_csvs(tmp_path, post_outcome=True)
    for path, split in ((train, flchain.train), (test, flchain.test)):
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.reader(handle))
        assert rows[0] == ["death_5y", *flchain.feature_names, "chapter"]
        body = rows[1:]
        assert [int(row[0]) for row in body] == split.y.tolist()
        values = np.array(
            [[math.nan if cell == "" else float(cell) for cell in row[1:-1]] for row in body]
        )
        np.testing.assert_array_equal(values, split.X)  # NaN == NaN here, exact floats
        assert [row[-1] for row in body] == list(split.post_outcome["chapter"])
    plain = flchain.write_raw_csvs(tmp_path / "plain")[0].read_text().splitlines()[0]
    assert "chapter" not in plain


def test_flchain_categories_are_encoded_as_documented(
    flchain: Cohort, sksurv_tables: dict[str, Any]
) -> None:
    frame = sksurv_tables["flchain"][0]
    for split in (flchain.train, flchain.test):
        source = frame.iloc[split.rows]
        column = dict(zip(flchain.feature_names, split.X.T, strict=True))
        assert column["sex_male"].tolist() == (source["sex"] == "M").astype(float).tolist()
        assert column["mgus"].tolist() == (source["mgus"] == "yes").astype(float).tolist()
        assert (
            column["sample_yr"].tolist() == source["sample.yr"].astype(str).astype(float).tolist()
        )
        assert column["flc_grp"].tolist() == source["flc.grp"].astype(str).astype(float).tolist()
        assert set(column["flc_grp"]) == set(range(1, 11))


def test_whas500_gender_is_renamed_not_recoded_and_in_hospital_deaths_are_left_out(
    whas500: Cohort, sksurv_tables: dict[str, Any]
) -> None:
    frame, outcome = sksurv_tables["whas500"]
    rows = np.concatenate([whas500.train.rows, whas500.test.rows])
    X = np.vstack([whas500.train.X, whas500.test.X])
    sex = X[:, whas500.feature_names.index("sex_female")]
    assert sex.tolist() == frame["gender"].iloc[rows].astype(str).astype(float).tolist()
    in_hospital = outcome["fstat"] & (outcome["lenfol"] == frame["los"].to_numpy())
    assert (
        sorted(set(range(len(frame))) - set(rows.tolist())) == np.flatnonzero(in_hospital).tolist()
    )
    # Days are counted from discharge: nobody left in the cohort died on it.
    time = np.concatenate([whas500.train.time, whas500.test.time])
    event = np.concatenate([whas500.train.event, whas500.test.event])
    assert not np.any(event & (time == 0))


@pytest.mark.parametrize("cohort_name", ["flchain", "whas500"])
def test_the_subgroups_partition_the_rows(cohort_name: str, request: pytest.FixtureRequest) -> None:
    cohort: Cohort = request.getfixturevalue(cohort_name)
    masks = cohort.subgroup_masks(cohort.train)
    ages = sum(mask.astype(int) for name, mask in masks.items() if name.startswith("age"))
    sexes = sum(mask.astype(int) for name, mask in masks.items() if not name.startswith("age"))
    assert np.all(ages == 1)
    assert np.all(sexes == 1)


# ------------------------------------------------- what a 92-row test split measures


def _perfect_calibration_ece(cohort: Cohort, draws: int) -> np.ndarray[Any, Any]:
    """Task ECEs of a model whose probabilities are exactly right: labels drawn from them."""
    from sklearn.linear_model import LogisticRegression

    data = cohort.dataset
    model = LogisticRegression(max_iter=2000, random_state=42).fit(data.X_train, data.y_train)
    prob = model.predict_proba(data.X_test)[:, 1]
    rng = np.random.RandomState(0)
    return np.array(
        [task_ece(rng.binomial(1, prob).astype(np.int64), prob, 10) for _ in range(draws)]
    )


def test_on_whas500_even_a_perfectly_calibrated_model_scores_about_zero_calibration(
    whas500: Cohort, flchain: Cohort
) -> None:
    # The data cards' reason for shipping no whas500-calibrated (2,000 draws there).
    small = _perfect_calibration_ece(whas500, 500)
    assert 0.07 <= small.mean() <= 0.10
    assert np.mean(np.maximum(0.0, 1 - 12 * small) == 0.0) >= 0.4
    large = _perfect_calibration_ece(flchain, 200)
    assert 0.012 <= large.mean() <= 0.019


# ------------------------------------------------------- registry, variants, extra


def test_the_sources_are_registered_and_the_variants_use_them(catalog: Catalog) -> None:
    assert SOURCES["flchain"] is FLChainSource
    assert SOURCES["whas500"] is WHAS500Source
    for name in FLCHAIN_VARIANTS:
        assert catalog.get(name).dataset == FLChainSource("death_5y", 1826, 0.2, 42)
    for name in WHAS500_VARIANTS:
        assert catalog.get(name).dataset == WHAS500Source("death_1y", 365, 0.2, 42)
    assert "whas500-calibrated" not in catalog


@pytest.mark.parametrize("name", FLCHAIN_VARIANTS + WHAS500_VARIANTS)
def test_the_cohort_variants_use_the_clinical_cohort_parameters(
    name: str, catalog: Catalog
) -> None:
    variant = catalog.get(name)
    suffix = name.split("-", 1)[1]
    icu = catalog.get(f"icu-synth-{suffix}")
    assert variant.model == icu.model
    assert variant.params.fgsm == icu.params.fgsm
    assert dataclasses.replace(
        variant.params.membership_inference, pool_cap=5000
    ) == dataclasses.replace(icu.params.membership_inference)


def test_the_fingerprint_names_the_preparation_and_scikit_survival() -> None:
    pytest.importorskip("sksurv")
    from importlib import metadata

    source = FLChainSource(label="death_5y", horizon_days=1826, test_size=0.2, split_seed=42)
    assert source.fingerprint(LoadContext()) == {
        "source": "flchain",
        "preparation_version": PREPARATION_VERSION,
        "scikit-survival": metadata.version("scikit-survival"),
        "label": "death_5y",
        "horizon_days": 1826,
        "test_size": 0.2,
        "split_seed": 42,
    }
    later = dataclasses.replace(source, horizon_days=3652)
    assert later.fingerprint(LoadContext()) != source.fingerprint(LoadContext())


def test_impossible_settings_are_refused_with_the_reason() -> None:
    pytest.importorskip("sksurv")
    with pytest.raises(DataError, match=r"^whas500: test_size must lie in \(0, 1\), got 1.5$"):
        load_whas500_cohort(test_size=1.5)
    with pytest.raises(DataError, match=r"^flchain: horizon_days must be positive, got 0$"):
        load_flchain_cohort(horizon_days=0)


def test_the_clinical_preparation_is_its_own_cache_key_and_reads_no_training_statistic(
    flchain: Cohort,
) -> None:
    """The torch family's rows (SPEC §7.4): public fill, clinical units; the fingerprint
    names the preparation, so it never shares a cache entry with the z-scored rows."""
    source = FLChainSource("death_5y", 1826, 0.2, 42)
    clinical = dataclasses.replace(source, preparation="clinical")
    assert clinical.fingerprint(LoadContext()) == {
        **source.fingerprint(LoadContext()),
        "preparation": "clinical",
    }
    cohort = load_flchain_cohort(preparation="clinical")
    assert cohort.medians == {"creatinine": 0.95}  # the public constant, not the median 1.0
    assert cohort.mean.tolist() == [0.0] * 9
    assert cohort.std.tolist() == [1.0] * 9
    # The same patients in the same order: the split does not depend on the preparation.
    np.testing.assert_array_equal(cohort.train.rows, flchain.train.rows)
    np.testing.assert_array_equal(cohort.dataset.y_test, flchain.dataset.y_test)


def test_a_public_fill_must_name_every_imputed_column() -> None:
    X = np.array([[1.0, np.nan], [2.0, 3.0], [3.0, 4.0], [4.0, 5.0]])
    with pytest.raises(DataError, match=r"^c: fill must give one value for each of b, got a$"):
        prepare(
            name="c",
            label="y",
            columns=(Column("a", "a", "now", "a"), Column("b", "b", "now", "b")),
            post_outcome_columns=(),
            X=X,
            time=np.array([3.0, 10.0, 3.0, 10.0]),
            event=np.array([True, False, True, False]),
            post_outcome={},
            horizon_days=5,
            imputed=("b",),
            subgroups=(),
            test_size=0.5,
            split_seed=0,
            fill={"a": 1.0},
        )


@pytest.mark.parametrize(
    "module",
    [
        "pytest_clinaudit.reference.data.cohort",
        "pytest_clinaudit.reference.data.flchain",
        "pytest_clinaudit.reference.data.whas500",
    ],
)
def test_importing_a_cohort_module_imports_neither_numpy_nor_scikit_survival(
    module: str, tmp_path: Path
) -> None:
    result = _python(
        f"import sys, {module}\n"
        "print(sorted(m for m in ('numpy', 'sksurv', 'pandas') if m in sys.modules))\n",
        tmp_path,
    )
    assert result.stdout.strip() == "[]", result.stderr


@pytest.mark.slow  # a fresh interpreter imports scikit-survival and pandas: about 7 s
def test_loading_the_cohorts_never_opens_a_network_connection(tmp_path: Path) -> None:
    pytest.importorskip("sksurv")
    result = _python(
        "import socket\n"
        "def refuse(*args, **kwargs):\n"
        "    raise RuntimeError('network access')\n"
        "socket.socket.connect = refuse\n"
        "socket.create_connection = refuse\n"
        "from pytest_clinaudit.reference.data.flchain import load_flchain_cohort\n"
        "from pytest_clinaudit.reference.data.whas500 import load_whas500_cohort\n"
        "print(load_flchain_cohort().dataset.n_train, load_whas500_cohort().dataset.n_train)\n",
        tmp_path,
    )
    assert result.stdout.split() == ["6143", "368"], result.stderr


def test_without_scikit_survival_the_variants_are_listed(tmp_path: Path) -> None:
    result = _python(
        BLOCK_SKSURV + "from pytest_clinaudit.cli import main\n"
        "status = main(['variants'])\n"
        "print('SKSURV', 'sksurv' in sys.modules and sys.modules['sksurv'] is not None, status)\n",
        tmp_path,
    )
    listed = {line.split()[0] for line in result.stdout.splitlines() if line.strip()}
    assert {*FLCHAIN_VARIANTS, *WHAS500_VARIANTS} <= listed
    assert result.stdout.strip().splitlines()[-1] == "SKSURV False 0"


@pytest.mark.parametrize(
    ("command", "name"), [("audit", "flchain-hard"), ("build", "whas500-baseline")]
)
def test_without_scikit_survival_a_cohort_variant_is_unavailable_in_one_line(
    command: str, name: str, tmp_path: Path
) -> None:
    args = ["--variant", name, "--cache-dir", str(tmp_path / "cache"), "-q"]
    if command == "build":
        args += ["--out", str(tmp_path / "out")]
    result = _python(
        BLOCK_SKSURV + "from pytest_clinaudit.cli import main\n"
        f"sys.exit(main({[command, *args]!r}))\n",
        tmp_path,
    )
    cohort = name.split("-")[0]
    assert result.returncode == 2
    assert result.stderr == f"clinaudit {command}: error: {unavailable_message(cohort)}\n"
    assert EXTRA in result.stderr
    assert not (tmp_path / "out").exists()


def test_without_scikit_survival_grading_a_cohort_variant_is_a_usage_error(tmp_path: Path) -> None:
    # In a folder of its own: the session runs in tmp_path, its rootdir (see grading.md).
    (tmp_path / "submission").mkdir()
    report = tmp_path / "submission" / "report.json"
    report.write_text('{"sps": 50.0}', encoding="utf-8")
    args = [
        "--submission",
        str(report),
        "--variant",
        "flchain-baseline",
        "--clinaudit-cache-dir",
        str(tmp_path / "cache"),
        "-p",
        "no:cacheprovider",
    ]
    result = _python(
        BLOCK_SKSURV + f"import pytest\nsys.exit(int(pytest.main({args!r})))\n", tmp_path
    )
    assert result.returncode == 4  # pytest's usage error
    assert (
        f"cannot build the flchain-baseline reference: {unavailable_message('flchain')}"
        in result.stderr
    )
