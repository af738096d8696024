"""Verdicts with a tolerance: a difference is shown, or shown to be within the tolerance, or neither.

A disaggregated evaluation that only flags differences says nothing when nothing is flagged: the
absence of a flag is not evidence of equality (a small slice is never flagged). With a tolerance
(a largest acceptable difference ``delta``, such as 0.05, and a range of acceptable ratios, such as the
four-fifths band [0.8, 1.25]), every comparison gets one of three verdicts:

* ``differs``: the data show a difference (for a comparison, its test rejects "no difference" after
  the family's adjustment; for a statistic of the fairness summary, its simultaneous interval
  excludes equality);
* ``within tolerance``: the data show that any difference is inside the tolerance (certification:
  for a comparison, the two one-sided tests of equivalence reject ``|d| >= delta``; for a statistic,
  its simultaneous interval lies inside the tolerance);
* ``inconclusive``: neither;

and a difference shown to exceed the tolerance is ``beyond tolerance`` (a statistic whose whole
simultaneous interval is outside it: the four-fifths rule fails and the data can tell). Both claims
can hold at once (``differs, within tolerance``: a real but small difference).

Family-wise error of both kinds at once (:func:`partitioned_holm`). For every comparison at most one
of the two nulls is true (``d = 0`` rules out ``|d| >= delta``), so the two sets of hypotheses of a
family can be tested together by a weighted Holm step-down that counts each comparison once, with
the larger weight of its open hypotheses (the partitioning principle: Finner and Strassburger, 2002,
"The partitioning principle: a powerful tool in multiple decision theory", Annals of Statistics 30;
weighted Holm: Holm, 1979). The probability of any false claim of either kind in the family is then
at most ``alpha``, whatever the differences are. An equivalence hypothesis weighs
:data:`EQUIVALENCE_WEIGHT` of a difference hypothesis, so that adding the certifications costs the
difference tests little (their first step is unchanged: ``alpha / m``).

Equivalence p-values (:func:`equivalence_pvalue`): the two one-sided tests (TOST; Schuirmann, 1987) by
inverting the comparison's own interval family: the p-value of ``d >= delta`` is the one-sided tail
at which the interval's upper bound reaches ``delta`` (and likewise below), the larger of the two is
the p-value of ``|d| >= delta``. ``docs/method.md``, "Verdicts".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import special

__all__ = [
    "Tolerance",
    "DEFAULT_TOLERANCE",
    "parse_tolerance",
    "EQUIVALENCE_WEIGHT",
    "DIFFERS",
    "WITHIN",
    "DIFFERS_WITHIN",
    "BEYOND",
    "INCONCLUSIVE",
    "VERDICTS",
    "verdict_text",
    "equivalence_pvalue",
    "bootstrap_equivalence_pvalue",
    "partitioned_holm",
    "difference_verdicts",
    "gap_verdict",
    "spread_ratio_verdict",
    "ratio_verdict",
]

#: Verdict of a difference the data show (and do not show to be within the tolerance).
DIFFERS = "differs"
#: Verdict of a difference shown to be within the tolerance (certified) and not shown to exist.
WITHIN = "within tolerance"
#: A difference shown to exist and shown to be within the tolerance.
DIFFERS_WITHIN = "differs, within tolerance"
#: A difference shown to exceed the tolerance (the whole simultaneous interval outside it).
BEYOND = "beyond tolerance"
#: Neither shown.
INCONCLUSIVE = "inconclusive"
#: Every verdict, from the strongest finding of a difference to none (``""``: no verdict, withheld).
VERDICTS: tuple[str, ...] = (BEYOND, DIFFERS, DIFFERS_WITHIN, WITHIN, INCONCLUSIVE)

#: Weight of an equivalence hypothesis relative to a difference hypothesis in the weighted Holm
#: step-down of :func:`partitioned_holm` (chosen with the validity study: with 1/4 the certifications of
#: a fair family of 4 slices of 2,000 rows have over 90% power, and the difference tests' family-wise
#: error stays near its level).
EQUIVALENCE_WEIGHT = 0.25


@dataclass(frozen=True)
class Tolerance:
    """The largest acceptable difference and the range of acceptable ratios (None: no tolerance).

    Attributes
    ----------
    difference : float or None
        In (0, 1), in the metric's units (0.05: five percentage points of a rate). None: no
        certification, and the difference tests alone make a family (Holm's procedure as such).
    ratio : tuple of (float, float) or None
        ``(low, high)`` with ``0 < low < 1 < high`` (the four-fifths band ``(0.8, 1.25)``); None: no
        ratio is certified or found beyond a tolerance.
    """

    difference: float | None = 0.05
    ratio: tuple[float, float] | None = (0.8, 1.25)

    @property
    def spread_floor(self) -> float | None:
        """The smallest acceptable min/max ratio: every pair of slices within ``ratio`` (``max(low, 1 / high)``)."""
        return None if self.ratio is None else max(self.ratio[0], 1.0 / self.ratio[1])

    def items(self) -> list[str]:
        """The option's text form, ``["0.05", "0.8:1.25"]`` or ``["none"]`` (what :func:`parse_tolerance` reads)."""
        if self.difference is None and self.ratio is None:
            return ["none"]
        out = [] if self.difference is None else [f"{self.difference:g}"]
        return out + ([] if self.ratio is None else [f"{self.ratio[0]:g}:{self.ratio[1]:g}"])

    def text(self) -> str:
        """``differences 0.05, ratios [0.8, 1.25]`` (``none`` for a part without tolerance)."""
        difference = "none" if self.difference is None else f"{self.difference:g}"
        ratio = "none" if self.ratio is None else f"[{self.ratio[0]:g}, {self.ratio[1]:g}]"
        return f"differences {difference}, ratios {ratio}"


#: The option ``tolerance``'s default: a difference of 0.05, ratios in the four-fifths band.
DEFAULT_TOLERANCE = Tolerance()


def _number(text: str, item: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"tolerance item {item!r}: {text.strip()!r} is not a number; give a difference such as 0.05 and/or a "
            f"ratio range low:high such as 0.8:1.25"
        ) from None
    if not math.isfinite(value):
        raise ValueError(f"tolerance item {item!r}: {text.strip()!r} must be a finite number")
    return value


def parse_tolerance(items: Sequence[str | float]) -> Tolerance:
    """The option ``tolerance``: a difference and/or a ratio range, each at most once.

    Parameters
    ----------
    items : sequence of str or float
        A number in (0, 1) (the largest acceptable difference, ``0.05``) and/or ``low:high`` with
        ``0 < low < 1 < high`` (the acceptable ratios, ``0.8:1.25``). A part not given keeps its
        default (:data:`DEFAULT_TOLERANCE`); ``none`` alone: no tolerance at all (no certification;
        the verdicts are ``differs`` or ``inconclusive``).

    Returns
    -------
    Tolerance

    Raises
    ------
    ValueError
        Naming the item and what was expected: not a number, out of range, a part given twice, or
        more than two items.
    """
    items = list(items)
    if [str(i).strip().lower() for i in items] == ["none"]:
        return Tolerance(difference=None, ratio=None)
    if len(items) > 2:
        raise ValueError(f"tolerance takes at most two items (a difference and a ratio range); got {items!r}")
    difference: float | None = None
    ratio: tuple[float, float] | None = None
    for raw in items:
        item = str(raw).strip()
        if ":" in item:
            parts = item.split(":")
            if len(parts) != 2:
                raise ValueError(f"tolerance item {item!r}: a ratio range is low:high such as 0.8:1.25")
            low, high = (_number(part, item) for part in parts)
            if not 0.0 < low < 1.0 < high:
                raise ValueError(f"tolerance item {item!r}: a ratio range needs 0 < low < 1 < high (such as 0.8:1.25)")
            if ratio is not None:
                raise ValueError(f"tolerance gives two ratio ranges ({ratio[0]:g}:{ratio[1]:g} and {item}); give one")
            ratio = (low, high)
        else:
            value = _number(item, item)
            if not 0.0 < value < 1.0:
                raise ValueError(f"tolerance item {item!r}: a difference tolerance must be in (0, 1), such as 0.05")
            if difference is not None:
                raise ValueError(f"tolerance gives two differences ({difference:g} and {item}); give one")
            difference = value
    return Tolerance(
        difference=DEFAULT_TOLERANCE.difference if difference is None else difference,
        ratio=DEFAULT_TOLERANCE.ratio if ratio is None else ratio,
    )


def verdict_text(differs: bool, within: bool, beyond: bool = False) -> str:
    """The verdict of the two claims (module docstring)."""
    if beyond:
        return BEYOND
    if differs and within:
        return DIFFERS_WITHIN
    if differs:
        return DIFFERS
    if within:
        return WITHIN
    return INCONCLUSIVE


# ----------------------------------------------------------------------------------------------
# Equivalence p-values
# ----------------------------------------------------------------------------------------------
_Z_MAX = 8.0  # a one-sided tail of Phi(-8) = 6e-16: the smallest equivalence p-value


def equivalence_pvalue(
    bounds: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    estimate: np.ndarray,
    tolerance: float,
    *,
    iterations: int = 50,
) -> np.ndarray:
    """p-values of ``|d| >= tolerance`` from an interval family (two one-sided tests).

    Parameters
    ----------
    bounds : callable
        ``bounds(level) -> (low, high)``: the interval of every difference at the two-sided level(s)
        ``level`` (an array broadcast against the differences), widening with the level (Newcombe's,
        a Wilson-based interval).
    estimate : ndarray of shape (n,)
        The differences.
    tolerance : float
        ``delta > 0``.
    iterations : int
        Bisection steps on ``z`` (50: ``z`` to ~1e-14).

    Returns
    -------
    ndarray of shape (n,)
        ``max(p_upper, p_lower)`` where ``p_upper = 1 - Phi(z)`` for the ``z`` at which the upper bound
        at level ``2 Phi(z) - 1`` equals ``delta`` (1 when the estimate itself is at least ``delta``;
        ``Phi(-8)`` when even ``z = 8`` keeps the bound below it), and ``p_lower`` likewise at
        ``-delta``. NaN where the estimate is NaN.
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    out = []
    for side in (1.0, -1.0):
        lo = np.zeros(estimate.shape)
        hi = np.full(estimate.shape, _Z_MAX)

        def reach(z: np.ndarray, side: float = side) -> np.ndarray:
            low, high = bounds(2.0 * special.ndtr(z) - 1.0)
            bound = high if side > 0 else -low
            return bound >= tolerance

        crosses = reach(hi)  # the bound reaches the tolerance by z = 8: bisect
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            r = reach(mid)
            hi = np.where(r, mid, hi)
            lo = np.where(r, lo, mid)
        z = np.where(crosses, 0.5 * (lo + hi), _Z_MAX)
        p = special.ndtr(-z)
        p = np.where(side * estimate >= tolerance, 1.0, p)
        out.append(p)
    p = np.maximum(out[0], out[1])
    return np.where(np.isfinite(estimate), p, np.nan)


def bootstrap_equivalence_pvalue(replicates: np.ndarray, estimate: np.ndarray, tolerance: float) -> np.ndarray:
    """p-values of ``|d| >= tolerance`` from paired bootstrap replicates of the differences.

    Parameters
    ----------
    replicates : ndarray of shape (n_resamples, n)
        The differences on each resample (NaN where undefined: left out).
    estimate : ndarray of shape (n,)
    tolerance : float

    Returns
    -------
    ndarray of shape (n,)
        ``max(p_upper, p_lower)`` with ``p_upper = (1 + #{d* >= delta}) / (1 + B)`` over the finite
        replicates (the percentile interval's inversion, never 0) and ``p_lower`` at ``-delta``; NaN
        where the estimate is NaN or no replicate is finite.
    """
    reps = np.asarray(replicates, dtype=np.float64)
    finite = np.isfinite(reps)
    count = finite.sum(axis=0)
    with np.errstate(invalid="ignore"):
        upper = ((reps >= tolerance) & finite).sum(axis=0)
        lower = ((reps <= -tolerance) & finite).sum(axis=0)
    p = (1.0 + np.maximum(upper, lower)) / (1.0 + count)
    return np.where(np.isfinite(estimate) & (count > 0), np.minimum(p, 1.0), np.nan)


# ----------------------------------------------------------------------------------------------
# The step-down over both kinds of hypotheses
# ----------------------------------------------------------------------------------------------
def partitioned_holm(
    p_difference: np.ndarray, p_within: np.ndarray, *, weight: float = EQUIVALENCE_WEIGHT
) -> tuple[np.ndarray, np.ndarray]:
    """Adjusted p-values of one family's difference and equivalence hypotheses, tested together.

    Parameters
    ----------
    p_difference : ndarray of shape (k,)
        p-values of ``d_s = 0`` (NaN: no such hypothesis for comparison ``s``).
    p_within : ndarray of shape (k,)
        p-values of ``|d_s| >= delta`` (NaN: not tested, e.g. a comparison too small to be certified).
    weight : float
        Weight of an equivalence hypothesis (a difference hypothesis weighs 1), in (0, 1].

    Returns
    -------
    adjusted_difference, adjusted_within : ndarray of shape (k,)
        A hypothesis is rejected at level ``alpha`` when its adjusted p-value is at most ``alpha``; NaN
        where there is no hypothesis.

    Notes
    -----
    The weighted Holm step-down (module docstring): hypotheses in increasing order of ``p / w``; when
    one is tested, ``D`` is the sum, over the comparisons with an open hypothesis, of the largest weight
    among them, and its adjusted p-value is ``max(previous, min(1, D p / w))``. Proof of the family-wise
    error: at the first true hypothesis rejected, every true hypothesis is still open and they belong to
    distinct comparisons, so ``D >= W_T``, the sum of their weights, and the rejection needs
    ``p / w <= alpha / W_T``, which weighted Bonferroni bounds by ``alpha``. With every comparison holding
    only a difference hypothesis this is Holm's procedure.
    """
    pd_ = np.asarray(p_difference, dtype=np.float64)
    pw = np.asarray(p_within, dtype=np.float64)
    if pd_.shape != pw.shape or pd_.ndim != 1:
        raise ValueError(f"p_difference and p_within must have the same shape (k,); got {pd_.shape} and {pw.shape}")
    if not 0.0 < weight <= 1.0:
        raise ValueError(f"weight must be in (0, 1]; got {weight!r}")
    k = pd_.shape[0]
    has_d = np.isfinite(pd_)
    has_w = np.isfinite(pw)
    hyps = [(pd_[s], 1.0, s, 0) for s in np.flatnonzero(has_d)] + [(pw[s], weight, s, 1) for s in np.flatnonzero(has_w)]
    hyps.sort(key=lambda h: (h[0] / h[1], h[3], h[2]))
    open_d = has_d.copy()
    open_w = has_w.copy()

    def top(s: int) -> float:
        return 1.0 if open_d[s] else (weight if open_w[s] else 0.0)

    total = float(sum(top(s) for s in range(k)))
    adjusted = (np.full(k, np.nan), np.full(k, np.nan))
    running = 0.0
    for p, w, s, kind in hyps:
        running = max(running, min(1.0, total * p / w))
        adjusted[kind][s] = running
        before = top(s)
        (open_d if kind == 0 else open_w)[s] = False
        total -= before - top(s)
    return adjusted


def difference_verdicts(
    p_difference: np.ndarray,
    p_within: np.ndarray,
    *,
    alpha: float,
    method: str,
    weight: float = EQUIVALENCE_WEIGHT,
) -> tuple[np.ndarray, np.ndarray]:
    """Adjusted p-values of both kinds of one family, by the audit's ``adjust`` option.

    ``holm``: :func:`partitioned_holm` (family-wise error of both kinds together at most ``alpha``);
    ``bh``: Benjamini-Hochberg for the difference hypotheses (false discovery rate, as the flags) and
    Holm for the equivalence hypotheses alone (family-wise error of the certifications); ``none``: the
    p-values themselves. ``alpha`` is only checked (the verdict compares the adjusted p-values with it).

    Returns
    -------
    adjusted_difference, adjusted_within : ndarray of shape (k,)
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1); got {alpha!r}")
    pd_ = np.asarray(p_difference, dtype=np.float64)
    pw = np.asarray(p_within, dtype=np.float64)
    if method == "holm":
        return partitioned_holm(pd_, pw, weight=weight)
    if method == "none":
        return pd_.copy(), pw.copy()
    if method != "bh":
        raise ValueError(f"method must be 'holm', 'bh' or 'none'; got {method!r}")
    from statsmodels.stats.multitest import multipletests

    adj_d = np.full(pd_.shape, np.nan)
    ok = np.isfinite(pd_)
    if ok.any():
        adj_d[ok] = multipletests(pd_[ok], method="fdr_bh")[1]
    _, adj_w = partitioned_holm(np.full(pw.shape, np.nan), pw, weight=1.0)
    return adj_d, adj_w


# ----------------------------------------------------------------------------------------------
# Verdicts of intervals (the fairness summary's statistics)
# ----------------------------------------------------------------------------------------------
def gap_verdict(low: float, high: float, tolerance: Tolerance) -> str:
    """Verdict of a gap (``>= 0``, equality 0) from its simultaneous interval (``""`` when it is undefined)."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    delta = tolerance.difference
    if delta is None:
        return verdict_text(low > 0.0, False)
    return verdict_text(low > 0.0, high <= delta, beyond=low > delta)


def spread_ratio_verdict(low: float, high: float, tolerance: Tolerance) -> str:
    """Verdict of a min/max ratio (``<= 1``, equality 1) from its simultaneous interval."""
    if not (np.isfinite(low) and np.isfinite(high)):
        return ""
    floor = tolerance.spread_floor
    if floor is None:
        return verdict_text(high < 1.0, False)
    return verdict_text(high < 1.0, low >= floor, beyond=high < floor)


def ratio_verdict(low: float, high: float, tolerance: Tolerance) -> str:
    """Verdict of a ratio of two slices (equality 1) from its simultaneous interval (the upper bound may be
    infinite: the reference's rate may be 0)."""
    if np.isnan(low) or np.isnan(high) or low > high:
        return ""
    differs = high < 1.0 or low > 1.0
    if tolerance.ratio is None:
        return verdict_text(differs, False)
    lo, hi = tolerance.ratio
    return verdict_text(differs, lo <= low and high <= hi, beyond=high < lo or low > hi)
