"""Validity study of ``disagg-eval audit``: what the audit reports, against known truth.

Every data set is drawn from a population whose metrics are known without sampling, and the audit
(``disaggregated_eval.audit.audit``, the public function, with its defaults except the options named
below) is run on it as a practitioner runs it. Parts (issue 12, item 8):

(a) **Per-slice coverage** of the 95% intervals (``slices``: ``ci_low <= truth <= ci_high``) by metric
    and slice size, for both resampling schemes (``population``, ``within_group``), with the rates of
    zero-width intervals (``ci_high - ci_low <= 1e-12``), of undefined estimates (the slice's own
    denominator is empty: no negatives for the false positive rate, no predicted positive for the
    precision, one class missing for the AUC) and of missing intervals (NaN bounds, counted as not
    covering). Design: one file of 2,725 rows whose attribute ``size`` has levels of 15, 30, 60, 120,
    500 and 2,000 rows, every row from the same population (``_validity.STRONG``: label rate 0.3,
    ``logit R | Y = y ~ N(-1.2 or 0.8, 1.2^2)``), so one audit gives one replicate of every size; all
    15 metrics (the audit's 14 default ones and ``balanced_accuracy``), ``n_resamples`` 1,000. The truth of every slice (and of ``overall``) is the
    population's metric. Withheld slices count too: their interval is reported.
(b) **Family-wise error of the flags and weak-null rejection.** A slice is flagged when its
    ``vs_overall`` comparison has ``p_adjusted < 1 - confidence`` (the audit's default Holm
    adjustment, default number of permutations). Strong null: part (a)'s files (every slice has the
    same joint distribution of label and score). Weak null: 4 slices of 500 rows with label rates
    0.20, 0.33, 0.47, 0.60 and two scores: ``separation``, whose ``logit R | Y`` is the same in every
    slice (so sensitivity, specificity, false positive and negative rates and AUC are equal), and
    ``sufficiency``, with ``R`` in {0.15, 0.75}, ``P(Y = 1 | R) = R`` in every slice and slice-dependent
    ``P(R = 0.75)`` (so precision, 0.75, and the observed / expected ratio, 1, are equal). Reported
    per null, model and metric whose null holds: the unadjusted rejection rate of the worst test of each
    kind (``vs_overall``, ``vs_rest``, ``pairwise``; among the replicates where the test is reported),
    the rate of any unadjusted flag, and the family-wise error of the (adjusted) flags.
(c) **Power** to flag (``vs_overall``, adjusted p below 0.05, difference above 0) a slice that is 15%
    of 3,000 rows (attribute ``a``: 450, 1,050, 750, 750 rows; attribute ``b`` 50/50 and independent;
    intersections on, as by default) whose false positive rate is 0.05 or 0.10 above the rest's 0.20
    (label rate 0.3 everywhere), with ``adjust="holm"`` and ``adjust="bh"`` (two audits of the same file
    and seed, metric ``false_positive_rate`` only: the family is one metric's).
(d) **Joint coverage of the simultaneous bands**: the share of part (a)'s audits in which every
    reported slice of a metric (``reported`` true, ``overall`` included) has
    ``band_low <= truth <= band_high`` (a NaN band counts as not covering), per metric and scheme.
(e) **Controlled differences** ``T_a`` (``controlled`` table, ``V = Y`` and ``V = R``) with the audit's
    own cross-fitted weights, at 2,000 and 20,000 rows: coverage of ``[T_a_low, T_a_high]`` and the
    bias of ``T_a`` in units of its standard deviation across replicates, for the false positive rate,
    the precision and the label rate. Population (``_validity.CONTROLLED``): three groups of 60%, 30%
    and 10% of the rows (multinomial), ``P(Y = 1 | A) = 0.3, 0.4, 0.5``,
    ``logit R | A = a, Y = y ~ N(mu_ay, 1)`` with ``mu = (-1.5, 0.5), (-1.0, 1.0), (0.0, 2.0)``: the small
    group's scores sit in the upper tail, where ``P(A = small | R)`` rises steeply.
    **Truth**: ``T_a = m(population | A = a) - M_a`` with ``M_a`` the metric of the whole population
    weighted by the exact ``P(A = a | V)``: for ``V = Y`` Bayes' rule on the closed-form
    ``P(A = a, Y = y) = P(a) P(y | a)``; for ``V = R``
    ``P(A = a | R = r) = sum_y P(a, y) phi((logit r - mu_ay)) / sum_{b, y} P(b, y) phi((logit r - mu_by))``.
    The metrics of these weighted populations are integrals over the logit score, computed by
    Gauss-Legendre quadrature as weighted pseudo-rows evaluated with the project's
    ``disaggregated_eval.metrics.compute_metrics`` (``_validity`` module docstring; error far below
    1e-9, checked against a Monte-Carlo sample in ``tests/test_audit_validity.py``).

(f) **The fairness summary, the verdicts and the calibration error** (issue 21;
    :mod:`_validity_fairness`, whose docstring gives the populations and truths): per cell, the coverage
    of every fairness statistic's interval (DP/EO differences and ratios, largest gap, disparity ratios),
    the mean error of the plug-in and bias-corrected DP/EO differences, the share of audits with any wrong
    verdict (the fairness summary's, and the worst metric's slice-vs-overall family: flags and
    certifications together), the band's joint coverage, the power to certify, the width of the DP
    difference's interval against the previous percentile interval, and per calibration cell and slice
    size the coverage of the calibration error (and of its distance from overall's calibration) and of
    the observed/expected ratio; and (f5, issue 33 item 6) the share of a fair model's audits of three rates
    (``_validity_fairness.AUDIT_FAMILY_CELLS``, ``AUDIT_FAMILY_METRICS``: every difference 0) with any wrong
    verdict, every kind of comparison and every metric, with the default families (``adjust_scope="metric"``:
    each keeps its 5%, no goal over the audit) and with one family over the whole audit (``"audit"``; goal: at
    most 5%), on the same files and seeds.
(g) **Evaluation under selection** (issue 25; :mod:`_validity_selection`, whose docstring gives the
    population, the selections and the truths): the table ``selection`` of audits with
    ``population_margins`` and ``selection_sensitivity`` on samples of a selected population, against the
    whole population's metrics: coverage of the corrected intervals where the margins identify (goal at
    least 93%), of the bounds' intervals from the true selection strength Gamma* on (goal at least 95%),
    the ``Gamma = 1`` rows against the estimate (equal, bit for bit), and the error rate of the claims
    "survives selection up to Gamma_b" with ``Gamma_b > Gamma*`` (at most 5%); (g5, issue 33) the slices
    table, the comparisons and the fairness summary of the same audits, weighted to the margins, against the
    whole population's truths where the margins identify (goal at least 93%).

Goals (issue 12; part f: issue 21) and verdicts. Every cell shows its number of replicates ``R`` and its Monte-Carlo
standard error (``sqrt(p (1 - p) / R)`` for a rate, ``1 / sqrt(R)`` for a bias in standard deviations).
A cell is **PASS** when its estimate meets the goal, **NEAR** when it misses the goal within
Monte-Carlo error, and **FAIL** beyond. "Within Monte-Carlo error" for a rate: an exact one-sided
binomial test of "the rate equals the goal" against "it is on the wrong side" does not reject at
level 0.025 (about two standard errors ``2 sqrt(g (1 - g) / R)`` at the goal ``g``); for the worst
of ``k`` tests of one metric the level is ``0.025 / k`` (Bonferroni). For a bias: within two
standard errors. So "at most 5% plus Monte-Carlo error" means PASS or NEAR, and NEAR says that more
replicates are needed to tell. Cells of one replicate are correlated (every size and metric of part
(a) comes from the same files), so an unlucky set of files shows in several cells at once.

Goals: every per-slice interval of a proportion metric covers 93-99% at every size from 15 rows;
AUC, log loss and Brier cover at least 92% from 30 rows (the study applies this goal to net benefit,
mean predicted risk and the observed / expected ratio too); no zero-width interval anywhere (any zero-width interval is a FAIL, whatever the replicate count);
weak-null (and strong-null) rejection of every test at most 5%; family-wise error of the flags of
one metric at most 5%; power to flag (15% of 3,000 rows, FPR + 0.05) at least 20% with Holm
(reported for BH too; the FPR + 0.10 cells have no goal); band joint coverage at least 94%; every
``T_a`` cell covers at least 92% with no bias beyond half its standard deviation. Part (f): every
fairness statistic's and the calibration error's interval covers 93-99.5% in every cell (conservative
up to 99.5% allowed: extremes over near-tied slices, truths on the boundary), the observed/expected
ratio 93-99%; wrong verdicts in at most 5% of audits; certification power (every slice's FPR and
selection rate within 0.05 of overall, four equal slices of 2,000 rows) at least 80%; the DP
difference's interval at most 1.3 times the previous percentile interval's width (two slices of 2,000
rows, a gap of 0.15).

Seeds: one root seed (``--seed``); replicate ``r`` of cell ``c`` draws its data from
``seeds.generator(root, "validity", c, r, "data")`` and gives the audit the seed
``seeds.sklearn_seed(root, "validity", c, r, "audit")`` (cells: ``strong``, ``weak``, ``power-0.05``,
``power-0.1``, ``controlled-2000``, ``controlled-20000``). Results do not depend on the number of
workers (each audit runs with ``n_threads=1``; ``--workers`` processes run replicates in parallel).

Usage::

    python benchmarks/bench_audit_validity.py [--quick] [--parts a,b,c,d,e,f] [--seed S] [--workers 2]
        [--replicates a=1000,b=250,c=80,d=1000,e=40,f=400] [--n-resamples 1000] [--metrics M1,M2]
        [--markdown] [--out-dir DIR]

Default replicate counts: a = d = 1,000 (the same audits), b = 250 (strong and weak null each), c = 80
per excess (each with Holm and BH), e = 40 per size, f = 400 per cell (24 cells: 18 fairness, 4 calibration, 2 audit-family). At commit 391a650
these cost 52.9 CPU-minutes, 35 minutes wall on 2 cores at a load of 2-2.5. ``--quick``: a = d = 40,
b = 10, c = 5, e = 2, f = 3 (a few minutes). ``--metrics``: only these metrics in parts a, b and d, e.g.
``--parts a,b --metrics balanced_accuracy`` (the same files and seeds; intervals and bands do not
depend on the other metrics, Monte-Carlo p-values are drawn from the same distribution but may differ
when the metrics that share a permutation design change). ``--markdown`` prints the tables as Markdown (the ``docs/audit.md`` section "How far to
trust the numbers" is this output). Outputs (``--out-dir``, default ``benchmarks/output/validity``):
``a_coverage.csv``, ``b_rejection.csv``, ``b_tests.csv``, ``c_power.csv``, ``d_bands.csv``,
``e_controlled.csv``, ``f_coverage.csv``, ``f_verdicts.csv``, ``f_power.csv``, ``f_bias.csv``,
``f_calibration.csv``, ``f_family.csv``, ``g_coverage.csv``, ``g_claims.csv``, ``g_identified.csv``, ``g_bounds.csv``,
``tables.md`` and ``run.json`` (counts, seed, wall and CPU time, load,
warnings), each written to a temporary file and renamed. Exit status 0 whatever the verdicts (the
study reports; it does not gate).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _validity as v
import _validity_fairness as vf
import _validity_selection as vs

from disaggregated_eval.audit.interval_notes import SMALL_BOOTSTRAP_METRICS, SMALL_BOOTSTRAP_ROWS

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("a", "b", "c", "d", "e", "f", "g")
DEFAULT_REPLICATES = {"a": 1000, "b": 250, "c": 80, "d": 1000, "e": 40, "f": 400, "g": 400}
QUICK_REPLICATES = {"a": 40, "b": 10, "c": 5, "d": 40, "e": 2, "f": 3, "g": 3}
DEFAULT_SEED = 20250101
_SCHEMES = ("population", "within_group")
#: Kinds of replicate (``--kinds``), and the part each belongs to.
KINDS: dict[str, str] = {"strong": "a,b,d", "weak": "b", "strong_z": "b", "weak_z": "b", "power": "c",
                         "power_z": "c", "controlled": "e", "fair": "f", "calibration": "f", "audit_family": "f",
                         "selection": "g"}  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a few replicates per cell (a minute or two)")
    parser.add_argument("--parts", default=",".join(PARTS), help="parts to run, e.g. a,b (default: all)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help="root seed of every draw")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (each audit: one thread)")
    parser.add_argument("--replicates", default="", help="override counts, e.g. a=500,e=20")
    parser.add_argument("--kinds", default="", help=f"run only these kinds of replicate, e.g. strong_z,weak_z "
                        f"(among {','.join(KINDS)}; default: every kind of the parts)")  # fmt: skip
    parser.add_argument("--n-resamples", type=int, default=1000, help="bootstrap resamples of every audit")
    parser.add_argument(
        "--metrics", default="", help="metrics of parts a, b and d, comma-separated (default: all of them)"
    )
    parser.add_argument("--markdown", action="store_true", help="print the tables as Markdown")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "output" / "validity")
    args = parser.parse_args(argv)
    parts = tuple(p.strip() for p in args.parts.split(",") if p.strip())
    bad = [p for p in parts if p not in PARTS]
    if bad or not parts:
        parser.error(f"--parts takes letters among {','.join(PARTS)}; got {args.parts!r}")
    args.parts = tuple(p for p in PARTS if p in parts)
    counts = dict(QUICK_REPLICATES if args.quick else DEFAULT_REPLICATES)
    for item in filter(None, (s.strip() for s in args.replicates.split(","))):
        key, _, value = item.partition("=")
        if key not in PARTS or not value.isdigit() or int(value) < 1:
            parser.error(
                f"--replicates takes part=count with a part among {','.join(PARTS)} and a count >= 1; got {item!r}"
            )
        counts[key] = int(value)
    args.counts = counts
    args.kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip()) or None
    if args.kinds is not None and any(k not in KINDS for k in args.kinds):
        parser.error(f"--kinds takes kinds among {','.join(KINDS)}; got {args.kinds!r}")
    metrics = tuple(m.strip() for m in args.metrics.split(",") if m.strip()) or v.ALL_METRICS
    unknown = [m for m in metrics if m not in v.ALL_METRICS]
    if unknown or len(set(metrics)) != len(metrics):
        parser.error(f"--metrics takes distinct names among {','.join(v.ALL_METRICS)}; got {args.metrics!r}")
    args.metrics = tuple(m for m in v.ALL_METRICS if m in metrics)
    if args.workers < 1:
        parser.error(f"--workers must be at least 1; got {args.workers}")
    if args.seed < 0:
        parser.error(f"--seed must be a non-negative integer; got {args.seed}")
    return args


# ----------------------------------------------------------------------------------------------
# Tasks
# ----------------------------------------------------------------------------------------------


def build_tasks(
    parts,
    counts,
    root: int,
    n_resamples: int,
    metrics: tuple[str, ...] = v.ALL_METRICS,
    kinds: Sequence[str] | None = None,
) -> list[v.Task]:
    """Every replicate of the requested parts, the most expensive first (for load balance); ``metrics``:
    those of parts a, b and d (the kinds strong and weak); with ``kinds``, only the replicates of those
    kinds (``Task.kind``)."""
    tasks: list[v.Task] = []
    if "g" in parts:
        for cell in vs.CELLS:
            tasks += [v.Task("selection", r, root, n_resamples, param=cell) for r in range(counts["g"])]
    if "f" in parts:
        for cell in vf.CALIBRATION_CELLS:
            tasks += [v.Task("calibration", r, root, n_resamples, param=cell) for r in range(counts["f"])]
        for cell in vf.FAIR_CELLS:
            tasks += [v.Task("fair", r, root, n_resamples, param=cell) for r in range(counts["f"])]
        for cell in vf.AUDIT_FAMILY_CELLS:
            tasks += [v.Task("audit_family", r, root, n_resamples, param=cell) for r in range(counts["f"])]
    if "e" in parts:
        for n in v.CONTROLLED_SIZES:
            tasks += [v.Task("controlled", r, root, n_resamples, param=n) for r in range(counts["e"])]
    if "c" in parts:
        for gap in v.POWER_Z_GAPS:
            tasks += [v.Task("power_z", r, root, n_resamples, param=gap) for r in range(counts["c"])]
        for excess in v.POWER_EXCESSES:
            tasks += [v.Task("power", r, root, n_resamples, param=excess) for r in range(counts["c"])]
    if "b" in parts:
        tasks += [v.Task("weak_z", r, root, n_resamples, metrics=metrics) for r in range(counts["b"])]
        tasks += [v.Task("strong_z", r, root, n_resamples, metrics=metrics) for r in range(counts["b"])]
        tasks += [v.Task("weak", r, root, n_resamples, metrics=metrics) for r in range(counts["b"])]
    slices = max([counts[p] for p in ("a", "d") if p in parts], default=0)
    nulls = counts["b"] if "b" in parts else 0
    for r in range(max(slices, nulls)):
        schemes = _SCHEMES if r < slices else ("population",)
        tasks.append(v.Task("strong", r, root, n_resamples, schemes=schemes, permutations=r < nulls, metrics=metrics))
    return tasks if kinds is None else [t for t in tasks if t.kind in kinds]


def _init_worker() -> None:
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"


def run_tasks(tasks: list[v.Task], workers: int) -> tuple[dict[str, pd.DataFrame], dict[str, float], list[str]]:
    """Run every task: the tables of each kind concatenated in (cell, replicate) order, the CPU seconds
    of each cell, the distinct warnings raised by the audits."""
    results = []
    start = time.perf_counter()
    step = max(1, len(tasks) // 20)
    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(workers, mp_context=context, initializer=_init_worker) as pool:
        futures = [pool.submit(v.run_task, t) for t in tasks]
        for done, future in enumerate(cf.as_completed(futures), start=1):
            results.append(future.result())
            if done % step == 0 or done == len(tasks):
                print(f"validity: {done}/{len(tasks)} replicates, {time.perf_counter() - start:.0f} s", file=sys.stderr)
    results.sort(key=lambda x: (x[0].cell, x[0].replicate))
    tables: dict[str, list[pd.DataFrame]] = {}
    warned: dict[str, None] = {}
    for _, out, _, w in results:
        for name, frame in out.items():
            tables.setdefault(name, []).append(frame)
        warned.update(dict.fromkeys(w))
    cpu: dict[str, float] = {}
    for task, _, seconds, _ in results:
        cpu[task.cell] = cpu.get(task.cell, 0.0) + seconds
    return {k: pd.concat(f, ignore_index=True) for k, f in tables.items()}, cpu, list(warned)


# ----------------------------------------------------------------------------------------------
# Summaries
# ----------------------------------------------------------------------------------------------


_pct = v.pct


def _coverage_goal(metric: str, size: int) -> tuple[float | None, float | None, str]:
    if metric in v.PROPORTION_METRICS:
        return 0.93, 0.99, "93-99%"
    if size >= 30:
        return 0.92, None, ">=92%"
    return None, None, "none"


def _size_label(size: int) -> str:
    return "overall" if size == sum(v.SIZES) else str(size)


def summarise_a(slices: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """Part (a): one row per scheme, metric and slice size."""
    slices = slices[slices["replicate"] < r_max]
    rows = []
    for (scheme, metric, size), g in slices.groupby(["scheme", "metric", "size"], sort=False):
        cov, se, r = v.rate(g["covered"])
        low, high, goal = _coverage_goal(metric, size)
        cov_verdict = "-" if goal == "none" else v.rate_verdict(cov, r, low=low, high=high)
        zero = float(g["zero_width"].mean())
        verdict = v.worst_verdict([cov_verdict, "FAIL" if zero > 0 else "PASS"])
        rows.append(
            {
                "scheme": scheme,
                "metric": metric,
                "size": _size_label(size),
                "replicates": r,
                "coverage": cov,
                "coverage_se": se,
                "zero_width": zero,
                "undefined_estimate": float(g["undefined_estimate"].mean()),
                "missing_interval": float(g["missing_interval"].mean()),
                "reported": float(g["reported"].mean()),
                "coverage_goal": goal,
                "verdict": verdict,
            }
        )
    out = pd.DataFrame(rows)
    order = {m: i for i, m in enumerate(v.ALL_METRICS)}
    sizes = [*(str(s) for s in v.SIZES), "overall"]
    out["_m"], out["_s"] = out["metric"].map(order), out["size"].map(sizes.index)
    out["_c"] = out["scheme"].map(_SCHEMES.index)
    return out.sort_values(["_m", "_c", "_s"]).drop(columns=["_m", "_s", "_c"]).reset_index(drop=True)


def table_a(summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Printed tables of part (a): coverage with verdicts, and zero-width / undefined rates."""
    sizes = [*(str(s) for s in v.SIZES), "overall"]
    cov_rows, zero_rows = [], []
    for (metric, scheme), g in summary.groupby(["metric", "scheme"], sort=False):
        g = g.set_index("size")
        verdict = v.worst_verdict(g["verdict"])
        where = [
            f"{kind} at {', '.join(s for s in sizes if s in g.index and g.loc[s, 'verdict'] == kind)}"
            for kind in ("FAIL", "NEAR")
            if (g["verdict"] == kind).any()
        ]
        note = f"{verdict} ({'; '.join(where)})" if where else verdict
        cov_rows.append(
            {
                "metric": metric,
                "scheme": scheme,
                "R": int(g["replicates"].iloc[0]),
                **{s: _pct(g.loc[s, "coverage"], g.loc[s, "coverage_se"]) for s in sizes if s in g.index},
                "goal": "93-99%" if metric in v.PROPORTION_METRICS else ">=92% from 30",
                "verdict": note,
            }
        )
        if (g["zero_width"] == 0).all() and (g["undefined_estimate"] == 0).all():
            continue
        zero_rows.append(
            {
                "metric": metric,
                "scheme": scheme,
                **{
                    s: f"{_pct(g.loc[s, 'zero_width'])} / {_pct(g.loc[s, 'undefined_estimate'])}"
                    for s in sizes
                    if s in g.index
                },
            }
        )
    return pd.DataFrame(cov_rows), pd.DataFrame(zero_rows, columns=["metric", "scheme", *sizes])


def summarise_b(tests: pd.DataFrame, r_max: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Part (b): per-test rejection rates, and one row per null, model and metric."""
    tests = tests[tests["replicate"] < r_max].copy()
    tests["reject"] = tests["p_value"] < v.ALPHA
    tests["reject_adjusted"] = tests["p_adjusted"] < v.ALPHA
    per_test = []
    keys = ["null", "model", "metric", "kind", "slice", "reference"]
    for key, g in tests.groupby(keys, sort=False):
        reported = g[g["reported"]]
        p, se, r = v.rate(reported["reject"])
        per_test.append({**dict(zip(keys, key)), "replicates": r, "rejection": p, "rejection_se": se,
                         "rejection_adjusted": v.rate(reported["reject_adjusted"])[0]})  # fmt: skip
    per_test = pd.DataFrame(per_test)
    rows = []
    for (null, model, metric), g in per_test.groupby(["null", "model", "metric"], sort=False):
        g = g[g["replicates"] > 0]
        k = len(g)
        test_verdicts = [v.rate_verdict(p, r, high=v.ALPHA, k=k) for p, r in zip(g["rejection"], g["replicates"])]
        flags = tests[(tests["null"] == null) & (tests["model"] == model) & (tests["metric"] == metric)]
        overall = flags[flags["kind"] == "vs_overall"]
        by_rep = overall.groupby("replicate")
        any_unadj = by_rep.apply(lambda x: bool((x["reported"] & x["reject"]).any()), include_groups=False)
        any_adj = by_rep.apply(lambda x: bool((x["reported"] & x["reject_adjusted"]).any()), include_groups=False)
        fwer, fwer_se, r = v.rate(any_adj)
        row = {"null": null, "model": model, "metric": metric, "replicates": r}
        for kind in ("vs_overall", "vs_rest", "pairwise"):
            kg = g[g["kind"] == kind]
            if len(kg):
                worst = kg.loc[kg["rejection"].idxmax()]
                name = worst["slice"] if kind != "pairwise" else f"{worst['slice']} vs {worst['reference']}"
                row[f"{kind}_worst"] = worst["rejection"]
                row[f"{kind}_worst_se"] = worst["rejection_se"]
                row[f"{kind}_worst_slice"] = name
        row["tests"] = k
        row["flags_any_unadjusted"] = v.rate(any_unadj)[0]
        row["flags_fwer"] = fwer
        row["flags_fwer_se"] = fwer_se
        fwer_verdict = v.rate_verdict(fwer, r, high=v.ALPHA)
        row["verdict_tests"] = v.worst_verdict(test_verdicts)
        row["verdict_flags"] = fwer_verdict
        row["verdict"] = v.worst_verdict([*test_verdicts, fwer_verdict])
        rows.append(row)
    out = pd.DataFrame(rows)
    out["_n"] = out["null"].map({"strong": 0, "weak": 1})
    out["_m"] = out["metric"].map(v.ALL_METRICS.index)
    out = out.sort_values(["_n", "model", "_m"]).drop(columns=["_n", "_m"]).reset_index(drop=True)
    return out, per_test


def _short(name: str) -> str:
    """``size=n0030`` -> ``30``, ``label_rate=0.20`` -> ``0.20`` (table labels)."""
    out = []
    for part in name.split(" vs "):
        part = part.replace("size=", "").replace("label_rate=", "")
        out.append(str(int(part[1:])) if part.startswith("n") and part[1:].isdigit() else part)
    return " vs ".join(out)


def table_b(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, s in summary.iterrows():
        row = {"null": s["null"], "model": s["model"], "metric": s["metric"], "R": int(s["replicates"])}
        for kind in ("vs_overall", "vs_rest", "pairwise"):
            if isinstance(s.get(f"{kind}_worst_slice"), str):
                short = _short(s[f"{kind}_worst_slice"])
                row[f"{kind} worst test"] = f"{_pct(s[f'{kind}_worst'], s[f'{kind}_worst_se'])} ({short})"
            else:
                row[f"{kind} worst test"] = "-"
        row["any flag, unadjusted"] = _pct(s["flags_any_unadjusted"])
        row["flags FWER"] = _pct(s["flags_fwer"], s["flags_fwer_se"])
        row["verdict (tests / flags)"] = f"{s['verdict']} ({s['verdict_tests']} / {s['verdict_flags']})"
        rows.append(row)
    return pd.DataFrame(rows)


def summarise_c(power: pd.DataFrame, r_max: int) -> pd.DataFrame:
    power = power[(power["replicate"] < r_max) & (power["kind"] == "vs_overall")]
    rows = []
    for (excess, adjust), g in power.groupby(["excess", "adjust"], sort=True):
        up = g["reported"] & (g["difference"] > 0)
        p, se, r = v.rate(up & (g["p_adjusted"] < v.ALPHA))
        unadj = v.rate(up & (g["p_value"] < v.ALPHA))
        goal = adjust == "holm" and abs(excess - 0.05) < 1e-12
        rows.append(
            {
                "fpr_excess": excess,
                "adjust": adjust,
                "replicates": r,
                "power": p,
                "power_se": se,
                "power_unadjusted": unadj[0],
                "power_unadjusted_se": unadj[1],
                "goal": ">=20%" if goal else "none",
                "verdict": v.rate_verdict(p, r, low=0.20) if goal else "-",
            }
        )
    return pd.DataFrame(rows)


def table_c(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "FPR excess": [f"+{x:.2f}" for x in summary["fpr_excess"]],
            "adjust": summary["adjust"],
            "R": summary["replicates"],
            "power (flag above overall)": [_pct(p, s) for p, s in zip(summary["power"], summary["power_se"])],
            "unadjusted p < 0.05": [
                _pct(p, s) for p, s in zip(summary["power_unadjusted"], summary["power_unadjusted_se"])
            ],
            "goal": summary["goal"],
            "verdict": summary["verdict"],
        }
    )


def _in_rule(name: str) -> bool:
    """Whether every slice of a test's name (``size=n04000``, ``... vs ...``) is within the switch rule's sizes
    (:data:`_validity.Z_RULE_ROWS`); the weak nulls' slices (label rates) all are."""
    sizes = [int(part) for part in _short(name).split(" vs ") if part.isdigit()]
    return all(size >= v.Z_RULE_ROWS for size in sizes)


def summarise_b_z(tests: pd.DataFrame, r_max: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Part (b), the large-sample test: per null, weights, model and metric, the worst test of each kind among
    the tests within the switch rule's sizes (goal: at most 5% each, Bonferroni over them), the rejection at
    5% and 1% pooled over those tests (the normal approximation's tail), the worst test of a slice below
    those sizes (no goal: there the rule keeps permutations), and the family-wise error of the flags: of the
    family within the rule's sizes (Holm over its vs-overall tests: any p below 0.05 / m; goal: at most 5%)
    and, for information, of the audit's family with every slice (its adjusted p-values). Returns the
    summary and the per-test rejection rates."""
    # the large-sample tests only (the unweighted audits' rates keep their exact tests)
    tests = tests[(tests["replicate"] < r_max) & tests["reported"] & (tests["test"] == "bootstrap z")].copy()
    tests["reject"] = tests["p_value"] < v.ALPHA
    tests["reject_1"] = tests["p_value"] < 0.01
    tests["reject_adjusted"] = tests["p_adjusted"] < v.ALPHA
    tests["name"] = np.where(tests["kind"] == "pairwise", tests["slice"] + " vs " + tests["reference"], tests["slice"])
    tests["in_rule"] = [_in_rule(name) for name in tests["name"]]
    keys = ["null", "weights", "model", "metric"]
    per_test = (tests.groupby(keys + ["kind", "name", "in_rule"], sort=False)
                .agg(rejection=("reject", "mean"), rejection_1=("reject_1", "mean"), replicates=("reject", "size"))
                .reset_index())  # fmt: skip
    rows = []
    for key, g in tests.groupby(keys, sort=False):
        tested = per_test[(per_test[keys] == pd.Series(dict(zip(keys, key)))).all(axis=1)]
        inside = tested[tested["in_rule"]]
        k = len(inside)
        row = {**dict(zip(keys, key)), "replicates": int(g["replicate"].nunique()), "tests_in_rule": k}
        verdicts = []
        for kind in ("vs_overall", "vs_rest", "pairwise"):
            kg = inside[inside["kind"] == kind]
            if len(kg):
                worst = kg.loc[kg["rejection"].idxmax()]
                row[f"{kind}_worst"] = worst["rejection"]
                row[f"{kind}_worst_se"] = math.sqrt(worst["rejection"] * (1 - worst["rejection"]) / worst["replicates"])
                row[f"{kind}_worst_slice"] = worst["name"]
                verdicts += [v.rate_verdict(p, r, high=v.ALPHA, k=k) for p, r in zip(kg["rejection"], kg["replicates"])]
        within = g[g["in_rule"]]
        row["pooled_5"], row["pooled_1"] = within["reject"].mean(), within["reject_1"].mean()
        outside = tested[~tested["in_rule"] & (tested["kind"] != "vs_rest")]
        if len(outside):
            worst = outside.loc[outside["rejection"].idxmax()]
            row["below_rule_worst"] = worst["rejection"]
            row["below_rule_worst_se"] = math.sqrt(worst["rejection"] * (1 - worst["rejection"]) / worst["replicates"])
            row["below_rule_worst_slice"] = worst["name"]
        family = within[within["kind"] == "vs_overall"]
        m = family.groupby("replicate")["name"].nunique()
        smallest = family.groupby("replicate")["p_value"].min()
        fwer, fwer_se, r = v.rate(smallest < v.ALPHA / m)
        row["flags_fwer"], row["flags_fwer_se"] = fwer, fwer_se
        row["flags_fwer_all"] = v.rate(g[g["kind"] == "vs_overall"].groupby("replicate")["reject_adjusted"].any())[0]
        row["verdict_tests"] = v.worst_verdict(verdicts)
        row["verdict_flags"] = v.rate_verdict(fwer, r, high=v.ALPHA)
        row["verdict"] = v.worst_verdict([row["verdict_tests"], row["verdict_flags"]])
        rows.append(row)
    out = pd.DataFrame(rows)
    out["_m"] = out["metric"].map(v.ALL_METRICS.index)
    out["_n"] = out["null"].map({"strong": 0, "weak": 1})
    out = out.sort_values(["_n", "weights", "model", "_m"]).drop(columns=["_m", "_n"]).reset_index(drop=True)
    return out, per_test


def table_b_z(summary: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for _, s in summary.iterrows():
        row = {"null": s["null"], "weights": s["weights"], "model": s["model"], "metric": s["metric"],
               "R": int(s["replicates"])}  # fmt: skip
        for kind, label in (("vs_overall", "vs_overall"), ("vs_rest", "vs_rest"), ("pairwise", "pairwise")):
            if isinstance(s.get(f"{kind}_worst_slice"), str):
                short = _short(s[f"{kind}_worst_slice"])
                row[f"{label} worst test"] = f"{_pct(s[f'{kind}_worst'], s[f'{kind}_worst_se'])} ({short})"
            else:
                row[f"{label} worst test"] = "-"
        row["pooled at 5% / 1%"] = f"{_pct(s['pooled_5'])} / {_pct(s['pooled_1'])}"
        row["flags FWER"] = _pct(s["flags_fwer"], s["flags_fwer_se"])
        if isinstance(s.get("below_rule_worst_slice"), str):
            short = _short(s["below_rule_worst_slice"])
            row["below the rule: worst test; FWER with them"] = (
                f"{_pct(s['below_rule_worst'], s['below_rule_worst_se'])} ({short}); {_pct(s['flags_fwer_all'])}"
            )
        else:
            row["below the rule: worst test; FWER with them"] = "-"
        row["verdict (tests / flags)"] = f"{s['verdict']} ({s['verdict_tests']} / {s['verdict_flags']})"
        rows.append(row)
    return pd.DataFrame(rows)


def summarise_c_z(power: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """Part (c), the large-sample test: power to flag the target below overall, with each test on the same
    files; goal: the large-sample test's power not below the permutations' (beyond Monte-Carlo error)."""
    power = power[power["replicate"] < r_max]
    rows = []
    for gap, g in power.groupby("gap", sort=True):
        rates = {}
        for method, h in g.groupby("test_method"):
            down = h["reported"] & (h["difference"] < 0)
            rates[method] = (v.rate(down & (h["p_adjusted"] < v.ALPHA)), v.rate(down & (h["p_value"] < v.ALPHA)),
                             sorted(set(h["test"])))  # fmt: skip
        (pz, sz, _), _, _ = rates["bootstrap"]
        (pp, sp, _), _, _ = rates["permutation"]
        difference, se = pz - pp, math.hypot(sz, sp)
        for method in ("bootstrap", "permutation"):
            (p, se_m, r_m), (pu, su, _), used = rates[method]
            rows.append({"auc_gap": gap, "test_method": method, "test": "/".join(used), "replicates": r_m,
                         "power": p, "power_se": se_m, "power_unadjusted": pu, "power_unadjusted_se": su,
                         "goal": "not below permutations" if method == "bootstrap" else "none",
                         "verdict": v.verdict(difference, low=0.0, se=se) if method == "bootstrap" else "-"})  # fmt: skip
    return pd.DataFrame(rows)


def table_c_z(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "AUC gap": [f"-{x:.2f}" for x in summary["auc_gap"]],
            "test_method": summary["test_method"],
            "test": summary["test"],
            "R": summary["replicates"],
            "power (flag below overall)": [_pct(p, s) for p, s in zip(summary["power"], summary["power_se"])],
            "unadjusted p < 0.05": [
                _pct(p, s) for p, s in zip(summary["power_unadjusted"], summary["power_unadjusted_se"])
            ],
            "goal": summary["goal"],
            "verdict": summary["verdict"],
        }
    )


def summarise_d(slices: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """Joint coverage of each metric's band over its reported slices; for the metrics whose small slices the
    audit marks (:data:`disaggregated_eval.audit.interval_notes.SMALL_BOOTSTRAP_METRICS`: '~' and a note under
    :data:`~disaggregated_eval.audit.interval_notes.SMALL_BOOTSTRAP_ROWS` rows), also the joint coverage of the
    band's unmarked members (reported slices of at least that many rows, overall included): what the rule
    leaves to be read as 95% jointly (issue 33 item 4)."""
    slices = slices[slices["replicate"] < r_max]
    rows = []
    for (scheme, metric), g in slices.groupby(["scheme", "metric"], sort=False):
        replicates = np.unique(g["replicate"])
        rep = g[g["reported"]].groupby("replicate")
        joint = rep["band_covered"].all().reindex(replicates, fill_value=True)
        n_reported = g.groupby("replicate")["reported"].sum()
        p, se, r = v.rate(joint)
        marked = metric in SMALL_BOOTSTRAP_METRICS
        unmarked = g[g["reported"] & (g["size"] >= SMALL_BOOTSTRAP_ROWS)].groupby("replicate")["band_covered"]
        p_u, se_u, r_u = v.rate(unmarked.all().reindex(replicates, fill_value=True)) if marked else (np.nan,) * 3
        rows.append(
            {
                "scheme": scheme,
                "metric": metric,
                "replicates": r,
                "joint_coverage": p,
                "joint_coverage_se": se,
                "mean_reported_slices": float(n_reported.mean()),
                "verdict": v.rate_verdict(p, r, low=0.94),
                "joint_coverage_unmarked": p_u,
                "joint_coverage_unmarked_se": se_u,
                "verdict_unmarked": v.rate_verdict(p_u, int(r_u), low=0.94) if marked else "-",
            }
        )
    out = pd.DataFrame(rows)
    out["_m"], out["_c"] = out["metric"].map(v.ALL_METRICS.index), out["scheme"].map(_SCHEMES.index)
    return out.sort_values(["_m", "_c"]).drop(columns=["_m", "_c"]).reset_index(drop=True)


def table_d(summary: pd.DataFrame) -> pd.DataFrame:
    unmarked = zip(summary["joint_coverage_unmarked"], summary["joint_coverage_unmarked_se"])
    return pd.DataFrame(
        {
            "metric": summary["metric"],
            "scheme": summary["scheme"],
            "R": summary["replicates"],
            "reported slices (mean)": [f"{x:.1f}" for x in summary["mean_reported_slices"]],
            "joint coverage": [_pct(p, s) for p, s in zip(summary["joint_coverage"], summary["joint_coverage_se"])],
            "goal": ">=94%",
            "verdict": summary["verdict"],
            f"unmarked (>= {SMALL_BOOTSTRAP_ROWS} rows)": [_pct(p, s) for p, s in unmarked],
            "verdict (unmarked)": summary["verdict_unmarked"],
        }
    )


def summarise_e(controlled: pd.DataFrame, r_max: int) -> pd.DataFrame:
    controlled = controlled[controlled["replicate"] < r_max]
    truth = v.controlled_truth().set_index(["control", "slice", "metric"])["T_a"]
    rows = []
    for (n, control, slice_, metric), g in controlled.groupby(["n", "control", "slice", "metric"], sort=True):
        t = float(truth.loc[(control, slice_, metric)])
        cov, se, r = v.rate((g["T_a_low"] <= t) & (t <= g["T_a_high"]))
        est = g.loc[g["reported"], "T_a"].to_numpy(dtype=np.float64)
        est = est[np.isfinite(est)]
        sd = float(est.std(ddof=1)) if est.size > 1 else math.nan
        bias = float(est.mean() - t) if est.size else math.nan
        bias_sd = bias / sd if sd > 0 else math.nan
        cov_verdict = v.rate_verdict(cov, r, low=0.92)
        bias_verdict = v.verdict(abs(bias_sd), high=0.5, se=1.0 / math.sqrt(max(est.size, 1)))
        rows.append(
            {
                "n": n,
                "control": control,
                "slice": slice_,
                "metric": metric,
                "replicates": r,
                "T_a_true": t,
                "T_a_mean": float(est.mean()) if est.size else math.nan,
                "T_a_sd": sd,
                "bias_sd": bias_sd,
                "bias_sd_se": 1.0 / math.sqrt(est.size) if est.size else math.nan,
                "coverage": cov,
                "coverage_se": se,
                "verdict": v.worst_verdict([cov_verdict, bias_verdict]),
            }
        )
    out = pd.DataFrame(rows)
    out["_c"] = out["control"].map(v.CONTROLLED_CONTROLS.index)
    out["_s"] = out["slice"].map([f"group={x}" for x in v.CONTROLLED_LEVELS].index)
    out["_m"] = out["metric"].map(v.CONTROLLED_METRICS.index)
    return out.sort_values(["n", "_c", "_s", "_m"]).drop(columns=["_c", "_s", "_m"]).reset_index(drop=True)


def table_e(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "rows": [f"{n:,}" for n in summary["n"]],
            "V": summary["control"],
            "slice": summary["slice"],
            "metric": summary["metric"],
            "R": summary["replicates"],
            "true T_a": [f"{x:+.4f}" for x in summary["T_a_true"]],
            "mean T_a": [f"{x:+.4f}" for x in summary["T_a_mean"]],
            "SD": [f"{x:.4f}" for x in summary["T_a_sd"]],
            "bias / SD": [f"{b:+.2f} ±{s:.2f}" for b, s in zip(summary["bias_sd"], summary["bias_sd_se"])],
            "coverage": [_pct(p, s) for p, s in zip(summary["coverage"], summary["coverage_se"])],
            "verdict": summary["verdict"],
        }
    )


# ----------------------------------------------------------------------------------------------
# Part (f): the fairness summary, the verdicts and the calibration error
# ----------------------------------------------------------------------------------------------
_F_STATISTICS = {
    "demographic_parity_difference": "DP diff",
    "demographic_parity_ratio": "DP ratio",
    "equalized_odds_difference": "EO diff",
    "equalized_odds_ratio": "EO ratio",
    "largest_gap": "largest gap",
}
_F_DISPARITY = {"predicted_positive_rate": "disp. sel", "false_positive_rate": "disp. FPR",
                "false_negative_rate": "disp. FNR"}  # fmt: skip
#: Coverage goal of part (f): at least 93%; up to 99.5% (an extreme over near-tied slices, a truth on the
#: boundary, and the variance bound of the calibration error make these intervals conservative by design).
F_COVERAGE = (0.93, 0.995)


def _f_group(statistic: str, metric: str) -> str:
    return _F_STATISTICS.get(statistic) or _F_DISPARITY[metric]


def summarise_f_coverage(fair: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """(f1): coverage of every fairness statistic's interval, per cell."""
    fair = fair[(fair["replicate"] < r_max) & fair["reported"]]
    fair = fair.assign(group=[_f_group(s, m) for s, m in zip(fair["statistic"], fair["metric"], strict=True)])
    rows = []
    for cell_name, cell in vf.FAIR_CELLS.items():
        g = fair[fair["cell"] == cell_name]
        row = {"cell": cell_name, "truth": cell.truth, "K": cell.k, "n": cell.n,
               "replicates": int(g["replicate"].nunique())}  # fmt: skip
        verdicts = []
        groups = list(_F_STATISTICS.values()) + list(_F_DISPARITY.values())
        for group in groups:
            x = g[g["group"] == group]
            p, _se, r = v.rate(x["covered"])
            row[group] = p
            verdicts.append(v.rate_verdict(p, r, low=F_COVERAGE[0], high=F_COVERAGE[1], k=len(groups)))
        row["verdict"] = v.worst_verdict(verdicts)
        rows.append(row)
    return pd.DataFrame(rows)


def table_f_coverage(summary: pd.DataFrame) -> pd.DataFrame:
    groups = list(_F_STATISTICS.values()) + list(_F_DISPARITY.values())
    out = summary[["cell", "truth", "K", "n", "replicates"]].rename(columns={"replicates": "R"}).copy()
    for group in groups:
        out[group] = [_pct(x) for x in summary[group]]
    out["goal"] = "93-99.5%"
    out["verdict"] = summary["verdict"]
    return out


def summarise_f_verdicts(fair: pd.DataFrame, comparisons: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """(f2): per cell, the share of audits with a wrong verdict in the fairness summary (any statistic) and in
    the worst metric's slice-vs-overall family, the share with any '**' (beyond tolerance), and the joint
    coverage of the summary's simultaneous band."""
    fair = fair[(fair["replicate"] < r_max) & fair["reported"]]
    comparisons = comparisons[(comparisons["replicate"] < r_max) & comparisons["reported"]]
    rows = []
    for cell_name, cell in vf.FAIR_CELLS.items():
        f = fair[fair["cell"] == cell_name].groupby("replicate")
        c = comparisons[comparisons["cell"] == cell_name]
        wrong, se, r = v.rate(f["wrong"].any())
        band = v.rate(f["band_covered"].all())
        beyond = v.rate(f["verdict"].apply(lambda x: (x == "beyond tolerance").any()))
        per_metric = {m: v.rate(c[c["metric"] == m].groupby("replicate")["wrong"].any()) for m in vf.FAIR_METRICS}
        worst_metric = max(per_metric, key=lambda m: per_metric[m][0])
        worst = per_metric[worst_metric]
        rows.append({
            "cell": cell_name, "truth": cell.truth, "replicates": r, "summary_wrong": wrong, "summary_wrong_se": se,
            "band_joint": band[0], "band_joint_se": band[1], "beyond": beyond[0],
            "comparisons_wrong": worst[0], "comparisons_wrong_se": worst[1], "comparisons_metric": worst_metric,
            "verdict": v.worst_verdict([v.rate_verdict(wrong, r, high=v.ALPHA),
                                        v.rate_verdict(worst[0], worst[2], high=v.ALPHA, k=len(per_metric))]),
        })  # fmt: skip
    return pd.DataFrame(rows)


def table_f_verdicts(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "cell": summary["cell"], "truth": summary["truth"], "R": summary["replicates"],
        "fairness summary: any wrong verdict": [_pct(p, s) for p, s in zip(summary["summary_wrong"],
                                                                            summary["summary_wrong_se"])],
        "any **": [_pct(p) for p in summary["beyond"]],
        "band joint coverage": [_pct(p, s) for p, s in zip(summary["band_joint"], summary["band_joint_se"])],
        "vs overall: any wrong verdict (worst metric)": [
            f"{_pct(p, s)} ({m})" for p, s, m in zip(summary["comparisons_wrong"], summary["comparisons_wrong_se"],
                                                     summary["comparisons_metric"])],
        "goal": "<=5%", "verdict": summary["verdict"],
    })  # fmt: skip


def summarise_f_power(fair: pd.DataFrame, comparisons: pd.DataFrame, width: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """(f3): the power to certify and the width of the DP difference's interval against the previous one."""
    rows = []
    c = comparisons[(comparisons["cell"] == vf.POWER_CELL) & (comparisons["replicate"] < r_max)]
    both = c[c["metric"].isin(["false_positive_rate", "predicted_positive_rate"])]
    p, se, r = v.rate(both.groupby("replicate")["within"].all())
    rows.append({"claim": "every slice's FPR and selection rate within 0.05 of overall (slice vs overall)",
                 "cell": vf.POWER_CELL, "replicates": r, "value": _pct(p, se), "goal": ">=80%",
                 "verdict": v.rate_verdict(p, r, low=0.80)})  # fmt: skip
    f = fair[(fair["cell"] == vf.POWER_CELL) & (fair["replicate"] < r_max)]
    for statistic in ("demographic_parity_difference", "equalized_odds_difference"):
        x = f[f["statistic"] == statistic]
        p, se, r = v.rate(x["verdict"].isin(["within tolerance", "differs, within tolerance"]))
        rows.append({"claim": f"{_F_STATISTICS[statistic]} within 0.05 (family statistic)", "cell": vf.POWER_CELL,
                     "replicates": r, "value": _pct(p, se), "goal": "none", "verdict": "-"})  # fmt: skip
    w = width[width["replicate"] < r_max]
    if len(w):
        ratio = float(w["width"].mean() / w["old_width"].mean())
        new_cov = v.rate(fair[(fair["cell"] == vf.WIDTH_CELL) & (fair["statistic"] == "demographic_parity_difference")
                              & (fair["replicate"] < r_max)]["covered"])  # fmt: skip
        old_cov = v.rate(w["old_covered"])
        rows.append({"claim": "DP difference interval width / previous percentile interval's (mean widths; "
                     f"coverage {_pct(*new_cov[:2])} vs {_pct(*old_cov[:2])})", "cell": vf.WIDTH_CELL,
                     "replicates": len(w), "value": f"{ratio:.2f}", "goal": "<=1.3",
                     "verdict": "PASS" if ratio <= 1.3 else "FAIL"})  # fmt: skip
    return pd.DataFrame(rows)


def summarise_f_bias(fair: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """(f1b): mean error of the plug-in and of the bias-corrected estimate of the DP and EO differences."""
    fair = fair[(fair["replicate"] < r_max) & fair["reported"]]
    rows = []
    for cell_name, cell in vf.FAIR_CELLS.items():
        row = {
            "cell": cell_name,
            "truth": cell.truth,
            "R": int(fair.loc[fair["cell"] == cell_name, "replicate"].nunique()),
        }
        for statistic in ("demographic_parity_difference", "equalized_odds_difference"):
            x = fair[(fair["cell"] == cell_name) & (fair["statistic"] == statistic)]
            label = _F_STATISTICS[statistic]
            row[f"{label}: truth"] = f"{x['truth'].mean():.3f}" if len(x) else "-"
            row[f"{label}: plug-in bias"] = f"{(x['estimate'] - x['truth']).mean():+.4f}" if len(x) else "-"
            row[f"{label}: corrected bias"] = f"{(x['bias_corrected'] - x['truth']).mean():+.4f}" if len(x) else "-"
        rows.append(row)
    return pd.DataFrame(rows)


def summarise_f_calibration(calibration: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """(f4): coverage of the calibration error (and its distance from overall) and of the O/E ratio, per size."""
    calibration = calibration[calibration["replicate"] < r_max]
    rows = []
    for cell in vf.CALIBRATION_CELLS:
        for size in (*vf.CALIBRATION_SIZES, "overall"):
            name = "overall" if size == "overall" else f"size=n{size}"
            g = calibration[(calibration["cell"] == cell) & (calibration["slice"] == name)]
            ce, oe = g[g["statistic"] == "calibration_error"], g[g["statistic"] == "observed_expected_ratio"]
            ece = g[g["statistic"] == "expected_calibration_error"]
            cov = v.rate(ce["covered"].astype(bool))
            oe_cov = v.rate(oe["covered"].astype(bool))
            row = {"cell": cell, "slice": str(size), "replicates": cov[2], "ce_truth": float(ce["truth"].mean()),
                   "ce_coverage": cov[0], "ce_coverage_se": cov[1], "ce_lower_positive": float(ce["lower_positive"].mean()),
                   "ce_mean": float(ce["estimate"].mean()), "ece_mean": float(ece["estimate"].mean()),
                   "oe_coverage": oe_cov[0], "oe_coverage_se": oe_cov[1]}  # fmt: skip
            verdicts = [v.rate_verdict(cov[0], cov[2], low=F_COVERAGE[0], high=F_COVERAGE[1], k=4),
                        v.rate_verdict(oe_cov[0], oe_cov[2], low=0.93, high=0.99, k=4)]  # fmt: skip
            if size != "overall":
                vs = v.rate(ce["vs_covered"].astype(bool))
                oe_vs = v.rate(oe["vs_covered"].astype(bool))
                row.update(ce_vs_coverage=vs[0], oe_vs_coverage=oe_vs[0])
                verdicts += [v.rate_verdict(vs[0], vs[2], low=F_COVERAGE[0], high=F_COVERAGE[1], k=4),
                             v.rate_verdict(oe_vs[0], oe_vs[2], low=0.93, high=0.99, k=4)]  # fmt: skip
            else:
                row.update(ce_vs_coverage=np.nan, oe_vs_coverage=np.nan)
            row["verdict"] = v.worst_verdict(verdicts)
            rows.append(row)
    return pd.DataFrame(rows)


def table_f_calibration(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "cell": summary["cell"], "slice rows": summary["slice"], "R": summary["replicates"],
        "true CE": [f"{x:.2f}" for x in summary["ce_truth"]],
        "CE coverage": [_pct(p, s) for p, s in zip(summary["ce_coverage"], summary["ce_coverage_se"])],
        "CE lower > 0": [_pct(p) for p in summary["ce_lower_positive"]],
        "CE vs overall coverage (truth 0)": [_pct(p) for p in summary["ce_vs_coverage"]],
        "mean CE": [f"{x:.4f}" for x in summary["ce_mean"]],
        "mean ECE (plug-in)": [f"{x:.4f}" for x in summary["ece_mean"]],
        "O/E coverage": [_pct(p, s) for p, s in zip(summary["oe_coverage"], summary["oe_coverage_se"])],
        "O/E vs overall coverage": [_pct(p) for p in summary["oe_vs_coverage"]],
        "goal": "CE 93-99.5%, O/E 93-99%", "verdict": summary["verdict"],
    })  # fmt: skip


def summarise_f_family(family: pd.DataFrame, r_max: int) -> pd.DataFrame:
    """(f5): per cell and ``adjust_scope``, the share of a fair model's audits (three metrics) with any wrong
    verdict: of any tested kind, and of the slice-vs-overall flags; goal for ``audit``: at most 5%."""
    family = family[family["replicate"] < r_max]
    rows = []
    for (cell, scope), g in family.groupby(["cell", "adjust_scope"], sort=False):
        p, se, r = v.rate(g["wrong_any"])
        overall = v.rate(g["wrong_vs_overall"])
        goal = scope == "audit"
        rows.append({"cell": cell, "adjust_scope": scope, "replicates": r, "tests": float(g["tests"].mean()),
                     "largest_family": int(g["largest_family"].max()), "wrong_any": p, "wrong_any_se": se,
                     "wrong_vs_overall": overall[0], "wrong_vs_overall_se": overall[1],
                     "wrong_unadjusted": float(g["wrong_unadjusted"].mean()), "goal": "<=5%" if goal else "none",
                     "verdict": v.rate_verdict(p, r, high=v.ALPHA) if goal else "-"})  # fmt: skip
    return pd.DataFrame(rows)


def table_f_family(summary: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({
        "cell": summary["cell"], "adjust_scope": summary["adjust_scope"], "R": summary["replicates"],
        "tests per audit (mean)": [f"{x:.0f}" for x in summary["tests"]], "largest family": summary["largest_family"],
        "any wrong verdict (every kind)": [_pct(p, s) for p, s in zip(summary["wrong_any"], summary["wrong_any_se"])],
        "any wrong flag vs overall": [_pct(p, s) for p, s in zip(summary["wrong_vs_overall"],
                                                                 summary["wrong_vs_overall_se"])],
        "any unadjusted p < 0.05": [_pct(p) for p in summary["wrong_unadjusted"]],
        "goal": summary["goal"], "verdict": summary["verdict"],
    })  # fmt: skip


# ----------------------------------------------------------------------------------------------
# Output
# ----------------------------------------------------------------------------------------------


def text_table(frame: pd.DataFrame) -> str:
    cells = [list(map(str, frame.columns))] + [[str(x) for x in row] for row in frame.itertuples(index=False)]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(frame: pd.DataFrame) -> str:
    def esc(x) -> str:
        return str(x).replace("|", "\\|")

    lines = ["| " + " | ".join(esc(c) for c in frame.columns) + " |"]
    lines.append("|" + "|".join("---" for _ in frame.columns) + "|")
    lines += ["| " + " | ".join(esc(x) for x in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


TITLES = {
    "a": "(a) Per-slice coverage of the 95% intervals (%, ± Monte-Carlo SE) by slice size (rows)",
    "a2": "(a) Zero-width intervals / undefined estimates (% of replicates) by slice size (metrics with neither left out)",
    "b": "(b) Rejection under the strong and weak nulls (%, unadjusted per test; flags FWER with the adjustment)",
    "b2": "(b2) The large-sample test (test_method='bootstrap') under the strong and weak nulls (%, unadjusted per test within the switch rule's sizes; flags FWER of the family within them, Holm)",
    "c": "(c) Power to flag a slice of 15% of 3,000 rows whose false positive rate is above the rest's 0.20",
    "c2": "(c2) Power to flag a slice of 15% of 20,000 rows whose AUC is below the others' 0.881: the large-sample test and permutations on the same files",
    "d": "(d) Joint coverage of the simultaneous bands over the reported slices (%)",
    "e": "(e) Controlled differences T_a with the audit's cross-fitted weights",
    "f1": "(f1) Coverage of the fairness summary's 95% intervals (%; Monte-Carlo SE about 0.8-1.1 at 400 replicates)",
    "f1b": "(f1b) Mean error of the plug-in and of the bias-corrected demographic-parity and equalized-odds differences",
    "f2": "(f2) Wrong verdicts per audit (%): the fairness summary's (simultaneous) and the slice-vs-overall families'",
    "f3": "(f3) Power to certify, and the width of the demographic-parity difference's interval",
    "f4": "(f4) Calibration error (debiased, interval that reaches 0) and observed/expected ratio, per slice size",
    "f5": "(f5) Wrong verdicts per audit of a fair model with three metrics (%): each (model, metric, kind) family at 5% (adjust_scope metric, the default) against one family over the whole audit (audit)",
    **vs.TITLES,
}


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def main(argv=None) -> int:
    args = parse_args(argv)
    from disaggregated_eval.audit.options import AuditOptions

    n_permutations = next(f.default for f in fields(AuditOptions) if f.name == "n_permutations")
    counts = {p: args.counts[p] for p in args.parts}
    if "d" in args.parts and "a" in args.parts and counts["d"] != counts["a"]:
        print(
            "note: parts a and d share their audits; the larger count is run, each part uses its own", file=sys.stderr
        )
    tasks = build_tasks(args.parts, args.counts, args.seed, args.n_resamples, args.metrics, args.kinds)
    load_start = os.getloadavg()
    header = (
        f"validity study of the audit (commit {_git_commit()}), root seed {args.seed}, parts {','.join(args.parts)}; "
        f"replicates {', '.join(f'{p}={c}' for p, c in counts.items())}; "
        f"{'' if args.metrics == v.ALL_METRICS else 'metrics of a, b, d: ' + ','.join(args.metrics) + '; '}"
        f"{args.n_resamples} bootstrap resamples, "
        f"{n_permutations} permutations (default), {len(tasks)} replicate tasks on {args.workers} worker(s); "
        f"load average at start {load_start[0]:.1f}"
    )
    print(header, flush=True)
    start = time.perf_counter()
    tables, cpu_by_cell, warned = run_tasks(tasks, args.workers)
    wall = time.perf_counter() - start
    cpu = sum(cpu_by_cell.values())

    out: dict[str, pd.DataFrame] = {}
    shown: list[tuple[str, pd.DataFrame]] = []
    if "a" in args.parts:
        out["a_coverage"] = summarise_a(tables["slices"], args.counts["a"])
        cov, zero = table_a(out["a_coverage"])
        shown += [("a", cov), ("a2", zero)]
    if "b" in args.parts and "tests" in tables:
        both = pd.concat(
            [tables["tests"][tables["tests"]["null"] == "strong"], tables["tests"][tables["tests"]["null"] == "weak"]]
        )
        out["b_rejection"], out["b_tests"] = summarise_b(both, args.counts["b"])
        shown.append(("b", table_b(out["b_rejection"])))
    if "b" in args.parts and "tests_z" in tables:
        out["b_large_sample"], out["b_large_sample_tests"] = summarise_b_z(tables["tests_z"], args.counts["b"])
        shown.append(("b2", table_b_z(out["b_large_sample"])))
    if "c" in args.parts and "power" in tables:
        out["c_power"] = summarise_c(tables["power"], args.counts["c"])
        shown.append(("c", table_c(out["c_power"])))
    if "c" in args.parts and "power_z" in tables:
        out["c_large_sample"] = summarise_c_z(tables["power_z"], args.counts["c"])
        shown.append(("c2", table_c_z(out["c_large_sample"])))
    if "d" in args.parts:
        out["d_bands"] = summarise_d(tables["slices"], args.counts["d"])
        shown.append(("d", table_d(out["d_bands"])))
    if "e" in args.parts:
        out["e_controlled"] = summarise_e(tables["controlled"], args.counts["e"])
        shown.append(("e", table_e(out["e_controlled"])))
    if "f" in args.parts and "audit_family" in tables:
        out["f_family"] = summarise_f_family(tables["audit_family"], args.counts["f"])
    if "f" in args.parts and "fair" in tables:
        r_f = args.counts["f"]
        out["f_coverage"] = summarise_f_coverage(tables["fair"], r_f)
        out["f_verdicts"] = summarise_f_verdicts(tables["fair"], tables["fair_comparisons"], r_f)
        out["f_power"] = summarise_f_power(tables["fair"], tables["fair_comparisons"], tables["fair_width"], r_f)
        out["f_bias"] = summarise_f_bias(tables["fair"], r_f)
        out["f_calibration"] = summarise_f_calibration(tables["calibration"], r_f)
        shown += [("f1", table_f_coverage(out["f_coverage"])), ("f1b", out["f_bias"]),
                  ("f2", table_f_verdicts(out["f_verdicts"])), ("f3", out["f_power"].rename(columns={"replicates": "R"})),
                  ("f4", table_f_calibration(out["f_calibration"]))]  # fmt: skip
    if "f_family" in out:
        shown.append(("f5", table_f_family(out["f_family"])))
    if "g" in args.parts and "selection" in tables:
        g_out, g_shown = vs.summarise(tables["selection"], args.counts["g"], tables.get("sections"))
        out.update(g_out)
        shown += g_shown

    verdicts = pd.concat([f["verdict"].str.split(" ").str[0] for f in out.values() if "verdict" in f])
    tally = ", ".join(f"{k} {int((verdicts == k).sum())}" for k in ("PASS", "NEAR", "FAIL"))
    load_end = os.getloadavg()
    footer = (
        f"wall time {wall / 60:.1f} min, CPU time in the replicates {cpu / 60:.1f} min "
        f"(about {cpu / 60 / 2:.1f} min on 2 idle cores); load average {load_start[0]:.1f} at start, "
        f"{load_end[0]:.1f} at end; verdicts of the cells: {tally}"
    )
    markdown = [f"_{header}._", ""]
    plain = []
    for key, frame in shown:
        markdown += [f"**{TITLES[key]}**", "", markdown_table(frame) if len(frame) else "(none)", ""]
        plain += [TITLES[key], text_table(frame) if len(frame) else "(none)", ""]
    if args.quick:
        footer += " (quick mode: too few replicates for the verdicts to mean anything)"
    markdown.append(f"_{footer}._")
    if warned:
        plain.append("warnings raised by the audits: " + " | ".join(warned[:5]))
    print("\n".join(markdown if args.markdown else plain))
    print(footer)

    for name, frame in out.items():
        write_atomic(args.out_dir / f"{name}.csv", frame.to_csv(index=False))
    write_atomic(args.out_dir / "tables.md", "\n".join(markdown) + "\n")
    run = {
        "commit": _git_commit(),
        "seed": args.seed,
        "parts": list(args.parts),
        "replicates": counts,
        "quick": args.quick,
        "metrics": list(args.metrics),
        "n_resamples": args.n_resamples,
        "n_permutations": n_permutations,
        "workers": args.workers,
        "tasks": len(tasks),
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "cpu_seconds_by_cell": {k: round(x, 1) for k, x in sorted(cpu_by_cell.items())},
        "tasks_by_cell": {c: sum(t.cell == c for t in tasks) for c in sorted({t.cell for t in tasks})},
        "load_average_start": load_start[0],
        "load_average_end": load_end[0],
        "verdicts": {k: int((verdicts == k).sum()) for k in ("PASS", "NEAR", "FAIL")},
        "warnings": warned,
    }
    write_atomic(args.out_dir / "run.json", json.dumps(run, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
