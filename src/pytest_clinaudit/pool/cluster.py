"""The Dask cluster: imported only when a command asks for one.

:func:`open_client` connects to a scheduler's address, or starts an embedded
``distributed.LocalCluster`` whose worker processes run one thread each under
the pool's environment (:func:`worker_environment`: set before the worker
imports torch, which reads ``ATEN_CPU_CAPABILITY`` once, at import).
:func:`check_workers` asks every worker for its library versions and its
torch kernels and refuses, by the worker's name, any that differs from this
machine, before a task is submitted.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from pytest_clinaudit import versions

CLUSTER_EXTRA = "pip install 'pytest-clinaudit[cluster]'"
DEFAULT_CAPABILITY = "default"
"""torch's portable kernels: the one capability every x86 and ARM machine has, so a mixed
cluster agrees on every bit."""
CAPABILITIES = ("default", "avx2", "avx512", "avx512_vnni", "avx512_bf16", "amx", "sve256")
CONNECT_TIMEOUT = 10.0
"""Seconds to reach a scheduler before giving up (a bad address must not hang)."""
THREAD_CAPS = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


class ClusterError(Exception):
    """The cluster cannot be used as asked; the message is one line for the user."""


def require_distributed() -> None:
    """Raise :class:`ClusterError` (one line) when Dask's ``distributed`` is not installed."""
    if importlib.util.find_spec("distributed") is None:
        raise ClusterError(
            f"this command runs on a Dask cluster, and dask.distributed is not "
            f"installed: {CLUSTER_EXTRA}"
        )


def worker_environment(capability: str) -> dict[str, str]:
    """What a worker process's environment must hold before it imports torch or NumPy."""
    return {**THREAD_CAPS, "ATEN_CPU_CAPABILITY": capability}


def default_workers() -> int:
    """The CPUs this process may use (``sched_getaffinity`` where it exists)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def dashboard_available() -> bool:
    """Dask's dashboard needs bokeh, which is not a dependency of this package."""
    return importlib.util.find_spec("bokeh") is not None


def worker_facts(names: tuple[str, ...]) -> dict[str, Any]:
    """Run on each worker (``Client.run``): the versions of the libraries ``names`` (and
    ``python``) and torch's kernels."""
    facts: dict[str, Any] = {
        "libraries": versions.library_versions([n for n in names if n != "python"], python=True),
        "capability_asked": os.environ.get("ATEN_CPU_CAPABILITY"),
        "pid": os.getpid(),
    }
    if importlib.util.find_spec("torch") is not None:
        facts["capability"] = torch_capability()
    return facts


def torch_capability() -> str:
    """The CPU capability torch's kernels run on in this process (``default``, ``avx2``...)."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability()).lower()


def refusals(
    here: Mapping[str, str],
    workers: Mapping[str, Mapping[str, Any]],
    *,
    capability: str | None,
    ignore: Iterable[str] = (),
) -> list[str]:
    """One line per worker that must not work for this machine: a library missing or of
    another version, or torch on other kernels than ``capability`` (``None``: not checked).

    ``here`` is this machine's ``{library: version}``; ``workers`` maps each worker's
    address to :func:`worker_facts`; libraries in ``ignore`` are not compared.
    """
    found = []
    skipped = set(ignore)
    for address, facts in sorted(workers.items()):
        theirs = facts.get("libraries", {})
        for name, version in here.items():
            if name in skipped:
                continue
            other = theirs.get(name, versions.NOT_INSTALLED)
            if other == version:
                continue
            if other == versions.NOT_INSTALLED:
                found.append(f"worker {address} has no {name} (here: {name} {version})")
            else:
                found.append(f"worker {address} runs {name} {other}, here {name} {version}")
        if capability is not None and "capability" in facts and facts["capability"] != capability:
            found.append(
                f"worker {address} runs torch on its {facts['capability']} kernels, the pool "
                f"on {capability}: start it with ATEN_CPU_CAPABILITY={capability}"
            )
    return found


def check_workers(
    client: Any, here: Mapping[str, str], *, capability: str | None, timeout: float
) -> int:
    """Refuse the cluster (:class:`ClusterError`, naming the worker) when any worker differs
    from ``here``; return the number of workers. Waits up to ``timeout`` for one worker."""
    try:
        client.wait_for_workers(1, timeout=timeout)
    except (TimeoutError, OSError):
        raise ClusterError(f"no Dask worker joined the scheduler within {timeout:g} s") from None
    try:
        facts: dict[str, dict[str, Any]] = client.run(worker_facts, tuple(here))
    except Exception as exc:  # noqa: BLE001 - a worker that cannot even import the package
        raise ClusterError(
            f"a worker could not report its libraries ({type(exc).__name__}: {exc}); is "
            "pytest-clinaudit installed on every worker?"
        ) from None
    problems = refusals(here, facts, capability=capability)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ClusterError(f"{problems[0]}{more}: every worker must match this machine")
    return len(facts)


@contextlib.contextmanager
def open_client(
    scheduler: str | None,
    *,
    workers: int | None = None,
    capability: str = DEFAULT_CAPABILITY,
    timeout: float = CONNECT_TIMEOUT,
) -> Iterator[tuple[Any, str | None]]:
    """A ``distributed.Client`` and its dashboard's address (``None``: no dashboard).

    Without ``scheduler``, an embedded ``LocalCluster`` of ``workers`` processes
    (default: one per CPU), one thread each, whose environment holds
    :func:`worker_environment`. A scheduler that cannot be reached within
    ``timeout`` seconds is a :class:`ClusterError`.
    """
    require_distributed()
    import distributed

    if scheduler is None:
        with (
            distributed.LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers or default_workers(),
                threads_per_worker=1,
                processes=True,
                env=worker_environment(capability),
                # A free port, never the default 8787: two clusters on one machine (two
                # test workers, two users) would collide, and without bokeh the address
                # still serves the scheduler's HTTP endpoints.
                dashboard_address=":0",
                silence_logs=40,  # logging.ERROR: the live line is the progress
            ) as cluster,
            distributed.Client(cluster) as client,  # type: ignore[no-untyped-call]
        ):
            yield client, _dashboard(client)
        return
    try:
        client = distributed.Client(scheduler, timeout=timeout)  # type: ignore[no-untyped-call]
    except (OSError, TimeoutError, ValueError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ClusterError(f"cannot reach the Dask scheduler at {scheduler}: {reason}") from None
    with client:
        yield client, _dashboard(client)


def _dashboard(client: Any) -> str | None:
    with contextlib.suppress(Exception):
        link = client.dashboard_link
        if link and dashboard_available():
            return str(link)
    return None
