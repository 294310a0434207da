"""Benchmark: the own-data audit's numeric pieces on synthetic ICU cohorts of growing size.

Each size runs in its own Python process (imports done before the clock starts),
so its peak resident memory is its own. The cohort generator and the model fit
are timed separately from the audit, which is what the 120 s / 4 GiB budget of
issue 12 is about.

    python benchmarks/bench_owner_scale.py                        # 10k, 100k, 1M rows
    python benchmarks/bench_owner_scale.py --sizes 10000 --n-boot 200

The audit path, in order (stage names as in the table):

- ``adapt``: the model adapter (positive class, columns) and one checked predict;
- ``sample``: training scale (std, range), membership / pool / FGSM / HSJ rows by
  seeded content-order permutations (hashing every row);
- ``surrogate``: the FGSM surrogate fitted on at most ``--surrogate-rows`` rows;
- ``predict``: one ``predict_proba`` on every test row, the members and the FGSM copies;
- ``fgsm``: FGSM in std units, clipped, on ``--fgsm-rows`` rows;
- ``diagnostics``: AUROC, Brier, recalibration, ECEs, reliability bins on every test row;
- ``shadow_mi``: the task's shadow-model attack (pool 5,000) queried on all members
  and non-members (as many as there are test rows);
- ``loss_attack``: loss-threshold attack on the same rows;
- ``lira``: 4 shadow models of the target's recipe on ``--lira-rows`` candidates;
- ``walk``: the task's boundary walk on 50 rows (one predict of the test set first);
- ``hsj``: HopSkipJump distances of 50 rows;
- ``bootstrap``: ``--n-boot`` joint replicates of the four components and the SPS.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SIZES = "10000,100000,1000000"
TRAIN_SHARE = 57_839 / (57_839 + 12_395)
"""The published extract's train / test proportion."""


def worker(n_rows: int, args: argparse.Namespace) -> dict[str, Any]:
    import numpy as np
    import sklearn.ensemble  # noqa: F401 - imported before the clock, as every worker does
    import sklearn.linear_model  # noqa: F401
    import sklearn.metrics  # noqa: F401
    from xgboost import XGBClassifier

    from pytest_clinaudit.reference import (
        attacks,
        diagnostics,
        hopskipjump,
        lira,
        models,
        sampling,
        uncertainty,
    )
    from pytest_clinaudit.reference.icu import FEATURES, generate_icu_cohort
    from pytest_clinaudit.reference.params import (
        BoundaryParams,
        FGSMParams,
        MembershipParams,
        SurrogateParams,
        VerdictThresholds,
        Weights,
    )

    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    cpu_mark = [time.process_time()]

    def stage(name: str, started: float) -> float:
        # Wall time is what a user waits; CPU time (all threads of this process)
        # shows the work when other processes share the cores.
        now, now_cpu = time.perf_counter(), time.process_time()
        seconds[name], cpu[name] = now - started, now_cpu - cpu_mark[0]
        cpu_mark[0] = now_cpu
        print(
            f"  {n_rows:>9,} rows: {name} {seconds[name]:.2f} s (cpu {cpu[name]:.2f} s)",
            file=sys.stderr,
            flush=True,
        )
        return now

    t = time.perf_counter()
    n_train = round(n_rows * TRAIN_SHARE)
    data = generate_icu_cohort(seed=42, n_train=n_train, n_test=n_rows - n_train).dataset
    X_train, y_train, X_test, y_test = data.X_train, data.y_train, data.X_test, data.y_test
    t = stage("generate", t)
    estimator = XGBClassifier(
        n_estimators=100,
        max_depth=4,
        learning_rate=0.1,
        tree_method="hist",
        n_jobs=args.threads,
        random_state=42,
        verbosity=0,
    ).fit(X_train, y_train)
    t = stage("fit_model", t)
    audit_start = t

    model = models.adapt_model(estimator, feature_names=FEATURES, positive_class="1")
    model.predict_proba(X_test[:10])
    t = stage("adapt", t)

    scale = sampling.training_scale(X_train)
    membership = sampling.membership_sample(
        X_train, y_train, X_test, y_test, seed=42, pool_cap=5000
    )
    fgsm_rows = sampling.sample_rows(X_test, y_test, args.fgsm_rows, seed=43)
    hsj_rows = sampling.sample_rows(X_test, y_test, 50, seed=44)
    surrogate_rows = sampling.sample_rows(X_train, y_train, args.surrogate_rows, seed=45)
    t = stage("sample", t)

    surrogate = SurrogateParams(
        scaler=True, C=1.0, max_iter=2000, class_weight="balanced", random_state=42
    )
    sign = attacks.fit_surrogate_sign(surrogate, X_train[surrogate_rows], y_train[surrogate_rows])
    t = stage("surrogate", t)

    X_adv = sampling.fgsm_perturb_std(
        X_test[fgsm_rows], y_test[fgsm_rows], sign, epsilon=0.5, scale=scale
    )
    members = membership.members
    proba = model.predict_proba(np.concatenate([X_test, X_train[members], X_adv]))
    n_test, n_members = len(X_test), len(members)
    p_test = proba[:n_test, 1]
    member_proba = proba[n_test : n_test + n_members]
    p_adv = proba[n_test + n_members :, 1]
    t = stage("predict", t)

    fgsm_params = FGSMParams(
        epsilon=0.5, n_samples=args.fgsm_rows, seed=43, single_class_score=0.5, surrogate=surrogate
    )
    fgsm = attacks.fgsm_score(y_test[fgsm_rows], p_test[fgsm_rows], p_adv, params=fgsm_params)
    t = stage("fgsm", t)

    diag = diagnostics.diagnose(y_test, p_test)
    t = stage("diagnostics", t)

    mi_params = MembershipParams(
        pool_cap=5000,
        in_fraction=0.5,
        rounds=4,
        seed=42,
        shadow_n_estimators=50,
        shadow_max_depth=6,
        shadow_class_weight="balanced",
        shadow_seed=42,
        attack_n_estimators=50,
        attack_seed=42,
        eval_cap=n_test,
        threshold=0.5,
    )
    shadow_attack = attacks.fit_membership_attack(
        X_train[membership.pool], y_train[membership.pool], mi_params
    )
    nonmember_proba = proba[membership.nonmembers]
    member_right, nonmember_right = uncertainty.membership_guesses(
        shadow_attack, member_proba, nonmember_proba, threshold=0.5
    )
    accuracy = (member_right.sum() + nonmember_right.sum()) / (n_members + len(nonmember_right))
    mi_score = float(np.clip(1 - 2 * (accuracy - 0.5), 0, 1))
    t = stage("shadow_mi", t)

    loss = lira.loss_threshold_attack(
        y_train[members],
        member_proba[:, 1],
        y_test[membership.nonmembers],
        p_test[membership.nonmembers],
    )
    t = stage("loss_attack", t)

    k = min(args.lira_rows // 2, n_members, len(membership.nonmembers))
    fit_shadow = lira.sklearn_shadow_fitter(estimator, feature_names=FEATURES, positive_class="1")
    lira_result = lira.lira(
        model,
        fit_shadow,
        X_train[members[:k]],
        y_train[members[:k]],
        X_test[membership.nonmembers[:k]],
        y_test[membership.nonmembers[:k]],
        n_shadows=4,
        seed=42,
    )
    t = stage("lira", t)

    walk_params = BoundaryParams(
        n_samples=50, seed=42, step_size=0.05, max_steps=100, min_norm=1e-10
    )
    test_pred = model.predict(X_test)
    walk = attacks.boundary_attack_resistance(
        model, X_test, test_predictions=test_pred, params=walk_params
    )
    t = stage("walk", t)

    reference = sampling.sample_rows(X_test, y_test, 5000, seed=46)
    hsj = hopskipjump.minimal_perturbation_distance(
        model,
        X_test[hsj_rows],
        std=scale.std,
        reference_rows=X_test[reference],
        reference_predictions=test_pred[reference],
        low=scale.low,
        high=scale.high,
    )
    t = stage("hsj", t)

    calibration_score = max(0.0, 1.0 - 12.0 * diag.ece_task)
    walk_idx = np.random.RandomState(walk_params.seed).choice(n_test, 50, replace=False)
    rows = uncertainty.ComponentRows(
        n_test=n_test,
        fgsm=uncertainty.FGSMRows(fgsm_rows, y_test[fgsm_rows], p_test[fgsm_rows], p_adv, 0.5),
        membership=uncertainty.MembershipRows(member_right, membership.nonmembers, nonmember_right),
        calibration=uncertainty.CalibrationRows(np.arange(n_test), y_test, p_test, 10, 12.0),
        walk=uncertainty.WalkRows(walk_idx, np.asarray(walk.steps), 100),
    )
    boot = uncertainty.bootstrap(
        rows,
        weights=Weights(0.35, 0.25, 0.20, 0.20),
        thresholds=VerdictThresholds(80.0, 65.0),
        n_boot=args.n_boot,
        seed=42,
    )
    t = stage("bootstrap", t)
    seconds["audit_total"] = t - audit_start
    cpu["audit_total"] = sum(v for k, v in cpu.items() if k not in ("generate", "fit_model"))

    return {
        "n_rows": n_rows,
        "n_train": n_train,
        "n_test": n_test,
        "seconds": seconds,
        "cpu": cpu,
        "summary": {
            "fgsm": fgsm.score,
            "mi": mi_score,
            "calibration": calibration_score,
            "walk": walk.score,
            "sps_ci": [boot.sps.low, boot.sps.high],
            "verdict_change": boot.verdict_change_probability,
            "auroc": diag.auroc,
            "loss_auc": loss.auc,
            "lira_auc": lira_result.online.auc,
            "hsj_median": hsj.summary()["median"],
        },
    }


# ------------------------------------------------------------------- driver


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(
            c.rjust(w) if i else c.ljust(w)
            for i, (c, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default=SIZES, help="comma-separated total row counts")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--fgsm-rows", type=int, default=1000)
    parser.add_argument("--lira-rows", type=int, default=5000, help="members + non-members")
    parser.add_argument("--surrogate-rows", type=int, default=100_000)
    parser.add_argument("--threads", type=int, default=1, help="XGBoost threads (fit and predict)")
    parser.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        result = worker(args.worker, args)
        result["peak_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(result))
        return

    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        command = [
            sys.executable,
            __file__,
            "--worker",
            str(size),
            "--n-boot",
            str(args.n_boot),
            "--fgsm-rows",
            str(args.fgsm_rows),
            "--lira-rows",
            str(args.lira_rows),
            "--surrogate-rows",
            str(args.surrogate_rows),
            "--threads",
            str(args.threads),
        ]
        out = subprocess.run(command, stdout=subprocess.PIPE, text=True, cwd=ROOT)
        if out.returncode != 0:
            raise SystemExit(f"worker {size} failed")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))

    stages = list(results[0]["seconds"])
    print(f"python {sys.version.split()[0]}; n_boot {args.n_boot}; XGBoost threads {args.threads}")
    print("\nWall (CPU) seconds per stage; generate and fit_model are not part of the audit")
    header = ["stage", *(f"{r['n_rows']:,} rows" for r in results)]
    rows = [[s, *(f"{r['seconds'][s]:.2f} ({r['cpu'][s]:.2f})" for r in results)] for s in stages]
    rows.append(["peak MiB", *(f"{r['peak_mib']:.0f}" for r in results)])
    print(_table(header, rows))
    print("\nResults (sanity)")
    keys = list(results[0]["summary"])
    print(
        _table(
            ["value", *header[1:]],
            [[k, *(json.dumps(r["summary"][k]) for r in results)] for k in keys],
        )
    )


if __name__ == "__main__":
    main()
