"""Benchmark the audit's figure stage against the code of commit b24421a, in the same run.

The figure stage is what ``write_outputs`` spends on figures: drawing every forest plot and ``T_a``
plot of an audit and saving each as PNG and SVG (``render_figures``). Today's code
(``disaggregated_eval.audit.figure_rendering.render_figures``) is timed against the version of commit
``b24421a`` (``audit/plots.py`` and ``audit/report.py``, extracted with ``git show`` into a
temporary package), on the same audit results, alternately, in one process; the statistics
(``audit()`` itself) are timed on the same small file for scale. The goal (issue "Audits whose cost
follows the information"): the figure stage no slower than the statistics on a small file.

Workloads (COMPAS copy in ``examples/data``, race x sex):

- ``small``: the audit with every default (one model, the 12 metrics, control ``none``,
  ``--n-resamples`` resamples and permutations, 10,000 by default): 13 figures, the workload where
  figures took 43 of 47 seconds;
- ``models``: three models (the COMPAS score, a noisy copy, a random score), 4 metrics, controls
  ``none`` and ``Y``, three attributes (race, sex, age category: 84 slices), 200 resamples and no
  permutations (the figures do not depend on them).

For each: the statistics' wall and CPU time (``small`` only; after a first small audit that
loads the compiled engine), then the best of ``--repeats`` wall and CPU times (CPU: this process
and the figure workers) of the baseline and of today's code (serial, ``n_jobs=1``, and with the
default worker processes), and the ratios; and a determinism check (today's bytes equal between
serial and parallel rendering). The load average (``os.getloadavg``) is printed before and after:
other jobs on the machine inflate wall times, less so CPU times.

Usage::

    python benchmarks/bench_audit_figures.py [--n-resamples 10000] [--repeats 3] [--baseline b24421a]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
COMPAS = REPO / "examples" / "data" / "compas.csv"
BASELINE_FILES = ("plots.py", "report.py")


def load_baseline(commit: str, folder: Path):
    """The baseline's ``render_figures``, from ``git show COMMIT:src/disaggregated_eval/audit/{plots,report}.py``.

    The two modules go into a package ``baseline_audit_figures`` in ``folder``; their relative
    imports of the rest of the library point at today's package (``vocabulary``, the house style),
    which those figures only read.
    """
    package = folder / "baseline_audit_figures"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name in BASELINE_FILES:
        text = subprocess.run(
            ["git", "-C", str(REPO), "show", f"{commit}:src/disaggregated_eval/audit/{name}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        (package / name).write_text(text.replace("from .. import", "from disaggregated_eval import").replace(
            "from ..", "from disaggregated_eval."
        ))  # fmt: skip
    sys.path.insert(0, str(folder))
    from baseline_audit_figures import report

    return report.render_figures


def audits(n_resamples: int):
    """The two workloads' audit results, and the statistics' wall time of the small one."""
    from disaggregated_eval.audit import audit
    from disaggregated_eval.audit.loading import load_table

    data = load_table(COMPAS, columns=["two_year_recid", "compas_score", "race", "sex", "age_cat"])
    rng = np.random.default_rng(0)
    data["noisy_score"] = np.clip(data["compas_score"] + rng.normal(0, 0.1, len(data)), 0, 1)
    data["random_score"] = rng.uniform(size=len(data))
    small = audit(
        data.head(500),
        scores=["compas_score"],
        groups=["race", "sex"],
        n_resamples=50,
        n_permutations=50,
        label="two_year_recid",
    )
    started, cpu = time.perf_counter(), cpu_seconds()  # the line above compiled the engine (numba): not timed
    small = audit(data, label="two_year_recid", scores=["compas_score"], groups=["race", "sex"],
                  n_resamples=n_resamples, n_permutations=n_resamples)  # fmt: skip
    stats = (time.perf_counter() - started, cpu_seconds() - cpu)
    models = audit(data, scores=["compas_score", "noisy_score", "random_score"], groups=["race", "sex", "age_cat"],
                   metrics=["false_positive_rate", "false_negative_rate", "precision", "auc"], controls=["none", "Y"],
                   max_leaf_nodes=[10], cv_folds=2, crossfit_folds=2, label="two_year_recid", n_resamples=200,
                   n_permutations=0)  # fmt: skip
    return {"small": small, "models": models}, stats


def cpu_seconds() -> float:
    """CPU time of this process (all threads) and of its finished children (the figure workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def best_of(fn, repeats: int) -> tuple[float, float]:
    """Smallest wall time and smallest CPU time of ``repeats`` calls."""
    walls, cpus = [], []
    for _ in range(repeats):
        started, cpu = time.perf_counter(), cpu_seconds()
        fn()
        walls.append(time.perf_counter() - started)
        cpus.append(cpu_seconds() - cpu)
    return min(walls), min(cpus)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-resamples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--baseline", default="b24421a")
    args = parser.parse_args()

    from disaggregated_eval.audit import figure_rendering, plots

    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"{len(os.sched_getaffinity(0))} CPUs available")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        baseline = load_baseline(args.baseline, Path(tmp))
        results, stats = audits(args.n_resamples)
        print(f"statistics of the small audit (audit(), {args.n_resamples:,} resamples and permutations): "
              f"{stats[0]:.2f} s wall, {stats[1]:.2f} s CPU")  # fmt: skip
        for name, result in results.items():
            n_slices = result.slices["slice"].nunique()
            figures = plots.figure_specs(result)
            baseline(result), figure_rendering.render_figures(result, n_jobs=1)  # warm up both (fonts, caches)
            old = best_of(lambda r=result: baseline(r), args.repeats)
            serial = best_of(lambda r=result: figure_rendering.render_figures(r, n_jobs=1), args.repeats)
            parallel = best_of(lambda r=result: figure_rendering.render_figures(r), args.repeats)
            print(f"{name}: {len(figures)} figures, {result.slices['model'].nunique()} model(s), {n_slices} slices; "
                  f"best of {args.repeats} (wall / CPU): baseline {old[0]:.2f} / {old[1]:.2f} s; "
                  f"today serial {serial[0]:.2f} / {serial[1]:.2f} s ({old[0] / serial[0]:.1f}x wall); "
                  f"today parallel {parallel[0]:.2f} / {parallel[1]:.2f} s ({old[0] / parallel[0]:.1f}x wall)")  # fmt: skip
            if name == "small":
                print(f"  figure stage / statistics, wall: baseline {old[0] / stats[0]:.2f}, today {parallel[0] / stats[0]:.2f}; "
                      f"CPU: baseline {old[1] / stats[1]:.2f}, today {parallel[1] / stats[1]:.2f}")  # fmt: skip
            first = figure_rendering.render_figures(result, n_jobs=1)
            second = figure_rendering.render_figures(result)
            same = all(first[k][1] == second[k][1] for k in first) and list(first) == list(second)
            print(f"  same bytes (serial vs parallel, PNG and SVG): {'yes' if same else 'NO'}")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
