"""Evaluation of a selected sample: correction by known margins and sensitivity bounds under selection.

The evaluation sample is often not the target population: it holds the rows with ``S = 1`` of a
selection (a hospital's patients, a lender's approved applicants; paper section 3.2 and
Supplementary A.2). This module makes two explicit assumptions computable (``docs/method.md``,
"Evaluation under selection"):

1. **Known margins** (survey post-stratification and raking; Deville and Sarndal 1992, Lumley 2010
   ch. 7). When the target population's shares of the cells ``c`` of the modelled variables are
   known (the groups ``A``, or ``(A, Y)`` when prevalence by group is known too), every row of cell
   ``c`` gets the weight ``w(c) = P_target(c) / P_sample(c)`` (:func:`poststratification_weights`;
   :func:`raking_weights` when several margins are known that do not form one joint table). The
   weighted metrics estimate the target's metrics exactly when selection depends on the modelled
   variables only (``S`` independent of ``(X, R)`` given ``c``). In the bootstrap the weights are
   recomputed on every resample from the resample's own cell shares (:func:`resampled_cell_weights`),
   so the intervals include the uncertainty of the weighting.
2. **Marginal sensitivity model** (Tan 2006; Zhao, Small and Bhattacharya 2019; Dorn and Guo 2022).
   If selection also depends on variables that were not modelled, the true inverse-probability
   weight ``1 / P(S = 1 | x, a, y)`` of a row differs from the identified one. Tan's model bounds
   the odds ratio between ``P(S = 1 | x, a, y)`` and ``P(S = 1 | c)`` by ``Gamma``; the weights it
   allows lie in ``[1 + (1/pi - 1)/Gamma, 1 + (1/pi - 1) Gamma]`` with ``pi = P(S = 1 | c)``, inside
   the box ``[w/Gamma, w Gamma]`` with ``w = 1/pi``. A metric is a ratio of weighted sums, so only
   weight ratios matter and the box can be centred on the margin weights without knowing
   ``P(S = 1)``: :func:`ratio_bounds` gives the smallest and largest metric over the box (valid,
   slightly conservative for the model; sharp for the box itself). At ``Gamma = 1`` the bounds are
   the (weighted) estimate.

Every metric of :data:`BOUNDED_METRICS` is a weighted mean ``sum w b h / sum w b`` of a per-row value
``h`` over the rows with ``b > 0`` (:func:`metric_row_values`, from the one home of the metric
formulas :mod:`disaggregated_eval.engine.sums`). The extremes of a weighted mean over a box of
weights are attained by a threshold rule on the sorted values (the Charnes-Cooper linear-fractional
programme; Dorn and Guo 2022, Proposition 2): the rows above a cut get the upper weight, the others
the lower; all cuts are tried with prefix sums (``O(n log n)``). The AUC, a ratio of a bilinear form
in the weights, has no such rule and is not bounded here.

The bound of a difference ``T = metric(slice) - metric(overall)`` goes through the rest of the rows
(:func:`slice_difference_bounds`): ``T = f (m_S - m_R)`` with the slice's and the rest's means, which
share no row (so the bounds of ``m_S - m_R`` are sharp), and ``f = W_R / (W_S + W_R)`` bounded
separately: valid, and sharp in where it reaches 0 (the breakdown); the table gives its intersection
with the plain combination (both are valid). The plain combination
``[lower(slice) - upper(reference), upper(slice) - lower(reference)]`` (:func:`difference_bounds`,
used when the slice is not inside the reference) is valid but gives the slice's rows two weights at
once, far wider. Bootstrap intervals of the bounds take the ``(1 - confidence)/2`` percentile of the lower
bound and the ``(1 + confidence)/2`` percentile of the upper bound over the resamples (Zhao et al.
2019, section 4); :func:`breakdown_gamma` is the smallest ``Gamma`` at which such an interval of a
difference reaches 0. With ``family_wise`` (the audit), the differences of one analysis are one family:
their intervals are taken at a common level, the sup-t level of a simultaneous band over their bounds
(:func:`disaggregated_eval.intervals.band_level`, the lower bounds checked from below and the upper
bounds from above, the largest level over ``Gamma = 1`` and the grid), so that the chance that any
breakdown claim of the analysis is wrong is the ``1 - confidence`` of one interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from . import vocabulary
from .engine.resampling import resample_counts
from .engine.sums import PROPORTIONS, RATIOS_OF_SUMS, categories, ratio_of_sums_values
from .intervals import band_level, degenerate, effective_size, percentile_bounds
from .memory import MAX_GAMMAS
from .metrics import check_metric_names
from .validation import brief, check_int, check_open_unit

__all__ = [
    "BOUNDED_METRICS",
    "SHARE_TOLERANCE",
    "MIN_SHARE",
    "GAMMA_MAX",
    "RESULT_COLUMNS",
    "check_gammas",
    "check_target_shares",
    "metric_row_values",
    "poststratification_weights",
    "poststratification_cell_weights",
    "raking_weights",
    "resampled_cell_weights",
    "effective_sample_size",
    "ratio_bounds",
    "difference_bounds",
    "slice_difference_bounds",
    "bounds_interval",
    "breakdown_gamma",
    "gamma_star",
    "selection_analysis",
]

#: Metrics with sensitivity bounds: every metric that is a weighted mean of a per-row value (all but
#: the AUC), in the canonical order.
BOUNDED_METRICS: tuple[str, ...] = tuple(m for m in vocabulary.METRICS if m in PROPORTIONS or m in RATIOS_OF_SUMS)
#: Target shares must sum to 1 within this tolerance (a table of shares rounded to 4 decimals may
#: miss 1 by a few 1e-5).
SHARE_TOLERANCE = 1e-3
#: Smallest target share of a cell with rows. A share below it stands for less than one person in 10^12
#: (more people than live on Earth): a share of 0 by another name, whose rows would carry no visible
#: weight in any estimate, so it is refused as 0 is.
MIN_SHARE = 1e-12
#: The largest ``Gamma`` searched by :func:`breakdown_gamma`; a difference that survives it is
#: reported as ``inf`` ("beyond 100").
GAMMA_MAX = 100.0
#: Columns of :func:`selection_analysis`.
RESULT_COLUMNS: tuple[str, ...] = (
    "slice",
    "metric",
    "quantity",
    "gamma",
    "estimate",
    "ci_low",
    "ci_high",
    "bound_low",
    "bound_high",
    "bound_ci_low",
    "bound_ci_high",
    "bound_band_low",
    "bound_band_high",
    "band_level",
    "breakdown_gamma",
    "effective_n",
    "n_denominator",
    "n_resamples",
    "n_undefined",
)


# ----------------------------------------------------------------------------------------------
# Checks
# ----------------------------------------------------------------------------------------------
def check_gammas(gammas: Any, name: str = "gammas") -> np.ndarray:
    """Sensitivity parameters: finite numbers >= 1, increasing, without repeats, at most
    :data:`disaggregated_eval.memory.MAX_GAMMAS` of them.

    Returns
    -------
    ndarray of shape (n_gammas,), float64

    Raises
    ------
    ValueError
        Naming the bad value (``Gamma`` below 1, not finite, not increasing, empty, too many).
    """
    if isinstance(gammas, (str, bytes)):
        raise ValueError(f"{name} must be a list of numbers >= 1; got {brief(gammas)}")
    values = list(np.atleast_1d(np.asarray(gammas, dtype=object)))
    if not values:
        raise ValueError(f"{name} must hold at least one value >= 1; got none")
    if len(values) > MAX_GAMMAS:
        raise ValueError(
            f"{name} gives {len(values):,} values of Gamma, more than the limit of {MAX_GAMMAS} (each adds bounds "
            f"for every slice and metric); give fewer, e.g. 1.25,1.5,2,3"
        )
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)):
            raise ValueError(f"{name} must be numbers >= 1; got {brief(v)}")
        if not (math.isfinite(float(v)) and float(v) >= 1.0):
            raise ValueError(f"{name} must be finite numbers >= 1 (1: no unmeasured selection); got {brief(v)}")
        out.append(float(v))
    arr = np.asarray(out)
    if (np.diff(arr) <= 0).any():
        raise ValueError(f"{name} must be increasing without repeats; got {brief(out)}")
    return arr


def check_target_shares(shares: Any, present: Any, *, name: str = "target shares", labels: Sequence[str] | None = None):
    """Target shares of the cells: finite, > 0 for every cell with rows, summing to 1.

    Parameters
    ----------
    shares : array-like of shape (n_cells,)
        ``P_target(c)``.
    present : array-like of shape (n_cells,), bool
        Whether the sample has rows in cell ``c``.
    name : str
        Used in messages.
    labels : sequence of str, optional
        Display labels of the cells (messages name them).

    Returns
    -------
    ndarray of shape (n_cells,), float64

    Raises
    ------
    ValueError
        If a share is negative, not finite, below :data:`MIN_SHARE` for a cell with rows (it cannot be
        weighted to 0 mass without dropping its rows), positive for a cell without rows (no row can carry its mass), or
        the shares do not sum to 1 within :data:`SHARE_TOLERANCE`.
    """
    s = np.asarray(shares, dtype=np.float64).ravel()
    present = np.asarray(present, dtype=bool).ravel()
    if s.shape != present.shape:
        raise ValueError(f"{name}: {s.size} shares for {present.size} cells")
    names = list(labels) if labels is not None else [str(i) for i in range(s.size)]
    bad = ~np.isfinite(s) | (s < 0)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} must be finite numbers >= 0; got {float(s[i])!r} for {names[i]}")
    zero = present & (s < MIN_SHARE)
    if zero.any():
        i = int(np.flatnonzero(zero)[0])
        raise ValueError(
            f"{name}: the share of {names[i]} is {s[i]:g} but the data have rows there; give it a share >= "
            f"{MIN_SHARE:g} (below it, a share is 0 by another name: less than one person in 10^12)"
        )
    absent = ~present & (s > 0)
    if absent.any():
        i = int(np.flatnonzero(absent)[0])
        raise ValueError(
            f"{name}: {names[i]} has a share of {s[i]:g} in the target but no row in the data; "
            "no row can carry its mass"
        )
    total = float(s.sum())
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ValueError(f"{name} must sum to 1 (within {SHARE_TOLERANCE:g}); they sum to {total:.6g}")
    return s / total


# ----------------------------------------------------------------------------------------------
# Metrics as weighted means
# ----------------------------------------------------------------------------------------------
def metric_row_values(
    metric: str, y: Any, scores: Any, *, threshold: float = 0.5, preference_threshold: float = 0.5
) -> tuple[np.ndarray, np.ndarray]:
    """A metric as a weighted mean: per-row value ``h`` and denominator weight ``b``.

    ``metric = sum w b h / sum w b`` for any row weights ``w``, as in
    :func:`disaggregated_eval.metrics.compute_metrics`. Proportions (:data:`~disaggregated_eval.
    engine.sums.PROPORTIONS`): ``b`` is 1 on the denominator's outcome categories, ``h`` is 1 on the
    numerator's; ratios of sums (:func:`~disaggregated_eval.engine.sums.ratio_of_sums_values`,
    ``sum w a / sum w b``): ``h = a / b`` where ``b > 0`` (0 elsewhere, where ``a`` is 0 too).

    Parameters
    ----------
    metric : str
        One of :data:`BOUNDED_METRICS`.
    y : array-like of shape (n,)
        Labels 0/1.
    scores : array-like of shape (n,)
        Scores in [0, 1].
    threshold, preference_threshold : float
        As in :func:`~disaggregated_eval.metrics.compute_metrics`.

    Returns
    -------
    h, b : ndarray of shape (n,), float64

    Raises
    ------
    ValueError
        If ``metric`` has no bounds (the AUC) or is unknown.
    """
    (metric,) = check_metric_names([metric])
    if metric not in BOUNDED_METRICS:
        raise ValueError(f"metric {metric!r} has no sensitivity bounds; expected one of {BOUNDED_METRICS}")
    y = np.asarray(y, dtype=np.float64)
    scores = np.asarray(scores, dtype=np.float64)
    if metric in PROPORTIONS:
        numerator, denominator = PROPORTIONS[metric]
        cat = categories(y, scores, threshold)
        return np.isin(cat, numerator).astype(np.float64), np.isin(cat, denominator).astype(np.float64)
    odds = preference_threshold / (1.0 - preference_threshold)
    a, b = ratio_of_sums_values(metric, y, scores, threshold=threshold, odds=odds)
    with np.errstate(invalid="ignore", divide="ignore"):
        h = np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)
    return h, np.asarray(b, dtype=np.float64)


# ----------------------------------------------------------------------------------------------
# Margin weights
# ----------------------------------------------------------------------------------------------
def poststratification_weights(
    cells: Any, target_shares: Any, *, sample_weight: Any = None, labels: Sequence[str] | None = None
) -> np.ndarray:
    """Post-stratification weights: ``w(c) = P_target(c) / P_sample(c)`` for every row of cell ``c``.

    Survey weighting to a known joint table of cells (Lumley 2010, section 7.2). With cells of
    ``A`` only, a within-group metric is unchanged (a constant weight cancels); the overall metric
    and every comparison with it move. With cells of ``(A, Y)``, every metric that is not
    conditional on ``Y`` moves within a group too.

    Parameters
    ----------
    cells : array-like of shape (n,)
        Cell codes ``0 .. n_cells - 1``.
    target_shares : array-like of shape (n_cells,)
        Target shares (checked by :func:`check_target_shares`).
    sample_weight : array-like of shape (n,), optional
        Design weights of the rows (default 1); the sample share is the weighted one.
    labels : sequence of str, optional
        Cell labels for error messages.

    Returns
    -------
    ndarray of shape (n,)
        Row weights; their weighted cell shares equal ``target_shares`` and their mean is 1 (when
        ``sample_weight`` is None).

    Raises
    ------
    ValueError
        As :func:`check_target_shares`, or for cell codes outside ``0 .. n_cells - 1``.
    """
    codes = np.asarray(cells)
    base = np.ones(codes.size) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    return base * poststratification_cell_weights(codes, target_shares, sample_weight=base, labels=labels)[codes]


def poststratification_cell_weights(
    cells: Any, target_shares: Any, *, sample_weight: Any = None, labels: Sequence[str] | None = None
) -> np.ndarray:
    """The weight ``P_target(c) / P_sample(c)`` of each cell (0 for a cell without rows), shape (n_cells,): the
    factor :func:`poststratification_weights` gives each row of the cell; parameters and errors as there.

    Examples
    --------
    >>> poststratification_cell_weights(np.array([0, 0, 0, 1]), [0.5, 0.5]).tolist()
    [0.6666666666666666, 2.0]
    """
    target = np.asarray(target_shares, dtype=np.float64).ravel()
    codes = np.asarray(cells)
    if codes.size and (codes.min() < 0 or codes.max() >= target.size):
        raise ValueError(f"cell codes must lie in 0..{target.size - 1}; got {codes.min()}..{codes.max()}")
    base = np.ones(codes.size) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    mass = np.bincount(codes, weights=base, minlength=target.size)
    target = check_target_shares(target, mass > 0, labels=labels)
    share = mass / mass.sum()
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(mass > 0, target / np.where(share > 0, share, 1.0), 0.0)


def raking_weights(
    cell_mass: Any,
    margins: Sequence[tuple[Any, Any]],
    *,
    max_iter: int = 1000,
    tol: float = 1e-10,
) -> np.ndarray:
    """Raking (iterative proportional fitting) of cell weights to several known margins.

    Deming and Stephan (1940); Lumley 2010, section 7.3. The joint cells of the modelled variables
    are known in the sample; the target gives each margin (e.g. the shares of race, and separately
    of sex) but not their joint table. Starting from weight 1, each pass scales every cell so that
    one margin's weighted shares equal its target, in turn, until every margin is met within
    ``tol``. A short IPF of our own (no library needed for a few cells); it works on any leading
    shape, so one call rakes every bootstrap resample at once.

    Parameters
    ----------
    cell_mass : array-like of shape (..., n_cells)
        Sample mass (row counts or weighted counts) of each joint cell; a leading axis may hold
        resamples.
    margins : sequence of (codes, shares)
        ``codes``: array of shape (n_cells,), the level of each joint cell in this margin;
        ``shares``: array of shape (n_levels,), the target share of each level (summing to 1).
    max_iter : int, default 1000
    tol : float, default 1e-10
        Largest absolute difference between a weighted margin share and its target at the end.

    Returns
    -------
    ndarray of shape (..., n_cells)
        Weight per row of each cell (0 for a cell without mass); the weighted shares match every
        margin.

    Raises
    ------
    ValueError
        If a margin's shares are invalid (:func:`check_target_shares` against the cells present in
        the sample) or raking does not converge within ``max_iter`` passes (the margins contradict
        the sample's empty cells).
    """
    mass = np.asarray(cell_mass, dtype=np.float64)
    total_mass = mass.sum(axis=-1, keepdims=True)
    checked = []
    for j, (codes, shares) in enumerate(margins):
        codes = np.asarray(codes, dtype=np.int64).ravel()
        shares = np.asarray(shares, dtype=np.float64).ravel()
        if codes.shape[0] != mass.shape[-1]:
            raise ValueError(f"margin {j}: {codes.shape[0]} cell codes for {mass.shape[-1]} cells")
        onehot = np.zeros((mass.shape[-1], shares.size))
        onehot[np.arange(codes.size), codes] = 1.0
        present = (mass.reshape(-1, mass.shape[-1]) @ onehot > 0).all(axis=0)
        checked.append((onehot, check_target_shares(shares, present, name=f"margin {j} shares")))
    weight = np.ones_like(mass)
    for _ in range(check_int(max_iter, "max_iter", minimum=1)):
        worst = 0.0
        for onehot, shares in checked:
            level_mass = (mass * weight) @ onehot / total_mass
            with np.errstate(invalid="ignore", divide="ignore"):
                factor = np.where(level_mass > 0, shares / np.where(level_mass > 0, level_mass, 1.0), 0.0)
            worst = max(worst, float(np.nanmax(np.abs(level_mass - shares))))
            weight = weight * (factor @ onehot.T)
        if worst <= tol:
            return np.where(mass > 0, weight, 0.0)
    raise ValueError(f"raking did not converge in {max_iter} passes (largest margin error {worst:.3g})")


def resampled_cell_weights(cells: Any, target_shares: Any, counts: np.ndarray) -> np.ndarray:
    """Post-stratification weights re-estimated on every bootstrap resample.

    Parameters
    ----------
    cells : array-like of shape (n,)
        Cell codes ``0 .. n_cells - 1`` (the sample's cells all checked by the caller, e.g. with
        :func:`poststratification_weights`).
    target_shares : array-like of shape (n_cells,)
    counts : ndarray of shape (n_resamples, n)
        How often each row is drawn (:func:`disaggregated_eval.engine.resample_counts`), times its design
        weight if any.

    Returns
    -------
    ndarray of shape (n_resamples, n_cells)
        ``P_target(c) / P_resample(c)``; NaN in every cell of a resample that lost a cell of positive
        target share (that resample's corrected metrics are undefined).
    """
    target = np.asarray(target_shares, dtype=np.float64).ravel()
    codes = np.asarray(cells, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.float64)
    batch = counts.shape[0]
    # every resample's cell masses in one bincount (no (n, n_cells) indicator matrix: the audit's units may be many)
    flat = (np.arange(batch, dtype=np.int64)[:, None] * target.size + codes[None, :]).ravel()
    mass = np.bincount(flat, weights=counts.ravel(), minlength=batch * target.size).reshape(batch, target.size)
    share = mass / mass.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(share > 0, target / np.where(share > 0, share, 1.0), 0.0)
    lost = ((share == 0) & (target > 0)).any(axis=1)
    weight[lost] = np.nan
    return weight


def effective_sample_size(weights: Any, frequency_weight: Any = None) -> float:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` of row weights (Kish 1965).

    Parameters
    ----------
    weights : array-like of shape (n,)
    frequency_weight : array-like of shape (n,), optional
        Rows each row stands for, all > 0: ``weights[i]`` is then the summed weight of row ``i``'s
        ``frequency_weight[i]`` rows (each weighing ``weights[i] / frequency_weight[i]``), and the size is
        that of those rows.

    Returns
    -------
    float
        ``n`` for equal weights; smaller the more the weights vary; 0 without weight.

    Examples
    --------
    >>> effective_sample_size([1.0, 1.0, 2.0]), effective_sample_size([2.0, 2.0], frequency_weight=[2, 2])
    (2.6666666666666665, 4.0)
    """
    w = np.asarray(weights, dtype=np.float64)
    squares = w * w if frequency_weight is None else w * w / np.asarray(frequency_weight, dtype=np.float64)
    return float(effective_size(w.sum(), squares.sum()))


# ----------------------------------------------------------------------------------------------
# Bounds over a box of weights
# ----------------------------------------------------------------------------------------------
class _SortedSums:
    """Prefix sums of ``w`` and ``w h`` in increasing ``h``, at every cut between distinct values.

    Built once per slice and metric (the sort and the cumulative sums). :meth:`bounds` finds the
    optimal cut by Dinkelbach's iteration (Dinkelbach 1967): from ``theta`` = the estimate, give the
    upper weight to the rows above ``theta`` (a binary search in the sorted values), take the
    resulting mean as the next ``theta``; ``theta`` increases and the cut moves one way, so the
    iteration ends, in a few steps, at the global optimum of the linear-fractional programme. Each
    step is ``O(log m)`` per resample, so the bisection of :func:`breakdown_gamma` stays cheap.
    """

    def __init__(self, values: np.ndarray, weights: np.ndarray) -> None:
        order = np.argsort(values, kind="stable")
        h = values[order]
        w = weights[..., order]
        # last row of each run of equal values
        ends = np.flatnonzero(np.append(h[1:] != h[:-1], True)) if h.size else np.zeros(0, dtype=np.int64)
        self.values = h[ends]  # the distinct values, increasing
        self.total = w.sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.estimate = np.where(
                self.total > 0, (w * h).sum(axis=-1) / np.where(self.total > 0, self.total, 1.0), np.nan
            )
        zero = np.zeros(w.shape[:-1] + (1,))
        # column k: the sums over the k smallest distinct values
        self.sw = np.concatenate([zero, np.cumsum(w, axis=-1)[..., ends]], axis=-1)
        self.swh = np.concatenate([zero, np.cumsum(w * h, axis=-1)[..., ends]], axis=-1)

    def _mean_at(self, k: np.ndarray, g2: float, upper: bool) -> np.ndarray:
        """The mean when the values at index ``>= k`` (upper) or ``< k`` (lower) weigh ``Gamma^2``."""
        sw = np.take_along_axis(self.sw, k[..., None], axis=-1)[..., 0]
        swh = np.take_along_axis(self.swh, k[..., None], axis=-1)[..., 0]
        tw, twh = self.sw[..., -1], self.swh[..., -1]
        with np.errstate(invalid="ignore", divide="ignore"):
            if upper:
                return (swh + g2 * (twh - swh)) / (sw + g2 * (tw - sw))
            return (g2 * swh + (twh - swh)) / (g2 * sw + (tw - sw))

    def _extreme(self, g2: float, upper: bool) -> np.ndarray:
        defined = self.total > 0
        theta = np.where(defined, self.estimate, 0.0)
        k = np.full(theta.shape, -1, dtype=np.int64)
        for _ in range(self.values.size + 2):
            side = "right" if upper else "left"  # upper: up-weight h > theta; lower: up-weight h < theta
            new_k = np.searchsorted(self.values, theta, side=side).astype(np.int64)
            if np.array_equal(new_k, k):
                break
            k = new_k
            theta = np.where(defined, self._mean_at(k, g2, upper), 0.0)
        best = np.maximum(theta, self.estimate) if upper else np.minimum(theta, self.estimate)
        return np.where(defined, best, np.nan)

    def bounds(self, gamma: float) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bound at ``gamma`` (exactly the estimate at 1)."""
        if gamma == 1.0:
            return self.estimate, self.estimate
        g2 = gamma * gamma  # the box [w / Gamma, w Gamma] times Gamma: [w, w Gamma^2]
        return self._extreme(g2, upper=False), self._extreme(g2, upper=True)


def ratio_bounds(values: Any, weights: Any, gammas: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Smallest and largest weighted mean ``sum v h / sum v`` over the box ``v in [w/Gamma, w Gamma]``.

    The threshold rule (Dorn and Guo 2022, Proposition 2; the linear-fractional programme of
    Charnes and Cooper 1962): the maximum gives ``w Gamma`` to the rows whose value is above a cut
    and ``w / Gamma`` to the others, the cut being the maximum itself; prefix sums in value order
    (``O(n log n)`` for the sort) and Dinkelbach's iteration over the cut (a few binary searches per
    ``Gamma``) find it. The minimum mirrors it.

    Parameters
    ----------
    values : array-like of shape (n,)
        Per-row values ``h`` (finite).
    weights : array-like of shape (n,) or (n_resamples, n)
        Non-negative central weights (e.g. margin weight times bootstrap count times ``b`` of
        :func:`metric_row_values`); a leading axis computes every resample at once.
    gammas : array-like of shape (n_gammas,)
        Sensitivity parameters >= 1 (:func:`check_gammas`).

    Returns
    -------
    estimate : ndarray of shape (...)
        ``sum w h / sum w`` (NaN without weight), the bounds at ``Gamma = 1``.
    low, high : ndarray of shape (n_gammas, ...)
        The bounds; exactly ``estimate`` where ``Gamma = 1`` and never on the wrong side of it.

    Raises
    ------
    ValueError
        If the shapes disagree or a ``Gamma`` is invalid.
    """
    h = np.asarray(values, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if h.ndim != 1 or w.ndim > 2 or w.shape[-1] != h.shape[0]:
        raise ValueError(f"values must have shape (n,) and weights (n,) or (n_resamples, n); got {h.shape}, {w.shape}")
    g = check_gammas(gammas)
    sums = _SortedSums(h, w)
    low = np.empty((g.size,) + sums.estimate.shape)
    high = np.empty_like(low)
    for k, gamma in enumerate(g):
        low[k], high[k] = sums.bounds(float(gamma))
    return sums.estimate, low, high


def difference_bounds(
    low: np.ndarray, high: np.ndarray, reference_low: np.ndarray, reference_high: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``metric(slice) - metric(reference)``: ``[low - reference_high, high - reference_low]``.

    Valid for any weights in the box; not sharp when the slice's rows are also in the reference (the
    two extremes may give one row two different weights). At ``Gamma = 1`` both ends are the
    difference of the estimates.

    Parameters
    ----------
    low, high, reference_low, reference_high : ndarray of one shape
        Bounds of the slice's and the reference's metric (:func:`ratio_bounds`).

    Returns
    -------
    low, high : ndarray of the same shape
    """
    return np.asarray(low) - np.asarray(reference_high), np.asarray(high) - np.asarray(reference_low)


def slice_difference_bounds(
    slice_bounds: tuple[np.ndarray, np.ndarray],
    rest_bounds: tuple[np.ndarray, np.ndarray],
    slice_weight: np.ndarray,
    rest_weight: np.ndarray,
    gamma: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``metric(slice) - metric(overall)`` through the rest of the rows (valid, tighter).

    With ``W_S``, ``W_R`` the weights of the slice's and of the rest's rows (in the metric's
    denominator) and ``m_S``, ``m_R`` their means, ``metric(overall) = (W_S m_S + W_R m_R) / (W_S + W_R)``,
    so ``T = f d`` with ``f = W_R / (W_S + W_R)`` and ``d = m_S - m_R``. The slice and the rest share no
    row, so over the box ``d`` ranges over ``[low_S - high_R, high_S - low_R]`` (sharp) and ``f`` over
    ``[1 / (1 + rho Gamma^2), 1 / (1 + rho / Gamma^2)]`` with ``rho = W_S / W_R``; ``T`` lies between
    the products of their ends. Valid for every weight vector in the box; the sign of ``T`` is the sign
    of ``d``, so the bounds reach 0 exactly when the sharp bounds of ``d`` do (no loss for the breakdown
    ``Gamma``). A rest without weight makes ``T = 0``.

    Parameters
    ----------
    slice_bounds, rest_bounds : tuple of 2 ndarray
        ``(low, high)`` of the slice's and the rest's metric at ``gamma`` (:func:`ratio_bounds`).
    slice_weight, rest_weight : ndarray
        ``W_S`` and ``W_R`` at the central weights (same shape as the bounds).
    gamma : float

    Returns
    -------
    low, high : ndarray
    """
    d_low = np.asarray(slice_bounds[0]) - np.asarray(rest_bounds[1])
    d_high = np.asarray(slice_bounds[1]) - np.asarray(rest_bounds[0])
    g2 = gamma * gamma
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.asarray(slice_weight, dtype=np.float64) / np.asarray(rest_weight, dtype=np.float64)
        f_low, f_high = 1.0 / (1.0 + rho * g2), 1.0 / (1.0 + rho / g2)
    low = np.where(d_low < 0, d_low * f_high, d_low * f_low)
    high = np.where(d_high > 0, d_high * f_high, d_high * f_low)
    empty_rest = np.asarray(rest_weight) == 0
    return np.where(empty_rest, 0.0, low), np.where(empty_rest, 0.0, high)


def bounds_interval(low: np.ndarray, high: np.ndarray, *, confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bootstrap interval of the bounds (Zhao, Small and Bhattacharya 2019, section 4).

    Parameters
    ----------
    low, high : ndarray of shape (n_resamples, ...)
        Lower and upper bounds on every resample (NaN where undefined).
    confidence : float, default 0.95
        In (0, 1]; 1 (a simultaneous band that needs every replicate, :func:`disaggregated_eval.intervals.
        band_level`) gives the smallest lower bound and the largest upper bound.

    Returns
    -------
    ci_low, ci_high : ndarray of shape (...)
        The ``(1 - confidence) / 2`` percentile of ``low`` and the ``(1 + confidence) / 2``
        percentile of ``high`` over the finite resamples (numpy's linear interpolation, as
        :func:`disaggregated_eval.intervals.percentile_interval`); at ``Gamma = 1`` the percentile
        interval of the estimate.
    """
    if not (isinstance(confidence, (int, float, np.floating)) and confidence == 1.0):
        confidence = check_open_unit(confidence, "confidence")
    lo = np.asarray(low, dtype=np.float64)
    hi = np.asarray(high, dtype=np.float64)
    shape = lo.shape[1:]
    ci_low, _ = percentile_bounds(lo.reshape(lo.shape[0], -1), confidence)
    _, ci_high = percentile_bounds(hi.reshape(hi.shape[0], -1), confidence)
    return ci_low.reshape(shape), ci_high.reshape(shape)


def breakdown_gamma(
    interval: Callable[[float], tuple[float, float]], *, gamma_max: float = GAMMA_MAX, rtol: float = 1e-3
) -> float:
    """The smallest ``Gamma`` at which an interval of a difference's bounds reaches 0.

    The bounds widen monotonically in ``Gamma`` (the boxes are nested), so the interval's ends move
    outward and bisection on ``log Gamma`` finds the crossing.

    Parameters
    ----------
    interval : callable
        ``interval(gamma) -> (ci_low, ci_high)``, e.g. :func:`bounds_interval` of a difference.
    gamma_max : float, default :data:`GAMMA_MAX`
    rtol : float, default 1e-3
        Relative precision of the result (the returned value is the upper end of the last bracket:
        the interval contains 0 there).

    Returns
    -------
    float
        NaN if the interval at ``Gamma = 1`` is undefined or already contains 0 (nothing flagged);
        ``inf`` if it still excludes 0 at ``gamma_max``; else the breakdown ``Gamma``.
    """

    def reaches_zero(gamma: float) -> bool:
        lo, hi = interval(gamma)
        return bool(lo <= 0.0 <= hi)

    lo, hi = interval(1.0)
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo <= 0.0 <= hi:
        return math.nan
    if not reaches_zero(gamma_max):
        return math.inf
    left, right = 0.0, math.log(gamma_max)
    while right - left > math.log1p(rtol):
        middle = 0.5 * (left + right)
        if reaches_zero(math.exp(middle)):
            right = middle
        else:
            left = middle
    return float(math.exp(right))


# ----------------------------------------------------------------------------------------------
# The true selection strength of a known population
# ----------------------------------------------------------------------------------------------
def gamma_star(cell_probability: Any, probability: Any) -> dict[str, float]:
    """The true selection strength ``Gamma*`` of a population whose selection probabilities are known.

    ``pi_0(c) = P(S = 1 | c)`` is the selection probability of the cell ``c`` of the modelled variables
    (what the margins weight to; one cell without margins) and ``s = P(S = 1 | x, a, y)`` a row's
    (``docs/method.md``, "Evaluation under selection"):

    * ``gamma_msm``: Tan's marginal sensitivity model, ``exp(sup |logit pi_0(c) - logit s|)`` (``inf``
      where ``s`` is 0 or 1 and ``pi_0`` is not);
    * ``gamma_box``: the smallest ``Gamma`` at which the true inverse-probability weights ``1 / s``, up
      to a common factor, lie in the box ``[w / Gamma, w Gamma]`` around the margin weights
      ``w`` proportional to ``1 / pi_0(c)``: ``sqrt(max rho / min rho)`` with ``rho = pi_0(c) / s``
      (``inf`` where ``s = 0``: positivity fails). ``gamma_box <= gamma_msm``; the bounds of
      :func:`selection_analysis` cover the target's metrics (in the limit) from ``gamma_box`` on.

    Parameters
    ----------
    cell_probability : array-like of shape (m,)
        ``pi_0`` of each point's cell, in (0, 1].
    probability : array-like of shape (m,)
        ``s`` at each point: every point of a finite population's support, or the extreme values of
        ``s`` in each cell (the suprema are attained there).

    Returns
    -------
    dict
        ``gamma_msm`` and ``gamma_box`` (floats >= 1, possibly ``inf``).

    Raises
    ------
    ValueError
        If the shapes differ, no point is given, a ``pi_0`` is outside (0, 1] or an ``s`` outside [0, 1].
    """
    pi0 = np.asarray(cell_probability, dtype=np.float64).ravel()
    s = np.asarray(probability, dtype=np.float64).ravel()
    if pi0.shape != s.shape or not pi0.size:
        raise ValueError(
            f"cell_probability and probability must have one equal, non-zero length; got {pi0.size}, {s.size}"
        )
    if not ((pi0 > 0) & (pi0 <= 1)).all():
        raise ValueError(f"cell_probability must lie in (0, 1]; got {float(pi0[~((pi0 > 0) & (pi0 <= 1))][0])!r}")
    if not ((s >= 0) & (s <= 1)).all():
        raise ValueError(f"probability must lie in [0, 1]; got {float(s[~((s >= 0) & (s <= 1))][0])!r}")
    with np.errstate(divide="ignore"):
        rho = np.where(s > 0, pi0 / np.where(s > 0, s, 1.0), math.inf)
        extreme = (s == 0) | (s == 1) | (pi0 == 1)
        inner = np.where(extreme, 0.5, s)
        odds = np.where(extreme, 0.5, pi0)
        log_or = np.abs(np.log(odds / (1 - odds)) - np.log(inner / (1 - inner)))
    log_or = np.where(s == pi0, 0.0, np.where(extreme, math.inf, log_or))
    rho_max, rho_min = float(rho.max()), float(rho.min())
    gamma_box = math.sqrt(rho_max / rho_min) if math.isfinite(rho_max) else math.inf
    return {"gamma_msm": float(math.exp(float(log_or.max()))), "gamma_box": gamma_box}


# ----------------------------------------------------------------------------------------------
# The analysis of a sample: corrected estimates, bounds and their intervals, breakdown
# ----------------------------------------------------------------------------------------------
def selection_analysis(
    y: Any,
    scores: Any,
    slices: Mapping[str, Any],
    *,
    gammas: Any,
    cells: Any = None,
    target_shares: Any = None,
    reference: str = vocabulary.OVERALL,
    metrics: Sequence[str] = tuple(m for m in vocabulary.PIPELINE_METRICS if m in BOUNDED_METRICS),
    n_resamples: int = 1000,
    seed: int | np.random.SeedSequence,
    confidence: float = 0.95,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    breakdown: bool = True,
    family_wise: bool = False,
    min_denominator: int = 0,
    sample_weight: Any = None,
    strata: Any = None,
    frequency_weight: Any = None,
) -> pd.DataFrame:
    """Corrected metrics of slices, their sensitivity bounds per ``Gamma`` and breakdown ``Gamma``.

    For every slice (a boolean row mask; ``reference`` is the whole sample unless given among
    ``slices``) and metric: the estimate with the margin weights (:func:`poststratification_weights`;
    weight 1 without margins), its percentile bootstrap interval with the weights recomputed on every
    resample (:func:`resampled_cell_weights`), the bounds over the box ``[w/Gamma, w Gamma]`` for
    every ``Gamma`` (:func:`ratio_bounds`) and their interval (:func:`bounds_interval`). For every
    slice other than the reference, the same for the difference ``slice - reference``
    (:func:`difference_bounds`) and, if its interval at ``Gamma = 1`` excludes 0, its breakdown
    ``Gamma`` (:func:`breakdown_gamma`). With ``family_wise`` the breakdown reads the difference's
    interval at the family's common level (``band_level``; ``docs/method.md``, "Evaluation under
    selection"): the differences with at least ``min_denominator`` rows in the metric's denominator
    and a bootstrap that varies, over every metric and slice of the call, are claimed together at
    ``confidence``. Resamples are the engine's
    (:func:`disaggregated_eval.engine.resample_counts`, population scheme): with the same seed they
    are the resamples of :func:`disaggregated_eval.evaluation.controlled_evaluation`, so without
    margins the ``Gamma = 1`` rows reproduce its estimates and percentile intervals.

    Parameters
    ----------
    y : array-like of shape (n,)
        Labels 0/1.
    scores : array-like of shape (n,)
        Scores in [0, 1].
    slices : mapping of str to array-like of shape (n,), bool
        Named row masks.
    gammas : array-like of shape (n_gammas,)
        Sensitivity parameters (:func:`check_gammas`); 1 is added if missing.
    cells : array-like of shape (n,), optional
        Cell codes of the modelled variables (e.g. ``A`` or ``2 A + Y``); None: no margins.
    target_shares : array-like of shape (n_cells,), optional
        Target shares of the cells (needed with ``cells``).
    reference : str, default "overall"
        The slice that every other slice is compared with (the whole sample if not in ``slices``).
    metrics : sequence of str
        Names from :data:`BOUNDED_METRICS`.
    n_resamples : int, default 1000
    seed : int or numpy.random.SeedSequence
        Seed of the resamples.
    confidence : float, default 0.95
    threshold, preference_threshold : float
        As in :func:`~disaggregated_eval.metrics.compute_metrics`.
    breakdown : bool, default True
        Compute the breakdown ``Gamma`` of flagged differences.
    family_wise : bool, default False
        Claim the breakdowns of the call's differences as one family at ``confidence`` (a simultaneous
        band of their bounds) instead of each at ``confidence`` on its own.
    min_denominator : int, default 0
        With ``family_wise``: differences of slices with fewer rows in the metric's denominator are
        left out of the family and get no breakdown ``Gamma``.
    sample_weight : array-like of shape (n,), optional
        Design weights of the rows (survey or frequency weights): every metric is weighted by them, and
        the margin weights multiply them (the sample's cell shares are the weighted ones).
    strata : array-like of shape (n,), optional
        Strata of a ``within_group`` bootstrap (:func:`disaggregated_eval.engine.resample_counts`).
    frequency_weight : array-like of shape (n,), int > 0, optional
        Rows each row stands for (a table of counts): the result is that of the rows they stand for (their
        resamples drawn as the engine draws units, ``resample_counts(multiplicity=...)``; effective sizes and
        ``n_denominator`` in rows), each of them weighing ``sample_weight``.

    Returns
    -------
    pandas.DataFrame
        Columns :data:`RESULT_COLUMNS`; one row per (slice, metric, quantity, gamma), ``quantity``
        ``"metric"`` or ``"difference"`` (slice minus reference). ``estimate``, ``ci_low``,
        ``ci_high``: the (corrected) estimate and its percentile interval (the same on every
        ``gamma`` row); ``bound_low``/``bound_high``: the bounds; ``bound_ci_low``/``_high``: their
        interval; ``bound_band_low``/``_high`` and ``band_level``: on difference rows, the interval of the
        bounds at the level that the breakdown reads (``confidence``, or with ``family_wise`` the family's
        common level, NaN outside the family); ``breakdown_gamma``: on difference rows, where that
        interval first reaches 0 (NaN if it contains 0 at ``Gamma = 1``, ``inf`` beyond
        :data:`GAMMA_MAX`); ``effective_n``: Kish's effective size of the slice's weights;
        ``n_denominator``: the slice's rows in the metric's denominator (``b > 0``; e.g. its predicted
        positives for the precision), also on its ``difference`` rows;
        ``n_undefined``: resamples on which the quantity is undefined.

    Raises
    ------
    ValueError
        If a mask's length differs from ``y``, a slice is empty, a metric has no bounds, or the
        margins are invalid (:func:`check_target_shares`).

    Examples
    --------
    Two slices whose label rates differ, their differences from overall claimed as one family:

    >>> rng = np.random.default_rng(0)
    >>> a = rng.random(1000) < 0.5
    >>> y = (rng.random(1000) < np.where(a, 0.5, 0.2)).astype(float)
    >>> out = selection_analysis(y, np.full(1000, 0.3), {"a": a, "b": ~a}, gammas=[1.5, 3.0],
    ...                          metrics=["label_rate"], n_resamples=400, seed=1, family_wise=True)
    >>> diff = out[(out["quantity"] == "difference") & (out["gamma"] == 1.0)]
    >>> bool((diff["band_level"] > 0.95).all() and (diff["breakdown_gamma"] > 1.2).all())
    True
    """
    y = np.asarray(y, dtype=np.float64)
    r = np.asarray(scores, dtype=np.float64)
    n = y.shape[0]
    g = check_gammas(gammas)
    if g[0] != 1.0:
        g = np.concatenate([[1.0], g])
    n_resamples = check_int(n_resamples, "n_resamples", minimum=2)
    min_denominator = check_int(min_denominator, "min_denominator", minimum=0)
    metrics = list(check_metric_names(metrics))
    for m in metrics:
        if m not in BOUNDED_METRICS:
            raise ValueError(f"metric {m!r} has no sensitivity bounds; expected a subset of {BOUNDED_METRICS}")
    masks = {}
    for name, mask in slices.items():
        mask = np.asarray(mask, dtype=bool)
        if mask.shape != (n,):
            raise ValueError(f"slice {name!r} has a mask of shape {mask.shape}; expected ({n},)")
        if not mask.any():
            raise ValueError(f"slice {name!r} has no rows")
        masks[name] = mask
    if reference not in masks:
        masks = {reference: np.ones(n, dtype=bool), **masks}
    if (cells is None) != (target_shares is None):
        raise ValueError("cells and target_shares go together (both or neither)")
    base = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    if base.shape != (n,) or not (np.isfinite(base) & (base >= 0)).all():
        raise ValueError(f"sample_weight must hold {n} finite values >= 0")
    rows = np.ones(n, dtype=np.int64) if frequency_weight is None else np.asarray(frequency_weight, dtype=np.int64)
    if rows.shape != (n,) or not (rows > 0).all():
        raise ValueError(f"frequency_weight must hold {n} whole numbers > 0")
    draws = resample_counts(n, seed=seed, start=0, stop=n_resamples, strata=strata, multiplicity=frequency_weight)
    counts = draws.astype(np.float64) * base
    design = base if frequency_weight is None else base * rows  # each table row: the summed weight of its rows
    if cells is None:
        row_weight = design
        resample_weight = counts
    else:
        codes = np.asarray(cells, dtype=np.int64)
        row_weight = poststratification_weights(codes, target_shares, sample_weight=design)
        resample_weight = counts * resampled_cell_weights(codes, target_shares, counts)[:, codes]
    undefined_resample = ~np.isfinite(resample_weight).all(axis=1)
    resample_weight = np.where(undefined_resample[:, None], 0.0, resample_weight)

    def metric_sums(metric: str, names: Sequence[str] | None = None):
        """Per slice (those of ``names`` and the reference; default all): the sample's and the resamples' sums,
        and for each difference its bounds functions."""
        h, b = metric_row_values(metric, y, r, threshold=threshold, preference_threshold=preference_threshold)
        sample, resampled, differences = {}, {}, {}
        chosen = masks if names is None else {k: v for k, v in masks.items() if k in names or k == reference}
        for name, mask in chosen.items():
            sel = mask & (b > 0)
            sample[name] = _SortedSums(h[sel], (row_weight * b)[sel])
            resampled[name] = _SortedSums(h[sel], (resample_weight * b)[:, sel])
            resampled[name].estimate[undefined_resample] = np.nan
        for name, mask in chosen.items():
            if name == reference:
                continue
            rest = None
            if not (mask & ~masks[reference]).any():  # the slice lies in the reference: bound through the rest
                sel = masks[reference] & ~mask & (b > 0)
                rest = (
                    _SortedSums(h[sel], (row_weight * b)[sel]),
                    _SortedSums(h[sel], (resample_weight * b)[:, sel]),
                )
            differences[name] = (
                _difference(sample[name], sample[reference], None if rest is None else rest[0]),
                _difference(resampled[name], resampled[reference], None if rest is None else rest[1]),
            )
        return b, sample, resampled, differences

    def crossing_at(rdiff, level: float) -> float:
        return breakdown_gamma(lambda gamma: _interval(*rdiff(gamma), level))

    # Pass 1: estimates, bounds and their intervals; the breakdown too when each difference is its own family.
    quantities, family = [], []
    for metric in metrics:
        b, sample, resampled, differences = metric_sums(metric)
        for name, mask in masks.items():
            ess = effective_sample_size(row_weight[mask], None if frequency_weight is None else rows[mask])
            denominator = int(rows[mask & (b > 0)].sum())
            items = [("metric", _bounds_of(sample[name], g), _bounds_of(resampled[name], g), math.nan)]
            if name in differences:
                diff, rdiff = differences[name]
                point, reps = _bounds_of(diff, g), _bounds_of(rdiff, g)
                crossing = math.nan
                if breakdown and not family_wise:
                    crossing = crossing_at(rdiff, confidence)
                elif (
                    breakdown
                    and denominator >= min_denominator
                    and math.isfinite(float(point[0]))
                    and not degenerate(reps[0][~undefined_resample])
                ):
                    family.append((metric, name, len(quantities) + 1, reps))
                items.append(("difference", point, reps, crossing))
            quantities += [(name, metric, *item, ess, denominator) for item in items]
        del sample, resampled, differences
    # The family's common level: the largest, over Gamma = 1 and the grid, of the one-sided sup-t level of the
    # members' bounds (the lower bounds checked from below, the upper bounds from above; intervals.band_level).
    level = confidence
    if family and not undefined_resample.all():  # all undefined (margins' cells that most resamples miss): no band
        defined = ~undefined_resample
        for k in range(g.size):
            lows = np.stack([reps[1][k][defined] for *_, reps in family], axis=1)
            highs = np.stack([reps[2][k][defined] for *_, reps in family], axis=1)
            sides = np.repeat([-1, 1], len(family))
            columns = np.concatenate([lows, highs], axis=1)
            level = max(level, band_level(columns, np.ones(columns.shape[1], dtype=bool), confidence, sides=sides))
        # Pass 2: the breakdown of every member whose band excludes 0 at Gamma = 1 (the others have none), at
        # that level (the sums rebuilt one metric at a time).
        crossings = {}
        claimed = [(m, name, index) for m, name, index, reps in family if _excludes_zero(reps, level)]
        for metric in dict.fromkeys(m for m, *_ in claimed):
            differences = metric_sums(metric, [name for m, name, _ in claimed if m == metric])[3]
            for m, name, index in claimed:
                if m == metric:
                    crossings[index] = crossing_at(differences[name][1], level)
            del differences
        for index, crossing in crossings.items():
            quantities[index] = quantities[index][:5] + (crossing,) + quantities[index][6:]
    members = {index for *_, index, _ in family}
    records = []
    for index, (name, metric, quantity, (e, lo, hi), (re, rlo, rhi), crossing, ess, denominator) in enumerate(
        quantities
    ):
        ci_low, ci_high = _interval(re, re, confidence)
        n_undef = int((~np.isfinite(re)).sum())
        # the band of the bounds: at the family's level for its members, each quantity's own interval otherwise
        band = level if index in members else confidence
        for k, gamma in enumerate(g):
            b_lo, b_hi = _interval(rlo[k], rhi[k], confidence)
            s_lo, s_hi = (b_lo, b_hi) if band == confidence else _interval(rlo[k], rhi[k], band)
            if quantity == "metric" or (family_wise and index not in members):
                s_lo, s_hi, shown_level = math.nan, math.nan, math.nan
            else:
                shown_level = band
            records.append(
                (name, metric, quantity, float(gamma), float(e), ci_low, ci_high, float(lo[k]), float(hi[k]),
                 b_lo, b_hi, s_lo, s_hi, shown_level, crossing, ess, denominator, n_resamples, n_undef)
            )  # fmt: skip
    return pd.DataFrame.from_records(records, columns=list(RESULT_COLUMNS))


def _difference(
    sums: _SortedSums, reference: _SortedSums, rest: _SortedSums | None = None
) -> Callable[[float], tuple[np.ndarray, np.ndarray]]:
    """``gamma -> bounds of metric(slice) - metric(reference)``: :func:`slice_difference_bounds` through
    the ``rest`` (the reference's rows outside the slice) when given, else :func:`difference_bounds`."""

    def bounds(gamma: float) -> tuple[np.ndarray, np.ndarray]:
        if gamma == 1.0:
            d = sums.estimate - reference.estimate
            return d, d
        lo, hi = sums.bounds(gamma)
        rlo, rhi = reference.bounds(gamma)
        plain_low, plain_high = difference_bounds(lo, hi, rlo, rhi)
        if rest is None:
            return plain_low, plain_high
        low, high = slice_difference_bounds((lo, hi), rest.bounds(gamma), sums.total, rest.total, gamma)
        d = sums.estimate - reference.estimate  # both are valid: their intersection is, and holds the estimate
        return np.minimum(np.maximum(low, plain_low), d), np.maximum(np.minimum(high, plain_high), d)

    return bounds


def _bounds_of(source, gammas: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Estimate and bounds per ``Gamma`` of a :class:`_SortedSums` or a difference's bounds function."""
    fn = source.bounds if isinstance(source, _SortedSums) else source
    pairs = [fn(float(gamma)) for gamma in gammas]
    return pairs[0][0], np.array([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def _excludes_zero(reps: tuple[np.ndarray, np.ndarray, np.ndarray], level: float) -> bool:
    """Whether the interval at ``level`` of a difference's resampled bounds at ``Gamma = 1`` (the first of
    :func:`_bounds_of`'s grid) excludes 0, as :func:`breakdown_gamma` asks first."""
    low, high = _interval(reps[1][0], reps[2][0], level)
    return math.isfinite(low) and math.isfinite(high) and not low <= 0.0 <= high


def _interval(low: np.ndarray, high: np.ndarray, confidence: float) -> tuple[float, float]:
    """:func:`bounds_interval` of one quantity (1-D resamples)."""
    a, b = bounds_interval(np.asarray(low)[:, None], np.asarray(high)[:, None], confidence=confidence)
    return float(a[0]), float(b[0])
