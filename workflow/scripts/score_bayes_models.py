"""Rule score_bayes_models: Bayes-optimal scores E[Y | X] and E[Y | X, A] of the test rows (SPEC 2.5)."""

import logging
import sys

from disaggregated_eval import io, simulate

sys.stderr = open(snakemake.log[0], "a", buffering=1)  # noqa: F821 (snakemake is injected)
logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
logging.captureWarnings(True)
log = logging.getLogger("score_bayes_models")

scores = simulate.bayes_scores(snakemake.wildcards.dataset, io.read_table(snakemake.input.test))
io.write_table(scores, snakemake.output.scores)
log.info("scored %d test rows with %s", len(scores), list(scores.columns))
