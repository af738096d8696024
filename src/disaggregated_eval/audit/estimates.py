"""The audit's base quantities, on the engine's resamples: every metric of every model on every slice,
on the rest of the rows outside each slice, and on the weighted populations of the controlled evaluation.

The audit asks the engine (:mod:`disaggregated_eval.engine`) for ONE paired bootstrap of all of them,
so that each subgroup metric is computed once per audit and every comparison, band and controlled
difference is a derived statistic of the same replicates (:mod:`disaggregated_eval.derived`).

The walk layout of each model (:mod:`disaggregated_eval.engine.walk`):

* weight column 0: the sample weight (or 1); code column ``f - 1``: the slice of each row in family
  ``f`` (each attribute, each intersection);
* stream 0: the whole population (one accumulator: ``overall``, and the universe of the others);
* stream ``f``: family ``f`` (one accumulator per slice, with complements: the rest of the rows); a
  family whose attributes are a subset of another's (an attribute of an intersection with it) takes
  every sum but its AUC numerator from that intersection's cells (:func:`family_parts`);
* then, per family with a weighted controlled evaluation and per control variable ``V``, ``K`` streams
  of the weighted population metrics ``M_a`` (weights ``w P(A = a | V)`` on the family's evaluated
  rows) and ``K`` of the shared-space metrics (:func:`disaggregated_eval.evaluation.controlled_weight_columns`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import vocabulary
from ..engine.bootstrap import bootstrap_layout
from ..engine.sums import terms_for
from ..engine.units import find_units, matrix_key, score_key, units_of_counts
from ..engine.walk import ModelStreams, Stream, build_layout
from ..evaluation import controlled_weight_columns
from .selection_table import MarginWeights
from .slices import SlicePlan

__all__ = ["ControlledWeights", "AuditEstimates", "n_outputs", "family_parts", "estimate_all"]


@dataclass(frozen=True)
class ControlledWeights:
    """``P(A = a | V)`` of one family's evaluated rows for one control variable and model.

    Attributes
    ----------
    family : int
        Family index in the slice plan.
    control : str
        ``X``, ``Y`` or ``R``.
    model : int
        Model index (the same weights for every model when ``V`` is ``X`` or ``Y``: one entry per model).
    proba : ndarray of shape (n_rows, K)
        ``P(A = a | V)`` of every row of the file; 0 for rows outside the evaluated levels.
    groups : ndarray of shape (n_rows,), int64
        Code ``0 .. K-1`` of each evaluated row among the family's kept levels, -1 for the others.
    slices : ndarray of shape (K,), int64
        Global slice index of each kept level.
    method : str
        The estimator of ``P(A | V)`` (:data:`disaggregated_eval.weight_models.WEIGHT_METHODS`).
    diagnostics : DataFrame of shape (K, 8) or None
        Balance, effective sample size and overlap of the weights per kept level
        (:func:`disaggregated_eval.weight_diagnostics.weight_diagnostics`).
    note : str
        The estimator's sentence for the notes.
    """

    family: int
    control: str
    model: int
    proba: np.ndarray
    groups: np.ndarray
    slices: np.ndarray
    method: str = ""
    diagnostics: pd.DataFrame | None = None
    note: str = ""


@dataclass(frozen=True)
class AuditEstimates:
    """Point estimates and paired replicates of every base quantity of an audit.

    Attributes
    ----------
    point : ndarray of shape (n_outputs, n_metrics)
    replicates : ndarray of shape (n_resamples, n_outputs, n_metrics)
        NaN where undefined.
    slice_rows : ndarray of shape (n_models, n_slices, 2), int64
        Output row of each model's slice (side 0) and of its rest (side 1; -1 for ``overall``).
    controlled_rows : dict of (int, str, int) to (ndarray, ndarray)
        ``(family, control, model)`` -> output rows of ``M_a`` and of the shared-space metric, each of
        shape (K,) (in the order of :attr:`ControlledWeights.slices`).
    """

    point: np.ndarray
    replicates: np.ndarray
    slice_rows: np.ndarray
    controlled_rows: dict


def n_outputs(plan: SlicePlan, n_models: int, controlled_levels: Sequence[int]) -> int:
    """Outputs of an audit's bootstrap: per model, every slice and rest, and two per kept level and
    control of the controlled evaluation (``controlled_levels``: K of each (family, control) pair)."""
    per_model = plan.n_slices + (plan.n_slices - 1) + 2 * int(sum(controlled_levels))
    return n_models * per_model


def family_parts(families: Sequence) -> dict[int, dict]:
    """The parts of each family's stream (:class:`~disaggregated_eval.engine.walk.Stream`, ``parts``).

    A family whose attributes are a strict subset of another family's (an attribute of an intersection
    with it) takes every sum but its AUC numerator from the slices of a maximal family (one whose
    attributes are a subset of no other's, itself walked in full) that holds its attributes, the one
    with the fewest slices: a row then costs two additions per resample in the coarser family instead
    of all of them (``engine.walk``, "Parts").

    Parameters
    ----------
    families : sequence of Family
        The families of the walk, in stream order (stream ``f + 1`` is family ``f``; stream 0 is the
        whole population).

    Returns
    -------
    dict
        ``{f: {"parts": stream of the parts, "part_codes": family f's code of each of their codes}}``
        (-1 for a combination of levels without rows); families without a maximal superset are absent.
        Key ``-1`` is the whole population (stream 0, the universe of every family): its per-row terms
        from the maximal family with the fewest slices (its running sums are read during the walk and
        stay walked).
    """
    attributes = [set(f.attributes) for f in families]
    maximal = [g for g in range(len(families)) if not any(attributes[g] < attributes[h] for h in range(len(families)))]

    def parts(candidates: list[int], codes) -> dict:
        """The smallest candidate family as parts; each of its slices to ``codes`` of its rows (-1: no rows)."""
        g = min(candidates, key=lambda g: families[g].n_slices)
        mapping = np.full(families[g].n_slices, -1, dtype=np.int64)
        mapping[families[g].codes] = codes
        return {"parts": g + 1, "part_codes": tuple(int(c) for c in mapping)}

    out = {-1: parts(maximal, 0)} if maximal else {}
    for f, family in enumerate(families):
        supersets = [g for g in maximal if attributes[f] < attributes[g]]
        if supersets:
            out[f] = parts(supersets, family.codes)
    return out


def estimate_all(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    controlled: Sequence[ControlledWeights],
    *,
    metrics: Sequence[str],
    slots: np.ndarray,
    threshold: float,
    odds: float,
    n_resamples: int,
    seed: np.random.SeedSequence,
    strata: np.ndarray | None,
    n_threads: int,
    progress: Callable[[int, int], None] | None = None,
    count: np.ndarray | None = None,
    margins: MarginWeights | None = None,
) -> AuditEstimates:
    """One paired bootstrap of every slice, rest and weighted population of every model.

    Parameters
    ----------
    plan : SlicePlan
    y : ndarray of shape (n_rows,), float64
        Labels 0/1 (checked).
    scores : sequence of ndarray of shape (n_rows,)
        Each model's scores (checked).
    weight : ndarray of shape (n_rows,) or None
        Sample weights (None: 1).
    controlled : sequence of ControlledWeights
        The weights of the controlled evaluation (may be empty).
    metrics : sequence of str
    slots : ndarray of int64
    threshold, odds : float
    n_resamples : int
    seed : numpy.random.SeedSequence
    strata : ndarray of shape (n_rows,) or None
        ``within_group`` strata (the cells), None for ``population``.
    n_threads : int
    progress : callable, optional
    count : ndarray of shape (n_rows,), int64, optional
        Rows each row stands for (frequency weights): the rows are then always merged into units whose
        multiplicities are the summed counts (:func:`disaggregated_eval.engine.units.units_of_counts`), so
        the resamples are those of the expanded rows in distribution (``docs/method.md``, "Frequency
        weights").

    Returns
    -------
    AuditEstimates
    """
    n = y.shape[0]
    w = np.ones(n) if weight is None else weight
    families = plan.families[1:]
    codes = np.stack([f.codes for f in families], axis=1).astype(np.int32) if families else np.zeros((n, 0), np.int32)
    parts = family_parts(families)
    models = []
    dense_index: list[list[tuple[ControlledWeights, int, int]]] = []
    for m, r in enumerate(scores):
        streams = [Stream(weight=0, **parts.get(-1, {}))]
        streams += [Stream(weight=0, codes=f, n_codes=family.n_slices, universe=0, **parts.get(f, {}))
                    for f, family in enumerate(families)]  # fmt: skip
        mine = [cw for cw in controlled if cw.model == m]
        # The weight columns: the row weights, then per controlled weighting its K population and K
        # shared-space columns, written into one matrix (the columns are never held twice).
        matrix = np.empty((n, 1 + sum(2 * cw.proba.shape[1] for cw in mine)))
        matrix[:, 0] = w
        entries = []
        for cw in mine:
            population, space = controlled_weight_columns(cw.proba, cw.groups, sample_weight=weight)
            k = population.shape[1]
            # one weight column per stream after the families' streams
            first_stream, first_column = len(streams), len(streams) - len(families)
            matrix[:, first_column : first_column + k] = population
            matrix[:, first_column + k : first_column + 2 * k] = space
            del population, space
            streams += [Stream(weight=first_column + j) for j in range(2 * k)]
            entries.append((cw, first_stream, k))
        dense_index.append(entries)
        models.append(ModelStreams(scores=r, weights=matrix, codes=codes, streams=tuple(streams)))
    # Rows the walk cannot tell apart become one unit (engine.units): the cell (and so every family
    # and stratum), the label, each model's score (only its prediction without score metrics) and
    # every weight column.
    needs_scores = any(q in vocabulary.SCORE_METRICS for q in metrics)
    keys = [plan.cell_codes, y] + [score_key(r, (threshold,), needs_scores=needs_scores) for r in scores]
    keys += [matrix_key(model.weights) for model in models]
    units = find_units(keys) if count is None else units_of_counts(keys, count)
    multiplicity = None
    reweight = None if margins is None else margins.reweight(None if units is None else units.first)
    if units is not None:
        first = units.first
        models = [
            ModelStreams(
                scores=score_key(model.scores[first], (threshold,), needs_scores=needs_scores),
                weights=model.weights[first],
                codes=model.codes[first],
                streams=model.streams,
            )
            for model in models
        ]
        y = y[first]
        strata = None if strata is None else strata[first]
        multiplicity = units.multiplicity
    layout = build_layout(y, models, thresholds=(threshold,), terms=terms_for(metrics))
    del models, matrix  # the layout holds its own sorted copies of the weight columns
    boot = bootstrap_layout(
        layout,
        slots=slots,
        odds=odds,
        n_resamples=n_resamples,
        seed=seed,
        strata=strata,
        n_threads=n_threads,
        progress=progress,
        multiplicity=multiplicity,
        reweight=reweight,
    )
    index = layout.output_index
    slice_rows = np.full((len(scores), plan.n_slices, 2), -1, dtype=np.int64)
    for m in range(len(scores)):
        slice_rows[m, 0, 0] = index[(m, 0, 0, 0)]
        for f, family in enumerate(families, start=1):
            for k, s in enumerate(family.slice_ids):
                slice_rows[m, s, 0] = index[(m, f, k, 0)]
                slice_rows[m, s, 1] = index[(m, f, k, 1)]
    controlled_rows = {}
    for m, entries in enumerate(dense_index):
        for cw, first, k in entries:
            population = np.array([index[(m, first + a, 0, 0)] for a in range(k)], dtype=np.int64)
            space = np.array([index[(m, first + k + a, 0, 0)] for a in range(k)], dtype=np.int64)
            controlled_rows[(cw.family, cw.control, m)] = (population, space)
    return AuditEstimates(
        point=boot.point[:, 0, :],
        replicates=boot.replicates[:, :, 0, :],
        slice_rows=slice_rows,
        controlled_rows=controlled_rows,
    )
