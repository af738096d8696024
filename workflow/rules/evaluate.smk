# Evaluation stage: paired bootstrap of every comparison (docs/method.md, "Bootstrap"), calibration
# curves (paper Supplementary A.3), the per-study tables and the theory tables (Tables 2, B1, B2).


rule bootstrap_metrics:
    input:
        unpack(score_files),
        unpack(weight_files),
        test=data_file("test"),
        schema=data_file("schema"),
        code=script_code("bootstrap_metrics"),
    output:
        parquet="results/evaluate/{dataset}/metrics.parquet",
        csv="results/evaluate/{dataset}/metrics.csv",
    log:
        "logs/bootstrap_metrics/{dataset}.log",
    benchmark:
        "benchmarks/output/bootstrap_metrics/{dataset}.tsv"
    conda:
        "../envs/compute.yaml"
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
        code=script_code("compute_calibration_curves"),
    output:
        calibration="results/evaluate/{dataset}/calibration.parquet",
    log:
        "logs/compute_calibration_curves/{dataset}.log",
    benchmark:
        "benchmarks/output/compute_calibration_curves/{dataset}.tsv"
    conda:
        "../envs/compute.yaml"
    params:
        models=MODELS,
        n_bins=config["calibration"]["n_bins"],
        confidence=config["evaluation"]["confidence"],
    script:
        "../scripts/compute_calibration_curves.py"


rule collect_metrics:
    input:
        metrics=study_files(rules.bootstrap_metrics.output.parquet),
        code=script_code("collect_metrics"),
    output:
        parquet="results/tables/{study}_metrics.parquet",
        csv="results/tables/{study}_metrics.csv",
    log:
        "logs/collect_metrics/{study}.log",
    benchmark:
        "benchmarks/output/collect_metrics/{study}.tsv"
    conda:
        "../envs/compute.yaml"
    params:
        datasets=study_datasets,
    script:
        "../scripts/collect_metrics.py"


# Its own rule, so that a change of the bootstrap (evaluation.n_resamples) reruns no calibration figure.
rule collect_calibration:
    input:
        calibration=study_files(rules.compute_calibration_curves.output.calibration),
        code=script_code("collect_calibration"),
    output:
        calibration="results/tables/{study}_calibration.parquet",
    log:
        "logs/collect_calibration/{study}.log",
    benchmark:
        "benchmarks/output/collect_calibration/{study}.tsv"
    conda:
        "../envs/compute.yaml"
    params:
        datasets=study_datasets,
    script:
        "../scripts/collect_calibration.py"


rule theory_coverage:
    input:
        metrics=expand(rules.collect_metrics.output.parquet, study="simulation"),
        code=script_code("theory_coverage"),
    output:
        theory="results/tables/theory_coverage.csv",
    log:
        "logs/theory_coverage/simulation.log",
    benchmark:
        "benchmarks/output/theory_coverage/simulation.tsv"
    conda:
        "../envs/compute.yaml"
    script:
        "../scripts/theory_coverage.py"
