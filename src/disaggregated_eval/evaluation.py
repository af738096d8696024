"""Controlled disaggregated evaluation as tidy tables.

For every model, this module asks the bootstrap engine (:mod:`disaggregated_eval.engine`) for

* the **absolute** metric of every subgroup and of the whole population (unweighted);
* the **weighted population metric** ``M_a``: the metric over *all* test rows weighted by
  ``P(A = a | V)``, for each control variable ``V`` (paper section 4.2, Supplementary A.1);
* the **shared-space** subgroup metric of Cai et al.: the rows of subgroup ``a`` weighted by
  ``(1 - p) / (pi_a (1 - p) + (1 - pi_a) p)`` with ``p = P(A = a | V)`` and ``pi_a`` the share of
  subgroup ``a`` in the test set (paper A.1, subgroup ``a`` against the rest);

all on the same bootstrap resamples (a paired bootstrap), and derives from the per-resample values

* the **controlled difference** ``T_a = metric(A = a) - M_a`` (paper Algorithms 1 and 2), and
* the **relative** performance ``metric(model) - metric(reference model)`` (paper Figure B1),

each with its own percentile interval. With ``V = none``, ``M_a`` is the plain population metric and
``T_a`` the gap between a subgroup and the population.

:func:`controlled_evaluation` runs four named steps: :func:`_check_inputs` (every argument, before
any work), :func:`_build_evaluations` (the weighted evaluations handed to the engine),
:func:`_derive_quantities` (each reported quantity as one evaluation, or the difference of two) and
:func:`_summarise` (point estimates and percentile intervals as a tidy frame); the bootstrap runs
between the second and the third. The resampling schemes and which comparison uses which are
described in ``docs/method.md``, "Bootstrap".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from . import vocabulary
from .derived import Replicated, difference, summarise
from .engine.bootstrap import BootstrapResult, Evaluation, bootstrap_checked
from .engine.resampling import as_seed_sequence, numba_threads, strata_for
from .memory import (
    SUMMARY_CHUNK_VALUES,
    check_replicate_memory,
    default_memory_limit_mb,
    evaluations_per_model,
    replicate_memory_bytes,
)
from .metrics import check_metric_names
from .validation import (
    brief,
    check_choice,
    check_columns,
    check_group_codes,
    check_labels,
    check_length,
    check_open_unit,
    check_positive_int,
    check_scores,
    check_unique_labels,
    check_weights,
    repeated,
)
from .weight_table import KEY_COLUMNS, shared_space_weights, weight_matrix

__all__ = [
    "CONTROLS",
    "TIDY_COLUMNS",
    "check_replicate_memory",
    "controlled_evaluation",
    "controlled_weight_columns",
    "evaluations_per_model",
    "replicate_memory_bytes",
    "shared_space_weights",
    "weight_matrix",
]

#: Control variables ``V`` in the order the paper plots them (one home: :mod:`.vocabulary`).
CONTROLS: tuple[str, ...] = vocabulary.CONTROLS

#: Columns of the tidy metrics table, in order.
TIDY_COLUMNS = (
    "study",
    "dataset",
    "model",
    "reference",
    "comparison",
    "control",
    "weight_source",
    "group",
    "metric",
    "estimate",
    "ci_low",
    "ci_high",
    "n_resamples",
    "n_undefined",
    "caveat",
)

_OVERALL = vocabulary.OVERALL


@dataclass(frozen=True)
class _Key:
    model: str
    comparison: str
    control: str
    weight_source: str
    group: str
    reference: str = ""


@dataclass(frozen=True)
class _Inputs:
    """Checked arguments of :func:`controlled_evaluation`."""

    y: np.ndarray  # (n,) float64 0/1
    groups: np.ndarray  # (n,) int64 codes 0..K-1
    scores: dict[str, np.ndarray]  # model -> (n,) float64 in [0, 1], in the caller's order
    group_labels: list[str]
    relative_to: dict[str, str]
    controls: tuple[str, ...]
    sources: list[str]  # weight sources present in the weight table (sorted)
    metrics: tuple[str, ...]
    sample_weight: np.ndarray | None = None  # (n,) float64 >= 0, or None (all rows weigh 1)
    strata: np.ndarray | None = None  # (n,) int64 codes of the within_group strata, or None

    @property
    def n(self) -> int:
        return self.y.shape[0]

    @property
    def k(self) -> int:
        return len(self.group_labels)

    @property
    def models(self) -> list[str]:
        return list(self.scores)

    @property
    def weight_controls(self) -> list[str]:
        return [c for c in self.controls if c != "none"]


# ----------------------------------------------------------------------------------------------
# Step 1: check every argument before any work
# ----------------------------------------------------------------------------------------------


def _check_inputs(
    y: Any,
    groups: Any,
    scores: Any,
    *,
    weights: pd.DataFrame | None,
    group_labels: Any,
    relative_to: Any,
    controls: Any,
    metrics: Any,
    sample_weight: Any = None,
    strata: Any = None,
) -> _Inputs:
    """Validate the arguments of :func:`controlled_evaluation`; errors name the bad value."""
    metrics = check_metric_names(metrics)
    labels = check_unique_labels(group_labels, "group_labels", reserved=(_OVERALL,))
    if len(labels) < 2:
        raise ValueError(f"group_labels must name at least 2 subgroups; got {labels}")
    y = check_labels(y, "y")
    n = y.shape[0]
    if n == 0:
        raise ValueError("y is empty; controlled_evaluation needs at least one test row")
    codes = check_group_codes(groups, "groups", n_groups=len(labels))
    check_length(codes, n, "groups")
    counts = np.bincount(codes, minlength=len(labels))
    absent = [labels[a] for a in np.flatnonzero(counts == 0)]
    if absent:
        raise ValueError(f"every subgroup needs test rows; no rows for {absent}")

    if not isinstance(scores, Mapping):
        raise TypeError(
            f"scores must be a mapping of model name to scores, e.g. {{'x': array}}; got {type(scores).__name__}"
        )
    if not scores:
        raise ValueError("scores must map at least one model name to its scores")
    checked = {str(name): check_scores(s, n, f"scores[{name!r}]") for name, s in scores.items()}

    if relative_to is None:
        relative_to = {}
    if not isinstance(relative_to, Mapping):
        raise TypeError(f"relative_to must be a mapping {{model: reference}} or None; got {type(relative_to).__name__}")
    for model, reference in relative_to.items():
        for name in (model, reference):
            if name not in checked:
                raise ValueError(f"relative_to names model {name!r}, which is not in scores {sorted(checked)}")

    has_weights = weights is not None and len(weights) > 0
    if controls is None:
        present = set(weights["control"]) if has_weights and "control" in weights.columns else set()
        controls = ("none",) + tuple(c for c in CONTROLS[1:] if c in present)
    if isinstance(controls, str):
        raise TypeError(f"controls must be a sequence of control names, not a string; got {controls!r}")
    controls = tuple(controls)
    for control in controls:
        check_choice(control, "controls", CONTROLS)
    twice = sorted(repeated(controls))
    if twice:
        raise ValueError(f"controls must be distinct; {twice} appear more than once in {brief(list(controls))}")
    weighted = [c for c in controls if c != "none"]
    if weighted and not has_weights:
        raise ValueError(f"controls {weighted} need a weight table (weights is empty or None)")
    sources: list[str] = []
    if has_weights:
        check_columns(weights, KEY_COLUMNS, "weights")
        sources = sorted(set(weights["weight_source"]))
    if sample_weight is not None:
        sample_weight = check_weights(sample_weight, n, "sample_weight")
        empty = [labels[a] for a in range(len(labels)) if not (sample_weight[codes == a] > 0).any()]
        if empty:
            raise ValueError(f"every subgroup needs rows of positive sample_weight; none for {empty}")
    if strata is not None:
        strata = check_group_codes(strata, "strata", max_code=np.iinfo(np.int32).max)
        check_length(strata, n, "strata")
    return _Inputs(
        y=y,
        groups=codes,
        scores=checked,
        group_labels=labels,
        relative_to=dict(relative_to),
        controls=controls,
        sources=sources,
        metrics=metrics,
        sample_weight=sample_weight,
        strata=strata,
    )


# ----------------------------------------------------------------------------------------------
# Step 2: the weighted evaluations of every model
# ----------------------------------------------------------------------------------------------


def controlled_weight_columns(
    p: np.ndarray, groups: np.ndarray, *, sample_weight: np.ndarray | None = None, shared_space: bool = True
) -> tuple[np.ndarray, np.ndarray | None]:
    """The weight columns of the weighted population metrics ``M_a`` and of the shared-space metrics.

    Parameters
    ----------
    p : ndarray of shape (n_rows, n_groups)
        ``P(A = a | V)`` of every row (trusted: in [0, 1]); rows outside the evaluated population
        (``groups == -1``) must have 0.
    groups : ndarray of shape (n_rows,), int
        Subgroup code ``0 .. n_groups - 1`` of each row, or -1 for a row outside the evaluated
        population (e.g. a level too small to cross-fit, left out of an audit's family).
    sample_weight : ndarray of shape (n_rows,), optional
        Row weights; every column is multiplied by them.
    shared_space : bool, default True
        Also return the shared-space columns.

    Returns
    -------
    weighted_population : ndarray of shape (n_rows, n_groups)
        Column ``a``: ``w P(A = a | V)`` (paper section 4.2): the whole evaluated population
        re-weighted towards subgroup ``a``'s distribution of ``V``.
    shared_space : ndarray of shape (n_rows, n_groups) or None
        Column ``a``: the Cai et al. weights of subgroup ``a`` against the rest
        (:func:`disaggregated_eval.weight_table.shared_space_weights`, ``pi_a`` the subgroup's
        sample-weighted share of the evaluated population), times ``w``; None without ``shared_space``.
    """
    n, k = p.shape
    row_weight = np.ones(n) if sample_weight is None else sample_weight
    inside = groups >= 0
    total = row_weight[inside].sum() if not inside.all() else row_weight.sum()
    population = np.empty((n, k))
    space = np.empty((n, k)) if shared_space else None
    for a in range(k):
        population[:, a] = p[:, a] if sample_weight is None else p[:, a] * sample_weight
        if shared_space:
            in_group = groups == a
            # pi_a of the shared-space weights: the subgroup's (sample-weighted) share of the rows.
            share = float(row_weight[in_group].sum() / total)
            w = shared_space_weights(p[:, a], in_group, share)
            space[:, a] = w if sample_weight is None else w * sample_weight
    return population, space


def _build_evaluations(
    inputs: _Inputs, weights: pd.DataFrame | None, *, shared_space: bool
) -> tuple[list[Evaluation], dict[_Key, int]]:
    """Evaluations handed to the engine, and the index of each one by its key.

    Per model, in this order: overall, each subgroup (0/1 masks), then per weight source and
    control with weights, per subgroup, ``M_a`` (weights ``P(A = a | V)``) and the shared-space
    metric. The order fixes the engine's output layout (and so the tables' row order).
    """
    evaluations: list[Evaluation] = []
    index: dict[_Key, int] = {}
    columns: dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray | None]] = {}
    in_group = [inputs.groups == a for a in range(inputs.k)]

    def add(key: _Key, model: str, w: np.ndarray) -> None:
        index[key] = len(evaluations)
        evaluations.append(Evaluation(score=model, weights=np.ascontiguousarray(w, dtype=np.float64)))

    ones = np.ones(inputs.n) if inputs.sample_weight is None else inputs.sample_weight
    for m in inputs.models:
        add(_Key(m, "absolute", "none", "none", _OVERALL), m, ones)
        for a, label in enumerate(inputs.group_labels):
            mask = in_group[a].astype(np.float64)
            add(_Key(m, "absolute", "none", "none", label), m, mask if inputs.sample_weight is None else mask * ones)
        for source in inputs.sources:
            for control in inputs.weight_controls:
                # X and Y weights do not depend on the model: extract and check them once.
                key = (source, control, m if control == "R" else "*")
                if key not in columns:
                    p = weight_matrix(
                        weights, weight_source=source, control=control, model=m, n_rows=inputs.n, n_groups=inputs.k
                    )
                    columns[key] = controlled_weight_columns(
                        p, inputs.groups, sample_weight=inputs.sample_weight, shared_space=shared_space
                    )
                population, space = columns[key]
                for a, label in enumerate(inputs.group_labels):
                    add(_Key(m, "weighted_population", control, source, label), m, population[:, a])
                    if shared_space:
                        add(_Key(m, "shared_space", control, source, label), m, space[:, a])
    return evaluations, index


# ----------------------------------------------------------------------------------------------
# Step 3: every reported quantity as an evaluation or a difference of two
# ----------------------------------------------------------------------------------------------


def _derive_quantities(inputs: _Inputs, index: dict[_Key, int]) -> tuple[list[_Key], np.ndarray, np.ndarray]:
    """Keys of the reported quantities and, for each, the evaluation it adds (``plus``) and the
    one it subtracts (``minus``, ``-1`` for none).

    Order: every evaluation itself; then per model and subgroup ``M_a`` and ``T_a`` for ``V =
    none`` (population metric; subgroup minus population) and ``T_a`` for each weight source and
    control (subgroup minus ``M_a``); then the relative comparisons (model minus reference, overall
    and per subgroup).
    """
    keys: list[_Key] = []
    plus: list[int] = []
    minus: list[int] = []

    def emit(key: _Key, i: int, j: int = -1) -> None:
        keys.append(key)
        plus.append(i)
        minus.append(j)

    for key, i in index.items():
        emit(key, i)
    for m in inputs.models:
        overall = index[_Key(m, "absolute", "none", "none", _OVERALL)]
        for label in inputs.group_labels:
            subgroup = index[_Key(m, "absolute", "none", "none", label)]
            if "none" in inputs.controls:
                emit(_Key(m, "weighted_population", "none", "none", label), overall)
                emit(_Key(m, "controlled_difference", "none", "none", label), subgroup, overall)
            for source in inputs.sources:
                for control in inputs.weight_controls:
                    ma = index[_Key(m, "weighted_population", control, source, label)]
                    emit(_Key(m, "controlled_difference", control, source, label), subgroup, ma)
    for m, ref in inputs.relative_to.items():
        for label in (_OVERALL, *inputs.group_labels):
            emit(
                _Key(m, "relative", "none", "none", label, reference=ref),
                index[_Key(m, "absolute", "none", "none", label)],
                index[_Key(ref, "absolute", "none", "none", label)],
            )
    return keys, np.asarray(plus, dtype=np.int64), np.asarray(minus, dtype=np.int64)


# ----------------------------------------------------------------------------------------------
# Step 4: point estimates and percentile intervals as a tidy frame
# ----------------------------------------------------------------------------------------------


def _summarise(
    result: BootstrapResult,
    keys: list[_Key],
    plus: np.ndarray,
    minus: np.ndarray,
    confidence: float,
    study: str,
    dataset: str,
) -> pd.DataFrame:
    """Tidy table: the full-sample value of each quantity, its percentile interval and its caveat."""
    metrics = list(result.metrics)
    n_metrics = len(metrics)
    n_resamples = result.replicates.shape[0]
    base = Replicated(point=result.point, replicates=result.replicates)
    estimate = np.empty((len(keys), n_metrics))
    lows = np.empty_like(estimate)
    highs = np.empty_like(estimate)
    undefined = np.empty(estimate.shape, dtype=np.int64)
    caveat = np.empty(estimate.shape, dtype=object)
    # Chunk over quantities so that the (n_resamples, chunk, n_metrics) differences stay small
    # (SUMMARY_CHUNK_VALUES values); each quantity's interval does not depend on the chunking.
    chunk = max(1, SUMMARY_CHUNK_VALUES // max(1, n_resamples * n_metrics))
    for start in range(0, len(keys), chunk):
        sl = slice(start, start + chunk)
        summary = summarise(difference(base, plus[sl], minus[sl]), confidence=confidence)
        estimate[sl], lows[sl], highs[sl] = summary.estimate, summary.low, summary.high
        undefined[sl], caveat[sl] = summary.n_undefined, summary.caveat
    q = len(keys)
    return pd.DataFrame(
        {
            "study": study,
            "dataset": dataset,
            "model": np.repeat([k.model for k in keys], n_metrics),
            "reference": np.repeat([k.reference for k in keys], n_metrics),
            "comparison": np.repeat([k.comparison for k in keys], n_metrics),
            "control": np.repeat([k.control for k in keys], n_metrics),
            "weight_source": np.repeat([k.weight_source for k in keys], n_metrics),
            "group": np.repeat([k.group for k in keys], n_metrics),
            "metric": np.tile(metrics, q),
            "estimate": estimate.ravel(),
            "ci_low": lows.ravel(),
            "ci_high": highs.ravel(),
            "n_resamples": n_resamples,
            "n_undefined": undefined.ravel(),
            "caveat": caveat.ravel().astype(str),
        },
        columns=list(TIDY_COLUMNS),
    )


def _strata(inputs: _Inputs, resampling: str) -> np.ndarray | None:
    """Strata of the resamples (:func:`disaggregated_eval.engine.resampling.strata_for`): the given
    strata, else the subgroups."""
    return strata_for(resampling, inputs.groups if inputs.strata is None else inputs.strata)


# ----------------------------------------------------------------------------------------------
# The public entry point
# ----------------------------------------------------------------------------------------------


def controlled_evaluation(
    y: np.ndarray,
    groups: np.ndarray,
    scores: Mapping[str, np.ndarray],
    *,
    weights: pd.DataFrame | None,
    group_labels: Sequence[str],
    relative_to: Mapping[str, str] | None = None,
    controls: Sequence[str] | None = None,
    metrics: Sequence[str] = vocabulary.PIPELINE_METRICS,
    n_resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int | np.random.SeedSequence,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
    shared_space: bool = True,
    resampling: str = "population",
    strata: np.ndarray | None = None,
    sample_weight: np.ndarray | None = None,
    memory_limit_mb: float | None = None,
    batch_size: int | None = None,
    n_threads: int = 1,
    study: str = "",
    dataset: str = "",
    progress: Callable[[int, int], None] | None = None,
) -> pd.DataFrame:
    """Disaggregated and controlled evaluation of several models with paired bootstrap intervals.

    Parameters
    ----------
    y : ndarray of shape (n_samples,)
        Binary labels (0/1) of the test rows.
    groups : ndarray of shape (n_samples,)
        Subgroup codes ``0 .. K-1`` (``K = len(group_labels)``); every subgroup must have rows.
    scores : mapping of str to ndarray of shape (n_samples,)
        Scores in [0, 1] of each model (e.g. ``{"x": ..., "xa": ...}``).
    weights : pandas.DataFrame or None
        Long weight table ``weight_source, control, model, row, p_0 .. p_{K-1}`` holding
        ``P(A = k | V)`` per test row (:mod:`disaggregated_eval.weight_table`,
        ``docs/design.md``); X and Y weights have ``model == "*"``, R weights one block per model.
        May mix weight sources (``estimated``, ``oracle``). ``None`` allows only
        ``controls=("none",)``.
    group_labels : sequence of str
        Display label of each subgroup code: distinct, non-empty, and not ``"overall"`` (which
        labels the whole population).
    relative_to : mapping of str to str, optional
        ``{model: reference}`` pairs for the relative comparison ``metric(model) -
        metric(reference)`` (paper Figure B1), e.g. ``{"xa": "x", "xa_stratified": "x"}``.
    controls : sequence of str, optional
        Control variables among ``("none", "X", "Y", "R")``. By default ``none`` plus every control
        present in ``weights``.
    metrics : sequence of str, default ``vocabulary.PIPELINE_METRICS``
        Metric names of :data:`disaggregated_eval.metrics.METRICS`; the default is the eight of
        the paper's tables (Supplementary A.3 plus the predicted-positive rate).
    n_resamples : int
        Bootstrap resamples (paper: 10,000).
    confidence : float
        Level of the percentile intervals, in (0, 1).
    seed : int or numpy.random.SeedSequence
        Seed of the resamples; the same seed gives bit-identical tables.
    threshold, preference_threshold : float
        Decision threshold of ``Yhat`` and the net-benefit preference threshold (paper: 0.5).
    shared_space : bool
        Also report the Cai et al. shared-space weighted subgroup metrics.
    resampling : {"population", "within_group"}, default "population"
        Bootstrap scheme (``vocabulary.RESAMPLING_SCHEMES``; ``docs/method.md``, "Bootstrap").
        ``population`` resamples the whole test set, so subgroup sizes vary across resamples;
        ``within_group`` resamples each subgroup's rows within the subgroup, so its size is fixed.
        Either way every quantity is computed on the same resamples (paired).
    strata : ndarray of shape (n_samples,), optional
        Integer codes of the strata of ``within_group`` resampling, when they are not the subgroups
        (e.g. the intersection cells of several attributes, so that every slice of a practitioner's
        audit keeps its size; ``docs/audit.md``). Only allowed with ``resampling="within_group"``.
    sample_weight : ndarray of shape (n_samples,), optional
        Row weights (finite, >= 0; survey or frequency weights). Every evaluation's weights are
        multiplied by them: the absolute metrics become sample-weighted, ``M_a`` uses
        ``w P(A = a | V)``, and the shared-space weights use the sample-weighted subgroup share
        ``pi_a``. Default: every row weighs 1.
    memory_limit_mb : float, optional
        Raise before the bootstrap when :func:`replicate_memory_bytes` exceeds this many megabytes
        (e.g. the job's ``mem_mb``); by default the limit is
        :func:`disaggregated_eval.memory.default_memory_limit_mb` (80% of the machine's memory).
    batch_size, n_threads, progress
        Passed to :func:`disaggregated_eval.engine.bootstrap_evaluations`; results do not
        depend on ``batch_size`` or ``n_threads``.
    study, dataset : str
        Identifiers copied into the table (e.g. ``"simulation"`` and the setting id, or ``"acs"``
        and the task id).

    Returns
    -------
    pandas.DataFrame
        Tidy table with the columns :data:`TIDY_COLUMNS`: one row per (model, comparison, control,
        weight source, group, metric). ``comparison`` is one of ``"absolute"`` (unweighted metric of
        a subgroup or ``"overall"``), ``"weighted_population"`` (``M_a``),
        ``"controlled_difference"`` (``T_a``), ``"shared_space"`` (Cai et al.) and ``"relative"``
        (``model - reference``); ``weight_source`` is ``"none"`` for unweighted quantities.
        ``estimate`` is the value on the full test set (not the bootstrap mean); ``ci_low`` /
        ``ci_high`` the percentile interval over the resamples where the quantity is defined;
        ``n_undefined`` the number of resamples where it is not; ``caveat`` is ``""``, ``"undefined"``
        (the estimate itself is NaN, e.g. precision without predicted positives) or
        ``"degenerate"`` (every resample gives one value, so the interval has zero width and is no
        evidence of anything; e.g. a controlled difference that is 0 by construction).

    Raises
    ------
    ValueError
        If labels, groups, group labels, scores, weights, controls, metrics, model names or the
        resampling scheme are invalid or inconsistent (the message names the offending value), or
        the replicates would exceed ``memory_limit_mb``. All checks run before the bootstrap.
    TypeError
        If ``scores`` or ``relative_to`` is not a mapping, or ``controls`` is a single string.

    Notes
    -----
    Weights are treated as fixed and travel with their rows (paper Supplementary A.3). With
    ``resampling="population"`` the resampling of ``M_a`` and ``T_a`` is the paper's (the whole
    test set, Algorithms 1 and 2); the authors' code resamples the per-subgroup absolute and
    relative metrics within the subgroup instead, which ``resampling="within_group"`` reproduces
    (``docs/method.md``, "Bootstrap", explains which the pipeline uses and why). Source: paper
    section 4.2, Algorithms 1-2, Supplementary A.1 and A.3.
    """
    inputs = _check_inputs(
        y,
        groups,
        scores,
        weights=weights,
        group_labels=group_labels,
        relative_to=relative_to,
        controls=controls,
        metrics=metrics,
        sample_weight=sample_weight,
        strata=strata,
    )
    confidence = check_open_unit(confidence, "confidence")
    threshold = check_open_unit(threshold, "threshold")
    preference_threshold = check_open_unit(preference_threshold, "preference_threshold")
    seed = as_seed_sequence(seed)
    resampling = check_choice(resampling, "resampling", vocabulary.RESAMPLING_SCHEMES)
    if inputs.strata is not None and resampling != "within_group":
        raise ValueError(f"strata are only used with resampling='within_group'; got resampling={resampling!r}")
    n_resamples = check_positive_int(n_resamples, "n_resamples")
    if batch_size is not None:
        check_positive_int(batch_size, "batch_size")
    n_threads = check_positive_int(n_threads, "n_threads")
    numba_threads(n_threads)  # checks the upper bound
    if progress is not None and not callable(progress):
        raise TypeError(f"progress must be callable(done, total) or None; got {progress!r}")
    check_replicate_memory(
        n_models=len(inputs.models),
        n_groups=inputs.k,
        n_controls=len(inputs.weight_controls),
        n_weight_sources=len(inputs.sources),
        n_metrics=len(inputs.metrics),
        n_resamples=n_resamples,
        mem_mb=default_memory_limit_mb() if memory_limit_mb is None else memory_limit_mb,
        shared_space=shared_space,
        limit="memory_limit_mb"
        if memory_limit_mb is not None
        else "the default memory_limit_mb (80% of this machine's memory)",
    )

    evaluations, index = _build_evaluations(inputs, weights, shared_space=shared_space)
    result = bootstrap_checked(
        inputs.y,
        inputs.scores,
        evaluations,
        n_resamples=n_resamples,
        seed=seed,
        metrics=inputs.metrics,
        threshold=threshold,
        preference_threshold=preference_threshold,
        strata=_strata(inputs, resampling),
        batch_size=batch_size,
        n_threads=n_threads,
        progress=progress,
    )
    keys, plus, minus = _derive_quantities(inputs, index)
    return _summarise(result, keys, plus, minus, confidence, study, dataset)
