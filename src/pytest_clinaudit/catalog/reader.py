"""Reading a variant file's tables into records, naming the file and the key in every error.

The catalog's loaders (:mod:`.variants` for the audit task, :mod:`.games` for
the auditing game) share this strict reader: a table's keys must be exactly a
record's fields, each value of the field's type, or a :class:`VariantError`
says where and why. Only the standard library is imported.
"""

from __future__ import annotations

import dataclasses
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, Union

from pytest_clinaudit.reference.data import SOURCES

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib


class VariantError(ValueError):
    """A variant file or name is invalid; the message says which and why."""


def describe_value(value: Any) -> str:
    """A TOML value for a message: its kind and a short rendering."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return "an array"
    return f"{type(value).__name__} {value!r}"


class TableReader:
    """Reads one file's tables into records, naming file and key in every error."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, where: str, message: str) -> VariantError:
        return VariantError(f"{self.path}: {where}: {message}")

    def check_keys(
        self,
        table: Mapping[str, Any],
        where: str,
        required: Iterable[str],
        optional: Iterable[str] = (),
    ) -> None:
        required, optional = set(required), set(optional)
        unknown = sorted(set(table) - required - optional)
        if unknown:
            allowed = ", ".join(sorted(required | optional))
            raise self.error(where, f"unknown key {unknown[0]!r} (allowed: {allowed})")
        missing = sorted(required - set(table))
        if missing:
            raise self.error(where, f"missing key {missing[0]!r}")

    def value(self, table: Mapping[str, Any], key: str, hint: Any, where: str) -> Any:
        value = table[key]
        at = f"{where}.{key}" if where else key
        origin = typing.get_origin(hint)
        if origin is Literal:
            choices = typing.get_args(hint)
            if value not in choices:
                shown = ", ".join(repr(c) for c in choices)
                raise self.error(at, f"expected one of {shown}, got {describe_value(value)}")
            return value
        if hint is bool:
            if not isinstance(value, bool):
                raise self.error(at, f"expected true or false, got {describe_value(value)}")
            return value
        if hint is int:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(at, f"expected an integer, got {describe_value(value)}")
            return value
        if hint is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.error(at, f"expected a number, got {describe_value(value)}")
            return float(value)
        if hint is str:
            if not isinstance(value, str):
                raise self.error(at, f"expected a string, got {describe_value(value)}")
            return value
        if hint == tuple[int, ...]:
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in value
            ):
                raise self.error(at, f"expected an array of integers, got {describe_value(value)}")
            return tuple(value)
        if hint == tuple[str, ...]:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise self.error(at, f"expected an array of strings, got {describe_value(value)}")
            return tuple(value)
        if hint == tuple[float, ...]:
            if not isinstance(value, list) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
            ):
                raise self.error(at, f"expected an array of numbers, got {describe_value(value)}")
            return tuple(float(v) for v in value)
        if hint == tuple[float, float]:
            if (
                not isinstance(value, list)
                or len(value) != 2
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
            ):
                raise self.error(
                    at, f"expected a range [low, high] of two numbers, got {describe_value(value)}"
                )
            return (float(value[0]), float(value[1]))
        if typing.get_origin(hint) is tuple and dataclasses.is_dataclass(typing.get_args(hint)[0]):
            record = typing.get_args(hint)[0]
            if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
                raise self.error(at, f"expected an array of tables, got {describe_value(value)}")
            return tuple(self.record(record, v, f"{at}[{i}]") for i, v in enumerate(value))
        if dataclasses.is_dataclass(hint):
            if not isinstance(value, dict):
                raise self.error(at, f"expected a table, got {describe_value(value)}")
            return self.record(hint, value, at)
        raise TypeError(f"no reader for {hint!r}")  # a programming error, not a user's

    def record(self, cls: Any, table: Mapping[str, Any], where: str) -> Any:
        """A frozen dataclass from a table whose keys are exactly its fields."""
        hints = typing.get_type_hints(cls)
        fields = [f for f in dataclasses.fields(cls) if f.init]
        optional = {f.name for f in fields if is_optional(hints[f.name])}
        self.check_keys(table, where, {f.name for f in fields} - optional, optional)
        values: dict[str, Any] = {}
        for f in fields:
            hint = hints[f.name]
            if f.name not in table:
                values[f.name] = None
                continue
            values[f.name] = self.value(table, f.name, strip_optional(hint), where)
        return cls(**values)


def is_optional(hint: Any) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(
        hint
    )


def strip_optional(hint: Any) -> Any:
    if is_optional(hint):
        (inner,) = [a for a in typing.get_args(hint) if a is not type(None)]
        return inner
    return hint


def read_dataset(reader: TableReader, table: Any) -> Any:
    """The ``[dataset]`` table as the record of the source it names."""
    if not isinstance(table, dict):
        raise reader.error("dataset", f"expected a table, got {describe_value(table)}")
    source = table.get("source")
    if source not in SOURCES:
        raise reader.error(
            "dataset.source",
            f"expected one of {', '.join(map(repr, SOURCES))}, got {describe_value(source)}",
        )
    return reader.record(
        SOURCES[source], {k: v for k, v in table.items() if k != "source"}, "dataset"
    )


def read_toml(path: Path) -> dict[str, Any]:
    try:
        document: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise VariantError(f"{path}: cannot read the file ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise VariantError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise VariantError(f"{path}: not valid TOML ({exc})") from None
    return document
