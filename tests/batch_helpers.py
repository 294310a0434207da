"""Shared helpers of the batch tests: a synthetic evaluation and its independently known grades.

Not a test module. :data:`PLAN` lays out two agents x two WDBC variants x three
runs (plus a run without agent metadata and a row that cannot be graded), whose
submissions cover every failure category. For each one, :func:`case` writes the
submission *and* states its strict grade, computed here from the reference
report with the rules of docs/grading.md (credit 0.60 SPS tiers + 4 x 0.10
components, penalties 0.10 schema, aggregation, verdict), never by the code
under test. :func:`graded_plan_once` grades the plan once per test process with
``clinaudit grade-many -j 2`` against the warm cache.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from grading_helpers import reference_report

from pytest_clinaudit.cli import main

COMPONENTS = (
    "fgsm_robustness",
    "membership_inference_resistance",
    "calibration_ece",
    "boundary_attack_resistance",
)
WEIGHTS = (0.35, 0.25, 0.20, 0.20)  # SPEC §4
COMPONENT_TOLERANCE = 0.10
UNGRADABLE_VARIANT = "no-such-variant"


def verdict_of(sps: float) -> str:
    """SPEC §4: >= 80 PRODUCTION, >= 65 CONDITIONAL, else NOT RECOMMENDED."""
    return "PRODUCTION" if sps >= 80 else "CONDITIONAL" if sps >= 65 else "NOT RECOMMENDED"


def weighted_sps(components: dict[str, float]) -> float:
    return 100 * sum(w * components[c] for c, w in zip(COMPONENTS, WEIGHTS, strict=True))


@dataclasses.dataclass(frozen=True)
class Expected:
    """What grading one submission must give (strict profile)."""

    score: float
    category: str
    submitted_sps: float | None
    """The SPS when submitted as a JSON number."""
    components_ok: tuple[bool, bool, bool, bool]
    """Each component within 0.10 of the reference (as a JSON number)."""


def _core(reference: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy({k: reference[k] for k in ("sps", "components", "verdict")})


def case(kind: str, reference: dict[str, Any]) -> tuple[bytes | None, Expected]:
    """The submission of ``kind`` for a variant with ``reference``, and its expected grade.

    ``None`` as content: the file is not written (no submission).
    """
    ref_sps = reference["sps"]
    all_ok = (True, True, True, True)
    none_ok = (False, False, False, False)
    report = _core(reference)
    if kind == "perfect":
        return json.dumps(report).encode(), Expected(1.0, "none", ref_sps, all_ok)
    if kind == "missing":
        return None, Expected(0.0, "no-submission", None, none_ok)
    if kind == "empty":
        return b"", Expected(0.0, "empty", None, none_ok)
    if kind == "unparseable":
        return b'{"sps": 57.0, "components": ', Expected(0.0, "unparseable", None, none_ok)
    if kind == "unknown-key":
        # Everything right, plus a top-level key the schema forbids: schema penalty only.
        report["notes"] = "extra"
        return json.dumps(report).encode(), Expected(0.9, "schema", ref_sps, all_ok)
    if kind == "string-sps":
        # A string is no number in strict: no SPS credit (0.60) and the schema penalty.
        report["sps"] = str(ref_sps)
        return json.dumps(report).encode(), Expected(0.3, "schema", None, all_ok)
    if kind == "far-component":
        # calibration 0.30 off, the SPS and verdict consistent with it: the SPS moves by
        # 100 x 0.20 x 0.30 = 6 points, which earns half the SPS credit, and three components.
        components = report["components"]
        components["calibration_ece"] = round(components["calibration_ece"] + 0.30, 4)
        report["sps"] = round(weighted_sps(components), 2)
        report["verdict"] = verdict_of(report["sps"])
        assert 5.0 < abs(report["sps"] - ref_sps) <= 10.0
        expected = Expected(
            0.6 * 0.5 + 0.1 * 3, "tolerance", report["sps"], (True, True, False, True)
        )
        return json.dumps(report).encode(), expected
    if kind == "paper-case":
        # The paper's slip: every component right, an SPS 22 points off and inconsistent
        # with them: no SPS credit, the aggregation penalty.
        report["sps"] = round(ref_sps - 22.0, 2)
        report["verdict"] = verdict_of(report["sps"])
        return json.dumps(report).encode(), Expected(0.4 - 0.1, "tolerance", report["sps"], all_ok)
    if kind == "aggregation":
        # An SPS 3 points off: within the SPS tolerance, but not the sum of the components.
        report["sps"] = round(ref_sps + 3.0, 2)
        report["verdict"] = verdict_of(report["sps"])
        return json.dumps(report).encode(), Expected(0.9, "aggregation", report["sps"], all_ok)
    if kind == "verdict":
        report["verdict"] = next(v for v in ("CONDITIONAL", "PRODUCTION") if v != report["verdict"])
        return json.dumps(report).encode(), Expected(0.9, "verdict", ref_sps, all_ok)
    raise ValueError(kind)


@dataclasses.dataclass(frozen=True)
class Planned:
    """One manifest row of the synthetic evaluation."""

    line: int
    agent: str | None
    variant: str
    run: int
    kind: str
    tokens: int | None
    turns: int | None
    submission: Path
    expected: Expected | None
    """``None`` for the row that cannot be graded."""

    @property
    def meta(self) -> dict[str, str]:
        found = {"agent": self.agent, "run": self.run, "tokens": self.tokens, "turns": self.turns}
        return {k: str(v) for k, v in found.items() if v is not None}


# (agent, variant, run, kind, tokens, turns)
PLAN: tuple[tuple[str | None, str, int, str, int | None, int | None], ...] = (
    ("agent-a", "wdbc-baseline", 1, "perfect", 12000, 14),
    ("agent-a", "wdbc-baseline", 2, "far-component", 15000, 20),
    ("agent-a", "wdbc-baseline", 3, "missing", 4000, 5),
    ("agent-a", "wdbc-hard", 1, "perfect", 11000, 12),
    ("agent-a", "wdbc-hard", 2, "unknown-key", 13000, 16),
    ("agent-a", "wdbc-hard", 3, "empty", 9000, 9),
    ("agent-b", "wdbc-baseline", 1, "aggregation", 30000, None),
    ("agent-b", "wdbc-baseline", 2, "verdict", None, None),
    ("agent-b", "wdbc-baseline", 3, "unparseable", 21000, 33),
    ("agent-b", "wdbc-hard", 1, "perfect", None, 40),
    ("agent-b", "wdbc-hard", 2, "paper-case", 27000, None),
    ("agent-b", "wdbc-hard", 3, "string-sps", None, 25),
    (None, "wdbc-baseline", 1, "perfect", None, None),
)
UNGRADABLE = ("agent-b", UNGRADABLE_VARIANT, 4, "perfect", None, None)


def write_plan(directory: Path, cache_dir: Path, *, ungradable: bool = True) -> list[Planned]:
    """Write the submissions and ``directory/manifest.jsonl``; return the rows in order."""
    submissions = directory / "runs"
    submissions.mkdir(parents=True)
    rows = []
    lines = []
    for index, (agent, variant, run, kind, tokens, turns) in enumerate(
        [*PLAN, *([UNGRADABLE] if ungradable else [])], start=1
    ):
        reference = reference_report(
            cache_dir, variant if variant != UNGRADABLE_VARIANT else "wdbc-baseline"
        )
        content, expected = case(kind, reference)
        path = submissions / f"{agent or 'anonymous'}-{variant}-{run}-{kind}.json"
        if content is not None:
            path.write_bytes(content)
        planned = Planned(
            line=index,
            agent=agent,
            variant=variant,
            run=run,
            kind=kind,
            tokens=tokens,
            turns=turns,
            submission=path,
            expected=None if variant == UNGRADABLE_VARIANT else expected,
        )
        rows.append(planned)
        record: dict[str, Any] = {"submission": f"runs/{path.name}", "variant": variant}
        # JSON numbers and strings both, as manifests written by hand have them.
        record.update(
            {k: (int(v) if k in ("tokens", "turns") else v) for k, v in planned.meta.items()}
        )
        lines.append(json.dumps(record))
    (directory / "manifest.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


@dataclasses.dataclass(frozen=True)
class GradedBatch:
    """The synthetic evaluation, graded by ``clinaudit grade-many -j 2``."""

    directory: Path
    out: Path
    cache_dir: Path
    rows: list[Planned]
    exit_status: int
    stdout: str
    stderr: str

    def name(self, row: Planned) -> str:
        agent = row.agent or ""
        return "-".join(p for p in (f"{row.line:04d}", agent, row.variant, str(row.run)) if p)

    def score_document(self, row: Planned) -> dict[str, Any]:
        document: dict[str, Any] = json.loads(
            (self.out / f"{self.name(row)}.score.json").read_text(encoding="utf-8")
        )
        return document


_GRADED: list[GradedBatch] = []


def graded_plan_once(tmp_path_factory: pytest.TempPathFactory, cache_dir: Path) -> GradedBatch:
    """The plan graded once per test process, whichever test module asks first.

    Both test modules define a session fixture calling this, and pytest runs a
    session fixture once per module that defines it.
    """
    if not _GRADED:
        _GRADED.append(grade_plan(tmp_path_factory.mktemp("batch"), cache_dir))
    return _GRADED[0]


def grade_plan(directory: Path, cache_dir: Path) -> GradedBatch:
    """Write the plan into ``directory`` and grade it with ``clinaudit grade-many -j 2``."""
    rows = write_plan(directory, cache_dir)
    out = directory / "out"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        status = main(
            [
                "grade-many",
                str(directory / "manifest.jsonl"),
                "--out",
                str(out),
                "-j",
                "2",
                "--cache-dir",
                str(cache_dir),
            ]
        )
    return GradedBatch(
        directory, out, cache_dir, rows, status, stdout.getvalue(), stderr.getvalue()
    )
