"""Resamples: seed paths, strata, draws, the batch driver and its batch-size rule.

**Seeding.** Resample ``i`` of a bootstrap uses ``PCG64(SeedSequence(entropy=seed.entropy,
spawn_key=seed.spawn_key + (i,), pool_size=seed.pool_size))``, the ``i``-th child of ``seed.spawn``
(:func:`resample_seed`). Its draws depend only on ``(seed, i)`` (and the strata), so results are
bit-identical for any batch size and thread count.

**Schemes** (names in :data:`disaggregated_eval.vocabulary.RESAMPLING_SCHEMES`; ``docs/method.md``,
"Bootstrap"): ``population`` draws ``n`` rows from all rows; ``within_group`` draws, for every
stratum in increasing code order, as many rows as it has from its own rows (a stratified bootstrap,
stratum sizes fixed). :func:`strata_for` is the one home of the rule that maps a scheme and the
caller's group codes to the strata of the draws.

**Batches.** :func:`run_batches` is the one batch driver of the engine: it draws the resamples of a
batch (in threads: numpy releases the GIL), hands them to a kernel and reports progress;
:func:`default_batch_size` is the one rule for its size (the drawn indices of a batch about 32 MB,
never above 256 MB, at least 16 resamples).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from .. import vocabulary
from ..validation import check_choice, check_group_codes, check_int, check_length, check_positive_int, check_seed

__all__ = [
    "BATCH_MEMORY_BYTES",
    "BATCH_TARGET_BYTES",
    "BATCH_MIN_RESAMPLES",
    "Strata",
    "as_seed_sequence",
    "resample_seed",
    "make_strata",
    "strata_for",
    "resample_indices",
    "resample_counts",
    "count_dtype",
    "unit_blocks",
    "default_batch_size",
    "batch_resamples",
    "run_batches",
    "numba_threads",
]

#: Hard upper bound (bytes) of a batch's drawn indices when the batch size is not given.
BATCH_MEMORY_BYTES = 256 * 2**20
#: Preferred size (bytes) of the reused index buffer: small enough that it is not freshly
#: page-faulted for every call (first touch of a fresh 160 MB buffer costs more than the drawing).
BATCH_TARGET_BYTES = 32 * 2**20
#: Preferred minimum number of resamples per batch (load balance of the parallel kernels).
BATCH_MIN_RESAMPLES = 16


def as_seed_sequence(seed: Any, name: str = "seed") -> np.random.SeedSequence:
    """``seed`` as a :class:`numpy.random.SeedSequence` (an int ``s`` is ``SeedSequence(s)``).

    Raises
    ------
    ValueError
        If ``seed`` is neither a non-negative integer nor a SeedSequence.
    """
    if isinstance(seed, np.random.SeedSequence):
        return seed
    try:
        return np.random.SeedSequence(check_seed(seed, name))
    except ValueError:
        raise ValueError(f"{name} must be a non-negative integer or a numpy SeedSequence; got {seed!r}") from None


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
    base = as_seed_sequence(seed)
    return np.random.SeedSequence(
        entropy=base.entropy, spawn_key=tuple(base.spawn_key) + (int(i),), pool_size=base.pool_size
    )


@dataclass(frozen=True)
class Strata:
    """Rows of each stratum (increasing code order) for the ``within_group`` scheme."""

    rows: np.ndarray  # (n,) int32: row indices grouped by stratum (stable within a stratum)
    bounds: np.ndarray  # (n_strata + 1,) int64: stratum k's rows are rows[bounds[k]:bounds[k+1]]

    @property
    def sizes(self) -> np.ndarray:
        """Rows of each stratum, shape (n_strata,), int64."""
        return np.diff(self.bounds)


def make_strata(strata: Any, n: int, name: str = "strata") -> Strata | None:
    """Checked strata (``None`` stays ``None``: the ``population`` scheme).

    Parameters
    ----------
    strata : array-like of shape (n,) or None
        Non-negative integer stratum codes.
    n : int
        Rows.

    Raises
    ------
    ValueError
        If the codes are not non-negative integers of length ``n``.
    """
    if strata is None:
        return None
    if isinstance(strata, Strata):
        return strata
    codes = check_group_codes(strata, name, max_code=np.iinfo(np.int32).max)
    check_length(codes, n, name)
    rows = np.argsort(codes, kind="stable").astype(np.int32)
    sizes = np.unique(codes, return_counts=True)[1]
    bounds = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return Strata(rows=rows, bounds=bounds)


def strata_for(resampling: str, codes: np.ndarray | None) -> np.ndarray | None:
    """The strata of the draws for a resampling scheme: the one home of that rule.

    Parameters
    ----------
    resampling : {"population", "within_group"}
        The scheme (:data:`disaggregated_eval.vocabulary.RESAMPLING_SCHEMES`).
    codes : ndarray of shape (n,) or None
        The groups whose sizes ``within_group`` keeps fixed (the subgroups of a controlled
        evaluation; the cells of all attributes crossed in an audit).

    Returns
    -------
    ndarray of shape (n,) or None
        ``None`` for ``population`` (draws from all rows); ``codes`` for ``within_group``.

    Raises
    ------
    ValueError
        For an unknown scheme, or ``within_group`` without codes.
    """
    resampling = check_choice(resampling, "resampling", vocabulary.RESAMPLING_SCHEMES)
    if resampling == "population":
        return None
    if codes is None:
        raise ValueError("resampling='within_group' needs the group codes to resample within")
    return codes


def _draw_into(base: np.random.SeedSequence, n: int, start: int, stop: int, out: np.ndarray, strata: Strata | None):
    """Write the row indices of resamples ``start..stop-1`` into ``out[0..stop-start-1]``."""
    for row, i in enumerate(range(start, stop)):
        generator = np.random.Generator(np.random.PCG64(resample_seed(base, i)))
        if strata is None:
            out[row] = generator.integers(0, n, size=n, dtype=np.int32)
            continue
        for lo, hi in itertools.pairwise(strata.bounds):
            size = int(hi - lo)
            out[row, lo:hi] = strata.rows[lo:hi][generator.integers(0, size, size=size, dtype=np.int32)]


#: Unit-count resamples come in blocks of this many, block ``b`` drawn from the generator of
#: :func:`resample_seed` ``(seed, b)`` (one vectorised multinomial call per block and stratum).
UNIT_BLOCK = 64


def _draw_counts_into(
    base: np.random.SeedSequence,
    multiplicity: np.ndarray,
    start: int,
    stop: int,
    out: np.ndarray,
    strata: Strata | None,
) -> None:
    """Write the unit counts of resamples ``start..stop-1`` into ``out`` (``engine.units``: multinomial draws).

    Resample ``i`` is row ``i mod UNIT_BLOCK`` of block ``i // UNIT_BLOCK``; a block is drawn whole from its
    own generator, so the counts of resample ``i`` depend only on ``(seed, i)`` and the strata.
    """
    n = int(multiplicity.sum())
    if strata is None:
        groups = [(np.arange(multiplicity.shape[0]), n, multiplicity / n)]
    else:
        groups = []
        for lo, hi in itertools.pairwise(strata.bounds):
            rows = strata.rows[lo:hi]
            m = multiplicity[rows]
            groups.append((rows, int(m.sum()), m / m.sum()))
    for generator, first, lo, hi in unit_blocks(base, start, stop):
        counts = np.empty((UNIT_BLOCK, multiplicity.shape[0]), dtype=np.int64)
        for rows, total, shares in groups:
            counts[:, rows] = generator.multinomial(total, shares, size=UNIT_BLOCK)
        out[lo - start : hi - start] = counts[lo - first : hi - first]


def count_dtype(multiplicity: Any = None) -> type:
    """The integer type of a resample's row or unit counts: int32, or int64 where a count may exceed it.

    A unit's count in a resample is at most the rows in all (``multiplicity``'s sum), which a table of
    counts may take to 2^53: held in int32 beyond 2^31 - 1 it would wrap to a negative count.

    Parameters
    ----------
    multiplicity : array-like of int, optional
        Rows of each unit (None: one row each, whose counts fit in int32).

    Examples
    --------
    >>> count_dtype([3, 4]).__name__, count_dtype([2**31, 1]).__name__
    ('int32', 'int64')
    """
    if multiplicity is None:
        return np.int32
    total = int(np.asarray(multiplicity, dtype=np.int64).sum())
    return np.int32 if total <= np.iinfo(np.int32).max else np.int64


def unit_blocks(seed: np.random.SeedSequence, start: int, stop: int):
    """The blocks of :data:`UNIT_BLOCK` resamples that cover resamples ``start..stop-1``.

    Yields ``(generator, first, lo, hi)`` per block: the block's generator (PCG64 seeded with
    :func:`resample_seed` ``(seed, b)`` for block ``b``), its first resample, and the part
    ``lo..hi-1`` of ``start..stop-1`` that it covers. A block draws its values for all its resamples
    (rows ``lo - first .. hi - first`` are kept), so that the draws of resample ``i`` depend only on the
    seed and ``i``, whatever the batches: the unit counts, and any draw made per unit count (the score
    sums of :mod:`disaggregated_eval.audit.calibration_table`).
    """
    for block in range(start // UNIT_BLOCK, (stop - 1) // UNIT_BLOCK + 1):
        first = block * UNIT_BLOCK
        generator = np.random.Generator(np.random.PCG64(resample_seed(seed, block)))
        yield generator, first, max(start, first), min(stop, first + UNIT_BLOCK)


def _draw(
    base: np.random.SeedSequence,
    n: int,
    start: int,
    stop: int,
    out: np.ndarray,
    executor: ThreadPoolExecutor | None,
    strata: Strata | None,
    multiplicity: np.ndarray | None = None,
) -> None:
    """Draw resamples ``start..stop-1`` into ``out`` (row indices, or unit counts when ``multiplicity`` is
    given), split over the executor's threads."""
    count = stop - start

    def draw(lo: int, hi: int) -> None:
        if multiplicity is None:
            _draw_into(base, n, start + lo, start + hi, out[lo:hi], strata)
        else:
            _draw_counts_into(base, multiplicity, start + lo, start + hi, out[lo:hi], strata)

    if executor is None or count < 2:
        draw(0, count)
        return
    workers = executor._max_workers
    bounds = np.linspace(0, count, min(workers, count) + 1).astype(int)
    if multiplicity is not None:  # split at block boundaries, so that no block is drawn twice
        inner = np.round((start + bounds[1:-1]) / UNIT_BLOCK) * UNIT_BLOCK - start
        bounds = np.unique(np.concatenate(([0], np.clip(inner, 0, count), [count]))).astype(int)
    futures = [executor.submit(draw, int(lo), int(hi)) for lo, hi in itertools.pairwise(bounds) if hi > lo]
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
    """Row indices drawn by resamples ``start..stop-1`` (the draws of every bootstrap of the engine).

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
        C-contiguous buffer to write the draws into (and return); the draws are the same.

    Returns
    -------
    ndarray of shape (stop - start, n), int32
        ``out`` if given. Row ``k`` lists the rows drawn by resample ``start + k``. ``population``:
        ``n`` uniform draws from ``0..n-1``. ``within_group``: for each stratum in increasing code
        order, as many draws as it has rows, uniform over its rows (positions
        ``bounds[k]:bounds[k+1]`` of the row hold stratum ``k``'s draws).

    Raises
    ------
    ValueError
        If ``n < 1``, the range is invalid, the seed is not a non-negative integer or SeedSequence,
        ``strata`` are not non-negative integer codes of length ``n``, or ``out`` has the wrong
        shape, dtype or layout.
    """
    n = check_positive_int(n, "n")
    start = check_int(start, "start", minimum=0)
    stop = check_int(stop, "stop", minimum=0)
    if start > stop:
        raise ValueError(f"need 0 <= start <= stop; got start={start}, stop={stop}")
    base = as_seed_sequence(seed)
    prepared = make_strata(strata, n)
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
    n: int,
    *,
    seed: int | np.random.SeedSequence,
    start: int,
    stop: int,
    strata: Any = None,
    multiplicity: Any = None,
) -> np.ndarray:
    """Return how often each row is drawn in resamples ``start..stop-1``.

    Parameters
    ----------
    n, seed, start, stop, strata
        As :func:`resample_indices`.
    multiplicity : array-like of shape (n,), int, optional
        Rows each row stands for (a unit of :mod:`.units`, a row of a counts table): the counts are then
        those of the row bootstrap of the rows they stand for, ``Multinomial(sum, multiplicity / sum)``
        (within each stratum under ``within_group``), drawn as :func:`run_batches` draws them.

    Returns
    -------
    ndarray of shape (stop - start, n), int32 (int64 with ``multiplicity``)
        Row ``k`` holds the counts of resample ``start + k``; each row sums to ``n`` (``multiplicity``'s
        sum; and, under ``within_group``, the counts of each stratum sum to its size).

    Raises
    ------
    ValueError
        As :func:`resample_indices`.

    Examples
    --------
    >>> counts = resample_counts(3, seed=1, start=0, stop=2, multiplicity=[5, 0, 10])
    >>> counts.sum(axis=1).tolist(), int(counts[:, 1].max())
    ([15, 15], 0)
    """
    if multiplicity is not None:
        multiplicity = np.asarray(multiplicity, dtype=np.int64)
        if multiplicity.shape != (n,):
            raise ValueError(f"multiplicity must have shape ({n},); got {multiplicity.shape}")
        out = np.empty((stop - start, n), dtype=np.int64)
        if stop > start:
            _draw_counts_into(as_seed_sequence(seed), multiplicity, start, stop, out, make_strata(strata, n))
        return out
    indices = resample_indices(n, seed=seed, start=start, stop=stop, strata=strata)
    counts = np.empty(indices.shape, dtype=np.int32)
    for row in range(indices.shape[0]):
        counts[row] = np.bincount(indices[row], minlength=indices.shape[1])
    return counts


def default_batch_size(n: int, per_resample_out: int = 0) -> int:
    """Resamples per batch: drawn indices of ~32 MB (at least 16 resamples), never above ~256 MB.

    Parameters
    ----------
    n : int
        Rows drawn per resample (4 bytes each).
    per_resample_out : int, default 0
        Values of the kernel's per-resample working output (8 bytes each).

    Returns
    -------
    int
        The batch size (>= 1). Results never depend on it.
    """
    per_resample = 4 * n + 8 * per_resample_out
    preferred = max(BATCH_MIN_RESAMPLES, BATCH_TARGET_BYTES // per_resample)
    return max(1, min(preferred, BATCH_MEMORY_BYTES // per_resample))


def batch_resamples(n: int, n_resamples: int, *, batch_size: int | None = None, counts: bool = False) -> int:
    """Resamples per batch of :func:`run_batches` (the rows of its buffer): the one home of that rule.

    Parameters
    ----------
    n : int
        Rows (or units) per resample.
    n_resamples : int
        Resamples in all.
    batch_size : int, optional
        The batch size asked for (default :func:`default_batch_size` ``(n)``).
    counts : bool, default False
        Whether the resamples are unit counts: their batches are whole blocks of :data:`UNIT_BLOCK` resamples.

    Returns
    -------
    int
        ``min(batch_size, n_resamples)``, rounded up to a multiple of :data:`UNIT_BLOCK` with ``counts``.

    Examples
    --------
    >>> batch_resamples(2_612_361, 200), batch_resamples(2_612_361, 200, counts=True)
    (16, 64)
    """
    batch = min(batch_size or default_batch_size(n), n_resamples)
    return -(-batch // UNIT_BLOCK) * UNIT_BLOCK if counts else batch


class numba_threads:
    """Context manager: numba's thread count set to ``n`` inside, restored afterwards.

    Raises
    ------
    ValueError
        If ``n`` exceeds numba's ``NUMBA_NUM_THREADS``.
    """

    def __init__(self, n: int) -> None:
        if n > numba.config.NUMBA_NUM_THREADS:
            raise ValueError(
                f"n_threads must be <= {numba.config.NUMBA_NUM_THREADS} (numba's NUMBA_NUM_THREADS); got {n}"
            )
        self.n = n
        self.previous = None

    def __enter__(self) -> numba_threads:
        self.previous = numba.get_num_threads()
        numba.set_num_threads(self.n)
        return self

    def __exit__(self, *exc: object) -> None:
        numba.set_num_threads(self.previous)


def run_batches(
    kernel: Callable[[np.ndarray, int, int], None],
    *,
    n: int,
    n_resamples: int,
    seed: int | np.random.SeedSequence,
    strata: Strata | None = None,
    batch_size: int | None = None,
    n_threads: int = 1,
    progress: Callable[[int, int], None] | None = None,
    multiplicity: np.ndarray | None = None,
) -> None:
    """The engine's batch driver: draw resamples batch by batch and hand them to ``kernel``.

    Parameters
    ----------
    kernel : callable
        ``kernel(draws, start, stop)`` with ``draws`` of shape (stop - start, n), int32: row ``k`` holds
        the rows drawn by resample ``start + k`` or, with ``multiplicity``, each unit's count in it; it
        writes its results for those resamples.
    n : int
        Rows (or units) per resample.
    n_resamples : int
        Resamples in all.
    seed : int or numpy.random.SeedSequence
        Resample ``i`` draws with :func:`resample_seed` ``(seed, i)``.
    strata : Strata, optional
        ``within_group`` strata (:func:`make_strata`); ``None`` is ``population``.
    batch_size : int, optional
        Resamples per batch (default :func:`default_batch_size`); results do not depend on it.
    n_threads : int, default 1
        Threads for the draws and numba's thread count for the kernel.
    progress : callable, optional
        ``progress(done, total)`` after each batch.
    multiplicity : ndarray of shape (n,), int, optional
        Rows of each unit (:mod:`.units`): the resamples are then unit counts, ``Multinomial(n_rows,
        m_u / n_rows)`` (within each stratum of units under ``within_group``), the row bootstrap in
        distribution, drawn in blocks of :data:`UNIT_BLOCK` resamples (block ``b`` from the generator of
        :func:`resample_seed` ``(seed, b)``), so that they still depend only on the seed and the index.
    """
    base = as_seed_sequence(seed)
    # whole blocks of unit-count resamples per batch with ``multiplicity`` (results do not change)
    batch = batch_resamples(n, n_resamples, batch_size=batch_size, counts=multiplicity is not None)
    buffer = np.empty((batch, n), dtype=count_dtype(multiplicity))
    executor = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else None
    try:
        with numba_threads(n_threads):
            for start in range(0, n_resamples, batch):
                stop = min(start + batch, n_resamples)
                indices = buffer[: stop - start]
                _draw(base, n, start, stop, indices, executor, strata, multiplicity)
                kernel(indices, start, stop)
                if progress is not None:
                    progress(stop, n_resamples)
    finally:
        if executor is not None:
            executor.shutdown()
