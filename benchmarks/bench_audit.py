"""Benchmark ``disaggregated_eval.audit.audit`` against fairlearn's ``MetricFrame`` bootstrap.

Workload (the issue's): 1,000,000 rows, two attributes (6 and 2 levels: 8 single slices, 12
intersection cells and overall), one model, the 12 metrics of ``vocabulary.METRICS``, 10,000
bootstrap resamples. Goal: under 2 minutes on 2 cores and under 2 GB peak memory, and at least
1,000 times faster per resample than fairlearn with point estimates equal to 1e-12.

Steps, all in one run:

1. **audit** in a fresh subprocess (so that its peak resident memory, ``ru_maxrss``, is its own):
   ``audit(data, n_resamples=10_000, n_permutations=0, n_threads=2)``; prints the wall time of each
   stage (from the progress callback), the total and the peak memory. Permutation tests are NOT
   included in this figure (``n_permutations=0``);
2. **permutations** in the same subprocess, timed separately: two audits with 200 resamples, without
   and with ``--permutations`` permutations; the difference is the cost of the tests (every comparison
   and metric, with the audit's exact tests and sequential early stopping);
3. **fairlearn**: ``MetricFrame(metrics=<the 12 metrics>, y_true, y_pred=score, sensitive_features=...)``
   for each family (race; sex; race and sex: fairlearn reports the intersection cells when given
   two sensitive features) -- the same 21 slices -- once without and once with
   ``n_boot=--fairlearn-boot``; its cost per resample is the difference divided by ``n_boot``
   (fairlearn computes every metric with scikit-learn on each resampled frame). The point estimates
   of both are compared (max absolute difference; must be <= 1e-12).

Usage::

    pip install fairlearn   # benchmark-only extra: pip install -e ".[bench]"
    python benchmarks/bench_audit.py [--n-rows 1000000] [--n-resamples 10000] [--threads 2]
        [--permutations 10000] [--fairlearn-boot 2] [--seed 0] [--skip-fairlearn]

The script prints the load average before and after: other jobs on the machine inflate wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd

POINT_TOL = 1e-12
RACE = ["Asian", "Black", "Hispanic", "Multiracial", "Other", "White"]
RACE_SHARES = [0.16, 0.05, 0.33, 0.03, 0.01, 0.42]


def synthetic(n: int, seed: int) -> pd.DataFrame:
    """ACS-like shares of six race levels, two sexes, a label and one model's score."""
    rng = np.random.default_rng(seed)
    race = rng.choice(len(RACE), n, p=RACE_SHARES)
    sex = rng.integers(0, 2, n)
    x = rng.normal(loc=0.2 * race - 0.3 * sex, size=n)
    y = rng.binomial(1, 1.0 / (1.0 + np.exp(-(x - 0.5))))
    score = 1.0 / (1.0 + np.exp(-(0.9 * x - 0.45 + 0.3 * rng.normal(size=n))))
    return pd.DataFrame(
        {
            "race": np.asarray(RACE, dtype=object)[race],
            "sex": np.where(sex == 1, "Male", "Female"),
            "y": y.astype(np.int64),
            "score": score,
        }
    )


# ----------------------------------------------------------------------------------------------
# The audit (child process)
# ----------------------------------------------------------------------------------------------


def run_audit(args: argparse.Namespace) -> dict:
    import resource

    from disaggregated_eval.audit import audit

    data = synthetic(args.n_rows, args.seed)
    common = dict(label="y", scores=["score"], groups=["race", "sex"], n_threads=args.threads)
    # Warm-up on a few rows: loads the numba kernels from the on-disk cache (or compiles them once).
    start = time.perf_counter()
    audit(data.head(2000), **common, n_resamples=40, n_permutations=8)
    warmup = time.perf_counter() - start

    # A stage's time runs from the previous progress report (of any stage) to its own last one,
    # so the preparation before a stage's first report counts towards it.
    stages: dict[str, float] = {}
    last = [0.0]

    def progress(stage: str, done: int, total: int) -> None:
        now = time.perf_counter()
        stages[stage] = stages.get(stage, 0.0) + now - last[0]
        last[0] = now

    cpu0 = time.process_time()
    start = last[0] = time.perf_counter()
    result = audit(data, **common, n_resamples=args.n_resamples, n_permutations=0, progress=progress)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    peak_audit = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0

    # Permutation tests, timed on their own: the same audit with few resamples, without and with
    # ``--permutations`` permutations; the difference is the cost of the tests as the audit runs them
    # (exact p-values for unweighted rates, sequential Monte-Carlo tests that stop early otherwise).
    perm = {}
    if args.permutations > 0:
        seconds, n_tests = [], 0
        for n_perm in (0, args.permutations):
            start = time.perf_counter()
            timed = audit(data, **common, n_resamples=200, n_permutations=n_perm)
            seconds.append(time.perf_counter() - start)
            n_tests = int(timed.comparisons["p_value"].notna().sum())
        perm = {"tests_s": seconds[1] - seconds[0], "permutations": args.permutations, "comparisons_with_p": n_tests}

    estimates = result.slices[["slice", "metric", "estimate"]].to_dict(orient="list")
    return {
        "warmup_s": warmup,
        "wall_s": wall,
        "cpu_s": cpu,
        "stages_s": stages,
        "peak_mib": peak_audit,
        "n_slices": int(result.slices["slice"].nunique()),
        "n_rows": result.n_rows,
        "estimates": estimates,
        "permutations": perm,
        "peak_mib_after_permutations": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
    }


# ----------------------------------------------------------------------------------------------
# fairlearn
# ----------------------------------------------------------------------------------------------


def fairlearn_metrics(threshold: float = 0.5, t: float = 0.5) -> dict:
    """The 12 metrics as functions of (y_true, score), with scikit-learn where it has them."""
    from sklearn.metrics import (
        accuracy_score,
        brier_score_loss,
        log_loss,
        precision_score,
        recall_score,
        roc_auc_score,
    )

    def hard(r):
        return (np.asarray(r) >= threshold).astype(int)

    def net_benefit(y, r):
        y, yhat = np.asarray(y), hard(r)
        return (np.sum(y * yhat) - np.sum((1 - y) * yhat) * t / (1 - t)) / len(y)

    return {
        "log_loss": lambda y, r: log_loss(y, r, labels=[0, 1]),
        "auc": roc_auc_score,
        "sensitivity": lambda y, r: recall_score(y, hard(r)),
        "specificity": lambda y, r: recall_score(y, hard(r), pos_label=0),
        "precision": lambda y, r: precision_score(y, hard(r), zero_division=0),
        "net_benefit": net_benefit,
        "label_rate": lambda y, r: float(np.mean(y)),
        "predicted_positive_rate": lambda y, r: float(np.mean(hard(r))),
        "accuracy": lambda y, r: accuracy_score(y, hard(r)),
        "false_positive_rate": lambda y, r: 1.0 - recall_score(y, hard(r), pos_label=0),
        "false_negative_rate": lambda y, r: 1.0 - recall_score(y, hard(r)),
        "brier_score": brier_score_loss,
    }


def run_fairlearn(data: pd.DataFrame, n_boot: int, seed: int) -> tuple[float, float, dict]:
    from fairlearn.metrics import MetricFrame

    metrics = fairlearn_metrics()
    families = [["race"], ["sex"], ["race", "sex"]]

    def frames(**boot):
        out = []
        for family in families:
            out.append(
                MetricFrame(
                    metrics=metrics, y_true=data["y"], y_pred=data["score"], sensitive_features=data[family], **boot
                )
            )
        return out

    start = time.perf_counter()
    point_frames = frames()
    point_s = time.perf_counter() - start
    start = time.perf_counter()
    frames(n_boot=n_boot, ci_quantiles=[0.025, 0.975], random_state=seed)
    boot_s = time.perf_counter() - start
    values: dict[tuple[str, str], float] = {}
    for family, frame in zip(families, point_frames):
        for metric, value in frame.overall.items():
            values[("overall", metric)] = float(value)
        for key, row in frame.by_group.iterrows():
            key = key if isinstance(key, tuple) else (key,)
            name = " & ".join(f"{a}={v}" for a, v in zip(family, key))
            for metric, value in row.items():
                values[(name, metric)] = float(value)
    return point_s, boot_s, values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-rows", type=int, default=1_000_000)
    parser.add_argument("--n-resamples", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--permutations", type=int, default=10_000)
    parser.add_argument("--fairlearn-boot", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-fairlearn", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(run_audit(args)))
        return 0

    print(f"load average before: {os.getloadavg()}", flush=True)
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--n-rows",
        str(args.n_rows),
        "--n-resamples",
        str(args.n_resamples),
        "--threads",
        str(args.threads),
        "--permutations",
        str(args.permutations),
        "--seed",
        str(args.seed),
    ]
    child = subprocess.run(cmd, check=True, capture_output=True, text=True)
    out = json.loads(child.stdout.strip().splitlines()[-1])
    per_resample_ms = 1e3 * out["wall_s"] / args.n_resamples  # end to end: an upper bound on the bootstrap's
    print(
        f"rows {out['n_rows']:,}, slices {out['n_slices']}, metrics 12, resamples {args.n_resamples:,}, "
        f"threads {args.threads}"
    )
    print(f"audit warm-up (numba cache load or first compile) {out['warmup_s']:.1f} s")
    print("audit stages (s): " + ", ".join(f"{k} {v:.1f}" for k, v in out["stages_s"].items()))
    print(
        f"audit total (permutations NOT included): wall {out['wall_s']:.1f} s, CPU {out['cpu_s']:.1f} s, "
        f"peak RSS {out['peak_mib']:,.0f} MiB"
    )
    print(f"  goal: < 120 s and < 2048 MiB -> {'met' if out['wall_s'] < 120 and out['peak_mib'] < 2048 else 'NOT met'}")
    print(f"audit per resample, end to end: {per_resample_ms:.2f} ms (wall)")
    perm = out["permutations"]
    if perm:
        print(
            f"permutation tests (separate, not in the total above): {perm['comparisons_with_p']} comparisons "
            f"with p-values, at most {perm['permutations']:,} permutations each: {perm['tests_s']:.1f} s (wall); "
            f"peak RSS {out['peak_mib_after_permutations']:,.0f} MiB"
        )
    if not args.skip_fairlearn:
        data = synthetic(args.n_rows, args.seed)
        point_s, boot_total, values = run_fairlearn(data, args.fairlearn_boot, args.seed)
        fl_per_resample_ms = 1e3 * (boot_total - point_s) / args.fairlearn_boot
        print(
            f"fairlearn MetricFrame (3 frames, 21 slices, 12 metrics): point {point_s:.1f} s, "
            f"n_boot={args.fairlearn_boot}: {boot_total:.1f} s -> {fl_per_resample_ms:,.0f} ms per resample"
        )
        ratio = fl_per_resample_ms / per_resample_ms
        print(f"per-resample ratio fairlearn / audit: {ratio:,.0f}x (goal >= 1,000x)")
        est = out["estimates"]
        ours = {(s, m): v for s, m, v in zip(est["slice"], est["metric"], est["estimate"])}
        diffs = [abs(ours[key] - value) for key, value in values.items() if key in ours]
        worst = max(diffs)
        print(
            f"point estimates: {len(diffs)} compared, max |audit - fairlearn| = {worst:.2e} "
            f"({'OK' if worst <= POINT_TOL else 'FAIL'} at {POINT_TOL:g})"
        )
        if worst > POINT_TOL or len(diffs) != 21 * 12:
            print(f"load average after: {os.getloadavg()}")
            return 1
    print(f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
