"""Rule plot_coverage: coverage of the T_a intervals per cell (docs/method.md, "Coverage study")."""

from disaggregated_eval import io, plots

log = io.rule_logger(snakemake.log[0], "plot_coverage")  # noqa: F821 (snakemake is injected)

written = plots.plot_coverage(
    io.read_table(snakemake.input.table),
    nominal=snakemake.params.confidence,
    datasets=snakemake.params.datasets,
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])
