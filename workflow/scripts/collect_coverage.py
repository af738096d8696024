"""Rule collect_coverage: coverage per cell of every setting, its headline summary and the design."""

import json
from pathlib import Path

import pandas as pd

from disaggregated_eval import coverage, io

log = io.rule_logger(snakemake.log[0], "collect_coverage")  # noqa: F821 (snakemake is injected)

params = snakemake.params
replicates = pd.concat([io.read_table(p) for p in snakemake.input.replicates], ignore_index=True)
truth = pd.concat([io.read_table(p) for p in snakemake.input.truth], ignore_index=True)
table = coverage.coverage_table(replicates, truth, confidence=params.confidence)
summary = coverage.coverage_summary(table)
designs = [json.loads(Path(p).read_text()) for p in snakemake.input.design]
io.write_table(table, snakemake.output.table)
io.write_table(summary, snakemake.output.summary)
io.write_json(coverage.collect_designs(designs), snakemake.output.design)
log.info("coverage of %d cells over %s", len(table), params.datasets)
for row in summary[summary["model"] == "all"].itertuples():
    log.info(
        "%s weights, control %s: %d cells, %.0f%% within the nominal band, median coverage %.3f",
        row.weight_source,
        row.control,
        row.n_cells,
        100 * row.share_within_band,
        row.median_coverage,
    )
