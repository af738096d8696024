"""Model fitting of the simulation study at the paper's sizes: where the main job's time goes.

For each simulation setting (default: all ten) it draws the data as rule ``simulate_setting`` does
(50,000 training and 20,000 test rows), then runs what rules ``fit_outcome_models`` and
``fit_weight_models`` run, in this process with one OpenMP thread (the configured ``threads: 1``):

- :func:`disaggregated_eval.outcome_models.fit_outcome_models` (``x``, ``xa``, ``xa_stratified``: 4 grid
  searches of ``max_leaf_nodes`` in {10, 25, 50} with 5-fold CV and a refit, 16 fits each) and the
  test-set prediction;
- :func:`disaggregated_eval.weight_models.fit_weight_models` with the workflow's ``fit_xy_on`` (``test``
  for the selection settings): ``P(A | X)``, ``P(A | Y)`` and ``P(A | R)`` for the five evaluated
  scores, each cross-fitted model 5 outer folds x 16 fits.

It prints, per setting, wall and CPU seconds of both stages, how many HistGradientBoosting fits they
made and which share of the time is spent inside ``HistGradientBoostingClassifier.fit`` and
``predict_proba`` (the part that no change outside scikit-learn can shorten while keeping results
bit-identical), then the totals and the resulting lower bound of the fitting part of
``snakemake --cores 2`` (CPU seconds / 2). ``--train-xy`` also times the selection settings with
``P(A | X)``, ``P(A | Y)`` fitted on train (the behaviour before the selection fix), to show what the
cross-fitting adds; ``--profile`` prints the 25 functions with the most own time.

Usage::

    python benchmarks/bench_simulation_fitting.py [--settings covariate_shift ...] [--n-train 50000]
        [--n-test 20000] [--train-xy] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pstats
import time
from contextlib import contextmanager

import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from disaggregated_eval import outcome_models, simulate, vocabulary, weight_models

SEED = 20250101  # config/config.yaml
GRID, CV_FOLDS, CROSSFIT_FOLDS = (10, 25, 50), 5, 5


class HGBTimer:
    """Wall seconds and calls inside HistGradientBoostingClassifier.fit / predict_proba."""

    def __init__(self) -> None:
        self.seconds, self.fits = 0.0, 0

    @contextmanager
    def installed(self):
        fit, predict = HistGradientBoostingClassifier.fit, HistGradientBoostingClassifier.predict_proba
        timer = self

        @functools.wraps(fit)
        def timed_fit(estimator, *args, **kwargs):
            start = time.perf_counter()
            try:
                return fit(estimator, *args, **kwargs)
            finally:
                timer.seconds += time.perf_counter() - start
                timer.fits += 1

        @functools.wraps(predict)
        def timed_predict(estimator, *args, **kwargs):
            start = time.perf_counter()
            try:
                return predict(estimator, *args, **kwargs)
            finally:
                timer.seconds += time.perf_counter() - start

        HistGradientBoostingClassifier.fit, HistGradientBoostingClassifier.predict_proba = timed_fit, timed_predict
        try:
            yield self
        finally:
            HistGradientBoostingClassifier.fit, HistGradientBoostingClassifier.predict_proba = fit, predict


def timed(function, *args, **kwargs):
    """``(result, wall s, CPU s, HGB s, HGB fits)`` of one call."""
    timer = HGBTimer()
    wall, cpu = time.perf_counter(), time.process_time()
    with timer.installed():
        result = function(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu, timer.seconds, timer.fits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=list(vocabulary.SETTINGS), choices=list(vocabulary.SETTINGS))
    parser.add_argument("--n-train", type=int, default=50_000)
    parser.add_argument("--n-test", type=int, default=20_000)
    parser.add_argument(
        "--train-xy", action="store_true", help="also time selection settings with X, Y fitted on train"
    )
    parser.add_argument("--profile", action="store_true", help="cProfile the weight models of the first setting")
    args = parser.parse_args()

    print(
        f"load average {os.getloadavg()[0]:.2f}; {args.n_train:,} train / {args.n_test:,} test rows; "
        f"grid {GRID}, {CV_FOLDS}-fold CV, {CROSSFIT_FOLDS} outer folds; 1 OpenMP thread",
        flush=True,
    )
    rows = []
    with threadpool_limits(limits=1, user_api="openmp"):
        for i, setting in enumerate(args.settings):
            train, test = simulate.simulate_setting(setting, n_train=args.n_train, n_test=args.n_test, seed=SEED)
            common = dict(features=["x"], grid=GRID, n_splits=CV_FOLDS, seed=SEED, dataset=setting)
            (fitted, _), o_wall, o_cpu, o_hgb, o_fits = timed(outcome_models.fit_outcome_models, train, **common)
            start = time.perf_counter()
            scores = fitted.predict(test)
            o_wall += time.perf_counter() - start
            bayes = simulate.bayes_scores(setting, test)
            test_scores = {m: scores[m].to_numpy() for m in scores} | {m: bayes[m].to_numpy() for m in bayes}
            fit_xy_on = "test" if setting in vocabulary.SELECTION_SETTINGS else "train"
            weight_args = dict(n_groups=2, crossfit_folds=CROSSFIT_FOLDS, fit_xy_on=fit_xy_on, **common)
            profiler = cProfile.Profile() if args.profile and i == 0 else None
            if profiler:
                profiler.enable()
            _, w_wall, w_cpu, w_hgb, w_fits = timed(
                weight_models.fit_weight_models, train, test, test_scores, **weight_args
            )
            if profiler:
                profiler.disable()
            row = dict(
                setting=setting,
                fit_xy_on=fit_xy_on,
                outcome_s=o_wall,
                outcome_cpu_s=o_cpu,
                outcome_fits=o_fits,
                outcome_hgb_share=o_hgb / o_wall,
                weights_s=w_wall,
                weights_cpu_s=w_cpu,
                weights_fits=w_fits,
                weights_hgb_share=w_hgb / w_wall,
            )
            if args.train_xy and fit_xy_on == "test":
                _, row["weights_train_xy_s"], row["weights_train_xy_cpu_s"], _, row["weights_train_xy_fits"] = timed(
                    weight_models.fit_weight_models, train, test, test_scores, **{**weight_args, "fit_xy_on": "train"}
                )
            rows.append(row)
            print(
                f"{setting:<32} outcome {o_wall:6.1f} s (CPU {o_cpu:6.1f}, {o_fits} fits, {o_hgb / o_wall:.0%} in HGB); "
                f"weights [{fit_xy_on}] {w_wall:6.1f} s (CPU {w_cpu:6.1f}, {w_fits} fits, {w_hgb / w_wall:.0%} in HGB)"
                + (f"; with X, Y on train {row['weights_train_xy_s']:6.1f} s" if "weights_train_xy_s" in row else "")
                + f"; load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            if profiler:
                pstats.Stats(profiler).sort_stats("tottime").print_stats(25)

    table = pd.DataFrame(rows)
    total_cpu = table["outcome_cpu_s"].sum() + table["weights_cpu_s"].sum()
    print(
        f"\ntotal: outcome models {table['outcome_s'].sum():.0f} s (CPU {table['outcome_cpu_s'].sum():.0f}), "
        f"weight models {table['weights_s'].sum():.0f} s (CPU {table['weights_cpu_s'].sum():.0f}); "
        f"{table['outcome_fits'].sum() + table['weights_fits'].sum()} HistGradientBoosting fits"
    )
    hgb = (table["outcome_hgb_share"] * table["outcome_s"] + table["weights_hgb_share"] * table["weights_s"]).sum()
    print(
        f"inside HistGradientBoosting fit/predict_proba: {hgb / (table['outcome_s'].sum() + table['weights_s'].sum()):.1%} "
        "of the wall time"
    )
    print(
        f"lower bound of the model-fitting part of `snakemake --cores 2`: {total_cpu / 2:.0f} s "
        f"({total_cpu / 2 / 60:.1f} min) = CPU seconds / 2 cores"
    )
    if "weights_train_xy_s" in table:
        sel = table.dropna(subset=["weights_train_xy_s"])
        print(
            f"selection settings: weights {sel['weights_s'].sum():.0f} s with X, Y cross-fitted on test vs "
            f"{sel['weights_train_xy_s'].sum():.0f} s with X, Y on train "
            f"(+{sel['weights_s'].sum() - sel['weights_train_xy_s'].sum():.0f} s)"
        )


if __name__ == "__main__":
    main()
