"""Rule bootstrap_metrics: controlled evaluation with paired bootstrap intervals (SPEC 5.2, 5.3)."""

import json

import pandas as pd

from disaggregated_eval import evaluation, io, seeds

log = io.rule_logger(snakemake.log[0], "bootstrap_metrics")  # noqa: F821 (snakemake is injected)


def progress(done, total):
    log.info("bootstrap resamples %d / %d", done, total)


dataset = snakemake.wildcards.dataset
params = snakemake.params
schema = json.loads(open(snakemake.input.schema).read())
test = io.read_table(snakemake.input.test)
score_inputs = [snakemake.input.scores] + ([snakemake.input.bayes_scores] if "bayes_scores" in snakemake.input.keys() else [])
scores = pd.concat([io.read_table(path) for path in score_inputs], axis=1)
weight_inputs = [snakemake.input[f"weights_{source}"] for source in params.weight_sources]
table = evaluation.controlled_evaluation(
    test[schema["label"]].to_numpy(),
    test[schema["group"]].to_numpy(),
    {model: scores[model].to_numpy() for model in params.models},
    weights=pd.concat([io.read_table(path) for path in weight_inputs], ignore_index=True),
    group_labels=schema["group_labels"],
    relative_to=dict(params.relative_to),
    n_resamples=params.n_resamples,
    confidence=params.confidence,
    seed=seeds.seed_sequence(params.seed, "bootstrap", dataset),
    threshold=params.threshold,
    preference_threshold=params.preference_threshold,
    batch_size=params.batch_size,
    n_threads=snakemake.threads,
    study=params.study,
    setting=dataset,
    progress=progress,
)
io.write_table(table, snakemake.output.parquet)
io.write_table(table, snakemake.output.csv)
log.info("wrote %d estimates", len(table))
