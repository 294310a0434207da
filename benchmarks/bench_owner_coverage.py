"""Coverage study: do the own-data audit's 95% intervals cover 95% of the time?

    python benchmarks/bench_owner_coverage.py                  # 200 test sets of 1,000 rows
    python benchmarks/bench_owner_coverage.py --samples 50 --n-test 500
    python benchmarks/bench_owner_coverage.py --sizes 150,500,2000,10000 --samples 200,200,80,40

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

- **Each membership attack's AUC**: the attack's AUC between every training
  row and the 20,000 population rows (the loss and shadow attacks), and
  between 300 training and 300 population rows (the boundary distance).

An interval the audit withholds (its ends ``null``, :func:`~.bca.held`, or a
statistic shown without one) is counted as not shown: the table gives, per
statistic and size, the share of audits that showed an interval and the
coverage of those that were shown, with its binomial standard error
``sqrt(c (1 - c) / shown)``. It also counts shown intervals that exclude their
own point, which must never happen. ``--records FILE`` writes every audit's
point, interval and population value as JSON lines, for reading again.

Nothing here is timed; 200 samples of 1,000 rows take about 40 minutes on one core.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from typing import Any

import numpy as np
from bench_tables import table

PREVALENCE = 0.1136
POPULATION_ROWS = 400_000
BOUNDARY_ROWS = 300
"""Training and population rows whose boundary distance each sample measures."""
COMPONENT_ROWS = {
    "fgsm_robustness": "FGSM component",
    "membership_inference_resistance": "membership component",
    "calibration_ece": "calibration component",
    "boundary_attack_resistance": "walk component",
}
DIAGNOSTIC_ROWS = {
    "auroc": "AUROC",
    "brier": "Brier score",
    "ece": "task ECE",
    "debiased_l2": "debiased L2 error (squared)",
}
ATTACK_ROWS = {
    "loss_threshold": "loss attack AUC",
    "shadow": "shadow attack AUC",
    "boundary_distance": "boundary attack AUC (truth on 300+300 rows)",
}
STATISTICS = (*COMPONENT_ROWS, "sps", *DIAGNOSTIC_ROWS, *(f"auc.{k}" for k in ATTACK_ROWS))
LABELS = {**COMPONENT_ROWS, "sps": "SPS", **DIAGNOSTIC_ROWS,
          **{f"auc.{k}": v for k, v in ATTACK_ROWS.items()}}  # fmt: skip


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


@dataclasses.dataclass
class Study:
    """What every test set's audit shares: the population, the model and their values."""

    population: Population
    model: Any
    params: Any
    names: tuple[str, ...]
    X_train: np.ndarray
    y_train: np.ndarray
    view: Any
    truth: Truth
    p_pop: np.ndarray
    pi_pop: np.ndarray
    calibration_pop: float
    attack_auc: dict[str, float]
    """Each membership attack's population AUC that does not change with the sample."""


def _auc(members: np.ndarray, nonmembers: np.ndarray) -> float:
    """The AUC of "higher means member" scores (ties one half)."""
    scores = np.concatenate([members, nonmembers])
    member = np.r_[np.ones(len(members)), np.zeros(len(nonmembers))]
    return _weighted_auc(scores, member, 1.0 - member)


def _setup(n_boot: int, boundary_rows: int) -> Study:
    """The population, the model fitted once, and the population values of fixed parts."""
    from pytest_clinaudit.reference.attacks.budget import Budget
    from pytest_clinaudit.reference.attacks.fgsm import fgsm_perturb
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.review import features, sampling
    from pytest_clinaudit.reference.review.profile import OwnDataParams

    population = Population()
    X_train, y_train, _ = population.draw(4000, seed=1)
    model = _fit_model(X_train, y_train)
    # LiRA off (it refits the model); a pool of 1,000 rows for the shadow attack, which
    # each sample's seed refits: the study measures intervals, not attack strength.
    params = dataclasses.replace(
        OwnDataParams(), lira_shadows=0, boundary_rows=boundary_rows, pool_cap=1000, n_boot=n_boot
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
    return Study(
        population=population,
        model=model,
        params=params,
        names=names,
        X_train=X_train,
        y_train=y_train,
        view=view,
        truth=truth,
        p_pop=p_pop,
        pi_pop=pi_pop,
        calibration_pop=max(0.0, 1.0 - params.calibration.ece_scale * truth.ece),
        attack_auc={
            "loss_threshold": _auc(
                truth.members["loss_threshold"], truth.nonmembers["loss_threshold"]
            )
        },
    )


def _shown(report: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The interval the report gives ``name`` (None: the audit has no such statistic)."""
    u = report["uncertainty"]
    if name == "sps":
        return dict(u["sps"])
    if name in u["components"]:
        return dict(u["components"][name])
    if name in u["diagnostics"]:
        return dict(u["diagnostics"][name])
    record = report["membership"].get(name.removeprefix("auc."))
    if isinstance(record, dict) and isinstance(record.get("auc_interval"), dict):
        return dict(record["auc_interval"])
    return None


def _audit(study: Study, n_test: int, sample: int, verbose: bool) -> list[dict[str, Any]]:
    """One test set of ``n_test`` rows audited, each statistic's interval and population value."""
    from pytest_clinaudit.reference.data import Dataset
    from pytest_clinaudit.reference.review import sampling, walk
    from pytest_clinaudit.reference.review.diagnostics import EQUAL_MASS_BINS
    from pytest_clinaudit.reference.review.own_data import audit_own_data

    model, params, truth, view = study.model, study.params, study.truth, study.view
    X_train, y_train = study.X_train, study.y_train
    X_test, y_test, _ = study.population.draw(n_test, seed=100 + sample)
    data = Dataset("coverage", "y", study.names, X_train, y_train, X_test, y_test)
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
        measured = params.boundary_rows > 0
        scores = _boundary(model, X_b, y_b, test.X_test, view, params) if measured else y_b
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
        study.calibration_pop,
        walked.score,
    )
    sps_pop = 100.0 * sum(w * c for w, c in zip(params.weights.as_tuple(), components,
                                                strict=True))  # fmt: skip
    # The debiased L2 error's bins are the sample's equal-mass bins, held fixed.
    p_test = np.sort(model.predict_proba(X_test)[:, 1])
    cuts = p_test[(np.arange(1, EQUAL_MASS_BINS) * len(p_test)) // EQUAL_MASS_BINS]
    values = {
        **dict(zip(COMPONENT_ROWS, components, strict=True)),
        "sps": sps_pop,
        **{k: getattr(truth, k) for k in ("auroc", "brier", "ece")},
        "debiased_l2": _binned_squared_error(study.p_pop, study.pi_pop, cuts),
        "auc.loss_threshold": study.attack_auc["loss_threshold"],
        "auc.shadow": _auc(sides[0]["shadow"][0], sides[1]["shadow"][0]),
        "auc.boundary_distance": _auc(
            sides[0]["boundary_distance"][0], sides[1]["boundary_distance"][0]
        ),
    }
    if verbose:
        print("components", [round(c, 4) for c in components],
              [round(v, 4) for v in report["components"].values()], file=sys.stderr)  # fmt: skip
    records = []
    for name in STATISTICS:
        interval = _shown(report, name)
        if interval is None:
            continue
        low, high, point = interval.get("low"), interval.get("high"), interval.get("point")
        shown = low is not None and high is not None
        records.append({
            "statistic": name, "n_test": n_test, "sample": sample, "point": point,
            "low": low, "high": high, "truth": float(values[name]), "z0": interval.get("z0"),
            "shown": shown,
            "covered": bool(shown and low <= values[name] <= high),
            "excludes_point": bool(shown and point is not None and not low <= point <= high),
            "withheld": interval.get("withheld"),
        })  # fmt: skip
    # The calibration component at this size's expectation in place of its population
    # value (``_shifted``) needs each audit's own component.
    records.append({"statistic": "calibration_point", "n_test": n_test, "sample": sample,
                    "point": report["components"]["calibration_ece"],
                    "calibration_test": report["diagnostics"]["calibration_test"]})  # fmt: skip
    return records


def _rate(hits: int, shown: int) -> tuple[float, float]:
    """A coverage and its binomial standard error (NaN without a shown interval)."""
    if not shown:
        return math.nan, math.nan
    covered = hits / shown
    return covered, math.sqrt(covered * (1.0 - covered) / shown)


def _shifted(records: list[dict[str, Any]], params: Any, calibration_pop: float) -> list[bool]:
    """Whether each shown SPS interval covers the SPS with calibration at its n-row expectation.

    The task's ECE is a biased estimator of the population ECE: at n rows its
    expectation sits above it. With the calibration component at its n-row
    expectation (the mean over the samples) in place of its population value,
    the SPS's coverage says how the interval does on everything else.
    """
    points = [r["point"] for r in records if r["statistic"] == "calibration_point"]
    if not points:
        return []
    shift = 100.0 * params.weights.calibration_ece * (np.mean(points) - calibration_pop)
    return [r["low"] <= r["truth"] + shift <= r["high"]
            for r in records if r["statistic"] == "sps" and r["shown"]]  # fmt: skip


def _detail(records: list[dict[str, Any]], n_test: int, samples: int) -> str:
    """One size's table: coverage when shown, shown share, widths and errors."""
    rows = []
    for name in STATISTICS:
        mine = [r for r in records if r["statistic"] == name]
        if not mine:
            continue
        shown = [r for r in mine if r["shown"]]
        covered, se = _rate(sum(r["covered"] for r in shown), len(shown))
        errors = [r["point"] - r["truth"] for r in mine if r["point"] is not None]
        rows.append([
            LABELS[name], f"{covered:.3f}", f"{se:.3f}", f"{len(shown)}/{len(mine)}",
            str(sum(r["excludes_point"] for r in mine)),
            f"{np.mean([r['high'] - r['low'] for r in shown]):.4f}" if shown else "-",
            f"{np.mean(errors):+.4f}" if errors else "-", f"{mine[-1]['truth']:.4f}",
        ])  # fmt: skip
    header = ["statistic", "coverage", "SE", "shown", "excl. point", "mean width",
              "mean point - truth", "truth (last sample)"]  # fmt: skip
    return (
        f"{samples} test sets of {n_test} rows; coverage of the shown 95% intervals "
        f"(target 0.92-0.98), its binomial SE, and how many were shown\n" + table(header, rows)
    )


def _across(by_size: dict[int, list[dict[str, Any]]], study: Study) -> str:
    """One table across sizes: per statistic, coverage ± SE when shown, and the shown share."""
    header = ["statistic"]
    for n_test in by_size:
        header += [f"{n_test:,} rows: coverage ± SE", "shown"]
    rows = []
    for name in STATISTICS:
        row = [LABELS[name]]
        for records in by_size.values():
            mine = [r for r in records if r["statistic"] == name]
            shown = [r for r in mine if r["shown"]]
            covered, se = _rate(sum(r["covered"] for r in shown), len(shown))
            row += [f"{covered:.3f} ± {se:.3f}" if shown else "-",
                    f"{len(shown) / len(mine):.0%}" if mine else "-"]  # fmt: skip
        rows.append(row)
    row = ["SPS, calibration at its n-row expectation"]
    for records in by_size.values():
        hits = _shifted(records, study.params, study.calibration_pop)
        covered, se = _rate(sum(hits), len(hits))
        row += [f"{covered:.3f} ± {se:.3f}" if hits else "-", ""]
    rows.append(row)
    return table(header, rows)


def _counts(text: str, sizes: list[int]) -> list[int]:
    counts = [int(part) for part in text.split(",")]
    if len(counts) == 1:
        counts = counts * len(sizes)
    if len(counts) != len(sizes) or min(counts) < 1:
        raise SystemExit("--samples: one count, or one per size")
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", default="200", help="test sets: one count, or one per size")
    parser.add_argument("--n-test", type=int, default=1000, help="one size (see --sizes)")
    parser.add_argument("--sizes", help="test-set sizes, comma-separated (150,500,2000,10000)")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument(
        "--boundary-rows",
        type=int,
        default=100,
        help="rows the boundary-distance attack scores (0: not run)",
    )
    parser.add_argument(
        "--first-sample",
        type=int,
        default=0,
        help="number of the first test set (fresh sets for a second run)",
    )
    parser.add_argument("--records", help="write every audit's intervals as JSON lines here")
    parser.add_argument("--verbose", action="store_true", help="each sample's components")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [args.n_test]
    counts = _counts(args.samples, sizes)

    start = time.perf_counter()
    study = _setup(args.bootstrap, args.boundary_rows)
    out = open(args.records, "w") if args.records else None  # noqa: SIM115
    by_size: dict[int, list[dict[str, Any]]] = {}
    for n_test, samples in zip(sizes, counts, strict=True):
        records = by_size.setdefault(n_test, [])
        for sample in range(args.first_sample, args.first_sample + samples):
            found = _audit(study, n_test, sample, args.verbose)
            records += found
            if out:
                out.writelines(json.dumps(r) + "\n" for r in found)
                out.flush()
            done = sample + 1 - args.first_sample
            if done % 10 == 0 or done == samples:
                shown = ", ".join(  # share of audits with a covering interval, so far
                    f"{k} {np.mean([r['covered'] for r in records if r['statistic'] == k]):.3f}"
                    for k in ("auroc", "ece", "sps")
                )
                elapsed = time.perf_counter() - start
                print(f"{n_test} rows: {done}/{samples} samples ({elapsed:.0f} s): {shown}",
                      file=sys.stderr)  # fmt: skip
        print(_detail(records, n_test, samples), flush=True)
        print(flush=True)
    if out:
        out.close()
    print(f"BCa, {args.bootstrap} replicates; samples per size: "
          + ", ".join(f"{n:,} rows {s}" for n, s in zip(sizes, counts, strict=True)))  # fmt: skip
    print(_across(by_size, study))


if __name__ == "__main__":
    main()
