"""Membership-inference resistance (SPEC §3.2): the shadow-model attack."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from .classifier import Classifier
from .params import MembershipParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    FloatArray = npt.NDArray[np.float64]
    IntArray = npt.NDArray[np.int64]


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
