"""Audits whose cost follows the information, not the rows: the speed goals, against today's code.

Each workload runs in a fresh subprocess (its peak resident memory is its own) with the current
package, and, where it finishes in reasonable time, with the package of the reference commit
(``benchmarks/_reference.py``: the code before the one-engine change) in the same run. Printed per
workload: wall and CPU seconds, peak memory, the ratio to the reference, and the goal.

Workloads (``--workloads``, comma-separated; default all):

* ``compas``: the README's COMPAS example, ``disagg-eval audit examples/data/compas.csv --label
  two_year_recid --score compas_score --group race --group sex --control none,Y,R`` with every other
  option at its default (10,000 resamples, the default permutations), figures and report written.
  Goal: under 20 seconds on 2 cores (the reference took about 5 CPU-minutes).
* ``million``: 1,000,000 rows, race (6 levels) x sex: 21 slices, one model with continuous scores,
  the 12 metrics of scikit-learn, 10,000 resamples, no permutations (``benchmarks/bench_audit.py``'s
  workload), ``audit()`` with 2 threads. Goal: at least 2x faster end to end than the reference.
* ``million-counts``: the same with the count metrics only (the nine rates and the net benefit).
  Goal: under 5 seconds.
* ``many-slices``: 200,000 rows, 3 attributes of 20 levels, all intersections (9,261 slices), 4 count
  metrics, 2,000 resamples, the default permutations. Goal: under 5 minutes and 4 GB. The reference
  is not run (its comparisons alone would be 49 million pairs; the issue measured 12 CPU-hours).
* ``fairlearn``: fairlearn's ``MetricFrame(n_boot=...)`` against the engine, per resample, at 20,000
  rows, on continuous scores (12 metrics) and on count metrics (needs ``pip install -e ".[bench]"``).
  Goal: at least 2,000x (continuous) and 100,000x (count metrics). "The engine" is the audit's one
  paired bootstrap of the metrics on the 21 slices and their rests (``audit.estimates.estimate_all``,
  timed inside the audit), the work MetricFrame's ``n_boot`` does; the whole audit's cost per resample
  (with its calibration table, fairness summary and bands, which MetricFrame does not compute) is
  printed beside it. Both are marginal CPU costs: (12,000 resamples - 2,000 resamples) / 10,000.

Issue 24's goals, against the commit before that work (:data:`BASE_COMMIT`) in the same run, CPU seconds of
``audit()`` on a frame in memory (after loading: the frame is built first; one thread, the default):

* ``scale-continuous``: 1,000,000 rows of continuous scores, two attributes of 3 and 4 levels (20 slices),
  every default (the 14 metrics, 10,000 resamples, 10,000 permutations). Goal: at most 5 CPU-minutes,
  without the warning of hours of permutation tests. The base commit is not run with its tests (it warns
  of 15.7 CPU-hours): its warning is read (the audit stopped before its bootstrap) and it is timed with
  ``n_permutations=0``, beside.
* ``scale-counts``: 10,000,000 rows of hard 0/1 predictions, the same attributes (48 distinct (cell, label,
  prediction) units), every default. Goal: at most 10 CPU-seconds.

Issue 31, item 3, against :data:`CONTROLLED_REFERENCE` in the same run:

* ``controlled-r``: the weight stage (``fit_controlled_weights``, timed inside ``audit()`` on a frame in
  memory, one thread) of 1,000,000 rows of :func:`scale_frame` (two attributes of 3 and 4 levels: families of
  3, 4 and 12 levels; one continuous score) with ``controls=["none", "R"]`` and with ``["none", "Y"]``, CPU
  seconds and the process's peak memory. Goal: at most 60 CPU-seconds. The reference's ``V = R`` stage
  cannot finish in reasonable time at 10^6 rows (130 multinomial fits of 800,000 rows per family and fold
  set): it is timed at 100,000 rows (with a timeout) beside today's at that size, and its 10^6-row figure
  is extrapolated (its fits are linear in rows), not run. Then (``controlled-r`` only) the approximation
  of the binned fit at 10^6 rows: ``crossfit_spline_logistic`` on the bins against the fit on the rows,
  same folds, ``C`` = 100 (the grid's weakest penalty) for families ``a`` and ``b``: the largest difference
  of ``P(A = a | R)`` and of ``M_a`` (the 14 default metrics, i.e. of ``T_a``), beside the median half-width
  of the audit's ``T_a`` intervals. Last, the whole audit of those 10^6 rows with every default and
  ``controls=["none", "R"]``: its CPU, its bootstrap's (``estimate_all``: the slices and the weighted
  populations ``M_a``), its peak memory (reported for the engine's owners; not a goal of this workload).
  About 15 minutes with the reference.

Issue 31's small continuous file, against :data:`SMALL_BASE_COMMIT` in the same run, CPU seconds of ``audit()``
on a frame in memory (after a warm-up audit in the same process; one thread, the default):

* ``small-continuous``: 20,000 rows of continuous scores, 3 attributes of 4 levels (all intersections: 124
  slices), group effects so that many slices truly differ (the first attribute shifts the risk, the second the
  score's noise), every default (14 metrics, 10,000 resamples, 10,000 permutations, Holm). Printed: CPU and
  wall of ``audit()`` and of its tests (``test_pvalues``), peak memory, the tests used, the ratio. Goal: at
  least 10x less CPU than the base commit.

Issue 31's shapes, each against :data:`SHAPES_BASE_COMMIT` (the code before issue 31) in the same run, CPU seconds of
the whole process (one thread, the default), its peak memory, the goal (a reference still running after
``--shapes-timeout`` seconds is stopped, and its figure printed as a lower bound):

* ``shape-many-slices``: ``many-slices``'s data (200,000 continuous rows, 3 attributes of 20 levels, every
  intersection: 9,261 slices), its 4 count metrics and 2,000 resamples, the default permutations. Goal: at least 5x
  less CPU than the base.
* ``shape-many-slices-default``: the same data with every default (14 metrics, 10,000 resamples). Goal: it runs,
  within 2 GB.
* ``shape-compas``: ``compas``'s command line (every default, ``--control none,Y,R``), CPU of the process and
  of its figure workers. Goal: under 10 CPU-seconds.

The other two shapes of issue 31 are ``small-continuous`` (2x10^4 continuous rows, every default) and
``controlled-r`` (``V = R`` at 10^6 rows), above.

Usage::

    python benchmarks/bench_audit_speed.py [--workloads compas,million,...,scale-continuous,scale-counts,controlled-r,
        small-continuous,shape-many-slices,shape-many-slices-default,shape-compas]
        [--no-reference] [--shapes-timeout SECONDS]

Run it on an otherwise idle machine: the load average is printed before and after each workload.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _reference import REFERENCE_COMMIT, reference_tree  # noqa: E402

#: The commit before issue 24's work on the tests: today's code of the scale workloads.
BASE_COMMIT = "86ba781"
#: The commit before issue 31's work: today's code of the small-continuous workload.
SMALL_BASE_COMMIT = "1ee08dc"
#: The commit before issue 31's work: today's code of the shapes (``shape-*``).
SHAPES_BASE_COMMIT = SMALL_BASE_COMMIT

COUNT_METRICS = [
    "sensitivity", "specificity", "precision", "net_benefit", "label_rate", "predicted_positive_rate", "accuracy",
    "false_positive_rate", "false_negative_rate",
]  # fmt: skip
SKLEARN_METRICS = [
    "log_loss", "auc", "sensitivity", "specificity", "precision", "net_benefit", "label_rate",
    "predicted_positive_rate", "accuracy", "false_positive_rate", "false_negative_rate", "brier_score",
]  # fmt: skip

# The child's code: runs one workload with whichever package is on the path, prints JSON.
CHILD = r"""
import json, os, resource, sys, time
import numpy as np, pandas as pd
sys.path.insert(0, {bench!r})
from bench_audit import synthetic
from disaggregated_eval.audit import audit
workload, n, resamples, permutations, metrics = {workload!r}, {n!r}, {resamples!r}, {permutations!r}, {metrics!r}
if workload == "many-slices":
    rng = np.random.default_rng(0)
    data = pd.DataFrame({{f"a{{k}}": rng.integers(0, 20, n).astype(str) for k in range(3)}})
    x = rng.normal(size=n)
    data["y"] = rng.binomial(1, 1 / (1 + np.exp(-x)))
    data["score"] = 1 / (1 + np.exp(-(x + rng.normal(0, 0.7, n))))
    groups = ["a0", "a1", "a2"]
else:
    data = synthetic(n, 0)
    groups = ["race", "sex"]
kwargs = dict(label="y", scores=["score"], groups=groups, metrics=metrics, n_threads=2)
if permutations is not None:
    kwargs["n_permutations"] = permutations
audit(data.head(2000), **dict(kwargs, n_resamples=200, n_permutations=0))  # numba caches loaded or compiled
cpu, wall = time.process_time(), time.perf_counter()
result = audit(data, n_resamples=resamples, **kwargs)
print(json.dumps(dict(wall=time.perf_counter() - wall, cpu=time.process_time() - cpu,
                      peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      slices=int(result.slices["slice"].nunique()))))
"""


# The child of the scale workloads: builds the frame, then times audit() alone (CPU of this one-thread process).
SCALE_CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np, pandas as pd
from disaggregated_eval.audit import audit, core
n, hard, mode = {n!r}, {hard!r}, {mode!r}
rng = np.random.default_rng(24)
a = rng.integers(0, 3, n)
b = rng.integers(0, 4, n)
x = rng.normal(0.2 * a - 0.1 * b, 1.0, n)
y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(x - 0.5)))).astype(np.int64)
score = 1.0 / (1.0 + np.exp(-(0.9 * x - 0.45 + 0.3 * rng.normal(size=n))))
if hard:
    score = (score >= 0.5).astype(np.float64)
levels = lambda prefix, k: np.array([f"{{prefix}}{{i}}" for i in range(k)], dtype=object)
data = pd.DataFrame({{"a": levels("a", 3)[a], "b": levels("b", 4)[b], "y": y, "score": score}})
del a, b, x, y, score
kwargs = dict(label="y", scores=["score"], groups=["a", "b"])
audit(data.head(3000), n_resamples=200, n_permutations=200, **kwargs)  # numba caches loaded or compiled
if mode == "warning":  # stop the audit at its bootstrap: what it warned of before any work
    def stop(*args, **kw):
        raise KeyboardInterrupt
    core.estimate_all = stop
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            audit(data, **kwargs)
        except KeyboardInterrupt:
            pass
    said = [str(w.message) for w in caught if "CPU-hours" in str(w.message)]
    print(json.dumps(dict(warning=said[0] if said else "")))
    sys.exit(0)
if mode == "no-tests":
    kwargs["n_permutations"] = 0
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    cpu, wall = time.process_time(), time.perf_counter()
    result = audit(data, **kwargs)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
tests = result.comparisons["test"].value_counts().to_dict()
print(json.dumps(dict(wall=wall, cpu=cpu, peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      tests=tests, warned=any("CPU-hours" in str(w.message) for w in caught))))
"""


#: The commit before issue 31's work on the weights (``controlled-r``).
CONTROLLED_REFERENCE = "1ee08dc"


def scale_frame(n: int, hard: bool = False):
    """The frame of the scale workloads (:data:`SCALE_CHILD`'s generator, seed 24): attributes ``a`` (3 levels)
    and ``b`` (4 levels), a label ``y`` and a continuous ``score`` (its 0/1 decision with ``hard``)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(24)
    a = rng.integers(0, 3, n)
    b = rng.integers(0, 4, n)
    x = rng.normal(0.2 * a - 0.1 * b, 1.0, n)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(x - 0.5)))).astype(np.int64)
    score = 1.0 / (1.0 + np.exp(-(0.9 * x - 0.45 + 0.3 * rng.normal(size=n))))
    if hard:
        score = (score >= 0.5).astype(np.float64)
    a_levels = np.array([f"a{i}" for i in range(3)], dtype=object)
    b_levels = np.array([f"b{i}" for i in range(4)], dtype=object)
    return pd.DataFrame({"a": a_levels[a], "b": b_levels[b], "y": y, "score": score})


# The child of ``controlled-r``: times the weight stage (and with full=True the bootstrap and the whole audit)
# inside audit() on scale_frame(n); without full, the audit stops after its weights.
CONTROLLED_CHILD = r"""
import json, resource, sys, time
from unittest import mock
sys.path.insert(0, {bench!r})
from bench_audit_speed import scale_frame
from disaggregated_eval.audit import audit, core
n, control, full = {n!r}, {control!r}, {full!r}
data = scale_frame(n)
kwargs = dict(label="y", scores=["score"], groups=["a", "b"], controls=["none", control], n_threads=1)
if full:
    audit(data.head(3000), n_resamples=200, n_permutations=200, **kwargs)  # numba caches loaded or compiled
class Stop(Exception):
    pass
stages = {{}}
def timed(name, real):
    def run(*args, **kw):
        cpu, wall = time.process_time(), time.perf_counter()
        out = real(*args, **kw)
        stages[name] = dict(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall)
        if name == "weights":
            stages[name]["methods"] = sorted({{w.method for w in out}})
            stages[name]["notes"] = sorted({{w.note for w in out}})
            if not full:
                raise Stop
        return out
    return run
cpu = time.process_time()
with mock.patch.object(core, "fit_controlled_weights", timed("weights", core.fit_controlled_weights)), \
        mock.patch.object(core, "estimate_all", timed("bootstrap", core.estimate_all)):
    try:
        result = audit(data, **kwargs)
    except Stop:
        result = None
out = dict(stages, total=time.process_time() - cpu, peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
if result is not None:
    c = result.controlled
    c = c[(c["control"] == control) & c["reported"]]
    out["T_a_half_width"] = float(((c["T_a_high"] - c["T_a_low"]) / 2).median())
print(json.dumps(out))
"""

# The binning's effect at 10^6 rows (today's code): the binned spline against the fit on the rows, same folds, C fixed.
BINNING_CHILD = r"""
import json, sys, time
import numpy as np
from threadpoolctl import threadpool_limits
sys.path.insert(0, {bench!r})
from bench_audit_speed import scale_frame
from disaggregated_eval import seeds
from disaggregated_eval.metrics import compute_metrics
from disaggregated_eval.weight_models import crossfit_spline_logistic, score_frame
data = scale_frame({n!r})
y, r = data["y"].to_numpy(), data["score"].to_numpy()
out = {{}}
for family in ("a", "b"):
    codes = np.unique(data[family].to_numpy(), return_inverse=True)[1]
    k = int(codes.max()) + 1
    seed = seeds.seed_sequence(0, "bench", "controlled-r", family)
    fits = {{}}
    with threadpool_limits(1):
        for name, n_bins in (("bins", 512), ("rows", None)):
            cpu = time.process_time()
            proba, table = crossfit_spline_logistic(score_frame(r), codes, n_groups=k, seed=seed, C_grid=[100.0],
                                                    n_bins=n_bins)
            fits[name] = (proba, time.process_time() - cpu, int(table["n_fit_points"].max()))
    diff = np.abs(fits["bins"][0] - fits["rows"][0])
    worst, where = 0.0, ""
    for g in range(k):
        m = [compute_metrics(y, r, sample_weight=fits[name][0][:, g]) for name in ("bins", "rows")]
        for metric in m[0]:
            d = abs(m[0][metric] - m[1][metric])
            if d > worst:
                worst, where = d, f"{{metric}}, level {{g}}"
    out[family] = dict(levels=k, max_dp=float(diff.max()), mean_dp=float(diff.mean()), max_dM=worst, where=where,
                       cpu_bins=fits["bins"][1], cpu_rows=fits["rows"][1], points=fits["bins"][2])
print(json.dumps(out))
"""


def _controlled_child(child: str, pythonpath: str | None, timeout: float | None = None, **fmt) -> dict | None:
    """Run a ``controlled-r`` child; None if it did not finish within ``timeout`` seconds."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = child.format(bench=str(ROOT / "benchmarks"), **fmt)
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False,
                              timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def controlled_r(reference: bool, timeout: float = 1800.0) -> None:
    """Issue 31's item 3 (module docstring): the weight stage at 10^6 rows, V = R and V = Y, against the reference."""
    ref = str(reference_tree(CONTROLLED_REFERENCE)) if reference else None
    goal = 60.0
    for control in ("R", "Y"):
        new = _controlled_child(CONTROLLED_CHILD, None, n=1_000_000, control=control, full=False)
        w = new["weights"]
        print(f"controlled-r V={control} new, 10^6 rows: weights {w['cpu']:.1f} s CPU, {w['wall']:.1f} s wall, peak "
              f"{new['peak_mib']:.0f} MiB ({', '.join(w['methods'])}) | goal: at most {goal:.0f} s CPU: "
              f"{'met' if w['cpu'] <= goal else 'NOT met'}", flush=True)  # fmt: skip
        for note in w["notes"]:
            print(f"{'':<16} {note}", flush=True)
        if not ref:
            continue
        if control == "Y":
            old = _controlled_child(CONTROLLED_CHILD, ref, timeout, n=1_000_000, control=control, full=False)
            if old:
                print(f"controlled-r V=Y {CONTROLLED_REFERENCE}, 10^6 rows: weights {old['weights']['cpu']:.1f} s CPU, "
                      f"peak {old['peak_mib']:.0f} MiB; {old['weights']['cpu'] / w['cpu']:.1f}x today's CPU", flush=True)  # fmt: skip
            continue
        small = _controlled_child(CONTROLLED_CHILD, None, n=100_000, control=control, full=False)
        old = _controlled_child(CONTROLLED_CHILD, ref, timeout, n=100_000, control=control, full=False)
        if old is None:
            print(f"controlled-r V=R {CONTROLLED_REFERENCE}, 10^5 rows: did not finish in {timeout:.0f} s", flush=True)
            continue
        o, s = old["weights"], small["weights"]
        print(f"controlled-r V=R {CONTROLLED_REFERENCE}, 10^5 rows: weights {o['cpu']:.1f} s CPU, peak "
              f"{old['peak_mib']:.0f} MiB; today's at 10^5 rows {s['cpu']:.1f} s CPU ({o['cpu'] / s['cpu']:.0f}x less); "
              f"the reference at 10^6 rows extrapolated (linear in rows, not run): about {10 * o['cpu']:.0f} s CPU, "
              f"{10 * o['cpu'] / w['cpu']:.0f}x today's", flush=True)  # fmt: skip
        print(f"{'':<16} load average {os.getloadavg()}", flush=True)
    error = _controlled_child(BINNING_CHILD, None, n=1_000_000)
    for family, e in error.items():
        print(f"controlled-r binning, family {family} ({e['levels']} levels), 10^6 rows, C = 100: max |P(A|R) bins - "
              f"rows| {e['max_dp']:.1e} (mean {e['mean_dp']:.1e}); max |M_a bins - M_a rows| {e['max_dM']:.1e} "
              f"({e['where']}); {e['points']} points; {e['cpu_bins']:.1f} s CPU against {e['cpu_rows']:.1f} s on the "
              f"rows", flush=True)  # fmt: skip
    full = _controlled_child(CONTROLLED_CHILD, None, n=1_000_000, control="R", full=True)
    print(f"controlled-r whole audit, 10^6 rows, every default, controls none,R: {full['total']:.1f} s CPU, of which "
          f"weights {full['weights']['cpu']:.1f} s and bootstrap (estimate_all) {full['bootstrap']['cpu']:.1f} s "
          f"({full['bootstrap']['wall']:.1f} s wall); peak {full['peak_mib']:.0f} MiB; median half-width of the "
          f"T_a intervals (V = R) {full['T_a_half_width']:.1e}", flush=True)  # fmt: skip
    print(f"{'':<16} load average {os.getloadavg()}", flush=True)


def _scale(pythonpath: str | None, **fmt) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, "-c", SCALE_CHILD.format(**fmt)], env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def scale_goals(chosen: list[str], reference: bool) -> None:
    """Issue 24's two goals (module docstring), each beside the base commit's figures."""
    base = str(reference_tree(BASE_COMMIT)) if reference else None
    if "scale-continuous" in chosen:
        plan = dict(n=1_000_000, hard=False)
        new = _scale(None, mode="default", **plan)
        print(f"scale-continuous new: {new['cpu']:.1f} s CPU ({new['cpu'] / 60:.2f} CPU-minutes), {new['wall']:.1f} s "
              f"wall, {new['peak_mib']:.0f} MiB; warning of hours of tests: {'yes' if new['warned'] else 'no'}; tests "
              f"{new['tests']} | goal: at most 300 s CPU, no warning: {'met' if new['cpu'] <= 300 and not new['warned'] else 'NOT met'}",
              flush=True)  # fmt: skip
        if base:
            warned = _scale(base, mode="warning", **plan)["warning"]
            hours = warned.split("about ")[1].split(" CPU-hours")[0] if "CPU-hours" in warned else "?"
            old = _scale(base, mode="no-tests", **plan)
            print(f"scale-continuous base {BASE_COMMIT}: warned of {hours} CPU-hours of permutation tests (not run); "
                  f"without them {old['cpu']:.1f} s CPU, {old['wall']:.1f} s wall, {old['peak_mib']:.0f} MiB",
                  flush=True)  # fmt: skip
        print(f"{'':<16} load average {os.getloadavg()}", flush=True)
    if "scale-counts" in chosen:
        plan = dict(n=10_000_000, hard=True)
        new = _scale(None, mode="default", **plan)
        old = _scale(base, mode="default", **plan) if base else None
        ratio = f"; {old['cpu'] / new['cpu']:.1f}x less CPU than base" if old else ""
        print(f"scale-counts new: {new['cpu']:.1f} s CPU, {new['wall']:.1f} s wall, {new['peak_mib']:.0f} MiB; tests "
              f"{new['tests']} | goal: at most 10 s CPU: {'met' if new['cpu'] <= 10 else 'NOT met'}{ratio}",
              flush=True)  # fmt: skip
        if old:
            print(f"scale-counts base {BASE_COMMIT}: {old['cpu']:.1f} s CPU, {old['wall']:.1f} s wall, "
                  f"{old['peak_mib']:.0f} MiB; tests {old['tests']}", flush=True)  # fmt: skip
        print(f"{'':<16} load average {os.getloadavg()}", flush=True)


# The child of the small-continuous workload: builds the frame, warms up, times audit() and its tests (CPU of this
# one-thread process).
SMALL_CHILD = r"""
import json, resource, time
import numpy as np, pandas as pd
from disaggregated_eval.audit import audit, core
n, effect = {n!r}, {effect!r}
rng = np.random.default_rng(31)
codes = rng.integers(0, 4, (n, 3))
data = pd.DataFrame({{f"a{{k}}": np.array([f"l{{i}}" for i in range(4)])[codes[:, k]] for k in range(3)}})
x = rng.normal(size=n) + effect * (codes[:, 0] - 1.5)
data["y"] = rng.binomial(1, 1 / (1 + np.exp(-x)))
data["score"] = 1 / (1 + np.exp(-(x + rng.normal(0, 0.7 + effect * codes[:, 1], n))))
kwargs = dict(label="y", scores=["score"], groups=["a0", "a1", "a2"])
audit(data.head(2000), n_resamples=200, n_permutations=200, **kwargs)  # numba caches loaded or compiled
tests = []
test_pvalues = core.test_pvalues
def timed(*args, **kw):
    cpu = time.process_time()
    out = test_pvalues(*args, **kw)
    tests.append(time.process_time() - cpu)
    return out
core.test_pvalues = timed
cpu, wall = time.process_time(), time.perf_counter()
result = audit(data, **kwargs)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
print(json.dumps(dict(wall=wall, cpu=cpu, tests_cpu=tests[0], peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      tests=result.comparisons["test"].value_counts().to_dict())))
"""


def small_continuous(reference: bool) -> None:
    """Issue 31's small continuous file (module docstring), beside :data:`SMALL_BASE_COMMIT`'s figures."""
    plan = dict(n=20_000, effect=0.3)
    new = _run_json(SMALL_CHILD.format(**plan), None)
    old = _run_json(SMALL_CHILD.format(**plan), str(reference_tree(SMALL_BASE_COMMIT))) if reference else None
    ratio = f"{old['cpu'] / new['cpu']:.1f}x less CPU than {SMALL_BASE_COMMIT}" if old else "base not run"
    met = "met" if old and old["cpu"] / new["cpu"] >= 10 else "NOT met" if old else "?"
    print(f"small-continuous new: {new['cpu']:.1f} s CPU ({new['tests_cpu']:.1f} s in the tests), {new['wall']:.1f} s "
          f"wall, {new['peak_mib']:.0f} MiB; tests {new['tests']} | {ratio} | goal: at least 10x: {met}",
          flush=True)  # fmt: skip
    if old:
        print(f"small-continuous base {SMALL_BASE_COMMIT}: {old['cpu']:.1f} s CPU ({old['tests_cpu']:.1f} s in the "
              f"tests), {old['wall']:.1f} s wall, {old['peak_mib']:.0f} MiB; tests {old['tests']}; the tests alone "
              f"{old['tests_cpu'] / new['tests_cpu']:.1f}x less CPU", flush=True)  # fmt: skip
    print(f"{'':<16} load average {os.getloadavg()}", flush=True)


# The child of the shape-many-slices workloads: builds many-slices' frame, warms up, runs audit() once (CPU of this
# one-thread process); an audit refused before any work prints the refusal.
SHAPE_CHILD = r"""
import json, resource, time
import numpy as np, pandas as pd
from disaggregated_eval.audit import AuditInputError, audit
n, options = {n!r}, {options!r}
rng = np.random.default_rng(0)
data = pd.DataFrame({{f"a{{k}}": rng.integers(0, 20, n).astype(str) for k in range(3)}})
x = rng.normal(size=n)
data["y"] = rng.binomial(1, 1 / (1 + np.exp(-x)))
data["score"] = 1 / (1 + np.exp(-(x + rng.normal(0, 0.7, n))))
kwargs = dict(label="y", scores=["score"], groups=["a0", "a1", "a2"], **options)
audit(data.head(2000), **dict(kwargs, n_resamples=200, n_permutations=0))  # numba caches loaded or compiled
cpu, wall = time.process_time(), time.perf_counter()
try:
    result = audit(data, **kwargs)
    said = dict(slices=int(result.slices["slice"].nunique()), fairness_rows=len(result.fairness),
                comparisons=len(result.comparisons))
except AuditInputError as error:
    said = dict(refused=str(error))
print(json.dumps(dict(cpu=time.process_time() - cpu, wall=time.perf_counter() - wall,
                      peak_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **said)))
"""

# The child of shape-compas: the README's COMPAS command line in this process (CPU: its own and its figure workers';
# peak memory: its own; the interpreter's start and imports included).
COMPAS_CHILD = r"""
import json, resource, runpy, sys, time
cpu, wall = time.process_time(), time.perf_counter()
sys.argv = ["disagg-eval", "audit", {root!r} + "/examples/data/compas.csv", "--label", "two_year_recid", "--score",
            "compas_score", "--group", "race", "--group", "sex", "--control", "none,Y,R", "--out", {out!r}, "--quiet"]
try:
    runpy.run_module("disaggregated_eval.audit.cli", run_name="__main__")
except SystemExit as stop:
    if stop.code not in (0, None):
        raise
usage, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps(dict(cpu=usage.ru_utime + usage.ru_stime + workers.ru_utime + workers.ru_stime,
                      wall=time.perf_counter() - wall, peak_mib=usage.ru_maxrss / 1024)))
"""


def _timed_child(code: str, pythonpath: str | None, timeout: float) -> dict:
    """Run ``code`` in a fresh interpreter; its JSON, or ``{"timeout": ..., "cpu": ...}`` when stopped after
    ``timeout`` seconds (the CPU it had used: a lower bound of its cost)."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False,
                              timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired:
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return dict(timeout=timeout, cpu=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _said(run: dict) -> str:
    """One run's figures (or its refusal, or its timeout)."""
    if "timeout" in run:
        return f"stopped after {run['timeout']:.0f} s wall, at {run['cpu']:.0f} s CPU (a lower bound)"
    figures = f"{run['cpu']:.1f} s CPU, {run['wall']:.1f} s wall, peak {run['peak_mib']:.0f} MiB"
    return f"refused before any work ({run['refused'][:160]}...); {figures}" if "refused" in run else figures


def shapes(chosen: list[str], reference: bool, timeout: float) -> None:
    """Issue 31's shapes (module docstring), today beside :data:`SHAPES_BASE_COMMIT`."""
    base = str(reference_tree(SHAPES_BASE_COMMIT)) if reference else None
    plans = {
        "shape-many-slices": dict(n_resamples=2_000, metrics=COUNT_METRICS[-4:]),
        "shape-many-slices-default": {},
    }
    for name, options in plans.items():
        if name not in chosen:
            continue
        code = SHAPE_CHILD.format(n=200_000, options=options)
        new = _timed_child(code, None, 4 * timeout)
        old = _timed_child(code, base, timeout) if base else None
        if name == "shape-many-slices":
            ratio = old["cpu"] / new["cpu"] if old and "timeout" not in new else None
            bound = "at least " if old and "timeout" in old else ""
            verdict = "?" if ratio is None else "met" if ratio >= 5 else "NOT met"
            goal = f"{bound}{ratio:.1f}x less CPU | goal: at least 5x: {verdict}" if ratio else "goal: at least 5x: ?"
        else:
            ok = "refused" not in new and "timeout" not in new and new["peak_mib"] * 2**20 <= 2e9
            goal = f"goal: runs within 2 GB: {'met' if ok else 'NOT met'}"
        print(f"{name} new: {_said(new)} | {goal}", flush=True)
        if old:
            print(f"{name} base {SHAPES_BASE_COMMIT}: {_said(old)}", flush=True)
        print(f"{'':<16} load average {os.getloadavg()}", flush=True)
    if "shape-compas" in chosen:
        with tempfile.TemporaryDirectory() as tmp:
            new = _timed_child(COMPAS_CHILD.format(root=str(ROOT), out=str(Path(tmp) / "new")), None, 4 * timeout)
            old = (
                _timed_child(COMPAS_CHILD.format(root=str(ROOT), out=str(Path(tmp) / "old")), base, timeout)
                if base
                else {}
            )
        ratio = f"; {old['cpu'] / new['cpu']:.1f}x less CPU than {SHAPES_BASE_COMMIT}" if "peak_mib" in old else ""
        met = "met" if "peak_mib" in new and new["cpu"] < 10 else "NOT met"
        print(f"shape-compas new: {_said(new)}{ratio} | goal: under 10 s CPU: {met}", flush=True)
        if old:
            print(f"shape-compas base {SHAPES_BASE_COMMIT}: {_said(old)}", flush=True)
        print(f"{'':<16} load average {os.getloadavg()}", flush=True)


def _run_json(code: str, pythonpath: str | None) -> dict:
    """Run ``code`` in a fresh interpreter (``pythonpath`` first on the path); the JSON of its last line."""
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _child(pythonpath: str | None, **fmt) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    code = CHILD.format(bench=str(ROOT / "benchmarks"), **fmt)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _cli(pythonpath: str | None, out: Path) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    argv = [sys.executable, "-m", "disaggregated_eval.audit.cli", "audit", str(ROOT / "examples/data/compas.csv"),
            "--label", "two_year_recid", "--score", "compas_score", "--group", "race", "--group", "sex",
            "--control", "none,Y,R", "--out", str(out), "--quiet"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return dict(wall=wall, cpu=cpu, peak_mib=after.ru_maxrss / 1024)


def _row(name: str, new: dict, old: dict | None, goal: str) -> None:
    ratio = f"{old['wall'] / new['wall']:.1f}x faster" if old else "reference not run"
    ref = f"{old['wall']:.1f} s wall / {old['cpu']:.1f} s CPU" if old else "-"
    print(
        f"{name:<16} new {new['wall']:7.1f} s wall / {new['cpu']:7.1f} s CPU / {new['peak_mib']:6.0f} MiB | "
        f"reference {ref} | {ratio} | goal: {goal}",
        flush=True,
    )


def fairlearn_ratio(n: int, boot: int, continuous: bool) -> dict:
    """fairlearn's MetricFrame bootstrap against the engine, per resample, on the same 21 slices."""
    from bench_audit import fairlearn_metrics, synthetic
    from fairlearn.metrics import MetricFrame

    from disaggregated_eval.audit import audit, core
    from disaggregated_eval.audit.estimates import estimate_all

    data = synthetic(n, 0)
    metrics = fairlearn_metrics()
    names = SKLEARN_METRICS if continuous else COUNT_METRICS
    chosen = {k: metrics[k] for k in names}
    families = [["race"], ["sex"], ["race", "sex"]]
    start = time.process_time()
    for family in families:
        MetricFrame(metrics=chosen, y_true=data["y"], y_pred=data["score"], sensitive_features=data[family])
    point = time.process_time() - start
    start = time.process_time()
    for family in families:
        MetricFrame(metrics=chosen, y_true=data["y"], y_pred=data["score"], sensitive_features=data[family],
                    n_boot=boot, ci_quantiles=[0.025, 0.975], random_state=0)  # fmt: skip
    fairlearn_per = (time.process_time() - start - point) / boot
    kwargs = dict(label="y", scores=["score"], groups=["race", "sex"], metrics=names, n_permutations=0, n_threads=1)
    audit(data, n_resamples=200, **kwargs)
    # The engine's bootstrap of these metrics on these slices (and their rests): what MetricFrame's n_boot
    # computes; timed inside the audit (estimates.estimate_all, the audit's one paired bootstrap).
    engine_cpu = []

    def timed(*args, **kw):
        begin = time.process_time()
        out = estimate_all(*args, **kw)
        engine_cpu.append(time.process_time() - begin)
        return out

    timings = []
    with mock.patch.object(core, "estimate_all", timed):
        for resamples in (2_000, 12_000):
            start = time.process_time()
            audit(data, n_resamples=resamples, **kwargs)
            timings.append(time.process_time() - start)
    engine_per = (engine_cpu[1] - engine_cpu[0]) / 10_000
    audit_per = (timings[1] - timings[0]) / 10_000
    return dict(fairlearn_per=fairlearn_per, engine_per=engine_per, ratio=fairlearn_per / engine_per,
                audit_per=audit_per, audit_ratio=fairlearn_per / audit_per)  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workloads",
        default="compas,million,million-counts,many-slices,fairlearn,scale-continuous,scale-counts,controlled-r,"
        "small-continuous,shape-many-slices,shape-many-slices-default,shape-compas",
    )
    parser.add_argument("--no-reference", action="store_true", help="do not run the reference commit's code")
    parser.add_argument(
        "--shapes-timeout",
        type=float,
        default=1800.0,
        help="seconds after which a base commit's run of a shape-* workload is stopped (today's: 4x)",
    )
    parser.add_argument("--fairlearn-boot", type=int, default=3)
    args = parser.parse_args(argv)
    chosen = args.workloads.split(",")
    ref = None if args.no_reference else str(reference_tree())
    print(f"reference commit {REFERENCE_COMMIT}; load average {os.getloadavg()}", flush=True)
    if "compas" in chosen:
        with tempfile.TemporaryDirectory() as tmp:
            new = _cli(None, Path(tmp) / "new")
            old = _cli(ref, Path(tmp) / "old") if ref else None
        _row("compas", new, old, "under 20 s")
    plans = {
        "million": dict(n=1_000_000, resamples=10_000, permutations=0, metrics=SKLEARN_METRICS),
        "million-counts": dict(n=1_000_000, resamples=10_000, permutations=0, metrics=COUNT_METRICS),
        "many-slices": dict(n=200_000, resamples=2_000, permutations=None, metrics=COUNT_METRICS[-4:]),
    }
    goals = {"million": "at least 2x faster", "million-counts": "under 5 s", "many-slices": "under 300 s, 4 GB"}
    for name, plan in plans.items():
        if name not in chosen:
            continue
        new = _child(None, workload=name, **plan)
        old = _child(ref, workload=name, **plan) if ref and name == "million" else None
        _row(name, new, old, goals[name])
        print(f"{'':<16} load average {os.getloadavg()}", flush=True)
    if "fairlearn" in chosen:
        for continuous in (True, False):
            out = fairlearn_ratio(20_000, args.fairlearn_boot, continuous)
            what = "continuous, 12 metrics" if continuous else "count metrics"
            goal = "2,000x" if continuous else "100,000x"
            print(f"fairlearn ({what}): {out['fairlearn_per'] * 1e3:.1f} ms CPU per resample, engine "
                  f"{out['engine_per'] * 1e6:.2f} us: {out['ratio']:,.0f}x (goal {goal}); the whole audit (with "
                  f"its calibration table, fairness summary, bands) {out['audit_per'] * 1e6:.2f} us: "
                  f"{out['audit_ratio']:,.0f}x", flush=True)  # fmt: skip
    scale_goals(chosen, not args.no_reference)
    if "controlled-r" in chosen:
        controlled_r(not args.no_reference)
    if "small-continuous" in chosen:
        small_continuous(not args.no_reference)
    shapes(chosen, not args.no_reference, args.shapes_timeout)
    print(f"load average at the end {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
