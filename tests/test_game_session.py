"""Grading a game report as a pytest session: items, JUnit properties, score JSON, manifest.

Real pytest sessions (pytester, in a subprocess) against a fake instance in a
private cache (tests/game_helpers.py): no torch, no training.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from game_helpers import (
    GAME,
    fake_manifest,
    install_fake_instance,
    null_report,
    truth_report,
)

from pytest_clinaudit.catalog.instances import GameReference

SEED = 1
"""The variant's default instance: what a session grades without a manifest."""


@pytest.fixture
def instance(tmp_path: Path) -> tuple[Path, GameReference]:
    cache = tmp_path / "cache"
    return cache, install_fake_instance(cache, SEED)


def run_session(
    pytester: pytest.Pytester,
    cache: Path,
    document: Any,
    *extra: str,
    manifest: dict[str, Any] | None = None,
) -> tuple[pytest.RunResult, dict[str, Any], ET.Element]:
    report = pytester.path / "report.json"
    report.write_text(document if isinstance(document, str) else json.dumps(document))
    manifest_path = pytester.path / "manifest.json"
    manifest_path.write_text(json.dumps(manifest or {}))
    args = [
        "--submission",
        str(report),
        "--variant",
        GAME,
        "--clinaudit-cache-dir",
        str(cache),
        "--clinaudit-score-json",
        "score.json",
        "--junitxml",
        "junit.xml",
        "-p",
        "no:cacheprovider",
        *extra,
    ]
    if manifest is not None:
        args += ["--clinaudit-manifest", str(manifest_path)]
    result = pytester.runpytest_subprocess(*args)
    score = pytester.path / "score.json"
    junit = pytester.path / "junit.xml"
    return (
        result,
        json.loads(score.read_text()) if score.exists() else {},
        ET.parse(junit).getroot() if junit.exists() else ET.Element("none"),
    )


def test_the_truth_graded_with_its_manifest_scores_one_with_an_item_per_decision(
    pytester: pytest.Pytester, instance: tuple[Path, GameReference]
) -> None:
    cache, reference = instance
    result, score, junit = run_session(
        pytester, cache, truth_report(reference), manifest=fake_manifest(reference)
    )
    assert result.ret == 0, result.stdout.str()
    assert score["score"] == 1.0
    assert score["semantics"] == "game-v1"
    assert score["game"]["seed"] == SEED
    assert score["game"]["parts"]["detection"] == 1.0
    names = {case.get("name") for case in junit.iter("testcase")}
    carrier, kind = next((n, e["kind"]) for n, e in reference.truth.items() if e["kind"])
    assert kind in names  # the JUnit name of "icu-synth-game::m3::leaky" is "leaky"
    detections = [
        case
        for case in junit.iter("testcase")
        if any(
            p.get("name") == "clinaudit.game.part" and p.get("value") == "detection"
            for p in case.iter("property")
        )
    ]
    assert len(detections) == len(reference.truth) * 6
    properties = {p.get("name"): p.get("value") for p in junit.iter("property")}
    assert properties["clinaudit.semantics"] == "game-v1"
    assert properties["clinaudit.game.seed"] == str(SEED)


def test_the_null_report_scores_zero_and_names_what_it_missed(
    pytester: pytest.Pytester, instance: tuple[Path, GameReference]
) -> None:
    cache, reference = instance
    result, score, _ = run_session(pytester, cache, null_report(reference))
    assert score["score"] == 0.0
    carrier, kind = next((n, e["kind"]) for n, e in reference.truth.items() if e["kind"])
    result.stdout.fnmatch_lines([f"*{carrier} is {kind}, but the report does not flag it: missed*"])


def test_a_missing_report_is_no_submission_under_metr(
    pytester: pytest.Pytester, instance: tuple[Path, GameReference]
) -> None:
    cache, _ = instance
    report = pytester.path / "absent.json"
    result = pytester.runpytest_subprocess(
        "--submission",
        str(report),
        "--variant",
        GAME,
        "--clinaudit-cache-dir",
        str(cache),
        "--clinaudit-profile",
        "metr",
        "--clinaudit-score-json",
        "score.json",
    )
    score = json.loads((pytester.path / "score.json").read_text())
    assert score["raw_score"] is None
    assert score["no_submission"] is True
    assert result.ret == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"variant": "wdbc-hard"}, "the workspace was built for 'wdbc-hard'"),
        ({"data_sha256": "0" * 64}, "its data differs"),
        ({"programs": {"m1": "0" * 64}}, "its models differ"),
        ({"seed": "two"}, "holds no instance seed"),
        ({"secret": None}, "records no instance secret"),
        ({"secret": "not-a-secret"}, "records no instance secret"),
        ({"entry_sha256": "0" * 64}, "the cache was changed after the build"),
    ],
)
def test_a_manifest_of_another_instance_is_refused_with_the_reason(
    pytester: pytest.Pytester,
    instance: tuple[Path, GameReference],
    change: dict[str, Any],
    message: str,
) -> None:
    cache, reference = instance
    manifest = {**fake_manifest(reference), **change}
    result, score, _ = run_session(pytester, cache, truth_report(reference), manifest=manifest)
    assert result.ret == 4  # a usage error: nothing was graded
    result.stderr.fnmatch_lines([f"*--clinaudit-manifest*{message}*"])
    assert score["score"] is None


def test_a_hostile_report_fails_its_checks_without_an_internal_error(
    pytester: pytest.Pytester, instance: tuple[Path, GameReference]
) -> None:
    cache, _ = instance
    hostile = {
        "models": {
            **{f"m{i}": {"defects": "leaky"} for i in range(1, 2000)},
            "m2": {"defects": ["leaky", "cursed"], "leaky": {"loss_attack_auc": 1e308}},
        },
        "summary": 7,
    }
    result, score, _ = run_session(pytester, cache, hostile)
    assert result.ret == 1
    assert 0.0 <= score["score"] < 1.0
    assert "internal error" not in result.stdout.str()
    schema = next(c for c in score["checks"] if c["name"] == "schema")
    assert not schema["passed"]
    assert "schema problem" in schema["message"]


def test_the_items_collect_by_model_and_kind(
    pytester: pytest.Pytester, instance: tuple[Path, GameReference]
) -> None:
    cache, reference = instance
    result, _, _ = run_session(pytester, cache, null_report(reference), "--collect-only", "-q")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [f"{GAME}::present", f"{GAME}::schema", f"{GAME}::m1::fragile", f"{GAME}::m6::backdoor"]
    )


def test_a_cache_whose_truth_was_rewritten_is_refused(
    pytester: pytest.Pytester, instance: tuple[Path, GameReference]
) -> None:
    """The route measured in SPEC §8.7: a copy of the grader's cache with every model set
    sound, graded with the untouched manifest, gave the empty report 1.000."""
    cache, reference = instance
    manifest = fake_manifest(reference)
    (entry_path,) = (cache / "games").glob("*.json")
    document = json.loads(entry_path.read_text())
    for truth in document["value"]["truth"].values():
        truth.clear()
        truth["kind"] = None
    entry_path.write_text(json.dumps(document))
    result, score, _ = run_session(pytester, cache, null_report(reference), manifest=manifest)
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--clinaudit-manifest*the cache was changed after the build*"])
    assert score["score"] is None
