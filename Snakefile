# Reproduction pipeline of Pfohl et al. (2025), "Understanding challenges to the interpretation of
# disaggregated evaluations of algorithmic fairness". See README.md and docs/design.md.
#   snakemake --cores 2              # simulation study (target `all`)
#   snakemake --cores 2 acs          # ACS PUMS study
#   snakemake --cores 2 paper        # both
from snakemake.utils import min_version, validate

from disaggregated_eval.config import validate_config

min_version("9.0")


configfile: "config/config.yaml"


# Semantic checks first (messages name the key path and the bad value), then the schema (fills defaults).
validate_config(config)
validate(config, "workflow/schemas/config.schema.yaml")


include: "workflow/rules/common.smk"
include: "workflow/rules/simulate.smk"
include: "workflow/rules/acs.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/weights.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/figures.smk"


# Light jobs (seconds, little memory) run on the submitting host, not as cluster jobs.
localrules:
    all,
    acs,
    paper,
    collect_simulation_tables,
    collect_acs_tables,
    tabulate_acs_cohort,
    plot_controlled_differences,
    plot_weighted_metrics,
    plot_shared_space_metrics,
    plot_relative_performance,
    plot_calibration_curves,


rule all:
    default_target: True
    input:
        rules.collect_simulation_tables.output,
        figure_files("simulation"),


rule acs:
    input:
        rules.tabulate_acs_cohort.output,
        rules.collect_acs_tables.output,
        figure_files("acs"),


rule paper:
    input:
        rules.all.input,
        rules.acs.input,
