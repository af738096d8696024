"""Paired bootstrap of many evaluations at once, on the engine's one walk (``docs/method.md``, "Bootstrap").

**What is resampled.** Resample ``i`` draws rows of the evaluation set with replacement
(:mod:`.resampling`), and *every* output of an evaluation set (all models, weightings, slices and
complements) is computed on that same resample, so that differences between them get paired
intervals (:mod:`disaggregated_eval.derived`). Weights are fixed per row and travel with the row
(paper Supplementary A.3).

Two entry points:

* :func:`bootstrap_layout`: point estimates and replicates of every output of a
  :class:`.walk.WalkLayout` (streams of weight and code columns; the audit's slices and families);
* :func:`bootstrap_evaluations`: the library's API, a list of weighted :class:`Evaluation` (one
  weight column each), used by :func:`disaggregated_eval.evaluation.controlled_evaluation`.

Both validate nothing they are not given by a caller that checked it, except
:func:`bootstrap_evaluations`, which is public and validates its arguments once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..registry import check_metric_names
from ..validation import check_labels, check_open_unit, check_positive_int, check_scores, check_weights
from ..vocabulary import METRICS
from .resampling import as_seed_sequence, count_dtype, default_batch_size, make_strata, numba_threads, run_batches
from .sums import metric_slots, terms_for
from .walk import ModelStreams, Stream, WalkLayout, build_layout, run_kernel

__all__ = [
    "Evaluation",
    "BootstrapResult",
    "LayoutBootstrap",
    "bootstrap_layout",
    "bootstrap_evaluations",
    "bootstrap_checked",
]


@dataclass(frozen=True)
class LayoutBootstrap:
    """Point estimates and bootstrap replicates of every output of a walk layout.

    Attributes
    ----------
    point : ndarray of shape (n_outputs, n_thresholds, n_metrics)
        On the evaluation set itself (every row counted once).
    replicates : ndarray of shape (n_resamples, n_outputs, n_thresholds, n_metrics)
        On each resample; NaN where undefined.
    """

    point: np.ndarray
    replicates: np.ndarray


def point_estimates(
    layout: WalkLayout, *, slots: np.ndarray, odds: float, multiplicity: np.ndarray | None = None
) -> np.ndarray:
    """Metrics of every output on the evaluation set itself, shape (n_outputs, n_thresholds, n_metrics).

    ``multiplicity`` (n,): rows of each unit of the layout (:mod:`.units`); None: the layout's rows.
    """
    out = np.empty((1, layout.n_outputs, layout.n_thresholds, slots.shape[0]))
    counts = np.ones((1, layout.n), dtype=np.int32) if multiplicity is None else multiplicity[None, :]
    run_kernel(
        layout, counts.astype(count_dtype(multiplicity)), from_counts=True, slots=slots, odds=odds, n_threads=1, out=out
    )
    return out[0]


def bootstrap_layout(
    layout: WalkLayout,
    *,
    slots: np.ndarray,
    odds: float,
    n_resamples: int,
    seed: int | np.random.SeedSequence,
    strata: Any = None,
    batch_size: int | None = None,
    n_threads: int = 1,
    progress: Callable[[int, int], None] | None = None,
    multiplicity: np.ndarray | None = None,
    reweight: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]] | None = None,
) -> LayoutBootstrap:
    """Point estimates and paired bootstrap replicates of every output of ``layout``.

    Parameters
    ----------
    layout : WalkLayout
        The evaluation set (:func:`.walk.build_layout`; inputs checked by the caller).
    slots : ndarray of shape (n_metrics,), int64
        :func:`.sums.metric_slots` of the metrics to report.
    odds : float
        Net-benefit odds ``t / (1 - t)``.
    n_resamples : int
        Resamples (>= 1).
    seed : int or numpy.random.SeedSequence
        Resample ``i`` draws with child ``i`` of the seed (:func:`.resampling.resample_seed`).
    strata : array-like of shape (n,) or Strata, optional
        ``within_group`` strata (:func:`.resampling.strata_for`); None is ``population``.
    batch_size : int, optional
        Resamples per batch; results do not depend on it.
    n_threads : int, default 1
        Threads of the draws and of the kernel; results do not depend on it.
    progress : callable, optional
        ``progress(done, total)`` after each batch.
    multiplicity : ndarray of shape (n,), int, optional
        When the layout's rows are units (:mod:`.units`), the rows each stands for: the resamples are
        then multinomial unit counts (the row bootstrap in distribution) and ``strata`` are the units'.
    reweight : callable, optional
        Weights re-estimated on every resample (the audit's population margins, :mod:`disaggregated_eval.audit.
        selection_table`): ``reweight(counts)`` takes each row's (or unit's) count in each resample of a batch,
        float64 of shape (B, n), and returns ``(factors, undefined)``: the counts times each row's weight on that
        resample relative to its weight in the layout, shape (B, n), and a bool (B,) of resamples on which the
        weights are undefined (their replicates are NaN). The point estimates keep the layout's weights.

    Returns
    -------
    LayoutBootstrap
    """
    n = layout.n
    prepared_strata = make_strata(strata, n)
    n_out, n_thr, n_q = layout.n_outputs, layout.n_thresholds, slots.shape[0]
    with numba_threads(n_threads):
        point = point_estimates(layout, slots=slots, odds=odds, multiplicity=multiplicity)
    replicates = np.empty((n_resamples, n_out, n_thr, n_q))
    counts = multiplicity is not None

    def kernel(draws: np.ndarray, start: int, stop: int) -> None:
        undefined = None
        if reweight is not None:  # each resample's counts times its own weights (float counts)
            tallied = draws.astype(np.float64) if counts else _tallies(draws, n)
            draws, undefined = reweight(tallied)
        run_kernel(
            layout,
            draws,
            from_counts=counts or reweight is not None,
            slots=slots,
            odds=odds,
            n_threads=n_threads,
            out=replicates[start:stop],
        )
        if undefined is not None and undefined.any():
            replicates[start:stop][undefined] = np.nan

    if batch_size is None:
        batch_size = default_batch_size(n, n_out * n_thr * n_q)
    run_batches(
        kernel,
        n=n,
        n_resamples=n_resamples,
        seed=seed,
        strata=prepared_strata,
        batch_size=batch_size,
        n_threads=n_threads,
        progress=progress,
        multiplicity=multiplicity,
    )
    return LayoutBootstrap(point=point, replicates=replicates)


def _tallies(draws: np.ndarray, n: int) -> np.ndarray:
    """How often each of ``n`` rows is drawn in each resample of a batch of drawn row indices (B, m): (B, n)."""
    batch = draws.shape[0]
    flat = (np.arange(batch, dtype=np.int64)[:, None] * n + draws).ravel()
    return np.bincount(flat, minlength=batch * n).reshape(batch, n).astype(np.float64)


# ----------------------------------------------------------------------------------------------
# The library's API: weighted evaluations
# ----------------------------------------------------------------------------------------------


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
        float64 metrics on each resample; NaN where undefined.
    """

    metrics: tuple[str, ...]
    point: np.ndarray
    replicates: np.ndarray


def _checked_weights(weights: Any, n: int, name: str) -> np.ndarray:
    """Checked float64 weights; an array that is already float64 and 1-d is used without a copy."""
    checked = check_weights(weights, n, name)
    if isinstance(weights, np.ndarray) and weights.dtype == np.float64 and weights.ndim == 1:
        return weights
    return checked


def evaluation_layout(
    y: np.ndarray,
    scores: Mapping[str, np.ndarray],
    evaluations: Sequence[Evaluation],
    *,
    metrics: Sequence[str],
    thresholds: Sequence[float],
) -> tuple[WalkLayout, np.ndarray]:
    """The walk layout of weighted evaluations (one stream per evaluation), inputs trusted.

    Returns
    -------
    layout : WalkLayout
    rows : ndarray of shape (n_evaluations,), int64
        Output row of each evaluation.
    """
    keys = [e.score for e in evaluations]
    models = list(dict.fromkeys(keys))
    n = y.shape[0]
    parts = []
    members_of = []
    for model in models:
        members = [e for e, key in enumerate(keys) if key == model]
        members_of.append(members)
        block = np.stack([evaluations[e].weights for e in members], axis=1)
        parts.append(
            ModelStreams(
                scores=scores[model],
                weights=block,
                codes=np.zeros((n, 0), dtype=np.int32),
                streams=tuple(Stream(weight=c) for c in range(len(members))),
            )
        )
    layout = build_layout(y, parts, thresholds=thresholds, terms=terms_for(metrics))
    rows = np.empty(len(evaluations), dtype=np.int64)
    for m, members in enumerate(members_of):
        for c, e in enumerate(members):
            rows[e] = layout.output_index[(m, c, 0, 0)]
    return layout, rows


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
        Root of the resamples' seeds; resample ``i`` uses child ``i``
        (:func:`disaggregated_eval.engine.resampling.resample_seed`).
    metrics : sequence of str, default=METRICS
        Metric names from :data:`~disaggregated_eval.vocabulary.METRICS`.
    threshold : float, default=0.5
        Classification threshold in (0, 1), ``yhat = 1[score >= threshold]``.
    preference_threshold : float, default=0.5
        Preference threshold of the net benefit, in (0, 1).
    strata : array-like of shape (n_samples,), optional
        ``None`` (default): the ``population`` scheme, every resample draws ``n`` rows from all
        rows. Non-negative integer codes: the ``within_group`` scheme, every stratum draws as many
        rows as it has from its own rows.
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
    names = check_metric_names(metrics)
    threshold = check_open_unit(threshold, "threshold")
    preference_threshold = check_open_unit(preference_threshold, "preference_threshold")
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    n_threads = check_positive_int(n_threads, "n_threads")
    numba_threads(n_threads)  # checks the upper bound
    if batch_size is not None:
        batch_size = check_positive_int(batch_size, "batch_size")
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable(done, total) or None; got {progress!r}")
    seed = as_seed_sequence(seed)
    y = check_labels(y, "y")
    n = y.shape[0]
    if n == 0:
        raise ValueError("y is empty; the bootstrap needs at least one test row")
    prepared_strata = make_strata(strata, n)
    if not isinstance(scores, Mapping):
        raise TypeError(f"scores must be a mapping of model name to scores; got {type(scores).__name__}")
    if isinstance(evaluations, Evaluation):
        raise TypeError("evaluations must be a sequence of Evaluation, not a single Evaluation")
    evaluations = list(evaluations)
    if not evaluations:
        raise ValueError("evaluations is empty; give at least one Evaluation")
    checked_evaluations = []
    for e, evaluation in enumerate(evaluations):
        if not isinstance(evaluation, Evaluation):
            raise TypeError(f"evaluations[{e}] must be an Evaluation; got {type(evaluation).__name__}")
        if evaluation.score not in scores:
            raise ValueError(
                f"evaluations[{e}].score {evaluation.score!r} is not a key of scores; expected one of {sorted(scores)}"
            )
        checked_evaluations.append(
            Evaluation(evaluation.score, _checked_weights(evaluation.weights, n, f"evaluations[{e}].weights"))
        )
    keys = dict.fromkeys(e.score for e in checked_evaluations)
    checked = {key: check_scores(scores[key], n, f"scores[{key!r}]") for key in keys}
    return bootstrap_checked(
        y,
        checked,
        checked_evaluations,
        n_resamples=n_resamples,
        seed=seed,
        metrics=names,
        threshold=threshold,
        preference_threshold=preference_threshold,
        strata=prepared_strata,
        batch_size=batch_size,
        n_threads=n_threads,
        progress=progress,
    )


def bootstrap_checked(
    y: np.ndarray,
    scores: Mapping[str, np.ndarray],
    evaluations: Sequence[Evaluation],
    *,
    n_resamples: int,
    seed: np.random.SeedSequence,
    metrics: tuple[str, ...],
    threshold: float,
    preference_threshold: float,
    strata: Any = None,
    batch_size: int | None = None,
    n_threads: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> BootstrapResult:
    """:func:`bootstrap_evaluations` for a caller that has checked every argument (no validation).

    The internal entry point of the library's public functions (e.g.
    :func:`disaggregated_eval.evaluation.controlled_evaluation`), which validate their inputs once,
    as scikit-learn's ``prefer_skip_nested_validation`` skips nested checks. Arguments as
    :func:`bootstrap_evaluations`, already checked: float64 0/1 labels, float64 scores in [0, 1],
    float64 weights >= 0 of the right length, known metric names, thresholds in (0, 1).
    """
    layout, rows = evaluation_layout(y, scores, evaluations, metrics=metrics, thresholds=(threshold,))
    odds = preference_threshold / (1.0 - preference_threshold)
    result = bootstrap_layout(
        layout,
        slots=metric_slots(metrics),
        odds=odds,
        n_resamples=n_resamples,
        seed=seed,
        strata=strata,
        batch_size=batch_size,
        n_threads=n_threads,
        progress=progress,
    )
    return BootstrapResult(
        metrics=tuple(metrics), point=result.point[rows, 0, :], replicates=result.replicates[:, rows, 0, :]
    )
