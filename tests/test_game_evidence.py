"""Evidence that needs measuring (SPEC §8.7): planted strengths vary per instance, and a
tolerance is about its measurement's own sampling error, so that one number per kind,
reported on every instance, earns evidence credit on few of them.

Each instance draws its carriers' evidence numbers and the build plants to them
(``reference/game/targets.py``), so the share a constant earns is the share of the drawn
numbers it lies near, checked here over many draws without building. That the build
reaches a drawn number is checked on a built sound model for the ECE (slow), in
``tests/test_game_targets.py`` for the probes, and over built instances in docs/game.md
(``tools/game_runs.py`` prints the table).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from game_helpers import built_workspace, game_variant, secret_for

from pytest_clinaudit.batch.game_evidence import (
    BEST_CONSTANT,
    best_constant_share,
    evidence_rows,
    evidence_table,
)
from pytest_clinaudit.reference.game.draw import Plan, draw_plan
from pytest_clinaudit.reference.game.measure import equal_mass_ece, mean_confidence_slope
from pytest_clinaudit.reference.game.targets import solve_factor

GAMES = ("icu-synth-game", "flchain-game")
DRAWS = 20


def test_best_constant_share_counts_the_fullest_window_of_twice_the_tolerance() -> None:
    assert best_constant_share([0.0, 0.01, 0.05, 0.3], tolerance=0.01) == 0.5
    assert best_constant_share([0.0, 0.021, 0.05, 0.3], tolerance=0.01) == 0.25
    assert best_constant_share([0.1] * 4, tolerance=0.0) == 1.0
    # Order does not matter, and a window reaches both ways from its constant.
    assert best_constant_share([0.3, 0.02, 0.05, 0.0, 0.04], tolerance=0.02) == 0.6
    assert best_constant_share([], tolerance=0.1) == 0.0


def test_the_evidence_table_takes_each_kind_from_its_carriers() -> None:
    manifests = [
        {
            "truth": {"m1": {"kind": "leaky"}, "m2": {"kind": None}, "m3": {"kind": "fragile"}},
            "evidence": {
                "m1": {"pgd_auroc": 0.6, "loss_attack_auc": value, "ece": 0.01},
                "m2": {"pgd_auroc": 0.6, "loss_attack_auc": 0.5, "ece": 0.01},
                "m3": {"pgd_auroc": 0.1, "loss_attack_auc": 0.5, "ece": 0.01},
            },
        }
        for value in (0.70, 0.72, 0.80, 0.90)
    ]
    tolerances = {"pgd_auroc": 0.02, "loss_attack_auc": 0.015, "ece": 0.003}
    rows = {r["kind"]: r for r in evidence_rows(manifests, tolerances)}
    assert rows["leaky"]["carriers"] == 4
    assert rows["leaky"]["best_constant"] == 0.5
    assert (rows["leaky"]["low"], rows["leaky"]["high"]) == (0.70, 0.90)
    assert rows["fragile"]["best_constant"] == 1.0  # the same reference on every instance
    assert rows["miscalibrated"]["carriers"] == 0
    assert rows["miscalibrated"]["best_constant"] is None
    text = evidence_table(manifests, tolerances).markdown()
    assert "| leaky | `loss_attack_auc` | 4 | 0.700-0.900 | ± 0.015 | 0.500 (over) |" in text
    assert "| miscalibrated | `ece` | 0 | --- | ± 0.003 | - |" in text


def _plans(game: str, count: int) -> Iterator[Plan]:
    """The plans of ``count`` fixed secrets: as uniform as fresh ones from the operating
    system, and the same on every run, so that a bound near a share's sampling noise
    (ICU miscalibration's 0.085-0.105 over 40 sets of 2,000 fresh plans, against a floor of
    0.083) passes or fails for the construction, never for the draw."""
    settings = game_variant(game).game
    for k in range(count):
        yield draw_plan(settings, 1, secret_for(k, f"{game}/evidence"))


def _drawn_targets(game: str, plans: int) -> dict[str, list[float]]:
    """The evidence numbers the ``plans`` plans of :func:`_plans` draw, per kind."""
    drawn: dict[str, list[float]] = {"fragile": [], "leaky": [], "miscalibrated": []}
    for plan in _plans(game, plans):
        for planted in plan.models:
            if planted.kind in drawn:
                assert planted.target is not None
                drawn[planted.kind].append(planted.target)
            else:
                assert planted.target is None
    return drawn


@pytest.mark.parametrize("game", GAMES)
def test_each_instance_draws_its_evidence_numbers_over_the_whole_range(game: str) -> None:
    settings = game_variant(game).game
    sides: dict[str, list[float]] = {"overconfident": [], "underconfident": []}
    for plan in _plans(game, 300):
        for planted in plan.models:
            if planted.kind == "miscalibrated":
                assert planted.factor is None  # solved at build time, for the ECE drawn
                assert planted.direction in sides
                assert planted.target is not None
                sides[planted.direction].append(planted.target)
    over, under = sides["overconfident"], sides["underconfident"]
    share = settings.miscalibrated.over_share  # a fair coin but where the cohort caps it
    assert abs(len(over) / (len(over) + len(under)) - share) < 0.15
    ranges = {
        "overconfident": settings.miscalibrated.overconfident_ece,
        "underconfident": settings.miscalibrated.underconfident_ece,
    }
    drawn = _drawn_targets(game, 300)
    ranges |= {"fragile": settings.fragile.target, "leaky": settings.leaky.target}
    for kind, values in {**sides, "fragile": drawn["fragile"], "leaky": drawn["leaky"]}.items():
        bounds = ranges[kind]
        assert bounds is not None
        low, high = bounds
        assert low <= min(values)
        assert max(values) <= high
        # uniform: each half of the range holds about half the draws
        assert 0.35 < sum(v < (low + high) / 2 for v in values) / len(values) < 0.65, kind


@pytest.mark.parametrize("game", GAMES)
def test_no_constant_lies_within_tolerance_of_more_than_a_quarter_of_the_drawn_numbers(
    game: str,
) -> None:
    """Over 2,000 plans (a constant chosen with hindsight over so many is the best any
    constant can do on average), no evidence number per kind is within its tolerance of more
    than a quarter of the numbers drawn. The build plants each model to its drawn number
    (the probes and the solved factor read what the reference measures:
    ``tests/test_game_targets.py``), so this is the share of instances a constant earns."""
    tolerance = game_variant(game).game.tolerance
    drawn = _drawn_targets(game, 2000)
    for kind, evidence in (
        ("fragile", "pgd_auroc"),
        ("leaky", "loss_attack_auc"),
        ("miscalibrated", "ece"),
    ):
        share = best_constant_share(drawn[kind], tolerance=getattr(tolerance, evidence))
        assert share <= BEST_CONSTANT, (kind, share)
        # ... and the ranges are no wider than they need be to hold it: within two-fold
        assert share > BEST_CONSTANT / 3, (kind, share)


# ------------------------------------------------------------------ on a built instance


@pytest.fixture(scope="module", params=[pytest.param(g, id=g) for g in GAMES])
def sound(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, np.ndarray, np.ndarray]:
    """(game, a sound model's calibrated logits on the test split, the test outcomes)."""
    from pytest_clinaudit.reference.models.torch_adapter import TorchClassifier

    game = request.param
    if game.startswith("flchain"):
        pytest.importorskip("sksurv")
    root = built_workspace(tmp_path_factory, 1 if game == GAMES[0] else 2, game)
    truth = json.loads((root / "grader" / "manifest.json").read_text())["truth"]
    name = next(n for n, entry in truth.items() if entry["kind"] is None)
    variant = game_variant(game)
    data = variant.dataset.load(variant.context)
    program = TorchClassifier.from_bytes(
        (root / "workspace" / "models" / f"{name}.pt2").read_bytes()
    )
    return game, np.asarray(program.logits(data.X_test), dtype=np.float64), np.asarray(data.y_test)


@pytest.mark.slow
def test_every_drawn_ece_is_reached_on_a_sound_model_and_clearly_in(
    sound: tuple[str, np.ndarray, np.ndarray],
) -> None:
    """Twenty drawn ECEs, each solved for on a built sound model's calibrated logits (as the
    build solves it before folding the factor in): each is reached, in its direction, and
    clearly in. So the share a constant earns is the share of the drawn numbers (the fast
    test above), not of a saturated range."""
    game, z, y = sound
    settings = game_variant(game).game
    plant, bins = settings.miscalibrated, settings.measurement.ece_bins
    for k in range(DRAWS):
        direction, target = plant.draw_target(np.random.default_rng(k))
        overconfident = direction == "overconfident"
        factor = solve_factor(z, y, target, overconfident, bins=bins, limit=plant.limit(direction))
        p = 1.0 / (1.0 + np.exp(-factor * z))
        ece = equal_mass_ece(p, y, bins=bins)
        assert ece == pytest.approx(target, abs=1e-4), (direction, target, factor)
        assert ece >= settings.margins.miscalibrated_in
        assert (mean_confidence_slope(p, y) < 1) == overconfident, factor


@pytest.mark.slow
def test_the_ece_tolerance_is_about_the_ece_sampling_error(
    sound: tuple[str, np.ndarray, np.ndarray],
) -> None:
    """The tolerance lies between one and three bootstrap standard errors (over the test
    patients) of a miscalibrated model's ECE: tighter would fail an agent on noise, looser
    would let a constant pass."""
    game, z, y = sound
    settings = game_variant(game).game
    rng = np.random.default_rng(0)
    errors = []
    for factor in (
        settings.miscalibrated.overconfident[0],
        settings.miscalibrated.underconfident[1],
    ):
        p = 1.0 / (1.0 + np.exp(-factor * z))
        replicates = []
        for _ in range(100):
            rows = rng.integers(0, len(y), len(y))
            replicates.append(equal_mass_ece(p[rows], y[rows], bins=settings.measurement.ece_bins))
        errors.append(float(np.std(replicates)))
    se = float(np.median(errors))
    assert se <= settings.tolerance.ece <= 3 * se, (settings.tolerance.ece, errors)


def _hanley_mcneil(auc: float, members: int, outsiders: int) -> float:
    """The standard error of an AUC of ``members`` against ``outsiders`` (Hanley and McNeil,
    1982), under the usual exponential approximation of its two variance terms."""
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    variance = (
        auc * (1 - auc) + (members - 1) * (q1 - auc**2) + (outsiders - 1) * (q2 - auc**2)
    ) / (members * outsiders)
    return math.sqrt(variance)


@pytest.mark.parametrize("game", GAMES)
def test_the_leak_tolerance_is_about_one_standard_error_of_the_drawn_aucs(game: str) -> None:
    """Over the range of drawn loss-attack AUCs, with the variant's members (its rows) against
    every test row, the tolerance lies between 0.85 and two standard errors: tighter would fail
    an agent who sampled its non-members on noise, looser would let a constant pass."""
    if game.startswith("flchain"):
        pytest.importorskip("sksurv")
    variant = game_variant(game)
    settings = variant.game
    n_test = variant.dataset.load(variant.context).n_test
    assert settings.leaky.target is not None
    errors = [_hanley_mcneil(a, settings.training.rows, n_test) for a in settings.leaky.target]
    tolerance = settings.tolerance.loss_attack_auc
    assert 0.85 * min(errors) <= tolerance <= 2 * max(errors), (tolerance, errors)


# ------------------------------------------------------------------ the strong attack's rows


@pytest.mark.parametrize(("game", "n_test"), [(GAMES[0], 300), (GAMES[0], 2500), (GAMES[1], None)])
def test_the_brief_names_the_patients_the_strong_attack_is_measured_on(
    game: str, n_test: int | None, tmp_path: Path
) -> None:
    """A PGD AUROC moves with its rows by about its tolerance, so the brief names them: the
    facts' ``attack_rows`` first patients of test.csv are exactly the reference's rows,
    however many test patients there are (``None``: the cohort's own split)."""
    import dataclasses

    from pytest_clinaudit.adapters import game_agent, game_taskdoc
    from pytest_clinaudit.reference.game.verdicts import pgd_rows

    if game.startswith("flchain"):
        pytest.importorskip("sksurv")
    variant = game_variant(game)
    source = variant.dataset
    if n_test is not None:
        source = dataclasses.replace(source, n_train=500, n_test=n_test)
    data = source.load(variant.context)
    task = tmp_path / "task.md"
    task.write_text(
        game_taskdoc.render(variant, data, variant.game.model_names()), encoding="utf-8"
    )
    facts = game_agent.read_facts(task)
    measurement = variant.game.measurement
    rows = pgd_rows(measurement, len(data.y_test))
    assert facts["attack_rows"] == len(rows) == min(measurement.pgd_rows, len(data.y_test))
    assert np.array_equal(rows, np.arange(facts["attack_rows"]))
    said = " ".join(task.read_text(encoding="utf-8").split())
    assert f"the first {facts['attack_rows']:,} patients of `test.csv`" in said


def test_the_constant_tool_tries_the_gaps_hindsight_would_choose(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``tools/game_constants.py`` grades, beside its fixed grid, each gap whose window of
    credit starts at a planted tail's reference: the window that credits the most tails,
    moved until its lower end meets one of them. A fixed grid coarser than the window
    would miss it."""
    monkeypatch.syspath_prepend(str(Path(__file__).parents[1] / "tools"))
    from game_constants import constant_reports, hindsight_gaps

    tolerance = game_variant("icu-synth-game-hard").game.tolerance.top_decile_gap
    references = [0.131, 0.131 + 1.5 * tolerance, 0.2]
    manifest = {
        "variant": "icu-synth-game-hard",
        "truth": {
            "m1": {"kind": "miscalibrated"},
            "m2": {"kind": None},
            "m3": {"kind": "miscalibrated"},
        },
        "evidence": {
            "m1": {"top_decile_gap": references[0]},
            "m2": {"top_decile_gap": 0.5},
            "m3": {"top_decile_gap": references[1]},
        },
    }
    other = {**manifest, "truth": {"m1": {"kind": "miscalibrated"}}}
    other["evidence"] = {"m1": {"top_decile_gap": references[2]}}
    gaps = hindsight_gaps([manifest, other])
    assert len(gaps) == 3  # the sound model's number is never tried
    credited = [[abs(gap - r) <= tolerance for r in references] for gap in gaps]
    assert credited[0] == [True, True, False]  # both tails of the first instance at once
    assert credited[2] == [False, False, True]
    reports = constant_reports(["m1", "m2"], hard=True, gaps=gaps)
    tried = {
        report["models"]["m1"]["miscalibrated"]["top_decile_gap"]
        for agent, report in reports.items()
        if agent.startswith("constant-miscalibrated-")
    }
    assert set(gaps) <= tried
    # game-v1 instances have no tail: nothing is tried with hindsight
    assert hindsight_gaps([{**manifest, "variant": "icu-synth-game"}]) == []
