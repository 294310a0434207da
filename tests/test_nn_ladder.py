"""The known-answer ladder (SPEC §7.4): defences the audit must rank as theory predicts.

Each claim is checked on the variants' own models and on replicates trained
with the next seeds (same recipe and rows; other initialisation, batch order,
PGD starts and DP noise): :data:`SEEDS` models per recipe. The interval is a
paired bootstrap over the attacked rows of the difference averaged over the
seeds (:func:`~pytest_clinaudit.reference.attacks.privacy.bootstrap_mean_auc_difference`);
a claim holds when the interval lies on the predicted side of 0 *and* every
seed's own difference does. Every number lands in the JUnit XML
(``user_properties``), so the table in docs/nn-variants.md can be read off a run.

What theory predicts and does not hold here is a finding (docs/nn-variants.md).
Its test asserts the finding as published, with a bound that holds on every
CPU's kernels (:data:`FINDINGS`), so a finding that stops holding fails the test
and the doc is brought up to date: nothing is skipped, nothing passes whatever
happens.
"""

from __future__ import annotations

import functools
from typing import Any

import nn_helpers
import numpy as np
import pytest

from pytest_clinaudit.reference import attacks
from pytest_clinaudit.reference.attacks import privacy, whitebox

SEEDS = 3
"""Training seeds per recipe: the variant's own and the next two."""

LADDER_ROWS = {"wdbc-mlp": 114, "icu-synth-mlp": 1000, "flchain-mlp": 1000}
"""Test rows the strong PGD attacks in the ladder: all of WDBC's, a seeded
1,000 of the ICU cohort's (~114 deaths: the 100 FGSM rows hold ~11) and of
FLCHAIN's 1,536 (116 deaths)."""

USABLE = 0.05
"""A control's full-test AUROC may be at most this much below the plain model's."""
FLOOR = {"icu-synth-mlp": 0.70, "flchain-mlp": 0.75}
"""... and at least this: 0.70 on the ICU cohort (SPEC §7.4); on FLCHAIN 0.75, against
the 0.807 of flchain-baseline's logistic regression (every control measured 0.79-0.81)."""

FINDINGS: dict[tuple[str, str], str] = {
    ("leak", "wdbc-mlp"): (
        "no usable WDBC MLP tried leaks at 0.62 on its 114 members; most test rows are as "
        "confidently right as the training rows (best 0.545)"
    ),
    ("leak", "icu-synth-mlp"): (
        "on 8 noisy features the loss attack stays below 0.60 even for models overfit to "
        "300-2,000 rows, whose AUROC falls to 0.62-0.65"
    ),
    ("dp", "wdbc-mlp"): (
        "the plain WDBC MLP barely leaks (0.52-0.53), so there is nothing for DP to remove "
        "that 114 members and non-members can resolve: the interval reaches below 0"
    ),
    (
        "noise",
        "wdbc-mlp",
    ): "clipping alone leaks as little as DP on WDBC: the interval reaches below 0",
    ("noise", "icu-synth-mlp"): (
        "on the ICU cohort clipping alone removes nearly all the leakage DP removes: the "
        "noise adds less than 0.02 of loss-attack AUC (about 0.004 measured)"
    ),
    ("leak", "flchain-mlp"): (
        "the FLCHAIN MLP trained on all 6,143 rows barely leaks to the loss attack on its "
        "1,536 members (0.510-0.513 over three seeds)"
    ),
    ("dp", "flchain-mlp"): (
        "the plain FLCHAIN MLP barely leaks (0.51), so DP has nothing to remove: plain and "
        "DP differ by 0.001 and the interval reaches below 0"
    ),
    ("noise", "flchain-mlp"): (
        "clipping alone leaks as little as DP on FLCHAIN: the interval reaches below 0"
    ),
}
"""(claim, family) -> the published finding (docs/nn-variants.md) that its test asserts."""

NOISE_BOUNDS = {"icu-synth-mlp": 0.02}
"""Families whose noise finding is a bound rather than an interval reaching below 0: the
upper 95% limit of what DP's noise removes beyond clipping (0.009 measured on ICU) stays
below it, against the 0.034 that DP removes in all. An interval whose lower end sits at
-0.0002 would make "reaches below 0" a coin flip between CPUs; the bound does not."""


def _claim(claim: str, families: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(
            family,
            id=f"{family}-finding" if (claim, family) in FINDINGS else family,
            marks=[nn_helpers.NEEDS_SKSURV] if family == "flchain-mlp" else [],
        )
        for family in families
    ]


LADDER_FAMILIES = ("wdbc-mlp", "icu-synth-mlp", "flchain-mlp")


def _record(request: pytest.FixtureRequest, **values: Any) -> None:
    for key, value in values.items():
        request.node.user_properties.append((key, value))


def _split(y: Any, scores: Any) -> tuple[Any, Any]:
    """(scores of label-1 rows, scores of label-0 rows): an AUROC's two samples."""
    y = np.asarray(y)
    return scores[y == 1], scores[y == 0]


# ------------------------------------------------------------------ usability


@pytest.mark.slow
@pytest.mark.parametrize("family", nn_helpers.cases(LADDER_FAMILIES))
def test_every_control_is_a_usable_model(family: str, request: pytest.FixtureRequest) -> None:
    """SPEC §7.4: full-test AUROC at most 0.05 below the plain model's, and above the
    cohort's floor (:data:`FLOOR`: >= 0.70 on ICU, >= 0.75 on FLCHAIN)."""
    y = nn_helpers.dataset(family).y_test
    auroc = {
        suffix: privacy.attack_auc(
            *_split(y, np.array(nn_helpers.reference(f"{family}{suffix}").test_probabilities))
        )
        for suffix in nn_helpers.SUFFIXES
    }
    _record(request, full_test_auroc=auroc)
    for suffix in nn_helpers.SUFFIXES[1:]:
        assert auroc[suffix] >= auroc[""] - USABLE, (suffix, auroc)
        if family in FLOOR:
            assert auroc[suffix] >= FLOOR[family], (suffix, auroc)


# ------------------------------------------------------- PGD training and PGD


@functools.cache
def _strong_pgd_scores(name: str, offset: int) -> tuple[Any, Any]:
    """Logits of the strong PGD copies of the ladder rows, split by label."""
    family = name.removesuffix("-pgd")
    variant, data = nn_helpers.variant(name), nn_helpers.dataset(name)
    fgsm = variant.params.fgsm
    assert fgsm.pgd_steps is not None
    assert fgsm.pgd_restarts is not None
    idx = attacks.draw_rows(fgsm.seed, data.n_test, LADDER_ROWS[family])
    budget = attacks.fgsm_budget(fgsm, data.X_train)
    model = nn_helpers.seeded(name, offset)
    X_adv = whitebox.margin_pgd(
        model,
        data.X_test[idx],
        data.y_test[idx],
        budget=budget,
        steps=fgsm.pgd_steps,
        restarts=fgsm.pgd_restarts,
        seed=fgsm.seed,
    )
    return _split(data.y_test[idx], model.logits(X_adv).astype(np.float64))


@pytest.mark.slow
@pytest.mark.parametrize("family", _claim("pgd", LADDER_FAMILIES))
def test_pgd_training_beats_plain_training_on_the_strong_pgd_auroc(
    family: str, request: pytest.FixtureRequest
) -> None:
    """Madry et al. 2018: training on the worst case in the box raises the AUROC that
    the strongest attack in that box leaves (higher is more robust)."""
    defended = [_strong_pgd_scores(f"{family}-pgd", k) for k in range(SEEDS)]
    plain = [_strong_pgd_scores(family, k) for k in range(SEEDS)]
    per_seed = [
        privacy.attack_auc(*d) - privacy.attack_auc(*p)
        for d, p in zip(defended, plain, strict=True)
    ]
    gain = privacy.bootstrap_mean_auc_difference(defended, plain)
    _record(
        request,
        strong_pgd_auroc_plain=[privacy.attack_auc(*p) for p in plain],
        strong_pgd_auroc_pgd_trained=[privacy.attack_auc(*d) for d in defended],
        gain_per_seed=per_seed,
        gain_mean_ci95=[gain.estimate, gain.low, gain.high],
    )
    assert gain.low > 0.0, gain
    assert min(per_seed) > 0.0, per_seed


# ------------------------------------------------------------ DP and leakage


@functools.cache
def _member_scores(name: str, offset: int) -> tuple[Any, Any]:
    """``-loss`` of the first n_eval training rows (members) and test rows (non-members)."""
    variant, data = nn_helpers.variant(name), nn_helpers.dataset(name)
    n_eval = min(variant.params.membership_inference.eval_cap, data.n_train, data.n_test)
    model = nn_helpers.seeded(name, offset)
    members = -model.row_losses(data.X_train[:n_eval], data.y_train[:n_eval])
    nonmembers = -model.row_losses(data.X_test[:n_eval], data.y_test[:n_eval])
    return members, nonmembers


def _leak_difference(
    more: str, less: str, request: pytest.FixtureRequest
) -> tuple[privacy.Difference, list[float]]:
    """Loss-attack AUC of ``more`` minus that of ``less``: mean over seeds and per seed."""
    a = [_member_scores(more, k) for k in range(SEEDS)]
    b = [_member_scores(less, k) for k in range(SEEDS)]
    per_seed = [privacy.attack_auc(*x) - privacy.attack_auc(*y) for x, y in zip(a, b, strict=True)]
    difference = privacy.bootstrap_mean_auc_difference(a, b)
    _record(
        request,
        **{
            f"loss_attack_auc[{more}]": [privacy.attack_auc(*x) for x in a],
            f"loss_attack_auc[{less}]": [privacy.attack_auc(*y) for y in b],
            "difference_per_seed": per_seed,
            "difference_mean_ci95": [difference.estimate, difference.low, difference.high],
        },
    )
    return difference, per_seed


@pytest.mark.slow
@pytest.mark.parametrize("family", _claim("dp", LADDER_FAMILIES))
def test_dp_leaks_less_than_the_same_recipe_without_privacy(
    family: str, request: pytest.FixtureRequest
) -> None:
    """Abadi et al. 2016, compared as they ask: the same recipe with and without DP.
    A lower loss-attack AUC (Yeom et al. 2018) on the same members and non-members."""
    difference, per_seed = _leak_difference(family, f"{family}-dp", request)
    _record(request, dp_epsilon=nn_helpers.built(f"{family}-dp").record.epsilon)
    if ("dp", family) in FINDINGS:
        assert difference.low < 0.0, f"{FINDINGS['dp', family]}; now {difference}: update the doc"
        return
    assert difference.low > 0.0, difference
    assert min(per_seed) > 0.0, per_seed


@pytest.mark.slow
@pytest.mark.parametrize("family", _claim("noise", LADDER_FAMILIES))
def test_dps_noise_lowers_leakage_beyond_what_clipping_alone_does(
    family: str, request: pytest.FixtureRequest
) -> None:
    """The -clip ablation has DP's clipping and batches without its noise: what
    separates it from -dp is what epsilon describes."""
    difference, per_seed = _leak_difference(f"{family}-clip", f"{family}-dp", request)
    finding = FINDINGS.get(("noise", family))
    if family in NOISE_BOUNDS:
        bound = NOISE_BOUNDS[family]
        assert difference.high < bound, f"{finding}; now {difference}: update the doc"
        return
    if finding is not None:
        assert difference.low < 0.0, f"{finding}; now {difference}: update the doc"
        return
    assert difference.low > 0.0, difference
    assert min(per_seed) > 0.0, per_seed


CLEAR_LEAK = 0.62
"""The loss-attack AUC at which the overfit base "leaks clearly" (issue 17)."""


@pytest.mark.slow
@pytest.mark.parametrize("family", _claim("leak", LADDER_FAMILIES))
def test_the_overfit_base_leaks_clearly(family: str, request: pytest.FixtureRequest) -> None:
    """The ladder needs something to measure: the plain model's loss-attack AUC,
    on the variant and its replicates."""
    aucs = [privacy.attack_auc(*_member_scores(family, k)) for k in range(SEEDS)]
    _record(request, loss_attack_auc=aucs)
    if ("leak", family) in FINDINGS:
        assert max(aucs) < CLEAR_LEAK, f"{FINDINGS['leak', family]}; now {aucs}: update the doc"
        return
    assert min(aucs) >= CLEAR_LEAK


@pytest.mark.slow
@pytest.mark.parametrize("name", nn_helpers.cases(f"{family}-dp" for family in LADDER_FAMILIES))
def test_the_dp_variants_record_the_epsilon_they_achieved_and_what_it_covers(name: str) -> None:
    record = nn_helpers.built(name).record
    assert record.epsilon is not None
    assert record.epsilon > 0
    assert record.opacus_version is not None
    assert record.epsilon_covers is not None
