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
REFERENCE = MAPPED["reference"]


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


def _drawn_arrows(picture: int = 0) -> set[tuple[str, str]]:
    """The arrows of the ``picture``-th mermaid diagram of docs/architecture.md."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    diagram = text.split("```mermaid")[1 + picture].split("```", 1)[0]
    return {
        (match.group(1), match.group(2))
        for match in map(ARROW.match, diagram.splitlines())
        if match
    }


def _module_files() -> dict[str, Path]:
    """Every module of the installed package by dotted name, from the checkout's files."""
    found: dict[str, Path] = {}
    roots = {PACKAGE: REPO / "src" / PACKAGE, f"{PACKAGE}.reference": REFERENCE}
    for prefix, root in roots.items():
        for path in root.rglob("*.py"):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([prefix, *parts])] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's modules that ``name`` imports anywhere in its file (lazy imports too)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            candidates = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        else:
            continue
        found.update(c for c in candidates if c in modules and c != name)
    return found


def _import_circles(modules: dict[str, Path] | None = None) -> list[list[str]]:
    """Strongly connected groups of two or more modules (Tarjan's algorithm)."""
    modules = _module_files() if modules is None else modules
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in graph[node]:
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def _reference_rooms() -> dict[str, list[Path]]:
    """The sub-packages of reference/ and their files."""
    return {
        folder.name: sorted(folder.rglob("*.py"))
        for folder in sorted(REFERENCE.iterdir())
        if (folder / "__init__.py").is_file()
    }


def _reference_arrows() -> set[tuple[str, str]]:
    rooms = _reference_rooms()
    modules = _module_files()
    prefix = f"{PACKAGE}.reference."
    arrows = set()
    for room, paths in rooms.items():
        for path in paths:
            name = next(n for n, p in modules.items() if p == path)
            for target in _imports(name, path, modules):
                if target.startswith(prefix):
                    other = target[len(prefix) :].split(".")[0]
                    if other != room:
                        arrows.add((room, other))
    return arrows


def test_the_architecture_picture_draws_exactly_the_imports_between_rooms() -> None:
    code, drawn = _code_arrows(), _drawn_arrows()
    assert not code - drawn, f"imports missing from docs/architecture.md: {sorted(code - drawn)}"
    assert not drawn - code, f"arrows in docs/architecture.md no code makes: {sorted(drawn - code)}"


def test_no_two_rooms_import_each_other() -> None:
    arrows = _code_arrows()
    both_ways = sorted((a, b) for a, b in arrows if (b, a) in arrows and a < b)
    assert not both_ways, f"rooms that import each other: {both_ways}"


def test_the_reference_picture_draws_exactly_the_imports_between_its_rooms() -> None:
    code, drawn = _reference_arrows(), _drawn_arrows(picture=1)
    assert not code - drawn, f"imports missing from the reference/ picture: {sorted(code - drawn)}"
    assert not drawn - code, (
        f"arrows in the reference/ picture no code makes: {sorted(drawn - code)}"
    )


def test_no_module_imports_itself_back_through_others() -> None:
    assert not _import_circles(), f"import circles: {_import_circles()}"


def test_the_circle_finder_finds_a_circle_closed_by_a_lazy_import(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pytest_clinaudit import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from . import a\n")
    (tmp_path / "c.py").write_text("from .a import x\n")
    modules = {f"{PACKAGE}.{path.stem}": path for path in tmp_path.glob("*.py")}
    assert _import_circles(modules) == [[f"{PACKAGE}.a", f"{PACKAGE}.b"]]


@pytest.mark.parametrize("folder", sorted(_reference_rooms()))
def test_every_room_of_reference_says_what_it_is_for(folder: str) -> None:
    opening = REFERENCE / folder / "__init__.py"
    assert ast.get_docstring(ast.parse(opening.read_text(encoding="utf-8"))), (
        f"{opening} has no docstring saying what the room is for"
    )


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
