"""Diagnostics of the weights ``P(A = a | V)`` of a controlled evaluation: balance, effective sample
size and overlap (``docs/method.md``, "Weights").

- :func:`standardized_mean_differences`: does the population re-weighted by ``P(A = a | V)`` have
  slice ``a``'s distribution of ``V``? (the balance check of propensity-score weighting);
- :func:`kish_effective_sample_size`: how many equally weighted rows the weights are worth;
- :func:`overlap_reasons`: does ``T_a`` stand on any rows outside the slice, or does ``V`` (nearly)
  determine membership, so that ``M_a`` is the slice's own metric and ``T_a`` is 0 by construction?

:func:`weight_diagnostics` gives all three per group, for the weights of any estimator
(:func:`disaggregated_eval.weight_models.group_proba_for_control`, oracle weights, ...).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .model_fitting import MAX_CATEGORY_CODE
from .validation import check_group_codes, check_int, check_length, check_weights
from .weight_models import MAX_CELLS, as_control_frame, cell_codes

__all__ = [
    "POOR_BALANCE_SMD",
    "NO_OVERLAP_REST_SHARE",
    "poor_balance",
    "kish_effective_sample_size",
    "standardized_mean_differences",
    "overlap_reasons",
    "DIAGNOSTIC_COLUMNS",
    "weight_diagnostics",
]

#: A standardised mean difference of ``V`` above this (in absolute value) between a slice and its
#: re-weighted population is poor balance: the usual rule of thumb of propensity-score weighting
#: (Austin 2009, Statistics in Medicine 28:3083; Stuart 2010, Statistical Science 25:1).
POOR_BALANCE_SMD = 0.1
#: A slice has no overlap with the rest when the rest's rows carry less than this share of the
#: weight they would carry if ``V`` said nothing about the slice (:func:`overlap_reasons`).
NO_OVERLAP_REST_SHARE = 0.01


def poor_balance(smd) -> bool:
    """Whether a standardised mean difference means poor balance: ``|smd| > POOR_BALANCE_SMD``.

    Parameters
    ----------
    smd : float or None
        A standardised mean difference (:func:`standardized_mean_differences`); NaN or None
        (no term to balance) is not poor.

    Returns
    -------
    bool
    """
    return smd is not None and bool(abs(float(smd)) > POOR_BALANCE_SMD)


def kish_effective_sample_size(weights, *, axis: int = 0) -> np.ndarray | float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of non-negative weights.

    Kish (1965), *Survey Sampling*: the number of equally weighted rows that give a weighted mean
    the same variance (for uncorrelated rows of equal variance). Equal weights give the number of
    rows with positive weight; ``P(A = a | V) = 1[A = a]`` gives the slice's size.

    Parameters
    ----------
    weights : array-like
        Non-negative weights, e.g. ``P(A = a | V)`` of every row (times sample weights).
    axis : int, default=0
        Axis of the rows.

    Returns
    -------
    float or ndarray
        The effective sample size along ``axis`` (NaN where every weight is 0).

    Raises
    ------
    ValueError
        If a weight is negative or not finite.
    """
    w = np.asarray(weights, dtype=np.float64)
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("weights must be finite and non-negative")
    total = w.sum(axis=axis)
    squares = (w * w).sum(axis=axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.where(squares > 0, total * total / np.where(squares > 0, squares, 1.0), np.nan)
    return float(out) if np.ndim(out) == 0 else out


def _balance_terms(frame: pd.DataFrame, categorical: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """The columns whose means are compared: a numeric column as is (rows with NaN left out of it,
    plus a missing-value indicator if any), a categorical column as one indicator per level."""
    terms, names = [], []
    for name in frame.columns:
        values = frame[name]
        if name in categorical or not pd.api.types.is_numeric_dtype(values.dtype):
            codes, levels = pd.factorize(values, sort=True, use_na_sentinel=False)
            for j, level in enumerate(levels):
                terms.append((codes == j).astype(np.float64))
                names.append(f"{name}={level}")
            continue
        x = values.to_numpy(dtype=np.float64, na_value=np.nan)
        terms.append(x)
        names.append(str(name))
        missing = np.isnan(x)
        if missing.any():
            terms.append(missing.astype(np.float64))
            names.append(f"{name} (missing)")
    return np.column_stack(terms) if terms else np.zeros((len(frame), 0)), names


def _weighted_moments(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weighted mean and variance of every column of ``x`` (rows with NaN left out per column)."""
    valid = ~np.isnan(x)
    ww = np.where(valid, w[:, None], 0.0)
    xx = np.where(valid, x, 0.0)
    total = ww.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (ww * xx).sum(axis=0) / total
        var = (ww * (xx - mean) ** 2).sum(axis=0) / total
    return mean, var


def standardized_mean_differences(
    V,
    groups,
    proba,
    *,
    n_groups: int,
    categorical: Sequence[str] = (),
    sample_weight=None,
) -> tuple[np.ndarray, list[str]]:
    """Balance of ``V`` between each slice and its re-weighted population (standardised mean difference).

    The weighted population metric ``M_a`` weights every row by ``P(A = a | V)``; if the weights
    are right, the re-weighted population has slice ``a``'s distribution of ``V`` (paper 4.2), so
    the means of ``V`` agree. For each group ``a`` and each term ``j`` of ``V``,
    ``SMD = (mean_a - mean_w) / sqrt((var_a + var_w) / 2)``: ``mean_a``, ``var_a`` over the slice's
    rows, ``mean_w``, ``var_w`` over all rows weighted by ``P(A = a | V)`` (both times
    ``sample_weight``), the standardised difference of propensity-score weighting (Austin 2009,
    Statistics in Medicine 28:3083). ``|SMD| > POOR_BALANCE_SMD`` (0.1) is poor balance.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns), or array of shape (n_samples,) or (n_samples, d)
        The control variable as the weights were fitted on (e.g.
        :func:`~disaggregated_eval.weight_models.score_frame` of a score).
        Numeric columns are compared as they are (rows with NaN left out of that column, plus a
        term for the missing-value indicator when there are any); ``categorical`` and non-numeric
        columns as one indicator per level.
    groups : array-like of shape (n_samples,)
        Group codes ``0..n_groups-1``.
    proba : array-like of shape (n_samples, n_groups)
        ``P(A = a | V)`` of every row (e.g. from
        :func:`~disaggregated_eval.weight_models.group_proba_for_control`).
    n_groups : int
        Number of groups ``K``.
    categorical : sequence of str, default=()
        Columns of ``V`` to treat as categorical.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative row weights of the evaluation.

    Returns
    -------
    smd : ndarray of shape (n_groups, n_terms)
        The standardised mean difference of every group and term; 0 where both variances are 0 and
        the means agree, +-inf where they differ, NaN for a group without rows or weight.
    terms : list of str
        The term names: a column's name, ``"name (missing)"``, ``"name=level"``.

    Raises
    ------
    ValueError
        If the shapes do not match, a group code is out of range, or a weight or probability is
        negative or not finite.
    """
    frame = as_control_frame(V)
    a, p, sw = _check_diagnostic_inputs(frame, groups, proba, n_groups, sample_weight)
    x, names = _balance_terms(frame, list(categorical))
    smd = np.full((n_groups, x.shape[1]), np.nan)
    for g in range(n_groups):
        in_slice = sw * (a == g)
        if in_slice.sum() <= 0 or (sw * p[:, g]).sum() <= 0:
            continue
        mean_a, var_a = _weighted_moments(x, in_slice)
        mean_w, var_w = _weighted_moments(x, sw * p[:, g])
        diff = mean_a - mean_w
        scale = np.sqrt((var_a + var_w) / 2.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            smd[g] = np.where(
                scale > 0, diff / np.where(scale > 0, scale, 1.0), np.where(diff == 0, 0.0, np.sign(diff) * np.inf)
            )
    return smd, names


def _check_diagnostic_inputs(frame, groups, proba, n_groups, sample_weight):
    n = len(frame)
    n_groups = check_int(n_groups, "n_groups", minimum=2, maximum=MAX_CATEGORY_CODE + 1)
    a = check_group_codes(groups, "groups", n_groups)
    check_length(a, n, "groups", reference="V")
    p = np.asarray(proba, dtype=np.float64)
    if p.shape != (n, n_groups):
        raise ValueError(f"proba must have shape ({n}, {n_groups}) (rows of V, n_groups); got {p.shape}")
    if not np.isfinite(p).all() or (p < 0).any():
        raise ValueError("proba must be finite and non-negative")
    if sample_weight is None:
        sw = np.ones(n)
    else:
        sw = check_weights(sample_weight, n, "sample_weight")
    return a, p, sw


def _separated(inside: np.ndarray, outside: np.ndarray) -> str:
    """``"above"`` or ``"below"`` if every value of ``inside`` lies above or below every value of
    ``outside``, else ``""``."""
    if inside.min() > outside.max():
        return "above"
    if inside.max() < outside.min():
        return "below"
    return ""


def _rest_share(sw: np.ndarray, p: np.ndarray, inside: np.ndarray) -> float:
    """Share of the weight ``sw * p`` on rows outside the slice, relative to that if ``p`` were
    constant (``V`` independent of ``A``): ``(1 - s) / (1 - pi)``; NaN if undefined."""
    w = sw * p
    total, rows = w.sum(), sw.sum()
    pi = sw[inside].sum() / rows if rows > 0 else np.nan
    if not total > 0 or not pi < 1:
        return float("nan")
    return float((w[~inside].sum() / total) / (1.0 - pi))


def overlap_reasons(
    V,
    groups,
    proba,
    *,
    n_groups: int,
    sample_weight=None,
    max_cells: int = MAX_CELLS,
    min_rest_share: float = NO_OVERLAP_REST_SHARE,
) -> list[str]:
    """Why a slice's ``T_a`` has no overlap to stand on, or ``""``: one reason per group.

    ``T_a = metric(A = a) - M_a`` compares the slice with the other rows that have the same ``V``.
    When ``V`` (nearly) determines membership (features that contain the attribute, such as age
    for an age group; a score that takes different values in each group), no such rows exist:
    ``M_a`` is made of the slice's own rows and ``T_a`` is 0 by construction, not evidence of
    anything. Checked, in this order:

    1. a discrete ``V`` (at most ``max_cells`` distinct values): the slice and the rest share no
       value of ``V``;
    2. a single numeric column: every value of the slice lies above (or below) every value of
       the rest;
    3. with the weights ``w = P(A = a | V)`` (times ``sample_weight``): the rest's rows carry
       ``rest_share = (1 - s) / (1 - pi)`` of the weight they would carry if ``V`` said nothing
       about the slice, with ``s`` the slice's share of ``sum w`` and ``pi`` its share of the rows
       (``rest_share`` is 1 when ``V`` is independent of ``A`` and 0 when ``V`` determines it);
       below ``min_rest_share`` (1%) the slice has no overlap. This measures what matters for
       ``M_a`` (how much of it comes from other rows) and, unlike counting rows with
       ``P(A = a | V)`` near 0 or 1, does not flag a small slice whose weights are all small.

    Parameters
    ----------
    V : DataFrame of shape (n_samples, n_columns), or array of shape (n_samples,) or (n_samples, d)
        The control variable (as the weights were fitted on).
    groups : array-like of shape (n_samples,)
        Group codes ``0..n_groups-1``.
    proba : array-like of shape (n_samples, n_groups)
        ``P(A = a | V)`` of every row.
    n_groups : int
        Number of groups ``K``.
    sample_weight : array-like of shape (n_samples,), optional
        Non-negative row weights of the evaluation.
    max_cells : int, default=MAX_CELLS
        ``V`` with at most this many distinct values is discrete (check 1).
    min_rest_share : float, default=NO_OVERLAP_REST_SHARE
        Threshold of check 3, in [0, 1).

    Returns
    -------
    list of str
        ``n_groups`` strings for a ``reason`` column: ``""`` where the slice overlaps the rest,
        else a sentence starting with ``"no overlap: "``.

    Raises
    ------
    ValueError
        As :func:`standardized_mean_differences`, or if ``max_cells`` or ``min_rest_share`` is
        invalid.
    """
    frame = as_control_frame(V)
    a, p, sw = _check_diagnostic_inputs(frame, groups, proba, n_groups, sample_weight)
    max_cells = check_int(max_cells, "max_cells", minimum=1)
    if not isinstance(min_rest_share, (int, float)) or not 0 <= min_rest_share < 1:
        raise ValueError(f"min_rest_share must be a number in [0, 1); got {min_rest_share!r}")
    codes, n_cells = cell_codes(frame)
    single = frame.shape[1] == 1 and pd.api.types.is_numeric_dtype(frame.iloc[:, 0].dtype)
    values = frame.iloc[:, 0].to_numpy(dtype=np.float64, na_value=np.nan) if single else None
    reasons = []
    for g in range(n_groups):
        inside = (a == g) & (sw > 0)
        outside = (a != g) & (sw > 0)
        if not inside.any() or not outside.any():
            reasons.append("")
            continue
        if n_cells <= max_cells and not np.intersect1d(codes[inside], codes[outside]).size:
            reasons.append(
                f"no overlap: the slice and the rest share no value of V ({np.unique(codes[inside]).size} "
                f"value(s) in the slice, {np.unique(codes[outside]).size} in the rest)"
            )
            continue
        separated = single and not np.isnan(values).any() and _separated(values[inside], values[outside])
        if separated:
            reasons.append(f"no overlap: every value of V in the slice lies {separated} every value in the rest")
            continue
        rest = _rest_share(sw, p[:, g], a == g)
        if rest < min_rest_share:
            reasons.append(
                f"no overlap: V nearly determines the slice (the other rows carry {100 * rest:.2g}% of the "
                f"weight they would carry if V said nothing about it), so M_a is the slice's own metric"
            )
            continue
        reasons.append("")
    return reasons


#: Columns of :func:`weight_diagnostics`.
DIAGNOSTIC_COLUMNS: tuple[str, ...] = (
    "group",
    "n_rows",
    "balance_smd",
    "balance_term",
    "poor_balance",
    "effective_sample_size",
    "rest_share",
    "overlap_reason",
)


def weight_diagnostics(
    V,
    groups,
    proba,
    *,
    n_groups: int,
    categorical: Sequence[str] = (),
    sample_weight=None,
    max_cells: int = MAX_CELLS,
    min_rest_share: float = NO_OVERLAP_REST_SHARE,
) -> pd.DataFrame:
    """Balance, effective sample size and overlap of the weights ``P(A = a | V)``, one row per group.

    Parameters
    ----------
    V, groups, proba, n_groups, categorical, sample_weight
        As in :func:`standardized_mean_differences`.
    max_cells, min_rest_share
        As in :func:`overlap_reasons`.

    Returns
    -------
    DataFrame of shape (n_groups, 8)
        Columns :data:`DIAGNOSTIC_COLUMNS`: ``group`` (code, int64), ``n_rows`` (rows of the slice,
        int64), ``balance_smd`` (the standardised mean difference of largest absolute value over
        the terms of ``V``, float64), ``balance_term`` (its term), ``poor_balance``
        (``|balance_smd| > POOR_BALANCE_SMD``), ``effective_sample_size`` (Kish's, of the weights
        ``P(A = a | V)`` times ``sample_weight`` over all rows: between the slice's size when ``V``
        determines ``A`` and all rows when it says nothing; :func:`kish_effective_sample_size`),
        ``rest_share`` (check 3 of :func:`overlap_reasons`) and ``overlap_reason`` (``""`` or the
        reason of :func:`overlap_reasons`).

    Raises
    ------
    ValueError
        As :func:`standardized_mean_differences` and :func:`overlap_reasons`.
    """
    frame = as_control_frame(V)
    a, p, sw = _check_diagnostic_inputs(frame, groups, proba, n_groups, sample_weight)
    smd, names = standardized_mean_differences(
        frame, a, p, n_groups=n_groups, categorical=categorical, sample_weight=sw
    )
    reasons = overlap_reasons(
        frame, a, p, n_groups=n_groups, sample_weight=sw, max_cells=max_cells, min_rest_share=min_rest_share
    )
    w = sw[:, None] * p
    ess = kish_effective_sample_size(w, axis=0)
    rows = []
    for g in range(n_groups):
        finite = np.where(np.isnan(smd[g]), -1.0, np.abs(smd[g]))
        j = int(np.argmax(finite)) if smd.shape[1] else -1
        value = float(smd[g, j]) if j >= 0 else np.nan
        inside = a == g
        rest = _rest_share(sw, p[:, g], inside)
        rows.append(
            (g, int(inside.sum()), value, names[j] if j >= 0 else "", poor_balance(value),
             float(ess[g]), float(rest), reasons[g])
        )  # fmt: skip
    out = pd.DataFrame.from_records(rows, columns=list(DIAGNOSTIC_COLUMNS))
    return out.astype({"group": np.int64, "n_rows": np.int64})
