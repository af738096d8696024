"""Rule compute_calibration_curves: calibration curves per group and model type (paper Supplementary A.3; Figures B2, B3, B26)."""

import json
from pathlib import Path

from disaggregated_eval import calibration, io
from disaggregated_eval_workflow.inputs import read_scores

log = io.rule_logger(snakemake.log[0], "compute_calibration_curves")  # noqa: F821 (snakemake is injected)

params = snakemake.params
schema = json.loads(Path(snakemake.input.schema).read_text())
test = io.read_table(snakemake.input.test)
scores = read_scores([snakemake.input.scores], n_rows=len(test), test_path=snakemake.input.test, models=params.models)
table = calibration.calibration_table(
    test[schema["label"]].to_numpy(),
    test[schema["group"]].to_numpy(),
    {model: scores[model].to_numpy() for model in params.models},
    group_labels=schema["group_labels"],
    n_bins=params.n_bins,
    confidence=params.confidence,
)
io.write_table(table, snakemake.output.calibration)
log.info("wrote %d calibration bins", len(table))
