"""``clinaudit``: the reference auditor's command line, one module per command family.

Commands
--------
clinaudit variants
    A table of the variants: names, aliases, datasets, recipes.
clinaudit audit --variant NAME [--out FILE]
    The reference report of a variant (the submission format plus ``details``).
clinaudit audit --model FILE --train CSV --test CSV --label COLUMN [--params NAME|FILE]
    Audit a model owner's own pickled model on their own data.
clinaudit build --variant NAME --out DIR, clinaudit export-metr --out DIR
    An agent workspace with the grader's manifest; a METR Task Standard family.
clinaudit grade REPORT --variant NAME [--manifest FILE] [--score-json FILE]
    Grade one report in a pytest session that nothing in the report's folder configures.
clinaudit grade-many MANIFEST --out DIR [-j N] [--scheduler ADDRESS]
    Grade many submissions, one pytest session each, in parallel, here or on a Dask
    cluster (docs/batch.md).
clinaudit pool build --variant GAME --seeds 1-200 --out POOL [--scheduler ADDRESS]
    Many game instances, one Dask task each, on an embedded or a running cluster (docs/pool.md).
clinaudit pool run POOL [--agents null,transcription,expert]
    The bundled agents over a pool, graded on the same cluster, and the tables.
clinaudit report DIR [--out OUTDIR] [--html [FILE]]
    Paper-style tables and plots from the JUnit XML of graded runs; --html, one page of them.

Every failure the user can fix ends in one line on stderr and exit status 2;
nothing prints a traceback for bad input. A command module parses its own
arguments and calls the package that does the work.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_clinaudit.catalog.variants import VariantError
from pytest_clinaudit.cli import audit, batch, grade, pool, variants, workspace
from pytest_clinaudit.cli.common import EXIT_USAGE, Handler


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clinaudit",
        description="Reference auditor and tools of pytest-clinaudit. Grade a report with "
        "`clinaudit grade report.json --variant NAME`: a pytest session that nothing in the "
        "report's folder can configure.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for commands in (variants, audit, workspace, grade, batch, pool):
        commands.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except VariantError as exc:
        print(f"clinaudit {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("clinaudit: interrupted", file=sys.stderr)
        return 130
