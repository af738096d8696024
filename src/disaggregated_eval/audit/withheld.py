"""Which estimates of an audit are reported: the minimum-size (withholding) rules.

Minimum sizes (``docs/audit.md``). An estimate is reported only when its slice has at least
``min_group_size`` rows and the metric's own denominator has at least ``min_denominator`` rows:
positives for sensitivity and the false negative rate, negatives for specificity and the false
positive rate, predicted positives (``score >= threshold``) for precision, and the smaller class for
AUC. Sizes are counted in rows; with sample weights, the same rules apply to Kish's effective sizes
``(sum w)^2 / sum w^2`` of those rows as well (:meth:`.tallies.SliceTallies.effective_sizes`): 300 rows of
which one has a positive weight are worth one row, and the intervals already use that size. Otherwise
the estimate is withheld (NaN), ``reported`` is False and ``reason`` names the rule and the size it
counted; the interval is given all the same (a wide interval is the honest result for a small slice).

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
    effective: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None,
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
    effective : tuple of four ndarray of shape (k,), optional
        Under sample weights, Kish's effective sizes of the same four row sets (``n``, ``n_pos``, ``n_neg``,
        ``n_predicted_pos``; 0 where they have no weight): the rules apply to them too. None: no sample weights.

    Returns
    -------
    ndarray of shape (k,), object (str)
        e.g. ``"slice has 26 rows < min_group_size 30"``, ``"8 negatives < min_denominator 10"``,
        ``"effective size 1.0 of the slice's 300 rows (Kish, sample weights) < min_group_size 30"``,
        ``"undefined on this slice"`` (e.g. all weights 0); ``""`` when reported.

    Examples
    --------
    >>> one = np.array([300]), np.array([120]), np.array([180]), np.array([100])
    >>> withheld_reasons("accuracy", *one, np.array([1.0]), min_group_size=30, min_denominator=10)
    array([''], dtype=object)
    >>> withheld_reasons("accuracy", *one, np.array([1.0]), min_group_size=30, min_denominator=10,
    ...                  effective=(np.array([1.0]), np.array([1.0]), np.array([0.0]), np.array([1.0])))
    array(["effective size 1.0 of the slice's 300 rows (Kish, sample weights) < min_group_size 30"],
          dtype=object)
    """
    k = n.shape[0]
    reasons = np.full(k, "", dtype=object)
    kind = DENOMINATOR.get(metric)
    sizes = (n, n_pos, n_neg, n_predicted_pos)
    for i in range(k):
        if n[i] < min_group_size:
            reasons[i] = f"slice has {int(n[i])} rows < min_group_size {min_group_size}"
            continue
        if effective is not None and _below(effective[0][i], min_group_size):
            reasons[i] = (
                f"effective size {effective[0][i]:.1f} of the slice's {int(n[i])} rows (Kish, sample weights) "
                f"< min_group_size {min_group_size}"
            )
            continue
        which, label = _denominator(kind, n_pos[i], n_neg[i])
        count = None if which is None else sizes[which][i]
        if count is not None and count < min_denominator:
            reasons[i] = f"{int(count)} {label} < min_denominator {min_denominator}"
        elif count is not None and (small := _small(effective, which, kind, i, min_denominator)) is not None:
            if kind == "smaller class":  # the class whose effective size is the smaller
                label = f"{('positives', 'negatives')[small - 1]} (the smaller class)"
            reasons[i] = (
                f"effective size {effective[small][i]:.1f} of {int(sizes[small][i])} {label} (Kish, sample "
                f"weights) < min_denominator {min_denominator}"
            )
        elif not np.isfinite(estimate[i]):
            reasons[i] = "undefined on this slice"
    return reasons


def _below(size: float, minimum: int) -> bool:
    """Whether an effective size is positive and below ``minimum``: by more than rounding, so that equal weights
    (whose effective size is the row count up to a few ulps) are counted as their rows."""
    return 0.0 < size < minimum * (1.0 - 1e-9)


def _small(effective, which: int, kind: str | None, i: int, minimum: int) -> int | None:
    """Which of the sizes of the metric's denominator (either class for the smaller class) has an effective
    size below ``minimum`` (the smaller one); None if none, or without sample weights. An effective size of 0
    (no weight at all) is left to the rule "undefined"."""
    if effective is None:
        return None
    ids = [j for j in ((1, 2) if kind == "smaller class" else (which,)) if _below(effective[j][i], minimum)]
    return min(ids, key=lambda j: effective[j][i]) if ids else None


def _denominator(kind: str | None, n_pos: int, n_neg: int) -> tuple[int | None, str]:
    """Which of the four sizes (1 positives, 2 negatives, 3 predicted positives) is the metric's own
    denominator, and its name in a reason; (None, "") for a metric of the whole slice."""
    if kind == "positives":
        return 1, "positives"
    if kind == "negatives":
        return 2, "negatives"
    if kind == "predicted positives":
        return 3, "predicted positives"
    if kind == "smaller class":
        which = 1 if n_pos <= n_neg else 2
        return which, f"{('positives', 'negatives')[which - 1]} (the smaller class)"
    return None, ""
