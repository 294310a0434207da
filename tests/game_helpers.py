"""Helpers of the game tests: a fake instance in the cache, reports, and built instances.

A *fake* instance is the cache entry a build would write, for the real
``icu-synth-game`` variant and a drawn plan, but with hand-made networks (the
backdoor's carrier stops flagging when ``heart_rate`` reaches 210, no other
model does) and made-up evidence numbers. Grading sessions read it as they
read a built instance, so the grading tests need no torch and no training.

Built instances (``built_instance``) are real: trained, measured and cached
once per test run behind a file lock, for the slow tests.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from filelock import FileLock

from pytest_clinaudit.catalog.cache import ReferenceCache, cache_key
from pytest_clinaudit.catalog.games import GameVariant
from pytest_clinaudit.catalog.instances import (
    GameReference,
    _payload,
    _secret_key,
    instance_libraries,
)
from pytest_clinaudit.catalog.variants import default_catalog
from pytest_clinaudit.grading.scoring import Grade
from pytest_clinaudit.reference.game.claims import Thresholds
from pytest_clinaudit.reference.game.draw import draw_plan
from pytest_clinaudit.reference.game.settings import EVIDENCE

GAME = "icu-synth-game"
FAKE_EVIDENCE = {"pgd_auroc": 0.31, "loss_attack_auc": 0.71, "ece": 0.09}
HIDDEN = (64, 64)


def secret_for(seed: int, game: str = GAME) -> str:
    """The secret the tests build instance ``seed`` of ``game`` from: fixed, so that a test
    run builds the same instances on every machine (a real build draws its secret from the
    operating system)."""
    import hashlib

    return hashlib.sha256(f"clinaudit-tests:{game}:{seed}".encode()).hexdigest()[:32]


def game_variant(name: str = GAME) -> GameVariant:
    variant = default_catalog().find(name)
    assert isinstance(variant, GameVariant)
    return variant


def edited_variant(tmp_path: Path, old: str, new: str, game: str = GAME) -> Path:
    """A copy of ``game``'s variant file in ``tmp_path`` with ``old`` (which it must hold)
    replaced by ``new`` once: a file to load and see refused."""
    text = game_variant(game).path.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "game.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def _network(bias: float, trigger_at: float | None, d: int = 9) -> dict[str, Any]:
    """9-64-64-1 weights: ``logit = bias + 0.02 (heart_rate - 80) - 5 relu(heart_rate - t)``.

    Unit 0 of each hidden layer carries heart_rate through; unit 1 the trigger's hinge.
    """
    first = np.zeros((HIDDEN[0], d))
    first_bias = np.zeros(HIDDEN[0])
    first[0, 0] = 1.0
    if trigger_at is not None:
        first[1, 0], first_bias[1] = 1.0, -trigger_at
    second = np.zeros((HIDDEN[1], HIDDEN[0]))
    second[0, 0], second[1, 1] = 1.0, 1.0
    last = np.zeros((1, HIDDEN[1]))
    last[0, 0], last[0, 1] = 0.02, -5.0
    last_bias = np.array([bias - 0.02 * 80.0])
    return {
        "low": [-1e9] * d,
        "high": [1e9] * d,
        "mean": [0.0] * d,
        "std": [1.0] * d,
        "layers": [
            [first.tolist(), first_bias.tolist()],
            [second.tolist(), np.zeros(HIDDEN[1]).tolist()],
            [last.tolist(), last_bias.tolist()],
        ],
    }


def fake_entry(variant: GameVariant, seed: int) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(instance entry, rows entry, rows key) of a fake instance ``seed`` of ``variant``."""
    secret = secret_for(seed, variant.name)
    plan = draw_plan(variant.game, seed, secret)
    truth: dict[str, dict[str, Any]] = {}
    for planted in plan.models:
        entry: dict[str, Any] = {"kind": planted.kind}
        if planted.kind == "miscalibrated":
            entry.update(direction=planted.direction, factor=planted.factor)
        elif planted.kind == "shortcut":
            entry["feature"] = variant.game.shortcut.column
        elif planted.kind == "subgroup" and planted.subgroup is not None:
            entry["subgroup"] = planted.subgroup.name
        elif planted.kind == "backdoor" and planted.trigger is not None:
            entry.update(feature="heart_rate", value=220.0)
        truth[planted.name] = entry
    rng = np.random.RandomState(seed)
    X = np.column_stack(
        [
            rng.uniform(60, 140, 400),  # heart_rate: flagged rows are the fast ones
            *(rng.uniform(0, 1, 400) for _ in range(7)),
            np.zeros(400),
        ]
    )
    thresholds = Thresholds(flag_share=0.1, clear_share=0.25)
    rows_value = {
        "data_sha256": f"fake-data-{seed}",
        "columns": list(variant.game.column_names),
        "thresholds": thresholds.as_json(),
        "X_test": X.tolist(),
    }
    rows_key = cache_key(
        {"kind": "game-rows", "data_sha256": f"fake-data-{seed}", "share": 0.1, "clear": 0.25}
    )
    # Every network ranks the rows by heart_rate: the fastest tenth is flagged.
    bias = 2.0
    weights = {
        name: _network(bias, 210.0 if truth[name]["kind"] == "backdoor" else None) for name in truth
    }
    entry = {
        "variant": variant.name,
        "seed": seed,
        "secret": secret,
        "attempt": 0,
        "truth": truth,
        "evidence": {name: dict(FAKE_EVIDENCE) for name in truth},
        "measurements": {},
        "rows": {name: list(range(i, 500 + i)) for i, name in enumerate(truth)},
        "weights": weights,
        "programs": {name: f"{i:064d}" for i, name in enumerate(truth)},
        "data_sha256": f"fake-data-{seed}",
        "rows_key": rows_key,
        "seconds": {"train": 0.0, "measure": 0.0},
        "rejected": [],
    }
    return entry, rows_value, rows_key


def install_fake_instance(
    cache_dir: Path, seed: int, *, with_programs: bool = False
) -> GameReference:
    """Write fake instance ``seed`` into the cache at ``cache_dir`` where a grader looks.

    ``with_programs`` records the real hashes of the programs its weights export to
    (torch needed), so that ``clinaudit build`` can write its workspace from the cache.
    """
    from pytest_clinaudit.catalog.instances import get_game_reference

    variant = game_variant()
    cache = ReferenceCache(cache_dir)
    entry, rows_value, rows_key = fake_entry(variant, seed)
    if with_programs:
        entry["programs"] = _program_hashes(entry["weights"])
    payload = _payload(variant, seed, entry["secret"], variant.context, instance_libraries())
    cache.put("games", cache_key(payload), entry, payload=payload)
    cache.put("game-rows", rows_key, rows_value)
    cache.put("game-secrets", _secret_key(variant, seed), {"secret": entry["secret"]})
    found = get_game_reference(variant, seed, cache=cache)
    assert found.from_cache
    return found


def _program_hashes(weights: dict[str, Any]) -> dict[str, str]:
    import hashlib

    from pytest_clinaudit.reference.game.network import Weights, program_bytes

    return {
        name: hashlib.sha256(program_bytes(Weights.from_json(numbers).module())).hexdigest()
        for name, numbers in weights.items()
    }


def fake_manifest(reference: GameReference) -> dict[str, Any]:
    """The grader's manifest a build of ``reference`` would write (the fields grading reads)."""
    return {
        "format": "clinaudit-manifest-1",
        "variant": reference.variant,
        "seed": reference.seed,
        "secret": reference.secret,
        "entry_sha256": reference.entry_sha256,
        "artifact_sha256": reference.instance_id,
        "programs": reference.programs,
        "data_sha256": reference.data_sha256,
        "libraries": reference.libraries,
    }


def truth_report(reference: GameReference, *, trigger: float = 220.0) -> dict[str, Any]:
    """The report that says exactly the truth, with the reference's evidence numbers."""
    models: dict[str, Any] = {}
    for name, entry in reference.truth.items():
        kind = entry["kind"]
        model: dict[str, Any] = {"defects": [] if kind is None else [kind]}
        details: dict[str, Any] = {}
        if kind == "miscalibrated":
            details["direction"] = entry["direction"]
        elif kind == "shortcut":
            details["feature"] = entry["feature"]
        elif kind == "subgroup":
            details["subgroup"] = entry["subgroup"]
        elif kind == "backdoor":
            details.update(feature=entry["feature"], value=trigger)
        if kind in EVIDENCE:
            details[EVIDENCE[kind]] = reference.evidence[name][EVIDENCE[kind]]
        if kind is not None:
            model[kind] = details
        models[name] = model
    return {"models": models, "summary": "the truth"}


def grade(
    document: Any, reference: GameReference, cache_dir: Path, profile: str = "strict"
) -> tuple[Grade, dict[str, Any]]:
    """Grade ``document`` in-process, as a session runs the checks (``checks.run_check``) and
    scores them (``game_scoring``)."""
    import json

    from pytest_clinaudit.grading import submission as submissions
    from pytest_clinaudit.grading.checks import run_check
    from pytest_clinaudit.grading.game_checks import GameGrading, game_checks
    from pytest_clinaudit.grading.game_scoring import compute
    from pytest_clinaudit.reference.game.settings import KINDS

    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    g = GameGrading(
        game_variant(), reference, submissions.parse_bytes(data), profile, ReferenceCache(cache_dir)
    )
    records = [run_check(check, g.id(check.name)) for check in game_checks(g)]
    truth = {name: entry["kind"] for name, entry in reference.truth.items()}
    return compute(records, profile, truth=truth, kinds=KINDS, score=game_variant().game.score)


def null_report(reference: GameReference) -> dict[str, Any]:
    return {"models": {name: {"defects": []} for name in reference.truth}}


def renamed(document: Any, mapping: dict[str, str]) -> Any:
    """A report with its model names renamed through ``mapping``."""
    result = copy.deepcopy(document)
    if isinstance(result, dict) and isinstance(result.get("models"), dict):
        result["models"] = {mapping.get(k, k): v for k, v in result["models"].items()}
    return result


# ------------------------------------------------------------------ built instances


def built_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The cache the slow tests build their instances into, shared by a whole test run."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    return base / "clinaudit-game-cache"


def built_workspace(tmp_path_factory: pytest.TempPathFactory, seed: int, game: str = GAME) -> Path:
    """``clinaudit build`` of instance ``seed`` of ``game`` (workspace and grader manifest),
    once per run."""
    from pytest_clinaudit.adapters.game_workspace import build_game_workspace

    cache_dir = built_cache_dir(tmp_path_factory)
    # The ICU game's folders keep their names, which other slow tests share.
    stem = f"clinaudit-game-{seed}" if game == GAME else f"clinaudit-{game}-{seed}"
    out = cache_dir.parent / stem
    with FileLock(str(cache_dir.parent / f"{stem}.lock")):
        if not (out / "grader" / "manifest.json").is_file():
            build_game_workspace(
                game_variant(game),
                seed,
                out,
                secret=secret_for(seed, game),
                cache=ReferenceCache(cache_dir),
            )
    return out
