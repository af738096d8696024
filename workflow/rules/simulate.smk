# Data stage of the simulation study: one train/test draw per setting (paper section 3.1, Supplementary A.3.1).


rule simulate_setting:
    input:
        code=script_code("simulate_setting"),
    output:
        train="results/data/{dataset}/train.parquet",
        test="results/data/{dataset}/test.parquet",
        schema="results/data/{dataset}/schema.json",
    log:
        "logs/simulate_setting/{dataset}.log",
    benchmark:
        "benchmarks/output/simulate_setting/{dataset}.tsv"
    wildcard_constraints:
        dataset=SIMULATION_PATTERN,
    conda:
        "../envs/compute.yaml"
    params:
        seed=config["seed"],
        n_train=config["simulation"]["n_train"],
        n_test=config["simulation"]["n_test"],
    script:
        "../scripts/simulate_setting.py"
