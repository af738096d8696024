"""Calibration of the cross-fitted P(A | R) where a small group lives: gradient boosting vs spline logistic.

```
python benchmarks/bench_weight_calibration.py [--settings complex_causal_shift covariate_shift]
    [--model bayes_x] [--share 0.1] [--n 20000] [--replicates 40] [--resamples 400] [--seed 2025]
```

Known truth. A simulation setting (``disaggregated_eval.simulate``) is thinned so that group 1 makes
up ``--share`` of the population (``population.sample_with_group_prior``: ``P(A)`` changes,
``P(X, Y | A)`` stays). For the Bayes-optimal score ``--model`` the exact ``P(A | R)`` of the
thinned population is the setting's oracle (``population.score_oracle``, by change of variables)
shifted by Bayes' rule (``population.shift_group_proba``), and the population ``T_a`` comes from
numerical integration (``population.population_controlled_differences(..., group_prior=...)``,
quadrature error about 1e-11).

Per replicate (``--replicates`` independent test sets of ``--n`` rows), ``V = R``, all cross-fitted on
the same outer folds (same seed branch):

* **boosting**: ``weight_models.crossfit_group_proba`` on ``score_frame(R)``, the audit's estimator
  so far (grid-searched HistGradientBoosting, ``max_leaf_nodes`` in {10, 25, 50}, 5 x 5 folds);
* **spline**: ``weight_models.crossfit_spline_logistic`` (a lightly penalised linear term plus
  cubic B-splines of ``logit(R)``, ``C`` by cross-validated log loss), as the audit fits it: at these
  sizes on each group's row counts in at most ``SPLINE_BINS`` bins of ``logit(R)``;
* **spline_rows**: the same fitted on the rows (``n_bins=None``; the estimator before the bins), to
  measure what the bins change;
* **spline0**: the same spline without the linear term (built here with scikit-learn: the ablation
  that shows why the linear term is there; its penalty shrinks towards a constant);
* **oracle**: the exact ``P(A | R)``.

Printed: (1) the calibration of each estimated ``P(A = 1 | R)`` against the oracle by decile of the
oracle (mean over rows and replicates; the top deciles are where the small group lives), with the
Monte-Carlo standard error of the difference over replicates; (2) the expected calibration error
against the oracle, ``sum_b (n_b / n) |mean_b(estimate) - mean_b(oracle)|`` over the oracle's
deciles, on all rows and on the small group's rows, and the mean absolute error on the small
group's rows; (3) per metric, the small group's ``T_a`` with each weight: bias against the
population truth (with its Monte-Carlo standard error), standard deviation over replicates,
bias / SD, and the coverage of the 95% percentile interval of ``evaluation.controlled_evaluation``
(``--resamples`` paired resamples; weights fixed, as in the pipeline), with its Monte-Carlo error;
(4) seconds per cross-fitting of each estimator and the load average. Everything runs on one
thread (OpenMP and BLAS); every draw comes from ``--seed`` through named seed paths.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import SplineTransformer
from threadpoolctl import threadpool_limits

from disaggregated_eval import evaluation, population, seeds, simulate, vocabulary, weight_models
from disaggregated_eval.weight_table import concat_weight_tables, weight_table

METRICS = ("false_positive_rate", "sensitivity", "accuracy", "log_loss")
ESTIMATES = ("oracle", "boosting", "spline", "spline_rows", "spline0")
FITTED = ESTIMATES[1:]
N_DECILES = 10


def ece(estimate: np.ndarray, oracle: np.ndarray, bins: np.ndarray) -> float:
    """Expected calibration error against the oracle over the given bins (row-weighted)."""
    total = 0.0
    for b in np.unique(bins):
        rows = bins == b
        total += rows.mean() * abs(estimate[rows].mean() - oracle[rows].mean())
    return total


def spline_without_linear_term(v: np.ndarray, a: np.ndarray, branch: np.random.SeedSequence) -> np.ndarray:
    """The ablation: ``crossfit_spline_logistic``'s model without its linear term, same folds and seeds."""
    folds = weight_models.crossfit_fold_ids(a, crossfit_folds=5, random_state=seeds.sklearn_seed(branch))
    proba = np.empty((v.shape[0], 2))
    for k in range(5):
        fit = folds != k
        knots = np.unique(np.quantile(v[fit], np.linspace(0, 1, weight_models.SPLINE_KNOTS)))[:, None]
        pipeline = Pipeline(
            [
                ("spline", SplineTransformer(knots=knots, degree=3, extrapolation="linear")),
                ("logistic", LogisticRegression(max_iter=1000)),
            ]
        )
        search = GridSearchCV(
            pipeline,
            {"logistic__C": list(weight_models.SPLINE_C_GRID)},
            scoring="neg_log_loss",
            cv=StratifiedKFold(n_splits=5, shuffle=True, random_state=seeds.sklearn_seed(branch, k)),
        )
        proba[~fit] = search.fit(v[fit, None], a[fit]).predict_proba(v[~fit, None])
    return proba


def replicate(setting: str, model: str, share: float, n: int, r: int, args, oracle, keep) -> dict:
    """One test set: every P(A | R), its calibration and the small group's T_a with intervals."""
    prior = (1.0 - share, share)
    test = population.sample_with_group_prior(
        setting, n, group_prior=prior, rng=seeds.generator(args.seed, "bench_weight_calibration", setting, "test", r)
    )
    a, y = test["a"].to_numpy(), test["y"].to_numpy()
    score = simulate.bayes_scores(setting, test)[model].to_numpy()
    V = weight_models.score_frame(score)
    branch = seeds.seed_sequence(args.seed, "bench_weight_calibration", setting, "weights", r)
    proba = {"oracle": population.shift_group_proba(oracle(score), keep)}
    fits = {
        "boosting": lambda: weight_models.crossfit_group_proba(V, a, n_groups=2, seed=branch)[0],
        "spline": lambda: weight_models.crossfit_spline_logistic(V, a, n_groups=2, seed=branch)[0],
        "spline_rows": lambda: weight_models.crossfit_spline_logistic(V, a, n_groups=2, seed=branch, n_bins=None)[0],
        "spline0": lambda: spline_without_linear_term(V.iloc[:, 0].to_numpy(), a, branch),
    }
    seconds = {}
    for name, fit in fits.items():
        start = time.perf_counter()
        proba[name] = fit()
        seconds[name] = time.perf_counter() - start

    p1 = proba["oracle"][:, 1]
    edges = np.quantile(p1, np.linspace(0, 1, N_DECILES + 1)[1:-1])
    decile = np.searchsorted(edges, p1, side="right")
    small = a == 1
    small_edges = np.quantile(p1[small], np.linspace(0, 1, N_DECILES + 1)[1:-1])
    small_decile = np.searchsorted(small_edges, p1[small], side="right")
    out = {"seconds": seconds, "calibration": [], "summary": [], "ta": []}
    for name in ESTIMATES:
        q1 = proba[name][:, 1]
        for d in range(N_DECILES):
            rows = decile == d
            out["calibration"].append((r, name, d, q1[rows].mean() - p1[rows].mean(), p1[rows].mean(), q1[rows].mean()))
        out["summary"].append(
            (r, name, ece(q1, p1, decile), ece(q1[small], p1[small], small_decile), np.abs(q1 - p1)[small].mean())
        )

    common = dict(
        group_labels=list(vocabulary.SIMULATION_GROUP_LABELS),
        controls=["R"],
        metrics=list(METRICS),
        n_resamples=args.resamples,
        shared_space=False,
        seed=seeds.seed_sequence(args.seed, "bench_weight_calibration", setting, "bootstrap", r),
    )
    label = vocabulary.SIMULATION_GROUP_LABELS[1]
    # One evaluation per estimate, all on the same resamples (same seed); the oracle rides along.
    estimated = ({"estimated": name} for name in FITTED[1:])
    for sources in ({"oracle": "oracle", "estimated": "boosting"}, *estimated):
        blocks = [
            weight_table(proba[name], weight_source=source, control="R", model=model)
            for source, name in sources.items()
        ]
        table = evaluation.controlled_evaluation(y, a, {model: score}, weights=concat_weight_tables(blocks), **common)
        rows = table[(table["comparison"] == "controlled_difference") & (table["group"] == label)]
        for row in rows.itertuples():
            out["ta"].append((r, sources[row.weight_source], row.metric, row.estimate, row.ci_low, row.ci_high))
    return out


def report(setting: str, model: str, share: float, args, results: list[dict], truth: dict[str, float]) -> None:
    k = len(results)
    cal = pd.DataFrame([c for res in results for c in res["calibration"]],
                       columns=["rep", "estimate", "decile", "diff", "oracle", "value"])  # fmt: skip
    summary = pd.DataFrame([c for res in results for c in res["summary"]],
                           columns=["rep", "estimate", "ece_all", "ece_small", "mae_small"])  # fmt: skip
    ta = pd.DataFrame([c for res in results for c in res["ta"]],
                      columns=["rep", "estimate", "metric", "value", "low", "high"])  # fmt: skip
    print(f"\n=== {setting}, score {model}, small group A = 1 at {share:.0%}, n = {args.n}, {k} replicates ===")
    print("(1) P(A = 1 | R) by decile of the oracle: mean over rows and replicates; estimate - oracle")
    print("    (+- Monte-Carlo standard error over replicates)")
    print(f"{'decile':>6s} {'oracle':>7s} " + " ".join(f"{name:>18s}" for name in FITTED))
    for d in range(N_DECILES):
        part = cal[cal["decile"] == d]
        cells = []
        for name in FITTED:
            diff = part[part["estimate"] == name]["diff"]
            cells.append(f"{diff.mean():+.4f} +- {diff.std(ddof=1) / np.sqrt(k):.4f}")
        oracle_mean = part[part["estimate"] == "oracle"]["oracle"].mean()
        print(f"{d + 1:>6d} {oracle_mean:7.4f} " + " ".join(f"{c:>18s}" for c in cells))
    print("(2) calibration error against the oracle (mean over replicates +- Monte-Carlo standard error)")
    print(f"{'estimate':>11s} {'ECE all rows':>20s} {'ECE small group':>20s} {'MAE small group':>20s}")
    for name in FITTED:
        part = summary[summary["estimate"] == name]
        cells = [
            f"{part[c].mean():.4f} +- {part[c].std(ddof=1) / np.sqrt(k):.4f}"
            for c in ("ece_all", "ece_small", "mae_small")
        ]
        print(f"{name:>11s} {cells[0]:>20s} {cells[1]:>20s} {cells[2]:>20s}")
    print("(3) T_a of the small group (V = R): bias against the population truth, SD over replicates, coverage of")
    print(f"    the 95% interval ({args.resamples} resamples); +- Monte-Carlo standard error")
    print(f"{'metric':>20s} {'truth':>8s} {'weights':>11s} {'bias':>18s} {'SD':>7s} {'bias/SD':>8s} {'coverage':>15s}")
    for metric in METRICS:
        for name in ESTIMATES:
            part = ta[(ta["metric"] == metric) & (ta["estimate"] == name)]
            t = truth[metric]
            bias = part["value"].mean() - t
            sd = part["value"].std(ddof=1)
            covered = ((part["low"] - 1e-9 <= t) & (t <= part["high"] + 1e-9)).to_numpy()
            cov = covered.mean()
            print(
                f"{metric:>20s} {t:+8.4f} {name:>11s} {bias:+.4f} +- {sd / np.sqrt(k):.4f} {sd:7.4f} {bias / sd:+8.2f} "
                f"{cov:6.1%} +- {np.sqrt(cov * (1 - cov) / k):.1%}"
            )
    seconds = ", ".join(f"{name} {np.mean([res['seconds'][name] for res in results]):.1f}" for name in FITTED)
    print(f"(4) seconds per cross-fitting: {seconds}; load average {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=["complex_causal_shift", "covariate_shift"])
    parser.add_argument("--model", default="bayes_x", choices=list(vocabulary.BAYES_MODELS))
    parser.add_argument("--share", type=float, default=0.1)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--replicates", type=int, default=40)
    parser.add_argument("--resamples", type=int, default=400)
    parser.add_argument("--seed", type=int, default=2025)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    with threadpool_limits(limits=1):
        for setting in args.settings:
            prior = (1.0 - args.share, args.share)
            keep = population.group_prior_keep(setting, prior)
            oracle = population.score_oracle(setting, args.model)
            exact = population.population_controlled_differences(
                setting, args.model, oracle=oracle, controls=["R"], metrics=list(METRICS), group_prior=prior
            )
            exact = exact[exact["group"] == vocabulary.SIMULATION_GROUP_LABELS[1]]
            truth = dict(zip(exact["metric"], exact["controlled_difference"]))
            results = []
            for r in range(args.replicates):
                results.append(replicate(setting, args.model, args.share, args.n, r, args, oracle, keep))
                print(f"  {setting}: replicate {r + 1}/{args.replicates}", flush=True)
            report(setting, args.model, args.share, args, results, truth)


if __name__ == "__main__":
    main()
