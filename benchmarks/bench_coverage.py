"""Cost of the coverage study (target ``coverage``) per replicate, and the budget it implies.

Runs a few replicates of one setting exactly as rule ``coverage_replicates`` does
(:func:`disaggregated_eval.coverage.run_replicate`, one OpenMP thread, one bootstrap thread): some
with the estimated ``P(A | R)`` (cross-fitting: the costly part) and some without. It needs the main
run's outcome models and weight-model selection of the setting (``results/models/{setting}/
models.joblib``, ``results/weights/{setting}/weight_model_selection.csv`` under ``--workdir``).

It prints the wall and CPU seconds per replicate of each kind, and the reference of the same run:
the bootstrap engine's CPU per resample on the workload of ``bench_bootstrap.py`` (one model, five
evaluations, 20,000 rows), whose idle-machine value is in ``benchmarks/README.md``. On a shared
machine the ratio ``measured reference / idle reference`` estimates how much slower CPU time is now
than on an idle machine; the script divides by it to extrapolate. The extrapolation of the default
target on ``--cores`` cores assumes ``J = coverage.jobs_per_setting`` single-thread jobs per
setting of equal cost: with ``S`` settings the makespan is ``ceil(S J / cores)`` jobs of ``T / J``
each, ``T = n_replicates_r * t_R + (n_replicates - n_replicates_r) * t_noR`` (plus the start-up of
each job).

Usage::

    python benchmarks/bench_coverage.py --workdir . [--setting complex_anticausal_shift]
        [--with-r 2] [--without-r 3] [--n-replicates 200] [--n-replicates-r 80] [--cores 2]
        [--jobs-per-setting 4]
        [--idle-engine-ms 0.134]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import joblib
import numpy as np
from threadpoolctl import threadpool_limits

from disaggregated_eval import coverage, io, vocabulary, weight_models
from disaggregated_eval.engine import Evaluation, bootstrap_evaluations


def engine_cpu_ms(n_rows: int = 20_000, n_resamples: int = 1_000) -> float:
    """CPU ms per resample of the engine on bench_bootstrap.py's workload (5 evaluations, 1 thread)."""
    rng = np.random.default_rng(0)
    a = rng.binomial(1, 0.3, n_rows)
    x = rng.normal(loc=0.5 * a, size=n_rows)
    y = rng.binomial(1, 1.0 / (1.0 + np.exp(-(x - 0.2 * a))))
    score = 1.0 / (1.0 + np.exp(-(0.9 * x + 0.1 * rng.normal(size=n_rows))))
    p1 = 1.0 / (1.0 + np.exp(-(np.log(0.3 / 0.7) + 0.5 * x - 0.125)))
    evaluations = [Evaluation("m", np.ones(n_rows)), Evaluation("m", (a == 0) * 1.0), Evaluation("m", (a == 1) * 1.0),
                   Evaluation("m", 1.0 - p1), Evaluation("m", p1)]  # fmt: skip
    kwargs = dict(seed=0, metrics=vocabulary.PIPELINE_METRICS, n_threads=1)
    bootstrap_evaluations(y, {"m": score}, evaluations, n_resamples=10, **kwargs)  # compile / cache load
    start = time.process_time()
    bootstrap_evaluations(y, {"m": score}, evaluations, n_resamples=n_resamples, **kwargs)
    return 1000.0 * (time.process_time() - start) / n_resamples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path("."))
    parser.add_argument("--setting", default="complex_anticausal_shift")
    parser.add_argument("--with-r", type=int, default=2, help="replicates with estimated P(A | R)")
    parser.add_argument("--without-r", type=int, default=3, help="replicates without")
    parser.add_argument("--n-replicates", type=int, default=200)
    parser.add_argument("--n-replicates-r", type=int, default=80)
    parser.add_argument("--n-settings", type=int, default=len(vocabulary.MAIN_SETTINGS))
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--jobs-per-setting", type=int, default=4, help="coverage.jobs_per_setting")
    parser.add_argument("--n-test", type=int, default=20_000)
    parser.add_argument("--n-train", type=int, default=50_000)
    parser.add_argument("--n-resamples", type=int, default=1_000)
    parser.add_argument("--idle-engine-ms", type=float, default=0.134,
                        help="engine CPU ms per resample on an idle machine (benchmarks/README.md)")  # fmt: skip
    args = parser.parse_args()
    print(f"load average at start {os.getloadavg()}")
    d = args.setting
    fitted = joblib.load(args.workdir / "results" / "models" / d / "models.joblib")
    chosen = weight_models.selected_max_leaf_nodes(io.read_table(args.workdir / "results" / "weights" / d /
                                                          "weight_model_selection.csv"))  # fmt: skip
    with threadpool_limits(limits=1, user_api="openmp"):
        start_w, start_c = time.perf_counter(), time.process_time()
        oracles = coverage.score_oracles(d, fitted)
        coverage.population_truth(d, fitted=fitted, oracles=oracles)
        setup = (time.perf_counter() - start_w, time.process_time() - start_c)
        times: dict[bool, list[tuple[float, float]]] = {True: [], False: []}
        plan = [True] * args.with_r + [False] * args.without_r
        for r, estimate_r in enumerate(plan):
            w, c = time.perf_counter(), time.process_time()
            coverage.run_replicate(d, r, fitted=fitted, oracles=oracles, max_leaf_nodes=chosen, n_test=args.n_test,
                                   n_train=args.n_train, n_resamples=args.n_resamples, crossfit_folds=5,
                                   estimate_r=estimate_r, seed=20250101)  # fmt: skip
            times[estimate_r].append((time.perf_counter() - w, time.process_time() - c))
            print(f"replicate {r + 1} / {len(plan)} ({'with' if estimate_r else 'without'} estimated P(A | R)): "
                  f"{times[estimate_r][-1][0]:.2f} s wall, {times[estimate_r][-1][1]:.2f} s CPU", flush=True)  # fmt: skip
    engine = engine_cpu_ms()
    slowdown = engine / args.idle_engine_ms
    print(f"load average at end {os.getloadavg()}")
    print(f"setup (oracles + truth): {setup[0]:.2f} s wall, {setup[1]:.2f} s CPU")
    cpu = {k: float(np.mean([c for _, c in v])) for k, v in times.items() if v}
    for k, v in cpu.items():
        print(f"mean CPU per replicate {'with' if k else 'without'} estimated P(A | R): {v:.2f} s")
    print(f"engine reference now: {engine:.3f} ms CPU per resample (idle: {args.idle_engine_ms}); "
          f"CPU slowdown factor {slowdown:.2f}")  # fmt: skip
    if True in cpu and False in cpu:
        t_job = (args.n_replicates_r * cpu[True] + (args.n_replicates - args.n_replicates_r) * cpu[False]
                 + setup[1]) / slowdown  # fmt: skip
        n_jobs = args.n_settings * args.jobs_per_setting
        rounds = math.ceil(n_jobs / args.cores)
        print(
            f"extrapolated idle CPU per setting: {t_job / 60:.1f} min; default target on {args.cores} cores "
            f"({args.n_settings} settings x {args.jobs_per_setting} jobs, {rounds} rounds of "
            f"{t_job / args.jobs_per_setting / 60:.1f} min): about {rounds * t_job / args.jobs_per_setting / 60:.1f} "
            "min + start-up"
        )


if __name__ == "__main__":
    main()
