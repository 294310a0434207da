"""``clinaudit grade``: grade one report in a session nothing beside the report can configure."""

from __future__ import annotations

import argparse
import importlib.util
import shlex
import sys
from pathlib import Path
from typing import Any

from pytest_clinaudit.catalog.cache import ENV_CACHE_DIR
from pytest_clinaudit.cli.common import EXIT_OK, EXIT_USAGE, positive_seconds

EXIT_FAILED = 1
"""Graded, and some check failed (or the score is below ``--fail-under``): pytest's status."""


def register(sub: Any) -> None:
    from pytest_clinaudit.grading.options import PROFILES, meta_item, profile, score_threshold

    grade = sub.add_parser(
        "grade",
        help="grade one report, isolated from the folder it lies in",
        description="Grade REPORT in a fresh `python -m pytest` session started in an empty "
        "directory, with no ini file, no conftest.py and no PYTEST_ADDOPTS: nothing in the "
        "report's folder (the agent's workspace) can configure it. Prints the score and the "
        "failing checks. Exit status 0 if every check passed (with --fail-under: if the score "
        "reaches it), 1 if the report was graded and some check failed, 2 if it could not be "
        "graded (an unknown variant, a manifest that does not match, a crash).",
    )
    grade.add_argument("report", type=Path, metavar="REPORT", help="the report (JSON) to grade")
    grade.add_argument("--variant", required=True, metavar="NAME", help="variant name or alias")
    grade.add_argument(
        "--manifest",
        type=Path,
        metavar="PATH",
        help="the grader's manifest of `clinaudit build` (a game's instance is read from it)",
    )
    grade.add_argument(
        "--profile",
        type=profile,
        default="strict",
        metavar="{" + ",".join(PROFILES) + "}",
        help="grading profile (default: strict)",
    )
    grade.add_argument(
        "--score-json", type=Path, metavar="PATH", help="also write the score JSON here"
    )
    grade.add_argument(
        "--junit-xml", type=Path, metavar="PATH", help="also write the JUnit XML here"
    )
    grade.add_argument(
        "--html",
        type=Path,
        metavar="PATH",
        help="also write pytest-html's page of the session, with the grade's columns "
        "(needs pytest-html)",
    )
    grade.add_argument(
        "--fail-under",
        type=score_threshold,
        metavar="SCORE",
        help="exit status 0 if and only if the score is at least SCORE (0..1)",
    )
    grade.add_argument(
        "--meta",
        type=meta_item,
        action="append",
        metavar="KEY=VALUE",
        help="metadata copied into the score JSON and the JUnit XML; may be repeated",
    )
    grade.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"reference cache (default: ${ENV_CACHE_DIR} or ~/.cache/pytest-clinaudit)",
    )
    grade.add_argument(
        "--variants-dir",
        action="append",
        type=Path,
        metavar="DIR",
        help="extra variant files (*.toml); may be repeated",
    )
    grade.add_argument(
        "--mimic-dir",
        type=Path,
        metavar="DIR",
        help="a MIMIC-IV extract for the mimic-* variants (default: $CLINAUDIT_MIMIC_DIR)",
    )
    grade.add_argument(
        "--timeout",
        type=positive_seconds,
        default=600.0,
        metavar="SECONDS",
        help="time limit of the session (default 600)",
    )
    grade.set_defaults(handler=_cmd_grade)


def grade_command(report: Path, variant: str, manifest: Path) -> str:
    """The command that grades a workspace's report, as ``clinaudit build`` prints it."""
    return shlex.join(
        ["clinaudit", "grade", str(report), "--variant", variant, "--manifest", str(manifest)]
    )


def _absolute(path: Path | None) -> Path | None:
    """The session runs in a directory of its own: every path is made absolute here."""
    return None if path is None else path.expanduser().absolute()


def _cmd_grade(args: argparse.Namespace) -> int:
    from pytest_clinaudit.grading import options
    from pytest_clinaudit.grading.runner import grade

    for flag, directory in [("--variants-dir", d) for d in args.variants_dir or ()] + [
        ("--mimic-dir", args.mimic_dir)
    ]:
        if directory is not None and not directory.is_dir():
            print(f"clinaudit grade: error: {flag} {directory}: not a directory", file=sys.stderr)
            return EXIT_USAGE
    if args.html is not None and importlib.util.find_spec("pytest_html") is None:
        print(
            "clinaudit grade: error: --html needs pytest-html (pip install pytest-html)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    extra: list[str] = []
    if args.fail_under is not None:
        extra += [options.FAIL_UNDER, f"{args.fail_under!r}"]
    if args.html is not None:
        extra += [f"--html={_absolute(args.html)}", "--self-contained-html"]
    try:
        document = grade(
            _absolute(args.report) or args.report,
            args.variant,
            timeout=args.timeout,
            score_json=_absolute(args.score_json),
            profile=args.profile,
            manifest=_absolute(args.manifest),
            junit_xml=_absolute(args.junit_xml),
            cache_dir=_absolute(args.cache_dir),
            variants_dirs=tuple(d.absolute() for d in args.variants_dir or ()),
            mimic_dir=_absolute(args.mimic_dir),
            meta=dict(args.meta or ()),
            extra=extra,
        )
    except RuntimeError as exc:
        print(f"clinaudit grade: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for line in summary(document):
        print(line)
    if args.score_json is not None:
        print(f"clinaudit: score JSON written to {args.score_json}")
    status = document.get("exit_status")
    if status == EXIT_OK:
        return EXIT_OK
    if status == EXIT_FAILED:
        return EXIT_FAILED
    print(f"clinaudit grade: error: the session ended with exit status {status}", file=sys.stderr)
    return EXIT_USAGE


def summary(document: dict[str, Any]) -> list[str]:
    """The score line and one entry per failing check of a score JSON document."""
    score = document.get("score")
    shown = "none (no submission)" if document.get("raw_score") is None else f"{score:.3f}"
    lines = [
        f"clinaudit: {document.get('variant')} score {shown} (profile {document.get('profile')}) "
        f"category {document.get('category')}"
    ]
    if document.get("invariants_ok") is False:
        lines[0] += " -- an invariant FAILED: the variant, model or grader is suspect"
    failing = [
        c for c in document.get("checks") or () if not c.get("passed") and not c.get("skipped")
    ]
    for check in failing:
        message = str(check.get("message") or "").strip().splitlines() or [""]
        lines.append(f"  FAIL {check.get('id')}: {message[0]}")
        lines += [f"       {line}" for line in message[1:]]
    if failing:
        lines.append(f"clinaudit: {len(failing)} failing check(s)")
    return lines
