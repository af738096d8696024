"""Rule compute_oracle_weights: exact oracle weights P(A = a | V) of a simulation (paper Algorithm 1).

X and Y in closed form; R exactly per model from the DGP (no Monte Carlo, no bins): see
``disaggregated_eval.population``.
"""

import time

import joblib

from disaggregated_eval import io, population, vocabulary
from disaggregated_eval_workflow.inputs import read_scores

log = io.rule_logger(snakemake.log[0], "compute_oracle_weights")  # noqa: F821 (snakemake is injected)

setting = snakemake.wildcards.dataset
start = time.perf_counter()
test = io.read_table(snakemake.input.test)
scores = read_scores(
    [snakemake.input.scores, snakemake.input.bayes_scores],
    n_rows=len(test),
    test_path=snakemake.input.test,
    models=vocabulary.SIMULATION_MODELS,
)
weights = population.oracle_weights(
    setting,
    test,
    test_scores={m: scores[m].to_numpy() for m in vocabulary.SIMULATION_MODELS},
    fitted=joblib.load(snakemake.input.models),
)
io.write_table(weights, snakemake.output.weights)
log.info(
    "oracle weights of %s: %d test rows, %d weight rows, %.1f s",
    setting,
    len(test),
    len(weights),
    time.perf_counter() - start,
)
