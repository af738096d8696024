# Figures of the paper (Figure 1, Supplementary Figures B1-B40) from the collected tables;
# {figure} is the paper's figure id (figure_1, figure_B1, ...), {study} the output folder
# (simulation, acs).


rule plot_controlled_differences:
    input:
        metrics=study_table("metrics"),
        code=script_code("plot_controlled_differences"),
    output:
        png=report(
            "figures/{study}/{figure}.png",
            caption="../report/controlled_differences.rst",
            category="{study}",
            subcategory="Controlled differences T_a",
        ),
        pdf="figures/{study}/{figure}.pdf",
    log:
        "logs/plot_controlled_differences/{study}/{figure}.log",
    benchmark:
        "benchmarks/output/plot_controlled_differences/{study}/{figure}.tsv"
    wildcard_constraints:
        figure=figure_pattern("controlled"),
    conda:
        "../envs/figures.yaml"
    params:
        metric=figure_param("metric"),
        models=figure_param("models"),
        datasets=figure_param("datasets"),
    script:
        "../scripts/plot_controlled_differences.py"


rule plot_weighted_metrics:
    input:
        metrics=study_table("metrics"),
        code=script_code("plot_weighted_metrics"),
    output:
        png=report(
            "figures/{study}/{figure}.png",
            caption="../report/weighted_metrics.rst",
            category="{study}",
            subcategory="Weighted population metrics M_a",
        ),
        pdf="figures/{study}/{figure}.pdf",
    log:
        "logs/plot_weighted_metrics/{study}/{figure}.log",
    benchmark:
        "benchmarks/output/plot_weighted_metrics/{study}/{figure}.tsv"
    wildcard_constraints:
        figure=figure_pattern("weighted"),
    conda:
        "../envs/figures.yaml"
    params:
        metric=figure_param("metric"),
        models=figure_param("models"),
        datasets=figure_param("datasets"),
    script:
        "../scripts/plot_weighted_metrics.py"


rule plot_shared_space_metrics:
    input:
        metrics=study_table("metrics"),
        code=script_code("plot_shared_space_metrics"),
    output:
        png=report(
            "figures/{study}/{figure}.png",
            caption="../report/shared_space_metrics.rst",
            category="{study}",
            subcategory="Shared-space metrics (Cai et al.)",
        ),
        pdf="figures/{study}/{figure}.pdf",
    log:
        "logs/plot_shared_space_metrics/{study}/{figure}.log",
    benchmark:
        "benchmarks/output/plot_shared_space_metrics/{study}/{figure}.tsv"
    wildcard_constraints:
        figure=figure_pattern("shared_space"),
    conda:
        "../envs/figures.yaml"
    params:
        metric=figure_param("metric"),
        models=figure_param("models"),
        datasets=figure_param("datasets"),
    script:
        "../scripts/plot_shared_space_metrics.py"


rule plot_relative_performance:
    input:
        metrics=study_table("metrics"),
        code=script_code("plot_relative_performance"),
    output:
        png=report(
            "figures/{study}/{figure}.png",
            caption="../report/relative_performance.rst",
            category="{study}",
            subcategory="Subgroup-aware vs subgroup-agnostic",
        ),
        pdf="figures/{study}/{figure}.pdf",
    log:
        "logs/plot_relative_performance/{study}/{figure}.log",
    benchmark:
        "benchmarks/output/plot_relative_performance/{study}/{figure}.tsv"
    wildcard_constraints:
        figure=figure_pattern("relative"),
    conda:
        "../envs/figures.yaml"
    params:
        metrics=figure_param("metrics"),
        models=figure_param("models"),
        datasets=figure_param("datasets"),
    script:
        "../scripts/plot_relative_performance.py"


rule plot_calibration_curves:
    input:
        calibration=study_table("calibration"),
        code=script_code("plot_calibration_curves"),
    output:
        png=report(
            "figures/{study}/{figure}.png",
            caption="../report/calibration_curves.rst",
            category="{study}",
            subcategory="Calibration curves",
        ),
        pdf="figures/{study}/{figure}.pdf",
    log:
        "logs/plot_calibration_curves/{study}/{figure}.log",
    benchmark:
        "benchmarks/output/plot_calibration_curves/{study}/{figure}.tsv"
    wildcard_constraints:
        figure=figure_pattern("calibration"),
    conda:
        "../envs/figures.yaml"
    params:
        models=figure_param("models"),
        datasets=figure_param("datasets"),
    script:
        "../scripts/plot_calibration_curves.py"
