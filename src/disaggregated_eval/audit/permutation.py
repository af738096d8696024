"""Seeded permutation tests of slice differences, all metrics at once.

Two kinds of test (``docs/audit.md``):

- *slice vs overall* and *slice vs rest* for a slice ``s`` of ``n_s`` rows: under the null, slice
  membership is exchangeable among all ``N`` rows. A permutation draws ``n_s`` of the ``N`` rows
  uniformly without replacement as the permuted slice ``S*`` (the rest ``C*`` are the others) and
  computes ``T*_overall = M(S*) - M(all)`` and ``T*_rest = M(S*) - M(C*)``;
- *pairwise* for two slices ``a``, ``b`` of one attribute (or of one intersection family): the slice
  labels are permuted among the ``n_a + n_b`` rows of the two: ``n_a`` of them form ``a*``, the
  others ``b*``, and ``T* = M(a*) - M(b*)``.

The p-value of an observed difference ``T`` (a metric, a test) over ``P`` permutations is

    p = (1 + #{p : |T*_p| >= |T| - tol}) / (1 + P_defined),

the permutation p-value with the +1 correction (the observed labelling counts as one of the
permutations, so that p is never 0 and the test is valid; Phipson and Smyth, 2010, "Permutation
p-values should never be zero"). ``P_defined`` counts the permutations on which ``T*`` is defined
(not NaN
e.g. a permuted slice without positives has no sensitivity)
``tol = 1e-9 max(1, |T|)``
absorbs rounding, so that a permutation as extreme as the data up to floating point counts as such
(a conservative choice). Sample weights travel with their rows.

Speed. A permutation is a uniformly random subset ``D`` of the universe (all rows, or the rows of
``a`` and ``b``) of size ``m = min(n_first, M - n_first)``, the smaller of the two sides (the other
side is its complement, which has the same distribution). ``D`` is drawn by Floyd's algorithm into a
bitset and read back in increasing position, i.e. in increasing score order, so the subset's AUC
numerator is accumulated in one pass over ``D`` only. The other side's sums are the universe's
minus ``D``'s; its AUC numerator uses the cross terms of :mod:`._kernel` with respect to the universe
(precomputed per row, since the universe does not change between permutations). Each permutation
therefore costs ``O(m)`` for every metric at once, plus ``M / 64`` word reads of the bitset.

Random numbers: permutation ``p`` of a test uses xoshiro256** (Blackman and Vigna) seeded by
splitmix64 from two 64-bit words of the test's :class:`numpy.random.SeedSequence` (seed path
``("audit", "permutation", model, test)``) and ``p``: results do not depend on threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

from ..bootstrap import N_METRIC_SLOTS, metrics_from_sums
from ..metrics import pointwise_log_loss

__all__ = [
    "PermutationModel",
    "prepare_permutation_model",
    "Universe",
    "universe",
    "permutation_test",
    "permuted_subset",
    "seed_key",
    "TOLERANCE",
]

#: Relative tolerance of ``|T*| >= |T|`` (module docstring).
TOLERANCE = 1e-9

_U64 = np.uint64


# ----------------------------------------------------------------------------------------------
# Random numbers (numba): splitmix64 seeding, xoshiro256**, Lemire's bounded integers
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
def _floyd(state, universe_size, m, bits):
    """Set ``m`` distinct bits of ``bits`` among positions 0..universe_size-1 (Floyd's algorithm)."""
    for j in range(universe_size - m, universe_size):
        t = _below(state, j + 1)
        word = t >> 6
        bit = _U64(1) << _U64(t & 63)
        if bits[word] & bit:
            bits[j >> 6] |= _U64(1) << _U64(j & 63)
        else:
            bits[word] |= bit


@numba.njit(cache=True)
def _subset(key0, key1, p, universe_size, m, bits, state, out):
    """Positions (increasing) of permutation p's subset, into out[:m] (for tests and inspection)."""
    _seed_state(key0, key1, p, state)
    _floyd(state, universe_size, m, bits)
    k = 0
    for w in range(bits.shape[0]):
        x = bits[w]
        bits[w] = _U64(0)
        while x != _U64(0):
            out[k] = w * 64 + np.int64(trailing_zeros(x))
            x &= x - _U64(1)
            k += 1


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
    bits = np.zeros((universe_size + 63) // 64, dtype=np.uint64)
    out = np.empty(m, dtype=np.int64)
    _subset(_U64(key[0]), _U64(key[1]), p, universe_size, m, bits, np.zeros(4, dtype=np.uint64), out)
    return out


def seed_key(seed_sequence: np.random.SeedSequence) -> tuple[int, int]:
    """Two 64-bit words from a test's seed sequence."""
    state = seed_sequence.generate_state(2, dtype=np.uint64)
    return int(state[0]), int(state[1])


# ----------------------------------------------------------------------------------------------
# Data of one model and one universe
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PermutationModel:
    """One model's rows in its score order (see :class:`._kernel.ModelData`)."""

    order: np.ndarray  # (n,) int64
    y: np.ndarray
    log_loss: np.ndarray
    brier: np.ndarray
    weight: np.ndarray
    tie: np.ndarray  # (n,) int64: tie group id (equal scores share one), increasing
    k0: int  # first sorted position with score >= threshold


def prepare_permutation_model(
    y: np.ndarray, score: np.ndarray, weight: np.ndarray | None, threshold: float
) -> PermutationModel:
    order = np.argsort(score, kind="stable").astype(np.int64)
    r = score[order]
    tie = np.concatenate(([0], np.cumsum(np.diff(r) != 0.0))).astype(np.int64)
    w = np.ones(y.shape[0]) if weight is None else weight
    return PermutationModel(
        order=order,
        y=np.ascontiguousarray(y[order], dtype=np.float64),
        log_loss=np.ascontiguousarray(pointwise_log_loss(y, score)[order]),
        brier=np.ascontiguousarray(((score - y) ** 2)[order]),
        weight=np.ascontiguousarray(w[order], dtype=np.float64),
        tie=tie,
        k0=int(np.searchsorted(r, threshold, side="left")),
    )


@dataclass(frozen=True)
class Universe:
    """The rows a test permutes among, in score order, with their fixed cross terms.

    ``positions`` index the model's sorted arrays; ``hneg[k]`` is the universe's weighted negatives
    below row k plus half those tied with it, ``hpos[k]`` likewise for positives
    ``totals`` are the
    universe's (wp, wn, fn, tn, log-loss sum, Brier sum, AUC numerator).
    """

    positions: np.ndarray
    hneg: np.ndarray
    hpos: np.ndarray
    totals: np.ndarray
    y: np.ndarray  # the rows' data in universe order (contiguous: the kernel reads them in order)
    log_loss: np.ndarray
    brier: np.ndarray
    weight: np.ndarray
    tie: np.ndarray
    below: np.ndarray  # bool: score < threshold


def universe(model: PermutationModel, positions: np.ndarray) -> Universe:
    """The :class:`Universe` of the sorted positions ``positions`` (increasing) of ``model``."""
    u = np.ascontiguousarray(positions, dtype=np.int64)
    yu = model.y[u]
    wu = model.weight[u]
    wp = wu * yu
    wn = wu - wp
    tie = model.tie[u]
    new = np.concatenate(([True], tie[1:] != tie[:-1]))
    starts = np.flatnonzero(new)
    gid = np.cumsum(new) - 1
    gneg = np.add.reduceat(wn, starts)
    gpos = np.add.reduceat(wp, starts)
    neg_below = np.cumsum(gneg) - gneg
    pos_below = np.cumsum(gpos) - gpos
    hneg = (neg_below + 0.5 * gneg)[gid]
    hpos = (pos_below + 0.5 * gpos)[gid]
    below = u < model.k0
    totals = np.array(
        [
            wp.sum(),
            wn.sum(),
            wp[below].sum(),
            wn[below].sum(),
            (wu * model.log_loss[u]).sum(),
            (wu * model.brier[u]).sum(),
            float(np.sum(gpos * (neg_below + 0.5 * gneg))),
        ]
    )
    return Universe(
        u,
        np.ascontiguousarray(hneg),
        np.ascontiguousarray(hpos),
        totals,
        y=np.ascontiguousarray(yu),
        log_loss=np.ascontiguousarray(model.log_loss[u]),
        brier=np.ascontiguousarray(model.brier[u]),
        weight=np.ascontiguousarray(wu),
        tie=np.ascontiguousarray(tie),
        below=np.ascontiguousarray(below),
    )


# ----------------------------------------------------------------------------------------------
# The permutation kernel
# ----------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _run_permutations(
    t,
    n_threads,
    y,
    ll,
    br,
    sw,
    tie,
    below,
    hneg,
    hpos,
    totals,
    m,
    draw_is_first,
    pairwise,
    fixed,
    observed,
    slots,
    odds,
    n_perm,
    key0,
    key1,
    bits_buf,
    exceed,
    defined,
):
    """Count, per statistic and metric, permutations with |T*| >= |T| - tol and those with T* defined.

    ``observed[k, q]``: statistic k (population tests: 0 = vs overall, 1 = vs rest
    pairwise: 0) of
    metric q; ``fixed[q]``: the population's metric (population tests). This runs the permutations
    ``p = t, t + n_threads, ...`` of thread ``t``
    ``exceed``/``defined`` hold per-thread integer
    counts (summed by the caller).
    """
    size = y.shape[0]
    n_q = slots.shape[0]
    n_stats = observed.shape[0]
    bits = bits_buf[t]
    state = np.zeros(4, dtype=np.uint64)
    v_d = np.empty(N_METRIC_SLOTS)
    v_o = np.empty(N_METRIC_SLOTS)
    for p in range(t, n_perm, n_threads):
        _seed_state(key0, key1, p, state)
        _floyd(state, size, m, bits)
        wp = 0.0
        wn = 0.0
        fn = 0.0
        tn = 0.0
        lo = 0.0
        bs = 0.0
        auc = 0.0
        x1 = 0.0
        x2 = 0.0
        cn = 0.0  # D's negatives below the current tie group
        pg = 0.0  # D's pending tie group
        ng = 0.0
        group = -1
        for w in range(bits.shape[0]):
            x = bits[w]
            if x == _U64(0):
                continue
            bits[w] = _U64(0)
            while x != _U64(0):
                k = w * 64 + np.int64(trailing_zeros(x))
                x &= x - _U64(1)
                g = tie[k]
                if g != group:
                    auc += pg * (cn + 0.5 * ng)
                    cn += ng
                    pg = 0.0
                    ng = 0.0
                    group = g
                wt = sw[k]
                py = wt * y[k]
                qy = wt - py
                pg += py
                ng += qy
                wp += py
                wn += qy
                if below[k]:
                    fn += py
                    tn += qy
                lo += wt * ll[k]
                bs += wt * br[k]
                x1 += py * hneg[k]
                x2 += qy * hpos[k]
        auc += pg * (cn + 0.5 * ng)
        # the other side: universe minus D; N(O) = N(U) - X1(D) - Wp(U) Wn(D) + X2(D) + N(D)
        wpo = totals[0] - wp
        wno = totals[1] - wn
        fno = totals[2] - fn
        tno = totals[3] - tn
        auc_o = totals[6] - x1 - totals[0] * wn + x2 + auc
        metrics_from_sums(wp, wn, wp - fn, fn, tn, wn - tn, lo, bs, auc, odds, v_d)
        metrics_from_sums(wpo, wno, wpo - fno, fno, tno, wno - tno, totals[4] - lo, totals[5] - bs, auc_o, odds, v_o)
        for q in range(n_q):
            a = v_d[slots[q]] if draw_is_first else v_o[slots[q]]
            b = v_o[slots[q]] if draw_is_first else v_d[slots[q]]
            for k in range(n_stats):
                obs = observed[k, q]
                if pairwise or k == 1:
                    stat = a - b
                else:
                    stat = a - fixed[q]
                if np.isfinite(stat) and np.isfinite(obs):
                    defined[t, k, q] += 1
                    if abs(stat) >= abs(obs) - TOLERANCE * max(1.0, abs(obs)):
                        exceed[t, k, q] += 1


@numba.njit(parallel=True, cache=True)
def _parallel_kernel(
    y,
    ll,
    br,
    sw,
    tie,
    below,
    hneg,
    hpos,
    totals,
    m,
    draw_is_first,
    pairwise,
    fixed,
    observed,
    slots,
    odds,
    n_perm,
    key0,
    key1,
    n_threads,
    bits_buf,
    exceed,
    defined,
):
    for t in numba.prange(n_threads):
        _run_permutations(
            t,
            n_threads,
            y,
            ll,
            br,
            sw,
            tie,
            below,
            hneg,
            hpos,
            totals,
            m,
            draw_is_first,
            pairwise,
            fixed,
            observed,
            slots,
            odds,
            n_perm,
            key0,
            key1,
            bits_buf,
            exceed,
            defined,
        )


@numba.njit(cache=True)
def _serial_kernel(
    y,
    ll,
    br,
    sw,
    tie,
    below,
    hneg,
    hpos,
    totals,
    m,
    draw_is_first,
    pairwise,
    fixed,
    observed,
    slots,
    odds,
    n_perm,
    key0,
    key1,
    n_threads,
    bits_buf,
    exceed,
    defined,
):
    """One thread (no thread launch: small universes or ``n_threads == 1``)."""
    _run_permutations(
        0,
        1,
        y,
        ll,
        br,
        sw,
        tie,
        below,
        hneg,
        hpos,
        totals,
        m,
        draw_is_first,
        pairwise,
        fixed,
        observed,
        slots,
        odds,
        n_perm,
        key0,
        key1,
        bits_buf,
        exceed,
        defined,
    )


#: Below this many drawn rows times permutations, a test runs on one thread.
_PARALLEL_MIN_WORK = 2_000_000


def permutation_test(
    model: PermutationModel,
    space: Universe,
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
    model : PermutationModel
    space : Universe
        The rows permuted among (all rows for population tests; the two slices' rows for pairwise).
    n_first : int
        Rows of the first side (the slice
        slice ``a`` of a pair), 1..len(universe)-1.
    observed : ndarray of shape (n_stats, n_metrics)
        Observed statistics: population tests (slice - overall, slice - rest)
        pairwise (a - b,).
    pairwise : bool
    fixed : ndarray of shape (n_metrics,) or None
        The population's metrics (population tests).
    slots : ndarray of int64
        Metric slots (:func:`disaggregated_eval.bootstrap.metric_slots`).
    odds : float
    n_permutations : int (>= 1)
    key : (int, int)
        Seed words of the test (:func:`seed_key`).
    n_threads : int

    Returns
    -------
    p_values : ndarray of shape (n_stats, n_metrics)
        ``(1 + exceed) / (1 + defined)``
        NaN where the observed statistic is undefined or no
        permutation is defined.
    n_defined : ndarray of shape (n_stats, n_metrics), int64
    """
    size = space.positions.shape[0]
    m = min(n_first, size - n_first)
    n_stats, n_q = observed.shape
    if n_threads > 1 and m * n_permutations < _PARALLEL_MIN_WORK:
        n_threads = 1
    bits = np.zeros((n_threads, (size + 63) // 64), dtype=np.uint64)
    exceed = np.zeros((n_threads, n_stats, n_q), dtype=np.int64)
    defined = np.zeros((n_threads, n_stats, n_q), dtype=np.int64)
    kernel = _parallel_kernel if n_threads > 1 else _serial_kernel
    kernel(
        space.y,
        space.log_loss,
        space.brier,
        space.weight,
        space.tie,
        space.below,
        space.hneg,
        space.hpos,
        space.totals,
        m,
        n_first <= size - n_first,
        pairwise,
        np.zeros(n_q) if fixed is None else np.ascontiguousarray(fixed, dtype=np.float64),
        np.ascontiguousarray(observed, dtype=np.float64),
        slots,
        odds,
        n_permutations,
        _U64(key[0]),
        _U64(key[1]),
        n_threads,
        bits,
        exceed,
        defined,
    )
    exceed = exceed.sum(axis=0)
    defined = defined.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (1.0 + exceed) / (1.0 + defined)
    p = np.where((defined > 0) & np.isfinite(observed), p, np.nan)
    return p, defined
