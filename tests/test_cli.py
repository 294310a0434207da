"""The clinaudit command: variants, audits of variants and of a model owner's own model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from grading_helpers import reference

from pytest_clinaudit.cli import main
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.reference.data import Dataset, write_csvs
from pytest_clinaudit.reference.models.recipes import Artifact


def test_variants_prints_a_table_of_names_aliases_datasets_and_recipes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["variants"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == [
        "variant",
        "aliases",
        "dataset",
        "model",
        "recipe",
        "paper",
        "SPS",
    ]
    row = next(
        line.split(None, 2) for line in out.splitlines() if line.startswith("wdbc-calibrated ")
    )
    assert row[:2] == ["wdbc-calibrated", "calibrated"]
    assert "wdbc  " in row[2]
    assert "scaler + sigmoid-calibrated(cv=5) random_forest" in row[2]


def test_variants_json_is_machine_readable(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["variants", "--json"]) == 0
    names = [v["name"] for v in json.loads(capsys.readouterr().out)]
    assert {"wdbc-baseline", "wdbc-calibrated", "wdbc-hard"} <= set(names)


def test_audit_of_a_variant_writes_the_submission_format_plus_details(
    tmp_path: Path, cache_dir: Path, warm_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = reference(warm_cache, "wdbc-baseline").report  # computed in another cache
    out = tmp_path / "report.json"
    assert main(["audit", "--variant", "baseline", "--out", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    assert list(report) == ["sps", "components", "verdict", "details"]
    assert list(report["components"]) == list(COMPONENTS)
    assert (report["sps"], report["verdict"]) == (expected["sps"], expected["verdict"])
    printed = capsys.readouterr().out
    assert f"wdbc-baseline: SPS {expected['sps']:.2f}  {expected['verdict']}" in printed
    assert f"report written to {out}" in printed


def test_an_unknown_variant_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--variant", "nope"]) == 2
    assert "unknown variant 'nope'; valid variants:" in capsys.readouterr().err


def test_audit_without_a_variant_or_a_model_explains_both_ways(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["audit"]) == 2
    err = capsys.readouterr().err
    assert (
        "give --variant NAME, or audit your own model with --model, --train, --test and --label"
        in err
    )


def test_variant_and_model_flags_do_not_mix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", "--variant", "baseline", "--model", str(tmp_path / "m.pkl")]) == 2
    assert "--variant cannot be combined with --model" in capsys.readouterr().err


def test_a_model_owner_audits_their_own_pickle_on_their_own_csvs(
    tmp_path: Path,
    cache_dir: Path,
    wdbc: Dataset,
    wdbc_artifacts: dict[str, Artifact],
    capsys: pytest.CaptureFixture[str],
    warm_cache: Path,
) -> None:
    train, test = write_csvs(wdbc, tmp_path, train_name="train.csv", test_name="test.csv")
    model = tmp_path / "model.pkl"
    model.write_bytes(wdbc_artifacts["wdbc-baseline"].data)
    out = tmp_path / "own.json"
    argv = [
        "audit",
        "--model",
        str(model),
        "--train",
        str(train),
        "--test",
        str(test),
        "--label",
        "label",
    ]
    assert main([*argv, "--params", "wdbc-baseline", "--out", str(out), "-q"]) == 0
    report = json.loads(out.read_text())
    # The CSVs round-trip exactly, so the owner's audit equals the variant's reference.
    assert report["sps"] == reference(warm_cache, "wdbc-baseline").sps
    assert report["details"]["artifact_sha256"] == wdbc_artifacts["wdbc-baseline"].sha256
    assert "unpickling" in capsys.readouterr().err


def test_a_missing_model_file_is_reported_before_anything_is_unpickled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "audit",
        "--model",
        str(tmp_path / "absent.pkl"),
        "--train",
        "a.csv",
        "--test",
        "b.csv",
        "--label",
        "y",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "absent.pkl: no such file" in err
    assert "unpickling" not in err
