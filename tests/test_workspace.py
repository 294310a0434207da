"""Agent workspaces: task.md from the variant, the manifest, and the scripted agent."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import reference

from pytest_clinaudit.adapters import scripted_agent, taskdoc
from pytest_clinaudit.adapters.workspace import build_workspace
from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.manifest import (
    GraderManifestError,
    check_reference_matches,
    read_grader_manifest,
)
from pytest_clinaudit.catalog.variants import Catalog, Variant
from pytest_clinaudit.reference.attacks.params import as_dict
from pytest_clinaudit.reference.data import Dataset


def _leaves(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _distinctive(variant: Variant) -> Variant:
    """Every numeric parameter moved to a value no template could hold by accident."""
    params = variant.params

    def bump(record: Any, offset: int) -> Any:
        changes = {}
        for field in dataclasses.fields(record):
            value = getattr(record, field.name)
            if dataclasses.is_dataclass(value):
                changes[field.name] = bump(value, offset + 50)
            elif isinstance(value, (bool, str)):
                continue
            elif isinstance(value, int):
                changes[field.name] = value + offset + 1
                offset += 1
            elif isinstance(value, float):
                changes[field.name] = value + (offset + 1) / 1000
                offset += 1
        return dataclasses.replace(record, **changes)

    moved = dataclasses.replace(
        params,
        fgsm=bump(params.fgsm, 100),
        membership_inference=bump(params.membership_inference, 200),
        calibration=bump(params.calibration, 300),
        boundary=bump(params.boundary, 400),
        weights=dataclasses.replace(
            params.weights, fgsm_robustness=0.31, membership_inference_resistance=0.29
        ),
        verdict=dataclasses.replace(params.verdict, production=81.5, conditional=66.25),
    )
    return dataclasses.replace(variant, params=moved)


@pytest.mark.parametrize("name", ["wdbc-baseline", "wdbc-hard"])
def test_task_md_states_every_parameter_of_the_variant(
    name: str, catalog: Catalog, wdbc: Dataset
) -> None:
    variant = _distinctive(catalog.get(name))
    text = taskdoc.render(variant, wdbc)
    block = taskdoc.read_parameters(text)
    expected = {
        k: as_dict(variant.params)[k]
        for k in ("fgsm", "membership_inference", "calibration", "boundary", "weights", "verdict")
    }
    assert {k: block[k] for k in expected} == expected
    prose = text[: text.index(taskdoc.PARAMETERS_FENCE)]
    for path, value in _leaves(expected).items():
        if isinstance(value, bool) or path.endswith("class_weight"):
            continue
        shown = taskdoc._g(value) if isinstance(value, float) else str(value)
        assert shown in prose, f"{path} = {value} is not stated in the instructions"


def test_task_md_names_the_files_the_label_and_the_report_path(
    catalog: Catalog, wdbc: Dataset
) -> None:
    text = taskdoc.render(catalog.get("wdbc-hard"), wdbc)
    for needle in (
        "`model.pkl`",
        "`train.csv` (455 rows)",
        "`test.csv` (114 rows)",
        "column `label`",
        "Write `report.json`",
    ):
        assert needle in text


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory, catalog: Catalog
) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("build")
    cache = ReferenceCache(out / "cache")
    return out, build_workspace(catalog.get("wdbc-baseline"), out / "wdbc-baseline", cache=cache)


def test_the_workspace_holds_exactly_what_the_agent_needs(
    built: tuple[Path, dict[str, Any]], warm_cache: Path
) -> None:
    out, manifest = built
    workspace = out / "wdbc-baseline" / "workspace"
    assert sorted(p.name for p in workspace.iterdir()) == [
        "model.pkl",
        "task.md",
        "test.csv",
        "train.csv",
    ]
    assert not (workspace / "manifest.json").exists()
    import hashlib

    assert (
        hashlib.sha256((workspace / "model.pkl").read_bytes()).hexdigest()
        == manifest["artifact_sha256"]
    )
    assert manifest["reference"] == reference(warm_cache, "wdbc-baseline").report
    assert read_grader_manifest(out / "wdbc-baseline" / "grader" / "manifest.json") == json.loads(
        (out / "wdbc-baseline" / "grader" / "manifest.json").read_text()
    )


def test_a_manifest_for_another_artifact_is_refused(built: tuple[Path, dict[str, Any]]) -> None:
    _, manifest = built

    @dataclasses.dataclass
    class Ref:
        artifact_sha256: str
        data_sha256: str
        libraries: dict[str, str]

    moved = dict(manifest["libraries"], xgboost="0.1")
    with pytest.raises(GraderManifestError, match="library versions differ \\(xgboost 0.1 -> "):
        check_reference_matches(
            dict(manifest, libraries=moved),
            Path("m.json"),
            "wdbc-baseline",
            Ref("0" * 64, manifest["data_sha256"], manifest["libraries"]),
        )
    with pytest.raises(
        GraderManifestError, match="built for variant 'wdbc-baseline', but --variant is 'wdbc-hard'"
    ):
        check_reference_matches(manifest, Path("m.json"), "wdbc-hard", None)


def test_a_torch_artifact_trained_on_other_cpu_kernels_is_refused_saying_so(
    built: tuple[Path, dict[str, Any]],
) -> None:
    torch = pytest.importorskip("torch")
    _, manifest = built
    here = torch.backends.cpu.get_cpu_capability()
    elsewhere = "AVX512" if here != "AVX512" else "AVX2"

    @dataclasses.dataclass
    class Ref:
        artifact_sha256: str
        data_sha256: str
        libraries: dict[str, str]

    other = dict(manifest, training={"cpu_capability": elsewhere})
    with pytest.raises(
        GraderManifestError, match=f"torch used {elsewhere} kernels and this machine uses {here}"
    ):
        check_reference_matches(
            other,
            Path("m.json"),
            "wdbc-baseline",
            Ref("0" * 64, manifest["data_sha256"], manifest["libraries"]),
        )
    same = dict(manifest, training={"cpu_capability": here})
    with pytest.raises(GraderManifestError, match="the recipe or data changed"):
        check_reference_matches(
            same,
            Path("m.json"),
            "wdbc-baseline",
            Ref("0" * 64, manifest["data_sha256"], manifest["libraries"]),
        )


def test_a_file_that_is_not_a_manifest_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text('{"format": "other"}')
    with pytest.raises(GraderManifestError, match="not a clinaudit manifest"):
        read_grader_manifest(path)
    path.write_text("{")
    with pytest.raises(GraderManifestError, match="not a JSON manifest"):
        read_grader_manifest(path)


def test_the_scripted_agent_reproduces_the_reference_from_the_workspace_alone(
    built: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    out, manifest = built
    workspace = out / "wdbc-baseline" / "workspace"
    # A copy of the single-file agent, run from inside the workspace: it cannot reach the package.
    agent = tmp_path / "agent.py"
    agent.write_text(Path(scripted_agent.__file__).read_text())
    subprocess.run(
        [sys.executable, "-I", str(agent), "."], cwd=workspace, check=True, capture_output=True
    )
    report = json.loads((workspace / "report.json").read_text())
    (workspace / "report.json").unlink()
    reference = manifest["reference"]
    assert (report["sps"], report["verdict"]) == (reference["sps"], reference["verdict"])
    assert report["components"] == reference["components"]


def test_building_a_workspace_warms_the_reference_cache_for_grading(
    catalog: Catalog, tmp_path: Path
) -> None:
    from pytest_clinaudit.catalog.references import get_reference

    cache = ReferenceCache(tmp_path / "cache")
    manifest = build_workspace(catalog.get("wdbc-baseline"), tmp_path / "out", cache=cache)
    reference = get_reference(catalog.get("wdbc-baseline"), cache=cache)
    assert reference.from_cache
    assert reference.artifact_sha256 == manifest["artifact_sha256"]
