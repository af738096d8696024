"""Two decisions the audit's tables and texts share: which comparisons carry a flag, which metric leads.

* :func:`flagged_rows`: a comparison is flagged when its adjusted p-value is below ``alpha`` (without
  p-values: when its interval excludes 0), never when it is withheld. The terminal summary, the report
  and the detectability table (:mod:`.detectability`, through :mod:`.analyses`) read the flags from here.
* :func:`headline_metric`: the metric the summaries lead with (the terminal's slice table, the report's
  first table, the fairness summary's ``largest_gap``, a notebook's display): with the default metric list
  the first computed of :data:`disaggregated_eval.vocabulary.HEADLINE_ORDER` (the false positive rate
  first, never log loss merely because it is first in ``vocabulary.METRICS``), otherwise the first of the
  metrics given.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from .. import vocabulary

__all__ = ["flagged_rows", "headline_metric"]


def flagged_rows(comparisons: pd.DataFrame, alpha: float) -> pd.Series:
    """Which comparisons carry a flag (module docstring).

    Parameters
    ----------
    comparisons : pandas.DataFrame
        Rows of the comparisons table (columns ``p_adjusted``, ``ci_low``, ``ci_high`` and, if present,
        ``reported``).
    alpha : float
        ``1 - confidence``.

    Returns
    -------
    pandas.Series of bool
        Aligned with ``comparisons``: adjusted p-value below ``alpha`` (or, without p-values, an interval
        that excludes 0), never a withheld row.
    """
    p = comparisons["p_adjusted"].astype(float)
    by_interval = (comparisons["ci_low"] > 0) | (comparisons["ci_high"] < 0)
    flagged = p.lt(alpha).where(p.notna(), by_interval).astype(bool)
    if "reported" in comparisons.columns:  # withheld differences are never flagged
        flagged &= comparisons["reported"].astype(bool)
    return flagged


def headline_metric(slices: pd.DataFrame, metrics: Sequence[str], model: str | None = None) -> str | None:
    """The metric the summaries lead with, for ``model`` (default any model; module docstring).

    Parameters
    ----------
    slices : pandas.DataFrame
        The slices table (columns ``model`` and ``metric``).
    metrics : sequence of str
        The audit's option ``metrics``.
    model : str, optional

    Returns
    -------
    str or None
        The first of :data:`~disaggregated_eval.vocabulary.HEADLINE_ORDER` that has rows when ``metrics`` is
        the default list (``vocabulary.AUDIT_METRICS``), otherwise the first of ``metrics`` that has rows;
        None if no metric was computed.
    """
    table = slices if model is None else slices[slices["model"] == model]
    present = set(table["metric"])
    chosen = list(metrics)
    order = vocabulary.HEADLINE_ORDER if chosen == list(vocabulary.AUDIT_METRICS) else chosen
    for metric in [*order, *chosen]:
        if metric in present:
            return metric
    return next(iter(pd.unique(table["metric"])), None)
