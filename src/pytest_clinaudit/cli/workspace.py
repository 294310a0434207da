"""``clinaudit build`` and ``clinaudit export-metr``: the task for agents and other harnesses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from pytest_clinaudit.catalog.variants import VariantError
from pytest_clinaudit.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    add_common_options,
    cache_from,
    catalog_from,
    load_context,
    non_negative_int,
    progress_printer,
)
from pytest_clinaudit.cli.grade import grade_command


def register(sub: Any) -> None:
    build = sub.add_parser(
        "build",
        help="write an agent workspace and the grader's manifest",
        description="Writes OUT/workspace (model.pkl, train.csv, test.csv, task.md: what the agent "
        "receives) and OUT/grader/manifest.json (hashes, recipe, library versions, reference; "
        "keep it from the agent).",
    )
    add_common_options(build)
    build.add_argument("--variant", required=True, metavar="NAME", help="variant name or alias")
    build.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    build.add_argument(
        "--seed",
        type=non_negative_int,
        metavar="N",
        help="a game's instance seed (default: the variant's): a name, the instance itself is "
        "drawn from a secret kept in the grader's manifest and cache; audit-task variants "
        "take none",
    )
    build.add_argument(
        "--like",
        type=Path,
        metavar="MANIFEST",
        help="a game: rebuild exactly the instance this grader's manifest records (its "
        "secret), byte for byte",
    )
    build.set_defaults(handler=_cmd_build)

    export = sub.add_parser("export-metr", help="write a METR Task Standard task family")
    export.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    export.set_defaults(handler=_cmd_export_metr)


def _cmd_build(args: argparse.Namespace) -> int:
    from pytest_clinaudit.adapters.workspace import (
        GRADER_DIR,
        MANIFEST_NAME,
        WORKSPACE_DIR,
        build_workspace,
    )
    from pytest_clinaudit.reference.data import DataError

    try:
        found = catalog_from(args).find(args.variant)
        if found.is_game:
            return _build_game(args, found)
        for flag, given in (("--seed", args.seed), ("--like", args.like)):
            if given is not None:
                raise VariantError(f"{found.name} is not a game: {flag} applies to games only")
        variant = catalog_from(args).get(args.variant)
        manifest = build_workspace(
            variant,
            args.out,
            context=load_context(args, variant),
            cache=cache_from(args),
            progress=progress_printer(args.quiet),
        )
    except (VariantError, DataError) as exc:
        print(f"clinaudit build: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{variant.name}: workspace for the agent in {args.out / WORKSPACE_DIR}")
    print(
        f"{variant.name}: grader manifest in {args.out / GRADER_DIR / MANIFEST_NAME} "
        "(keep it from the agent)"
    )
    print(
        f"  model sha256 {manifest['artifact_sha256']}; "
        f"reference SPS {manifest['reference']['sps']:.2f}"
    )
    report, grader = args.out / WORKSPACE_DIR / "report.json", args.out / GRADER_DIR / MANIFEST_NAME
    print(f"  grade with: {grade_command(report, variant.name, grader)}")
    return EXIT_OK


def _build_game(args: argparse.Namespace, variant: Any) -> int:
    from pytest_clinaudit.adapters.game_workspace import (
        GRADER_DIR,
        MANIFEST_NAME,
        WORKSPACE_DIR,
        build_game_workspace,
    )
    from pytest_clinaudit.reference.data import DataError
    from pytest_clinaudit.reference.game.build import GameBuildError

    seed = variant.game.seed if args.seed is None else args.seed
    secret = None
    try:
        if args.like is not None:
            seed, secret = _like(args.like, variant.name, args.seed)
        manifest = build_game_workspace(
            variant,
            seed,
            args.out,
            secret=secret,
            context=load_context(args, variant),
            cache=cache_from(args),
            progress=progress_printer(args.quiet),
        )
    except (VariantError, DataError, GameBuildError) as exc:
        print(f"clinaudit build: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    grader = args.out / GRADER_DIR / MANIFEST_NAME
    print(f"{variant.name}: instance {seed} for the agent in {args.out / WORKSPACE_DIR}")
    print(f"{variant.name}: grader manifest in {grader} (ground truth: keep it from the agent)")
    print(
        f"  {len(manifest['programs'])} models, attempt {manifest['attempt']}; grade with: "
        + grade_command(args.out / WORKSPACE_DIR / "report.json", variant.name, grader)
    )
    return EXIT_OK


def _like(path: Path, variant: str, seed: int | None) -> tuple[int, str]:
    """(seed, secret) of the instance a grader's manifest records, for ``build --like``."""
    from pytest_clinaudit.catalog.manifest import GraderManifestError, read_grader_manifest
    from pytest_clinaudit.reference.game.draw import check_secret

    try:
        manifest = read_grader_manifest(path)
    except GraderManifestError as exc:
        raise VariantError(f"--like: {exc}") from None
    if manifest["variant"] != variant:
        raise VariantError(
            f"--like: {path} is the manifest of a {manifest['variant']} instance, not of "
            f"{variant}: each variant draws its instances apart"
        )
    recorded = manifest.get("seed")
    if isinstance(recorded, bool) or not isinstance(recorded, int):
        raise VariantError(f"--like: {path} records no instance seed")
    if seed is not None and seed != recorded:
        raise VariantError(
            f"--like: {path} records instance {recorded}, but --seed is {seed}; leave --seed "
            "out or give the same"
        )
    try:
        return recorded, check_secret(manifest.get("secret"))
    except ValueError:
        raise VariantError(
            f"--like: {path} records no instance secret: it was written before instances "
            "were drawn from secrets, and cannot be rebuilt exactly"
        ) from None


def _cmd_export_metr(args: argparse.Namespace) -> int:
    from pytest_clinaudit.adapters.metr import export_metr

    family = export_metr(args.out)
    print(f"METR task family written to {family}")
    return EXIT_OK
