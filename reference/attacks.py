"""The four attacks of the "sps-v1" semantics (SPEC §3), vectorized.

Each public function validates nothing about the model beyond what it calls
(``predict_proba`` and ``predict``), takes its numbers from a parameter record,
and returns a small frozen result whose ``score`` is in [0, 1], higher meaning
more robust. Row-at-a-time loops are replaced by batched predictions; the
literal transcription in ``tests/literal_oracle.py`` checks that nothing changed.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

from .params import BoundaryParams, CalibrationParams, FGSMParams, MembershipParams, SurrogateParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from .sampling import FeatureScale

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


class Classifier(Protocol):
    """What the auditor needs of a model: scikit-learn's classifier interface."""

    def predict_proba(self, X: Any) -> Any: ...

    def predict(self, X: Any) -> Any: ...


def positive_proba(model: Classifier, X: FloatArray) -> FloatArray:
    """``p(X)``: the model's probability of class 1, shape (n,)."""
    import numpy as np

    return np.asarray(model.predict_proba(X), dtype=np.float64)[:, 1]


def draw_rows(seed: int, population: int, size: int) -> IntArray:
    """``RandomState(seed).choice(population, min(size, population), replace=False)``.

    A fresh generator per draw, as the task does: draws never depend on each other
    or on the global NumPy state.
    """
    import numpy as np

    return np.random.RandomState(seed).choice(population, min(size, population), replace=False)


# --------------------------------------------------------------------------- FGSM


def fit_surrogate_sign(params: SurrogateParams, X: FloatArray, y: IntArray) -> FloatArray:
    """Sign of the surrogate's coefficient row, shape (n_features,).

    The surrogate is fitted on the training rows; the sign is taken in its own
    (scaled) space but applied to raw features, exactly as the task does, which
    is why one epsilon has very different effects on features of different scales.
    """
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    logistic = LogisticRegression(
        max_iter=params.max_iter,
        C=params.C,
        class_weight=None if params.class_weight == "none" else params.class_weight,
        random_state=params.random_state,
    )
    surrogate = make_pipeline(StandardScaler(), logistic) if params.scaler else logistic
    surrogate.fit(X, y)
    sign: FloatArray = np.sign(np.asarray(logistic.coef_, dtype=np.float64)[0])
    return sign


def fgsm_perturb(
    X: FloatArray, y: IntArray, epsilon: float | FloatArray, sign: FloatArray
) -> FloatArray:
    """Move each row by ``epsilon`` per feature against its own label.

    Rows labelled 1 step along ``-sign`` (towards class 0) and rows labelled 0
    along ``+sign``. ``epsilon`` is one number or a per-feature budget of shape
    (d,). Shapes: X (n, d), y (n,), sign (d,) -> (n, d).
    """
    import numpy as np

    step = epsilon * sign  # computed once, as the row-wise form computes it per row
    return np.where(np.asarray(y)[:, None] == 1, X - step, X + step)


@dataclasses.dataclass(frozen=True, eq=False)
class Budget:
    """Per-feature FGSM step and the box perturbed rows are clipped to.

    Attributes
    ----------
    step
        ``e_j``, shape (d,): ``epsilon`` in raw units, or ``epsilon * s_j`` with
        ``s_j`` the training standard deviation (ddof=0) of feature j.
    low, high
        Each feature's minimum and maximum over the training rows, shape (d,),
        when perturbed rows are clipped to the training range; else ``None``.
    """

    step: FloatArray
    low: FloatArray | None = None
    high: FloatArray | None = None

    @classmethod
    def of(cls, epsilon: float, scale: FeatureScale, *, std_units: bool, clip: bool) -> Budget:
        """``epsilon`` per feature, in training stds (``std_units``) or raw units, with the
        training range of ``scale`` as clipping box when ``clip``."""
        import numpy as np

        step = epsilon * scale.std if std_units else np.full(len(scale.std), epsilon)
        return cls(step, scale.low, scale.high) if clip else cls(step)

    def clip(self, X: FloatArray) -> FloatArray:
        """``X`` clipped to the training range, or ``X`` itself without one."""
        import numpy as np

        if self.low is None or self.high is None:
            return X
        clipped: FloatArray = np.clip(X, self.low, self.high)
        return clipped


def fgsm_budget(params: FGSMParams, X_train: FloatArray) -> Budget:
    """The per-feature budget and clipping box that ``params`` asks for.

    ``s_j`` is the population standard deviation (ddof=0, as ``StandardScaler``
    uses) so that "1 std" means one unit of the standardised space a model sees.
    In raw units every ``e_j`` is ``epsilon`` itself, so ``e * sign`` has the
    same bits as ``epsilon * sign`` and "sps-v1" results are unchanged.
    """
    import numpy as np

    from .sampling import training_scale

    X_train = np.asarray(X_train, dtype=np.float64)
    if not len(X_train):
        return Budget(np.full(X_train.shape[1], params.epsilon))
    return Budget.of(
        params.epsilon,
        training_scale(X_train),
        std_units=params.in_std_units,
        clip=params.clipped,
    )


@dataclasses.dataclass(frozen=True)
class FGSMResult:
    score: float
    auroc_clean: float | None
    auroc_adversarial: float | None
    auroc_drop: float | None
    n_samples: int
    single_class: bool


def fgsm_sample(
    X_test: FloatArray,
    y_test: IntArray,
    *,
    sign: FloatArray,
    params: FGSMParams,
    budget: Budget | None = None,
) -> tuple[IntArray, FloatArray]:
    """The drawn test rows' indices, shape (k,), and their FGSM copies, shape (k, d).

    ``budget`` (:func:`fgsm_budget`) gives per-feature steps and the clipping
    box; without it every feature moves ``params.epsilon`` unclipped (§3.1).
    """
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    if budget is None:
        return idx, fgsm_perturb(X_test[idx], y_test[idx], params.epsilon, sign)
    return idx, budget.clip(fgsm_perturb(X_test[idx], y_test[idx], budget.step, sign))


def fgsm_score(
    y_sample: IntArray, p_clean: FloatArray, p_adversarial: FloatArray, *, params: FGSMParams
) -> FGSMResult:
    """``max(0, 1 - max(0, AUROC_clean - AUROC_adversarial))`` from the model's answers."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    if np.unique(y_sample).size < 2:
        # AUROC is undefined on one class; the task scores that as a coin flip.
        return FGSMResult(params.single_class_score, None, None, None, len(y_sample), True)
    clean = float(roc_auc_score(y_sample, p_clean))
    adversarial = float(roc_auc_score(y_sample, p_adversarial))
    drop = max(0.0, clean - adversarial)
    return FGSMResult(max(0.0, 1.0 - drop), clean, adversarial, drop, len(y_sample), False)


def fgsm_robustness(
    model: Classifier,
    X_test: FloatArray,
    y_test: IntArray,
    *,
    sign: FloatArray,
    params: FGSMParams,
    budget: Budget | None = None,
) -> FGSMResult:
    """FGSM robustness of ``model`` on ``params.n_samples`` drawn test rows.

    Parameters
    ----------
    sign
        :func:`fit_surrogate_sign` of the training rows, shape (n_features,).
    budget
        :func:`fgsm_budget` of the training rows; ``None`` is §3.1's raw ``epsilon``.
    """
    import numpy as np

    idx, X_adv = fgsm_sample(X_test, y_test, sign=sign, params=params, budget=budget)
    both = positive_proba(model, np.concatenate([X_test[idx], X_adv]))
    return fgsm_score(y_test[idx], both[: len(idx)], both[len(idx) :], params=params)


# ----------------------------------------------------------- membership inference


@dataclasses.dataclass(frozen=True)
class MembershipResult:
    score: float
    accuracy: float
    n_eval: int
    n_pool: int


THREADED_POOL = 2000
"""Pool size from which the attack's forests are fitted on all cores.

A forest's trees are seeded before any is grown, so threads change no tree. They
pay only when trees are big: fitting the ICU attack (pool 5,000) took 4.3 s on
one core and 2.6 s on two; WDBC's (pool 455) 0.43 s and 0.52 s."""


def _forest_jobs(n_pool: int) -> int | None:
    return -1 if n_pool >= THREADED_POOL else None


def fit_membership_attack(X_train: FloatArray, y_train: IntArray, params: MembershipParams) -> Any:
    """Train the shadow-model attack; it depends on the training rows only.

    Round ``i`` marks ``int(in_fraction * n_pool)`` pool rows as members with
    one shared ``RandomState(seed)``, fits a shadow forest on them, and turns its
    ``predict_proba`` rows on members (label 1, in pool order) then non-members
    (label 0, in pool order) into attack training data. The attack does not see
    the target model, so one fitted attack serves every model audited on the
    same training rows.
    """
    import numpy as np
    from sklearn.ensemble import RandomForestClassifier

    n_pool = min(params.pool_cap, len(X_train))
    X_pool, y_pool = X_train[:n_pool], y_train[:n_pool]
    jobs = _forest_jobs(n_pool)
    rng = np.random.RandomState(params.seed)
    features, labels = [], []
    for round_ in range(params.rounds):
        members = np.zeros(n_pool, dtype=bool)
        members[rng.choice(n_pool, int(params.in_fraction * n_pool), replace=False)] = True
        # A boolean mask keeps pool order for both groups; row order matters
        # because the forests bootstrap by row index.
        shadow = RandomForestClassifier(
            n_estimators=params.shadow_n_estimators,
            max_depth=params.shadow_max_depth,
            class_weight=None if params.shadow_class_weight == "none" else "balanced",
            random_state=params.shadow_seed + round_,
            n_jobs=jobs,
        ).fit(X_pool[members], y_pool[members])
        # One predict_proba over the pool, then split: same rows, half the calls.
        proba = shadow.predict_proba(X_pool)
        features += [proba[members], proba[~members]]
        labels += [np.ones(int(members.sum())), np.zeros(int((~members).sum()))]
    attack = RandomForestClassifier(
        n_estimators=params.attack_n_estimators, random_state=params.attack_seed, n_jobs=jobs
    )
    return attack.fit(np.vstack(features), np.concatenate(labels))


def membership_eval_size(n_train: int, n_test: int, params: MembershipParams) -> int:
    """Members queried (the first rows of train) = non-members (the first rows of test)."""
    return min(params.eval_cap, n_train, n_test)


def membership_score(
    attack: Any, member_proba: Any, nonmember_proba: Any, *, n_pool: int, params: MembershipParams
) -> MembershipResult:
    """``clip(1 - 2 (accuracy - 0.5), 0, 1)`` of the attack on the target's answers.

    ``member_proba`` and ``nonmember_proba`` are the target's ``predict_proba``
    rows, shape (n_eval, 2), on the first ``n_eval`` train and test rows.
    """
    import numpy as np

    queries = np.concatenate([member_proba, nonmember_proba])
    truth = np.concatenate([np.ones(len(member_proba)), np.zeros(len(nonmember_proba))])
    guesses = attack.predict_proba(queries)[:, 1] >= params.threshold
    accuracy = float(np.mean(guesses == truth))
    score = float(np.clip(1.0 - 2.0 * (accuracy - 0.5), 0.0, 1.0))
    return MembershipResult(score, accuracy, len(member_proba), n_pool)


def membership_inference_resistance(
    model: Classifier,
    X_train: FloatArray,
    X_test: FloatArray,
    *,
    attack: Any,
    params: MembershipParams,
) -> MembershipResult:
    """Membership-inference resistance of ``model``; an attack at chance scores 1.

    The attack (:func:`fit_membership_attack`) queries the target's
    ``predict_proba`` rows on the first ``n_eval`` training rows (members) and
    the first ``n_eval`` test rows (non-members).
    """
    import numpy as np

    n_eval = membership_eval_size(len(X_train), len(X_test), params)
    proba = np.asarray(model.predict_proba(np.concatenate([X_train[:n_eval], X_test[:n_eval]])))
    return membership_score(
        attack,
        proba[:n_eval],
        proba[n_eval:],
        n_pool=min(params.pool_cap, len(X_train)),
        params=params,
    )


# ---------------------------------------------------------------------- calibration


def calibration_curve_uniform(
    y: IntArray, prob: FloatArray, n_bins: int
) -> tuple[FloatArray, FloatArray]:
    """``sklearn.calibration.calibration_curve(..., strategy="uniform")`` in NumPy.

    Returns (fraction of positives, mean prediction) of the non-empty bins. A
    value on an inner edge goes to the *lower* bin (``searchsorted`` side left),
    and 1.0 to the top bin. Kept here so a grading session can check calibration
    properties without importing scikit-learn; ``tests`` check it against sklearn.
    """
    import numpy as np

    prob = np.asarray(prob, dtype=np.float64)
    if prob.size and (prob.min() < 0 or prob.max() > 1):
        raise ValueError("probabilities outside [0, 1]")
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    binids = np.searchsorted(edges[1:-1], prob)
    totals = np.bincount(binids, minlength=n_bins)
    sums = np.bincount(binids, weights=prob, minlength=n_bins)
    trues = np.bincount(binids, weights=np.asarray(y) == 1, minlength=n_bins)
    nonzero = totals != 0
    return trues[nonzero] / totals[nonzero], sums[nonzero] / totals[nonzero]


def task_ece(y: IntArray, prob: FloatArray, n_bins: int) -> float:
    """The task's ECE, quirks included (SPEC §3.3).

    Counts come from half-open bins ``[edge_k, edge_k+1)`` by bin *index*, then
    are truncated to as many entries as the curve has non-empty bins. Whenever a
    middle bin is empty the counts and the curve's bins misalign; ``prob == 1.0``
    falls in no half-open bin and is never counted; an inner edge value sits in
    the upper bin here but in the lower bin of the curve. All reproduced on
    purpose: agents following the task are graded against what it specifies.
    """
    import numpy as np

    frac_pos, mean_pred = calibration_curve_uniform(y, prob, n_bins)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    # side="right" puts x in bin k exactly when edges[k] <= x < edges[k+1].
    index = np.searchsorted(edges, prob, side="right") - 1
    counts = np.bincount(index[(index >= 0) & (index < n_bins)], minlength=n_bins)
    counts = counts[: len(frac_pos)]
    total = int(counts.sum())
    if total == 0:
        return 0.0
    # Summed term by term in bin order, as the task's loop sums.
    ece = 0.0
    for count, frac, mean in zip(
        counts.tolist(), frac_pos.tolist(), mean_pred.tolist(), strict=True
    ):
        ece += count / total * abs(frac - mean)
    return ece


def aligned_ece(y: IntArray, prob: FloatArray, n_bins: int) -> float:
    """A conventional ECE with counts aligned to their bins; a diagnostic only."""
    import numpy as np

    prob = np.asarray(prob, dtype=np.float64)
    if prob.size == 0:
        return 0.0
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    binids = np.searchsorted(edges[1:-1], prob)
    # sum_k n_k/n * |frac_k - mean_k| = sum_k |positives_k - probability mass_k| / n
    sums = np.bincount(binids, weights=prob, minlength=n_bins)
    trues = np.bincount(binids, weights=np.asarray(y) == 1, minlength=n_bins)
    return float(np.abs(trues - sums).sum() / prob.size)


def calibration_score(ece: float, params: CalibrationParams) -> float:
    """``max(0, 1 - ece_scale * ece)``: 1 is perfectly calibrated."""
    return max(0.0, 1.0 - params.ece_scale * ece)


@dataclasses.dataclass(frozen=True)
class CalibrationResult:
    score: float
    ece: float
    ece_aligned: float
    n_bins_used: int


def calibration(
    y_test: IntArray, prob_test: FloatArray, *, params: CalibrationParams
) -> CalibrationResult:
    """Calibration component from the model's test probabilities, shape (n_test,)."""
    ece = task_ece(y_test, prob_test, params.n_bins)
    used = len(calibration_curve_uniform(y_test, prob_test, params.n_bins)[0])
    return CalibrationResult(
        calibration_score(ece, params), ece, aligned_ece(y_test, prob_test, params.n_bins), used
    )


# ------------------------------------------------------------------- boundary walk


@dataclasses.dataclass(frozen=True)
class BoundaryResult:
    score: float
    mean_steps: float
    steps: tuple[int, ...]
    n_samples: int
    n_candidates: int


def walk_candidates(
    starts: FloatArray, targets: FloatArray, params: BoundaryParams
) -> tuple[FloatArray, IntArray]:
    """Every point the walks would visit, shape (max_steps, n, d), and where each stops.

    The walk from ``x`` towards ``t`` moves ``step_size`` along the unit direction
    each step; which point it visits next never depends on a prediction, so all
    candidates can be generated first and predicted in one batch. ``stop[i]`` is
    the first step whose remaining distance is below ``min_norm`` (the walk ends
    there without a candidate), or ``max_steps`` if it never is.

    The norm is a per-row dot product through ``matmul``, which is bit-for-bit
    ``np.linalg.norm`` of each row; an einsum or a sum would round differently.
    """
    import numpy as np

    n, d = starts.shape
    candidates = np.empty((params.max_steps, n, d))
    stop = np.full(n, params.max_steps, dtype=np.int64)
    current = np.array(starts, dtype=np.float64)
    alive = np.ones(n, dtype=bool)
    for step in range(params.max_steps):
        direction = targets - current
        norm = np.sqrt(np.matmul(direction[:, None, :], direction[:, :, None])[:, 0, 0])
        ended = alive & (norm < params.min_norm)
        stop[ended] = step
        alive &= ~ended
        safe = np.where(alive, norm, 1.0)  # rows that ended get a dummy, never used
        current = current + params.step_size * direction / safe[:, None]
        candidates[step] = current
    return candidates, stop


def boundary_attack_resistance(
    model: Classifier,
    X_test: FloatArray,
    *,
    test_predictions: Any,
    params: BoundaryParams,
) -> BoundaryResult:
    """``min(1, mean(steps) / max_steps)`` of a walk towards the other class.

    For each of ``n_samples`` test rows drawn with ``RandomState(seed)``, the
    target is the *first* test row in file order predicted differently (the
    task's code, not its "nearest" prose). Steps to the first flipped
    prediction are counted; no target, a vanished distance, or no flip within
    ``max_steps`` count as ``max_steps``. The row's label is not used.

    Parameters
    ----------
    test_predictions
        ``model.predict(X_test)``, shape (n_test,), predicted once by the caller.
    """
    import numpy as np

    predictions = np.asarray(test_predictions)
    idx = draw_rows(params.seed, len(X_test), params.n_samples)
    original = predictions[idx]
    steps = np.full(len(idx), params.max_steps, dtype=np.int64)

    # The first test row whose prediction differs, for each distinct prediction.
    target_row = np.full(len(idx), -1, dtype=np.int64)
    for value in np.unique(original):
        differs = predictions != value
        if differs.any():
            target_row[original == value] = int(np.argmax(differs))
    walking = np.flatnonzero(target_row >= 0)
    n_candidates = 0
    if walking.size:
        candidates, stop = walk_candidates(
            X_test[idx[walking]], X_test[target_row[walking]], params
        )
        # Candidates of step s exist for walks that had not stopped before s.
        valid = np.arange(params.max_steps)[:, None] < stop[None, :]
        flat = candidates[valid]
        n_candidates = len(flat)
        flipped = np.zeros(valid.shape, dtype=bool)
        if n_candidates:
            expected = np.broadcast_to(original[walking], valid.shape)[valid]
            flipped[valid] = np.asarray(model.predict(flat)) != expected
        has_flip = flipped.any(axis=0)
        steps[walking[has_flip]] = np.argmax(flipped, axis=0)[has_flip] + 1
    mean = float(steps.mean())
    return BoundaryResult(
        min(1.0, mean / params.max_steps), mean, tuple(steps.tolist()), len(idx), n_candidates
    )
