"""Variant files: the shipped ones load, and every mistake names its file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_clinaudit.catalog.variants import (
    Catalog,
    VariantError,
    builtin_variant_files,
    default_catalog,
    load_audit_params,
    load_variant,
)

WDBC_HARD = next(p for p in builtin_variant_files() if p.name == "wdbc-hard.toml")


def _variant_text(**replace: str) -> str:
    text = WDBC_HARD.read_text(encoding="utf-8")
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    return text


def _write(tmp_path: Path, text: str, name: str = "custom.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_every_shipped_variant_loads_with_its_paper_alias() -> None:
    catalog = default_catalog()
    for name, alias in (
        ("wdbc-baseline", "baseline"),
        ("wdbc-calibrated", "calibrated"),
        ("wdbc-hard", "hardened"),
    ):
        assert catalog.get(alias) is catalog.get(name)


def test_an_unknown_key_is_rejected_with_file_and_key(tmp_path: Path) -> None:
    path = _write(
        tmp_path, _variant_text(**{"max_steps = 100": "max_steps = 100\nmax_stpes = 100"})
    )
    with pytest.raises(VariantError) as excinfo:
        load_variant(path)
    message = str(excinfo.value)
    assert message.startswith(f"{path}: boundary: unknown key 'max_stpes'")
    assert "allowed: max_steps, min_norm, n_samples, seed, step_size" in message


def test_a_missing_key_is_rejected_with_file_and_key(tmp_path: Path) -> None:
    path = _write(tmp_path, _variant_text(**{"ece_scale = 12.0": ""}))
    with pytest.raises(VariantError, match=r"custom\.toml: calibration: missing key 'ece_scale'$"):
        load_variant(path)


def test_a_missing_section_is_rejected(tmp_path: Path) -> None:
    text = _variant_text()
    start = text.index("[tolerance]")
    path = _write(tmp_path, text[:start])
    with pytest.raises(VariantError, match="top level: missing key 'tolerance'"):
        load_variant(path)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "n_samples = 50",
            'n_samples = "50"',
            "boundary.n_samples: expected an integer, got the string '50'",
        ),
        (
            "n_samples = 50",
            "n_samples = true",
            "boundary.n_samples: expected an integer, got the boolean true",
        ),
        (
            "step_size = 0.05",
            "step_size = -0.05",
            "boundary.step_size: must be positive, got -0.05",
        ),
        (
            'class_weight = "none"',
            'class_weight = "heavy"',
            "fgsm.surrogate.class_weight: expected one of 'balanced', 'none', got the string 'heavy'",
        ),
        (
            "calibration_ece = 0.20",
            "calibration_ece = 0.30",
            "weights: must be non-negative and sum to 1",
        ),
        ('estimator = "xgboost"', 'estimator = "svm"', "model.estimator: expected one of"),
        ('source = "wdbc" ', 'source = "kaggle" ', "dataset.source: expected one of 'wdbc', 'csv'"),
        (
            'semantics = "sps-v1"',
            'semantics = "sps-v2"',
            "semantics: this version implements 'sps-v1', got 'sps-v2'",
        ),
    ],
)
def test_wrong_values_are_rejected_with_what_was_expected(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    path = _write(tmp_path, _variant_text(**{old: new}))
    with pytest.raises(VariantError) as excinfo:
        load_variant(path)
    assert message in str(excinfo.value)
    assert str(path) in str(excinfo.value)


def test_invalid_toml_names_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path, "name = ")
    with pytest.raises(VariantError, match=r"custom\.toml: not valid TOML"):
        load_variant(path)


def test_an_unknown_variant_lists_the_valid_names_and_aliases() -> None:
    with pytest.raises(VariantError) as excinfo:
        default_catalog().get("wdbc-hrad")
    assert "unknown variant 'wdbc-hrad'; valid variants: " in str(excinfo.value)
    assert "wdbc-hard (hardened)" in str(excinfo.value)


def test_a_grader_variant_may_not_shadow_a_shipped_name(tmp_path: Path) -> None:
    _write(tmp_path, _variant_text(**{'name = "wdbc-hard"': 'name = "mine"'}), "mine.toml")
    with pytest.raises(VariantError, match="the name 'hardened' is already taken by wdbc-hard"):
        default_catalog([tmp_path])


def test_a_grader_variant_directory_adds_variants(tmp_path: Path) -> None:
    _write(
        tmp_path,
        _variant_text(
            **{'name = "wdbc-hard"': 'name = "mine"', 'aliases = ["hardened"]': "aliases = []"}
        ),
        "mine.toml",
    )
    catalog = default_catalog([tmp_path])
    assert catalog.get("mine").path == tmp_path / "mine.toml"
    assert "mine" in catalog.names()


def test_audit_parameters_load_from_a_params_only_file(tmp_path: Path) -> None:
    text = WDBC_HARD.read_text(encoding="utf-8")
    params_only = text[text.index("[fgsm]") : text.index("[tolerance]")]
    params = load_audit_params(_write(tmp_path, params_only))
    assert params == load_variant(WDBC_HARD).params
    with pytest.raises(VariantError, match="top level: unknown key 'model'"):
        load_audit_params(
            _write(tmp_path, params_only + '\n[model]\nestimator = "x"\n', "bad.toml")
        )


def test_catalog_rejects_duplicate_names_within_itself() -> None:
    variant = load_variant(WDBC_HARD)
    catalog = Catalog([variant])
    with pytest.raises(VariantError, match="already taken"):
        catalog.add(variant)
