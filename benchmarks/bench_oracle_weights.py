"""Oracle weights at paper size: exact computation vs the former Monte Carlo rule's work.

```
python benchmarks/bench_oracle_weights.py [--settings ...] [--n-train 50000] [--n-test 20000] [--n-monte-carlo 1000000]
```

Per setting: draws the paper-size train and test sets, fits the three outcome models with one
``max_leaf_nodes`` (25; the grid search does not change what the oracle costs: the models are step
functions with up to 255 bins either way), then times

* **exact**: ``population.oracle_weights`` on the test set with all five models (what the rule
  ``compute_oracle_weights`` runs: building the five ``population.score_oracle`` objects and
  applying them, plus the closed-form X and Y blocks);
* **reference**: the work of the former rule, which drew ``n_monte_carlo`` population rows and
  predicted every fitted model once per model (``OutcomeModels.predict`` returns all three) and
  the Bayes scores once per Bayes model, before binning.

Everything runs on one OpenMP thread (the rule's ``threads: 1``). Prints wall seconds and the
ratio reference / exact per setting, and the load average (other jobs inflate both).
"""

from __future__ import annotations

import argparse
import os
import time

from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from disaggregated_eval import outcome_models, population, seeds, simulate, vocabulary


def fit(train, features, categorical, seed):
    estimator = HistGradientBoostingClassifier(
        max_leaf_nodes=25, random_state=seed, categorical_features=categorical or None
    )
    return estimator.fit(train[features], train["y"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--settings", nargs="+", default=list(vocabulary.SETTINGS))
    parser.add_argument("--n-train", type=int, default=50_000)
    parser.add_argument("--n-test", type=int, default=20_000)
    parser.add_argument("--n-monte-carlo", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=2025)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()}")
    print(f"{'setting':32s} {'exact s':>8s} {'reference s':>12s} {'ratio':>7s}")
    with threadpool_limits(limits=1, user_api="openmp"):
        for setting in args.settings:
            train, test = simulate.simulate_setting(setting, n_train=args.n_train, n_test=args.n_test, seed=args.seed)
            fitted = outcome_models.OutcomeModels(
                x=fit(train, ["x"], [], 1),
                xa=fit(train, ["x", "a"], ["a"], 2),
                xa_stratified={g: fit(train[train["a"] == g], ["x"], [], 3 + g) for g in (0, 1)},
                features=("x",),
            )
            predicted = fitted.predict(test)
            bayes = simulate.bayes_scores(setting, test)
            test_scores = {m: predicted[m].to_numpy() for m in vocabulary.MODEL_TYPES}
            test_scores.update({m: bayes[m].to_numpy() for m in vocabulary.BAYES_MODELS})

            start = time.perf_counter()
            weights = population.oracle_weights(setting, test, test_scores=test_scores, fitted=fitted)
            exact = time.perf_counter() - start
            assert len(weights) == 7 * args.n_test

            start = time.perf_counter()
            rows = simulate.get_dgp(setting).sample(args.n_monte_carlo, seeds.generator(args.seed, "bench", setting))
            for _ in vocabulary.MODEL_TYPES:
                fitted.predict(rows)
            for _ in vocabulary.BAYES_MODELS:
                simulate.bayes_scores(setting, rows)
            reference = time.perf_counter() - start
            print(f"{setting:32s} {exact:8.2f} {reference:12.2f} {reference / exact:7.1f}", flush=True)
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
