"""Rule fit_weight_models: estimated weights P(A = a | V), V in {X, Y, R} (paper Algorithm 2)."""

import json

import pandas as pd

from disaggregated_eval import io, weight_models

log = io.rule_logger(snakemake.log[0], "fit_weight_models")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
with open(snakemake.input.schema) as handle:
    schema = json.load(handle)
# Scores of every evaluated model: fitted ones, plus the Bayes-optimal ones for simulations.
score_tables = [io.read_table(snakemake.input.scores)]
if "bayes_scores" in snakemake.input.keys():  # noqa: SIM118 (Namedlist: `in` looks at the values)
    score_tables.append(io.read_table(snakemake.input.bayes_scores))
scores = pd.concat(score_tables, axis=1)
log.info("P(A | X), P(A | Y) fitted on %s; P(A | R) cross-fitted on test", params.fit_xy_on)
weights, selection = weight_models.fit_weight_models(
    io.read_table(snakemake.input.train),
    io.read_table(snakemake.input.test),
    {model: scores[model].to_numpy() for model in scores.columns},
    features=schema["features"],
    categorical=schema["categorical"],
    group=schema["group"],
    label=schema["label"],
    n_groups=len(schema["group_labels"]),
    group_labels=schema["group_labels"],
    grid=params.max_leaf_nodes,
    n_splits=params.cv_folds,
    crossfit_folds=params.crossfit_folds,
    fit_xy_on=params.fit_xy_on,
    seed=params.seed,
    dataset=dataset,
    # `threads` workers with one OpenMP thread each for the grid searches (they would inherit
    # OMP_NUM_THREADS = threads), `threads` OpenMP threads for the refits in this process.
    n_jobs=snakemake.threads,
    n_threads=snakemake.threads,
    progress=log.info,
)
io.write_table(weights, snakemake.output.weights)
io.write_table(selection, snakemake.output.selection)
log.info("wrote %d weight rows", len(weights))
