"""Variant files: loading, strict validation, and the catalog of known variants.

A variant is one TOML file (see ``variants/*.toml``): name and aliases, the
dataset, the model recipe, every attack parameter, the SPS weights, the verdict
thresholds and the grading tolerances. The loader accepts exactly the keys the
records below declare: an unknown key, a missing key or a value of the wrong
type is a :class:`VariantError` naming the file and the key.

Loading needs only the standard library (and ``tomli`` on Python 3.10), so the
plugin can list variants without importing NumPy.
"""

from __future__ import annotations

import dataclasses
import functools
import typing
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from pytest_clinaudit.catalog.games import GameVariant, is_game_document, read_game_variant
from pytest_clinaudit.catalog.reader import TableReader as _Reader
from pytest_clinaudit.catalog.reader import VariantError as VariantError
from pytest_clinaudit.catalog.reader import describe_value as _describe
from pytest_clinaudit.catalog.reader import read_dataset as _read_dataset
from pytest_clinaudit.catalog.reader import read_toml as _read_toml
from pytest_clinaudit.reference.attacks.params import (
    ALL_SEMANTICS,
    RETIRED_SEMANTICS,
    SEMANTICS,
    SEMANTICS_WHITE_BOX,
    STRONG_PGD_MIN_RESTARTS,
    STRONG_PGD_MIN_STEPS,
    AuditParams,
    BoundaryParams,
    CalibrationParams,
    FGSMParams,
    MembershipParams,
    VerdictThresholds,
    Weights,
    semantics_of,
)
from pytest_clinaudit.reference.data import LoadContext
from pytest_clinaudit.reference.models.mlp import MLPRecipe
from pytest_clinaudit.reference.models.recipes import (
    ESTIMATORS,
    Augmentation,
    Calibration,
    ModelRecipe,
    RecipeError,
)


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """How close a submission must be to the reference."""

    sps: float
    """Full SPS credit within this absolute difference (SPS points)."""
    sps_partial: float
    """Half SPS credit (profile metr) within this difference."""
    component: float
    """A component passes within this absolute difference."""
    aggregation: float
    """Strict: the submitted SPS must equal the weighted sum of the submitted components."""


@dataclasses.dataclass(frozen=True)
class Variant:
    """One gradeable task variant, fully described by its file."""

    name: str
    aliases: tuple[str, ...]
    description: str
    semantics: str
    paper_reference_sps: float | None
    dataset: Any
    model: ModelRecipe | MLPRecipe
    params: AuditParams
    tolerance: Tolerance
    path: Path

    is_game = False
    """An audit-task variant; games are :class:`~.games.GameVariant`."""

    @property
    def is_torch(self) -> bool:
        """Whether the model is a torch MLP, handed out as ``model.pt2`` (SPEC §7)."""
        return isinstance(self.model, MLPRecipe)

    @property
    def context(self) -> LoadContext:
        return LoadContext(base_dir=self.path.parent)

    def summary(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "dataset": type(self.dataset).__name__,
            "recipe": self.model.describe(),
            "paper_reference_sps": self.paper_reference_sps,
            "file": str(self.path),
        }


AnyVariant = Variant | GameVariant
"""What a variant file holds: an audit-task variant or an auditing game."""


# ---------------------------------------------------------------- strict loading

_TOP_KEYS = {
    "name",
    "aliases",
    "description",
    "semantics",
    "paper_reference_sps",
    "dataset",
    "model",
    "fgsm",
    "membership_inference",
    "calibration",
    "boundary",
    "weights",
    "verdict",
    "tolerance",
}
_OPTIONAL_TOP = {"paper_reference_sps"}


def _positive(reader: _Reader, where: str, **values: float) -> None:
    for key, value in values.items():
        if not value > 0:
            raise reader.error(f"{where}.{key}", f"must be positive, got {value!r}")


def _check_ranges(reader: _Reader, params: AuditParams, tolerance: Tolerance) -> None:
    """Values a record's types cannot express: sizes, probabilities, sums."""
    f, m, c, b = params.fgsm, params.membership_inference, params.calibration, params.boundary
    _positive(reader, "fgsm", n_samples=f.n_samples)
    _check_strong_pgd(reader, f)
    _positive(reader, "fgsm.surrogate", C=f.surrogate.C, max_iter=f.surrogate.max_iter)
    _positive(
        reader,
        "membership_inference",
        pool_cap=m.pool_cap,
        rounds=m.rounds,
        eval_cap=m.eval_cap,
        shadow_n_estimators=m.shadow_n_estimators,
        shadow_max_depth=m.shadow_max_depth,
        attack_n_estimators=m.attack_n_estimators,
    )
    if not 0 < m.in_fraction < 1:
        raise reader.error(
            "membership_inference.in_fraction", f"must lie in (0, 1), got {m.in_fraction}"
        )
    if not 0 <= m.threshold <= 1 or not 0 <= f.single_class_score <= 1:
        raise reader.error("membership_inference.threshold", "probabilities must lie in [0, 1]")
    _positive(reader, "calibration", n_bins=c.n_bins, ece_scale=c.ece_scale)
    _positive(
        reader, "boundary", n_samples=b.n_samples, step_size=b.step_size, max_steps=b.max_steps
    )
    weights = params.weights.as_tuple()
    if any(w < 0 for w in weights) or abs(sum(weights) - 1.0) > 1e-9:
        raise reader.error("weights", f"must be non-negative and sum to 1, got {list(weights)}")
    if not params.verdict.conditional <= params.verdict.production:
        raise reader.error("verdict", "conditional must not exceed production")
    _positive(
        reader,
        "tolerance",
        sps=tolerance.sps,
        sps_partial=tolerance.sps_partial,
        component=tolerance.component,
        aggregation=tolerance.aggregation,
    )
    if tolerance.sps_partial < tolerance.sps:
        raise reader.error("tolerance.sps_partial", "must be at least tolerance.sps")


def _check_strong_pgd(reader: _Reader, f: FGSMParams) -> None:
    """SPEC §7.3: white-box variants run the strong PGD, >= 50 steps and >= 5 restarts."""
    for key, value, least in (
        ("pgd_steps", f.pgd_steps, STRONG_PGD_MIN_STEPS),
        ("pgd_restarts", f.pgd_restarts, STRONG_PGD_MIN_RESTARTS),
    ):
        if value is None:
            if f.white_box:
                raise reader.error(
                    "fgsm",
                    f"missing key {key!r} (white-box FGSM reports the strong PGD of "
                    f"SPEC §7.3: at least {least})",
                )
        elif f.white_box and value < least:
            raise reader.error(f"fgsm.{key}", f"must be at least {least} (SPEC §7.3), got {value}")
        else:
            _positive(reader, "fgsm", **{key: value})
    if (f.pgd_steps is None) != (f.pgd_restarts is None):
        raise reader.error("fgsm", "pgd_steps and pgd_restarts go together: set both or neither")


def _read_model(reader: _Reader, table: Any) -> ModelRecipe | MLPRecipe:
    if not isinstance(table, dict):
        raise reader.error("model", f"expected a table, got {_describe(table)}")
    if table.get("estimator") == "mlp":
        try:
            recipe: MLPRecipe = reader.record(MLPRecipe, table, "model")
        except RecipeError as exc:
            raise reader.error("model", str(exc)) from None
        return recipe
    reader.check_keys(
        table, "model", {"estimator", "scaler", "params"}, {"calibration", "augmentation"}
    )
    estimator = reader.value(table, "estimator", Literal[ESTIMATORS], "model")
    scaler = reader.value(table, "scaler", bool, "model")
    params = table["params"]
    if not isinstance(params, dict):
        raise reader.error("model.params", f"expected a table, got {_describe(params)}")
    for key, value in params.items():
        if not isinstance(value, (bool, int, float, str)):
            raise reader.error(f"model.params.{key}", f"expected a scalar, got {_describe(value)}")
    calibration = augmentation = None
    if "calibration" in table:
        calibration = reader.value(table, "calibration", Calibration, "model")
        _positive(reader, "model.calibration", cv=calibration.cv)
    if "augmentation" in table:
        augmentation = reader.value(table, "augmentation", Augmentation, "model")
        _positive(reader, "model.augmentation", epsilon=augmentation.epsilon)
    return ModelRecipe.create(
        estimator, params, scaler=scaler, calibration=calibration, augmentation=augmentation
    )


_PARAM_SECTIONS = ("fgsm", "membership_inference", "calibration", "boundary", "weights", "verdict")


def _read_params(reader: _Reader, document: Mapping[str, Any]) -> AuditParams:
    return AuditParams(
        fgsm=reader.value(document, "fgsm", FGSMParams, ""),
        membership_inference=reader.value(document, "membership_inference", MembershipParams, ""),
        calibration=reader.value(document, "calibration", CalibrationParams, ""),
        boundary=reader.value(document, "boundary", BoundaryParams, ""),
        weights=reader.value(document, "weights", Weights, ""),
        verdict=reader.value(document, "verdict", VerdictThresholds, ""),
    )


def load_audit_params(path: Path | str) -> AuditParams:
    """Attack parameters, weights and verdict thresholds from a variant-like file.

    Either a whole variant file (its parameters are used) or a file holding just
    the sections ``[fgsm]`` (with ``[fgsm.surrogate]``), ``[membership_inference]``,
    ``[calibration]``, ``[boundary]``, ``[weights]`` and ``[verdict]``.
    """
    path = Path(path)
    document = _read_toml(path)
    if "name" in document:
        variant = load_variant(path)
        if variant.is_game:
            raise VariantError(f"{path}: a game variant has no audit parameters")
        assert isinstance(variant, Variant)
        return variant.params
    reader = _Reader(path)
    reader.check_keys(document, "top level", _PARAM_SECTIONS)
    params = _read_params(reader, document)
    _check_ranges(reader, params, Tolerance(5.0, 10.0, 0.1, 0.01))
    return params


def load_variant(path: Path | str) -> AnyVariant:
    """Read and validate one variant file: an audit-task variant or a game.

    A file is read once per process while it stays unchanged (same size and
    modification time): a fork worker of ``grade-many`` reads the catalog once
    for all the sessions it runs. Variants are frozen, so sharing them is safe.
    """
    path = Path(path)
    try:
        info = path.stat()
    except OSError:
        return _read_variant(path)  # says why it cannot be read
    return _read_variant_once(path, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=256)
def _read_variant_once(path: Path, mtime_ns: int, size: int) -> AnyVariant:
    return _read_variant(path)


def _read_variant(path: Path) -> AnyVariant:
    reader = _Reader(path)
    document = _read_toml(path)
    if is_game_document(document):
        return read_game_variant(reader, document, path)
    reader.check_keys(document, "top level", _TOP_KEYS - _OPTIONAL_TOP, _OPTIONAL_TOP)
    aliases = document["aliases"]
    if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
        raise reader.error("aliases", f"expected an array of strings, got {_describe(aliases)}")
    semantics = reader.value(document, "semantics", str, "")
    if semantics in RETIRED_SEMANTICS:
        raise reader.error(
            "semantics",
            f"{semantics!r} is retired: {RETIRED_SEMANTICS[semantics]}; white-box variants "
            f"are {SEMANTICS_WHITE_BOX!r} now (set fgsm.pgd_steps and fgsm.pgd_restarts too)",
        )
    if semantics not in ALL_SEMANTICS:
        raise reader.error(
            "semantics",
            f"this version implements {SEMANTICS!r}, got {semantics!r} (white-box variants, "
            f"with fgsm.gradient = 'model', are {SEMANTICS_WHITE_BOX!r})",
        )
    params = _read_params(reader, document)
    if semantics != semantics_of(params.fgsm):
        raise reader.error(
            "semantics",
            f"fgsm.gradient = {params.fgsm.gradient or 'surrogate'!r} is "
            f"{semantics_of(params.fgsm)!r}, got {semantics!r}",
        )
    tolerance = reader.value(document, "tolerance", Tolerance, "")
    _check_ranges(reader, params, tolerance)
    paper = document.get("paper_reference_sps")
    return Variant(
        name=reader.value(document, "name", str, ""),
        aliases=tuple(aliases),
        description=reader.value(document, "description", str, ""),
        semantics=semantics,
        paper_reference_sps=None
        if paper is None
        else reader.value(document, "paper_reference_sps", float, ""),
        dataset=_read_dataset(reader, document["dataset"]),
        model=_read_model(reader, document["model"]),
        params=params,
        tolerance=tolerance,
        path=path,
    )


# ---------------------------------------------------------------------- catalog


def builtin_variant_files() -> list[Path]:
    """The variant files shipped with the package, sorted by name."""
    root = resources.files("pytest_clinaudit.variants")
    return sorted(
        (Path(str(entry)) for entry in root.iterdir() if entry.name.endswith(".toml")),
        key=lambda p: p.name,
    )


class Catalog:
    """Variants and games by name and alias; later registrations may not shadow earlier ones.

    Iterating gives the audit-task variants, :meth:`games` the games; :meth:`get`
    finds an audit-task variant and :meth:`find` either kind.
    """

    def __init__(self, variants: Iterable[AnyVariant] = ()) -> None:
        self._variants: dict[str, AnyVariant] = {}
        self._names: dict[str, str] = {}
        for variant in variants:
            self.add(variant)

    def add(self, variant: AnyVariant) -> None:
        for key in (variant.name, *variant.aliases):
            if key in self._names:
                other = self._variants[self._names[key]]
                raise VariantError(
                    f"{variant.path}: the name {key!r} is already taken by "
                    f"{other.name} ({other.path})"
                )
        self._variants[variant.name] = variant
        for key in (variant.name, *variant.aliases):
            self._names[key] = variant.name

    def add_directory(self, directory: Path) -> list[AnyVariant]:
        if not directory.is_dir():
            raise VariantError(f"{directory}: not a directory of variant files")
        added = [load_variant(path) for path in sorted(directory.glob("*.toml"))]
        for variant in added:
            self.add(variant)
        return added

    def names(self) -> list[str]:
        return list(self._variants)

    def choices(self) -> list[str]:
        """Every accepted spelling: names, then aliases."""
        return list(self._names)

    def __iter__(self) -> typing.Iterator[Variant]:
        return (v for v in self._variants.values() if isinstance(v, Variant))

    def games(self) -> list[GameVariant]:
        return [v for v in self._variants.values() if isinstance(v, GameVariant)]

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def find(self, name: str) -> AnyVariant:
        """The variant or game called ``name`` (or one of its aliases)."""
        try:
            return self._variants[self._names[name]]
        except KeyError:
            valid = ", ".join(
                f"{v.name} ({', '.join(v.aliases)})" if v.aliases else v.name
                for v in self._variants.values()
            )
            raise VariantError(f"unknown variant {name!r}; valid variants: {valid}") from None

    def get(self, name: str) -> Variant:
        """The audit-task variant called ``name``; a game's name is an error saying so."""
        found = self.find(name)
        if not isinstance(found, Variant):
            raise VariantError(
                f"{found.name} is an auditing game ({found.semantics}), not an audit-task "
                "variant: build an instance with `clinaudit build --variant "
                f"{found.name} --seed N` and grade its report with pytest"
            )
        return found


def default_catalog(extra_dirs: Iterable[Path] = ()) -> Catalog:
    """The shipped variants plus any found in ``extra_dirs``."""
    catalog = Catalog(load_variant(path) for path in builtin_variant_files())
    for directory in extra_dirs:
        catalog.add_directory(Path(directory))
    return catalog
