"""The plan an audit states before its work: its stages, their estimated time on this machine, its peak memory.

An audit of 10^6 rows with ``V = R`` runs for many minutes in several stages (a weight model per family,
control and model, the bootstrap, the tests, the summaries); a user should know before it starts what will
run and about how long it takes. :func:`work_plan` estimates each stage's CPU time from the sizes the audit
knows before any work (rows held, weight columns, resamples, outputs, the tests' bound), with costs per
unit of work measured on the reference machine (``benchmarks/bench_memory_estimate.py`` prints the
estimates beside the measured times), scaled by :func:`machine_speed`, a probe of about 20 ms. The command
line prints :func:`plan_line` before the work and shows one overall bar during it
(:class:`.progress.StderrProgress`).

The estimates are rough by nature (a test stops early where its p-value is clear: its stage is an upper
bound; scikit-learn's fits vary with the data): they say whether to expect seconds, minutes or hours.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ..memory import AuditSize

__all__ = ["Stage", "work_plan", "machine_speed", "plan_line", "REFERENCE_PROBE_SECONDS"]

#: CPU-seconds per row and resample of the bootstrap's walk, per model, on the reference machine; each
#: weighted population (a dense weight column) adds :data:`_DENSE_SHARE` of it.
_WALK_SECONDS = 1.0e-8
_DENSE_SHARE = 0.22
#: CPU-seconds per replicate value of the intervals, comparisons and summaries (percentiles, differences).
_VALUE_SECONDS = 6.0e-9
#: CPU-seconds per row walked by a Monte-Carlo permutation test (the bound of ``_plan_permutations``).
_PERMUTED_ROW_SECONDS = 1.0e-8
#: Weight models per (family, control[, model]): a fixed cost and a cost per row, by control variable
#: (``Y``: cell frequencies; ``R``: a spline logistic fit on binned scores with a grid of penalties;
#: ``X``: a gradient-boosting grid search).
_WEIGHT_SECONDS = {"Y": (0.05, 1.2e-6), "R": (3.0, 6.0e-6), "X": (5.0, 4.0e-5)}
#: CPU-seconds per slice and model of the tables (rows built, comparisons and their tests planned, figures
#: data): about 46 s for the 9,261 slices of three attributes of 20 levels crossed.
_SLICE_SECONDS = 5.0e-3
#: Fixed CPU-seconds of an audit (compiled kernels loaded, tables, notes).
_FIXED_SECONDS = 1.0
#: Seconds of :func:`_probe` on the reference machine (the machine of the benchmarks, idle).
REFERENCE_PROBE_SECONDS = 0.0075


@dataclass(frozen=True)
class Stage:
    """One stage of an audit's work: its name (as the progress bar shows it) and estimated seconds."""

    name: str
    seconds: float
    upper_bound: bool = False  # the tests: their sequential rule usually stops far earlier


def _probe() -> float:
    """Seconds of a fixed piece of numpy work (counting 2^20 random codes), the best of three."""
    codes = np.random.Generator(np.random.PCG64(20250101)).integers(0, 4096, 2**20)
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        np.bincount(codes, minlength=4096)
        np.sort(codes[: 2**17])
        best = min(best, time.perf_counter() - start)
    return best


def machine_speed() -> float:
    """How much slower this machine is now than the reference machine (> 1: slower), from a 20 ms probe.

    Returns
    -------
    float
        The probe's seconds over :data:`REFERENCE_PROBE_SECONDS`, within [0.25, 20].

    Examples
    --------
    >>> 0.25 <= machine_speed() <= 20
    True
    """
    return float(np.clip(_probe() / REFERENCE_PROBE_SECONDS, 0.25, 20.0))


def work_plan(
    size: AuditSize,
    *,
    weight_stages: list[tuple[str, str]],
    n_dense_per_model: int,
    test_bound: float,
    has_calibration: bool,
    speed: float = 1.0,
) -> list[Stage]:
    """The stages of an audit and their estimated seconds, before any work.

    Parameters
    ----------
    size : AuditSize
        The audit's sizes (:func:`.core.audit_size`).
    weight_stages : list of (str, str)
        Each weight model's stage name and control variable (``X``, ``Y`` or ``R``).
    n_dense_per_model : int
        Weighted populations per model (dense weight columns of the bootstrap's walk).
    test_bound : float
        Rows the Monte-Carlo permutation tests may walk at most (0 without them).
    has_calibration : bool
        Whether the calibration table bootstraps (models with scores).
    speed : float, default 1.0
        :func:`machine_speed`.

    Returns
    -------
    list of Stage
        In the order they run; seconds scaled by ``speed``.

    Examples
    --------
    >>> size = AuditSize(n_rows=10**6, n_units=10**6, n_models=1, n_families=4, n_slices=20,
    ...                  n_resamples=10_000, n_outputs=77, n_metrics=14)
    >>> [(s.name, round(s.seconds)) for s in work_plan(size, weight_stages=[], n_dense_per_model=0,
    ...                                                 test_bound=0, has_calibration=False)]
    [('bootstrap', 100), ('summaries', 1)]
    """
    rows = size.n_units
    stages = []
    for name, control in weight_stages:
        fixed, per_row = _WEIGHT_SECONDS[control]
        stages.append(Stage(name, fixed + per_row * size.n_rows))
    walk = _WALK_SECONDS * rows * size.n_models * size.n_resamples
    stages.append(Stage("bootstrap", walk * (1 + _DENSE_SHARE * n_dense_per_model)))
    if test_bound > 0:
        stages.append(Stage("permutations", _PERMUTED_ROW_SECONDS * test_bound, upper_bound=True))
    if size.n_extra_values:
        stages.append(Stage("fairness bootstrap", walk))
    if has_calibration:
        stages.append(Stage("calibration bootstrap", walk))
    values = size.n_resamples * (size.n_outputs * size.n_metrics + size.n_extra_values)
    tables = _SLICE_SECONDS * size.n_slices * size.n_models
    stages.append(Stage("summaries", _FIXED_SECONDS + _VALUE_SECONDS * values + tables))
    return [Stage(s.name, s.seconds * speed, s.upper_bound) for s in stages]


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def plan_line(stages: list[Stage], *, peak_bytes: int, limit_mb: float) -> str:
    """The one line the command line prints before an audit's work.

    Examples
    --------
    >>> print(plan_line([Stage("bootstrap", 12.0), Stage("permutations", 400.0, True)], peak_bytes=5 * 10**8,
    ...                 limit_mb=8000))
    plan: bootstrap ~12 s, permutations up to 7 min; about 12 s in all on this machine, the tests up to 7 min more; peak memory about 500 MB (limit 8,000 MB)
    """
    # the weight models' stages are summed into one entry: there may be dozens
    weights = [s for s in stages if s.name.startswith("weights ")]
    shown = []
    if weights:
        shown.append(f"{len(weights)} weight model(s) ~{_duration(sum(s.seconds for s in weights))}")
    for s in stages:
        if not s.name.startswith("weights "):
            shown.append(
                f"{s.name} {'up to' if s.upper_bound else '~'}{' ' if s.upper_bound else ''}{_duration(s.seconds)}"
            )
    low = sum(s.seconds for s in stages if not s.upper_bound)
    bounded = sum(s.seconds for s in stages if s.upper_bound)
    total = f"about {_duration(low)} in all on this machine"
    if bounded > 0.5 * low:  # the tests stop early where a p-value is clear: their bound is not an estimate
        total += f", the tests up to {_duration(bounded)} more"
    return f"plan: {', '.join(shown)}; {total}; peak memory about {peak_bytes / 1e6:,.0f} MB (limit {limit_mb:,.0f} MB)"
