"""Run an own-model audit and assemble its report.

Two parameter sets: the ``own-data`` profile (the default, see
:mod:`pytest_clinaudit.reference.review.own_data`) and the task's own ``sps-v1``
parameters of a variant (``--params``), which keep the graded semantics
(raw-unit ε, the files' first rows as members) for comparison with agents'
reports.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.owner.inputs import InputError, listed, read_own_data
from pytest_clinaudit.owner.model import load_own_model

if TYPE_CHECKING:
    from pytest_clinaudit.reference.attacks.params import AuditParams
    from pytest_clinaudit.reference.review.profile import OwnDataParams

Progress = Callable[[str], None]

REPORT_FORMAT = "clinaudit-own-model-audit-1"


def _timed(progress: Progress) -> Progress:
    """``progress`` with the seconds since the audit started in front of each message."""
    start = time.perf_counter()

    def say(message: str) -> None:
        progress(f"[{time.perf_counter() - start:6.1f} s] {message}")

    return say


MAX_WARNINGS = 20
"""Distinct library warnings kept in the report (the count says how many there were)."""


@contextlib.contextmanager
def recorded_warnings() -> Iterator[dict[str, Any]]:
    """Every Python warning raised inside, kept off the terminal and summarised for the report.

    Yields a dict filled on exit: ``count`` (all warnings) and ``distinct``, one
    line per distinct warning (``"UserWarning: ..."``, at most :data:`MAX_WARNINGS`).
    A model's libraries warn about versions and feature names, and a line of
    NumPy on the terminal reads like a failure; the report keeps them instead.
    """
    summary: dict[str, Any] = {"count": 0, "distinct": []}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield summary
        finally:
            lines = [
                f"{w.category.__name__}: {str(w.message).strip().splitlines()[0][:300]}"
                if str(w.message).strip()
                else w.category.__name__
                for w in caught
            ]
            summary["count"] = len(lines)
            summary["distinct"] = list(dict.fromkeys(lines))[:MAX_WARNINGS]


ATTACK_NAMES = {
    "loss_threshold": "loss-threshold attack",
    "shadow": "shadow-model attack",
    "boundary_distance": "boundary-distance attack",
}


def membership_attacks(membership: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, result) of each attack with an ROC: loss, shadow, boundary distance, LiRA."""
    found = [
        (label, membership[key])
        for key, label in ATTACK_NAMES.items()
        if key in membership and "auc" in membership[key]
    ]
    lira = membership.get("lira", {})
    for side in ("online", "offline"):
        if side in lira:
            found.append((f"LiRA ({side})", lira[side]))
    return found


def caveat_items(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) of what a reader must keep in mind with these numbers, from the report.

    Kinds: ``sample-size``, ``ece``, ``skipped``, ``held-fixed``, ``undefined``,
    ``white-box``, ``refit``, ``warnings`` and, last, ``low-fpr`` (one line for
    every point the sample sizes leave inestimable).
    """
    found: list[tuple[str, str]] = []
    n = report["details"]["n"]
    diagnostics = report["diagnostics"]
    if n["test"] < 1000:
        found.append(
            (
                "sample-size",
                f"{n['test']} test rows ({diagnostics['n_positive']} positive): every "
                "component's interval is wide; read the intervals, not the points",
            )
        )
    found.append(
        (
            "ece",
            "calibration_ece uses the task's binned ECE, which miscounts when a middle bin is "
            "empty and never counts a probability of exactly 1.0; the equal-mass and debiased "
            "estimates in the diagnostics are the sound ones",
        )
    )
    attacks = membership_attacks(report["membership"])
    inestimable = not_estimable_line([(name, a.get("low_fpr", ())) for name, a in attacks])
    for key in ("lira", "boundary_distance"):
        skipped = report["membership"].get(key, {}).get("skipped")
        if skipped:
            found.append(("skipped", f"{ATTACK_NAMES.get(key, 'LiRA')} skipped: {skipped}"))
    held = report.get("features", {}).get("held_fixed")
    if held:
        found.append(("held-fixed", held[0].upper() + held[1:]))
    for path, reason in report.get("undefined", {}).items():
        found.append(("undefined", f"{path} is undefined: {reason}"))
    if report["robustness"]["fgsm_curve"].get("attack") == "white-box":
        found.append(
            (
                "white-box",
                "FGSM followed the model's own gradient (sps-v1-wb2's direction), not a "
                "surrogate's signs; the robustness curve adds margin PGD",
            )
        )
    found.append(
        (
            "refit",
            "intervals resample the evaluated patients with the fitted models and attacks held "
            "fixed (the membership component's also takes in its attacks' seed variation); "
            "they do not include retraining variability",
        )
    )
    library = report.get("warnings", {})
    if library.get("count"):
        found.append(
            (
                "warnings",
                f"the model's libraries warned {library['count']} times during the audit "
                f"({len(library['distinct'])} distinct, in the report's warnings), first: "
                f"{library['distinct'][0]}",
            )
        )
    if inestimable:
        # Last: a limit of the sample sizes, stated once, after the caveats that matter.
        found.append(("low-fpr", inestimable))
    return found


def not_estimable_line(attacks: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> str | None:
    """One sentence for every low-FPR point no attack could estimate, or None if there is none.

    ``attacks`` are (name, low-FPR points). Ten bullets, one per attack and rate, say
    the same thing: the audit had too few non-members for that rate.
    """
    rates: dict[float, tuple[int, int]] = {}
    names: list[str] = []
    for name, points in attacks:
        for point in points:
            if not point.get("estimable", True):
                rates[float(point["fpr"])] = (
                    int(point["min_nonmembers"]),
                    int(point["n_nonmembers"]),
                )
                names.append(name)
    if not rates:
        return None
    order = sorted(rates, reverse=True)
    had = sorted({there for _, there in rates.values()})
    return (
        f"TPR at {_and([f'{fpr:.1%}' for fpr in order])} FPR is not estimable "
        f"({_and(list(dict.fromkeys(names)))}): "
        f"{'it needs' if len(order) == 1 else 'they need'} "
        f"{_and([str(rates[fpr][0]) for fpr in order])} non-members (10 allowed false "
        f"positives) and the audit had {_and([str(n) for n in had])}"
    )


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def caveats(report: dict[str, Any]) -> list[str]:
    """What a reader must keep in mind with these numbers (see :func:`caveat_items`)."""
    return [text for _, text in caveat_items(report)]


def audit_own_model(
    model_path: Path,
    train: Path,
    test: Path,
    *,
    label: str,
    positive_class: str | None,
    params: OwnDataParams | None = None,
    recipe: Any = None,
    categorical: Sequence[str] = (),
    positive_output: int | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The own-data audit of a model file on two CSV files: the report as a JSON-ready dict.

    ``recipe`` is the torch MLP recipe that trained a ``.pt2`` program, for LiRA.
    ``categorical`` names number-coded columns that are categories (``--categorical``):
    like text columns and the columns the model records as categorical, every
    attack holds them fixed. ``positive_output`` is which of a torch program's two
    outputs per row is the positive class's (``--positive-output``).

    Raises
    ------
    pytest_clinaudit.owner.inputs.InputError
        The model or the data fails the input contract (before any attack ran).
    pytest_clinaudit.reference.models.ModelError
        The model failed on rows the audit asked about later (perturbed ones).
    """
    from pytest_clinaudit.reference.review.own_data import audit_own_data

    say = _timed(progress or (lambda _: None))
    with recorded_warnings() as library:
        say(f"reading {train} and {test}")
        data = read_own_data(train, test, label=label, positive_class=positive_class)
        say(f"loading {model_path}")
        declared = declared_columns(data.dataset.feature_names, categorical)
        model = load_own_model(model_path, data, recipe=recipe, positive_output=positive_output)
        held = sorted({*data.categories.columns, *model.categorical, *declared})
        result = audit_own_data(
            model.model,
            data.dataset,
            params,
            categorical=held,
            fit_shadow=model.fit_shadow,
            lira_skipped=model.lira_skipped,
            progress=say,
        )
        report = result.report()
    report["format"] = REPORT_FORMAT
    report["model"] = model.summary()
    report["data"] = data.summary()
    # The rows' content hash in canonical order: the same for any order of the files' rows.
    report["data"]["rows_sha256"] = report["details"]["data"]["sha256"]
    names = data.dataset.feature_names
    report["features"]["categorical_from"] = {
        "text": [names[j] for j in data.categories.columns],
        "model": [names[j] for j in model.categorical],
        "declared": [names[j] for j in declared],
    }
    report["seconds"] = result.seconds
    report["warnings"] = library
    report["caveats"] = caveats(report)
    return report


def declared_columns(feature_names: Sequence[str], declared: Sequence[str]) -> list[int]:
    """The data columns ``--categorical`` names, checked against the data's feature columns."""

    unknown = [name for name in declared if name not in feature_names]
    if unknown:
        raise InputError(
            f"--categorical names {listed(unknown)}, which the data does not have as a feature; "
            f"its features are {listed(list(feature_names))}"
        )
    return sorted({list(feature_names).index(name) for name in declared})


def audit_with_task_params(
    model_path: Path,
    train: Path,
    test: Path,
    *,
    label: str,
    positive_class: str | None,
    params: AuditParams,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The task's exact audit (``sps-v1``) of an owner's model, through the same input contract."""
    from pytest_clinaudit.reference.attacks.audit import audit

    say = _timed(progress or (lambda _: None))
    with recorded_warnings() as library:
        data = read_own_data(train, test, label=label, positive_class=positive_class)
        model = load_own_model(model_path, data)
        result = audit(
            model.model, data.dataset, params, artifact_sha256=model.sha256, progress=say
        )
        report = result.report()
    report["model"] = model.summary()
    report["data"] = data.summary()
    report["warnings"] = library
    return report
