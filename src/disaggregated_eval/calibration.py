"""Calibration curves with Wilson intervals (paper Supplementary A.3).

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from statsmodels.stats.proportion import proportion_confint

from . import vocabulary
from ._validation import (
    check_group_codes,
    check_labels,
    check_length,
    check_open_unit,
    check_positive_int,
    check_scores,
    check_unique_labels,
)

__all__ = ["CALIBRATION_COLUMNS", "calibration_curve", "calibration_table"]

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
def _quantile_bins(scores: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin index of every score under the module's binning rule (possibly with empty bins)."""
    levels = np.linspace(0.0, 1.0, n_bins + 1)
    # As pandas.qcut: round levels that are not exact in binary up to the next float, so that an
    # edge that should equal a data point is not interpolated one ulp below it.
    inexact = n_bins * levels != np.arange(n_bins + 1)
    levels[inexact] = np.nextafter(levels[inexact], 1.0)
    edges = np.unique(np.quantile(scores, levels))
    # side="left": a score equal to an inner edge e_k lands in the bin (e_{k-1}, e_k].
    return np.searchsorted(edges[1:-1], scores, side="left")


def _curve(y: np.ndarray, scores: np.ndarray, n_bins: int, confidence: float) -> pd.DataFrame:
    raw = _quantile_bins(scores, n_bins)
    used, bins = np.unique(raw, return_inverse=True)  # drops empty bins, renumbers 0..B-1
    n_used = used.shape[0]
    n = np.bincount(bins, minlength=n_used)
    positives = np.bincount(bins, weights=y, minlength=n_used)
    score_sum = np.bincount(bins, weights=scores, minlength=n_used)
    low, high = proportion_confint(positives, n, alpha=1.0 - confidence, method="wilson")
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
        curve), ``ci_low``, ``ci_high`` (Wilson interval of ``fraction_positive``, from
        ``statsmodels.stats.proportion.proportion_confint(..., method="wilson")``).

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
