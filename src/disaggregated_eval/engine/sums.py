"""From weighted sums to metrics: the one home of the metric formulas and of the per-row terms.

Every metric of :mod:`disaggregated_eval.metrics` is a function of a few weighted sums over the rows
of an evaluation (``docs/method.md``, "Metrics"), with ``w`` the row's weight times its bootstrap
count (or permutation membership) and ``yhat = 1[r >= threshold]``:

* the *structural* sums, which the walk in score order produces (:mod:`.walk`): ``Wp = sum w y``,
  ``Wn = sum w (1 - y)``, the false negatives ``FN`` and true negatives ``TN`` (the running sums at
  the threshold's position in score order) and the AUC numerator
  ``sum_{i pos, j neg} w_i w_j (1[r_i > r_j] + 1/2 1[r_i = r_j])``;
* the *per-row terms*: additive sums ``sum w t(y, r)`` of a per-row quantity ``t``. They are
  declared once, in :data:`ROW_TERMS` (name -> function of ``y`` and ``r``), and every walker
  accumulates whichever terms the requested metrics need (:func:`terms_for`), so that a metric that
  needs a new sum adds one entry here and one formula in :func:`metrics_from_sums`.

:func:`metrics_from_sums` turns the sums of one evaluation on one (re)sample into every metric; it is
written for numba and called by every kernel of the engine (and from Python in tests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numba
import numpy as np

from ..metrics import check_metric_names, pointwise_log_loss

__all__ = [
    "CATEGORIES",
    "PROPORTIONS",
    "MEAN_OF_CATEGORIES",
    "categories",
    "net_benefit_values",
    "RATIOS_OF_SUMS",
    "ratio_of_sums_values",
    "METRIC_SLOTS",
    "N_METRIC_SLOTS",
    "ROW_TERMS",
    "N_TERMS",
    "TERM_SLOTS",
    "metric_slots",
    "terms_for",
    "row_terms",
    "metrics_from_sums",
    "score_segments",
    "keyed_draw_sums",
]

# ----------------------------------------------------------------------------------------------
# Per-row terms
# ----------------------------------------------------------------------------------------------

#: Per-row additive terms ``t(y, r)`` (``y`` 0/1 float64, ``r`` scores in [0, 1]); the engine
#: accumulates ``sum w t``. The position in this mapping is the term's slot (:data:`TERM_SLOTS`).
ROW_TERMS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "log_loss": pointwise_log_loss,  # nats; sklearn's clipping
    "brier": lambda y, r: (r - y) ** 2,
    "score": lambda y, r: r,  # the expected number of positives under the model: calibration in the large
}
#: Term name -> slot of the ``terms`` vector of :func:`metrics_from_sums`.
TERM_SLOTS: dict[str, int] = {name: slot for slot, name in enumerate(ROW_TERMS)}
#: Length of the ``terms`` vector of :func:`metrics_from_sums`.
N_TERMS: int = len(ROW_TERMS)
_T_LOG_LOSS = TERM_SLOTS["log_loss"]
_T_BRIER = TERM_SLOTS["brier"]
_T_SCORE = TERM_SLOTS["score"]

#: The per-row terms each metric needs (metrics not listed need only the structural sums).
_METRIC_TERMS: dict[str, tuple[str, ...]] = {
    "log_loss": ("log_loss",),
    "brier_score": ("brier",),
    "mean_predicted_risk": ("score",),
    "observed_expected_ratio": ("score",),
}


def terms_for(metrics: Sequence[str]) -> tuple[str, ...]:
    """The per-row terms (in :data:`ROW_TERMS` order) that ``metrics`` need.

    Parameters
    ----------
    metrics : sequence of str
        Metric names (checked by :func:`disaggregated_eval.metrics.check_metric_names`).

    Returns
    -------
    tuple of str
        Term names, a subset of :data:`ROW_TERMS`, in its order.
    """
    names = check_metric_names(metrics)
    needed = {term for metric in names for term in _METRIC_TERMS.get(metric, ())}
    return tuple(term for term in ROW_TERMS if term in needed)


def row_terms(y: np.ndarray, scores: np.ndarray, terms: Sequence[str]) -> np.ndarray:
    """The per-row values of ``terms``.

    Parameters
    ----------
    y : ndarray of shape (n,), float64
        Labels 0/1 (checked).
    scores : ndarray of shape (n,), float64
        Scores in [0, 1] (checked).
    terms : sequence of str
        Names from :data:`ROW_TERMS`.

    Returns
    -------
    ndarray of shape (len(terms), n), float64, C-contiguous
        Row ``t`` holds ``ROW_TERMS[terms[t]](y, scores)``.
    """
    out = np.empty((len(terms), y.shape[0]))
    for t, name in enumerate(terms):
        out[t] = ROW_TERMS[name](y, scores)
    return out


# ----------------------------------------------------------------------------------------------
# Proportion metrics: numerator and denominator as sets of the four outcome categories
# ----------------------------------------------------------------------------------------------

#: The four outcome categories of a row (label ``y``, prediction ``yhat = 1[r >= threshold]``), codes 0-3.
CATEGORIES: tuple[str, ...] = ("TN", "FP", "FN", "TP")
#: Category code of a row: ``2 y + yhat``.
TN, FP, FN, TP = 0, 1, 2, 3

#: Each proportion metric as (numerator categories, denominator categories): the metric is the weighted
#: share of the numerator among the rows of the denominator. The one home of "which rows a metric is a
#: rate among": its score interval (Wilson), the difference of two slices (Newcombe), its exact
#: permutation test (membership permuted among the denominator's rows, a hypergeometric count of the
#: numerator's) and its minimum-denominator rule.
PROPORTIONS: dict[str, tuple[tuple[int, ...], tuple[int, ...]]] = {
    "sensitivity": ((TP,), (TP, FN)),
    "false_negative_rate": ((FN,), (TP, FN)),
    "specificity": ((TN,), (TN, FP)),
    "false_positive_rate": ((FP,), (TN, FP)),
    "precision": ((TP,), (TP, FP)),
    "accuracy": ((TP, TN), (TN, FP, FN, TP)),
    "label_rate": ((TP, FN), (TN, FP, FN, TP)),
    "predicted_positive_rate": ((TP, FP), (TN, FP, FN, TP)),
}
#: Net benefit is the weighted mean over all rows of a value per category (Pfohl et al. 2023): 1 for a
#: true positive, ``-t / (1 - t)`` for a false positive, 0 otherwise; :func:`net_benefit_values`.
MEAN_OF_CATEGORIES: tuple[str, ...] = ("net_benefit",)


def categories(y: np.ndarray, scores: np.ndarray, threshold: float) -> np.ndarray:
    """Outcome category of every row: ``2 y + 1[r >= threshold]`` (:data:`CATEGORIES`), int8."""
    return (2 * y.astype(np.int8) + (scores >= threshold).astype(np.int8)).astype(np.int8)


def net_benefit_values(odds: float) -> np.ndarray:
    """The net benefit's value of each category (:data:`CATEGORIES` order), shape (4,)."""
    return np.array([0.0, -odds, 0.0, 1.0])


#: Metrics that are a ratio of two weighted sums of per-row values, ``sum w a / sum w b``, other than
#: the proportions (the inputs of their jackknife, :func:`ratio_of_sums_values`).
RATIOS_OF_SUMS: tuple[str, ...] = (
    "log_loss",
    "brier_score",
    "net_benefit",
    "mean_predicted_risk",
    "observed_expected_ratio",
)


def ratio_of_sums_values(
    metric: str, y: np.ndarray, scores: np.ndarray, *, threshold: float, odds: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per-row numerator and denominator values ``a``, ``b`` of a metric ``sum w a / sum w b``.

    Parameters
    ----------
    metric : str
        One of :data:`RATIOS_OF_SUMS`.
    y, scores : ndarray of shape (n,), float64
    threshold, odds : float

    Returns
    -------
    a, b : ndarray of shape (n,), float64
        E.g. the log loss is ``(pointwise log loss, 1)``, the observed/expected ratio ``(y, r)``.
    """
    ones = np.ones(y.shape[0])
    if metric == "log_loss":
        return ROW_TERMS["log_loss"](y, scores), ones
    if metric == "brier_score":
        return ROW_TERMS["brier"](y, scores), ones
    if metric == "mean_predicted_risk":
        return ROW_TERMS["score"](y, scores), ones
    if metric == "observed_expected_ratio":
        return y.astype(np.float64), ROW_TERMS["score"](y, scores)
    if metric == "net_benefit":
        return net_benefit_values(odds)[categories(y, scores, threshold)], ones
    raise ValueError(f"{metric!r} is not a ratio of sums; expected one of {RATIOS_OF_SUMS}")


# ----------------------------------------------------------------------------------------------
# Metric slots and formulas
# ----------------------------------------------------------------------------------------------

# Output slots of metrics_from_sums, by name. Written out, not derived from the order of
# vocabulary.METRICS: adding or reordering metric names must not move a slot.
_SLOT_LOG_LOSS = 0
_SLOT_AUC = 1
_SLOT_SENSITIVITY = 2
_SLOT_SPECIFICITY = 3
_SLOT_PRECISION = 4
_SLOT_NET_BENEFIT = 5
_SLOT_LABEL_RATE = 6
_SLOT_PREDICTED_POSITIVE_RATE = 7
_SLOT_ACCURACY = 8
_SLOT_FALSE_POSITIVE_RATE = 9
_SLOT_FALSE_NEGATIVE_RATE = 10
_SLOT_BRIER_SCORE = 11
_SLOT_MEAN_PREDICTED_RISK = 12
_SLOT_OBSERVED_EXPECTED_RATIO = 13

#: Metric name -> slot of the ``out`` buffer written by :func:`metrics_from_sums`.
METRIC_SLOTS: dict[str, int] = {
    "log_loss": _SLOT_LOG_LOSS,
    "auc": _SLOT_AUC,
    "sensitivity": _SLOT_SENSITIVITY,
    "specificity": _SLOT_SPECIFICITY,
    "precision": _SLOT_PRECISION,
    "net_benefit": _SLOT_NET_BENEFIT,
    "label_rate": _SLOT_LABEL_RATE,
    "predicted_positive_rate": _SLOT_PREDICTED_POSITIVE_RATE,
    "accuracy": _SLOT_ACCURACY,
    "false_positive_rate": _SLOT_FALSE_POSITIVE_RATE,
    "false_negative_rate": _SLOT_FALSE_NEGATIVE_RATE,
    "brier_score": _SLOT_BRIER_SCORE,
    "mean_predicted_risk": _SLOT_MEAN_PREDICTED_RISK,
    "observed_expected_ratio": _SLOT_OBSERVED_EXPECTED_RATIO,
}
#: Length of the ``out`` buffer of :func:`metrics_from_sums`.
N_METRIC_SLOTS: int = len(METRIC_SLOTS)


def metric_slots(metrics: Sequence[str]) -> np.ndarray:
    """Slots of ``metrics`` in the buffer of :func:`metrics_from_sums`.

    Parameters
    ----------
    metrics : sequence of str
        Metric names from :data:`~disaggregated_eval.metrics.METRICS`.

    Returns
    -------
    ndarray of shape (n_metrics,), int64
        ``out[slots[q]]`` is metric ``metrics[q]``.

    Raises
    ------
    TypeError, ValueError
        As :func:`disaggregated_eval.metrics.check_metric_names`.
    """
    names = check_metric_names(metrics)
    return np.asarray([METRIC_SLOTS[name] for name in names], dtype=np.int64)


@numba.njit(cache=True)
def metrics_from_sums(wp, wn, fn, tn, auc_numerator, terms, odds, out):
    """Every metric from the weighted sums of one evaluation on one (re)sample.

    Parameters
    ----------
    wp, wn : float
        ``sum w y`` and ``sum w (1 - y)`` (``w`` = row weight times bootstrap count).
    fn, tn : float
        Weighted false negatives and true negatives at the threshold (``yhat = 1[r >= threshold]``):
        the positives and negatives below the threshold. ``tp = wp - fn`` and ``fp = wn - tn``.
    auc_numerator : float
        ``sum_g pos_g (neg_below_g + neg_g / 2)`` over the tie groups ``g`` of equal scores in
        increasing score order.
    terms : ndarray of shape (N_TERMS,), float64
        ``sum w t`` of each per-row term of :data:`ROW_TERMS` (slot :data:`TERM_SLOTS`); a term the
        requested metrics do not need may hold anything.
    odds : float
        ``t / (1 - t)`` for the net benefit's preference threshold ``t``.
    out : ndarray of shape (>= N_METRIC_SLOTS,), float64
        Receives metric ``name`` at ``out[METRIC_SLOTS[name]]``; NaN where undefined.

    Notes
    -----
    The definitions (and the NaN rules) of :mod:`disaggregated_eval.metrics`, which match
    scikit-learn; written for numba (``numba.njit``), callable from Python too.
    """
    nan = np.nan
    tp = wp - fn  # exactly 0.0 when nothing reaches the threshold
    fp = wn - tn
    total = wp + wn
    pp = tp + fp
    if total > 0.0:
        out[_SLOT_LOG_LOSS] = terms[_T_LOG_LOSS] / total
        out[_SLOT_PRECISION] = tp / pp if pp > 0.0 else nan
        out[_SLOT_NET_BENEFIT] = (tp - fp * odds) / total
        out[_SLOT_LABEL_RATE] = wp / total
        out[_SLOT_PREDICTED_POSITIVE_RATE] = pp / total
        out[_SLOT_ACCURACY] = (tp + tn) / total
        out[_SLOT_BRIER_SCORE] = terms[_T_BRIER] / total
        out[_SLOT_MEAN_PREDICTED_RISK] = terms[_T_SCORE] / total
    else:
        out[_SLOT_LOG_LOSS] = nan
        out[_SLOT_PRECISION] = nan
        out[_SLOT_NET_BENEFIT] = nan
        out[_SLOT_LABEL_RATE] = nan
        out[_SLOT_PREDICTED_POSITIVE_RATE] = nan
        out[_SLOT_ACCURACY] = nan
        out[_SLOT_BRIER_SCORE] = nan
        out[_SLOT_MEAN_PREDICTED_RISK] = nan
    out[_SLOT_OBSERVED_EXPECTED_RATIO] = wp / terms[_T_SCORE] if terms[_T_SCORE] > 0.0 else nan
    out[_SLOT_AUC] = auc_numerator / (wp * wn) if (wp > 0.0 and wn > 0.0) else nan
    out[_SLOT_SENSITIVITY] = tp / wp if wp > 0.0 else nan
    out[_SLOT_FALSE_NEGATIVE_RATE] = fn / wp if wp > 0.0 else nan
    out[_SLOT_SPECIFICITY] = tn / wn if wn > 0.0 else nan
    out[_SLOT_FALSE_POSITIVE_RATE] = (wn - tn) / wn if wn > 0.0 else nan


# ----------------------------------------------------------------------------------------------
# Segments of the score order
# ----------------------------------------------------------------------------------------------


def score_segments(r_sorted: np.ndarray, thresholds: Sequence[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tie groups and runs of distinct scores of sorted scores, split at every threshold.

    Parameters
    ----------
    r_sorted : ndarray of shape (n,), float64
        Scores in increasing order.
    thresholds : sequence of float
        Decision thresholds, increasing; ``yhat = 1[r >= t]``.

    Returns
    -------
    starts : ndarray of shape (n_segments + 1,), int64
        Segment ``s`` holds sorted rows ``starts[s]:starts[s + 1]``; ``starts[-1] == n``. A segment
        is either one tie group (>= 2 equal scores) or a run of rows with distinct scores.
    is_tie : ndarray of shape (n_segments,), bool
    splits : ndarray of shape (n_thresholds,), int64
        For each threshold, the first segment whose scores are >= it (``n_segments`` if none): the
        running sums at the start of that segment are the false negatives and true negatives.
    """
    n = r_sorted.shape[0]
    group_start = np.concatenate(([0], np.flatnonzero(np.diff(r_sorted) != 0.0) + 1, [n]))
    tie = np.diff(group_start) > 1
    cuts = np.searchsorted(r_sorted, np.asarray(thresholds, dtype=np.float64), side="left")  # group starts (or n)
    tie_start = group_start[:-1][tie]
    bounds = np.unique(np.concatenate(([0, n], cuts, tie_start, group_start[1:][tie]))).astype(np.int64)
    is_tie = np.isin(bounds[:-1], tie_start)
    splits = np.searchsorted(bounds, cuts, side="left").astype(np.int64)
    return bounds, is_tie, splits


@numba.njit(parallel=True, cache=True)
def keyed_draw_sums(draws, keys, values, n_out):  # pragma: no cover - compiled
    """Weighted sums by key of every resample drawn as row indices.

    For each resample ``j`` (row of ``draws``) and output slot ``o``, ``out[j, o] = sum_r c_jr
    sum_{k: keys[r, k] = o} values[r, k]`` with ``c_jr`` the times row ``r`` is drawn: several sums
    per row (one per column of ``keys``/``values``) into one flat output, e.g. per (cell, bin) and per
    cell. Rows that compress use a sparse product of unit counts instead (:mod:`.units`).

    Parameters
    ----------
    draws : ndarray of shape (n_draws, n_rows), int32
        Row indices of each resample (:func:`.resampling.run_batches`).
    keys : ndarray of shape (n_rows, n_sums), int64
        Output slot of each row's sums, in ``0 .. n_out - 1``.
    values : ndarray of shape (n_rows, n_sums), float64
    n_out : int

    Returns
    -------
    ndarray of shape (n_draws, n_out), float64
    """
    b, n = draws.shape
    n_sums = keys.shape[1]
    out = np.zeros((b, n_out))
    for j in numba.prange(b):
        # counts first (random writes into one small array), then one pass in row order: fewer cache
        # misses than gathering each drawn row's values (the walk reads its counts the same way)
        counts = np.zeros(n, dtype=np.int32)
        for i in range(n):
            counts[draws[j, i]] += 1
        for r in range(n):
            c = counts[r]
            if c == 0:
                continue
            for k in range(n_sums):
                out[j, keys[r, k]] += c * values[r, k]
    return out
