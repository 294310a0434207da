"""``clinaudit``: list variants and run the reference audit.

Commands
--------
clinaudit variants
    A table of the variants: names, aliases, datasets, recipes.
clinaudit audit --variant NAME [--out FILE]
    The reference report of a variant (the submission format plus ``details``).
clinaudit audit --model FILE --train CSV --test CSV --label COLUMN [--params NAME|FILE]
    Audit a model owner's own pickled model on their own data.
clinaudit grade-many MANIFEST --out DIR [-j N]
    Grade many submissions, one pytest session each, in parallel (docs/batch.md).
clinaudit report DIR [--out OUTDIR]
    Paper-style tables and plots from the JUnit XML of graded runs.

Every failure the user can fix ends in one line on stderr and exit status 2;
nothing prints a traceback for bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pytest_clinaudit.cache import ENV_CACHE_DIR, ReferenceCache, default_cache_dir
from pytest_clinaudit.catalog import Catalog, VariantError, default_catalog, load_audit_params

EXIT_OK = 0
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], int]


class CLIError(Exception):
    """A user-facing error: printed as one line, exit status 2."""


def _progress(quiet: bool) -> Callable[[str], None]:
    def report(message: str) -> None:
        if not quiet:
            print(f"  - {message}", file=sys.stderr, flush=True)

    return report


def _cache(args: argparse.Namespace) -> ReferenceCache:
    if getattr(args, "no_cache", False):
        return ReferenceCache(None)
    return ReferenceCache(args.cache_dir or default_cache_dir())


def _catalog(args: argparse.Namespace) -> Catalog:
    return default_catalog(args.variants_dir or ())


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--variants-dir",
        action="append",
        type=Path,
        metavar="DIR",
        help="extra variant files (*.toml) to load; may be repeated",
    )
    parser.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"reference cache (default: ${ENV_CACHE_DIR} or ~/.cache/pytest-clinaudit)",
    )
    parser.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    parser.add_argument(
        "--mimic-dir",
        type=Path,
        metavar="DIR",
        help="a MIMIC-IV extract for the mimic-* variants (default: $CLINAUDIT_MIMIC_DIR)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress messages")


# ------------------------------------------------------------------- variants


def _cmd_variants(args: argparse.Namespace) -> int:
    rows = [
        (
            v.name,
            ", ".join(v.aliases) or "-",
            type(v.dataset).__name__.removesuffix("Source").lower(),
            v.model.describe(),
            "-" if v.paper_reference_sps is None else f"{v.paper_reference_sps:.2f}",
        )
        for v in _catalog(args)
    ]
    if args.json:
        print(json.dumps([v.summary() for v in _catalog(args)], indent=2))
        return EXIT_OK
    header = ("variant", "aliases", "dataset", "model recipe", "paper SPS")
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    for row in (header, tuple("-" * w for w in widths), *rows):
        print("  ".join(str(cell).ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


# ---------------------------------------------------------------------- audit


def format_summary(title: str, report: dict[str, Any]) -> str:
    """A short human summary of a report."""
    details = report.get("details", {})
    c = report["components"]

    def shown(key: str, template: str) -> str:
        """``template`` filled with ``details[key]``, or nothing if the report lacks it."""
        value = details.get(key)
        return "" if value is None else template.format(value)

    auroc = (
        f"(AUROC {details['auroc_clean']:.4f} -> {details['auroc_adversarial']:.4f})"
        if details.get("auroc_clean") is not None
        else "(one class sampled)"
        if details.get("fgsm_single_class")
        else ""
    )
    rows = [
        ("fgsm_robustness", auroc),
        ("membership_inference_resistance", shown("mi_accuracy", "(attack accuracy {:.4f})")),
        ("calibration_ece", shown("ece", "(ECE {:.4f})")),
        ("boundary_attack_resistance", shown("mean_steps_to_flip", "(mean steps to flip {:.2f})")),
    ]
    lines = [f"{title}: SPS {report['sps']:.2f}  {report['verdict']}"]
    lines += [f"  {name:<33}{c[name]:.4f}  {note}" for name, note in rows]
    if details.get("artifact_sha256"):
        lines.append(f"  model sha256 {details['artifact_sha256']}")
    if details.get("data_sha256"):
        lines.append(f"  data sha256  {details['data_sha256']}")
    return "\n".join(line.rstrip() for line in lines)


def _write_report(report: dict[str, Any], out: Path | None) -> None:
    from pytest_clinaudit.files import write_json_atomic

    if out is not None:
        write_json_atomic(out, report)


def _context(args: argparse.Namespace, variant: Any) -> Any:
    from pytest_clinaudit.reference.data import LoadContext
    from pytest_clinaudit.reference.mimic import resolve_mimic_dir

    return LoadContext(base_dir=variant.path.parent, mimic_dir=resolve_mimic_dir(args.mimic_dir))


def _cmd_audit(args: argparse.Namespace) -> int:
    from pytest_clinaudit.reference.data import DataError

    progress = _progress(args.quiet)
    owner_flags = {
        "--model": args.model,
        "--train": args.train,
        "--test": args.test,
        "--label": args.label,
    }
    try:
        if args.variant is not None:
            given = [flag for flag, value in owner_flags.items() if value is not None]
            if given or args.params:
                raise CLIError(
                    f"--variant cannot be combined with {', '.join(given or ['--params'])}"
                )
            from pytest_clinaudit.references import get_reference

            variant = _catalog(args).get(args.variant)
            reference = get_reference(
                variant, cache=_cache(args), context=_context(args, variant), progress=progress
            )
            report, title = reference.report, variant.name
        else:
            missing = [flag for flag, value in owner_flags.items() if value is None]
            if missing:
                raise CLIError(
                    "give --variant NAME, or audit your own model with --model, --train, --test "
                    f"and --label (missing: {', '.join(missing)})"
                )
            report, title = _audit_own_model(args, progress)
    except (CLIError, VariantError, DataError) as exc:
        print(f"clinaudit audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    _write_report(report, args.out)
    print(format_summary(title, report))
    if args.out is not None:
        print(f"report written to {args.out}")
    else:
        print(json.dumps({k: report[k] for k in ("sps", "components", "verdict")}, indent=2))
    return EXIT_OK


def _audit_own_model(
    args: argparse.Namespace, progress: Callable[[str], None]
) -> tuple[dict[str, Any], str]:
    from pytest_clinaudit.reference.data import load_csv_pair
    from pytest_clinaudit.reference.recipes import Artifact
    from pytest_clinaudit.references import audit_artifact

    catalog = _catalog(args)
    spec = args.params or "wdbc-baseline"
    if spec in catalog:
        params = catalog.get(spec).params
    elif Path(spec).is_file():
        params = load_audit_params(Path(spec))
    else:
        raise CLIError(
            f"--params {spec!r} is neither a variant ({', '.join(catalog.names())}) nor a file"
        )
    model_path: Path = args.model
    if not model_path.is_file():
        raise CLIError(f"--model {model_path}: no such file")
    data = load_csv_pair(args.train, args.test, label=args.label, name=args.train.stem)
    print(
        f"clinaudit: unpickling {model_path} because you passed it with --model. "
        "Unpickling runs code "
        "from the file: audit only models you trust.",
        file=sys.stderr,
    )
    artifact = Artifact(model_path.read_bytes())
    reference = audit_artifact(
        model_path.name, artifact, data, params, cache=_cache(args), progress=progress
    )
    return reference.report, f"{model_path.name} (parameters: {spec})"


# ------------------------------------------------------------ build, export


def _cmd_build(args: argparse.Namespace) -> int:
    from pytest_clinaudit.reference.data import DataError
    from pytest_clinaudit.workspace import GRADER_DIR, MANIFEST_NAME, WORKSPACE_DIR, build_workspace

    try:
        variant = _catalog(args).get(args.variant)
        manifest = build_workspace(
            variant,
            args.out,
            context=_context(args, variant),
            cache=_cache(args),
            progress=_progress(args.quiet),
        )
    except (VariantError, DataError) as exc:
        print(f"clinaudit build: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{variant.name}: workspace for the agent in {args.out / WORKSPACE_DIR}")
    print(
        f"{variant.name}: grader manifest in {args.out / GRADER_DIR / MANIFEST_NAME} "
        "(keep it from the agent)"
    )
    print(
        f"  model sha256 {manifest['artifact_sha256']}; "
        f"reference SPS {manifest['reference']['sps']:.2f}"
    )
    print(
        f"  grade with: pytest --submission {args.out / WORKSPACE_DIR / 'report.json'} "
        f"--variant {variant.name} "
        f"--clinaudit-manifest {args.out / GRADER_DIR / MANIFEST_NAME}"
    )
    return EXIT_OK


def _cmd_export_metr(args: argparse.Namespace) -> int:
    from pytest_clinaudit.metr import export_metr

    family = export_metr(args.out)
    print(f"METR task family written to {family}")
    return EXIT_OK


# ------------------------------------------------------------ grade-many, report


def _positive_int(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {value!r}")
    return number


def _positive_seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = 0.0
    if not number > 0:  # also rejects NaN
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {value!r}")
    return number


def _cmd_grade_many(args: argparse.Namespace) -> int:
    from pytest_clinaudit.batch import (
        BatchOptions,
        OutputDirError,
        ProgressBar,
        default_jobs,
        format_summary,
        grade_rows,
        prepare_out_dir,
        write_records,
    )
    from pytest_clinaudit.batch_manifest import ManifestError, read_manifest

    try:
        rows = read_manifest(args.manifest)
        for flag, directory in [("--variants-dir", d) for d in args.variants_dir or ()] + [
            ("--mimic-dir", args.mimic_dir)
        ]:
            if directory is not None and not directory.is_dir():
                raise CLIError(f"{flag} {directory}: not a directory")
        prepare_out_dir(args.out, force=args.force, resume=args.resume, rows=rows)
    except (ManifestError, OutputDirError, CLIError) as exc:
        print(f"clinaudit grade-many: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        print(f"clinaudit grade-many: error: cannot use --out {args.out}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    options = BatchOptions(
        out=args.out,
        jobs=args.jobs or default_jobs(),
        profile=args.profile,
        cache_dir=args.cache_dir,
        variants_dirs=tuple(d.absolute() for d in args.variants_dir or ()),
        mimic_dir=None if args.mimic_dir is None else args.mimic_dir.absolute(),
        executor=args.executor,
        timeout=args.timeout,
    )
    say = (lambda _m: None) if args.quiet else (lambda m: print(f"clinaudit: {m}", file=sys.stderr))
    progress = None if args.quiet else ProgressBar(len(rows))
    result = grade_rows(rows, options, say=say, progress=progress, resume=args.resume)
    write_records(result, args.out)
    print(format_summary(result, args.out, args.manifest))
    return result.exit_status


def _cmd_report(args: argparse.Namespace) -> int:
    from pytest_clinaudit.tables import ReportError, build_report

    out = args.out if args.out is not None else args.dir / "report"
    try:
        written, text = build_report(
            args.dir,
            out,
            plots=not args.no_plots,
            warn=lambda m: print(f"clinaudit report: warning: {m}", file=sys.stderr),
        )
    except ReportError as exc:
        print(f"clinaudit report: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    print(text)
    print(f"written to {out}: {', '.join(p.name for p in written)}")
    return EXIT_OK


def _add_batch_commands(sub: Any) -> None:
    from pytest_clinaudit.options import PROFILES, profile

    grade_many = sub.add_parser(
        "grade-many",
        help="grade the submissions of a manifest, in parallel",
        description="Grade every row of MANIFEST (JSON Lines or CSV: submission, variant, and "
        "metadata such as agent, run, tokens, turns) in its own pytest session, -j at a time. "
        "Each row writes <name>.junit.xml and <name>.score.json into --out; rows that cannot be "
        "graded go to errors.jsonl. Exit status 0 if every row was graded, 1 if some could not "
        "be, 2 for a bad manifest or option, 130 if interrupted (every graded row is kept; "
        "--resume finishes the batch). See docs/batch.md.",
    )
    grade_many.add_argument("manifest", type=Path, metavar="MANIFEST", help=".jsonl or .csv")
    grade_many.add_argument(
        "--out", required=True, type=Path, metavar="DIR", help="output directory"
    )
    grade_many.add_argument(
        "-j",
        "--jobs",
        type=_positive_int,
        default=None,
        metavar="N",
        help="sessions at a time (default: the number of CPUs)",
    )
    grade_many.add_argument(
        "--profile",
        type=profile,
        default="strict",
        metavar="{" + ",".join(PROFILES) + "}",
        help="grading profile (default: strict)",
    )
    grade_many.add_argument(
        "--cache-dir",
        type=Path,
        metavar="DIR",
        help=f"reference cache (default: ${ENV_CACHE_DIR} or ~/.cache/pytest-clinaudit)",
    )
    grade_many.add_argument(
        "--variants-dir",
        action="append",
        type=Path,
        metavar="DIR",
        help="extra variant files (*.toml); may be repeated",
    )
    grade_many.add_argument(
        "--mimic-dir",
        type=Path,
        metavar="DIR",
        help="a MIMIC-IV extract for the mimic-* variants (default: $CLINAUDIT_MIMIC_DIR)",
    )
    from pytest_clinaudit.batch_exec import EXECUTORS, default_executor

    grade_many.add_argument(
        "--executor",
        choices=EXECUTORS,
        default=default_executor(),
        help="fork: pre-loaded workers fork one pytest session per submission; subprocess: a "
        "new `python -m pytest` per submission. Same sessions, same results "
        f"(default here: {default_executor()})",
    )
    grade_many.add_argument(
        "--timeout",
        type=_positive_seconds,
        default=600.0,
        metavar="SECONDS",
        help="time limit of one session (default 600)",
    )
    earlier = grade_many.add_mutually_exclusive_group()
    earlier.add_argument(
        "--force",
        action="store_true",
        help="delete an earlier batch's outputs in --out first",
    )
    earlier.add_argument(
        "--resume",
        action="store_true",
        help="finish an interrupted batch in --out: keep the rows it graded (same submission, "
        "metadata, profile and reference) and grade the others",
    )
    grade_many.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    grade_many.set_defaults(handler=_cmd_grade_many)

    report = sub.add_parser(
        "report",
        help="paper-style tables and plots from graded runs",
        description="Read the JUnit XML files under DIR (written by grade-many or by "
        "`pytest --submission ... --junitxml ...`) and write report.md, report.json, one CSV "
        "per table and PNG plots. See docs/batch.md for the tables.",
    )
    report.add_argument("dir", type=Path, metavar="DIR", help="directory of JUnit XML files")
    report.add_argument(
        "--out", type=Path, metavar="OUTDIR", help="where to write (default: DIR/report)"
    )
    report.add_argument("--no-plots", action="store_true", help="tables only, no matplotlib")
    report.set_defaults(handler=_cmd_report)


# ----------------------------------------------------------------------- main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="clinaudit",
        description="Reference auditor and tools of pytest-clinaudit. Grading itself runs as "
        "`pytest --submission report.json --variant NAME`.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    variants = sub.add_parser("variants", help="list the variants")
    _add_common(variants)
    variants.add_argument("--json", action="store_true", help="machine-readable output")
    variants.set_defaults(handler=_cmd_variants)

    audit = sub.add_parser(
        "audit",
        help="compute a reference report",
        description="Audit a variant's model (--variant) or your own pickled model "
        "(--model/--train/--test/--label). Your own pickle is loaded only because you name it, "
        "and unpickling runs its code: audit only files you trust.",
    )
    _add_common(audit)
    audit.add_argument("--variant", metavar="NAME", help="variant name or alias")
    audit.add_argument("--out", type=Path, metavar="FILE", help="write the report JSON here")
    audit.add_argument("--model", type=Path, metavar="FILE", help="your pickled classifier")
    audit.add_argument("--train", type=Path, metavar="CSV", help="training CSV (header row)")
    audit.add_argument("--test", type=Path, metavar="CSV", help="test CSV (same columns)")
    audit.add_argument("--label", metavar="COLUMN", help="label column (0/1, 1 = adverse outcome)")
    audit.add_argument(
        "--params",
        metavar="NAME|FILE",
        help="attack parameters: a variant name or a variant-like TOML file "
        "(default: wdbc-baseline)",
    )
    audit.set_defaults(handler=_cmd_audit)

    build = sub.add_parser(
        "build",
        help="write an agent workspace and the grader's manifest",
        description="Writes OUT/workspace (model.pkl, train.csv, test.csv, task.md: what the agent "
        "receives) and OUT/grader/manifest.json (hashes, recipe, library versions, reference; "
        "keep it from the agent).",
    )
    _add_common(build)
    build.add_argument("--variant", required=True, metavar="NAME", help="variant name or alias")
    build.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    build.set_defaults(handler=_cmd_build)

    export = sub.add_parser("export-metr", help="write a METR Task Standard task family")
    export.add_argument("--out", required=True, type=Path, metavar="DIR", help="output directory")
    export.set_defaults(handler=_cmd_export_metr)

    _add_batch_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except VariantError as exc:
        print(f"clinaudit {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("clinaudit: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
