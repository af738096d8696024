"""Rule plot_relative_performance: subgroup-aware minus subgroup-agnostic performance (B1, B25)."""

from disaggregated_eval import io, plots

log = io.rule_logger(snakemake.log[0], "plot_relative_performance")  # noqa: F821 (snakemake is injected)

params = snakemake.params
written = plots.plot_relative_performance(
    io.read_table(snakemake.input.metrics),
    metrics=params.metrics,
    models=params.models,
    datasets=params.datasets,
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])
