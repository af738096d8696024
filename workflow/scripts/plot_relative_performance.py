"""Rule plot_relative_performance: subgroup-aware minus subgroup-agnostic performance (B1, B25)."""

import logging
import sys

from disaggregated_eval import io, plots

sys.stderr = open(snakemake.log[0], "a", buffering=1)  # noqa: F821 (snakemake is injected)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
logging.captureWarnings(True)
log = logging.getLogger("plot_relative_performance")

params = snakemake.params
written = plots.plot_relative_performance(
    io.read_table(snakemake.input.metrics),
    metrics=params.metrics,
    models=params.models,
    settings=params.settings,
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])
