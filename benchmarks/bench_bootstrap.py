"""Benchmark the bootstrap engine against a per-resample scikit-learn reference.

Workload (the lead's reference): synthetic test set, two groups, one model; per resample the
absolute metrics of each group and overall (unweighted) and the population metric weighted to each
group, M_a, with weights P(A = a | X); T_a = group metric - M_a. The reference calls scikit-learn
once per metric, group and weighting on each resample (as the authors' code does); the engine
computes the same 5 evaluations with :func:`bootstrap_evaluations`. Both use the same resamples,
and the script checks that they agree to 1e-9 before it prints per-resample costs and ratios.
``--metrics all`` (default) computes every metric of ``vocabulary.METRICS`` on both sides,
``--metrics pipeline`` the 8 of the pipeline's tables (``vocabulary.PIPELINE_METRICS``).

Usage::

    python benchmarks/bench_bootstrap.py [--n-rows 20000] [--reference-resamples 50]
        [--engine-resamples 10000] [--threads 1 2] [--seed 0] [--metrics all|pipeline]
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import numba
import numpy as np
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    brier_score_loss,
    log_loss,
    precision_score,
    recall_score,
    roc_auc_score,
)

from disaggregated_eval.engine import (
    Evaluation,
    bootstrap_evaluations,
    resample_seed,
)
from disaggregated_eval.vocabulary import METRICS, PIPELINE_METRICS

AGREEMENT_TOL = 1e-9


def synthetic(n: int, seed: int):
    """Two groups, covariate shift, one model score in (0, 1) and P(A = a | X) weights."""
    rng = np.random.default_rng(seed)
    a = rng.binomial(1, 0.3, n)
    x = rng.normal(loc=0.5 * a, size=n)
    y = rng.binomial(1, 1.0 / (1.0 + np.exp(-(x - 0.2 * a))))
    score = 1.0 / (1.0 + np.exp(-(0.9 * x + 0.1 * rng.normal(size=n))))
    p1 = 1.0 / (1.0 + np.exp(-(np.log(0.3 / 0.7) + 0.5 * x - 0.125)))  # P(A = 1 | X), Bayes rule
    return y, a, score, np.stack([1.0 - p1, p1], axis=1)


def sklearn_metrics(y, r, w=None, t=0.5, metrics=METRICS):
    """The metrics with scikit-learn, one call each (what the authors' code does per resample)."""
    yhat = (r >= 0.5).astype(int)
    w_ = np.ones(len(y)) if w is None else w
    tpr = recall_score(y, yhat, sample_weight=w, zero_division=0)
    tnr = recall_score(y, yhat, pos_label=0, sample_weight=w, zero_division=0)
    pi = np.sum(w_ * y) / np.sum(w_)
    values = {
        "log_loss": lambda: log_loss(y, r, sample_weight=w, labels=[0, 1]),
        "auc": lambda: roc_auc_score(y, r, sample_weight=w),
        "sensitivity": lambda: tpr,
        "specificity": lambda: tnr,
        "precision": lambda: precision_score(y, yhat, sample_weight=w, zero_division=0),
        "net_benefit": lambda: tpr * pi - (1.0 - tnr) * (1.0 - pi) * t / (1.0 - t),
        "label_rate": lambda: pi,
        "predicted_positive_rate": lambda: np.sum(w_ * yhat) / np.sum(w_),
        "accuracy": lambda: accuracy_score(y, yhat, sample_weight=w),
        "false_positive_rate": lambda: 1.0 - tnr,
        "false_negative_rate": lambda: 1.0 - tpr,
        "brier_score": lambda: brier_score_loss(y, r, sample_weight=w),
        "mean_predicted_risk": lambda: np.average(r, weights=w_),
        "observed_expected_ratio": lambda: np.sum(w_ * y) / np.sum(w_ * r),
        "balanced_accuracy": lambda: balanced_accuracy_score(y, yhat, sample_weight=w),
    }
    return np.array([values[name]() for name in metrics])


def reference(y, a, score, p, n_resamples, seed, metrics):
    """Per-resample loop: (overall, group 0, group 1, M_0, M_1) x metrics, and T_a."""
    n = len(y)
    out = np.empty((n_resamples, 5, len(metrics)))
    for i in range(n_resamples):
        rows = np.random.Generator(np.random.PCG64(resample_seed(seed, i))).integers(0, n, size=n, dtype=np.int32)
        yr, ar, rr = y[rows], a[rows], score[rows]
        out[i, 0] = sklearn_metrics(yr, rr, metrics=metrics)
        for g in (0, 1):
            in_group = ar == g
            out[i, 1 + g] = sklearn_metrics(yr[in_group], rr[in_group], metrics=metrics)
            out[i, 3 + g] = sklearn_metrics(yr, rr, p[rows, g], metrics=metrics)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-rows", type=int, default=20_000)
    parser.add_argument("--reference-resamples", type=int, default=50)
    parser.add_argument("--engine-resamples", type=int, default=10_000)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics", choices=("all", "pipeline"), default="all")
    args = parser.parse_args(argv)
    metrics = METRICS if args.metrics == "all" else PIPELINE_METRICS
    if args.engine_resamples < args.reference_resamples:
        parser.error("--engine-resamples must be >= --reference-resamples (the shared resamples are compared)")

    y, a, score, p = synthetic(args.n_rows, args.seed)
    evaluations = [
        Evaluation("model", np.ones(args.n_rows)),
        Evaluation("model", (a == 0).astype(float)),
        Evaluation("model", (a == 1).astype(float)),
        Evaluation("model", p[:, 0]),
        Evaluation("model", p[:, 1]),
    ]
    print(
        f"workload: {args.n_rows} rows, 2 groups, 1 model, {len(evaluations)} evaluations "
        f"(overall, 2 groups, M_0, M_1) x {len(metrics)} metrics; numba {numba.__version__}, "
        f"NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}; load average {os.getloadavg()}"
    )

    # First call: numba compiles or loads the on-disk cache (cache=True).
    start = time.perf_counter()
    bootstrap_evaluations(y, {"model": score}, evaluations[:1], n_resamples=1, seed=args.seed, metrics=metrics)
    print(f"first engine call (compile or cache load): {time.perf_counter() - start:.2f} s")

    # Wall time is what counts; CPU time (all threads) is printed too because other jobs on a
    # shared machine inflate wall time but hardly CPU time.
    start, cpu = time.perf_counter(), time.process_time()
    expected = reference(y, a, score, p, args.reference_resamples, args.seed, metrics)
    reference_cost = (time.perf_counter() - start) / args.reference_resamples
    reference_cpu = (time.process_time() - cpu) / args.reference_resamples
    print(
        f"reference (scikit-learn per resample): {reference_cost * 1e3:.2f} ms/resample wall, "
        f"{reference_cpu * 1e3:.2f} ms CPU, over {args.reference_resamples} resamples"
    )

    for n_threads in args.threads:
        start, cpu = time.perf_counter(), time.process_time()
        result = bootstrap_evaluations(
            y,
            {"model": score},
            evaluations,
            n_resamples=args.engine_resamples,
            seed=args.seed,
            n_threads=n_threads,
            metrics=metrics,
        )
        engine_cost = (time.perf_counter() - start) / args.engine_resamples
        engine_cpu = (time.process_time() - cpu) / args.engine_resamples
        shared = result.replicates[: args.reference_resamples]
        difference = float(np.max(np.abs(shared - expected)))
        t_engine = shared[:, 1:3] - shared[:, 3:5]
        t_reference = expected[:, 1:3] - expected[:, 3:5]
        t_difference = float(np.max(np.abs(t_engine - t_reference)))
        ok = difference <= AGREEMENT_TOL and t_difference <= AGREEMENT_TOL
        print(
            f"engine, {n_threads} thread(s): {engine_cost * 1e3:.4f} ms/resample wall "
            f"({engine_cpu * 1e3:.4f} ms CPU) over {args.engine_resamples} resamples; "
            f"speed-up x{reference_cost / engine_cost:.0f} wall, x{reference_cpu / engine_cpu:.0f} CPU; "
            f"max |engine - reference| = "
            f"{difference:.1e} (metrics), {t_difference:.1e} (T_a) -> {'OK' if ok else 'MISMATCH'}"
        )
        if not ok:
            return 1
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        f"peak resident memory of this process: {peak:.0f} MiB "
        f"(replicates array: {result.replicates.nbytes / 2**20:.1f} MiB); load average {os.getloadavg()}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
