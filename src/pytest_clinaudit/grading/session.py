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

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_clinaudit.catalog.cache import ReferenceCache, default_cache_dir
from pytest_clinaudit.catalog.variants import Catalog, Variant, VariantError, default_catalog
from pytest_clinaudit.grading import builtin, checks, outputs, scoring
from pytest_clinaudit.grading import submission as submissions
from pytest_clinaudit.grading.items import Results
from pytest_clinaudit.grading.options import OptionError
from pytest_clinaudit.grading.scoring import Grade

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.references import Reference
    from pytest_clinaudit.grading.game_session import GameGradingSession
    from pytest_clinaudit.grading.options import GradingOptions
    from pytest_clinaudit.grading.submission import Submission

Progress = Callable[[str], None]


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
    ) -> GradingSession | GameGradingSession:
        """Resolve the variant and fetch its reference (a game's: its instance).

        Raises
        ------
        OptionError
            The variant is unknown, a variant file is invalid, the variant's data is
            missing, or the cache cannot be written; the message says how to fix it.
        """
        from pytest_clinaudit.catalog.references import get_reference
        from pytest_clinaudit.reference.data import DataError, LoadContext

        try:
            catalog = default_catalog(options.variants_dirs)
            config.hook.pytest_clinaudit_register_variants(config=config, catalog=catalog)
            found = catalog.find(options.variant)
        except VariantError as exc:
            raise OptionError(f"--variant: {exc}") from None
        if not isinstance(found, Variant):
            from pytest_clinaudit.grading.game_session import GameGradingSession

            return GameGradingSession.start(config, options, catalog, found, progress)
        variant = found
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
            from pytest_clinaudit.catalog.manifest import (
                GraderManifestError,
                check_reference_matches,
                read_grader_manifest,
            )

            try:
                manifest = read_grader_manifest(options.manifest)
                check_reference_matches(manifest, options.manifest, variant.name, reference)
            except GraderManifestError as exc:
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
            cache=ReferenceCache(self.cache_dir),
        )

    @functools.cached_property
    def checks(self) -> list[checks.Check]:
        """Built-in checks, then those added by ``pytest_clinaudit_add_checks`` hooks."""
        found = builtin.builtin_checks(self.grading)
        builtin_names = {c.name for c in found}
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
                        "pytest_clinaudit.api.Check objects"
                    )
                added.append(check)
        names = [c.name for c in added]
        clashes = sorted({n for n in names if n in builtin_names or names.count(n) > 1})
        if clashes:
            raise ValueError(
                f"pytest_clinaudit_add_checks: check name(s) {', '.join(clashes)} used twice"
            )
        self.builtin_names = builtin_names
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
        return outputs.score_document(
            grade,
            variant=self.variant,
            reference=self.reference,
            submission=self.submission,
            options=self.options,
            cache_dir=self.cache_dir,
            exit_status=self.exit_status,
            missing_checks=self.missing_checks(),
        )

    def suite_properties(self, grade: Grade) -> Iterator[tuple[str, object]]:
        return outputs.suite_properties(
            grade,
            variant=self.variant,
            reference=self.reference,
            submission=self.submission,
            meta=self.options.meta,
        )
