"""Rule fit_outcome_models: the x, xa and xa_stratified models (paper Supplementary A.3) and their test scores."""

import json

import joblib

from disaggregated_eval import io, outcome_models

log = io.rule_logger(snakemake.log[0], "fit_outcome_models")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
with open(snakemake.input.schema) as handle:
    schema = json.load(handle)
fitted, selection = outcome_models.fit_outcome_models(
    io.read_table(snakemake.input.train),
    features=schema["features"],
    categorical=schema["categorical"],
    group=schema["group"],
    label=schema["label"],
    grid=params.max_leaf_nodes,
    n_splits=params.cv_folds,
    seed=params.seed,
    dataset=dataset,
    # `threads` workers with one OpenMP thread each for the grid searches (they would inherit
    # OMP_NUM_THREADS = threads), `threads` OpenMP threads for the refits in this process.
    n_jobs=snakemake.threads,
    n_threads=snakemake.threads,
    progress=log.info,
)
scores = fitted.predict(io.read_table(snakemake.input.test)).reset_index(drop=True)
io.write_table(scores, snakemake.output.scores)
io.write_table(selection, snakemake.output.selection)
with io.atomic_path(snakemake.output.models) as tmp:
    joblib.dump(fitted, tmp)
log.info("scored %d test rows", len(scores))
