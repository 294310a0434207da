"""The batched auditor on the torch variants against the literal, row-at-a-time oracle.

The oracle loads ``model.pt2`` exactly as SPEC §7.1 writes it: no fixed chunks,
one call per step of the task, one row per call in the boundary walk and the
loss attack. A float32 program evaluated on other batch shapes (or another
CPU's kernels: ``ATEN_CPU_CAPABILITY``) rounds differently in the last bits, so
nothing here compares at 1e-12. Each tolerance is derived from that rounding,
where it is used:

- a logit, a probability: :data:`LOGIT_BITS` / :data:`PROBABILITY_BITS`;
- an AUROC or a membership AUC: the two may differ only through pairs whose
  order changed, and each such pair must be a near tie (:data:`LOGIT_BITS`) or
  involve a row whose attack moved differently for the reason below;
- a gradient's sign (FGSM, PGD): it may differ only where the component is
  near zero relative to the row's largest (:data:`NEAR_ZERO_GRADIENT`);
- a boundary walk: a row may stop at another step only where the deciding
  candidate's logit is within :data:`LOGIT_BITS` of 0.

The counts of everything that differed are recorded in the JUnit XML; measured
on the development machine they are all 0 (docs/nn-variants.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import literal_oracle
import nn_helpers
import numpy as np
import pytest

from pytest_clinaudit.reference import attacks
from pytest_clinaudit.reference.attacks import whitebox

LOGIT_BITS = 1e-4
"""Two float32 evaluations of one logit (|f| <= ~100, a few hundred products each, in
another order or kernel) differ by far less than this: 100 * 2**-23 * a few ulps."""

PROBABILITY_BITS = 1e-6
"""The same for ``sigmoid(f)`` in float32 (its derivative is at most 1/4, and float32
rounding of a value in [0, 1] is at most 6e-8): bins and means move by less."""

NEAR_ZERO_GRADIENT = 1e-3
"""A gradient component this small relative to its row's largest may take either sign
in another evaluation order (float32 sums of ~100 products, with cancellation)."""


def _pairs_flipped(y: Any, a: Any, b: Any) -> tuple[Any, Any]:
    """(positive, negative) index pairs ordered differently by scores ``a`` and ``b``."""
    y = np.asarray(y)
    pos, neg = np.flatnonzero(y == 1), np.flatnonzero(y == 0)
    order_a = np.sign(a[pos][:, None] - a[neg][None, :])
    order_b = np.sign(b[pos][:, None] - b[neg][None, :])
    i, j = np.nonzero(order_a != order_b)
    return pos[i], neg[j]


def _explained_auroc(
    y: Any, ours: Any, oracle: Any, moved_differently: Any, delta: Any, what: str
) -> tuple[float, int]:
    """Check every pair ordered differently by ``ours`` and ``oracle`` is a near tie
    (its oracle scores within ``delta_a + delta_b``, the rounding each score may
    carry) or has a row whose attack moved differently; return the largest
    |AUROC difference| those pairs allow, and their count."""
    ours, oracle = np.asarray(ours, np.float64), np.asarray(oracle, np.float64)
    delta = np.broadcast_to(np.asarray(delta, np.float64), oracle.shape)
    pos, neg = _pairs_flipped(y, ours, oracle)
    tie = np.abs(oracle[pos] - oracle[neg]) <= delta[pos] + delta[neg]
    explained = tie | moved_differently[pos] | moved_differently[neg]
    assert explained.all(), f"{what}: {int((~explained).sum())} pairs flipped without a near tie"
    n_pos, n_neg = int((np.asarray(y) == 1).sum()), int((np.asarray(y) == 0).sum())
    return len(pos) / (n_pos * n_neg) + 1e-12, len(pos)


def _logit_delta(z: Any) -> Any:
    """The rounding a float32 logit (or a loss computed from it) may carry."""
    return LOGIT_BITS * np.maximum(1.0, np.abs(np.asarray(z, np.float64)))


def _near_zero(gradient: Any, rows: Any, cols: Any) -> Any:
    largest = np.abs(gradient).max(axis=1)
    return np.abs(gradient[rows, cols]) <= NEAR_ZERO_GRADIENT * largest[rows]


def _check_fgsm(name: str, program: Any, expected: dict[str, Any]) -> dict[str, int]:
    variant, data = nn_helpers.variant(name), nn_helpers.dataset(name)
    model = nn_helpers.built(name).artifact.load()
    result = nn_helpers.audited(name)
    ours = whitebox.fgsm_whitebox_sample(
        model,
        data.X_test,
        data.y_test,
        params=variant.params.fgsm,
        budget=attacks.fgsm_budget(variant.params.fgsm, data.X_train),
    )
    np.testing.assert_array_equal(ours.idx, expected["idx"])
    rows, cols = np.nonzero(ours.direction != expected["direction"])
    assert _near_zero(expected["gradient"], rows, cols).all(), (name, rows, cols)
    moved = np.zeros(len(ours.idx), dtype=bool)
    moved[rows] = True
    # The budget e_j = epsilon * std_j is float64 both ways, its std summed in
    # another order (NumPy's pairwise sum, the oracle's mean of squares): a few
    # float64 ulps of e_j, so 1e-12 of the largest |x| (a value near 0 after the
    # step keeps the absolute error, not the relative one).
    scale = np.abs(expected["X_adv"]).max()
    np.testing.assert_allclose(
        ours.X_adv[~moved], expected["X_adv"][~moved], rtol=0, atol=1e-12 * scale
    )
    assert result.details["zero_gradient_fraction"] == expected["zero_gradient_fraction"]
    y = data.y_test[ours.idx]
    # AUROCs are of p = sigmoid(f) in float32: ties as they round there.
    clean_tolerance, clean_pairs = _explained_auroc(
        y, model.predict_proba(data.X_test[ours.idx])[:, 1],
        program.predict_proba(data.X_test[ours.idx])[:, 1], np.zeros_like(moved),
        PROBABILITY_BITS, f"{name} clean",
    )  # fmt: skip
    adv_tolerance, adv_pairs = _explained_auroc(
        y, model.predict_proba(ours.X_adv)[:, 1], program.predict_proba(expected["X_adv"])[:, 1],
        moved, PROBABILITY_BITS, f"{name} FGSM",
    )  # fmt: skip
    assert result.details["auroc_clean"] == pytest.approx(
        expected["auroc_clean"], abs=clean_tolerance
    )
    assert result.details["auroc_adversarial"] == pytest.approx(
        expected["auroc_adversarial"], abs=adv_tolerance
    )
    assert result.components["fgsm_robustness"] == pytest.approx(
        expected["score"], abs=clean_tolerance + adv_tolerance
    )
    return {"fgsm_signs_differing": len(rows), "fgsm_pairs_flipped": clean_pairs + adv_pairs}


def _check_strong_pgd(name: str, program: Any) -> dict[str, int]:
    variant, data = nn_helpers.variant(name), nn_helpers.dataset(name)
    model = nn_helpers.built(name).artifact.load()
    fgsm = variant.params.fgsm
    expected = literal_oracle.strong_pgd_white_box(
        program, data.X_train, data.X_test, data.y_test, variant.params
    )
    idx = attacks.draw_rows(fgsm.seed, data.n_test, fgsm.n_samples)
    assert fgsm.pgd_steps is not None
    assert fgsm.pgd_restarts is not None
    ours = whitebox.margin_pgd(
        model,
        data.X_test[idx],
        data.y_test[idx],
        budget=attacks.fgsm_budget(fgsm, data.X_train),
        steps=fgsm.pgd_steps,
        restarts=fgsm.pgd_restarts,
        seed=fgsm.seed,
    )
    z_ours = model.logits(ours).astype(np.float64)
    z_oracle = program.logit(expected["X_adv"]).double().numpy()
    moved = np.abs(z_ours - z_oracle) > _logit_delta(z_oracle)
    # A trajectory can only part from the oracle's where a step took the sign of
    # a near-zero gradient component.
    assert (expected["smallest_relative_gradient"][moved] <= NEAR_ZERO_GRADIENT).all(), name
    tolerance, pairs = _explained_auroc(
        data.y_test[idx], model.predict_proba(ours)[:, 1],
        program.predict_proba(expected["X_adv"])[:, 1], moved, PROBABILITY_BITS, f"{name} PGD",
    )  # fmt: skip
    result = nn_helpers.audited(name)
    assert result.details["pgd_auroc_adversarial"] == pytest.approx(
        expected["auroc"], abs=tolerance
    )
    return {"pgd_rows_differing": int(moved.sum()), "pgd_pairs_flipped": pairs}


def _differing_walk_rows_are_last_bit_ties(
    name: str, batched: list[int], literal: list[int]
) -> list[int]:
    """The positions where the walks disagree, after checking each is a near-zero logit."""
    variant, data = nn_helpers.variant(name), nn_helpers.dataset(name)
    params = variant.params.boundary
    model = nn_helpers.built(name).artifact.load()
    differing = [i for i, (a, b) in enumerate(zip(batched, literal, strict=True)) if a != b]
    if not differing:
        return differing
    predictions = model.predict(data.X_test)
    idx = attacks.draw_rows(params.seed, data.n_test, params.n_samples)
    for i in differing:
        start = data.X_test[idx[i]]
        target = data.X_test[int(np.argmax(predictions != predictions[idx[i]]))]
        candidates, _ = attacks.walk_candidates(start[None, :], target[None, :], params)
        deciding = candidates[min(batched[i], literal[i]) - 1, 0]
        assert abs(float(model.logits(deciding[None, :])[0])) < LOGIT_BITS, (name, i)
    return differing


def _check(name: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    variant, data = nn_helpers.variant(name), nn_helpers.dataset(name)
    path = tmp_path / "model.pt2"
    nn_helpers.built(name).artifact.write(path)
    program = literal_oracle.SpecProgram(path)
    model = nn_helpers.built(name).artifact.load()
    result = nn_helpers.audited(name)
    args = (data.X_train, data.y_train, data.X_test, data.y_test, variant.params)
    expected = literal_oracle.audit_white_box(program, *args)
    counts = _check_fgsm(name, program, expected["fgsm"])

    # Membership (§3.2): the shadow attack's forest compares each probability with
    # split thresholds; a probability that moved by a last bit can change at most
    # its own row's decision.
    p_ours = model.predict_proba(data.X_test)[:, 1]
    p_oracle = program.predict_proba(data.X_test)[:, 1]
    moved_p = np.abs(p_ours - p_oracle)
    assert moved_p.max() <= PROBABILITY_BITS, name
    n_eval = result.details["n"]["mi_eval"]
    queried = np.r_[
        model.predict_proba(data.X_train[:n_eval])[:, 1]
        != program.predict_proba(data.X_train[:n_eval])[:, 1],
        p_ours[:n_eval] != p_oracle[:n_eval],
    ]
    assert abs(result.details["mi_accuracy"] - expected["membership"]["accuracy"]) <= (
        queried.sum() / (2 * n_eval)
    )
    counts["membership_probabilities_differing"] = int(queried.sum())

    # Calibration (§3.3): if no probability crosses a bin edge, each bin's mean
    # moves by at most max |dp| and the ECE (a weighted mean) too; the score is 1 - 12 ece.
    edges = np.linspace(0, 1, variant.params.calibration.n_bins + 1)
    to_edge = np.abs(p_oracle[:, None] - edges[None, :]).min(axis=1)
    assert (to_edge[moved_p > 0] > moved_p[moved_p > 0]).all(), name
    scale = variant.params.calibration.ece_scale
    assert result.components["calibration_ece"] == pytest.approx(
        expected["calibration"]["score"], abs=scale * moved_p.max() + 1e-12
    )

    differing = _differing_walk_rows_are_last_bit_ties(
        name, result.details["steps_to_flip"], expected["boundary"]["steps"]
    )
    counts["walk_rows_differing"] = len(differing)
    counts.update(_check_strong_pgd(name, program))

    # The loss attack: member and non-member losses in two evaluation orders.
    losses = literal_oracle.loss_attack(program, *args)
    members, nonmembers = np.array(losses["members"]), np.array(losses["nonmembers"])
    scores_ours = -np.r_[
        model.row_losses(data.X_train[:n_eval], data.y_train[:n_eval]),
        model.row_losses(data.X_test[:n_eval], data.y_test[:n_eval]),
    ]
    is_member = np.r_[np.ones(n_eval, int), np.zeros(n_eval, int)]
    # A loss moves by at most what its logit moves (softplus' slope is below 1).
    z_queried = program.logit(np.r_[data.X_train[:n_eval], data.X_test[:n_eval]]).double()
    tolerance, pairs = _explained_auroc(
        is_member, scores_ours, np.r_[members, nonmembers], np.zeros(2 * n_eval, bool),
        _logit_delta(z_queried.numpy()), f"{name} loss attack",
    )  # fmt: skip
    assert result.details["loss_attack_auc"] == pytest.approx(losses["auc"], abs=tolerance)
    assert result.details["loss_attack_tpr_at_1pct_fpr"] == pytest.approx(
        losses["tpr_at_1pct_fpr"], abs=pairs / n_eval + 1e-12
    )
    counts["loss_pairs_flipped"] = pairs
    for key, value in counts.items():
        request.node.user_properties.append((key, value))


@pytest.mark.slow
@pytest.mark.parametrize("name", nn_helpers.WDBC_MLP)
def test_the_wdbc_torch_variants_equal_the_literal_oracle(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _check(name, tmp_path, request)


@pytest.mark.slow
@pytest.mark.parametrize("name", nn_helpers.ICU_MLP)
def test_the_icu_torch_variants_equal_the_literal_oracle(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _check(name, tmp_path, request)


@pytest.mark.slow
@pytest.mark.parametrize("name", nn_helpers.cases(nn_helpers.FLCHAIN_MLP))
def test_the_flchain_torch_variants_equal_the_literal_oracle(
    name: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    _check(name, tmp_path, request)
