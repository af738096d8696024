# Helpers of the workflow: constants, wildcard constraints, input and parameter functions.
# The other rule files hold only rules.
import re

# Model types (docs/design.md "Terms"): fitted for every dataset; Bayes-optimal for simulations.
MODELS = ["x", "xa", "xa_stratified"]
BAYES_MODELS = ["bayes_x", "bayes_xa"]
# Relative comparisons: model -> its reference model.
RELATIVE_TO = {"xa": "x", "xa_stratified": "x", "bayes_xa": "bayes_x"}
ACS_RELATIVE_TO = {"xa": "x", "xa_stratified": "x"}
# Metric order of the per-metric figures (B4-B10, B11-B17, B18-B24, B27-B33, B34-B40).
METRICS = [
    "log_loss",
    "auc",
    "sensitivity",
    "specificity",
    "net_benefit",
    "precision",
    "label_rate",
]
# Figures B1 and B25: compared models and metrics (paper B1: log loss, AUC, sensitivity, specificity,
# net benefit).
RELATIVE_MODELS = ["xa", "xa_stratified"]
RELATIVE_METRICS = ["log_loss", "auc", "sensitivity", "specificity", "net_benefit"]

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


# Modules the plotting scripts import (plots takes its labels from metrics, simulate, acs and evaluation).
PLOT_MODULES = ("plots", "metrics", "simulate", "acs", "evaluation", "bootstrap", "seeds")


def library_files(*modules):
    """Library modules a rule's script imports: listed as inputs so that code edits rerun the rule."""
    return [f"src/disaggregated_eval/{m}.py" for m in ("__init__", "io", *modules)]


# ---------------------------------------------------------------------------------------------
# Input functions: pick the upstream rule by study (simulation settings vs ACS tasks).
def dataset_file(pattern, wildcards):
    """``pattern`` (an upstream rule's output) for the dataset named by the wildcard."""
    return expand(pattern, dataset=wildcards.dataset)[0]


def data_file(key):
    """Output ``key`` (train, test, schema) of the data stage of the dataset."""

    def get(wildcards):
        upstream = (
            rules.simulate_setting if is_simulation(wildcards.dataset) else rules.extract_acs_task
        )
        return dataset_file(getattr(upstream.output, key), wildcards)

    return get


def score_files(wildcards):
    """Scores of every model type evaluated on the dataset (Bayes scores for simulations)."""
    files = {"scores": dataset_file(rules.fit_outcome_models.output.scores, wildcards)}
    if is_simulation(wildcards.dataset):
        files["bayes_scores"] = dataset_file(rules.score_bayes_models.output.scores, wildcards)
    return files


def weight_files(wildcards):
    """Long weight tables: estimated for every dataset, oracle for simulations."""
    files = {"weights_estimated": dataset_file(rules.fit_weight_models.output.weights, wildcards)}
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


def weight_sources(wildcards):
    return ["estimated", "oracle"] if is_simulation(wildcards.dataset) else ["estimated"]


def job_resource(group, key):
    """Threads / mem_mb / runtime of a heavy job from ``config["resources"][study][group]``."""

    def get(wildcards):
        return config["resources"][study_of(wildcards.dataset)][group][key]

    return get


# ---------------------------------------------------------------------------------------------
# Figures: id -> study, kind, parameters. Paper numbering (SPEC 6).
def _figure_catalog():
    catalog = {
        "figure_1": dict(
            study="simulation", kind="controlled", metric="log_loss", models=["x", "xa"]
        ),
        "figure_B1": dict(study="simulation", kind="relative", models=RELATIVE_MODELS),
        "figure_B2": dict(study="simulation", kind="calibration", settings=MAIN_SETTINGS),
        "figure_B25": dict(study="acs", kind="relative", models=RELATIVE_MODELS),
        "figure_B26": dict(study="acs", kind="calibration", settings=ACS_DATASETS),
    }
    if SELECTION_SETTINGS:
        catalog["figure_B3"] = dict(
            study="simulation", kind="calibration", settings=SELECTION_SETTINGS
        )
    for i, metric in enumerate(METRICS):
        catalog[f"figure_B{4 + i}"] = dict(study="simulation", kind="controlled", metric=metric)
        catalog[f"figure_B{11 + i}"] = dict(study="simulation", kind="weighted", metric=metric)
        catalog[f"figure_B{18 + i}"] = dict(
            study="simulation", kind="shared_space", metric=metric
        )
        catalog[f"figure_B{27 + i}"] = dict(study="acs", kind="controlled", metric=metric)
        catalog[f"figure_B{34 + i}"] = dict(study="acs", kind="weighted", metric=metric)
    for figure in catalog.values():
        figure.setdefault("models", list(MODELS))
        figure.setdefault("metric", None)
        figure.setdefault("metrics", RELATIVE_METRICS)
        default = MAIN_SETTINGS if figure["study"] == "simulation" else ACS_DATASETS
        figure.setdefault("settings", list(default))
    return catalog


FIGURES = _figure_catalog()


def figure_pattern(kind):
    return alternatives(sorted(f for f, spec in FIGURES.items() if spec["kind"] == kind))


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


def study_table(key):
    """Collected table ``key`` (metrics, calibration) of the study named by the wildcard."""

    def get(wildcards):
        upstream = (
            rules.collect_simulation_tables
            if wildcards.study == "simulation"
            else rules.collect_acs_tables
        )
        return getattr(upstream.output, key)

    return get
