"""The private pytest and Hypothesis APIs the grader relies on still exist, or CI says which moved."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from pytest_clinaudit.grading import pytest_internals


def _versions() -> str:
    return ", ".join(f"{name} {metadata.version(name)}" for name in ("pytest", "hypothesis"))


def test_every_private_api_the_grader_uses_is_still_there() -> None:
    gone = pytest_internals.missing()
    assert not gone, (
        f"with {_versions()}, these private APIs moved: {'; '.join(gone)}. "
        "See src/pytest_clinaudit/grading/pytest_internals.py for what each buys and how it degrades."
    )


def test_the_rewrite_marks_are_a_set_on_a_real_config(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure()
    marked = getattr(config.pluginmanager.rewrite_hook, "_must_rewrite", None)
    assert isinstance(marked, set), (
        f"with {_versions()}: {pytest_internals.REWRITE_MARKS} is {type(marked).__name__}, not a "
        "set; grading sessions would rewrite Hypothesis again (about 1 s slower)"
    )


def test_replacing_the_node_id_translation_changes_what_the_terminal_would_print(
    pytester: pytest.Pytester,
) -> None:
    config = pytester.parseconfigure()
    pytest_internals.show_node_ids_as_they_are(config)
    assert config.cwd_relative_nodeid("wdbc-hard::sps") == "wdbc-hard::sps", (
        f"with {_versions()}: {pytest_internals.NODE_ID_DISPLAY} no longer decides node ids"
    )


def test_the_junit_writer_is_found_when_junitxml_is_on(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfigure("--junitxml", str(pytester.path / "out.xml"))
    xml = pytest_internals.junit_xml(config)
    assert hasattr(xml, "add_global_property"), (
        f"with {_versions()}: {pytest_internals.JUNIT_XML} no longer leads to the JUnit writer; "
        "suite properties would be missing from the XML"
    )
    assert pytest_internals.junit_xml(pytester.parseconfigure()) is None


def test_hypothesis_storage_moves_for_the_block_and_comes_back(tmp_path: Path) -> None:
    from hypothesis import configuration

    before = configuration.storage_directory("x", intent_to_write=False).path
    with pytest_internals.hypothesis_home(tmp_path):
        inside = configuration.storage_directory("x", intent_to_write=False).path
    after = configuration.storage_directory("x", intent_to_write=False).path
    assert inside == tmp_path / "x", f"with {_versions()}: {pytest_internals.HYPOTHESIS_HOME} moved"
    assert after == before
