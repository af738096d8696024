"""Rule selection_replicates: one part of the selection study of a setting (docs/method.md, "Evaluation under selection").

The replicates of part ``part`` (round robin over jobs_per_setting parts): a selected test set each,
analysed naively, with the target's P(A) and with its P(A, Y) (margin weights re-estimated on every
resample), with the sensitivity bounds at every Gamma.
"""

import time

from disaggregated_eval import coverage, io, selection_study

log = io.rule_logger(snakemake.log[0], "selection_replicates")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
part = int(snakemake.wildcards.part)
params = snakemake.params
start = time.perf_counter()
replicates = coverage.replicate_parts(params.n_replicates, params.jobs_per_setting)[part]
log.info(
    "selection study of %s, part %d of %d: replicates %s, %d selected test rows, %d resamples, Gammas %s",
    dataset, part, params.jobs_per_setting, replicates, params.n_test, params.n_resamples, params.gammas,
)  # fmt: skip
table = selection_study.run_replicates(
    dataset,
    replicates,
    n_test=params.n_test,
    n_resamples=params.n_resamples,
    gammas=params.gammas,
    seed=params.seed,
    confidence=params.confidence,
    threshold=params.threshold,
    preference_threshold=params.preference_threshold,
    progress=log.info,
)
io.write_table(table, snakemake.output.replicates)
log.info("wrote %d rows in %.1f s", len(table), time.perf_counter() - start)
