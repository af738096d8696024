"""Rule bootstrap_metrics: controlled evaluation with paired bootstrap intervals.

Every value that changes the table comes from ``snakemake.params`` (so that changing it reruns the
rule). ``evaluation.batch_size`` does not change the table (resample ``i`` always uses seed child
``i``; ``docs/method.md``, "Bootstrap"), so it is read from ``snakemake.config`` instead: changing it
must not rerun every bootstrap. The job's ``mem_mb`` bounds the replicate memory before any work.
"""

import json

import pandas as pd

from disaggregated_eval import evaluation, io, seeds, vocabulary
from disaggregated_eval_workflow.inputs import read_scores

log = io.rule_logger(snakemake.log[0], "bootstrap_metrics")  # noqa: F821 (snakemake is injected)


def progress(done, total):
    log.info("bootstrap resamples %d / %d", done, total)


dataset = snakemake.wildcards.dataset
params = snakemake.params
with open(snakemake.input.schema) as handle:
    schema = json.load(handle)
test = io.read_table(snakemake.input.test)
n_rows = len(test)
# Optional input: a Namedlist's `in` tests its values, so ask for the key by name.
has_bayes = "bayes_scores" in snakemake.input.keys()  # noqa: SIM118
score_inputs = [snakemake.input.scores] + ([snakemake.input.bayes_scores] if has_bayes else [])
scores = read_scores(score_inputs, n_rows=n_rows, test_path=snakemake.input.test, models=params.models)
weight_inputs = [snakemake.input[f"weights_{source}"] for source in params.weight_sources]
table = evaluation.controlled_evaluation(
    test[schema["label"]].to_numpy(),
    test[schema["group"]].to_numpy(),
    {model: scores[model].to_numpy() for model in params.models},
    weights=pd.concat([io.read_table(path) for path in weight_inputs], ignore_index=True),
    group_labels=schema["group_labels"],
    relative_to=dict(params.relative_to),
    metrics=vocabulary.PIPELINE_METRICS,
    n_resamples=params.n_resamples,
    confidence=params.confidence,
    seed=seeds.seed_sequence(params.seed, "bootstrap", dataset),
    threshold=params.threshold,
    preference_threshold=params.preference_threshold,
    resampling="population",
    memory_limit_mb=snakemake.resources.mem_mb,
    batch_size=snakemake.config["evaluation"]["batch_size"],
    n_threads=snakemake.threads,
    study=params.study,
    dataset=dataset,
    progress=progress,
)
io.write_table(table, snakemake.output.parquet)
io.write_table(table, snakemake.output.csv)
log.info("wrote %d estimates", len(table))
