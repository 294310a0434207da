"""WHAS500: 1-year mortality after discharge from a heart attack (real patients).

500 patients admitted with an acute myocardial infarction to hospitals of
Worcester, Massachusetts, in 1997, 1999 and 2001 (the Worcester Heart Attack
Study), followed for death (Hosmer, Lemeshow and May 2008). scikit-survival
ships the table (``sksurv.datasets.load_whas500``); see docs/whas500-datacard.md.

Prognosis: death within 1 year (365 days) of hospital discharge, made at
discharge, for the patients discharged alive. Every feature is known then:
admission values, in-hospital complications and the length of stay. The study's
discharge status is not in scikit-survival's copy; a patient whose follow-up
ends in death on the day the stay ends (``fstat = 1`` and ``lenfol == los``)
died in hospital and is left out, since a prognosis at discharge does not
concern them (and their length of stay would be their time to death, a leak).
Follow-up counts from admission, so the days after discharge are
``lenfol - los``. Every column is already numeric and 0/1-coded in the file;
only ``gender`` is renamed, to ``sex_female`` (the study's coding, 1 = female).
No value is missing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .cohort import Cohort, Column, Subgroup, cohort_fingerprint, prepare, sksurv_loader
from .dataset import DataError, Dataset, LoadContext

NAME = "whas500"
LABEL = "death_1y"
HORIZON_DAYS = 365
"""One year after discharge, in days."""

_ADMISSION = "at admission"
_STAY = "during the hospital stay (known at discharge)"

COLUMNS = (
    Column("age", "age at admission, years", _ADMISSION, "age"),
    Column("sex_female", "sex: 1 = female, 0 = male", _ADMISSION, "gender"),
    Column("hr", "initial heart rate, beats per minute", _ADMISSION, "hr"),
    Column("sysbp", "initial systolic blood pressure, mmHg", _ADMISSION, "sysbp"),
    Column("diasbp", "initial diastolic blood pressure, mmHg", _ADMISSION, "diasbp"),
    Column("bmi", "body mass index, kg/m2", _ADMISSION, "bmi"),
    Column("cvd", "history of cardiovascular disease: 1 = yes", _ADMISSION, "cvd"),
    Column("afb", "atrial fibrillation: 1 = yes", _STAY, "afb"),
    Column("sho", "cardiogenic shock: 1 = yes", _STAY, "sho"),
    Column("chf", "congestive heart complications: 1 = yes", _STAY, "chf"),
    Column("av3", "complete heart block: 1 = yes", _STAY, "av3"),
    Column("miord", "MI order: 1 = recurrent, 0 = first", _ADMISSION, "miord"),
    Column("mitype", "MI type: 1 = Q-wave, 0 = non Q-wave", _ADMISSION, "mitype"),
    Column("los", "length of hospital stay, days", "at discharge", "los"),
)
"""The raw features, in the study's file order."""

SUBGROUPS = (
    Subgroup("age < 65", "age", 0.0, 65.0),
    Subgroup("age 65-79", "age", 65.0, 80.0),
    Subgroup("age >= 80", "age", 80.0, float("inf")),
    Subgroup("male", "sex_female", 0.0, 0.5),
    Subgroup("female", "sex_female", 0.5, float("inf")),
)


def load_whas500_cohort(
    *,
    label: str = LABEL,
    horizon_days: float = HORIZON_DAYS,
    test_size: float = 0.2,
    split_seed: int = 42,
) -> Cohort:
    """WHAS500's discharged patients labelled, split and z-scored, with their raw rows.

    ``Cohort.train.time`` and ``.test.time`` count days from discharge.

    Raises
    ------
    DataError
        scikit-survival is not installed (one line naming the extra), or a
        setting is impossible.
    """
    import numpy as np

    frame, outcome = sksurv_loader("load_whas500", NAME)()
    X = np.column_stack(
        [frame[c.source].astype(str).astype(float).to_numpy(np.float64) for c in COLUMNS]
    )
    los = X[:, [c.name for c in COLUMNS].index("los")]
    lenfol = np.asarray(outcome["lenfol"], dtype=np.float64)
    died = np.asarray(outcome["fstat"], dtype=np.bool_)
    if np.any(lenfol < los):
        raise DataError(f"{NAME}: a follow-up ends before its hospital stay; not WHAS500's file")
    discharged_alive = ~(died & (lenfol == los))
    return prepare(
        name=NAME,
        label=label,
        columns=COLUMNS,
        post_outcome_columns=(),
        X=X[discharged_alive],
        time=(lenfol - los)[discharged_alive],
        event=died[discharged_alive],
        post_outcome={},
        horizon_days=horizon_days,
        imputed=(),
        subgroups=SUBGROUPS,
        test_size=test_size,
        split_seed=split_seed,
        source_rows=np.flatnonzero(discharged_alive),
    )


@dataclasses.dataclass(frozen=True)
class WHAS500Source:
    """WHAS500 from scikit-survival as a variant's ``[dataset]`` (``source = "whas500"``)."""

    label: str
    horizon_days: int
    test_size: float
    split_seed: int

    def load(self, context: LoadContext) -> Dataset:
        return load_whas500_cohort(**dataclasses.asdict(self)).dataset

    def fingerprint(self, context: LoadContext) -> dict[str, Any]:
        return cohort_fingerprint(NAME, dataclasses.asdict(self))
