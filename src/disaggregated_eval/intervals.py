"""Intervals from bootstrap replicates: percentile intervals, paired differences, simultaneous bands.

One home for every interval of the package (``docs/method.md``, "Bootstrap" and "Intervals"):

* :func:`percentile_interval`: the percentile interval over the finite replicates of each quantity
  (numpy's linear interpolation, computed from one sort per column, equal to ``np.nanpercentile``);
* :func:`percentile_bounds`: the same bounds at any level, from replicates already sorted once
  (:class:`SortedReplicates`), for the bands;
* :func:`band_level`: the common level of a simultaneous (sup-t, quantile-based) band over a family
  of quantities (Montiel Olea and Plagborg-Moller, 2019);
* :func:`max_abs_t` and :func:`max_t_level`: the studentized max-|t| of bootstrap deviations and the
  two-sided level whose score intervals hold simultaneously over a family (the critical value of a
  sup-t band, for intervals of any shape);
* :func:`degenerate`: which quantities have a zero-width bootstrap distribution (every finite
  replicate the same value): such an interval is not evidence of anything and is marked, never shown
  as an ordinary interval.

Undefined replicates (NaN or infinite) are left out of a quantity's interval and counted
(``n_undefined``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numba
import numpy as np
from scipy import special

from .registry import METRIC_RECORDS
from .validation import brief, check_open_unit
from .vocabulary import CAVEAT_DEGENERATE, CAVEAT_UNDEFINED

__all__ = [
    "INTERVAL_METHODS",
    "interval_method",
    "normal_quantile",
    "effective_size",
    "wilson_interval",
    "newcombe_difference",
    "mover_mean",
    "mover_ratio",
    "auc_score_interval",
    "bca_interval",
    "jackknife_acceleration",
    "grouped_jackknife_acceleration",
    "ratio_jackknife_acceleration",
    "SortedReplicates",
    "percentile_interval",
    "percentile_bounds",
    "band_level",
    "max_abs_t",
    "max_t_level",
    "degenerate",
    "zero_width",
    "ROUNDING",
    "CAVEAT_UNDEFINED",
    "CAVEAT_DEGENERATE",
    "caveats",
]


#: Two values of a metric within this share of ``max(1, |value|)`` are the same value up to rounding
#: (the same sums added in another order, a ratio of sums of equal values): a bootstrap whose replicates
#: all agree so is degenerate (:func:`degenerate`), and a replicate that agrees so with the estimate is a
#: tie of BCa's bias correction (:func:`bca_interval`).
ROUNDING = 1e-12

#: The interval of each metric on one slice (``docs/method.md``, "Intervals"; its record's ``interval``,
#: :data:`disaggregated_eval.registry.INTERVAL_KINDS`): ``wilson`` (Wilson's score interval on the
#: metric's own counts, Kish's effective size under sample weights) for the proportions, ``auc_score``
#: (Newcombe's score-type interval of the AUC) for the AUC, ``bca`` (the bias-corrected and accelerated
#: bootstrap, jackknife acceleration) for the means and ratios of sums, ``mover_wilson``
#: (:func:`mover_mean` of the Wilson bounds of its parts) for the balanced accuracy. Score intervals
#: keep their level at small counts and never have zero width; the percentile bootstrap does neither
#: (it collapses to a point on a slice without events).
INTERVAL_METHODS: dict[str, str] = {r.name: r.interval for r in METRIC_RECORDS}


def interval_method(metric: str) -> str:
    """The interval method of ``metric`` on a slice (:data:`INTERVAL_METHODS`)."""
    return INTERVAL_METHODS[metric]


def _as_replicates(replicates: Any) -> np.ndarray:
    values = np.asarray(replicates)
    if values.dtype.kind not in "biuf":
        raise ValueError(f"replicates must be numeric; got dtype {values.dtype}")
    if values.ndim == 0:
        raise ValueError("replicates must have at least one dimension (the resamples)")
    return np.asarray(values, dtype=np.float64)  # no copy for float64 input; never modified


class SortedReplicates:
    """Replicates sorted once along the resample axis (NaN last), for many percentile look-ups.

    Parameters
    ----------
    replicates : ndarray of shape (n_resamples, ...)
        NaN or infinite entries are undefined resamples.
    """

    def __init__(self, replicates: np.ndarray) -> None:
        values = _as_replicates(replicates)
        finite = np.isfinite(values)
        if not finite.all():
            values = np.where(finite, values, np.nan)
        self.values = values
        self.sorted = np.sort(values, axis=0)
        self.count = finite.sum(axis=0)

    def bounds(self, level: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """numpy's linear-interpolation percentiles ``50 (1 -+ level)`` over each column's finite values.

        Returns
        -------
        low, high : ndarray of the shape of a replicate
            NaN where no replicate is finite.
        """
        k = self.count
        ok = k > 0
        level = np.broadcast_to(np.asarray(level, dtype=np.float64), k.shape)[ok]
        flat = self.sorted.reshape(self.sorted.shape[0], -1)
        cols = np.flatnonzero(ok.ravel())
        kk = k[ok]
        out = []
        for q in (0.5 * (1.0 - level), 0.5 * (1.0 + level)):
            bound = np.full(k.shape, np.nan)
            virtual = q * (kk - 1)
            previous = np.floor(virtual).astype(np.int64)
            following = np.minimum(previous + 1, kk - 1)
            gamma = virtual - previous
            lo = flat[previous, cols]
            hi = flat[following, cols]
            diff = hi - lo
            value = lo + diff * gamma
            value = np.where(gamma >= 0.5, hi - diff * (1.0 - gamma), value)  # numpy's _lerp
            bound[ok] = value
            out.append(bound)
        return out[0], out[1]


def percentile_interval(
    replicates: Any, *, confidence: float = 0.95, axis: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile interval over the finite replicates.

    Parameters
    ----------
    replicates : array-like
        Bootstrap replicates, e.g. of shape (n_resamples, n_evaluations, n_metrics); NaN (or
        infinite) entries mark resamples on which the quantity is undefined.
    confidence : float, default=0.95
        Coverage of the interval, in (0, 1); the bounds are the ``(1 - confidence) / 2`` and
        ``(1 + confidence) / 2`` quantiles (numpy's default linear interpolation).
    axis : int, default=0
        The resample axis.

    Returns
    -------
    low, high : ndarray
        Bounds with ``axis`` removed (0-d arrays for 1-D input); NaN where no replicate is finite.
        Equal to ``np.nanpercentile`` over the finite values (one sort per column instead of one
        Python call per column).
    n_undefined : ndarray of int64
        Number of non-finite replicates along ``axis``.

    Raises
    ------
    ValueError
        If ``confidence`` is not in (0, 1) or the replicates are not numeric.
    TypeError
        If ``confidence`` is not a number.
    """
    confidence = check_open_unit(confidence, "confidence")
    values = np.moveaxis(_as_replicates(replicates), axis, 0)
    columns = SortedReplicates(values)
    low, high = columns.bounds(confidence)
    n_undefined = (values.shape[0] - columns.count).astype(np.int64)
    return low, high, n_undefined


def percentile_bounds(replicates: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Percentile bounds at ``level`` over the finite replicates (axis 0), NaN where none is finite.

    Parameters
    ----------
    replicates : ndarray of shape (n_resamples, n_columns)
    level : float
        In (0, 1]; the bounds are the ``50 (1 - level)`` and ``50 (1 + level)`` percentiles.

    Returns
    -------
    low, high : ndarray of shape (n_columns,)
        numpy's linear interpolation, as :func:`percentile_interval` (so that the band at
        ``level = confidence`` is the percentile interval).
    """
    return SortedReplicates(replicates).bounds(level)


def _joint_coverage(columns: SortedReplicates, level: float, sides: np.ndarray | None = None) -> float:
    """Fraction of replicates (rows) inside every column's percentile band at ``level``.

    An undefined (NaN) replicate counts as outside: a band cannot claim a resample on which its
    quantity does not exist. ``sides`` (one per column, see :func:`band_level`): -1 checks the lower end
    only, +1 the upper end only, 0 both.
    """
    low, high = columns.bounds(level)
    values = columns.values
    if sides is None:
        inside = (values >= low) & (values <= high)
    else:
        defined = np.isfinite(values)
        inside = defined & ((sides > 0) | (values >= low)) & ((sides < 0) | (values <= high))
    return float(np.mean(np.all(inside, axis=1)))


def band_level(
    replicates: np.ndarray, family: np.ndarray, confidence: float, *, iterations: int = 40, sides: Any = None
) -> float:
    """The common level ``c >= confidence`` of a simultaneous band over a family of quantities.

    The band of quantity ``s`` is its percentile interval widened from level ``confidence`` to a
    common level ``c``, the smallest at which a fraction ``confidence`` of the bootstrap replicates
    lies inside the bands of every member of the family at once: the max-|t| (sup-t) band computed
    from bootstrap quantiles (Montiel Olea and Plagborg-Moller, 2019, "Simultaneous confidence
    bands", J. Applied Econometrics), found by bisection on the band's own percentiles.

    Parameters
    ----------
    replicates : ndarray of shape (n_resamples, n_quantities)
        Bootstrap replicates (NaN where undefined).
    family : ndarray of shape (n_quantities,), bool
        The quantities the band must cover at once.
    confidence : float
    iterations : int
        Bisection steps on ``c`` (40 steps: ``c`` to ~1e-12).
    sides : array-like of shape (n_quantities,), optional
        Which end of each quantity's band a replicate must respect: -1 the lower end only, +1 the upper
        end only, 0 both (the default for every quantity). One-sided columns make a band of an
        interval whose two ends come from two quantities, e.g. the interval of sensitivity bounds
        (the lower end from the replicates of the lower bound, the upper end from those of the upper
        bound; :func:`disaggregated_eval.selection.bounds_interval`): give the lower bound with -1 and
        the upper bound with +1. Where the two are equal (sensitivity bounds at ``Gamma = 1``) this is
        the two-sided band of that one quantity.

    Returns
    -------
    float
        The smallest ``c`` in ``[confidence, 1]`` (to the bisection's precision) at which a fraction
        ``confidence`` of the replicates lies inside the bands of every member at once;
        ``confidence`` when the family is empty or already covered at that level; 1 when even the
        replicates' range does not cover that fraction (undefined replicates count as outside).

    Examples
    --------
    Twenty independent quantities need a wider band than one (about the 99.7% level for a joint 95%):

    >>> import numpy as np
    >>> reps = np.random.default_rng(0).normal(size=(4000, 20))
    >>> level = band_level(reps, np.ones(20, dtype=bool), 0.95)
    >>> bool(0.995 < level < 0.999)
    True
    >>> band_level(reps, np.eye(20, dtype=bool)[0], 0.95)  # one quantity: its own interval
    0.95
    """
    if not np.any(family):
        return float(confidence)
    family = np.asarray(family, dtype=bool)
    side = None
    if sides is not None:
        side = np.broadcast_to(np.asarray(sides), family.shape)
        if not np.isin(side, (-1, 0, 1)).all():
            raise ValueError(f"sides must be -1, 0 or +1 for each quantity; got {brief(np.unique(side).tolist())}")
        side = side[family]
    columns = SortedReplicates(replicates[:, family])
    if _joint_coverage(columns, confidence, side) >= confidence:
        return float(confidence)
    lo, hi = float(confidence), 1.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if _joint_coverage(columns, mid, side) >= confidence:
            hi = mid
        else:
            lo = mid
    return hi


def max_abs_t(deviations: np.ndarray) -> np.ndarray:
    """The largest studentized deviation of each resample over a set of quantities.

    Parameters
    ----------
    deviations : ndarray of shape (n_resamples, n_quantities)
        Each quantity's bootstrap replicate minus its estimate (or any linearisation of it, e.g. of a
        log ratio); NaN or infinite where the quantity is undefined on the resample.

    Returns
    -------
    ndarray of shape (n_resamples,)
        ``max_j |deviation_j| / sd_j`` with ``sd_j`` the standard deviation of quantity ``j``'s finite
        deviations; a resample on which a quantity is undefined gives ``inf`` (it counts as outside,
        as in :func:`band_level`); a quantity whose deviations do not vary (``sd = 0``, a degenerate
        bootstrap) is left out. 0 for a resample when no quantity is left.

    Notes
    -----
    The studentized max statistic of a sup-t band (Chernozhukov, Lee and Rosen, 2013, "Intersection
    bounds: estimation and inference", Econometrica 81; Montiel Olea and Plagborg-Moller, 2019); with
    :func:`max_t_level` it gives the level at which intervals of every quantity hold at once.
    """
    values = np.asarray(deviations, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError(f"deviations must have shape (n_resamples, n_quantities); got shape {values.shape}")
    if values.shape[1] == 0:
        return np.zeros(values.shape[0])
    finite = np.isfinite(values)
    with np.errstate(invalid="ignore", divide="ignore"):
        count = finite.sum(axis=0)
        centred = np.where(finite, values, 0.0)
        mean = centred.sum(axis=0) / np.maximum(count, 1)
        var = np.where(finite, (values - mean) ** 2, 0.0).sum(axis=0) / np.maximum(count - 1, 1)
    sd = np.sqrt(var)
    keep = (count >= 2) & (sd > ROUNDING * np.maximum(1.0, np.abs(mean)))
    if not keep.any():
        return np.zeros(values.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.abs(values[:, keep]) / sd[keep]
    t = np.where(finite[:, keep], t, np.inf)
    return t.max(axis=1)


def max_t_level(max_t: np.ndarray, tail: float) -> float:
    """The two-sided level of per-quantity intervals that hold jointly but for ``tail``.

    Parameters
    ----------
    max_t : ndarray of shape (n_resamples,)
        :func:`max_abs_t` of the family (or the elementwise maximum of several families').
    tail : float
        In (0, 1): the probability, under the bootstrap, that some quantity's ``|t|`` exceeds the
        critical value (``1 - confidence`` for a two-sided simultaneous band; ``(1 - confidence) / 2``
        for one side of a one-sided family such as the lower bounds of a largest gap).

    Returns
    -------
    float
        ``2 Phi(c) - 1`` with ``c`` the ``1 - tail`` quantile of ``max_t`` (numpy's linear
        interpolation): an interval of each quantity at this level (a Wilson, Newcombe or MOVER
        interval, whose half-width is about ``c`` standard errors) has the joint coverage ``1 - tail``.
        At least ``1 - tail`` (one quantity); 1 when the quantile is infinite (too many undefined
        resamples to bound anything).
    """
    values = np.asarray(max_t, dtype=np.float64)
    if values.size == 0:
        return float(1.0 - tail)
    with np.errstate(invalid="ignore"):  # an infinite |t| (an undefined resample): inf - inf between two
        c = float(np.quantile(values, 1.0 - tail))
    if not np.isfinite(c):
        return 1.0
    return float(max(1.0 - tail, 2.0 * special.ndtr(c) - 1.0))


def degenerate(replicates: np.ndarray, *, axis: int = 0) -> np.ndarray:
    """Whether every finite replicate of a quantity is the same value (a zero-width bootstrap).

    Parameters
    ----------
    replicates : ndarray
        Replicates with the resample axis ``axis``.

    Returns
    -------
    ndarray of bool, the shape of a replicate
        True where at least one replicate is finite and all finite ones are equal up to rounding
        (a spread of at most ``1e-12 max(1, |value|)``: a ratio of sums of equal values, e.g. a Brier
        score of rows that all have the same loss, varies only in its last bits).
    """
    values = np.moveaxis(_as_replicates(replicates), axis, 0)
    finite = np.isfinite(values)
    hi = np.max(np.where(finite, values, -np.inf), axis=0, initial=-np.inf)  # initial: no replicate at all
    lo = np.min(np.where(finite, values, np.inf), axis=0, initial=np.inf)
    return finite.any(axis=0) & zero_width(lo, hi)


def zero_width(low: Any, high: Any) -> np.ndarray:
    """Whether an interval ``[low, high]`` has width 0 up to rounding (the rule of :func:`degenerate`).

    Parameters
    ----------
    low, high : array-like (broadcast)
        Bounds.

    Returns
    -------
    ndarray of bool
        True where both bounds are finite and ``high - low <= 1e-12 max(1, |high|)``
        (:data:`ROUNDING`): an interval that claims a certainty no sample gives.
    """
    low = np.asarray(low, dtype=np.float64)
    high = np.asarray(high, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        return np.isfinite(low) & np.isfinite(high) & (high - low <= ROUNDING * np.maximum(1.0, np.abs(high)))


def caveats(estimate: np.ndarray, is_degenerate: np.ndarray) -> np.ndarray:
    """The ``caveat`` text of each estimate: ``""``, :data:`CAVEAT_UNDEFINED` or :data:`CAVEAT_DEGENERATE`.

    Parameters
    ----------
    estimate : ndarray
        Point estimates (NaN where undefined).
    is_degenerate : ndarray of bool, same shape
        :func:`degenerate` of the estimates' replicates.

    Returns
    -------
    ndarray of object (str), same shape
    """
    out = np.full(np.shape(estimate), "", dtype=object)
    out[np.asarray(is_degenerate, dtype=bool)] = CAVEAT_DEGENERATE
    out[~np.isfinite(np.asarray(estimate, dtype=np.float64))] = CAVEAT_UNDEFINED
    return out


# ----------------------------------------------------------------------------------------------
# Intervals from counts: score (Wilson-type) intervals that keep their level at small counts
# ----------------------------------------------------------------------------------------------


def normal_quantile(level: float | np.ndarray) -> np.ndarray:
    """``z`` of a two-sided interval at ``level``: the ``(1 + level) / 2`` quantile of the standard normal.

    A level of 1 (a band whose level could not be calibrated below it) is taken as ``1 - 1e-12``
    (``z`` about 7.1), so that the score and BCa intervals stay finite.
    """
    level = np.minimum(np.asarray(level, dtype=np.float64), 1.0 - 1e-12)
    return special.ndtri(0.5 * (1.0 + level))


def effective_size(sum_w: np.ndarray, sum_w2: np.ndarray) -> np.ndarray:
    """Kish's effective sample size ``(sum w)^2 / sum w^2`` (the row count when every weight is 1).

    Parameters
    ----------
    sum_w, sum_w2 : ndarray
        Sums of the weights and of their squares over the rows of a denominator.

    Returns
    -------
    ndarray
        0 where there is no weight.
    """
    sum_w = np.asarray(sum_w, dtype=np.float64)
    sum_w2 = np.asarray(sum_w2, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sum_w2 > 0.0, sum_w * sum_w / np.where(sum_w2 > 0.0, sum_w2, 1.0), 0.0)


def wilson_interval(p: np.ndarray, n: np.ndarray, level: float | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wilson's score interval of a proportion (Wilson, 1927; Newcombe, 1998, method 3).

    Parameters
    ----------
    p : ndarray
        Observed proportions (weighted: the weighted share), in [0, 1].
    n : ndarray
        Denominators; under sample weights, the effective sample size (:func:`effective_size`).
    level : float or ndarray
        Two-sided level(s) in (0, 1] (broadcast).

    Returns
    -------
    low, high : ndarray
        NaN where ``n == 0`` or ``p`` is NaN. Never of zero width when ``n > 0`` and ``level > 0``:
        ``0/n`` gives ``[0, z^2 / (n + z^2)]``, which is what makes it keep its level where the
        percentile bootstrap collapses to a point (a slice without events).
    """
    p = np.asarray(p, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    z = normal_quantile(level)
    z2 = z * z
    with np.errstate(invalid="ignore", divide="ignore"):
        denominator = 1.0 + z2 / n
        center = (p + z2 / (2.0 * n)) / denominator
        half = z / denominator * np.sqrt(np.maximum(p * (1.0 - p) / n + z2 / (4.0 * n * n), 0.0))
        low = np.clip(center - half, 0.0, 1.0)
        high = np.clip(center + half, 0.0, 1.0)
    bad = ~(n > 0) | ~np.isfinite(p)
    return np.where(bad, np.nan, low), np.where(bad, np.nan, high)


def newcombe_difference(
    p1: np.ndarray, n1: np.ndarray, p2: np.ndarray, n2: np.ndarray, level: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Newcombe's hybrid score interval of ``p1 - p2`` for two independent proportions (Newcombe, 1998,
    method 10): Wilson's bounds of each, combined; valid when one side has no events.

    Parameters
    ----------
    p1, n1, p2, n2 : ndarray
        Proportions and (effective) denominators of the two samples.
    level : float or ndarray

    Returns
    -------
    low, high : ndarray
        NaN where either side is undefined.
    """
    l1, u1 = wilson_interval(p1, n1, level)
    l2, u2 = wilson_interval(p2, n2, level)
    d = np.asarray(p1, dtype=np.float64) - np.asarray(p2, dtype=np.float64)
    low = d - np.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)
    high = d + np.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)
    return low, high


def mover_mean(
    p: Sequence[np.ndarray], n: Sequence[np.ndarray], level: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Interval of the mean ``(p_1 + ... + p_k) / k`` of independent proportions (MOVER with Wilson's bounds).

    The method of variance estimates recovery (Zou and Donner, 2008, "Construction of confidence
    limits about effect measures: a general approach", Statistics in Medicine 27; for a linear
    function of binomial proportions, Zou, Huang and Zhang, 2009, Computational Statistics and Data
    Analysis 53) from each proportion's Wilson bounds ``l_i, u_i`` at ``level``::

        low  = mean - sqrt(sum_i (p_i - l_i)^2) / k
        high = mean + sqrt(sum_i (u_i - p_i)^2) / k

    The balanced accuracy's interval (the mean of the sensitivity and the specificity, whose rows, the
    positives and the negatives, are disjoint). Like Newcombe's interval of a difference (the same
    construction with signs), it keeps close to its level at small counts and is never of zero width
    when every part has rows; it stays within ``[mean(l_i), mean(u_i)]``, so inside [0, 1].

    Parameters
    ----------
    p : sequence of k ndarrays (broadcast together)
        The proportions, in [0, 1].
    n : sequence of k ndarrays
        Their (effective, Kish's under sample weights) denominators.
    level : float or ndarray
        Two-sided level(s) in (0, 1].

    Returns
    -------
    low, high : ndarray
        NaN where any part is undefined (``n_i == 0`` or ``p_i`` NaN).
    """
    parts = [np.asarray(x, dtype=np.float64) for x in p]
    bounds = [wilson_interval(x, size, level) for x, size in zip(parts, n)]
    k = len(parts)
    mean = sum(parts) / k
    low = mean - np.sqrt(sum((x - lo) ** 2 for x, (lo, _) in zip(parts, bounds))) / k
    high = mean + np.sqrt(sum((hi - x) ** 2 for x, (_, hi) in zip(parts, bounds))) / k
    return low, high


def mover_ratio(
    p1: np.ndarray, n1: np.ndarray, p2: np.ndarray, n2: np.ndarray, level: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Interval of the ratio ``p1 / p2`` of two independent proportions (MOVER-R with Wilson's bounds).

    Parameters
    ----------
    p1, n1, p2, n2 : ndarray
        Proportions and (effective) denominators of the two samples (Kish's size under sample weights).
    level : float or ndarray
        Two-sided level(s) in (0, 1].

    Returns
    -------
    low, high : ndarray
        The bounds of Donner and Zou (2012, "Closed-form confidence intervals for functions of the
        normal mean and standard deviation", Statistical Methods in Medical Research 21; the MOVER-R
        of Newcombe, 2013, "Confidence intervals for proportions and related measures of effect size",
        chapter 7) from the Wilson bounds ``l1, u1, l2, u2`` at ``level``: the roots of
        ``(p1 - theta p2)^2 = (p1 - l1)^2 + theta^2 (u2 - p2)^2`` (low) and
        ``(p1 - theta p2)^2 = (u1 - p1)^2 + theta^2 (p2 - l2)^2`` (high), written in the forms that stay
        finite when a count is 0: ``low`` is 0 when ``p1 = 0``, ``high`` is infinite when ``l2 = 0``
        (the denominator's interval reaches 0). Never of zero width when both samples have rows; NaN
        where either side is undefined.
    """
    p1, n1, p2, n2 = (np.asarray(v, dtype=np.float64) for v in (p1, n1, p2, n2))
    l1, u1 = wilson_interval(p1, n1, level)
    l2, u2 = wilson_interval(p2, n2, level)
    b = p1 * p2
    with np.errstate(invalid="ignore", divide="ignore"):
        a_low = u2 * (2.0 * p2 - u2)
        c_low = l1 * (2.0 * p1 - l1)
        root = np.sqrt(np.maximum(b * b - a_low * c_low, 0.0))
        low = np.where(c_low > 0.0, c_low / (b + root), 0.0)
        a_high = l2 * (2.0 * p2 - l2)
        c_high = u1 * (2.0 * p1 - u1)
        root = np.sqrt(np.maximum(b * b - a_high * c_high, 0.0))
        high = np.where(a_high > 0.0, (b + root) / np.where(a_high > 0.0, a_high, 1.0), np.inf)
    bad = ~(np.isfinite(l1) & np.isfinite(l2))
    return np.where(bad, np.nan, low), np.where(bad, np.nan, high)


def auc_score_interval(
    auc: np.ndarray, n_pos: np.ndarray, n_neg: np.ndarray, level: float | np.ndarray, *, iterations: int = 60
) -> tuple[np.ndarray, np.ndarray]:
    """Score-type interval of the AUC (Newcombe, 2006, "Confidence intervals for an effect size measure
    based on the Mann-Whitney statistic. Part 2", Statistics in Medicine, method 5).

    The bounds are the ``theta`` with ``|auc - theta| = z sqrt(V(theta))``, where ``V`` is the
    Hanley-McNeil variance evaluated at ``theta`` (not at the estimate, as a Wilson interval does for
    a proportion), with Newcombe's form for ``m`` positives and ``n`` negatives, ``N = (m + n) / 2``::

        V(theta) = theta (1 - theta) / (m n) * ((2 N - 1) - (3 N - 3) / ((2 - theta) (1 + theta)))

    so the interval stays inside [0, 1] and never has zero width, also for a perfectly separated
    slice (AUC 0 or 1), where the bootstrap collapses to a point.

    Parameters
    ----------
    auc : ndarray
        Estimates in [0, 1].
    n_pos, n_neg : ndarray
        Positives and negatives (under sample weights, the effective sizes of each class).
    level : float or ndarray

    Returns
    -------
    low, high : ndarray
        Found by bisection (``iterations`` steps, ~1e-18 precision); NaN where a class is empty or the
        estimate is NaN.
    """
    auc = np.asarray(auc, dtype=np.float64)
    m = np.asarray(n_pos, dtype=np.float64)
    n = np.asarray(n_neg, dtype=np.float64)
    auc, m, n, z = np.broadcast_arrays(auc, m, n, normal_quantile(level))
    big_n = 0.5 * (m + n)
    bad = ~((m > 0) & (n > 0) & np.isfinite(auc))

    def excess(theta: np.ndarray) -> np.ndarray:
        """(auc - theta)^2 - z^2 V(theta): negative inside the interval."""
        with np.errstate(invalid="ignore", divide="ignore"):
            v = (
                theta
                * (1.0 - theta)
                / (m * n)
                * ((2.0 * big_n - 1.0) - (3.0 * big_n - 3.0) / ((2.0 - theta) * (1.0 + theta)))
            )
        return (auc - theta) ** 2 - z * z * np.maximum(v, 0.0)

    safe = np.where(bad, 0.5, auc)
    bounds = []
    for side in (0.0, 1.0):
        inside = safe.copy()  # excess(auc) <= 0
        outside = np.full(safe.shape, side)  # excess(side) >= 0 (V(0) = V(1) = 0) unless auc == side
        for _ in range(iterations):
            mid = 0.5 * (inside + outside)
            is_in = excess(mid) <= 0.0
            inside = np.where(is_in, mid, inside)
            outside = np.where(is_in, outside, mid)
        bounds.append(np.where(bad, np.nan, 0.5 * (inside + outside)))
    return bounds[0], bounds[1]


def jackknife_acceleration(leave_one_out: np.ndarray, weights: np.ndarray | None = None) -> float:
    """BCa's acceleration from jackknife values (Efron, 1987; Efron and Tibshirani, 1993, eq. 14.15).

    Parameters
    ----------
    leave_one_out : ndarray of shape (n,)
        The statistic with each row left out in turn (NaN entries ignored).
    weights : ndarray of shape (n,), optional
        Row weights (a row of weight ``w`` stands for ``w`` rows: the weighted skewness of the
        influence values).

    Returns
    -------
    float
        ``a = sum w d^3 / (6 (sum w d^2)^(3/2))`` with ``d = mean - leave_one_out``; 0 when the values
        do not vary.
    """
    values = np.asarray(leave_one_out, dtype=np.float64)
    w = np.ones(values.shape) if weights is None else np.asarray(weights, dtype=np.float64)
    ok = np.isfinite(values) & (w > 0)
    if ok.sum() < 2:
        return 0.0
    values, w = values[ok], w[ok]
    d = np.average(values, weights=w) - values
    s2 = float(np.sum(w * d * d))
    if s2 <= 0.0:
        return 0.0
    return float(np.sum(w * d**3) / (6.0 * s2**1.5))


def grouped_jackknife_acceleration(
    leave_one_out: np.ndarray, codes: np.ndarray, n_groups: int, multiplicity: np.ndarray | None = None
) -> np.ndarray:
    """:func:`jackknife_acceleration` (unweighted) of every group at once.

    Parameters
    ----------
    leave_one_out : ndarray of shape (n,)
        Each row's leave-one-out value of its own group's statistic; NaN or infinite entries (rows
        that do not count, undefined values) are ignored.
    codes : ndarray of shape (n,), int
        Group of each row, ``0 .. n_groups - 1``.
    n_groups : int
    multiplicity : ndarray of shape (n,), int, optional
        Identical rows each entry stands for (frequency weights): the jackknife leaves out each of them in
        turn, all with the same value, so every sum counts the entry that many times (the result is that
        of the expanded rows, up to rounding).

    Returns
    -------
    ndarray of shape (n_groups,)
        ``sum d^3 / (6 (sum d^2)^(3/2))`` over the group's finite values, ``d = mean - value``; 0 for a
        group with fewer than two of them or without variation.
    """
    values = np.asarray(leave_one_out, dtype=np.float64)
    ok = np.isfinite(values)
    if multiplicity is None:
        count = np.bincount(codes[ok], minlength=n_groups)
        mean = np.bincount(codes[ok], weights=values[ok], minlength=n_groups) / np.maximum(count, 1)
        d = np.where(ok, mean[codes] - values, 0.0)
        s2 = np.bincount(codes, weights=d * d, minlength=n_groups)
        s3 = np.bincount(codes, weights=d * d * d, minlength=n_groups)
    else:
        m = np.asarray(multiplicity, dtype=np.float64)
        count = np.bincount(codes[ok], weights=m[ok], minlength=n_groups)
        mean = np.bincount(codes[ok], weights=m[ok] * values[ok], minlength=n_groups) / np.maximum(count, 1)
        d = np.where(ok, mean[codes] - values, 0.0)
        s2 = np.bincount(codes, weights=m * d * d, minlength=n_groups)
        s3 = np.bincount(codes, weights=m * d * d * d, minlength=n_groups)
    return _skewness_acceleration(count, s2, s3)


def _skewness_acceleration(count: np.ndarray, s2: np.ndarray, s3: np.ndarray) -> np.ndarray:
    """``s3 / (6 s2^(3/2))`` per group (0 with fewer than two values or no variation)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where((count >= 2) & (s2 > 0), s3 / (6.0 * np.maximum(s2, 1e-300) ** 1.5), 0.0)


def ratio_jackknife_acceleration(
    codes: np.ndarray, numerator: np.ndarray, denominator: np.ndarray, inside: np.ndarray, n_groups: int
) -> np.ndarray:
    """:func:`grouped_jackknife_acceleration` of every group's ratio of sums, in three passes over the rows.

    The statistic of group ``g`` is ``theta_g = A_g / B_g`` with ``A_g = sum numerator``, ``B_g = sum
    denominator`` over its rows; row ``i`` left out gives ``(A_g - numerator_i) / (B_g - denominator_i)``
    (rows not ``inside`` take no part in the jackknife, undefined values are ignored). The same sums, in
    the same order, as :func:`grouped_jackknife_acceleration` of those values (numpy's ``bincount``), so
    the results are equal bit for bit, without the row-sized temporary arrays (the sums compiled by numba).

    Parameters
    ----------
    codes : ndarray of shape (n,), int
        Group of each row, ``0 .. n_groups - 1``.
    numerator, denominator : ndarray of shape (n,), float64
        Each row's terms (weights included).
    inside : ndarray of shape (n,), bool
        Rows that are part of their group's jackknife.
    n_groups : int

    Returns
    -------
    ndarray of shape (n_groups,)
    """
    count, s2, s3 = _ratio_jackknife_sums(
        np.ascontiguousarray(codes, dtype=np.int64),
        np.ascontiguousarray(numerator, dtype=np.float64),
        np.ascontiguousarray(denominator, dtype=np.float64),
        np.ascontiguousarray(inside, dtype=np.bool_),
        int(n_groups),
    )
    return _skewness_acceleration(count, s2, s3)


@numba.njit(cache=True, error_model="numpy")
def _ratio_jackknife_sums(codes, numerator, denominator, inside, n_groups):  # pragma: no cover - compiled
    """Finite leave-one-out values per group, and the sums of their squared and cubed deviations."""
    n = codes.shape[0]
    big_a = np.zeros(n_groups)
    big_b = np.zeros(n_groups)
    for i in range(n):
        big_a[codes[i]] += numerator[i]
        big_b[codes[i]] += denominator[i]
    count = np.zeros(n_groups, dtype=np.int64)
    total = np.zeros(n_groups)
    for i in range(n):
        if inside[i]:
            g = codes[i]
            value = (big_a[g] - numerator[i]) / (big_b[g] - denominator[i])
            if np.isfinite(value):
                count[g] += 1
                total[g] += value
    mean = total / np.maximum(count, 1)
    s2 = np.zeros(n_groups)
    s3 = np.zeros(n_groups)
    for i in range(n):
        g = codes[i]
        d = 0.0
        if inside[i]:
            value = (big_a[g] - numerator[i]) / (big_b[g] - denominator[i])
            if np.isfinite(value):
                d = mean[g] - value
        d2 = d * d
        s2[g] += d2
        s3[g] += d2 * d
    return count, s2, s3


def bca_interval(
    replicates: np.ndarray, estimate: np.ndarray, acceleration: np.ndarray, level: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Bias-corrected and accelerated (BCa) bootstrap interval (Efron, 1987), per column.

    Parameters
    ----------
    replicates : ndarray of shape (n_resamples, n_columns)
        NaN entries (undefined resamples) are left out.
    estimate : ndarray of shape (n_columns,)
        The statistic on the data.
    acceleration : ndarray of shape (n_columns,)
        :func:`jackknife_acceleration` of each column.
    level : float or ndarray of shape (n_columns,)

    Returns
    -------
    low, high : ndarray of shape (n_columns,)
        The percentiles of the replicates at the BCa-adjusted levels; the bias correction
        ``z0 = Phi^-1((#{theta* < theta} + #{theta* = theta} / 2) / B)``, equal up to :data:`ROUNDING`
        (a replicate equal to the estimate but for the order of its sums is a tie, not a side). NaN
        where no replicate is finite or the estimate is undefined; a column whose replicates do not
        vary gives its one value on both sides (the caller marks it degenerate).
    """
    columns = SortedReplicates(replicates)
    values = columns.values
    k = columns.count
    estimate = np.asarray(estimate, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        tie = np.abs(values - estimate) <= ROUNDING * np.maximum(1.0, np.abs(estimate))
        below = np.sum((values < estimate) & ~tie, axis=0) + 0.5 * np.sum(tie, axis=0)
        share = np.clip(below / np.maximum(k, 1), 0.5 / np.maximum(k, 1), 1.0 - 0.5 / np.maximum(k, 1))
    z0 = special.ndtri(share)
    z = normal_quantile(level)
    a = np.asarray(acceleration, dtype=np.float64)
    quantiles = []
    for zz in (-z, z):
        with np.errstate(invalid="ignore", divide="ignore"):
            quantiles.append(special.ndtr(z0 + (z0 + zz) / (1.0 - a * (z0 + zz))))
    low = _quantile(columns, quantiles[0])
    high = _quantile(columns, quantiles[1])
    bad = (k == 0) | ~np.isfinite(estimate)
    return np.where(bad, np.nan, low), np.where(bad, np.nan, high)


def _quantile(columns: SortedReplicates, q: np.ndarray) -> np.ndarray:
    """The ``q`` quantile of each column over its finite values (numpy's linear interpolation); NaN where
    ``q`` is NaN or no value is finite."""
    """The ``q`` quantile of each column (numpy's linear interpolation over the finite values)."""
    k = columns.count
    flat = columns.sorted.reshape(columns.sorted.shape[0], -1)
    q = np.broadcast_to(np.asarray(q, dtype=np.float64), k.shape).ravel()
    kk = k.ravel()
    out = np.full(kk.shape, np.nan)
    ok = (kk > 0) & np.isfinite(q)
    cols = np.flatnonzero(ok)
    virtual = q[ok] * (kk[ok] - 1)
    previous = np.floor(virtual).astype(np.int64)
    following = np.minimum(previous + 1, kk[ok] - 1)
    gamma = virtual - previous
    lo = flat[previous, cols]
    hi = flat[following, cols]
    diff = hi - lo
    value = lo + diff * gamma
    out[ok] = np.where(gamma >= 0.5, hi - diff * (1.0 - gamma), value)
    return out.reshape(k.shape)
