"""Rule collect_metrics: one study's tidy metrics table (every dataset), as parquet and CSV."""

import pandas as pd

from disaggregated_eval import io

log = io.rule_logger(snakemake.log[0], "collect_metrics")  # noqa: F821 (snakemake is injected)

datasets = snakemake.params.datasets
metrics = pd.concat([io.read_table(p) for p in snakemake.input.metrics], ignore_index=True)
io.write_table(metrics, snakemake.output.parquet)
io.write_table(metrics, snakemake.output.csv)
log.info("collected %d estimates of %s", len(metrics), datasets)
# Estimates without a usable interval, marked in the table's column `caveat` (drawn hollow in the figures).
if "caveat" in metrics.columns:
    flagged = metrics[metrics["caveat"].fillna("") != ""]
    for (caveat, comparison), rows in flagged.groupby(["caveat", "comparison"], sort=True):
        cells = rows[["dataset", "model", "control", "group", "metric"]].drop_duplicates()
        log.info(
            "%d %s estimates (%s), e.g. %s",
            len(rows),
            caveat,
            comparison,
            "; ".join(" ".join(map(str, cell)) for cell in cells.head(3).itertuples(index=False)),
        )
else:
    log.warning("the metrics tables have no 'caveat' column: undefined and degenerate estimates are not marked")
