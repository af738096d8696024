# Evaluation stage: paired bootstrap of every comparison (docs/method.md, "Bootstrap"), calibration
# curves (paper Supplementary A.3), and the per-study tables.


rule bootstrap_metrics:
    input:
        unpack(score_files),
        unpack(weight_files),
        test=data_file("test"),
        schema=data_file("schema"),
        code=library_files(
            "seeds",
            "vocabulary",
            "_validation",
            "metrics",
            "bootstrap",
            "weight_table",
            "evaluation",
        ),
    output:
        parquet="results/evaluate/{dataset}/metrics.parquet",
        csv="results/evaluate/{dataset}/metrics.csv",
    log:
        "logs/bootstrap_metrics/{dataset}.log",
    benchmark:
        "benchmarks/output/bootstrap_metrics/{dataset}.tsv"
    conda:
        "../../envs/disaggregated_eval.yaml"
    # evaluation.batch_size is not a param: it does not change the table (resample i always uses
    # seed child i), so changing it must not rerun the bootstraps; the script reads it from
    # snakemake.config. The resampling scheme is fixed to "population" in the script.
    threads: job_resource("bootstrap", "threads")
    resources:
        mem_mb=job_resource("bootstrap", "mem_mb"),
        runtime=job_resource("bootstrap", "runtime"),
    params:
        seed=config["seed"],
        study=lambda wildcards: study_of(wildcards.dataset),
        models=evaluated_models,
        relative_to=relative_to,
        weight_sources=weight_sources,
        n_resamples=config["evaluation"]["n_resamples"],
        confidence=config["evaluation"]["confidence"],
        threshold=config["evaluation"]["threshold"],
        preference_threshold=config["evaluation"]["preference_threshold"],
    script:
        "../scripts/bootstrap_metrics.py"


rule compute_calibration_curves:
    input:
        scores=rules.fit_outcome_models.output.scores,
        test=data_file("test"),
        schema=data_file("schema"),
        code=library_files("vocabulary", "_validation", "calibration"),
    output:
        calibration="results/evaluate/{dataset}/calibration.parquet",
    log:
        "logs/compute_calibration_curves/{dataset}.log",
    benchmark:
        "benchmarks/output/compute_calibration_curves/{dataset}.tsv"
    conda:
        "../../envs/disaggregated_eval.yaml"
    params:
        models=MODELS,
        n_bins=config["calibration"]["n_bins"],
        confidence=config["evaluation"]["confidence"],
    script:
        "../scripts/compute_calibration_curves.py"


rule collect_simulation_tables:
    input:
        metrics=expand(
            rules.bootstrap_metrics.output.parquet, dataset=SIMULATION_DATASETS
        ),
        calibration=expand(
            rules.compute_calibration_curves.output.calibration,
            dataset=SIMULATION_DATASETS,
        ),
        code=library_files("calibration", "theory"),
    output:
        metrics="results/tables/simulation_metrics.parquet",
        metrics_csv="results/tables/simulation_metrics.csv",
        calibration="results/tables/simulation_calibration.parquet",
        theory="results/tables/theory_coverage.csv",
    log:
        "logs/collect_simulation_tables/simulation.log",
    conda:
        "../../envs/disaggregated_eval.yaml"
    params:
        datasets=SIMULATION_DATASETS,
    script:
        "../scripts/collect_simulation_tables.py"


rule collect_acs_tables:
    input:
        metrics=expand(rules.bootstrap_metrics.output.parquet, dataset=ACS_DATASETS),
        calibration=expand(
            rules.compute_calibration_curves.output.calibration, dataset=ACS_DATASETS
        ),
        code=library_files("calibration"),
    output:
        metrics="results/tables/acs_metrics.parquet",
        metrics_csv="results/tables/acs_metrics.csv",
        calibration="results/tables/acs_calibration.parquet",
    log:
        "logs/collect_acs_tables/acs.log",
    conda:
        "../../envs/disaggregated_eval.yaml"
    params:
        datasets=ACS_DATASETS,
    script:
        "../scripts/collect_acs_tables.py"
