"""Rates with their Monte-Carlo errors, percentages and PASS/NEAR/FAIL verdicts of the validity study.

A leaf module of benchmarks/ (it imports no other module of the study), so that the study's parts
(``_validity``, ``_validity_selection``) share one home for them without importing each other.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binom

__all__ = ["MC_LEVEL", "pct", "rate", "rate_verdict", "verdict", "worst_verdict"]


def rate(values) -> tuple[float, float, int]:
    """``(p, sqrt(p (1 - p) / R), R)`` of a 0/1 vector (NaN-free)."""
    x = np.asarray(values, dtype=np.float64)
    r = x.size
    if r == 0:
        return math.nan, math.nan, 0
    p = float(x.mean())
    return p, math.sqrt(p * (1.0 - p) / r), r


def pct(p: float, se: float | None = None) -> str:
    """A rate as a percentage for the tables (``"95.2"``, with its Monte-Carlo error ``"95.2 ±0.7"``; ``"-"``
    when undefined)."""
    if not np.isfinite(p):
        return "-"
    return f"{100 * p:.1f}" if se is None else f"{100 * p:.1f} ±{100 * se:.1f}"


#: One-sided level of the Monte-Carlo allowance: a cell misses its goal beyond Monte-Carlo error when a
#: one-sided test of "the goal holds" rejects at this level (about 2 standard errors).
MC_LEVEL = 0.025


def rate_verdict(p: float, r: int, *, low: float | None = None, high: float | None = None, k: int = 1) -> str:
    """Verdict of a rate ``p`` over ``r`` replicates against the goal ``low <= rate <= high``.

    ``PASS``: ``p`` meets the goal. ``NEAR``: it misses, but within Monte-Carlo error: an exact
    one-sided binomial test of the goal (``rate = low`` against ``rate < low``, or ``rate = high``
    against ``rate > high``) does not reject at level ``MC_LEVEL / k`` (Bonferroni for the worst of
    ``k`` cells; about 2 standard errors ``sqrt(g (1 - g) / r)`` when ``k = 1``). ``FAIL``: it rejects.
    ``-``: no replicate.
    """
    if r == 0 or not np.isfinite(p):
        return "-"
    x = round(p * r)
    if low is not None and p < low:
        tail = binom.cdf(x, r, low)  # P(X <= x | rate = low)
    elif high is not None and p > high:
        tail = binom.sf(x - 1, r, high)  # P(X >= x | rate = high)
    else:
        return "PASS"
    return "FAIL" if tail < MC_LEVEL / k else "NEAR"


def verdict(value: float, *, low: float | None = None, high: float | None = None, se: float, z: float = 2.0) -> str:
    """Verdict of a continuous estimate (a bias): ``NEAR`` when outside the goal by at most ``z * se``."""
    if not np.isfinite(value):
        return "-"
    miss = 0.0
    if low is not None and value < low:
        miss = low - value
    if high is not None and value > high:
        miss = value - high
    if miss <= 0.0:
        return "PASS"
    return "NEAR" if miss <= z * se else "FAIL"


_ORDER = {"-": 0, "PASS": 1, "NEAR": 2, "FAIL": 3}


def worst_verdict(verdicts) -> str:
    verdicts = list(verdicts)
    return max(verdicts, key=_ORDER.__getitem__) if verdicts else "-"
