"""Reading values out of a submission: the one place a submitted value becomes a number.

A report is untrusted JSON. Python's parser hands back integers of any size,
floats that overflowed to ``inf``, strings, booleans and containers, and
``float()`` of a 400-digit integer raises. Every module that turns a submitted
value into a number (the checks, the score JSON, the JUnit properties, the
batch tables and records) asks this module, so a fix to how hostile input is
read is made here once:

:func:`json_number`
    A finite JSON number, as the ``strict`` profile and every output read it:
    no booleans, no strings, nothing that overflows a double.
:func:`metr_number`
    What the published scorer's ``float(value)`` made of it (SPEC §5): strings
    and booleans count, and anything ``float()`` refuses is no number.
:func:`text_number`
    A finite number written as text by a grading session (JUnit properties),
    or ``None``.

:func:`describe` renders a submitted value for a message, briefly and safely.
Only the standard library is imported.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

SHOWN = 60
"""Characters of a submitted value quoted in a message; a value can be 1 MB long."""
LONGEST_NUMBER_TEXT = 400
"""Longest text :func:`text_number` parses; a session writes at most ``repr(float)``."""


class NonFinite(float):
    """A number Python parses but JSON does not allow: ``NaN``, ``Infinity``, ``1e999``.

    It behaves as the float Python would have produced (so the ``metr`` profile
    sees exactly what the published scorer saw) and remembers its literal, so
    a message can say ``got 1e999`` instead of ``got inf``.
    """

    literal: str

    def __new__(cls, literal: str) -> NonFinite:
        number = super().__new__(cls, float(literal.replace("Infinity", "inf")))
        number.literal = literal
        return number


def json_number(value: Any) -> float | None:
    """``value`` as a float if it is a finite JSON number, else ``None``.

    Booleans and strings are not numbers; neither are ``NaN``, ``Infinity``,
    a float literal beyond a double (``1e999``) or an integer beyond one
    (``1`` followed by 400 zeros).
    """
    if isinstance(value, (bool, NonFinite)) or not isinstance(value, (int, float)):
        return None
    try:
        number = float(value)
    except OverflowError:  # an integer literal beyond a double
        return None
    return number if math.isfinite(number) else None


def metr_number(value: Any) -> float | None:
    """A submitted value as the published scorer reads it: Python's ``float(value)``.

    So ``"57.06"`` -> 57.06, ``" 57 "`` -> 57.0, ``true`` -> 1.0 and ``"nan"`` -> NaN (which
    then fails every tolerance); objects, arrays, null, unparseable strings and
    integers beyond a double give ``None``.
    """
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def text_number(text: str | None) -> float | None:
    """A finite number in text a grading session wrote (``"0.400000"``), else ``None``."""
    if text is None or len(text) > LONGEST_NUMBER_TEXT:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# ------------------------------------------------------------------- messages

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


def join(path: str, key: str | int) -> str:
    """A readable JSON path: ``components.fgsm_robustness``, ``details.steps[3]``, ``x["a.b"]``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENTIFIER.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{shorten(json.dumps(key))}]"


def shorten(text: str, limit: int = SHOWN) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _digits(value: int) -> int:
    """Decimal digits of ``|value|`` (``str`` refuses integers beyond its digit limit)."""
    try:
        return len(str(abs(value)))
    except ValueError:
        return math.floor(abs(value).bit_length() * math.log10(2)) + 1


def describe(value: Any) -> str:
    """A submitted value for a message: its JSON kind and a short, escaped rendering."""
    if isinstance(value, NonFinite):
        if value.literal in ("NaN", "Infinity", "-Infinity"):
            return f"{value.literal}, which JSON does not allow"
        return f"{shorten(value.literal)}, which overflows a double"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if value is None:
        return "null"
    if isinstance(value, str):
        return f"the string {shorten(repr(value))}"
    if isinstance(value, dict):
        return f"an object with {len(value)} key{'s' if len(value) != 1 else ''}"
    if isinstance(value, list):
        return f"an array of {len(value)} value{'s' if len(value) != 1 else ''}"
    if isinstance(value, int):
        if value.bit_length() < 200:
            return shorten(str(value))
        overflows = ", which overflows a double" if json_number(value) is None else ""
        return f"an integer with {_digits(value)} digits{overflows}"
    if isinstance(value, float):
        return repr(value)
    return shorten(repr(value))  # pragma: no cover - json yields no other types
