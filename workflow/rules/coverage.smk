# Coverage study (docs/method.md, "Coverage study"): do the pipeline's 95% intervals of T_a cover the
# population T_a? Per main setting one job for the population T_a and jobs_per_setting jobs of
# replicates (fresh test sets, weights refitted per replicate); one collecting job, one figure.
COVERAGE_SETTINGS = list(
    config["coverage"]["settings"] or MAIN_SETTINGS
)  # null: every main setting


rule coverage_truth:
    input:
        models=rules.fit_outcome_models.output.models,
        selection=rules.fit_weight_models.output.selection,
        code=script_code("coverage_truth"),
    output:
        truth="results/coverage/{dataset}/truth.parquet",
        design="results/coverage/{dataset}/design.json",
    log:
        "logs/coverage_truth/{dataset}.log",
    benchmark:
        "benchmarks/output/coverage_truth/{dataset}.tsv"
    wildcard_constraints:
        dataset=alternatives(COVERAGE_SETTINGS),
    conda:
        "../envs/compute.yaml"
    threads: 1
    resources:
        mem_mb=job_resource("coverage", "mem_mb"),
        runtime=job_resource("coverage", "runtime"),
    params:
        n_test=config["simulation"]["n_test"],
        n_train=config["simulation"]["n_train"],
        crossfit_folds=config["models"]["crossfit_folds"],
        n_replicates=config["coverage"]["n_replicates"],
        n_replicates_r=config["coverage"]["n_replicates_r"],
        n_resamples=config["coverage"]["n_resamples"],
        jobs_per_setting=config["coverage"]["jobs_per_setting"],
        confidence=config["evaluation"]["confidence"],
        threshold=config["evaluation"]["threshold"],
        preference_threshold=config["evaluation"]["preference_threshold"],
    script:
        "../scripts/coverage_truth.py"


rule coverage_replicates:
    input:
        models=rules.fit_outcome_models.output.models,
        selection=rules.fit_weight_models.output.selection,
        code=script_code("coverage_replicates"),
    output:
        replicates="results/coverage/{dataset}/replicates/part_{part}.parquet",
    log:
        "logs/coverage_replicates/{dataset}_part_{part}.log",
    benchmark:
        "benchmarks/output/coverage_replicates/{dataset}_part_{part}.tsv"
    wildcard_constraints:
        dataset=alternatives(COVERAGE_SETTINGS),
        part=r"\d+",
    conda:
        "../envs/compute.yaml"
    threads: job_resource("coverage", "threads")
    resources:
        mem_mb=job_resource("coverage", "mem_mb"),
        runtime=job_resource("coverage", "runtime"),
    params:
        seed=config["seed"],
        n_test=config["simulation"]["n_test"],
        n_train=config["simulation"]["n_train"],
        crossfit_folds=config["models"]["crossfit_folds"],
        n_replicates=config["coverage"]["n_replicates"],
        n_replicates_r=config["coverage"]["n_replicates_r"],
        n_resamples=config["coverage"]["n_resamples"],
        jobs_per_setting=config["coverage"]["jobs_per_setting"],
        confidence=config["evaluation"]["confidence"],
        threshold=config["evaluation"]["threshold"],
        preference_threshold=config["evaluation"]["preference_threshold"],
    script:
        "../scripts/coverage_replicates.py"


rule collect_coverage:
    input:
        replicates=expand(
            rules.coverage_replicates.output.replicates,
            dataset=COVERAGE_SETTINGS,
            part=range(config["coverage"]["jobs_per_setting"]),
        ),
        truth=expand(rules.coverage_truth.output.truth, dataset=COVERAGE_SETTINGS),
        design=expand(rules.coverage_truth.output.design, dataset=COVERAGE_SETTINGS),
        code=script_code("collect_coverage"),
    output:
        table="results/tables/coverage.csv",
        summary="results/tables/coverage_summary.csv",
        design="results/tables/coverage_design.json",
    log:
        "logs/collect_coverage/simulation.log",
    benchmark:
        "benchmarks/output/collect_coverage/simulation.tsv"
    conda:
        "../envs/compute.yaml"
    params:
        datasets=COVERAGE_SETTINGS,
        confidence=config["evaluation"]["confidence"],
    script:
        "../scripts/collect_coverage.py"


rule plot_coverage:
    input:
        table=rules.collect_coverage.output.table,
        code=script_code("plot_coverage"),
    output:
        png=report(
            "figures/simulation/coverage.png",
            caption="../report/coverage.rst",
            category="simulation",
            subcategory="Coverage of the T_a intervals",
        ),
        pdf="figures/simulation/coverage.pdf",
    log:
        "logs/plot_coverage/simulation.log",
    benchmark:
        "benchmarks/output/plot_coverage/simulation.tsv"
    conda:
        "../envs/figures.yaml"
    params:
        datasets=COVERAGE_SETTINGS,
        confidence=config["evaluation"]["confidence"],
    script:
        "../scripts/plot_coverage.py"
