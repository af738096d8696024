# Selection study (docs/method.md, "Evaluation under selection"): on selected test sets of the three
# selection settings, do the naive and margin-corrected intervals and the sensitivity bounds cover the
# full population's metrics? Per setting one job for the truth and the true selection strength,
# jobs_per_setting jobs of replicates; one collecting job; one figure per setting.
SELECTION_STUDY_SETTINGS = list(
    config["selection_study"]["settings"] or SELECTION_SETTINGS
)  # null: every selection setting


rule selection_truth:
    input:
        code=script_code("selection_truth"),
    output:
        truth="results/selection/{dataset}/truth.parquet",
        strength="results/selection/{dataset}/strength.parquet",
    log:
        "logs/selection_truth/{dataset}.log",
    benchmark:
        "benchmarks/output/selection_truth/{dataset}.tsv"
    wildcard_constraints:
        dataset=alternatives(SELECTION_STUDY_SETTINGS),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=job_resource("coverage", "mem_mb"),
        runtime=job_resource("coverage", "runtime"),
    params:
        threshold=config["evaluation"]["threshold"],
        preference_threshold=config["evaluation"]["preference_threshold"],
    script:
        "../scripts/selection_truth.py"


rule selection_replicates:
    input:
        code=script_code("selection_replicates"),
    output:
        replicates="results/selection/{dataset}/replicates/part_{part}.parquet",
    log:
        "logs/selection_replicates/{dataset}_part_{part}.log",
    benchmark:
        "benchmarks/output/selection_replicates/{dataset}_part_{part}.tsv"
    wildcard_constraints:
        dataset=alternatives(SELECTION_STUDY_SETTINGS),
        part=r"\d+",
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=job_resource("coverage", "mem_mb"),
        runtime=job_resource("coverage", "runtime"),
    params:
        seed=config["seed"],
        n_replicates=config["selection_study"]["n_replicates"],
        n_test=config["selection_study"]["n_test"],
        n_resamples=config["selection_study"]["n_resamples"],
        gammas=config["selection_study"]["gammas"],
        jobs_per_setting=config["selection_study"]["jobs_per_setting"],
        confidence=config["evaluation"]["confidence"],
        threshold=config["evaluation"]["threshold"],
        preference_threshold=config["evaluation"]["preference_threshold"],
    script:
        "../scripts/selection_replicates.py"


rule collect_selection:
    input:
        replicates=expand(
            rules.selection_replicates.output.replicates,
            dataset=SELECTION_STUDY_SETTINGS,
            part=range(config["selection_study"]["jobs_per_setting"]),
        ),
        truth=expand(
            rules.selection_truth.output.truth, dataset=SELECTION_STUDY_SETTINGS
        ),
        strength=expand(
            rules.selection_truth.output.strength, dataset=SELECTION_STUDY_SETTINGS
        ),
        code=script_code("collect_selection"),
    output:
        table="results/tables/selection_coverage.csv",
        summary="results/tables/selection_summary.csv",
        strength="results/tables/selection_strength.csv",
    log:
        "logs/collect_selection/simulation.log",
    benchmark:
        "benchmarks/output/collect_selection/simulation.tsv"
    conda:
        "../envs/compute.yaml"
    params:
        confidence=config["evaluation"]["confidence"],
    script:
        "../scripts/collect_selection.py"


rule plot_selection_bounds:
    input:
        replicates=expand(
            rules.selection_replicates.output.replicates, part=0, allow_missing=True
        ),
        truth=rules.selection_truth.output.truth,
        strength=rules.selection_truth.output.strength,
        code=script_code("plot_selection_bounds"),
    output:
        png=report(
            "figures/simulation/selection_bounds_{dataset}.png",
            caption="../report/selection_bounds.rst",
            category="simulation",
            subcategory="Evaluation under selection",
        ),
        pdf="figures/simulation/selection_bounds_{dataset}.pdf",
    log:
        "logs/plot_selection_bounds/{dataset}.log",
    benchmark:
        "benchmarks/output/plot_selection_bounds/{dataset}.tsv"
    wildcard_constraints:
        dataset=alternatives(SELECTION_STUDY_SETTINGS),
    conda:
        "../envs/figures.yaml"
    params:
        model="bayes_xa",
        margins="A",
    script:
        "../scripts/plot_selection_bounds.py"
