"""Permutation tests of differences between two sets of rows, every metric at once, on the engine's walk.

A test has a *universe* (the rows permuted among) and a first side (a slice). Under the null, slice
membership is exchangeable within each *stratum* of the universe: a permutation draws, in every
stratum, as many rows as the slice has there, uniformly without replacement, as the permuted first
side; the rest of the universe is the second side. The universe and strata express the null of each
metric (``docs/audit.md``, "Tests"): for the false positive rate the universe is the negatives (the
metric is a rate among them, so the test is of that rate, not of the slice's whole distribution),
for the AUC the strata are the two classes, and so on (the audit chooses them).

Two ways to compute a p-value:

* :func:`exact_count_pvalue`, for a proportion whose rows all weigh the same: the number ``X`` of
  numerator rows (e.g. false positives) in the permuted slice is hypergeometric, and every statistic
  (slice minus overall, slice minus rest, slice minus another slice) is an increasing affine function
  of ``X`` with its zero at ``x0 = n K / N``, so the exact permutation p-value is
  ``P(|X - x0| >= |x - x0|)`` (summed from the hypergeometric distribution; no Monte Carlo);
* :func:`permutation_test`, Monte Carlo, for everything else (the AUC, means, ratios, sample
  weights): the metrics of both sides of each permutation come from the engine's one walk
  (:func:`disaggregated_eval.engine.walk._walk`; each side is a lane of 0/1 counts, two permutations
  per walk). Statistics: ``first - fixed`` (slice minus overall) and ``first - second`` (slice minus
  rest, or slice ``a`` minus slice ``b``).

Monte-Carlo p-values follow Besag and Clifford's sequential rule (Besag and Clifford, 1991,
"Sequential Monte Carlo p-values", Biometrika 78): permutations are drawn until ``h`` of them are at
least as extreme as the data (``|T*| >= |T| - tol``, ``tol = 1e-9 max(1, |T|)`` absorbing rounding),
giving ``p = h / L`` after ``L`` defined permutations, or until ``n_max`` are drawn, giving
``p = (g + 1) / (n_max + 1)`` with ``g < h`` exceedances (the +1 rule of Phipson and Smyth, 2010).
Both are valid p-values; a test whose p-value is clearly large stops after a few dozen permutations.
Permutations on which a statistic is undefined are skipped for that statistic.

Draws (:func:`permutation_draws`): the universe's rows are merged into units (:mod:`.units`: rows
that the walk cannot tell apart), and a permutation's first side is, in every stratum, a multivariate
hypergeometric draw of unit counts (``n_first`` rows without replacement), exactly the row permutation
in distribution at ``O(units)``; the second side is the rest. Permutations come in chunks of fixed
sizes (64, 128, 256, ... up to 4,096); chunk ``c`` draws from the generator of
:func:`disaggregated_eval.engine.resampling.resample_seed` ``(test seed, c)``, so the permutations of a
test, and its p-value, do not depend on the thread count or on when the sequential rule stops.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import hypergeom

from .resampling import as_seed_sequence, numba_threads, resample_seed
from .sums import terms_for
from .units import find_units, units_of_counts
from .walk import ModelStreams, Stream, WalkLayout, build_layout, run_kernel

__all__ = [
    "TOLERANCE",
    "SEQUENTIAL_EXCEEDANCES",
    "exact_count_pvalue",
    "PermutationSpace",
    "permutation_space",
    "permutation_draws",
    "permutation_test",
    "min_permutations",
]

#: Relative tolerance of ``|T*| >= |T|`` (module docstring).
TOLERANCE = 1e-9
#: ``h`` of the sequential rule: a Monte-Carlo test stops after this many permutations as extreme as the data.
SEQUENTIAL_EXCEEDANCES = 10


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
    """

    layout: WalkLayout
    multiplicity: np.ndarray
    unit_of_row: np.ndarray
    stratum: np.ndarray
    row_count: np.ndarray | None = None

    @property
    def size(self) -> int:
        return int(self.multiplicity.sum())

    @property
    def n_strata(self) -> int:
        return int(self.stratum.max(initial=0)) + 1

    def stratum_sizes(self) -> np.ndarray:
        """Rows of each stratum, shape (n_strata,)."""
        return np.bincount(self.stratum, weights=self.multiplicity, minlength=self.n_strata).astype(np.int64)

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
    return PermutationSpace(
        layout=layout, multiplicity=multiplicity, unit_of_row=of_row, stratum=codes[first], row_count=count
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


def _draw_chunk(space: PermutationSpace, n_first: np.ndarray, seed: np.random.SeedSequence, c: int, k: int):
    """First-side unit counts of the ``k`` permutations of chunk ``c``, shape (k, U), int64."""
    generator = np.random.Generator(np.random.PCG64(resample_seed(seed, c)))
    out = np.zeros((k, space.multiplicity.shape[0]), dtype=np.int64)
    for s in range(space.n_strata):
        units = np.flatnonzero(space.stratum == s)
        if units.size == 0 or n_first[s] == 0:
            continue
        colors = space.multiplicity[units]
        if (colors == 1).all():  # one row per unit: a uniform subset by random keys
            keys = generator.random((k, units.size))
            chosen = np.argpartition(keys, n_first[s] - 1, axis=1)[:, : n_first[s]] if n_first[s] < units.size else None
            if chosen is None:
                out[:, units] = 1
            else:
                rows = np.repeat(np.arange(k), n_first[s])
                out[rows, units[chosen.ravel()]] = 1
        else:
            out[:, units] = generator.multivariate_hypergeometric(colors, int(n_first[s]), size=k, method="marginals")
    return out


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
    parts = [_draw_chunk(space, first, seed, c, stop - start) for c, start, stop in chunks]
    return np.concatenate(parts) if parts else np.zeros((0, space.multiplicity.shape[0]), dtype=np.int64)


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
        ``h`` of Besag and Clifford's rule; None draws all ``n_permutations`` (p = (g + 1) / (P + 1)).

    Returns
    -------
    p_values : ndarray of shape (n_stats, n_metrics)
        NaN where the observed statistic is undefined or no permutation is defined.
    n_used : ndarray of shape (n_stats, n_metrics), int64
        Defined permutations behind each p-value.
    """
    seed = as_seed_sequence(seed)
    first = np.asarray(n_first, dtype=np.int64)
    L = space.layout
    n_stats, n_q = observed.shape
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
    with numba_threads(n_threads):
        for c, start, stop in _chunks(n_permutations, space.multiplicity.shape[0]):
            if stopped.all():
                break
            k = stop - start
            d = _draw_chunk(space, first, seed, c, k)
            counts = np.empty((2 * k, d.shape[1]), dtype=np.int32)
            counts[0::2] = d
            counts[1::2] = space.multiplicity[None, :] - d
            out = np.empty((2 * k, 1, 1, n_q))
            run_kernel(L, counts, from_counts=True, slots=slots, odds=odds, n_threads=n_threads, out=out)
            a, b = out[0::2, 0, 0, :], out[1::2, 0, 0, :]
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
    rest = ~stopped
    p[rest] = (exceeded[rest] + 1.0) / (defined[rest] + 1.0)
    used[rest] = defined[rest]
    p = np.where(undefined | (used == 0), np.nan, p)
    return p, used
