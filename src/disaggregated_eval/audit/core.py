"""``audit``: disaggregated and controlled evaluation of a table of predictions, in one call.

The steps, each in its own module:

1. check and code the options and the frame (:mod:`.inputs`; :class:`AuditInputError` before any work);
2. enumerate the slices (:mod:`.slices`) and plan the controlled evaluation (:mod:`.controlled`);
3. cross-fit the weights ``P(A | V)`` of the controlled evaluation (:mod:`.controlled`);
4. ONE paired bootstrap, on the library's engine, of every metric of every model on every slice, on
   its complement and on every weighted population (:mod:`.estimates`);
5. the slices table: estimates, percentile intervals, minimum-size rules (:mod:`.withheld`),
   simultaneous bands (:mod:`disaggregated_eval.intervals`);
6. the comparisons table: paired intervals, permutation p-values, adjusted p-values
   (:mod:`.comparison_families`, :mod:`.comparison_tests`, :mod:`.comparisons`, :mod:`disaggregated_eval.engine.permutation`);
7. the controlled table: ``M_a``, ``T_a`` and shared-space metrics per attribute and control
   variable (:mod:`.controlled`), derived from the same replicates.

See ``docs/audit.md`` for the definitions and the columns.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from .. import seeds, vocabulary
from ..engine.permutation import min_permutations
from ..engine.resampling import UNIT_BLOCK, batch_resamples, strata_for
from ..engine.sums import PROPORTIONS, metric_slots
from ..memory import (
    AuditSize,
    audit_peak_bytes,
    audit_peak_parts,
    check_bytes,
    default_memory_limit_mb,
    memory_limit_origin,
    resident_bytes,
)
from .aggregate import compress_frame
from .analyses import run_analyses
from .columns import LEVEL_TABLES, with_levels
from .comparison_families import adjusted_family_sizes, enumerate_comparisons, family_sizes, pairwise_notes
from .comparison_tests import ComparisonTests, ModelUnits, model_units, plan_tests, test_notes, test_pvalues
from .comparisons import comparison_table
from .controlled import controlled_table
from .controlled_weights import fit_controlled_weights, plan_controlled, weight_notes
from .errors import AuditInputError, AuditWarning
from .estimates import AuditEstimates, estimate_all, n_outputs
from .estimates import n_outputs as n_outputs_of
from .fairness import FAIRNESS_METRICS, missing_fairness_metrics
from .inputs import PERMUTATION_WORK_WARNING, AuditInput, InputSpec, as_pandas, expand_input, prepare_input
from .interval_notes import log_loss_note, small_bootstrap_note
from .options import AuditOptions, ResolvedOptions, min_resamples, resolve_options
from .result import AuditResult
from .selection_table import margin_cells, margin_notes, margin_weights
from .slice_table import jackknife_accelerations, slice_table
from .slices import SlicePlan, plan_slices
from .tallies import SliceTallies, tally_slices
from .withheld import withheld_reasons
from .work_plan import machine_speed, plan_line, work_plan

__all__ = ["audit", "AuditInputError"]

Progress = Callable[[str, int, int], None]
#: Largest size of the bootstrap replicates (every slice, rest and weighted population of every model
#: and metric).
MAX_REPLICATE_BYTES = 4 * 2**30


def _stage(progress: Progress | None, name: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(name, done, total)


def _tell(progress: Progress | None, text: str) -> None:
    """One line for the terminal, when ``progress`` has a ``message(text)`` method (the command line's does)."""
    message = getattr(progress, "message", None)
    if callable(message):
        message(text)


def audit(
    data: pd.DataFrame,
    /,
    *,
    options: AuditOptions | ResolvedOptions | None = None,
    progress: Progress | None = None,
    **kwargs: Any,
) -> AuditResult:
    """Disaggregated and controlled evaluation of predictions held in a data frame.

    Parameters
    ----------
    data : pandas.DataFrame or polars.DataFrame of shape (n_rows, n_columns)
        One row per person (or unit): the label, one score column per model, the protected
        attributes, optionally features (control X) and a sample-weight column (a polars frame is
        converted to pandas at the boundary).
    options : AuditOptions or ResolvedOptions, optional
        All options at once (e.g. from a YAML file). Resolved options
        (:func:`disaggregated_eval.audit.options.resolve_options`, as the command line makes them) are
        used as they are, without a second check.
    progress : callable, optional
        ``progress(stage, done, total)`` during long steps (stages ``bootstrap``, ``permutations``,
        ``weights <attribute> V=<control>``, ``controlled <attribute>``). If it also has a method
        ``message(text)`` (the command line's :class:`.progress.StderrProgress`), it is told in one line
        of a decision taken during the run: ``n_permutations`` raised, and why.
    **kwargs
        Options by name (the fields of :class:`AuditOptions`: ``label``, ``scores``, ``groups``,
        ``intersections``, ``min_group_size``, ``n_resamples``, ``seed``, ``controls``, ...); they
        override the fields of ``options``.

    Returns
    -------
    AuditResult
        The slices, comparisons and controlled tables (``docs/audit.md``), the options used, notes.

    Raises
    ------
    AuditInputError
        Before any computation, for an unknown or invalid option or a bad column: a missing
        column, a label that is not binary, a score outside [0, 1] or NaN, a negative or NaN weight,
        an attribute with one level, a column named twice (the message names the column, the
        offending values and what was expected).

    Notes
    -----
    Slices: overall, each level of each attribute, each intersection cell (up to
    ``intersections`` attributes crossed). Every estimate has a percentile interval from the paired
    bootstrap (``n_resamples`` resamples; all slices, metrics, models and comparisons on the same
    resamples; ``resampling="within_group"`` resamples within each cell of all attributes crossed,
    so slice sizes are fixed). Controlled evaluation: paper section 4.2 and Algorithms 1-2.
    """
    opts = resolve_options(options, kwargs)
    prepared = _prepare(data, InputSpec.from_options(opts))
    if prepared.count is not None and any(c != "none" for c in opts.controls):
        # the weight models P(A | V) are cross-fitted in folds of rows: on the rows the counts stand for
        prepared = expand_input(prepared, reason="the controlled evaluation's cross-fitting of P(A | V)")
    count = prepared.count
    plan = _plan(prepared, opts.intersections)
    margins = margin_cells(prepared, opts.margins, source=opts.population_margins)  # against the data, before any work
    controlled_plan = plan_controlled(
        prepared, plan, controls=opts.controls, crossfit_folds=opts.crossfit_folds, cv_folds=opts.cv_folds
    )  # checks sizes before any work
    # Under population margins every section weighs each row by its sample weight times its cell's margin weight,
    # re-estimated on every resample of the bootstraps (selection_table.MarginWeights); the selection table
    # weights by the margins itself, from the sample weights.
    margin_w = margin_weights(prepared, margins)
    if margin_w is not None:
        prepared = replace(prepared, weight=margin_w.weight)
    sizes = dict(n_models=len(opts.scores), n_metrics=len(opts.metrics), n_resamples=opts.n_resamples,
                 n_outputs=n_outputs(plan, len(opts.scores), controlled_plan.weighted_levels()))  # fmt: skip
    _check_memory(**sizes, confidence=opts.confidence)
    size = audit_size(prepared, plan, controlled_plan, **sizes, metrics=list(opts.metrics), n_threads=opts.n_threads)
    peak_note, peak, limit_mb = _check_peak(prepared, size, memory_limit_mb=opts.memory_limit_mb)
    model_names = list(opts.scores)
    scores = [prepared.scores[m] for m in model_names]
    tallies = tally_slices(plan, prepared.y, scores, prepared.weight, opts.threshold, count)
    comparisons = enumerate_comparisons(
        plan, len(model_names), model_names, pairwise_max_levels=opts.pairwise_max_levels
    )
    metric_ok = np.array(
        [[not (prepared.hard[m] and q in vocabulary.SCORE_METRICS) for q in opts.metrics] for m in model_names]
    )
    n_permutations, raised, units, test_plan = _plan_permutations(
        plan, prepared, scores, tallies, comparisons, metric_ok, metrics=opts.metrics,
        n_permutations=opts.n_permutations, pairwise_max_levels=opts.pairwise_max_levels, adjust=opts.adjust,
        adjust_scope=opts.adjust_scope, confidence=opts.confidence, threshold=opts.threshold,
        test_method=opts.test_method, progress=progress,
    )  # fmt: skip
    if n_permutations != opts.n_permutations:
        opts = replace(opts, n_permutations=n_permutations)  # the record of the options the audit ran with
    notes = list(prepared.notes) + peak_note + list(controlled_plan.notes) + raised
    notes += margin_notes(margins, controlled_plan)
    _tell_plan(progress, size, controlled_plan, plan, model_names, test_plan, prepared, peak=peak, limit_mb=limit_mb)

    metrics = list(opts.metrics)
    slots = metric_slots(metrics)
    odds = opts.preference_odds
    weights = fit_controlled_weights(
        controlled_plan,
        prepared,
        plan,
        grid=opts.max_leaf_nodes,
        cv_folds=opts.cv_folds,
        crossfit_folds=opts.crossfit_folds,
        n_threads=opts.n_threads,
        seed=opts.seed,
        progress=progress,
    )
    notes += weight_notes(weights, plan, model_names)
    seed = seeds.seed_sequence(opts.seed, "audit", "bootstrap")
    estimates = estimate_all(
        plan,
        prepared.y,
        scores,
        prepared.weight,
        weights,
        metrics=metrics,
        slots=slots,
        threshold=opts.threshold,
        odds=odds,
        n_resamples=opts.n_resamples,
        seed=seed,
        strata=strata_for(opts.resampling, plan.cell_codes),
        n_threads=opts.n_threads,
        progress=_stage(progress, "bootstrap"),
        count=count,
        margins=margin_w,
    )
    point = _slice_point(estimates)
    rules = dict(min_group_size=opts.min_group_size, min_denominator=opts.min_denominator)
    reasons, rest_reasons = _reasons(point, tallies, metrics, **rules)
    accelerations = jackknife_accelerations(
        plan,
        prepared.y,
        scores,
        prepared.weight,
        metrics,
        threshold=opts.threshold,
        odds=odds,
        metric_ok=metric_ok,
        count=count,
    )
    slices = slice_table(
        plan, estimates, tallies, accelerations, reasons, metric_ok, model_names, metrics, confidence=opts.confidence
    )
    if "log_loss" in metrics:
        scored = [(name, r) for name, r, ok in zip(model_names, scores, metric_ok[:, metrics.index("log_loss")]) if ok]
        notes += log_loss_note(prepared.y, [r for _, r in scored], prepared.weight, [n for n, _ in scored], count)
    notes += small_bootstrap_note(slices)

    notes += pairwise_notes(plan, pairwise_max_levels=opts.pairwise_max_levels)
    p_values, tests = test_pvalues(
        comparisons,
        plan,
        prepared.y,
        scores,
        prepared.weight,
        model_names,
        tallies,
        estimates,
        metrics=metrics,
        threshold=opts.threshold,
        odds=odds,
        n_permutations=opts.n_permutations,
        seed=opts.seed,
        n_threads=opts.n_threads,
        units=units,
        test_plan=test_plan,
        progress=_stage(progress, "permutations"),
        count=count,
    )
    comparison_frame = comparison_table(
        comparisons,
        estimates,
        tallies,
        p_values,
        tests,
        reasons,
        rest_reasons,
        metric_ok,
        plan=plan,
        model_names=model_names,
        metrics=metrics,
        confidence=opts.confidence,
        adjust_method=opts.adjust,
        adjust_scope=opts.adjust_scope,
        tolerance=opts.parsed_tolerance,
    )
    controlled = controlled_table(
        controlled_plan,
        plan,
        model_names=model_names,
        metrics=metrics,
        controls=opts.controls,
        confidence=opts.confidence,
        estimates=estimates,
        reasons=reasons,
        metric_ok=metric_ok,
        slices=slices,
        comparisons=comparison_frame,
        weights=weights,
    )
    # The analyses after the core tables (audit/analyses.py): fairness summary, calibration per slice,
    # thresholds, detectability, evaluation under selection.
    analyses = run_analyses(
        plan,
        prepared,
        estimates=estimates,
        tallies=tallies,
        reasons=reasons,
        slices=slices,
        comparisons=comparison_frame,
        metric_ok=metric_ok,
        model_names=model_names,
        reasons_for=lambda other, names: _reasons(_slice_point(other), tallies, names, **rules)[0],
        margins=margins,
        margin_weights=margin_w,
        max_bytes=MAX_REPLICATE_BYTES,
        progress=progress,
        references=opts.reference,
        metrics=metrics,
        threshold=opts.threshold,
        preference_threshold=opts.preference_threshold,
        odds=odds,
        n_resamples=opts.n_resamples,
        resampling=opts.resampling,
        seed=opts.seed,
        n_threads=opts.n_threads,
        confidence=opts.confidence,
        tolerance=opts.parsed_tolerance,
        min_group_size=opts.min_group_size,
        min_denominator=opts.min_denominator,
        calibration_bins=opts.calibration_bins,
        thresholds=opts.threshold_values,
        power=opts.power,
        detect_gap=opts.detect_gap,
        adjusted=opts.adjust != "none" and opts.n_permutations > 0,
        gammas=opts.selection_sensitivity,
    )
    # one column per attribute beside ``slice`` in every per-slice table (columns.LEVEL_TABLES)
    tables = {"slices": slices, "comparisons": comparison_frame, "controlled": controlled, **analyses.tables}
    levels, attributes = plan.slice_levels(), [a.name for a in plan.attributes]
    for name in LEVEL_TABLES:
        tables[name] = with_levels(tables[name], levels, attributes)
    return AuditResult(options=opts, notes=notes + analyses.notes, n_rows=prepared.n_rows, **tables)


def _prepare(data: Any, spec: InputSpec) -> AuditInput:
    """The coded input: of the frame's counts table when it has far fewer distinct rows than rows and
    the audit reads no row on its own (:func:`.aggregate.compress_frame`), else of its rows.

    The counts give the audit of the rows (``docs/method.md``, "Frequency weights") with memory that
    follows the distinct rows. A frame whose counts fail a check is checked row by row, so that the
    message names the frame's rows.
    """
    frame = as_pandas(data)
    table = None
    if spec.frequency_weight is None and all(c == "none" for c in spec.controls):
        columns = spec.columns
        if all(c in frame.columns for c in columns) and not frame.columns.duplicated().any():
            table = compress_frame(frame, columns)
    if table is None:
        return prepare_input(frame, spec)
    counted = replace(spec, frequency_weight=table.columns[-1])
    try:
        prepared = prepare_input(table, counted)
    except AuditInputError:
        prepare_input(frame, spec)  # raises with the frame's row numbers
        raise
    note = (
        f"the {len(frame):,} rows were counted as {len(table):,} distinct rows of the audited columns, each with "
        f"its number of rows, before the audit: its results are those of the rows, with memory that follows the "
        f"distinct rows (docs/method.md, 'Frequency weights')"
    )
    return replace(prepared, notes=prepared.notes + (note,))


def _slice_point(estimates: AuditEstimates) -> np.ndarray:
    """Point estimates of every slice (side 0) and rest (side 1), shape (n_models, n_slices, 2, n_metrics)
    (NaN for the rest of ``overall``, which is empty)."""
    rows = estimates.slice_rows
    point = estimates.point[np.maximum(rows, 0)]
    point[rows < 0] = np.nan
    return point


def _plan(prepared: AuditInput, intersections: int) -> SlicePlan:
    try:
        return plan_slices(prepared.attributes, intersections=intersections, count=prepared.count)
    except ValueError as error:
        raise AuditInputError(str(error)) from None


def _check_memory(*, n_models: int, n_metrics: int, n_resamples: int, n_outputs: int, confidence: float) -> None:
    """Refuse, before any work, a bootstrap whose replicates would not fit in memory (``n_outputs``: its
    slices, rests and weighted populations, :func:`.estimates.n_outputs`), naming the most resamples that
    fit when they are enough for ``confidence`` (:func:`.options.min_resamples`), else the other options."""
    outputs = n_outputs
    size = 8 * n_resamples * outputs * n_metrics
    fitting = MAX_REPLICATE_BYTES // (8 * outputs * n_metrics)
    need = min_resamples(confidence)
    if fitting >= need:
        advice = (
            f"give n_resamples {fitting:,} or fewer (--n-resamples {fitting}), or fewer intersections, controls or "
            "metrics"
        )
    else:
        advice = (
            f"even {need:,} resamples (the fewest for {confidence:g} intervals) would not fit: give fewer "
            "intersections (--intersections), controls or metrics"
        )
    check_bytes(
        size,
        MAX_REPLICATE_BYTES,
        what=f"the bootstrap would hold {size / 2**30:.1f} GiB of replicates (n_resamples {n_resamples} x "
        f"{outputs} slices, rests and weighted populations of {n_models} model(s) x {n_metrics} "
        f"metrics x 8 bytes)",
        advice=advice,
        error=AuditInputError,
    )


#: An audit whose estimated peak memory is at least this many bytes says so in a note.
PEAK_NOTE_BYTES = 2**30


def audit_size(
    prepared: AuditInput,
    plan: SlicePlan,
    controlled_plan,
    *,
    n_models: int,
    n_metrics: int,
    n_resamples: int,
    n_outputs: int,
    metrics: list[str] | None = None,
    n_threads: int = 1,
) -> AuditSize:
    """What the audit's memory grows with (:class:`disaggregated_eval.memory.AuditSize`), before any work.

    ``metrics`` (default: ``n_metrics`` metrics that include the fairness summary's) decides whether the
    fairness summary bootstraps its own metrics beside the audit's replicates. With counted data (a table of counts,
    or a file aggregated by DuckDB) the bootstraps resample unit counts in batches of whole blocks of ``UNIT_BLOCK``
    resamples, each block drawn whole by one of ``n_threads`` threads: their buffers grow with the units.
    """
    batch = batch_resamples(prepared.n, n_resamples, counts=True) if prepared.count is not None else 0
    levels = controlled_plan.weighted_levels()
    extra = (
        n_outputs_of(plan, n_models, []) * len(FAIRNESS_METRICS) if metrics and missing_fairness_metrics(metrics) else 0
    )
    return AuditSize(
        n_rows=prepared.n_rows,
        n_units=prepared.n,
        n_models=n_models,
        n_families=len(plan.families),
        n_slices=plan.n_slices,
        n_resamples=n_resamples,
        n_outputs=n_outputs,
        n_metrics=n_metrics,
        n_weight_columns=n_models * 2 * int(sum(levels)),
        fits_weight_models=bool(set(controlled_plan.weighted) & {"X", "R"}),
        n_extra_values=extra,
        count_batch=batch,
        count_drawn=min(n_threads, batch // UNIT_BLOCK) * UNIT_BLOCK,
    )


def _check_peak(
    prepared: AuditInput, size: AuditSize, *, memory_limit_mb: float | None
) -> tuple[list[str], int, float]:
    """Refuse, before any work, an audit whose estimated peak memory exceeds the limit; a note on a large one.

    The estimate (:func:`disaggregated_eval.memory.audit_peak_bytes`) is the memory the process holds now
    (its libraries, the data, the coded input) plus what the work adds, which follows the rows the audit
    holds (the distinct rows when the frame was counted, or given as counts, else every row), the weight
    columns and the replicates. The limit is ``memory_limit_mb``, or 80% of the machine's memory. The terminal
    is told the estimate; the note (deterministic: the same for the same data and options) states what the
    work adds when that is 1 GiB or more.
    """
    parts = audit_peak_parts(size)
    resident = resident_bytes()
    estimate = audit_peak_bytes(size, resident=resident)
    limit_mb = memory_limit_mb if memory_limit_mb is not None else default_memory_limit_mb()
    held = f"{prepared.n:,} rows" + (
        f" (the distinct rows of {prepared.n_rows:,})" if prepared.n < prepared.n_rows else ""
    )
    shown = ", ".join(f"{name} {value / 1e6:,.0f}" for name, value in parts.items())
    if estimate > limit_mb * 1e6:
        by_rows = parts["rows"] + parts["weights"] > estimate / 2
        advice = (
            "give memory_limit_mb (--memory-limit-mb) if more is free, or fewer n_resamples, intersections, controls "
            "or metrics"
            if prepared.n < prepared.n_rows or not by_rows
            else "count the rows first: give a table of counts as frequency_weight (disagg-eval audit --aggregate yes "
            "on Parquet; docs/audit.md 'Large data'), or hard predictions, fewer n_resamples, intersections or metrics"
        )
        raise AuditInputError(
            f"the audit would need about {estimate / 1e6:,.0f} MB of memory at its peak (it holds {held}; "
            f"{resident / 1e6:,.0f} MB held now, the work's parts in MB: {shown}), more than the limit of "
            f"{limit_mb:,.0f} MB ({memory_limit_origin(memory_limit_mb)}); {advice}"
        )
    work = estimate - resident
    notes = [] if work < PEAK_NOTE_BYTES else [
        f"estimated memory of the audit's work {work / 1e6:,.0f} MB beyond what its process held before it "
        f"(it holds {held}; MB by part: {shown}; limit {limit_mb:,.0f} MB)"
    ]  # fmt: skip
    return notes, estimate, limit_mb


def _tell_plan(progress, size, controlled_plan, plan, model_names, test_plan, prepared, *, peak, limit_mb) -> None:
    """Before the work: the plan line on the terminal (:func:`.work_plan.plan_line`) and the stages to a progress
    callback with a ``plan(stages)`` method (the command line's overall bar). Nothing without such a callback."""
    if progress is None or not (hasattr(progress, "message") or hasattr(progress, "plan")):
        return
    bound = 0.0 if test_plan is None else float(sum(test_plan.work[key] for key in test_plan.monte_carlo()))
    weight_stages = controlled_plan.weight_stages(plan, model_names)
    stages = work_plan(
        size,
        weight_stages=weight_stages,
        n_dense_per_model=2 * int(sum(controlled_plan.weighted_levels())),
        test_bound=bound,
        has_calibration=not all(prepared.hard[m] for m in model_names),
        speed=machine_speed(),
    )
    _tell(progress, plan_line(stages, peak_bytes=peak, limit_mb=limit_mb))
    if hasattr(progress, "plan"):
        progress.plan(stages)


#: Rows a permutation test can permute: numpy's multivariate hypergeometric sampler (the draws of units with
#: multiplicities) takes fewer than 10^9 in all.
MAX_PERMUTED_ROWS = 1e9


def _plan_permutations(
    plan: SlicePlan,
    prepared: AuditInput,
    scores: list[np.ndarray],
    tallies: SliceTallies,
    comparisons: list,
    metric_ok: np.ndarray,
    *,
    metrics: list[str],
    n_permutations: int,
    pairwise_max_levels: int | None,
    adjust: str,
    adjust_scope: str,
    confidence: float,
    threshold: float,
    test_method: str,
    progress: Progress | None = None,
) -> tuple[int, list[str], list[ModelUnits] | None, ComparisonTests | None]:
    """The tests of the comparisons, decided before any work, with a note for each decision.

    Monte-Carlo tests (metrics that are not proportions, or any metric under sample weights) have
    p-values of at least ``1 / (n_permutations + 1)``; after adjusting a family of ``m`` tests the
    smallest adjusted p-value is ``m`` times that, which must be able to fall below ``1 - confidence``
    (:func:`disaggregated_eval.engine.permutation.min_permutations`): ``n_permutations`` is raised to that.
    The sequential rule makes the larger cap cost only where a p-value is small.

    The smallest threshold of each kind's family, ``alpha / m`` (``alpha`` without adjustment; ``m`` the
    largest family of :func:`.comparison_families.adjusted_family_sizes`: times the metrics with
    ``adjust_scope="model"``, every test of every model, metric and kind with ``"audit"``), is where a test's decision is settled whatever the other p-values are:
    :attr:`.comparison_tests.ComparisonTests.levels`, read by the tests to stop once a p-value is known to
    lie below it (tail bounds of unweighted means; the sequential rule's stop for small p-values).

    A Monte-Carlo test walks the drawn rows of each permutation, or both sides of the distinct units of its
    universe (rows equal in cell, label, score and weight, found once: :func:`.comparison_tests.model_units`);
    the sequential rule stops a test whose p-value is clearly large after a few dozen permutations, and one
    whose p-value is clearly below its family's smallest threshold after enough to know it, but one whose
    p-value lies between draws up to ``n_permutations``. Where the bound ``2 x n_permutations x`` units is
    large and the comparison is large too, the test is the large-sample z-test of the difference with the
    paired bootstrap's standard error instead (:func:`.comparison_tests.plan_tests`, option ``test_method``),
    with a note. When the tests that stay Monte Carlo may walk more than
    :data:`.inputs.PERMUTATION_WORK_WARNING` rows in all, an :class:`AuditWarning` gives the bound and the
    options that lower it.

    Parameters
    ----------
    plan, prepared, tallies, comparisons, metric_ok
        The audit's slice plan, coded input, counts, comparisons made and the metrics each model reports.
    scores : list of ndarray (n,)
        Each model's scores, in the order of the option ``scores``.
    metrics, n_permutations, pairwise_max_levels, adjust, adjust_scope, confidence, threshold, test_method
        The options of the same names.
    progress : callable, optional
        The audit's progress callback; one with a ``message`` method is told in one line when and why
        ``n_permutations`` is raised (the note says it at length).

    Returns
    -------
    n_permutations : int
        ``n_permutations``, raised where a Monte-Carlo test needs it.
    notes : list of str
    units : list of ModelUnits or None
        The units of every model (None without tests of permutations or large-sample tests).
    test_plan : ComparisonTests or None
        None without tests (``n_permutations`` 0).
    """
    weighted = prepared.weight is not None
    monte_carlo = [q for q in metrics if weighted or q not in PROPORTIONS]
    if n_permutations == 0:
        return n_permutations, [], None, None
    if not monte_carlo:  # every test exact: no units, no Monte-Carlo work to bound
        test_plan = plan_tests(comparisons, tallies, None, metrics=metrics, weighted=weighted,
                               n_permutations=n_permutations, test_method=test_method, metric_ok=metric_ok)  # fmt: skip
        return n_permutations, [], None, test_plan
    notes = []
    sizes = adjusted_family_sizes(family_sizes(plan, pairwise_max_levels=pairwise_max_levels),
                                  adjust_scope=adjust_scope, n_metrics=len(metrics), n_models=len(scores))  # fmt: skip
    per_family = max(sizes.values())
    alpha = 1.0 - confidence
    needed = min_permutations(per_family if adjust != "none" else 1, alpha)
    cap = max(needed, n_permutations)
    # the smallest threshold of each kind's family: a p-value below it is a rejection whatever the others are
    levels = {kind: alpha if adjust == "none" else alpha / max(1, size) for kind, size in sizes.items()}
    units = model_units(plan, prepared.y, scores, prepared.weight, threshold, count=prepared.count)
    test_plan = plan_tests(comparisons, tallies, units, metrics=metrics, weighted=weighted, n_permutations=cap,
                           test_method=test_method, metric_ok=metric_ok, levels=levels)  # fmt: skip
    permuted = test_plan.monte_carlo()
    if permuted and prepared.count is not None and prepared.n_rows >= MAX_PERMUTED_ROWS:
        names = test_plan.metric_names(permuted, metrics)
        raise AuditInputError(
            f"the Monte-Carlo permutation tests ({', '.join(names)}) would permute {prepared.n_rows:.3g} "
            f"rows (the sum of frequency_weight), and numpy's hypergeometric sampler takes fewer than "
            f"{MAX_PERMUTED_ROWS:.0e}: give test_method='bootstrap' (--test-method bootstrap: the large-sample test) "
            "or n_permutations=0 (--n-permutations 0: no tests, the intervals remain)"
        )
    if n_permutations < needed and permuted:
        notes.append(
            f"n_permutations raised from {n_permutations:,} to {needed:,}: the Monte-Carlo tests "
            f"({', '.join(monte_carlo)}) have p-values of at least 1/(n_permutations + 1), and after the "
            f"{adjust} adjustment of families of up to {per_family:,} tests fewer permutations could never "
            f"fall below {alpha:g}"
        )
        _tell(progress, f"n_permutations {n_permutations:,} -> {needed:,}: fewer cannot reach p < {alpha:g} "
                        f"after {adjust} over {per_family:,} tests")  # fmt: skip
        n_permutations = needed
    notes += test_notes(test_plan, metrics, test_method)
    bound = sum(test_plan.work[key] for key in permuted)
    if bound > PERMUTATION_WORK_WARNING:
        names = test_plan.metric_names(permuted, metrics)
        note = (
            f"the Monte-Carlo permutation tests ({', '.join(names)}) may walk up to {bound:.1e} rows: "
            f"{len(permuted):,} tests (comparisons x permutation designs, over {len(scores)} model(s)), each of up "
            f"to {n_permutations:,} permutations over both sides of the distinct rows of its universe, about "
            f"{bound * 1e-8 / 3600:.1f} CPU-hours at 10 ns per row; tests whose p-value is clearly above the level "
            "or clearly below the family's smallest threshold stop early, those in between draw up to every "
            "permutation. n_permutations=0 skips the tests (the intervals remain); "
            "test_method='bootstrap' tests every comparison by the large-sample z-test (its level holds for large "
            "slices: docs/audit.md); fewer metrics with Monte-Carlo tests, a smaller pairwise_max_levels or fewer "
            "intersections make fewer tests"
        )
        warnings.warn(note, AuditWarning, stacklevel=3)
        notes.append(note)
    return n_permutations, notes, units, test_plan


def _reasons(point: np.ndarray, tallies: SliceTallies, metrics: list[str], *, min_group_size: int,
             min_denominator: int):  # fmt: skip
    """Why each (model, slice, metric) estimate, and each rest's, is withheld ('' when reported), by the
    options ``min_group_size`` and ``min_denominator`` (:func:`.withheld.withheld_reasons`; under sample weights
    on the effective sizes too)."""
    n_models, n_slices = point.shape[:2]
    reasons = np.empty((n_models, n_slices, len(metrics)), dtype=object)
    rest = np.empty_like(reasons)
    rules = {"min_group_size": min_group_size, "min_denominator": min_denominator}
    for side, (t, out) in enumerate(((tallies, reasons), (tallies.rest(), rest))):
        n, n_pos, n_neg, n_pp = t.sizes()
        effective = t.effective_sizes()  # None without sample weights
        for m in range(n_models):
            of_model = None if effective is None else tuple(e[m] for e in effective)
            for q, metric in enumerate(metrics):
                out[m, :, q] = withheld_reasons(
                    metric, n[m], n_pos[m], n_neg[m], n_pp[m], point[m, :, side, q], effective=of_model, **rules
                )
    return reasons, rest
