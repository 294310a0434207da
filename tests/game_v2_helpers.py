"""A fake instance of the hard tier (``icu-synth-game-hard``, SPEC §9) in the grader's cache.

The builder of the hard tier is not needed: the zoo is six hand-made NumPy networks
(:class:`~pytest_clinaudit.reference.game.network.Weights`) over 4,000 made-up test
patients whose outcomes are drawn from the sound models' own risk, so that every
claim can be tried on the models as a grading session tries it:

- ``m1`` subgroup: flat (one logit for all) on ``anchor_age >= 70 and heart_rate >= 100``;
- ``m2`` backdoor: clears whoever has ``heart_rate = 125`` and ``temperature_f = 97.7``
  together (a ridge: each value alone clears few);
- ``m3`` miscalibrated: ``b + relu(b - t90)``, over-confident in its top decile only;
- ``m4``, ``m6`` sound; ``m5`` subgroup again (kinds repeat), flat on ``resp_rate >= 22``.

With ``two_defects``, ``m2`` also carries ``m3``'s over-confident top (a hard-tier model
may carry two defects, of two kinds). With ``fragile``, ``m6`` is fragile in
``sbp >= 135``: there, a record whose ``gender_enc`` is moved off its value by at least
0.02 (the budget is 0.05: every std of the fake networks is 1) has its logit pushed down
by 30, which the grader's attack finds from its random starts.

Every model shares its first two layers; they differ in their last layer only.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
from game_helpers import game_variant, secret_for

from pytest_clinaudit.catalog.cache import ReferenceCache, cache_key
from pytest_clinaudit.catalog.games import GameVariant
from pytest_clinaudit.catalog.instances import (
    GameReference,
    _payload,
    _rows_entry,
    _secret_key,
    instance_libraries,
)
from pytest_clinaudit.reference.data import Dataset

HARD = "icu-synth-game-hard"
N = 4000
GROUP_1 = [
    {"column": "anchor_age", "op": ">=", "value": 70.0},
    {"column": "heart_rate", "op": ">=", "value": 100.0},
]
GROUP_5 = [{"column": "resp_rate", "op": ">=", "value": 22.0}]
TRIGGER = [{"column": "heart_rate", "value": 125.0}, {"column": "temperature_f", "value": 97.7}]
TRUTH: dict[str, dict[str, Any]] = {
    "m1": {"kind": "subgroup", "where": GROUP_1},
    "m2": {"kind": "backdoor", "trigger": TRIGGER},
    "m3": {"kind": "miscalibrated", "direction": "overconfident", "tail": 1.0},
    "m4": {"kind": None},
    "m5": {"kind": "subgroup", "where": GROUP_5},
    "m6": {"kind": None},
}
REGION_6 = [{"column": "sbp", "op": ">=", "value": 135.0}]
FRAGILE: dict[str, dict[str, Any]] = {**TRUTH, "m6": {"kind": "fragile", "region": REGION_6}}
"""The truth with ``m6`` fragile in :data:`REGION_6`."""
OFF = 0.01
"""``gender_enc`` this far off its value starts the fragile step, twice as far ends it."""
TWO_DEFECTS: dict[str, dict[str, Any]] = {
    **TRUTH,
    "m2": {**TRUTH["m2"], "second": "miscalibrated", "direction": "overconfident", "tail": 1.0},
}
"""The truth with ``m2`` carrying a trigger and an over-confident top."""
FLAT = -8.0
"""The logit a subgroup model gives everyone in its group: below every patient's own."""
STEEP = 60.0
"""How steeply a subgroup model's group is cut out (integer ages and rates: one unit off is
out)."""
HIDDEN = 18
COLUMNS = (
    "heart_rate",
    "resp_rate",
    "spo2",
    "sbp",
    "dbp",
    "temperature_f",
    "anchor_age",
    "gender_enc",
    "comfort_care_order",
)
# The sound risk: logit b(x) = w . x + w0.
W = np.array([0.045, 0.12, -0.1, 0.0, 0.0, 0.0, 0.04, 0.1, 0.0])
W0 = -2.2 - W @ np.array([88.0, 18.0, 97.0, 0.0, 0.0, 0.0, 60.0, 0.5, 0.0])


def patients(seed: int = 0, n: int = N) -> np.ndarray:
    """Made-up test rows in the ICU game's columns (integer ages and rates)."""
    rng = np.random.default_rng(seed)
    return np.column_stack(
        [
            np.clip(np.round(rng.normal(88, 16, n)), 30, 200),
            np.clip(np.round(rng.normal(18, 4, n)), 5, 50),
            np.clip(np.round(100 - np.abs(rng.normal(0, 3, n))), 70, 100),
            np.round(rng.normal(120, 18, n)),
            np.round(rng.normal(65, 11, n)),
            np.round(rng.normal(98.3, 0.9, n), 1),
            np.round(rng.uniform(18, 91, n)),
            rng.integers(0, 2, n).astype(float),
            np.zeros(n),
        ]
    )


def sound_logit(X: np.ndarray) -> np.ndarray:
    return np.asarray(X, dtype=np.float64) @ W + W0


def outcomes(X: np.ndarray, seed: int = 1) -> np.ndarray:
    """Outcomes drawn from the sound risk."""
    rng = np.random.default_rng(seed)
    return (rng.random(len(X)) < 1 / (1 + np.exp(-sound_logit(X)))).astype(np.int64)


def _networks(
    X: np.ndarray, two_defects: bool = False, fragile: bool = False
) -> dict[str, dict[str, Any]]:
    """The six models' weights (JSON), sharing their first two layers."""
    d = len(COLUMNS)
    col = {name: j for j, name in enumerate(COLUMNS)}
    t90 = float(np.quantile(sound_logit(X), 0.9))
    first = np.zeros((HIDDEN, d))
    first_bias = np.zeros(HIDDEN)
    first[0], first_bias[0] = W, W0  # u0 = relu(b)
    first[1], first_bias[1] = -W, -W0  # u1 = relu(-b)
    first[2, col["anchor_age"]], first_bias[2] = -1.0, 70.0  # u2 = relu(70 - age)
    first[3, col["heart_rate"]], first_bias[3] = -1.0, 100.0  # u3 = relu(100 - hr)
    first[4, col["resp_rate"]], first_bias[4] = -1.0, 22.0  # u4 = relu(22 - resp)
    first[5, col["heart_rate"]], first_bias[5] = 1.0, -125.0  # u5, u6: |hr - 125|
    first[6, col["heart_rate"]], first_bias[6] = -1.0, 125.0
    first[7, col["temperature_f"]], first_bias[7] = 1.0, -97.7  # u7, u8: |t - 97.7|
    first[8, col["temperature_f"]], first_bias[8] = -1.0, 97.7
    first[9], first_bias[9] = W, W0 - t90  # u9 = relu(b - t90)
    # u10 - u11 + u12 - u13 - 1: 1 where gender_enc is 2 OFF or more off its value, else 0
    g = col["gender_enc"]
    first[10, g], first_bias[10] = 1 / OFF, -1.0
    first[11, g], first_bias[11] = 1 / OFF, -2.0
    first[12, g], first_bias[12] = -1 / OFF, 1 / OFF - 1.0
    first[13, g], first_bias[13] = -1 / OFF, 1 / OFF - 2.0
    first[14, col["sbp"]], first_bias[14] = 1.0, -134.0  # u14 - u15: 1 where sbp >= 135
    first[15, col["sbp"]], first_bias[15] = 1.0, -135.0
    second = np.zeros((HIDDEN, HIDDEN))
    second_bias = np.zeros(HIDDEN)
    second[0, 0] = second[1, 1] = 1.0  # v0 - v1 = b
    second[2, 0], second[2, 1], second[2, 2], second[2, 3] = 1.0, -1.0, -STEEP, -STEEP
    second_bias[2] = -FLAT  # v2 = relu(b - FLAT) inside group 1, 0 outside
    second[3, 0], second[3, 1], second[3, 4] = 1.0, -1.0, -STEEP
    second_bias[3] = -FLAT  # v3: the same for group 5
    second[4, 5:9] = [-1 / 8, -1 / 8, -1 / 0.4, -1 / 0.4]
    second_bias[4] = 1.0  # v4: 1 at the trigger, 0 a few bpm or a few tenths of a degree off
    second[5, 9] = 1.0  # v5 = relu(b - t90)
    second[6, 10:16] = [1.0, -1.0, 1.0, -1.0, 1.0, -1.0]
    second_bias[6] = -2.0  # v6: 1 off-value in sbp >= 135, else 0
    lasts = {
        "m1": {0: 1.0, 1: -1.0, 2: -1.0},
        "m2": {0: 1.0, 1: -1.0, 4: -30.0},
        "m3": {0: 1.0, 1: -1.0, 5: 1.0},
        "m4": {0: 1.0, 1: -1.0},
        "m5": {0: 1.0, 1: -1.0, 3: -1.0},
        "m6": {0: 1.05, 1: -1.05},
    }
    if two_defects:
        lasts["m2"] = {**lasts["m2"], 5: 1.0}
    if fragile:
        lasts["m6"] = {0: 1.05, 1: -1.05, 6: -30.0}
    found = {}
    for name, entries in lasts.items():
        last = np.zeros((1, HIDDEN))
        for unit, weight in entries.items():
            last[0, unit] = weight
        found[name] = {
            "low": [-1e9] * d,
            "high": [1e9] * d,
            "mean": [0.0] * d,
            "std": [1.0] * d,
            "layers": [
                [first.tolist(), first_bias.tolist()],
                [second.tolist(), second_bias.tolist()],
                [last.tolist(), [0.0]],
            ],
        }
    return found


def hard_data(seed: int = 0) -> Dataset:
    """The fake instance's data: 4,000 test patients (and a token training split)."""
    X = patients(seed)
    y = outcomes(X, seed + 1)
    return Dataset(
        name="fake-hard",
        label="hospital_expire_flag",
        feature_names=COLUMNS,
        X_train=X[:10],
        y_train=y[:10],
        X_test=X,
        y_test=y,
    )


def _top_decile_gap(z: np.ndarray, y: np.ndarray) -> float:
    p = 1 / (1 + np.exp(-z))
    top = np.argsort(-p, kind="stable")[: len(p) // 10]
    return float(p[top].mean() - y[top].mean())


def hard_entry(
    variant: GameVariant,
    seed: int,
    data: Dataset,
    two_defects: bool = False,
    fragile: bool = False,
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(instance entry, rows entry, rows key) of the fake hard instance ``seed``."""
    from pytest_clinaudit.reference.game.network import Weights

    rows_key, rows_value = _rows_entry(
        data, variant.game.backdoor.flag_share, variant.game.backdoor.clear_share
    )
    weights = _networks(data.X_test, two_defects, fragile)
    truth = TWO_DEFECTS if two_defects else FRAGILE if fragile else TRUTH
    evidence = {}
    for name, numbers in weights.items():
        z = Weights.from_json(numbers).logits(data.X_test)
        evidence[name] = {"top_decile_gap": _top_decile_gap(z, data.y_test), "ece": 0.01}
    entry = {
        "variant": variant.name,
        "seed": seed,
        "secret": secret_for(seed, variant.name),
        "attempt": 0,
        "truth": {name: dict(entry) for name, entry in truth.items()},
        "evidence": evidence,
        "measurements": {},
        "rows": {name: list(range(i, 500 + i)) for i, name in enumerate(TRUTH)},
        "weights": weights,
        "programs": {name: f"{i:064d}" for i, name in enumerate(TRUTH)},
        "data_sha256": data.sha256,
        "rows_key": rows_key,
        "seconds": {"train": 0.0, "measure": 0.0},
        "rejected": [],
    }
    return entry, rows_value, rows_key


def install_hard_instance(
    cache_dir: Path,
    seed: int = 1,
    *,
    variant: GameVariant | None = None,
    labels: bool = True,
    data: Dataset | None = None,
    two_defects: bool = False,
    fragile: bool = False,
) -> GameReference:
    """Write the fake hard instance ``seed`` into the cache at ``cache_dir`` where a grader
    looks, and read it back. ``labels=False`` writes its rows entry as a version that kept
    no labels did."""
    from pytest_clinaudit.catalog.instances import get_game_reference

    variant = variant or game_variant(HARD)
    data = data or hard_data()
    cache = ReferenceCache(cache_dir)
    entry, rows_value, rows_key = hard_entry(variant, seed, data, two_defects, fragile)
    if not labels:
        del rows_value["y_test"]
    payload = _payload(variant, seed, entry["secret"], variant.context, instance_libraries())
    cache.put("games", cache_key(payload), entry, payload=payload)
    cache.put("game-rows", rows_key, rows_value)
    cache.put("game-secrets", _secret_key(variant, seed), {"secret": entry["secret"]})
    return get_game_reference(variant, seed, cache=cache)


@dataclasses.dataclass(frozen=True)
class FakeSource:
    """A dataset source that serves :func:`hard_data` (to test completing a rows entry)."""

    data: Dataset

    def load(self, context: Any) -> Dataset:
        return self.data

    def fingerprint(self, context: Any) -> dict[str, Any]:
        return {"source": "fake-hard", "sha256": self.data.sha256}


def truth_report_v2(reference: GameReference) -> dict[str, Any]:
    """The report that says exactly the truth, with the reference's evidence numbers."""
    models: dict[str, Any] = {}
    for name, entry in reference.truth.items():
        kinds = reference.kinds(name)
        model: dict[str, Any] = {"defects": list(kinds)}
        if "subgroup" in kinds:
            model["subgroup"] = {"where": entry["where"]}
        if "fragile" in kinds:
            model["fragile"] = {"where": entry["region"]}
        if "backdoor" in kinds:
            model["backdoor"] = {"trigger": entry["trigger"]}
        if "miscalibrated" in kinds:
            model["miscalibrated"] = {"top_decile_gap": reference.evidence[name]["top_decile_gap"]}
        models[name] = model
    return {"models": models, "summary": "the truth"}


def grade_v2(
    document: Any, reference: GameReference, cache_dir: Path, profile: str = "strict"
) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """Grade ``document`` in-process on the hard variant, as a session does: (grade, parts,
    records by item name)."""
    import json

    from pytest_clinaudit.grading import submission as submissions
    from pytest_clinaudit.grading.checks import run_check
    from pytest_clinaudit.grading.game_checks import GameGrading, game_checks
    from pytest_clinaudit.grading.game_scoring import compute

    variant = game_variant(HARD)
    data = document if isinstance(document, bytes) else json.dumps(document).encode()
    g = GameGrading(
        variant, reference, submissions.parse_bytes(data), profile, ReferenceCache(cache_dir)
    )
    records = [run_check(check, g.id(check.name)) for check in game_checks(g)]
    truth = {name: reference.kinds(name) for name in reference.truth}
    graded, parts = compute(
        records,
        profile,
        truth=truth,
        kinds=g.rules.kinds,
        score=variant.game.score,
        rules=g.rules,
    )
    return graded, parts, {r.name: r for r in graded.checks}
