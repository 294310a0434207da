"""Issue 28, parts 5 and 6: what the terminal and the page say, on real cohorts.

- a file that is not a model says so, and only that (no tail about the data's
  columns, no library traceback);
- no library warning reaches the terminal: the report keeps them;
- a test file with fewer than ``MIN_ROWS_PER_CLASS`` rows of a class is refused
  with that number;
- a CSV whose header reads as one column names the likely delimiter;
- the page: one line for every inestimable low-FPR point, no internal sentinel,
  the training file's positives.
"""

from __future__ import annotations

import html
import json
import pickle
from pathlib import Path
from typing import Any

import owner_models
import pytest
from owner_cohorts import LABEL, CohortFiles, write_cohort

from pytest_clinaudit.cli import main
from pytest_clinaudit.owner.inputs import MIN_ROWS_PER_CLASS

FAST = ["--bootstrap", "50", "--no-lira", "-q"]


@pytest.fixture(scope="module")
def whas(tmp_path_factory: pytest.TempPathFactory) -> CohortFiles:
    return write_cohort(tmp_path_factory.mktemp("whas500"), "whas500")


@pytest.fixture(scope="module")
def flchain(tmp_path_factory: pytest.TempPathFactory) -> CohortFiles:
    """FLCHAIN: text columns (sex, mgus) and missing creatinine cells."""
    return write_cohort(tmp_path_factory.mktemp("flchain"), "flchain")


@pytest.fixture(scope="module")
def whas_model(whas: CohortFiles) -> Path:
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = whas.xy("train")
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=2000))
    path = whas.train_csv.parent / "model.pkl"
    path.write_bytes(pickle.dumps(model.fit(X, y)))
    return path


def _argv(files: CohortFiles, model: Path, *extra: str, test: Path | None = None) -> list[str]:
    return [
        "audit", "--model", str(model), "--train", str(files.train_csv),
        "--test", str(test or files.test_csv), "--label", LABEL, *extra,
    ]  # fmt: skip


def _refused(capfd: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """The one line a refused audit prints (file-descriptor level: loggers included)."""
    assert main(argv) == 2
    err = [
        line
        for line in capfd.readouterr().err.splitlines()
        if not line.startswith("clinaudit: unpickling")
    ]
    assert len(err) == 1, err
    prefix = "clinaudit audit: error: "
    assert err[0].startswith(prefix)
    return err[0][len(prefix) :]


# ------------------------------------------------------------ not a model


def _not_a_model(directory: Path, kind: str) -> Path:
    if kind == "text-pkl":
        path = directory / "model.pkl"
        path.write_text("age,sex\n52,F\n")
    elif kind == "json-not-booster":
        path = directory / "model.json"
        path.write_text(json.dumps({"model": "logistic", "coef": [0.1, 0.2]}))
    elif kind == "corrupt-pt2":
        path = directory / "model.pt2"
        path.write_bytes(b"PK\x03\x04" + bytes(range(256)) * 4)
    else:
        path = directory / "weights.pkl"
        path.write_bytes(pickle.dumps({"coef": [0.1, 0.2], "intercept": -1.0}))
    return path


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("text-pkl", "cannot be unpickled (UnpicklingError: "),
        ("json-not-booster", "not an XGBoost model ("),
        ("corrupt-pt2", "not a torch exported program ("),
        ("pickled-dict", "holds a builtins.dict, not a model (it has neither predict_proba "),
    ],
)
def test_a_file_that_is_not_a_model_says_so_and_only_that(
    flchain: CohortFiles,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    kind: str,
    expected: str,
) -> None:
    if kind == "corrupt-pt2":
        pytest.importorskip("torch")
    path = _not_a_model(tmp_path, kind)
    message = _refused(capfd, _argv(flchain, path, *FAST))
    assert message.startswith(f"{path}: {expected}")
    # FLCHAIN holds text and missing cells; they have nothing to do with this file.
    assert "the data holds" not in message
    assert "xgboost/" not in message
    assert "Traceback" not in message


# --------------------------------------------------------------- warnings


def test_a_header_only_file_is_one_line_and_no_numpy_warning(
    whas: CohortFiles, whas_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    header_only = tmp_path / "test.csv"
    header_only.write_text(whas.test_csv.read_text().splitlines()[0] + "\n")
    message = _refused(capfd, _argv(whas, whas_model, *FAST, test=header_only))
    assert message == f"{header_only}: no data rows under the header"


def test_library_warnings_are_kept_in_the_report_not_printed(
    whas: CohortFiles, whas_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    model = pickle.loads(whas_model.read_bytes())
    noisy = tmp_path / "noisy.pkl"
    noisy.write_bytes(pickle.dumps(owner_models.Warns(model)))
    out = tmp_path / "report.json"
    assert main(_argv(whas, noisy, *FAST, "--out", str(out))) == 0
    err = capfd.readouterr().err
    assert "Warning" not in err, err
    report = json.loads(out.read_text())
    library = report["warnings"]
    assert library["count"] >= 2  # at least the probe and the audit's own query
    assert library["distinct"] == [f"FutureWarning: {owner_models.Warns.MESSAGE}"]
    assert any(
        c.startswith(f"the model's libraries warned {library['count']} times")
        for c in report["caveats"]
    )


# ------------------------------------------------------------ too small


def _subset(files: CohortFiles, path: Path, positives: int, negatives: int) -> Path:
    test = files.test
    rows = [test[test[LABEL] == 1].head(positives), test[test[LABEL] == 0].head(negatives)]
    import pandas as pd

    pd.concat(rows).to_csv(path, index=False)
    return path


def test_a_test_file_with_too_few_rows_of_a_class_is_refused_with_the_minimum(
    whas: CohortFiles, whas_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    two = _subset(whas, tmp_path / "two.csv", 1, 1)
    assert _refused(capfd, _argv(whas, whas_model, *FAST, test=two)) == (
        f"{two}: the test file is too small to audit: 1 positive and 1 negative rows, and an "
        f"audit needs at least {MIN_ROWS_PER_CLASS} rows of each class"
    )
    short = _subset(whas, tmp_path / "short.csv", MIN_ROWS_PER_CLASS - 1, 60)
    assert f"{MIN_ROWS_PER_CLASS - 1} positive and 60 negative rows" in _refused(
        capfd, _argv(whas, whas_model, *FAST, test=short)
    )
    enough = _subset(whas, tmp_path / "enough.csv", MIN_ROWS_PER_CLASS, MIN_ROWS_PER_CLASS)
    assert main(_argv(whas, whas_model, *FAST, test=enough)) == 0


# ------------------------------------------------------------ delimiters


@pytest.mark.parametrize(("delimiter", "name"), [(";", "semicolon"), ("\t", "tab")])
def test_a_header_that_reads_as_one_column_names_the_likely_delimiter(
    whas: CohortFiles,
    whas_model: Path,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    delimiter: str,
    name: str,
) -> None:
    other = tmp_path / "train.csv"
    whas.train.to_csv(other, index=False, sep=delimiter)
    argv = _argv(whas, whas_model, *FAST)
    argv[argv.index(str(whas.train_csv))] = str(other)
    message = _refused(capfd, argv)
    assert message.startswith(f"{other}: the header reads as one column (")
    assert message.endswith(
        f"the file looks {name}-separated ({delimiter!r}): save it with commas as the delimiter"
    )


# ------------------------------------------------------------------ page


def test_the_page_groups_what_is_not_estimable_hides_sentinels_and_counts_positives(
    whas: CohortFiles, whas_model: Path, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("jinja2")
    out, page = tmp_path / "report.json", tmp_path / "report.html"
    argv = _argv(whas, whas_model, *FAST, "--out", str(out), "--html", str(page))
    assert main(argv) == 0
    report: dict[str, Any] = json.loads(out.read_text())
    text = html.unescape(page.read_text())
    caveats = text[text.index('<ul class="caveats">') :].split("</ul>")[0].split("<li>")[1:]
    # 125 test rows: no attack can estimate the TPR at 1% or 0.1% FPR; one line says so, last.
    assert sum("not estimable" in c for c in caveats) == 1
    assert "not estimable" in caveats[-1]
    assert "1000 and 10000 non-members" in caveats[-1]
    assert "loss-threshold attack" in caveats[-1]
    assert str(report["parameters"]["shadow"]["eval_cap"]) not in text
    assert "no cap (every row)" in text
    rows = text[text.index('id="data"') :].split("</table>")[0]
    train = rows[rows.index(">train<") :].split("</tr>")[0]
    assert f'<td class="num">{int(whas.train[LABEL].sum())}</td>' in train
    assert report["data"]["train"]["positives"] == int(whas.train[LABEL].sum())
