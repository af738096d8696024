# Audits of practitioners' files (`snakemake --cores N audit --configfile examples/audit_compas.yaml`):
# one job per run and model of the `audit` section (disaggregated_eval_workflow.audit_runs, docs/audit.md).
# The section's structure is checked here against workflow/schemas/audit.schema.yaml (which fills the
# defaults), the audit options inside it by the same code as the command line, before any job starts.
#
# A job writes its folder <out_dir>/<run>/<model>/ as `disagg-eval audit --out` does (checked first,
# replaced atomically once the new output is complete); the rule declares only the job's record,
# <out_dir>/<run>/<model>.manifest.json (a copy of the folder's manifest.json, written last), and a copy
# of the folder's report.html beside it (<model>.report.html, for `snakemake --report`), because
# Snakemake deletes declared outputs before a job runs and after it fails: so it never deletes an
# earlier audit's folder (docs/design.md, "The workflow's audit jobs").
from snakemake.utils import validate

from disaggregated_eval_workflow.audit_runs import (
    SEGMENT_PATTERN,
    audit_code_files,
    audit_runs,
    audit_targets,
    check_job_outputs,
    folder_pattern,
    job_param,
    output_pattern,
    remove_stale_records,
    report_pattern,
)

config.setdefault("audit", {})
validate(config["audit"], "../schemas/audit.schema.yaml")
AUDIT_RUNS = audit_runs(config["audit"])
# A file of the user's at a job's record or report path would be deleted by Snakemake: the run is refused.
check_job_outputs(AUDIT_RUNS)
# A record whose folder was deleted or rewritten no longer describes it: deleted, so its job runs again.
for line in remove_stale_records(AUDIT_RUNS):
    print(line, file=sys.stderr)


rule run_audit:
    input:
        data=job_param(AUDIT_RUNS, "file"),
        option_files=job_param(AUDIT_RUNS, "option_files"),
        data_files=job_param(AUDIT_RUNS, "data_files"),
        code=audit_code_files(REPO, workdir=Path.cwd()),
    output:
        record=output_pattern(config["audit"]),
        report=report(
            report_pattern(config["audit"]),
            caption="../report/audit.rst",
            category="audit",
            subcategory="{run}",
            labels={"run": "{run}", "model": "{model}"},
        ),
    log:
        "logs/run_audit/{run}/{model}.log",
    benchmark:
        "benchmarks/output/run_audit/{run}/{model}.tsv"
    wildcard_constraints:
        run=SEGMENT_PATTERN,
        model=SEGMENT_PATTERN,
    conda:
        "../envs/audit.yaml"
    threads: config["audit"]["resources"]["threads"]
    resources:
        mem_mb=config["audit"]["resources"]["mem_mb"],
        runtime=config["audit"]["resources"]["runtime"],
    params:
        folder=folder_pattern(config["audit"]),
        options=job_param(AUDIT_RUNS, "options"),
    script:
        "../scripts/run_audit.py"
