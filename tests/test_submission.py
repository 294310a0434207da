"""Reading untrusted submissions: each hostile file becomes a status and a message, not a crash."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_clinaudit.grading import values
from pytest_clinaudit.grading.submission import MAX_DEPTH, load, nesting_depth, parse_bytes

LIMIT = 1 << 20
GOOD = b'{"sps": 57.07, "components": {"fgsm_robustness": 0.0043}, "verdict": "NOT RECOMMENDED"}'


def test_a_well_formed_report_is_ok_and_keeps_its_numbers(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(GOOD)
    found = load(path, max_bytes=LIMIT)
    assert found.status == "ok"
    assert found.message == ""
    assert found.document["components"]["fgsm_robustness"] == 0.0043
    assert found.size == len(GOOD)
    assert len(found.sha256 or "") == 64


def test_a_missing_file_says_no_such_file_and_where_to_look(tmp_path: Path) -> None:
    found = load(tmp_path / "nope.json", max_bytes=LIMIT)
    assert found.status == "missing"
    assert found.message.startswith(f"{tmp_path / 'nope.json'}: no such file.")
    assert "check the path passed to --submission" in found.message


def test_a_directory_is_not_read_and_the_message_suggests_the_file_inside(tmp_path: Path) -> None:
    found = load(tmp_path, max_bytes=LIMIT)
    assert found.status == "not-a-file"
    assert f"{tmp_path} is a directory, not a regular file" in found.message
    assert str(tmp_path / "report.json") in found.message


def test_a_symlink_is_refused_even_when_it_points_at_a_good_report(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_bytes(GOOD)
    (tmp_path / "link.json").symlink_to(tmp_path / "real.json")
    found = load(tmp_path / "link.json", max_bytes=LIMIT)
    assert found.status == "symlink"
    assert found.document is None
    assert "is a symbolic link (to" in found.message
    assert "pass the report file itself" in found.message


def test_a_dangling_symlink_is_reported_as_a_link_not_as_missing(tmp_path: Path) -> None:
    (tmp_path / "link.json").symlink_to(tmp_path / "gone.json")
    assert load(tmp_path / "link.json", max_bytes=LIMIT).status == "symlink"


def _never_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Make every ``os.open`` insist on O_NONBLOCK (a blocking open of a FIFO with no
    writer would hang the test instead of failing it) and every ``os.read`` fail."""
    opened: list[int] = []
    real_open = os.open

    def open_without_blocking(path: object, flags: int, *args: object) -> int:
        assert flags & os.O_NONBLOCK, "opened without O_NONBLOCK: a FIFO would block"
        opened.append(flags)
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    def read(*_: object) -> bytes:
        raise AssertionError("the file was read")

    monkeypatch.setattr(os, "open", open_without_blocking)
    monkeypatch.setattr(os, "read", read)
    return opened


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_without_a_writer_does_not_hang_the_grader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    opened = _never_read(monkeypatch)
    found = load(fifo, max_bytes=LIMIT)
    assert opened, "the FIFO was never opened: nothing was checked"
    assert found.status == "not-a-file"
    assert "FIFO (named pipe)" in found.message


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_an_endless_device_is_not_read() -> None:
    found = load(Path("/dev/zero"), max_bytes=LIMIT)
    assert found.status == "not-a-file"
    assert "character device" in found.message


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_file_says_permission_denied_and_how_to_fix_it(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(GOOD)
    path.chmod(0)
    try:
        found = load(path, max_bytes=LIMIT)
    finally:
        path.chmod(stat.S_IRUSR | stat.S_IWUSR)
    assert found.status == "unreadable"
    assert "chmod a+r" in found.message


def test_a_file_over_the_size_limit_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(b" " * 2048 + GOOD)
    found = load(path, max_bytes=1024)
    assert found.status == "too-large"
    assert found.document is None
    assert f"is {2048 + len(GOOD)} bytes; the grader reads at most 1024 bytes" in found.message


def test_a_100_megabyte_file_is_refused_from_its_size_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.json"
    with path.open("wb") as out:  # sparse: nothing is actually written
        out.truncate(100 * 1024 * 1024)
    _never_read(monkeypatch)
    assert load(path, max_bytes=LIMIT).status == "too-large"


def test_a_leading_utf8_bom_is_tolerated() -> None:
    found = parse_bytes(b"\xef\xbb\xbf" + GOOD)
    assert found.status == "ok"
    assert found.had_bom


def test_utf16_is_named_as_such() -> None:
    found = parse_bytes(GOOD.decode().encode("utf-16"))
    assert found.status == "not-utf8"
    assert "UTF-16 byte order mark" in found.message


def test_binary_garbage_names_the_offending_byte_and_offset() -> None:
    found = parse_bytes(b'{"sps": 1}\xff\xfe')
    assert found.status == "not-utf8"
    assert "byte 0xff at offset 10" in found.message
    assert "UTF-8" in found.message


def test_a_pickle_is_recognised_and_never_unpickled() -> None:
    found = parse_bytes(b"\x80\x04\x95\x10\x00\x00\x00")
    assert found.status == "not-utf8"
    assert "looks like a Python pickle" in found.message


@pytest.mark.parametrize(
    ("data", "status", "phrase"),
    [
        (b"", "empty", "is empty (0 bytes)"),
        (b" \n\t ", "empty", "blank: it holds only whitespace"),
        (b"\xef\xbb\xbf", "empty", "is empty"),
        (b"{}", "empty-object", "an empty JSON object {}"),
        (b"[1, 2]", "not-an-object", "holds an array, not a JSON object"),
        (b'"57.07"', "not-an-object", "holds a string"),
        (b"57.07", "not-an-object", "holds a number"),
        (b"null", "not-an-object", "holds null"),
        (b'{"sps": 57.07,}', "invalid-json", "is not valid JSON: Expecting property name"),
        (b"{'sps': 57.07}", "invalid-json", "line 1 column 2"),
    ],
)
def test_each_kind_of_non_report_gets_its_own_status_and_message(
    data: bytes, status: str, phrase: str
) -> None:
    found = parse_bytes(data, "r.json")
    assert found.status == status
    assert phrase in found.message


def test_nesting_100000_deep_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(*_: object, **__: object) -> object:
        raise AssertionError("the document was parsed")

    monkeypatch.setattr(json, "loads", parse)
    data = b"[" * 100_000 + b"]" * 100_000
    found = parse_bytes(data)
    assert found.status == "too-deep"
    assert f"more than {MAX_DEPTH} levels" in found.message


def test_nesting_within_the_limit_is_parsed() -> None:
    data = '{"sps": 1, "details": ' + "[" * 100 + "]" * 100 + "}"
    assert parse_bytes(data.encode()).status == "ok"


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("{}", 1),
        ('{"a": [[1]]}', 3),
        ('{"a": "[[[[["}', 1),
        ('{"a": "\\"[[["}', 1),
        ('{"a\\\\": [1]}', 2),
        ("[[], [[]]]", 3),
    ],
)
def test_nesting_depth_skips_brackets_inside_strings(text: str, depth: int) -> None:
    assert nesting_depth(text, 100) == depth


def _depth_by_scanning(text: str, limit: int) -> int:
    """The obvious definition: walk every character, tracking strings and escapes."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
        elif char in "]}":
            depth -= 1
    return deepest


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='[]{}"\\a:,\n', max_size=60), st.integers(0, 12))
def test_nesting_depth_equals_a_character_by_character_scan(text: str, limit: int) -> None:
    assert nesting_depth(text, limit) == _depth_by_scanning(text, limit)


def test_duplicate_keys_are_recorded_with_every_value_and_the_last_wins() -> None:
    found = parse_bytes(b'{"sps": 1, "components": {"a": 1, "a": 2, "a": 3}, "sps": 2}')
    assert found.document["sps"] == 2
    assert found.document["components"]["a"] == 3
    assert {(d.where, d.values) for d in found.duplicates} == {
        ("sps", (1, 2)),
        ("components.a", (1, 2, 3)),
    }


def test_a_file_full_of_duplicate_keys_is_parsed_and_every_duplicate_is_found() -> None:
    body = ", ".join(f'"k": {i}' for i in range(10_000))
    found = parse_bytes(("{" + body + "}").encode())
    assert found.status == "ok"
    assert len(found.duplicates) == 1
    assert len(found.duplicates[0].values) == 10_000


def test_nan_infinity_and_overflowing_numbers_are_recorded_with_their_literals() -> None:
    found = parse_bytes(b'{"a": NaN, "b": [Infinity, -Infinity], "c": 1e999, "d": 1.5}')
    assert found.nonfinite == (
        ("a", "NaN"),
        ("b[0]", "Infinity"),
        ("b[1]", "-Infinity"),
        ("c", "1e999"),
    )
    assert found.document["d"] == 1.5


def test_an_integer_beyond_pythons_digit_limit_is_unparseable_not_a_crash() -> None:
    found = parse_bytes(b'{"sps": ' + b"9" * 5000 + b"}")
    assert found.status == "invalid-json"
    assert "not parseable" in found.message


def test_describe_quotes_values_shortly_and_escapes_control_characters() -> None:
    assert values.describe("0.52") == "the string '0.52'"
    assert values.describe(True) == "the boolean true"
    assert values.describe(None) == "null"
    assert values.describe("\x1b[31m" + "x" * 500).startswith("the string '\\x1b[31m")
    assert len(values.describe("x" * 10_000)) < 100
    assert values.describe(10**400).startswith("an integer with 401 digits")


@pytest.mark.parametrize("value", [True, "0.5", None, [0.5], {"a": 1}, float("nan"), 10**400])
def test_json_number_rejects_everything_that_is_not_a_finite_json_number(value: object) -> None:
    assert values.json_number(value) is None


def test_json_number_accepts_ints_and_floats() -> None:
    assert values.json_number(1) == 1.0
    assert values.json_number(0.25) == 0.25


def test_json_paths_are_readable_and_quote_odd_keys() -> None:
    assert values.join("", "sps") == "sps"
    assert values.join("components", "fgsm_robustness") == "components.fgsm_robustness"
    assert values.join("details", 3) == "details[3]"
    assert values.join("details", "a.b") == 'details["a.b"]'
    assert json.loads(values.join("", "x y")[1:-1]) == "x y"
