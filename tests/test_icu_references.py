"""ICU references: the vectorized auditor against the oracle, and MIMIC layouts against icu-synth."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import literal_oracle
import pytest

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.references import get_reference
from pytest_clinaudit.catalog.variants import Catalog
from pytest_clinaudit.reference.attacks.audit import audit
from pytest_clinaudit.reference.data import Dataset, LoadContext
from pytest_clinaudit.reference.data.mimic import write_mimic_layout
from pytest_clinaudit.reference.models.recipes import Artifact, build_model

ICU = ("icu-synth-baseline", "icu-synth-calibrated", "icu-synth-hard")


@pytest.fixture(scope="module")
def icu(catalog: Catalog) -> Dataset:
    variant = catalog.get("icu-synth-baseline")
    data: Dataset = variant.dataset.load(variant.context)
    return data


@pytest.mark.slow
@pytest.mark.parametrize("name", ICU)
def test_icu_synth_references_equal_the_literal_oracle(
    name: str, catalog: Catalog, icu: Dataset
) -> None:
    variant = catalog.get(name)
    model = Artifact.from_model(
        build_model(variant.model, variant.params.fgsm.surrogate, icu)
    ).load()
    result = audit(model, icu, variant.params)
    # Two walk rows: a literal walk is up to 100 single-row predictions per row.
    rows = (0, 1)
    expected = literal_oracle.audit(
        model, icu.X_train, icu.y_train, icu.X_test, icu.y_test, variant.params, rows
    )
    assert result.components["fgsm_robustness"] == pytest.approx(
        expected["fgsm"]["score"], abs=1e-12
    )
    assert result.components["membership_inference_resistance"] == expected["membership"]["score"]
    assert result.details["mi_accuracy"] == expected["membership"]["accuracy"]
    assert result.components["calibration_ece"] == pytest.approx(
        expected["calibration"]["score"], abs=1e-12
    )
    assert [result.details["steps_to_flip"][i] for i in rows] == expected["boundary"]["steps"]


@pytest.mark.parametrize("suffix", ["baseline", "calibrated", "hard"])
def test_mimic_and_icu_synth_variants_differ_only_in_their_data_source(
    suffix: str, catalog: Catalog
) -> None:
    mimic, synth = catalog.get(f"mimic-{suffix}"), catalog.get(f"icu-synth-{suffix}")
    assert mimic.params == synth.params
    assert mimic.model == synth.model
    assert dataclasses.replace(mimic.tolerance) == synth.tolerance
    assert mimic.dataset.label == synth.dataset.label


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["published", "two-file"])
def test_the_synthetic_cohort_as_a_mimic_extract_gives_the_icu_synth_reference(
    layout: str, catalog: Catalog, icu: Dataset, tmp_path: Path
) -> None:
    extract = tmp_path / "extract"
    write_mimic_layout(icu, extract, layout=layout)
    cache = ReferenceCache(tmp_path / "cache")
    mimic = catalog.get("mimic-baseline")
    as_mimic = get_reference(mimic, cache=cache, context=LoadContext(mimic.path.parent, extract))
    as_synth = get_reference(catalog.get("icu-synth-baseline"), cache=cache)
    assert as_mimic.report == as_synth.report
    assert as_mimic.artifact_sha256 == as_synth.artifact_sha256
