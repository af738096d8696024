"""Permutation tests of differences between two sets of rows, every metric at once, on the engine's walk.

A test has a *universe* (the rows permuted among) and a first side (a slice). Under the null, slice
membership is exchangeable within each *stratum* of the universe: a permutation draws, in every
stratum, as many rows as the slice has there, uniformly without replacement, as the permuted first
side; the rest of the universe is the second side. The universe and strata express the null of each
metric (``docs/audit.md``, "Tests"): for the false positive rate the universe is the negatives (the
metric is a rate among them, so the test is of that rate, not of the slice's whole distribution),
for the AUC the strata are the two classes, and so on (the audit chooses them).

Three ways to a p-value, each of the exact permutation p-value ``p*`` (the share of all permutations at
least as extreme as the data):

* :func:`exact_count_pvalue`, for a proportion whose rows all weigh the same: the number ``X`` of
  numerator rows (e.g. false positives) in the permuted slice is hypergeometric, and every statistic
  (slice minus overall, slice minus rest, slice minus another slice) is an increasing affine function
  of ``X`` with its zero at ``x0 = n K / N``, so the exact permutation p-value is
  ``P(|X - x0| >= |x - x0|)`` (summed from the hypergeometric distribution; no Monte Carlo);
* :func:`linear_tail_pvalues`, for a mean of per-row values whose rows all weigh the same (log loss,
  Brier score, net benefit, mean predicted risk): every statistic is an affine function of the sum
  ``s`` of the values over the permuted slice, a sum over a sample without replacement from the
  universe (within each stratum), whose tails are bounded by Chernoff's bound with the exact
  moment-generating function of the universe's values (sampling without replacement is dominated by
  sampling with replacement: Hoeffding, 1963, "Probability inequalities for sums of bounded random
  variables", JASA 58, Theorem 4). The result is an upper bound of ``p*``, a valid p-value; a test uses
  it where it settles the decision (below the smallest threshold the family's adjustment can put on
  the test, see below), and Monte Carlo otherwise;
* :func:`permutation_test`, Monte Carlo, for everything else (the AUC, ratios, sample weights): the
  metrics of both sides of each permutation come from the engine's walk (:mod:`.walk`): of the drawn rows
  only (:func:`~.walk.run_subset_kernel`, the rest of the universe by complement) where every unit is one
  row and the drawn side is the same in every stratum, else of every unit, each side a lane of 0/1 counts. Statistics: ``first - fixed`` (slice minus overall) and ``first - second``
  (slice minus rest, or slice ``a`` minus slice ``b``).

Monte-Carlo p-values follow Besag and Clifford's sequential rule (Besag and Clifford, 1991,
"Sequential Monte Carlo p-values", Biometrika 78): permutations are drawn until ``h`` of them are at
least as extreme as the data (``|T*| >= |T| - tol``, ``tol = 1e-9 max(1, |T|)`` absorbing rounding),
giving ``p = h / L`` after ``L`` defined permutations, or until ``n_max`` are drawn, giving
``p = (g + 1) / (n_max + 1)`` with ``g < h`` exceedances (the +1 rule of Phipson and Smyth, 2010).
Both are valid p-values; a test whose p-value is clearly large stops after a few dozen permutations.
Permutations on which a statistic is undefined are skipped for that statistic.

Small p-values stop too (Gandy, 2009, "Sequential implementation of Monte Carlo tests with uniformly
bounded resampling risk", JASA 104, bounds the risk that a Monte-Carlo decision differs from the exact
test's; this rule bounds it for one decision). A test is read at thresholds between ``low`` (its family's
smallest: ``alpha / m`` for Holm's and Benjamini-Hochberg's adjustment of ``m`` tests, ``alpha`` without
adjustment) and ``alpha``: any p-value below ``low`` gives the same decision at every one of them. After
each chunk of permutations, a statistic with ``g`` exceedances in ``L`` defined permutations stops when
the one-sided Clopper-Pearson upper bound of ``p*`` at level ``1 - risk / C`` is below ``low`` (``C``
the number of chunks of ``n_max`` permutations, so that the bounds of all checkpoints hold together with
probability ``1 - risk``), with ``p = (g + 1) / (L + 1)``: the Monte-Carlo estimate at the stop, of
resolution ``1 / (L + 1)``. The decision "``p* < low``" is then wrong with probability at most ``risk``
(:data:`RESAMPLING_RISK`) whatever ``p*`` is; every other p-value is Besag and Clifford's, as before.

Draws (:func:`permutation_draws`): the universe's rows are merged into units (:mod:`.units`: rows
that the walk cannot tell apart). In a stratum whose units are single rows, a permutation draws the
smaller side (``m`` rows, the first or the second) as a uniform subset by Floyd's algorithm (Bentley
and Floyd, 1987, "Programming pearls: a sample of brilliance", CACM 30; ``m`` random integers, the
``i``-th uniform on ``0 .. n - m + i``), ``O(m)`` instead of sorting ``n`` random keys; in a stratum of
units with multiplicities, a multivariate hypergeometric draw of unit counts (``n_first`` rows without
replacement), exactly the row permutation in distribution at ``O(units)``. Permutations come in chunks of
fixed sizes (64, 128, 256, ... up to 4,096); chunk ``c`` draws from the generator of
:func:`disaggregated_eval.engine.resampling.resample_seed` ``(test seed, c)``, so the permutations of a
test, and its p-value, do not depend on the thread count, on whether the drawn rows or every unit is
walked, or on when the sequential rule stops.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numba
import numpy as np
from scipy.stats import beta, hypergeom

from .resampling import as_seed_sequence, numba_threads, resample_seed
from .sums import ratio_of_sums_values, terms_for
from .units import find_units, units_of_counts
from .walk import (
    ModelStreams,
    Stream,
    SubsetLayout,
    WalkLayout,
    build_layout,
    run_kernel,
    run_subset_kernel,
    subset_layout,
)

__all__ = [
    "TOLERANCE",
    "SEQUENTIAL_EXCEEDANCES",
    "RESAMPLING_RISK",
    "SUBSET_SHARE",
    "exact_count_pvalue",
    "PermutationSpace",
    "permutation_space",
    "permutation_draws",
    "linear_tail_pvalues",
    "permutation_test",
    "min_permutations",
]

#: Relative tolerance of ``|T*| >= |T|`` (module docstring).
TOLERANCE = 1e-9
#: ``h`` of the sequential rule: a Monte-Carlo test stops after this many permutations as extreme as the data.
SEQUENTIAL_EXCEEDANCES = 10
#: The probability that a test stopped for a small p-value has ``p* >= low`` (module docstring).
RESAMPLING_RISK = 1e-3
#: A test walks only the drawn rows (:func:`~.walk.run_subset_kernel`) when the smaller side holds at most this
#: share of the universe's units (with single-row units in every stratum, the smaller side the same one in all),
#: else every unit. Measured (20,000 rows, 4 means or the AUC, load 6.5): 300, 2,000, 5,000 and 8,000 drawn rows
#: cost 19-24, 58-65, 131-143 and 233-243 us a permutation against 161-315 us for every unit: the drawn rows
#: win up to about half of the universe, which the smaller side never exceeds.
SUBSET_SHARE = 0.5


def min_permutations(n_tests: int, alpha: float) -> int:
    """Fewest permutations with which a Monte-Carlo p-value can fall below ``alpha / n_tests``.

    The smallest p-value of :func:`permutation_test` is ``1 / (n_max + 1)``; after Holm's or
    Benjamini-Hochberg's adjustment of ``n_tests`` tests the smallest adjusted p-value is ``n_tests``
    times that, so a family can flag anything only if ``n_max + 1 >= n_tests / alpha``.

    Returns
    -------
    int
        ``ceil(n_tests / alpha) - 1`` (at least 1).
    """
    return max(1, int(np.ceil(n_tests / alpha - 1e-9)) - 1)


def exact_count_pvalue(x: np.ndarray, n_first: np.ndarray, successes: np.ndarray, size: np.ndarray) -> np.ndarray:
    """Exact permutation p-values of proportions whose rows weigh the same (module docstring).

    Parameters
    ----------
    x : ndarray of int
        Numerator rows in the slice (e.g. its false positives).
    n_first : ndarray of int
        The slice's rows in the universe (e.g. its negatives).
    successes : ndarray of int
        Numerator rows in the universe.
    size : ndarray of int
        Rows of the universe.

    Returns
    -------
    ndarray of float
        ``P(|X - x0| >= |x - x0| - tol)`` for ``X ~ Hypergeometric(size, successes, n_first)`` and
        ``x0 = n_first successes / size``; NaN where the slice or its complement is empty in the
        universe (no test).

    Notes
    -----
    The two tails ``X <= x0 - d`` and ``X >= x0 + d`` (``d = |x - x0| - tol``) are the hypergeometric
    distribution's CDF and survival function at the integers that bound them (``scipy.stats.hypergeom``,
    Boost's implementation: it sums the tail from its largest term until the terms stop counting), so
    the cost is bounded by the spread of the distribution, not by the number of rows; the values agree
    with 40-digit sums of the probabilities to about 1e-15 (``tests/test_engine_units.py``).
    """
    x, n_first, successes, size = (np.asarray(v, dtype=np.int64) for v in (x, n_first, successes, size))
    shape = np.broadcast(x, n_first, successes, size).shape
    x, n_first, successes, size = (np.broadcast_to(v, shape).ravel() for v in (x, n_first, successes, size))
    out = np.full(x.shape, np.nan)
    ok = (n_first > 0) & (n_first < size)
    if ok.any():
        xi, ni, ki, mi = x[ok], n_first[ok], successes[ok], size[ok]
        x0 = ni * ki / mi
        observed = np.abs(xi - x0)
        reach = observed - TOLERANCE * np.maximum(1.0, observed)

        # The lower tail is the integers X <= x0 with x0 - X >= reach, the upper one those X > x0 with
        # X - x0 >= reach; their bounds are found from x0 -/+ reach and checked against the condition
        # itself as the table of probabilities checked it (an integer within rounding of a bound is
        # where the condition puts it).
        def extreme(value):
            return np.abs(value - x0) >= reach

        below = np.floor(x0)
        low = np.minimum(np.floor(x0 - reach), below)
        low = np.where((low + 1.0 <= below) & extreme(low + 1.0), low + 1.0, low)
        low = np.where(extreme(low), low, low - 1.0)
        high = np.maximum(np.ceil(x0 + reach), below + 1.0)
        high = np.where((high - 1.0 >= below + 1.0) & extreme(high - 1.0), high - 1.0, high)
        high = np.where(extreme(high), high, high + 1.0)
        tails = hypergeom.cdf(low, mi, ki, ni) + hypergeom.sf(high - 1.0, mi, ki, ni)
        out[ok] = np.minimum(1.0, tails)
    return out.reshape(shape)


# ----------------------------------------------------------------------------------------------
# The universe of a test
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PermutationSpace:
    """The rows a test permutes among, merged into units, laid out for the walk (one weight column).

    Attributes
    ----------
    layout : WalkLayout
        Over the units (one dense stream: the sample weight).
    multiplicity : ndarray of shape (U,), int64
        Rows of each unit.
    unit_of_row : ndarray of shape (M,), int64
        The unit of each of the universe's rows (in the order given to :func:`permutation_space`).
    stratum : ndarray of shape (U,), int64
        The stratum of each unit.
    row_count : ndarray of shape (M,), int64, or None
        Rows each of the universe's rows stands for (frequency weights, or the universe given as units);
        None: one each.
    y, score, weight : ndarray of shape (U,), float64, or None
        Each unit's label, score and sample weight (None in a space built by hand).
    subset : SubsetLayout or None
        The tables that walk the drawn rows only (:func:`~.walk.subset_layout`), when every unit is one row.
    """

    layout: WalkLayout
    multiplicity: np.ndarray
    unit_of_row: np.ndarray
    stratum: np.ndarray
    row_count: np.ndarray | None = None
    y: np.ndarray | None = None
    score: np.ndarray | None = None
    weight: np.ndarray | None = None
    subset: SubsetLayout | None = None
    #: per-space memo of :func:`linear_tail_pvalues` (the values' cumulant-generating functions)
    memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def size(self) -> int:
        return int(self.multiplicity.sum())

    @property
    def n_strata(self) -> int:
        return int(self.stratum.max(initial=0)) + 1

    def stratum_sizes(self) -> np.ndarray:
        """Rows of each stratum, shape (n_strata,)."""
        return np.bincount(self.stratum, weights=self.multiplicity, minlength=self.n_strata).astype(np.int64)

    def stratum_units(self) -> list[np.ndarray]:
        """The units of each stratum, in increasing order (memoised)."""
        if "stratum_units" not in self.memo:
            order = np.argsort(self.stratum, kind="stable")
            bounds = np.searchsorted(self.stratum[order], np.arange(self.n_strata + 1))
            self.memo["stratum_units"] = [order[a:b] for a, b in itertools.pairwise(bounds)]
        return self.memo["stratum_units"]

    def first_counts(self, first: np.ndarray) -> np.ndarray:
        """Rows of the first side in each stratum, from a boolean mask over the universe's rows."""
        weights = None if self.row_count is None else self.row_count[first]
        counts = np.bincount(self.stratum[self.unit_of_row[first]], weights=weights, minlength=self.n_strata)
        return np.rint(counts).astype(np.int64)


def permutation_space(
    y: np.ndarray,
    scores: np.ndarray,
    weight: np.ndarray | None,
    *,
    metrics,
    threshold: float,
    strata: np.ndarray | None = None,
    count: np.ndarray | None = None,
) -> PermutationSpace:
    """The universe of a test: its rows' labels, one model's scores, the sample weights and the strata.

    Parameters
    ----------
    y, scores : ndarray of shape (M,), float64
        The universe's rows (checked by the caller).
    weight : ndarray of shape (M,) or None
        Sample weights (None: 1).
    metrics : sequence of str
    threshold : float
    strata : ndarray of shape (M,), int, optional
        Stratum codes ``0..K-1`` (membership is permuted within each); None: one stratum.
    count : ndarray of shape (M,), int, optional
        Rows each row stands for (frequency weights, or the universe given as units, e.g. the audit's
        units of :func:`disaggregated_eval.audit.comparison_tests.model_units`): the rows are always merged into
        units, with the summed counts as multiplicities (:func:`.units.units_of_counts`), the universe of
        the expanded rows.

    Returns
    -------
    PermutationSpace
        Rows equal in label, score, weight and stratum merged into units (:mod:`.units`; every row is
        a unit when that does not pay).
    """
    n = y.shape[0]
    w = np.ones(n) if weight is None else weight
    codes = np.zeros(n, dtype=np.int64) if strata is None else np.asarray(strata, dtype=np.int64)
    units = find_units([y, scores, w, codes]) if count is None else units_of_counts([y, scores, w, codes], count)
    if units is None:
        first, of_row, multiplicity = np.arange(n), np.arange(n), np.ones(n, dtype=np.int64)
    else:
        first, of_row, multiplicity = units.first, units.of_row, units.multiplicity
    model = ModelStreams(
        scores=scores[first],
        weights=w[first][:, None],
        codes=np.zeros((first.shape[0], 0), dtype=np.int32),
        streams=(Stream(weight=0),),
    )
    layout = build_layout(y[first], [model], thresholds=(threshold,), terms=terms_for(metrics))
    single = bool((multiplicity == 1).all())
    return PermutationSpace(
        layout=layout,
        multiplicity=multiplicity,
        unit_of_row=of_row,
        stratum=codes[first],
        row_count=count,
        y=y[first],
        score=scores[first],
        weight=w[first],
        subset=subset_layout(layout, multiplicity) if single else None,
    )


# ----------------------------------------------------------------------------------------------
# Draws
# ----------------------------------------------------------------------------------------------

#: Chunk sizes of a test's permutations: 64, 128, ... doubling up to 4,096 (fixed by the data, so the
#: draws of a test do not depend on when it stops); with many units, smaller powers of two, so that a
#: chunk's counts hold at most CHUNK_ELEMENTS values (64 MB per int64 array: 1,000,000 units, chunks
#: of 8 permutations).
_FIRST_CHUNK = 64
_MAX_CHUNK = 4096
CHUNK_ELEMENTS = 2**23


def _chunks(n_permutations: int, n_units: int):
    """(index, start, stop) of the chunks covering permutations 0..n_permutations-1."""
    cap = _MAX_CHUNK
    while cap > 1 and cap * n_units > CHUNK_ELEMENTS:
        cap //= 2
    start, size, c = 0, min(_FIRST_CHUNK, cap), 0
    while start < n_permutations:
        stop = min(n_permutations, start + size)
        yield c, start, stop
        start, size, c = stop, min(2 * size, cap), c + 1


@numba.njit(cache=True)
def _floyd_subsets(uniform, units, unit_start, n_units, picks, col_start):
    """Floyd's algorithm in every stratum: ``picks[s]`` of the ``n_units[s]`` units ``units[unit_start[s]:]``,
    each permutation ``b`` from the uniforms ``uniform[b, col_start[s]:]`` (the ``i``-th draw uniform on
    ``0 .. n - m + i``); the units drawn, shape (k, sum of picks), each stratum's in its columns."""
    k, width = uniform.shape
    out = np.empty((k, width), dtype=np.int64)
    mark = np.zeros(units.shape[0], dtype=np.bool_)
    for b in range(k):
        for s in range(picks.shape[0]):
            n = n_units[s]
            m = picks[s]
            a0 = unit_start[s]
            c0 = col_start[s]
            for i in range(m):
                j = n - m + i
                t = min(int(uniform[b, c0 + i] * (j + 1)), j)
                if mark[a0 + t]:
                    t = j
                mark[a0 + t] = True
                out[b, c0 + i] = a0 + t
        for i in range(width):
            mark[out[b, i]] = False
            out[b, i] = units[out[b, i]]
    return out


@dataclass(frozen=True)
class _ChunkDraw:
    """A chunk's permutations: the units drawn by Floyd's algorithm (``chosen``, (k, width): in the strata of
    single-row units, the smaller side, the first side where ``drawn_first``), each stratum in the columns
    ``columns[s]`` (None for the others), and the multivariate hypergeometric first-side counts of the units
    of the other strata (``counts[s]``, (k, U_s))."""

    chosen: np.ndarray
    columns: list
    drawn_first: list
    counts: list


def _draw_chunk(space: PermutationSpace, n_first: np.ndarray, seed: np.random.SeedSequence, c: int, k: int):
    """The ``k`` permutations of chunk ``c`` (:class:`_ChunkDraw`): uniforms for every Floyd stratum first,
    then the multivariate hypergeometric counts of the others in stratum order, from one generator."""
    generator = np.random.Generator(np.random.PCG64(resample_seed(seed, c)))
    strata = space.stratum_units()
    if "floyd" not in space.memo:  # the units of every stratum side by side, and which strata are of single rows
        sizes = np.array([u.size for u in strata], dtype=np.int64)
        flat = np.concatenate(strata) if strata else np.zeros(0, dtype=np.int64)
        starts = (np.cumsum(sizes) - sizes).astype(np.int64)
        single = [bool(u.size and (space.multiplicity[u] == 1).all()) for u in strata]
        space.memo["floyd"] = (sizes, flat, starts, single)
    sizes, flat, starts, single = space.memo["floyd"]
    picks = np.zeros(len(strata), dtype=np.int64)
    drawn_first = [True] * len(strata)
    for s, units in enumerate(strata):
        if single[s] and n_first[s] > 0:
            picks[s] = min(n_first[s], units.size - n_first[s])
            drawn_first[s] = bool(picks[s] == n_first[s])
    col_start = np.concatenate(([0], np.cumsum(picks)))[:-1].astype(np.int64)
    uniform = generator.random((k, int(picks.sum())))
    chosen = _floyd_subsets(uniform, flat, starts, sizes, picks, col_start)
    columns = [slice(col_start[s], col_start[s] + picks[s]) if single[s] and n_first[s] > 0 else None
               for s in range(len(strata))]  # fmt: skip
    counts = [None] * len(strata)
    for s, units in enumerate(strata):
        if units.size and not single[s] and n_first[s] > 0:
            counts[s] = generator.multivariate_hypergeometric(
                space.multiplicity[units], int(n_first[s]), size=k, method="marginals"
            )
    return _ChunkDraw(chosen=chosen, columns=columns, drawn_first=drawn_first, counts=counts)


def _dense_counts(space: PermutationSpace, draw: _ChunkDraw, k: int) -> np.ndarray:
    """First-side unit counts of a chunk's permutations, shape (k, U), int64."""
    out = np.zeros((k, space.multiplicity.shape[0]), dtype=np.int64)
    every = np.arange(k)[:, None]
    for s, units in enumerate(space.stratum_units()):
        if draw.counts[s] is not None:
            out[:, units] = draw.counts[s]
        elif draw.columns[s] is not None:
            if draw.drawn_first[s]:
                out[every, draw.chosen[:, draw.columns[s]]] = 1
            else:
                out[:, units] = 1
                out[every, draw.chosen[:, draw.columns[s]]] = 0
    return out


def _subset_side(space: PermutationSpace, n_first: np.ndarray) -> bool | None:
    """Whether a test walks its drawn rows only, and which: True the first side, False the second, None
    every unit (some stratum has units of several rows, the smaller sides differ between strata, or the
    drawn rows exceed :data:`SUBSET_SHARE` of the units)."""
    if space.subset is None:
        return None
    sizes = space.stratum_sizes()
    first = np.asarray(n_first, dtype=np.int64)
    if (first <= sizes - first).all():
        side, drawn = True, int(first.sum())
    elif (first >= sizes - first).all() and (first > sizes - first).any():
        side, drawn = False, int((sizes - first).sum())
    else:
        return None
    return side if drawn <= SUBSET_SHARE * space.multiplicity.shape[0] else None


def permutation_draws(
    space: PermutationSpace, n_first: np.ndarray, seed: int | np.random.SeedSequence, n_permutations: int
) -> np.ndarray:
    """The first side's unit counts of permutations ``0..n_permutations-1`` of a test (module docstring).

    Parameters
    ----------
    space : PermutationSpace
    n_first : ndarray of shape (n_strata,), int
        Rows of the first side in each stratum.
    seed : int or numpy.random.SeedSequence
        The test's seed.
    n_permutations : int

    Returns
    -------
    ndarray of shape (n_permutations, n_units), int64
        Each row sums to ``n_first`` within every stratum and never exceeds the units' multiplicities.
    """
    seed = as_seed_sequence(seed)
    first = np.asarray(n_first, dtype=np.int64)
    chunks = _chunks(n_permutations, space.multiplicity.shape[0])
    parts = [_dense_counts(space, _draw_chunk(space, first, seed, c, stop - start), stop - start)
             for c, start, stop in chunks]  # fmt: skip
    return np.concatenate(parts) if parts else np.zeros((0, space.multiplicity.shape[0]), dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# Tail bounds of the exact p-value of a mean
# ----------------------------------------------------------------------------------------------

#: The grid of ``lambda sigma`` over which Chernoff's bound is minimised (``sigma``: the values' standard
#: deviation in the universe), both signs; any ``lambda`` gives a valid bound, the grid only tightens it.
_LAMBDA_GRID = np.geomspace(1e-3, 1e3, 97)


def _cumulants(space: PermutationSpace, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``lambda`` grid (G,), and each stratum's ``K_s(lambda) = log mean exp(lambda (v - mean_s))`` over its
    rows (each unit ``multiplicity`` times) on the grid and on its negative, shapes (S, G) each."""
    rows = space.multiplicity.astype(np.float64)
    total = rows.sum()
    mean = float(np.dot(rows, values) / total)
    sigma = float(np.sqrt(np.dot(rows, (values - mean) ** 2) / total))
    grid = _LAMBDA_GRID / sigma
    n_strata = space.n_strata
    plus = np.zeros((n_strata, grid.shape[0]))
    minus = np.zeros_like(plus)
    for s, units in enumerate(space.stratum_units()):
        if units.size == 0:
            continue
        v, c = values[units], rows[units]
        centred = v - float(np.dot(c, v) / c.sum())
        log_c = np.log(c) - np.log(c.sum())
        for g, lam in enumerate(grid):
            for sign, out in ((1.0, plus), (-1.0, minus)):
                e = sign * lam * centred + log_c
                top = e.max()
                out[s, g] = top + np.log(np.exp(e - top).sum())
    return grid, plus, minus


def _chernoff(t: float, grid: np.ndarray, k_up: np.ndarray, n_up: np.ndarray, k_down: np.ndarray,
              n_down: np.ndarray) -> float:  # fmt: skip
    """``min over the grid of exp(-lambda t + sum_s n_s K_s)`` for a deviation ``t > 0``, the smaller of two
    bounds: the drawn side (``n_up`` rows per stratum, ``K`` at ``lambda``: ``k_up``) and its complement."""
    exponent = min(float(np.min(-grid * t + n_up @ k_up)), float(np.min(-grid * t + n_down @ k_down)))
    return float(np.exp(min(0.0, exponent + 1e-9 * (1.0 + abs(exponent)))))


def linear_tail_pvalues(
    space: PermutationSpace,
    n_first: np.ndarray,
    observed: np.ndarray,
    *,
    pairwise: bool,
    fixed: np.ndarray | None,
    metrics,
    threshold: float,
    odds: float,
) -> np.ndarray:
    """Upper bounds of the exact permutation p-values of the metrics that are means of per-row values.

    A metric ``sum w a / sum w b`` with ``b = 1`` (:func:`.sums.ratio_of_sums_values`: log loss, Brier score,
    net benefit, mean predicted risk) and equal weights is ``s / n`` with ``s`` the sum of ``a`` over the
    ``n`` rows of a side; each statistic (slice minus overall, minus rest, minus another slice) is an affine
    function ``c1 s + c0`` of the first side's sum, a sum over a sample without replacement (within each
    stratum). ``P(|c1 s + c0| >= |T| - 2 tol)`` is bounded, tail by tail, by Chernoff's bound
    ``exp(-lambda t + sum_s n_s K_s(lambda))`` with ``K_s`` the exact cumulant-generating function of the
    stratum's centred values (Hoeffding, 1963, Theorem 4: the moment-generating function of a sum without
    replacement is at most the one with replacement), minimised over a grid of ``lambda`` and taken for the
    first side or its complement, whichever is smaller. The bound is an upper bound of the exact permutation
    p-value of :func:`permutation_test` (whose tolerance ``tol`` it halves), so a valid p-value.

    Parameters
    ----------
    space : PermutationSpace
        Built by :func:`permutation_space` (its units' labels, scores and weights).
    n_first : ndarray of shape (n_strata,), int
    observed : ndarray of shape (n_stats, n_metrics)
        As :func:`permutation_test`.
    pairwise : bool
    fixed : ndarray of shape (n_metrics,) or None
        As :func:`permutation_test`.
    metrics : sequence of str
        The metrics of ``observed``'s columns.
    threshold, odds : float
        The decision threshold and the net benefit's odds.

    Returns
    -------
    ndarray of shape (n_stats, n_metrics)
        The bounds, in (0, 1]; NaN for a metric that is not such a mean, under unequal weights, where the
        statistic is undefined or the values do not vary.

    Examples
    --------
    >>> import numpy as np
    >>> y = np.r_[np.zeros(50), np.ones(50)]
    >>> r = np.r_[np.full(50, 0.2), np.full(50, 0.8)]
    >>> space = permutation_space(y, r, None, metrics=["mean_predicted_risk"], threshold=0.5)
    >>> first = space.first_counts(np.arange(100) >= 80)  # the 20 highest scores
    >>> bound = linear_tail_pvalues(space, first, np.array([[0.8 - 0.5], [0.8 - 0.425]]), pairwise=False,
    ...                             fixed=np.array([0.5]), metrics=["mean_predicted_risk"], threshold=0.5, odds=1.0)
    >>> bool((bound < 1e-4).all())
    True
    """
    observed = np.asarray(observed, dtype=np.float64)
    n_stats, n_q = observed.shape
    out = np.full((n_stats, n_q), np.nan)
    if space.weight is None or not (space.weight == space.weight[0]).all():
        return out
    first = np.asarray(n_first, dtype=np.int64)
    sizes = space.stratum_sizes()
    n, total = int(first.sum()), int(sizes.sum())
    if n == 0 or n == total:
        return out
    rows = space.multiplicity.astype(np.float64)
    for q, metric in enumerate(metrics):
        key = ("linear", metric, float(threshold), float(odds))
        if key not in space.memo:
            try:
                a, b = ratio_of_sums_values(metric, space.y, space.score, threshold=threshold, odds=odds)
            except ValueError:
                a = b = None
            if a is None or not (b == 1.0).all() or not np.isfinite(a).all() or np.ptp(a) == 0.0:
                space.memo[key] = None
            else:
                means = np.bincount(space.stratum, weights=rows * a, minlength=space.n_strata) / np.maximum(sizes, 1)
                space.memo[key] = (a, means, float(np.dot(rows, a)), *_cumulants(space, a))
        memo = space.memo[key]
        if memo is None:
            continue
        _a, means, universe, grid, plus, minus = memo
        centre = float(np.dot(first, means))  # E s
        slopes = [1.0 / n + 1.0 / (total - n)] if pairwise else [1.0 / n, 1.0 / n + 1.0 / (total - n)]
        shifts = [-universe / (total - n)] if pairwise else [-float(fixed[q]), -universe / (total - n)]
        for i in range(n_stats):
            t_obs = observed[i, q]
            if not np.isfinite(t_obs):
                continue
            reach = abs(t_obs) - 2.0 * TOLERANCE * max(1.0, abs(t_obs))
            if reach <= 0.0:
                out[i, q] = 1.0
                continue
            c1, c0 = slopes[i], shifts[i]
            up = (reach - c0) / c1 - centre  # s - E s >= up
            down = centre - (-reach - c0) / c1  # E s - s >= down
            p_up = _chernoff(up, grid, plus, first, minus, sizes - first) if up > 0 else 1.0
            p_down = _chernoff(down, grid, minus, first, plus, sizes - first) if down > 0 else 1.0
            out[i, q] = min(1.0, p_up + p_down)
    return out


# ----------------------------------------------------------------------------------------------
# The test
# ----------------------------------------------------------------------------------------------


def permutation_test(
    space: PermutationSpace,
    n_first: np.ndarray,
    observed: np.ndarray,
    *,
    pairwise: bool,
    fixed: np.ndarray | None,
    slots: np.ndarray,
    odds: float,
    n_permutations: int,
    seed: int | np.random.SeedSequence,
    n_threads: int = 1,
    sequential: int | None = SEQUENTIAL_EXCEEDANCES,
    low: np.ndarray | float = 0.0,
    risk: float = RESAMPLING_RISK,
    bounds: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Monte-Carlo permutation p-values of one test, for every metric at once (module docstring).

    Parameters
    ----------
    space : PermutationSpace
        The rows permuted among and their strata.
    n_first : ndarray of shape (n_strata,), int
        Rows of the first side (the slice; slice ``a`` of a pair) in each stratum.
    observed : ndarray of shape (n_stats, n_metrics)
        Observed statistics: tests against overall (slice - overall, slice - rest), or pairwise
        (a - b,).
    pairwise : bool
    fixed : ndarray of shape (n_metrics,) or None
        The population's metrics (tests against overall).
    slots : ndarray of int64
        Metric slots (:func:`disaggregated_eval.engine.sums.metric_slots`).
    odds : float
    n_permutations : int (>= 1)
        The most permutations drawn (``n_max``).
    seed : int or numpy.random.SeedSequence
        The test's seed (its permutations: :func:`permutation_draws`).
    n_threads : int
        numba threads of the walk (results do not depend on it).
    sequential : int or None, default :data:`SEQUENTIAL_EXCEEDANCES`
        ``h`` of Besag and Clifford's rule; None draws all ``n_permutations`` (p = (g + 1) / (P + 1)) and
        stops no small p-value either.
    low : float or ndarray of shape (n_stats,), default 0
        The smallest threshold at which each statistic's p-value will be read (module docstring): a
        statistic stops once its p-value is below it at resampling risk ``risk``; 0 never stops one.
    risk : float, default :data:`RESAMPLING_RISK`
        The probability that a statistic stopped for a small p-value has an exact p-value of at least ``low``.
    bounds : ndarray of shape (n_stats, n_metrics), optional
        Upper bounds of the exact p-values (e.g. :func:`linear_tail_pvalues`; NaN: none): where one is below
        ``low`` it is the p-value and no permutation is drawn for it.

    Returns
    -------
    p_values : ndarray of shape (n_stats, n_metrics)
        NaN where the observed statistic is undefined or no permutation is defined.
    n_used : ndarray of shape (n_stats, n_metrics), int64
        Defined permutations behind each p-value (0 where a bound is the p-value).

    Raises
    ------
    ValueError
        If ``risk`` is not in (0, 1) or ``low`` not in [0, 1].
    """
    if not 0.0 < risk < 1.0:
        raise ValueError(f"risk must be in (0, 1); got {risk!r}")
    seed = as_seed_sequence(seed)
    first = np.asarray(n_first, dtype=np.int64)
    L = space.layout
    n_stats, n_q = observed.shape
    low = np.broadcast_to(np.asarray(low, dtype=np.float64), (n_stats,))
    if not ((low >= 0.0) & (low <= 1.0)).all():
        raise ValueError(f"low must be in [0, 1]; got {low.tolist()}")
    h = sequential if sequential is not None else n_permutations + 1
    observed = np.asarray(observed, dtype=np.float64)
    fixed_values = np.zeros(n_q) if fixed is None else np.asarray(fixed, dtype=np.float64)
    tolerance = TOLERANCE * np.maximum(1.0, np.abs(observed))
    undefined = ~np.isfinite(observed)
    exceeded = np.zeros((n_stats, n_q), dtype=np.int64)
    defined = np.zeros((n_stats, n_q), dtype=np.int64)
    stopped = undefined.copy()
    p = np.full((n_stats, n_q), np.nan)
    used = np.zeros((n_stats, n_q), dtype=np.int64)
    if bounds is not None:
        bounds = np.asarray(bounds, dtype=np.float64)
        settled = ~stopped & (bounds < low[:, None])
        p[settled] = bounds[settled]
        stopped |= settled
    else:
        settled = np.zeros_like(stopped)
    chunks = list(_chunks(n_permutations, space.multiplicity.shape[0]))
    # one-sided Clopper-Pearson bounds at each chunk's end, the risk split over the chunks (module docstring)
    small = sequential is not None and bool((low > 0.0).any())
    level = 1.0 - risk / max(1, len(chunks))
    side = _subset_side(space, first)
    with numba_threads(n_threads):
        for c, start, stop in chunks:
            if stopped.all():
                break
            k = stop - start
            parts = _draw_chunk(space, first, seed, c, k)
            if side is None:
                d = _dense_counts(space, parts, k)
                counts = np.empty((2 * k, d.shape[1]), dtype=np.int32)
                counts[0::2] = d
                counts[1::2] = space.multiplicity[None, :] - d
                out = np.empty((2 * k, 1, 1, n_q))
                run_kernel(L, counts, from_counts=True, slots=slots, odds=odds, n_threads=n_threads, out=out)
                a, b = out[0::2, 0, 0, :], out[1::2, 0, 0, :]
            else:
                out = np.empty((k, 2, 1, n_q))
                run_subset_kernel(L, space.subset, parts.chosen, slots=slots, odds=odds, out=out)
                a, b = (out[:, 0, 0, :], out[:, 1, 0, :]) if side else (out[:, 1, 0, :], out[:, 0, 0, :])
            stat = np.stack([a - b] if pairwise else [a - fixed_values, a - b][:n_stats], axis=1)  # (k, stats, q)
            ok = np.isfinite(stat) & ~undefined[None]
            extreme = ok & (np.abs(stat) >= np.abs(observed)[None] - tolerance[None])
            cum_ex = exceeded[None] + np.cumsum(extreme, axis=0)
            cum_de = defined[None] + np.cumsum(ok, axis=0)
            reach = (cum_ex >= h) & ~stopped[None]
            newly = reach.any(axis=0)
            if newly.any():
                row = np.argmax(reach, axis=0)
                idx = np.nonzero(newly)
                at = cum_de[row[idx], idx[0], idx[1]]
                p[idx] = h / at
                used[idx] = at
                stopped |= newly
            exceeded, defined = cum_ex[-1], cum_de[-1]
            if small:
                open_ = ~stopped & (defined > 0)
                if open_.any():
                    g, n_def = exceeded[open_], defined[open_]
                    # Clopper-Pearson: the upper bound is 1 when every defined permutation exceeded
                    upper = np.where(n_def > g, beta.ppf(level, g + 1, np.maximum(n_def - g, 1)), 1.0)
                    hit = np.zeros_like(stopped)
                    hit[open_] = upper < np.broadcast_to(low[:, None], stopped.shape)[open_]
                    p[hit] = (exceeded[hit] + 1.0) / (defined[hit] + 1.0)
                    used[hit] = defined[hit]
                    stopped |= hit
    rest = ~stopped
    p[rest] = (exceeded[rest] + 1.0) / (defined[rest] + 1.0)
    used[rest] = defined[rest]
    p = np.where(undefined | ((used == 0) & ~settled), np.nan, p)
    return p, used
