"""Run an own-model audit and assemble its report.

Two parameter sets: the ``own-data`` profile (the default, see
:mod:`pytest_clinaudit.reference.review.own_data`) and the task's own ``sps-v1``
parameters of a variant (``--params``), which keep the graded semantics
(raw-unit ε, the files' first rows as members) for comparison with agents'
reports.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_clinaudit.owner.inputs import load_own_model, read_own_data

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


def membership_attacks(membership: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, result) of each attack with an ROC: the loss attack and LiRA's two scores."""
    found = [("loss-threshold attack", membership["loss_threshold"])]
    lira = membership.get("lira", {})
    for side in ("online", "offline"):
        if side in lira:
            found.append((f"LiRA ({side})", lira[side]))
    return found


def caveat_items(report: dict[str, Any]) -> list[tuple[str, str]]:
    """(kind, text) of what a reader must keep in mind with these numbers, from the report.

    Kinds: ``sample-size``, ``ece``, ``low-fpr``, ``skipped``, ``refit``.
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
    for name, attack in membership_attacks(report["membership"]):
        for point in attack.get("low_fpr", ()):
            if not point["estimable"]:
                found.append(
                    (
                        "low-fpr",
                        f"{name}: TPR at {point['fpr']:.1%} FPR needs at least "
                        f"{point['min_nonmembers']} non-members, there are {point['n_nonmembers']}",
                    )
                )
    skipped = report["membership"].get("lira", {}).get("skipped")
    if skipped:
        found.append(("skipped", f"LiRA skipped: {skipped}"))
    found.append(
        (
            "refit",
            "intervals resample the evaluated patients with the fitted models held fixed; "
            "they do not include retraining variability",
        )
    )
    return found


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
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The own-data audit of a model file on two CSV files: the report as a JSON-ready dict.

    Raises
    ------
    pytest_clinaudit.owner.inputs.InputError
        The model or the data fails the input contract (before any attack ran).
    """
    from pytest_clinaudit.reference.review.own_data import audit_own_data

    say = _timed(progress or (lambda _: None))
    say(f"reading {train} and {test}")
    data = read_own_data(train, test, label=label, positive_class=positive_class)
    say(f"loading {model_path}")
    model = load_own_model(model_path, data)
    result = audit_own_data(
        model.model, data.dataset, params, fit_shadow=model.fit_shadow, progress=say
    )
    report = result.report()
    report["format"] = REPORT_FORMAT
    report["model"] = model.summary()
    report["data"] = data.summary()
    # The rows' content hash in canonical order: the same for any order of the files' rows.
    report["data"]["rows_sha256"] = report["details"]["data"]["sha256"]
    report["seconds"] = result.seconds
    report["caveats"] = caveats(report)
    return report


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
    data = read_own_data(train, test, label=label, positive_class=positive_class)
    model = load_own_model(model_path, data)
    result = audit(model.model, data.dataset, params, artifact_sha256=model.sha256, progress=say)
    report = result.report()
    report["model"] = model.summary()
    report["data"] = data.summary()
    return report
