"""One grading session: variant, reference, submission, the test items, the grade.

:class:`GradingSession` is created by the plugin in ``pytest_configure`` when
``--submission`` is given and kept in ``config.stash``. It resolves the variant,
fetches the reference (computing and caching it on the first run), reads the
submission lazily, turns checks into test items, collects their results from
the test reports and, on the process that saw every report, computes the grade
and writes it to the terminal, the JUnit XML and the score JSON.

This module imports the catalog and the reference machinery, so the plugin
imports it only once grading is requested.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_clinaudit import checks, scoring
from pytest_clinaudit import submission as submissions
from pytest_clinaudit.cache import ReferenceCache, default_cache_dir
from pytest_clinaudit.catalog import Catalog, Variant, VariantError, default_catalog
from pytest_clinaudit.files import write_json_atomic
from pytest_clinaudit.options import OptionError
from pytest_clinaudit.reference.params import COMPONENTS
from pytest_clinaudit.scoring import CheckRecord, Grade

if TYPE_CHECKING:
    from pytest_clinaudit.options import GradingOptions
    from pytest_clinaudit.references import Reference
    from pytest_clinaudit.submission import Submission

SCORE_FORMAT = 1
"""Version of the score JSON layout."""
GRADING_LIBRARIES = ("pytest", "pytest-xdist", "hypothesis", "jsonschema")

Progress = Callable[[str], None]


def _versions(names: tuple[str, ...]) -> dict[str, str]:
    found = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found


def _json_number(value: Any) -> float | None:
    """A JSON number as a float; ``None`` for anything else (strings, booleans, NaN)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _text(value: float | None) -> str:
    return "none" if value is None else repr(value)


def write_error_score(path: Path | None, options: GradingOptions | None, message: str) -> None:
    """The score JSON of a session that could not grade (a usage error): score null, the reason."""
    if path is None:
        return
    document: dict[str, Any] = {
        "format": SCORE_FORMAT,
        "score": None,
        "raw_score": None,
        "error": message,
        "profile": None if options is None else options.profile,
        "variant": None if options is None else options.variant,
        "category": None,
        "checks": [],
    }
    with contextlib.suppress(OSError):  # the usage error itself is what the user must see
        write_json_atomic(path, document)


class GradingSession:
    """State of one grading run, one instance per process (controller and each worker)."""

    def __init__(
        self,
        config: pytest.Config,
        options: GradingOptions,
        catalog: Catalog,
        variant: Variant,
        reference: Reference,
        cache_dir: Path,
    ) -> None:
        self.config = config
        self.options = options
        self.catalog = catalog
        self.variant = variant
        self.reference = reference
        self.cache_dir = cache_dir
        self.results = Results()
        self.grade: Grade | None = None
        self.exit_status: int | None = None
        self.builtin_names: set[str] = set()
        self.score_json_error = ""

    # ----------------------------------------------------------------- start

    @classmethod
    def start(
        cls, config: pytest.Config, options: GradingOptions, progress: Progress
    ) -> GradingSession:
        """Resolve the variant and fetch its reference.

        Raises
        ------
        OptionError
            The variant is unknown, a variant file is invalid, the variant's data is
            missing, or the cache cannot be written; the message says how to fix it.
        """
        from pytest_clinaudit.reference.data import DataError, LoadContext
        from pytest_clinaudit.references import get_reference

        try:
            catalog = default_catalog(options.variants_dirs)
            config.hook.pytest_clinaudit_register_variants(config=config, catalog=catalog)
            variant = catalog.get(options.variant)
        except VariantError as exc:
            raise OptionError(f"--variant: {exc}") from None
        cache_dir = options.cache_dir or default_cache_dir()
        context = LoadContext(base_dir=variant.path.parent, mimic_dir=options.mimic_dir)
        announced = False

        def report(message: str) -> None:
            nonlocal announced
            if not announced:
                progress(
                    f"clinaudit: computing the {variant.name} reference (first run with "
                    f"these library versions; cached in {cache_dir})"
                )
                announced = True
            progress(f"clinaudit:   {message}")

        try:
            reference = get_reference(
                variant, cache=ReferenceCache(cache_dir), context=context, progress=report
            )
        except DataError as exc:
            hint = ""
            if "--clinaudit-mimic-dir" not in str(exc) and type(
                variant.dataset
            ).__name__.lower().startswith("mimic"):
                hint = (
                    " Pass --clinaudit-mimic-dir DIR or set CLINAUDIT_MIMIC_DIR to your "
                    "MIMIC-IV extract."
                )
            raise OptionError(f"cannot build the {variant.name} reference: {exc}{hint}") from None
        except VariantError as exc:
            raise OptionError(f"cannot build the {variant.name} reference: {exc}") from None
        except OSError as exc:
            raise OptionError(
                f"the reference cache {cache_dir} is not usable ({exc.strerror or exc}); "
                "pass --clinaudit-cache-dir DIR with a writable directory"
            ) from None
        if options.manifest is not None:
            from pytest_clinaudit.workspace import (
                ManifestError,
                check_reference_matches,
                read_manifest,
            )

            try:
                manifest = read_manifest(options.manifest)
                check_reference_matches(manifest, options.manifest, variant.name, reference)
            except ManifestError as exc:
                raise OptionError(f"--clinaudit-manifest: {exc}") from None
        return cls(config, options, catalog, variant, reference, cache_dir)

    # ------------------------------------------------------------ submission

    @functools.cached_property
    def submission(self) -> Submission:
        return submissions.load(self.options.submission, max_bytes=self.options.max_bytes)

    @functools.cached_property
    def grading(self) -> checks.Grading:
        return checks.Grading(
            self.variant,
            self.reference,
            self.submission,
            self.options.profile,
            scratch_dir=self.cache_dir / "hypothesis",
        )

    @functools.cached_property
    def checks(self) -> list[checks.Check]:
        """Built-in checks, then those added by ``pytest_clinaudit_add_checks`` hooks."""
        found = checks.builtin_checks(self.grading)
        builtin = {c.name for c in found}
        added: list[checks.Check] = []
        for result in self.config.hook.pytest_clinaudit_add_checks(
            config=self.config,
            variant=self.variant,
            reference=self.reference,
            submission=self.submission,
        ):
            for check in result or ():
                if not isinstance(check, checks.Check):
                    raise TypeError(
                        f"pytest_clinaudit_add_checks returned {type(check).__name__}; return "
                        "pytest_clinaudit.checks.Check objects"
                    )
                added.append(check)
        names = [c.name for c in added]
        clashes = sorted({n for n in names if n in builtin or names.count(n) > 1})
        if clashes:
            raise ValueError(
                f"pytest_clinaudit_add_checks: check name(s) {', '.join(clashes)} used twice"
            )
        self.builtin_names = builtin
        return [*found, *added]

    # ----------------------------------------------------------------- report

    def header(self) -> list[str]:
        """What reproduces this run, for ``pytest_report_header``."""
        r, v, o = self.reference, self.variant, self.options
        aliases = f" ({', '.join(v.aliases)})" if v.aliases else ""
        state = "read from the cache" if r.from_cache else "computed now and cached"
        return [
            f"clinaudit: variant {v.name}{aliases} from {v.path}; profile {o.profile}",
            f"clinaudit: reference sps {r.sps:.2f}, artifact sha256 {r.artifact_sha256}, "
            f"data sha256 {r.data_sha256[:16]}, {state}",
            f"clinaudit: cache {self.cache_dir}; submission {o.submission}"
            + ("" if o.manifest is None else f"; manifest {o.manifest} (artifact matches)"),
        ]

    def finish(self) -> Grade:
        self.grade = scoring.compute(self.results.records.values(), self.options.profile)
        return self.grade

    def missing_checks(self) -> list[str] | None:
        """Ids of checks that were collected here but reported no result (deselected, not run).

        ``None`` if the checks cannot be listed (a grader's hook failed).
        """
        try:
            expected = [f"{self.variant.name}::{check.name}" for check in self.checks]
        except Exception:  # noqa: BLE001 - the collection error already told the user
            return None
        return [test_id for test_id in expected if test_id not in self.results.records]

    def score_document(self, grade: Grade) -> dict[str, Any]:
        r, v, o = self.reference, self.variant, self.options
        return {
            "format": SCORE_FORMAT,
            "score": grade.score,
            "raw_score": grade.raw_score,
            "no_submission": grade.no_submission,
            "profile": grade.profile,
            "variant": v.name,
            "variant_file": str(v.path),
            "category": grade.category,
            "invariants_ok": grade.invariants_ok,
            "fail_under": o.fail_under,
            "exit_status": self.exit_status,
            "manifest": None if o.manifest is None else str(o.manifest),
            "meta": dict(o.meta),
            "submission": self.submission.summary(),
            "submitted": self.submitted_values(),
            "reference": {
                "artifact_sha256": r.artifact_sha256,
                "data_sha256": r.data_sha256,
                "sps": r.sps,
                "components": dict(r.components),
                "verdict": r.report.get("verdict"),
                "semantics": v.semantics,
                "from_cache": r.from_cache,
                "cache_dir": str(self.cache_dir),
            },
            "libraries": {**r.libraries, **_versions(GRADING_LIBRARIES)},
            "checks": [c.as_dict() for c in grade.checks],
            "missing_checks": self.missing_checks(),
        }

    def submitted_values(self) -> dict[str, Any]:
        """The submitted SPS, components and verdict where they are JSON numbers and a string.

        ``None`` stands for missing or unusable; the checks say why. Batch reports
        compare these with the reference.
        """
        report = self.submission.report or {}
        components = report.get("components")
        components = components if isinstance(components, dict) else {}
        verdict = report.get("verdict")
        return {
            "sps": _json_number(report.get("sps")),
            "components": {name: _json_number(components.get(name)) for name in COMPONENTS},
            "verdict": verdict if isinstance(verdict, str) else None,
        }

    def suite_properties(self, grade: Grade) -> Iterator[tuple[str, object]]:
        yield "clinaudit.score", f"{grade.score:.6f}"
        yield "clinaudit.raw_score", "none" if grade.raw_score is None else f"{grade.raw_score:.6f}"
        yield "clinaudit.profile", grade.profile
        yield "clinaudit.variant", self.variant.name
        yield "clinaudit.category", grade.category
        yield "clinaudit.invariants_ok", str(grade.invariants_ok).lower()
        yield "clinaudit.reference_sha256", self.reference.artifact_sha256
        yield "clinaudit.reference_sps", f"{self.reference.sps:.2f}"
        for name in COMPONENTS:
            yield f"clinaudit.reference.{name}", f"{self.reference.components[name]:.4f}"
        submitted = self.submitted_values()
        yield "clinaudit.submitted.sps", _text(submitted["sps"])
        for name in COMPONENTS:
            yield f"clinaudit.submitted.{name}", _text(submitted["components"][name])
        yield "clinaudit.submitted.verdict", submitted["verdict"] or "none"
        for key, value in self.options.meta:
            yield f"clinaudit.meta.{key}", value


class Results:
    """A plugin object that keeps the check result carried by each test report."""

    def __init__(self) -> None:
        self.records: dict[str, CheckRecord] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        found = CheckRecord.from_properties(report.nodeid, report.user_properties)
        if found is not None:
            self.records[report.nodeid] = found


# ------------------------------------------------------------------- test items


class CheckFailed(Exception):
    """A check's verdict, not a crash: reported as its message alone."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class GradingCollector(pytest.Collector):
    """The only collector of a grading session: one item per check."""

    def __init__(self, *, grading: GradingSession, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.grading = grading

    def collect(self) -> list[pytest.Item]:
        try:
            found = self.grading.checks
        except (TypeError, ValueError) as exc:  # a grader's hook returned something unusable
            raise self.CollectError(str(exc)) from None
        builtin = self.grading.builtin_names
        return [
            CheckItem.from_parent(self, name=check.name, check=check, builtin=check.name in builtin)
            for check in found
        ]


class CheckItem(pytest.Item):
    """One check as a test item, e.g. ``wdbc-hard::component[fgsm_robustness]``."""

    def __init__(self, *, check: checks.Check, builtin: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check
        self.builtin = builtin

    def runtest(self) -> None:
        __tracebackhide__ = True
        try:
            outcome = checks.normalize(self.check.run(), self.check)
        except AssertionError as exc:
            outcome = checks.Outcome.fail(str(exc) or f"{self.check.name} failed")
        except Exception as exc:
            if not self.builtin:
                # A grader's own check crashed: record no credit and show the traceback.
                failed = checks.Outcome.fail(f"the check raised {type(exc).__name__}: {exc}")
                self.user_properties.extend(
                    checks.record(self.check, failed, self.nodeid).properties()
                )
                raise
            outcome = checks.Outcome.fail(
                f"internal error in pytest-clinaudit while checking {self.check.name}: "
                f"{type(exc).__name__}: {submissions.shorten(str(exc), 300)}. Please report it; "
                "the check earns no credit."
            )
        result = checks.record(self.check, outcome, self.nodeid)
        self.user_properties.extend(result.properties())
        if outcome.skipped:
            pytest.skip(outcome.message)
        if not outcome.passed:
            raise CheckFailed(self._failure_text(result))

    def _failure_text(self, result: CheckRecord) -> str:
        how = {
            "credit": f"credit {result.credit:g} of weight {result.weight:g}",
            "penalty": f"deducts {result.weight * (1 - result.credit):g}",
            "info": "informational in this profile",
        }[result.kind]
        return f"{result.message}\n[{result.category}; {how}]"

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | Any:
        if isinstance(excinfo.value, CheckFailed):
            return excinfo.value.message
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.parent.name if self.parent else ''}::{self.name}"
