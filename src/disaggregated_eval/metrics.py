"""Weighted performance metrics of a binary classifier, matching scikit-learn.

This is the plain (non-bootstrap) reference of the metric definitions (paper Supplementary A.3;
``docs/method.md``): :func:`compute_metrics` computes the weighted sums below directly and turns
them into metrics by the engine's formulas (:func:`disaggregated_eval.engine.sums.metrics_from_sums`,
their one home), and is tested against scikit-learn. The bootstrap engine
(:mod:`disaggregated_eval.engine`) computes the same sums by a walk in score order and is tested
against :func:`compute_metrics`. Each metric's name, label and direction are in its record
(:mod:`disaggregated_eval.registry`).

With per-row weights ``w >= 0``, labels ``y`` in {0, 1}, scores ``r`` in [0, 1] and
``yhat = 1[r >= threshold]``::

    W  = sum w            Wp = sum w y          Wn = sum w (1 - y)
    TP = sum w y yhat     TN = sum w (1-y)(1-yhat)
    FP = sum w (1-y) yhat FN = sum w y (1-yhat)    PP = sum w yhat

=========================== ============================================= ===================
metric                      definition                                    undefined (NaN) if
=========================== ============================================= ===================
``log_loss``                ``-sum w [y log r + (1-y) log(1-r)] / W``     ``W == 0``
``auc``                     ``sum_{i pos, j neg} w_i w_j (1[r_i > r_j]    ``Wp == 0`` or
                            + 1/2 1[r_i == r_j]) / (Wp Wn)``              ``Wn == 0``
``sensitivity``             ``TP / Wp``                                   ``Wp == 0``
``specificity``             ``TN / Wn``                                   ``Wn == 0``
``precision``               ``TP / PP``                                   ``PP == 0``
``net_benefit``             ``TPR pi - FPR (1 - pi) t / (1 - t)``         ``W == 0``
                            ``= (TP - FP t / (1 - t)) / W``
``label_rate``              ``Wp / W``                                    ``W == 0``
``predicted_positive_rate`` ``PP / W``                                    ``W == 0``
``accuracy``                ``(TP + TN) / W``                             ``W == 0``
``false_positive_rate``     ``FP / Wn`` (``1 - specificity``)             ``Wn == 0``
``false_negative_rate``     ``FN / Wp`` (``1 - sensitivity``)             ``Wp == 0``
``brier_score``             ``sum w (r - y)^2 / W``                       ``W == 0``
``mean_predicted_risk``     ``sum w r / W``                               ``W == 0``
``observed_expected_ratio`` ``Wp / sum w r`` (calibration in the large)   ``sum w r == 0``
``balanced_accuracy``       ``(TP / Wp + TN / Wn) / 2``                   ``Wp == 0`` or
                                                                          ``Wn == 0``
=========================== ============================================= ===================

Here ``pi = Wp / W`` and ``t`` is the preference threshold of the net benefit (Pfohl et al. 2023
parametrisation). Written as ``(TP - FP t/(1-t)) / W`` the net benefit is defined whenever
``W > 0``, even if one class is missing (then its TPR or FPR term is multiplied by zero).

In the log loss, ``r`` and ``1 - r`` are each clipped to ``[eps, 1 - eps]`` with
``eps = np.finfo(np.float64).eps`` before the logarithm, which is what scikit-learn 1.9's
``log_loss`` does (it forms the two columns ``[1 - r, r]`` and clips them). So no row costs more than
``-log(eps)`` = 36.04 nats (``LOG_LOSS_CAP`` of :mod:`disaggregated_eval.engine.sums`): a score of exactly 0
with label 1, or exactly 1 with label 0, costs that, not infinity (``docs/method.md``, "Log loss: the clipping").

Undefined values are NaN, never an exception and never 0, so that a bootstrap resample on which a
metric is undefined is visible and can be counted. An empty input (no rows at all) is an error, not
NaN: it is a caller's mistake, not an undefined metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import vocabulary as _vocabulary
from .engine.sums import (
    LOG_LOSS_EPS,
    METRIC_SLOTS,
    N_METRIC_SLOTS,
    N_TERMS,
    ROW_TERMS,
    TERM_SLOTS,
    metrics_from_sums,
    pointwise_log_loss,
    terms_for,
)
from .registry import check_metric_names
from .validation import check_labels, check_open_unit, check_scores, check_weights

__all__ = [
    "LOG_LOSS_EPS",
    "METRICS",
    "METRIC_HIGHER_IS_BETTER",
    "METRIC_LABELS",
    "check_metric_names",
    "compute_metrics",
    "pointwise_log_loss",
]

#: Names of the available metrics, in their canonical order (one record each: :mod:`.registry`).
METRICS: tuple[str, ...] = _vocabulary.METRICS
#: Display name of each metric.
METRIC_LABELS: dict[str, str] = _vocabulary.METRIC_LABELS
#: Whether a larger value is better; ``None`` for descriptive rates that have no direction.
METRIC_HIGHER_IS_BETTER: dict[str, bool | None] = _vocabulary.METRIC_HIGHER_IS_BETTER


# ----------------------------------------------------------------------------------------------
# Reference implementation: the sums computed directly, the engine's formulas
# ----------------------------------------------------------------------------------------------


def _auc_numerator(y: np.ndarray, scores: np.ndarray, w: np.ndarray) -> float:
    """``sum_{i pos, j neg} w_i w_j (1[r_i > r_j] + 1/2 1[r_i = r_j])``, by a sort over tie groups."""
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_scores) != 0.0) + 1))
    pos = np.add.reduceat(w[order] * y[order], starts)
    neg = np.add.reduceat(w[order] * (1.0 - y[order]), starts)
    neg_before = np.cumsum(neg) - neg
    return float(np.sum(pos * (neg_before + 0.5 * neg)))


def compute_metrics(
    y: Any,
    scores: Any,
    *,
    sample_weight: Any = None,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    metrics: Sequence[str] = METRICS,
) -> dict[str, float]:
    """Compute weighted binary-classification metrics on one data set.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels, 0 or 1 (bool, integer or float).
    scores : array-like of shape (n_samples,)
        Predicted probabilities of the positive class, finite and in [0, 1].
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative finite weights (default: all one). A weight of 0 excludes the row; integer
        weights are equivalent to repeating rows.
    threshold : float, default=0.5
        Classification threshold in (0, 1); ``yhat = 1[score >= threshold]``.
    preference_threshold : float, default=0.5
        Preference threshold ``t`` in (0, 1) of the net benefit (odds ``t / (1 - t)`` weigh false
        positives against true positives).
    metrics : sequence of str, default=METRICS
        Which metrics to compute; names from :data:`METRICS`.

    Returns
    -------
    dict of str to float
        Metric name to value, in the order of ``metrics``. Undefined values (see the module
        docstring: no weight at all, or a missing class for AUC, sensitivity, specificity) are NaN.

    Raises
    ------
    ValueError
        If ``y`` is empty, labels are not 0/1, scores are non-finite or outside [0, 1], weights are
        negative or non-finite, lengths differ, a metric name is unknown or repeated, or a threshold
        is outside (0, 1).
    TypeError
        If ``metrics`` is a single string or a threshold is not a number.

    Notes
    -----
    The weighted sums are computed here directly (by numpy, over the rows) and turned into metrics
    by the engine's formulas (:func:`disaggregated_eval.engine.sums.metrics_from_sums`, the one home
    of the formulas), so this function is the reference of the engine's walk (which computes the same
    sums in score order) and its agreement with scikit-learn checks every formula.

    Matches scikit-learn 1.9 with ``sample_weight``: ``log_loss`` (clipping at float64 machine
    epsilon), ``roc_auc_score``, ``recall_score`` (sensitivity), ``recall_score(pos_label=0)``
    (specificity), ``precision_score`` (where it is defined: with no predicted positive, scikit-learn
    returns 0 with a warning, ``zero_division``; here it is undefined, NaN), ``accuracy_score``, ``brier_score_loss``,
    ``balanced_accuracy_score`` (where both classes have weight: with one class scikit-learn averages
    the recall of the class present, with a warning; here it is undefined, NaN), and ``1 -`` the
    recalls for the false positive and false negative rates, where those are defined. Definitions from the paper's Supplementary A.3 (``docs/method.md``); net benefit as in
    Pfohl et al. (2023).
    """
    names = check_metric_names(metrics)
    threshold = check_open_unit(threshold, "threshold")
    preference_threshold = check_open_unit(preference_threshold, "preference_threshold")
    y = check_labels(y, "y")
    n = y.shape[0]
    if n == 0:
        raise ValueError("y is empty; compute_metrics needs at least one row (got y and scores of length 0)")
    scores = check_scores(scores, n, "scores")
    w = np.ones(n) if sample_weight is None else check_weights(sample_weight, n, "sample_weight")

    below = scores < threshold  # yhat = 0
    wp = float(np.sum(w * y))
    wn = float(np.sum(w * (1.0 - y)))
    fn = float(np.sum(w * y * below))
    tn = float(np.sum(w * (1.0 - y) * below))
    auc_numerator = _auc_numerator(y, scores, w) if "auc" in names else 0.0
    terms = np.zeros(N_TERMS)
    for term in terms_for(names):
        terms[TERM_SLOTS[term]] = float(np.sum(w * ROW_TERMS[term](y, scores)))
    out = np.empty(N_METRIC_SLOTS)
    metrics_from_sums(wp, wn, fn, tn, auc_numerator, terms, preference_threshold / (1.0 - preference_threshold), out)
    return {name: float(out[METRIC_SLOTS[name]]) for name in names}
