"""Controlled evaluation of an audit: ``M_a``, ``T_a`` and shared-space metrics per slice.

For every family of slices except ``overall`` (each attribute, each intersection of attributes) the
slices are the subgroups ``a`` of a categorical variable ``A``. For each requested control variable
``V`` (paper section 4.2, Supplementary A.1):

- ``V = none``: ``M_a`` is the population's metric and ``T_a = metric(A = a) - M_a``, the slice minus
  overall; these rows come from the audit's own bootstrap (the same resamples as the slices table);
- ``V = X`` (the ``features``), ``Y`` (the label) or ``R`` (each model's score): ``P(A = a | V)`` is
  cross-fitted on the file itself by the estimator that fits ``V``
  (:func:`disaggregated_eval.weight_models.group_proba_for_control`, ``docs/method.md``, "Weights"):
  the cell frequency where ``V`` takes at most 50 distinct values (the label; a score in deciles), a
  spline logistic regression of ``A`` on the logit of a continuous score, the grid-searched
  HistGradientBoosting (the paper's ``max_leaf_nodes`` grid and folds) for several features; seeded,
  seed path ``("audit", "weights", family, V)``, and ``(..., "R", model)`` for ``R``; before the bootstrap;
  the weighted population metrics ``M_a`` (the family's evaluated rows weighted by ``P(A = a | V)``)
  and the shared-space metrics of Cai et al. are outputs of the audit's one bootstrap
  (:mod:`.estimates`), and ``T_a = metric(A = a) - M_a`` is their paired difference with the slice's
  own metric (:func:`disaggregated_eval.derived.difference`), every metric weighted by the sample
  weights (the weight models themselves are fitted unweighted).

Diagnostics of the weights (:func:`disaggregated_eval.weight_diagnostics.weight_diagnostics`), on every
weighted row: the estimator (``weight_method``), the standardised mean difference of ``V`` between
the slice and the re-weighted population of largest absolute value (``balance_smd``; above
``POOR_BALANCE_SMD`` = 0.1 balance is poor, named in the notes and marked in the report) and Kish's
effective sample size of the weights of ``M_a`` (``effective_sample_size``). Where ``V`` (nearly)
determines the slice (no value of ``V`` shared with the rest, disjoint ranges, or the rest carrying
under 1% of the weight it would carry if ``V`` said nothing), ``M_a`` is the slice's own metric and
``T_a`` is 0 by construction: that row's ``T_a`` and shared-space metric are withheld with the reason.

Levels too small to cross-fit. Cross-fitting in ``crossfit_folds`` outer folds with an inner
``cv_folds``-fold grid search needs, for every level, ``crossfit_folds`` rows and ``cv_folds`` rows in
the training part of every outer fold: at least ``n_min`` rows, the smallest ``n >= crossfit_folds``
with ``n - ceil(n / crossfit_folds) >= cv_folds`` (7 with the default 5 and 5). Smaller levels
(intersection cells often are) are left out of that family's weighted controlled evaluation, rows and
all, with a note naming the slice and its size; the family's remaining levels are evaluated among
themselves (their ``M_a`` is over the rows of the remaining levels, on the audit's resamples). A
family with fewer than two remaining levels is skipped with a note. The ``V = none`` rows keep every
slice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import seeds
from ..derived import Replicated, difference, summarise, take
from ..weight_diagnostics import POOR_BALANCE_SMD, weight_diagnostics
from ..weight_models import group_proba_for_control, score_frame
from .columns import CONTROLLED_COLUMNS
from .estimates import AuditEstimates, ControlledWeights
from .inputs import AuditInput
from .options import AuditOptions
from .slices import SlicePlan

__all__ = [
    "ControlledPlan",
    "plan_controlled",
    "fit_controlled_weights",
    "weight_notes",
    "controlled_table",
    "min_crossfit_rows",
]

_LABEL_FEATURE = "y"


def min_crossfit_rows(crossfit_folds: int, cv_folds: int) -> int:
    """Fewest rows a level needs to be cross-fitted (module docstring)."""
    n = crossfit_folds
    while n - math.ceil(n / crossfit_folds) < cv_folds:
        n += 1
    return n


@dataclass(frozen=True)
class _FamilyControl:
    family: int
    kept: np.ndarray  # local level codes kept, increasing
    rows: np.ndarray  # rows of the kept levels (increasing)
    codes: np.ndarray  # group code 0..K'-1 of each of those rows
    labels: tuple[str, ...]  # slice names of the kept levels


@dataclass(frozen=True)
class ControlledPlan:
    """Which families (and levels) get a weighted controlled evaluation; notes on what is left out."""

    weighted: tuple[str, ...]  # controls other than none, in vocabulary order
    families: tuple[_FamilyControl, ...]
    notes: tuple[str, ...]


def plan_controlled(prepared: AuditInput, plan: SlicePlan, opts: AuditOptions) -> ControlledPlan:
    """Decide, before any work, which levels can be cross-fitted (module docstring)."""
    weighted = tuple(c for c in opts.controls if c != "none")
    if not weighted:
        return ControlledPlan((), (), ())
    need = min_crossfit_rows(opts.crossfit_folds, opts.cv_folds)
    families: list[_FamilyControl] = []
    notes: list[str] = []
    for f in range(1, len(plan.families)):
        family = plan.families[f]
        sizes = np.bincount(family.codes, minlength=family.n_slices)
        usable = sizes >= need
        if prepared.weight is not None:  # a level needs some positive sample weight
            usable &= np.bincount(family.codes, weights=prepared.weight, minlength=family.n_slices) > 0
        kept = np.flatnonzero(usable)
        small = [i for i in range(family.n_slices) if not usable[i]]
        if small:
            shown = ", ".join(f"{plan.names[family.slice_ids[i]]} ({sizes[i]} rows)" for i in small[:8])
            more = f" and {len(small) - 8} more" if len(small) > 8 else ""
            notes.append(
                f"controlled evaluation of {family.name} (V = {', '.join(weighted)}): left out {shown}{more}; "
                f"cross-fitting P(A | V) in {opts.crossfit_folds} folds with a {opts.cv_folds}-fold grid search "
                f"needs at least {need} rows per level (and some positive sample weight); the other levels "
                f"are evaluated among themselves, on resamples of their own rows"
            )
        if kept.size < 2:
            notes.append(
                f"controlled evaluation of {family.name} (V = {', '.join(weighted)}) skipped: fewer than two "
                f"levels have {need} rows"
            )
            continue
        member = np.isin(family.codes, kept)
        rows = np.flatnonzero(member)
        remap = np.full(family.n_slices, -1, dtype=np.int64)
        remap[kept] = np.arange(kept.size)
        families.append(
            _FamilyControl(
                family=f,
                kept=kept,
                rows=rows,
                codes=remap[family.codes[rows]],
                labels=tuple(plan.names[family.slice_ids[i]] for i in kept),
            )
        )
    hard = [m for m in opts.scores if prepared.hard[m]]
    if "R" in weighted and hard:
        notes.append(
            f"controlled evaluation with V = R of {', '.join(hard)}: a hard 0/1 prediction, so R is the decision "
            f"itself (two values), not a risk score; T_a compares people with the same decision"
        )
    if prepared.weight is not None:
        notes.append(
            "controlled evaluation: the weight models P(A | V) are fitted without sample weights; every "
            "metric (subgroup, M_a, T_a, shared-space) is sample-weighted"
        )
    return ControlledPlan(weighted, tuple(families), tuple(notes))


def _base(estimates: AuditEstimates) -> Replicated:
    return Replicated(point=estimates.point, replicates=estimates.replicates)


def _none_rows(plan, opts, estimates: AuditEstimates, reasons, metric_ok, intervals) -> list[pd.DataFrame]:
    """Rows of V = none: M_a = overall, T_a = slice - overall, with the intervals of the slices table and
    of the ``vs_overall`` comparisons (the same quantities: one interval each)."""
    frames = []
    own_low, own_high, gap_low, gap_high = intervals
    for m, model in enumerate(opts.scores):
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
            for q, metric in enumerate(opts.metrics):
                if not metric_ok[m, q]:
                    continue
                why = reasons[m, ids, q].astype(str)
                overall_why = str(reasons[m, 0, q])
                reason = np.array([w if w else (f"overall: {overall_why}" if overall_why else "") for w in why])
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


def _fold_progress(progress, stage: str, total: int) -> Callable[[str], None] | None:
    if progress is None:
        return None
    done = [0]
    progress(stage, 0, total)

    def report(_message: str) -> None:
        done[0] += 1
        progress(stage, done[0], total)

    return report


def fit_controlled_weights(
    cplan: ControlledPlan, prepared: AuditInput, plan: SlicePlan, opts: AuditOptions, *, progress=None
) -> list[ControlledWeights]:
    """Cross-fit ``P(A | V)`` for every family and weighted control (and model, for ``V = R``).

    Returns
    -------
    list of ControlledWeights
        One entry per (family, control, model); for ``X`` and ``Y`` the same weights for every model.
    """
    out: list[ControlledWeights] = []
    n = prepared.n
    for fc in cplan.families:
        family = plan.families[fc.family]
        rows = fc.rows
        k = len(fc.labels)
        groups = np.full(n, -1, dtype=np.int64)
        groups[rows] = fc.codes
        slices = family.slice_ids[fc.kept]
        common = dict(
            n_groups=k,
            grid=opts.max_leaf_nodes,
            n_splits=opts.cv_folds,
            crossfit_folds=opts.crossfit_folds,
            group_labels=list(fc.labels),
            n_threads=opts.n_threads,
        )
        sample_weight = None if prepared.weight is None else prepared.weight[rows]
        for control in cplan.weighted:
            targets = list(range(len(opts.scores))) if control == "R" else [None]
            for target in targets:
                if control == "X":
                    V = prepared.features.iloc[rows].reset_index(drop=True)
                    categorical = list(prepared.categorical)
                elif control == "Y":
                    V = pd.DataFrame({_LABEL_FEATURE: prepared.y[rows]})
                    categorical = []
                else:
                    V = score_frame(prepared.scores[opts.scores[target]][rows])
                    categorical = []
                model = opts.scores[target] if target is not None else None
                path = ("audit", "weights", family.name, control) + ((model,) if control == "R" else ())
                stage = f"weights {family.name} V={control}" + (f" ({model})" if control == "R" else "")
                fit = group_proba_for_control(
                    V,
                    fc.codes,
                    categorical=categorical,
                    seed=seeds.seed_sequence(opts.seed, *path),
                    progress=_fold_progress(progress, stage, opts.crossfit_folds),
                    **common,
                )
                diagnostics = weight_diagnostics(
                    V, fc.codes, fit.proba, n_groups=k, categorical=categorical, sample_weight=sample_weight
                )
                full = np.zeros((n, k))
                full[rows] = fit.proba
                for m in [target] if target is not None else range(len(opts.scores)):
                    out.append(
                        ControlledWeights(
                            fc.family, control, m, full, groups, slices, fit.method, diagnostics, fit.note
                        )
                    )
    return out


def weight_notes(weights: list[ControlledWeights], plan: SlicePlan, opts: AuditOptions) -> list[str]:
    """Notes on the fitted weight models: the estimator (one note for the families that share it), then
    one per family with slices without overlap (withheld) or with poor balance (module docstring)."""
    methods: dict[tuple, list[str]] = {}
    problems = []
    seen = set()
    for cw in weights:
        key = (cw.family, cw.control, cw.model if cw.control == "R" else None)
        if key in seen or cw.diagnostics is None:
            continue
        seen.add(key)
        family = plan.families[cw.family].name
        control = f"V = {cw.control}" + (f" ({opts.scores[cw.model]})" if cw.control == "R" else "")
        methods.setdefault((control, cw.note or cw.method), []).append(family)
        diag = cw.diagnostics
        names = [plan.names[s] for s in cw.slices]
        no_overlap = [names[g] for g, why in enumerate(diag["overlap_reason"]) if why]
        poor = [
            f"{names[g]} ({smd:+.2f} on {term})"
            for g, (smd, term, bad) in enumerate(zip(diag["balance_smd"], diag["balance_term"], diag["poor_balance"]))
            if bad and not diag["overlap_reason"].iloc[g]
        ]
        parts = []
        if no_overlap:
            parts.append(
                f"no overlap (V nearly determines the slice, so M_a is its own metric and T_a is 0 by "
                f"construction), T_a withheld: {', '.join(no_overlap)}"
            )
        if poor:
            parts.append(
                f"poor balance (|standardised mean difference of V| above {POOR_BALANCE_SMD:g} between the "
                f"slice and the re-weighted population; read T_a with care): {', '.join(poor)}"
            )
        if parts:
            problems.append(f"weights of {family}, {control}: " + "; ".join(parts))
    notes = [f"weights of {', '.join(families)}, {control}: {what}" for (control, what), families in methods.items()]
    return notes + problems


def _weighted_rows(fc, plan, opts, weighted, estimates: AuditEstimates, reasons, metric_ok, intervals, fitted):
    own_low, own_high = intervals[:2]
    family = plan.families[fc.family]
    base = _base(estimates)
    slices = family.slice_ids[fc.kept]
    frames = []
    for control in weighted:
        for m, model in enumerate(opts.scores):
            population, space = estimates.controlled_rows[(fc.family, control, m)]
            cw = fitted[(fc.family, control, m)]
            diag = cw.diagnostics
            overlap = diag["overlap_reason"].to_numpy(dtype=object).astype(str)
            own_rows = estimates.slice_rows[m, slices, 0]
            own = estimates.point[own_rows]  # the slices' own estimates; their intervals are the slices table's
            ma = summarise(take(base, population), confidence=opts.confidence)
            ta = summarise(difference(base, own_rows, population), confidence=opts.confidence)
            ss = summarise(take(base, space), confidence=opts.confidence)
            for q, metric in enumerate(opts.metrics):
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
    opts: AuditOptions,
    *,
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
    (:func:`fit_controlled_weights`) give their diagnostics and the rows withheld for no overlap.
    """
    fitted = {(cw.family, cw.control, cw.model): cw for cw in weights}
    intervals = _table_intervals(plan, opts, slices, comparisons)
    frames: list[pd.DataFrame] = []
    if "none" in opts.controls:
        frames += _none_rows(plan, opts, estimates, reasons, metric_ok, intervals)
    for fc in cplan.families:
        frames += _weighted_rows(fc, plan, opts, cplan.weighted, estimates, reasons, metric_ok, intervals, fitted)
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in CONTROLLED_COLUMNS})
    table = pd.concat(frames, ignore_index=True)[list(CONTROLLED_COLUMNS)]
    order = {
        "model": {name: i for i, name in enumerate(opts.scores)},
        "attribute": {fam.name: i for i, fam in enumerate(plan.families)},
        "slice": {name: i for i, name in enumerate(plan.names)},
        "control": {c: i for i, c in enumerate(("none", "X", "Y", "R"))},
        "metric": {name: i for i, name in enumerate(opts.metrics)},
    }
    keys = pd.DataFrame({c: table[c].map(mapping) for c, mapping in order.items()})
    table = table.iloc[np.lexsort([keys[c].to_numpy() for c in reversed(list(order))])].reset_index(drop=True)
    table["reported"] = table["reported"].astype(bool)
    table["n_undefined"] = table["n_undefined"].astype(np.int64)
    return table


def _table_intervals(plan, opts, slices: pd.DataFrame, comparisons: pd.DataFrame):
    """The slices' intervals and the vs_overall comparisons' intervals as arrays (n_models, n_slices, n_metrics)."""
    shape = (len(opts.scores), plan.n_slices, len(opts.metrics))
    out = [np.full(shape, np.nan) for _ in range(4)]
    model = {name: m for m, name in enumerate(opts.scores)}
    slice_ = {name: s for s, name in enumerate(plan.names)}
    metric = {name: q for q, name in enumerate(opts.metrics)}
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
