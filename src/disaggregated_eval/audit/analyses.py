"""The analyses of an audit after its core tables: fairness, calibration, thresholds, detectability, selection.

:func:`run_analyses` is called once by :func:`disaggregated_eval.audit.audit`, after the slices,
comparisons and controlled tables, and returns the tables of :data:`.columns.ANALYSIS_TABLES`:

* ``fairness`` (:mod:`.fairness`): on the audit's own paired bootstrap when it computed the selection
  rate, the false positive rate and the true (or false negative) rate; otherwise on a bootstrap of
  these four rates of its own (seed path ``("audit", "fairness")``, same resamples scheme), with a note;
* ``calibration`` and ``calibration_summary`` (:mod:`.calibration_table`): from the per-(slice, score bin)
  sums, and the observed/expected ratio from the slices and comparisons tables (or, when the audit did
  not compute that metric, a bootstrap of its own on the engine's resampling, seed path
  ``("audit", "calibration")``);
* ``thresholds`` (:mod:`.thresholds`): counts at each threshold of the option ``thresholds``;
* ``detectability`` (:mod:`.detectability`): from the counts, the comparisons' families and the
  bootstrap;
* ``selection`` (:mod:`.selection_table`): with the options ``population_margins`` or
  ``selection_sensitivity``, on a bootstrap of its own (seed path ``("audit", "selection")``).

It receives the options the analyses read, each as a keyword argument (the audit reads them from its
resolved options, :class:`.options.ResolvedOptions`), and hands each analysis the values it needs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd

from .. import seeds
from ..engine.resampling import strata_for
from ..engine.sums import PROPORTIONS, metric_slots
from ..memory import check_bytes
from ..verdicts import Tolerance
from .calibration_table import calibration_analysis
from .decisions import flagged_rows, headline_metric
from .detectability import detectability_table, rows_needed_note
from .errors import AuditInputError
from .estimates import AuditEstimates, estimate_all, n_outputs
from .fairness import (
    FAIRNESS_METRICS,
    fairness_table,
    metric_sources,
    missing_fairness_metrics,
    reference_notes,
    resolve_references,
)
from .inputs import AuditInput
from .selection_table import MarginCells, MarginWeights, selection_table
from .slices import SlicePlan
from .tallies import SliceTallies
from .thresholds import thresholds_table

__all__ = ["AnalysisTables", "check_references", "run_analyses"]

Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class AnalysisTables:
    """The tables of the analyses (keyword arguments of :class:`.result.AuditResult`) and their notes."""

    tables: dict[str, pd.DataFrame]
    notes: list[str] = field(default_factory=list)


def check_references(plan: SlicePlan, references: Sequence[str]) -> dict[int, int]:
    """The reference slice of each family named by the option ``reference`` (family -> slice index).

    Parameters
    ----------
    plan : SlicePlan
    references : sequence of str
        The option ``reference`` (slice names, :func:`.options.parse_references`).

    Raises
    ------
    AuditInputError
        For a reference that is not a slice of the data (the message lists the family's slices).
    """
    try:
        return resolve_references(plan, references)
    except ValueError as error:
        raise AuditInputError(str(error)) from None


def _stage(progress: Progress | None, name: str):
    return None if progress is None else (lambda done, total: progress(name, done, total))


def run_analyses(
    plan: SlicePlan,
    prepared: AuditInput,
    *,
    estimates: AuditEstimates,
    tallies: SliceTallies,
    reasons: np.ndarray,
    slices: pd.DataFrame,
    comparisons: pd.DataFrame,
    metric_ok: np.ndarray,
    model_names: Sequence[str],
    reasons_for: Callable[[AuditEstimates, list[str]], np.ndarray],
    margins: MarginCells | None,
    max_bytes: float,
    margin_weights: MarginWeights | None = None,
    progress: Progress | None = None,
    references: Sequence[str],
    metrics: Sequence[str],
    threshold: float,
    preference_threshold: float,
    odds: float,
    n_resamples: int,
    resampling: str,
    seed: int,
    n_threads: int,
    confidence: float,
    tolerance: Tolerance,
    min_group_size: int,
    min_denominator: int,
    calibration_bins: int,
    thresholds: Sequence[float],
    power: float,
    detect_gap: float | None,
    adjusted: bool,
    gammas: Sequence[float],
) -> AnalysisTables:
    """Every analysis of an audit after its core tables (module docstring).

    Parameters
    ----------
    plan, prepared
        The audit's slice plan and coded input.
    estimates, tallies, reasons, slices, comparisons, metric_ok
        The audit's paired bootstrap, counts, withholding reasons (n_models, n_slices, n_metrics),
        slices and comparisons tables, and which metrics each model reports.
    model_names : sequence of str
    reasons_for : callable
        ``reasons_for(estimates, metrics)``: the withholding reasons of another bootstrap's metrics.
    margins : MarginCells or None
        The option ``population_margins`` mapped onto the rows (:func:`.selection_table.margin_cells`).
    margin_weights : MarginWeights, optional
        Under ``population_margins``, every section's weights (``prepared.weight`` is then their
        :attr:`~.selection_table.MarginWeights.weight`): the fairness summary's own bootstrap re-estimates them
        on every resample; the selection table weights by the margins itself, from the sample weights.
    max_bytes : float
        Largest size of a bootstrap's replicates.
    progress : callable, optional
        ``progress(stage, done, total)``.
    references : sequence of str
        The option ``reference`` (slice names).
    metrics : sequence of str
        The option ``metrics``.
    threshold, preference_threshold : float
        The options of the same names (resolved: ``preference_threshold`` a number).
    odds : float
        The preference threshold's odds (``ResolvedOptions.preference_odds``).
    n_resamples, resampling, seed, n_threads, confidence
        The options of the same names.
    tolerance : Tolerance
        The option ``tolerance``, parsed (``ResolvedOptions.parsed_tolerance``).
    min_group_size, min_denominator, calibration_bins, power, detect_gap
        The options of the same names.
    thresholds : sequence of float
        The option ``thresholds``, parsed (``ResolvedOptions.threshold_values``).
    adjusted : bool
        Whether the comparisons' p-values are adjusted (option ``adjust`` not ``none``, and tests made).
    gammas : sequence of float
        The option ``selection_sensitivity``.

    Returns
    -------
    AnalysisTables
    """
    references = check_references(plan, references)
    metrics = list(metrics)
    scores = [prepared.scores[m] for m in model_names]
    notes: list[str] = []

    # ---- fairness summary ----------------------------------------------------------------------
    sizes = {q: tallies.proportion(q)[1] for q in PROPORTIONS}
    sources = [metric_sources(estimates, reasons, metrics, m, sizes) for m in range(len(model_names))]
    missing = missing_fairness_metrics(metrics)
    if missing:
        extra_metrics = list(FAIRNESS_METRICS)
        size = 8 * n_resamples * n_outputs(plan, len(model_names), []) * len(extra_metrics)
        check_bytes(size, max_bytes, what=f"the fairness summary's bootstrap would hold {size / 2**30:.1f} GiB",
                    advice="give fewer n_resamples or intersections", error=AuditInputError)  # fmt: skip
        extra = estimate_all(
            plan,
            prepared.y,
            scores,
            prepared.weight,
            [],
            metrics=extra_metrics,
            slots=metric_slots(extra_metrics),
            threshold=threshold,
            odds=odds,
            n_resamples=n_resamples,
            seed=seeds.seed_sequence(seed, "audit", "fairness"),
            strata=strata_for(resampling, plan.cell_codes),
            n_threads=n_threads,
            progress=_stage(progress, "fairness bootstrap"),
            count=prepared.count,
            margins=margin_weights,
        )
        extra_reasons = reasons_for(extra, extra_metrics)
        for m in range(len(model_names)):
            sources[m] = {**sources[m], **metric_sources(extra, extra_reasons, extra_metrics, m, sizes)}
        notes.append(
            f"fairness summary: {', '.join(missing)} not among the metrics, so the selection rate, true and false "
            f"positive rates and false negative rate were bootstrapped for it separately (seed path audit/fairness): "
            f"its intervals are paired among themselves, not with the slices table's"
        )
    headline = [headline_metric(slices, metrics, model) for model in model_names]
    fairness = fairness_table(plan, sources, model_names, headline=headline, references=references,
                              confidence=confidence, tolerance=tolerance)  # fmt: skip
    notes += reference_notes(plan, sources, model_names, references)

    # ---- calibration per slice -------------------------------------------------------------------
    observed_expected = slices[slices["metric"] == "observed_expected_ratio"]
    calibration, calibration_summary = calibration_analysis(
        plan,
        prepared.y,
        scores,
        prepared.weight,
        model_names,
        hard=[bool(prepared.hard[m]) for m in model_names],
        n_bins=calibration_bins,
        confidence=confidence,
        min_group_size=min_group_size,
        n_resamples=n_resamples,
        seed=seeds.seed_sequence(seed, "audit", "calibration"),
        resampling=resampling,
        n_threads=n_threads,
        observed_expected=observed_expected if len(observed_expected) else None,
        observed_expected_vs_overall=comparisons[
            (comparisons["metric"] == "observed_expected_ratio") & (comparisons["kind"] == "vs_overall")
        ]
        if len(comparisons)
        else None,
        progress=_stage(progress, "calibration bootstrap"),
        count=prepared.count,
    )

    # ---- thresholds ------------------------------------------------------------------------------
    thresholds = thresholds_table(
        plan,
        prepared.y,
        scores,
        prepared.weight,
        np.asarray(thresholds, dtype=np.float64),
        model_names,
        confidence=confidence,
        min_group_size=min_group_size,
        min_denominator=min_denominator,
        count=prepared.count,
    )

    # ---- detectability ---------------------------------------------------------------------------
    alpha = 1.0 - float(confidence)
    detectability = detectability_table(
        plan,
        tallies,
        estimates,
        reasons,
        metric_ok,
        model_names,
        metrics,
        comparisons,
        flagged_rows(comparisons, alpha) if len(comparisons) else pd.Series(dtype=bool),
        confidence=confidence,
        power=power,
        detect_gap=detect_gap,
        adjusted=adjusted,
    )
    note = rows_needed_note(detectability, detect_gap, power)
    if note:
        notes.append(note)
    # ---- evaluation under selection (population margins, sensitivity bounds) -------------------------
    selection, selection_notes = selection_table(
        plan,
        prepared if margin_weights is None else replace(prepared, weight=margin_weights.sample_weight),
        list(model_names),
        margins=margins,
        gammas=list(gammas),
        metrics=metrics,
        n_resamples=n_resamples,
        min_group_size=min_group_size,
        min_denominator=min_denominator,
        seed=seed,
        confidence=confidence,
        threshold=threshold,
        preference_threshold=preference_threshold,
        resampling=resampling,
    )
    notes += selection_notes
    tables: dict[str, Any] = dict(
        selection=selection,
        fairness=fairness,
        calibration=calibration,
        calibration_summary=calibration_summary,
        thresholds=thresholds,
        detectability=detectability,
    )
    return AnalysisTables(tables=tables, notes=notes)
