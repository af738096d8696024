"""Rule plot_shared_space_metrics: one figure per metric (see workflow/rules/common.smk, FIGURES)."""

from disaggregated_eval import io, plots

log = io.rule_logger(snakemake.log[0], "plot_shared_space_metrics")  # noqa: F821 (snakemake is injected)

params = snakemake.params
written = plots.plot_shared_space(
    io.read_table(snakemake.input.metrics),
    metric=params.metric,
    models=params.models,
    datasets=params.datasets,
    weight_source="estimated",
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])
