"""Controlled evaluation of an audit: ``M_a``, ``T_a`` and shared-space metrics per slice.

For every family of slices except ``overall`` (each attribute, each intersection of attributes) the
slices are the subgroups ``a`` of a categorical variable ``A``. For each requested control variable
``V`` (paper section 4.2, Supplementary A.1):

- ``V = none``: ``M_a`` is the population's metric and ``T_a = metric(A = a) - M_a``, the slice minus
  overall; these rows come from the audit's own bootstrap (the same resamples as the slices table);
- ``V = X`` (the ``features``), ``Y`` (the label) or ``R`` (each model's score): ``P(A = a | V)`` is
  cross-fitted on the file itself (:func:`disaggregated_eval.models.crossfit_group_proba`:
  HistGradientBoosting, the paper's ``max_leaf_nodes`` grid and folds, seeded; seed path
  ``("audit", "weights", family, V)``, and ``(..., "R", model)`` for ``R``), then
  :func:`disaggregated_eval.evaluation.controlled_evaluation` gives the subgroup metric, ``M_a``
  (all rows weighted by ``P(A = a | V)``), ``T_a = metric(A = a) - M_a`` and the shared-space metric
  of Cai et al., with paired bootstrap intervals, every metric weighted by the sample weights (the
  weight models themselves are fitted unweighted). Its resamples use the seed of the slices'
  bootstrap and, with ``within_group``, the cells of all attributes as strata, so when no level is
  left out they are the very resamples of the slices table.

Levels too small to cross-fit. Cross-fitting in ``crossfit_folds`` outer folds with an inner
``cv_folds``-fold grid search needs, for every level, ``crossfit_folds`` rows and ``cv_folds`` rows in
the training part of every outer fold: at least ``n_min`` rows, the smallest ``n >= crossfit_folds``
with ``n - ceil(n / crossfit_folds) >= cv_folds`` (7 with the default 5 and 5). Smaller levels
(intersection cells often are) are left out of that family's weighted controlled evaluation, rows and
all, with a note naming the slice and its size; the family's remaining levels are evaluated among
themselves (so their ``M_a`` is over the rows of the remaining levels). A family with fewer than two
remaining levels is skipped with a note. The ``V = none`` rows keep every slice.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import seeds
from ..bootstrap import percentile_interval
from ..evaluation import controlled_evaluation
from ..weight_models import crossfit_group_proba, score_frame
from ..weight_table import concat_weight_tables, weight_table
from .inputs import AuditInput
from .options import AuditOptions
from .result import CONTROLLED_COLUMNS
from .slices import SlicePlan

__all__ = ["ControlledPlan", "plan_controlled", "controlled_table", "min_crossfit_rows"]

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
    if prepared.weight is not None:
        notes.append(
            "controlled evaluation: the weight models P(A | V) are fitted without sample weights; every "
            "metric (subgroup, M_a, T_a, shared-space) is sample-weighted"
        )
    return ControlledPlan(weighted, tuple(families), tuple(notes))


def _none_rows(prepared, plan, opts, boot, reasons, metric_ok) -> list[pd.DataFrame]:
    """Rows of V = none from the audit's bootstrap: M_a = overall, T_a = slice - overall."""
    frames = []
    point = boot.point[:, :, 0, :]
    reps = boot.replicates[:, :, :, 0, :]
    low, high, _ = percentile_interval(reps, confidence=opts.confidence, axis=0)
    diff = reps - reps[:, :, :1, :]
    t_low, t_high, t_undef = percentile_interval(diff, confidence=opts.confidence, axis=0)
    for m, model in enumerate(opts.scores):
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
                            "subgroup": np.where(sub_ok, point[m, ids, q], np.nan),
                            "subgroup_low": low[m, ids, q],
                            "subgroup_high": high[m, ids, q],
                            "M_a": point[m, 0, q] if overall_why == "" else np.nan,
                            "M_a_low": low[m, 0, q],
                            "M_a_high": high[m, 0, q],
                            "T_a": np.where(ok, point[m, ids, q] - point[m, 0, q], np.nan),
                            "T_a_low": t_low[m, ids, q],
                            "T_a_high": t_high[m, ids, q],
                            "shared_space": np.nan,
                            "shared_space_low": np.nan,
                            "shared_space_high": np.nan,
                            "n_undefined": t_undef[m, ids, q].astype(np.int64),
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


def _weights(fc: _FamilyControl, prepared: AuditInput, plan: SlicePlan, opts: AuditOptions, weighted, progress):
    """The long weight table of P(A | V) for one family and every weighted control (and model)."""
    family = plan.families[fc.family]
    rows = fc.rows
    k = len(fc.labels)
    blocks = []
    common = dict(
        n_groups=k,
        grid=opts.max_leaf_nodes,
        n_splits=opts.cv_folds,
        crossfit_folds=opts.crossfit_folds,
        group_labels=list(fc.labels),
        n_threads=opts.n_threads,
    )
    for control in weighted:
        targets = list(opts.scores) if control == "R" else ["*"]
        for model in targets:
            if control == "X":
                V = prepared.features.iloc[rows].reset_index(drop=True)
                categorical = list(prepared.categorical)
            elif control == "Y":
                V = pd.DataFrame({_LABEL_FEATURE: prepared.y[rows]})
                categorical = []
            else:
                V = score_frame(prepared.scores[model][rows])
                categorical = []
            path = ("audit", "weights", family.name, control) + ((model,) if control == "R" else ())
            stage = f"weights {family.name} V={control}" + (f" ({model})" if control == "R" else "")
            proba, _ = crossfit_group_proba(
                V,
                fc.codes,
                categorical=categorical,
                seed=seeds.seed_sequence(opts.seed, *path),
                progress=_fold_progress(progress, stage, opts.crossfit_folds),
                **common,
            )
            blocks.append(weight_table(proba, weight_source="estimated", control=control, model=model))
    return concat_weight_tables(blocks)


def _weighted_rows(fc, prepared, plan, opts, weighted, reasons, metric_ok, bootstrap_seed, progress):
    family = plan.families[fc.family]
    table = _weights(fc, prepared, plan, opts, weighted, progress)
    stage = f"controlled {family.name}"
    if progress is not None:
        progress(stage, 0, opts.n_resamples)
    tidy = controlled_evaluation(
        prepared.y[fc.rows],
        fc.codes,
        {m: prepared.scores[m][fc.rows] for m in opts.scores},
        weights=table,
        group_labels=list(fc.labels),
        controls=("none",) + tuple(weighted),
        metrics=tuple(opts.metrics),
        n_resamples=opts.n_resamples,
        confidence=opts.confidence,
        seed=bootstrap_seed,
        threshold=opts.threshold,
        preference_threshold=opts.preference_threshold,
        shared_space=True,
        resampling=opts.resampling,
        strata=plan.cell_codes[fc.rows] if opts.resampling == "within_group" else None,
        sample_weight=None if prepared.weight is None else prepared.weight[fc.rows],
        n_threads=opts.n_threads,
        progress=(lambda done, total: progress(stage, done, total)) if progress is not None else None,
    )
    tidy = tidy[tidy["group"].isin(fc.labels)]
    key = ["model", "group", "metric"]

    def part(comparison: str, control: str, prefix: str) -> pd.DataFrame:
        sel = tidy[(tidy["comparison"] == comparison) & (tidy["control"] == control)]
        out = sel[key + ["estimate", "ci_low", "ci_high", "n_undefined"]].rename(
            columns={
                "estimate": prefix,
                "ci_low": f"{prefix}_low",
                "ci_high": f"{prefix}_high",
                "n_undefined": f"{prefix}_undefined",
            }
        )
        return out.set_index(key)

    subgroup = part("absolute", "none", "subgroup")
    slice_index = {name: s for s, name in enumerate(plan.names)}
    model_index = {name: m for m, name in enumerate(opts.scores)}
    metric_index = {name: q for q, name in enumerate(opts.metrics)}
    frames = []
    for control in weighted:
        joined = (
            subgroup.join(part("weighted_population", control, "M_a"))
            .join(part("controlled_difference", control, "T_a"))
            .join(part("shared_space", control, "shared_space"))
            .reset_index()
        )
        m_idx = joined["model"].map(model_index).to_numpy()
        s_idx = joined["group"].map(slice_index).to_numpy()
        q_idx = joined["metric"].map(metric_index).to_numpy()
        ok_metric = metric_ok[m_idx, q_idx]
        joined = joined[ok_metric]
        m_idx, s_idx, q_idx = m_idx[ok_metric], s_idx[ok_metric], q_idx[ok_metric]
        reason = reasons[m_idx, s_idx, q_idx].astype(str)
        ok = reason == ""
        frames.append(
            pd.DataFrame(
                {
                    "model": joined["model"].to_numpy(),
                    "attribute": family.name,
                    "slice": joined["group"].to_numpy(),
                    "control": control,
                    "metric": joined["metric"].to_numpy(),
                    "subgroup": np.where(ok, joined["subgroup"], np.nan),
                    "subgroup_low": joined["subgroup_low"].to_numpy(),
                    "subgroup_high": joined["subgroup_high"].to_numpy(),
                    "M_a": joined["M_a"].to_numpy(),
                    "M_a_low": joined["M_a_low"].to_numpy(),
                    "M_a_high": joined["M_a_high"].to_numpy(),
                    "T_a": np.where(ok, joined["T_a"], np.nan),
                    "T_a_low": joined["T_a_low"].to_numpy(),
                    "T_a_high": joined["T_a_high"].to_numpy(),
                    "shared_space": np.where(ok, joined["shared_space"], np.nan),
                    "shared_space_low": joined["shared_space_low"].to_numpy(),
                    "shared_space_high": joined["shared_space_high"].to_numpy(),
                    "n_undefined": joined["T_a_undefined"].to_numpy().astype(np.int64),
                    "reported": ok,
                    "reason": reason,
                }
            )
        )
    return frames


def controlled_table(
    cplan: ControlledPlan,
    prepared: AuditInput,
    plan: SlicePlan,
    opts: AuditOptions,
    *,
    boot,
    reasons: np.ndarray,
    metric_ok: np.ndarray,
    bootstrap_seed: np.random.SeedSequence,
    progress=None,
) -> pd.DataFrame:
    """The ``controlled`` table (:data:`.result.CONTROLLED_COLUMNS`), ordered by model, attribute,
    slice, control, metric."""
    frames: list[pd.DataFrame] = []
    if "none" in opts.controls:
        frames += _none_rows(prepared, plan, opts, boot, reasons, metric_ok)
    for fc in cplan.families:
        frames += _weighted_rows(fc, prepared, plan, opts, cplan.weighted, reasons, metric_ok, bootstrap_seed, progress)
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


def _dtype(column: str):
    if column in ("model", "attribute", "slice", "control", "metric", "reason"):
        return object
    if column == "reported":
        return bool
    if column == "n_undefined":
        return np.int64
    return np.float64
