"""Built game instances (slow): one graph for the zoo, the margins held, the workspace, grading.

Each instance is built once per test run (``clinaudit build`` into a shared
cache, behind a file lock) and reused by every test here: three of the ICU game
and one of flchain-game (real patients, missing values).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from game_helpers import GAME, built_cache_dir, built_workspace, game_variant, truth_report
from game_v2_helpers import truth_report_v2
from nn_helpers import NEEDS_SKSURV

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.games import GameVariant
from pytest_clinaudit.catalog.instances import GameReference, get_game_reference, programs
from pytest_clinaudit.reference.game.draw import draw_plan, plan_redraw
from pytest_clinaudit.reference.game.network import Weights, program_signature
from pytest_clinaudit.reference.game.verdicts import judge

HARD = "icu-synth-game-hard"
INSTANCES = ((GAME, 1), (GAME, 2), (GAME, 3), ("flchain-game", 2), (HARD, 1))

pytestmark = pytest.mark.slow


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(
            (game, seed),
            id=f"{game}-{seed}",
            marks=[NEEDS_SKSURV] if game.startswith("flchain") else [],
        )
        for game, seed in INSTANCES
    ],
)
def instance(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    game, seed = request.param
    return built_workspace(tmp_path_factory, seed, game)


def _manifest(root: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((root / "grader" / "manifest.json").read_text())
    return manifest


def _reference(root: Path, cache: ReferenceCache) -> GameReference:
    """The instance as a grader holding its manifest reads it: by its seed and secret."""
    manifest = _manifest(root)
    return get_game_reference(
        _variant(root), manifest["seed"], secret=manifest["secret"], cache=cache
    )


def _variant(root: Path) -> GameVariant:
    return game_variant(_manifest(root)["variant"])


def test_every_program_of_a_zoo_shows_the_same_graph_and_buffer_shapes(instance: Path) -> None:
    signatures = {
        path.name: program_signature(path.read_bytes())
        for path in sorted((instance / "workspace" / "models").glob("*.pt2"))
    }
    assert len(signatures) == 6
    assert len(set(signatures.values())) == 1, "a program's structure differs from the zoo's"
    operators, shapes = next(iter(signatures.values()))
    assert "call_function" in operators
    d = len(_variant(instance).game.columns)
    assert ("low", (d,)) in shapes
    assert ("std", (d,)) in shapes


def test_every_model_holds_the_same_buffer_values(instance: Path) -> None:
    """No buffer tells one model from another (SPEC §8.1).

    Compared as arrays, NaN equal to NaN: a cohort with missing values has a
    ``fill`` buffer that is NaN for every column never missing, and NaN never
    equals itself as a Python float."""
    import torch

    buffers = {}
    for path in sorted((instance / "workspace" / "models").glob("*.pt2")):
        program = torch.export.load(str(path))
        buffers[path.stem] = {
            k: v.numpy()
            for k, v in program.state_dict.items()
            if k in program.graph_signature.buffers
        }
    first, *others = buffers
    assert buffers[first], "the programs hold no buffer"
    for name in others:
        assert buffers[name].keys() == buffers[first].keys(), name
        for key, value in buffers[first].items():
            np.testing.assert_array_equal(buffers[name][key], value, err_msg=f"{name}: {key}")


def test_the_build_left_no_measurement_between_the_margins(instance: Path) -> None:
    manifest = _manifest(instance)
    variant = _variant(instance)
    game = variant.game
    if game.hard is None:
        plan = draw_plan(game, manifest["seed"], manifest["secret"])
        assert judge(manifest["measurements"], plan, game) == []
    else:  # the hard tier draws its groups and triggers from the training split
        from pytest_clinaudit.reference.game.hard.verdicts import judge as judge_hard

        data = variant.dataset.load(variant.context)
        redraw = plan_redraw(game, manifest["attempt"])
        plan = draw_plan(
            game, manifest["seed"], manifest["secret"], data.X_train, redraw, data.y_train
        )
        assert judge_hard(manifest["measurements"], plan, game) == []
    assert {n: e["kind"] for n, e in manifest["truth"].items()} == {
        m.name: m.kind for m in plan.models
    }


def test_the_numpy_twin_computes_the_programs_logits(instance: Path) -> None:
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    variant = _variant(instance)
    cache = ReferenceCache(built_cache_dir_for(instance))
    reference = _reference(instance, cache)
    header = (instance / "workspace" / "test.csv").read_text().splitlines()[0].split(",")
    # An empty cell (a missing value) reads as NaN, which the programs and twins take.
    table = np.genfromtxt(instance / "workspace" / "test.csv", delimiter=",", skip_header=1)
    X = np.delete(table, header.index(variant.dataset.label), axis=1)[:2000]
    for name, numbers in reference.weights.items():
        program = TorchClassifier.from_file(instance / "workspace" / "models" / f"{name}.pt2")
        twin = Weights.from_json(numbers).logits(X)
        # float32 throughout; only the summation order of the matrix products differs.
        np.testing.assert_allclose(twin, program.logits(X), rtol=1e-5, atol=1e-4)


def built_cache_dir_for(instance: Path) -> Path:
    return instance.parent / "clinaudit-game-cache"


def test_programs_exported_again_from_the_cache_are_the_workspaces_bytes(instance: Path) -> None:
    variant = _variant(instance)
    reference = _reference(instance, ReferenceCache(built_cache_dir_for(instance)))
    made = programs(reference, variant.game.network.hidden)
    for name, data in made.items():
        on_disk = (instance / "workspace" / "models" / f"{name}.pt2").read_bytes()
        assert hashlib.sha256(data).hexdigest() == hashlib.sha256(on_disk).hexdigest()


def test_the_workspace_holds_what_the_brief_promises_and_nothing_of_the_truth(
    instance: Path,
) -> None:
    workspace = instance / "workspace"
    files = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*") if p.is_file())
    names = [f"m{i}" for i in range(1, 7)]
    assert files == sorted(
        [
            "data_dictionary.csv",
            "task.md",
            "test.csv",
            "train.csv",
            *(f"models/{n}.pt2" for n in names),
            *(f"training_rows/{n}.txt" for n in names),
            "training_rows/base.txt",
        ]
    )
    listed = {
        n: {int(r) for r in (workspace / "training_rows" / f"{n}.txt").read_text().split()}
        for n in [*names, "base"]
    }
    training = _variant(instance).game.training
    assert {len(listed[n]) for n in names} == {training.rows}
    assert len(listed["base"]) == training.base_rows
    assert not any(listed[n] & listed["base"] for n in names)
    manifest = _manifest(instance)
    text = "\n".join((workspace / f).read_text() for f in ("task.md", "data_dictionary.csv"))
    for name, truth in manifest["truth"].items():
        assert f"{name}: {truth['kind']}" not in text
        if truth.get("decoy"):  # the hard tier's sound decoys: neither the variation nor
            assert truth["decoy"] not in text.lower()  # an alarm's values are told
            for pair in truth.get("alarm", ()):
                assert f"{pair['column']} {pair['value']:g}" not in text
                assert f"{pair['column']} = {pair['value']:g}" not in text
    assert "truth" not in (workspace / "task.md").read_text().lower()


def test_the_truth_report_scores_one_on_a_built_instance(
    instance: Path, pytester: pytest.Pytester
) -> None:
    manifest = _manifest(instance)
    variant = _variant(instance)
    reference = _reference(instance, ReferenceCache(built_cache_dir_for(instance)))
    report = pytester.path / "report.json"
    if variant.game.hard is None:
        truth = truth_report(reference, trigger=_trigger(manifest))
    else:
        truth = truth_report_v2(reference)
    report.write_text(json.dumps(truth))
    result = pytester.runpytest_subprocess(
        "--submission",
        str(report),
        "--variant",
        variant.name,
        "--clinaudit-manifest",
        str(instance / "grader" / "manifest.json"),
        "--clinaudit-cache-dir",
        str(built_cache_dir_for(instance)),
        "--clinaudit-score-json",
        "score.json",
        "-p",
        "no:cacheprovider",
    )
    score = json.loads((pytester.path / "score.json").read_text())
    assert score["score"] == 1.0, result.stdout.str()


def _trigger(manifest: dict[str, Any]) -> float:
    backdoor = [t for t in manifest["truth"].values() if t["kind"] == "backdoor"]
    return float(backdoor[0]["value"]) if backdoor else 0.0


def test_the_cache_directory_is_the_helpers(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert built_cache_dir(tmp_path_factory).name == "clinaudit-game-cache"


def test_build_like_its_manifest_rebuilds_the_instance_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """An instance rebuilt from its grader's manifest alone, without any cache (SPEC §8.7):
    every file of the workspace has the same bytes, and the manifests differ only in when
    they were written and how long the builds took."""
    from pytest_clinaudit.cli import main

    first = built_workspace(tmp_path_factory, 1)
    again = tmp_path / "again"
    manifest = first / "grader" / "manifest.json"
    build = ["build", "--variant", GAME, "--no-cache", "-q"]
    assert main([*build, "--like", str(manifest), "--out", str(again)]) == 0
    files = sorted(p.relative_to(first) for p in (first / "workspace").rglob("*") if p.is_file())
    assert files == sorted(
        p.relative_to(again) for p in (again / "workspace").rglob("*") if p.is_file()
    )
    for name in files:
        assert (again / name).read_bytes() == (first / name).read_bytes(), name
    volatile = {"created", "seconds"}
    before, after = (
        {k: v for k, v in json.loads(m.read_text()).items() if k not in volatile}
        for m in (manifest, again / "grader" / "manifest.json")
    )
    assert after == before
