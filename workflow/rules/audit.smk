# Audits of practitioners' files (`snakemake --cores N audit --configfile examples/audit_compas.yaml`):
# one job per run and model of the `audit` section (disaggregated_eval_workflow.audit_runs, docs/audit.md).
# The section's structure is checked here against workflow/schemas/audit.schema.yaml (which fills the
# defaults), the audit options inside it by the same code as the command line, before any job starts.
from snakemake.utils import validate

from disaggregated_eval_workflow.audit_runs import (
    audit_code_files,
    audit_runs,
    audit_targets,
    job_param,
    output_pattern,
)

config.setdefault("audit", {})
validate(config["audit"], "../schemas/audit.schema.yaml")
AUDIT_RUNS = audit_runs(config["audit"])


rule run_audit:
    input:
        data=job_param(AUDIT_RUNS, "file"),
        option_files=job_param(AUDIT_RUNS, "option_files"),
        code=audit_code_files(workflow.basedir),
    output:
        directory(output_pattern(config["audit"])),
    log:
        "logs/run_audit/{run}/{model}.log",
    benchmark:
        "benchmarks/output/run_audit/{run}/{model}.tsv"
    conda:
        "../../envs/disaggregated_eval.yaml"
    threads: config["audit"]["resources"]["threads"]
    resources:
        mem_mb=config["audit"]["resources"]["mem_mb"],
        runtime=config["audit"]["resources"]["runtime"],
    params:
        options=job_param(AUDIT_RUNS, "options"),
    script:
        "../scripts/run_audit.py"
