"""Screenshots of the HTML pages for the docs: ``python tools/page_screenshots.py``.

Writes ``docs/batch-page.png`` (``clinaudit report --html`` of a small made-up
evaluation: three agents, the three WDBC variants, two runs each, graded for
real by ``clinaudit grade-many``) and ``docs/audit-page.png`` (the audit page of
:func:`pytest_clinaudit.pages.example.example_audit_context`), each from
headless Chromium at 1280 px wide, the whole page, in 256 colours (about
200 kB each). ``--keep DIR`` also keeps the pages themselves.

Needs ``pip install -e '.[test]'`` (Playwright, pytest-html, jinja2,
matplotlib) and Debian's ``chromium`` (``apt-get install chromium``;
``$CLINAUDIT_CHROMIUM`` names another binary). References are computed into
``$CLINAUDIT_CACHE_DIR`` (or a temporary cache) the first time.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("wdbc-baseline", "wdbc-calibrated", "wdbc-hard")
# (agent, chance of each kind of submission): a careful agent, a hasty one, a weak baseline.
AGENTS = {
    "agent-careful": {"right": 0.8, "component": 0.1, "aggregation": 0.1},
    "agent-hasty": {"right": 0.4, "component": 0.3, "verdict": 0.2, "missing": 0.1},
    "scripted-baseline": {"component": 0.5, "far": 0.3, "schema": 0.2},
}
RUNS = 2


def _submission(kind: str, reference: dict[str, Any], rng: random.Random) -> bytes | None:
    report = {k: json.loads(json.dumps(reference[k])) for k in ("sps", "components", "verdict")}
    if kind == "missing":
        return None
    if kind == "component":
        report["components"]["calibration_ece"] = round(
            min(1.0, report["components"]["calibration_ece"] + rng.uniform(0.2, 0.4)), 4
        )
    elif kind == "aggregation":
        report["sps"] = round(report["sps"] + rng.uniform(2.0, 4.0), 2)
    elif kind == "far":
        report["sps"] = round(report["sps"] - rng.uniform(15.0, 30.0), 2)
    elif kind == "verdict":
        report["verdict"] = "CONDITIONAL" if report["verdict"] != "CONDITIONAL" else "PRODUCTION"
    elif kind == "schema":
        report["sps"] = str(report["sps"])
    return json.dumps(report).encode()


def batch_page(work: Path, cache: Path) -> Path:
    """Grade the made-up evaluation and write its report page; return the page."""
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference
    from pytest_clinaudit.catalog.variants import default_catalog
    from pytest_clinaudit.cli import main

    catalog = default_catalog()
    references = {
        v: get_reference(catalog.get(v), cache=ReferenceCache(cache)).report for v in VARIANTS
    }
    rng = random.Random(42)
    rows = []
    for agent, kinds in AGENTS.items():
        for variant in VARIANTS:
            for run in range(1, RUNS + 1):
                kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
                path = work / "runs" / f"{agent}-{variant}-{run}.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                content = _submission(kind, references[variant], rng)
                if content is not None:
                    path.write_bytes(content)
                rows.append(
                    {
                        "submission": f"runs/{path.name}",
                        "variant": variant,
                        "agent": agent,
                        "run": run,
                        "tokens": rng.randrange(40_000, 220_000, 100),
                        "turns": rng.randrange(8, 60),
                    }
                )
    manifest = work / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    # Relative paths from the work directory: the page names "graded", not a temporary path.
    here = Path.cwd()
    os.chdir(work)  # contextlib.chdir is Python 3.11+
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            grade = ["grade-many", "manifest.jsonl", "--out", "graded", "-j", "2", "-q"]
            main([*grade, "--cache-dir", str(cache.absolute())])
            if main(["report", "graded", "--html"]) != 0:
                raise SystemExit("clinaudit report --html failed")
    finally:
        os.chdir(here)
    return work / "graded" / "report" / "report.html"


def audit_page(work: Path) -> Path:
    from pytest_clinaudit.pages.audit_page import write_audit_page
    from pytest_clinaudit.pages.example import example_audit_context

    return write_audit_page(example_audit_context(), work / "audit.html")


def screenshot(pages: dict[Path, Path]) -> None:
    """Each page (key) as a full-page PNG (value), 1280 px wide, 256 colours."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' launch, flags and all
    from page_helpers import launch_chromium

    with sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        for page_file, png in pages.items():
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            image = Image.open(io.BytesIO(page.screenshot(full_page=True))).convert("RGB")
            # 256 colours by octree (median cut shifts the small legend swatches' colours).
            palette = image.quantize(
                colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE
            )
            palette.save(png, optimize=True)
            page.close()
            size = png.stat().st_size
            print(f"{png}: {image.width}x{image.height}, {size} bytes")
        browser.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs", help="where the PNGs go")
    parser.add_argument("--keep", type=Path, help="also copy the two HTML pages here")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="clinaudit-pages-") as temporary:
        work = Path(temporary)
        cache = Path(os.environ.get("CLINAUDIT_CACHE_DIR") or work / "cache")
        pages = {
            batch_page(work, cache): args.out / "batch-page.png",
            audit_page(work): args.out / "audit-page.png",
        }
        screenshot(pages)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for page_file in pages:
                shutil.copy(page_file, args.keep / page_file.name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
