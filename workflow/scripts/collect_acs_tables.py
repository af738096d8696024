"""Rule collect_acs_tables: the ACS study's metrics and calibration tables."""

import pandas as pd

from disaggregated_eval import calibration, io

log = io.rule_logger(snakemake.log[0], "collect_acs_tables")  # noqa: F821 (snakemake is injected)

datasets = snakemake.params.datasets
metrics = pd.concat([io.read_table(p) for p in snakemake.input.metrics], ignore_index=True)
curves = calibration.stack_calibration_tables(
    {d: io.read_table(p) for d, p in zip(datasets, snakemake.input.calibration)}, study="acs"
)
io.write_table(metrics, snakemake.output.metrics)
io.write_table(metrics, snakemake.output.metrics_csv)
io.write_table(curves, snakemake.output.calibration)
log.info("collected %d estimates and %d calibration bins of %s", len(metrics), len(curves), datasets)
