"""Game instances as the grader knows them: built once, cached as numbers, read back cheaply.

An instance (a game variant, an instance seed that names it, and the secret
everything about it is drawn from: :mod:`pytest_clinaudit.reference.game.draw`)
is what a game report is graded against, as a reference is for an audit report.
The cache keeps, per variant and seed, the secret of the instance first built
under that name (``game-secrets``), so that building and grading seed N in one
environment meet on one instance; a grader's manifest carries its instance's
secret, and an instance is keyed by it. Building one trains
and measures a zoo (:func:`pytest_clinaudit.reference.game.build.build_instance`,
a minute or two); the cache then keeps, as JSON, everything grading needs:
the ground truth, the reference's evidence numbers, every defining
measurement, each model's training rows and its weights (numbers, never a
pickle), and the hashes of its ``model.pt2`` and of the data. A warm lookup
reads one file and imports nothing numeric.

The test rows on which a claimed backdoor trigger is tried are kept once per
dataset (``game-rows``), not once per instance, with their labels, on which the
hard tier's grader measures a described group (a rows entry written before the
labels were kept still serves game-v1, and is completed from the data when a
game-v2 instance needs it). A ``model.pt2`` is made again
from its cached weights when a workspace is written (:func:`programs`), and
its hash must equal the one recorded at the build.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pytest_clinaudit import versions
from pytest_clinaudit.catalog.cache import ReferenceCache, cache_key, canonical_json
from pytest_clinaudit.catalog.reader import VariantError
from pytest_clinaudit.reference.game.settings import (
    KINDS,
    MEASURED,
    SEMANTICS_GAME_V2,
    GameSettings,
)

if TYPE_CHECKING:
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.reference.data import Dataset, LoadContext
    from pytest_clinaudit.reference.game.build import Instance

Progress = Callable[[str], None]

LIBRARIES = ("pytest-clinaudit", "numpy", "scipy", "scikit-learn", "torch")
"""What can move an instance: training and measuring run on these."""
TORCH_EXTRA = "pip install 'pytest-clinaudit[torch]'"


def _quiet(_: str) -> None:
    pass


def instance_libraries() -> dict[str, str]:
    return versions.library_versions(LIBRARIES, python=True)


@dataclasses.dataclass(frozen=True)
class GameReference:
    """What the grader knows of one instance (everything but the programs themselves).

    Attributes
    ----------
    truth
        Model name -> ``{"kind": str | None, "direction", "subgroup", "feature",
        "value"}`` (the keys its kind localizes), in name order.
    evidence
        Model name -> the reference's ``pgd_auroc``, ``loss_attack_auc``, ``ece``.
    weights
        Model name -> its network's numbers (``Weights`` of
        :mod:`pytest_clinaudit.reference.game.network`, as JSON), for testing claims
        without torch.
    programs
        Model name -> sha256 of its ``model.pt2``.
    """

    variant: str
    seed: int
    secret: str
    """What the instance was drawn from (grader-side only)."""
    attempt: int
    truth: dict[str, dict[str, Any]]
    evidence: dict[str, dict[str, float]]
    measurements: dict[str, Any]
    rows: dict[str, list[int]]
    weights: dict[str, Any]
    programs: dict[str, str]
    data_sha256: str
    rows_key: str
    """The cache key of the test rows and the flagging thresholds (``game-rows``)."""
    libraries: dict[str, str]
    seconds: dict[str, float]
    rejected: list[list[str]]
    from_cache: bool
    base_rows: list[int] = dataclasses.field(default_factory=list)
    """The rows of the shared base network every model was fine-tuned from (empty: none)."""
    trained: dict[str, int] = dataclasses.field(default_factory=dict)
    """Model name -> the attempt that trained it (``retrain = "ambiguous"`` keeps a zoo's
    models from earlier attempts beside one trained again; empty in entries from before)."""
    entry_sha256: str = ""
    """sha256 of the cached entry (truth, evidence, measurements, rows, weights, program
    hashes) as read: the build records it in the manifest, and grading refuses a cache whose
    entry no longer hashes so."""

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.truth)

    def carriers(self) -> dict[str, tuple[str, ...]]:
        """Kind -> every model that carries it, in name order: one in game-v1, where kinds are
        distinct; any number in game-v2, where they may repeat."""
        found: dict[str, tuple[str, ...]] = {}
        for name, entry in self.truth.items():
            for kind in kinds_of(entry):
                found[kind] = (*found.get(kind, ()), name)
        return found

    def pairs(self) -> set[tuple[str, str]]:
        """The ground truth as (model, kind) pairs, one per defect (a hard-tier model may
        carry two)."""
        return {(name, kind) for name, entry in self.truth.items() for kind in kinds_of(entry)}

    def kinds(self, model: str) -> tuple[str, ...]:
        """The kinds ``model`` carries (empty: sound)."""
        return kinds_of(self.truth[model])

    @property
    def instance_id(self) -> str:
        """The manifest's and the score's name of the instance: its program hashes' hash."""
        import hashlib

        joined = ",".join(f"{name}:{sha}" for name, sha in sorted(self.programs.items()))
        return hashlib.sha256(joined.encode()).hexdigest()


def require_torch(variant: GameVariant) -> None:
    try:
        import torch  # noqa: F401 - building an instance imports it anyway
    except ImportError:
        raise VariantError(
            f"{variant.name} is a game of torch models and torch is not installed: {TORCH_EXTRA}"
        ) from None


def _payload(
    variant: GameVariant,
    seed: int,
    secret: str,
    context: LoadContext,
    libraries: dict[str, str],
) -> dict[str, Any]:
    return {
        "kind": "game",
        "semantics": variant.semantics,
        "measured": MEASURED,
        "game": recipe(variant.game),
        "dataset": variant.dataset.fingerprint(context),
        "seed": seed,
        "secret": secret,
        "libraries": libraries,
    }


_LATER: tuple[tuple[tuple[str, ...], Any], ...] = (
    (("hard",), None),
    (("hard", "group_excess"), 0.0),
    (("hard", "reverse_up"), ()),
    (("hard", "decoys"), ()),
    (("hard", "unreached"), 0.0),
    (("hard", "group_auroc"), 0.0),
    (("decoy",), None),
    (("decoy", "patients"), None),
    (("tolerance", "top_decile_gap"), None),
    (("miscalibrated", "overconfident_share"), None),
    (("retrain",), "zoo"),
    (("alone",), 1),
)
"""Settings added after instances were cached, by their path in :func:`recipe`'s tables,
and the value that leaves them out (what builds did before them)."""


def recipe(settings: GameSettings) -> dict[str, Any]:
    """The settings as the cache key and the manifest's check see them. Later additions
    (the hard tier's and its decoys, sound decoys, a miscalibration's direction share, what
    a redraw retrains and how often) are left out where a variant leaves them as builds had
    them before, so that adding them changed no other instance's key."""
    found = dataclasses.asdict(settings)
    for (*tables, key), unset in _LATER:
        table: Any = found
        for name in tables:
            table = table.get(name) if isinstance(table, dict) else None
        if isinstance(table, dict) and table[key] == unset:
            del table[key]
    return found


def _secret_key(variant: GameVariant, seed: int) -> str:
    return cache_key({"kind": "game-secret", "variant": variant.name, "seed": seed})


def instance_secret(
    variant: GameVariant, seed: int, cache: ReferenceCache, *, given: str | None = None
) -> str:
    """The secret of ``variant``'s instance ``seed`` in this cache: the one recorded when it
    was first built here, or else ``given`` (a manifest's) or a fresh one from the operating
    system, recorded now (without a cache directory, ``given`` or a fresh one every call).

    With ``given``, ``given`` is returned: a manifest names its own instance, and the record
    only says which instance the bare seed names here (the first one built)."""
    from pytest_clinaudit.reference.game.draw import check_secret, new_secret

    key = _secret_key(variant, seed)

    def recorded() -> str | None:
        found = cache.get("game-secrets", key)
        if found is None:
            return None
        try:
            return check_secret(found.get("secret"))
        except ValueError:
            return None  # a damaged record: a new instance, as if none were kept

    found = recorded()
    if found is not None:
        return found if given is None else given
    with cache.lock(key):
        found = recorded()
        if found is None:
            found = new_secret() if given is None else check_secret(given)
            cache.put(
                "game-secrets",
                key,
                {"secret": found},
                payload={"variant": variant.name, "seed": seed},
            )
    return found if given is None else given


def kinds_of(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The kinds a truth entry's model carries: its ``kind`` and, in the hard tier, its
    ``second`` (written only when there is one, so that every other entry reads as before)."""
    return tuple(entry[key] for key in ("kind", "second") if entry.get(key))


def _truth(instance: Instance) -> dict[str, dict[str, Any]]:
    truth: dict[str, dict[str, Any]] = {}
    for planted in instance.plan.models:
        entry: dict[str, Any] = {"kind": planted.kind}
        if planted.second is not None:
            entry["second"] = planted.second
        if planted.group is not None:  # the hard tier (SPEC §9), one field per kind
            entry["where"] = planted.group.to_json()["where"]
        if planted.region is not None:
            entry["region"] = planted.region.to_json()["where"]
        if planted.setting is not None:
            entry["trigger"] = [{"column": c, "value": v} for c, v in planted.setting]
        if planted.decoy is not None:  # a sound decoy's variation, for the record
            entry["decoy"] = planted.decoy
        if planted.alarm is not None:
            entry["alarm"] = [{"column": c, "value": v} for c, v in planted.alarm]
        if planted.unreached is not None:
            entry["unreached"] = planted.unreached.to_json()["where"]
        if planted.tail is not None:
            entry["direction"] = "overconfident"
            entry["tail"] = planted.tail
        elif planted.kind == "miscalibrated":
            entry["direction"] = planted.direction
            entry["factor"] = planted.factor
        elif planted.kind in ("fragile", "leaky") and planted.strength is not None:
            entry["strength"] = planted.strength
        if planted.target is not None:
            entry["target"] = planted.target  # the evidence number it was planted to
        elif planted.kind == "shortcut":
            entry["feature"] = None  # filled in by the caller: the variant's column
        elif planted.kind == "subgroup" and planted.subgroup is not None:
            entry["subgroup"] = planted.subgroup.name
        elif planted.kind == "backdoor" and planted.trigger is not None:
            entry["feature"] = planted.trigger.feature
            entry["value"] = planted.trigger.value
        truth[planted.name] = entry
    return truth


def _entry(
    variant: GameVariant, instance: Instance, data: Dataset, rows_key: str
) -> dict[str, Any]:
    import hashlib

    truth = _truth(instance)
    for entry in truth.values():
        if entry["kind"] == "shortcut":
            entry["feature"] = variant.game.shortcut.column
    for model in instance.models:
        if model.probed is not None:  # where its probe stopped the planting
            epochs, read = model.probed
            truth[model.name]["probe"] = {"epochs": epochs, "read": read}
    return {
        "variant": variant.name,
        "seed": instance.seed,
        "secret": instance.secret,
        "attempt": instance.attempt,
        "trained": {m.name: m.attempt for m in instance.models},
        "truth": truth,
        "evidence": instance.evidence,
        "measurements": instance.measurements,
        "rows": {m.name: [int(i) for i in m.rows] for m in instance.models},
        "base_rows": [] if instance.base_rows is None else [int(i) for i in instance.base_rows],
        "weights": {m.name: m.weights.as_json() for m in instance.models},
        "programs": {m.name: hashlib.sha256(m.program).hexdigest() for m in instance.models},
        "data_sha256": data.sha256,
        "rows_key": rows_key,
        "seconds": instance.seconds,
        "rejected": [list(r) for r in instance.rejected],
    }


def _rows_entry(data: Dataset, share: float, clear: float) -> tuple[str, dict[str, Any]]:
    import numpy as np

    from pytest_clinaudit.reference.game.claims import Thresholds

    value = {
        "data_sha256": data.sha256,
        "columns": list(data.feature_names),
        "thresholds": Thresholds(share, clear).as_json(),
        # JSON has no NaN: a missing cell is null, which reads back as NaN (test_rows).
        "X_test": [
            [None if math.isnan(v) else v for v in row]
            for row in np.asarray(data.X_test, dtype=np.float64).tolist()
        ],
        # The labels, for the hard tier's group measurements (test_labels). The key below
        # leaves them out: every rows entry keeps its key, with or without them.
        "y_test": [int(v) for v in np.asarray(data.y_test).tolist()],
    }
    key = {"kind": "game-rows", "data_sha256": data.sha256, "share": share, "clear": clear}
    return cache_key(key), value


VOLATILE = ("seconds",)
"""Entry fields that a rebuild of the same instance may change (its timings): not hashed."""


def entry_sha256(entry: dict[str, Any]) -> str:
    """The content hash of an instance's cache entry (:attr:`GameReference.entry_sha256`): all
    of it but its timings, so a rebuild from the manifest hashes as the first build did."""
    import hashlib

    kept = {key: value for key, value in entry.items() if key not in VOLATILE}
    return hashlib.sha256(canonical_json(kept).encode()).hexdigest()


def _reference(
    entry: dict[str, Any], libraries: dict[str, str], *, from_cache: bool
) -> GameReference:
    return GameReference(
        variant=entry["variant"],
        seed=entry["seed"],
        secret=entry["secret"],
        attempt=entry["attempt"],
        truth=entry["truth"],
        evidence=entry["evidence"],
        measurements=entry["measurements"],
        rows=entry["rows"],
        weights=entry["weights"],
        programs=entry["programs"],
        data_sha256=entry["data_sha256"],
        rows_key=entry["rows_key"],
        libraries=libraries,
        seconds=entry["seconds"],
        rejected=entry["rejected"],
        from_cache=from_cache,
        base_rows=entry.get("base_rows", []),
        trained=entry.get("trained", {}),
        entry_sha256=entry_sha256(entry),
    )


def build_game_reference(
    variant: GameVariant,
    seed: int,
    *,
    cache: ReferenceCache,
    secret: str | None = None,
    context: LoadContext | None = None,
    progress: Progress = _quiet,
    jobs: int | None = None,
) -> tuple[GameReference, Instance, Dataset]:
    """Build instance ``seed`` from ``secret`` (default: the cache's for the seed, or a fresh
    one), train, measure and validate it, cache it, and return it with the built instance
    (whose programs a workspace needs) and the data. ``jobs``: processes that train side by
    side (default: one per CPU; a pool's worker builds on its own one)."""
    from pytest_clinaudit.reference.game.build import build_instance

    require_torch(variant)
    context = context or variant.context
    secret = instance_secret(variant, seed, cache, given=secret)
    libraries = instance_libraries()
    progress(f"{variant.name}: loading data ({type(variant.dataset).__name__})")
    data = variant.dataset.load(context)
    instance = build_instance(variant.game, data, seed, secret, progress=progress, jobs=jobs)
    rows_key, rows_value = _rows_entry(
        data, variant.game.backdoor.flag_share, variant.game.backdoor.clear_share
    )
    cache.put("game-rows", rows_key, rows_value, payload={"data_sha256": data.sha256})
    payload = _payload(variant, seed, secret, context, libraries)
    entry = _entry(variant, instance, data, rows_key)
    cache.put("games", cache_key(payload), entry, payload=payload)
    return _reference(entry, libraries, from_cache=False), instance, data


def get_game_reference(
    variant: GameVariant,
    seed: int,
    *,
    secret: str | None = None,
    cache: ReferenceCache | None = None,
    context: LoadContext | None = None,
    progress: Progress = _quiet,
    jobs: int | None = None,
) -> GameReference:
    """Instance ``seed`` of ``variant`` drawn from ``secret`` (a manifest's; default: the
    cache's for the seed, or a fresh one): read from the cache, or built (and cached) once.

    A cold call holds a lock on the instance while it builds, so concurrent
    graders of the same instance wait for one build instead of repeating it.
    """
    cache = cache if cache is not None else ReferenceCache.default()
    context = context or variant.context
    secret = secret if secret is not None else instance_secret(variant, seed, cache)
    libraries = instance_libraries()
    key = cache_key(_payload(variant, seed, secret, context, libraries))
    labels = variant.semantics == SEMANTICS_GAME_V2
    found = cache.get("games", key)
    if found is not None and _rows_ready(cache, found, labels=labels):
        return _reference(found, libraries, from_cache=True)
    with cache.lock(key):
        found = cache.get("games", key)
        if found is not None and _rows_ready(cache, found, labels=labels):
            return _reference(found, libraries, from_cache=True)
        if found is not None and labels and _add_labels(variant, context, cache, found):
            return _reference(found, libraries, from_cache=True)
        reference, _, _ = build_game_reference(
            variant,
            seed,
            cache=cache,
            secret=secret,
            context=context,
            progress=progress,
            jobs=jobs,
        )
    return reference


def _rows_ready(cache: ReferenceCache, entry: dict[str, Any], *, labels: bool) -> bool:
    """Whether the instance's test rows are cached (with their labels, if ``labels``)."""
    rows = cache.get("game-rows", entry["rows_key"])
    return rows is not None and (not labels or "y_test" in rows)


def _add_labels(
    variant: GameVariant, context: LoadContext, cache: ReferenceCache, entry: dict[str, Any]
) -> bool:
    """Write the instance's rows entry again with its labels, from the data (a rows entry
    written before they were kept has none); ``False`` when the data is not the instance's,
    so that the caller builds it again."""
    data = variant.dataset.load(context)
    if data.sha256 != entry["data_sha256"]:
        return False
    rows_key, rows_value = _rows_entry(
        data, variant.game.backdoor.flag_share, variant.game.backdoor.clear_share
    )
    if rows_key != entry["rows_key"]:
        return False
    cache.put("game-rows", rows_key, rows_value, payload={"data_sha256": data.sha256})
    return True


def _rows_value(reference: GameReference, cache: ReferenceCache) -> dict[str, Any]:
    entry = cache.get("game-rows", reference.rows_key)
    if entry is None or entry.get("data_sha256") != reference.data_sha256:
        raise VariantError(
            f"the test rows of {reference.variant} instance {reference.seed} are no longer in "
            "the cache; grade again to rebuild the instance"
        )
    return entry


def _rows_of(entry: dict[str, Any]) -> tuple[Any, tuple[str, ...], Any]:
    import numpy as np

    from pytest_clinaudit.reference.game.claims import Thresholds

    return (
        np.asarray(entry["X_test"], dtype=np.float64),
        tuple(entry["columns"]),
        Thresholds(**entry["thresholds"]),
    )


def test_rows(reference: GameReference, cache: ReferenceCache) -> tuple[Any, tuple[str, ...], Any]:
    """The instance's test rows (n, d) as a NumPy array, the column names and the flagging
    thresholds (:class:`~pytest_clinaudit.reference.game.claims.Thresholds`)."""
    return _rows_of(_rows_value(reference, cache))


def labelled_test_rows(
    reference: GameReference, cache: ReferenceCache
) -> tuple[Any, Any, tuple[str, ...], Any]:
    """:func:`test_rows` and the outcome (0/1, int64) of each row (n,), read at once:
    ``(X, y, columns, thresholds)``. A ``VariantError`` names the fix when the cache holds
    the rows without their labels (a rows entry written before they were kept)."""
    import numpy as np

    entry = _rows_value(reference, cache)
    X, columns, thresholds = _rows_of(entry)
    labels = entry.get("y_test")
    if not isinstance(labels, list) or len(labels) != len(X):
        raise VariantError(
            f"the test labels of {reference.variant} instance {reference.seed} are not in the "
            "cache; grade again to complete it from the data, or with a fresh "
            "--clinaudit-cache-dir to rebuild the instance"
        )
    return X, np.asarray(labels, dtype=np.int64), columns, thresholds


def programs(reference: GameReference, hidden: tuple[int, ...]) -> dict[str, bytes]:
    """Each model's ``model.pt2``, exported again from its cached weights; its hash must be the
    one recorded at the build."""
    import hashlib

    from pytest_clinaudit.reference.game.network import Weights, program_bytes

    made: dict[str, bytes] = {}
    for name, numbers in reference.weights.items():
        module = Weights.from_json(numbers).module()
        if tuple(layer.out_features for layer in module.layers[:-1:2]) != hidden:
            raise VariantError(
                f"{reference.variant} instance {reference.seed}: {name}'s cached weights are not "
                f"a network of hidden layers {list(hidden)}; build the instance again"
            )
        data = program_bytes(module)
        digest = hashlib.sha256(data).hexdigest()
        if digest != reference.programs[name]:
            raise VariantError(
                f"{reference.variant} instance {reference.seed}: {name}'s program exported from "
                f"its cached weights has sha256 {digest[:16]}..., the build recorded "
                f"{reference.programs[name][:16]}...; rebuild without the cache (--no-cache)"
            )
        made[name] = data
    return made


__all__ = ["KINDS", "GameReference", "build_game_reference", "get_game_reference", "programs"]
