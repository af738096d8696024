"""Comparisons of slices: differences with paired intervals, permutation p-values, adjustment.

Kinds (column ``kind``):

- ``vs_overall``: slice minus the whole population (``reference`` = ``overall``);
- ``vs_rest``: slice minus the rest of the rows (``reference`` = ``rest``);
- ``pairwise``: slice minus another slice of the same attribute, or of the same intersection
  family (``reference`` = the other slice; every pair once, in slice order);
- ``vs_model``: on one slice, a model minus the first model (``reference`` = the first model's name;
  no p-value).

Intervals are percentile intervals of the per-resample differences (the bootstrap is paired: both
terms come from the same resample; :func:`disaggregated_eval.derived.difference`). p-values come from
the permutation tests of :mod:`disaggregated_eval.engine.permutation`; ``p_adjusted`` adjusts them within the family of one model and metric (all
comparisons of kinds ``vs_overall``, ``vs_rest`` and ``pairwise`` that are reported) with Holm's
step-down method or Benjamini-Hochberg's (``statsmodels.stats.multitest.multipletests``, methods
``holm`` and ``fdr_bh``).

A difference is reported only when both of its terms are (the minimum-size rules of
:mod:`.withheld`); otherwise it is NaN, its p-values are NaN and it is not part of the family, and
``reason`` names the term and the rule. The interval is given all the same.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from statsmodels.stats.multitest import multipletests

from .. import seeds
from ..derived import Replicated, difference, summarise
from ..engine.permutation import permutation_space, permutation_test, seed_key
from .estimates import AuditEstimates
from .result import COMPARISON_COLUMNS
from .slices import SlicePlan

__all__ = ["Term", "Comparison", "enumerate_comparisons", "comparison_table", "permutation_pvalues", "adjust"]

_METHODS = {"holm": "holm", "bh": "fdr_bh"}


@dataclass(frozen=True)
class Comparison:
    """One comparison of one model: ``plus - minus`` of two (model, slice, side) terms."""

    kind: str
    model: int
    slice: int
    reference: str
    plus: tuple[int, int, int]  # (model, slice, side)
    minus: tuple[int, int, int]


Term = tuple[int, int, int]


def enumerate_comparisons(plan: SlicePlan, n_models: int, model_names: Sequence[str]) -> list[Comparison]:
    """Every comparison, grouped by model, then kind (vs_overall, vs_rest, pairwise, vs_model)."""
    out: list[Comparison] = []
    for m in range(n_models):
        for s in range(1, plan.n_slices):
            out.append(Comparison("vs_overall", m, s, "overall", (m, s, 0), (m, 0, 0)))
        for s in range(1, plan.n_slices):
            out.append(Comparison("vs_rest", m, s, "rest", (m, s, 0), (m, s, 1)))
        for family in plan.families[1:]:
            ids = family.slice_ids
            for i in range(ids.shape[0]):
                for j in range(i + 1, ids.shape[0]):
                    a, b = int(ids[i]), int(ids[j])
                    out.append(Comparison("pairwise", m, a, plan.names[b], (m, a, 0), (m, b, 0)))
        if m > 0:
            for s in range(plan.n_slices):
                out.append(Comparison("vs_model", m, s, model_names[0], (m, s, 0), (0, s, 0)))
    return out


def _term_reason(term: Term, reasons: np.ndarray, rest_reasons: np.ndarray, q: int, label: str) -> str:
    m, s, side = term
    text = (reasons if side == 0 else rest_reasons)[m, s, q]
    return f"{label}: {text}" if text else ""


def permutation_pvalues(
    comparisons: Sequence[Comparison],
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    model_names: Sequence[str],
    point: np.ndarray,
    *,
    metrics: Sequence[str],
    slots: np.ndarray,
    threshold: float,
    odds: float,
    n_permutations: int,
    seed: int,
    n_threads: int,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """Permutation p-values of every comparison (NaN for vs_model), shape (n_comparisons, n_metrics).

    Population tests (one per model and slice) give the p-values of both ``vs_overall`` and
    ``vs_rest``; pairwise tests one each. ``point`` (n_models, n_slices, 2, n_metrics): the slices'
    and rests' point estimates. Seed path of a test: ``("audit", "permutation", model, slice)`` or
    ``("audit", "permutation", model, slice, other slice)``. A test's universe is laid out in the
    model's score order (stable), so that a permutation's positions refer to the same rows whatever
    the input order.
    """
    n_q = slots.shape[0]
    p = np.full((len(comparisons), n_q), np.nan)
    if n_permutations == 0:
        return p
    counts = plan.slice_counts()
    n = plan.cell_codes.shape[0]
    orders = [np.argsort(r, kind="stable") for r in scores]
    w = np.ones(n) if weight is None else weight

    def space(m: int, rows: np.ndarray):
        rows = orders[m][rows]  # positions in score order -> rows
        return permutation_space(y[rows], scores[m][rows], w[rows], metrics=metrics, threshold=threshold)

    def positions(m: int, s: int) -> np.ndarray:
        """Positions (increasing) of slice s's rows in model m's score order."""
        return np.flatnonzero(plan.slice_mask(s)[orders[m]])

    index: dict[tuple[str, int, int, str], int] = {
        (c.kind, c.model, c.slice, c.reference): k for k, c in enumerate(comparisons)
    }
    tests: list[tuple[int, int, int | None]] = []  # (model, slice, other slice or None)
    for c in comparisons:
        if c.kind == "vs_overall" and 0 < counts[c.slice] < n:
            tests.append((c.model, c.slice, None))
        elif c.kind == "pairwise":
            other = c.minus[1]
            if counts[c.slice] > 0 and counts[other] > 0:
                tests.append((c.model, c.slice, other))
    total = len(tests) * n_permutations
    if progress is not None:
        progress(0, total)
    full: dict[int, object] = {}
    for done, (m, s, other) in enumerate(tests, start=1):
        name = model_names[m]
        if other is None:
            if m not in full:
                full[m] = space(m, np.arange(n))
            universe = full[m]
            observed = np.stack([point[m, s, 0] - point[m, 0, 0], point[m, s, 0] - point[m, s, 1]])
            key = seed_key(seeds.seed_sequence(seed, "audit", "permutation", name, plan.names[s]))
            # the first side's rows are those of the slice; the permutation only needs their number
            values, _ = permutation_test(
                universe,
                int(counts[s]),
                observed,
                pairwise=False,
                fixed=point[m, 0, 0],
                slots=slots,
                odds=odds,
                n_permutations=n_permutations,
                key=key,
                n_threads=n_threads,
            )
            p[index[("vs_overall", m, s, "overall")]] = values[0]
            p[index[("vs_rest", m, s, "rest")]] = values[1]
        else:
            rows = np.sort(np.concatenate([positions(m, s), positions(m, other)]))
            observed = (point[m, s, 0] - point[m, other, 0])[None, :]
            key = seed_key(seeds.seed_sequence(seed, "audit", "permutation", name, plan.names[s], plan.names[other]))
            values, _ = permutation_test(
                space(m, rows),
                int(counts[s]),
                observed,
                pairwise=True,
                fixed=None,
                slots=slots,
                odds=odds,
                n_permutations=n_permutations,
                key=key,
                n_threads=n_threads,
            )
            p[index[("pairwise", m, s, plan.names[other])]] = values[0]
        if progress is not None:
            progress(done * n_permutations, total)
    return p


def adjust(p_values: np.ndarray, method: str) -> np.ndarray:
    """Adjusted p-values of one family (NaN entries are not part of it and stay NaN).

    ``method``: ``holm`` (Holm's step-down), ``bh`` (Benjamini-Hochberg) or ``none`` (a copy).
    """
    out = np.full(p_values.shape, np.nan)
    finite = np.isfinite(p_values)
    if method == "none":
        out[finite] = p_values[finite]
    elif finite.any():
        # statsmodels' Holm branch calls gc.collect(), which scans every object of the process (~0.2 s
        # with scikit-learn and numba loaded, once per family); objects that exist before the call
        # cannot be garbage of it, so they are frozen (gc.freeze: not scanned) for its duration.
        gc.freeze()
        try:
            out[finite] = multipletests(p_values[finite], method=_METHODS[method])[1]
        finally:
            gc.unfreeze()
    return out


def comparison_table(
    comparisons: Sequence[Comparison],
    estimates: AuditEstimates,
    p_values: np.ndarray,
    reasons: np.ndarray,
    rest_reasons: np.ndarray,
    metric_ok: np.ndarray,
    *,
    plan: SlicePlan,
    model_names: Sequence[str],
    metrics: Sequence[str],
    confidence: float,
    adjust_method: str,
) -> pd.DataFrame:
    """The ``comparisons`` table (:data:`.result.COMPARISON_COLUMNS`).

    Parameters
    ----------
    comparisons : sequence of Comparison
    estimates : AuditEstimates
        The audit's base quantities (slices and rests of every model) on the paired resamples.
    p_values : ndarray of shape (n_comparisons, n_metrics)
    reasons, rest_reasons : ndarray of shape (n_models, n_slices, n_metrics), object
        Why a slice's (a rest's) estimate is withheld, ``""`` when reported.
    metric_ok : ndarray of shape (n_models, n_metrics), bool
        Whether the model reports the metric (score metrics are left out for hard predictions).
    """
    n_res, _, n_q = estimates.replicates.shape
    base = Replicated(point=estimates.point, replicates=estimates.replicates)

    def idx(term: Term) -> int:
        m, s, side = term
        return int(estimates.slice_rows[m, s, side])

    plus = np.array([idx(c.plus) for c in comparisons], dtype=np.int64)
    minus = np.array([idx(c.minus) for c in comparisons], dtype=np.int64)
    difference_ = np.empty((len(comparisons), n_q))
    low = np.empty_like(difference_)
    high = np.empty_like(difference_)
    undefined = np.empty(difference_.shape, dtype=np.int64)
    chunk = max(1, int(2**24 // max(1, n_res * n_q)))
    for start in range(0, len(comparisons), chunk):
        sl = slice(start, start + chunk)
        summary = summarise(difference(base, plus[sl], minus[sl]), confidence=confidence)
        difference_[sl], low[sl], high[sl], undefined[sl] = (
            summary.estimate,
            summary.low,
            summary.high,
            summary.n_undefined,
        )

    rows = []
    for k, c in enumerate(comparisons):
        for q, metric in enumerate(metrics):
            if not (metric_ok[c.plus[0], q] and metric_ok[c.minus[0], q]):
                continue
            if c.kind == "vs_model":
                labels = (model_names[c.plus[0]], model_names[c.minus[0]])
            elif c.kind == "vs_rest":
                labels = ("slice", "rest")
            elif c.kind == "vs_overall":
                labels = ("slice", "overall")
            else:
                labels = (plan.names[c.plus[1]], plan.names[c.minus[1]])
            why = [
                _term_reason(c.plus, reasons, rest_reasons, q, labels[0]),
                _term_reason(c.minus, reasons, rest_reasons, q, labels[1]),
            ]
            reason = "; ".join(w for w in why if w)
            reported = reason == ""
            rows.append(
                (
                    model_names[c.model],
                    metric,
                    plan.names[c.slice],
                    c.reference,
                    c.kind,
                    difference_[k, q] if reported else np.nan,
                    low[k, q],
                    high[k, q],
                    p_values[k, q] if reported else np.nan,
                    np.nan,
                    int(undefined[k, q]),
                    reported,
                    reason,
                )
            )
    table = pd.DataFrame(rows, columns=list(COMPARISON_COLUMNS))
    table["p_adjusted"] = np.nan
    testable = table["kind"] != "vs_model"
    for (_, _), group in table[testable].groupby(["model", "metric"], sort=False):
        table.loc[group.index, "p_adjusted"] = adjust(group["p_value"].to_numpy(dtype=np.float64), adjust_method)
    table["reported"] = table["reported"].astype(bool)
    return table
