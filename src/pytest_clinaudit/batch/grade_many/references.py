"""References computed once per batch: fetched into the shared cache before any session starts.

The sessions then only read the cache. Should a session still find it cold (a
variant registered by a plugin this process cannot see), the cache's file lock
makes concurrent sessions wait for one computation instead of repeating it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from pytest_clinaudit.batch.grade_many.options import BatchOptions
from pytest_clinaudit.batch.grade_many.progress import Say
from pytest_clinaudit.batch.manifest import Row

ReferenceKey = tuple[str, str, float, tuple[tuple[str, float], ...]]
"""What identifies a reference in a score JSON: artifact and data hashes, SPS, components."""


def reference_key(
    artifact_sha256: str, data_sha256: str, sps: float, components: dict[str, float]
) -> ReferenceKey:
    """The :data:`ReferenceKey` of a reference, from its parts as a score JSON records them."""
    return (artifact_sha256, data_sha256, float(sps), tuple(sorted(components.items())))


def warm_references(
    rows: Sequence[Row], options: BatchOptions, cache_dir: Path, say: Say
) -> tuple[list[str], dict[str, ReferenceKey]]:
    """Fetch each distinct variant's reference into the cache once, before any session.

    Returns warnings for variants that could not be fetched (their rows are still
    graded, so that each gets the grading session's own error message), and the
    key of each reference fetched, by the variant name or alias the rows use.
    """
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.references import get_reference
    from pytest_clinaudit.catalog.variants import VariantError, default_catalog
    from pytest_clinaudit.reference.data import DataError, LoadContext
    from pytest_clinaudit.reference.data.mimic import resolve_mimic_dir

    warnings: list[str] = []
    keys: dict[str, ReferenceKey] = {}
    try:
        catalog = default_catalog(options.variants_dirs)
    except VariantError as exc:
        return [f"cannot load the variants: {exc}"], keys
    cache = ReferenceCache(cache_dir)
    fetched: dict[str, ReferenceKey | None] = {}
    for name in dict.fromkeys(row.variant for row in rows):
        if name in catalog and catalog.find(name).is_game:
            continue  # its sessions read their instance from the cache `clinaudit build` filled
        try:
            variant = catalog.get(name)
        except VariantError as exc:
            warnings.append(f"variant {name!r}: {exc}")
            continue
        if variant.name in fetched:  # an alias of a variant already fetched
            key = fetched[variant.name]
            if key is not None:
                keys[name] = key
            continue
        fetched[variant.name] = None
        context = LoadContext(
            base_dir=variant.path.parent, mimic_dir=resolve_mimic_dir(options.mimic_dir)
        )
        start = time.perf_counter()
        try:
            reference = get_reference(
                variant, cache=cache, context=context, progress=lambda m: say(f"  {m}")
            )
        except (DataError, VariantError, OSError) as exc:
            warnings.append(f"variant {variant.name}: cannot compute its reference: {exc}")
            continue
        state = "read from the cache" if reference.from_cache else "computed and cached"
        say(
            f"reference {variant.name}: SPS {reference.sps:.2f}, {state} "
            f"({time.perf_counter() - start:.1f} s)"
        )
        fetched[variant.name] = keys[name] = reference_key(
            reference.artifact_sha256, reference.data_sha256, reference.sps, reference.components
        )
    return warnings, keys
