# Reproduction pipeline of Pfohl et al. (2025), "Understanding challenges to the interpretation of
# disaggregated evaluations of algorithmic fairness". See README.md and docs/design.md.
#   snakemake --cores 2              # simulation study (target `all`)
#   snakemake --cores 2 acs          # ACS PUMS study
#   snakemake --cores 2 paper        # both
#   snakemake --cores 2 coverage     # coverage study of the T_a intervals
#   snakemake --cores 2 selection    # evaluation under selection: margins and bounds against the truth
import sys
from pathlib import Path

from snakemake.utils import min_version

min_version("9.0")

# The workflow's plumbing (configuration checks, audit jobs, code inputs) is the package in
# workflow/lib, imported from this repository and not installed with the library. Rule scripts get
# this path too: Snakemake passes its sys.path to every script job, and a cluster job parses this
# file again on its node.
WORKFLOW_LIB = str(Path(workflow.basedir).absolute() / "workflow" / "lib")
if WORKFLOW_LIB not in sys.path:
    sys.path.insert(0, WORKFLOW_LIB)

from disaggregated_eval_workflow.config import (
    check_config_file,
    check_output_folders,
    placeholder_warnings,
    validate_config,
)
from disaggregated_eval_workflow.snakemake_compat import (
    fix_params_change_listing,
    stop_local_jobs_on_cancel,
)

# `snakemake --list-changes params` lists every output in Snakemake 9 (a bug of its listing, not of
# scheduling): this makes it list only outputs whose params changed; a no-op once Snakemake is fixed.
fix_params_change_listing()
# A SIGINT to Snakemake (Ctrl-C, kill -INT) stops its local jobs (SIGTERM to those still running after
# 2 s) instead of waiting for them to finish and then marking their complete outputs incomplete.
stop_local_jobs_on_cancel()

# The config files must be YAML mappings that give each key once (a message naming the file, not
# Snakemake's generic one; plain YAML would keep the last of two values silently). Snakemake has read
# the --configfile files already (an empty one stops it before this point, with its own message).
for path in ["config/config.yaml", *workflow.overwrite_configfiles]:
    check_config_file(path)


configfile: "config/config.yaml"


# One check of the merged configuration before any job: the schema's defaults are filled in, then
# the schema and the cross-key checks run (messages name the key path and the bad value).
validate_config(
    config,
    schema=Path(workflow.basedir) / "workflow" / "schemas" / "config.schema.yaml",
)
# A file where an output folder belongs (e.g. a file named `results`): one line now, not a traceback
# from the first job.
check_output_folders(
    [
        "results",
        "figures",
        "logs",
        "benchmarks/output",
        config.get("audit", {}).get("out_dir", "results/audit"),
    ]
)


# A profile's placeholder left in place (slurm_partition: CHANGE_ME): said before any job is planned.
for line in placeholder_warnings(
    getattr(workflow.resource_settings.default_resources, "args", None)
):
    print(line, file=sys.stderr)


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/acs.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/weights.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/audit.smk"
include: "workflow/rules/coverage.smk"
include: "workflow/rules/selection.smk"


# Light jobs (seconds, little memory) run on the submitting host, not as cluster jobs.
localrules:
    all,
    acs,
    paper,
    collect_metrics,
    collect_calibration,
    theory_coverage,
    tabulate_acs_cohort,
    plot_controlled_differences,
    plot_weighted_metrics,
    plot_shared_space_metrics,
    plot_relative_performance,
    plot_calibration_curves,
    audit,
    coverage,
    collect_coverage,
    plot_coverage,
    selection,
    collect_selection,
    plot_selection_bounds,


rule all:
    default_target: True
    input:
        study_tables("simulation"),
        rules.theory_coverage.output,
        figure_files("simulation"),


rule acs:
    input:
        rules.tabulate_acs_cohort.output,
        study_tables("acs"),
        figure_files("acs"),


rule paper:
    input:
        rules.all.input,
        rules.acs.input,


# Practitioners' audits (docs/audit.md): one job per listed input file and model.
rule audit:
    input:
        audit_targets(AUDIT_RUNS),


# Coverage study of the T_a intervals (docs/method.md "Coverage study"); not part of `all` or `paper`:
# `snakemake --cores 2 coverage` after (or together with) the main run.
rule coverage:
    input:
        rules.collect_coverage.output,
        rules.plot_coverage.output,


# Evaluation under selection (docs/method.md "Evaluation under selection"): selected test sets of the
# selection settings against the full population's truth; not part of `all` or `paper` (independent of
# the main run): `snakemake --cores 2 selection`.
rule selection:
    input:
        rules.collect_selection.output,
        expand(rules.plot_selection_bounds.output, dataset=SELECTION_STUDY_SETTINGS),
