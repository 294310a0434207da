"""``clinaudit audit``: the reference report of a variant, or an audit of your own model."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pytest_clinaudit.catalog.variants import VariantError, load_audit_params
from pytest_clinaudit.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CLIError,
    add_common_options,
    cache_from,
    catalog_from,
    load_context,
    non_negative,
    positive_int,
    progress_printer,
)
from pytest_clinaudit.reference.review.profile import PROFILE, OwnDataParams


def register(sub: Any) -> None:
    defaults = OwnDataParams()
    audit = sub.add_parser(
        "audit",
        help="compute a reference report",
        description="Audit a variant's model (--variant) or your own model "
        "(--model/--train/--test/--label). Your own model file is loaded only because you name "
        "it, and loading a pickle (or a torch program that needs pickle) runs its code: audit "
        "only files you trust.",
    )
    add_common_options(audit)
    audit.add_argument("--variant", metavar="NAME", help="variant name or alias")
    audit.add_argument("--out", type=Path, metavar="FILE", help="write the report JSON here")
    audit.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write the own-model audit as one self-contained page (needs the html extra)",
    )
    audit.add_argument(
        "--model",
        type=Path,
        metavar="FILE",
        help="your classifier: a pickle with predict_proba, an XGBoost booster "
        "(.json/.ubj) or a torch exported program (.pt2)",
    )
    audit.add_argument("--train", type=Path, metavar="CSV", help="training CSV (header row)")
    audit.add_argument("--test", type=Path, metavar="CSV", help="test CSV (same columns)")
    audit.add_argument("--label", metavar="COLUMN", help="label column (0/1, 1 = adverse outcome)")
    audit.add_argument(
        "--positive-class",
        metavar="VALUE",
        help="the label value audited as the positive (adverse) class; needed unless the "
        "label is 0/1, when it is 1",
    )
    audit.add_argument(
        "--params",
        metavar="NAME|FILE",
        help="the task's exact parameters (sps-v1) of a variant or a variant-like TOML file, "
        "instead of the own-data profile",
    )
    own = audit.add_argument_group("own-data profile (the default for your own model)")
    own.add_argument(
        "--epsilon",
        type=non_negative,
        default=defaults.epsilon,
        metavar="STD",
        help=f"FGSM budget per feature in training standard deviations "
        f"(default {defaults.epsilon:g})",
    )
    own.add_argument(
        "--seed",
        type=int,
        default=defaults.seed,
        help=f"seed of every draw (default {defaults.seed})",
    )
    own.add_argument(
        "--bootstrap",
        type=positive_int,
        default=defaults.n_boot,
        metavar="N",
        help=f"bootstrap replicates of the intervals (default {defaults.n_boot})",
    )
    own.add_argument(
        "--no-lira", action="store_true", help="skip LiRA (it refits the model four times)"
    )
    own.add_argument(
        "--categorical",
        metavar="COL,...",
        help="number-coded columns that are categories (a grade 1-4, a site code): every attack "
        "holds them fixed, as it holds text columns and missing cells",
    )
    own.add_argument(
        "--positive-output",
        type=int,
        choices=(0, 1),
        metavar="{0,1}",
        help="for a torch .pt2 model returning two logits per row: which is the positive "
        "class's (default 1)",
    )
    own.add_argument(
        "--recipe",
        metavar="VARIANT",
        help="for a torch .pt2 model: the variant whose MLP recipe trained it, so that LiRA "
        "can refit its shadow models (a .pt2 file carries no recipe of its own)",
    )
    audit.set_defaults(handler=_cmd_audit)


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


def _json_safe(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` unchanged when it is strict JSON; else with every undefined number null.

    The own-data report is made strict by the audit itself; this is the net under
    every other report, so that ``--out`` never fails on a NaN.
    """
    try:
        json.dumps(report, allow_nan=False)
    except ValueError:
        from pytest_clinaudit.reference.review.jsonready import json_ready

        return json_ready(report, {})
    return report


def _write_report(report: dict[str, Any], out: Path | None) -> None:
    from pytest_clinaudit.files import write_json_atomic

    if out is not None:
        write_json_atomic(out, report)


def _cmd_audit(args: argparse.Namespace) -> int:
    from pytest_clinaudit.reference.data import DataError
    from pytest_clinaudit.reference.models import ModelError

    progress = progress_printer(args.quiet)
    owner_flags = {
        "--model": args.model,
        "--train": args.train,
        "--test": args.test,
        "--label": args.label,
    }
    from pytest_clinaudit.owner.inputs import InputError

    try:
        if args.variant is not None:
            if args.html is not None:
                raise CLIError("--html draws an audit of your own model, not a variant's reference")
            given = [flag for flag, value in owner_flags.items() if value is not None]
            if given or args.params:
                raise CLIError(
                    f"--variant cannot be combined with {', '.join(given or ['--params'])}"
                )
            from pytest_clinaudit.catalog.references import get_reference

            variant = catalog_from(args).get(args.variant)
            reference = get_reference(
                variant,
                cache=cache_from(args),
                context=load_context(args, variant),
                progress=progress,
            )
            report, title = reference.report, variant.name
        else:
            missing = [flag for flag, value in owner_flags.items() if value is None]
            if missing:
                raise CLIError(
                    "give --variant NAME, or audit your own model with --model, --train, --test "
                    f"and --label (missing: {', '.join(missing)})"
                )
            if args.html is not None and args.params is not None:
                raise CLIError(
                    "--html draws the own-data audit; it cannot be combined with --params"
                )
            report, title = _audit_own_model(args, progress)
    except (CLIError, VariantError, DataError, InputError) as exc:
        print(f"clinaudit audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ModelError as exc:
        # The contract asked the model about a sample; here it failed on rows the
        # attacks made (perturbed or walked ones). Still one line, still exit 2.
        print(f"clinaudit audit: error: the model failed during the audit: {exc}", file=sys.stderr)
        return EXIT_USAGE
    report = _json_safe(report)
    _write_report(report, args.out)
    if args.html is not None:
        from pytest_clinaudit.owner.page import write_audit_html
        from pytest_clinaudit.pages.render import PagesUnavailable

        try:
            write_audit_html(report, args.html)
        except PagesUnavailable as exc:
            print(f"clinaudit audit: error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if report.get("profile") == PROFILE:
        from pytest_clinaudit.owner.summary import format_own_audit

        print(format_own_audit(title, report))
    else:
        print(format_summary(title, report))
    if args.out is not None:
        print(f"report written to {args.out}")
    if args.html is not None:
        print(f"page written to {args.html}")
    else:
        print(json.dumps({k: report[k] for k in ("sps", "components", "verdict")}, indent=2))
    return EXIT_OK


def _audit_own_model(
    args: argparse.Namespace, progress: Callable[[str], None]
) -> tuple[dict[str, Any], str]:
    from pytest_clinaudit.owner.audit import audit_own_model, audit_with_task_params

    model_path: Path = args.model
    if not model_path.is_file():
        raise CLIError(f"--model {model_path}: no such file")
    if model_path.suffix.lower() not in (".pt2", ".json", ".ubj"):
        print(
            f"clinaudit: unpickling {model_path} because you passed it with --model. "
            "Unpickling runs code from the file: audit only models you trust.",
            file=sys.stderr,
        )
    files = {"train": args.train, "test": args.test, "label": args.label}
    if args.recipe is not None and (args.params is not None or model_path.suffix != ".pt2"):
        raise CLIError(
            "--recipe names the torch recipe of a .pt2 model for the own-data audit's LiRA; "
            "scikit-learn models are refitted through sklearn.base.clone"
        )
    if args.categorical is not None and args.params is not None:
        raise CLIError("--categorical is part of the own-data profile; it cannot go with --params")
    if args.params is None:
        import dataclasses

        defaults = OwnDataParams()
        params = dataclasses.replace(
            defaults,
            epsilon=args.epsilon,
            seed=args.seed,
            n_boot=args.bootstrap,
            lira_shadows=0 if args.no_lira else defaults.lira_shadows,
        )
        report = audit_own_model(
            model_path,
            **files,
            positive_class=args.positive_class,
            params=params,
            recipe=None if args.recipe is None else _torch_recipe(args, args.recipe),
            categorical=_names(args.categorical),
            positive_output=args.positive_output,
            progress=progress,
        )
        return report, f"{model_path.name} (profile own-data)"
    catalog = catalog_from(args)
    spec = args.params
    if spec in catalog:
        task_params = catalog.get(spec).params
    elif Path(spec).is_file():
        task_params = load_audit_params(Path(spec))
    else:
        raise CLIError(
            f"--params {spec!r} is neither a variant ({', '.join(catalog.names())}) nor a file"
        )
    report = audit_with_task_params(
        model_path,
        **files,
        positive_class=args.positive_class,
        params=task_params,
        progress=progress,
    )
    return report, f"{model_path.name} (parameters: {spec})"


def _names(listed: str | None) -> list[str]:
    """``--categorical a,b`` as column names (spaces around a name dropped)."""
    if listed is None:
        return []
    names = [name.strip() for name in listed.split(",") if name.strip()]
    if not names:
        raise CLIError("--categorical needs at least one column name (COL,...)")
    return names


def _torch_recipe(args: argparse.Namespace, name: str) -> Any:
    """The MLP recipe of variant ``name`` (``--recipe``), refused unless it is a torch one."""
    catalog = catalog_from(args)
    if name not in catalog:
        raise CLIError(f"--recipe {name!r} is not a variant ({', '.join(catalog.names())})")
    variant = catalog.get(name)
    if not variant.is_torch:
        raise CLIError(f"--recipe {name!r} is not a torch variant; its model is not an MLP")
    return variant.model
