"""Rule score_bayes_models: Bayes-optimal scores E[Y | X] and E[Y | X, A] of the test rows (paper section 3.1)."""

from disaggregated_eval import io, simulate

log = io.rule_logger(snakemake.log[0], "score_bayes_models")  # noqa: F821 (snakemake is injected)

scores = simulate.bayes_scores(snakemake.wildcards.dataset, io.read_table(snakemake.input.test))
io.write_table(scores, snakemake.output.scores)
log.info("scored %d test rows with %s", len(scores), list(scores.columns))
