"""The final summary of a batch on stdout: counts, mean score, categories, rows not graded."""

from __future__ import annotations

from pathlib import Path

from pytest_clinaudit.batch.grade_many.outdir import ERRORS_FILE, JUNIT_SUFFIX, SCORE_SUFFIX
from pytest_clinaudit.batch.grade_many.results import INTERRUPTED, BatchResult


def format_summary(result: BatchResult, out: Path, manifest: Path | None = None) -> str:
    """The final summary: counts, mean score, categories, rows not graded."""
    not_reached = [r for r in result.failed if r.error == INTERRUPTED]
    ran = len(result.rows) - len(result.resumed) - len(not_reached)
    rate = ran / result.seconds if result.seconds > 0 else float("inf")
    source = f" from {manifest}" if manifest is not None else ""
    how = (
        f"{rate:.2f} per second, -j {result.jobs}, {result.executor} executor"
        if ran
        else "no session run"
    )
    lines = [
        f"clinaudit grade-many: {len(result.rows)} submission(s){source}: "
        f"{len(result.graded)} graded, {len(result.failed)} not graded; "
        f"{result.seconds:.1f} s ({how})",
    ]
    if result.resumed:
        lines.append(f"{len(result.resumed)} of them graded by an earlier run (--resume)")
    mean = result.mean_score
    if mean is not None:
        lines.append(
            f"mean score {mean:.3f} over {len(result.graded)} graded submission(s) "
            f"(profile {result.profile}; no submission counts as 0)"
        )
    lines.append(f"{'category':<15} submissions")
    lines += [f"{name:<15} {count:>11}" for name, count in result.categories.items()]
    failed = [r for r in result.failed if r.error != INTERRUPTED]
    if failed:
        lines.append(f"not graded (details and pytest output in {out / ERRORS_FILE}):")
        for row in failed:
            first = row.error.strip().splitlines()[0] if row.error.strip() else "unknown error"
            shown = first if len(first) <= 200 else first[:197] + "..."
            lines.append(f"  {row.row.describe()}: {shown}")
    lines.append(
        f"per submission: <name>{JUNIT_SUFFIX} and <name>{SCORE_SUFFIX} in {out}; "
        f"tables and plots: clinaudit report {out}"
    )
    if result.interrupted:
        lines.append(
            f"INTERRUPTED: {len(result.failed)} row(s) not graded ({len(not_reached)} not "
            "started). Every graded row is kept; run the same command with --resume to grade "
            "only the others"
        )
    return "\n".join(lines)
