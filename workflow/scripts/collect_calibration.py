"""Rule collect_calibration: one study's calibration curves (every dataset) in one table."""

from disaggregated_eval import calibration, io

log = io.rule_logger(snakemake.log[0], "collect_calibration")  # noqa: F821 (snakemake is injected)

datasets = snakemake.params.datasets
curves = calibration.stack_calibration_tables(
    {d: io.read_table(p) for d, p in zip(datasets, snakemake.input.calibration, strict=True)},
    study=snakemake.wildcards.study,
)
io.write_table(curves, snakemake.output.calibration)
log.info("collected %d calibration bins of %s", len(curves), datasets)
