"""The weights-only adversary on built instances (slow; SPEC §8.7's third route): reading
the programs' parameters, with no forward pass, finds few of the defects a behavioural
test must find.

``tests/weights_agent.py`` undoes the reparametrisation (canonical unit scales, units
matched across the zoo) and flags models by zoo-relative statistics of their parameters.
Its detection F1 on the kinds other than ``shortcut`` (whose zero first-layer weight is a
legitimate white-box finding) must stay at most 0.4 over the instances the suite builds;
docs/game.md gives it over ten instances of each game. On the hard tier (game-v2), where a
flag counts only with a claim the grader verifies, its report (triggers read from the first
layer) is graded by a real session.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import weights_agent
from game_helpers import GAME, built_workspace

from pytest_clinaudit.catalog.instances import kinds_of

pytestmark = pytest.mark.slow

INSTANCES = ((GAME, 1), (GAME, 2), (GAME, 3), ("flchain-game", 2))
"""The game-v1 instances ``tests/test_game_build.py`` builds (and the cache shares)."""
BOUND = 0.4


def test_the_weights_only_adversary_finds_little_but_the_shortcut(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    tp = fp = fn = 0
    for game, seed in INSTANCES:
        if game.startswith("flchain") and importlib.util.find_spec("sksurv") is None:
            continue  # FLCHAIN ships inside scikit-survival
        root = built_workspace(tmp_path_factory, seed, game)
        truth = json.loads((root / "grader" / "manifest.json").read_text())["truth"]
        report = weights_agent.audit(root / "workspace")
        flags = {name: entry.get("defects", []) for name, entry in report["models"].items()}
        counts = weights_agent.detection_counts(
            flags, {name: entry["kind"] for name, entry in truth.items()}, leave_out="shortcut"
        )
        tp, fp, fn = tp + counts[0], fp + counts[1], fn + counts[2]
    assert tp + fn > 0  # the instances plant kinds other than the shortcut
    f1 = 2 * tp / (2 * tp + fp + fn)
    assert f1 <= BOUND, (f1, tp, fp, fn)


@pytest.mark.parametrize(("game", "seed"), INSTANCES)
def test_a_sound_decoys_weights_grow_as_a_long_trained_models_do(
    tmp_path_factory: pytest.TempPathFactory, game: str, seed: int
) -> None:
    """Both games' sound models are decoys (``[game.decoy]``): trained on as long as the
    memorising one, their path norm stands above every model that was only fine-tuned
    (a subgroup, a backdoor, a shortcut; a miscalibration folds a factor into it), where a
    sound model trained no further stands among them."""
    if game.startswith("flchain") and importlib.util.find_spec("sksurv") is None:
        pytest.skip("FLCHAIN ships inside scikit-survival")
    root = built_workspace(tmp_path_factory, seed, game)
    truth = json.loads((root / "grader" / "manifest.json").read_text())["truth"]
    kinds = {name: entry["kind"] for name, entry in truth.items()}
    scale = weights_agent.workspace_statistics(root / "workspace").scale
    decoys = [scale[n] for n, kind in kinds.items() if kind is None]
    tuned = [scale[n] for n, kind in kinds.items() if kind in ("subgroup", "backdoor", "shortcut")]
    assert decoys
    assert tuned
    assert min(decoys) > max(tuned), (scale, kinds)


HARD = "icu-synth-game-hard"
HARD_SEED = 4
"""A hard-tier instance whose every plan (the first and both redraws) has a trigger carrier
(the one ``tests/test_game_build.py`` builds, seed 1, has none in its second plan). Seed 3,
two carriers in every plan, built until second defects were drawn, which changed its plans
(2026-12-06); it then failed all six attempts on a visible corner. Seed 16 served until
fragile regions were drawn (2026-12-07), which left its second plan without a trigger."""
HARD_BOUND = 0.1
"""Issue 26's bound on a flag-everything report; a weights-only one must not pass it."""


def test_the_weights_only_adversary_scores_nothing_on_the_hard_tier(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    """On game-v2 the weights pointed at a trigger's carrier and its two columns, and now and
    then at its values (docs/game.md, "What the weights tell": the reader located one
    trigger of 14 on six fresh instances, 0.350 on one, 0.000 on five); since sound decoys
    (``[game.hard] decoys``), a sound model may be as sharp. A flag earns nothing without a
    claim the grader verifies on the models: the reader's report stays at or below the
    bound, and so does its best case, the same reading written on the true carriers
    chosen with hindsight."""
    import shutil

    from pytest_clinaudit.grading.runner import grade

    root = built_workspace(tmp_path_factory, HARD_SEED, HARD)
    truth = json.loads((root / "grader" / "manifest.json").read_text())["truth"]
    carriers = {name for name, entry in truth.items() if "backdoor" in kinds_of(entry)}
    assert carriers, "the instance plants no trigger: choose another HARD_SEED"
    workspace = tmp_path / "workspace"
    shutil.copytree(root / "workspace", workspace)  # the agent sees no grader files
    shipped = weights_agent.audit(workspace)
    hindsight = weights_agent.report_v2(workspace, flag=carriers)
    flagged = {name for name, entry in hindsight["models"].items() if entry["defects"]}
    assert flagged == carriers
    for report in (shipped, hindsight):
        (workspace / "report.json").write_text(json.dumps(report))
        score = grade(
            workspace / "report.json",
            HARD,
            manifest=root / "grader" / "manifest.json",
            cache_dir=root.parent / "clinaudit-game-cache",
        )
        assert float(score["score"]) <= HARD_BOUND, (score["score"], report)
