"""The project's vocabulary: every name list and display label, written once.

Model types, control variables, weight sources, comparisons, metrics (order, labels, direction: read
off the metric records of :mod:`.registry`), fairness statistics, simulation settings and ACS tasks
(ids and display names), resampling schemes. This module and the registry import nothing heavy (no
numpy, pandas, scikit-learn, folktables), so that ``workflow/rules/common.smk``,
the rule scripts, :mod:`disaggregated_eval.plots` and the command-line tool can import it cheaply,
and an edit of a computational module does not rerun every figure job.

Sources: paper section 3 (model types, ``V``), section 4.2 and Supplementary A.1 (comparisons),
Supplementary A.3 (metrics, settings), A.4 (ACS tasks); ``docs/method.md``.
"""

from __future__ import annotations

from . import registry as _registry

__all__ = [
    "MODEL_TYPES",
    "BAYES_MODELS",
    "SIMULATION_MODELS",
    "RELATIVE_TO",
    "ACS_RELATIVE_TO",
    "MODEL_LABELS",
    "CONTROLS",
    "WEIGHT_CONTROLS",
    "CONTROL_LABELS",
    "WEIGHT_SOURCES",
    "COMPARISONS",
    "OVERALL",
    "MISSING_LEVEL",
    "METRICS",
    "PIPELINE_METRICS",
    "AUDIT_METRICS",
    "FIGURE_METRICS",
    "RELATIVE_METRICS",
    "RELATIVE_FIGURE_MODELS",
    "SCORE_METRICS",
    "HEADLINE_ORDER",
    "FAIRNESS_STATISTICS",
    "FAMILY_STATISTICS",
    "FAIRNESS_LABELS",
    "DISPARITY_METRICS",
    "FOUR_FIFTHS_BAND",
    "THRESHOLD_METRICS",
    "CALIBRATION_STATISTICS",
    "MIN_DENOMINATOR",
    "CAVEAT_UNDEFINED",
    "CAVEAT_DEGENERATE",
    "CAVEATS",
    "METRIC_LABELS",
    "METRIC_HIGHER_IS_BETTER",
    "MAIN_SETTINGS",
    "SELECTION_SETTINGS",
    "SETTINGS",
    "SETTING_LABELS",
    "SIMULATION_GROUP_LABELS",
    "TASKS",
    "TASK_LABELS",
    "ACS_GROUP_LABELS",
    "DATASET_LABELS",
    "RESAMPLING_SCHEMES",
    "TEST_METHODS",
    "ADJUST_SCOPES",
    "HORIZONS",
    "STATES",
    "PUMS_RENAMED_COLUMNS",
]

# ---- models ------------------------------------------------------------------------------------
#: Fitted outcome model types, always all three (paper section 5, Supplementary A.3).
MODEL_TYPES: tuple[str, ...] = ("x", "xa", "xa_stratified")
#: Bayes-optimal scores of the simulations: ``E[Y | X]`` and ``E[Y | X, A]``.
BAYES_MODELS: tuple[str, ...] = ("bayes_x", "bayes_xa")
#: Every model evaluated in the simulation study.
SIMULATION_MODELS: tuple[str, ...] = MODEL_TYPES + BAYES_MODELS
#: Relative comparisons of the simulation study, model -> reference (paper Figure B1).
RELATIVE_TO: dict[str, str] = {"xa": "x", "xa_stratified": "x", "bayes_xa": "bayes_x"}
#: Relative comparisons of the ACS study (paper Figure B25).
ACS_RELATIVE_TO: dict[str, str] = {"xa": "x", "xa_stratified": "x"}
#: Display names of model types.
MODEL_LABELS: dict[str, str] = {
    "x": "Covariates: X",
    "xa": "Covariates: X, A",
    "xa_stratified": "Stratified by A",
    "bayes_x": "Bayes-optimal: E[Y|X]",
    "bayes_xa": "Bayes-optimal: E[Y|X,A]",
}

# ---- control variables, weights, comparisons ---------------------------------------------------
#: Control variables ``V`` in the order the paper plots them (Figure 1).
CONTROLS: tuple[str, ...] = ("none", "X", "Y", "R")
#: Control variables with a weight model ``P(A | V)``.
WEIGHT_CONTROLS: tuple[str, ...] = ("X", "Y", "R")
#: Display names of control variables.
CONTROL_LABELS: dict[str, str] = {
    "none": "Control: none",
    "X": "Control: X",
    "Y": "Control: Y",
    "R": "Control: R",
}
#: Sources of ``P(A | V)``: estimated (paper Algorithm 2) and, for simulations, oracle (Algorithm 1).
WEIGHT_SOURCES: tuple[str, ...] = ("estimated", "oracle")
#: The ``comparison`` column of the tidy metrics table.
COMPARISONS: tuple[str, ...] = (
    "absolute",
    "relative",
    "weighted_population",
    "controlled_difference",
    "shared_space",
)
#: Label of the whole population in every table (never a subgroup label).
OVERALL = "overall"
#: Name of the level of an attribute that holds the rows with a missing value (the audit's
#: ``missing_group="level"``).
MISSING_LEVEL = "missing"

# ---- metrics -----------------------------------------------------------------------------------
#: Every metric the library computes, in canonical order (one record each: :mod:`.registry`).
METRICS: tuple[str, ...] = tuple(r.name for r in _registry.METRIC_RECORDS)
#: Metrics of the paper's pipeline tables (Supplementary A.3 plus the predicted-positive rate).
PIPELINE_METRICS: tuple[str, ...] = tuple(r.name for r in _registry.METRIC_RECORDS if r.pipeline)
#: The audit's default metric list (the others, e.g. ``balanced_accuracy``, through ``--metrics``).
AUDIT_METRICS: tuple[str, ...] = tuple(r.name for r in _registry.METRIC_RECORDS if r.audit_default)
#: Metric order of the per-metric figures (B4-B10, B11-B17, B18-B24, B27-B33, B34-B40).
FIGURE_METRICS: tuple[str, ...] = (
    "log_loss",
    "auc",
    "sensitivity",
    "specificity",
    "net_benefit",
    "precision",
    "label_rate",
)
#: Metrics of the relative-performance figures B1 and B25.
RELATIVE_METRICS: tuple[str, ...] = ("log_loss", "auc", "sensitivity", "specificity", "net_benefit")
#: Compared models of the relative-performance figures B1 and B25 (each minus its reference ``x``).
RELATIVE_FIGURE_MODELS: tuple[str, ...] = ("xa", "xa_stratified")
#: Metrics that need a score, not only a hard prediction (left out for 0/1 predictions).
SCORE_METRICS: tuple[str, ...] = tuple(r.name for r in _registry.METRIC_RECORDS if r.needs_score)
#: The order in which a fairness audit leads with a metric (its terminal summary's headline, with the
#: default metric list): the error rates first, then the rates, the ranking and calibration metrics.
HEADLINE_ORDER: tuple[str, ...] = (
    "false_positive_rate",
    "false_negative_rate",
    "accuracy",
    "predicted_positive_rate",
    "sensitivity",
    "specificity",
    "precision",
    "auc",
    "net_benefit",
    "observed_expected_ratio",
    "mean_predicted_risk",
    "brier_score",
    "label_rate",
    "log_loss",
)
#: Statistics of the audit's fairness summary (``docs/method.md``, "Fairness summary"), in the order shown:
#: fairlearn's demographic-parity and equalized-odds differences and ratios per family of slices, the
#: largest gap of the headline metric over a family, and Aequitas' disparity ratio of each slice to a
#: reference slice (one record each: :data:`.registry.FAIRNESS_RECORDS`).
FAIRNESS_STATISTICS: tuple[str, ...] = tuple(s.name for s in _registry.FAIRNESS_RECORDS)
#: The fairness summary's statistics over a family of slices (all but the disparity ratios to a reference).
FAMILY_STATISTICS: tuple[str, ...] = tuple(s.name for s in _registry.FAIRNESS_RECORDS if s.over == "family")
#: Display name of each fairness statistic.
FAIRNESS_LABELS: dict[str, str] = {s.name: s.label for s in _registry.FAIRNESS_RECORDS}
#: Metrics of the disparity ratios to a reference slice (Aequitas' predicted prevalence, FPR and FNR
#: disparities): the selection rate and the two error rates.
DISPARITY_METRICS: tuple[str, ...] = tuple(r.name for r in _registry.METRIC_RECORDS if "disparity_ratio" in r.fairness)
#: The four-fifths rule (US EEOC; Aequitas' default fairness threshold 0.8): a disparity ratio outside
#: this band is a disparity.
FOUR_FIFTHS_BAND: tuple[float, float] = (0.8, 1.25)
#: Metrics of the threshold analysis: selection rate, true positive rate, false positive rate.
THRESHOLD_METRICS: tuple[str, ...] = ("predicted_positive_rate", "sensitivity", "false_positive_rate")
#: Statistics of the audit's per-slice calibration summary: the plug-in expected calibration error (no
#: interval), the debiased root-mean-square calibration error (an interval that reaches 0), the
#: observed/expected ratio.
CALIBRATION_STATISTICS: tuple[str, ...] = ("expected_calibration_error", "calibration_error", "observed_expected_ratio")
#: The fewest rows in a metric's own denominator (positives, negatives, predicted positives, the smaller
#: class for the AUC) for a reported estimate: the audit's ``min_denominator`` default, and the rule of
#: the selection study and its figure (a rate of 3 predicted positives has no trustworthy interval).
MIN_DENOMINATOR = 10
#: ``caveat`` of an estimate that is undefined (NaN) on the data themselves (e.g. precision without
#: predicted positives).
CAVEAT_UNDEFINED = "undefined"
#: ``caveat`` of an estimate whose bootstrap replicates are all one value (a zero-width interval,
#: no evidence of anything).
CAVEAT_DEGENERATE = "degenerate"
#: The ``caveat`` values other than ``""`` (an ordinary estimate), in the order the figures explain them.
CAVEATS: tuple[str, ...] = (CAVEAT_DEGENERATE, CAVEAT_UNDEFINED)
#: Display name of each metric.
METRIC_LABELS: dict[str, str] = {r.name: r.label for r in _registry.METRIC_RECORDS}
#: Whether a larger value is better; ``None`` for descriptive rates without a direction.
METRIC_HIGHER_IS_BETTER: dict[str, bool | None] = {r.name: r.higher_is_better for r in _registry.METRIC_RECORDS}

# ---- datasets ----------------------------------------------------------------------------------
#: The seven main simulation settings, in the paper's order (Supplementary A.3.1), with display names.
_MAIN_SETTING_LABELS: dict[str, str] = {
    "covariate_shift": "Covariate Shift",
    "outcome_shift": "Outcome Shift",
    "complex_causal_shift": "Complex Causal",
    "low_overlap_causal": "Separable",
    "anticausal_label_shift": "Label Shift",
    "anticausal_presentation_shift": "Presentation Shift",
    "complex_anticausal_shift": "Complex Anticausal",
}
#: Selection variants of ``complex_causal_shift`` (Supplementary A.2, A.3.1).
_SELECTION_SETTING_LABELS: dict[str, str] = {
    "selection_x": "Selection on X",
    "selection_y": "Selection on Y",
    "selection_ya": "Selection on Y and A",
}
MAIN_SETTINGS: tuple[str, ...] = tuple(_MAIN_SETTING_LABELS)
SELECTION_SETTINGS: tuple[str, ...] = tuple(_SELECTION_SETTING_LABELS)
#: Every simulation setting id: main settings, then selection variants.
SETTINGS: tuple[str, ...] = MAIN_SETTINGS + SELECTION_SETTINGS
#: Display name of each simulation setting.
SETTING_LABELS: dict[str, str] = {**_MAIN_SETTING_LABELS, **_SELECTION_SETTING_LABELS}
#: Display labels of the simulated group codes ``a = 0, 1``.
SIMULATION_GROUP_LABELS: tuple[str, ...] = ("A = 0", "A = 1")

#: ACS dataset id -> folktables task name (Supplementary A.4).
TASKS: dict[str, str] = {"acs_income": "ACSIncome", "acs_public_coverage": "ACSPublicCoverage"}
#: Display name of each ACS task.
TASK_LABELS: dict[str, str] = dict(TASKS)
#: ACS race/ethnicity groups, codes 0..5 in this (alphabetical) order (Supplementary A.4).
ACS_GROUP_LABELS: tuple[str, ...] = ("Asian", "Black", "Hispanic", "Multiracial", "Other", "White")
#: Display name of every dataset id (simulation settings and ACS tasks).
DATASET_LABELS: dict[str, str] = {**SETTING_LABELS, **TASK_LABELS}

# ---- bootstrap ---------------------------------------------------------------------------------
#: Resampling schemes of the bootstrap (``docs/method.md``, "Bootstrap"): ``population`` draws
#: the whole evaluation set with replacement (group sizes vary; paired across groups), and
#: ``within_group`` draws each group's rows within the group (group sizes fixed).
RESAMPLING_SCHEMES: tuple[str, ...] = ("population", "within_group")
#: Tests of the audit's comparisons without an exact test (option ``test_method``): ``auto`` (Monte-Carlo
#: permutations, or the large-sample z-test with the paired bootstrap's standard error where permutations
#: would cost too much and the comparison is large: ``audit.comparison_tests.plan_tests``), ``permutation``
#: (always permutations) and ``bootstrap`` (always the large-sample test).
TEST_METHODS: tuple[str, ...] = ("auto", "permutation", "bootstrap")
#: Families of the multiple-comparison adjustment of the audit's tests (option ``adjust_scope``): ``metric``
#: (one model, kind of comparison and metric), ``model`` (one model and kind, every metric together) and
#: ``audit`` (one family of every test of the audit: every model, metric and kind;
#: ``audit.comparison_families.family_keys``).
ADJUST_SCOPES: tuple[str, ...] = ("metric", "model", "audit")

# ---- ACS PUMS files ----------------------------------------------------------------------------
#: Survey horizons offered by the Census Bureau (and folktables).
HORIZONS: tuple[str, ...] = ("1-Year", "5-Year")
#: State abbreviations with PUMS person files (folktables' ``state_list``).
STATES: tuple[str, ...] = tuple(
    (
        "AL AK AZ AR CA CO CT DE FL GA HI ID IL IN IA KS KY LA ME MD MA MI MN MS MO MT NE NV NH NJ NM "
        "NY NC ND OH OK OR PA RI SC SD TN TX UT VT VA WA WV WI WY PR"
    ).split()
)
#: PUMS person-file columns that the Census Bureau renamed: old name -> (new name, first survey year
#: with the new name). folktables' ``ACSIncome`` still reads ``RELP``, which is ``RELSHIPP`` from 2019 on.
PUMS_RENAMED_COLUMNS: dict[str, tuple[str, int]] = {"RELP": ("RELSHIPP", 2019)}
