"""Which estimates are reported (minimum sizes) and the simultaneous bands over slices.

Minimum sizes (``docs/audit.md``). An estimate is reported only when its slice has at least
``min_group_size`` rows and the metric's own denominator has at least ``min_denominator`` rows:
positives for sensitivity and the false negative rate, negatives for specificity and the false
positive rate, predicted positives (``score >= threshold``) for precision, and the smaller class for
AUC. Sizes are counted in rows, unweighted, also when sample weights are given. Otherwise the
estimate is withheld (NaN), ``reported`` is False and ``reason`` names the rule; the interval is
given all the same (a wide interval is the honest result for a small slice).

Simultaneous bands. For one model and metric, the band of slice ``s`` is the bootstrap percentile
interval of ``s`` widened from level ``confidence`` to a common level ``c >= confidence``, the smallest
at which a fraction ``confidence`` of the bootstrap replicates lies inside the bands of every slice
of the family at once. This is the max-|t| (sup-t) band computed from bootstrap quantiles: with each
slice's replicates standardised by their own bootstrap distribution, ``t_s = 2 F_s(theta_s) - 1``,
a replicate is inside every band exactly when ``max_s |t_s| <= c``, so ``c`` is the ``confidence``
quantile of ``max_s |t_s|`` over the replicates (the quantile-based sup-t band of Montiel Olea and
Plagborg-Moller, 2019, "Simultaneous confidence bands: theory, implementation, and an application to
SVARs", J. Applied Econometrics; ``c`` is found by bisection on the band's own percentiles, so that
the joint coverage on the replicates holds exactly as computed). Standardising by quantiles rather
than by a standard error keeps the bands as asymmetric as the per-slice intervals, and since
``c >= confidence`` every band contains its slice's interval. The family is the slices whose
estimate of that metric is reported; the same level ``c`` is applied to the others, so that their
band is given too. Undefined (NaN) replicates of a slice count as inside its band.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DENOMINATOR", "withheld_reasons", "band_level", "percentile_bounds"]

#: Which count is each metric's own denominator (metrics not listed have the slice size).
DENOMINATOR: dict[str, str] = {
    "sensitivity": "positives",
    "false_negative_rate": "positives",
    "specificity": "negatives",
    "false_positive_rate": "negatives",
    "precision": "predicted positives",
    "auc": "smaller class",
}


def withheld_reasons(
    metric: str,
    n: np.ndarray,
    n_pos: np.ndarray,
    n_neg: np.ndarray,
    n_predicted_pos: np.ndarray,
    estimate: np.ndarray,
    *,
    min_group_size: int,
    min_denominator: int,
) -> np.ndarray:
    """Why each estimate of ``metric`` is withheld; ``""`` where it is reported.

    Parameters
    ----------
    metric : str
    n, n_pos, n_neg, n_predicted_pos : ndarray of shape (k,), int
        Row counts of the k slices (unweighted).
    estimate : ndarray of shape (k,)
        The point estimates (NaN where undefined).
    min_group_size, min_denominator : int

    Returns
    -------
    ndarray of shape (k,), object (str)
        e.g. ``"slice has 26 rows < min_group_size 30"``, ``"8 negatives < min_denominator 10"``,
        ``"undefined on this slice"`` (e.g. all weights 0); ``""`` when reported.
    """
    k = n.shape[0]
    reasons = np.full(k, "", dtype=object)
    kind = DENOMINATOR.get(metric)
    for i in range(k):
        if n[i] < min_group_size:
            reasons[i] = f"slice has {int(n[i])} rows < min_group_size {min_group_size}"
            continue
        if kind == "positives":
            count, label = n_pos[i], "positives"
        elif kind == "negatives":
            count, label = n_neg[i], "negatives"
        elif kind == "predicted positives":
            count, label = n_predicted_pos[i], "predicted positives"
        elif kind == "smaller class":
            smaller = "positives" if n_pos[i] <= n_neg[i] else "negatives"
            count, label = min(n_pos[i], n_neg[i]), f"{smaller} (the smaller class)"
        else:
            count, label = None, ""
        if count is not None and count < min_denominator:
            reasons[i] = f"{int(count)} {label} < min_denominator {min_denominator}"
        elif not np.isfinite(estimate[i]):
            reasons[i] = "undefined on this slice"
    return reasons


class _Sorted:
    """Columns of replicates sorted once (NaN last), for many percentile look-ups."""

    def __init__(self, replicates: np.ndarray) -> None:
        values = np.where(np.isfinite(replicates), replicates, np.nan)
        self.values = values
        self.sorted = np.sort(values, axis=0)
        self.count = np.sum(np.isfinite(values), axis=0)

    def bounds(self, level: float) -> tuple[np.ndarray, np.ndarray]:
        """numpy's linear-interpolation percentiles ``50 (1 -+ level)`` over each column's finite values."""
        k = self.count
        ok = k > 0
        cols = np.flatnonzero(ok)
        out = []
        for q in np.true_divide(np.array([50.0 * (1.0 - level), 50.0 * (1.0 + level)]), 100.0):
            bound = np.full(k.shape, np.nan)
            virtual = q * (k[ok] - 1)
            previous = np.floor(virtual).astype(np.int64)
            following = np.minimum(previous + 1, k[ok] - 1)
            gamma = virtual - previous
            lo = self.sorted[previous, cols]
            hi = self.sorted[following, cols]
            diff = hi - lo
            value = lo + diff * gamma
            value = np.where(gamma >= 0.5, hi - diff * (1.0 - gamma), value)  # numpy's _lerp
            bound[ok] = value
            out.append(bound)
        return out[0], out[1]


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
        numpy's linear interpolation, as :func:`disaggregated_eval.bootstrap.percentile_interval`
        (so that the band at ``level = confidence`` is the percentile interval).
    """
    return _Sorted(replicates).bounds(level)


def _joint_coverage(columns: _Sorted, level: float) -> float:
    """Fraction of replicates (rows) inside every column's percentile band at ``level`` (NaN = inside)."""
    low, high = columns.bounds(level)
    values = columns.values
    inside = (values >= low) & (values <= high)
    return float(np.mean(np.all(inside | np.isnan(values), axis=1)))


def band_level(replicates: np.ndarray, family: np.ndarray, confidence: float, *, iterations: int = 40) -> float:
    """The common level ``c >= confidence`` of the simultaneous band (module docstring).

    Parameters
    ----------
    replicates : ndarray of shape (n_resamples, n_slices)
        Bootstrap replicates of one metric for every slice (NaN where undefined).
    family : ndarray of shape (n_slices,), bool
        The slices the band must cover at once.
    confidence : float
    iterations : int
        Bisection steps on ``c`` (40 steps: ``c`` to ~1e-12).

    Returns
    -------
    float
        The smallest ``c`` in ``[confidence, 1]`` (to the bisection's precision) at which a fraction
        ``confidence`` of the replicates lies inside the percentile bands of every slice of the family
        at once; ``confidence`` when the family is empty or already covered at that level. At ``c = 1``
        the bands are the replicates' range, which covers every replicate.
    """
    if not np.any(family):
        return float(confidence)
    columns = _Sorted(replicates[:, family])
    if _joint_coverage(columns, confidence) >= confidence:
        return float(confidence)
    lo, hi = float(confidence), 1.0
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if _joint_coverage(columns, mid) >= confidence:
            hi = mid
        else:
            lo = mid
    return hi
