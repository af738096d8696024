"""Seeded permutation tests of differences between two sets of rows, every metric at once, on the walk.

A test has a *universe* (the rows permuted among: all rows, or the rows of two slices) and a first
side of ``n_first`` rows (a slice). Under the null, membership of the first side is exchangeable
within the universe: a permutation draws ``n_first`` of the universe's rows uniformly without
replacement as the permuted first side (the rest of the universe is the second side) and computes the
statistics from the metrics of both sides, walked by the engine's one walk
(:func:`disaggregated_eval.engine.walk._walk`: each side is a lane of 0/1 counts, so two permutations
share a walk of four lanes). Statistics (``docs/audit.md``):

* ``first - fixed`` (e.g. slice minus overall, the overall metric fixed),
* ``first - second`` (slice minus rest, or slice ``a`` minus slice ``b`` among their rows).

The p-value of an observed statistic ``T`` over ``P`` permutations is

    p = (1 + #{p : |T*_p| >= |T| - tol}) / (1 + P_defined)

(the +1 correction: the observed labelling counts as one permutation, so p is never 0 and the test
is valid; Phipson and Smyth, 2010), where ``P_defined`` counts the permutations on which ``T*`` is
defined and ``tol = 1e-9 max(1, |T|)`` absorbs rounding (a permutation as extreme as the data up to
floating point counts as such). Sample weights travel with their rows.

Random numbers: permutation ``p`` of a test uses xoshiro256** (Blackman and Vigna) seeded by
splitmix64 from the test's two 64-bit key words (:func:`seed_key` of its SeedSequence) and ``p``; it
draws the smaller side (``m = min(n_first, M - n_first)`` positions) with Floyd's algorithm into a
bitset (:func:`permuted_subset`). Results do not depend on the thread count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from .sums import N_METRIC_SLOTS, N_TERMS, terms_for
from .walk import LANES, ModelStreams, Stream, WalkLayout, _finalize, _walk, build_layout

__all__ = [
    "TOLERANCE",
    "PermutationSpace",
    "permutation_space",
    "permutation_test",
    "permuted_subset",
    "seed_key",
]

#: Relative tolerance of ``|T*| >= |T|`` (module docstring).
TOLERANCE = 1e-9

_U64 = np.uint64


# ----------------------------------------------------------------------------------------------
# Random numbers (numba): splitmix64 seeding, xoshiro256**, Lemire's bounded integers, Floyd
# ----------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _splitmix(x):
    x = x + _U64(0x9E3779B97F4A7C15)
    z = x
    z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x, z ^ (z >> _U64(31))


@numba.njit(cache=True)
def _seed_state(key0, key1, p, state):
    x = key0 ^ (key1 * _U64(0xD1B54A32D192ED03)) ^ (_U64(p) * _U64(0x9E3779B97F4A7C15))
    x, state[0] = _splitmix(x)
    x, state[1] = _splitmix(x ^ key1)
    x, state[2] = _splitmix(x)
    x, state[3] = _splitmix(x)


@numba.njit(cache=True)
def _rotl(x, k):
    return (x << _U64(k)) | (x >> _U64(64 - k))


@numba.njit(cache=True)
def _next(state):
    result = _rotl(state[1] * _U64(5), 7) * _U64(9)
    t = state[1] << _U64(17)
    state[2] ^= state[0]
    state[3] ^= state[1]
    state[1] ^= state[2]
    state[0] ^= state[3]
    state[2] ^= t
    state[3] = _rotl(state[3], 45)
    return result


@numba.njit(cache=True)
def _below(state, bound):
    """Uniform integer in 0..bound-1 (bound < 2**32), Lemire's multiply-and-reject."""
    b = _U64(bound)
    mask = _U64(0xFFFFFFFF)
    m = (_next(state) >> _U64(32)) * b
    low = m & mask
    if low < b:
        threshold = ((mask - b) + _U64(1)) % b
        while low < threshold:
            m = (_next(state) >> _U64(32)) * b
            low = m & mask
    return np.int64(m >> _U64(32))


@numba.njit(cache=True)
def _floyd(state, universe_size, m, member):
    """Mark ``m`` distinct positions among 0..universe_size-1 in ``member`` (Floyd's algorithm)."""
    for j in range(universe_size - m, universe_size):
        t = _below(state, j + 1)
        if member[t]:
            member[j] = True
        else:
            member[t] = True


@numba.njit(cache=True)
def _subset(key0, key1, p, universe_size, m, member, state, out):
    """Positions (increasing) of permutation p's subset, into out[:m] (for tests and inspection)."""
    _seed_state(key0, key1, p, state)
    _floyd(state, universe_size, m, member)
    k = 0
    for i in range(universe_size):
        if member[i]:
            out[k] = i
            k += 1
            member[i] = False


def permuted_subset(key: tuple[int, int], p: int, universe_size: int, m: int) -> np.ndarray:
    """The universe positions (sorted) that permutation ``p`` of a test draws (its smaller side).

    Parameters
    ----------
    key : (int, int)
        The test's two 64-bit key words (:func:`seed_key`).
    p : int
        Permutation index.
    universe_size, m : int
        Size of the universe and of the drawn subset.

    Returns
    -------
    ndarray of shape (m,), int64
    """
    member = np.zeros(universe_size, dtype=np.bool_)
    out = np.empty(m, dtype=np.int64)
    _subset(_U64(key[0]), _U64(key[1]), p, universe_size, m, member, np.zeros(4, dtype=np.uint64), out)
    return out


def seed_key(seed_sequence: np.random.SeedSequence) -> tuple[int, int]:
    """Two 64-bit words from a test's seed sequence."""
    state = seed_sequence.generate_state(2, dtype=np.uint64)
    return int(state[0]), int(state[1])


# ----------------------------------------------------------------------------------------------
# The universe of a test
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PermutationSpace:
    """The rows a test permutes among, laid out for the walk (one model, one weight column).

    ``layout`` has one dense stream (the sample weight); position ``i`` of the universe is the
    ``i``-th of the rows given to :func:`permutation_space` (a permutation's subset indexes them).
    """

    layout: WalkLayout

    @property
    def size(self) -> int:
        return self.layout.n


def permutation_space(
    y: np.ndarray, scores: np.ndarray, weight: np.ndarray | None, *, metrics, threshold: float
) -> PermutationSpace:
    """The universe of a test: its rows' labels, one model's scores and the sample weights.

    Parameters
    ----------
    y, scores : ndarray of shape (M,), float64
        The universe's rows (checked by the caller), in the order in which a permutation's positions
        refer to them.
    weight : ndarray of shape (M,) or None
        Sample weights (None: 1).
    metrics : sequence of str
    threshold : float

    Returns
    -------
    PermutationSpace
    """
    n = y.shape[0]
    w = np.ones(n) if weight is None else weight
    model = ModelStreams(
        scores=scores, weights=w[:, None], codes=np.zeros((n, 0), dtype=np.int32), streams=(Stream(weight=0),)
    )
    return PermutationSpace(build_layout(y, [model], thresholds=(threshold,), terms=terms_for(metrics)))


# ----------------------------------------------------------------------------------------------
# The kernel
# ----------------------------------------------------------------------------------------------


@numba.njit(parallel=True, cache=True)
def _permutation_kernel(order, y, tv, term_slots, seg_starts, seg_tie, splits, dense_weights, m, draw_is_first,
                        pairwise, fixed, observed, slots, odds, n_perm, key0, key1, n_threads, exceed,
                        defined):  # fmt: skip
    """Tally, per statistic and metric, permutations with |T*| >= |T| - tol and those with T* defined.

    Two permutations per walk: lanes (0, 1) are permutation ``2 b``'s first and second sides, lanes
    (2, 3) permutation ``2 b + 1``'s. Block ``b`` runs on thread ``b % n_threads``; ``exceed`` and
    ``defined`` (n_threads, n_stats, n_metrics) hold per-thread integer tallies.
    """
    size = y.shape[0]
    n_q = slots.shape[0]
    n_stats = observed.shape[0]
    n_thr = splits.shape[0]
    n_slots = 5 + 2 * n_thr + tv.shape[0]
    n_blocks = (n_perm + 1) // 2
    empty_i = np.zeros(0, dtype=np.int64)
    empty_b = np.zeros(0, dtype=np.bool_)
    empty_f = np.zeros(0)
    empty_c = np.zeros(0, dtype=np.int32)
    out_acc = np.zeros(1, dtype=np.int64)
    out_side = np.full(1, 2, dtype=np.int64)
    for th in numba.prange(n_threads):
        member = np.zeros(size, dtype=np.bool_)
        state = np.zeros(4, dtype=np.uint64)
        cs = np.zeros((size, LANES))
        acc = np.zeros((1, n_slots, LANES))
        pend = np.zeros((1, 2, LANES))
        flag = np.zeros(1, dtype=np.bool_)
        touched = np.zeros(1, dtype=np.int64)
        accd = np.zeros((1, n_slots, LANES))
        pendd = np.zeros((1, 2, LANES))
        accw = np.zeros((n_slots, LANES, 1))
        pendw = np.zeros((2, LANES, 1))
        terms = np.zeros(N_TERMS)
        values = np.empty(N_METRIC_SLOTS)
        out = np.empty((LANES, 1, n_thr, n_q))
        for block in range(th, n_blocks, n_threads):
            n_here = min(2, n_perm - 2 * block)
            for half in range(2):
                if half >= n_here:
                    for j in range(size):
                        cs[j, 2 * half] = 0.0
                        cs[j, 2 * half + 1] = 0.0
                    continue
                _seed_state(key0, key1, 2 * block + half, state)
                _floyd(state, size, m, member)
                for j in range(size):  # sorted position j holds universe position order[j]
                    i = order[j]
                    first = member[i] if draw_is_first else not member[i]
                    cs[j, 2 * half] = 1.0 if first else 0.0
                    cs[j, 2 * half + 1] = 0.0 if first else 1.0
                for i in range(size):
                    member[i] = False
            _walk(cs, y, tv, seg_starts, seg_tie, splits, empty_f, 0, empty_c, 0,
                  empty_i, empty_i, empty_i, empty_i, empty_i, empty_b, acc[:0], pend[:0], flag[:0], touched[:0],
                  dense_weights, 1, accd, pendd, accw, pendw)  # fmt: skip
            _finalize(acc[:0], accd, 2 * n_here, out_acc, out_side, empty_i, n_thr, term_slots, slots, odds, out, 0, 0,
                      terms, values)  # fmt: skip
            for half in range(n_here):
                for q in range(n_q):
                    a = out[2 * half, 0, 0, q]
                    b = out[2 * half + 1, 0, 0, q]
                    for k in range(n_stats):
                        obs = observed[k, q]
                        stat = a - b if (pairwise or k == 1) else a - fixed[q]
                        if np.isfinite(stat) and np.isfinite(obs):
                            defined[th, k, q] += 1
                            if abs(stat) >= abs(obs) - TOLERANCE * max(1.0, abs(obs)):
                                exceed[th, k, q] += 1


def permutation_test(
    space: PermutationSpace,
    n_first: int,
    observed: np.ndarray,
    *,
    pairwise: bool,
    fixed: np.ndarray | None,
    slots: np.ndarray,
    odds: float,
    n_permutations: int,
    key: tuple[int, int],
    n_threads: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """Permutation p-values of one test, for every metric at once.

    Parameters
    ----------
    space : PermutationSpace
        The rows permuted among (all rows for tests against overall and rest; the two slices' rows
        for pairwise tests).
    n_first : int
        Rows of the first side (the slice; slice ``a`` of a pair), 1..size-1.
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
    key : (int, int)
        Seed words of the test (:func:`seed_key`).
    n_threads : int
        numba threads (results do not depend on it).

    Returns
    -------
    p_values : ndarray of shape (n_stats, n_metrics)
        ``(1 + exceed) / (1 + defined)``; NaN where the observed statistic is undefined or no
        permutation is defined.
    n_defined : ndarray of shape (n_stats, n_metrics), int64
    """
    L = space.layout
    size = L.n
    m = min(n_first, size - n_first)
    n_stats, n_q = observed.shape
    n_threads = max(1, min(n_threads, (n_permutations + 1) // 2))
    exceed = np.zeros((n_threads, n_stats, n_q), dtype=np.int64)
    defined = np.zeros((n_threads, n_stats, n_q), dtype=np.int64)
    _permutation_kernel(
        L.order[0],
        L.y[0],
        L.term_values[0],
        L.term_slots,
        L.seg_starts,
        L.seg_tie,
        L.splits[0],
        L.dense_weights,
        m,
        n_first <= size - n_first,
        pairwise,
        np.zeros(n_q) if fixed is None else np.ascontiguousarray(fixed, dtype=np.float64),
        np.ascontiguousarray(observed, dtype=np.float64),
        np.ascontiguousarray(slots, dtype=np.int64),
        float(odds),
        int(n_permutations),
        _U64(key[0]),
        _U64(key[1]),
        n_threads,
        exceed,
        defined,
    )
    exceed = exceed.sum(axis=0)
    defined = defined.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (1.0 + exceed) / (1.0 + defined)
    p = np.where((defined > 0) & np.isfinite(observed), p, np.nan)
    return p, defined
