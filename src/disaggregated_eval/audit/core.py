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
   (:mod:`.comparisons`, :mod:`disaggregated_eval.engine.permutation`);
7. the controlled table: ``M_a``, ``T_a`` and shared-space metrics per attribute and control
   variable (:mod:`.controlled`), derived from the same replicates.

See ``docs/audit.md`` for the definitions and the columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from .. import seeds, vocabulary
from ..engine.resampling import strata_for
from ..engine.sums import metric_slots
from ..intervals import band_level, percentile_bounds, percentile_interval
from ..memory import check_bytes
from . import controlled as _controlled
from .comparisons import comparison_table, enumerate_comparisons, permutation_pvalues
from .estimates import AuditEstimates, estimate_all, n_outputs
from .inputs import AuditInput, AuditInputError, prepare_input, resolve_options
from .options import AuditOptions
from .result import SLICE_COLUMNS, AuditResult
from .slices import SlicePlan, plan_slices
from .withheld import withheld_reasons

__all__ = ["audit", "AuditInputError"]

Progress = Callable[[str, int, int], None]
#: Largest size of the bootstrap replicates (every slice, rest and weighted population of every model
#: and metric).
MAX_REPLICATE_BYTES = 4 * 2**30


def _stage(progress: Progress | None, name: str) -> Callable[[int, int], None] | None:
    if progress is None:
        return None
    return lambda done, total: progress(name, done, total)


def audit(
    data: pd.DataFrame, /, *, options: AuditOptions | None = None, progress: Progress | None = None, **kwargs: Any
) -> AuditResult:
    """Disaggregated and controlled evaluation of predictions held in a data frame.

    Parameters
    ----------
    data : pandas.DataFrame or polars.DataFrame of shape (n_rows, n_columns)
        One row per person (or unit): the label, one score column per model, the protected
        attributes, optionally features (control X) and a sample-weight column (a polars frame is
        converted to pandas at the boundary).
    options : AuditOptions, optional
        All options at once (e.g. from the command line or a YAML file).
    progress : callable, optional
        ``progress(stage, done, total)`` during long steps (stages ``bootstrap``, ``permutations``,
        ``weights <attribute> V=<control>``, ``controlled <attribute>``).
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
    prepared = prepare_input(data, opts)
    plan = _plan(prepared, opts)
    controlled_plan = _controlled.plan_controlled(prepared, plan, opts)  # checks sizes before any work
    _check_memory(plan, controlled_plan, opts)
    notes = list(prepared.notes) + list(controlled_plan.notes)

    metrics = list(opts.metrics)
    slots = metric_slots(metrics)
    model_names = list(opts.scores)
    scores = [prepared.scores[m] for m in model_names]
    odds = opts.preference_threshold / (1.0 - opts.preference_threshold)
    metric_ok = np.array(
        [[not (prepared.hard[m] and q in vocabulary.SCORE_METRICS) for q in metrics] for m in model_names]
    )
    weights = _controlled.fit_controlled_weights(controlled_plan, prepared, plan, opts, progress=progress)
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
    )
    point = _slice_point(estimates)
    counts = _counts(plan, prepared, model_names, opts.threshold)
    reasons, rest_reasons = _reasons(point, counts, metrics, opts)
    slices = _slice_table(plan, estimates, counts, reasons, metric_ok, model_names, metrics, opts)

    comparisons = enumerate_comparisons(plan, len(model_names), model_names)
    p_values = permutation_pvalues(
        comparisons,
        plan,
        prepared.y,
        scores,
        prepared.weight,
        model_names,
        point,
        metrics=metrics,
        slots=slots,
        threshold=opts.threshold,
        odds=odds,
        n_permutations=opts.n_permutations,
        seed=opts.seed,
        n_threads=opts.n_threads,
        progress=_stage(progress, "permutations"),
    )
    comparison_frame = comparison_table(
        comparisons,
        estimates,
        p_values,
        reasons,
        rest_reasons,
        metric_ok,
        plan=plan,
        model_names=model_names,
        metrics=metrics,
        confidence=opts.confidence,
        adjust_method=opts.adjust,
    )
    controlled = _controlled.controlled_table(
        controlled_plan, plan, opts, estimates=estimates, reasons=reasons, metric_ok=metric_ok
    )
    return AuditResult(
        slices=slices,
        comparisons=comparison_frame,
        controlled=controlled,
        options=opts,
        notes=notes,
        n_rows=prepared.n,
    )


def _slice_point(estimates: AuditEstimates) -> np.ndarray:
    """Point estimates of every slice (side 0) and rest (side 1), shape (n_models, n_slices, 2, n_metrics)
    (NaN for the rest of ``overall``, which is empty)."""
    rows = estimates.slice_rows
    point = estimates.point[np.maximum(rows, 0)]
    point[rows < 0] = np.nan
    return point


def _plan(prepared: AuditInput, opts: AuditOptions) -> SlicePlan:
    try:
        return plan_slices(prepared.attributes, intersections=opts.intersections)
    except ValueError as error:
        raise AuditInputError(str(error)) from None


def _check_memory(plan: SlicePlan, cplan: _controlled.ControlledPlan, opts: AuditOptions) -> None:
    """Refuse, before any work, a bootstrap whose replicates would not fit in memory."""
    levels = [len(fc.labels) for fc in cplan.families for _ in cplan.weighted]
    outputs = n_outputs(plan, len(opts.scores), levels)
    size = 8 * opts.n_resamples * outputs * len(opts.metrics)
    check_bytes(
        size,
        MAX_REPLICATE_BYTES,
        what=f"the bootstrap would hold {size / 2**30:.1f} GiB of replicates (n_resamples {opts.n_resamples} x "
        f"{outputs} slices, rests and weighted populations of {len(opts.scores)} model(s) x {len(opts.metrics)} "
        f"metrics x 8 bytes)",
        advice="give fewer n_resamples, intersections, controls or metrics",
        error=AuditInputError,
    )


def _counts(plan: SlicePlan, prepared: AuditInput, model_names: list[str], threshold: float) -> dict[str, np.ndarray]:
    """Unweighted row counts per slice (and per model for predicted positives), and of the rests."""
    cells = plan.cell_codes
    k = plan.n_cells
    n_cell = np.bincount(cells, minlength=k)
    pos_cell = np.bincount(cells, weights=prepared.y, minlength=k).round().astype(np.int64)
    n = plan.aggregate_cells(n_cell)
    n_pos = plan.aggregate_cells(pos_cell)
    pp = np.stack(
        [
            plan.aggregate_cells(
                np.bincount(cells, weights=(prepared.scores[m] >= threshold).astype(float), minlength=k)
                .round()
                .astype(np.int64)
            )
            for m in model_names
        ]
    )
    total, total_pos = int(n[0]), int(n_pos[0])
    return {
        "n": n,
        "n_pos": n_pos,
        "n_neg": n - n_pos,
        "n_predicted_pos": pp,
        "rest_n": total - n,
        "rest_pos": total_pos - n_pos,
        "rest_neg": (total - total_pos) - (n - n_pos),
        "rest_pp": pp[:, :1] - pp,
    }


def _reasons(point: np.ndarray, counts: dict[str, np.ndarray], metrics: list[str], opts: AuditOptions):
    """Why each (model, slice, metric) estimate, and each rest's, is withheld ('' when reported)."""
    n_models, n_slices = point.shape[:2]
    reasons = np.empty((n_models, n_slices, len(metrics)), dtype=object)
    rest = np.empty_like(reasons)
    rules = {"min_group_size": opts.min_group_size, "min_denominator": opts.min_denominator}
    for m in range(n_models):
        for q, metric in enumerate(metrics):
            reasons[m, :, q] = withheld_reasons(
                metric,
                counts["n"],
                counts["n_pos"],
                counts["n_neg"],
                counts["n_predicted_pos"][m],
                point[m, :, 0, q],
                **rules,
            )
            rest[m, :, q] = withheld_reasons(
                metric,
                counts["rest_n"],
                counts["rest_pos"],
                counts["rest_neg"],
                counts["rest_pp"][m],
                point[m, :, 1, q],
                **rules,
            )
    return reasons, rest


def _slice_table(plan, estimates, counts, reasons, metric_ok, model_names, metrics, opts) -> pd.DataFrame:
    rows = estimates.slice_rows[:, :, 0]  # (n_models, n_slices)
    point = estimates.point[rows]  # (n_models, n_slices, n_metrics)
    reps = estimates.replicates[:, rows, :]  # (B, n_models, n_slices, n_metrics)
    low, high, n_undefined = percentile_interval(reps, confidence=opts.confidence, axis=0)
    band_low = np.full(point.shape, np.nan)
    band_high = np.full(point.shape, np.nan)
    for m in range(point.shape[0]):
        for q in range(point.shape[2]):
            family = reasons[m, :, q] == ""
            level = band_level(reps[:, m, :, q], family, opts.confidence)
            band_low[m, :, q], band_high[m, :, q] = percentile_bounds(reps[:, m, :, q], level)
    attribute = [plan.attribute_of(s) for s in range(plan.n_slices)]
    frames = []
    for m, model in enumerate(model_names):
        for q, metric in enumerate(metrics):
            if not metric_ok[m, q]:
                continue
            reported = reasons[m, :, q] == ""
            frames.append(
                pd.DataFrame(
                    {
                        "model": model,
                        "slice": list(plan.names),
                        "attribute": attribute,
                        "metric": metric,
                        "estimate": np.where(reported, point[m, :, q], np.nan),
                        "ci_low": low[m, :, q],
                        "ci_high": high[m, :, q],
                        "band_low": band_low[m, :, q],
                        "band_high": band_high[m, :, q],
                        "n": counts["n"],
                        "n_pos": counts["n_pos"],
                        "n_neg": counts["n_neg"],
                        "n_predicted_pos": counts["n_predicted_pos"][m],
                        "reported": reported,
                        "reason": reasons[m, :, q].astype(str),
                        "n_undefined": n_undefined[m, :, q].astype(np.int64),
                    }
                )
            )
    table = pd.concat(frames, ignore_index=True)[list(SLICE_COLUMNS)]
    # model, slice (in slice order), metric (in the order given)
    slice_rank = {name: i for i, name in enumerate(plan.names)}
    table["_m"] = table["model"].map({name: i for i, name in enumerate(model_names)})
    table["_s"] = table["slice"].map(slice_rank)
    table["_q"] = table["metric"].map({name: i for i, name in enumerate(metrics)})
    table = table.sort_values(["_m", "_s", "_q"], kind="stable").drop(columns=["_m", "_s", "_q"])
    return table.reset_index(drop=True)
