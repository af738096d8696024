"""Derived statistics: functions of several quantities, evaluated on the data and on every resample.

The bootstrap engine (:mod:`disaggregated_eval.engine`) gives, for a set of base quantities (a model's
metric on a slice, on a weighted population, ...), the point estimates and the replicates of a
*paired* bootstrap: every quantity on the same resamples. Any function of several of them then has a
paired interval: apply the same function to the point estimates and to each resample's replicates,
and take the interval of the results (as fairlearn's ``MetricFrame`` applies its derived methods to
every bootstrap sample). This module is the one home of those functions:

* :func:`difference` (slice minus overall, minus the rest, minus a reference slice, the controlled
  difference ``T_a = metric(A = a) - M_a``, a model minus its reference model),
* :func:`ratio` (the observed/expected ratio),
* :func:`extreme`, :func:`gap` and :func:`spread_ratio` (max, min, max minus min and min over max over
  a family of slices), :func:`maximum` and :func:`minimum` (elementwise, over several derived sets),
* :func:`complement` (``1 - x``: the true positive rate from the false negative rate),

:func:`summarise` turns a derived set into estimates, percentile intervals, undefined counts and
caveats (:mod:`disaggregated_eval.intervals`); :func:`bootstrap_z_pvalue` tests that a derived quantity
is 0 (a large-sample test of a difference, from its bootstrap standard error). A derived value is
undefined (NaN) on a resample where any of its inputs is.

The fairness statistics of a family of slices
---------------------------------------------
fairlearn's and Aequitas' summaries are derived statistics too, and this module holds them as public
functions over a family's paired replicates (:class:`SliceRates`):

* :func:`demographic_parity`: the largest minus the smallest selection rate and the smallest over the
  largest (fairlearn's ``demographic_parity_difference`` / ``_ratio``);
* :func:`equalized_odds`: the larger of the true and false positive rates' gaps, the smaller of their
  ratios (fairlearn's ``equalized_odds_difference`` / ``_ratio``, ``agg="worst_case"``);
* :func:`largest_gap`: the largest minus the smallest value of any metric;
* :func:`disparity_ratios`: each slice's proportion over a reference slice's (Aequitas' disparities), for
  every slice of a family at once (:class:`PairRatios`).

Their plug-in estimates are :func:`gap`, :func:`spread_ratio`, :func:`maximum` and :func:`minimum` of
the slices' values and equal the peers', and :meth:`Extreme.attained_by` names the slices (and the rate)
that attain them. But a percentile bootstrap of an extreme is not a valid interval where it matters
most: when the slices are equal, the plug-in maximum of noisy differences is biased away from 0 (from 1
for a ratio) and its bootstrap distribution sits there too, so the interval excludes equality on almost
every sample of a perfectly fair model.

Each statistic is an extreme over the *pairs* of the family's slices: a gap is
``G = max_(a, b) (p_a - p_b)`` over ordered pairs, a min/max ratio is ``rho = min_(a, b) p_a / p_b``.
Its interval comes from intervals of the pairs, as the intersection bounds of Chernozhukov, Lee and
Rosen (2013, "Intersection bounds: estimation and inference", Econometrica 81):

* the side on which the plug-in errs (the lower bound of a gap, the upper bound of a ratio) takes
  the extreme of the pairs' bounds at a *simultaneous* level, the studentized max-|t| critical value
  over every pair of the statistic from the paired bootstrap (:func:`~disaggregated_eval.intervals.max_t_level`,
  one-sided tail ``(1 - confidence) / 2``). When every slice is equal, the lower bound of a gap is above
  0 only if some pair's interval misses its true difference of 0, which the simultaneous level makes
  a ``(1 - confidence) / 2`` event;
* the other side takes the extreme of the pairs' bounds at the ordinary level: the true extreme pair's
  own bound already covers the statistic, whatever the other pairs do.

So the interval covers the statistic with probability at least ``confidence`` at every configuration of
the slices, equality included (conservative, up to about ``1 - (1 - confidence) / 2``, where several
pairs tie at the extreme). The pairs' intervals are score intervals from the counts for proportions
(Newcombe's hybrid score interval for a difference, the MOVER-R ratio interval, both from Wilson's
bounds: :mod:`disaggregated_eval.intervals`), percentile intervals of the paired bootstrap differences
otherwise; the max-|t| uses the paired bootstrap deviations of the differences and of the linearised
log ratios. :meth:`Extreme.band` gives the bounds at any common level (a simultaneous band over
several statistics: the audit's verdicts). :meth:`Extreme.bias_corrected` is the bootstrap
bias-corrected estimate ``2 theta_hat - mean(theta*)`` (Efron and Tibshirani, 1993, section 10.6),
which removes part of the upward bias of a largest gap between small slices. ``docs/method.md``,
"Fairness summary".
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

from .intervals import (
    SortedReplicates,
    caveats,
    degenerate,
    max_abs_t,
    max_t_level,
    mover_ratio,
    newcombe_difference,
    percentile_interval,
    wilson_interval,
)

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
    "SliceRates",
    "Extreme",
    "PairRatios",
    "MAX_T_WORK",
    "MAX_PAIRS",
    "demographic_parity",
    "equalized_odds",
    "largest_gap",
    "plug_in_extreme",
    "disparity_ratios",
    "simultaneous_level",
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
    """``values`` at ``idx`` along ``axis``, by basic-then-advanced indexing: it reads only the entries taken.

    (``numpy.take`` first copies a non-contiguous array whole, e.g. one metric's view of the audit's
    replicates: a pass over every resample of every output per call.) The result is C-ordered, as ``take``'s is,
    so that reductions over it sum in the same order.
    """
    return np.ascontiguousarray(values[(slice(None),) * axis + (idx,)])


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
        gathered = _index(values, safe, axis)  # axis -> (n, max_members)
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


# ----------------------------------------------------------------------------------------------
# the fairness statistics of a family of slices, with intervals valid at equality (module docstring)
# ----------------------------------------------------------------------------------------------
#: Largest ``n_resamples x n_pairs`` over which a max-|t| is computed from the bootstrap; beyond it
#: the critical value is Bonferroni's over the pairs (valid, more conservative). 2^30 values take a few
#: seconds.
MAX_T_WORK = 2**30
#: Most pairs of slices a family's statistic is built from; a family with more (over 362 slices) takes
#: the projection of the slices' own intervals instead (:meth:`Extreme.bounds`: valid, wider).
MAX_PAIRS = 2**16
_CHUNK_VALUES = 2**22
_KINDS = ("gap", "ratio")


@dataclass(frozen=True)
class SliceRates:
    """One metric on the slices of one family, with its paired bootstrap.

    Attributes
    ----------
    estimate : ndarray of shape (n_slices,)
        The metric on each slice.
    replicates : ndarray of shape (n_resamples, n_slices)
        The metric on each paired bootstrap resample (NaN where undefined).
    size : ndarray of shape (n_slices,), optional
        For a proportion, each slice's (effective) denominator: the pairs then get score intervals
        from the counts; None for any other metric (percentile intervals of paired differences).
    """

    estimate: np.ndarray
    replicates: np.ndarray
    size: np.ndarray | None = None

    def __post_init__(self) -> None:
        k = np.shape(self.estimate)
        if len(k) != 1:
            raise ValueError(f"estimate must have shape (n_slices,); got shape {k}")
        if np.ndim(self.replicates) != 2 or np.shape(self.replicates)[1] != k[0]:
            raise ValueError(f"replicates must have shape (n_resamples, {k[0]}); got shape {np.shape(self.replicates)}")
        if self.size is not None and np.shape(self.size) != k:
            raise ValueError(f"size must have shape ({k[0]},); got shape {np.shape(self.size)}")

    @property
    def n_slices(self) -> int:
        return int(np.shape(self.estimate)[0])

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Slices ``(i, j)`` of every unordered pair, ``i < j`` (``n_slices (n_slices - 1) / 2`` of them)."""
        return np.triu_indices(self.n_slices, 1)


def _chunks(n_pairs: int, n_resamples: int):
    step = max(1, _CHUNK_VALUES // max(1, n_resamples))
    for start in range(0, n_pairs, step):
        yield slice(start, min(n_pairs, start + step))


def _differences(rates: SliceRates, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of ``p_i - p_j`` for every pair at ``level`` (Newcombe for proportions, else percentiles)."""
    i, j = rates.pairs()
    p = np.asarray(rates.estimate, dtype=np.float64)
    if rates.size is not None:
        n = np.asarray(rates.size, dtype=np.float64)
        return newcombe_difference(p[i], n[i], p[j], n[j], level)
    reps = np.asarray(rates.replicates, dtype=np.float64)
    low = np.empty(i.shape[0])
    high = np.empty(i.shape[0])
    for part in _chunks(i.shape[0], reps.shape[0]):
        low[part], high[part] = SortedReplicates(reps[:, i[part]] - reps[:, j[part]]).bounds(min(level, 1.0))
    return low, high


def _ratios(rates: SliceRates, level: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Bounds of ``p_i / p_j`` and of ``p_j / p_i`` for every pair at ``level`` (MOVER-R)."""
    if rates.size is None:
        raise ValueError("a ratio of slices needs proportions (SliceRates.size)")
    i, j = rates.pairs()
    p = np.asarray(rates.estimate, dtype=np.float64)
    n = np.asarray(rates.size, dtype=np.float64)
    low_ij, high_ij = mover_ratio(p[i], n[i], p[j], n[j], level)
    low_ji, high_ji = mover_ratio(p[j], n[j], p[i], n[i], level)
    return low_ij, high_ij, low_ji, high_ji


def _slice_bounds(rates: SliceRates, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Each slice's own interval at ``level`` (Wilson for proportions, else percentiles of its replicates)."""
    p = np.asarray(rates.estimate, dtype=np.float64)
    if rates.size is not None:
        return wilson_interval(p, np.asarray(rates.size, dtype=np.float64), level)
    return SortedReplicates(np.asarray(rates.replicates, dtype=np.float64)).bounds(min(level, 1.0))


def _deviations(rates: SliceRates, kind: str, part: slice) -> np.ndarray:
    """Bootstrap deviations of the pairs ``part``: of the differences, or of the linearised log ratios."""
    i, j = (idx[part] for idx in rates.pairs())
    p = np.asarray(rates.estimate, dtype=np.float64)
    reps = np.asarray(rates.replicates, dtype=np.float64)
    if kind == "gap":
        return (reps[:, i] - reps[:, j]) - (p[i] - p[j])
    keep = (p[i] > 0) & (p[j] > 0)  # a log ratio of a zero estimate cannot be linearised (MOVER covers it)
    i, j = i[keep], j[keep]
    return (reps[:, i] - p[i]) / p[i] - (reps[:, j] - p[j]) / p[j]


def _max_abs_t(rates: SliceRates, kind: str) -> np.ndarray | None:
    """Row-wise max |t| over the pairs of ``rates`` (None when over :data:`MAX_T_WORK` or :data:`MAX_PAIRS`)."""
    n_pairs = rates.n_slices * (rates.n_slices - 1) // 2
    n_res = np.shape(rates.replicates)[0]
    if n_pairs * n_res > MAX_T_WORK or n_pairs > MAX_PAIRS:
        return None
    out = np.zeros(n_res)
    for part in _chunks(n_pairs, n_res):
        np.maximum(out, max_abs_t(_deviations(rates, kind, part)), out=out)
    return out


def simultaneous_level(max_t: np.ndarray | None, tail: float, n_quantities: int) -> float:
    """The two-sided level of each quantity's interval for a joint error of ``tail``.

    From the bootstrap's max-|t| (:func:`~disaggregated_eval.intervals.max_t_level`), or, when it was
    not computed (``max_t`` None: more work than :data:`MAX_T_WORK`), Bonferroni's level
    ``1 - 2 tail / n_quantities``.
    """
    if max_t is None:
        return 1.0 - 2.0 * tail / max(1, n_quantities)
    return max_t_level(max_t, tail)


@dataclass(frozen=True)
class Extreme:
    """A largest gap (``kind="gap"``: max - min) or min/max ratio (``"ratio"``) over a family of slices.

    With several ``parts`` (the true and false positive rates of equalized odds), the gap is the
    largest of the parts' gaps and the ratio the smallest of their ratios (fairlearn's
    ``agg="worst_case"``).

    Attributes
    ----------
    kind : {"gap", "ratio"}
    parts : tuple of SliceRates
        The same slices in each part (at least 2 slices; ratios need proportions).
    """

    kind: str
    parts: tuple[SliceRates, ...]

    def __post_init__(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}; got {self.kind!r}")
        if not self.parts:
            raise ValueError("an extreme needs at least one SliceRates")
        sizes = {p.n_slices for p in self.parts}
        if len(sizes) != 1 or min(sizes) < 2:
            raise ValueError(f"every part must hold the same slices, at least 2; got {sorted(sizes)}")
        resamples = [int(np.shape(p.replicates)[0]) for p in self.parts]
        if len(set(resamples)) != 1:
            raise ValueError(f"every part must hold the same paired resamples; got replicates of {resamples} resamples")
        if self.kind == "ratio" and any(p.size is None for p in self.parts):
            raise ValueError("a min/max ratio needs proportions (SliceRates.size of every part)")

    @property
    def n_pairs(self) -> int:
        """Pairwise quantities behind the statistic (over every part)."""
        return sum(p.n_slices * (p.n_slices - 1) // 2 for p in self.parts)

    @property
    def projected(self) -> bool:
        """Whether the family is too large for pairs (:data:`MAX_PAIRS`): the slices' intervals are projected."""
        return any(p.n_slices * (p.n_slices - 1) // 2 > MAX_PAIRS for p in self.parts)

    def _projection(self, hard_level: float, easy_level: float) -> tuple[float, float]:
        """Bounds from the slices' own intervals: a gap in ``[max_a l_a - min_b u_b, max_a u_a - min_b l_b]``,
        a min/max ratio in ``[min l / max u, min u / max l]``, the hard side at ``hard_level`` (every slice
        at once), the easy side at ``easy_level`` (the two slices of the extreme pair)."""
        low, high = (0.0, -np.inf) if self.kind == "gap" else (np.inf, 1.0)
        for part in self.parts:
            lh, uh = _slice_bounds(part, hard_level)
            le, ue = _slice_bounds(part, easy_level)
            with np.errstate(invalid="ignore", divide="ignore"):
                if self.kind == "gap":
                    low = max(low, float(np.nanmax(lh) - np.nanmin(uh)))
                    high = max(high, float(np.nanmax(ue) - np.nanmin(le)))
                else:
                    low = min(low, float(np.nanmin(le) / np.nanmax(ue)))
                    high = min(high, float(np.nanmin(uh) / np.nanmax(lh)))
        return low, high

    @functools.cached_property
    def _values(self) -> Replicated:
        """The statistic and its replicates, computed once (a frozen dataclass: fields never change)."""
        members = np.arange(self.parts[0].n_slices)[None, :]
        values = []
        for part in self.parts:
            x = Replicated(point=np.asarray(part.estimate, dtype=np.float64), replicates=np.asarray(part.replicates))
            values.append(gap(x, members) if self.kind == "gap" else spread_ratio(x, members))
        return maximum(*values) if self.kind == "gap" else minimum(*values)

    @property
    def estimate(self) -> float:
        """The plug-in statistic (fairlearn's; NaN where a part is undefined)."""
        return float(self._values.point[0])

    @property
    def replicates(self) -> np.ndarray:
        """The statistic on each resample, shape (n_resamples,)."""
        return self._values.replicates[:, 0]

    def attained_by(self) -> tuple[int, int, int] | None:
        """Which part and which two slices attain the plug-in statistic.

        Returns
        -------
        (part, largest, smallest) : tuple of int, or None
            ``part`` indexes :attr:`parts`: the one with the largest gap (``kind="gap"``) or the smallest
            min/max ratio (``"ratio"``), the first of equals (equalized odds: 0 the true positive rate, 1
            the false positive rate); ``largest`` and ``smallest`` index the family's
            slices (the first of equals): the slice with the largest and the one with the smallest value
            of that part. None when the statistic is undefined (:attr:`estimate` NaN: some slice's value
            is), so an undefined statistic names no slices.
        """
        if not np.isfinite(self.estimate):
            return None
        # A defined statistic has every slice's value defined in every part (and a positive largest
        # value for a ratio): the gap and the min/max ratio propagate NaN.
        points = [np.asarray(p.estimate, dtype=np.float64) for p in self.parts]
        if self.kind == "gap":
            part = int(np.argmax([v.max() - v.min() for v in points]))
        else:
            part = int(np.argmin([v.min() / v.max() for v in points]))
        values = points[part]
        return part, int(np.argmax(values)), int(np.argmin(values))

    def max_t(self) -> np.ndarray | None:
        """Row-wise max |t| over the statistic's pairwise quantities, shape (n_resamples,) (None: too much work)."""
        out = None
        for part in self.parts:
            t = _max_abs_t(part, self.kind)
            if t is None:
                return None
            out = t if out is None else np.maximum(out, t)
        return out

    def bounds(self, low_level: float, high_level: float) -> tuple[float, float]:
        """The statistic's bounds from its pairs' bounds at two (two-sided) levels.

        A gap: ``max(0, max over ordered pairs of the lower bound at low_level)`` and the maximum of
        the ordered pairs' upper bounds at ``high_level``. A ratio: the minimum of the ordered pairs'
        lower bounds at ``low_level`` and ``min(1, the minimum of their upper bounds at high_level)``.
        NaN where the estimate is undefined.
        """
        if not np.isfinite(self.estimate):
            return float("nan"), float("nan")
        if self.projected:
            hard, easy = (low_level, high_level) if self.kind == "gap" else (high_level, low_level)
            return self._projection(hard, easy)
        if self.kind == "gap":
            low, high = 0.0, -np.inf
            for part in self.parts:
                lo, hi = _differences(part, low_level)
                low = max(low, float(np.nanmax(np.maximum(lo, -hi))))
                lo, hi = _differences(part, high_level)
                high = max(high, float(np.nanmax(np.maximum(hi, -lo))))
            return low, high
        low, high = np.inf, 1.0
        for part in self.parts:
            l_ij, _, l_ji, _ = _ratios(part, low_level)
            low = min(low, float(np.nanmin(np.minimum(l_ij, l_ji))))
            _, h_ij, _, h_ji = _ratios(part, high_level)
            high = min(high, float(np.nanmin(np.minimum(h_ij, h_ji))))
        return low, high

    def interval(self, confidence: float, max_t: np.ndarray | None = None) -> tuple[float, float]:
        """The statistic's interval at ``confidence`` (module docstring).

        Parameters
        ----------
        confidence : float
            In (0, 1).
        max_t : ndarray of shape (n_resamples,), optional
            :meth:`max_t`, when already computed.

        Returns
        -------
        low, high : float
            The side on which the plug-in errs at the simultaneous level over the statistic's pairs
            (one-sided ``(1 - confidence) / 2``), the other at ``confidence``.
        """
        tail = 0.5 * (1.0 - confidence)
        if self.projected:  # 2 K one-sided slice bounds share the tail; the extreme pair's two the other
            k = sum(p.n_slices for p in self.parts)
            hard, easy = 1.0 - tail / k, 1.0 - tail
        else:
            hard = simultaneous_level(self.max_t() if max_t is None else max_t, tail, self.n_pairs)
            easy = confidence
        return self.bounds(hard, easy) if self.kind == "gap" else self.bounds(easy, hard)

    def band(self, level: float) -> tuple[float, float]:
        """Both bounds at the common level ``level`` (a simultaneous band over many statistics; for a
        projected family every slice's interval at ``level``, which fails with probability at most
        ``K (1 - level)``, less than the pairs' Bonferroni allowance the level came from)."""
        return self.bounds(level, level)

    def bias_corrected(self) -> float:
        """``2 theta_hat - mean(theta*)`` over the finite replicates, kept in [0, inf) (gap) or [0, 1] (ratio)."""
        estimate = self.estimate
        reps = self.replicates
        reps = reps[np.isfinite(reps)]
        if not np.isfinite(estimate) or reps.size == 0:
            return float("nan")
        value = 2.0 * estimate - float(reps.mean())
        return float(np.clip(value, 0.0, np.inf if self.kind == "gap" else 1.0))


@dataclass(frozen=True)
class PairRatios:
    """Disparity ratios: each slice's proportion over one reference slice's (Aequitas), for every slice of a
    family at once.

    Every method works on the slices as arrays, and reads the paired replicates in blocks of slices (at most
    about 2^22 values at a time): the cost of a family's ratios is one pass over its replicates, whatever
    the number of slices, and the memory one block.

    Attributes
    ----------
    estimate : ndarray of shape (n_slices,)
        The proportion on each slice.
    size : ndarray of shape (n_slices,)
        Each slice's (effective) denominator.
    reference : int
        The reference slice (an index into the slices).
    replicates_of : callable
        ``replicates_of(idx)``, ``idx`` of shape (k,) int64: the paired replicates of the slices ``idx``,
        shape (n_resamples, k) (NaN where undefined).
    n_resamples : int
    """

    estimate: np.ndarray
    size: np.ndarray
    reference: int
    replicates_of: Callable[[np.ndarray], np.ndarray]
    n_resamples: int

    def __post_init__(self) -> None:
        k = np.shape(self.estimate)
        if len(k) != 1 or np.shape(self.size) != k:
            raise ValueError(f"estimate and size must have one shape (n_slices,); got {k} and {np.shape(self.size)}")
        if not 0 <= self.reference < k[0]:
            raise ValueError(f"reference must index one of the {k[0]} slices; got {self.reference}")

    @property
    def ratio(self) -> np.ndarray:
        """``p_slice / p_reference`` of every slice, shape (n_slices,) (NaN when the reference's is 0 or undefined)."""
        p = np.asarray(self.estimate, dtype=np.float64)
        den = p[self.reference]
        return p / (np.nan if den == 0.0 else den)

    def _blocks(self, slices: np.ndarray):
        """``(idx, replicates of idx, replicates of the reference)`` over blocks of ``slices``."""
        ref = self.replicates_of(np.array([self.reference], dtype=np.int64))[:, 0]
        for part in _chunks(slices.shape[0], self.n_resamples):
            idx = slices[part]
            yield part, np.asarray(self.replicates_of(idx), dtype=np.float64), ref

    def n_undefined(self, slices: np.ndarray) -> np.ndarray:
        """Resamples on which each ratio of ``slices`` (shape (k,), int) is undefined or infinite, shape (k,)."""
        slices = np.asarray(slices, dtype=np.int64)
        out = np.zeros(slices.shape[0], dtype=np.int64)
        for part, reps, ref in self._blocks(slices):
            with np.errstate(invalid="ignore", divide="ignore"):
                values = reps / np.where(ref == 0.0, np.nan, ref)[:, None]
            out[part] = np.sum(~np.isfinite(values), axis=0)
        return out

    def max_t(self, slices: np.ndarray) -> np.ndarray:
        """Row-wise max |t| over the linearised log ratios of ``slices`` (shape (k,), int), shape (n_resamples,).

        The same statistic as :func:`_max_abs_t` of each pair (slice, reference), maximised over the pairs: a
        pair with a zero estimate on either side is left out (MOVER-R covers it); 0 where none is left.
        """
        slices = np.asarray(slices, dtype=np.int64)
        p = np.asarray(self.estimate, dtype=np.float64)
        p_ref = p[self.reference]
        out = np.zeros(self.n_resamples)
        if not p_ref > 0:
            return out
        slices = slices[p[slices] > 0]
        for part, reps, ref in self._blocks(slices):
            pi = p[slices[part]]
            deviations = (reps - pi) / pi - ((ref - p_ref) / p_ref)[:, None]
            np.maximum(out, max_abs_t(deviations), out=out)
        return out

    def bounds(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        """The MOVER-R interval of every slice's ratio at ``level``, two arrays of shape (n_slices,)."""
        p = np.asarray(self.estimate, dtype=np.float64)
        n = np.asarray(self.size, dtype=np.float64)
        r = self.reference
        return mover_ratio(p, n, np.full_like(p, p[r]), np.full_like(n, n[r]), level)


def demographic_parity(selection: SliceRates) -> tuple[Extreme, Extreme]:
    """The demographic-parity difference and ratio of a family (fairlearn's definitions).

    Parameters
    ----------
    selection : SliceRates
        The selection rate (``predicted_positive_rate``) of every reported slice of the family, with
        sizes (rows) and paired replicates.

    Returns
    -------
    difference, ratio : Extreme
        ``max - min`` and ``min / max`` of the selection rates; estimates equal fairlearn's
        ``demographic_parity_difference`` and ``demographic_parity_ratio`` on the same groups;
        :meth:`Extreme.interval` valid at equality (module docstring).
    """
    return Extreme("gap", (selection,)), Extreme("ratio", (selection,))


def equalized_odds(true_positive: SliceRates, false_positive: SliceRates) -> tuple[Extreme, Extreme]:
    """The equalized-odds difference and ratio of a family (fairlearn's, ``agg="worst_case"``).

    Parameters
    ----------
    true_positive, false_positive : SliceRates
        The true and false positive rates of the same slices (those that report both).

    Returns
    -------
    difference, ratio : Extreme
        The larger of the two rates' gaps; the smaller of their min/max ratios.
    """
    return Extreme("gap", (true_positive, false_positive)), Extreme("ratio", (true_positive, false_positive))


def largest_gap(metric: SliceRates) -> Extreme:
    """The largest minus the smallest value of any metric over a family (score intervals for proportions)."""
    return Extreme("gap", (metric,))


def plug_in_extreme(kind: str, parts: Sequence[np.ndarray]) -> float:
    """The plug-in of :class:`Extreme` over every slice that has a value, as fairlearn's ``MetricFrame`` gives it.

    ``kind="gap"``: the largest over the parts of ``max - min``; ``"ratio"``: the smallest of ``min / max``.
    Each part is read over its own defined (finite) values, undefined ones skipped (pandas' ``max`` and
    ``min`` in fairlearn's ``difference()`` and ``ratio()``), where :attr:`Extreme.estimate` needs every
    slice defined in every part. No interval: the audit's fairness summary gives it beside its reported
    statistic, over all slices, withheld ones included (``raw_estimate``).

    Parameters
    ----------
    kind : {"gap", "ratio"}
    parts : sequence of ndarray of shape (k,)
        Each part's values on the family's slices (NaN where undefined).

    Returns
    -------
    float
        NaN when no part has a defined value (or a ratio's largest value is 0).

    Examples
    --------
    >>> tpr, fpr = np.array([0.9, 0.5, np.nan]), np.array([0.3, 0.1, 0.2])
    >>> round(plug_in_extreme("gap", [tpr, fpr]), 12), round(plug_in_extreme("ratio", [tpr, fpr]), 12)
    (0.4, 0.333333333333)
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {_KINDS}; got {kind!r}")
    values = []
    for part in parts:
        x = np.asarray(part, dtype=np.float64)
        x = x[np.isfinite(x)]
        if x.size == 0:
            continue
        with np.errstate(invalid="ignore", divide="ignore"):
            values.append(x.max() - x.min() if kind == "gap" else x.min() / x.max())
    values = [v for v in values if np.isfinite(v)]
    if not values:
        return float("nan")
    return float(max(values) if kind == "gap" else min(values))


def disparity_ratios(metric: SliceRates, reference: int) -> PairRatios:
    """Every slice's proportion over the reference slice's (``metric``'s slices, ``reference`` one of them).

    Parameters
    ----------
    metric : SliceRates
        A proportion on the family's slices, with sizes.
    reference : int
        Index of the reference slice among them.

    Returns
    -------
    PairRatios

    Raises
    ------
    ValueError
        Without sizes (a ratio of slices needs proportions), or for a reference outside the slices.

    Examples
    --------
    >>> import numpy as np
    >>> rates = SliceRates(np.array([0.2, 0.4]), np.array([[0.2, 0.4], [0.3, 0.0]]), np.array([50.0, 50.0]))
    >>> ratios = disparity_ratios(rates, reference=1)
    >>> ratios.ratio.tolist(), ratios.n_undefined(np.array([0])).tolist()
    ([0.5, 1.0], [1])
    """
    if metric.size is None:
        raise ValueError("a disparity ratio needs a proportion, with its sizes (SliceRates.size)")
    reps = np.asarray(metric.replicates)
    return PairRatios(np.asarray(metric.estimate, dtype=np.float64), np.asarray(metric.size, dtype=np.float64),
                      int(reference), lambda idx: reps[:, idx], reps.shape[0])  # fmt: skip
