"""``clinaudit pool run``: the bundled agents over a pool's instances, as Dask tasks.

Each (instance, agent) pair is one task: the agent
(:mod:`pytest_clinaudit.adapters.game_agent`) reads the instance's
``workspace/`` and returns its report, which the coordinator writes to
``OUT/reports/<agent>-<instance>.json``. A report already written is not made
again, so an interrupted run resumes. :func:`batch_rows` then lists every
report with its instance's grader manifest, as ``grade-many`` reads them.
"""

from __future__ import annotations

import concurrent.futures
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_clinaudit.files import write_atomic
from pytest_clinaudit.pool.completion import as_they_end
from pytest_clinaudit.pool.layout import MANIFEST

AGENTS = ("null", "transcription", "expert", "searcher")

Agent = Callable[[str, str], str]


def run_agent_task(workspace: str, agent: str) -> str:
    """The Dask task: ``agent``'s report on ``workspace``, as JSON text."""
    import os

    from pytest_clinaudit.adapters.game_agent import run

    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(name, "1")
    return json.dumps(run(Path(workspace), agent), indent=2) + "\n"


def parse_agents(text: str) -> list[str]:
    agents = [a.strip() for a in text.split(",") if a.strip()]
    unknown = [a for a in agents if a not in AGENTS]
    if not agents or unknown:
        raise ValueError(
            f"--agents {text!r}: choose among {', '.join(AGENTS)} (comma-separated), "
            f"not {', '.join(unknown) or 'nothing'}"
        )
    return list(dict.fromkeys(agents))


def report_path(out: Path, agent: str, instance: str) -> Path:
    return out / "reports" / f"{agent}-{instance}.json"


def run_agents(
    pool: Path,
    instances: Sequence[str],
    agents: Sequence[str],
    out: Path,
    executor: concurrent.futures.Executor,
    *,
    task: Agent = run_agent_task,
    done: Callable[[str, str | None], None] = lambda _name, _error: None,
) -> dict[tuple[str, str], str]:
    """Every agent's report on every instance (those not written yet), through ``executor``;
    returns the pairs that failed -> why. ``done`` hears of each pair as it ends."""
    futures: dict[concurrent.futures.Future[str], tuple[str, str]] = {}
    for instance in instances:
        for agent in agents:
            if not report_path(out, agent, instance).is_file():
                workspace = str((pool / instance / "workspace").absolute())
                futures[executor.submit(task, workspace, agent)] = (instance, agent)
    failed: dict[tuple[str, str], str] = {}
    try:
        for future in as_they_end(futures):
            instance, agent = futures[future]
            try:
                write_atomic(report_path(out, agent, instance), future.result())
            except Exception as exc:  # noqa: BLE001 - one pair failed; the others go on
                reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                failed[(instance, agent)] = f"{type(exc).__name__}: {reason}"
                done(f"{agent} on {instance}", failed[(instance, agent)])
                continue
            done(f"{agent} on {instance}", None)
    except KeyboardInterrupt:
        for future in futures:
            future.cancel()
        raise
    return failed


def batch_rows(pool: Path, instances: Sequence[str], agents: Sequence[str], out: Path) -> str:
    """``grade-many``'s manifest (JSON Lines) of every report written."""
    lines: list[dict[str, Any]] = []
    for instance in instances:
        manifest_path = (pool / instance / MANIFEST).absolute()
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        for agent in agents:
            report = report_path(out, agent, instance)
            if report.is_file():
                lines.append(
                    {
                        "submission": str(report.absolute()),
                        "variant": manifest["variant"],
                        "manifest": str(manifest_path),
                        "agent": agent,
                        "run": str(manifest["seed"]),
                    }
                )
    return "".join(json.dumps(line) + "\n" for line in lines)
