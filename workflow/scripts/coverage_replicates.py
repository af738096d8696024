"""Rule coverage_replicates: one part of the coverage study of a main setting (docs/method.md, "Coverage study").

The replicates of part ``part`` (round robin over jobs_per_setting parts): fresh test sets with T_a
and its 95% interval each; the outcome models are the main run's, the weight models are refitted
per replicate with the main run's selected max_leaf_nodes.
"""

import time

import joblib
from threadpoolctl import threadpool_limits

from disaggregated_eval import coverage, io, weight_models

log = io.rule_logger(snakemake.log[0], "coverage_replicates")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
part = int(snakemake.wildcards.part)
params = snakemake.params
start = time.perf_counter()
fitted = joblib.load(snakemake.input.models)
chosen = weight_models.selected_max_leaf_nodes(io.read_table(snakemake.input.selection))
replicates = coverage.replicate_parts(params.n_replicates, params.jobs_per_setting)[part]
log.info(
    "coverage of %s, part %d of %d: replicates %s (those below %d refit the estimated P(A | R)), %d test rows, "
    "%d weight-training rows, %d resamples each; main-run max_leaf_nodes %s",
    dataset,
    part,
    params.jobs_per_setting,
    replicates,
    params.n_replicates_r,
    params.n_test,
    params.n_train,
    params.n_resamples,
    chosen,
)
# Jobs of several settings run side by side: OpenMP (scikit-learn) limited to the job's threads.
with threadpool_limits(limits=snakemake.threads, user_api="openmp"):
    table = coverage.run_replicates(
        dataset,
        replicates,
        fitted=fitted,
        max_leaf_nodes=chosen,
        n_replicates_r=params.n_replicates_r,
        n_test=params.n_test,
        n_train=params.n_train,
        n_resamples=params.n_resamples,
        crossfit_folds=params.crossfit_folds,
        seed=params.seed,
        confidence=params.confidence,
        threshold=params.threshold,
        preference_threshold=params.preference_threshold,
        n_threads=snakemake.threads,
        progress=log.info,
    )
io.write_table(table, snakemake.output.replicates)
log.info("wrote %d interval rows in %.1f s", len(table), time.perf_counter() - start)
