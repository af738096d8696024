"""Rule coverage_truth: the population T_a of every model of a main setting, and the study's design.

The truth of the coverage study (docs/method.md, "Coverage study"): T_a with the exact oracle
weights by numerical integration, for the main run's fitted models and the Bayes-optimal scores.
"""

import time

import joblib

from disaggregated_eval import coverage, io, weight_models

log = io.rule_logger(snakemake.log[0], "coverage_truth")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
start = time.perf_counter()
fitted = joblib.load(snakemake.input.models)
chosen = weight_models.selected_max_leaf_nodes(io.read_table(snakemake.input.selection))
oracles = coverage.score_oracles(dataset, fitted)
truth = coverage.population_truth(
    dataset,
    fitted=fitted,
    oracles=oracles,
    threshold=params.threshold,
    preference_threshold=params.preference_threshold,
)
design = coverage.study_design(
    dataset,
    max_leaf_nodes=chosen,
    n_replicates=params.n_replicates,
    n_replicates_r=params.n_replicates_r,
    n_test=params.n_test,
    n_train=params.n_train,
    n_resamples=params.n_resamples,
    crossfit_folds=params.crossfit_folds,
    confidence=params.confidence,
    jobs_per_setting=params.jobs_per_setting,
)
io.write_table(truth, snakemake.output.truth)
io.write_json(design, snakemake.output.design)
log.info("wrote %d truth rows in %.1f s", len(truth), time.perf_counter() - start)
