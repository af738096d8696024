"""Fit a model on the UCI Adult file and write its predictions on a held-out split, for an audit.

    python examples/fit_adult_model.py                       # writes adult_predictions.csv
    disagg-eval audit adult_predictions.csv --label high_income --score hgb_score \
        --group race --group sex --control none,X --features age workclass education_num \
        marital_status occupation relationship capital_gain capital_loss hours_per_week native_country

The model is scikit-learn's HistGradientBoostingClassifier on the census features without ``race``
and ``sex`` (a subgroup-agnostic model, ``x`` in the paper's terms), with native categorical
support for the text columns. Rows are split 70/30, stratified on the label; the model is fitted on
the 70% and scores the 30%, which is what the audit evaluates. Every random draw is seeded (the
split and the model through :func:`disaggregated_eval.seeds.sklearn_seed`), so the same command
writes the same file. ``fnlwgt`` (a survey weight, not a feature) is kept in the output so that it
can be given as ``--sample-weight``; ``education`` is left out (``education_num`` codes it).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import train_test_split

from disaggregated_eval import io
from disaggregated_eval.audit.loading import load_table
from disaggregated_eval.seeds import sklearn_seed

HERE = Path(__file__).resolve().parent
LABEL = "high_income"
GROUPS = ["race", "sex"]
FEATURES = [
    "age", "workclass", "education_num", "marital_status", "occupation", "relationship",
    "capital_gain", "capital_loss", "hours_per_week", "native_country",
]  # fmt: skip
CATEGORICAL = ["workclass", "marital_status", "occupation", "relationship", "native_country"]
SEED = 20250101


def fit_and_predict(data: pd.DataFrame, *, seed: int = SEED, test_size: float = 0.3) -> pd.DataFrame:
    """Held-out rows with the features, groups, label, survey weight and the model's score ``hgb_score``."""
    train, test = train_test_split(
        data, test_size=test_size, stratify=data[LABEL], random_state=sklearn_seed(seed, "adult_example", "split")
    )
    x_train = train[FEATURES].astype(dict.fromkeys(CATEGORICAL, "category"))
    x_test = test[FEATURES].copy()
    for c in CATEGORICAL:  # levels unseen in training become missing
        levels = x_train[c].cat.categories
        x_test[c] = pd.Categorical(x_test[c].where(x_test[c].isin(levels)), categories=levels)
    model = HistGradientBoostingClassifier(
        categorical_features="from_dtype",
        max_leaf_nodes=25,
        random_state=sklearn_seed(seed, "adult_example", "model"),
    )
    model.fit(x_train, train[LABEL])
    out = test[FEATURES + GROUPS + ["fnlwgt", LABEL]].reset_index(drop=True)
    out["hgb_score"] = model.predict_proba(x_test)[:, 1]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data",
        type=Path,
        default=HERE / "data" / "adult.csv.gz",
        help="the Adult copy (default examples/data/adult.csv.gz)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("adult_predictions.csv"),
        help="predictions file to write (default adult_predictions.csv)",
    )
    parser.add_argument("--seed", type=int, default=SEED, help=f"root seed of the split and the model (default {SEED})")
    args = parser.parse_args()
    data = load_table(args.data)
    predictions = fit_and_predict(data, seed=args.seed)
    io.write_table(predictions, args.out)
    print(f"wrote {args.out}: {len(predictions):,} held-out rows (of {len(data):,}), score column hgb_score")


if __name__ == "__main__":
    main()
