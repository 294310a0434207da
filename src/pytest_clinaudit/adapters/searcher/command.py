"""The command: the searcher run on a workspace, its report written as ``report.json``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .decide import searcher
from .workspace import Progress, Workspace

AGENT = "searcher"


def run(workspace: Path, quiet: bool = False) -> dict[str, Any]:
    progress = Progress(quiet)
    return searcher(Workspace(workspace, progress), progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The hard tier's searching expert.")
    parser.add_argument("workspace", type=Path, nargs="?", default=Path.cwd())
    parser.add_argument("--out", type=Path, help="where to write (default: WORKSPACE/report.json)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = parser.parse_args(argv)
    report = run(args.workspace, args.quiet)
    out = args.out or args.workspace / "report.json"
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} ({AGENT})")
    return 0
