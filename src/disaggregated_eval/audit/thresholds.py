"""Threshold analysis: selection rate, true and false positive rates of every slice across thresholds.

Every rate of a classifier depends on its decision threshold. For each threshold of the option
``thresholds`` (a list of values, or grids ``start:stop:step``: :func:`.options.parse_thresholds`), each model and slice, the selection
rate (``predicted_positive_rate``), the true positive rate (``sensitivity``) and the false positive
rate, each with the interval the slices table gives a proportion: Wilson's score interval on the
slice's own counts (Kish's effective size under sample weights), from the counts of
:func:`.tallies.tally_slices` at that threshold. At the audit's own threshold the rows equal the slices
table's. The minimum-size rules (:mod:`.withheld`) apply at each threshold (the predicted positives
change with it).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from .. import vocabulary
from ..intervals import interval_method, wilson_interval
from .columns import THRESHOLD_COLUMNS
from .slices import SlicePlan
from .tallies import tally_slices
from .withheld import withheld_reasons

__all__ = ["thresholds_table"]


def thresholds_table(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    thresholds: np.ndarray,
    model_names: Sequence[str],
    *,
    confidence: float,
    min_group_size: int,
    min_denominator: int,
    count: np.ndarray | None = None,
) -> pd.DataFrame:
    """The ``thresholds`` table (:data:`.columns.THRESHOLD_COLUMNS`), ordered by model, slice, threshold, metric.

    Parameters
    ----------
    plan : SlicePlan
    y : ndarray of shape (n_rows,)
        Labels 0/1.
    scores : sequence of ndarray of shape (n_rows,)
        Each model's scores.
    weight : ndarray of shape (n_rows,) or None
        Sample weights.
    thresholds : ndarray of shape (n_thresholds,)
        From :func:`parse_thresholds` (empty: an empty table).
    model_names : sequence of str
    confidence : float
        Level of the Wilson intervals.
    min_group_size, min_denominator : int
        The minimum-size rules.
    count : ndarray of shape (n_rows,), int64, optional
        Rows each row stands for (frequency weights; :func:`.tallies.tally_slices`).

    Returns
    -------
    pandas.DataFrame
        ``estimate`` NaN where withheld (``reason`` says why); the interval is given all the same.
    """
    frames = []
    names = np.array(plan.names, dtype=object)
    attributes = np.array([plan.attribute_of(s) for s in range(plan.n_slices)], dtype=object)
    for t in np.asarray(thresholds, dtype=np.float64):
        tallies = tally_slices(plan, y, list(scores), weight, float(t), count)
        n, n_pos, n_neg, n_pp = tallies.sizes()
        effective = tallies.effective_sizes()  # None without sample weights
        for metric in vocabulary.THRESHOLD_METRICS:
            p, n_eff, _, n_den = tallies.proportion(metric)
            low, high = wilson_interval(p, n_eff, confidence)
            for m, model in enumerate(model_names):
                reasons = withheld_reasons(
                    metric, n[m], n_pos[m], n_neg[m], n_pp[m], p[m], min_group_size=min_group_size,
                    min_denominator=min_denominator, effective=None if effective is None else tuple(e[m] for e in effective),
                )  # fmt: skip
                reported = reasons == ""
                frames.append(
                    pd.DataFrame(
                        {
                            "model": model,
                            "slice": names,
                            "attribute": attributes,
                            "threshold": float(t),
                            "metric": metric,
                            "estimate": np.where(reported, p[m], np.nan),
                            "ci_low": low[m],
                            "ci_high": high[m],
                            "interval": interval_method(metric),
                            "n": n[m].astype(np.int64),
                            "n_denominator": n_den[m].astype(np.int64),
                            "reported": reported,
                            "reason": reasons.astype(str),
                            "_m": m,
                            "_s": np.arange(plan.n_slices),
                            "_q": vocabulary.THRESHOLD_METRICS.index(metric),
                        }
                    )
                )
    if not frames:
        return pd.DataFrame({c: [] for c in THRESHOLD_COLUMNS})
    table = pd.concat(frames, ignore_index=True)
    table = table.sort_values(["_m", "_s", "threshold", "_q"], kind="stable")
    return table[list(THRESHOLD_COLUMNS)].reset_index(drop=True)
