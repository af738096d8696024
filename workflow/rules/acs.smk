# Data stage of the ACS PUMS study (paper Supplementary A.4). The person file lives in acs.data_root
# and is never a Snakemake output (Snakemake deletes outputs before rerunning a job): obtain_pums_file
# downloads it if missing and writes a small validation report instead. The file is not an input
# either (it may not exist before the first run, and a changing input set would rerun the whole study
# after the download): after replacing it, run with `--forcerun obtain_pums_file`.
# On a cluster the download runs on the submitting node, which has network access.


localrules:
    obtain_pums_file,


rule obtain_pums_file:
    input:
        code=script_code("obtain_pums_file"),
    output:
        report="results/acs/source/validation.json",
    log:
        "logs/obtain_pums_file/validation.log",
    benchmark:
        "benchmarks/output/obtain_pums_file/validation.tsv"
    conda:
        "../envs/acs.yaml"
    params:
        data_root=config["acs"]["data_root"],
        year=config["acs"]["year"],
        horizon=config["acs"]["horizon"],
        state=config["acs"]["state"],
        download=config["acs"]["download"],
        tasks=ACS_DATASETS,
    script:
        "../scripts/obtain_pums_file.py"


rule extract_acs_task:
    input:
        validation=rules.obtain_pums_file.output.report,
        code=script_code("extract_acs_task"),
    output:
        train="results/data/{dataset}/train.parquet",
        test="results/data/{dataset}/test.parquet",
        schema="results/data/{dataset}/schema.json",
        counts="results/data/{dataset}/group_counts.csv",
    log:
        "logs/extract_acs_task/{dataset}.log",
    benchmark:
        "benchmarks/output/extract_acs_task/{dataset}.tsv"
    wildcard_constraints:
        dataset=ACS_PATTERN,
    conda:
        "../envs/acs.yaml"
    threads: job_resource("extract", "threads")
    resources:
        mem_mb=job_resource("extract", "mem_mb"),
        runtime=job_resource("extract", "runtime"),
    params:
        seed=config["seed"],
        data_root=config["acs"]["data_root"],
        year=config["acs"]["year"],
        horizon=config["acs"]["horizon"],
        state=config["acs"]["state"],
        test_size=config["acs"]["test_size"],
    script:
        "../scripts/extract_acs_task.py"


rule tabulate_acs_cohort:
    input:
        counts=expand(rules.extract_acs_task.output.counts, dataset=ACS_DATASETS),
        code=script_code("tabulate_acs_cohort"),
    output:
        csv="results/tables/acs_cohort.csv",
        md="results/tables/acs_cohort.md",
    log:
        "logs/tabulate_acs_cohort/acs_cohort.log",
    benchmark:
        "benchmarks/output/tabulate_acs_cohort/acs_cohort.tsv"
    conda:
        "../envs/acs.yaml"
    params:
        datasets=ACS_DATASETS,
    script:
        "../scripts/tabulate_acs_cohort.py"
