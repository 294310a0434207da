"""The one table format every benchmark prints: aligned columns under a rule."""

from __future__ import annotations

from collections.abc import Sequence


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Text columns, the first left-aligned and the others right-aligned, under a rule."""
    cells = [[str(c) for c in header], *([str(c) for c in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in cells
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    print(f"\n{title}")
    print(table(header, rows))
