"""Rule compute_oracle_weights: oracle weights P(A = a | V) of a simulation (Algorithm 1, SPEC 2.5)."""

import joblib
import pandas as pd

from disaggregated_eval import io, simulate

log = io.rule_logger(snakemake.log[0], "compute_oracle_weights")  # noqa: F821 (snakemake is injected)

setting = snakemake.wildcards.dataset
params = snakemake.params
fitted = joblib.load(snakemake.input.models)
test_scores = pd.concat(
    [io.read_table(snakemake.input.scores), io.read_table(snakemake.input.bayes_scores)], axis=1
)


def fitted_score(model):
    def score(df):
        log.info("scoring %d Monte Carlo rows with %s", len(df), model)
        return fitted.predict(df)[model].to_numpy()

    return score


def bayes_score(model):
    def score(df):
        log.info("scoring %d Monte Carlo rows with %s", len(df), model)
        return simulate.bayes_scores(setting, df)[model].to_numpy()

    return score


score_fns = {m: fitted_score(m) for m in fitted.model_types}
score_fns.update({m: bayes_score(m) for m in ("bayes_x", "bayes_xa")})
log.info("oracle weights of %s: %d Monte Carlo rows, %d bins", setting, params.n_monte_carlo, params.n_bins)
weights = simulate.oracle_weights(
    setting,
    io.read_table(snakemake.input.test),
    score_fns=score_fns,
    test_scores={m: test_scores[m].to_numpy() for m in score_fns},
    n_monte_carlo=params.n_monte_carlo,
    n_bins=params.n_bins,
    seed=params.seed,
)
io.write_table(weights, snakemake.output.weights)
log.info("wrote %d weight rows", len(weights))
