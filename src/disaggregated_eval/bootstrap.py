"""Former home of the bootstrap engine; kept for one release as thin re-exports.

The engine now lives in :mod:`disaggregated_eval.engine` (resampling, sums, the walk, the
bootstrap) and the intervals in :mod:`disaggregated_eval.intervals`; import from there. Note that
:func:`metrics_from_sums` now takes ``(wp, wn, fn, tn, auc_numerator, terms, odds, out)``
(``docs/design.md``).
"""

from __future__ import annotations

from .engine.bootstrap import BootstrapResult, Evaluation, bootstrap_evaluations
from .engine.resampling import default_batch_size, resample_counts, resample_indices, resample_seed
from .engine.sums import METRIC_SLOTS, N_METRIC_SLOTS, metric_slots, metrics_from_sums
from .intervals import percentile_interval

__all__ = [
    "METRIC_SLOTS",
    "N_METRIC_SLOTS",
    "BootstrapResult",
    "Evaluation",
    "bootstrap_evaluations",
    "default_batch_size",
    "metric_slots",
    "metrics_from_sums",
    "percentile_interval",
    "resample_counts",
    "resample_indices",
    "resample_seed",
]
