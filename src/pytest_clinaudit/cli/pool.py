"""``clinaudit pool build``: many game instances, one Dask task each (docs/pool.md)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_clinaudit.catalog.variants import VariantError
from pytest_clinaudit.cli.common import (
    EXIT_USAGE,
    add_common_options,
    cache_from,
    catalog_from,
    positive_int,
    positive_seconds,
)


def register(sub: Any) -> None:
    from pytest_clinaudit.pool.cluster import CAPABILITIES, DEFAULT_CAPABILITY

    pool = sub.add_parser(
        "pool",
        help="pools of game instances on a Dask cluster",
        description="Build many instances of a game on a Dask cluster (docs/pool.md).",
    )
    commands = pool.add_subparsers(dest="pool_command", required=True, metavar="COMMAND")
    build = commands.add_parser(
        "build",
        help="build instances of a game, one Dask task each",
        description="Build instances --seeds of a game into POOL/<variant>-<seed>/ (the layout "
        "of `clinaudit build --out`), each on a Dask worker from its own fresh secret, kept in "
        "its grader manifest. POOL/journal.jsonl records each instance as it ends, "
        "POOL/index.json lists them; a rerun skips finished instances. Exit status 0 when "
        "every instance was built, 1 when some failed, 2 for a bad option or an unusable "
        "cluster, 130 when interrupted. Needs pytest-clinaudit[cluster].",
    )
    add_common_options(build)
    build.add_argument("--variant", required=True, metavar="NAME", help="a game variant")
    build.add_argument("--seeds", required=True, metavar="SEEDS", help="e.g. 1-200 or 1,4,7-9")
    build.add_argument("--out", required=True, type=Path, metavar="POOL", help="pool folder")
    _add_cluster_options(
        build,
        scheduler_help="a running Dask scheduler (tcp://host:8786); default: an embedded local "
        "cluster",
        workers_help="worker processes of the embedded cluster (default: one per CPU)",
    )
    build.add_argument(
        "--capability",
        choices=CAPABILITIES,
        default=None,
        help="torch CPU kernels every worker builds on (ATEN_CPU_CAPABILITY); default: the "
        f"pool's recorded one, else {DEFAULT_CAPABILITY}, which every machine has",
    )
    build.add_argument(
        "--retry-failed",
        action="store_true",
        help="build again the instances an earlier run recorded as failed",
    )
    build.set_defaults(handler=_cmd_pool_build)

    run = commands.add_parser(
        "run",
        help="run the bundled agents over a pool, grade them and write the tables",
        description="Run the bundled agents (null, transcription, expert; searcher, the hard "
        "tier's searching expert, when named) on every built "
        "instance of POOL, one Dask task each, write their reports to OUT/reports, grade them "
        "with grade-many's sessions on the same cluster (OUT/graded) and write the tables "
        "(OUT/report). Everything already done is kept: a rerun resumes. Needs "
        "pytest-clinaudit[cluster]; on a cluster of several machines POOL and OUT must be on a "
        "filesystem every worker sees.",
    )
    run.add_argument("pool", type=Path, metavar="POOL", help="a folder of `pool build`")
    run.add_argument(
        "--agents",
        default="null,transcription,expert",
        metavar="NAMES",
        help="comma-separated, among null,transcription,expert,searcher "
        "(default: null,transcription,expert)",
    )
    run.add_argument("--out", type=Path, metavar="DIR", help="where to write (default: POOL/runs)")
    _add_cluster_options(
        run, scheduler_help="a running Dask scheduler", workers_help="embedded cluster's workers"
    )
    run.add_argument(
        "--profile", default="strict", choices=("strict", "metr"), help="grading profile"
    )
    run.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help="the graders' cache (default: $CLINAUDIT_CACHE_DIR or ~/.cache/pytest-clinaudit)",
    )
    run.add_argument("-q", "--quiet", action="store_true", help="no progress messages")
    run.set_defaults(handler=_cmd_pool_run)


def _add_cluster_options(
    parser: argparse.ArgumentParser, *, scheduler_help: str, workers_help: str
) -> None:
    """--scheduler, --workers and --connect-timeout: the cluster a pool command runs on."""
    from pytest_clinaudit.pool.cluster import CONNECT_TIMEOUT

    parser.add_argument("--scheduler", metavar="ADDRESS", help=scheduler_help)
    parser.add_argument("--workers", type=positive_int, metavar="N", help=workers_help)
    parser.add_argument(
        "--connect-timeout",
        type=positive_seconds,
        default=CONNECT_TIMEOUT,
        metavar="SECONDS",
        help=f"give up on an unreachable scheduler after this long (default {CONNECT_TIMEOUT:g})",
    )


def _cmd_pool_build(args: argparse.Namespace) -> int:
    from pytest_clinaudit.pool.cluster import open_client
    from pytest_clinaudit.pool.task import build_on_worker

    return pool_build(args, build_on_worker, open_client)


def _say(quiet: bool) -> Callable[[str], None]:
    def say(message: str) -> None:
        if not quiet:
            print(f"clinaudit pool: {message}", file=sys.stderr, flush=True)

    return say


def pool_build(args: argparse.Namespace, builder: Callable[..., Any], opener: Any) -> int:
    """``pool build`` with ``builder`` as the task and ``opener`` as :func:`open_client`
    (tests pass a fast fake builder through this same path)."""
    from pytest_clinaudit.catalog.games import GameVariant
    from pytest_clinaudit.catalog.instances import instance_libraries, instance_secret
    from pytest_clinaudit.pool.cluster import DEFAULT_CAPABILITY, ClusterError, check_workers
    from pytest_clinaudit.pool.layout import PoolDir, PoolError, parse_seeds
    from pytest_clinaudit.pool.progress import PoolProgress
    from pytest_clinaudit.pool.run import build_pool
    from pytest_clinaudit.pool.task import BuildSpec

    say = _say(args.quiet)
    pool = PoolDir(args.out)
    try:
        if args.scheduler is not None and args.workers is not None:
            raise PoolError("--workers sizes the embedded cluster; a --scheduler has its own")
        seeds = parse_seeds(args.seeds)
        variant = catalog_from(args).find(args.variant)
        if not isinstance(variant, GameVariant):
            raise VariantError(f"{variant.name} is not a game: a pool holds game instances")
        libraries = instance_libraries()
        index = pool.read_index()
        capability = args.capability or (index or {}).get("capability") or DEFAULT_CAPABILITY
        pool.check_compatible(capability, libraries)
        pool.prepare()
    except (VariantError, PoolError) as exc:
        print(f"clinaudit pool build: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    names = {seed: f"{variant.name}-{seed}" for seed in seeds}
    finished, failed = pool.finished(), pool.failed()
    todo = [
        seed
        for seed in seeds
        if names[seed] not in finished and (args.retry_failed or names[seed] not in failed)
    ]
    skipped_failed = [n for n in names.values() if n in failed and not args.retry_failed]
    if finished & set(names.values()):
        say(f"{len(finished & set(names.values()))} instance(s) already built in {args.out}")
    if skipped_failed:
        say(
            f"{len(skipped_failed)} instance(s) failed before and are left so "
            f"(--retry-failed builds them again): {', '.join(skipped_failed[:5])}"
        )
    if not todo:
        pool.write_index(capability, libraries)
        say("nothing to build")
        return 1 if skipped_failed else 0
    cache = cache_from(args)
    # Each instance's secret is drawn here, once, as `clinaudit build` draws it (kept in this
    # machine's cache): a task rerun on another worker builds the same instance.
    specs = [
        BuildSpec(
            variant=variant.name,
            seed=seed,
            secret=instance_secret(variant, seed, cache),
            capability=capability,
            libraries=libraries,
            variants_dirs=tuple(str(d.absolute()) for d in args.variants_dir or ()),
            cache_dir=None if args.cache_dir is None else str(args.cache_dir.absolute()),
            no_cache=args.no_cache,
            mimic_dir=None if args.mimic_dir is None else str(args.mimic_dir.absolute()),
        )
        for seed in todo
    ]
    try:
        with opener(
            args.scheduler,
            workers=args.workers,
            capability=capability,
            timeout=args.connect_timeout,
        ) as (client, dashboard):
            workers = check_workers(
                client, libraries, capability=capability, timeout=args.connect_timeout
            )
            where = args.scheduler or "an embedded local cluster"
            say(
                f"building {len(specs)} instance(s) on {workers} worker(s) of {where}, "
                f"torch kernels {capability}"
            )
            say(
                f"dashboard: {dashboard}"
                if dashboard
                else "no dashboard (Dask's needs bokeh: pip install 'bokeh>=3.1')"
            )
            progress = None if args.quiet else PoolProgress(len(specs))
            executor = client.get_executor(pure=False)
            result = build_pool(specs, pool, executor, builder, progress=progress)
    except ClusterError as exc:
        print(f"clinaudit pool build: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        pool.write_index(capability, libraries)
        pool.tidy()
    if result.interrupted:
        say(f"interrupted: {len(result.finished)} built now; rerun the same command to resume")
    print(
        f"{args.out}: {len(pool.finished())} instance(s) built, {len(pool.failed())} failed "
        f"(journal {pool.journal_path}, index {pool.index_path}); {len(result.finished)} "
        f"built now in {result.seconds:.0f} s"
    )
    for name, reason in sorted(result.failed.items()):
        print(f"  {name}: {reason}")
    if result.interrupted:
        return result.exit_status
    return 1 if result.failed or skipped_failed else 0


def _cmd_pool_run(args: argparse.Namespace) -> int:
    from pytest_clinaudit.pool.agents import run_agent_task
    from pytest_clinaudit.pool.cluster import open_client

    return pool_run(args, run_agent_task, open_client)


def pool_run(args: argparse.Namespace, task: Callable[[str, str], str], opener: Any) -> int:
    """``pool run`` with ``task`` as the agents' task and ``opener`` as :func:`open_client`."""
    from pytest_clinaudit.batch.dask_executor import DaskExecutor
    from pytest_clinaudit.batch.grade_many import (
        BatchOptions,
        OutputDirError,
        format_summary,
        grade_rows,
        prepare_out_dir,
        write_records,
    )
    from pytest_clinaudit.batch.manifest import BatchManifestError, read_batch_manifest
    from pytest_clinaudit.batch.tables import ReportError, read_report, write_report
    from pytest_clinaudit.catalog.instances import instance_libraries
    from pytest_clinaudit.pool.agents import batch_rows, parse_agents, run_agents
    from pytest_clinaudit.pool.cluster import DEFAULT_CAPABILITY, ClusterError, check_workers
    from pytest_clinaudit.pool.layout import PoolDir, PoolError
    from pytest_clinaudit.pool.progress import PoolProgress

    say = _say(args.quiet)
    pool = PoolDir(args.pool)
    out: Path = args.out if args.out is not None else args.pool / "runs"
    try:
        agents = parse_agents(args.agents)
        index = pool.read_index()
        instances = sorted(pool.finished())
        if index is None or not instances:
            raise PoolError(f"{args.pool} holds no built instance: run `clinaudit pool build`")
    except (ValueError, PoolError) as exc:
        print(f"clinaudit pool run: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    capability = index.get("capability") or DEFAULT_CAPABILITY
    try:
        with opener(
            args.scheduler,
            workers=args.workers,
            capability=capability,
            timeout=args.connect_timeout,
        ) as (client, dashboard):
            check_workers(
                client, instance_libraries(), capability=capability, timeout=args.connect_timeout
            )
            say(f"dashboard: {dashboard}" if dashboard else "no dashboard (needs bokeh)")
            pairs = len(instances) * len(agents)
            say(f"{len(agents)} agent(s) on {len(instances)} instance(s): {pairs} report(s)")
            progress = None if args.quiet else PoolProgress(pairs)

            def done(name: str, error: str | None) -> None:
                if progress is not None:
                    progress.update(name, error)

            failed = run_agents(
                args.pool,
                instances,
                agents,
                out,
                client.get_executor(pure=False),
                task=task,
                done=done,
            )
            if progress is not None:
                progress.finish()
            manifest = out / "batch.jsonl"
            manifest.write_text(batch_rows(args.pool, instances, agents, out), encoding="utf-8")
            rows = read_batch_manifest(manifest)
            graded = out / "graded"
            prepare_out_dir(graded, force=False, resume=True, rows=rows)
            executor = DaskExecutor(client, dashboard)
            options = BatchOptions(
                out=graded,
                jobs=executor.slots,
                profile=args.profile,
                cache_dir=args.cache_dir,
                executor=executor.name,
            )
            result = grade_rows(rows, options, say=say, resume=True, executor=executor)
            write_records(result, graded)
    except (ClusterError, OutputDirError, BatchManifestError) as exc:
        print(f"clinaudit pool run: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(format_summary(result, graded, manifest))
    for (instance, agent), reason in sorted(failed.items()):
        print(f"  {agent} on {instance}: {reason}")
    try:
        report = read_report(graded, lambda message: say(f"warning: {message}"))
        write_report(report, out / "report", plots=False)
    except ReportError as exc:
        say(f"no tables: {exc}")
    else:
        print(f"tables in {out / 'report' / 'report.md'}")
    return 1 if failed else result.exit_status
