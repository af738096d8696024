"""Full-size bootstrap evaluation of one ACS task on synthetic predictions.

Shape of the real ACSIncome test split: about 190,000 test rows, 6 subgroups, 3 model types
(``x``, ``xa``, ``xa_stratified``) and 4 controls (none, X, Y, R), 10,000 resamples, estimated
weights only. Prints the wall time, its split (bootstrap vs summary) and the peak memory.
Goal (issue 3): under 20 minutes on 2 cores.

Usage::

    python benchmarks/bench_bootstrap_acs.py [--n-rows 190000] [--n-resamples 10000] [--threads 2]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd

from disaggregated_eval import seeds
from disaggregated_eval.evaluation import controlled_evaluation


def synthetic_task(n_rows: int, n_groups: int, seed: int):
    """Labels, groups, scores of three models and a long weight table shaped like an ACS task."""
    rng = seeds.generator(seed, "bench_acs_bootstrap")
    shares = np.array([0.16, 0.04, 0.33, 0.025, 0.01, 0.435])[:n_groups]
    groups = rng.choice(n_groups, size=n_rows, p=shares / shares.sum())
    x = rng.normal(size=n_rows) + 0.3 * groups
    logit = 1.2 * x - 0.2 * groups
    y = (rng.random(n_rows) < 1 / (1 + np.exp(-logit))).astype(np.int64)
    scores = {}
    for name, noise in (("x", 0.6), ("xa", 0.5), ("xa_stratified", 0.55)):
        raw = 1 / (1 + np.exp(-(logit + noise * rng.normal(size=n_rows))))
        # Tree ensembles give a few thousand distinct scores: round to mimic the ties.
        scores[name] = np.clip(np.round(raw, 4), 1e-4, 1 - 1e-4)
    blocks = []
    for control, model in [("X", "*"), ("Y", "*")] + [("R", m) for m in scores]:
        p = rng.dirichlet(np.ones(n_groups) * 2.0, size=n_rows)
        block = pd.DataFrame({f"p_{k}": p[:, k] for k in range(n_groups)})
        block.insert(0, "row", np.arange(n_rows))
        block.insert(0, "model", model)
        block.insert(0, "control", control)
        block.insert(0, "weight_source", "estimated")
        blocks.append(block)
    return y, groups, scores, pd.concat(blocks, ignore_index=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-rows", type=int, default=190_000)
    parser.add_argument("--n-resamples", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=2025)
    args = parser.parse_args()

    y, groups, scores, weights = synthetic_task(args.n_rows, 6, args.seed)
    labels = ["Asian", "Black", "Hispanic", "Multiracial", "Other", "White"]
    last = [time.perf_counter()]

    def progress(done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] > 60 or done == total:
            print(f"  {done}/{total} resamples, {now - start:.0f} s", flush=True)
            last[0] = now

    start = time.perf_counter()
    table = controlled_evaluation(
        y,
        groups,
        scores,
        weights=weights,
        group_labels=labels,
        relative_to={"xa": "x", "xa_stratified": "x"},
        n_resamples=args.n_resamples,
        seed=seeds.seed_sequence(args.seed, "bootstrap", "bench"),
        n_threads=args.threads,
        study="acs",
        dataset="synthetic",
        progress=progress,
    )
    elapsed = time.perf_counter() - start
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    n_eval = table.query("comparison in ['absolute', 'weighted_population', 'shared_space']")
    print(f"rows={args.n_rows} groups=6 models=3 controls=4 resamples={args.n_resamples} threads={args.threads}")
    n_metrics = table["metric"].nunique()
    print(
        f"table rows: {len(table)} ({len(n_eval) // n_metrics} weighted/unweighted evaluations x {n_metrics} metrics)"
    )
    print(f"wall time: {elapsed:.1f} s ({elapsed / 60:.2f} min); goal < 20 min")
    print(f"per resample: {elapsed / args.n_resamples * 1e3:.2f} ms")
    print(f"peak memory (ru_maxrss): {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
