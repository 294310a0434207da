"""HTML pages without a browser: the batch page's numbers, the audit page's content, escaping.

The batch page must show what report.md and report.json show; the audit page
what its context holds. Expected values come from those outputs and from the
example context, never from constants here. tests/test_pages_browser.py opens
the same pages in Chromium.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import html
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from page_helpers import HOSTILE, add_hostile_runs, markdown_tables, read_tables

from pytest_clinaudit.cli import main
from pytest_clinaudit.pages import figures
from pytest_clinaudit.pages.audit_page import AuditContextError, render_audit_page
from pytest_clinaudit.pages.example import example_audit_context

TABLES = ("table1_agents", "table2_agent_variant", "table3_components", "table4_failures")


@pytest.fixture(scope="module")
def batch_report(graded_batch: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``clinaudit report --html`` of the synthetic batch plus two hostile runs."""
    runs = add_hostile_runs(graded_batch.out, tmp_path_factory.mktemp("runs"))
    out = runs / "report"
    assert main(["report", str(runs), "--out", str(out), "--html"]) == 0
    return out


@pytest.fixture(scope="module")
def audit_page() -> str:
    return render_audit_page(example_audit_context())


def _number_or_none(text: str) -> float | None:
    return None if text == "" else float(text)


def _json_value_matches(cell_value: str, value: Any) -> bool:
    if value is None:
        return cell_value == ""
    if isinstance(value, bool):
        return cell_value == ("1" if value else "0")
    if isinstance(value, (int, float)):
        number = _number_or_none(cell_value)
        return number is not None and math.isclose(number, value, rel_tol=0, abs_tol=0)
    return cell_value == str(value)


# ---------------------------------------------------------------- batch page


def test_the_batch_page_shows_every_table_cell_as_report_json_and_report_md_do(
    batch_report: Path,
) -> None:
    page = read_tables((batch_report / "report.html").read_text(encoding="utf-8"))
    document = json.loads((batch_report / "report.json").read_text(encoding="utf-8"))
    markdown = markdown_tables((batch_report / "report.md").read_text(encoding="utf-8"))
    titles = list(markdown)
    for index, name in enumerate(TABLES):
        shown, rows = page[name], document["tables"][name]
        header, *md_rows = markdown[titles[index]]
        assert shown.headers == [h + "" for h in header]
        assert len(shown.rows) == len(rows) == len(md_rows)
        for html_row, json_row, md_row in zip(shown.rows, rows, md_rows, strict=True):
            assert [text for text, _ in html_row] == md_row
            for key, (_, value) in zip(shown.keys, html_row, strict=True):
                assert _json_value_matches(value, json_row[key]), (name, key, value, json_row[key])


def test_the_batch_page_lists_every_run_of_report_json(batch_report: Path) -> None:
    runs = read_tables((batch_report / "report.html").read_text(encoding="utf-8"))["runs"]
    records = json.loads((batch_report / "report.json").read_text(encoding="utf-8"))["run_records"]
    assert len(runs.rows) == len(records)
    for row, record in zip(runs.rows, records, strict=True):
        cells = dict(zip(runs.keys, row, strict=True))
        assert record["file"].endswith(cells["file"][1])
        for key in ("agent", "variant", "category", "score", "submitted_sps", "reference_sps"):
            assert _json_value_matches(cells[key][1], record[key]), (key, cells[key], record[key])


def test_a_hostile_agent_name_is_escaped_in_every_table_and_figure(batch_report: Path) -> None:
    page = (batch_report / "report.html").read_text(encoding="utf-8")
    assert HOSTILE not in page
    assert page.count("<script") == 1  # the page's own sorter
    agents = [row[0][0] for row in read_tables(page)["table1_agents"].rows]
    assert HOSTILE in agents


def test_the_batch_page_has_a_heatmap_and_both_plots_with_titles(batch_report: Path) -> None:
    page = (batch_report / "report.html").read_text(encoding="utf-8")
    for name in ("score-heatmap", "completion", "sps-error"):
        assert f'id="{name}" role="img" aria-labelledby="{name}-title {name}-desc"' in page
        assert f'<title id="{name}-title">' in page


def test_report_html_takes_a_file_name(graded_batch: Any, tmp_path: Path) -> None:
    page = tmp_path / "pages" / "batch.html"
    out = tmp_path / "r"
    assert main(["report", str(graded_batch.out), "--out", str(out), "--html", str(page)]) == 0
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert not (out / "report.html").exists()


def test_report_html_without_plots_has_tables_and_no_figures(
    graded_batch: Any, tmp_path: Path
) -> None:
    out = tmp_path / "r"
    assert main(["report", str(graded_batch.out), "--out", str(out), "--html", "--no-plots"]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<svg" not in page
    assert set(TABLES) <= set(read_tables(page))


# ---------------------------------------------------------------- audit page


def test_the_audit_page_shows_the_verdict_the_sps_interval_and_its_stability(
    audit_page: str,
) -> None:
    context = example_audit_context()
    u = context["uncertainty"]
    assert f'<p class="word">{u["verdict"]}</p>' in audit_page
    assert f"<strong>{u['sps']['point']:.2f}</strong>" in audit_page
    assert f"{u['sps']['low']:.2f} – {u['sps']['high']:.2f}" in audit_page
    holds = 100 * (1 - u["verdict_change_probability"])
    assert f"holds with {holds:.1f}% confidence (BCa, from {u['n_boot']} bootstrap" in audit_page
    for share in u["verdict_distribution"].values():
        assert f"{100 * share:.1f}%" in audit_page


def test_the_audit_page_shows_each_component_with_its_interval_and_weight(
    audit_page: str,
) -> None:
    context = example_audit_context()
    table = read_tables(audit_page)["components"]
    assert len(table.rows) == len(context["weights"])
    shown = {row[1][0]: row for row in table.rows}
    for name, interval in context["uncertainty"]["components"].items():
        row = shown[f"{interval['point']:.4f}"]
        assert row[2][0] == f"{interval['low']:.4f} – {interval['high']:.4f}"
        assert row[3][0] == f"{context['weights'][name]:.2f}"
        assert float(row[4][0]) == pytest.approx(
            100 * interval["point"] * context["weights"][name], abs=0.005
        )


def test_the_audit_page_names_the_model_the_data_and_every_parameter(audit_page: str) -> None:
    context = example_audit_context()
    assert context["model"]["sha256"] in audit_page
    for data in context["data"]:
        assert data["sha256"] in audit_page
    parameters = read_tables(audit_page)["parameters"]
    assert ("fgsm.epsilon", str(context["parameters"]["fgsm"]["epsilon"])) in [
        (row[0][0], row[1][0]) for row in parameters.rows
    ]


def test_the_audit_page_has_four_figures_each_with_how_to_read_it(audit_page: str) -> None:
    assert audit_page.count('<figure class="chart">') == 4
    assert audit_page.count("How to read this.") == 4
    for name in ("reliability", "membership-roc", "adversarial-auroc", "boundary-histogram"):
        assert f'id="{name}" role="img"' in audit_page


def test_the_audit_page_states_sample_sizes_and_the_ece_quirk(audit_page: str) -> None:
    audit_page = html.unescape(audit_page)
    context = example_audit_context()
    samples, ece = context["samples"], context["ece"]
    assert f"The test set has {samples['test']} rows" in audit_page
    assert f"the task's ECE is {ece['task']:.4f}" in audit_page
    assert f"{ece['n_bins_used']} of {ece['n_bins']} bins hold rows" in audit_page
    # Every inestimable low-FPR point, of every attack, in one line: the last caveat.
    caveats = audit_page[audit_page.index('<ul class="caveats">') :].split("</ul>")[0]
    items = caveats.split("<li>")[1:]
    assert sum("not estimable" in item for item in items) == 1
    assert "not estimable" in items[-1]
    for attack in context["figures"]["membership"]:
        for point in attack["low_fpr"]:
            if not point["estimable"]:
                assert str(attack["name"]) in items[-1]
                assert str(point["min_nonmembers"]) in items[-1]


def test_a_missing_context_key_is_named_in_the_error() -> None:
    context = example_audit_context()
    del context["samples"]
    del context["uncertainty"]["verdict"]
    with pytest.raises(AuditContextError) as raised:
        render_audit_page(context)
    assert "context['samples']: missing" in str(raised.value)
    assert "context['uncertainty']['verdict']: missing" in str(raised.value)


def test_hostile_model_names_parameters_and_attack_names_are_escaped() -> None:
    context = example_audit_context(model_name=HOSTILE)
    context["parameters"]["note"] = HOSTILE
    context["figures"]["membership"] = copy.deepcopy(context["figures"]["membership"])
    context["figures"]["membership"][0]["name"] = HOSTILE
    context["caveats"].append(HOSTILE)
    page = render_audit_page(context)
    assert HOSTILE not in page
    assert page.count("<script") == 1
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page


# --------------------------------------------------------- self-containment


@pytest.mark.parametrize("which", ["audit", "batch"])
def test_a_page_loads_nothing_and_allows_only_its_own_script(
    which: str, audit_page: str, batch_report: Path
) -> None:
    page = audit_page if which == "audit" else (batch_report / "report.html").read_text("utf-8")
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page)
    # Links inside the page (#id) and inline data (the heatmap's raster) fetch nothing.
    assert not re.search(r"""(src|href)\s*=\s*["'](?!#|data:)""", page)
    assert "@import" not in page
    assert "url(http" not in page
    (script,) = re.findall(r"<script>(.*?)</script>", page, re.S)
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    assert "default-src 'none'" in html.unescape(policy.group(1))
    assert f"script-src 'sha256-{digest}'" in html.unescape(policy.group(1))


# ------------------------------------------------------------------- figures


def test_each_figure_is_svg_with_a_title_a_description_and_its_own_ids() -> None:
    data = example_audit_context()["figures"]
    made = [
        figures.reliability_diagram(data["reliability"]["bins"]),
        figures.membership_roc(data["membership"]),
        figures.adversarial_auroc(**data["adversarial"]),
        figures.boundary_histogram(data["boundary"]),
    ]
    ids: list[str] = []
    for svg in made:
        assert svg.startswith("<svg ")
        assert 'role="img"' in svg
        assert re.search(r"<title id=\"[\w-]+-title\">[^<]+</title>", svg)
        assert re.search(r"<desc id=\"[\w-]+-desc\">[^<]+</desc>", svg)
        ids += re.findall(r'\bid="([^"]+)"', svg)
        for reference in re.findall(r"url\(#([^)]+)\)", svg):
            assert f'id="{reference}"' in svg
    assert len(ids) == len(set(ids))


def test_the_adversarial_figure_says_when_an_auroc_is_undefined() -> None:
    svg = figures.adversarial_auroc([{"name": "FGSM", "epsilon": [0.1], "auroc": [None]}])
    assert "FGSM: no defined AUROC." in svg


def test_the_boundary_figure_counts_rows_without_a_changed_prediction() -> None:
    summary = example_audit_context()["figures"]["boundary"]
    missing = summary["n_rows"] - summary["n_found"]
    svg = figures.boundary_histogram(summary)
    assert f"{summary['n_found']} of {summary['n_rows']} rows reached" in svg
    assert f"{missing} rows found no changed prediction" in svg


def test_drawing_a_figure_leaves_matplotlib_settings_as_they_were() -> None:
    import matplotlib

    before = dict(matplotlib.rcParams)
    figures.boundary_histogram(example_audit_context()["figures"]["boundary"])
    assert dict(matplotlib.rcParams) == before
