"""``clinaudit grade-many``: grade every submission of a manifest, in parallel.

Each submission is graded by its own pytest session, exactly the session a
grader runs by hand (:func:`pytest_clinaudit.grading.runner.session_args`), which
writes ``<name>.junit.xml`` and ``<name>.score.json`` into the output
directory. Sessions run side by side (``-j N``) through an executor of
:mod:`pytest_clinaudit.batch.executor`.

References are computed once per artifact: before any session starts, the
parent fetches the reference of every distinct variant into the shared cache
(computing it if needed), so the sessions only read it. Should a session still
find the cache cold (a variant registered by a plugin the parent cannot see),
the cache's file lock makes concurrent sessions wait for one computation.

A row that cannot be graded (a usage error such as an unknown variant, a
crash, a timeout) is recorded in ``errors.jsonl`` and in the summary, and the
batch goes on. ``runs.jsonl`` indexes every row; ``summary.json`` holds the
counts. Exit status: 0 when every row was graded (whatever its score), 1 when
any row could not be graded, 130 when the batch was interrupted.

Nothing graded is lost: ``runs.jsonl`` is appended as each row finishes, and
rewritten in manifest order at the end. Ctrl-C stops starting sessions, lets
the running ones end, and writes the records. ``--resume`` then grades only
the rows that an earlier run of the same batch did not grade, or whose
submission, metadata, profile or reference changed since (:func:`earlier_results`).
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

from pytest_clinaudit.batch.executor import (
    Executor,
    Session,
    default_executor,
    make_executor,
)
from pytest_clinaudit.batch.manifest import Row
from pytest_clinaudit.files import sha256_file, write_atomic, write_json_atomic
from pytest_clinaudit.grading import runner
from pytest_clinaudit.grading.runner import Finished
from pytest_clinaudit.grading.scoring import CATEGORIES, NONE
from pytest_clinaudit.grading.values import json_number

JUNIT_SUFFIX = ".junit.xml"
SCORE_SUFFIX = ".score.json"
ERRORS_FILE = "errors.jsonl"
RUNS_FILE = "runs.jsonl"
SUMMARY_FILE = "summary.json"
EXIT_ALL_GRADED = 0
EXIT_SOME_NOT_GRADED = 1
EXIT_INTERRUPTED = 130
INTERRUPTED = "not graded: the batch was interrupted before this row"
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
    resumed: bool = False
    """Graded by an earlier run of the batch (``--resume``), not by this one."""

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
            "resumed": self.resumed,
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
    interrupted: bool = False
    """Ctrl-C stopped the batch: rows it did not reach are not graded (:data:`INTERRUPTED`)."""

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
    def resumed(self) -> list[RowResult]:
        return [r for r in self.rows if r.resumed]

    @property
    def exit_status(self) -> int:
        if self.interrupted:
            return EXIT_INTERRUPTED
        return EXIT_SOME_NOT_GRADED if self.failed else EXIT_ALL_GRADED

    def summary(self) -> dict[str, Any]:
        return {
            "rows": len(self.rows),
            "graded": len(self.graded),
            "not_graded": len(self.failed),
            "resumed": len(self.resumed),
            "interrupted": self.interrupted,
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
    """pytest's arguments for grading ``row`` (:func:`runner.session_args`)."""
    junit_xml, score_json = _outputs(options.out, row)
    return tuple(
        runner.session_args(
            row.submission,
            row.variant,
            score_json=score_json,
            junit_xml=junit_xml,
            profile=options.profile,
            cache_dir=cache_dir,
            variants_dirs=options.variants_dirs,
            mimic_dir=options.mimic_dir,
            meta=row.meta,
        )
    )


def _outputs(out: Path, row: Row) -> tuple[Path, Path]:
    """``row``'s JUnit XML and score JSON in ``out``."""
    return out / f"{row.name}{JUNIT_SUFFIX}", out / f"{row.name}{SCORE_SUFFIX}"


def _graded(
    row: Row,
    out: Path,
    document: dict[str, Any],
    seconds: float,
    exit_status: int | None,
    *,
    resumed: bool = False,
) -> RowResult:
    """A graded row, from the score JSON ``document`` its session wrote."""
    score = json_number(document.get("score"))
    assert score is not None, "the caller checked that the session wrote a score"
    return RowResult(
        row,
        *_outputs(out, row),
        seconds,
        score=score,
        raw_score=json_number(document.get("raw_score")),
        category=str(document.get("category")),
        exit_status=exit_status,
        resumed=resumed,
    )


def _result(row: Row, options: BatchOptions, finished: Finished) -> RowResult:
    """Read what the session left behind: a score, or the reason there is none."""
    junit, score_json = _outputs(options.out, row)
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
    elif finished.exit_code not in (0, 1) or json_number(document.get("score")) is None:
        # 0 and 1 are "graded" (1: some check failed); anything else is an
        # interrupted or crashed session whose score cannot be trusted.
        error = f"the session ended with exit status {finished.exit_code}"
    elif not junit.exists():
        error = "the session wrote no JUnit XML"
    else:
        return _graded(row, options.out, document, finished.seconds, finished.exit_code)
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


ReferenceKey = tuple[str, str, float, tuple[tuple[str, float], ...]]
"""What identifies a reference in a score JSON: artifact and data hashes, SPS, components."""


def _reference_key(
    artifact_sha256: str, data_sha256: str, sps: float, components: dict[str, float]
) -> ReferenceKey:
    return (artifact_sha256, data_sha256, float(sps), tuple(sorted(components.items())))


def warm_references(
    rows: Sequence[Row], options: BatchOptions, cache_dir: Path, say: Say
) -> tuple[list[str], dict[str, ReferenceKey]]:
    """Fetch each distinct variant's reference into the cache once, before any session.

    Returns warnings for variants that could not be fetched (their rows are still
    graded, so that each gets the grading session's own error message), and the
    key of each reference fetched, by the variant name or alias the rows use.
    """
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference
    from pytest_clinaudit.catalog.variants import VariantError, default_catalog
    from pytest_clinaudit.reference.data import DataError, LoadContext
    from pytest_clinaudit.reference.data.mimic import resolve_mimic_dir

    warnings: list[str] = []
    keys: dict[str, ReferenceKey] = {}
    try:
        catalog = default_catalog(options.variants_dirs)
    except VariantError as exc:
        return [f"cannot load the variants: {exc}"], keys
    cache = ReferenceCache(cache_dir)
    fetched: dict[str, ReferenceKey | None] = {}
    for name in dict.fromkeys(row.variant for row in rows):
        try:
            variant = catalog.get(name)
        except VariantError as exc:
            warnings.append(f"variant {name!r}: {exc}")
            continue
        if variant.name in fetched:  # an alias of a variant already fetched
            key = fetched[variant.name]
            if key is not None:
                keys[name] = key
            continue
        fetched[variant.name] = None
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
        fetched[variant.name] = keys[name] = _reference_key(
            reference.artifact_sha256, reference.data_sha256, reference.sps, reference.components
        )
    return warnings, keys


# ------------------------------------------------------------------ resuming


def read_journal(out: Path) -> dict[str, dict[str, Any]]:
    """The records of ``out/runs.jsonl`` by row name, the last one of each name winning.

    Lines that are not JSON objects (a line cut short when a batch was killed) are
    skipped; a missing file is no records.
    """
    try:
        text = (out / RUNS_FILE).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    records: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("name"), str):
            records[record["name"]] = record
    return records


def _file_sha256(path: Path) -> str | None:
    """The sha256 a grading session records for ``path``; ``None`` for no regular file."""
    try:
        if path.is_symlink() or not path.is_file():
            return None
        return sha256_file(path)
    except OSError:
        return None


def earlier_results(
    rows: Sequence[Row],
    options: BatchOptions,
    references: dict[str, ReferenceKey],
) -> dict[int, RowResult]:
    """The rows an earlier run of this batch graded that need no new session, by manifest line.

    A row is kept only when all of this holds: ``runs.jsonl`` says it was graded,
    with the same submission path, variant and metadata as now; its JUnit XML and
    score JSON are there, and the score JSON agrees on the score, the profile and
    the metadata; its reference is the one this run fetched (same artifact, data,
    SPS and components); and the submission file has the same sha256, or was and
    still is missing. Anything else is graded again.
    """
    records = read_journal(options.out)
    kept: dict[int, RowResult] = {}
    for row in rows:
        record = records.get(row.name)
        if record is None or record.get("graded") is not True:
            continue
        if (record.get("submission"), record.get("variant"), record.get("meta")) != (
            str(row.submission),
            row.variant,
            dict(row.meta),
        ):
            continue
        junit, score_json = _outputs(options.out, row)
        try:
            document = json.loads(score_json.read_text(encoding="utf-8"))
            reference, submission = document["reference"], document["submission"]
            recorded_sha = submission["sha256"]
            unchanged_file = (
                recorded_sha == _file_sha256(row.submission)
                if recorded_sha is not None
                else submission["status"] == "missing" and not os.path.lexists(row.submission)
            )
            fresh = (
                unchanged_file
                and junit.is_file()
                and document["score"] == record["score"]
                and document["profile"] == options.profile
                and document["meta"] == dict(row.meta)
                and references.get(row.variant)
                == _reference_key(
                    reference["artifact_sha256"],
                    reference["data_sha256"],
                    reference["sps"],
                    reference["components"],
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if fresh:
            seconds = json_number(record.get("seconds")) or 0.0
            exit_status = record.get("exit_status")
            kept[row.line] = _graded(row, options.out, document, seconds, exit_status, resumed=True)
    return kept


def grade_rows(
    rows: Sequence[Row],
    options: BatchOptions,
    *,
    say: Say | None = None,
    progress: ProgressBar | None = None,
    resume: bool = False,
) -> BatchResult:
    """Grade every row, ``options.jobs`` sessions at a time; never raises for a bad row.

    Each finished row is appended to ``runs.jsonl`` at once, so that a batch
    killed half-way keeps what it graded. Ctrl-C (:class:`KeyboardInterrupt`)
    starts no further session, waits for the running ones and returns a result
    marked ``interrupted``.

    Parameters
    ----------
    rows
        From :func:`pytest_clinaudit.batch.manifest.read_batch_manifest`.
    options
        The output directory must exist; outputs of earlier runs of the rows
        graded now are replaced.
    say
        Receives progress messages (reference fetching, resuming); default: nothing.
    progress
        Updated after each row graded now.
    resume
        Keep the rows an earlier run graded (:func:`earlier_results`) and grade
        only the others.
    """
    from pytest_clinaudit.catalog.cache import default_cache_dir

    say = say or (lambda _message: None)
    cache_dir = (options.cache_dir or default_cache_dir()).absolute()
    options = dataclasses.replace(options, out=options.out.absolute())
    start = time.perf_counter()
    warnings, references = (
        warm_references(rows, options, cache_dir, say) if options.warm else ([], {})
    )
    for warning in warnings:
        say(f"warning: {warning}; its rows will not be graded")
    results = earlier_results(rows, options, references) if resume else {}
    if resume:
        say(f"resuming: {len(results)} of {len(rows)} row(s) already graded in {options.out}")
    todo = [row for row in rows if row.line not in results]
    if progress is not None:
        progress.total = len(todo)
    for row in todo:  # a row's old outputs must not survive a failure to grade it now
        for path in _outputs(options.out, row):
            path.unlink(missing_ok=True)
    jobs = max(1, min(options.jobs, len(todo)))
    interrupted = False
    executor: Executor | None = make_executor(options.executor, jobs) if todo else None
    with open(options.out / RUNS_FILE, "a" if resume else "w", encoding="utf-8") as journal:

        def finished(result: RowResult) -> None:
            results[result.row.line] = result
            journal.write(json.dumps(result.record(), allow_nan=False) + "\n")
            journal.flush()
            if progress is not None:
                progress.update(result)

        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:

                def grade_one(row: Row) -> RowResult:
                    assert executor is not None
                    session = Session(session_args(row, options, cache_dir), options.timeout)
                    return _result(row, options, executor.run(session))

                futures = [pool.submit(grade_one, row) for row in todo]
                try:
                    for future in concurrent.futures.as_completed(futures):
                        finished(future.result())
                except KeyboardInterrupt:
                    interrupted = True
                    for future in futures:
                        future.cancel()
                    if progress is not None:
                        progress.finish()
                    say("interrupted: starting no more sessions; waiting for the running ones")
                    for future in futures:
                        if not future.cancelled():
                            result = future.result()
                            if result.row.line not in results:
                                finished(result)
                except BaseException:
                    for future in futures:
                        future.cancel()
                    raise
        finally:
            if executor is not None:
                executor.close()
            if progress is not None:
                progress.finish()
    for row in rows:
        if row.line not in results:  # never started: Ctrl-C came first
            results[row.line] = RowResult(row, *_outputs(options.out, row), 0.0, error=INTERRUPTED)
    return BatchResult(
        rows=[results[row.line] for row in rows],
        seconds=time.perf_counter() - start,
        jobs=jobs,
        executor="none" if executor is None else executor.name,
        profile=options.profile,
        warnings=warnings,
        interrupted=interrupted,
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


def prepare_out_dir(
    out: Path, *, force: bool, resume: bool = False, rows: Sequence[Row] = ()
) -> None:
    """Create ``out``; refuse to mix with an earlier batch's outputs unless ``force`` or ``resume``.

    With ``force`` only files this command writes are removed (``*.junit.xml``,
    ``*.score.json``, ``runs.jsonl``, ``errors.jsonl``, ``summary.json``). With
    ``resume`` they are kept, provided every one of them belongs to one of ``rows``.

    Raises
    ------
    OutputDirError
        ``out`` holds an earlier batch (with ``resume``: a different one):
        `clinaudit report` would mix the two.
    """
    earlier = _earlier_outputs(out)
    if resume:
        ours = {ERRORS_FILE, RUNS_FILE, SUMMARY_FILE}
        ours.update(path.name for row in rows for path in _outputs(out, row))
        strangers = [path for path in earlier if path.name not in ours]
        if strangers:
            raise OutputDirError(
                f"cannot resume: {out} holds {len(strangers)} output file(s) of rows that are "
                f"not in this manifest (e.g. {strangers[0].name}), so it is another batch. "
                "Choose another --out directory, or pass --force instead of --resume to "
                "start over"
            )
        earlier = []
    elif earlier and not force:
        raise OutputDirError(
            f"{out} already holds {len(earlier)} output file(s) of an earlier batch (e.g. "
            f"{earlier[0].name}); `clinaudit report` would mix both batches. Choose another "
            "--out directory, pass --resume to finish that batch, or pass --force to delete "
            "those files first"
        )
    for path in earlier:
        path.unlink()
    out.mkdir(parents=True, exist_ok=True)


def write_records(result: BatchResult, out: Path) -> None:
    """``runs.jsonl`` (every row), ``errors.jsonl`` (rows not graded), ``summary.json``."""

    def lines(documents: Iterable[dict[str, Any]]) -> str:
        return "".join(json.dumps(d, allow_nan=False) + "\n" for d in documents)

    # runs.jsonl replaces the journal grade_rows appended to: whole or not at all.
    write_atomic(out / RUNS_FILE, lines(r.record() for r in result.rows))
    write_atomic(
        out / ERRORS_FILE, lines({**r.record(), "output": r.output} for r in result.failed)
    )
    write_json_atomic(out / SUMMARY_FILE, result.summary())


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
        self._line_open = False

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
            self._line_open = True
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
        """End the bar's line (if one is drawn), so that other messages start on their own."""
        if self._line_open:
            self.stream.write("\n")
            self.stream.flush()
            self._line_open = False
