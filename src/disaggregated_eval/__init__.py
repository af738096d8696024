"""Controlled disaggregated evaluation of algorithmic fairness.

Library and reproduction pipeline for Pfohl et al. (2025), *Understanding challenges to the
interpretation of disaggregated evaluations of algorithmic fairness*.

Submodules
----------
seeds
    Reproducible seed trees (``numpy.random.SeedSequence``) keyed by names.
io
    Atomic writes of tables and JSON.
simulate
    The paper's data generating processes (DGPs) and their closed-form oracles.
metrics
    Weighted performance metrics that match scikit-learn.
bootstrap
    The vectorised, paired percentile bootstrap engine.
evaluation
    Controlled evaluation: subgroup metrics, weighted population metric ``M_a``, controlled
    difference ``T_a``, relative and shared-space comparisons, as tidy tables.
models
    Outcome models and weight models ``P(A | V)`` (HistGradientBoosting, grid search, cross-fitting).
calibration
    Calibration curves with Wilson intervals.
plots
    The paper's figures from the tidy tables.
acs
    ACS PUMS acquisition, extraction and task definitions (folktables).
"""

__version__ = "0.1.0"
