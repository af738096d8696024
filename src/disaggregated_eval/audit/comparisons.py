"""The ``comparisons`` table: differences with intervals, adjusted p-values and verdicts.

The comparisons (kinds ``vs_overall``, ``vs_rest``, ``pairwise``, ``vs_model``) are listed by
:mod:`.comparison_families` and tested by :mod:`.comparison_tests`; :func:`comparison_table` lays out
their rows.

Intervals (column ``interval``; ``docs/method.md``, "Intervals"): for the proportions, Newcombe's
hybrid score interval of the difference of two independent proportions (``vs_rest``, ``pairwise``),
and for ``vs_overall`` the same interval scaled by ``1 - pi`` (the slice's share ``pi`` of the
metric's denominator: ``p_s - p_all = (1 - pi) (p_s - p_rest)``), so that a slice without events still
gets an honest interval; for the other metrics and ``vs_model``, the percentile interval of the paired
bootstrap differences (:func:`disaggregated_eval.derived.difference`), marked ``degenerate`` when
every resample gives one value.

Families (column ``family_size``): ``p_adjusted`` adjusts the p-values within the family of one model,
one kind (``vs_overall``, ``vs_rest`` or ``pairwise``) and one metric (``adjust_scope="metric"``,
the default) or all metrics (``"model"``), or over the whole audit: every model, metric and kind in one
family (``"audit"``; :func:`.comparison_families.family_keys`). A difference is reported only when both of its terms
are (the minimum-size rules of :mod:`.withheld`); otherwise it is NaN, its p-values are NaN, it is
not part of the family, and ``reason`` names the term and the rule.

Verdicts (columns ``tolerance``, ``p_within``, ``p_within_adjusted``, ``verdict``;
:mod:`disaggregated_eval.verdicts`): ``p_within`` is the p-value of ``|difference| >= tolerance`` (the
two one-sided tests, inverting the comparison's own interval: Newcombe's for the rates, the paired
bootstrap's otherwise); a comparison whose sizes could not support a certification at all (its
``p_within`` at a difference of 0 would exceed ``1 - confidence``) is not tested. With ``adjust="holm"``
both kinds of hypotheses of a family are adjusted together
(:func:`disaggregated_eval.verdicts.partitioned_holm`), so that the family-wise error of the flags and
the certifications together is at most ``1 - confidence``; with ``bh`` the flags control the false
discovery rate (Benjamini-Hochberg, ``statsmodels``) and the certifications their family-wise error
(Holm); ``none`` adjusts nothing. ``verdict``: ``differs`` (flagged: adjusted p-value below
``1 - confidence``; without tests, the interval excludes 0), ``within tolerance`` (``p_within_adjusted``
below it), both, or ``inconclusive``; empty for withheld comparisons and ``vs_model``.

Notes (column ``note``; :func:`.interval_notes.disagreement_notes`): where the row's interval and its own test
disagree at ``1 - confidence`` (the interval excludes 0 and ``p_value`` is at least ``1 - confidence``, or the
reverse), the note says so and that the verdict follows the test; empty otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..derived import Replicated, difference, summarise
from ..engine.sums import PROPORTIONS
from ..intervals import newcombe_difference, zero_width
from ..verdicts import (
    DEFAULT_TOLERANCE,
    Tolerance,
    bootstrap_equivalence_pvalue,
    difference_verdicts,
    equivalence_pvalue,
    verdict_text,
)
from ..vocabulary import CAVEAT_DEGENERATE
from .columns import COMPARISON_COLUMNS
from .comparison_families import TESTED_KINDS, Comparison, family_keys
from .estimates import AuditEstimates
from .interval_notes import disagreement_notes
from .slices import SlicePlan
from .tallies import SliceTallies

__all__ = [
    "comparison_table",
]


def _verdicts(table: pd.DataFrame, alpha: float) -> np.ndarray:
    """The ``verdict`` of every row (module docstring): flag and certification at ``alpha``."""
    p = table["p_adjusted"].to_numpy(dtype=np.float64)
    by_interval = (table["ci_low"].to_numpy(dtype=np.float64) > 0) | (table["ci_high"].to_numpy(dtype=np.float64) < 0)
    differs = np.where(np.isfinite(p), p < alpha, by_interval)
    within = table["p_within_adjusted"].to_numpy(dtype=np.float64) < alpha
    active = table["reported"].to_numpy(dtype=bool) & table["kind"].isin(TESTED_KINDS).to_numpy()
    active &= table["caveat"].to_numpy(dtype=object) == ""
    return np.array(
        [verdict_text(bool(d), bool(w)) if a else "" for d, w, a in zip(differs, within, active, strict=True)],
        dtype=object,
    )


def _proportion_intervals(
    comparisons: Sequence[Comparison],
    tallies: SliceTallies,
    metric: str,
    confidence: float,
    tolerance: float | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Newcombe intervals of every comparison of a proportion metric (vs_model: NaN); with ``tolerance``
    also the equivalence p-value of each (NaN where the sizes could not support a certification)."""
    p, n_eff, _, _ = tallies.proportion(metric)
    rest = tallies.rest()
    p_rest, n_rest, _, _ = rest.proportion(metric)
    _, den = PROPORTIONS[metric]
    den_w = tallies.sum_w[..., list(den)].sum(-1)
    kind = np.array([c.kind for c in comparisons])
    m = np.array([c.model for c in comparisons])
    s = np.array([c.slice for c in comparisons])
    o = np.array([c.minus[1] for c in comparisons])
    pairwise = kind == "pairwise"
    p2 = np.where(pairwise, p[m, o], p_rest[m, s])
    n2 = np.where(pairwise, n_eff[m, o], n_rest[m, s])
    low, high = newcombe_difference(p[m, s], n_eff[m, s], p2, n2, confidence)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = den_w[m, s] / den_w[m, 0]
    scale = np.where(kind == "vs_overall", 1.0 - share, 1.0)
    low, high = low * scale, high * scale
    ok = kind != "vs_model"
    if tolerance is None:
        return np.where(ok, low, np.nan), np.where(ok, high, np.nan), ok
    p1, n1 = p[m, s], n_eff[m, s]

    def bounds(first, second):
        def at(level):
            lo, hi = newcombe_difference(first, n1, second, n2, level)
            return lo * scale, hi * scale

        return at

    with np.errstate(invalid="ignore", divide="ignore"):
        pooled = (p1 * n1 + p2 * n2) / (n1 + n2)
    alpha = 1.0 - confidence
    # a comparison whose sizes could not support a certification even at an observed difference of 0
    possible = equivalence_pvalue(bounds(pooled, pooled), np.zeros(pooled.shape), tolerance) <= alpha
    p_within = equivalence_pvalue(bounds(p1, p2), scale * (p1 - p2), tolerance)
    p_within = np.where(ok & possible, p_within, np.nan)
    return np.where(ok, low, np.nan), np.where(ok, high, np.nan), ok, p_within


#: Values per chunk of the comparisons' bootstrap differences (resamples x comparisons x metrics): 16 MiB,
#: so that a chunk's gathers, difference and sort stay near 100 MiB (at 2^24 they took about 500 MiB, the
#: largest transient of a small audit).
_CHUNK_VALUES = 2**21


def _percentile_part(
    base, plus, minus, rows, columns, confidence, estimate, low, high, undefined, caveat, within=None, tolerance=None
) -> None:
    """Percentile intervals of the paired differences of ``rows`` (comparisons) and ``columns`` (metrics);
    with ``within``, also their equivalence p-values at ``tolerance`` (NaN where the bootstrap's spread
    could not support a certification even at a difference of 0)."""
    if rows.size == 0 or columns.size == 0:
        return
    n_res = base.replicates.shape[0]
    chunk = max(1, _CHUNK_VALUES // max(1, n_res * columns.size))
    for start in range(0, rows.size, chunk):
        part = rows[start : start + chunk]
        # only the chunk's quantities and metrics, gathered at once: a copy of every quantity's columns held
        # most of the replicates a second time (1.4 GB beside their 2.4 GB at 10^6 resamples)
        has = minus[part] >= 0
        used, inverse = np.unique(np.concatenate([plus[part], minus[part][has]]), return_inverse=True)
        sub = Replicated(point=base.point[np.ix_(used, columns)], replicates=base.replicates[:, used[:, None], columns])
        at_minus = np.full(part.size, -1, dtype=np.int64)
        at_minus[has] = inverse[part.size :]
        derived = difference(sub, inverse[: part.size], at_minus)
        summary = summarise(derived, confidence=confidence)
        grid = np.ix_(part, columns)
        estimate[grid], low[grid], high[grid] = summary.estimate, summary.low, summary.high
        undefined[grid], caveat[grid] = summary.n_undefined, summary.caveat
        if within is not None:
            reps = derived.replicates.reshape(n_res, -1)
            point = derived.point.reshape(-1)
            possible = bootstrap_equivalence_pvalue(reps - point, np.zeros(point.shape), tolerance) <= 1.0 - confidence
            p = bootstrap_equivalence_pvalue(reps, point, tolerance)
            within[grid] = np.where(possible, p, np.nan).reshape(derived.point.shape)


def _point_part(base, plus, minus, rows, columns, estimate, undefined, caveat) -> None:
    """Point differences and undefined counts (no percentiles: these get score intervals)."""
    grid = np.ix_(rows, columns)
    estimate[grid] = base.point[np.ix_(plus[rows], columns)] - base.point[np.ix_(minus[rows], columns)]
    caveat[grid] = np.where(np.isfinite(estimate[grid]), "", "undefined")
    n_res = base.replicates.shape[0]
    chunk = max(1, _CHUNK_VALUES // max(1, n_res * columns.size))
    for start in range(0, rows.size, chunk):
        part = rows[start : start + chunk]
        # one gather of the chunk's outputs in these metrics (not of every metric, then the columns)
        nan_plus = np.isnan(base.replicates[:, plus[part][:, None], columns])
        nan_minus = np.isnan(base.replicates[:, minus[part][:, None], columns])
        undefined[np.ix_(part, columns)] = (nan_plus | nan_minus).sum(axis=0)


def comparison_table(
    comparisons: Sequence[Comparison],
    estimates: AuditEstimates,
    tallies: SliceTallies,
    p_values: np.ndarray,
    tests: np.ndarray,
    reasons: np.ndarray,
    rest_reasons: np.ndarray,
    metric_ok: np.ndarray,
    *,
    plan: SlicePlan,
    model_names: Sequence[str],
    metrics: Sequence[str],
    confidence: float,
    adjust_method: str,
    adjust_scope: str = "metric",
    tolerance: Tolerance = DEFAULT_TOLERANCE,
) -> pd.DataFrame:
    """The ``comparisons`` table (:data:`.columns.COMPARISON_COLUMNS`).

    Parameters
    ----------
    comparisons : sequence of Comparison
    estimates : AuditEstimates
        The audit's base quantities (slices and rests of every model) on the paired resamples.
    tallies : SliceTallies
        Counts of every slice (the proportions' Newcombe intervals).
    p_values, tests : ndarray of shape (n_comparisons, n_metrics)
        :func:`.comparison_tests.test_pvalues`.
    reasons, rest_reasons : ndarray of shape (n_models, n_slices, n_metrics), object
        Why a slice's (a rest's) estimate is withheld, ``""`` when reported.
    metric_ok : ndarray of shape (n_models, n_metrics), bool
        Whether the model reports the metric (score metrics are left out for hard predictions).
    adjust_scope : {"metric", "model", "audit"}
        Family of the adjustment: one model, kind and metric; one model and kind (every metric); or every
        test of the audit.
    tolerance : Tolerance
        The verdicts' tolerance (its ``difference``, in each metric's units; module docstring).
    """
    n_q = estimates.replicates.shape[2]
    base = Replicated(point=estimates.point, replicates=estimates.replicates)
    plus = np.array([estimates.slice_rows[c.plus] for c in comparisons], dtype=np.int64)
    minus = np.array([estimates.slice_rows[c.minus] for c in comparisons], dtype=np.int64)
    n_c = len(comparisons)
    estimate = np.empty((n_c, n_q))
    low = np.full_like(estimate, np.nan)
    high = np.full_like(estimate, np.nan)
    undefined = np.empty(estimate.shape, dtype=np.int64)
    caveat = np.empty(estimate.shape, dtype=object)
    interval = np.full(estimate.shape, "percentile", dtype=object)
    within = np.full(estimate.shape, np.nan)
    delta = None if tolerance.difference is None else float(tolerance.difference)
    is_model = np.array([c.kind == "vs_model" for c in comparisons], dtype=bool)
    proportion = np.array([metric in PROPORTIONS for metric in metrics], dtype=bool)
    # The rates get Newcombe intervals (no bootstrap percentiles) except between models, which are paired
    _percentile_part(base, plus, minus, np.flatnonzero(~is_model), np.flatnonzero(~proportion), confidence, estimate,
                     low, high, undefined, caveat, within=None if delta is None else within, tolerance=delta)  # fmt: skip
    _percentile_part(base, plus, minus, np.flatnonzero(is_model), np.arange(n_q), confidence, estimate, low, high,
                     undefined, caveat)  # fmt: skip
    rows, columns = np.flatnonzero(~is_model), np.flatnonzero(proportion)
    if rows.size and columns.size:
        _point_part(base, plus, minus, rows, columns, estimate, undefined, caveat)
    for q, metric in enumerate(metrics):
        if metric in PROPORTIONS:
            if delta is None:
                lo, hi, ok = _proportion_intervals(comparisons, tallies, metric, confidence)
            else:
                lo, hi, ok, p_within = _proportion_intervals(comparisons, tallies, metric, confidence, delta)
                within[ok, q] = p_within[ok]
            low[ok, q], high[ok, q] = lo[ok], hi[ok]
            interval[ok, q] = "newcombe"
    # An interval of width 0 claims certainty that no sample gives: it arises where a slice holds practically all
    # of the population's weight (slice - overall = (1 - pi)(slice - rest) with 1 - pi ~ 0), the difference 0 by
    # construction. Such a difference is degenerate, as a bootstrap whose resamples all give one value is.
    # The same when the interval underflows to nothing (NaN) although the difference is defined.
    width_0 = zero_width(low, high)
    no_interval = np.isfinite(estimate) & ~(np.isfinite(low) & np.isfinite(high))
    caveat = np.where((width_0 | no_interval) & (caveat == ""), CAVEAT_DEGENERATE, caveat)
    low = np.where(caveat == "", low, np.nan)
    high = np.where(caveat == "", high, np.nan)

    kind = np.array([c.kind for c in comparisons], dtype=object)
    model = np.array([c.model for c in comparisons])
    pm, ps, pside = (np.array([c.plus[i] for c in comparisons]) for i in range(3))
    mm, ms, mside = (np.array([c.minus[i] for c in comparisons]) for i in range(3))
    plus_names = np.array(plan.names, dtype=object)[ps]
    minus_names = np.array(plan.names, dtype=object)[ms]
    models = np.array(model_names, dtype=object)
    label_plus = np.where(kind == "vs_model", models[pm], np.where(kind == "pairwise", plus_names, "slice"))
    label_minus = np.where(
        kind == "vs_model",
        models[mm],
        np.where(kind == "pairwise", minus_names, np.where(kind == "vs_rest", "rest", "overall")),
    )
    frames = []
    for q, metric in enumerate(metrics):
        keep = metric_ok[pm, q] & metric_ok[mm, q]
        why_plus = np.where(pside == 0, reasons[pm, ps, q], rest_reasons[pm, ps, q]).astype(str)
        why_minus = np.where(mside == 0, reasons[mm, ms, q], rest_reasons[mm, ms, q]).astype(str)
        reason = np.array(
            [
                "; ".join(t for t in (f"{a}: {x}" if x else "", f"{b}: {y}" if y else "") if t)
                for a, x, b, y in zip(label_plus, why_plus, label_minus, why_minus)
            ],
            dtype=object,
        )
        reported = reason == ""
        frame = pd.DataFrame(
            {
                "model": models[model],
                "metric": metric,
                "slice": np.array(plan.names, dtype=object)[np.array([c.slice for c in comparisons])],
                "reference": [c.reference for c in comparisons],
                "kind": kind,
                "difference": np.where(reported, estimate[:, q], np.nan),
                "ci_low": low[:, q],
                "ci_high": high[:, q],
                "interval": interval[:, q],
                "test": np.where(reported, tests[:, q], ""),
                "p_value": np.where(reported, p_values[:, q], np.nan),
                "p_adjusted": np.nan,
                "family_size": 0,
                "tolerance": np.where(kind == "vs_model", np.nan, np.nan if delta is None else delta),
                "p_within": np.where(reported & (kind != "vs_model") & (caveat[:, q] == ""), within[:, q], np.nan),
                "p_within_adjusted": np.nan,
                "verdict": "",
                "n_undefined": undefined[:, q],
                "reported": reported,
                "reason": reason.astype(str),
                "caveat": caveat[:, q].astype(str),
                "_order": np.arange(n_c),
            }
        )
        frames.append(frame[keep])
    table = pd.concat(frames, ignore_index=True)
    # the order of the old tables: by comparison, then metric
    table = table.sort_values(["_order"], kind="stable").drop(columns="_order").reset_index(drop=True)
    by = family_keys(adjust_scope)
    tested = table["kind"].isin(TESTED_KINDS)
    alpha = 1.0 - confidence
    families = [table[tested]] if not by else [group for _, group in table[tested].groupby(by, sort=False)]
    for group in families:
        values = group["p_value"].to_numpy(dtype=np.float64)
        adjusted, adjusted_within = difference_verdicts(
            values, group["p_within"].to_numpy(dtype=np.float64), alpha=alpha, method=adjust_method
        )
        table.loc[group.index, "p_adjusted"] = adjusted
        table.loc[group.index, "p_within_adjusted"] = adjusted_within
        table.loc[group.index, "family_size"] = int(np.isfinite(values).sum())
    table["verdict"] = _verdicts(table, alpha)
    table["note"] = disagreement_notes(table["ci_low"], table["ci_high"], table["p_value"], alpha).astype(str)
    table["reported"] = table["reported"].astype(bool)
    table["family_size"] = table["family_size"].astype(np.int64)
    table["n_undefined"] = table["n_undefined"].astype(np.int64)
    return table[list(COMPARISON_COLUMNS)]
