"""Rule tabulate_acs_cohort: paper Table B4 (count and prevalence per group and task)."""

import numpy as np
import pandas as pd

from disaggregated_eval import acs, io

log = io.rule_logger(snakemake.log[0], "tabulate_acs_cohort")  # noqa: F821 (snakemake is injected)


def labels_frame(counts: pd.DataFrame) -> pd.DataFrame:
    """The (a, y) columns of the filtered frame, rebuilt from its per-(group, label) counts."""
    repeats = counts["n"].to_numpy(dtype=np.int64)
    return pd.DataFrame({c: np.repeat(counts[c].to_numpy(dtype=np.int64), repeats) for c in ("a", "y")})


frames = {
    dataset: labels_frame(io.read_table(path))
    for dataset, path in zip(snakemake.params.datasets, snakemake.input.counts)
}
table = acs.cohort_table(frames)
io.write_table(table, snakemake.output.csv)
with io.atomic_path(snakemake.output.md) as tmp:
    tmp.write_text(acs.cohort_markdown(table))
log.info("cohort table:\n%s", table)
