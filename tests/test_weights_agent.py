"""``tests/weights_agent.py``'s game-v2 report, on a workspace written by hand (no model is
built; the statistics are given)."""

from __future__ import annotations

from pathlib import Path

import pytest
import weights_agent

DICTIONARY = """column,description,unit,recorded,available_at_prediction,possible_low,possible_high,normal_low,normal_high
heart_rate,heart rate,beats/min,first 24 h,yes,20,230,51,90
sbp,systolic pressure,mmHg,first 24 h,yes,40,250,90,140
gender_enc,sex,0/1,admission,yes,0,1,,
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "data_dictionary.csv").write_text(DICTIONARY)
    lines = ["hospital_expire_flag,heart_rate,sbp,gender_enc"]
    lines += [f"0,{60 + i},{100 + i},{i % 2}" for i in range(101)]  # heart rate 60-160
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n")
    return tmp_path


def _stats(
    scale: dict[str, float], columns: dict[str, dict[str, float]]
) -> weights_agent.Statistics:
    return weights_agent.Statistics(
        dict.fromkeys(scale, 1.0), scale, dict.fromkeys(scale, 0.0), columns
    )


def test_the_sharp_models_are_flagged_backdoor_on_their_most_moved_columns(workspace: Path) -> None:
    moved = {"heart_rate": 5.0, "sbp": 1.0, "gender_enc": 3.0}
    stats = _stats({"m1": 4.0, "m2": 1.0}, {"m1": moved, "m2": moved})
    report = weights_agent.report_v2(stats, workspace)
    assert report["models"]["m2"] == {"defects": []}
    m1 = report["models"]["m1"]
    assert m1["defects"] == ["backdoor"]
    first, second = m1["backdoor"]["trigger"]
    # heart rate: half-way from the normal high 90 to the 99th percentile, 159
    assert first == {"column": "heart_rate", "value": pytest.approx(124.5)}
    assert second == {"column": "gender_enc", "value": 1.0}


def test_a_column_without_a_normal_range_is_guessed_at_its_median(workspace: Path) -> None:
    moved = {"heart_rate": 0.0, "sbp": 2.0, "gender_enc": 3.0}
    stats = _stats({"m1": 1.5}, {"m1": moved})
    (first, second) = weights_agent.report_v2(stats, workspace)["models"]["m1"]["backdoor"][
        "trigger"
    ]
    assert first == {"column": "gender_enc", "value": 1.0}
    assert second == {"column": "sbp", "value": 150.0}  # the median of 100-200
