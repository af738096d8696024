"""Memory of an in-memory audit of hard predictions per input row: the goal of issue 24 item 5 (<= 80 bytes).

Run: ``python benchmarks/bench_memory.py [--rows 1e6 1e7] [--base-src DIR]``

For each size, a seeded frame of hard 0/1 predictions (3 protected attributes of 4 levels as
categoricals, a 0/1 label; 48 distinct rows of the audited columns per label and prediction) is
audited with the default metrics (those of hard predictions), 1,000 resamples and 1,000 permutations,
in a fresh process per run. Reported: the peak resident memory during ``audit()`` (Linux's ``VmHWM``, reset
just before the call) minus the resident memory just before it (the frame already built), per input row, and the CPU time of the call:

* ``counts``: this code (the frame counted by DuckDB before the audit, ``audit/aggregate.py``);
* ``rows``: this code with the counting switched off (``COMPRESS_MIN_ROWS`` above the size): every
  stage holds every row, as before issue 24;
* ``base``: the code under ``--base-src`` (e.g. ``git archive 86ba781 src | tar -x -C /tmp/base`` and
  ``--base-src /tmp/base/src``), today's figure in the same run.

The estimate of the peak that the audit states before any work (:func:`disaggregated_eval.memory.audit_peak_bytes`)
is printed beside each measurement. Figures depend on the machine's load: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_CHILD = r"""
import json, resource, sys, time, warnings
import numpy as np, pandas as pd
warnings.simplefilter("ignore")
n, mode = int(float(sys.argv[1])), sys.argv[2]
from disaggregated_eval.audit import audit
if mode == "rows":
    import disaggregated_eval.audit.aggregate as aggregate
    aggregate.COMPRESS_MIN_ROWS = 10**18
rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(20250101)))
levels = {c: [f"{c}{k}" for k in range(4)] for c in "abc"}
frame = pd.DataFrame({c: pd.Categorical.from_codes(rng.integers(0, 4, n), levels[c]) for c in "abc"})
frame["y"] = (rng.random(n) < 0.3).astype(np.int64)
frame["pred"] = (rng.random(n) < np.where(frame["y"] == 1, 0.7, 0.2)).astype(np.int64)
options = dict(label="y", scores=["pred"], groups=["a", "b", "c"], n_resamples=1000, n_permutations=1000)
audit(frame.iloc[:300_000].reset_index(drop=True), **options)  # numba's compilation and caches, not counted
def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))
with open("/proc/self/clear_refs", "w") as f:  # the peak (VmHWM) from here on (Linux)
    f.write("5")
before = status("VmRSS")
cpu = time.process_time()
audit(frame, **options)
cpu = time.process_time() - cpu
peak = status("VmHWM")
estimate = None
try:  # what the work adds to the memory held before it (the estimate's parts; the code of --base-src may lack them)
    from disaggregated_eval.memory import AuditSize, audit_peak_bytes
    estimate = audit_peak_bytes(AuditSize(n_rows=n, n_units=256 if mode == "counts" else n, n_models=1,
                                          n_families=7, n_slices=85, n_resamples=1000, n_outputs=2 * 85,
                                          n_metrics=11), resident=0)
except ImportError:
    pass
print(json.dumps({"per_row": (peak - before) / n, "frame_per_row": frame.memory_usage(deep=True).sum() / n,
                  "cpu": cpu, "estimate_per_row": None if estimate is None else estimate / n}))
"""


def run(n: int, mode: str, src: str | None) -> dict:
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    done = subprocess.run([sys.executable, "-c", _CHILD, str(n), mode], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=float, nargs="+", default=[1e6, 1e7])
    parser.add_argument("--base-src", default=None, help="the src folder of the base commit (today's figure)")
    args = parser.parse_args()
    print(f"goal: <= 80 bytes per input row (load average {os.getloadavg()[0]:.2f})")
    for rows in args.rows:
        n = int(rows)
        modes = [("counts", None), ("rows", None)] + ([("base", args.base_src)] if args.base_src else [])
        for mode, src in modes:
            r = run(n, mode, src)
            estimate = (
                "" if r["estimate_per_row"] is None else f", estimated before the work {r['estimate_per_row']:.0f}"
            )
            print(f"{n:>12,} rows {mode:>6}: {r['per_row']:7.1f} bytes per row above the frame ({r['frame_per_row']:.0f} "
                  f"per row){estimate}; {r['cpu']:6.1f} s CPU (load average {os.getloadavg()[0]:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
