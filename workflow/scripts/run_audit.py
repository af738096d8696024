"""Rule run_audit: one audit of one file and model (disaggregated_eval.audit, docs/audit.md)."""

from disaggregated_eval import io
from disaggregated_eval.audit import audit
from disaggregated_eval.audit.loading import load_table, required_columns
from disaggregated_eval.audit.outputs import write_outputs

log = io.rule_logger(snakemake.log[0], "run_audit")  # noqa: F821 (snakemake is injected)


def progress(stage, done, total):
    log.info("%s %d / %d", stage, done, total)


options = dict(snakemake.params.options)
options.setdefault("n_threads", snakemake.threads)
data = load_table(snakemake.input.data, columns=required_columns(options))
log.info("read %s: %d rows", snakemake.input.data, len(data))
result = audit(data, progress=progress, **options)
write_outputs(result, snakemake.output[0], input_path=snakemake.input.data)
for note in result.notes:
    log.info("note: %s", note)
log.info("wrote %s", snakemake.output[0])
