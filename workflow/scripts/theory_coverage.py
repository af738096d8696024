"""Rule theory_coverage: the paper's theory tables 2, B1 and B2 next to the empirical T_a."""

import warnings

from disaggregated_eval import io, theory

log = io.rule_logger(snakemake.log[0], "theory_coverage")  # noqa: F821 (snakemake is injected)

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    table = theory.theory_coverage(io.read_table(snakemake.input.metrics[0]))
for warning in caught:
    log.warning("%s", warning.message)
io.write_table(table, snakemake.output.theory)
marked = table["caveat"] != ""
log.info(
    "%d theory cells x weight source x group x metric: %d with an interval covering 0, %d without, "
    "%d undefined or degenerate (not counted)",
    len(table),
    int((table["covers_zero"] == True).sum()),  # noqa: E712 (nullable boolean: NA is neither)
    int((table["covers_zero"] == False).sum()),  # noqa: E712
    int(marked.sum()),
)
