# Model stage: outcome models of every type (paper Supplementary A.3) and, for simulations, the
# Bayes-optimal scores.


rule fit_outcome_models:
    input:
        train=data_file("train"),
        test=data_file("test"),
        schema=data_file("schema"),
        code=script_code("fit_outcome_models"),
    output:
        scores="results/models/{dataset}/scores.parquet",
        selection="results/models/{dataset}/model_selection.csv",
        models="results/models/{dataset}/models.joblib",
    log:
        "logs/fit_outcome_models/{dataset}.log",
    benchmark:
        "benchmarks/output/fit_outcome_models/{dataset}.tsv"
    conda:
        "../envs/compute.yaml"
    threads: job_resource("models", "threads")
    resources:
        mem_mb=job_resource("models", "mem_mb"),
        runtime=job_resource("models", "runtime"),
    params:
        seed=config["seed"],
        max_leaf_nodes=config["models"]["max_leaf_nodes"],
        cv_folds=config["models"]["cv_folds"],
    script:
        "../scripts/fit_outcome_models.py"


rule score_bayes_models:
    input:
        test=rules.simulate_setting.output.test,
        code=script_code("score_bayes_models"),
    output:
        scores="results/models/{dataset}/bayes_scores.parquet",
    log:
        "logs/score_bayes_models/{dataset}.log",
    benchmark:
        "benchmarks/output/score_bayes_models/{dataset}.tsv"
    wildcard_constraints:
        dataset=SIMULATION_PATTERN,
    conda:
        "../envs/compute.yaml"
    script:
        "../scripts/score_bayes_models.py"
