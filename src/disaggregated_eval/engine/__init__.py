"""The resampling engine: one walk, one batch driver, one home for every sum.

Modules, from the bottom up:

* :mod:`.sums`: the per-row terms and :func:`~.sums.metrics_from_sums` (the metric formulas);
* :mod:`.resampling`: seeds, strata, draws, the batch driver and its batch-size rule;
* :mod:`.walk`: the walk in score order over streams of weight and code columns (every bootstrap,
  permutation test and point estimate of the package runs on it);
* :mod:`.bootstrap`: paired bootstrap of a walk layout, and of the library's weighted evaluations;
* :mod:`.permutation`: permutation tests on the same walk.

Intervals and derived statistics (differences, ratios, gaps) live beside the engine in
:mod:`disaggregated_eval.intervals` and :mod:`disaggregated_eval.derived`. The engine imports nothing
from the audit.
"""

from ._cache import guard as _guard

_guard()  # before any kernel is loaded from numba's cache (see ._cache)

from .bootstrap import (  # noqa: E402
    BootstrapResult,
    Evaluation,
    LayoutBootstrap,
    bootstrap_evaluations,
    bootstrap_layout,
)
from .resampling import resample_counts, resample_indices, resample_seed, strata_for  # noqa: E402
from .sums import METRIC_SLOTS, N_METRIC_SLOTS, metric_slots, metrics_from_sums  # noqa: E402

__all__ = [
    "METRIC_SLOTS",
    "N_METRIC_SLOTS",
    "BootstrapResult",
    "Evaluation",
    "LayoutBootstrap",
    "bootstrap_evaluations",
    "bootstrap_layout",
    "metric_slots",
    "metrics_from_sums",
    "resample_counts",
    "resample_indices",
    "resample_seed",
    "strata_for",
]
