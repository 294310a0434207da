"""What a worker runs: one instance built into a scratch folder, returned as bytes.

:func:`build_on_worker` is the Dask task of ``clinaudit pool build``. It first
makes sure the worker builds what this machine would (the pool's libraries
and torch kernels, one thread: otherwise :class:`WorkerRefused`, naming the
worker), then builds the instance as ``clinaudit build --like`` would, from the
secret in its :class:`BuildSpec`, into a scratch folder, and returns every
file's bytes. The coordinator writes them into the pool, so the workers need
no filesystem in common with it, and a worker killed half-way leaves nothing
behind.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any


class WorkerRefused(RuntimeError):
    """This worker must not build for the pool (other libraries, other torch kernels)."""


@dataclasses.dataclass(frozen=True)
class BuildSpec:
    """One instance to build: everything a worker needs, and nothing that names a path of
    the coordinator's except an explicit cache or variants folder."""

    variant: str
    seed: int
    secret: str
    """Drawn by the coordinator (``instance_secret``) so that a rerun of the task, on any
    worker, builds the same instance."""
    capability: str
    libraries: dict[str, str]
    """The coordinator's library versions: a worker with others refuses the task."""
    variants_dirs: tuple[str, ...] = ()
    cache_dir: str | None = None
    """``None``: the worker's own default cache."""
    no_cache: bool = False
    mimic_dir: str | None = None

    @property
    def name(self) -> str:
        return f"{self.variant}-{self.seed}"


@dataclasses.dataclass(frozen=True)
class Built:
    """A built instance as a worker returns it."""

    name: str
    files: dict[str, bytes]
    """Path under the instance's folder (``workspace/...``, ``grader/manifest.json``) ->
    its bytes."""
    worker: str
    capability: str
    seconds: float


def worker_name() -> str:
    """The Dask worker's address, or this process's id outside Dask."""
    with contextlib.suppress(Exception):
        from distributed import get_worker

        return str(get_worker().address)
    return f"pid {os.getpid()}"


def pin_worker(spec: BuildSpec) -> str:
    """One thread and the pool's torch kernels, or :class:`WorkerRefused`; returns the
    capability torch runs on."""
    import sys

    from pytest_clinaudit.catalog.instances import instance_libraries
    from pytest_clinaudit.pool.cluster import THREAD_CAPS, refusals, torch_capability

    if "torch" not in sys.modules:  # torch reads it once, at import
        os.environ["ATEN_CPU_CAPABILITY"] = spec.capability
        for name, value in THREAD_CAPS.items():
            os.environ.setdefault(name, value)
    facts: dict[str, Any] = {"libraries": instance_libraries()}
    with contextlib.suppress(ImportError):
        facts["capability"] = torch_capability()
    problems = refusals(spec.libraries, {worker_name(): facts}, capability=spec.capability)
    if problems:
        raise WorkerRefused("; ".join(problems))
    import torch

    torch.set_num_threads(1)
    return str(facts["capability"])


def instance_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by its POSIX path relative to it."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def build_on_worker(spec: BuildSpec) -> Built:
    """Build ``spec``'s instance here, on one thread, and return its files (the Dask task)."""
    from pytest_clinaudit.adapters.game_workspace import build_game_workspace
    from pytest_clinaudit.catalog.cache import ReferenceCache
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.catalog.variants import VariantError, default_catalog
    from pytest_clinaudit.reference.data import LoadContext
    from pytest_clinaudit.reference.data.mimic import resolve_mimic_dir

    start = time.perf_counter()
    capability = pin_worker(spec)
    variant = default_catalog(tuple(Path(d) for d in spec.variants_dirs)).find(spec.variant)
    if not isinstance(variant, GameVariant):
        raise VariantError(f"{spec.variant} is not a game")
    if spec.no_cache:
        cache = ReferenceCache(None)
    elif spec.cache_dir is None:
        cache = ReferenceCache.default()
    else:
        cache = ReferenceCache(Path(spec.cache_dir))
    context = LoadContext(
        base_dir=variant.path.parent,
        mimic_dir=resolve_mimic_dir(None if spec.mimic_dir is None else Path(spec.mimic_dir)),
    )
    scratch = Path(tempfile.mkdtemp(prefix="clinaudit-pool-"))
    try:
        # One process: the worker is one of many, each building its own instance.
        build_game_workspace(
            variant, spec.seed, scratch, secret=spec.secret, context=context, cache=cache, jobs=1
        )
        files = instance_files(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return Built(spec.name, files, worker_name(), capability, time.perf_counter() - start)
