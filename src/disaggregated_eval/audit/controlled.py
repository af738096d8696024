"""The ``controlled`` table of an audit: ``M_a``, ``T_a`` and shared-space metrics per slice.

For every family of slices except ``overall`` (each attribute, each intersection of attributes) the
slices are the subgroups ``a`` of a categorical variable ``A``. For each requested control variable
``V`` (paper section 4.2, Supplementary A.1):

- ``V = none``: ``M_a`` is the population's metric and ``T_a = metric(A = a) - M_a``, the slice minus
  overall; these rows come from the audit's own bootstrap (the same resamples as the slices table);
- ``V = X`` (the ``features``), ``Y`` (the label) or ``R`` (each model's score): with the weights
  ``P(A = a | V)`` cross-fitted on the file (:mod:`.controlled_weights`), the weighted population metrics
  ``M_a`` (the family's evaluated rows weighted by ``P(A = a | V)``) and the shared-space metrics of Cai
  et al. are outputs of the audit's one bootstrap (:mod:`.estimates`), and ``T_a = metric(A = a) - M_a``
  is their paired difference with the slice's own metric (:func:`disaggregated_eval.derived.difference`),
  every metric weighted by the sample weights.

Every weighted row carries the diagnostics of its weights (``weight_method``, ``balance_smd``,
``effective_sample_size``: :mod:`.controlled_weights`). Where ``V`` (nearly) determines the slice (no
value of ``V`` shared with the rest, disjoint ranges, or the rest carrying under 1% of the weight it would
carry if ``V`` said nothing), ``M_a`` is the slice's own metric and ``T_a`` is 0 by construction: that
row's ``T_a`` and shared-space metric are withheld with the reason. Levels too small to cross-fit are
left out of the weighted rows (:func:`.controlled_weights.plan_controlled`); the ``V = none`` rows keep
every slice.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..derived import Replicated, difference, summarise, take
from .columns import CONTROLLED_COLUMNS
from .controlled_weights import ControlledPlan
from .estimates import AuditEstimates, ControlledWeights
from .slices import SlicePlan

__all__ = ["controlled_table"]


def _base(estimates: AuditEstimates) -> Replicated:
    return Replicated(point=estimates.point, replicates=estimates.replicates)


#: Reason of a ``T_a`` at control ``none`` whose ``vs_overall`` comparison has no interval (its caveat:
#: every resample gives one value, e.g. a slice that holds practically all of the population's weight).
NO_GAP_INTERVAL = "slice - overall has no interval (one value on every resample: see its comparison's caveat)"


def _none_rows(
    plan, model_names, metrics, estimates: AuditEstimates, reasons, metric_ok, intervals
) -> list[pd.DataFrame]:
    """Rows of V = none: M_a = overall, T_a = slice - overall, with the intervals of the slices table and
    of the ``vs_overall`` comparisons (the same quantities: one interval each)."""
    frames = []
    own_low, own_high, gap_low, gap_high = intervals
    for m, model in enumerate(model_names):
        rows = estimates.slice_rows[m, :, 0]
        own = estimates.point[rows]  # (n_slices, n_metrics)
        gap = own - own[:1]
        # resamples on which slice - overall is undefined (either side NaN), without a (B, slices) copy
        overall_nan = np.isnan(estimates.replicates[:, rows[0], :])
        undefined = np.empty(own.shape, dtype=np.int64)
        for s, row in enumerate(rows):
            undefined[s] = np.sum(np.isnan(estimates.replicates[:, row, :]) | overall_nan, axis=0)
        for f in range(1, len(plan.families)):
            family = plan.families[f]
            ids = family.slice_ids
            for q, metric in enumerate(metrics):
                if not metric_ok[m, q]:
                    continue
                why = reasons[m, ids, q].astype(str)
                overall_why = str(reasons[m, 0, q])
                reason = np.array([w if w else (f"overall: {overall_why}" if overall_why else "") for w in why])
                no_interval = ~(np.isfinite(gap_low[m, ids, q]) & np.isfinite(gap_high[m, ids, q]))
                reason = np.where((reason == "") & no_interval, NO_GAP_INTERVAL, reason)
                ok = reason == ""
                sub_ok = why == ""
                frames.append(
                    pd.DataFrame(
                        {
                            "model": model,
                            "attribute": family.name,
                            "slice": [plan.names[s] for s in ids],
                            "control": "none",
                            "metric": metric,
                            "subgroup": np.where(sub_ok, own[ids, q], np.nan),
                            "subgroup_low": own_low[m, ids, q],
                            "subgroup_high": own_high[m, ids, q],
                            "M_a": own[0, q] if overall_why == "" else np.nan,
                            "M_a_low": own_low[m, 0, q],
                            "M_a_high": own_high[m, 0, q],
                            "T_a": np.where(ok, gap[ids, q], np.nan),
                            "T_a_low": gap_low[m, ids, q],
                            "T_a_high": gap_high[m, ids, q],
                            "shared_space": np.nan,
                            "shared_space_low": np.nan,
                            "shared_space_high": np.nan,
                            "weight_method": "",
                            "balance_smd": np.nan,
                            "effective_sample_size": np.nan,
                            "n_undefined": undefined[ids, q],
                            "reported": ok,
                            "reason": reason,
                        }
                    )
                )
    return frames


def _weighted_rows(fc, plan, model_names, metrics, confidence, weighted, estimates: AuditEstimates, reasons, metric_ok,
                   intervals, fitted):  # fmt: skip
    own_low, own_high = intervals[:2]
    family = plan.families[fc.family]
    base = _base(estimates)
    slices = family.slice_ids[fc.kept]
    frames = []
    for control in weighted:
        for m, model in enumerate(model_names):
            population, space = estimates.controlled_rows[(fc.family, control, m)]
            cw = fitted[(fc.family, control, m)]
            diag = cw.diagnostics
            overlap = diag["overlap_reason"].to_numpy(dtype=object).astype(str)
            own_rows = estimates.slice_rows[m, slices, 0]
            own = estimates.point[own_rows]  # the slices' own estimates; their intervals are the slices table's
            ma = summarise(take(base, population), confidence=confidence)
            ta = summarise(difference(base, own_rows, population), confidence=confidence)
            ss = summarise(take(base, space), confidence=confidence)
            for q, metric in enumerate(metrics):
                if not metric_ok[m, q]:
                    continue
                reason = reasons[m, slices, q].astype(str)
                reason = np.where(reason == "", overlap, reason)  # no overlap: T_a is 0 by construction
                ok = reason == ""
                frames.append(
                    pd.DataFrame(
                        {
                            "model": model,
                            "attribute": family.name,
                            "slice": [plan.names[s] for s in slices],
                            "control": control,
                            "metric": metric,
                            "subgroup": np.where(ok, own[:, q], np.nan),
                            "subgroup_low": own_low[m, slices, q],
                            "subgroup_high": own_high[m, slices, q],
                            "M_a": ma.estimate[:, q],
                            "M_a_low": ma.low[:, q],
                            "M_a_high": ma.high[:, q],
                            "T_a": np.where(ok, ta.estimate[:, q], np.nan),
                            "T_a_low": ta.low[:, q],
                            "T_a_high": ta.high[:, q],
                            "shared_space": np.where(ok, ss.estimate[:, q], np.nan),
                            "shared_space_low": ss.low[:, q],
                            "shared_space_high": ss.high[:, q],
                            "weight_method": cw.method,
                            "balance_smd": diag["balance_smd"].to_numpy(dtype=np.float64),
                            "effective_sample_size": diag["effective_sample_size"].to_numpy(dtype=np.float64),
                            "n_undefined": ta.n_undefined[:, q].astype(np.int64),
                            "reported": ok,
                            "reason": reason,
                        }
                    )
                )
    return frames


def controlled_table(
    cplan: ControlledPlan,
    plan: SlicePlan,
    *,
    model_names: Sequence[str],
    metrics: Sequence[str],
    controls: Sequence[str],
    confidence: float,
    estimates: AuditEstimates,
    reasons: np.ndarray,
    metric_ok: np.ndarray,
    slices: pd.DataFrame,
    comparisons: pd.DataFrame,
    weights: Sequence[ControlledWeights] = (),
) -> pd.DataFrame:
    """The ``controlled`` table (:data:`.columns.CONTROLLED_COLUMNS`), ordered by model, attribute,
    slice, control, metric.

    The subgroup's interval is the slices table's, and with ``V = none`` the interval of ``T_a`` (the
    slice minus overall) is the ``vs_overall`` comparison's: one quantity, one interval. ``M_a`` and
    ``T_a`` with a weighted control get the percentile intervals of the paired bootstrap; ``weights``
    (:func:`.controlled_weights.fit_controlled_weights`) give their diagnostics and the rows withheld for no
    overlap.

    Parameters
    ----------
    cplan : ControlledPlan
        :func:`.controlled_weights.plan_controlled`.
    plan : SlicePlan
    model_names, metrics : sequence of str
        The models and metrics of ``estimates`` (its model index and last axis).
    controls : sequence of str
        The audit's control variables.
    confidence : float
        Level of the percentile intervals.
    estimates : AuditEstimates
    reasons : ndarray of shape (n_models, n_slices, n_metrics), object
        Why each slice's estimate is withheld ("" when reported).
    metric_ok : ndarray of shape (n_models, n_metrics), bool
    slices, comparisons : pandas.DataFrame
        The audit's slices and comparisons tables (their intervals are reused).
    weights : sequence of ControlledWeights
    """
    fitted = {(cw.family, cw.control, cw.model): cw for cw in weights}
    intervals = _table_intervals(plan, model_names, metrics, slices, comparisons)
    frames: list[pd.DataFrame] = []
    if "none" in controls:
        frames += _none_rows(plan, model_names, metrics, estimates, reasons, metric_ok, intervals)
    for fc in cplan.families:
        frames += _weighted_rows(fc, plan, model_names, metrics, confidence, cplan.weighted, estimates, reasons,
                                 metric_ok, intervals, fitted)  # fmt: skip
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in CONTROLLED_COLUMNS})
    table = pd.concat(frames, ignore_index=True)[list(CONTROLLED_COLUMNS)]
    order = {
        "model": {name: i for i, name in enumerate(model_names)},
        "attribute": {fam.name: i for i, fam in enumerate(plan.families)},
        "slice": {name: i for i, name in enumerate(plan.names)},
        "control": {c: i for i, c in enumerate(("none", "X", "Y", "R"))},
        "metric": {name: i for i, name in enumerate(metrics)},
    }
    keys = pd.DataFrame({c: table[c].map(mapping) for c, mapping in order.items()})
    table = table.iloc[np.lexsort([keys[c].to_numpy() for c in reversed(list(order))])].reset_index(drop=True)
    table["reported"] = table["reported"].astype(bool)
    table["n_undefined"] = table["n_undefined"].astype(np.int64)
    return table


def _table_intervals(plan, model_names, metrics, slices: pd.DataFrame, comparisons: pd.DataFrame):
    """The slices' intervals and the vs_overall comparisons' intervals as arrays (n_models, n_slices, n_metrics)."""
    shape = (len(model_names), plan.n_slices, len(metrics))
    out = [np.full(shape, np.nan) for _ in range(4)]
    model = {name: m for m, name in enumerate(model_names)}
    slice_ = {name: s for s, name in enumerate(plan.names)}
    metric = {name: q for q, name in enumerate(metrics)}
    vs = comparisons[comparisons["kind"] == "vs_overall"]
    for k, table in ((0, slices), (2, vs)):
        m = table["model"].map(model).to_numpy()
        s = table["slice"].map(slice_).to_numpy()
        q = table["metric"].map(metric).to_numpy()
        out[k][m, s, q] = table["ci_low"].to_numpy(dtype=np.float64)
        out[k + 1][m, s, q] = table["ci_high"].to_numpy(dtype=np.float64)
    return tuple(out)


def _dtype(column: str):
    if column in ("model", "attribute", "slice", "control", "metric", "weight_method", "reason"):
        return object
    if column == "reported":
        return bool
    if column == "n_undefined":
        return np.int64
    return np.float64
