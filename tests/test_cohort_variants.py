"""The flchain-* and whas500-* variants end to end: references, the scripted agent, the CLI.

Each variant's workspace is built once per test run (``workspace_helpers``),
so the oracle comparison, the agent's run and the CLI checks share one model.
All of it needs scikit-survival (the ``cohorts`` extra, part of ``test``); the
flchain-mlp* variants also need torch, and their references are compared with
the literal oracle in tests/test_nn_oracle.py.
"""

from __future__ import annotations

import importlib.util
import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import literal_oracle
import pytest
from grading_helpers import warm_cache_dir
from workspace_helpers import built_workspace, manifest, workspace_copy

from pytest_clinaudit.adapters import scripted_agent
from pytest_clinaudit.adapters.workspace import GRADER_DIR, MANIFEST_NAME, WORKSPACE_DIR
from pytest_clinaudit.catalog.variants import Catalog
from pytest_clinaudit.cli import main
from pytest_clinaudit.grading.runner import grade
from pytest_clinaudit.reference.data import Dataset

pytest.importorskip("sksurv")

VARIANTS = (
    "flchain-baseline",
    "flchain-calibrated",
    "flchain-hard",
    "whas500-baseline",
    "whas500-hard",
)
TORCH_VARIANTS = ("flchain-mlp", "flchain-mlp-pgd", "flchain-mlp-dp", "flchain-mlp-clip")
NEEDS_TORCH = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the flchain-mlp* variants need pip install 'pytest-clinaudit[torch]'",
)
EVERY_VARIANT = [*VARIANTS, *(pytest.param(name, marks=NEEDS_TORCH) for name in TORCH_VARIANTS)]
WALK_ROWS = (0, 1, 2, 3, 4)
"""Boundary-walk rows the literal oracle repeats (up to 100 single-row predictions each)."""


@pytest.fixture(scope="module")
def data(catalog: Catalog) -> dict[str, Dataset]:
    """Each cohort's dataset, loaded once."""
    loaded = {}
    for name in ("flchain-baseline", "whas500-baseline"):
        variant = catalog.get(name)
        loaded[name.split("-")[0]] = variant.dataset.load(variant.context)
    return loaded


def test_clinaudit_variants_lists_the_cohort_families(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["variants"]) == 0
    listed = {line.split()[0]: line.split()[2] for line in capsys.readouterr().out.splitlines()[2:]}
    for name in VARIANTS + TORCH_VARIANTS:
        assert listed[name] == name.split("-")[0]


@pytest.mark.slow
@pytest.mark.parametrize("name", VARIANTS)
def test_the_cohort_references_equal_the_literal_oracle(
    name: str, catalog: Catalog, data: dict[str, Dataset], tmp_path_factory: pytest.TempPathFactory
) -> None:
    variant = catalog.get(name)
    dataset = data[name.split("-")[0]]
    built = manifest(tmp_path_factory, name)
    assert built["data_sha256"] == dataset.sha256
    model_bytes = (
        built_workspace(tmp_path_factory, name) / WORKSPACE_DIR / "model.pkl"
    ).read_bytes()
    model = pickle.loads(model_bytes)  # noqa: S301 - the artifact this test run built
    expected = literal_oracle.audit(
        model,
        dataset.X_train,
        dataset.y_train,
        dataset.X_test,
        dataset.y_test,
        variant.params,
        WALK_ROWS,
    )
    details = built["reference"]["details"]
    unrounded = details["components_unrounded"]
    assert unrounded["fgsm_robustness"] == pytest.approx(expected["fgsm"]["score"], abs=1e-12)
    assert unrounded["membership_inference_resistance"] == expected["membership"]["score"]
    assert details["mi_accuracy"] == expected["membership"]["accuracy"]
    assert unrounded["calibration_ece"] == pytest.approx(
        expected["calibration"]["score"], abs=1e-12
    )
    assert [details["steps_to_flip"][i] for i in WALK_ROWS] == expected["boundary"]["steps"]


@pytest.mark.slow
@pytest.mark.parametrize("name", EVERY_VARIANT)
def test_the_scripted_agent_scores_one_on_every_cohort_variant(
    name: str, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    out = workspace_copy(tmp_path_factory, name, tmp_path / name)
    workspace = out / WORKSPACE_DIR
    subprocess.run(
        [sys.executable, str(Path(scripted_agent.__file__)), ".", "--mode", "correct"],
        cwd=workspace,
        check=True,
        capture_output=True,
    )
    for profile in ("strict", "metr"):
        document = grade(
            workspace / "report.json",
            name,
            profile=profile,
            manifest=out / GRADER_DIR / MANIFEST_NAME,
            cache_dir=warm_cache_dir(tmp_path_factory),
        )
        failed = [c["id"] for c in document["checks"] if not c["passed"] and not c["skipped"]]
        assert document["score"] == 1.0, (profile, failed)
        assert document["category"] == "none"


@pytest.mark.slow
@pytest.mark.parametrize("name", EVERY_VARIANT)
def test_clinaudit_build_and_audit_reproduce_the_shared_build(
    name: str,
    tmp_path_factory: pytest.TempPathFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shared: dict[str, Any] = manifest(tmp_path_factory, name)
    cache = str(warm_cache_dir(tmp_path_factory))
    assert (
        main(["build", "--variant", name, "--out", str(tmp_path), "--cache-dir", cache, "-q"]) == 0
    )
    rebuilt = json.loads((tmp_path / GRADER_DIR / MANIFEST_NAME).read_text(encoding="utf-8"))
    # Building is deterministic: a second build gives the same bytes and the same reference.
    assert rebuilt["artifact_sha256"] == shared["artifact_sha256"]
    assert rebuilt["reference"] == shared["reference"]
    capsys.readouterr()
    out = tmp_path / "reference.json"
    assert main(["audit", "--variant", name, "--cache-dir", cache, "--out", str(out), "-q"]) == 0
    assert json.loads(out.read_text(encoding="utf-8")) == shared["reference"]
    assert capsys.readouterr().out.startswith(f"{name}: SPS {shared['reference']['sps']:.2f}")
