"""Rule run_audit: one audit of one file and model (disaggregated_eval.audit, docs/audit.md)."""

from disaggregated_eval import io
from disaggregated_eval.audit import audit
from disaggregated_eval.audit.inputs import InputSpec
from disaggregated_eval.audit.loading import load_table
from disaggregated_eval.audit.options import resolve_options
from disaggregated_eval.audit.outputs import write_outputs

log = io.rule_logger(snakemake.log[0], "run_audit")  # noqa: F821 (snakemake is injected)


def progress(stage, done, total):
    log.info("%s %d / %d", stage, done, total)


options = dict(snakemake.params.options)
options.setdefault("n_threads", snakemake.threads)
resolved = resolve_options(None, options)  # once: the audit trusts the resolved options
data = load_table(snakemake.input.data, columns=InputSpec.from_options(resolved).columns)
log.info("read %s: %d rows", snakemake.input.data, len(data))
result = audit(data, options=resolved, progress=progress)
write_outputs(result, snakemake.output[0], input_path=snakemake.input.data)
for note in result.notes:
    log.info("note: %s", note)
log.info("wrote %s", snakemake.output[0])
