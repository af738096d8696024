# Weight stage: P(A = a | V) for V in {X, Y, R}; estimated (paper Algorithm 2) for every dataset
# and oracle (paper Algorithm 1) for simulations.


rule fit_weight_models:
    input:
        unpack(score_files),
        train=data_file("train"),
        test=data_file("test"),
        schema=data_file("schema"),
        code=script_code("fit_weight_models"),
    output:
        weights="results/weights/{dataset}/weights_estimated.parquet",
        selection="results/weights/{dataset}/weight_model_selection.csv",
    log:
        "logs/fit_weight_models/{dataset}.log",
    benchmark:
        "benchmarks/output/fit_weight_models/{dataset}.tsv"
    conda:
        "../envs/compute.yaml"
    threads: job_resource("weights", "threads")
    resources:
        mem_mb=job_resource("weights", "mem_mb"),
        runtime=job_resource("weights", "runtime"),
    params:
        seed=config["seed"],
        max_leaf_nodes=config["models"]["max_leaf_nodes"],
        cv_folds=config["models"]["cv_folds"],
        crossfit_folds=config["models"]["crossfit_folds"],
        # Weights describe the evaluated (test) population: where training data are a selected
        # sample S = 1 (selection settings, paper Supplementary A.2), P(A | X) and P(A | Y) are
        # cross-fitted on test like P(A | R) instead of fitted on train.
        fit_xy_on=weight_fit_population,
    script:
        "../scripts/fit_weight_models.py"


rule compute_oracle_weights:
    input:
        test=rules.simulate_setting.output.test,
        scores=rules.fit_outcome_models.output.scores,
        bayes_scores=rules.score_bayes_models.output.scores,
        models=rules.fit_outcome_models.output.models,
        code=script_code("compute_oracle_weights"),
    output:
        weights="results/weights/{dataset}/weights_oracle.parquet",
    log:
        "logs/compute_oracle_weights/{dataset}.log",
    benchmark:
        "benchmarks/output/compute_oracle_weights/{dataset}.tsv"
    wildcard_constraints:
        dataset=SIMULATION_PATTERN,
    conda:
        "../envs/compute.yaml"
    threads: job_resource("oracle", "threads")
    resources:
        mem_mb=job_resource("oracle", "mem_mb"),
        runtime=job_resource("oracle", "runtime"),
    script:
        "../scripts/compute_oracle_weights.py"
