"""What every ``clinaudit`` command shares: errors, exit codes, progress, cache and catalog."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_clinaudit.catalog.cache import ENV_CACHE_DIR, ReferenceCache, default_cache_dir
from pytest_clinaudit.catalog.variants import Catalog, default_catalog

EXIT_OK = 0
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]
"""A command: parsed arguments in, exit status out."""


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def progress_printer(quiet: bool) -> Callable[[str], None]:
    def report(message: str) -> None:
        if not quiet:
            print(f"  - {message}", file=sys.stderr, flush=True)

    return report


def cache_from(args: argparse.Namespace) -> ReferenceCache:
    if getattr(args, "no_cache", False):
        return ReferenceCache(None)
    return ReferenceCache(args.cache_dir or default_cache_dir())


def catalog_from(args: argparse.Namespace) -> Catalog:
    return default_catalog(args.variants_dir or ())


def add_common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variants-dir",
        action="append",
        type=Path,
        metavar="DIR",
        help="extra variant files (*.toml) to load; may be repeated",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"reference cache (default: ${ENV_CACHE_DIR} or ~/.cache/pytest-clinaudit)",
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    parser.add_argument(
        "--mimic-dir",
        type=Path,
        metavar="DIR",
        help="a MIMIC-IV extract for the mimic-* variants (default: $CLINAUDIT_MIMIC_DIR)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


def load_context(args: argparse.Namespace, variant: Any) -> Any:
    """Where the variant's data is found: beside its file, and the MIMIC extract if any."""
    from pytest_clinaudit.reference.data import LoadContext
    from pytest_clinaudit.reference.data.mimic import resolve_mimic_dir

    return LoadContext(base_dir=variant.path.parent, mimic_dir=resolve_mimic_dir(args.mimic_dir))


# ------------------------------------------------- validators of numeric flags


def positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}")
    return number


def non_negative_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = -1
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {value!r}")
    return number


def positive_seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {value!r}")
    return number


def non_negative(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not number >= 0 or number == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value!r}")
    return number
