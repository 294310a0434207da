"""Coverage study: do the own-data audit's 95% intervals cover 95% of the time?

    python benchmarks/bench_owner_coverage.py                  # 200 test sets of 1,000 rows
    python benchmarks/bench_owner_coverage.py --samples 50 --n-test 500

A population with known values: the synthetic ICU cohort's features
(``reference/data/icu.py``), standardised with fixed constants, and labels
drawn as ``y ~ Bernoulli(sigmoid(risk + b))`` from the generator's true risk,
``b`` set so that 11.36% of patients die. An XGBoost model (the scale
benchmark's) is fitted once on 4,000 training rows. Then, for each of
``--samples`` independent test sets of ``--n-test`` rows, the own-data audit
runs as a model owner would run it (LiRA off: it refits the model, which the
intervals hold fixed anyway) and the table counts how often each 95% BCa
interval covers the population value:

- **AUROC, Brier and the task's ECE**: functions of the model and the
  population only, computed on 400,000 population rows with the *true*
  probabilities in place of labels (the expected value of each row's label),
  so no label noise enters the truth: ``Brier = E[p^2 - 2 p pi + pi]``, the
  AUROC weighs each pair by ``pi_i (1 - pi_j)``, the ECE's bins average ``pi``.
- **Kumar et al.'s debiased L2 error** (squared): its bins are the sample's
  15 equal-mass bins, held fixed by the bootstrap, so its target is the
  squared calibration error over those bins on the population.
- **The SPS**: the audit's intervals hold the fitted parts fixed (the model,
  the surrogate, the membership attacks and the thresholds each fold chose,
  the walk's targets), so its target is the SPS those parts would score on
  the whole population: FGSM and calibration on the 400,000 rows (FGSM with
  drawn labels, since its step depends on the label), the membership advantage
  of each fold's rule over every training row and 20,000 population rows (300
  of each for the boundary-distance attack, whose HopSkipJump distances are
  measured again per sample from that sample's reference rows), and the walk
  from 2,000 population rows towards the sample's targets.

Nothing here is timed; 200 samples take about 40 minutes on one core.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any

import numpy as np
from bench_tables import table

PREVALENCE = 0.1136
POPULATION_ROWS = 400_000
BOUNDARY_ROWS = 300
"""Training and population rows whose boundary distance each sample measures."""
STATISTICS = ("auroc", "brier", "ece", "debiased_l2", "sps")


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` population rows (raw features) and their true risk score (logit, no intercept)."""
    from pytest_clinaudit.reference.data.icu import generate_icu_cohort

    cohort = generate_icu_cohort(seed=seed, n_train=n, n_test=2)
    return np.asarray(cohort.raw_train), np.asarray(cohort.risk_train)


class Population:
    """Draws rows with labels from the known risk; standardises with fixed constants."""

    def __init__(self) -> None:
        from scipy.optimize import brentq
        from scipy.special import expit

        raw, risk = _rows(200_000, seed=10_000)
        self.mean, self.std = raw.mean(axis=0), raw.std(axis=0)
        self.b = brentq(lambda b: expit(risk + b).mean() - PREVALENCE, -20.0, 20.0)

    def draw(self, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(X (n, 8), y (n,), pi (n,)): features, drawn labels, true probabilities."""
        from scipy.special import expit

        raw, risk = _rows(n, seed)
        pi = expit(risk + self.b)
        y = (np.random.RandomState(seed + 1).uniform(size=n) < pi).astype(np.int64)
        return (raw - self.mean) / self.std, y, pi


def _weighted_auc(p: np.ndarray, positive: np.ndarray, negative: np.ndarray) -> float:
    """AUROC with row weights as positives and as negatives (ties count one half)."""
    order = np.argsort(p, kind="stable")
    p, pos, neg = p[order], positive[order], negative[order]
    starts = np.flatnonzero(np.r_[True, p[1:] != p[:-1]])
    pos_run, neg_run = np.add.reduceat(pos, starts), np.add.reduceat(neg, starts)
    below = np.cumsum(neg_run) - neg_run
    return float(np.sum(pos_run * (below + 0.5 * neg_run)) / (pos.sum() * neg.sum()))


def _task_ece(expected: np.ndarray, p: np.ndarray, n_bins: int = 10) -> float:
    """SPEC §3.3's ECE, quirks included, with each label replaced by its expectation."""
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    curve_bin = np.searchsorted(edges[1:-1], p)
    totals = np.bincount(curve_bin, minlength=n_bins)
    sums = np.bincount(curve_bin, weights=p, minlength=n_bins)
    trues = np.bincount(curve_bin, weights=expected, minlength=n_bins)
    full = totals > 0
    frac, mean = trues[full] / totals[full], sums[full] / totals[full]
    index = np.searchsorted(edges, p, side="right") - 1
    counts = np.bincount(index[(index >= 0) & (index < n_bins)], minlength=n_bins)[: full.sum()]
    return float(np.sum(counts * np.abs(frac - mean)) / counts.sum()) if counts.sum() else 0.0


def _binned_squared_error(p: np.ndarray, expected: np.ndarray, cuts: np.ndarray) -> float:
    """The squared calibration error over fixed bins: sum_b P(b) (E[p|b] - E[y|b])^2."""
    ids = np.searchsorted(cuts, p, side="right")
    k = len(cuts) + 1
    counts = np.bincount(ids, minlength=k)
    full = counts > 0
    gap = (np.bincount(ids, weights=p, minlength=k)[full] -
           np.bincount(ids, weights=expected, minlength=k)[full]) / counts[full]  # fmt: skip
    return float(np.sum(counts[full] * gap**2) / counts.sum())


def _fit_model(X: np.ndarray, y: np.ndarray) -> Any:
    from xgboost import XGBClassifier

    from pytest_clinaudit.reference.models import adapt_model

    model = XGBClassifier(
        n_estimators=100, max_depth=4, learning_rate=0.1, tree_method="hist",
        n_jobs=1, random_state=42, verbosity=0,
    ).fit(X, y)  # fmt: skip
    return adapt_model(model, feature_names=tuple(f"x{j}" for j in range(8)), positive_class=1)


_FITTED: list[Any] = []


def _record_shadow_attacks() -> None:
    """Keep each shadow attack the audit fits: the population's scores need the same one."""
    from pytest_clinaudit.reference.attacks import membership

    original = membership.fit_membership_attack

    def recorded(X: Any, y: Any, params: Any) -> Any:
        _FITTED.append(original(X, y, params))
        return _FITTED[-1]

    membership.fit_membership_attack = recorded


@dataclasses.dataclass
class Truth:
    """Population values that depend on the model only, and the rows the SPS's need."""

    auroc: float
    brier: float
    ece: float
    fgsm: float
    members: dict[str, np.ndarray]
    """Every training row's model probabilities, loss scores and labels."""
    nonmembers: dict[str, np.ndarray]
    """20,000 population rows' model probabilities, loss scores and labels."""
    walk_rows: np.ndarray
    boundary_members: np.ndarray
    """Training rows whose boundary distance each sample measures (HopSkipJump)."""
    boundary_nonmembers: tuple[np.ndarray, np.ndarray]
    """Population rows (and labels) whose boundary distance each sample measures."""


def _scores(model: Any, X: np.ndarray, y: np.ndarray) -> dict[str, Any]:
    """The loss attack's scores of rows as the audit computes them, and the model's answers."""
    from pytest_clinaudit.reference.attacks.privacy import log_loss_per_row

    proba = model.predict_proba(X)
    return {"loss_threshold": -log_loss_per_row(proba[:, 1], y), "proba": proba, "label": y}


def _boundary(model: Any, X: np.ndarray, y: np.ndarray, reference: np.ndarray, view: Any,
              params: Any) -> np.ndarray:  # fmt: skip
    """Boundary-distance scores, with the sample's test rows as HopSkipJump's starts.

    HopSkipJump's distances depend a little on where each row starts (the
    nearest reference row predicted differently), so the population's are
    measured against the same reference rows as the sample's audit.
    """
    from pytest_clinaudit.reference.review.hopskipjump import minimal_perturbation_distance
    from pytest_clinaudit.reference.review.membership import boundary_scores

    measured = minimal_perturbation_distance(
        model, X, std=view.scale.std, reference_rows=reference,
        reference_predictions=model.predict(reference), low=view.scale.low,
        high=view.scale.high, n_iter=params.hsj_iterations, seed=1,
    )  # fmt: skip
    return boundary_scores(measured.distance, measured.found, model.predict(X) == y)


def _advantage(
    rules: list[dict[str, Any]], members: dict[str, Any], nonmembers: dict[str, Any]
) -> float:
    """The population advantage of each fold's rule, weighed as the audit weighs its folds."""
    tpr = fpr = 0.0
    n_m = sum(r["n_members"] for r in rules)
    n_n = sum(r["n_nonmembers"] for r in rules)
    for rule in rules:
        if rule["attack"] is None:
            continue
        weighed = ((members, rule["n_members"] / n_m, True),
                   (nonmembers, rule["n_nonmembers"] / n_n, False))  # fmt: skip
        for side, weight, is_member in weighed:
            scores, labels = side[rule["attack"]]
            flagged = np.zeros(len(labels), dtype=bool)
            for label_rule in rule["labels"]:
                mine = labels == label_rule["label"]
                flagged[mine] = label_rule["direction"] * scores[mine] >= label_rule["threshold"]
            if is_member:
                tpr += weight * flagged.mean()
            else:
                fpr += weight * flagged.mean()
    return tpr - fpr


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--verbose", action="store_true", help="each sample's components")
    args = parser.parse_args()

    from pytest_clinaudit.reference.attacks.budget import Budget
    from pytest_clinaudit.reference.attacks.fgsm import fgsm_perturb
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.review import features, sampling, walk
    from pytest_clinaudit.reference.review.own_data import audit_own_data
    from pytest_clinaudit.reference.review.profile import OwnDataParams

    start = time.perf_counter()
    population = Population()
    X_train, y_train, _ = population.draw(4000, seed=1)
    model = _fit_model(X_train, y_train)
    # LiRA off (it refits the model); a pool of 1,000 rows for the shadow attack, which
    # each sample's seed refits: the study measures intervals, not attack strength.
    params = dataclasses.replace(
        OwnDataParams(), lira_shadows=0, boundary_rows=100, pool_cap=1000, n_boot=args.bootstrap
    )
    names = tuple(f"x{j}" for j in range(8))

    print("population values on 400,000 rows", file=sys.stderr)
    X_pop, y_pop, pi_pop = population.draw(POPULATION_ROWS, seed=2)
    p_pop = model.predict_proba(X_pop)[:, 1]
    # The fitted parts that do not depend on the test rows, as the audit makes them.
    train_only = sampling.canonical(
        Dataset("t", "y", names, X_train, y_train, X_pop[:2], y_pop[:2])
    )
    view = features.feature_view(train_only)
    surrogate_rows = sampling.draw_canonical(
        train_only.n_train, params.surrogate_rows, params.seed + 3
    )
    sign = features.surrogate_sign(
        params.surrogate,
        view,
        train_only.X_train[surrogate_rows],
        train_only.y_train[surrogate_rows],
    )
    budget = Budget.of(params.epsilon, view.scale, std_units=True, clip=params.clip)
    p_adv = model.predict_proba(budget.clip(fgsm_perturb(X_pop, y_pop, budget.step, sign)))[:, 1]
    fgsm_pop = min(1.0, 1.0 - (_weighted_auc(p_pop, y_pop == 1, y_pop == 0)
                               - _weighted_auc(p_adv, y_pop == 1, y_pop == 0)))  # fmt: skip
    print("membership scores of every training row and 20,000 population rows", file=sys.stderr)
    rng = np.random.RandomState(3)
    boundary_members = rng.choice(len(X_train), BOUNDARY_ROWS, replace=False)
    truth = Truth(
        auroc=_weighted_auc(p_pop, pi_pop, 1.0 - pi_pop),
        brier=float(np.mean(p_pop**2 - 2.0 * p_pop * pi_pop + pi_pop)),
        ece=_task_ece(pi_pop, p_pop),
        fgsm=fgsm_pop,
        members=_scores(model, X_train, y_train),
        nonmembers=_scores(model, X_pop[-20_000:], y_pop[-20_000:]),
        walk_rows=X_pop[10_000:12_000],
        boundary_members=boundary_members,
        boundary_nonmembers=(X_pop[20_000 : 20_000 + BOUNDARY_ROWS],
                             y_pop[20_000 : 20_000 + BOUNDARY_ROWS]),
    )  # fmt: skip
    _record_shadow_attacks()
    calibration_pop = max(0.0, 1.0 - params.calibration.ece_scale * truth.ece)

    sps_intervals: list[tuple[float, float, float]] = []
    calibration_points: list[float] = []
    hits: dict[str, list[bool]] = {name: [] for name in STATISTICS}
    widths: dict[str, list[float]] = {name: [] for name in STATISTICS}
    errors: dict[str, list[float]] = {name: [] for name in STATISTICS}
    for sample in range(args.samples):
        X_test, y_test, _ = population.draw(args.n_test, seed=100 + sample)
        data = Dataset("coverage", "y", names, X_train, y_train, X_test, y_test)
        # A seed per sample: each audit draws its own members, FGSM and walk rows, as
        # independent audits would (one seed would evaluate the same 100 members always).
        seeded = dataclasses.replace(params, seed=1000 + 20 * sample)
        report = audit_own_data(model, data, seeded).report()
        # The walk's targets: the first test row (canonical order) predicted each way.
        test = sampling.canonical(data)
        predicted = model.predict(test.X_test)
        targets = [test.X_test[np.argmax(predicted == c)] for c in (1, 0) if (predicted == c).any()]
        stacked = np.vstack([*targets, truth.walk_rows])
        walked = walk.boundary_walk(
            model, stacked, test_predictions=model.predict(stacked), view=view,
            params=dataclasses.replace(params.walk, n_samples=len(stacked), seed=0),
        )  # fmt: skip
        sides: list[dict[str, Any]] = []
        for side, X_b, y_b in (
            (truth.members, X_train[truth.boundary_members], y_train[truth.boundary_members]),
            (truth.nonmembers, *truth.boundary_nonmembers),
        ):
            scores = _boundary(model, X_b, y_b, test.X_test, view, params)
            shadow = _FITTED[-1].predict_proba(side["proba"])[:, 1]
            sides.append({
                "loss_threshold": (side["loss_threshold"], side["label"]),
                "shadow": (shadow, side["label"]),
                "boundary_distance": (scores, y_b),
            })  # fmt: skip
        rules = report["membership"]["component"]["rules"]
        components = (
            truth.fgsm,
            min(1.0, max(0.0, 1.0 - _advantage(rules, *sides))),
            calibration_pop,
            walked.score,
        )
        sps_pop = 100.0 * sum(w * c for w, c in zip(params.weights.as_tuple(), components,
                                                    strict=True))  # fmt: skip
        # The debiased L2 error's bins are the sample's equal-mass bins, held fixed.
        from pytest_clinaudit.reference.review.diagnostics import EQUAL_MASS_BINS

        p_test = np.sort(model.predict_proba(X_test)[:, 1])
        cuts = p_test[(np.arange(1, EQUAL_MASS_BINS) * len(p_test)) // EQUAL_MASS_BINS]
        values = {
            **{k: getattr(truth, k) for k in ("auroc", "brier", "ece")},
            "debiased_l2": _binned_squared_error(p_pop, pi_pop, cuts),
            "sps": sps_pop,
        }
        if args.verbose:
            print(
                "components",
                [round(c, 4) for c in components],
                [round(v, 4) for v in report["components"].values()],
                file=sys.stderr,
            )
            m = report["membership"]
            print(
                {
                    k: (m[k]["auc"] if "auc" in m[k] else m[k])
                    for k in ("shadow", "loss_threshold", "boundary_distance")
                },
                {
                    k: m["component"][k]
                    for k in (
                        "advantage",
                        "tpr",
                        "fpr",
                        "n_members",
                        "n_nonmembers",
                        "attacks_chosen",
                    )
                },
                file=sys.stderr,
            )
        u = report["uncertainty"]
        for name in STATISTICS:
            interval = u["sps"] if name == "sps" else u["diagnostics"][name]
            hits[name].append(interval["low"] <= values[name] <= interval["high"])
            widths[name].append(interval["high"] - interval["low"])
            errors[name].append(interval["point"] - values[name])
        sps_intervals.append((u["sps"]["low"], u["sps"]["high"], sps_pop))
        calibration_points.append(report["components"]["calibration_ece"])
        done = sample + 1
        if done % 10 == 0 or done == args.samples:
            shown = ", ".join(f"{k} {np.mean(v):.3f}" for k, v in hits.items())
            print(f"{done}/{args.samples} samples ({time.perf_counter() - start:.0f} s): {shown}",
                  file=sys.stderr)  # fmt: skip

    rows = []
    for name in STATISTICS:
        covered = np.mean(hits[name])
        se = np.sqrt(covered * (1.0 - covered) / args.samples)
        rows.append([
            name, f"{covered:.3f}", f"± {1.96 * se:.3f}", f"{np.mean(widths[name]):.4f}",
            f"{np.mean(errors[name]):+.4f}",
            f"{values[name] if name in ('sps', 'debiased_l2') else getattr(truth, name):.4f}",
        ])  # fmt: skip
    # The task's ECE is a biased estimator of the population ECE: at n rows its
    # expectation sits above it. With the calibration component at its n-row
    # expectation (the mean over the samples) in place of its population value,
    # the SPS's coverage says how the interval does on everything else.
    shift = 100.0 * params.weights.calibration_ece * (np.mean(calibration_points) - calibration_pop)
    at_n = [low <= truth_sps + shift <= high for low, high, truth_sps in sps_intervals]
    covered = np.mean(at_n)
    se = np.sqrt(covered * (1.0 - covered) / args.samples)
    rows.append([
        "sps, calibration at its n-row expectation", f"{covered:.3f}", f"± {1.96 * se:.3f}",
        f"{np.mean(widths['sps']):.4f}", f"{np.mean(errors['sps']) - shift:+.4f}",
        f"shift {shift:+.2f}",
    ])  # fmt: skip
    print(
        f"{args.samples} test sets of {args.n_test} rows; BCa, {args.bootstrap} replicates; "
        f"target coverage 0.92-0.98"
    )
    print(table(["statistic", "coverage", "95% MC", "mean width", "mean point - truth",
                 "truth (last sample's for the SPS)"], rows))  # fmt: skip


if __name__ == "__main__":
    main()
