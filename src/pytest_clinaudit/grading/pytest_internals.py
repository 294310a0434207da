"""The private pytest and Hypothesis APIs the grading core relies on, all in one place.

Each has no public equivalent (why is said at each); each degrades to a slower
or noisier session, never to a wrong grade, if a release moves it.
:func:`missing` lists what the installed releases no longer provide;
``tests/test_pytest_internals.py`` fails naming the API when that list is not
empty, so an upgrade that moves one is noticed in CI, not in a grader's log.

Replaced by public APIs (and so not here): importing pytest's built-in
plugins before forking (``_pytest.config.default_plugins``) is now
``pytest.main(["--version"])`` in :mod:`pytest_clinaudit.batch.executor`.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pytest

REWRITE_MARKS = "pytest's AssertionRewritingHook._must_rewrite"
NODE_ID_DISPLAY = "pytest.Config.cwd_relative_nodeid (replaced on the instance)"
JUNIT_XML = "_pytest.junitxml.xml_key"
HYPOTHESIS_HOME = "hypothesis.configuration.__hypothesis_home_directory"


def stop_rewriting(config: pytest.Config, prefixes: tuple[str, ...]) -> None:
    """Import modules starting with ``prefixes`` without assertion rewriting.

    pytest marks every module of a distribution that registers a ``pytest11``
    plugin for rewriting. A module's own ``PYTEST_DONT_REWRITE`` docstring is
    the public way out, but it still sends the module through the rewriting
    loader, which cannot cache its bytecode when ``PYTHONDONTWRITEBYTECODE`` is
    set (about 1 s per grading session), and it cannot be added to Hypothesis.
    The marks live in a private set of pytest's import hook; if it moves,
    sessions are only slower.
    """
    hook = getattr(config.pluginmanager, "rewrite_hook", None)
    marked = getattr(hook, "_must_rewrite", None)
    if isinstance(marked, set):
        marked.difference_update({name for name in marked if name.startswith(prefixes)})


def show_node_ids_as_they_are(config: pytest.Config) -> None:
    """Show ``wdbc-hard::sps`` as that, wherever pytest was invoked from.

    The terminal shows node ids relative to the working directory, reading their
    first part as a path under rootdir, and pytest guesses rootdir from path-like
    arguments before any plugin loads, so ``--submission ../runs/report.json``
    made the terminal print ``../wdbc-hard::sps``. No hook or option lets a
    plugin change either, so the translation is replaced on this session's config
    (every item of a grading session is a check, not a file).
    """
    config.cwd_relative_nodeid = lambda nodeid: nodeid  # type: ignore[method-assign]


def junit_xml(config: pytest.Config) -> Any:
    """The session's JUnit XML writer (``None`` without ``--junitxml``).

    Suite properties must be added on the controller after every result is in;
    the public ``record_testsuite_property`` fixture runs inside a test and does
    not reach the controller under pytest-xdist.
    """
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # a future pytest moved it; the score JSON still has it all
        return None
    return config.stash.get(xml_key, None)


@contextlib.contextmanager
def hypothesis_home(directory: Path | None) -> Iterator[None]:
    """Point Hypothesis' storage at ``directory`` while an invariant runs.

    ``database=None`` keeps the example database out of the grader's working
    directory, but Hypothesis also caches what it finds in local modules under
    ``./.hypothesis``. ``set_hypothesis_home_dir`` has no getter, so the previous
    value is read from the module's private global and restored after.
    """
    from hypothesis import configuration

    previous = vars(configuration).get("__hypothesis_home_directory")
    directory = directory or Path(tempfile.gettempdir()) / "pytest-clinaudit-hypothesis"
    configuration.set_hypothesis_home_dir(directory)
    try:
        yield
    finally:
        configuration.set_hypothesis_home_dir(previous)


def missing() -> list[str]:
    """The private APIs above that the installed pytest and Hypothesis no longer provide."""
    import _pytest.assertion.rewrite
    import pytest
    from hypothesis import configuration

    gone = []
    hook = _pytest.assertion.rewrite.AssertionRewritingHook
    if "_must_rewrite" not in hook.__init__.__code__.co_names:
        gone.append(REWRITE_MARKS)
    if not callable(getattr(pytest.Config, "cwd_relative_nodeid", None)):
        gone.append(NODE_ID_DISPLAY)
    try:
        from _pytest.junitxml import xml_key  # noqa: F401
    except ImportError:
        gone.append(JUNIT_XML)
    if "__hypothesis_home_directory" not in vars(configuration) or not callable(
        getattr(configuration, "set_hypothesis_home_dir", None)
    ):
        gone.append(HYPOTHESIS_HOME)
    return gone
