"""Issue 28, part 2: a verdict that names what fails.

The SPS verdict stays the paper's; beside it every component below its floor
is a finding, in the JSON (``findings``, ``verdict_line``), the terminal
summary and the page's verdict box.
"""

from __future__ import annotations

import html
import json
from typing import Any

import pytest
from owner_cohorts import LABEL, write_gbsg2_forest

from pytest_clinaudit.cli import main
from pytest_clinaudit.reference.attacks.params import COMPONENTS
from pytest_clinaudit.reference.attacks.sps import security_posture_score, verdict
from pytest_clinaudit.reference.review.findings import Floors, findings, verdict_line
from pytest_clinaudit.reference.review.profile import OwnDataParams


def test_the_issues_forest_is_production_by_the_sps_and_fails_membership() -> None:
    """Issue 28's FLCHAIN forest: membership 0.545 and an SPS above 80."""
    params = OwnDataParams()
    components = {
        "fgsm_robustness": 0.97,
        "membership_inference_resistance": 0.545,
        "calibration_ece": 0.93,
        "boundary_attack_resistance": 0.90,
    }
    sps = security_posture_score(components, params.weights)
    assert verdict(round(sps, 2), params.verdict) == "PRODUCTION"
    found = findings(components, {}, params.floors)
    assert verdict_line("PRODUCTION", found) == (
        "PRODUCTION by the SPS; membership: fails (0.545 < 0.70)"
    )
    assert [f["component"] for f in found] == ["membership_inference_resistance"]


def test_a_component_at_its_floor_is_no_finding_and_one_below_is() -> None:
    floors = Floors()
    at = {name: floors.of(name) for name in COMPONENTS}
    assert findings(at, {}, floors) == []
    assert verdict_line("CONDITIONAL", []) == (
        "CONDITIONAL by the SPS; every component at or above its floor"
    )
    below = {name: floors.of(name) - 0.01 for name in COMPONENTS}
    intervals = {name: {"low": 0.0, "high": floors.of(name) - 0.005} for name in COMPONENTS}
    found = findings(below, intervals, floors)
    assert [f["component"] for f in found] == list(COMPONENTS)
    assert all(f["clearly"] for f in found)
    assert all(f["reason"] for f in found)


@pytest.fixture(scope="module")
def forest_audit(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An unpruned random forest on GBSG2 (text categories one-hot encoded), audited."""
    directory = tmp_path_factory.mktemp("gbsg2-forest")
    model, cohort = write_gbsg2_forest(directory)
    out, page = directory / "report.json", directory / "report.html"
    argv = [
        "audit", "--model", str(model), "--train", str(cohort.train_csv),
        "--test", str(cohort.test_csv), "--label", LABEL, "--bootstrap", "100", "--no-lira",
        "-q", "--out", str(out), "--html", str(page),
    ]  # fmt: skip
    assert main(argv) == 0
    return {"report": json.loads(out.read_text()), "page": page.read_text()}


def test_every_component_below_its_floor_is_a_finding_next_to_the_verdict(
    forest_audit: dict[str, Any],
) -> None:
    report = forest_audit["report"]
    floors = report["parameters"]["floors"]
    below = [n for n in COMPONENTS if report["components"][n] < floors[n]]
    assert [f["component"] for f in report["findings"]] == below
    # An unpruned forest on 514 patients leaks which ones it was trained on.
    assert "membership_inference_resistance" in below
    for finding in report["findings"]:
        name = finding["component"]
        assert finding["floor"] == floors[name]
        interval = report["uncertainty"]["components"][name]
        assert (finding["low"], finding["high"]) == (interval["low"], interval["high"])
    membership = report["components"]["membership_inference_resistance"]
    assert f"membership: fails ({membership:.3f} < 0.70)" in report["verdict_line"]
    assert report["verdict_line"].startswith(f"{report['verdict']} by the SPS; ")


def test_the_pages_verdict_box_names_the_findings(forest_audit: dict[str, Any]) -> None:
    page = html.unescape(forest_audit["page"])
    box = page[page.index('<div class="verdict">') : page.index('id="components-heading"')]
    for finding in forest_audit["report"]["findings"]:
        assert f"<strong>{finding['text']}</strong>" in box
        assert finding["reason"] in box
