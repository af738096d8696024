"""Rule fit_weight_models: estimated weights P(A = a | V), V in {X, Y, R} (paper Algorithm 2)."""

import json

from disaggregated_eval import io, weight_models
from disaggregated_eval_workflow.inputs import read_scores

log = io.rule_logger(snakemake.log[0], "fit_weight_models")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
with open(snakemake.input.schema) as handle:
    schema = json.load(handle)
test = io.read_table(snakemake.input.test)
# Scores of every evaluated model: fitted ones, plus the Bayes-optimal ones for simulations; each file
# must have one row per test row (else a message names the file and both row counts).
score_inputs = [snakemake.input.scores]
if "bayes_scores" in snakemake.input.keys():  # noqa: SIM118 (Namedlist: `in` looks at the values)
    score_inputs.append(snakemake.input.bayes_scores)
scores = read_scores(score_inputs, n_rows=len(test), test_path=snakemake.input.test)
log.info("P(A | X), P(A | Y) fitted on %s; P(A | R) cross-fitted on test", params.fit_xy_on)
weights, selection = weight_models.fit_weight_models(
    io.read_table(snakemake.input.train),
    test,
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
