"""The weights of an audit's controlled evaluation: which levels can be cross-fitted, and ``P(A | V)``.

For every family of slices except ``overall`` (each attribute, each intersection of attributes) the
slices are the subgroups ``a`` of a categorical variable ``A``. For each requested control variable
``V`` other than ``none`` (``X``, the ``features``; ``Y``, the label; ``R``, each model's score; paper
section 4.2, Supplementary A.1) ``P(A = a | V)`` is cross-fitted on the file itself by the estimator
that fits ``V`` (:func:`disaggregated_eval.weight_models.group_proba_for_control`, ``docs/method.md``,
"Weights"): the cell frequency where ``V`` takes at most 50 distinct values (the label; a score in
deciles), a spline logistic regression of ``A`` on the logit of a continuous score (on many rows fitted
on each level's counts in at most 512 bins of the score, so that 10^6 rows cost what the bins cost), the
grid-searched HistGradientBoosting (the paper's ``max_leaf_nodes`` grid and folds) for several features; seeded, seed
path ``("audit", "weights", family, V)``, and ``(..., "R", model)`` for ``R``. Every family and control shares one
outer split of the rows (:func:`disaggregated_eval.weight_models.shared_fold_ids` by the finest cell of the
attributes, seed path ``("audit", "weights", "folds")``; a family whose level would lack training rows in a fold
gets its own split from its seed path): rows alike in cell, label and score then get the same weights in every
fit, and the bootstrap merges them into one unit (COMPAS: about 1,200 units instead of 6,172 rows). All this runs
before the bootstrap, which
turns the weights into ``M_a`` and ``T_a`` (:mod:`.estimates`, the table: :mod:`.controlled`). The weight
models are fitted without sample weights.

Diagnostics of the weights (:func:`disaggregated_eval.weight_diagnostics.weight_diagnostics`), on every
weighted row: the estimator, the standardised mean difference of ``V`` between the slice and the
re-weighted population of largest absolute value (above ``POOR_BALANCE_SMD`` = 0.1 balance is poor, named
in the notes, :func:`weight_notes`) and Kish's effective sample size of the weights of ``M_a``.

Levels too small to cross-fit (:func:`plan_controlled`). Cross-fitting in ``crossfit_folds`` outer folds
with an inner ``cv_folds``-fold grid search needs, for every level, ``crossfit_folds`` rows and
``cv_folds`` rows in the training part of every outer fold: at least ``n_min`` rows, the smallest
``n >= crossfit_folds`` with ``n - ceil(n / crossfit_folds) >= cv_folds`` (7 with the default 5 and 5).
The rule is the same for every ``V``, also where ``P(A | V)`` is a cell frequency and no grid search runs,
so that every control evaluates the same levels; the note says which estimator each ``V`` gets.
Smaller levels (intersection cells often are) are left out of that family's weighted controlled
evaluation, rows and all, with a note naming the slice and its size; the family's remaining levels are
evaluated among themselves (their ``M_a`` is over the rows of the remaining levels, on the audit's
resamples). A family with fewer than two remaining levels is skipped with a note. The ``V = none`` rows
keep every slice.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import seeds
from ..weight_diagnostics import POOR_BALANCE_SMD, weight_diagnostics
from ..weight_models import choose_weight_method, group_proba_for_control, score_frame, shared_fold_ids
from .estimates import ControlledWeights
from .inputs import AuditInput
from .slices import SlicePlan

__all__ = ["ControlledPlan", "plan_controlled", "fit_controlled_weights", "weight_notes", "min_crossfit_rows"]

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

    def weighted_levels(self) -> list[int]:
        """The levels of each weighted evaluation (one per family and control), as the bootstrap holds them
        (:func:`.estimates.n_outputs`)."""
        return [len(fc.labels) for fc in self.families for _ in self.weighted]

    def weight_stages(self, plan: SlicePlan, model_names: Sequence[str]) -> list[tuple[str, str]]:
        """Each weight model's stage (as the progress callback names it) and control variable, in the order
        :func:`fit_controlled_weights` fits them: per family, control, and (``V = R``) model."""
        return [
            (_stage_name(plan.families[fc.family].name, control, model), control)
            for fc in self.families
            for control in self.weighted
            for model in (list(model_names) if control == "R" else [None])
        ]


def _stage_name(family: str, control: str, model: str | None) -> str:
    return f"weights {family} V={control}" + (f" ({model})" if model is not None else "")


def plan_controlled(
    prepared: AuditInput, plan: SlicePlan, *, controls: Sequence[str], crossfit_folds: int, cv_folds: int
) -> ControlledPlan:
    """Decide, before any work, which levels can be cross-fitted (module docstring).

    Parameters
    ----------
    prepared : AuditInput
    plan : SlicePlan
    controls : sequence of str
        The audit's control variables (``none`` needs no weights).
    crossfit_folds, cv_folds : int
        Outer folds of the cross-fitting and folds of each grid search.

    Returns
    -------
    ControlledPlan
    """
    weighted = tuple(c for c in controls if c != "none")
    if not weighted:
        return ControlledPlan((), (), ())
    need = min_crossfit_rows(crossfit_folds, cv_folds)
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
            rows = np.flatnonzero(np.isin(family.codes, kept))
            estimators = _estimators_text(prepared, weighted, rows, crossfit_folds=crossfit_folds, cv_folds=cv_folds)
            positive = " and some positive sample weight" if prepared.weight is not None else ""
            notes.append(
                f"controlled evaluation of {family.name} (V = {', '.join(weighted)}): left out {shown}{more}; "
                f"{estimators}; every level needs at least {need} rows{positive} (what a fitted weight model's "
                f"{cv_folds}-fold grid search needs in each fold, the same rule for every V so that all controls "
                f"evaluate the same levels); the other levels are evaluated among themselves, on resamples of "
                f"their own rows"
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
    hard = [m for m in prepared.scores if prepared.hard[m]]
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


def _control_frame(
    prepared: AuditInput, control: str, rows: np.ndarray, model: str | None
) -> tuple[pd.DataFrame, list[str]]:
    """The control variable ``V`` on ``rows`` (the features, the label, or ``model``'s score) and its
    categorical columns, as the weight models take them."""
    if control == "X":
        return prepared.features.iloc[rows].reset_index(drop=True), list(prepared.categorical)
    if control == "Y":
        return pd.DataFrame({_LABEL_FEATURE: prepared.y[rows]}), []
    return score_frame(prepared.scores[model][rows]), []


#: What each estimator of ``P(A | V)`` fits (:data:`disaggregated_eval.weight_models.WEIGHT_METHODS`), for the notes.
_ESTIMATOR_TEXTS = {
    "cell_frequency": "the cell frequency",
    "spline_logistic": "a spline logistic regression",
    "gradient_boosting": "gradient boosting",
}


def _estimators_text(
    prepared: AuditInput, weighted: Sequence[str], rows: np.ndarray, *, crossfit_folds: int, cv_folds: int
) -> str:
    """What the cross-fitting of ``P(A | V)`` on ``rows`` runs for each weighted control: the cell frequency
    (no model, no grid search) or a model with its grid search (:func:`choose_weight_method`, the choice
    :func:`fit_controlled_weights` makes)."""
    chosen: dict[str, list[str]] = {}
    for control in weighted:
        for model in prepared.scores if control == "R" else [None]:
            V, categorical = _control_frame(prepared, control, rows, model)
            method = choose_weight_method(V, categorical=categorical)
            name = f"V = {control}" + (f" ({model})" if model is not None and len(prepared.scores) > 1 else "")
            chosen.setdefault(method, []).append(name)
    parts = []
    for method, names in chosen.items():
        search = (
            "no model is fitted, no grid search runs"
            if method == "cell_frequency"
            else f"with a {cv_folds}-fold grid search in each fold"
        )
        parts.append(f"{_ESTIMATOR_TEXTS[method]} for {' and '.join(names)} ({search})")
    return f"P(A | V) is cross-fitted in {crossfit_folds} folds: " + "; ".join(parts)


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
    cplan: ControlledPlan,
    prepared: AuditInput,
    plan: SlicePlan,
    *,
    grid: Sequence[int],
    cv_folds: int,
    crossfit_folds: int,
    n_threads: int,
    seed: int,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[ControlledWeights]:
    """Cross-fit ``P(A | V)`` for every family and weighted control (and model, for ``V = R``).

    Parameters
    ----------
    cplan : ControlledPlan
        From :func:`plan_controlled`.
    prepared : AuditInput
        The models are its scores, in their order.
    plan : SlicePlan
    grid : sequence of int
        ``max_leaf_nodes`` of the HistGradientBoosting grid search (paper Supplementary A.3).
    cv_folds, crossfit_folds : int
        Folds of each grid search and outer folds of the cross-fitting.
    n_threads : int
        OpenMP threads of the fits.
    seed : int
        The audit's root seed (seed paths in the module docstring).
    progress : callable, optional
        ``progress(stage, done, total)`` after each fold.

    Returns
    -------
    list of ControlledWeights
        One entry per (family, control, model); for ``X`` and ``Y`` the same weights for every model.
    """
    out: list[ControlledWeights] = []
    n = prepared.n
    model_names = list(prepared.scores)
    # One outer split of the rows for every family and control (module docstring), stratified by the cell.
    folds = shared_fold_ids(
        plan.cell_codes,
        crossfit_folds=crossfit_folds,
        random_state=seeds.sklearn_seed(seed, "audit", "weights", "folds"),
    )
    for fc in cplan.families:
        family = plan.families[fc.family]
        rows = fc.rows
        k = len(fc.labels)
        groups = np.full(n, -1, dtype=np.int64)
        groups[rows] = fc.codes
        slices = family.slice_ids[fc.kept]
        common = dict(
            n_groups=k,
            grid=list(grid),
            n_splits=cv_folds,
            crossfit_folds=crossfit_folds,
            group_labels=list(fc.labels),
            n_threads=n_threads,
        )
        sample_weight = None if prepared.weight is None else prepared.weight[rows]
        for control in cplan.weighted:
            targets = list(range(len(model_names))) if control == "R" else [None]
            for target in targets:
                model = model_names[target] if target is not None else None
                V, categorical = _control_frame(prepared, control, rows, model)
                path = ("audit", "weights", family.name, control) + ((model,) if control == "R" else ())
                stage = _stage_name(family.name, control, model if control == "R" else None)
                fit = group_proba_for_control(
                    V,
                    fc.codes,
                    categorical=categorical,
                    seed=seeds.seed_sequence(seed, *path),
                    fold_ids=folds[rows],
                    progress=_fold_progress(progress, stage, crossfit_folds),
                    **common,
                )
                diagnostics = weight_diagnostics(
                    V, fc.codes, fit.proba, n_groups=k, categorical=categorical, sample_weight=sample_weight
                )
                full = np.zeros((n, k))
                full[rows] = fit.proba
                for m in [target] if target is not None else range(len(model_names)):
                    out.append(
                        ControlledWeights(
                            fc.family, control, m, full, groups, slices, fit.method, diagnostics, fit.note
                        )
                    )
    return out


def weight_notes(weights: list[ControlledWeights], plan: SlicePlan, model_names: Sequence[str]) -> list[str]:
    """Notes on the fitted weight models: the estimator (one note for the families that share it), then
    one per family with slices without overlap (withheld) or with poor balance (module docstring).

    Parameters
    ----------
    weights : list of ControlledWeights
        From :func:`fit_controlled_weights`.
    plan : SlicePlan
    model_names : sequence of str
        The models, in the order of the weights' ``model`` index.
    """
    methods: dict[tuple, list[str]] = {}
    problems = []
    seen = set()
    for cw in weights:
        key = (cw.family, cw.control, cw.model if cw.control == "R" else None)
        if key in seen or cw.diagnostics is None:
            continue
        seen.add(key)
        family = plan.families[cw.family].name
        control = f"V = {cw.control}" + (f" ({model_names[cw.model]})" if cw.control == "R" else "")
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
