"""Paired percentile bootstrap of many weighted evaluations at once (``docs/method.md``, "Bootstrap").

**What is resampled.** Resample ``i`` draws row indices of the evaluation set with replacement, and
*every* evaluation (all models, weightings and groups) is computed on that same resample, so
differences between evaluations (relative performance, the controlled difference ``T_a``) get
paired intervals. Weights are fixed per row and travel with the row (paper Supplementary A.3). Two
schemes (names in :data:`disaggregated_eval.vocabulary.RESAMPLING_SCHEMES`):

* ``population`` (``strata=None``, the default): ``n`` draws from all rows. A group evaluation is
  a 0/1 weighting, so the group size varies across resamples; this is how the paper resamples for
  ``M_a`` and ``T_a`` (Algorithms 1 and 2).
* ``within_group`` (``strata`` = integer codes): every stratum draws as many rows as it has, with
  replacement, from its own rows, so stratum sizes are fixed (a stratified bootstrap; the authors'
  per-group metrics resample within the group). All evaluations still share the resample.

**Seeding.** Resample ``i`` uses ``PCG64(SeedSequence(entropy=seed.entropy,
spawn_key=seed.spawn_key + (i,), pool_size=seed.pool_size))``, which is the ``i``-th child of
``seed.spawn`` (:func:`resample_seed`). Its draws depend only on ``(seed, i)`` (and the strata),
so results are bit-identical for any ``batch_size`` and ``n_threads``. Under ``within_group`` the
strata draw in increasing code order from that one generator; with a single stratum the draws
equal those of ``population``.

**The kernel.** A resample is represented by its count vector (how often each row was drawn). For
each model the engine walks the rows in that model's score order (a stable argsort computed once)
and accumulates, per evaluation and resample, the weighted sums that every metric of
:mod:`disaggregated_eval.metrics` is a function of: ``Wp``, ``Wn``, the false negatives and true
negatives (the sums at the threshold position of the walk), the weighted log loss, the weighted
Brier sum and the weighted AUC numerator (``num += pos_g (negatives below + neg_g / 2)`` per tie
group ``g`` of equal scores; precomputed tie groups). :func:`metrics_from_sums` turns the sums into
the metrics; it is the one home of these formulas and can be called from other numba kernels. The
walk is a numba kernel, parallel over blocks of ``LANES`` resamples of a batch. Models with few
evaluations use a walk per evaluation that keeps the ``LANES`` resamples' sums in registers; models
with many evaluations use a walk whose inner loop runs over the evaluations, in row chunks shared by
the block's resamples (so the weights are read from memory once per block). Per row and evaluation
the work is a handful of multiply-adds, branch-free in the label. Index drawing uses numpy, one
generator per resample (in threads when ``n_threads > 1``; numpy releases the GIL).

**Memory.** Resamples are processed in batches whose working set (drawn indices, ~32 MB by default,
never above ~256 MB, plus per-thread count arrays of ``64 n`` bytes) does not grow with
``n_resamples``; the ``replicates`` array (``8 n_resamples n_evaluations n_metrics`` bytes) does.
:func:`disaggregated_eval.memory.check_replicate_memory` bounds it before any work.

Speed (``benchmarks/bench_bootstrap.py``): on 20,000 rows with 5 evaluations of one model the
engine is a few hundred times faster per resample than calling scikit-learn per resample.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from ._validation import (
    check_group_codes,
    check_int,
    check_labels,
    check_length,
    check_open_unit,
    check_positive_int,
    check_scores,
    check_seed,
    check_weights,
)
from .metrics import METRICS, check_metric_names, pointwise_log_loss

__all__ = [
    "METRIC_SLOTS",
    "N_METRIC_SLOTS",
    "BootstrapResult",
    "Evaluation",
    "bootstrap_evaluations",
    "metric_slots",
    "metrics_from_sums",
    "percentile_interval",
    "resample_counts",
    "resample_indices",
    "resample_seed",
]

#: Hard upper bound (bytes) of the per-batch working set when ``batch_size`` is None.
BATCH_MEMORY_BYTES = 256 * 2**20
#: Preferred size (bytes) of the reused index buffer: small enough that it is not freshly
#: page-faulted for every call (first touch of a fresh 160 MB buffer costs more than the drawing).
BATCH_TARGET_BYTES = 32 * 2**20
#: Preferred minimum number of resamples per batch (load balance of the parallel kernel).
BATCH_MIN_RESAMPLES = 16


@dataclass(frozen=True)
class Evaluation:
    """One weighted evaluation of one model.

    Attributes
    ----------
    score : str
        Key into the ``scores`` mapping of :func:`bootstrap_evaluations` (a model name).
    weights : ndarray of shape (n_samples,)
        Fixed per-row weights, finite and >= 0. A weight of 0 excludes a row, so a group's
        unweighted metric is the 0/1 group mask; ``P(A = a | V)`` gives ``M_a`` (paper 4.2).
    """

    score: str
    weights: np.ndarray


@dataclass(frozen=True)
class BootstrapResult:
    """Point estimates and bootstrap replicates of a set of evaluations.

    Attributes
    ----------
    metrics : tuple of str
        Metric names, the last axis of ``point`` and ``replicates``.
    point : ndarray of shape (n_evaluations, n_metrics)
        Metrics on the full test set (every row counted once); equal to
        :func:`~disaggregated_eval.metrics.compute_metrics`.
    replicates : ndarray of shape (n_resamples, n_evaluations, n_metrics)
        float64 metrics on each resample; NaN where undefined on that resample.
    """

    metrics: tuple[str, ...]
    point: np.ndarray
    replicates: np.ndarray


# ----------------------------------------------------------------------------------------------
# From weighted sums to metrics (one home of the formulas of the kernels)
# ----------------------------------------------------------------------------------------------

# Output slots of metrics_from_sums, by name. They are deliberately written out, not derived from
# the order of vocabulary.METRICS: adding or reordering metric names must not move a slot.
_SLOT_LOG_LOSS = 0
_SLOT_AUC = 1
_SLOT_SENSITIVITY = 2
_SLOT_TRUE_NEGATIVE_RATE = 3
_SLOT_PRECISION = 4
_SLOT_NET_BENEFIT = 5
_SLOT_LABEL_RATE = 6
_SLOT_PREDICTED_POSITIVE_RATE = 7
_SLOT_ACCURACY = 8
_SLOT_FALSE_POSITIVE_RATE = 9
_SLOT_FALSE_NEGATIVE_RATE = 10
_SLOT_BRIER_SCORE = 11

#: Metric name -> slot of the ``out`` buffer written by :func:`metrics_from_sums`.
METRIC_SLOTS: dict[str, int] = {
    "log_loss": _SLOT_LOG_LOSS,
    "auc": _SLOT_AUC,
    "sensitivity": _SLOT_SENSITIVITY,
    "specificity": _SLOT_TRUE_NEGATIVE_RATE,
    "precision": _SLOT_PRECISION,
    "net_benefit": _SLOT_NET_BENEFIT,
    "label_rate": _SLOT_LABEL_RATE,
    "predicted_positive_rate": _SLOT_PREDICTED_POSITIVE_RATE,
    "accuracy": _SLOT_ACCURACY,
    "false_positive_rate": _SLOT_FALSE_POSITIVE_RATE,
    "false_negative_rate": _SLOT_FALSE_NEGATIVE_RATE,
    "brier_score": _SLOT_BRIER_SCORE,
}
#: Length of the ``out`` buffer of :func:`metrics_from_sums`.
N_METRIC_SLOTS: int = len(METRIC_SLOTS)


def metric_slots(metrics: Sequence[str]) -> np.ndarray:
    """Slots of ``metrics`` in the buffer of :func:`metrics_from_sums`.

    Parameters
    ----------
    metrics : sequence of str
        Metric names from :data:`~disaggregated_eval.metrics.METRICS`.

    Returns
    -------
    ndarray of shape (n_metrics,), int64
        ``out[slots[q]]`` is metric ``metrics[q]``.

    Raises
    ------
    TypeError, ValueError
        As :func:`disaggregated_eval.metrics.check_metric_names`.
    """
    names = check_metric_names(metrics)
    return np.asarray([METRIC_SLOTS[name] for name in names], dtype=np.int64)


@numba.njit(cache=True)
def metrics_from_sums(wp, wn, tp, fn, tn, fp, log_loss_sum, brier_sum, auc_numerator, odds, out):
    """Every metric from the weighted sums of one evaluation on one (re)sample.

    Parameters
    ----------
    wp, wn : float
        ``sum w y`` and ``sum w (1 - y)`` (``w`` = row weight times bootstrap count).
    tp, fn, tn, fp : float
        Weighted true positives, false negatives, true negatives and false positives at the
        threshold (``yhat = 1[r >= threshold]``); ``tp + fn == wp`` and ``tn + fp == wn`` up to
        rounding.
    log_loss_sum : float
        ``sum w * pointwise_log_loss(y, r)`` (:func:`disaggregated_eval.metrics.pointwise_log_loss`).
    brier_sum : float
        ``sum w (r - y)^2``.
    auc_numerator : float
        ``sum_g pos_g (neg_below_g + neg_g / 2)`` over the tie groups ``g`` of equal scores in
        increasing score order (``pos_g``, ``neg_g``: the group's weighted positives and negatives;
        ``neg_below_g``: the weighted negatives of lower scores).
    odds : float
        ``t / (1 - t)`` for the net benefit's preference threshold ``t``.
    out : ndarray of shape (>= N_METRIC_SLOTS,), float64
        Receives metric ``name`` at ``out[METRIC_SLOTS[name]]``; NaN where undefined.

    Notes
    -----
    The definitions (and the NaN rules) of :mod:`disaggregated_eval.metrics`, which match
    scikit-learn; written for numba (``numba.njit``), callable from Python too.
    """
    nan = np.nan
    total = wp + wn
    pp = tp + fp
    if total > 0.0:
        out[_SLOT_LOG_LOSS] = log_loss_sum / total
        out[_SLOT_PRECISION] = tp / pp if pp > 0.0 else 0.0
        out[_SLOT_NET_BENEFIT] = (tp - fp * odds) / total
        out[_SLOT_LABEL_RATE] = wp / total
        out[_SLOT_PREDICTED_POSITIVE_RATE] = pp / total
        out[_SLOT_ACCURACY] = (tp + tn) / total
        out[_SLOT_BRIER_SCORE] = brier_sum / total
    else:
        out[_SLOT_LOG_LOSS] = nan
        out[_SLOT_PRECISION] = nan
        out[_SLOT_NET_BENEFIT] = nan
        out[_SLOT_LABEL_RATE] = nan
        out[_SLOT_PREDICTED_POSITIVE_RATE] = nan
        out[_SLOT_ACCURACY] = nan
        out[_SLOT_BRIER_SCORE] = nan
    out[_SLOT_AUC] = auc_numerator / (wp * wn) if (wp > 0.0 and wn > 0.0) else nan
    out[_SLOT_SENSITIVITY] = tp / wp if wp > 0.0 else nan
    out[_SLOT_FALSE_NEGATIVE_RATE] = fn / wp if wp > 0.0 else nan
    out[_SLOT_TRUE_NEGATIVE_RATE] = tn / wn if wn > 0.0 else nan
    out[_SLOT_FALSE_POSITIVE_RATE] = fp / wn if wn > 0.0 else nan


# ----------------------------------------------------------------------------------------------
# Seeds and resamples
# ----------------------------------------------------------------------------------------------


def _as_seed_sequence(seed: Any) -> np.random.SeedSequence:
    if isinstance(seed, np.random.SeedSequence):
        return seed
    try:
        return np.random.SeedSequence(check_seed(seed, "seed"))
    except ValueError:
        raise ValueError(f"seed must be a non-negative integer or a numpy SeedSequence; got {seed!r}") from None


def resample_seed(seed: int | np.random.SeedSequence, i: int) -> np.random.SeedSequence:
    """Return the seed sequence of resample ``i``: child ``i`` of ``seed`` (as ``seed.spawn``).

    Parameters
    ----------
    seed : int or numpy.random.SeedSequence
        The bootstrap's seed (an int is ``SeedSequence(seed)``).
    i : int
        Resample index, >= 0.

    Returns
    -------
    numpy.random.SeedSequence
        ``SeedSequence(entropy=seed.entropy, spawn_key=seed.spawn_key + (i,), pool_size=seed.pool_size)``.
    """
    base = _as_seed_sequence(seed)
    return np.random.SeedSequence(
        entropy=base.entropy, spawn_key=tuple(base.spawn_key) + (int(i),), pool_size=base.pool_size
    )


@dataclass(frozen=True)
class _Strata:
    """Rows of each stratum (increasing code order) for the ``within_group`` scheme."""

    rows: np.ndarray  # (n,) int32: row indices grouped by stratum
    bounds: np.ndarray  # (n_strata + 1,) int64: stratum k's rows are rows[bounds[k]:bounds[k+1]]


def _make_strata(strata: Any, n: int) -> _Strata | None:
    if strata is None:
        return None
    codes = check_group_codes(strata, "strata", max_code=np.iinfo(np.int32).max)
    check_length(codes, n, "strata")
    rows = np.argsort(codes, kind="stable").astype(np.int32)
    sizes = np.unique(codes, return_counts=True)[1]
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return _Strata(rows=rows, bounds=bounds)


def _draw_into(
    base: np.random.SeedSequence, n: int, start: int, stop: int, out: np.ndarray, strata: _Strata | None
) -> None:
    """Write the row indices of resamples ``start..stop-1`` into ``out[0..stop-start-1]``."""
    for row, i in enumerate(range(start, stop)):
        generator = np.random.Generator(np.random.PCG64(resample_seed(base, i)))
        if strata is None:
            out[row] = generator.integers(0, n, size=n, dtype=np.int32)
            continue
        for lo, hi in itertools.pairwise(strata.bounds):
            size = int(hi - lo)
            out[row, lo:hi] = strata.rows[lo:hi][generator.integers(0, size, size=size, dtype=np.int32)]


def _draw_indices(
    base: np.random.SeedSequence,
    n: int,
    start: int,
    stop: int,
    out: np.ndarray,
    executor: ThreadPoolExecutor | None,
    strata: _Strata | None,
) -> None:
    """Draw resamples ``start..stop-1``, split over the executor's threads (numpy releases the GIL)."""
    count = stop - start
    if executor is None or count < 2:
        _draw_into(base, n, start, stop, out, strata)
        return
    workers = executor._max_workers
    bounds = np.linspace(0, count, min(workers, count) + 1).astype(int)
    futures = [
        executor.submit(_draw_into, base, n, start + lo, start + hi, out[lo:hi], strata)
        for lo, hi in itertools.pairwise(bounds)
        if hi > lo
    ]
    for future in futures:
        future.result()


def resample_indices(
    n: int,
    *,
    seed: int | np.random.SeedSequence,
    start: int,
    stop: int,
    strata: Any = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Row indices drawn by resamples ``start..stop-1`` (the draws of :func:`bootstrap_evaluations`).

    Parameters
    ----------
    n : int
        Number of rows of the evaluation set (>= 1).
    seed : int or numpy.random.SeedSequence
        The bootstrap's seed; resample ``i`` depends only on ``(seed, i)`` (and ``strata``).
    start, stop : int
        Half-open range of resample indices, ``0 <= start <= stop``.
    strata : array-like of shape (n,), optional
        Non-negative integer stratum codes for the ``within_group`` scheme; ``None`` (default) is
        the ``population`` scheme.
    out : ndarray of shape (stop - start, n), int32, optional
        C-contiguous buffer to write the draws into (and return), e.g. reused across batches to
        avoid first-touch page faults of a fresh array; the draws are the same.

    Returns
    -------
    ndarray of shape (stop - start, n), int32
        ``out`` if given. Row ``k`` lists the rows drawn by resample ``start + k``. ``population``: ``n`` uniform
        draws from ``0..n-1``. ``within_group``: for each stratum in increasing code order, as many
        draws as it has rows, uniform over its rows (positions ``bounds[k]:bounds[k+1]`` of the row
        hold stratum ``k``'s draws).

    Raises
    ------
    ValueError
        If ``n < 1``, the range is invalid, the seed is not a non-negative integer or SeedSequence,
        or ``strata`` are not non-negative integer codes of length ``n``, or ``out`` has the wrong
        shape, dtype or layout.
    """
    n = check_positive_int(n, "n")
    start = check_int(start, "start", minimum=0)
    stop = check_int(stop, "stop", minimum=0)
    if start > stop:
        raise ValueError(f"need 0 <= start <= stop; got start={start}, stop={stop}")
    base = _as_seed_sequence(seed)
    prepared = _make_strata(strata, n)
    if out is None:
        indices = np.empty((stop - start, n), dtype=np.int32)
    else:
        if not (
            isinstance(out, np.ndarray)
            and out.dtype == np.int32
            and out.shape == (stop - start, n)
            and out.flags.c_contiguous
            and out.flags.writeable
        ):
            got = f"{type(out).__name__} {getattr(out, 'dtype', '')} {getattr(out, 'shape', '')}".strip()
            raise ValueError(
                f"out must be a writeable C-contiguous int32 array of shape {(stop - start, n)}; got {got}"
            )
        indices = out
    _draw_into(base, n, start, stop, indices, prepared)
    return indices


def resample_counts(
    n: int, *, seed: int | np.random.SeedSequence, start: int, stop: int, strata: Any = None
) -> np.ndarray:
    """Return how often each row is drawn in resamples ``start..stop-1``.

    Parameters
    ----------
    n, seed, start, stop, strata
        As :func:`resample_indices`.

    Returns
    -------
    ndarray of shape (stop - start, n), int32
        Row ``k`` holds the counts of resample ``start + k``; each row sums to ``n`` (and, under
        ``within_group``, the counts of each stratum sum to its size). These are the resamples that
        :func:`bootstrap_evaluations` uses with the same seed and strata.

    Raises
    ------
    ValueError
        As :func:`resample_indices`.
    """
    indices = resample_indices(n, seed=seed, start=start, stop=stop, strata=strata)
    counts = np.empty(indices.shape, dtype=np.int32)
    for row in range(indices.shape[0]):
        counts[row] = np.bincount(indices[row], minlength=indices.shape[1])
    return counts


# ----------------------------------------------------------------------------------------------
# The kernel
# ----------------------------------------------------------------------------------------------


#: Resamples processed together by one kernel iteration (their accumulators live in registers).
LANES = 4
#: Models with at most this many evaluations use the lane walk (one pass per evaluation, four
#: resamples at once); models with more use the wide walk (one pass per resample, all evaluations
#: at once), whose vectorised inner loop over evaluations is faster when there are many.
LANE_WALK_MAX_EVALUATIONS = 8
#: Rows per chunk of the wide walk (a chunk's weights stay in cache while all lanes walk it).
WIDE_CHUNK = 256

# Accumulator slots of acc[s, slot, lane]: Wp, Wn, AUC numerator, log-loss sum, the Wp and Wn sums
# below the threshold (false negatives, true negatives), Brier sum.
_CP, _CN, _AUC, _LOSS, _FN, _TN, _BRIER = 0, 1, 2, 3, 4, 5, 6
_N_ACCUMULATORS = 7


@numba.njit(cache=True)
def _walk_lanes(cs, y_m, ll_m, br_m, with_brier, weights, w0, n_s, seg_starts, seg_tie, seg_lo, seg_hi, seg_split, acc):
    """Walk model m's rows in score order once per evaluation, for LANES resamples at once.

    ``cs`` (n, LANES) holds the resamples' counts in score order. Per row of a run of distinct
    scores: ``auc += w y * (negatives so far)``, ``Wp += w y``, ``Wn += w (1 - y)``,
    ``loss += w * ll``, ``brier += w * (r - y)^2``, branch-free (y is 0.0 or 1.0, so ``w * y`` and
    ``w - w * y`` are exact). A tie group adds ``pos_g * (negatives below + neg_g / 2)``. The sums
    at the threshold split are the false negatives and true negatives.
    """
    for s in range(n_s):
        CP0 = 0.0
        CP1 = 0.0
        CP2 = 0.0
        CP3 = 0.0
        CN0 = 0.0
        CN1 = 0.0
        CN2 = 0.0
        CN3 = 0.0
        AU0 = 0.0
        AU1 = 0.0
        AU2 = 0.0
        AU3 = 0.0
        LO0 = 0.0
        LO1 = 0.0
        LO2 = 0.0
        LO3 = 0.0
        BR0 = 0.0
        BR1 = 0.0
        BR2 = 0.0
        BR3 = 0.0
        for seg in range(seg_lo, seg_hi + 1):
            if seg == seg_split:
                acc[s, _FN, 0] = CP0
                acc[s, _FN, 1] = CP1
                acc[s, _FN, 2] = CP2
                acc[s, _FN, 3] = CP3
                acc[s, _TN, 0] = CN0
                acc[s, _TN, 1] = CN1
                acc[s, _TN, 2] = CN2
                acc[s, _TN, 3] = CN3
            if seg == seg_hi:
                break
            start = seg_starts[seg]
            stop = seg_starts[seg + 1]
            if not seg_tie[seg]:
                for j in range(start, stop):
                    wv = weights[w0 + j * n_s + s]
                    yj = y_m[j]
                    lj = ll_m[j]
                    bj = br_m[j]
                    W0 = cs[j, 0] * wv
                    W1 = cs[j, 1] * wv
                    W2 = cs[j, 2] * wv
                    W3 = cs[j, 3] * wv
                    Y0 = W0 * yj
                    Y1 = W1 * yj
                    Y2 = W2 * yj
                    Y3 = W3 * yj
                    AU0 += Y0 * CN0
                    AU1 += Y1 * CN1
                    AU2 += Y2 * CN2
                    AU3 += Y3 * CN3
                    CP0 += Y0
                    CP1 += Y1
                    CP2 += Y2
                    CP3 += Y3
                    CN0 += W0 - Y0
                    CN1 += W1 - Y1
                    CN2 += W2 - Y2
                    CN3 += W3 - Y3
                    LO0 += W0 * lj
                    LO1 += W1 * lj
                    LO2 += W2 * lj
                    LO3 += W3 * lj
                    if with_brier:
                        BR0 += W0 * bj
                        BR1 += W1 * bj
                        BR2 += W2 * bj
                        BR3 += W3 * bj
            else:
                PG0 = 0.0
                PG1 = 0.0
                PG2 = 0.0
                PG3 = 0.0
                NG0 = 0.0
                NG1 = 0.0
                NG2 = 0.0
                NG3 = 0.0
                for j in range(start, stop):
                    wv = weights[w0 + j * n_s + s]
                    yj = y_m[j]
                    lj = ll_m[j]
                    bj = br_m[j]
                    W0 = cs[j, 0] * wv
                    W1 = cs[j, 1] * wv
                    W2 = cs[j, 2] * wv
                    W3 = cs[j, 3] * wv
                    Y0 = W0 * yj
                    Y1 = W1 * yj
                    Y2 = W2 * yj
                    Y3 = W3 * yj
                    PG0 += Y0
                    PG1 += Y1
                    PG2 += Y2
                    PG3 += Y3
                    NG0 += W0 - Y0
                    NG1 += W1 - Y1
                    NG2 += W2 - Y2
                    NG3 += W3 - Y3
                    LO0 += W0 * lj
                    LO1 += W1 * lj
                    LO2 += W2 * lj
                    LO3 += W3 * lj
                    if with_brier:
                        BR0 += W0 * bj
                        BR1 += W1 * bj
                        BR2 += W2 * bj
                        BR3 += W3 * bj
                AU0 += PG0 * (CN0 + 0.5 * NG0)
                AU1 += PG1 * (CN1 + 0.5 * NG1)
                AU2 += PG2 * (CN2 + 0.5 * NG2)
                AU3 += PG3 * (CN3 + 0.5 * NG3)
                CP0 += PG0
                CP1 += PG1
                CP2 += PG2
                CP3 += PG3
                CN0 += NG0
                CN1 += NG1
                CN2 += NG2
                CN3 += NG3
        acc[s, _CP, 0] = CP0
        acc[s, _CP, 1] = CP1
        acc[s, _CP, 2] = CP2
        acc[s, _CP, 3] = CP3
        acc[s, _CN, 0] = CN0
        acc[s, _CN, 1] = CN1
        acc[s, _CN, 2] = CN2
        acc[s, _CN, 3] = CN3
        acc[s, _AUC, 0] = AU0
        acc[s, _AUC, 1] = AU1
        acc[s, _AUC, 2] = AU2
        acc[s, _AUC, 3] = AU3
        acc[s, _LOSS, 0] = LO0
        acc[s, _LOSS, 1] = LO1
        acc[s, _LOSS, 2] = LO2
        acc[s, _LOSS, 3] = LO3
        acc[s, _BRIER, 0] = BR0
        acc[s, _BRIER, 1] = BR1
        acc[s, _BRIER, 2] = BR2
        acc[s, _BRIER, 3] = BR3


@numba.njit(cache=True)
def _walk_wide(
    counts,
    n_lanes,
    order_m,
    y_m,
    ll_m,
    br_m,
    with_brier,
    weights,
    w0,
    n_s,
    seg_starts,
    seg_tie,
    seg_lo,
    seg_hi,
    seg_split,
    acc,
):
    """Walk model m's rows in score order once, all evaluations at once, for each resample.

    Same sums as :func:`_walk_lanes`; ``counts`` (n, LANES) is in the original row order. The
    inner loop runs over the evaluations (vectorised). Rows are taken in chunks of
    ``WIDE_CHUNK`` (or one tie group) and each chunk is walked for every lane in turn, so its
    weights are read from memory once per block of resamples, not once per resample.
    """
    cum_pos = np.zeros((LANES, n_s))
    cum_neg = np.zeros((LANES, n_s))
    auc_num = np.zeros((LANES, n_s))
    loss = np.zeros((LANES, n_s))
    brier = np.zeros((LANES, n_s))
    pos_group = np.zeros(n_s)
    neg_group = np.zeros(n_s)
    for seg in range(seg_lo, seg_hi + 1):
        if seg == seg_split:
            for lane in range(n_lanes):
                for s in range(n_s):
                    acc[s, _FN, lane] = cum_pos[lane, s]
                    acc[s, _TN, lane] = cum_neg[lane, s]
        if seg == seg_hi:
            break
        start = seg_starts[seg]
        stop = seg_starts[seg + 1]
        if not seg_tie[seg]:
            for chunk in range(start, stop, WIDE_CHUNK):
                chunk_stop = min(chunk + WIDE_CHUNK, stop)
                for lane in range(n_lanes):
                    cp = cum_pos[lane]
                    cn = cum_neg[lane]
                    au = auc_num[lane]
                    lo = loss[lane]
                    br = brier[lane]
                    for j in range(chunk, chunk_stop):
                        cf = counts[order_m[j], lane]
                        yj = y_m[j]
                        lj = ll_m[j]
                        bj = br_m[j]
                        row = w0 + j * n_s
                        for s in range(n_s):
                            w = cf * weights[row + s]
                            wy = w * yj
                            au[s] += wy * cn[s]
                            cp[s] += wy
                            cn[s] += w - wy
                            lo[s] += w * lj
                        if with_brier:
                            for s in range(n_s):
                                br[s] += cf * weights[row + s] * bj
        else:
            for lane in range(n_lanes):
                cp = cum_pos[lane]
                cn = cum_neg[lane]
                au = auc_num[lane]
                lo = loss[lane]
                br = brier[lane]
                for s in range(n_s):
                    pos_group[s] = 0.0
                    neg_group[s] = 0.0
                for j in range(start, stop):
                    cf = counts[order_m[j], lane]
                    yj = y_m[j]
                    lj = ll_m[j]
                    bj = br_m[j]
                    row = w0 + j * n_s
                    for s in range(n_s):
                        w = cf * weights[row + s]
                        wy = w * yj
                        pos_group[s] += wy
                        neg_group[s] += w - wy
                        lo[s] += w * lj
                    if with_brier:
                        for s in range(n_s):
                            br[s] += cf * weights[row + s] * bj
                for s in range(n_s):
                    au[s] += pos_group[s] * (cn[s] + 0.5 * neg_group[s])
                    cp[s] += pos_group[s]
                    cn[s] += neg_group[s]
    for lane in range(n_lanes):
        for s in range(n_s):
            acc[s, _CP, lane] = cum_pos[lane, s]
            acc[s, _CN, lane] = cum_neg[lane, s]
            acc[s, _AUC, lane] = auc_num[lane, s]
            acc[s, _LOSS, lane] = loss[lane, s]
            acc[s, _BRIER, lane] = brier[lane, s]


@numba.njit(cache=True)
def _finalize(acc, s, lane, odds, values):
    """All metrics of evaluation s, resample ``lane``, from its accumulated sums (NaN where undefined)."""
    wp = acc[s, _CP, lane]
    wn = acc[s, _CN, lane]
    fn = acc[s, _FN, lane]
    tn = acc[s, _TN, lane]
    tp = wp - fn  # exactly 0.0 when nothing reaches the threshold
    fp = wn - tn
    metrics_from_sums(
        wp, wn, tp, fn, tn, fp, acc[s, _LOSS, lane], acc[s, _BRIER, lane], acc[s, _AUC, lane], odds, values
    )


@numba.njit(parallel=True, cache=True)
def _bootstrap_kernel(
    indices,  # (B, n) int32: drawn row indices of each resample of the batch
    order,  # (n_models, n) int64: stable argsort of each model's scores
    y_sorted,  # (n_models, n) float64: labels in each model's score order
    ll_sorted,  # (n_models, n) float64: per-row log loss in each model's score order
    br_sorted,  # (n_models, n) float64: per-row (r - y)^2 in each model's score order
    segment_starts,  # flat int64: segment starts of every model (each model's list ends with n)
    segment_is_tie,  # flat bool, aligned with segment_starts: the segment is one tie group
    segment_offsets,  # (n_models + 1,) int64: model m's starts are segment_starts[off[m]:off[m+1]]
    first_positive_segment,  # (n_models,) int64: first segment (within the model) with score >= threshold
    weights,  # flat float64: model m's (n, S_m) weight block in score order, row-major
    weight_offsets,  # (n_models + 1,) int64
    n_evals,  # (n_models,) int64: S_m
    eval_ids,  # flat int64: output evaluation index of each of model m's evaluations
    eval_offsets,  # (n_models + 1,) int64
    slots,  # (n_metrics,) int64: METRIC_SLOTS of the requested metrics
    with_brier,  # bool: accumulate the Brier sum (only when brier_score is requested)
    odds,  # float: t / (1 - t) of the net benefit
    out,  # (B, n_evaluations, n_metrics) float64
):
    n_batch, n = indices.shape
    n_models = order.shape[0]
    n_metrics = slots.shape[0]
    n_blocks = (n_batch + LANES - 1) // LANES
    for block in numba.prange(n_blocks):
        b0 = block * LANES
        n_lanes = min(LANES, n_batch - b0)
        # Counts of each row in the block's resamples (unused lanes stay 0 and are not written).
        counts = np.zeros((n, LANES))
        for lane in range(n_lanes):
            for k in range(n):
                counts[indices[b0 + lane, k], lane] += 1.0
        sorted_counts = np.empty((n, LANES))
        values = np.empty(N_METRIC_SLOTS)
        for m in range(n_models):
            n_s = n_evals[m]
            w0 = weight_offsets[m]
            seg_lo = segment_offsets[m]
            seg_hi = segment_offsets[m + 1] - 1  # the last entry of a model is n, not a segment
            seg_split = seg_lo + first_positive_segment[m]
            order_m = order[m]
            acc = np.zeros((n_s, _N_ACCUMULATORS, LANES))
            if n_s <= LANE_WALK_MAX_EVALUATIONS:
                for j in range(n):
                    i = order_m[j]
                    for lane in range(LANES):
                        sorted_counts[j, lane] = counts[i, lane]
                _walk_lanes(
                    sorted_counts,
                    y_sorted[m],
                    ll_sorted[m],
                    br_sorted[m],
                    with_brier,
                    weights,
                    w0,
                    n_s,
                    segment_starts,
                    segment_is_tie,
                    seg_lo,
                    seg_hi,
                    seg_split,
                    acc,
                )
            else:
                _walk_wide(
                    counts,
                    n_lanes,
                    order_m,
                    y_sorted[m],
                    ll_sorted[m],
                    br_sorted[m],
                    with_brier,
                    weights,
                    w0,
                    n_s,
                    segment_starts,
                    segment_is_tie,
                    seg_lo,
                    seg_hi,
                    seg_split,
                    acc,
                )
            for s in range(n_s):
                e = eval_ids[eval_offsets[m] + s]
                for lane in range(n_lanes):
                    _finalize(acc, s, lane, odds, values)
                    for q in range(n_metrics):
                        out[b0 + lane, e, q] = values[slots[q]]


# ----------------------------------------------------------------------------------------------
# Public entry point
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Prepared:
    order: np.ndarray
    y_sorted: np.ndarray
    ll_sorted: np.ndarray
    br_sorted: np.ndarray
    segment_starts: np.ndarray
    segment_is_tie: np.ndarray
    segment_offsets: np.ndarray
    first_positive_segment: np.ndarray
    weights: np.ndarray
    weight_offsets: np.ndarray
    n_evals: np.ndarray
    eval_ids: np.ndarray
    eval_offsets: np.ndarray


def _prepare(
    y: np.ndarray, scores: dict[str, np.ndarray], weights: list[np.ndarray], keys: list[str], threshold: float
) -> _Prepared:
    """Sort each model's rows by score once and lay out its evaluations' weights in that order."""
    models = list(dict.fromkeys(keys))  # first-appearance order
    n = y.shape[0]
    orders, ys, lls, brs, starts, ties, firsts, blocks, n_evals, ids = [], [], [], [], [], [], [], [], [], []
    segment_offsets, weight_offsets, eval_offsets = [0], [0], [0]
    for model in models:
        r = scores[model]
        order = np.argsort(r, kind="stable")
        r_sorted = r[order]
        # Tie groups (runs of equal scores) and the threshold split the sorted rows into segments:
        # each segment is either one tie group of >= 2 rows or a run of rows with distinct scores.
        group_start = np.concatenate(([0], np.flatnonzero(np.diff(r_sorted) != 0.0) + 1, [n]))
        tie = np.diff(group_start) > 1
        k0 = int(np.searchsorted(r_sorted, threshold, side="left"))  # rows predicted negative
        tie_start = group_start[:-1][tie]
        bounds = np.unique(np.concatenate(([0, n, k0], tie_start, group_start[1:][tie])))
        segment_start = bounds.astype(np.int64)  # k0 is always a group start (or n)
        is_tie = np.isin(segment_start, tie_start)
        is_tie[-1] = False
        first = int(np.searchsorted(segment_start, k0, side="left"))
        members = [e for e, key in enumerate(keys) if key == model]
        block = np.stack([weights[e] for e in members], axis=1)[order]
        orders.append(order.astype(np.int64))
        ys.append(y[order])
        lls.append(pointwise_log_loss(y, r)[order])
        brs.append(((r - y) ** 2)[order])
        starts.append(segment_start)
        ties.append(is_tie)
        firsts.append(first)
        blocks.append(np.ascontiguousarray(block).ravel())
        n_evals.append(len(members))
        ids.extend(members)
        segment_offsets.append(segment_offsets[-1] + segment_start.shape[0])
        weight_offsets.append(weight_offsets[-1] + block.size)
        eval_offsets.append(eval_offsets[-1] + len(members))
    return _Prepared(
        order=np.ascontiguousarray(np.stack(orders)),
        y_sorted=np.ascontiguousarray(np.stack(ys), dtype=np.float64),
        ll_sorted=np.ascontiguousarray(np.stack(lls), dtype=np.float64),
        br_sorted=np.ascontiguousarray(np.stack(brs), dtype=np.float64),
        segment_starts=np.ascontiguousarray(np.concatenate(starts), dtype=np.int64),
        segment_is_tie=np.ascontiguousarray(np.concatenate(ties), dtype=np.bool_),
        segment_offsets=np.asarray(segment_offsets, dtype=np.int64),
        first_positive_segment=np.asarray(firsts, dtype=np.int64),
        weights=np.ascontiguousarray(np.concatenate(blocks), dtype=np.float64),
        weight_offsets=np.asarray(weight_offsets, dtype=np.int64),
        n_evals=np.asarray(n_evals, dtype=np.int64),
        eval_ids=np.asarray(ids, dtype=np.int64),
        eval_offsets=np.asarray(eval_offsets, dtype=np.int64),
    )


def _run_kernel(prepared: _Prepared, indices: np.ndarray, slots: np.ndarray, odds: float, out: np.ndarray) -> None:
    _bootstrap_kernel(
        indices,
        prepared.order,
        prepared.y_sorted,
        prepared.ll_sorted,
        prepared.br_sorted,
        prepared.segment_starts,
        prepared.segment_is_tie,
        prepared.segment_offsets,
        prepared.first_positive_segment,
        prepared.weights,
        prepared.weight_offsets,
        prepared.n_evals,
        prepared.eval_ids,
        prepared.eval_offsets,
        slots,
        bool(np.any(slots == _SLOT_BRIER_SCORE)),
        odds,
        out,
    )


def default_batch_size(n: int, n_evaluations: int, n_metrics: int) -> int:
    """Resamples per batch: indices of ~32 MB (at least 16 resamples), never above ~256 MB.

    The per-batch working set is the drawn indices (4 bytes per row and resample) plus, per
    thread, one count vector (4 bytes per row) and per-evaluation accumulators.
    """
    per_resample = 4 * n + 8 * n_evaluations * n_metrics
    preferred = max(BATCH_MIN_RESAMPLES, BATCH_TARGET_BYTES // per_resample)
    return max(1, min(preferred, BATCH_MEMORY_BYTES // per_resample))


def _checked_weights(weights: Any, n: int, name: str) -> np.ndarray:
    """Checked float64 weights; an array that is already float64 and 1-d is used without a copy."""
    checked = check_weights(weights, n, name)
    if isinstance(weights, np.ndarray) and weights.dtype == np.float64 and weights.ndim == 1:
        return weights
    return checked


def bootstrap_evaluations(
    y: Any,
    scores: Mapping[str, Any],
    evaluations: Sequence[Evaluation],
    *,
    n_resamples: int = 10_000,
    seed: int | np.random.SeedSequence,
    metrics: Sequence[str] = METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    strata: Any = None,
    batch_size: int | None = None,
    n_threads: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> BootstrapResult:
    """Paired percentile-bootstrap replicates of weighted evaluations.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels of the test set, 0 or 1.
    scores : mapping of str to array-like of shape (n_samples,)
        Each model's scores, finite and in [0, 1].
    evaluations : sequence of Evaluation
        What to evaluate: a model (key into ``scores``) and fixed per-row weights of shape
        (n_samples,), finite and >= 0. All evaluations share the same resamples.
    n_resamples : int, default=10_000
        Number of bootstrap resamples (>= 1).
    seed : int or numpy.random.SeedSequence
        Root of the resamples' seeds; resample ``i`` uses child ``i`` (see :func:`resample_seed`).
    metrics : sequence of str, default=METRICS
        Metric names from :data:`~disaggregated_eval.metrics.METRICS`.
    threshold : float, default=0.5
        Classification threshold in (0, 1), ``yhat = 1[score >= threshold]``.
    preference_threshold : float, default=0.5
        Preference threshold of the net benefit, in (0, 1).
    strata : array-like of shape (n_samples,), optional
        ``None`` (default): the ``population`` scheme, every resample draws ``n`` rows from all
        rows. Non-negative integer codes: the ``within_group`` scheme, every stratum draws as many
        rows as it has from its own rows (see :func:`resample_indices`).
    batch_size : int, optional
        Resamples per batch; by default chosen so that a batch's working set stays below ~256 MB.
        Results do not depend on it.
    n_threads : int, default=1
        Threads for index drawing and for the numba kernel. Results do not depend on it.
    progress : callable, optional
        ``progress(done, total)`` is called after each batch with the number of finished resamples.

    Returns
    -------
    BootstrapResult
        ``point`` of shape (n_evaluations, n_metrics): metrics on the full test set (equal to
        :func:`~disaggregated_eval.metrics.compute_metrics` with ``sample_weight=weights``);
        ``replicates`` of shape (n_resamples, n_evaluations, n_metrics): the same on each resample,
        NaN where undefined (e.g. a resample without positives for sensitivity or AUC).

    Raises
    ------
    ValueError
        On labels not 0/1, scores outside [0, 1] or non-finite, negative or non-finite weights,
        length mismatches, an evaluation whose ``score`` is not a key of ``scores``, unknown
        metrics, thresholds outside (0, 1), ``n_resamples``/``batch_size``/``n_threads`` not
        positive integers or ``n_threads`` above numba's maximum, bad ``strata``, or an empty test
        set or evaluation list.
    TypeError
        If ``scores`` is not a mapping, an evaluation is not an :class:`Evaluation`, or
        ``progress`` is not callable.

    Notes
    -----
    Percentile bootstrap (paper Supplementary A.3, Algorithms 1-2; ``docs/method.md``,
    "Bootstrap"); weights travel with their rows. The first call in a fresh environment compiles
    the numba kernel (a few seconds; cached on disk afterwards).
    """
    # ---- validation, before any work ----
    names = check_metric_names(metrics)
    slots = metric_slots(names)
    threshold = check_open_unit(threshold, "threshold")
    preference_threshold = check_open_unit(preference_threshold, "preference_threshold")
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    n_threads = check_positive_int(n_threads, "n_threads")
    if n_threads > numba.config.NUMBA_NUM_THREADS:
        raise ValueError(
            f"n_threads must be <= {numba.config.NUMBA_NUM_THREADS} (numba's NUMBA_NUM_THREADS); got {n_threads}"
        )
    if batch_size is not None:
        batch_size = check_positive_int(batch_size, "batch_size")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable(done, total) or None; got {progress!r}")
    base = _as_seed_sequence(seed)
    y = check_labels(y, "y")
    n = y.shape[0]
    if n == 0:
        raise ValueError("y is empty; the bootstrap needs at least one test row")
    prepared_strata = _make_strata(strata, n)
    if not isinstance(scores, Mapping):
        raise TypeError(f"scores must be a mapping of model name to scores; got {type(scores).__name__}")
    if isinstance(evaluations, Evaluation):
        raise TypeError("evaluations must be a sequence of Evaluation, not a single Evaluation")
    evaluations = list(evaluations)
    if not evaluations:
        raise ValueError("evaluations is empty; give at least one Evaluation")
    keys: list[str] = []
    weights: list[np.ndarray] = []
    for e, evaluation in enumerate(evaluations):
        if not isinstance(evaluation, Evaluation):
            raise TypeError(f"evaluations[{e}] must be an Evaluation; got {type(evaluation).__name__}")
        if evaluation.score not in scores:
            raise ValueError(
                f"evaluations[{e}].score {evaluation.score!r} is not a key of scores; expected one of {sorted(scores)}"
            )
        keys.append(evaluation.score)
        weights.append(_checked_weights(evaluation.weights, n, f"evaluations[{e}].weights"))
    checked = {key: check_scores(scores[key], n, f"scores[{key!r}]") for key in dict.fromkeys(keys)}

    # ---- preparation ----
    prepared = _prepare(y, checked, weights, keys, threshold)
    del weights, checked  # the prepared copies (in score order) are all the kernel needs
    odds = preference_threshold / (1.0 - preference_threshold)
    n_evaluations, n_metrics = len(evaluations), len(names)
    if batch_size is None:
        batch_size = default_batch_size(n, n_evaluations, n_metrics)
    batch_size = min(batch_size, n_resamples)

    previous_threads = numba.get_num_threads()
    numba.set_num_threads(n_threads)
    executor = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else None
    try:
        # Point estimates: the same kernel with every row drawn exactly once.
        point = np.empty((1, n_evaluations, n_metrics))
        _run_kernel(prepared, np.arange(n, dtype=np.int32)[None, :], slots, odds, point)
        replicates = np.empty((n_resamples, n_evaluations, n_metrics))
        indices = np.empty((batch_size, n), dtype=np.int32)
        for start in range(0, n_resamples, batch_size):
            stop = min(start + batch_size, n_resamples)
            batch = indices[: stop - start]
            _draw_indices(base, n, start, stop, batch, executor, prepared_strata)
            _run_kernel(prepared, batch, slots, odds, replicates[start:stop])
            if progress is not None:
                progress(stop, n_resamples)
    finally:
        numba.set_num_threads(previous_threads)
        if executor is not None:
            executor.shutdown()
    return BootstrapResult(metrics=names, point=point[0], replicates=replicates)


# ----------------------------------------------------------------------------------------------
# Intervals
# ----------------------------------------------------------------------------------------------


def percentile_interval(
    replicates: Any, *, confidence: float = 0.95, axis: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Percentile interval over the finite replicates.

    Parameters
    ----------
    replicates : array-like
        Bootstrap replicates, e.g. of shape (n_resamples, n_evaluations, n_metrics); NaN (or
        infinite) entries mark resamples on which the quantity is undefined.
    confidence : float, default=0.95
        Coverage of the interval, in (0, 1); the bounds are the ``(1 - confidence) / 2`` and
        ``(1 + confidence) / 2`` quantiles (numpy's default linear interpolation).
    axis : int, default=0
        The resample axis.

    Returns
    -------
    low, high : ndarray
        Bounds with ``axis`` removed (numpy scalars for 1-D input); NaN where no replicate is finite.
    n_undefined : ndarray of int64
        Number of non-finite replicates along ``axis``.

    Raises
    ------
    ValueError
        If ``confidence`` is not in (0, 1) or the replicates are not numeric.
    TypeError
        If ``confidence`` is not a number.
    """
    confidence = check_open_unit(confidence, "confidence")
    values = np.asarray(replicates)
    if values.dtype.kind not in "biuf":
        raise ValueError(f"replicates must be numeric; got dtype {values.dtype}")
    if values.ndim == 0:
        raise ValueError("replicates must have at least one dimension (the resamples)")
    values = np.asarray(values, dtype=np.float64)  # no copy for float64 input; never modified
    finite = np.isfinite(values)
    n_undefined = np.sum(~finite, axis=axis)
    if not finite.all():
        values = np.where(finite, values, np.nan)
    alpha = (1.0 - confidence) / 2.0
    with warnings.catch_warnings():
        # A slice without any finite replicate gives NaN bounds, which is the documented result.
        warnings.filterwarnings("ignore", message="All-NaN slice encountered", category=RuntimeWarning)
        low, high = np.nanpercentile(values, [100.0 * alpha, 100.0 * (1.0 - alpha)], axis=axis)
    return low, high, n_undefined
