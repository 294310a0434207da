"""docs/architecture.md draws the package's rooms and their imports; the code must agree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from grading_helpers import REPO

PACKAGE = "pytest_clinaudit"
MAPPED = {"reference": REPO / "reference"}
"""Folders that pyproject.toml maps into the package (variants/ holds no code)."""
ARROW = re.compile(r"^\s*(\w+)\s*-->\s*(\w+)\s*$")


def _rooms() -> dict[str, list[Path]]:
    """Room name -> its Python files: each folder of the package, each top-level module."""
    package = REPO / "src" / PACKAGE
    rooms: dict[str, list[Path]] = {}
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative == Path("__init__.py"):
            continue
        name = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        rooms.setdefault(name, []).append(path)
    for name, folder in MAPPED.items():
        rooms[name] = sorted(folder.rglob("*.py"))
    return rooms


def _imported_rooms(path: Path, rooms: set[str]) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == PACKAGE and len(parts) > 1 and parts[1] in rooms:
                found.add(parts[1])
    return found


def _code_arrows() -> set[tuple[str, str]]:
    rooms = _rooms()
    return {
        (room, other)
        for room, paths in rooms.items()
        for path in paths
        for other in _imported_rooms(path, set(rooms))
        if other != room
    }


def _drawn_arrows() -> set[tuple[str, str]]:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    diagram = text.split("```mermaid", 1)[1].split("```", 1)[0]
    return {
        (match.group(1), match.group(2))
        for match in map(ARROW.match, diagram.splitlines())
        if match
    }


def test_the_architecture_picture_draws_exactly_the_imports_between_rooms() -> None:
    code, drawn = _code_arrows(), _drawn_arrows()
    assert not code - drawn, f"imports missing from docs/architecture.md: {sorted(code - drawn)}"
    assert not drawn - code, f"arrows in docs/architecture.md no code makes: {sorted(drawn - code)}"


def test_no_two_rooms_import_each_other() -> None:
    arrows = _code_arrows()
    both_ways = sorted((a, b) for a, b in arrows if (b, a) in arrows and a < b)
    assert not both_ways, f"rooms that import each other: {both_ways}"


@pytest.mark.parametrize("room", sorted(set(_rooms()) - {"__main__"}))
def test_every_room_says_what_it_is_for(room: str) -> None:
    package = REPO / "src" / PACKAGE
    opening = (
        package / room / "__init__.py"
        if (package / room).is_dir()
        else MAPPED[room] / "__init__.py"
        if room in MAPPED
        else package / f"{room}.py"
    )
    assert ast.get_docstring(ast.parse(opening.read_text(encoding="utf-8"))), (
        f"{opening} has no docstring saying what the room is for"
    )
