"""The engine's one walk against today's walkers (the commit before the one-engine change), in one run.

Workloads (synthetic, continuous scores, 12 metrics, the same data and resamples on every side):

* ``slices``: the audit's workload, every slice of two attributes (6 x 2 levels) and their
  intersection (21 slices) and the rest of each, for one model, with sample weights. Three sides:
  today's slice kernel (``audit._kernel.slice_bootstrap``, cells summed into slices), the engine's
  families as coded streams (``audit.estimates.estimate_all``: a row adds to one accumulator per
  family), and the engine with the same slices and rests as 42 dense 0/1 weight columns (the
  library's way: one evaluation per slice). This answers "is the slice walker faster than the
  library walker on the same slices?".
* ``evaluations-5`` and ``evaluations-27``: the library's workload (``bootstrap_evaluations``):
  5 weighted evaluations of one model (``benchmarks/bench_bootstrap.py``'s) and 27 per model for two
  models (the pipeline's per-model count: overall, 2 groups, 2 weight sources x 3 controls x 2 groups
  x (M_a, shared space)); today's lane and wide walks against the engine.

Each side runs ``--repeats`` times (the minimum is kept) after a warm-up that compiles numba; the
reference runs in a subprocess on the reference commit's package (``benchmarks/_reference.py``).
Printed: milliseconds per resample (process CPU time, 1 numba thread, and wall with ``--threads``),
ratios new / today, the machine's load average, and the agreement of the results.

Usage::

    python benchmarks/bench_engine.py [--n-rows 20000] [--resamples 200] [--repeats 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _reference import REFERENCE_COMMIT, run_reference

METRICS12 = (
    "log_loss", "auc", "sensitivity", "specificity", "precision", "net_benefit", "label_rate",
    "predicted_positive_rate", "accuracy", "false_positive_rate", "false_negative_rate", "brier_score",
)  # fmt: skip

DATA = """
import numpy as np
def data(n, seed=0):
    rng = np.random.default_rng(seed)
    race = rng.choice(6, n, p=[0.4, 0.3, 0.15, 0.1, 0.04, 0.01])
    sex = rng.integers(0, 2, n)
    y = rng.binomial(1, 0.3 + 0.05 * (race % 3))
    r = np.clip(0.35 * y + 0.65 * rng.random(n), 0, 1)
    r2 = np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1)
    w = rng.gamma(2.0, 1.0, n)
    return race, sex, y.astype(float), r, r2, w
def evaluations(n, k, seed=1):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 2, n)
    return [rng.random(n) if j % 2 else (g == j % 2).astype(float) for j in range(k)]
"""

SLICES_OLD = (
    DATA
    + """
import json, sys, time
import numba
from disaggregated_eval.audit._kernel import slice_bootstrap
from disaggregated_eval.audit.slices import Attribute, plan_slices
from disaggregated_eval.bootstrap import metric_slots
from disaggregated_eval import seeds
n, B, repeats, threads = {n}, {B}, {repeats}, {threads}
race, sex, y, r, r2, w = data(n)
plan = plan_slices((Attribute("race", tuple("abcdef"), race), Attribute("sex", ("F", "M"), sex)), intersections=2)
metrics = {metrics}
def run(B, nt):
    return slice_bootstrap(plan, y, [r], w, slots=metric_slots(metrics), threshold=0.5, preference_threshold=0.5,
                           n_resamples=B, seed=seeds.seed_sequence(1, "bench"), n_threads=nt)
run(8, 1)
cpu, wall = [], []
for _ in range(repeats):
    t0, c0 = time.perf_counter(), time.process_time(); run(B, 1); cpu.append(time.process_time() - c0)
    t0 = time.perf_counter(); out = run(B, threads); wall.append(time.perf_counter() - t0)
print(json.dumps(dict(cpu=min(cpu) / B, wall=min(wall) / B, sample=out.replicates[:3, 0, :, :, :].tolist())))
"""
)

EVALS_OLD = (
    DATA
    + """
import json, time
from disaggregated_eval.bootstrap import Evaluation, bootstrap_evaluations
n, B, repeats, threads, k, models = {n}, {B}, {repeats}, {threads}, {k}, {models}
race, sex, y, r, r2, w = data(n)
ws = evaluations(n, k)
scores = dict(a=r, b=r2)
evs = [Evaluation(m, v) for m in list(scores)[:models] for v in ws]
metrics = {metrics}
def run(B, nt):
    return bootstrap_evaluations(y, scores, evs, n_resamples=B, seed=3, metrics=metrics, n_threads=nt)
run(8, 1)
cpu, wall = [], []
for _ in range(repeats):
    c0 = time.process_time(); run(B, 1); cpu.append(time.process_time() - c0)
    t0 = time.perf_counter(); out = run(B, threads); wall.append(time.perf_counter() - t0)
print(json.dumps(dict(cpu=min(cpu) / B, wall=min(wall) / B, sample=out.replicates[:3].tolist())))
"""
)


def _time(run, B, repeats, threads):
    run(8, 1)
    cpu, wall = [], []
    out = None
    for _ in range(repeats):
        c0 = time.process_time()
        run(B, 1)
        cpu.append(time.process_time() - c0)
        t0 = time.perf_counter()
        out = run(B, threads)
        wall.append(time.perf_counter() - t0)
    return min(cpu) / B, min(wall) / B, out


def slices_new(n, B, repeats, threads):
    from disaggregated_eval import seeds
    from disaggregated_eval.audit.estimates import estimate_all
    from disaggregated_eval.audit.slices import Attribute, plan_slices
    from disaggregated_eval.engine.bootstrap import bootstrap_layout
    from disaggregated_eval.engine.sums import metric_slots, terms_for
    from disaggregated_eval.engine.walk import ModelStreams, Stream, build_layout

    namespace: dict = {}
    exec(DATA, namespace)
    race, sex, y, r, _, w = namespace["data"](n)
    plan = plan_slices((Attribute("race", tuple("abcdef"), race), Attribute("sex", ("F", "M"), sex)), intersections=2)
    slots = metric_slots(METRICS12)
    seed = seeds.seed_sequence(1, "bench")

    def coded(B, nt):
        est = estimate_all(plan, y, [r], w, [], metrics=METRICS12, slots=slots, threshold=0.5, odds=1.0,
                           n_resamples=B, seed=seed, strata=None, n_threads=nt)  # fmt: skip
        return est.replicates[:, est.slice_rows[0, :, 0], :]  # the slices (side 0)

    masks = [plan.slice_mask(s) for s in range(plan.n_slices)]
    columns = [w * m for m in masks] + [w * ~m for m in masks[1:]]
    layout = build_layout(
        y,
        [
            ModelStreams(
                r, np.stack(columns, axis=1), np.zeros((n, 0), np.int32), tuple(Stream(c) for c in range(len(columns)))
            )
        ],
        thresholds=(0.5,),
        terms=terms_for(METRICS12),
    )

    def dense(B, nt):
        boot = bootstrap_layout(layout, slots=slots, odds=1.0, n_resamples=B, seed=seed, n_threads=nt)
        return boot.replicates[:, :, 0, :]

    return _time(coded, B, repeats, threads), _time(dense, B, repeats, threads), plan


def evaluations_new(n, B, repeats, threads, k, models):
    from disaggregated_eval.engine import Evaluation, bootstrap_evaluations

    namespace: dict = {}
    exec(DATA, namespace)
    _, _, y, r, r2, _ = namespace["data"](n)
    ws = namespace["evaluations"](n, k)
    scores = dict(a=r, b=r2)
    evs = [Evaluation(m, v) for m in list(scores)[:models] for v in ws]

    def run(B, nt):
        return bootstrap_evaluations(y, scores, evs, n_resamples=B, seed=3, metrics=METRICS12, n_threads=nt).replicates

    return _time(run, B, repeats, threads)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-rows", type=int, default=20_000)
    parser.add_argument("--resamples", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    n, B, repeats, threads = args.n_rows, args.resamples, args.repeats, args.threads
    print(f"load average at start: {os.getloadavg()}; reference commit {REFERENCE_COMMIT}; {n:,} rows, {B} resamples")
    print(
        f"{'workload':<22}{'side':<34}{'ms/resample CPU (1 thread)':>28}{f'ms wall ({threads} threads)':>22}{'ratio CPU':>11}"
    )
    fmt = dict(n=n, B=B, repeats=repeats, threads=threads, metrics=repr(METRICS12))

    old = run_reference(SLICES_OLD.format(**fmt))
    (c_cpu, c_wall, c_out), (d_cpu, d_wall, d_out), plan = slices_new(n, B, repeats, threads)
    old_sample = np.asarray(old["sample"])  # (3, n_slices, 2, metrics)
    new_coded = c_out[:3]
    agree_coded = np.nanmax(np.abs(old_sample[:, :, 0, :] - new_coded[:, : plan.n_slices, :]))
    agree_dense = np.nanmax(np.abs(d_out[:3, : plan.n_slices, :] - new_coded[:, : plan.n_slices, :]))
    print(
        f"{'slices (21 + rests)':<22}{'today: slice kernel (cells)':<34}{old['cpu'] * 1e3:>28.3f}{old['wall'] * 1e3:>22.3f}{1.0:>11.2f}"
    )
    print(
        f"{'':<22}{'engine: families as coded streams':<34}{c_cpu * 1e3:>28.3f}{c_wall * 1e3:>22.3f}{c_cpu / old['cpu']:>11.2f}"
    )
    print(
        f"{'':<22}{'engine: 42 dense 0/1 columns':<34}{d_cpu * 1e3:>28.3f}{d_wall * 1e3:>22.3f}{d_cpu / old['cpu']:>11.2f}"
    )
    print(f"{'':<22}coded vs dense on the same slices: dense / coded = {d_cpu / c_cpu:.2f} (CPU)")
    print(f"{'':<22}agreement, today vs engine (slices, 3 resamples): max |diff| = {agree_coded:.1e}")
    print(f"{'':<22}agreement, coded vs dense streams: max |diff| = {agree_dense:.1e}")
    for k, models in ((5, 1), (27, 2)):
        old = run_reference(EVALS_OLD.format(k=k, models=models, **fmt))
        cpu, wall, out = evaluations_new(n, B, repeats, threads, k, models)
        agree = np.nanmax(np.abs(np.asarray(old["sample"]) - out[:3]))
        name = f"evaluations-{k} x {models}"
        print(
            f"{name:<22}{'today: lane/wide walks':<34}{old['cpu'] * 1e3:>28.3f}{old['wall'] * 1e3:>22.3f}{1.0:>11.2f}"
        )
        print(f"{'':<22}{'engine: the one walk':<34}{cpu * 1e3:>28.3f}{wall * 1e3:>22.3f}{cpu / old['cpu']:>11.2f}")
        print(f"{'':<22}agreement (3 resamples): max |diff| = {agree:.1e}")
    print(f"load average at end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
