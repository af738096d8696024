"""Calibration curves with Wilson intervals (paper Supplementary A.3), and the calibration error of a slice.

A calibration curve bins the scores into quantile bins and plots, per bin, the mean score (x) against
the fraction of positive labels (y), with a 95% Wilson score interval for the fraction.

Binning rule (matches ``pandas.qcut(scores, n_bins, duplicates="drop")``):

- the bin edges are the ``0, 1/n_bins, ..., 1`` quantiles of the scores (linear interpolation,
  ``numpy.quantile``'s default, which is also what ``pandas.qcut`` uses; as in ``pandas.qcut``,
  levels such as 1/7 that are not exact in binary are rounded up to the next float);
- duplicate edges are dropped, so tied scores give fewer than ``n_bins`` bins; all scores equal give
  one bin (where ``pandas.qcut`` would return NaN codes);
- bins are right-closed intervals ``(e_k, e_{k+1}]`` except the first, which also includes its lower
  edge (the minimum score): a score equal to an inner edge goes to the lower bin;
- interpolated edges can leave a bin with no scores (e.g. two distinct scores and ten bins); empty
  bins are dropped and the remaining bins are numbered ``0, 1, ...`` in increasing score order.

The calibration error of a slice over fixed bins (:func:`binned_error_sums`,
:func:`calibration_error_interval`; ``docs/method.md``, "Calibration per slice") is the
root-mean-square gap between the observed rate and the mean predicted risk,
``CE = sqrt(sum_b p_b delta_b^2)`` with ``p_b`` the slice's share in bin ``b`` and ``delta_b`` the mean
of ``y - r`` there: the l2 calibration error of Kumar, Liang and Ma (2019, "Verified uncertainty
calibration", NeurIPS). Its plug-in (like the expected calibration error, the l1 version) is positive
on every sample of a calibrated slice; :func:`calibration_error_interval` gives the debiased estimate
and an interval that reaches 0 for a calibrated slice with the stated probability.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import special, stats

from . import vocabulary
from .intervals import wilson_interval
from .validation import (
    check_group_codes,
    check_labels,
    check_length,
    check_open_unit,
    check_positive_int,
    check_scores,
    check_unique_labels,
)

__all__ = [
    "CALIBRATION_COLUMNS",
    "calibration_curve",
    "calibration_table",
    "quantile_bins",
    "stack_calibration_tables",
    "BinnedErrors",
    "binned_error_sums",
    "BIN_SUMS",
    "binned_errors",
    "calibration_error_interval",
]

#: Columns of :func:`calibration_curve` (``calibration_table`` prepends ``model`` and ``group``).
CALIBRATION_COLUMNS = ["bin", "n", "mean_score", "fraction_positive", "ci_low", "ci_high"]


def _check_curve_inputs(y: Any, n_bins: Any, confidence: Any) -> tuple[np.ndarray, int, float]:
    """Labels (non-empty), ``n_bins`` and ``confidence`` of a calibration curve or table."""
    n_bins = check_positive_int(n_bins, "n_bins")
    confidence = check_open_unit(confidence, "confidence")
    y_arr = check_labels(y, "y")
    if y_arr.shape[0] == 0:
        raise ValueError("y must not be empty; a calibration curve needs at least one row")
    return y_arr, n_bins, confidence


# --------------------------------------------------------------------------------------------------
# computation (trusts its callers)
# --------------------------------------------------------------------------------------------------
def expanded_quantile(values: np.ndarray, count: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """``numpy.quantile(numpy.repeat(values, count), levels)`` without expanding the rows.

    The default ("linear", Hyndman and Fan's type 7) quantile of the expanded rows, by numpy's own
    steps: the virtual index ``(N - 1) q`` of the sorted expanded values, the order statistics on either
    side of it (found in the cumulative counts), and numpy's interpolation between them (``a + (b - a) t``,
    or ``b - (b - a)(1 - t)`` when ``t >= 0.5``), so that the result is numpy's, bit for bit.

    Parameters
    ----------
    values : ndarray of shape (n,), float64
    count : ndarray of shape (n,), int
        Rows each value stands for (>= 0, at least one positive).
    levels : ndarray of shape (k,), float64
        Quantile levels in [0, 1].

    Returns
    -------
    ndarray of shape (k,)
    """
    order = np.argsort(values, kind="stable")
    sorted_values = np.asarray(values, dtype=np.float64)[order]
    ends = np.cumsum(np.asarray(count, dtype=np.int64)[order])  # the expanded index after each value's rows
    total = int(ends[-1])
    virtual = (total - 1) * np.asarray(levels, dtype=np.float64)
    previous = np.floor(virtual)
    above = virtual >= total - 1
    previous_index = np.where(above, total - 1, previous).astype(np.int64)
    next_index = np.where(above, total - 1, previous_index + 1)
    a = sorted_values[np.searchsorted(ends, previous_index, side="right")]
    b = sorted_values[np.searchsorted(ends, next_index, side="right")]
    t = virtual - previous
    difference = b - a
    return np.where(t >= 0.5, b - difference * (1 - t), a + difference * t)


def quantile_bins(scores: np.ndarray, n_bins: int, count: np.ndarray | None = None) -> np.ndarray:
    """Bin index of every score under the module's quantile binning rule (as :func:`pandas.qcut`).

    Parameters
    ----------
    scores : ndarray of shape (n_samples,)
        Scores in [0, 1].
    n_bins : int
        Requested number of quantile bins (at least 1).
    count : ndarray of shape (n_samples,), optional
        Rows each score stands for (a counts table): the bins of the expanded rows
        (:func:`expanded_quantile`).

    Returns
    -------
    ndarray of int of shape (n_samples,)
        Bin of each score, 0-based, in increasing score order; bins may be empty when scores tie (the
        module docstring gives the exact edge rule). Used by :func:`calibration_curve` and the audit's
        calibration table (:mod:`disaggregated_eval.audit.calibration_table`).
    """
    levels = np.linspace(0.0, 1.0, n_bins + 1)
    # As pandas.qcut: round levels that are not exact in binary up to the next float, so that an
    # edge that should equal a data point is not interpolated one ulp below it.
    inexact = n_bins * levels != np.arange(n_bins + 1)
    levels[inexact] = np.nextafter(levels[inexact], 1.0)
    quantiles = np.quantile(scores, levels) if count is None else expanded_quantile(scores, count, levels)
    edges = np.unique(quantiles)
    # side="left": a score equal to an inner edge e_k lands in the bin (e_{k-1}, e_k].
    return np.searchsorted(edges[1:-1], scores, side="left")


def _curve(y: np.ndarray, scores: np.ndarray, n_bins: int, confidence: float) -> pd.DataFrame:
    raw = quantile_bins(scores, n_bins)
    used, bins = np.unique(raw, return_inverse=True)  # drops empty bins, renumbers 0..B-1
    n_used = used.shape[0]
    n = np.bincount(bins, minlength=n_used)
    positives = np.bincount(bins, weights=y, minlength=n_used)
    score_sum = np.bincount(bins, weights=scores, minlength=n_used)
    low, high = wilson_interval(positives / n, n, confidence)  # the project's one Wilson interval
    return pd.DataFrame(
        {
            "bin": np.arange(n_used, dtype=np.int64),
            "n": n.astype(np.int64),
            "mean_score": score_sum / n,
            "fraction_positive": positives / n,
            "ci_low": np.asarray(low, dtype=np.float64),
            "ci_high": np.asarray(high, dtype=np.float64),
        }
    )


def calibration_curve(
    y: np.ndarray,
    scores: np.ndarray,
    *,
    n_bins: int = 10,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Quantile-binned calibration curve with Wilson intervals.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Binary labels, 0/1 (or bool).
    scores : ndarray of shape (n_samples,)
        Predicted probabilities of ``y = 1``, in [0, 1].
    n_bins : int, default 10
        Requested number of quantile bins; fewer are returned when scores tie (see the module
        docstring for the exact edge rule).
    confidence : float, default 0.95
        Coverage of the Wilson interval (``alpha = 1 - confidence``).

    Returns
    -------
    pandas.DataFrame
        One row per non-empty bin, in increasing score order, with columns ``bin`` (int64, 0-based),
        ``n`` (rows in the bin), ``mean_score`` (x of the curve), ``fraction_positive`` (y of the
        curve), ``ci_low``, ``ci_high`` (Wilson interval of ``fraction_positive``:
        :func:`disaggregated_eval.intervals.wilson_interval`, equal to
        ``statsmodels.stats.proportion.proportion_confint(..., method="wilson")`` within 1e-15).

    Raises
    ------
    ValueError
        If labels are not 0/1, scores are not finite numbers in [0, 1], lengths differ, the input
        is empty, ``n_bins`` is not a positive integer or ``confidence`` is not in (0, 1).
    TypeError
        If ``confidence`` is not a number or ``scores`` is not array-like.

    Notes
    -----
    Paper Supplementary A.3. Bins follow ``pandas.qcut(..., duplicates="drop")``.
    """
    y_arr, n_bins, confidence = _check_curve_inputs(y, n_bins, confidence)
    s_arr = check_scores(scores, y_arr.shape[0], "scores")
    return _curve(y_arr, s_arr, n_bins, confidence)


def calibration_table(
    y: np.ndarray,
    groups: np.ndarray,
    scores: Mapping[str, np.ndarray],
    *,
    group_labels: Sequence[str],
    n_bins: int = 10,
    confidence: float = 0.95,
) -> pd.DataFrame:
    """Calibration curves per model type and per group, plus overall, as one tidy table.

    Bins are computed separately within each group (and over all rows for ``"overall"``).

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Binary labels, 0/1.
    groups : ndarray of shape (n_samples,)
        Integer group codes ``0 .. K-1``.
    scores : mapping of str to ndarray of shape (n_samples,)
        Scores in [0, 1] per model type (e.g. ``{"x": ..., "xa": ..., "xa_stratified": ...}``).
    group_labels : sequence of str of length K
        Display label of each group code; ``"overall"`` is reserved.
    n_bins : int, default 10
        Requested number of quantile bins per curve (see :func:`calibration_curve`).
    confidence : float, default 0.95
        Coverage of the Wilson intervals.

    Returns
    -------
    pandas.DataFrame
        Columns ``model, group, bin, n, mean_score, fraction_positive, ci_low, ci_high`` (the
        calibration contract of ``docs/design.md``). Rows are ordered by model (mapping order),
        then group (code order, then ``"overall"``), then bin.

    Raises
    ------
    ValueError
        On invalid labels, scores or arguments (as :func:`calibration_curve`), if ``scores`` is
        empty, if group codes are not integers in ``0 .. K-1`` or their length differs from ``y``,
        if a group has no rows, or if ``group_labels`` are not distinct non-empty strings or
        contain ``"overall"``.
    """
    y_arr, n_bins, confidence = _check_curve_inputs(y, n_bins, confidence)
    n = y_arr.shape[0]
    labels = check_unique_labels(group_labels, "group_labels", reserved=(vocabulary.OVERALL,))
    if not labels:
        raise ValueError("group_labels must not be empty")
    g = check_group_codes(groups, "groups", n_groups=len(labels))
    check_length(g, n, "groups")
    counts = np.bincount(g, minlength=len(labels))
    empty = [labels[k] for k in np.flatnonzero(counts == 0)]
    if empty:
        raise ValueError(f"groups with no rows: {empty}")
    if not isinstance(scores, Mapping) or len(scores) == 0:
        raise ValueError("scores must be a non-empty mapping of model name to score array")
    checked = {str(m): check_scores(s, n, f"scores[{m!r}]") for m, s in scores.items()}

    frames = []
    for model, s in checked.items():
        for code, label in [*enumerate(labels), (None, vocabulary.OVERALL)]:
            mask = slice(None) if code is None else (g == code)
            curve = _curve(y_arr[mask], s[mask], n_bins, confidence)
            curve.insert(0, "group", label)
            curve.insert(0, "model", model)
            frames.append(curve)
    return pd.concat(frames, ignore_index=True)


def stack_calibration_tables(tables: Mapping[str, pd.DataFrame], *, study: str) -> pd.DataFrame:
    """Stack per-dataset calibration tables into one, led by ``study`` and ``dataset`` columns.

    Parameters
    ----------
    tables : mapping of str to pandas.DataFrame
        Dataset id (simulation setting or ACS task) -> table of :func:`calibration_table`, in
        display order.
    study : str
        Study name copied into every row (``"simulation"`` or ``"acs"``).

    Returns
    -------
    pandas.DataFrame
        Columns ``study, dataset`` followed by the calibration columns; the input for
        :func:`disaggregated_eval.plots.plot_calibration_curves`.

    Raises
    ------
    ValueError
        If ``tables`` is empty.
    """
    if not tables:
        raise ValueError("tables must hold at least one calibration table")
    stacked = pd.concat([t.assign(study=study, dataset=dataset) for dataset, t in tables.items()], ignore_index=True)
    return stacked[["study", "dataset"] + [c for c in stacked.columns if c not in ("study", "dataset")]]


# --------------------------------------------------------------------------------------------------
# calibration error of a slice over fixed bins: debiased, with an interval that reaches 0
# --------------------------------------------------------------------------------------------------
#: The per-(group, bin) sums :func:`binned_error_sums` returns, in order (``e = y - r``, ``w`` the
#: row weight): rows, ``w``, ``w^2``, ``w e``, ``w^2 e``, ``w^2 e^2``, ``w^2 r (1 - r)``.
BIN_SUMS: tuple[str, ...] = ("rows", "w", "w2", "we", "w2e", "w2e2", "w2v")


def binned_error_sums(
    y: np.ndarray, scores: np.ndarray, weight: np.ndarray, key: np.ndarray, n_keys: int, count: np.ndarray | None = None
) -> np.ndarray:
    """Sums of every (group, bin) key behind the calibration error (:data:`BIN_SUMS`).

    Parameters
    ----------
    y, scores, weight : ndarray of shape (n_rows,)
        Labels 0/1, scores in [0, 1], non-negative weights (1 without sample weights).
    key : ndarray of shape (n_rows,), int
        ``group * n_bins + bin`` of every row, in ``0 .. n_keys - 1``.
    n_keys : int
    count : ndarray of shape (n_rows,), int, optional
        Rows each row stands for (frequency weights): every sum counts it that many times.

    Returns
    -------
    ndarray of shape (n_keys, 7)
        Sums that add over groups (cells add up into slices).
    """
    e = y - scores
    w = weight
    w2 = w * w
    columns = (None, w, w2, w * e, w2 * e, w2 * e * e, w2 * scores * (1.0 - scores))
    if count is not None:
        columns = tuple(count if c is None else count * c for c in columns)
    return np.stack([np.bincount(key, weights=c, minlength=n_keys) for c in columns], axis=1)


@dataclass(frozen=True)
class BinnedErrors:
    """Per group and bin: the share of the group's weight, the mean error ``y - r`` and its variance.

    Attributes
    ----------
    share : ndarray of shape (n_groups, n_bins)
        ``W_b / W`` (0 in empty bins).
    deviation : ndarray of shape (n_groups, n_bins)
        ``sum w (y - r) / sum w`` (the bin's observed rate minus its mean predicted risk).
    variance : ndarray of shape (n_groups, n_bins)
        Unbiased estimate of the variance of ``deviation`` under sampling of rows
        (``n / (n - 1) sum w^2 (e - deviation)^2 / W^2``).
    floor : ndarray of shape (n_groups, n_bins)
        The variance ``sum w^2 r (1 - r) / W^2`` that ``deviation`` has if the bin is calibrated.
    usable : ndarray of shape (n_groups, n_bins), bool
        Bins with at least two rows (a variance can be estimated).
    """

    share: np.ndarray
    deviation: np.ndarray
    variance: np.ndarray
    floor: np.ndarray
    usable: np.ndarray


def binned_errors(sums: np.ndarray) -> BinnedErrors:
    """:class:`BinnedErrors` from :func:`binned_error_sums` added into groups, shape (n_groups, n_bins, 7)."""
    rows, w, w2, we, w2e, w2e2, w2v = (sums[..., k] for k in range(len(BIN_SUMS)))
    total = w.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total > 0, w / np.where(total > 0, total, 1.0), 0.0)
        d = np.where(w > 0, we / np.where(w > 0, w, 1.0), 0.0)
        spread = np.maximum(w2e2 - 2.0 * d * w2e + d * d * w2, 0.0)  # sum w^2 (e - d)^2
        usable = (rows >= 2) & (w > 0)
        variance = np.where(usable, rows / np.maximum(rows - 1.0, 1.0) * spread / np.where(w > 0, w * w, 1.0), 0.0)
        floor = np.where(usable, w2v / np.where(w > 0, w * w, 1.0), 0.0)
    return BinnedErrors(share=share, deviation=d, variance=variance, floor=floor, usable=usable)


def _scaled_chi2(mean: np.ndarray, var: np.ndarray, q: float) -> np.ndarray:
    """The ``q`` quantile of ``a chi2_nu`` with mean ``mean`` and variance ``var`` (Satterthwaite)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        a = var / (2.0 * mean)
        nu = 2.0 * mean * mean / var
        out = a * stats.chi2.ppf(q, nu)
    return np.where(var > 0, out, mean)


def calibration_error_interval(
    share: np.ndarray,
    deviation: np.ndarray,
    variance: np.ndarray,
    usable: np.ndarray,
    *,
    floor: np.ndarray | None = None,
    confidence: float = 0.95,
    iterations: int = 60,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Debiased root-mean-square calibration error, its interval and the debiased squared error, per group.

    Parameters
    ----------
    share, deviation, variance : ndarray of shape (n_groups, n_bins)
        Each bin's share ``p_b`` of the group, its estimated gap ``d_b`` (observed rate minus mean
        predicted risk, or any difference of such gaps) and the estimated variance ``v_b`` of ``d_b``
        (:func:`binned_errors`).
    usable : ndarray of shape (n_groups, n_bins), bool
        Bins that count (the others, with fewer than two rows, are left out).
    floor : ndarray of shape (n_groups, n_bins), optional
        A lower bound of each ``Var(d_b)`` used in the interval's variance terms (the variance under
        calibration: bins whose rows all agree have ``v_b = 0`` but not a known gap).
    confidence : float
        Two-sided level, in (0, 1).
    iterations : int
        Bisection steps of each bound.

    Returns
    -------
    estimate, low, high : ndarray of shape (n_groups,)
        ``sqrt(max(0, T))`` with ``T = sum_b p_b (d_b^2 - v_b)`` the debiased estimate of the squared
        error (unbiased for ``sum_b p_b delta_b^2`` given the bins' rows: Kumar, Liang and Ma, 2019), and
        the square roots of the interval of the squared error. NaN where the group has no usable bin.
    squared : ndarray of shape (n_groups,)
        ``T`` itself (negative when the gaps are smaller than their noise).

    Notes
    -----
    ``S = sum_b p_b d_b^2`` has mean ``theta + mu0`` (``theta`` the squared error, ``mu0 = sum p_b v_b``)
    and, for normal ``d_b``, variance ``sum p_b^2 (4 delta_b^2 v_b + 2 v_b^2) <= 4 m theta + v0`` with
    ``m = max_b p_b v_b`` and ``v0 = 2 sum p_b^2 v_b^2``. ``theta`` is in the interval when ``S`` lies between
    the ``(1 -+ confidence) / 2`` quantiles of the scaled chi-square with that mean and variance
    (Satterthwaite's approximation of a weighted sum of noncentral chi-squares): the lower bound is 0
    exactly when ``S`` is not above what calibration gives at level ``(1 - confidence) / 2`` (a test
    whose null is calibration), and the variance bound makes the upper bound conservative where the
    gaps differ between bins. The acceptance region in ``theta`` is an interval: the lower bound is
    found by bisection on the increasing upper quantile, the upper bound on the lower quantile
    made non-decreasing (its smallest value from ``theta`` on), which only widens it. When no ``theta``
    is accepted (``S`` below the lower quantile of every ``theta``) the upper bound is the normal
    approximation's at a debiased estimate of 0, ``2 z^2 m + sqrt(4 z^4 m^2 + z^2 v0)``.
    """
    share = np.asarray(share, dtype=np.float64)
    d = np.asarray(deviation, dtype=np.float64)
    v = np.asarray(variance, dtype=np.float64)
    ok = np.asarray(usable, dtype=bool)
    v_terms = v if floor is None else np.maximum(v, np.asarray(floor, dtype=np.float64))
    p = np.where(ok, share, 0.0)
    s = np.sum(p * np.where(ok, d * d, 0.0), axis=-1)
    mu0 = np.sum(p * np.where(ok, v, 0.0), axis=-1)
    m = np.max(p * np.where(ok, v_terms, 0.0), axis=-1)
    v0 = 2.0 * np.sum(p * p * np.where(ok, v_terms * v_terms, 0.0), axis=-1)
    squared = s - mu0
    has = ok.any(axis=-1)
    tail = 0.5 * (1.0 - confidence)

    def quantile(theta: np.ndarray, q: float) -> np.ndarray:
        return _scaled_chi2(theta + mu0, 4.0 * m * theta + v0, q)

    # lower bound: the smallest theta whose upper quantile reaches S (0 when theta = 0 does)
    lo_t = np.zeros_like(s)
    hi_t = np.maximum(s, 0.0)
    need = quantile(lo_t, 1.0 - tail) < s
    for _ in range(iterations):
        mid = 0.5 * (lo_t + hi_t)
        reach = quantile(mid, 1.0 - tail) >= s
        hi_t = np.where(reach, mid, hi_t)
        lo_t = np.where(reach, lo_t, mid)
    low = np.where(need, hi_t, 0.0)

    # upper bound: the largest theta whose (non-decreasing envelope of the) lower quantile stays <= S
    top = np.maximum(np.maximum(s, mu0), 1e-300)
    for _ in range(200):
        grow = quantile(top, tail) <= s
        if not grow.any():
            break
        top = np.where(grow, 2.0 * top, top)
    grid = top[..., None] * np.linspace(0.0, 1.0, 65)
    q_grid = np.stack([quantile(grid[..., k], tail) for k in range(grid.shape[-1])], axis=-1)
    envelope = np.minimum.accumulate(q_grid[..., ::-1], axis=-1)[..., ::-1]
    below = envelope <= s[..., None]
    last = np.where(below.any(axis=-1), below.shape[-1] - 1 - np.argmax(below[..., ::-1], axis=-1), -1)
    start = np.take_along_axis(grid, np.maximum(last, 0)[..., None], axis=-1)[..., 0]
    stop = np.take_along_axis(grid, np.minimum(last + 1, grid.shape[-1] - 1)[..., None], axis=-1)[..., 0]
    a, b = start.copy(), stop.copy()
    for _ in range(iterations):
        mid = 0.5 * (a + b)
        inside = quantile(mid, tail) <= s
        a = np.where(inside, mid, a)
        b = np.where(inside, b, mid)
    # no theta accepted (S below the noise of every theta, by chance or because the bins' variances are
    # overestimated): the normal approximation's upper bound at a debiased estimate of 0,
    # theta = 2 z^2 m + sqrt(4 z^4 m^2 + z^2 v0), never of zero width
    z = special.ndtri(1.0 - tail)
    fallback = 2.0 * z * z * m + np.sqrt(4.0 * z**4 * m * m + z * z * v0)
    high = np.where(last >= 0, a, np.maximum(fallback, a))
    high = np.maximum(high, low)
    with np.errstate(invalid="ignore"):
        estimate = np.sqrt(np.maximum(squared, 0.0))
        out_low, out_high = np.sqrt(np.maximum(low, 0.0)), np.sqrt(np.maximum(high, 0.0))
    nan = np.full(s.shape, np.nan)
    return (np.where(has, estimate, nan), np.where(has, out_low, nan), np.where(has, out_high, nan),
            np.where(has, squared, nan))  # fmt: skip
