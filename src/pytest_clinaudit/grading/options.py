"""Command-line and ini options of the grading plugin, and their validation.

The flag strings are module constants so that tests and documentation import
them instead of repeating them. Every value a user types goes through a
``type=`` callable that raises :class:`argparse.ArgumentTypeError` with a
message saying what was expected; the same callables validate ini values.

Only the standard library is imported here: the plugin registers these options
on every pytest run, including runs that never grade anything.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    import pytest

GROUP = "clinaudit"
GROUP_DESCRIPTION = "clinaudit: grade a clinical security audit report"

SUBMISSION = "--submission"
VARIANT = "--variant"
PROFILE = "--clinaudit-profile"
FAIL_UNDER = "--clinaudit-fail-under"
SCORE_JSON = "--clinaudit-score-json"
VARIANTS_DIR = "--clinaudit-variants-dir"
CACHE_DIR = "--clinaudit-cache-dir"
MIMIC_DIR = "--clinaudit-mimic-dir"
MAX_BYTES = "--clinaudit-max-bytes"
MANIFEST = "--clinaudit-manifest"
META = "--clinaudit-meta"

INI_PROFILE = "clinaudit_profile"
INI_FAIL_UNDER = "clinaudit_fail_under"
INI_VARIANTS_DIR = "clinaudit_variants_dir"
INI_CACHE_DIR = "clinaudit_cache_dir"
INI_MIMIC_DIR = "clinaudit_mimic_dir"
INI_MAX_BYTES = "clinaudit_max_bytes"

ENV_MIMIC_DIR = "CLINAUDIT_MIMIC_DIR"

Profile = Literal["strict", "metr"]
PROFILES: tuple[Profile, ...] = ("strict", "metr")
DEFAULT_PROFILE: Profile = "strict"
DEFAULT_MAX_BYTES = 1 << 20
"""1 MiB: a report is well under 10 kB; anything near this limit is not a report."""

_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


# ------------------------------------------------------------------ validators


def profile(value: str) -> Profile:
    """``--clinaudit-profile``: ``strict`` or ``metr`` (case-insensitive)."""
    normalized = value.strip().lower()
    for name in PROFILES:
        if normalized == name:
            return name
    raise argparse.ArgumentTypeError(
        f"invalid profile {value!r}: choose 'strict' (this project's grading) "
        "or 'metr' (the published scorer, reproduced exactly)"
    )


def score_threshold(value: str) -> float:
    """``--clinaudit-fail-under``: a score in [0, 1]."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not 0.0 <= number <= 1.0:  # also rejects NaN
        raise argparse.ArgumentTypeError(
            f"invalid score {value!r}: expected a number between 0 and 1, e.g. 0.8"
        )
    return number


def byte_size(value: str) -> int:
    """``--clinaudit-max-bytes``: a positive size, e.g. ``1048576``, ``512K``, ``1M``, ``2MiB``."""
    match = _SIZE.match(str(value))
    size = 0
    if match:
        unit = (match.group(2) or "").lower().rstrip("b").rstrip("i")
        size = int(match.group(1)) * _UNITS[unit]
    if size <= 0:
        raise argparse.ArgumentTypeError(
            f"invalid size {value!r}: expected a positive number of bytes "
            "such as 1048576, 512K or 1M"
        )
    return size


def existing_directory(value: str) -> Path:
    """A directory that exists (variant files, a MIMIC extract)."""
    path = Path(value).expanduser()
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not a directory")
    return path


def variant_name(value: str) -> str:
    """A variant name or alias; whether it exists is checked once the catalog is loaded."""
    if not value.strip():
        raise argparse.ArgumentTypeError("expected a variant name such as wdbc-hard")
    return value.strip()


def path(value: str) -> Path:
    return Path(value).expanduser()


_META_KEY = re.compile(r"^[A-Za-z0-9_.\-]+$")


def meta_item(value: str) -> tuple[str, str]:
    """``--clinaudit-meta``: ``KEY=VALUE``, copied into the score JSON and the JUnit XML."""
    key, separator, text = value.partition("=")
    if not separator or not _META_KEY.match(key):
        raise argparse.ArgumentTypeError(
            f"invalid metadata {value!r}: expected KEY=VALUE with a KEY of letters, digits, "
            "'_', '.', '-' "
            "(e.g. run=42)"
        )
    return key, text


# ---------------------------------------------------------------- registration


def register(parser: pytest.Parser) -> None:
    """Add the ``clinaudit`` option group and its ini keys to pytest's parser."""
    group = parser.getgroup(GROUP, GROUP_DESCRIPTION)
    group.addoption(
        SUBMISSION,
        metavar="PATH",
        type=path,
        default=None,
        help="grade this report (JSON). Only the grading checks are collected.",
    )
    group.addoption(
        VARIANT,
        metavar="NAME",
        type=variant_name,
        default=None,
        help="variant to grade against (name or the paper's alias, e.g. wdbc-hard or hardened); "
        f"required with {SUBMISSION}",
    )
    group.addoption(
        PROFILE,
        metavar="{strict,metr}",
        type=profile,
        default=None,
        help="strict (default): schema, aggregation, verdict and details count; "
        f"metr: the published scorer exactly. ini: {INI_PROFILE}",
    )
    group.addoption(
        FAIL_UNDER,
        metavar="SCORE",
        type=score_threshold,
        default=None,
        help="exit status 0 if and only if the score is at least SCORE (0..1). "
        f"ini: {INI_FAIL_UNDER}",
    )
    group.addoption(
        SCORE_JSON,
        metavar="PATH",
        type=path,
        default=None,
        help="write the score, every check and the reference used to this JSON file",
    )
    group.addoption(
        VARIANTS_DIR,
        metavar="DIR",
        type=existing_directory,
        action="append",
        default=None,
        help=f"load extra variant files (*.toml) from DIR; repeatable. ini: {INI_VARIANTS_DIR}",
    )
    group.addoption(
        CACHE_DIR,
        metavar="DIR",
        type=path,
        default=None,
        help=f"reference cache (default: ini {INI_CACHE_DIR}, else $CLINAUDIT_CACHE_DIR, "
        "else ~/.cache/pytest-clinaudit)",
    )
    group.addoption(
        MIMIC_DIR,
        metavar="DIR",
        type=existing_directory,
        default=None,
        help=f"your MIMIC-IV extract, for the mimic-* variants (default: ini {INI_MIMIC_DIR}, "
        f"else ${ENV_MIMIC_DIR})",
    )
    group.addoption(
        MAX_BYTES,
        metavar="N",
        type=byte_size,
        default=None,
        help=f"largest submission read, e.g. 1048576 or 1M (default 1M). ini: {INI_MAX_BYTES}",
    )
    group.addoption(
        MANIFEST,
        metavar="PATH",
        type=path,
        default=None,
        help="grader-side manifest of `clinaudit build`: refuse to grade unless the reference "
        "is computed on the exact model artifact and data the agent was given",
    )
    group.addoption(
        META,
        metavar="KEY=VALUE",
        type=meta_item,
        action="append",
        default=None,
        help="metadata (run id, agent, ...) copied into the score JSON and the JUnit XML; "
        "repeatable",
    )
    parser.addini(INI_PROFILE, "clinaudit grading profile: strict or metr", default=DEFAULT_PROFILE)
    parser.addini(
        INI_FAIL_UNDER, "clinaudit: fail the run when the score is below this", default=""
    )
    parser.addini(
        INI_VARIANTS_DIR, "clinaudit: directories of extra variant files", type="paths", default=[]
    )
    parser.addini(INI_CACHE_DIR, "clinaudit: reference cache directory", default="")
    parser.addini(INI_MIMIC_DIR, "clinaudit: MIMIC-IV extract directory", default="")
    parser.addini(
        INI_MAX_BYTES, "clinaudit: largest submission read (bytes, or 512K, 1M)", default=""
    )


# ------------------------------------------------------------------ resolution


class OptionError(Exception):
    """An option or ini value is unusable; pytest shows it as a usage error."""


@dataclasses.dataclass(frozen=True)
class GradingOptions:
    """Everything the options decide about one grading session, resolved and validated."""

    submission: Path
    variant: str
    profile: Profile
    fail_under: float | None
    score_json: Path | None
    variants_dirs: tuple[Path, ...]
    cache_dir: Path | None
    """``None``: the cache module's default (``$CLINAUDIT_CACHE_DIR`` or ``~/.cache``)."""
    mimic_dir: Path | None
    max_bytes: int
    manifest: Path | None = None
    meta: tuple[tuple[str, str], ...] = ()


def _ini(config: pytest.Config, name: str) -> str:
    # TOML ini tables may hold numbers; every scalar option is read as text.
    value: Any = config.getini(name)
    return "" if value is None else str(value).strip()


def _ini_value(config: pytest.Config, name: str, convert: Any) -> Any:
    text = _ini(config, name)
    if not text:
        return None
    try:
        return convert(text)
    except argparse.ArgumentTypeError as exc:
        raise OptionError(f"ini option {name}: {exc}") from None


def _relative_to_ini(config: pytest.Config, value: Path) -> Path:
    """Relative paths in an ini file start at the ini file's directory, as pytest's ``paths`` do."""
    if value.is_absolute() or config.inipath is None:
        return value
    return config.inipath.parent / value


def _absolute(config: pytest.Config, value: Path) -> Path:
    """Relative command-line paths start where pytest was invoked (xdist workers share it).

    The directories above the file are resolved, so messages name
    ``/runs/report.json`` rather than ``/work/../runs/report.json``; the file
    itself is not, so a symlinked submission is still seen as one.
    """
    path = value if value.is_absolute() else config.invocation_params.dir / value
    return path.parent.resolve() / path.name if path.name not in ("", ".", "..") else path


def resolve(config: pytest.Config) -> GradingOptions | None:
    """The grading options, or ``None`` when ``--submission`` was not given.

    Raises
    ------
    OptionError
        A value is missing or invalid; the message says which flag and how to fix it.
    """
    submission: Path | None = config.getoption(SUBMISSION)
    variant: str | None = config.getoption(VARIANT)
    if submission is None:
        if variant is not None:
            raise OptionError(
                f"{VARIANT} {variant} was given without {SUBMISSION}; grade a report with "
                f"`pytest {SUBMISSION} report.json {VARIANT} {variant}`"
            )
        return None
    if variant is None:
        raise OptionError(
            f"{SUBMISSION} needs {VARIANT} NAME: the variant decides the model, data and "
            f"tolerances the report is graded against, e.g. `pytest {SUBMISSION} "
            f"{submission} {VARIANT} wdbc-hard` (list them with `clinaudit variants`)"
        )
    chosen_profile = config.getoption(PROFILE) or _ini_value(config, INI_PROFILE, profile)
    fail_under = config.getoption(FAIL_UNDER)
    if fail_under is None:
        fail_under = _ini_value(config, INI_FAIL_UNDER, score_threshold)
    max_bytes = config.getoption(MAX_BYTES) or _ini_value(config, INI_MAX_BYTES, byte_size)

    cache_dir: Path | None = config.getoption(CACHE_DIR)
    if cache_dir is not None:
        cache_dir = _absolute(config, cache_dir)
    elif _ini(config, INI_CACHE_DIR):
        cache_dir = _relative_to_ini(config, Path(_ini(config, INI_CACHE_DIR)).expanduser())

    mimic_dir: Path | None = config.getoption(MIMIC_DIR)
    if mimic_dir is not None:
        mimic_dir = _absolute(config, mimic_dir)
    elif _ini(config, INI_MIMIC_DIR):
        mimic_dir = _relative_to_ini(config, Path(_ini(config, INI_MIMIC_DIR)).expanduser())
    elif os.environ.get(ENV_MIMIC_DIR):
        mimic_dir = Path(os.environ[ENV_MIMIC_DIR]).expanduser()

    directories = [_absolute(config, d) for d in config.getoption(VARIANTS_DIR) or ()]
    for directory in config.getini(INI_VARIANTS_DIR) or ():
        directory = Path(directory)
        if not directory.is_dir():
            raise OptionError(
                f"ini option {INI_VARIANTS_DIR}: {str(directory)!r} is not a directory"
            )
        directories.append(directory)

    score_json: Path | None = config.getoption(SCORE_JSON)
    manifest: Path | None = config.getoption(MANIFEST)
    return GradingOptions(
        submission=_absolute(config, submission),
        variant=variant,
        profile=chosen_profile or DEFAULT_PROFILE,
        fail_under=fail_under,
        score_json=None if score_json is None else _absolute(config, score_json),
        variants_dirs=tuple(dict.fromkeys(directories)),  # de-duplicated, order kept
        cache_dir=cache_dir,
        mimic_dir=mimic_dir,
        max_bytes=max_bytes or DEFAULT_MAX_BYTES,
        manifest=None if manifest is None else _absolute(config, manifest),
        meta=tuple(config.getoption(META) or ()),
    )
