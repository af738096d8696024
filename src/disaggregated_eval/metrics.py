"""Weighted performance metrics of a binary classifier, matching scikit-learn.

This is the plain (non-bootstrap) reference of the metric definitions (paper Supplementary A.3;
``docs/method.md``). The bootstrap engine (:mod:`disaggregated_eval.engine`) computes the same
quantities from weighted sums (:func:`disaggregated_eval.engine.sums.metrics_from_sums`) and is tested
against :func:`compute_metrics`, which is tested against scikit-learn.

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
=========================== ============================================= ===================

Here ``pi = Wp / W`` and ``t`` is the preference threshold of the net benefit (Pfohl et al. 2023
parametrisation). Written as ``(TP - FP t/(1-t)) / W`` the net benefit is defined whenever
``W > 0``, even if one class is missing (then its TPR or FPR term is multiplied by zero).

In the log loss, ``r`` and ``1 - r`` are each clipped to ``[eps, 1 - eps]`` with
``eps = np.finfo(np.float64).eps`` before the logarithm, which is what scikit-learn 1.9's
``log_loss`` does (it forms the two columns ``[1 - r, r]`` and clips them).

Undefined values are NaN, never an exception and never 0, so that a bootstrap resample on which a
metric is undefined is visible and can be counted. An empty input (no rows at all) is an error, not
NaN: it is a caller's mistake, not an undefined metric.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import vocabulary as _vocabulary
from ._validation import check_labels, check_open_unit, check_scores, check_weights

__all__ = [
    "LOG_LOSS_EPS",
    "METRICS",
    "METRIC_HIGHER_IS_BETTER",
    "METRIC_LABELS",
    "check_metric_names",
    "compute_metrics",
    "pointwise_log_loss",
]

#: Names of the available metrics, in their canonical order (one home: :mod:`.vocabulary`).
METRICS: tuple[str, ...] = _vocabulary.METRICS
#: Display name of each metric.
METRIC_LABELS: dict[str, str] = _vocabulary.METRIC_LABELS
#: Whether a larger value is better; ``None`` for descriptive rates that have no direction.
METRIC_HIGHER_IS_BETTER: dict[str, bool | None] = _vocabulary.METRIC_HIGHER_IS_BETTER

#: Clipping constant of the log loss (as scikit-learn: machine epsilon of float64).
LOG_LOSS_EPS: float = float(np.finfo(np.float64).eps)


def check_metric_names(metrics: Any, name: str = "metrics") -> tuple[str, ...]:
    """Metric names as a tuple: known (from :data:`METRICS`), distinct, at least one.

    Parameters
    ----------
    metrics : sequence of str
        Requested metric names, in the order the caller wants them.
    name : str, default "metrics"
        How the argument is named in messages.

    Returns
    -------
    tuple of str

    Raises
    ------
    TypeError
        If ``metrics`` is a single string (``"auc"`` is not ``("auc",)``).
    ValueError
        If it is empty, names an unknown metric or repeats one.
    """
    if isinstance(metrics, str):
        raise TypeError(f"{name} must be a sequence of metric names, not a string; did you mean ({metrics!r},)?")
    names = tuple(metrics)
    if not names:
        raise ValueError(f"{name} must name at least one metric; expected some of {METRICS}")
    for metric in names:
        if metric not in METRIC_LABELS:
            raise ValueError(f"unknown metric {metric!r} in {name}; expected one of {METRICS}")
    if len(set(names)) != len(names):
        duplicates = sorted({metric for metric in names if names.count(metric) > 1})
        raise ValueError(f"{name} must be distinct; got duplicates {duplicates}")
    return names


# ----------------------------------------------------------------------------------------------
# Reference implementation
# ----------------------------------------------------------------------------------------------


def pointwise_log_loss(y: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per-row log loss with scikit-learn's clipping of ``r`` and ``1 - r`` to ``[eps, 1 - eps]``.

    Parameters
    ----------
    y : ndarray of shape (n_samples,), float64
        Checked 0/1 labels.
    scores : ndarray of shape (n_samples,), float64
        Checked scores in [0, 1].

    Returns
    -------
    ndarray of shape (n_samples,)
        ``-log(clip(r))`` where ``y == 1`` and ``-log(clip(1 - r))`` where ``y == 0`` (nats); the
        weighted log loss is ``sum w * pointwise_log_loss(y, r) / sum w`` (as scikit-learn 1.9's
        ``log_loss``). The bootstrap engine accumulates these terms.
    """
    eps = LOG_LOSS_EPS
    positive = -np.log(np.clip(scores, eps, 1.0 - eps))
    negative = -np.log(np.clip(1.0 - scores, eps, 1.0 - eps))
    return np.where(y == 1.0, positive, negative)


def _weighted_auc(y: np.ndarray, scores: np.ndarray, w: np.ndarray, wp: float, wn: float) -> float:
    """Weighted AUC-ROC with ties counted one half, by a sort over tie groups."""
    if wp == 0.0 or wn == 0.0:
        return float("nan")
    order = np.argsort(scores, kind="stable")
    sorted_scores = scores[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_scores) != 0.0) + 1))
    pos = np.add.reduceat(w[order] * y[order], starts)
    neg = np.add.reduceat(w[order] * (1.0 - y[order]), starts)
    neg_before = np.cumsum(neg) - neg
    return float(np.sum(pos * (neg_before + 0.5 * neg)) / (wp * wn))


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0.0 else float("nan")


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
    Matches scikit-learn 1.9 with ``sample_weight``: ``log_loss`` (clipping at float64 machine
    epsilon), ``roc_auc_score``, ``recall_score`` (sensitivity), ``recall_score(pos_label=0)``
    (specificity), ``precision_score`` (where it is defined: with no predicted positive, scikit-learn
    returns 0 with a warning, ``zero_division``; here it is undefined, NaN), ``accuracy_score``, ``brier_score_loss``,
    and ``1 -`` the recalls for the false positive and false negative rates, where those are
    defined. Definitions from the paper's Supplementary A.3 (``docs/method.md``); net benefit as in
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

    yhat = (scores >= threshold).astype(np.float64)
    total = float(np.sum(w))
    wp = float(np.sum(w * y))
    wn = float(np.sum(w * (1.0 - y)))
    tp = float(np.sum(w * y * yhat))
    tn = float(np.sum(w * (1.0 - y) * (1.0 - yhat)))
    fp = float(np.sum(w * (1.0 - y) * yhat))
    pp = float(np.sum(w * yhat))
    odds = preference_threshold / (1.0 - preference_threshold)

    result: dict[str, float] = {}
    for name in names:
        if name == "log_loss":
            value = _ratio(float(np.sum(w * pointwise_log_loss(y, scores))), total)
        elif name == "auc":
            value = _weighted_auc(y, scores, w, wp, wn)
        elif name == "sensitivity":
            value = _ratio(tp, wp)
        elif name == "specificity":
            value = _ratio(tn, wn)
        elif name == "precision":
            value = _ratio(tp, pp)
        elif name == "net_benefit":
            value = _ratio(tp - fp * odds, total)
        elif name == "label_rate":
            value = _ratio(wp, total)
        elif name == "predicted_positive_rate":
            value = _ratio(pp, total)
        elif name == "accuracy":
            value = _ratio(tp + tn, total)
        elif name == "false_positive_rate":
            value = _ratio(fp, wn)
        elif name == "false_negative_rate":
            value = _ratio(wp - tp, wp)
        elif name == "brier_score":
            value = _ratio(float(np.sum(w * (scores - y) ** 2)), total)
        elif name == "mean_predicted_risk":
            value = _ratio(float(np.sum(w * scores)), total)
        else:  # observed_expected_ratio
            value = _ratio(wp, float(np.sum(w * scores)))
        result[name] = float(value)
    return result
