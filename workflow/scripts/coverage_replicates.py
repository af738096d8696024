"""Rule coverage_replicates: the coverage study of one main setting (docs/method.md, "Coverage study").

The population T_a (truth) and n_replicates fresh test sets with T_a and its 95% interval each;
the outcome models are the main run's, the weight models are refitted per replicate with the
main run's selected max_leaf_nodes.
"""

import time

import joblib
from threadpoolctl import threadpool_limits

from disaggregated_eval import coverage, io, models

log = io.rule_logger(snakemake.log[0], "coverage_replicates")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
params = snakemake.params
start = time.perf_counter()
fitted = joblib.load(snakemake.input.models)
chosen = models.selected_max_leaf_nodes(io.read_table(snakemake.input.selection))
log.info(
    "coverage of %s: %d replicates (%d with estimated P(A | R)), %d test rows, %d weight-training rows, "
    "%d resamples each; main-run max_leaf_nodes %s",
    dataset, params.n_replicates, params.n_replicates_r, params.n_test, params.n_train, params.n_resamples, chosen,
)
# One job per setting runs side by side with others: OpenMP (scikit-learn) limited to the job's threads.
with threadpool_limits(limits=snakemake.threads, user_api="openmp"):
    replicates, truth = coverage.run_study(
        dataset,
        fitted=fitted,
        max_leaf_nodes=chosen,
        n_replicates=params.n_replicates,
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
)
io.write_table(replicates, snakemake.output.replicates)
io.write_table(truth, snakemake.output.truth)
io.write_json(design, snakemake.output.design)
log.info("wrote %d interval rows and %d truth rows in %.1f s", len(replicates), len(truth), time.perf_counter() - start)
