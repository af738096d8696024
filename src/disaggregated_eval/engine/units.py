"""Units: rows that the engine cannot tell apart, merged, so that the cost follows the information.

Every quantity the engine computes depends on a row only through what the walk reads: its label, each
model's score (or, for a metric set without score metrics, only each score's side of every threshold),
its weight columns, its code columns and its stratum. Rows equal in all of these are interchangeable:
a *unit* stands for all of them, with their number as its *multiplicity* ``m_u``.

Why the bootstrap and the permutation tests stay exact in distribution (``docs/method.md``,
"Compression"):

* a row bootstrap draws ``n`` rows uniformly with replacement, so the row counts are
  ``Multinomial(n, 1/n, ..., 1/n)``; summing the counts of the rows of each unit gives
  ``Multinomial(n, m_u / n)`` (the multinomial's aggregation property), and under ``within_group``
  the same holds within each stratum (units never straddle strata). Drawing the unit counts directly
  is the row bootstrap in distribution, at ``O(units)`` per resample;
* a permutation draws ``n_first`` rows of a stratum without replacement; the number drawn from each
  unit is multivariate hypergeometric with the units' multiplicities, drawn directly at ``O(units)``.

Continuous scores make every row a unit of its own; the engine then keeps drawing rows (the
resamples of the pipeline, bit-identical to drawing without units). :func:`find_units` decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["Units", "find_units", "units_of_counts", "score_key", "matrix_key", "COMPRESSION_MAX_SHARE"]

#: Units are used when there are at most this share of the rows (otherwise the rows themselves).
COMPRESSION_MAX_SHARE = 0.5
#: Rows looked at to find the column with the most distinct values (``find_units``'s early exit).
_SAMPLE = 2000
#: Largest value of the packed key of :func:`find_units` before its values are renumbered.
_PACK_LIMIT = 2**62


@dataclass(frozen=True)
class Units:
    """Rows merged into units.

    Attributes
    ----------
    of_row : ndarray of shape (n_rows,), int64
        The unit of every row.
    first : ndarray of shape (n_units,), int64
        One row of each unit (its first row): the unit's values.
    multiplicity : ndarray of shape (n_units,), int64
        Rows of each unit.
    """

    of_row: np.ndarray
    first: np.ndarray
    multiplicity: np.ndarray

    @property
    def n_units(self) -> int:
        return int(self.first.shape[0])


def find_units(columns: Sequence[np.ndarray], *, max_share: float = COMPRESSION_MAX_SHARE) -> Units | None:
    """Merge the rows equal in every column, or None when that would not pay.

    Parameters
    ----------
    columns : sequence of ndarray of shape (n_rows,)
        Everything the engine reads of a row (labels, scores or their threshold bins, weights, codes,
        strata), finite; floats are compared exactly (``-0.0`` equals ``0.0``).
    max_share : float, default :data:`COMPRESSION_MAX_SHARE`
        Units are returned only when there are at most ``max_share * n_rows`` of them.

    Returns
    -------
    Units or None
        Units numbered in the lexicographic order of their values, the first column varying slowest
        (deterministic), or None (use the rows).

    Notes
    -----
    Hash grouping, as a database groups rows (``pandas.factorize``): each column's values are coded
    in increasing order, the codes are packed into one integer key per row (mixed radix, the first
    column the most significant, so that the keys sort as the rows do lexicographically), and the keys
    are grouped. The cost is a few passes over the rows, not a sort of them: 10,000,000 rows of five
    columns in about a second (a lexicographic sort took 7 s).
    """
    # integer and boolean columns are grouped as they are (their values are exact as floats too)
    stacked = [np.asarray(c).ravel() if np.asarray(c).dtype.kind in "biu" else np.asarray(c, dtype=np.float64).ravel()
               for c in columns]  # fmt: skip
    n = stacked[0].shape[0] if stacked else 0
    if n == 0:
        return Units(of_row=np.zeros(0, np.int64), first=np.zeros(0, np.int64), multiplicity=np.zeros(0, np.int64))
    # There are at least as many units as distinct values in any one column: a continuous score alone
    # rules the units out at the cost of counting one column's values. Evenly spaced rows pick the
    # column to count (the count itself is exact).
    if n > 2 * _SAMPLE:
        step = n // _SAMPLE
        spread = [np.unique(column[::step]).shape[0] for column in stacked]
        widest = int(np.argmax(spread))
        sample = stacked[widest][::step].shape[0]
        if spread[widest] > max_share * sample and pd.unique(stacked[widest]).shape[0] > max_share * n:
            return None
    key = np.zeros(n, dtype=np.int64)
    span = 1  # distinct values of the key so far
    for column in stacked:
        if (column == column[0]).all():  # a constant column changes neither the groups nor their order
            continue
        codes, values = pd.factorize(column, sort=True)
        if span * values.shape[0] >= _PACK_LIMIT:  # renumber the key's values 0..k-1 (in order) to make room
            key, kept = pd.factorize(key, sort=True)
            span = kept.shape[0]
        key *= values.shape[0]
        key += codes
        span *= values.shape[0]
    # Group the keys in order of first appearance (a hash table), then number the groups in key order.
    appearance, keys = pd.factorize(key, sort=False)
    n_units = keys.shape[0]
    if n_units > max_share * n:
        return None
    running = np.maximum.accumulate(appearance)
    first = np.flatnonzero(np.concatenate(([True], running[1:] > running[:-1])))  # first row of each group
    order = np.argsort(keys, kind="stable")
    rank = np.empty(n_units, dtype=np.int64)
    rank[order] = np.arange(n_units)
    of_row = rank[appearance]
    return Units(
        of_row=of_row,
        first=first[order].astype(np.int64),
        multiplicity=np.bincount(of_row, minlength=n_units).astype(np.int64),
    )


def units_of_counts(columns: Sequence[np.ndarray], counts: np.ndarray) -> Units:
    """The units of rows that each stand for ``counts`` identical rows (frequency weights), always merged.

    A table of counts (one row per distinct combination, with its number of rows, e.g. an aggregation
    by :mod:`disaggregated_eval.audit.aggregate`), or rows that are themselves units of an earlier
    :func:`find_units`, give the units directly: the rows equal in every column are merged as
    :func:`find_units` merges them, and a unit's multiplicity is the sum of its rows' counts. The units
    are those :func:`find_units` finds on the expanded rows (numbered in the same lexicographic order of
    their values, with the same multiplicities), so that draws of the unit counts are the same, draw for
    draw, as on an expanded frame that compresses to these units.

    Parameters
    ----------
    columns : sequence of ndarray of shape (n_rows,)
        As :func:`find_units`.
    counts : ndarray of shape (n_rows,), int
        Rows each row stands for (>= 1).

    Returns
    -------
    Units
        ``multiplicity`` in expanded rows; never None (the rows are units whatever their number).
    """
    units = find_units(columns, max_share=np.inf)
    assert units is not None  # max_share=inf never declines
    multiplicity = np.bincount(units.of_row, weights=counts, minlength=units.n_units)
    return Units(of_row=units.of_row, first=units.first, multiplicity=np.rint(multiplicity).astype(np.int64))


def score_key(scores: np.ndarray, thresholds, *, needs_scores: bool) -> np.ndarray:
    """What of a score the engine reads: the score itself, or only its side of every threshold.

    Parameters
    ----------
    scores : ndarray of shape (n,)
    thresholds : sequence of float
        Increasing decision thresholds.
    needs_scores : bool
        Whether a requested metric reads the score beyond the thresholds (AUC, log loss, Brier score,
        mean predicted risk, observed/expected ratio: :data:`disaggregated_eval.vocabulary.SCORE_METRICS`).

    Returns
    -------
    ndarray of shape (n,), float64
        ``scores``, or the largest threshold at most the score (0 below every threshold): a value that
        is on the same side of every threshold as the score, so that the count metrics are unchanged
        and rows with the same predictions become one unit.
    """
    if needs_scores:
        return scores
    t = np.concatenate(([0.0], np.asarray(thresholds, dtype=np.float64)))
    return t[np.searchsorted(t, scores, side="right") - 1]


#: Rows of a weight matrix compared with their group's first row at a time (:func:`matrix_key`).
_KEY_CHECK_ROWS = 2**16


def matrix_key(matrix: np.ndarray) -> np.ndarray:
    """A column that is equal for two rows of ``matrix`` (n, k) exactly when the rows are equal.

    A random projection (fixed seed: deterministic) separates distinct rows; rows that project to the
    same value are checked to be equal, and where they are not (a collision, probability ~0), the row
    index itself is returned, which keeps them apart.
    """
    matrix = np.ascontiguousarray(matrix, dtype=np.float64)
    if matrix.shape[1] == 0 or (matrix.shape[0] and (matrix == matrix[:1]).all()):
        return np.zeros(matrix.shape[0])  # every row equal (no column, or constant ones): one key
    direction = np.random.Generator(np.random.PCG64(20250101)).standard_normal(matrix.shape[1])
    key = matrix @ direction
    inverse, _ = pd.factorize(key, sort=False)  # groups in order of first appearance
    running = np.maximum.accumulate(inverse)
    first = np.flatnonzero(np.concatenate(([True], running[1:] > running[:-1])))  # a row of each group
    representative = first[inverse]
    step = _KEY_CHECK_ROWS  # rows compared at a time: no copy of the whole matrix
    if all(
        np.array_equal(matrix[i : i + step], matrix[representative[i : i + step]]) for i in range(0, len(key), step)
    ):
        return key
    return np.arange(matrix.shape[0], dtype=np.float64)
