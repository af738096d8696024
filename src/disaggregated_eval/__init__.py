"""Controlled disaggregated evaluation of algorithmic fairness.

Library and reproduction pipeline for Pfohl et al. (2025), *Understanding challenges to the
interpretation of disaggregated evaluations of algorithmic fairness*.

Submodules
----------
validation
    Input checks shared by every public function (and the message helpers ``brief``, ``check_nesting``).
seeds
    Reproducible seed trees (``numpy.random.SeedSequence``) keyed by names.
io
    Atomic writes of tables and JSON.
simulate
    The paper's data generating processes (DGPs) and their closed-form oracles.
metrics
    Weighted performance metrics that match scikit-learn.
engine
    The resampling engine: the vectorised, paired bootstrap and the permutation tests.
evaluation
    Controlled evaluation: subgroup metrics, weighted population metric ``M_a``, controlled
    difference ``T_a``, relative and shared-space comparisons, as tidy tables.
model_fitting
    The grid-searched HistGradientBoosting every model is fitted with, its checks and thread limits.
outcome_models, weight_models
    Outcome models and weight models ``P(A | V)`` (cross-fitting; estimators matched to ``V``).
calibration
    Calibration curves with Wilson intervals.
plots
    The paper's figures from the tidy tables.
acs
    ACS PUMS acquisition, extraction and task definitions (folktables).
"""

__version__ = "0.1.0"
