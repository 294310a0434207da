"""The FLCHAIN own-model example runs as its README says (issue 20, part 4).

``examples/flchain-own-model/train_model.py`` writes FLCHAIN's raw split with
its missing creatinine cells, trains XGBoost on the rows as they are, saves the
booster as JSON and prints the ``clinaudit audit`` command. These tests run the
script in a temporary folder as a user would, then the printed command, and
check what the example's README promises: exit 0, strict JSON, a page, the
missing creatinine cells held fixed and said so, and NaN (never an imputed
value) given to the model. Each run trains a model and audits it: slow.
"""

from __future__ import annotations

import contextlib
import csv
import html
import io
import json
import math
import re
import shlex
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from grading_helpers import REPO

from pytest_clinaudit.cli import main

pytestmark = pytest.mark.slow

FOLDER = REPO / "examples" / "flchain-own-model"
SCRIPT = FOLDER / "train_model.py"
LABEL = "death_5y"
DEFAULT_OUT = "flchain-audit"


def _run_script(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


def _column(path: Path, name: str) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [row[name] for row in csv.DictReader(handle)]


def _strict_json(text: str) -> Any:
    """``text`` parsed, refusing NaN and Infinity (what ``allow_nan=False`` would not write)."""

    def refuse(constant: str) -> Any:
        raise AssertionError(f"the report holds {constant}, which strict JSON does not allow")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The script run in an empty folder into its default folder, the one the README names."""
    pytest.importorskip("sksurv")
    folder = tmp_path_factory.mktemp("example")
    done = _run_script(folder)
    out = folder / DEFAULT_OUT
    return {
        "cwd": folder,
        "out": out,
        "stdout": done.stdout,
        "stderr": done.stderr,
        "command": shlex.split(done.stdout.strip().splitlines()[-1]),
        "train": out / "train_raw.csv",
        "test": out / "test_raw.csv",
        "model": out / "model.json",
    }


@pytest.fixture(scope="module")
def audited(example: dict[str, Any]) -> dict[str, Any]:
    """The printed command run from the script's folder, recording every matrix XGBoost gets.

    The audit builds an ``xgboost.DMatrix`` for every batch of rows it asks the
    booster about; a subclass in its place records the creatinine column of each.
    """
    import xgboost

    seen: list[Any] = []

    class Recording(xgboost.DMatrix):  # type: ignore[misc]
        def __init__(self, data: Any, *args: Any, **kwargs: Any) -> None:
            names = kwargs.get("feature_names")
            if names and "creatinine" in names:
                column = np.asarray(data, dtype=np.float64)[:, list(names).index("creatinine")]
                seen.append(column.copy())
            super().__init__(data, *args, **kwargs)

    stdout, stderr = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(example["cwd"])
        patch.setattr(xgboost, "DMatrix", Recording)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            status = main(example["command"][1:])
    out = example["out"]
    return {
        "status": status,
        "stdout": stdout.getvalue(),
        "stderr": stderr.getvalue(),
        "json": out / "audit.json",
        "page": out / "audit.html",
        "creatinine_seen": np.concatenate(seen) if seen else np.zeros(0),
    }


def test_the_script_writes_the_cohorts_raw_split_with_its_empty_creatinine_cells(
    example: dict[str, Any],
) -> None:
    from pytest_clinaudit.reference.data.flchain import COLUMNS, load_flchain_cohort

    cohort = load_flchain_cohort()
    j = cohort.feature_names.index("creatinine")
    for path, split in ((example["train"], cohort.train), (example["test"], cohort.test)):
        with path.open(newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle))
        # The label and the features only: the cause of death would give the label away.
        assert header == [LABEL, *(column.name for column in COLUMNS)]
        cells = _column(path, "creatinine")
        assert len(cells) == len(split.y)
        assert [cell == "" for cell in cells] == np.isnan(split.X[:, j]).tolist()
    assert _column(example["test"], "creatinine").count("") > 0


def test_the_model_is_a_booster_json_fitted_on_the_files_columns_and_no_pickle_is_written(
    example: dict[str, Any],
) -> None:
    import xgboost

    booster = xgboost.Booster()
    booster.load_model(str(example["model"]))
    with example["train"].open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert booster.feature_names == header[1:]
    assert json.loads(booster.save_config())["learner"]["objective"]["name"] == "binary:logistic"
    assert sorted(p.name for p in example["out"].iterdir()) == [
        "model.json",
        "test_raw.csv",
        "train_raw.csv",
    ]


def test_the_script_prints_the_exact_audit_command_the_readme_gives(
    example: dict[str, Any],
) -> None:
    out = DEFAULT_OUT
    assert example["command"] == [
        "clinaudit", "audit",
        "--model", f"{out}/model.json",
        "--train", f"{out}/train_raw.csv",
        "--test", f"{out}/test_raw.csv",
        "--label", LABEL,
        "--html", f"{out}/audit.html",
        "--out", f"{out}/audit.json",
    ]  # fmt: skip
    # stdout holds the command alone, so that `$(python train_model.py)` runs it.
    assert example["stdout"].count("\n") == 1
    scripts = metadata.entry_points(group="console_scripts")
    assert [e.value for e in scripts if e.name == "clinaudit"] == ["pytest_clinaudit.cli:main"]
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r"^(?:python|clinaudit) .*$", readme.replace("\\\n", ""), re.M)
    commands = [" ".join(c.split()) for c in commands]
    assert commands[:2] == [
        f"python examples/flchain-own-model/train_model.py {out}",
        shlex.join(example["command"]),
    ]


def test_training_twice_gives_the_same_model_json_and_csv_bytes(
    example: dict[str, Any], tmp_path: Path
) -> None:
    _run_script(tmp_path, "again")
    for name in ("model.json", "train_raw.csv", "test_raw.csv"):
        assert (tmp_path / "again" / name).read_bytes() == (example["out"] / name).read_bytes()


def test_the_printed_audit_command_exits_0_with_strict_json_and_a_page(
    audited: dict[str, Any],
) -> None:
    assert audited["status"] == 0, audited["stderr"]
    report = _strict_json(audited["json"].read_text(encoding="utf-8"))
    json.dumps(report, allow_nan=False)
    assert report["format"] == "clinaudit-own-model-audit-1"
    assert report["model"]["kind"] == "xgboost.Booster"
    assert report["verdict"] in {"PRODUCTION", "CONDITIONAL", "NOT RECOMMENDED"}
    page = audited["page"].read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert page.count("<svg") == 4  # reliability, membership ROC, robustness curve, distances
    # The safe format runs no code, so the unpickling warning is never printed.
    assert "unpickling" not in audited["stderr"]


def test_the_json_the_summary_and_the_page_say_the_missing_creatinine_cells_were_held_fixed(
    example: dict[str, Any], audited: dict[str, Any]
) -> None:
    report = _strict_json(audited["json"].read_text(encoding="utf-8"))
    empty = {split: _column(example[split], "creatinine").count("") for split in ("train", "test")}
    features = report["features"]
    assert features["missing_cells"] == empty
    assert features["columns_with_missing_cells"] == ["creatinine"]
    assert features["categorical_columns"] == []
    held = features["held_fixed"]
    assert held == (
        "every attack perturbs only numeric cells that hold a number; it held fixed missing "
        f"cells ({empty['train']} in training, {empty['test']} in test rows, in creatinine)"
    )
    assert f"held fixed: {held}" in audited["stdout"]
    page = html.unescape(audited["page"].read_text(encoding="utf-8"))
    assert held[0].upper() + held[1:] in page


def test_the_model_was_given_nan_for_missing_creatinine_never_an_imputed_value(
    example: dict[str, Any], audited: dict[str, Any]
) -> None:
    import xgboost
    from sklearn.metrics import roc_auc_score

    assert audited["status"] == 0, audited["stderr"]
    # Directly: the booster received NaN in creatinine, for at least every missing test cell
    # (the audit predicts each test row, perturbed or not, at least once).
    seen = audited["creatinine_seen"]
    empty_test = _column(example["test"], "creatinine").count("")
    assert int(np.isnan(seen).sum()) >= empty_test > 0

    # And in the result: the report's AUROC is the model's on the test file as it is,
    # not on a copy with the training median filled in (which ranks the patients
    # differently, so the check can tell them apart). AUROC is a function of the
    # ranks of the same float32 outputs, so the two agree exactly.
    booster = xgboost.Booster()
    booster.load_model(str(example["model"]))

    def read(path: Path) -> tuple[Any, Any]:
        rows = np.genfromtxt(path, delimiter=",", skip_header=1, missing_values="")
        return rows[:, 1:], rows[:, 0]

    X_train, _ = read(example["train"])
    X_test, y_test = read(example["test"])
    names = booster.feature_names
    j = names.index("creatinine")
    median = float(np.nanmedian(X_train[:, j]))
    imputed = X_test.copy()
    imputed[np.isnan(imputed[:, j]), j] = median

    def auroc(X: Any) -> float:
        return float(
            roc_auc_score(y_test, booster.predict(xgboost.DMatrix(X, feature_names=names)))
        )

    as_is, filled = auroc(X_test), auroc(imputed)
    assert abs(as_is - filled) > 1e-4
    report = _strict_json(audited["json"].read_text(encoding="utf-8"))
    assert report["diagnostics"]["auroc"] == pytest.approx(as_is, abs=1e-12)
    assert not math.isclose(report["diagnostics"]["auroc"], filled, abs_tol=1e-5)
