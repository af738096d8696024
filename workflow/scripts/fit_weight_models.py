"""Rule fit_weight_models: estimated weights P(A = a | V), V in {X, Y, R} (Algorithm 2, SPEC 4.2)."""

import json

import pandas as pd

from disaggregated_eval import io, models

log = io.rule_logger(snakemake.log[0], "fit_weight_models")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
schema = json.loads(open(snakemake.input.schema).read())
# Scores of every evaluated model: fitted ones, plus the Bayes-optimal ones for simulations.
score_tables = [io.read_table(snakemake.input.scores)]
if "bayes_scores" in snakemake.input.keys():
    score_tables.append(io.read_table(snakemake.input.bayes_scores))
scores = pd.concat(score_tables, axis=1)
weights, selection = models.fit_weight_models(
    io.read_table(snakemake.input.train),
    io.read_table(snakemake.input.test),
    {model: scores[model].to_numpy() for model in scores.columns},
    features=schema["features"],
    categorical=schema["categorical"],
    group=schema["group"],
    label=schema["label"],
    n_groups=len(schema["group_labels"]),
    grid=params.max_leaf_nodes,
    n_splits=params.cv_folds,
    crossfit_folds=params.crossfit_folds,
    seed=params.seed,
    dataset=dataset,
    n_jobs=snakemake.threads,
    progress=log.info,
)
io.write_table(weights, snakemake.output.weights)
io.write_table(selection, snakemake.output.selection)
log.info("wrote %d weight rows", len(weights))
