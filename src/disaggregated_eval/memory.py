"""Memory that the bootstrap replicates of a controlled evaluation need, and a check against a limit.

A light module (numpy and the validation helpers only), so that the configuration check of the
workflow (``disaggregated_eval_workflow.config`` in ``workflow/lib``) can reject a resample count whose
replicates would not fit in the job's ``mem_mb`` at parse time, before any job runs, without importing
the numba engine.
:func:`disaggregated_eval.evaluation.controlled_evaluation` uses the same functions (its
``memory_limit_mb`` argument). See ``docs/method.md``, "Bootstrap" (memory).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from .validation import check_int, check_positive_int

__all__ = [
    "MAX_RESAMPLES",
    "MAX_GAMMAS",
    "MAX_GRID_VALUES",
    "MIN_MEMORY_LIMIT_MB",
    "MAX_MEMORY_LIMIT_MB",
    "MAX_CALIBRATION_BINS",
    "MAX_REPLICATES",
    "MAX_SIMULATED_ROWS",
    "check_bytes",
    "DEFAULT_MEMORY_FRACTION",
    "default_memory_limit_mb",
    "ADDRESS_SPACE_RESERVE_BYTES",
    "address_space_room_bytes",
    "memory_limit_origin",
    "SUMMARY_CHUNK_VALUES",
    "SUMMARY_CHUNK_COPIES",
    "evaluations_per_model",
    "replicate_memory_bytes",
    "check_replicate_memory",
    "AuditSize",
    "resident_bytes",
    "audit_peak_parts",
    "audit_peak_bytes",
]

# Stated maximums of sizes, checked before any work by the command line, ``audit()`` and the
# workflow's configuration check (one home). Each is far above any useful value and keeps a job
# within the memory of an ordinary machine; what grows with the data is checked against memory when
# the data are known (:func:`check_bytes`).
#: Bootstrap resamples (``disagg-eval audit --n-resamples``, ``evaluation.n_resamples``,
#: ``coverage.n_resamples``): the Monte-Carlo error of a 95% percentile bound at 10^6 resamples is
#: about 0.02% of the interval's width; one float64 replicate per slice and metric is 8 MB.
MAX_RESAMPLES = 1_000_000
#: Bins of a calibration curve or table (``--calibration-bins``, ``calibration.n_bins``).
MAX_CALIBRATION_BINS = 1_000
#: Replicates per setting of the coverage study (``coverage.n_replicates``): at 10^4 the binomial
#: standard error of a 95% coverage is 0.2 points.
MAX_REPLICATES = 10_000
#: Simulated rows per split and setting (``simulation.n_train``, ``simulation.n_test``): 200 times the
#: paper's 50,000; a split of 10^7 rows and its features take about 1 GB.
MAX_SIMULATED_ROWS = 10_000_000
#: Values of Gamma of one sensitivity analysis (``--selection-sensitivity``, ``selection_study.gammas``):
#: each adds the bounds of every slice and metric, and their intervals, to the selection table.
MAX_GAMMAS = 20
#: Values of a grid of a weight model's ``max_leaf_nodes`` (``--max-leaf-nodes``): each is a fit per fold
#: of the grid search, per control variable and attribute.
MAX_GRID_VALUES = 20
#: Smallest memory limit an audit accepts, in MB (``--memory-limit-mb``): no audit fits in less (its
#: fixed working memory alone is :data:`AUDIT_FIXED_BYTES`).
MIN_MEMORY_LIMIT_MB = 1.0
#: Largest memory limit an audit accepts, in MB: 2^63 bytes, so that every byte count derived from it is a
#: finite number that fits in int64 (1e308 MB is infinitely many bytes in float64).
MAX_MEMORY_LIMIT_MB = float(2**43)

#: Quantities per chunk of the summary times resamples times metrics: the summary's differences
#: and percentiles work on chunks of about this many float64 values (32 MiB).
SUMMARY_CHUNK_VALUES = 2**22
#: Upper bound of the summary's working set in chunk-sized arrays (the gathered replicates, the
#: subtracted ones, the NaN copy and numpy's percentile work; measured: about 2); see
#: :func:`replicate_memory_bytes`.
SUMMARY_CHUNK_COPIES = 4


def check_bytes(needed: int, limit: float, *, what: str, advice: str, error: type[Exception] = ValueError) -> int:
    """Refuse, before any work, a computation whose memory would exceed ``limit`` bytes (the one guard).

    Parameters
    ----------
    needed : int
        Bytes the computation needs (e.g. its bootstrap replicates).
    limit : float
        Largest number of bytes allowed.
    what : str
        What needs the memory, with its size (the start of the message).
    advice : str
        What to change (the end of the message).
    error : type, default ValueError
        The exception class to raise (e.g. the audit's input error).

    Returns
    -------
    int
        ``needed``, when it fits.

    Raises
    ------
    error
        ``"<what>, more than <limit>; <advice>"`` when ``needed > limit``.
    """
    if needed > limit:
        shown = f"{limit / 2**30:.0f} GiB" if limit >= 2**30 else f"{limit / 2**20:.0f} MiB"
        raise error(f"{what}, more than {shown}; {advice}")
    return needed


#: Share of the machine's physical memory that a bootstrap may use when no limit is given.
DEFAULT_MEMORY_FRACTION = 0.8


def default_memory_limit_mb() -> float:
    """The memory limit used when none is given, in MB (10^6 bytes): 80% of the machine's physical memory, or
    less where the process may map less (``ulimit -v``, :func:`address_space_room_bytes`).

    Returns
    -------
    float
        The smaller of ``DEFAULT_MEMORY_FRACTION`` times ``os.sysconf("SC_PAGE_SIZE") *
        os.sysconf("SC_PHYS_PAGES")`` (an unlimited 1e12 MB where the platform does not report it) and the
        resident memory that fits in the process's address-space limit, when one is set.

    Examples
    --------
    >>> default_memory_limit_mb() > 0
    True
    """
    try:
        total = DEFAULT_MEMORY_FRACTION * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e6
    except (AttributeError, ValueError, OSError):  # pragma: no cover - platforms without sysconf
        total = 1e12
    room = address_space_room_bytes()
    return total if room is None else max(min(total, room / 1e6), MIN_MEMORY_LIMIT_MB)


def memory_limit_origin(memory_limit_mb: float | None) -> str:
    """Where an audit's memory limit came from, for its messages: the option, the address-space limit or the machine.

    Parameters
    ----------
    memory_limit_mb : float or None
        The limit given (``--memory-limit-mb``), or None for :func:`default_memory_limit_mb`.

    Returns
    -------
    str
        ``"--memory-limit-mb"``, ``"the room that the address-space limit (ulimit -v) of N MB leaves"`` or
        ``"80% of the machine's memory"``.

    Examples
    --------
    >>> memory_limit_origin(500.0)
    '--memory-limit-mb'
    """
    if memory_limit_mb is not None:
        return "--memory-limit-mb"
    room = address_space_room_bytes()
    if room is not None and room / 1e6 <= default_memory_limit_mb():
        return (
            f"the room that the address-space limit (ulimit -v) of {_address_space_limit() / 1e6:,.0f} MB leaves "
            f"beside what the "
            f"process maps now and a reserve of {ADDRESS_SPACE_RESERVE_BYTES / 1e6:,.0f} MB for its threads"
        )
    return f"{DEFAULT_MEMORY_FRACTION:.0%} of the machine's memory"


#: Address space that an audit's work maps beyond the resident memory it adds, besides what the process maps now
#: and does not touch (libraries' unread pages; in a process of the API, the 1 GiB that pyarrow's default allocator
#: reserves when a file is read, which the command line avoids under a limit: ``audit.entry``): the threads' stacks
#: and malloc arenas (glibc reserves 64 MiB per arena). Measured on Linux for default
#: audits of 2x10^5 continuous rows from the check to the end: ``VmPeak`` grew by 5 MB (1 thread) and 188 MB
#: (2 threads, ``--n-threads 2``) more than ``VmHWM``.
ADDRESS_SPACE_RESERVE_BYTES = 256 * 2**20


def address_space_room_bytes() -> float | None:
    """Resident memory that the process's address-space limit (``RLIMIT_AS``, ``ulimit -v``) leaves room for.

    A limit on the address space counts every mapped page, touched or not; the audit's estimates are of
    resident memory. The room is the limit minus what is mapped now but not resident (``VmSize - VmRSS``)
    minus :data:`ADDRESS_SPACE_RESERVE_BYTES`, so that an estimate below it fits under the limit.

    Returns
    -------
    float or None
        Bytes (at least 0), or None when no address-space limit is set or the platform does not report it.

    Examples
    --------
    >>> room = address_space_room_bytes()
    >>> room is None or room >= 0
    True
    """
    soft = _address_space_limit()
    if soft is None:
        return None
    mapped = _status_bytes("VmSize:")
    resident = _status_bytes("VmRSS:")
    unresident = 0 if mapped is None or resident is None else max(mapped - resident, 0)
    return float(max(soft - unresident - ADDRESS_SPACE_RESERVE_BYTES, 0))


def _address_space_limit() -> int | None:
    """``RLIMIT_AS`` in bytes, or None when none is set (the light twin of ``audit.signals.address_space_limit``,
    which the command line's entry reads before numpy can load; this module imports numpy)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, AttributeError, ValueError, OSError):  # pragma: no cover - platforms without it
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def _status_bytes(field: str) -> int | None:
    """A ``kB`` field of Linux's ``/proc/self/status`` in bytes, or None where there is none."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover - platforms without procfs
        pass
    return None


#: What the audit's work adds to the memory the process already holds (its libraries, the data, the coded
#: input: measured when the estimate is made, :func:`resident_bytes`), fitted to the workloads of
#: ``benchmarks/bench_memory_estimate.py`` (estimates 1.01-1.23 times the measured peak on its 13 workloads), in
#: bytes. Per row held (the engine's sorted layout and row terms): a base, plus per model and family of slices.
AUDIT_ROW_BYTES = 60
AUDIT_MODEL_ROW_BYTES = 40
AUDIT_FAMILY_ROW_BYTES = 20
#: Per row and weight column of the controlled evaluation (the weight matrix and its sorted block, both
#: held while the walk is laid out, and ``P(A | V)``).
AUDIT_WEIGHT_COLUMN_BYTES = 20
#: Working memory that does not grow with the data: the engine's compiled kernels and batch buffers, the
#: tests' and tables' buffers, the libraries the outputs load (matplotlib).
AUDIT_FIXED_BYTES = 100 * 2**20
#: Per unit and resample of a batch of unit-count resamples (counted data: the distinct rows with their counts,
#: ``engine.resampling.run_batches`` with ``multiplicity``), whose batches are whole blocks of 64 resamples however
#: many units there are: the batch's buffer of counts (int32), held through the batch, and, per resample being drawn
#: (a block per drawing thread), the block's int64 counts and the multinomial's int64 draws (16 bytes; 20 fits the
#: measured peaks: 1.39 GB for 583,116 units and 4.46 GB for 2,612,361, one thread, where the kernels' own copies
#: of a batch, e.g. the calibration table's float64 counts, are smaller).
AUDIT_COUNT_BUFFER_BYTES = 4
AUDIT_COUNT_DRAW_BYTES = 20
#: Per slice and model, what writing the outputs (``disagg-eval audit``: the tables, the report, the figures this
#: process draws) adds, after the work's arrays are freed (one model, one metric, 200 resamples: 1,501 slices peaked
#: at 503 MB, 3,001 at 621 MB, 18,003 at 1,983 MB, with about 255 MB held before the work; the fixed part holds
#: matplotlib): estimates 1.04, 1.11 and 1.18 times those peaks.
AUDIT_OUTPUT_SLICE_BYTES = 110_000
#: scikit-learn, loaded when a control variable needs a fitted weight model (X, R); the fits' own arrays are
#: freed before the bootstrap lays out its larger ones.
AUDIT_WEIGHT_MODEL_BYTES = 60 * 2**20
#: The bootstrap's replicates are held once, and the comparisons read copies of a part of them: held
#: bytes are ``AUDIT_REPLICATE_COPIES x 8 x resamples x outputs x metrics``.
AUDIT_REPLICATE_COPIES = 1.25
#: Arrays of one value per resample and slice that the slice table's bands and the summaries' extremes
#: make at a time (per model).
AUDIT_SLICE_COPIES = 6
#: Resident memory assumed where the platform does not report it: the audit's imports (numpy, pandas,
#: scipy, numba, pyarrow), measured at 231 MiB on Linux.
AUDIT_LIBRARY_BYTES = 231 * 2**20


@dataclass(frozen=True)
class AuditSize:
    """What an audit's memory grows with, known before its work (:func:`audit_peak_parts`).

    Attributes
    ----------
    n_rows : int
        Rows audited (the sum of the counts).
    n_units : int
        Rows the audit holds: ``n_rows``, or the distinct rows when the frame (or its file) was counted.
    n_models, n_families, n_slices : int
        Score columns; families of slices (overall, attributes, intersections); slices.
    n_resamples, n_outputs, n_metrics : int
        The bootstrap: resamples, outputs (slices, rests and weighted populations of every model), metrics.
    n_weight_columns : int, default 0
        Weight columns of the controlled evaluation over every model (two per kept level, control and family).
    fits_weight_models : bool, default False
        Whether a control variable needs fitted weight models (``X`` or ``R``; ``Y`` uses cell frequencies).
    n_extra_values : int, default 0
        Outputs times metrics of the fairness summary's own bootstrap (when the audit's metrics lack its
        metrics), held beside the audit's replicates.
    count_batch : int, default 0
        Resamples per batch when the resamples are unit counts (counted data; ``engine.resampling.
        batch_resamples``), 0 when they are row indices (their batches, about 32 MB, are in the fixed part).
    count_drawn : int, default 0
        Of those, the resamples whose counts are drawn at once (a block of 64 per drawing thread).

    Examples
    --------
    >>> size = AuditSize(n_rows=10**6, n_units=10**6, n_models=1, n_families=4, n_slices=20,
    ...                  n_resamples=1000, n_outputs=39, n_metrics=14)
    >>> round(audit_peak_parts(size)["rows"] / 1e6)
    180
    """

    n_rows: int
    n_units: int
    n_models: int
    n_families: int
    n_slices: int
    n_resamples: int
    n_outputs: int
    n_metrics: int
    n_weight_columns: int = 0
    fits_weight_models: bool = False
    n_extra_values: int = 0
    count_batch: int = 0
    count_drawn: int = 0

    def __post_init__(self) -> None:
        if self.n_units > self.n_rows:
            raise ValueError(f"n_units must be at most n_rows; got {self.n_units} > {self.n_rows}")


def resident_bytes() -> int:
    """Memory the process holds now (its resident set), in bytes.

    Returns
    -------
    int
        Linux's ``VmRSS`` (``/proc/self/status``); elsewhere :data:`AUDIT_LIBRARY_BYTES`, the audit's
        imports as measured on Linux.

    Examples
    --------
    >>> resident_bytes() > 0
    True
    """
    resident = _status_bytes("VmRSS:")
    if resident is not None:
        return resident
    return AUDIT_LIBRARY_BYTES  # pragma: no cover


def audit_peak_parts(size: AuditSize) -> dict[str, int]:
    """What an audit's work adds to the memory its process holds, by part, in bytes (``docs/audit.md``).

    Parameters
    ----------
    size : AuditSize

    Returns
    -------
    dict of str to int
        ``fixed`` (:data:`AUDIT_FIXED_BYTES`, plus :data:`AUDIT_WEIGHT_MODEL_BYTES` with fitted weight
        models), ``rows`` (``n_units`` times the per-row bytes), ``weights`` (``n_units x n_weight_columns x``
        :data:`AUDIT_WEIGHT_COLUMN_BYTES`), ``replicates`` (the bootstrap's, times
        :data:`AUDIT_REPLICATE_COPIES`, the slices' per-resample arrays and the fairness summary's own
        bootstrap) and ``batches`` (with counted data, the batches of unit counts: ``n_units x`` (``count_batch x``
        :data:`AUDIT_COUNT_BUFFER_BYTES` ``+ count_drawn x`` :data:`AUDIT_COUNT_DRAW_BYTES`)), and ``outputs``
        (``n_slices x n_models x`` :data:`AUDIT_OUTPUT_SLICE_BYTES`: writing the outputs, after the work). The
        estimate of the peak (:func:`audit_peak_bytes`) is the memory held before the work plus ``fixed`` plus the
        larger of the work's parts' sum and ``outputs``; ``benchmarks/bench_memory_estimate.py`` prints it beside
        the measured peak.

    Examples
    --------
    >>> size = AuditSize(n_rows=6172, n_units=6172, n_models=1, n_families=4, n_slices=21,
    ...                  n_resamples=10_000, n_outputs=113, n_metrics=14)
    >>> round(audit_peak_parts(size)["replicates"] / 2**20)
    160
    >>> counted = AuditSize(n_rows=3 * 10**6, n_units=2_612_361, n_models=1, n_families=4, n_slices=9,
    ...                     n_resamples=200, n_outputs=17, n_metrics=1, count_batch=64, count_drawn=64)
    >>> round(audit_peak_parts(counted)["batches"] / 1e6)
    4013
    """
    per_unit = AUDIT_ROW_BYTES + size.n_models * AUDIT_MODEL_ROW_BYTES + size.n_families * AUDIT_FAMILY_ROW_BYTES
    held = AUDIT_REPLICATE_COPIES * size.n_outputs * size.n_metrics + size.n_extra_values
    per_resample = 8 * (held + AUDIT_SLICE_COPIES * size.n_slices * size.n_models)
    return {
        "fixed": AUDIT_FIXED_BYTES + (AUDIT_WEIGHT_MODEL_BYTES if size.fits_weight_models else 0),
        "rows": size.n_units * per_unit,
        "weights": size.n_units * size.n_weight_columns * AUDIT_WEIGHT_COLUMN_BYTES,
        "replicates": int(size.n_resamples * per_resample),
        "batches": size.n_units
        * (size.count_batch * AUDIT_COUNT_BUFFER_BYTES + size.count_drawn * AUDIT_COUNT_DRAW_BYTES),
        "outputs": size.n_slices * size.n_models * AUDIT_OUTPUT_SLICE_BYTES,
    }


def audit_peak_bytes(size: AuditSize, *, resident: int | None = None) -> int:
    """Estimated peak memory of an audit's process, in bytes, before its work (``docs/audit.md``, "Large data").

    Parameters
    ----------
    size : AuditSize
    resident : int, optional
        Memory the process holds before the work (the libraries, the data); default :func:`resident_bytes`.

    Returns
    -------
    int
        ``resident`` plus the parts of :func:`audit_peak_parts`, the work's and the outputs' (written after the
        work's arrays are freed) the larger: what ``--memory-limit-mb`` is compared with.

    Examples
    --------
    >>> size = AuditSize(n_rows=10**7, n_units=96, n_models=1, n_families=7, n_slices=64,
    ...                  n_resamples=1000, n_outputs=170, n_metrics=11)
    >>> parts = audit_peak_parts(size)
    >>> audit_peak_bytes(size, resident=0) == sum(parts.values()) - parts["outputs"]
    True
    """
    held = resident_bytes() if resident is None else int(resident)
    parts = audit_peak_parts(size)
    outputs = parts.pop("outputs")
    fixed = parts.pop("fixed")
    return held + fixed + max(sum(parts.values()), outputs)


def evaluations_per_model(*, n_groups: int, n_controls: int, n_weight_sources: int, shared_space: bool = True) -> int:
    """Number of weighted evaluations that :func:`controlled_evaluation` bootstraps per model.

    ``1 + K`` unweighted (overall and each subgroup) plus, per weight source and control with
    weights, ``K`` weighted population metrics ``M_a`` and (with ``shared_space``) ``K``
    shared-space metrics. ``T_a`` and relative comparisons are differences of these and cost no
    replicates of their own.
    """
    per_weighting = 2 if shared_space else 1
    return 1 + n_groups + n_weight_sources * n_controls * n_groups * per_weighting


def replicate_memory_bytes(
    *,
    n_models: int,
    n_groups: int,
    n_controls: int,
    n_weight_sources: int,
    n_metrics: int,
    n_resamples: int,
    shared_space: bool = True,
) -> int:
    """Bytes that the bootstrap replicates of a controlled evaluation need (the part that grows
    with ``n_resamples``).

    Parameters
    ----------
    n_models : int
        Models (score columns) evaluated, e.g. 5 in the simulation study, 3 for an ACS task.
    n_groups : int
        Subgroups ``K``.
    n_controls : int
        Control variables **with weights** (``X``, ``Y``, ``R``: 3 in the pipeline); ``none``
        needs no evaluations of its own and is not counted.
    n_weight_sources : int
        Weight sources (``estimated``, ``oracle``: 2 in the simulation study, 1 for ACS).
    n_metrics : int
        Metrics per evaluation (8 in the pipeline: ``vocabulary.PIPELINE_METRICS``).
    n_resamples : int
        Bootstrap resamples.
    shared_space : bool, default True
        Whether the shared-space metrics are evaluated too.

    Returns
    -------
    int
        ``8 * n_resamples * n_evaluations * n_metrics`` (the float64 replicate array, with
        ``n_evaluations = n_models * evaluations_per_model(...)``) plus the working set of the
        summary (``SUMMARY_CHUNK_COPIES`` chunks of about ``SUMMARY_CHUNK_VALUES`` values, never
        less than one quantity's ``n_resamples * n_metrics`` values and never more than all
        quantities' values). It leaves out
        what does not grow with ``n_resamples``: the libraries, the data and the engine's batch
        working set (at most ~256 MB, ``bootstrap.BATCH_MEMORY_BYTES``).

    Raises
    ------
    ValueError
        If a count is not an integer of the right range (``n_controls`` and
        ``n_weight_sources`` may be 0; the others must be positive).
    """
    n_models = check_positive_int(n_models, "n_models")
    n_groups = check_positive_int(n_groups, "n_groups")
    n_controls = check_int(n_controls, "n_controls", minimum=0)
    n_weight_sources = check_int(n_weight_sources, "n_weight_sources", minimum=0)
    n_metrics = check_positive_int(n_metrics, "n_metrics")
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    per_model = evaluations_per_model(
        n_groups=n_groups, n_controls=n_controls, n_weight_sources=n_weight_sources, shared_space=bool(shared_space)
    )
    n_evaluations = n_models * per_model
    replicates = 8 * n_resamples * n_evaluations * n_metrics
    # Reported quantities: the evaluations, M_a and T_a for V = none, T_a per source and control,
    # and at most one relative comparison per model (overall and each subgroup).
    n_quantities = n_models * (per_model + 2 * n_groups + n_weight_sources * n_controls * n_groups + 1 + n_groups)
    per_quantity = n_resamples * n_metrics
    chunk = min(max(1, SUMMARY_CHUNK_VALUES // per_quantity), n_quantities) * per_quantity
    return replicates + 8 * SUMMARY_CHUNK_COPIES * chunk


def check_replicate_memory(
    *,
    n_models: int,
    n_groups: int,
    n_controls: int,
    n_weight_sources: int,
    n_metrics: int,
    n_resamples: int,
    mem_mb: float,
    shared_space: bool = True,
    what: str = "n_resamples",
    limit: str = "mem_mb",
) -> int:
    """Raise before any work if the replicates of a controlled evaluation exceed a memory limit.

    Parameters
    ----------
    n_models, n_groups, n_controls, n_weight_sources, n_metrics, n_resamples, shared_space
        As :func:`replicate_memory_bytes`.
    mem_mb : float
        The limit in megabytes (10^6 bytes; Snakemake's ``mem_mb``), > 0.
    what, limit : str
        How the resample count and the limit are named in the message, e.g.
        ``"evaluation.n_resamples"`` and ``"resources.simulation.bootstrap.mem_mb"``.

    Returns
    -------
    int
        The estimate of :func:`replicate_memory_bytes`, when it fits.

    Raises
    ------
    ValueError
        If the estimate exceeds ``mem_mb`` (the message names ``what`` and its value, the estimate
        and the limit), or an argument is invalid.
    """
    if isinstance(mem_mb, bool) or not isinstance(mem_mb, (int, float, np.integer, np.floating)) or not mem_mb > 0:
        raise ValueError(f"{limit} must be a positive number of megabytes; got {mem_mb!r}")
    needed = replicate_memory_bytes(
        n_models=n_models,
        n_groups=n_groups,
        n_controls=n_controls,
        n_weight_sources=n_weight_sources,
        n_metrics=n_metrics,
        n_resamples=n_resamples,
        shared_space=shared_space,
    )
    if needed > float(mem_mb) * 1e6:
        n_evaluations = n_models * evaluations_per_model(
            n_groups=n_groups, n_controls=n_controls, n_weight_sources=n_weight_sources, shared_space=bool(shared_space)
        )
        # Each resample costs 8 bytes per evaluation and metric, plus its share of the summary's
        # copies; the summary takes at most 8 * SUMMARY_CHUNK_COPIES * SUMMARY_CHUNK_VALUES bytes more.
        # A conservative largest count that fits:
        budget = float(mem_mb) * 1e6 - 8 * SUMMARY_CHUNK_COPIES * SUMMARY_CHUNK_VALUES
        largest = max(0, int(budget // (8 * n_metrics * (n_evaluations + SUMMARY_CHUNK_COPIES))))
        raise ValueError(
            f"{what} = {n_resamples:,} needs about {needed / 1e6:,.0f} MB for the bootstrap replicates "
            f"({n_evaluations} evaluations x {n_metrics} metrics x {n_resamples:,} resamples x 8 bytes, plus the "
            f"summary), more than {limit} = {mem_mb:g} MB; lower {what} (at most about {largest:,} fit) or raise {limit}"
        )
    return needed
