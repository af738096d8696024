"""Rule collect_simulation_tables: the simulation study's tables and the theory coverage (Tables 2, B1, B2)."""

import pandas as pd

from disaggregated_eval import calibration, io, theory

log = io.rule_logger(snakemake.log[0], "collect_simulation_tables")  # noqa: F821 (snakemake is injected)

datasets = snakemake.params.datasets
metrics = pd.concat([io.read_table(p) for p in snakemake.input.metrics], ignore_index=True)
curves = calibration.stack_calibration_tables(
    {d: io.read_table(p) for d, p in zip(datasets, snakemake.input.calibration)}, study="simulation"
)
io.write_table(metrics, snakemake.output.metrics)
io.write_table(metrics, snakemake.output.metrics_csv)
io.write_table(curves, snakemake.output.calibration)
io.write_table(theory.theory_coverage(metrics), snakemake.output.theory)
log.info("collected %d estimates and %d calibration bins of %s", len(metrics), len(curves), datasets)
