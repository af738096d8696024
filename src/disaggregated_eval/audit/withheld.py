"""Which estimates of an audit are reported: the minimum-size (withholding) rules.

Minimum sizes (``docs/audit.md``). An estimate is reported only when its slice has at least
``min_group_size`` rows and the metric's own denominator has at least ``min_denominator`` rows:
positives for sensitivity and the false negative rate, negatives for specificity and the false
positive rate, predicted positives (``score >= threshold``) for precision, and the smaller class for
AUC. Sizes are counted in rows, unweighted, also when sample weights are given. Otherwise the
estimate is withheld (NaN), ``reported`` is False and ``reason`` names the rule; the interval is
given all the same (a wide interval is the honest result for a small slice).

The simultaneous bands over slices are in :mod:`disaggregated_eval.intervals` (:func:`~disaggregated_eval.intervals.band_level`).
"""

from __future__ import annotations

import numpy as np

from ..registry import METRIC_RECORDS

__all__ = ["DENOMINATOR", "withheld_reasons"]

#: Which count is each metric's own denominator (its record's, :attr:`~disaggregated_eval.registry.MetricRecord.size_denominator`;
#: metrics not listed have the slice size, whose rule is ``min_group_size``).
DENOMINATOR: dict[str, str] = {r.name: r.size_denominator for r in METRIC_RECORDS if r.size_denominator != "rows"}


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
