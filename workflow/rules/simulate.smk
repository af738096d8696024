# Data stage of the simulation study: one train/test draw per setting (SPEC 2).


rule simulate_setting:
    input:
        code=library_files("seeds", "simulate"),
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
    params:
        seed=config["seed"],
        n_train=config["simulation"]["n_train"],
        n_test=config["simulation"]["n_test"],
    conda:
        "../../envs/disaggregated_eval.yaml"
    script:
        "../scripts/simulate_setting.py"
