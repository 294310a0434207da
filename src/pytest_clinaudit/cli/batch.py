"""``clinaudit grade-many`` and ``clinaudit report``: many submissions, and tables of them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_clinaudit.catalog.cache import ENV_CACHE_DIR
from pytest_clinaudit.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CLIError,
    positive_int,
    positive_seconds,
)


def _cmd_grade_many(args: argparse.Namespace) -> int:
    from pytest_clinaudit.batch.grade_many import (
        BatchOptions,
        OutputDirError,
        ProgressBar,
        default_jobs,
        format_summary,
        grade_rows,
        prepare_out_dir,
        write_records,
    )
    from pytest_clinaudit.batch.manifest import BatchManifestError, read_batch_manifest

    try:
        rows = read_batch_manifest(args.manifest)
        for flag, directory in [("--variants-dir", d) for d in args.variants_dir or ()] + [
            ("--mimic-dir", args.mimic_dir)
        ]:
            if directory is not None and not directory.is_dir():
                raise CLIError(f"{flag} {directory}: not a directory")
        prepare_out_dir(args.out, force=args.force, resume=args.resume, rows=rows)
    except (BatchManifestError, OutputDirError, CLIError) as exc:
        print(f"clinaudit grade-many: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"clinaudit grade-many: error: cannot use --out {args.out}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    executor = None
    if args.scheduler is not None:
        from pytest_clinaudit.pool.cluster import ClusterError

        try:
            from pytest_clinaudit.batch.dask_executor import DaskExecutor

            executor = DaskExecutor.connect(args.scheduler, timeout=args.connect_timeout)
        except ClusterError as exc:
            print(f"clinaudit grade-many: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        if not args.quiet:
            where = executor.dashboard or "no dashboard (Dask's needs bokeh)"
            print(
                f"clinaudit: grading on the Dask cluster at {args.scheduler} "
                f"({executor.slots} worker thread(s)); {where}",
                file=sys.stderr,
            )
    options = BatchOptions(
        out=args.out,
        jobs=args.jobs or (default_jobs() if executor is None else executor.slots),
        profile=args.profile,
        cache_dir=args.cache_dir,
        variants_dirs=tuple(d.absolute() for d in args.variants_dir or ()),
        mimic_dir=None if args.mimic_dir is None else args.mimic_dir.absolute(),
        executor=args.executor if executor is None else executor.name,
        timeout=args.timeout,
    )
    say = (lambda _m: None) if args.quiet else (lambda m: print(f"clinaudit: {m}", file=sys.stderr))
    progress = None if args.quiet else ProgressBar(len(rows))
    result = grade_rows(
        rows, options, say=say, progress=progress, resume=args.resume, executor=executor
    )
    write_records(result, args.out)
    print(format_summary(result, args.out, args.manifest))
    return result.exit_status


def _cmd_report(args: argparse.Namespace) -> int:
    from pytest_clinaudit.batch.tables import ReportError, read_report, write_report

    out = args.out if args.out is not None else args.dir / "report"

    def warn(message: str) -> None:
        print(f"clinaudit report: warning: {message}", file=sys.stderr)

    page = None
    if args.html is not None:
        page = out / "report.html" if args.html is _HTML_IN_OUT else args.html
    try:
        report = read_report(args.dir, warn)
        if page is not None:
            from pytest_clinaudit.pages.render import PagesUnavailable, environment

            try:
                environment()
            except PagesUnavailable as exc:
                raise ReportError(str(exc)) from None
        written = write_report(report, out, plots=not args.no_plots, warn=warn)
    except ReportError as exc:
        print(f"clinaudit report: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if page is not None:
        from pytest_clinaudit.pages.batch_page import write_batch_page

        try:
            written.append(write_batch_page(report, page, figures=not args.no_plots))
        except OSError as exc:
            print(f"clinaudit report: error: cannot write {page}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    print(report.tables[0].markdown())
    print(f"written to {out}: {', '.join(_shown(p, out) for p in written)}")
    return EXIT_OK


_HTML_IN_OUT = object()
"""``--html`` given without a file: write OUTDIR/report.html."""


def _shown(path: Path, out: Path) -> str:
    return path.name if path.parent == out else str(path)


def register(sub: Any) -> None:
    from pytest_clinaudit.grading.options import PROFILES, profile

    grade_many = sub.add_parser(
        "grade-many",
        help="grade the submissions of a manifest, in parallel",
        description="Grade every row of MANIFEST (JSON Lines or CSV: submission, variant, and "
        "metadata such as agent, run, tokens, turns) in its own pytest session, -j at a time. "
        "Each row writes <name>.junit.xml and <name>.score.json into --out; rows that cannot be "
        "graded go to errors.jsonl. Exit status 0 if every row was graded, 1 if some could not "
        "be, 2 for a bad manifest or option, 130 if interrupted (every graded row is kept; "
        "--resume finishes the batch). See docs/batch.md.",
    )
    grade_many.add_argument("manifest", type=Path, metavar="MANIFEST", help=".jsonl or .csv")
    grade_many.add_argument(
        "--out", required=True, type=Path, metavar="DIR", help="output directory"
    )
    grade_many.add_argument(
        "-j",
        "--jobs",
        type=positive_int,
        default=None,
        metavar="N",
        help="sessions at a time (default: the number of CPUs)",
    )
    grade_many.add_argument(
        "--profile",
        type=profile,
        default="strict",
        metavar="{" + ",".join(PROFILES) + "}",
        help="grading profile (default: strict)",
    )
    grade_many.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"reference cache (default: ${ENV_CACHE_DIR} or ~/.cache/pytest-clinaudit)",
    )
    grade_many.add_argument(
        "--variants-dir",
        action="append",
        type=Path,
        metavar="DIR",
        help="extra variant files (*.toml); may be repeated",
    )
    grade_many.add_argument(
        "--mimic-dir",
        type=Path,
        metavar="DIR",
        help="a MIMIC-IV extract for the mimic-* variants (default: $CLINAUDIT_MIMIC_DIR)",
    )
    from pytest_clinaudit.batch.executor import EXECUTORS, default_executor

    grade_many.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=default_executor(),
        help="fork: pre-loaded workers fork one pytest session per submission; subprocess: a "
        "new `python -m pytest` per submission. Same sessions, same results "
        f"(default here: {default_executor()})",
    )
    grade_many.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the sessions on the workers of this Dask scheduler (tcp://host:8786); the "
        "submissions, --out and the cache must be on a filesystem every worker sees. Needs "
        "pytest-clinaudit[cluster] (docs/pool.md)",
    )
    grade_many.add_argument(
        "--connect-timeout",
        type=positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="give up on an unreachable --scheduler after this long (default 10)",
    )
    grade_many.add_argument(
        "--timeout",
        type=positive_seconds,
        default=600.0,
        metavar="SECONDS",
        help="time limit of one session (default 600)",
    )
    earlier = grade_many.add_mutually_exclusive_group()
    earlier.add_argument(
        "--force",
        action="store_true",
        help="delete an earlier batch's outputs in --out first",
    )
    earlier.add_argument(
        "--resume",
        action="store_true",
        help="finish an interrupted batch in --out: keep the rows it graded (same submission, "
        "metadata, profile and reference) and grade the others",
    )
    grade_many.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    grade_many.set_defaults(handler=_cmd_grade_many)

    report = sub.add_parser(
        "report",
        help="paper-style tables and plots from graded runs",
        description="Read the JUnit XML files under DIR (written by grade-many, "
        "`clinaudit grade ... --junit-xml ...` or `pytest --submission ... --junitxml ...`) "
        "and write report.md, report.json, one CSV "
        "per table and PNG plots, and with --html one self-contained page of all of it. See "
        "docs/batch.md for the tables.",
    )
    report.add_argument("dir", type=Path, metavar="DIR", help="directory of JUnit XML files")
    report.add_argument(
        "--out", type=Path, metavar="OUTDIR", help="where to write (default: DIR/report)"
    )
    report.add_argument(
        "--no-plots", action="store_true", help="tables only, no matplotlib (nor page figures)"
    )
    report.add_argument(
        "--html",
        nargs="?",
        const=_HTML_IN_OUT,
        type=Path,
        metavar="FILE",
        help="also write the report as one self-contained HTML page: sortable tables, the "
        "plots and a heatmap of mean score per agent x variant (default FILE: "
        "OUTDIR/report.html; needs pytest-clinaudit[report])",
    )
    report.set_defaults(handler=_cmd_report)
