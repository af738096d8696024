"""Rule selection_truth: the full population's metrics and T_a of a selection setting, and its true selection strength.

docs/method.md, "Evaluation under selection": the truth by numerical integration, Gamma* of the
marginal sensitivity model and of the weight box for each margins (none, P(A), P(A, Y)), over the whole
population and over the part with P(S = 1 | x, a, y) >= 0.05.
"""

import time

from disaggregated_eval import io, selection_study

log = io.rule_logger(snakemake.log[0], "selection_truth")  # noqa: F821 (snakemake is injected)

dataset = snakemake.wildcards.dataset
start = time.perf_counter()
truth = selection_study.population_truth(
    dataset,
    threshold=snakemake.params.threshold,
    preference_threshold=snakemake.params.preference_threshold,
)
strength = selection_study.strength_table([dataset])
io.write_table(truth, snakemake.output.truth)
io.write_table(strength, snakemake.output.strength)
log.info("wrote %d truth rows and Gamma* %s in %.1f s", len(truth), strength.to_dict("records"),
         time.perf_counter() - start)  # fmt: skip
