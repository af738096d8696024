"""Rule plot_calibration_curves: calibration curves per group, model type and setting (B2, B3, B26)."""

import logging
import sys

from disaggregated_eval import io, plots

sys.stderr = open(snakemake.log[0], "a", buffering=1)  # noqa: F821 (snakemake is injected)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
logging.captureWarnings(True)
log = logging.getLogger("plot_calibration_curves")

params = snakemake.params
written = plots.plot_calibration_curves(
    io.read_table(snakemake.input.calibration),
    models=params.models,
    settings=params.settings,
    paths=[snakemake.output.png, snakemake.output.pdf],
)
log.info("wrote %s", [str(p) for p in written])
