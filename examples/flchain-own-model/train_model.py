"""Train an XGBoost model on FLCHAIN's raw rows, missing creatinine cells and all, to audit it.

    python examples/flchain-own-model/train_model.py [OUT_DIR]      (default: flchain-audit)

writes into OUT_DIR

- ``train_raw.csv``, ``test_raw.csv``: the FLCHAIN cohort's 5-year mortality
  split in clinical units, an empty cell wherever creatinine was not measured
  (the rows come from scikit-survival's bundled copy; nothing is downloaded);
- ``model.json``: an XGBoost classifier trained on the training file as it is,
  saved in XGBoost's own JSON format (loading it runs no code, unlike a pickle);

and prints the ``clinaudit audit`` command that audits it. Training is
deterministic: a fixed seed and one thread give the same model.json bytes on
every run with the same xgboost.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

LABEL = "death_5y"
"""1 = died within 5 years of the blood sample (docs/flchain-datacard.md)."""

SEED = 42

XGBOOST_PARAMS = {
    "n_estimators": 200,
    "max_depth": 3,
    "learning_rate": 0.05,
    "tree_method": "hist",
    # One thread and a fixed seed: the trees, and so model.json, are the same on every run.
    "n_jobs": 1,
    "random_state": SEED,
}


def write_csvs(out: Path) -> tuple[Path, Path]:
    """FLCHAIN's raw train/test split as two CSV files, empty where a value is missing."""
    from pytest_clinaudit.reference.data.flchain import load_flchain_cohort

    # The cohort's own writer: the label, then the features in clinical units. The
    # post-outcome column (cause of death) stays out: it would give the label away.
    return load_flchain_cohort().write_raw_csvs(out)


def train(train_csv: Path) -> Any:
    """An XGBClassifier fitted on the training file's rows as they are: NaN where missing."""
    import pandas as pd
    from xgboost import XGBClassifier

    frame = pd.read_csv(train_csv)  # an empty cell becomes NaN; nothing is imputed
    X, y = frame.drop(columns=LABEL), frame[LABEL]
    # XGBoost takes NaN natively: each split learns which branch a missing value follows.
    return XGBClassifier(**XGBOOST_PARAMS).fit(X, y)


def auroc_on(model: Any, test_csv: Path) -> float:
    """The AUROC on the test file, NaN passed as is (the audit reports it with an interval)."""
    import pandas as pd
    from sklearn.metrics import roc_auc_score

    frame = pd.read_csv(test_csv)
    probability = model.predict_proba(frame.drop(columns=LABEL))[:, 1]
    return float(roc_auc_score(frame[LABEL], probability))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "out",
        nargs="?",
        type=Path,
        default=Path("flchain-audit"),
        help="folder for the CSV files and the model (default: flchain-audit)",
    )
    out: Path = parser.parse_args(argv).out
    train_csv, test_csv = write_csvs(out)
    print(f"wrote {train_csv} and {test_csv}", file=sys.stderr)
    model = train(train_csv)
    model_file = out / "model.json"
    # The plain booster, with its feature names: XGBoost's JSON, not a pickle.
    model.get_booster().save_model(model_file)
    print(
        f"wrote {model_file} (test AUROC {auroc_on(model, test_csv):.3f}, missing cells as NaN)",
        file=sys.stderr,
    )
    command = [
        "clinaudit", "audit",
        "--model", str(model_file),
        "--train", str(train_csv),
        "--test", str(test_csv),
        "--label", LABEL,
        "--html", str(out / "audit.html"),
        "--out", str(out / "audit.json"),
    ]  # fmt: skip
    print("audit it with:", file=sys.stderr)
    print(shlex.join(command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
