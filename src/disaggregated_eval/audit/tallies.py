"""Counts of every slice by outcome category: rows, summed weights and summed squared weights.

For each model, slice and the four outcome categories (:data:`disaggregated_eval.engine.sums.CATEGORIES`:
TN, FP, FN, TP at the decision threshold), the number of rows, ``sum w`` and ``sum w^2``; the rest of
a slice is overall minus the slice. Every proportion metric is a ratio of two of these sums
(:data:`disaggregated_eval.engine.sums.PROPORTIONS`), so they give its point estimate, its score
interval (with Kish's effective sample size under sample weights), the Newcombe interval of a
difference, the exact permutation test and the minimum-size rules, without a bootstrap.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..engine.sums import FN, FP, PROPORTIONS, TN, TP, categories
from ..intervals import effective_size
from .slices import SlicePlan

__all__ = ["SliceTallies", "tally_slices"]

#: The outcome categories of each size: rows, positives, negatives, predicted positives (score >= threshold).
_SIZE_CATEGORIES = ((TN, FP, FN, TP), (FN, TP), (TN, FP), (FP, TP))


@dataclass(frozen=True)
class SliceTallies:
    """Per model, slice and outcome category: rows, ``sum w``, ``sum w^2`` (shape (n_models, n_slices, 4)).

    ``count``, ``sum_w``, ``sum_w2`` are of the slices; :meth:`rest` gives the same for the rest of
    each slice (overall minus the slice; slice 0 is ``overall``). ``weighted``: whether the sums are of
    sample weights (False: every weight 1, ``sum_w`` and ``sum_w2`` are the counts).
    """

    count: np.ndarray
    sum_w: np.ndarray
    sum_w2: np.ndarray
    weighted: bool = False

    def rest(self) -> SliceTallies:
        """The tallies of the complement of every slice (empty for ``overall``)."""
        return SliceTallies(
            count=self.count[:, :1] - self.count,
            sum_w=np.maximum(self.sum_w[:, :1] - self.sum_w, 0.0),
            sum_w2=np.maximum(self.sum_w2[:, :1] - self.sum_w2, 0.0),
            weighted=self.weighted,
        )

    def sizes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Rows of every model and slice: all, positives, negatives, predicted positives (the sizes the
        minimum-size rules count, :func:`.withheld.withheld_reasons`); each of shape (n_models, n_slices)."""
        return tuple(self.count[..., list(c)].sum(-1) for c in _SIZE_CATEGORIES)

    def effective_sizes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """Kish's effective sizes ``(sum w)^2 / sum w^2`` of the row sets of :meth:`sizes` (0 where they have
        no weight); None without sample weights, where they are the row counts.

        Examples
        --------
        >>> from disaggregated_eval.engine.sums import TP
        >>> count = np.zeros((1, 1, 4), dtype=np.int64)
        >>> count[0, 0, TP] = 300  # one slice of 300 true positives, one of them of weight 1, the rest 0
        >>> sums = np.zeros((1, 1, 4))
        >>> sums[0, 0, TP] = 1.0
        >>> tallies = SliceTallies(count=count, sum_w=sums, sum_w2=sums, weighted=True)
        >>> int(tallies.sizes()[0][0, 0]), float(tallies.effective_sizes()[0][0, 0])
        (300, 1.0)
        """
        if not self.weighted:
            return None
        return tuple(
            effective_size(self.sum_w[..., list(c)].sum(-1), self.sum_w2[..., list(c)].sum(-1))
            for c in _SIZE_CATEGORIES
        )

    def proportion(self, metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Point estimate, effective denominator, numerator rows and denominator rows of a proportion metric.

        Returns
        -------
        p : ndarray of shape (n_models, n_slices)
            The weighted share of the numerator's categories among the denominator's (NaN when the
            denominator has no weight).
        n_eff : ndarray of shape (n_models, n_slices)
            Kish's effective size of the denominator (its row count when every weight is 1).
        k, n : ndarray of shape (n_models, n_slices), int64
            Rows of the numerator and of the denominator.
        """
        num, den = PROPORTIONS[metric]
        num_w = self.sum_w[..., list(num)].sum(axis=-1)
        den_w = self.sum_w[..., list(den)].sum(axis=-1)
        den_w2 = self.sum_w2[..., list(den)].sum(axis=-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            p = np.where(den_w > 0, num_w / np.where(den_w > 0, den_w, 1.0), np.nan)
        k = self.count[..., list(num)].sum(axis=-1)
        n = self.count[..., list(den)].sum(axis=-1)
        return p, effective_size(den_w, den_w2), k, n


def tally_slices(
    plan: SlicePlan,
    y: np.ndarray,
    scores: list[np.ndarray],
    weight: np.ndarray | None,
    threshold: float,
    count: np.ndarray | None = None,
) -> SliceTallies:
    """Tallies of every slice for every model (cells counted once, then added into slices).

    Parameters
    ----------
    plan : SlicePlan
    y : ndarray of shape (n_rows,), float64
        Labels 0/1.
    scores : list of ndarray of shape (n_rows,)
        Each model's scores.
    weight : ndarray of shape (n_rows,) or None
        Sample weights (None: 1).
    threshold : float
    count : ndarray of shape (n_rows,), int64, optional
        Rows each row stands for (frequency weights): it is counted, and its weights summed, that many times.

    Returns
    -------
    SliceTallies
    """
    w_rows = None if weight is None else (weight if count is None else weight * count)
    cells = plan.cell_codes.astype(np.int64)
    k = plan.n_cells
    rows, sum_w, sum_w2 = [], [], []
    for r in scores:
        key = cells * 4 + categories(y, r, threshold)
        per_cell = np.bincount(key, weights=count, minlength=4 * k).reshape(k, 4)
        if count is not None:
            per_cell = np.rint(per_cell).astype(np.int64)
        counted = plan.aggregate_cells(per_cell)
        rows.append(counted)
        if weight is None:  # every weight 1: the sums are the counts (exact in float64 up to 2^53 rows)
            sum_w.append(counted.astype(np.float64))
            sum_w2.append(sum_w[-1])
            continue
        sum_w.append(plan.aggregate_cells(np.bincount(key, weights=w_rows, minlength=4 * k).reshape(k, 4)))
        sum_w2.append(plan.aggregate_cells(np.bincount(key, weights=weight * w_rows, minlength=4 * k).reshape(k, 4)))
    return SliceTallies(
        count=np.stack(rows).astype(np.int64),
        sum_w=np.stack(sum_w),
        sum_w2=np.stack(sum_w2),
        weighted=weight is not None,
    )
