"""Derived statistics: functions of several quantities, evaluated on the data and on every resample.

The bootstrap engine (:mod:`disaggregated_eval.engine`) gives, for a set of base quantities (a model's
metric on a slice, on a weighted population, ...), the point estimates and the replicates of a
*paired* bootstrap: every quantity on the same resamples. Any function of several of them then has a
paired interval: apply the same function to the point estimates and to each resample's replicates,
and take the interval of the results (as fairlearn's ``MetricFrame`` applies its derived methods to
every bootstrap sample). This module is the one home of those functions:

* :func:`difference` (slice minus overall, minus the rest, minus a reference slice, the controlled
  difference ``T_a = metric(A = a) - M_a``, a model minus its reference model),
* :func:`ratio` (disparity ratios, the observed/expected ratio),
* :func:`extreme` and :func:`gap` (max, min and max minus min over a family of slices: the
  demographic-parity difference of the selection rate, the equal-opportunity gap),
* :func:`maximum` (elementwise maximum, e.g. the equalized-odds difference ``max(TPR gap, FPR gap)``),
  :func:`minimum` (e.g. the equalized-odds ratio ``min(TPR ratio, FPR ratio)``),
* :func:`spread_ratio` (min over max over a family of slices: the demographic-parity ratio),
* :func:`complement` (``1 - x``: the true positive rate from the false negative rate),

and :func:`summarise` turns a derived set into estimates, intervals, undefined counts and caveats
(:mod:`disaggregated_eval.intervals`); :func:`bootstrap_z_pvalue` tests that a derived quantity is 0 (a
large-sample test of a difference, from its bootstrap standard error). A derived value is undefined
(NaN) on a resample where any of its inputs is.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy import special

from .intervals import caveats, degenerate, percentile_interval

__all__ = [
    "Replicated",
    "Summary",
    "take",
    "difference",
    "ratio",
    "extreme",
    "gap",
    "spread_ratio",
    "maximum",
    "minimum",
    "complement",
    "summarise",
    "bootstrap_z_pvalue",
]


@dataclass(frozen=True)
class Replicated:
    """Point estimates of a set of quantities and their paired bootstrap replicates.

    Attributes
    ----------
    point : ndarray of shape (n_quantities, ...)
        On the data themselves (trailing axes, e.g. metrics, are carried along).
    replicates : ndarray of shape (n_resamples, n_quantities, ...)
        On each resample; NaN where undefined.
    """

    point: np.ndarray
    replicates: np.ndarray

    def __len__(self) -> int:
        return int(self.point.shape[0])


def _apply(function: Callable[[np.ndarray, int], np.ndarray], x: Replicated) -> Replicated:
    """The same function of the quantity axis on the point estimates (axis 0) and replicates (axis 1)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return Replicated(point=function(x.point, 0), replicates=function(x.replicates, 1))


def _index(values: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    return np.take(values, idx, axis=axis)


def take(x: Replicated, idx: np.ndarray) -> Replicated:
    """The quantities ``idx`` (shape (n,), int) of ``x``."""
    idx = np.asarray(idx, dtype=np.int64)
    return _apply(lambda v, a: _index(v, idx, a), x)


def difference(x: Replicated, plus: np.ndarray, minus: np.ndarray) -> Replicated:
    """``x[plus] - x[minus]`` per resample (paired); where ``minus < 0``, ``x[plus]`` itself.

    Parameters
    ----------
    x : Replicated
    plus, minus : ndarray of shape (n,), int
        Indices of the quantity added and of the one subtracted (``-1``: none).

    Returns
    -------
    Replicated
        n derived quantities. Subtracting only where there is a minus is exact (``v - 0.0 == v``).
    """
    plus = np.asarray(plus, dtype=np.int64)
    minus = np.asarray(minus, dtype=np.int64)
    has = minus >= 0
    safe = np.where(has, minus, 0)

    def f(values: np.ndarray, axis: int) -> np.ndarray:
        out = _index(values, plus, axis)
        if has.any():
            shape = [1] * out.ndim
            shape[axis] = has.shape[0]
            np.subtract(out, _index(values, safe, axis), out=out, where=has.reshape(shape))
        return out

    return _apply(f, x)


def ratio(x: Replicated, numerator: np.ndarray, denominator: np.ndarray) -> Replicated:
    """``x[numerator] / x[denominator]`` per resample; NaN where the denominator is 0 or undefined.

    Parameters
    ----------
    x : Replicated
    numerator, denominator : ndarray of shape (n,), int

    Returns
    -------
    Replicated
        n derived quantities (a ratio with a zero denominator is undefined, not infinite).
    """
    numerator = np.asarray(numerator, dtype=np.int64)
    denominator = np.asarray(denominator, dtype=np.int64)

    def f(values: np.ndarray, axis: int) -> np.ndarray:
        den = _index(values, denominator, axis)
        out = _index(values, numerator, axis) / np.where(den == 0.0, np.nan, den)
        return out

    return _apply(f, x)


def extreme(x: Replicated, members: np.ndarray, kind: str) -> Replicated:
    """The largest (``kind="max"``) or smallest (``"min"``) of each row of ``members`` per resample.

    Parameters
    ----------
    x : Replicated
    members : ndarray of shape (n, max_members), int
        Indices of the quantities of each derived value, padded with -1.
    kind : {"max", "min"}

    Returns
    -------
    Replicated
        n derived quantities; NaN on a resample where any member is NaN.
    """
    members = np.atleast_2d(np.asarray(members, dtype=np.int64))
    valid = members >= 0
    safe = np.where(valid, members, 0)
    fill = -np.inf if kind == "max" else np.inf
    reduce = np.max if kind == "max" else np.min
    if kind not in ("max", "min"):
        raise ValueError(f"kind must be 'max' or 'min'; got {kind!r}")

    def f(values: np.ndarray, axis: int) -> np.ndarray:
        gathered = np.take(values, safe, axis=axis)  # axis -> (n, max_members)
        shape = [1] * gathered.ndim
        shape[axis] = valid.shape[0]
        shape[axis + 1] = valid.shape[1]
        mask = valid.reshape(shape)
        gathered = np.where(mask, gathered, fill)
        return reduce(gathered, axis=axis + 1)  # NaN propagates through max/min

    return _apply(f, x)


def gap(x: Replicated, members: np.ndarray) -> Replicated:
    """Max minus min over each row of ``members`` (padded with -1), per resample (paired).

    Returns
    -------
    Replicated
        The largest difference between two members (e.g. the demographic-parity difference when the
        members are a family's selection rates); NaN on a resample where any member is NaN.
    """
    hi = extreme(x, members, "max")
    lo = extreme(x, members, "min")
    with np.errstate(invalid="ignore"):
        return Replicated(point=hi.point - lo.point, replicates=hi.replicates - lo.replicates)


def spread_ratio(x: Replicated, members: np.ndarray) -> Replicated:
    """Min over max over each row of ``members`` (padded with -1), per resample (paired).

    Returns
    -------
    Replicated
        The smallest ratio between two members (e.g. the demographic-parity ratio when the members are
        a family's selection rates, as fairlearn's ``demographic_parity_ratio``); NaN on a resample
        where any member is NaN or the largest is 0.
    """
    hi = extreme(x, members, "max")
    lo = extreme(x, members, "min")
    with np.errstate(invalid="ignore", divide="ignore"):
        return Replicated(
            point=lo.point / np.where(hi.point == 0.0, np.nan, hi.point),
            replicates=lo.replicates / np.where(hi.replicates == 0.0, np.nan, hi.replicates),
        )


def _elementwise(op: Callable[[np.ndarray, np.ndarray], np.ndarray], xs: tuple[Replicated, ...]) -> Replicated:
    return Replicated(
        point=functools.reduce(op, (x.point for x in xs)),
        replicates=functools.reduce(op, (x.replicates for x in xs)),
    )


def maximum(*xs: Replicated) -> Replicated:
    """Elementwise maximum of several derived sets of the same shape (NaN if any is NaN)."""
    return _elementwise(np.maximum, xs)


def minimum(*xs: Replicated) -> Replicated:
    """Elementwise minimum of several derived sets of the same shape (NaN if any is NaN)."""
    return _elementwise(np.minimum, xs)


def complement(x: Replicated) -> Replicated:
    """``1 - x`` per resample (e.g. the true positive rate from the false negative rate)."""
    return Replicated(point=1.0 - x.point, replicates=1.0 - x.replicates)


@dataclass(frozen=True)
class Summary:
    """Estimates and intervals of a derived set.

    Attributes
    ----------
    estimate, low, high : ndarray of the shape of ``point``
        Point estimate and percentile interval (NaN where no replicate is finite).
    n_undefined : ndarray of int64
        Resamples on which the quantity is undefined.
    caveat : ndarray of object (str)
        ``""``, ``"undefined"`` (NaN estimate) or ``"degenerate"`` (every resample one value).
    """

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    n_undefined: np.ndarray
    caveat: np.ndarray


def summarise(x: Replicated, *, confidence: float) -> Summary:
    """Point estimates, percentile intervals, undefined counts and caveats of ``x``.

    Parameters
    ----------
    x : Replicated
    confidence : float
        Level of the percentile intervals, in (0, 1).

    Returns
    -------
    Summary
    """
    low, high, n_undefined = percentile_interval(x.replicates, confidence=confidence, axis=0)
    return Summary(
        estimate=x.point,
        low=low,
        high=high,
        n_undefined=n_undefined,
        caveat=caveats(x.point, degenerate(x.replicates)),
    )


def bootstrap_z_pvalue(x: Replicated) -> np.ndarray:
    """Two-sided p-values of "the quantity is 0" from its paired bootstrap replicates (a Wald z-test).

    ``z = estimate / se`` with ``se`` the standard deviation of the finite replicates (the bootstrap
    estimate of the estimate's standard error; Efron and Tibshirani, 1993, ch. 6 and 16), and
    ``p = 2 Phi(-|z|)``. Under ``quantity = 0`` and the usual smoothness of the statistic (a difference of
    means, rates, ratios of sums or AUCs of samples large enough for the normal approximation) ``z`` is
    asymptotically standard normal, so the test has its level when the samples are large; the audit uses
    it for large comparisons only (``docs/method.md``, "Large-sample tests") and its level is measured by
    the validity study.

    Parameters
    ----------
    x : Replicated
        Point estimates of shape (n, ...) and replicates of shape (n_resamples, n, ...) (NaN where
        undefined: left out).

    Returns
    -------
    ndarray of shape (n, ...)
        p-values in (0, 1]; NaN where the estimate is undefined, fewer than two replicates are finite or
        the replicates do not vary (a degenerate bootstrap: no standard error to test with).
    """
    reps = np.asarray(x.replicates, dtype=np.float64)
    point = np.asarray(x.point, dtype=np.float64)
    finite = np.isfinite(reps)
    count = finite.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(finite, reps, 0.0).sum(axis=0) / count
        centred = np.where(finite, reps - mean, 0.0)
        se = np.sqrt((centred * centred).sum(axis=0) / (count - 1))
        z = np.abs(point) / se
    usable = np.isfinite(point) & (count >= 2) & ~degenerate(reps) & (se > 0)
    return np.where(usable, special.erfc(z / np.sqrt(2.0)), np.nan)
