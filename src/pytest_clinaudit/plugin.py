"""The pytest plugin: ``pytest --submission report.json --variant wdbc-hard``.

Thin glue between pytest and the grading core (:mod:`pytest_clinaudit.grading`):
``options`` registers and validates the options, :mod:`~pytest_clinaudit.hookspecs`
declares the grader-facing hooks, and a ``session`` holds one grading run, whose
``items`` run the checks on the submission and whose ``outputs`` carry the grade.
When pytest-html is active, :mod:`pytest_clinaudit.pages.grade_html` adds the
grade's columns and summary to its page.

pytest loads this module on every run of every project, so importing it must
cost nothing: it imports only the standard library and pytest, and everything
else once ``--submission`` is given. Without ``--submission`` every hook below
returns at its first line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from pytest_clinaudit.grading import options

if TYPE_CHECKING:
    from pytest_clinaudit.grading.game_session import GameGradingSession
    from pytest_clinaudit.grading.scoring import Grade
    from pytest_clinaudit.grading.session import GradingSession

GRADING = pytest.StashKey["GradingSession | GameGradingSession"]()


def _grading(config: pytest.Config) -> GradingSession | GameGradingSession | None:
    return config.stash.get(GRADING, None)


def _is_worker(config: pytest.Config) -> bool:
    """An xdist worker: it runs checks; the controller grades and reports."""
    return hasattr(config, "workerinput")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_clinaudit import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    options.register(parser)


@pytest.hookimpl(trylast=True)  # after the terminal reporter exists, to show progress
def pytest_configure(config: pytest.Config) -> None:
    resolved = None
    try:
        resolved = options.resolve(config)
        if resolved is None:
            return
        from pytest_clinaudit.grading import isolation, pytest_internals

        refused = isolation.refusal(config, resolved.submission, resolved.variant)
        if refused is not None:
            _write_refused(config, resolved, refused)
            raise pytest.UsageError(refused)

        # Before importing anything else: what is imported while marked is rewritten.
        pytest_internals.stop_rewriting(config, _NOT_REWRITTEN)
        pytest_internals.show_node_ids_as_they_are(config)
        from pytest_clinaudit.grading.session import GradingSession

        reporter = config.pluginmanager.get_plugin("terminalreporter")

        def progress(message: str) -> None:
            if reporter is not None and not _is_worker(config):
                reporter.write_line(message)

        grading = GradingSession.start(config, resolved, progress)
        config.stash[GRADING] = grading
        if not _is_worker(config):
            # Under xdist the controller sees every worker's reports through this
            # hook, so the process that grades is the one that sees all results.
            config.pluginmanager.register(grading.results, "clinaudit-results")
            if config.pluginmanager.hasplugin("html") and isinstance(grading, GradingSession):
                # pytest-html is installed and active: show the grade in its page.
                from pytest_clinaudit.pages.grade_html import GradeColumns

                config.pluginmanager.register(GradeColumns(grading), "clinaudit-html")
    except pytest.UsageError:
        raise
    except options.OptionError as exc:
        _write_error_score(config, resolved, str(exc))
        raise pytest.UsageError(str(exc)) from None
    except Exception as exc:
        _write_error_score(config, resolved, f"{type(exc).__name__}: {exc}")
        raise


# Distributions whose modules pytest marks for assertion rewriting because they
# register pytest11 plugins: Hypothesis and this package. A grading session runs no
# user tests and every assert in the checks carries its own message, so rewriting
# buys nothing; a grader's conftest files are still rewritten.
_NOT_REWRITTEN = ("hypothesis", "_hypothesis", "pytest_clinaudit")


def _write_error_score(config: pytest.Config, resolved: Any, message: str) -> None:
    if _is_worker(config):
        return
    from pytest_clinaudit.grading.outputs import write_error_score

    path = config.getoption(options.SCORE_JSON)
    if path is not None and not path.is_absolute():
        path = config.invocation_params.dir / path
    write_error_score(path, resolved, message)


def _write_refused(config: pytest.Config, resolved: options.GradingOptions, message: str) -> None:
    """Score 0 wherever this session was asked to write a score (the controller only)."""
    if _is_worker(config):
        return
    import os

    from pytest_clinaudit.grading.outputs import write_refused

    junit: str | None = config.getoption("xmlpath", None)
    junit_path = None
    if junit:
        junit_path = config.invocation_params.dir / os.path.expanduser(os.path.expandvars(junit))
    write_refused(resolved.score_json, junit_path, resolved, message)


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    grading = _grading(config)
    return None if grading is None else grading.header()


@pytest.hookimpl(tryfirst=True)
def pytest_make_collect_report(collector: pytest.Collector) -> pytest.CollectReport | None:
    """Replace the session's collection with the grading checks, and nothing else.

    The session still resolves its arguments (``testpaths`` and the like), but
    none of them is collected, so grading works the same in an empty directory
    and in a repository full of tests; every xdist worker collects the same items.
    """
    if not isinstance(collector, pytest.Session):
        return None
    grading = _grading(collector.config)
    if grading is None:
        return None
    from pytest_clinaudit.grading.items import GradingCollector

    node = GradingCollector.from_parent(
        collector, name=grading.variant.name, nodeid=grading.variant.name, grading=grading
    )
    return pytest.CollectReport(collector.nodeid, "passed", None, [node])


@pytest.hookimpl(tryfirst=True)  # before junitxml writes its file and the terminal its summary
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    grading = _grading(config)
    if grading is None or _is_worker(config) or config.option.collectonly:
        return
    grade = grading.finish()
    threshold = grading.options.fail_under
    # Only a run that completed is judged by its score; an interrupted or crashed
    # session keeps its own status.
    if threshold is not None and session.exitstatus in (
        pytest.ExitCode.OK,
        pytest.ExitCode.TESTS_FAILED,
        pytest.ExitCode.NO_TESTS_COLLECTED,
    ):
        session.exitstatus = (
            pytest.ExitCode.OK if grade.score >= threshold else pytest.ExitCode.TESTS_FAILED
        )
    grading.exit_status = int(session.exitstatus)
    try:
        config.hook.pytest_clinaudit_graded(config=config, variant=grading.variant, grade=grade)
    finally:
        _write_outputs(config, grading, grade, session)


def _write_outputs(
    config: pytest.Config,
    grading: GradingSession | GameGradingSession,
    grade: Grade,
    session: pytest.Session,
) -> None:
    """Suite properties into the JUnit XML (if any) and the score JSON (if asked for)."""
    from pytest_clinaudit.files import write_json_atomic
    from pytest_clinaudit.grading import pytest_internals

    xml = pytest_internals.junit_xml(config)
    if xml is not None:
        for name, value in grading.suite_properties(grade):
            xml.add_global_property(name, value)
    path = grading.options.score_json
    if path is not None:
        try:
            write_json_atomic(path, grading.score_document(grade))
        except OSError as exc:
            grading.score_json_error = f"cannot write {path}: {exc.strerror or exc}"
            session.exitstatus = pytest.ExitCode.INTERNAL_ERROR


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    grading = _grading(config)
    if grading is None or grading.grade is None:
        return
    grade = grading.grade
    terminalreporter.write_sep("-", "clinaudit grade")
    if config.option.verbose > 0:
        for check in grade.checks:
            status = "SKIP" if check.skipped else "PASS" if check.passed else "FAIL"
            terminalreporter.write_line(
                f"  {status}  {check.kind:<7} "
                f"weight {check.weight:<6g} "
                f"credit {check.credit:<4g} {check.id}"
            )
    terminalreporter.write_line(grade.summary(grading.variant.name))
    threshold = grading.options.fail_under
    if threshold is not None:
        verdict = "meets" if grade.score >= threshold else "is below"
        terminalreporter.write_line(
            f"clinaudit: score {grade.score:.3f} {verdict} --clinaudit-fail-under {threshold:g}: "
            f"exit status {grading.exit_status}"
        )
    error = grading.score_json_error
    if error:
        terminalreporter.write_line(f"clinaudit: ERROR: {error}", red=True)
    elif grading.options.score_json is not None:
        terminalreporter.write_line(
            f"clinaudit: score JSON written to {grading.options.score_json}"
        )
