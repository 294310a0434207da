"""FLCHAIN: 5-year mortality of the Mayo Clinic serum free light chain study (real patients).

7,874 residents of Olmsted County, Minnesota, aged 50 or more, who gave a blood
sample between 1995 and 2003 (Dispenzieri et al. 2012), followed for death.
scikit-survival ships the table (``sksurv.datasets.load_flchain``, from R's
``survival`` package); see docs/flchain-datacard.md for the card.

Prognosis: death within 5 years (1,826 days) of the blood sample, made at the
sample. Encoding (clinical units; the data dictionary is :data:`COLUMNS`):
``sex`` F/M becomes ``sex_male`` 1/0, ``mgus`` no/yes becomes 0/1,
``sample.yr`` and ``flc.grp`` become the numbers they name. ``creatinine`` is
missing for 1,350 subjects: imputed with the training median plus the
indicator ``creatinine_missing`` (:mod:`.cohort`), then every feature is
z-scored; or, with ``preparation = "clinical"`` (the torch variants, whose DP
epsilon must cover everything derived from the private rows), filled with the
public constant :data:`PUBLIC_FILL` and left in clinical units. ``chapter``, the ICD-9
chapter of the cause of death, exists only for those who died: it is recorded
after the outcome and is never a feature of a standard variant.

The auditing game (``flchain-game``, ``preparation = "raw"``) takes the raw
splits instead: clinical units, missing creatinine left missing (its models
fill it inside, with an indicator), and ``chapter`` as the number
``death_chapter`` (:data:`ICD9_CHAPTERS`; 0 for no death certificate), the
post-outcome column a shortcut model uses.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

from .cohort import (
    Cohort,
    Column,
    RawSplit,
    Subgroup,
    cohort_fingerprint,
    prepare,
    sksurv_loader,
)
from .dataset import DataError, Dataset, LoadContext

NAME = "flchain"
LABEL = "death_5y"
HORIZON_DAYS = 1826
"""5 years of 365.25 days, rounded down to whole days (follow-up is counted in days)."""

_AT_SAMPLE = "at the blood sample (baseline)"

COLUMNS = (
    Column("age", "age in years", _AT_SAMPLE, "age"),
    Column("sex_male", "sex: 1 = male, 0 = female", _AT_SAMPLE, "sex"),
    Column("sample_yr", "calendar year of the blood sample, 1995-2003", _AT_SAMPLE, "sample.yr"),
    Column("kappa", "serum free light chain, kappa portion, mg/dL", _AT_SAMPLE, "kappa"),
    Column("lambda", "serum free light chain, lambda portion, mg/dL", _AT_SAMPLE, "lambda"),
    Column(
        "flc_grp",
        "free light chain group 1-10 (deciles of kappa + lambda in the original analysis)",
        _AT_SAMPLE,
        "flc.grp",
    ),
    Column(
        "creatinine",
        "serum creatinine, mg/dL; missing where it was not measured",
        _AT_SAMPLE,
        "creatinine",
    ),
    Column(
        "mgus",
        "diagnosed with monoclonal gammopathy of undetermined significance: 1 = yes, 0 = no",
        _AT_SAMPLE,
        "mgus",
    ),
)
"""The raw features, in scikit-survival's file order."""

POST_OUTCOME_COLUMNS = (
    Column(
        "chapter",
        "ICD-9 chapter of the primary cause of death (text); empty for those alive at last contact",
        "at death, after the outcome (death certificate)",
        "chapter",
        post_outcome=True,
    ),
)

IMPUTED = ("creatinine",)

PUBLIC_FILL = {"creatinine": 0.95}
"""The ``"clinical"`` preparation's fill for a missing creatinine, mg/dL: the middle of
the adult reference interval 0.6-1.3 mg/dL (women 0.6-1.1, men 0.7-1.3; MedlinePlus,
"Creatinine blood test"). A published constant, not the training median, so that no
statistic of the training rows enters the CSVs a DP model is trained on."""

Preparation = Literal["z-scored", "clinical", "raw"]
"""``"z-scored"`` (the default, the sps-v1 variants): training-median fill and training
z-scores. ``"clinical"``: :data:`PUBLIC_FILL` and clinical units, no training statistic.
``"raw"`` (the game): clinical units, missing cells left NaN, ``death_chapter`` appended."""

ICD9_CHAPTERS = {
    "Infectious": 1,
    "Neoplasms": 2,
    "Endocrine": 3,
    "Blood": 4,
    "Mental": 5,
    "Nervous": 6,
    "Circulatory": 7,
    "Respiratory": 8,
    "Digestive": 9,
    "Genitourinary": 10,
    "Skin": 12,
    "Musculoskeletal": 13,
    "Congenital": 14,
    "Ill Defined": 16,
    "Injury and Poisoning": 17,
    "External Causes": 18,
}
"""scikit-survival's ``chapter`` labels as ICD-9 chapter numbers (1 infectious and
parasitic diseases ... 17 injury and poisoning; the chapters without a death here,
11 pregnancy and 15 perinatal, keep their numbers), with 18 for the supplementary
classification of external causes (E codes). 0: no death certificate."""

CHAPTER_COLUMN = "death_chapter"

Stratify = Literal["outcome", "outcome-and-subgroups"]
"""How the split is stratified: by the outcome (the default), or by the outcome within every
age band and sex of :data:`SUBGROUPS` (the game, whose subgroups' rates must agree between
the splits: a flattened subgroup reads its training rate on the test split)."""

SUBGROUPS = (
    Subgroup("age 50-64", "age", 50.0, 65.0),
    Subgroup("age 65-79", "age", 65.0, 80.0),
    Subgroup("age >= 80", "age", 80.0, float("inf")),
    Subgroup("female", "sex_male", 0.0, 0.5),
    Subgroup("male", "sex_male", 0.5, float("inf")),
)
"""The cohort's age bands (everyone is 50 or older) and sexes."""


def load_flchain_cohort(
    *,
    label: str = LABEL,
    horizon_days: float = HORIZON_DAYS,
    test_size: float = 0.2,
    split_seed: int = 42,
    preparation: Preparation = "z-scored",
    stratify: Stratify = "outcome",
) -> Cohort:
    """FLCHAIN labelled, split, imputed and z-scored (:func:`.cohort.prepare`), with its raw rows.

    ``preparation = "clinical"`` fills with :data:`PUBLIC_FILL` and keeps clinical units;
    ``"raw"`` is that cohort with the dataset of :func:`raw_dataset`. ``stratify =
    "outcome-and-subgroups"`` stratifies the split by the outcome within every age band
    and sex (:data:`SUBGROUPS`).

    Raises
    ------
    DataError
        scikit-survival is not installed (one line naming the extra), or a
        setting is impossible.
    """
    import numpy as np

    frame, outcome = sksurv_loader("load_flchain", NAME)()
    as_number = {"sample.yr": int, "flc.grp": int}
    encoded = []
    for column in COLUMNS:
        values = frame[column.source]
        if column.source == "sex":
            encoded.append((values == "M").to_numpy(dtype=np.float64))
        elif column.source == "mgus":
            encoded.append((values == "yes").to_numpy(dtype=np.float64))
        elif column.source in as_number:
            encoded.append(values.astype(str).astype(int).to_numpy(dtype=np.float64))
        else:
            encoded.append(values.to_numpy(dtype=np.float64, na_value=np.nan))
    chapter = tuple("" if isinstance(v, float) else str(v) for v in frame["chapter"].astype(object))
    return prepare(
        name=NAME,
        label=label,
        columns=COLUMNS,
        post_outcome_columns=POST_OUTCOME_COLUMNS,
        X=np.column_stack(encoded),
        time=np.asarray(outcome["futime"], dtype=np.float64),
        event=np.asarray(outcome["death"], dtype=np.bool_),
        post_outcome={"chapter": chapter},
        horizon_days=horizon_days,
        imputed=IMPUTED,
        subgroups=SUBGROUPS,
        test_size=test_size,
        split_seed=split_seed,
        fill=PUBLIC_FILL if preparation != "z-scored" else None,
        zscore=preparation == "z-scored",
        stratify_subgroups=stratify == "outcome-and-subgroups",
    )


def chapter_codes(chapters: tuple[str, ...]) -> Any:
    """``death_chapter`` of each row: its ICD-9 chapter number, 0 where there is none."""
    import numpy as np

    unknown = sorted({c for c in chapters if c and c not in ICD9_CHAPTERS})
    if unknown:
        raise DataError(f"{NAME}: chapter labels without an ICD-9 number: {', '.join(unknown)}")
    return np.array([ICD9_CHAPTERS.get(c, 0) for c in chapters], dtype=np.float64)


def raw_dataset(cohort: Cohort) -> Dataset:
    """The game's splits: the raw features in clinical units (NaN where missing) and
    ``death_chapter`` last, recorded after the outcome."""
    import numpy as np

    def features(split: RawSplit) -> Any:
        codes = chapter_codes(split.post_outcome["chapter"])
        return np.column_stack([split.X, codes])

    return Dataset(
        name=NAME,
        label=cohort.dataset.label,
        feature_names=(*cohort.feature_names, CHAPTER_COLUMN),
        X_train=features(cohort.train),
        y_train=cohort.train.y,
        X_test=features(cohort.test),
        y_test=cohort.test.y,
    )


@dataclasses.dataclass(frozen=True)
class FLChainSource:
    """FLCHAIN from scikit-survival as a variant's ``[dataset]`` (``source = "flchain"``)."""

    label: str
    horizon_days: int
    test_size: float
    split_seed: int
    preparation: Preparation | None = None
    """``None`` is ``"z-scored"``, the sps-v1 variants' CSVs; ``"clinical"``: see the module."""
    stratify: Stratify | None = None
    """``None`` is ``"outcome"`` (:data:`Stratify`)."""

    def _settings(self) -> dict[str, Any]:
        # Defaults are left out, so the sps-v1 variants' cache keys stay what they were.
        settings = dataclasses.asdict(self)
        for key in ("preparation", "stratify"):
            if settings[key] is None:
                del settings[key]
        return settings

    def load(self, context: LoadContext) -> Dataset:
        cohort = load_flchain_cohort(**self._settings())
        return raw_dataset(cohort) if self.preparation == "raw" else cohort.dataset

    def fingerprint(self, context: LoadContext) -> dict[str, Any]:
        return cohort_fingerprint(NAME, self._settings())
