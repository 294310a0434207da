"""Helpers of the page tests: the browser, hostile runs, and reading a page's tables back.

``tools/page_screenshots.py`` launches Chromium through :func:`launch_chromium` too.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

CHROMIUM = os.environ.get("CLINAUDIT_CHROMIUM", "/usr/bin/chromium")
"""Debian's chromium, or the binary ``$CLINAUDIT_CHROMIUM`` names."""
# Without the background-networking flags Chromium phones home at start-up, which a
# closed network refuses; --headless and --no-sandbox let it run as root in CI.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def launch_chromium(playwright: Any) -> Any:
    """Headless :data:`CHROMIUM`; Playwright gives every launch a new temporary profile."""
    return playwright.chromium.launch(executable_path=CHROMIUM, args=list(CHROMIUM_FLAGS))


HOSTILE = "<script>window.__pwned=1</script>"
"""A metadata value an untrusted run could write; a page must show it as text."""


def add_hostile_runs(graded: Path, into: Path, *, count: int = 2) -> Path:
    """``into`` holds the graded batch's JUnit XML plus ``count`` copies whose agent and
    run metadata are :data:`HOSTILE` (as a manifest written by a hostile run gives them)."""
    into.mkdir(parents=True, exist_ok=True)
    sources = sorted(graded.glob("*.junit.xml"))
    for source in sources:
        shutil.copy(source, into / source.name)
    for index, source in enumerate(sources[:count]):
        tree = ET.parse(source)
        for prop in tree.iter("property"):
            if prop.get("name") in ("clinaudit.meta.agent", "clinaudit.meta.run"):
                prop.set("value", HOSTILE)
        properties = next(tree.iter("properties"))
        if not any(p.get("name") == "clinaudit.meta.agent" for p in tree.iter("property")):
            ET.SubElement(
                properties, "property", {"name": "clinaudit.meta.agent", "value": HOSTILE}
            )
        tree.write(into / f"9{index:03d}-hostile.junit.xml", encoding="utf-8", xml_declaration=True)
    return into


@dataclasses.dataclass
class ParsedTable:
    id: str
    keys: list[str] = dataclasses.field(default_factory=list)
    headers: list[str] = dataclasses.field(default_factory=list)
    rows: list[list[tuple[str, str]]] = dataclasses.field(default_factory=list)
    """Per row: (cell text, data-value) of each cell."""


class TableReader(HTMLParser):
    """Every ``<table>`` of a page: header texts and keys, and each cell's text and value."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[ParsedTable] = []
        self._cell: list[str] | None = None
        self._value = ""
        self._in_head = False
        self._in_caption = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table":
            self.tables.append(ParsedTable(found.get("id") or ""))
        elif tag == "thead":
            self._in_head = True
        elif tag == "tbody":
            self._in_head = False
        elif tag == "caption":
            self._in_caption = True
        elif tag == "tr" and not self._in_head and self.tables:
            self.tables[-1].rows.append([])
        elif tag in ("th", "td") and self.tables:
            self._cell = []
            self._value = found.get("data-value") or ""
            if self._in_head:
                self.tables[-1].keys.append(found.get("data-key") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "caption":
            self._in_caption = False
        elif tag in ("th", "td") and self._cell is not None and self.tables:
            text = "".join(self._cell).strip()
            if self._in_head:
                self.tables[-1].headers.append(text)
            else:
                self.tables[-1].rows[-1].append((text, self._value))
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None and not self._in_caption:
            self._cell.append(data)


def read_tables(page: str) -> dict[str, ParsedTable]:
    reader = TableReader()
    reader.feed(page)
    return {table.id: table for table in reader.tables}


def markdown_tables(markdown: str) -> dict[str, list[list[str]]]:
    """Tables of report.md by title (the ``### `` line above each): header row, then rows."""
    found: dict[str, list[list[str]]] = {}
    title = ""
    for line in markdown.splitlines():
        if line.startswith("### "):
            title = line[4:]
            found[title] = []
        elif line.startswith("|") and title and not line.startswith("|---"):
            found[title].append([cell.strip() for cell in line.strip("|").split(" | ")])
    return found
