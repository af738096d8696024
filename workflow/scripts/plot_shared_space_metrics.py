"""Rule plot_shared_space_metrics: one figure per metric (see workflow/rules/common.smk, FIGURES)."""

import logging
import sys

from disaggregated_eval import io, plots

sys.stderr = open(snakemake.log[0], "a", buffering=1)  # noqa: F821 (snakemake is injected)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
logging.captureWarnings(True)
log = logging.getLogger("plot_shared_space_metrics")

params = snakemake.params
written = plots.plot_shared_space(
    io.read_table(snakemake.input.metrics),
    metric=params.metric,
    models=params.models,
    settings=params.settings,
    weight_source="estimated",
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])
