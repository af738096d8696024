"""Rule collect_selection: coverage of the full-population truth per cell, its summary and Gamma* per setting."""

import pandas as pd

from disaggregated_eval import io, selection_study

log = io.rule_logger(snakemake.log[0], "collect_selection")  # noqa: F821 (snakemake is injected)

replicates = pd.concat([io.read_table(p) for p in snakemake.input.replicates], ignore_index=True)
truth = pd.concat([io.read_table(p) for p in snakemake.input.truth], ignore_index=True)
strength = pd.concat([io.read_table(p) for p in snakemake.input.strength], ignore_index=True)
table = selection_study.coverage_table(replicates, truth, strength, confidence=snakemake.params.confidence)
summary = selection_study.coverage_summary(table)
io.write_table(table, snakemake.output.table)
io.write_table(summary, snakemake.output.summary)
io.write_table(strength, snakemake.output.strength)
for row in summary[summary["gamma"] == 1.0].itertuples():
    log.info("%s, margins %s, %s: mean coverage %.3f over %d cells", row.dataset, row.margins, row.method,
             row.mean_coverage, row.n_cells)  # fmt: skip
