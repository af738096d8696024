"""The plan an audit states before its work against what the work then takes: memory and time (issue 36, item 4).

Run: ``python benchmarks/bench_memory_estimate.py [--workloads a,b,...]``

Each workload runs in a fresh process (its peak is its own): it builds its data, runs ``disagg-eval
audit`` (``compas``) or ``audit()`` with a progress callback that records the plan line the command line
prints (:func:`disaggregated_eval.audit.work_plan.plan_line`: stages, seconds, peak memory), and reports the
process's peak resident memory (Linux's ``VmHWM``, imported libraries and the data included) and the
audit's CPU and wall seconds. Printed: the estimated peak, the measured peak, their ratio (goal: within
1.3x, and at least the peak, so that ``--memory-limit-mb`` is a cap), and the plan's total time beside the
measured wall and CPU seconds (the time is an order of magnitude for the user, not a goal).

Workloads (the memory model, ``disaggregated_eval.memory``, was fitted on the first ten; the last three
are shaped differently and were not used to fit it):

* ``compas``: the README's command, ``--control none,Y,R``, every other option at its default (the CLI).
* ``small``: 20,000 continuous rows, 3 attributes of 4 levels (124 slices), every default.
* ``cont-5e4``, ``cont-8e5``: 5x10^4 and 8x10^5 continuous rows, 3 x 4 levels, 1,000 resamples, no tests.
* ``hard-1e6``: 10^6 rows of hard predictions (counted into 48 units), 1,000 resamples, no tests.
* ``ctrl-y-2e5``, ``ctrl-r-8e5``: 2x10^5 / 8x10^5 continuous rows with ``V = Y`` / ``V = R``, 200 resamples.
* ``resamples``: 5,000 rows, 2x10^5 resamples, every metric, no tests.
* ``one-metric``: 2,000 rows, 3x10^5 resamples, one metric (the fairness summary bootstraps its own).
* ``many``: 2x10^5 rows, 3 attributes of 20 levels (9,261 slices), 4 count metrics, 2,000 resamples.
* ``skewed``: (held out) 5x10^4 rows, 3 attributes of 6 levels with Zipf frequencies, two models (Beta scores
  and hard predictions), sample weights, ``V = none, Y``, 2,000 resamples, every metric, no tests (under sample
  weights every test is Monte Carlo: hours at this size).
* ``deciles``: (held out) 5x10^5 rows whose scores are deciles (rows merge into units), 3 x 4 levels,
  every default but 2,000 resamples.
* ``control-x``: (held out) 3x10^4 rows with two features, ``V = X``, 500 resamples.

The load average is printed: time (not memory) depends on it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKLOADS = ["compas", "small", "cont-5e4", "cont-8e5", "hard-1e6", "ctrl-y-2e5", "ctrl-r-8e5", "resamples",
             "one-metric", "many", "skewed", "deciles", "control-x"]  # fmt: skip

_CHILD = r"""
import json, re, sys, tempfile, time, warnings
import numpy as np, pandas as pd
warnings.simplefilter("ignore")
name, root = sys.argv[1], sys.argv[2]
from disaggregated_eval.audit import audit

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence([36, 4])))

def frame(n, levels, p=None):
    codes = np.column_stack([rng.choice(L, n, p=None if p is None else p(L)) for L in levels])
    d = pd.DataFrame({f"a{k}": pd.Categorical.from_codes(codes[:, k], [f"l{i}" for i in range(L)])
                      for k, L in enumerate(levels)})
    x = rng.normal(size=n) + 0.3 * (codes[:, 0] - 1.5)
    d["y"] = rng.binomial(1, 1 / (1 + np.exp(-x)))
    d["score"] = 1 / (1 + np.exp(-(x + rng.normal(0, 0.7 + 0.1 * codes[:, 1], n))))
    return d, [f"a{k}" for k in range(len(levels))]

class Progress:
    def __init__(self):
        self.lines = []
    def __call__(self, stage, done, total):
        pass
    def message(self, text, hold=False):
        self.lines.append(text)
    def plan(self, stages):
        self.stages = [(s.name, s.seconds, s.upper_bound) for s in stages]

progress = Progress()
kw, d, g = {}, None, None
if name == "small":
    d, g = frame(20_000, (4, 4, 4))
elif name.startswith("cont-"):
    d, g = frame(int(float(name[5:])), (3, 4)); kw = dict(n_resamples=1000, n_permutations=0)
elif name == "hard-1e6":
    d, g = frame(10**6, (3, 4)); d["score"] = (d["score"] > 0.5).astype(np.int64)
    kw = dict(n_resamples=1000, n_permutations=0)
elif name.startswith("ctrl-"):
    d, g = frame(int(float(name[7:])), (3, 4))
    kw = dict(controls=["none", name[5].upper()], n_resamples=200, n_permutations=0)
elif name == "resamples":
    d, g = frame(5_000, (3, 2)); kw = dict(n_resamples=200_000, n_permutations=0)
elif name == "one-metric":
    d, g = frame(2_000, (3, 2)); kw = dict(n_resamples=300_000, n_permutations=0, metrics=["false_positive_rate"])
elif name == "many":
    d, g = frame(200_000, (20, 20, 20))
    kw = dict(n_resamples=2000, metrics=["sensitivity", "false_positive_rate", "precision", "predicted_positive_rate"])
elif name == "skewed":
    zipf = lambda L: (1 / np.arange(1, L + 1)) / (1 / np.arange(1, L + 1)).sum()
    d, g = frame(50_000, (6, 6, 6), p=zipf)
    d["score"] = rng.beta(2 + 3 * d["y"], 5 - 2 * d["y"])
    d["hard"] = (rng.random(len(d)) < np.where(d["y"] == 1, 0.7, 0.2)).astype(np.int64)
    d["w"] = rng.gamma(2.0, 0.5, len(d))
    kw = dict(scores=["score", "hard"], sample_weight="w", controls=["none", "Y"], n_resamples=2000, n_permutations=0)
elif name == "deciles":
    d, g = frame(500_000, (3, 4)); d["score"] = np.floor(d["score"] * 10) / 10 + 0.05
    kw = dict(n_resamples=2000)
elif name == "control-x":
    d, g = frame(30_000, (3, 4)); d["f1"] = rng.normal(size=len(d)) + d["y"]; d["f2"] = rng.normal(size=len(d))
    kw = dict(controls=["none", "X"], features=["f1", "f2"], n_resamples=500, n_permutations=0)
cpu, wall = time.process_time(), time.perf_counter()
if name == "compas":
    from disaggregated_eval.audit import cli
    class CliProgress(cli.StderrProgress if hasattr(cli, "StderrProgress") else object):
        pass
    import disaggregated_eval.audit.progress as P
    original = P.StderrProgress.message
    def message(self, text, hold=False):
        progress.lines.append(text); return original(self, text, hold=hold)
    P.StderrProgress.message = message
    out = tempfile.mkdtemp()
    cli.main(["audit", f"{root}/examples/data/compas.csv", "--label", "two_year_recid", "--score", "compas_score",
              "--group", "race", "--group", "sex", "--control", "none,Y,R", "--out", out + "/o", "--quiet"])
else:
    kw.setdefault("scores", ["score"])
    audit(d, label="y", groups=g, progress=progress, **kw)
cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
line = next((t for t in progress.lines if t.startswith("plan: ")), "")
found = re.search(r"peak memory about ([\d,]+) MB", line)
print(json.dumps(dict(estimate_mb=float(found.group(1).replace(",", "")) if found else None,
                      peak_mb=status("VmHWM") / 1e6, cpu=cpu, wall=wall, plan=line)))
"""


def run(name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    done = subprocess.run([sys.executable, "-c", _CHILD, name, str(ROOT)], capture_output=True, text=True, env=env,
                          timeout=3600)  # fmt: skip
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def planned_seconds(plan: str) -> str:
    found = re.search(r"about (.+?) in all on this machine(, the tests up to (.+?) more)?;", plan)
    if not found:
        return "?"
    return found.group(1) + (f" (+ tests up to {found.group(3)})" if found.group(3) else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", default=",".join(WORKLOADS))
    args = parser.parse_args()
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
    print("| workload | estimate MB | peak MB | estimate / peak | plan's time | wall s | CPU s |")
    print("|---|---:|---:|---:|---|---:|---:|", flush=True)
    ratios = []
    for name in args.workloads.split(","):
        r = run(name)
        ratio = r["estimate_mb"] / r["peak_mb"] if r["estimate_mb"] else float("nan")
        ratios.append(ratio)
        print(f"| {name} | {r['estimate_mb']:,.0f} | {r['peak_mb']:,.0f} | {ratio:.2f} | "
              f"{planned_seconds(r['plan'])} | {r['wall']:.1f} | {r['cpu']:.1f} |", flush=True)  # fmt: skip
    within = all(1.0 <= x <= 1.3 for x in ratios)
    print(
        f"estimate / peak from {min(ratios):.2f} to {max(ratios):.2f}; goal (each within 1.0-1.3): "
        f"{'met' if within else 'NOT met'}"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
