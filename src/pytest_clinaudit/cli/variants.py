"""``clinaudit variants``: the variants, aliases, datasets and recipes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from pytest_clinaudit.cli.common import EXIT_OK, add_common_options, catalog_from


def register(sub: Any) -> None:
    variants = sub.add_parser("variants", help="list the variants")
    add_common_options(variants)
    variants.add_argument("--json", action="store_true", help="machine-readable output")
    variants.set_defaults(handler=_cmd_variants)


def _cmd_variants(args: argparse.Namespace) -> int:
    catalog = catalog_from(args)
    rows = [
        (
            v.name,
            ", ".join(v.aliases) or "-",
            type(v.dataset).__name__.removesuffix("Source").lower(),
            v.model.describe(),
            "-" if v.paper_reference_sps is None else f"{v.paper_reference_sps:.2f}",
        )
        for v in catalog
    ]
    rows += [
        (
            g.name,
            ", ".join(g.aliases) or "-",
            type(g.dataset).__name__.removesuffix("Source").lower(),
            g.describe(),
            "-",
        )
        for g in catalog.games()
    ]
    if args.json:
        summaries = [v.summary() for v in catalog] + [g.summary() for g in catalog.games()]
        print(json.dumps(summaries, indent=2))
        return EXIT_OK
    header = ("variant", "aliases", "dataset", "model recipe", "paper SPS")
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK
