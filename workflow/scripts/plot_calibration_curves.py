"""Rule plot_calibration_curves: calibration curves per group, model type and setting (B2, B3, B26)."""

from disaggregated_eval import io, plots

log = io.rule_logger(snakemake.log[0], "plot_calibration_curves")  # noqa: F821 (snakemake is injected)

params = snakemake.params
written = plots.plot_calibration_curves(
    io.read_table(snakemake.input.calibration),
    models=params.models,
    datasets=params.datasets,
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])
