"""One grading session of a game report: the instance, the report, the items, the grade.

:class:`GameGradingSession` is what :meth:`~.session.GradingSession.start`
returns when ``--variant`` names a game. It has the interface the plugin and
the collector use (``variant``, ``options``, ``results``, ``checks``,
``builtin_names``, ``header``, ``finish``, ``score_document``,
``suite_properties``), so the session, the items, the score JSON and the
JUnit properties are the same machinery as an audit report's.

The instance comes from ``--clinaudit-manifest`` (its seed and secret;
otherwise the variant's default seed and the secret the cache holds for it)
and is read from the grader's cache, or built again from the secret if it is
not there; the manifest's program and data hashes, and the hash of the cached
entry (truth, evidence, weights), must be the instance's, so a cache edited
after the build is refused. Nothing a submission names is ever read but the
report itself.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_clinaudit.catalog.cache import ReferenceCache, default_cache_dir
from pytest_clinaudit.grading import checks
from pytest_clinaudit.grading import submission as submissions
from pytest_clinaudit.grading.game_checks import GameGrading, describe_truth, game_checks
from pytest_clinaudit.grading.items import Results
from pytest_clinaudit.grading.options import OptionError
from pytest_clinaudit.grading.outputs import GRADING_LIBRARIES, SCORE_FORMAT
from pytest_clinaudit.grading.scoring import Grade
from pytest_clinaudit.versions import library_versions

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.catalog.instances import GameReference
    from pytest_clinaudit.catalog.variants import Catalog
    from pytest_clinaudit.grading.options import GradingOptions
    from pytest_clinaudit.grading.submission import Submission

Progress = Callable[[str], None]


class GameGradingSession:
    """State of one game grading run, one per process (controller and each worker)."""

    def __init__(
        self,
        config: pytest.Config,
        options: GradingOptions,
        catalog: Catalog,
        variant: GameVariant,
        reference: GameReference,
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
        self.parts: dict[str, Any] = {}
        self.exit_status: int | None = None
        self.builtin_names: set[str] = set()
        self.score_json_error = ""

    @classmethod
    def start(
        cls,
        config: pytest.Config,
        options: GradingOptions,
        catalog: Catalog,
        variant: GameVariant,
        progress: Progress,
    ) -> GameGradingSession:
        """Find the instance (the manifest's seed, else the variant's) and check the manifest.

        Raises
        ------
        OptionError
            The manifest is unreadable or names another instance, the data is
            missing, or the cache cannot be written; the message says how to fix it.
        """
        from pytest_clinaudit.catalog.instances import get_game_reference
        from pytest_clinaudit.catalog.manifest import GraderManifestError, read_grader_manifest
        from pytest_clinaudit.catalog.reader import VariantError
        from pytest_clinaudit.reference.data import DataError, LoadContext
        from pytest_clinaudit.reference.game.build import GameBuildError

        cache_dir = options.cache_dir or default_cache_dir()
        manifest = None
        seed = variant.game.seed
        secret: str | None = None
        if options.manifest is not None:
            try:
                manifest = read_grader_manifest(options.manifest)
            except GraderManifestError as exc:
                raise OptionError(f"--clinaudit-manifest: {exc}") from None
            found = manifest.get("seed")
            if isinstance(found, bool) or not isinstance(found, int):
                raise OptionError(
                    f"--clinaudit-manifest: {options.manifest} holds no instance seed; it is not "
                    f"the manifest of a {variant.name} instance"
                )
            seed = found
            secret = manifest_secret(manifest, options.manifest, variant.name)
        context = LoadContext(base_dir=variant.path.parent, mimic_dir=options.mimic_dir)
        announced = False

        def report(message: str) -> None:
            nonlocal announced
            if not announced:
                progress(
                    f"clinaudit: building {variant.name} instance {seed} (first run with these "
                    f"library versions; cached in {cache_dir})"
                )
                announced = True
            progress(f"clinaudit:   {message}")

        try:
            reference = get_game_reference(
                variant,
                seed,
                secret=secret,
                cache=ReferenceCache(cache_dir),
                context=context,
                progress=report,
            )
        except (DataError, VariantError, GameBuildError) as exc:
            raise OptionError(f"cannot build {variant.name} instance {seed}: {exc}") from None
        except OSError as exc:
            raise OptionError(
                f"the reference cache {cache_dir} is not usable ({exc.strerror or exc}); "
                "pass --clinaudit-cache-dir DIR with a writable directory"
            ) from None
        if manifest is not None:
            assert options.manifest is not None
            check_manifest(manifest, options.manifest, variant.name, reference)
        return cls(config, options, catalog, variant, reference, cache_dir)

    @functools.cached_property
    def submission(self) -> Submission:
        return submissions.load(self.options.submission, max_bytes=self.options.max_bytes)

    @functools.cached_property
    def grading(self) -> GameGrading:
        return GameGrading(
            self.variant,
            self.reference,
            self.submission,
            self.options.profile,
            ReferenceCache(self.cache_dir),
        )

    @functools.cached_property
    def checks(self) -> list[checks.Check]:
        """The game's checks, then those added by ``pytest_clinaudit_add_checks`` hooks."""
        found = game_checks(self.grading)
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

    def header(self) -> list[str]:
        r, v, o = self.reference, self.variant, self.options
        state = "read from the cache" if r.from_cache else "built now and cached"
        return [
            f"clinaudit: game {v.name} ({v.semantics}) from {v.path}; profile {o.profile}",
            f"clinaudit: instance {r.seed} (attempt {r.attempt}), {state}; truth: "
            + describe_truth(r),
            f"clinaudit: cache {self.cache_dir}; submission {o.submission}"
            + ("" if o.manifest is None else f"; manifest {o.manifest} (instance matches)"),
        ]

    def finish(self) -> Grade:
        from pytest_clinaudit.grading.game_scoring import compute

        truth = {name: self.reference.kinds(name) for name in self.reference.names}
        rules = self.grading.rules
        self.grade, self.parts = compute(
            self.results.records.values(),
            self.options.profile,
            truth=truth,
            kinds=rules.kinds,
            score=self.variant.game.score,
            rules=rules,
        )
        return self.grade

    def missing_checks(self) -> list[str] | None:
        try:
            expected = [f"{self.variant.name}::{check.name}" for check in self.checks]
        except Exception:  # noqa: BLE001 - the collection error already told the user
            return None
        return [test_id for test_id in expected if test_id not in self.results.records]

    def submitted(self) -> dict[str, Any]:
        """The report's flags per model, as the grader read them (empty when unreadable)."""
        decisions = self.grading.decisions
        return {name: sorted(kinds) for name, kinds in decisions.flags.items()}

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
            "semantics": v.semantics,
            "category": grade.category,
            "invariants_ok": grade.invariants_ok,
            "fail_under": o.fail_under,
            "exit_status": self.exit_status,
            "manifest": None if o.manifest is None else str(o.manifest),
            "meta": dict(o.meta),
            "submission": self.submission.summary(),
            "submitted": self.submitted(),
            "game": {
                "seed": r.seed,
                "attempt": r.attempt,
                "instance": r.instance_id,
                "data_sha256": r.data_sha256,
                "truth": r.truth,
                "evidence": r.evidence,
                "parts": self.parts,
                "from_cache": r.from_cache,
                "cache_dir": str(self.cache_dir),
            },
            "libraries": {**r.libraries, **library_versions(GRADING_LIBRARIES)},
            "checks": [c.as_dict() for c in grade.checks],
            "missing_checks": self.missing_checks(),
        }

    def suite_properties(self, grade: Grade) -> Iterator[tuple[str, object]]:
        r = self.reference
        yield "clinaudit.score", f"{grade.score:.6f}"
        yield "clinaudit.raw_score", "none" if grade.raw_score is None else f"{grade.raw_score:.6f}"
        yield "clinaudit.profile", grade.profile
        yield "clinaudit.variant", self.variant.name
        yield "clinaudit.semantics", self.variant.semantics
        yield "clinaudit.category", grade.category
        yield "clinaudit.invariants_ok", str(grade.invariants_ok).lower()
        yield "clinaudit.reference_sha256", r.instance_id
        yield "clinaudit.game.seed", str(r.seed)
        for part in ("detection", "localization", "evidence"):
            value = self.parts.get(part)
            yield f"clinaudit.game.{part}", "none" if value is None else f"{value:.6f}"
        for count in ("tp", "fp", "fn"):
            yield f"clinaudit.game.{count}", str(self.parts.get(count, 0))
        for key, value in self.options.meta:
            yield f"clinaudit.meta.{key}", value


def manifest_secret(manifest: dict[str, Any], path: Path, variant: str) -> str:
    """The instance secret a game manifest records; an ``OptionError`` naming the fix if none."""
    from pytest_clinaudit.reference.game.draw import check_secret

    try:
        return check_secret(manifest.get("secret"))
    except ValueError:
        raise OptionError(
            f"--clinaudit-manifest: {path} records no instance secret (or a damaged one); "
            f"it is not the manifest of a {variant} instance built by this version. Rebuild "
            "the workspace with `clinaudit build`."
        ) from None


def check_manifest(
    manifest: dict[str, Any], path: Path, variant: str, reference: GameReference
) -> None:
    """Refuse to grade when the manifest describes another instance than the one graded."""
    problems = []
    if manifest.get("variant") != variant:
        problems.append(
            f"the workspace was built for {manifest.get('variant')!r}, but --variant is {variant!r}"
        )
    elif manifest.get("data_sha256") != reference.data_sha256:
        problems.append("its data differs from what this environment builds")
    elif manifest.get("programs") != reference.programs:
        moved = {
            name: f"{version} -> {reference.libraries.get(name)}"
            for name, version in (manifest.get("libraries") or {}).items()
            if reference.libraries.get(name) != version
        }
        why = ", ".join(f"{k} {v}" for k, v in moved.items()) or "the recipe changed"
        problems.append(f"its models differ from the ones this environment builds ({why})")
    elif manifest.get("entry_sha256") != reference.entry_sha256:
        problems.append(
            "the grader's cached instance (its truth, evidence or weights) is not the one the "
            "workspace was built with: the cache was changed after the build. Grade with a "
            "fresh --clinaudit-cache-dir, which rebuilds the instance from the manifest"
        )
    if problems:
        raise OptionError(
            f"--clinaudit-manifest: {path}: {problems[0]}. Grade where the workspace was built, "
            "or rebuild it here with `clinaudit build`."
        )
