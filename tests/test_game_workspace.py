"""A game instance's workspace, batch grading and the report pages, on a fake cached instance.

``clinaudit build`` of a cached instance exports its programs from the cached
weights (which must hash as recorded), so these tests need torch but no training.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from game_helpers import GAME, install_fake_instance, null_report, truth_report

from pytest_clinaudit.catalog.instances import GameReference
from pytest_clinaudit.cli import main

SEEDS = (1, 4)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, GameReference]]:
    pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("game-workspaces")
    cache = root / "cache"
    found = {}
    for seed in SEEDS:
        reference = install_fake_instance(cache, seed, with_programs=True)
        out = root / f"instance-{seed}"
        status = main(
            [
                "build",
                "--variant",
                GAME,
                "--seed",
                str(seed),
                "--out",
                str(out),
                "--cache-dir",
                str(cache),
                "-q",
            ]
        )
        assert status == 0
        found[seed] = (out, reference)
    return found


def test_the_workspace_holds_the_models_the_data_and_the_brief(
    built: dict[int, tuple[Path, GameReference]],
) -> None:
    out, reference = built[1]
    workspace = out / "workspace"
    assert sorted(p.name for p in (workspace / "models").iterdir()) == [
        f"m{i}.pt2" for i in range(1, 7)
    ]
    for name, rows in reference.rows.items():
        listed = (workspace / "training_rows" / f"{name}.txt").read_text().split()
        assert [int(r) for r in listed] == rows
    header = (workspace / "train.csv").read_text().splitlines()[0]
    assert header.split(",")[0] == "hospital_expire_flag"
    assert header.split(",")[-1] == "comfort_care_order"
    dictionary = (workspace / "data_dictionary.csv").read_text().splitlines()
    assert dictionary[0].startswith("column,description,unit,recorded")
    assert any(line.startswith("comfort_care_order,") and ",no," in line for line in dictionary)
    assert "```toml clinaudit-game" in (workspace / "task.md").read_text()


def test_the_grader_manifest_holds_the_truth_and_the_hashes(
    built: dict[int, tuple[Path, GameReference]],
) -> None:
    out, reference = built[1]
    manifest = json.loads((out / "grader" / "manifest.json").read_text())
    assert manifest["seed"] == 1
    assert manifest["truth"] == reference.truth
    assert manifest["programs"] == reference.programs
    assert manifest["artifact_sha256"] == reference.instance_id
    assert set(manifest["files"]) >= {"task.md", "models/m1.pt2", "training_rows/m6.txt"}


def test_building_again_from_the_cache_gives_the_same_bytes(
    built: dict[int, tuple[Path, GameReference]], tmp_path: Path
) -> None:
    out, _ = built[1]
    cache = out.parent / "cache"
    again = tmp_path / "again"
    assert (
        main(
            [
                "build",
                "--variant",
                GAME,
                "--seed",
                "1",
                "--out",
                str(again),
                "--cache-dir",
                str(cache),
                "-q",
            ]
        )
        == 0
    )
    for model in (out / "workspace" / "models").iterdir():
        assert (again / "workspace" / "models" / model.name).read_bytes() == model.read_bytes()


def test_build_like_a_manifest_gives_that_instance_under_any_seed_record(
    built: dict[int, tuple[Path, GameReference]], tmp_path: Path
) -> None:
    """``--like`` takes the instance's secret from the manifest: the cache's record of which
    secret seed 1 has is not consulted (here it is removed)."""
    out, reference = built[1]
    cache = out.parent / "cache"
    copied = tmp_path / "cache"
    import shutil

    shutil.copytree(cache, copied)
    shutil.rmtree(copied / "game-secrets")
    again = tmp_path / "again"
    manifest = out / "grader" / "manifest.json"
    status = main(
        ["build", "--variant", GAME, "--like", str(manifest), "--out", str(again)]
        + ["--cache-dir", str(copied), "-q"]
    )
    assert status == 0
    for model in (out / "workspace" / "models").iterdir():
        assert (again / "workspace" / "models" / model.name).read_bytes() == model.read_bytes()
    rebuilt = json.loads((again / "grader" / "manifest.json").read_text())
    assert rebuilt["secret"] == reference.secret
    assert rebuilt["entry_sha256"] == json.loads(manifest.read_text())["entry_sha256"]


@pytest.mark.parametrize(
    ("change", "args", "message"),
    [
        ({}, ["--seed", "4"], "records instance 1, but --seed is 4"),
        ({"secret": None}, [], "records no instance secret"),
        ({"variant": "flchain-game"}, [], "is the manifest of a flchain-game instance"),
    ],
)
def test_build_like_refuses_a_manifest_it_cannot_rebuild(
    built: dict[int, tuple[Path, GameReference]],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    change: dict[str, Any],
    args: list[str],
    message: str,
) -> None:
    out, _ = built[1]
    manifest = {**json.loads((out / "grader" / "manifest.json").read_text()), **change}
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest))
    status = main(
        ["build", "--variant", GAME, "--like", str(path), "--out", str(tmp_path / "o"), *args]
        + ["--cache-dir", str(out.parent / "cache"), "-q"]
    )
    assert status == 2
    assert message in capsys.readouterr().err


def test_a_seed_is_refused_for_an_audit_task_variant(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["build", "--variant", "wdbc-baseline", "--seed", "3", "--out", str(tmp_path)])
    assert status == 2
    assert "--seed applies to games only" in capsys.readouterr().err


def _batch(built: dict[int, tuple[Path, GameReference]], tmp_path: Path) -> Path:
    rows: list[dict[str, Any]] = []
    for seed, (out, reference) in built.items():
        for agent, report in (
            ("truthful", truth_report(reference)),
            ("null", null_report(reference)),
        ):
            path = tmp_path / f"{agent}-{seed}.json"
            path.write_text(json.dumps(report))
            rows.append(
                {
                    "submission": path.name,
                    "variant": GAME,
                    "manifest": str(out / "grader" / "manifest.json"),
                    "agent": agent,
                    "run": str(seed),
                }
            )
    manifest = tmp_path / "batch.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return manifest


def test_grade_many_and_report_show_the_agents_side_by_side(
    built: dict[int, tuple[Path, GameReference]], tmp_path: Path
) -> None:
    pytest.importorskip("junitparser")
    pytest.importorskip("jinja2")
    cache = built[1][0].parent / "cache"
    manifest = _batch(built, tmp_path)
    graded = tmp_path / "graded"
    status = main(
        ["grade-many", str(manifest), "--out", str(graded), "--cache-dir", str(cache), "-j", "2"]
    )
    assert status == 0
    assert (
        main(["report", str(graded), "--out", str(tmp_path / "report"), "--html", "--no-plots"])
        == 0
    )
    report = json.loads((tmp_path / "report" / "report.json").read_text())
    agents = {row["agent"]: row for row in report["tables"]["table5_game_agents"]}
    assert agents["truthful"]["mean_score"] == 1.0
    assert agents["null"]["mean_score"] == 0.0
    assert agents["null"]["false_alarms"] == 0
    assert agents["null"]["missed"] == agents["truthful"]["found"] > 0
    kinds = report["tables"]["table6_game_kinds"]
    assert {row["kind"] for row in kinds} == {
        "fragile",
        "leaky",
        "miscalibrated",
        "shortcut",
        "subgroup",
        "backdoor",
    }
    instances = report["tables"]["table7_game_instances"]
    assert sorted((r["agent"], r["seed"]) for r in instances) == sorted(
        (a, s) for a in ("null", "truthful") for s in SEEDS
    )
    assert report["tables"]["table2_agent_variant"] == []  # no audit-task runs
    page = (tmp_path / "report" / "report.html").read_text()
    assert "Auditing game: who found what" in page
    assert page.count('<table class="confusion"') == 2 * len(SEEDS)
    assert 'class="missed"' in page
    assert 'class="found"' in page
