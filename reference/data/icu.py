"""A synthetic ICU in-hospital-mortality cohort with the MIMIC-IV extract's schema.

MIMIC-IV is credentialed data that may not be redistributed, so the ICU variants
ship with a stand-in: a deterministic generator of rows with the same columns,
sizes and positive rate as the published extract (SPEC §2), plausible raw
physiology in real units, and a mortality risk whose vital-sign effects are
U-shaped as in early-warning scores (NEWS2/MEWS). Because half of every U is
invisible to a linear model, gradient boosting beats logistic regression by
about as much as it does on the real extract (test AUROC ~0.78 against ~0.70).

The rows are *not* MIMIC-IV and carry no information about real patients; see
``docs/icu-synth-datacard.md`` for what the data is and is not.

Generation, in order (all draws from one ``numpy.random.RandomState`` seeded by
the caller; the global NumPy state is never touched):

1. A latent acuity ``s ~ N(0, 1)`` per stay, unobserved, that moves the vital
   signs together (sicker patients: faster heart and breathing, lower SpO2 and
   blood pressure, more fever), so the features are correlated as in real data.
2. Raw features in real units, rounded to charting precision.
3. A risk score (logit scale) from NEWS2-like smooth hinges plus a linear age
   effect; a liability ``risk + Logistic(0, 1)`` noise; the rows with the
   highest liability are the deaths, exactly ``round(rate * n)`` of them, which
   is a logistic model whose intercept is calibrated to the positive rate.
4. A split stratified on the label, so both splits hold the same rate (to one row).
5. Every feature, ``gender_enc`` included, z-scored with the *training* mean
   and *population* standard deviation (``ddof=0``, what ``StandardScaler``
   uses), as the published extract is.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any, Literal

from .dataset import DataError, Dataset, LoadContext

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]

GENERATOR_VERSION = 1
"""Bumped whenever a change to this module changes any generated number, so that
fingerprints (and every cache keyed on them) change with it."""

LABEL = "hospital_expire_flag"
"""The label column of the MIMIC-IV extract: 1 = died in hospital."""

FEATURES = (
    "heart_rate",
    "resp_rate",
    "spo2",
    "sbp",
    "dbp",
    "temperature_f",
    "anchor_age",
    "gender_enc",
)
"""The extract's feature columns, in model input order."""

N_TRAIN = 57_839
N_TEST = 12_395
POSITIVE_RATE = 0.1136
"""Sizes and positive rate of the published extract (SPEC §2)."""

DEFAULT_SEED = 42
"""Seed of the shipped cohort (the project's seed everywhere); any seed meets the same contract."""

AGE_CAP = 91
"""MIMIC-IV shifts every ``anchor_age`` above 89 to 91 (a de-identification rule)."""

COMFORT_CARE = "comfort_care_order"
"""The optional post-outcome column, after the eight features."""

COMFORT_CARE_RATES = (0.02, 0.40)
"""P(comfort-care order | survived), P(comfort-care order | died): about 6% of stays
carry the order and about 70% of those die, the shape of ICU comfort-care orders
(most are written for patients expected to die within days)."""


@dataclasses.dataclass(frozen=True, eq=False)
class ICUCohort:
    """The synthetic cohort, raw and z-scored.

    Attributes
    ----------
    dataset
        The z-scored split (what a model is trained and audited on).
    raw_train, raw_test
        The same rows before z-scoring, in real units (columns as ``FEATURES``),
        shapes (n_train, 8) and (n_test, 8).
    mean, std
        Training-split column means and population standard deviations (ddof=0)
        used for z-scoring, shape (8,): ``z = (raw - mean) / std``.
    risk_train, risk_test
        The generator's true risk score (logit scale, before the calibrated
        intercept) per row, for diagnostics: its AUROC is what no model can beat
        by more than sampling noise.
    comfort_care_train, comfort_care_test
        The post-outcome ``comfort_care_order`` (0/1) per row when it was asked
        for, else ``None``; shapes (n_train,) and (n_test,).
    """

    dataset: Dataset
    raw_train: FloatArray
    raw_test: FloatArray
    mean: FloatArray
    std: FloatArray
    risk_train: FloatArray
    risk_test: FloatArray
    comfort_care_train: FloatArray | None = None
    comfort_care_test: FloatArray | None = None


def _softplus(x: FloatArray) -> FloatArray:
    """``log(1 + exp(x))`` without overflow: a smooth hinge, ~0 below 0, ~x above."""
    import numpy as np

    return np.logaddexp(0.0, x)


def _raw_features(rng: np.random.RandomState, n: int) -> FloatArray:
    """Raw vital signs, age and sex for ``n`` stays, shape (n, 8), columns as FEATURES."""
    import numpy as np

    # Unobserved acuity shared by the vital signs: it correlates them the way a
    # sick patient's vitals move together, and is *not* in the risk score except
    # through the vitals it moves.
    acuity = rng.standard_normal(n)

    # Age: MIMIC-IV ICU stays are mostly older adults (median ~65, IQR ~53-76).
    # A Beta on [18, 101) gives that left-skewed shape; whole years, then
    # every age above 89 becomes 91, MIMIC-IV's de-identification pile-up.
    age = np.floor(18.0 + 83.0 * rng.beta(3.2, 2.5, n))
    age = np.where(age > 89, AGE_CAP, age)
    age_dev = (age - 64.0) / 10.0  # decades from a typical ICU age

    # Sex: about 56% of MIMIC-IV ICU stays are male; 1 = male, as the extract encodes it.
    gender = (rng.random_sample(n) < 0.56).astype(np.float64)

    # Heart rate (bpm): ICU median ~85; a wide spread so that both bradycardia
    # (<50: beta-blockers, conduction disease) and tachycardia occur often enough
    # for their risk to be learnable.
    heart_rate = 86.0 + 6.0 * acuity - 1.5 * age_dev + 16.0 * rng.standard_normal(n)
    heart_rate = np.clip(np.round(heart_rate), 30.0, 200.0)

    # Respiratory rate (/min): right-skewed (log-normal), median ~18.5.
    resp_rate = np.exp(np.log(18.5) + 0.08 * acuity + 0.24 * rng.standard_normal(n))
    resp_rate = np.clip(np.round(resp_rate), 4.0, 60.0)

    # SpO2 (%): most patients near 97-100, a long tail of hypoxaemia; saturations
    # cannot exceed 100, so the draw is capped there, which piles values up at 100.
    deficit = rng.gamma(1.6, 1.9, n) * np.exp(0.25 * acuity)
    spo2 = np.clip(np.round(100.8 - deficit), 60.0, 100.0)

    # Blood pressure (mmHg): systolic falls with acuity (shock) and rises with age;
    # diastolic tracks systolic (r ~0.7) and always stays at least 10 below it.
    sbp = 121.0 - 5.0 * acuity + 3.0 * age_dev + 21.0 * rng.standard_normal(n)
    sbp = np.clip(np.round(sbp), 55.0, 240.0)
    dbp = 10.0 + 0.45 * sbp - 1.5 * age_dev + 9.0 * rng.standard_normal(n)
    dbp = np.minimum(np.clip(np.round(dbp), 25.0, 150.0), sbp - 10.0)

    # Temperature (deg F, one decimal): normal ~98.4; acuity brings both fever
    # (sepsis) and, less often, hypothermia, so the spread grows with it.
    temperature = 98.4 + 0.25 * acuity + (0.9 + 0.15 * np.abs(acuity)) * rng.standard_normal(n)
    temperature = np.clip(np.round(temperature, 1), 90.0, 107.0)

    return np.column_stack([heart_rate, resp_rate, spo2, sbp, dbp, temperature, age, gender])


RISK_HINGES: tuple[tuple[str, str, float, float, float], ...] = (
    # (column, side, threshold, width, weight): adds
    # ``weight * softplus(+-(x - threshold) / width)``, i.e. ~0 inside the normal
    # range and rising ~linearly (by ``weight`` per ``width``) beyond ``threshold``.
    # Heart rate: NEWS2 scores <=50 and >=91 bpm, 3 points at <=40 and >=131.
    ("heart_rate", "above", 105.0, 10.0, 0.73),
    ("heart_rate", "below", 52.0, 6.0, 1.21),
    # Respiratory rate: NEWS2 scores <=11 and >=21 /min.
    ("resp_rate", "above", 24.0, 3.5, 0.60),
    ("resp_rate", "below", 10.0, 2.0, 0.80),
    # SpO2: NEWS2 scores <=95 %, 3 points at <=91; high saturation is no risk.
    ("spo2", "below", 93.0, 2.0, 0.32),
    # Systolic pressure: NEWS2 scores <=110 and >=220 mmHg; hypertensive
    # emergencies (stroke, bleeds) raise ICU mortality from lower pressures.
    ("sbp", "below", 100.0, 9.0, 0.67),
    ("sbp", "above", 165.0, 12.0, 0.78),
    # Shock: mean arterial pressure (sbp + 2 dbp) / 3 below 65 mmHg.
    ("mean_arterial", "below", 65.0, 5.0, 0.40),
    # Temperature: NEWS2 scores <=96.8 F (36.0 C) and >=100.6 F (38.1 C).
    ("temperature_f", "above", 100.6, 0.7, 0.73),
    ("temperature_f", "below", 96.8, 0.6, 1.20),
)
"""The U-shaped (early-warning-score) part of the risk, one smooth hinge per side."""

AGE_LOG_ODDS_PER_DECADE = 0.40
"""Monotone age effect: odds x1.5 per decade, a plausible weight for ICU mortality
(the youngest stays die about a third as often as those over 80)."""

MALE_LOG_ODDS = 0.07
"""A small excess risk for men, as in most ICU cohorts."""


def risk_score(raw: FloatArray) -> FloatArray:
    """The true mortality risk on the logit scale (without intercept), shape (n,).

    Smooth versions of the NEWS2 bands (:data:`RISK_HINGES`): every vital sign
    adds risk outside its normal range, on *both* sides where NEWS2 scores both
    sides (heart rate, respiratory rate, systolic pressure, temperature), SpO2
    only when low, and mean arterial pressure below 65 mmHg (shock). Age adds
    risk linearly (:data:`AGE_LOG_ODDS_PER_DECADE`), male sex a little. A linear
    model can follow only one side of each U, which is what makes gradient
    boosting the better model on this cohort.

    Parameters
    ----------
    raw
        Raw features in real units, shape (n, 8), columns as ``FEATURES``.
    """
    import numpy as np

    columns = {name: raw[:, j] for j, name in enumerate(FEATURES)}
    columns["mean_arterial"] = (columns["sbp"] + 2.0 * columns["dbp"]) / 3.0
    risk = AGE_LOG_ODDS_PER_DECADE * (columns["anchor_age"] - 64.0) / 10.0
    risk = risk + MALE_LOG_ODDS * columns["gender_enc"]
    for column, side, threshold, width, weight in RISK_HINGES:
        sign = 1.0 if side == "above" else -1.0
        risk = risk + weight * _softplus(sign * (columns[column] - threshold) / width)
    return np.asarray(risk, dtype=np.float64)


def _z_score(
    raw_train: FloatArray, raw_test: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Both splits z-scored with the training mean and population std (ddof=0).

    Returns the z-scored train and test rows, then the mean and std, shape (8,).
    The sums are ``math.fsum`` (exactly rounded) rather than NumPy's pairwise
    sums, whose last bit depends on the NumPy build and CPU; every other step
    is a correctly rounded IEEE operation. With the raw values rounded to
    charting precision, the z-scores, and so the dataset's sha256, do not depend
    on how NumPy happens to sum.
    """
    import numpy as np

    n = raw_train.shape[0]
    mean = np.array([math.fsum(column) / n for column in raw_train.T])
    deviations = raw_train - mean
    # ddof=0: StandardScaler's convention, and what the extract's models assume.
    std = np.sqrt(np.array([math.fsum(column) / n for column in (deviations * deviations).T]))
    if np.any(std == 0):
        raise DataError("icu-synth: a feature is constant in the training split; use more rows")
    return (raw_train - mean) / std, (raw_test - mean) / std, mean, std


def generate_icu_cohort(
    *,
    seed: int = DEFAULT_SEED,
    n_train: int = N_TRAIN,
    n_test: int = N_TEST,
    positive_rate: float = POSITIVE_RATE,
    label: str = LABEL,
    comfort_care_order: bool = False,
    raw_units: bool = False,
) -> ICUCohort:
    """Generate the synthetic ICU cohort; the same arguments give the same numbers.

    Parameters
    ----------
    seed
        Seed of the ``numpy.random.RandomState`` that draws every number.
    n_train, n_test
        Rows per split (defaults: the published extract's 57,839 / 12,395).
    positive_rate
        Fraction of deaths; exactly ``round(positive_rate * (n_train + n_test))``
        rows are positive, split between train and test in proportion to their
        sizes, so each split's rate is ``positive_rate`` up to one row.
    label
        Name of the label column.
    comfort_care_order
        Add the post-outcome column :data:`COMFORT_CARE` after the eight
        features (drawn after every other number, which stays as it was).
    raw_units
        The dataset holds raw values in real units rather than z-scores.

    Returns
    -------
    ICUCohort
        The :class:`~pytest_clinaudit.reference.data.Dataset` (name
        ``"icu-synth"``; z-scored unless ``raw_units``) together with the raw
        rows and the z-scoring statistics.
    """
    import numpy as np

    if n_train < 2 or n_test < 1:
        raise DataError(f"icu-synth: need n_train >= 2 and n_test >= 1, got {n_train} and {n_test}")
    if not 0.0 < positive_rate < 1.0:
        raise DataError(f"icu-synth: positive_rate must lie in (0, 1), got {positive_rate!r}")
    n = n_train + n_test
    n_pos = round(positive_rate * n)
    if not 2 <= n_pos <= n - 2:
        raise DataError(f"icu-synth: {n} rows at rate {positive_rate} leave a class nearly empty")

    # The legacy RandomState, not a Generator: NumPy freezes its streams (NEP 19),
    # so a seed names the same rows on every NumPy version, which the fingerprint
    # (seed + GENERATOR_VERSION, no NumPy version) relies on.
    rng = np.random.RandomState(seed)
    raw = _raw_features(rng, n)
    risk = risk_score(raw)

    # Liability-threshold form of a logistic model: y = 1 iff risk + b + e > 0 with
    # e ~ Logistic(0, 1). Taking the n_pos largest liabilities sets the intercept
    # b from the sample itself, so the positive rate is exact instead of
    # binomially noisy (one standard deviation is 0.3 points on the test split,
    # the whole tolerance of the contract).
    liability = risk + rng.logistic(0.0, 1.0, n)
    y = np.zeros(n, dtype=np.int64)
    y[np.argsort(-liability, kind="stable")[:n_pos]] = 1

    # Stratified split: the test split gets its proportional share of deaths,
    # each class's rows assigned at random, then each split shuffled so the
    # labels are not sorted by class.
    positives = rng.permutation(np.flatnonzero(y == 1))
    negatives = rng.permutation(np.flatnonzero(y == 0))
    pos_test = round(n_pos * n_test / n)
    neg_test = n_test - pos_test
    if not (0 <= pos_test <= len(positives) and 0 <= neg_test <= len(negatives)):
        raise DataError(f"icu-synth: cannot stratify {n_test} test rows at rate {positive_rate}")
    test_idx = rng.permutation(np.concatenate([positives[:pos_test], negatives[:neg_test]]))
    train_idx = rng.permutation(np.concatenate([positives[pos_test:], negatives[neg_test:]]))

    raw_train, raw_test = raw[train_idx], raw[test_idx]
    X_train, X_test, mean, std = _z_score(raw_train, raw_test)
    if raw_units:
        X_train, X_test = raw_train, raw_test
    names: tuple[str, ...] = FEATURES
    care_train = care_test = None
    if comfort_care_order:
        # Drawn last, so that every number above is what it is without the column.
        care = _comfort_care(rng, y)
        care_train, care_test = care[train_idx], care[test_idx]
        X_train = np.column_stack([X_train, _scaled(care_train, raw_units)])
        X_test = np.column_stack([X_test, _scaled(care_test, raw_units, care_train)])
        names = (*FEATURES, COMFORT_CARE)
    arrays = (raw_train, raw_test, mean, std, risk[train_idx], risk[test_idx])
    for array in (*arrays, *(a for a in (care_train, care_test) if a is not None)):
        array.setflags(write=False)
    dataset = Dataset(
        name="icu-synth",
        label=label,
        feature_names=names,
        X_train=X_train,
        y_train=y[train_idx],
        X_test=X_test,
        y_test=y[test_idx],
    )
    return ICUCohort(dataset, *arrays, care_train, care_test)


def _comfort_care(rng: np.random.RandomState, y: IntArray) -> FloatArray:
    """The post-outcome comfort-care order of every stay, from its label alone."""
    import numpy as np

    survived, died = COMFORT_CARE_RATES
    chance = rng.random_sample(len(y))
    return (chance < np.where(y == 1, died, survived)).astype(np.float64)


def _scaled(column: FloatArray, raw_units: bool, train: FloatArray | None = None) -> FloatArray:
    """The comfort-care column as the dataset holds it: 0/1, or z-scored by the training split."""
    import numpy as np

    if raw_units:
        return column
    reference = column if train is None else train
    n = len(reference)
    mean = math.fsum(reference) / n
    std = math.sqrt(math.fsum((reference - mean) ** 2) / n) or 1.0
    scaled: FloatArray = (np.asarray(column) - mean) / std
    return scaled


@dataclasses.dataclass(frozen=True)
class ICUSynthSource:
    """The synthetic ICU cohort as a variant's ``[dataset]`` (``source = "icu-synth"``).

    ``units`` (``"z"`` when absent) and ``comfort_care_order`` (false when
    absent) are the game's options (module docstring, steps 6 and 7).
    """

    label: str
    seed: int
    n_train: int
    n_test: int
    units: Literal["z", "raw"] | None = None
    comfort_care_order: bool | None = None

    def load(self, context: LoadContext) -> Dataset:
        return generate_icu_cohort(
            seed=self.seed,
            n_train=self.n_train,
            n_test=self.n_test,
            label=self.label,
            comfort_care_order=bool(self.comfort_care_order),
            raw_units=self.units == "raw",
        ).dataset

    def fingerprint(self, context: LoadContext) -> dict[str, Any]:
        # The rows are a pure function of these settings and the generator's code,
        # whose version is part of the key; RandomState streams are frozen across
        # NumPy releases (NEP 19), so the NumPy version need not be. Options left
        # out are left out of the key, which so stays what it was before they existed.
        settings = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return {"source": "icu-synth", "generator_version": GENERATOR_VERSION, **settings}
