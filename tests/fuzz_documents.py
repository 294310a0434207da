"""Hypothesis strategies for hostile submissions: JSON text and raw bytes an agent might write.

Not a test module. A document is generated as a tree whose leaves may be
:class:`Literal` numbers, written into the JSON text verbatim, so that the
text can hold what no Python value serializes to: integers of 400 or 100,000
digits, mantissas of thousands of digits, ``1e309``, ``-0``, ``NaN``. Keys
look like the right ones, come in floods, and carry control characters and
lone surrogates; nesting runs past the parser's depth limit anywhere,
``details`` included. Byte strategies cover invalid UTF-8, other encodings'
byte order marks and mutations of a correct report.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import strategies as st

from pytest_clinaudit.reference.attacks.params import COMPONENTS


@dataclasses.dataclass(frozen=True)
class Literal:
    """A number written into the JSON text exactly as ``text``."""

    text: str


@dataclasses.dataclass(frozen=True)
class Nest:
    """``depth`` nested arrays (or objects) around ``inner``, written without recursion."""

    depth: int
    inner: Any
    objects: bool = False


NUMBER_LITERALS = (
    "1" + "0" * 400,
    "-1" + "0" * 400,
    "9" * 4300,  # Python's longest integer literal by default
    "9" * 4301,  # one digit too many for json.loads
    "1" * 100_000,
    "0." + "3" * 5000,
    "5." + "0" * 20_000 + "1",
    "1e308",
    "1.7976931348623157e308",
    "1.7976931348623159e308",  # rounds past the largest double
    "1e309",
    "-1e400",
    "4.9e-324",
    "2.4e-324",  # below the smallest subnormal: rounds to 0
    "1e-400",
    "-0",
    "-0.0",
    "0e0",
    "NaN",
    "Infinity",
    "-Infinity",
    "12.34",
    "99.99",
    "0.1",
    "1E2",
)

RIGHT_KEYS = ("sps", "components", "verdict", "details", *COMPONENTS)
LOOKALIKE_KEYS = (
    "SPS",
    "sps ",
    " sps",
    "sps\u200b",
    "sp\u0455",  # Cyrillic dze
    "Components",
    "component",
    "verdict\x00",
    "verdict\n",
    "\ud800sps",
    "fgsm_robustness ",
    "FGSM_robustness",
    "membership-inference-resistance",
    "calibration_ece\t",
    "boundary_attack_resistance\x1b[31m",
    "",
    "__proto__",
    "details.ece",
)
VERDICTS = ("PRODUCTION", "CONDITIONAL", "NOT RECOMMENDED", "production", "NOT  RECOMMENDED", "")

numbers = st.one_of(
    st.sampled_from(NUMBER_LITERALS).map(Literal),
    st.integers(),
    st.integers(-(10**400), 10**400),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(0, 1),
    st.floats(0, 100),
    st.floats(min_value=-1e-300, max_value=1e-300, allow_subnormal=True),
    st.sampled_from([0.0, -0.0, 5e-324, 1e308, -1e308, 0.1 + 0.2]),
)
keys = st.one_of(
    st.sampled_from(RIGHT_KEYS),
    st.sampled_from(LOOKALIKE_KEYS),
    st.text(max_size=12),
    st.text(st.characters(categories=["Cc", "Cf", "Zs", "Co", "Cs"]), max_size=6),
)
strings = st.one_of(
    st.sampled_from(VERDICTS),
    st.sampled_from(NUMBER_LITERALS[:8]),  # numbers as strings, some enormous
    st.text(max_size=40),
    st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=20),
)
scalars = st.one_of(st.none(), st.booleans(), numbers, strings)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(keys, inner, max_size=5),
        st.builds(Nest, st.sampled_from([1, 30, 511, 512, 513, 2000]), inner, st.booleans()),
    )


json_values = st.recursive(scalars, _containers, max_leaves=20)
floods = st.builds(
    lambda n, value, same: {"sps": value} if same else {f"k{i}": value for i in range(n)},
    st.integers(50, 600),
    scalars,
    st.booleans(),
)


def _component_maps() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries(dict.fromkeys(COMPONENTS, numbers)),
        st.fixed_dictionaries(
            dict.fromkeys(COMPONENTS, json_values), optional={"extra": json_values}
        ),
        st.dictionaries(st.sampled_from(COMPONENTS + LOOKALIKE_KEYS), json_values, max_size=8),
        json_values,
    )


reports = st.fixed_dictionaries(
    {},
    optional={
        "sps": st.one_of(numbers, json_values),
        "components": _component_maps(),
        "verdict": st.one_of(strings, json_values),
        "details": st.one_of(
            st.dictionaries(keys, json_values, max_size=6),
            st.builds(Nest, st.sampled_from([100, 600, 100_000]), json_values, st.booleans()),
            floods,
            json_values,
        ),
        "SPS": numbers,
        "sps ": numbers,
    },
)
documents = st.one_of(reports, json_values, floods)


# ---------------------------------------------------------------- serializing


def dumps(value: Any) -> str:
    """JSON text of ``value``, with :class:`Literal` numbers and :class:`Nest` written verbatim."""
    if isinstance(value, Literal):
        return value.text
    if isinstance(value, Nest):
        opening, closing = ('{"n":', "}") if value.objects else ("[", "]")
        return opening * value.depth + dumps(value.inner) + closing * value.depth
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(k)}:{dumps(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dumps(v) for v in value) + "]"
    if isinstance(value, float):
        return repr(value) if value == value and abs(value) != float("inf") else "NaN"
    return json.dumps(value)


def encode(text: str) -> bytes:
    """UTF-8, with lone surrogates (from escapes JSON allows) kept as invalid bytes."""
    return text.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------- bytes


def _mutate(data: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
    out = bytearray(data)
    for kind, position, payload in edits:
        at = position % (len(out) + 1)
        if kind == 0:
            out[at:at] = payload
        elif kind == 1:
            del out[at : at + len(payload) + 1]
        else:
            out[at : at + len(payload)] = payload
    return bytes(out)


def mutated(correct: bytes) -> st.SearchStrategy[bytes]:
    """A correct report's bytes with insertions, deletions and overwrites anywhere."""
    edit = st.tuples(st.integers(0, 2), st.integers(0, 10**6), st.binary(min_size=1, max_size=6))
    return st.lists(edit, min_size=1, max_size=6).map(lambda edits: _mutate(correct, edits))


def byte_strings(correct: bytes) -> st.SearchStrategy[bytes]:
    prefixes = st.sampled_from(
        [b"", b"\xef\xbb\xbf", b"\xef\xbb\xbf\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff", b"\x00"]
    )
    return st.one_of(
        st.binary(max_size=200),
        mutated(correct),
        st.tuples(prefixes, st.just(correct)).map(b"".join),
        st.tuples(st.just(correct), st.binary(min_size=1, max_size=8)).map(b"".join),
        st.just(correct.decode("utf-8").encode("utf-16")),
        st.integers(0, len(correct)).map(lambda n: correct[:n]),
    )


def report_mutations(correct: dict[str, Any]) -> st.SearchStrategy[Any]:
    """A correct report with one field replaced, removed, or nested deeper."""

    def replace(path: tuple[str, ...], value: Any) -> dict[str, Any]:
        document = json.loads(json.dumps(correct))
        target = document
        for key in path[:-1]:
            target = target.setdefault(key, {}) if isinstance(target, dict) else target
        if isinstance(target, dict):
            if value is _REMOVE:
                target.pop(path[-1], None)
            else:
                target[path[-1]] = value
        return document

    paths = st.sampled_from(
        [("sps",), ("verdict",), ("details",), ("components",), ("details", "ece")]
        + [("components", name) for name in COMPONENTS]
    )
    return st.builds(replace, paths, st.one_of(st.just(_REMOVE), numbers, json_values))


_REMOVE = object()
