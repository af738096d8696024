# Reproduction pipeline of Pfohl et al. (2025): `snakemake --cores 2` from the repository root runs
# it (README.md). The workflow is workflow/Snakefile, where another workflow finds it as a module
# (config/README.md, "Using the workflow as a module"); this file only includes it.


include: "workflow/Snakefile"


# An include keeps the including file's default target (none here): the included one's is `all`.
workflow.default_target = "all"
