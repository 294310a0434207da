"""Tables of a batch report: columns with their cell texts, rows of plain values.

A :class:`Table` holds rows of plain values (what the CSVs and report.json
hold) and :class:`Column` functions that show them in Markdown; the HTML page
shows the same texts and sorts by the same values.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def rate(count: int, total: int) -> float | None:
    return count / total if total else None


@dataclasses.dataclass(frozen=True)
class Column:
    """One column: its key in the rows (CSV, JSON), its Markdown header and cell text."""

    key: str
    header: str
    cell: Callable[[Mapping[str, Any]], str]
    sort_key: str | None = None
    """The row key a sortable table orders this column by (default ``key``): a
    ``k/n (p%)`` cell sorts by its rate, not by its count."""

    @property
    def order_key(self) -> str:
        return self.key if self.sort_key is None else self.sort_key


@dataclasses.dataclass(frozen=True)
class Table:
    """A table: rows of plain values (CSV and JSON) and how Markdown shows them."""

    name: str
    """File stem of its CSV, and its key in report.json."""
    title: str
    note: str
    keys: tuple[str, ...]
    columns: tuple[Column, ...]
    rows: tuple[dict[str, Any], ...]

    def markdown(self) -> str:
        header = "| " + " | ".join(c.header for c in self.columns) + " |"
        rule = "|" + "|".join("---" for _ in self.columns) + "|"
        body = ["| " + " | ".join(c.cell(row) for c in self.columns) + " |" for row in self.rows]
        return "\n".join([f"### {self.title}", "", self.note, "", header, rule, *body])

    def write_csv(self, path: Path) -> None:
        with path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(self.keys)
            for row in self.rows:
                # repr-exact floats; an empty cell is "not applicable"
                writer.writerow(["" if row[k] is None else row[k] for k in self.keys])


def fixed(key: str, digits: int, signed: bool = False) -> Callable[[Mapping[str, Any]], str]:
    def cell(row: Mapping[str, Any]) -> str:
        value = row[key]
        return "-" if value is None else f"{value:{'+' if signed else ''}.{digits}f}"

    return cell


def count_of(count_key: str, total_key: str) -> Callable[[Mapping[str, Any]], str]:
    """``k/n (p%)``: the paper's way of showing a rate with its counts."""

    def cell(row: Mapping[str, Any]) -> str:
        count, total = row[count_key], row[total_key]
        return f"{count}/{total} ({100 * count / total:.1f}%)" if total else "-"

    return cell


def plain(key: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda row: "-" if row[key] is None else str(row[key])


def mean_of_some(key: str, n_key: str, digits: int) -> Callable[[Mapping[str, Any]], str]:
    """A mean over the runs that report the value; says how many when not all do."""

    def cell(row: Mapping[str, Any]) -> str:
        if row[key] is None:
            return "-"
        text = f"{row[key]:.{digits}f}"
        return text if row[n_key] == row["runs"] else f"{text} ({row[n_key]} of {row['runs']})"

    return cell
