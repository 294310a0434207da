"""Issue 28, part 3: membership that holds still, on real cohorts (scikit-survival's).

- The attacks' own randomness is inside the interval: the same GBSG2 forest read
  0.824, 0.920 and 0.967 at ``--seed`` 42, 1 and 2 in the issue's runs, and seed
  42's interval excluded seed 2's value.
- The component uses every row that was scored, not the winning attack's sample.
- A 1-nearest-neighbour memoriser on 100 training rows reads <= 0.6 at every
  cohort seed (issue 18 asked for it; it read 0.53-0.65).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from owner_cohorts import LABEL, CohortFiles, write_cohort, write_gbsg2_forest

from pytest_clinaudit.cli import main

MEMBERSHIP = "membership_inference_resistance"


def _audit(model: Path, files: CohortFiles, *extra: str) -> dict[str, Any]:
    out = model.with_name(f"{model.stem}-{len(list(model.parent.glob('*.json')))}.json")
    argv = [
        "audit", "--model", str(model), "--train", str(files.train_csv),
        "--test", str(files.test_csv), "--label", LABEL, "--bootstrap", "200", "-q",
        "--out", str(out), *extra,
    ]  # fmt: skip
    assert main(argv) == 0
    report: dict[str, Any] = json.loads(out.read_text())
    return report


@pytest.fixture(scope="module")
def gbsg2_forest(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CohortFiles]:
    """An unpruned random forest on GBSG2 (514 training, 172 test rows): it leaks."""
    return write_gbsg2_forest(tmp_path_factory.mktemp("gbsg2-forest-seeds"))


@pytest.mark.slow
def test_the_seed_variation_is_reported_and_the_unheld_interval_is_not_shown(
    gbsg2_forest: tuple[Path, CohortFiles],
) -> None:
    """The attacks' seed variation is measured and reported, and every scored row counts.
    The component's interval is not shown: in the coverage study it covered 0.77-0.87 at
    every size (docs/own-model-audit.md), so the report says so in its place."""
    model, files = gbsg2_forest
    for seed in (42, 1, 2):
        report = _audit(model, files, "--seed", str(seed))
        component = report["membership"]["component"]
        interval = report["uncertainty"]["components"][MEMBERSHIP]
        # The attacks' seed variation (folds, LiRA's shadows) is measured and reported.
        assert component["repeats"] == 10
        assert component["seed_sd"] > 0.0
        assert report["uncertainty"]["seed_sd"][MEMBERSHIP] == component["seed_sd"]
        # Every scored row counts: all 514 members and 172 non-members, whichever
        # attack won each fold.
        assert (component["n_members"], component["n_nonmembers"]) == (514, 172)
        decided = component["rows_decided_by"].values()
        assert sum(rows["members"] for rows in decided) == pytest.approx(514)
        assert sum(rows["nonmembers"] for rows in decided) == pytest.approx(172)
        assert interval["low"] is None
        assert interval["high"] is None
        assert "bench_owner_coverage" in interval["withheld"]


@pytest.mark.slow
def test_an_attack_on_a_share_of_the_rows_leaves_the_others_to_the_next_attack(
    gbsg2_forest: tuple[Path, CohortFiles],
) -> None:
    """HopSkipJump and LiRA on a fraction of the rows; the component still rests on all."""
    import dataclasses

    from pytest_clinaudit.owner.audit import audit_own_model
    from pytest_clinaudit.reference.review.profile import OwnDataParams

    model, files = gbsg2_forest
    params = dataclasses.replace(OwnDataParams(), boundary_rows=200, lira_rows=300, n_boot=50)
    report = audit_own_model(
        model, files.train_csv, files.test_csv, label=LABEL, positive_class=None, params=params
    )
    component = report["membership"]["component"]
    # 200 / 686 and 300 / 686 of each group, rounded up.
    assert report["details"]["n"]["distance_rows"] == 51
    assert report["membership"]["boundary_distance"]["n_members"] == 150
    assert (component["n_members"], component["n_nonmembers"]) == (514, 172)
    decided = component["rows_decided_by"]
    assert sum(rows["members"] for rows in decided.values()) == pytest.approx(514)
    assert sum(rows["nonmembers"] for rows in decided.values()) == pytest.approx(172)
    # LiRA wins the folds here, but decides only its 225 members and 76 non-members.
    lira = sum(decided.get(name, {}).get("members", 0.0) for name in ("lira_online",
                                                                       "lira_offline"))  # fmt: skip
    assert 0 < lira <= 225


@pytest.mark.slow
@pytest.mark.parametrize("cohort_seed", [0, 1, 2, 3, 4])
def test_a_one_nearest_neighbour_model_on_100_training_rows_reads_at_most_0_6(
    cohort_seed: int, tmp_path: Path
) -> None:
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    files = write_cohort(tmp_path, "whas500", seed=cohort_seed, n_train=100, n_test=400)
    X, y = files.xy("train")
    model = tmp_path / "1nn.pkl"
    memoriser = make_pipeline(StandardScaler(), KNeighborsClassifier(n_neighbors=1))
    model.write_bytes(pickle.dumps(memoriser.fit(X, y)))
    report = _audit(model, files, "--no-lira")
    component = report["membership"]["component"]
    assert report["components"][MEMBERSHIP] <= 0.6
    assert (component["n_members"], component["n_nonmembers"]) == (100, 400)
    # Every row's distance to the boundary is measured (2,000 rows cover them all),
    # and the label-only attack is the one that sees the memoriser.
    assert report["membership"]["boundary_distance"]["n_members"] == 100
    assert component["rows_decided_by"]["boundary_distance"]["members"] >= 50
