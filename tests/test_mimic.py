"""A user's MIMIC-IV extract: both layouts load exactly, every defect is named.

The synthetic cohort stands in for the credentialed extract: written in each
accepted layout and loaded back, it must give the very same dataset (same
sha256). Each validation error is pinned to its exact text, since the text is
what a user acts on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.files import sha256_file
from pytest_clinaudit.reference.data import SOURCES, DataError, Dataset, LoadContext
from pytest_clinaudit.reference.data.icu import generate_icu_cohort
from pytest_clinaudit.reference.data.mimic import (
    ENV_VAR,
    MimicSource,
    load_mimic_extract,
    resolve_mimic_dir,
    write_mimic_layout,
)

LABEL = "hospital_expire_flag"
FEATURES = [
    "heart_rate",
    "resp_rate",
    "spo2",
    "sbp",
    "dbp",
    "temperature_f",
    "anchor_age",
    "gender_enc",
]
SOURCE = MimicSource(label=LABEL)
LAYOUT_HELP = (
    "either the published layout (train_X.csv, train_y.csv, test_X.csv, test_y.csv; "
    "the X files hold the 8 features, the y files the label column) or the two-file "
    "layout (mimic_train.csv, mimic_test.csv; the label column first, then the 8 "
    "features). The features, in order: heart_rate, resp_rate, spo2, sbp, dbp, "
    "temperature_f, anchor_age, gender_enc"
)


@pytest.fixture(autouse=True)
def no_mimic_dir_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's own CLINAUDIT_MIMIC_DIR must not leak into these tests."""
    monkeypatch.delenv(ENV_VAR, raising=False)


@pytest.fixture(scope="module")
def small() -> Dataset:
    """A small synthetic cohort, z-scored, for the validation tests."""
    return generate_icu_cohort(seed=11, n_train=300, n_test=80).dataset


def load(directory: Path | None) -> Dataset:
    return SOURCE.load(LoadContext(mimic_dir=directory))


def load_error(directory: Path | None) -> str:
    with pytest.raises(DataError) as excinfo:
        load(directory)
    return str(excinfo.value)


def edit_line(path: Path, line_no: int, edit: dict[str, str]) -> None:
    """Replace cells of one line (1-based, the header is line 1) by column name."""
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    cells = lines[line_no - 1].split(",")
    for column, value in edit.items():
        cells[header.index(column)] = value
    lines[line_no - 1] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def map_columns(path: Path, change: Callable[[list[str]], list[str]]) -> None:
    """Rewrite every line's cells with ``change(cells) -> cells``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [",".join(change(line.split(","))) for line in lines]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


# ------------------------------------------------------------------ the round trip


@pytest.mark.parametrize("layout", ["published", "two-file"])
def test_the_synthetic_cohort_written_in_each_layout_loads_back_identical(
    tmp_path: Path, layout: str
) -> None:
    cohort = generate_icu_cohort().dataset
    write_mimic_layout(cohort, tmp_path, layout=layout)  # type: ignore[arg-type]
    loaded = load(tmp_path)
    assert loaded.sha256 == cohort.sha256
    assert loaded.name == "mimic"
    assert (loaded.n_train, loaded.n_test) == (57_839, 12_395)


def test_the_published_layout_has_features_and_labels_in_separate_files(
    tmp_path: Path, small: Dataset
) -> None:
    paths = write_mimic_layout(small, tmp_path, layout="published")
    assert [p.name for p in paths] == ["train_X.csv", "train_y.csv", "test_X.csv", "test_y.csv"]
    assert (tmp_path / "train_X.csv").read_text().splitlines()[0] == ",".join(FEATURES)
    y_lines = (tmp_path / "test_y.csv").read_text().splitlines()
    assert y_lines[0] == LABEL
    assert y_lines[1:] == [str(v) for v in small.y_test.tolist()]


def test_the_two_file_layout_puts_the_label_first(tmp_path: Path, small: Dataset) -> None:
    paths = write_mimic_layout(small, tmp_path, layout="two-file")
    assert [p.name for p in paths] == ["mimic_train.csv", "mimic_test.csv"]
    header = (tmp_path / "mimic_train.csv").read_text().splitlines()[0]
    assert header == ",".join([LABEL, *FEATURES])


def test_only_an_icu_cohort_can_be_written_as_an_extract(tmp_path: Path) -> None:
    other = Dataset(
        name="toy",
        label="label",
        feature_names=("a",),
        X_train=np.zeros((2, 1)),
        y_train=np.array([0, 1]),
        X_test=np.zeros((1, 1)),
        y_test=np.array([0]),
    )
    with pytest.raises(DataError) as excinfo:
        write_mimic_layout(other, tmp_path)
    assert str(excinfo.value) == (
        "toy: features ['a'] are not the extract's ['heart_rate', 'resp_rate', 'spo2', "
        "'sbp', 'dbp', 'temperature_f', 'anchor_age', 'gender_enc']; only an ICU cohort "
        "can be written as a MIMIC-IV extract"
    )


def test_the_source_is_registered_and_the_mimic_variants_use_it() -> None:
    assert SOURCES["mimic"] is MimicSource
    catalog = default_catalog()
    expected = {"mimic_baseline": 55.60, "mimic_calibrated": 59.60, "mimic_hardened": 77.71}
    for alias, paper_sps in expected.items():
        variant = catalog.get(alias)
        assert variant.dataset == SOURCE
        assert variant.paper_reference_sps == paper_sps
        assert variant.params.fgsm.epsilon == 0.05
        assert variant.params.membership_inference.pool_cap == 5000
    # The fourteen sps-v1 variants (wdbc, mimic, icu-synth; flchain 3, whas500 2); the torch
    # variants (sps-v1-wb2) are tested in test_nn_*.
    assert len([n for n in catalog.names() if catalog.find(n).semantics == "sps-v1"]) == 14


# ------------------------------------------------------------- finding the directory


def test_an_explicit_directory_wins_over_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_VAR, "/somewhere/else")
    assert resolve_mimic_dir(tmp_path) == tmp_path


def test_the_environment_variable_is_used_when_no_directory_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small: Dataset
) -> None:
    write_mimic_layout(small, tmp_path)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert resolve_mimic_dir(None) == tmp_path
    assert load(None).sha256 == small.sha256


def test_an_empty_environment_variable_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_VAR, "  ")
    assert resolve_mimic_dir(None) is None


def test_no_directory_at_all_says_how_to_give_one_and_never_falls_back() -> None:
    assert load_error(None) == (
        "the mimic-* variants audit your own MIMIC-IV extract, which is credentialed and "
        "never shipped, and no extract directory was given: pass --clinaudit-mimic-dir DIR "
        "or set the environment variable CLINAUDIT_MIMIC_DIR=DIR. DIR must hold "
        f"{LAYOUT_HELP}. Without MIMIC-IV access, use the icu-synth-* variants (a synthetic "
        "cohort with the same schema)."
    )


def test_the_fingerprint_also_refuses_a_missing_directory() -> None:
    with pytest.raises(DataError, match="no extract directory was given"):
        SOURCE.fingerprint(LoadContext())


def test_a_directory_that_does_not_exist_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert load_error(missing) == (
        f"{missing}: the MIMIC-IV extract directory does not exist; check the path given "
        "with --clinaudit-mimic-dir or CLINAUDIT_MIMIC_DIR"
    )


def test_a_file_instead_of_a_directory_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mimic_train.csv"
    path.write_text("x\n")
    assert load_error(path) == (
        f"{path}: not a directory; --clinaudit-mimic-dir and CLINAUDIT_MIMIC_DIR name the "
        "directory that holds the extract's CSV files, not a file"
    )


def test_an_empty_directory_lists_both_layouts(tmp_path: Path) -> None:
    assert load_error(tmp_path) == (
        f"{tmp_path}: no MIMIC-IV extract found (the directory holds nothing); "
        f"expected {LAYOUT_HELP}"
    )


def test_a_directory_with_other_files_shows_what_it_holds(tmp_path: Path) -> None:
    (tmp_path / "cohort.parquet").write_bytes(b"")
    (tmp_path / "README").write_text("")
    assert load_error(tmp_path) == (
        f"{tmp_path}: no MIMIC-IV extract found (the directory holds README, "
        f"cohort.parquet); expected {LAYOUT_HELP}"
    )


def test_an_incomplete_layout_names_the_missing_files(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    (tmp_path / "test_y.csv").unlink()
    (tmp_path / "train_y.csv").unlink()
    assert load_error(tmp_path) == (
        f"{tmp_path}: incomplete published layout: train_y.csv, test_y.csv missing "
        "(found train_X.csv, test_X.csv); the published layout needs train_X.csv, "
        "train_y.csv, test_X.csv, test_y.csv"
    )


def test_an_incomplete_two_file_layout_names_the_missing_file(
    tmp_path: Path, small: Dataset
) -> None:
    write_mimic_layout(small, tmp_path, layout="two-file")
    (tmp_path / "mimic_test.csv").unlink()
    assert load_error(tmp_path) == (
        f"{tmp_path}: incomplete two-file layout: mimic_test.csv missing (found "
        "mimic_train.csv); the two-file layout needs mimic_train.csv, mimic_test.csv"
    )


def test_both_layouts_at_once_are_ambiguous(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path, layout="published")
    write_mimic_layout(small, tmp_path, layout="two-file")
    assert load_error(tmp_path) == (
        f"{tmp_path}: holds both the published and the two-file layout; keep only one of "
        "them so that it is clear which rows are audited"
    )


# --------------------------------------------------------------------------- columns

FEATURE_LIST = (
    "['heart_rate', 'resp_rate', 'spo2', 'sbp', 'dbp', 'temperature_f', 'anchor_age', 'gender_enc']"
)


def test_a_missing_feature_column_is_named(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "train_X.csv"
    map_columns(path, lambda cells: cells[:2] + cells[3:])  # drop spo2
    assert load_error(tmp_path) == (
        f"{path}: missing column(s) 'spo2'; expected the columns {FEATURE_LIST} in this "
        "order, found ['heart_rate', 'resp_rate', 'sbp', 'dbp', 'temperature_f', "
        "'anchor_age', 'gender_enc']"
    )


def test_reordered_feature_columns_are_refused(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "test_X.csv"
    map_columns(path, lambda cells: [cells[0], cells[1], cells[2], cells[4], cells[3], *cells[5:]])
    assert load_error(tmp_path) == (
        f"{path}: columns in the wrong order; expected the columns {FEATURE_LIST} in this "
        "order, found ['heart_rate', 'resp_rate', 'spo2', 'dbp', 'sbp', 'temperature_f', "
        "'anchor_age', 'gender_enc']; reorder them (models read the features by position)"
    )


def test_a_label_column_that_is_not_first_counts_as_reordered(
    tmp_path: Path, small: Dataset
) -> None:
    write_mimic_layout(small, tmp_path, layout="two-file")
    path = tmp_path / "mimic_train.csv"
    map_columns(path, lambda cells: [*cells[1:], cells[0]])
    with pytest.raises(DataError) as excinfo:
        load(tmp_path)
    assert str(excinfo.value).startswith(
        f"{path}: columns in the wrong order; expected the columns "
    )
    assert str(excinfo.value).endswith(
        "'anchor_age', 'gender_enc', 'hospital_expire_flag']; reorder them (models read "
        "the features by position)"
    )


def test_an_extra_column_is_refused(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "train_X.csv"
    map_columns(path, lambda cells: [*cells, "bmi" if cells[0] == "heart_rate" else "0.5"])
    assert load_error(tmp_path) == (
        f"{path}: unexpected column(s) 'bmi'; expected the columns {FEATURE_LIST} in this "
        f"order, found {FEATURE_LIST[:-1]}, 'bmi']; drop them"
    )


def test_a_pandas_index_column_gets_a_hint(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "train_y.csv"
    counter = iter(range(10_000))
    map_columns(path, lambda cells: [str(next(counter)) if cells[0] != LABEL else "", *cells])
    assert load_error(tmp_path) == (
        f"{path}: unexpected column(s) '' (an unnamed column is usually a pandas index: "
        "write with index=False); expected the columns ['hospital_expire_flag'] in this "
        "order, found ['', 'hospital_expire_flag']; drop them"
    )


def test_a_wrongly_named_label_file_column_is_a_missing_label(
    tmp_path: Path, small: Dataset
) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "train_y.csv"
    edit_line(path, 1, {LABEL: "label"})
    assert load_error(tmp_path) == (
        f"{path}: missing column(s) 'hospital_expire_flag'; expected the columns "
        "['hospital_expire_flag'] in this order, found ['label']"
    )


# ---------------------------------------------------------------------------- values


def test_a_non_numeric_value_is_named_by_file_line_and_column(
    tmp_path: Path, small: Dataset
) -> None:
    write_mimic_layout(small, tmp_path, layout="two-file")
    path = tmp_path / "mimic_test.csv"
    edit_line(path, 5, {"sbp": "120/80"})
    assert load_error(tmp_path) == (
        f"{path}, line 5, column 'sbp': expected a number, got '120/80'; fill or drop "
        "missing values before auditing"
    )


def test_a_missing_value_is_named_by_file_line_and_column(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "train_X.csv"
    edit_line(path, 3, {"temperature_f": ""})
    assert load_error(tmp_path) == (
        f"{path}, line 3, column 'temperature_f': expected a number, got 'an empty cell'; "
        "fill or drop missing values before auditing"
    )


def test_a_nan_value_is_refused(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "train_X.csv"
    edit_line(path, 2, {"spo2": "NaN"})
    assert load_error(tmp_path) == (
        f"{path}, line 2, column 'spo2': 'NaN' is not a finite number; impute or drop it "
        "before auditing"
    )


@pytest.mark.parametrize("layout", ["published", "two-file"])
def test_a_label_other_than_zero_or_one_is_refused(
    tmp_path: Path, small: Dataset, layout: str
) -> None:
    write_mimic_layout(small, tmp_path, layout=layout)  # type: ignore[arg-type]
    path = tmp_path / ("train_y.csv" if layout == "published" else "mimic_train.csv")
    edit_line(path, 4, {LABEL: "2"})
    assert load_error(tmp_path) == (
        f"{path}, line 4, column 'hospital_expire_flag': labels must be 0 or 1, got 2.0; "
        "code the adverse outcome as 1 and every other as 0"
    )


def test_x_and_y_files_with_different_row_counts_are_refused(
    tmp_path: Path, small: Dataset
) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "test_y.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1]) + "\n")
    assert load_error(tmp_path) == (
        f"{path}: 79 label rows, but test_X.csv has 80 feature rows; the X and y files "
        "must describe the same stays, row for row"
    )


def test_a_split_without_rows_is_refused(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path, layout="two-file")
    path = tmp_path / "mimic_test.csv"
    path.write_text(",".join([LABEL, *FEATURES]) + "\n")
    assert load_error(tmp_path) == (
        f"{path}: no data rows after the header; export the split's stays"
    )


def test_a_training_split_of_one_class_is_refused(tmp_path: Path, small: Dataset) -> None:
    write_mimic_layout(small, tmp_path)
    path = tmp_path / "train_y.csv"
    path.write_text(LABEL + "\n" + "0\n" * small.n_train)
    assert load_error(tmp_path) == (
        f"{path}: every training label is 0; the training split needs both survivors (0) "
        "and deaths (1)"
    )


# ------------------------------------------------------------------------- z-scoring


def write_two_file(directory: Path, train_rows: list[list[float]]) -> Path:
    """A two-file extract with hand-made training rows and a fine test split."""
    directory.mkdir(exist_ok=True)
    header = ",".join([LABEL, *FEATURES])
    train = directory / "mimic_train.csv"
    train.write_text(
        header + "\n" + "".join(",".join(repr(v) for v in row) + "\n" for row in train_rows)
    )
    (directory / "mimic_test.csv").write_text(header + "\n" + ",".join(["0"] + ["0.0"] * 8) + "\n")
    return train


# Four training stays. Every column but the first is +-1: mean 0, std 1 exactly.
UNIT = [-1.0, 1.0, -1.0, 1.0]


def rows(first: list[float], labels: tuple[int, ...] = (0, 1, 0, 1)) -> list[list[float]]:
    return [[float(labels[i]), first[i], *[UNIT[i]] * 7] for i in range(4)]


def test_raw_units_are_refused_as_not_z_scored(tmp_path: Path) -> None:
    # heart rate 60, 80, 100, 80 bpm: mean 80, population std sqrt(200) = 14.14
    train = write_two_file(tmp_path, rows([60.0, 80.0, 100.0, 80.0]))
    assert load_error(tmp_path) == (
        f"{train}: column(s) not z-scored: 'heart_rate' (mean 80, std 14.14); every feature "
        "needs training mean within 0.1 of 0 and standard deviation within 0.1 of 1. "
        "Standardize each feature with the training split's mean and standard deviation "
        "(test rows too, with the same statistics): the ICU models have no scaler"
    )


def test_every_column_that_is_not_z_scored_is_listed(tmp_path: Path) -> None:
    # The raw synthetic cohort: all eight columns are in real units (sex as 0/1).
    cohort = generate_icu_cohort(seed=11, n_train=300, n_test=80)
    raw = Dataset(
        name="raw",
        label=LABEL,
        feature_names=tuple(FEATURES),
        X_train=cohort.raw_train,
        y_train=cohort.dataset.y_train,
        X_test=cohort.raw_test,
        y_test=cohort.dataset.y_test,
    )
    write_mimic_layout(raw, tmp_path)
    message = load_error(tmp_path)
    assert message.startswith(
        f"{tmp_path / 'train_X.csv'}: column(s) not z-scored: 'heart_rate' (mean "
    )
    assert [name for name in FEATURES if f"'{name}' (mean" in message] == FEATURES


def test_min_max_scaling_is_not_z_scoring(tmp_path: Path) -> None:
    # 0, 0.5, 1, 0.5: mean 0.5, std sqrt(0.125) = 0.3536
    train = write_two_file(tmp_path, rows([0.0, 0.5, 1.0, 0.5]))
    assert load_error(tmp_path).startswith(
        f"{train}: column(s) not z-scored: 'heart_rate' (mean 0.5, std 0.3536); "
    )


@pytest.mark.parametrize(
    ("column", "accepted"),
    [
        # shifted by 0.09: mean 0.09, std 1 (inside the tolerance)
        ([-0.91, 1.09, -0.91, 1.09], True),
        # shifted by 0.11: mean 0.11 (outside)
        ([-0.89, 1.11, -0.89, 1.11], False),
        # scaled by 1.09: std 1.09 (inside); by 1.12: std 1.12 (outside)
        ([-1.09, 1.09, -1.09, 1.09], True),
        ([-1.12, 1.12, -1.12, 1.12], False),
    ],
)
def test_z_scoring_tolerates_small_deviations_from_zero_mean_and_unit_std(
    tmp_path: Path, column: list[float], accepted: bool
) -> None:
    write_two_file(tmp_path, rows(column))
    if accepted:
        assert load(tmp_path).n_train == 4
    else:
        assert "column(s) not z-scored: 'heart_rate'" in load_error(tmp_path)


# ----------------------------------------------------------------------- fingerprint


@pytest.mark.parametrize("layout", ["published", "two-file"])
def test_the_fingerprint_hashes_the_bytes_of_every_file(
    tmp_path: Path, small: Dataset, layout: str
) -> None:
    paths = write_mimic_layout(small, tmp_path, layout=layout)  # type: ignore[arg-type]
    context = LoadContext(mimic_dir=tmp_path)
    fingerprint = SOURCE.fingerprint(context)
    assert fingerprint == {
        "source": "mimic",
        "label": LABEL,
        "layout": layout,
        "files": {path.name: sha256_file(path) for path in paths},
    }
    # Any edit, even one that parses to the same number, changes the key.
    edit_line(paths[-1], 2, {LABEL: "1.0" if small.y_test[0] == 1 else "0.0"})
    assert SOURCE.fingerprint(context) != fingerprint


def test_load_mimic_extract_is_the_function_behind_the_source(
    tmp_path: Path, small: Dataset
) -> None:
    write_mimic_layout(small, tmp_path, layout="two-file")
    assert load_mimic_extract(tmp_path, label=LABEL).sha256 == small.sha256
