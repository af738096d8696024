# Helpers of the workflow: constants, wildcard constraints, input and parameter functions.
# The other rule files hold only rules.
import re
from pathlib import Path

from disaggregated_eval import vocabulary
from disaggregated_eval_workflow import code_files

# Names come from the vocabulary module (docs/design.md "Terms"), which imports nothing heavy.
# Model types: fitted for every dataset; Bayes-optimal for simulations.
MODELS = list(vocabulary.MODEL_TYPES)
BAYES_MODELS = list(vocabulary.BAYES_MODELS)
# Relative comparisons: model -> its reference model.
RELATIVE_TO = dict(vocabulary.RELATIVE_TO)
ACS_RELATIVE_TO = dict(vocabulary.ACS_RELATIVE_TO)
# Metric order of the per-metric figures (B4-B10, B11-B17, B18-B24, B27-B33, B34-B40).
METRICS = list(vocabulary.FIGURE_METRICS)
# Figures B1 and B25: compared models and metrics.
RELATIVE_MODELS = list(vocabulary.RELATIVE_FIGURE_MODELS)
RELATIVE_METRICS = list(vocabulary.RELATIVE_METRICS)

MAIN_SETTINGS = list(config["simulation"]["settings"])
SELECTION_SETTINGS = list(config["simulation"]["selection_settings"])
SIMULATION_DATASETS = MAIN_SETTINGS + SELECTION_SETTINGS
ACS_DATASETS = list(config["acs"]["tasks"])


def alternatives(names):
    """Regular expression matching exactly one of ``names`` (or nothing if empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


wildcard_constraints:
    dataset=alternatives(SIMULATION_DATASETS + ACS_DATASETS),
    study="simulation|acs",


SIMULATION_PATTERN = alternatives(SIMULATION_DATASETS)
ACS_PATTERN = alternatives(ACS_DATASETS)


def is_simulation(dataset):
    return dataset in SIMULATION_DATASETS


def study_of(dataset):
    return "simulation" if is_simulation(dataset) else "acs"


# Code inputs: the library (and plumbing) files a rule's script imports, with every module those
# import in turn (disaggregated_eval_workflow.code_files walks the imports of the source), so that an
# edit of one of them reruns the rules that use it, and only those.
# REPO: the checkout (workflow/Snakefile); the paths are relative to the working directory, absolute
# when the checkout is elsewhere (this workflow used as a module).
def script_code(script):
    """Source files that ``workflow/scripts/<script>.py`` imports, recursively (a rule's ``code``)."""
    return code_files.script_files(
        REPO / "workflow" / "scripts" / f"{script}.py", root=REPO, workdir=Path.cwd()
    )


# ---------------------------------------------------------------------------------------------
# Input functions: pick the upstream rule by study (simulation settings vs ACS tasks).
def dataset_file(pattern, wildcards):
    """``pattern`` (an upstream rule's output) for the dataset named by the wildcard."""
    return expand(pattern, dataset=wildcards.dataset)[0]


def data_file(key):
    """Output ``key`` (train, test, schema) of the data stage of the dataset."""

    def get(wildcards):
        upstream = (
            rules.simulate_setting
            if is_simulation(wildcards.dataset)
            else rules.extract_acs_task
        )
        return dataset_file(getattr(upstream.output, key), wildcards)

    return get


def score_files(wildcards):
    """Scores of every model type evaluated on the dataset (Bayes scores for simulations)."""
    files = {"scores": dataset_file(rules.fit_outcome_models.output.scores, wildcards)}
    if is_simulation(wildcards.dataset):
        files["bayes_scores"] = dataset_file(
            rules.score_bayes_models.output.scores, wildcards
        )
    return files


def weight_files(wildcards):
    """Long weight tables: estimated for every dataset, oracle for simulations."""
    files = {
        "weights_estimated": dataset_file(
            rules.fit_weight_models.output.weights, wildcards
        )
    }
    if is_simulation(wildcards.dataset):
        files["weights_oracle"] = dataset_file(
            rules.compute_oracle_weights.output.weights, wildcards
        )
    return files


def evaluated_models(wildcards):
    if is_simulation(wildcards.dataset):
        return MODELS + BAYES_MODELS
    return MODELS


def relative_to(wildcards):
    return RELATIVE_TO if is_simulation(wildcards.dataset) else ACS_RELATIVE_TO


def weight_fit_population(wildcards):
    """Where P(A | X) and P(A | Y) are fitted: cross-fitted on the test set for the selection
    settings (their training split is the selected sample S = 1, paper Supplementary A.2), else on
    the training split."""
    return "test" if wildcards.dataset in vocabulary.SELECTION_SETTINGS else "train"


def weight_sources(wildcards):
    return (
        list(vocabulary.WEIGHT_SOURCES)
        if is_simulation(wildcards.dataset)
        else ["estimated"]
    )


def job_resource(group, key):
    """Threads / mem_mb / runtime of a heavy job from ``config["resources"][study][group]``."""

    def get(wildcards):
        return config["resources"][study_of(wildcards.dataset)][group][key]

    return get


# ---------------------------------------------------------------------------------------------
# Figures: id -> study, kind, parameters. Paper numbering (Figure 1, Supplementary Figures B1-B40).
def _figure_catalog():
    catalog = {
        "figure_1": dict(
            study="simulation", kind="controlled", metric="log_loss", models=["x", "xa"]
        ),
        "figure_B1": dict(study="simulation", kind="relative", models=RELATIVE_MODELS),
        "figure_B2": dict(
            study="simulation", kind="calibration", datasets=MAIN_SETTINGS
        ),
        "figure_B25": dict(study="acs", kind="relative", models=RELATIVE_MODELS),
        "figure_B26": dict(study="acs", kind="calibration", datasets=ACS_DATASETS),
    }
    if SELECTION_SETTINGS:
        catalog["figure_B3"] = dict(
            study="simulation", kind="calibration", datasets=SELECTION_SETTINGS
        )
    for i, metric in enumerate(METRICS):
        catalog[f"figure_B{4 + i}"] = dict(
            study="simulation", kind="controlled", metric=metric
        )
        catalog[f"figure_B{11 + i}"] = dict(
            study="simulation", kind="weighted", metric=metric
        )
        catalog[f"figure_B{18 + i}"] = dict(
            study="simulation", kind="shared_space", metric=metric
        )
        catalog[f"figure_B{27 + i}"] = dict(
            study="acs", kind="controlled", metric=metric
        )
        catalog[f"figure_B{34 + i}"] = dict(study="acs", kind="weighted", metric=metric)
    for figure in catalog.values():
        figure.setdefault("models", list(MODELS))
        figure.setdefault("metric", None)
        figure.setdefault("metrics", RELATIVE_METRICS)
        default = MAIN_SETTINGS if figure["study"] == "simulation" else ACS_DATASETS
        figure.setdefault("datasets", list(default))
    return catalog


FIGURES = _figure_catalog()


def figure_pattern(kind):
    return alternatives(
        sorted(f for f, spec in FIGURES.items() if spec["kind"] == kind)
    )


def figure_param(key):
    """Parameter ``key`` of the figure named by the ``figure`` wildcard."""

    def get(wildcards):
        spec = FIGURES[wildcards.figure]
        if spec["study"] != wildcards.study:
            raise ValueError(f"{wildcards.figure} belongs to figures/{spec['study']}/")
        return spec[key]

    return get


def figure_files(study):
    """Every figure of a study, as PNG and PDF."""
    return [
        f"figures/{study}/{figure}.{ext}"
        for figure, spec in sorted(FIGURES.items())
        if spec["study"] == study
        for ext in ("png", "pdf")
    ]


def study_datasets(wildcards):
    """Datasets of the study named by the ``study`` wildcard, in display order."""
    return SIMULATION_DATASETS if wildcards.study == "simulation" else ACS_DATASETS


def study_files(pattern):
    """``pattern`` (an upstream rule's output) for every dataset of the study of the wildcards."""

    def get(wildcards):
        return expand(pattern, dataset=study_datasets(wildcards))

    return get


def study_tables(study):
    """The collected tables of a study: metrics (parquet, CSV) and calibration curves."""
    return [
        *expand(rules.collect_metrics.output, study=study),
        *expand(rules.collect_calibration.output, study=study),
    ]


def study_table(key):
    """Collected table ``key`` (metrics, calibration) of the study named by the wildcard."""
    pattern = {
        "metrics": rules.collect_metrics.output.parquet,
        "calibration": rules.collect_calibration.output.calibration,
    }[key]

    def get(wildcards):
        return expand(pattern, study=wildcards.study)[0]

    return get
