"""Rule collect_acs_tables: the ACS study's metrics and calibration tables."""

import logging
import sys

import pandas as pd

from disaggregated_eval import io

sys.stderr = open(snakemake.log[0], "a", buffering=1)  # noqa: F821 (snakemake is injected)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
logging.captureWarnings(True)
log = logging.getLogger("collect_acs_tables")

datasets = snakemake.params.datasets
metrics = pd.concat([io.read_table(p) for p in snakemake.input.metrics], ignore_index=True)
calibration = pd.concat(
    [io.read_table(p).assign(study="acs", setting=d) for d, p in zip(datasets, snakemake.input.calibration)],
    ignore_index=True,
)
calibration = calibration[["study", "setting"] + [c for c in calibration.columns if c not in ("study", "setting")]]
io.write_table(metrics, snakemake.output.metrics)
io.write_table(metrics, snakemake.output.metrics_csv)
io.write_table(calibration, snakemake.output.calibration)
log.info("collected %d estimates and %d calibration bins of %s", len(metrics), len(calibration), datasets)
