"""Options of ``disagg-eval audit``: one definition for the Python function, the CLI and YAML files.

Every option is a field of :class:`AuditOptions` with its default and its help text; the command
line (:mod:`disaggregated_eval.audit.cli`) builds its ``--help`` from these fields, a YAML file given
with ``--config`` carries the same names, and :func:`disaggregated_eval.audit.audit` takes them as
keyword arguments. See ``docs/audit.md``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from .. import vocabulary

__all__ = ["AuditOptions", "DEFAULT_SEED", "option_help"]

#: Seed used when none is given (printed by the CLI and written to the manifest).
DEFAULT_SEED = 20250101


def _opt(default, help: str, **kwargs):
    if isinstance(default, (list, dict, tuple)):
        value = default
        return field(default_factory=lambda: type(value)(value), metadata={"help": help, **kwargs})
    return field(default=default, metadata={"help": help, **kwargs})


@dataclass
class AuditOptions:
    """Every option of an audit, with its default (see ``docs/audit.md``)."""

    label: str = _opt(
        "", "column holding the binary label (0/1, or two values such as yes/no given with --positive-label)"
    )
    scores: list[str] = _opt(
        [],
        "column(s) holding each model's score in [0, 1] (or hard 0/1 predictions); several columns are several models, compared with the first",
    )
    groups: list[str] = _opt([], "protected attribute column(s); every level and every intersection becomes a slice")
    positive_label: str | None = _opt(None, "value of the label column that means 1, when the label is not 0/1")
    intersections: int | None = _opt(
        None, "largest number of attributes crossed in an intersection (default: all of them; 1 = no intersections)"
    )
    min_group_size: int = _opt(30, "a slice with fewer rows gets no point estimate, only its interval")
    min_denominator: int = _opt(
        10,
        "a metric whose own denominator (positives, negatives, predicted positives, or the smaller class for AUC) is smaller gets no point estimate",
    )
    threshold: float = _opt(0.5, "decision threshold: predicted positive when score >= threshold")
    preference_threshold: float = _opt(
        0.5, "preference threshold of the net benefit (odds t / (1 - t) weigh false positives against true positives)"
    )
    metrics: list[str] = _opt(list(vocabulary.METRICS), "metrics to compute")
    n_resamples: int = _opt(
        10_000, "bootstrap resamples (paired: every slice, metric, model and comparison on the same resamples)"
    )
    resampling: str = _opt(
        "population",
        "bootstrap scheme: population (whole file, slice sizes vary) or within_group (within each intersection cell, sizes fixed)",
        choices=vocabulary.RESAMPLING_SCHEMES,
    )
    confidence: float = _opt(0.95, "level of the percentile intervals and of the simultaneous bands")
    seed: int = _opt(DEFAULT_SEED, "root seed of every random draw (bootstrap, permutations, cross-fitting)")
    adjust: str = _opt(
        "holm",
        "multiple-comparison adjustment of the p-values within the family of one metric",
        choices=("holm", "bh", "none"),
    )
    n_permutations: int = _opt(10_000, "permutations per permutation test (0: no p-values)")
    controls: list[str] = _opt(
        ["none"], "control variables V of the controlled evaluation, among none, X, Y, R (X needs --features)"
    )
    features: list[str] = _opt([], "feature columns for the control variable X")
    sample_weight: str | None = _opt(None, "column of non-negative row weights (every metric is weighted)")
    missing_group: str = _opt(
        "level",
        "rows with a missing attribute value: level (a level of its own, named 'missing') or drop (reported)",
        choices=("level", "drop"),
    )
    max_leaf_nodes: list[int] = _opt(
        [10, 25, 50],
        "grid of max_leaf_nodes of the HistGradientBoosting weight models P(A | V) (paper Supplementary A.3)",
    )
    cv_folds: int = _opt(5, "folds of the grid search of each weight model")
    crossfit_folds: int = _opt(5, "outer folds of the cross-fitting of P(A | V) on the file")
    n_threads: int = _opt(1, "threads of the bootstrap and of the weight-model fits")


def option_help() -> dict[str, str]:
    """Help text of every option, by name (the CLI's ``--help``)."""
    return {f.name: f.metadata["help"] for f in fields(AuditOptions)}
