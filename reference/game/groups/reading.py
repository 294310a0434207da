"""Reading a group that an untrusted report describes (:func:`parse_group`): strictly, with
one message per fault that names where it is and what would fix it."""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from typing import Any

from ..settings import Column
from .grammar import (
    MAX_CONDITIONS,
    OPS,
    Condition,
    Group,
    GroupError,
    Op,
    as_text,
    can_be_missing,
    data_columns,
    is_binary,
)

_SHOWN = 60
"""Characters of a submitted value quoted in a message; a value can be 1 MB long."""
_HINTS = {
    ">": ">=",
    "=>": ">=",
    "ge": ">=",
    "<=": "<",
    "=<": "<",
    "lt": "<",
    "=": "==",
    "eq": "==",
    "is": "==",
    "isnan": "missing",
    "is_missing": "missing",
    "isnull": "missing",
    "null": "missing",
    "nan": "missing",
    "na": "missing",
}
"""Operators an agent is likely to write, and the grammar's nearest one."""


def _show(value: Any) -> str:
    """A submitted value for a message: brief and safe on any JSON value (a 1 MB string, an
    integer of 10,000 digits, a nested array)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f"the string {_quote(value)}"
    if isinstance(value, int):
        if value.bit_length() > 128:  # str() of a huge integer is slow, and refused beyond 4300
            return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list):
        return f"an array of {len(value)} items"
    if isinstance(value, dict):
        return f"an object with {len(value)} keys"
    return f"a value of type {type(value).__name__}"


def _quote(text: str) -> str:
    """A submitted name, quoted and cut short."""
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "...")


def _number(value: Any) -> float | None:
    """``value`` as a float if it is a finite JSON number (not a boolean, not a string),
    else ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer beyond a double
        return None
    return number if math.isfinite(number) else None


def _closest(name: str, names: Sequence[str]) -> list[str]:
    if len(name) > 4 * max(map(len, names), default=0):  # difflib is quadratic in length
        return []
    lowered = {n.lower(): n for n in names}
    found = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
    return [lowered[f] for f in found]


def parse_group(
    obj: Any, columns: Sequence[Column], *, X: Any = None, where: str = "where"
) -> Group:
    """The group an untrusted report describes, or :class:`GroupError` naming every fault.

    ``obj`` is any parsed JSON value; a group is ``{"where": [condition, ...]}`` with one
    or two conditions ``{"column": name, "op": ">=" | "<" | "==" | "missing", "value":
    number}`` on distinct columns of the data dictionary ``columns``. Refused, each with
    its own message: anything but that shape (other keys included), a column that is not
    in the dictionary (naming the closest ones) or is recorded after the prediction, an
    operator outside the grammar, a value that is not a finite number or lies outside the
    column's possible range, ``==`` on a column that is not 0/1 or with a value other than
    0 or 1, and ``missing`` on a column that is never missing. ``X`` (n, d), the data in
    the order of ``columns``, if given, decides which columns are 0/1 and which have
    missing cells; otherwise the data dictionary does. ``where`` is the prefix of the
    messages' paths (for example ``models.m3.subgroup.where``).

    Never raises anything but :class:`GroupError`, whatever ``obj`` is.
    """
    context = where.rpartition(".")[0] or "the group"
    if not isinstance(obj, dict):
        raise GroupError([f'{context}: expected an object {{"where": [...]}}, got {_show(obj)}'])
    other = [k for k in obj if k != "where"]
    problems: list[str] = []
    if other:
        problems.append(
            f"{context}: unexpected key {_quote(str(other[0]))}; a group is "
            '{"where": [condition, ...]} and nothing else'
        )
    if "where" not in obj:
        problems.append(f"{where}: missing; list one or two conditions")
        raise GroupError(problems)
    items = obj["where"]
    if not isinstance(items, list):
        problems.append(f"{where}: expected an array of 1 to 2 conditions, got {_show(items)}")
        raise GroupError(problems)
    if not 1 <= len(items) <= MAX_CONDITIONS:
        problems.append(f"{where}: a group has 1 to {MAX_CONDITIONS} conditions, got {len(items)}")
        raise GroupError(problems)
    by_name = {c.name: (j, c) for j, c in enumerate(columns)}
    values = None if X is None else data_columns(X, len(columns))
    conditions: list[Condition] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(items):
        path = f"{where}[{i}]"
        condition, found = _condition(item, path, by_name, values)
        problems.extend(found)
        if condition is None:
            continue
        if condition.column in seen:
            problems.append(
                f"{path}.column: {condition.column} is already used by {where}"
                f"[{seen[condition.column]}]; a group uses each column once (a range of one "
                "column is not in the grammar: pick its one threshold that matters)"
            )
            continue
        seen[condition.column] = i
        conditions.append(condition)
    if problems:
        raise GroupError(problems)
    return Group(tuple(conditions))


_KEYS = ("column", "op", "value")


def _condition(
    item: Any, path: str, by_name: dict[str, tuple[int, Column]], values: Any
) -> tuple[Condition | None, list[str]]:
    """One condition of a report, or ``None`` and its faults."""
    if not isinstance(item, dict):
        return None, [
            f'{path}: expected an object {{"column": ..., "op": ..., "value": ...}}, '
            f"got {_show(item)}"
        ]
    problems: list[str] = []
    other = [k for k in item if k not in _KEYS]
    if other:
        problems.append(
            f"{path}: unexpected key {_quote(str(other[0]))}; a condition has the keys "
            "column, op and value"
        )
    name, raw = item.get("column"), item.get("value")
    column = None
    if "column" not in item:
        problems.append(f"{path}.column: missing; name a column of the data dictionary")
    elif not isinstance(name, str):
        problems.append(f"{path}.column: expected a column name, got {_show(name)}")
    elif name not in by_name:
        closest = _closest(name, list(by_name))
        hint = f" (closest: {', '.join(closest)})" if closest else ""
        problems.append(
            f"{path}.column: {_quote(name)} is not a column of the data dictionary{hint}"
        )
    elif not by_name[name][1].at_prediction:
        problems.append(
            f"{path}.column: {name} is recorded {by_name[name][1].recorded}, after the "
            "prediction; a group is described by what is known when the model is used"
        )
    else:
        column = by_name[name]
    op = _op(item, path, problems)
    value = None
    if op == "missing":
        if raw is not None:
            problems.append(f"{path}.value: 'missing' takes no value, got {_show(raw)}")
        if column is not None and not can_be_missing(column[1], _at(values, column[0])):
            problems.append(
                f"{path}: {column[1].name} is never missing in the data, so 'missing' "
                "describes nobody"
            )
    elif op is not None or "value" in item:
        value = _number(raw)
        if value is None:
            got = "missing" if "value" not in item else _show(raw)
            problems.append(f"{path}.value: expected a finite number, got {got}")
        elif column is not None:
            problems.extend(_value_problems(path, op, value, column[1], _at(values, column[0])))
    if problems or column is None or op is None:
        return None, problems
    return Condition(column[1].name, op, value), []


def _op(item: dict[Any, Any], path: str, problems: list[str]) -> Op | None:
    """A condition's operator, or ``None`` with its fault added to ``problems``."""
    op = item.get("op")
    if "op" not in item:
        problems.append(f"{path}.op: missing; one of {', '.join(OPS)}")
        return None
    for known in OPS:
        if op == known:
            return known
    hint = _HINTS.get(op.strip().lower()) if isinstance(op, str) and len(op) < 20 else None
    also = f" (for {op!r} write {hint!r})" if hint else ""
    problems.append(f"{path}.op: expected one of {', '.join(OPS)}, got {_show(op)}{also}")
    return None


def _at(values: Any, j: int) -> Any:
    return None if values is None else values[:, j]


def _value_problems(path: str, op: Any, value: float, column: Column, values: Any) -> list[str]:
    if op == "==":
        if not is_binary(column, values):
            return [
                f"{path}.op: '==' is for a 0/1 column and {column.name} is not one; "
                "describe a range of it with '>=' or '<'"
            ]
        if value not in (0.0, 1.0):
            return [f"{path}.value: {column.name} is 0 or 1, got {as_text(value)}"]
        return []
    if not column.low <= value <= column.high:
        return [
            f"{path}.value: {as_text(value)} lies outside {column.name}'s possible range "
            f"({as_text(column.low)} to {as_text(column.high)})"
        ]
    return []
