"""``clinaudit grade-many``: grade every submission of a manifest, in parallel.

Each submission is graded by its own pytest session, exactly the session a
grader runs by hand (:func:`pytest_clinaudit.runner.grade_command`), which
writes ``<name>.junit.xml`` and ``<name>.score.json`` into the output
directory. Sessions run side by side (``-j N``) through an executor of
:mod:`pytest_clinaudit.batch_exec`.

References are computed once per artifact: before any session starts, the
parent fetches the reference of every distinct variant into the shared cache
(computing it if needed), so the sessions only read it. Should a session still
find the cache cold (a variant registered by a plugin the parent cannot see),
the cache's file lock makes concurrent sessions wait for one computation.

A row that cannot be graded (a usage error such as an unknown variant, a
crash, a timeout) is recorded in ``errors.jsonl`` and in the summary, and the
batch goes on. ``runs.jsonl`` indexes every row; ``summary.json`` holds the
counts. Exit status: 0 when every row was graded (whatever its score), 1 when
any row could not be graded.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import math
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from pytest_clinaudit.batch_exec import (
    Executor,
    Finished,
    Session,
    default_executor,
    make_executor,
)
from pytest_clinaudit.batch_manifest import Row
from pytest_clinaudit.files import write_json_atomic
from pytest_clinaudit.runner import grade_command
from pytest_clinaudit.scoring import CATEGORIES, NONE

JUNIT_SUFFIX = ".junit.xml"
SCORE_SUFFIX = ".score.json"
ERRORS_FILE = "errors.jsonl"
RUNS_FILE = "runs.jsonl"
SUMMARY_FILE = "summary.json"
EXIT_ALL_GRADED = 0
EXIT_SOME_NOT_GRADED = 1
DEFAULT_TIMEOUT = 600.0
"""Seconds one session may take; a warm session takes about one."""

Say = Callable[[str], None]


def default_jobs() -> int:
    """The CPUs this process may use (``sched_getaffinity`` where it exists)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


@dataclasses.dataclass(frozen=True)
class BatchOptions:
    """How to grade a batch (the ``grade-many`` flags)."""

    out: Path
    jobs: int = dataclasses.field(default_factory=default_jobs)
    profile: str = "strict"
    cache_dir: Path | None = None
    """``None``: ``$CLINAUDIT_CACHE_DIR`` or ``~/.cache/pytest-clinaudit``, resolved once."""
    variants_dirs: tuple[Path, ...] = ()
    mimic_dir: Path | None = None
    executor: str = dataclasses.field(default_factory=default_executor)
    timeout: float = DEFAULT_TIMEOUT
    warm: bool = True
    """Fetch every variant's reference in this process first (off only to test the lock)."""


@dataclasses.dataclass(frozen=True)
class RowResult:
    """The outcome of one row: graded (a score) or not (an error)."""

    row: Row
    junit_xml: Path
    score_json: Path
    seconds: float
    score: float | None = None
    raw_score: float | None = None
    category: str | None = None
    exit_status: int | None = None
    error: str = ""
    """Why the row was not graded; empty when it was."""
    output: str = ""
    """The tail of the session's output, kept when the row was not graded."""

    @property
    def graded(self) -> bool:
        return not self.error

    def record(self) -> dict[str, Any]:
        """This row as a line of ``runs.jsonl`` (and, with ``output``, of ``errors.jsonl``)."""
        document: dict[str, Any] = {
            "line": self.row.line,
            "name": self.row.name,
            "submission": str(self.row.submission),
            "variant": self.row.variant,
            "meta": dict(self.row.meta),
            "graded": self.graded,
            "score": self.score,
            "raw_score": self.raw_score,
            "category": self.category,
            "exit_status": self.exit_status,
            "seconds": round(self.seconds, 3),
            "junit_xml": self.junit_xml.name if self.graded else None,
            "score_json": self.score_json.name if self.score_json.exists() else None,
        }
        if not self.graded:
            document["error"] = self.error
        return document


@dataclasses.dataclass
class BatchResult:
    """Every row's outcome, in manifest order, and how the batch ran."""

    rows: list[RowResult]
    seconds: float
    jobs: int
    executor: str
    profile: str
    warnings: list[str] = dataclasses.field(default_factory=list)

    @property
    def graded(self) -> list[RowResult]:
        return [r for r in self.rows if r.graded]

    @property
    def failed(self) -> list[RowResult]:
        return [r for r in self.rows if not r.graded]

    @property
    def mean_score(self) -> float | None:
        scores = [r.score for r in self.graded if r.score is not None]
        return math.fsum(scores) / len(scores) if scores else None

    @property
    def categories(self) -> dict[str, int]:
        """Graded rows per failure category, every category listed (``none`` first)."""
        counts = Counter(r.category for r in self.graded)
        return {name: counts.get(name, 0) for name in (NONE, *CATEGORIES)}

    @property
    def exit_status(self) -> int:
        return EXIT_SOME_NOT_GRADED if self.failed else EXIT_ALL_GRADED

    def summary(self) -> dict[str, Any]:
        return {
            "rows": len(self.rows),
            "graded": len(self.graded),
            "not_graded": len(self.failed),
            "mean_score": self.mean_score,
            "categories": self.categories,
            "profile": self.profile,
            "jobs": self.jobs,
            "executor": self.executor,
            "seconds": round(self.seconds, 3),
            "exit_status": self.exit_status,
            "warnings": self.warnings,
        }


# ----------------------------------------------------------------- the sessions


def session_args(row: Row, options: BatchOptions, cache_dir: Path) -> tuple[str, ...]:
    """pytest's arguments for grading ``row``: :func:`grade_command` without the interpreter."""
    out = options.out
    command = grade_command(
        row.submission,
        row.variant,
        score_json=out / f"{row.name}{SCORE_SUFFIX}",
        junit_xml=out / f"{row.name}{JUNIT_SUFFIX}",
        profile=options.profile,
        cache_dir=cache_dir,
        variants_dirs=options.variants_dirs,
        mimic_dir=options.mimic_dir,
        meta=row.meta,
    )
    prefix = [sys.executable, "-m", "pytest"]
    if command[:3] != prefix:  # pragma: no cover - guards a change of grade_command
        raise RuntimeError(f"grade_command no longer starts with {prefix}: {command[:4]}")
    return tuple(command[3:])


def _result(row: Row, options: BatchOptions, finished: Finished) -> RowResult:
    """Read what the session left behind: a score, or the reason there is none."""
    junit = options.out / f"{row.name}{JUNIT_SUFFIX}"
    score_json = options.out / f"{row.name}{SCORE_SUFFIX}"
    output = finished.output.strip()
    document: dict[str, Any] | None = None
    try:
        loaded = json.loads(score_json.read_text(encoding="utf-8"))
        document = loaded if isinstance(loaded, dict) else None
    except (OSError, ValueError):
        document = None
    if finished.problem:
        error = finished.problem
    elif document is None:
        error = f"the session wrote no score (exit status {finished.exit_code})"
    elif document.get("error"):
        error = str(document["error"])  # a usage error: unknown variant, missing data, ...
    elif finished.exit_code not in (0, 1) or not isinstance(document.get("score"), (int, float)):
        # 0 and 1 are "graded" (1: some check failed); anything else is an
        # interrupted or crashed session whose score cannot be trusted.
        error = f"the session ended with exit status {finished.exit_code}"
    elif not junit.exists():
        error = "the session wrote no JUnit XML"
    else:
        raw = document.get("raw_score")
        return RowResult(
            row,
            junit,
            score_json,
            finished.seconds,
            score=float(document["score"]),
            raw_score=None if raw is None else float(raw),
            category=str(document.get("category")),
            exit_status=finished.exit_code,
        )
    # A partial JUnit XML must not reach `clinaudit report` as if it were a grade.
    junit.unlink(missing_ok=True)
    return RowResult(
        row,
        junit,
        score_json,
        finished.seconds,
        exit_status=finished.exit_code,
        error=error,
        output=output,
    )


def warm_references(
    rows: Sequence[Row], options: BatchOptions, cache_dir: Path, say: Say
) -> list[str]:
    """Fetch each distinct variant's reference into the cache once, before any session.

    Returns warnings for variants that could not be fetched; their rows are still
    graded, so that each gets the grading session's own error message.
    """
    from pytest_clinaudit.cache import ReferenceCache
    from pytest_clinaudit.catalog import VariantError, default_catalog
    from pytest_clinaudit.reference.data import DataError, LoadContext
    from pytest_clinaudit.reference.mimic import resolve_mimic_dir
    from pytest_clinaudit.references import get_reference

    warnings: list[str] = []
    try:
        catalog = default_catalog(options.variants_dirs)
    except VariantError as exc:
        return [f"cannot load the variants: {exc}"]
    cache = ReferenceCache(cache_dir)
    seen: set[str] = set()
    for name in dict.fromkeys(row.variant for row in rows):
        try:
            variant = catalog.get(name)
        except VariantError as exc:
            warnings.append(f"variant {name!r}: {exc}")
            continue
        if variant.name in seen:  # an alias of a variant already fetched
            continue
        seen.add(variant.name)
        context = LoadContext(
            base_dir=variant.path.parent, mimic_dir=resolve_mimic_dir(options.mimic_dir)
        )
        start = time.perf_counter()
        try:
            reference = get_reference(
                variant, cache=cache, context=context, progress=lambda m: say(f"  {m}")
            )
        except (DataError, VariantError, OSError) as exc:
            warnings.append(f"variant {variant.name}: cannot compute its reference: {exc}")
            continue
        state = "read from the cache" if reference.from_cache else "computed and cached"
        say(
            f"reference {variant.name}: SPS {reference.sps:.2f}, {state} "
            f"({time.perf_counter() - start:.1f} s)"
        )
    return warnings


def grade_rows(
    rows: Sequence[Row],
    options: BatchOptions,
    *,
    say: Say | None = None,
    progress: ProgressBar | None = None,
) -> BatchResult:
    """Grade every row, ``options.jobs`` sessions at a time; never raises for a bad row.

    Parameters
    ----------
    rows
        From :func:`pytest_clinaudit.batch_manifest.read_manifest`.
    options
        The output directory must exist; outputs of earlier runs of the same rows
        are replaced.
    say
        Receives progress messages (reference fetching); default: nothing.
    progress
        Updated after each row.
    """
    from pytest_clinaudit.cache import default_cache_dir

    say = say or (lambda _message: None)
    cache_dir = (options.cache_dir or default_cache_dir()).absolute()
    options = dataclasses.replace(options, out=options.out.absolute())
    start = time.perf_counter()
    warnings = warm_references(rows, options, cache_dir, say) if options.warm else []
    for warning in warnings:
        say(f"warning: {warning}; its rows will not be graded")
    for row in rows:  # a row's old outputs must not survive a failure to grade it now
        for suffix in (JUNIT_SUFFIX, SCORE_SUFFIX):
            (options.out / f"{row.name}{suffix}").unlink(missing_ok=True)
    jobs = max(1, min(options.jobs, len(rows)))
    executor: Executor = make_executor(options.executor, jobs)
    results: dict[int, RowResult] = {}
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:

            def grade_one(row: Row) -> RowResult:
                session = Session(session_args(row, options, cache_dir), options.timeout)
                return _result(row, options, executor.run(session))

            futures = {pool.submit(grade_one, row): row for row in rows}
            try:
                for future in concurrent.futures.as_completed(futures):
                    result = future.result()
                    results[result.row.line] = result
                    if progress is not None:
                        progress.update(result)
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
    finally:
        executor.close()
        if progress is not None:
            progress.finish()
    return BatchResult(
        rows=[results[row.line] for row in rows],
        seconds=time.perf_counter() - start,
        jobs=jobs,
        executor=executor.name,
        profile=options.profile,
        warnings=warnings,
    )


# ---------------------------------------------------------------- the records


class OutputDirError(ValueError):
    """The output directory holds an earlier batch and ``--force`` was not given."""


def _earlier_outputs(out: Path) -> list[Path]:
    if not out.is_dir():
        return []
    names = {ERRORS_FILE, RUNS_FILE, SUMMARY_FILE}
    return sorted(
        p
        for p in out.iterdir()
        if p.is_file()
        and (p.name in names or p.name.endswith(JUNIT_SUFFIX) or p.name.endswith(SCORE_SUFFIX))
    )


def prepare_out_dir(out: Path, *, force: bool) -> None:
    """Create ``out``; refuse to mix with an earlier batch's outputs unless ``force``.

    With ``force`` only files this command writes are removed (``*.junit.xml``,
    ``*.score.json``, ``runs.jsonl``, ``errors.jsonl``, ``summary.json``).

    Raises
    ------
    OutputDirError
        ``out`` holds an earlier batch: `clinaudit report` would mix the two.
    """
    earlier = _earlier_outputs(out)
    if earlier and not force:
        raise OutputDirError(
            f"{out} already holds {len(earlier)} output file(s) of an earlier batch (e.g. "
            f"{earlier[0].name}); `clinaudit report` would mix both batches. Choose another "
            "--out directory, or pass --force to delete those files first"
        )
    for path in earlier:
        path.unlink()
    out.mkdir(parents=True, exist_ok=True)


def write_records(result: BatchResult, out: Path) -> None:
    """``runs.jsonl`` (every row), ``errors.jsonl`` (rows not graded), ``summary.json``."""

    def lines(documents: Iterable[dict[str, Any]]) -> str:
        return "".join(json.dumps(d, allow_nan=False) + "\n" for d in documents)

    (out / RUNS_FILE).write_text(lines(r.record() for r in result.rows), encoding="utf-8")
    (out / ERRORS_FILE).write_text(
        lines({**r.record(), "output": r.output} for r in result.failed), encoding="utf-8"
    )
    write_json_atomic(out / SUMMARY_FILE, result.summary())


def format_summary(result: BatchResult, out: Path, manifest: Path | None = None) -> str:
    """The final summary: counts, mean score, categories, rows not graded."""
    rate = len(result.rows) / result.seconds if result.seconds > 0 else float("inf")
    source = f" from {manifest}" if manifest is not None else ""
    lines = [
        f"clinaudit grade-many: {len(result.rows)} submission(s){source}: "
        f"{len(result.graded)} graded, {len(result.failed)} not graded; "
        f"{result.seconds:.1f} s ({rate:.2f} per second, -j {result.jobs}, "
        f"{result.executor} executor)",
    ]
    mean = result.mean_score
    if mean is not None:
        lines.append(
            f"mean score {mean:.3f} over {len(result.graded)} graded submission(s) "
            f"(profile {result.profile}; no submission counts as 0)"
        )
    lines.append(f"{'category':<15} submissions")
    lines += [f"{name:<15} {count:>11}" for name, count in result.categories.items()]
    if result.failed:
        lines.append(f"not graded (details and pytest output in {out / ERRORS_FILE}):")
        for row in result.failed:
            first = row.error.strip().splitlines()[0] if row.error.strip() else "unknown error"
            shown = first if len(first) <= 200 else first[:197] + "..."
            lines.append(f"  {row.row.describe()}: {shown}")
    lines.append(
        f"per submission: <name>{JUNIT_SUFFIX} and <name>{SCORE_SUFFIX} in {out}; "
        f"tables and plots: clinaudit report {out}"
    )
    return "\n".join(lines)


# ------------------------------------------------------------------- progress


class ProgressBar:
    """Progress on ``stream``: one redrawn bar on a terminal, one line per row otherwise."""

    WIDTH = 28

    def __init__(self, total: int, stream: IO[str] | None = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done = 0
        self.failed = 0
        self.start = time.perf_counter()

    def update(self, result: RowResult) -> None:
        self.done += 1
        self.failed += not result.graded
        elapsed = time.perf_counter() - self.start
        rate = self.done / elapsed if elapsed > 0 else 0.0
        if self.tty:
            filled = int(self.WIDTH * self.done / max(1, self.total))
            eta = (self.total - self.done) / rate if rate > 0 else 0.0
            failed = f"  not graded {self.failed}" if self.failed else ""
            self.stream.write(
                f"\rgrading [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
                f"{self.done}/{self.total}  {rate:.1f}/s  ETA {eta:.0f} s{failed}   "
            )
        else:
            width = len(str(self.total))
            if result.graded:
                what = f"score {result.score:.3f} ({result.category})"
            else:
                what = "NOT GRADED: " + (result.error.strip().splitlines() or ["?"])[0][:160]
            self.stream.write(
                f"[{self.done:>{width}}/{self.total}] {result.row.describe()}: {what}\n"
            )
        self.stream.flush()

    def finish(self) -> None:
        if self.tty and self.done:
            self.stream.write("\n")
            self.stream.flush()
