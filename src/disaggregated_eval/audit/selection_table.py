"""The audit's evaluation under selection: the target's margins and the sensitivity bounds (table ``selection``).

Options ``population_margins`` (a CSV of the target population's shares of the groups, optionally with
the label rate of each group; read and checked with the other options, :func:`.options.read_margins`) and
``selection_sensitivity`` (values of Gamma); the method is :mod:`disaggregated_eval.selection`
(``docs/method.md``, "Evaluation under selection"), its validation the selection study (``docs/audit.md``,
"How far to trust the numbers").

* :func:`margin_cells`: the margins against the data (every group of the data has a share and every
  share a group of the data), before any work;
* :func:`selection_table`: per model, slice (reported size) and metric with bounds, the corrected
  estimate, its bounds per Gamma, their intervals and, for each slice's difference from overall that
  the simultaneous band over the model's differences flags, the breakdown Gamma (the claims of one model
  hold together at the audit's confidence);
* :func:`selection_lines`: what was assumed and what follows, in plain words, for the terminal and the
  report.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .. import seeds, selection, vocabulary
from ..engine.resampling import strata_for
from ..intervals import zero_width
from ..validation import PATH_CHARS, brief
from .columns import SELECTION_COLUMNS
from .errors import AuditInputError
from .inputs import AuditInput, lookalike_key
from .options import LABEL_RATE_COLUMN, SHARE_COLUMN, margin_targets
from .slices import SlicePlan, shown_slice_name, slice_name
from .text import terminal_text

__all__ = [
    "MAX_SELECTION_RESAMPLES",
    "MarginCells",
    "margin_cells",
    "MarginWeights",
    "margin_weights",
    "margin_notes",
    "margins_line",
    "selection_table",
    "selection_lines",
]

#: The selection table's bootstrap uses ``min(n_resamples, MAX_SELECTION_RESAMPLES)`` resamples: it
#: holds a few resample-by-row arrays per slice (the study's intervals use 200).
MAX_SELECTION_RESAMPLES = 2000
#: Most flagged differences the terminal lists per model (the table has them all).
_SHOWN = 8


@dataclass(frozen=True)
class MarginCells:
    """The margins mapped onto the audited rows: cell codes, target shares and what they model."""

    cells: np.ndarray  # (n,) int64
    target: np.ndarray  # (n_cells,) float64
    attributes: tuple[str, ...]
    with_label: bool


def margin_cells(prepared: AuditInput, margins: pd.DataFrame | None, *, source: str | None) -> MarginCells | None:
    """The margins mapped onto the audited rows, checked against the data (before any work).

    Parameters
    ----------
    prepared : AuditInput
    margins : pandas.DataFrame or None
        The option ``population_margins``'s file as :func:`.options.read_margins` reads it.
    source : str or None
        The file's path, for messages.

    Returns
    -------
    MarginCells or None
        None without ``population_margins``.

    Raises
    ------
    AuditInputError
        If a combination of the data has no share in the file (naming it and its rows), or a share of
        the file has no row in the data (naming it and its share).
    """
    if margins is None:
        return None
    frame = margins
    source = f"population_margins {brief(str(source), PATH_CHARS)}"
    attributes = tuple(c for c in frame.columns if c not in (SHARE_COLUMN, LABEL_RATE_COLUMN))
    by_name = {a.name: a for a in prepared.attributes}
    # the data's combinations once (not a name per row), and each row's combination: linear in the rows
    stacked = np.stack([by_name[c].codes for c in attributes], axis=1)
    combos, inverse = np.unique(stacked, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    # rows (with frequency weights: the rows they stand for, not table rows)
    counts = np.bincount(inverse, weights=prepared.count, minlength=len(combos)).astype(np.int64)
    combo_levels = [[by_name[c].levels[k] for c, k in zip(attributes, combo, strict=True)] for combo in combos]
    combo_names = [slice_name(attributes, levels) for levels in combo_levels]
    file_rows = list(zip(*(frame[c].tolist() for c in attributes), strict=True))
    file_names = [slice_name(attributes, row) for row in file_rows]
    index = {name: k for k, name in enumerate(file_names)}
    missing = sorted((n, int(c), k) for k, (n, c) in enumerate(zip(combo_names, counts, strict=True)) if n not in index)
    if missing:
        _, count, k = missing[0]
        stripped = [[str(v).strip() for v in levels] for levels in (combo_levels[k], *file_rows)]
        alike = [row for row, key in zip(file_rows, stripped[1:], strict=True) if key == stripped[0]]
        hint = (
            f" (the file gives {shown_slice_name(attributes, alike[0])}, which differs from it by surrounding "
            f"whitespace only: strip_levels is off)"
            if alike
            else _unmatched_hint(attributes, combo_levels[k], file_rows, file_names, set(combo_names))
        )
        raise AuditInputError(
            f"{source}: {shown_slice_name(attributes, combo_levels[k])} has {count} rows in the data but no share in "
            f"the file{hint}; give every combination of {', '.join(attributes)} in the data a share"
        )
    present = set(combo_names)
    absent = [k for k, n in enumerate(file_names) if n not in present]
    if absent:
        share = float(frame[SHARE_COLUMN].iloc[absent[0]])
        raise AuditInputError(
            f"{source}: {shown_slice_name(attributes, file_rows[absent[0]])} has a share of {share:g} but no row in "
            f"the data; no row can carry its share (drop it from the file only if the target lacks it too)"
        )
    row_file = np.array([index[n] for n in combo_names], dtype=np.int64)
    codes = row_file[inverse]
    target = margin_targets(frame)
    with_label = LABEL_RATE_COLUMN in frame.columns
    if with_label:
        codes = 2 * codes + prepared.y.astype(np.int64)
        observed = np.bincount(codes, minlength=target.size) > 0
        if not observed.all():
            k = int(np.flatnonzero(~observed)[0])
            raise AuditInputError(
                f"{source}: {shown_slice_name(attributes, file_rows[k // 2])} has no row with label {k % 2} in the data, "
                f"but its label rate in the file puts a share of {target[k]:g} there; no row can carry it"
            )
    _check_cells_resampled(codes, target, prepared.count, attributes, with_label, source)
    return MarginCells(codes, target, attributes, with_label)


#: Largest expected share of bootstrap resamples that miss a cell with a target share, which are undefined under the
#: margins (the weights are re-estimated on each resample): beyond it the audit is refused before any work.
MAX_UNDEFINED_RESAMPLE_SHARE = 0.5


def _check_cells_resampled(codes, target, count, attributes, with_label, source) -> None:
    """Refuse margins whose cells are so small that most bootstrap resamples miss one of them.

    A resample of ``n`` rows misses a cell of ``n_c`` rows with probability ``(1 - n_c / n)^n`` (about
    ``exp(-n_c)``); one that misses a cell with a target share is undefined (its margin weights cannot be
    re-estimated). The expected share of such resamples is ``1 - prod_c (1 - (1 - n_c / n)^n)`` over the cells
    with a target share (the population resampling; within strata it is smaller).
    """
    rows = np.bincount(codes, weights=count, minlength=target.size)
    n = float(rows.sum())
    kept = target > 0
    with np.errstate(divide="ignore"):
        missed = np.exp(n * np.log1p(-np.minimum(rows[kept] / n, 1.0)))
        undefined = -np.expm1(np.sum(np.log1p(-np.minimum(missed, 1.0))))
    if undefined > MAX_UNDEFINED_RESAMPLE_SHARE:
        cells = " x ".join(attributes) + (" x label" if with_label else "")
        small = int(rows[kept].min())
        raise AuditInputError(
            f"{source}: its {int(kept.sum()):,} cells of {cells} are too small for the bootstrap: a resample misses "
            f"at least one of them (and is then undefined, its margin weights cannot be re-estimated) in about "
            f"{undefined:.0%} of resamples (the smallest cell has {small:,} rows; a cell of 7 rows is missed in about "
            f"1 resample of 1,000); give margins over fewer or coarser attributes, or more rows"
        )


@dataclass(frozen=True)
class MarginWeights:
    """Every section's row weights under population margins: the sample weight times the cell's margin weight.

    The margin weight of a row of cell ``c`` is ``P_target(c) / P_sample(c)`` (post-stratification,
    :func:`disaggregated_eval.selection.poststratification_weights`; the sample's shares weighted by the sample
    weights and counted with the frequency weights). In a bootstrap the shares are the resample's own
    (:meth:`reweight`), so every interval carries the uncertainty of the weighting, as the selection table's do.

    Attributes
    ----------
    cells : ndarray of shape (n,), int64
        Each audited row's margin cell (:attr:`MarginCells.cells`).
    target : ndarray of shape (n_cells,)
        The target's shares of the cells.
    base : ndarray of shape (n,)
        Each row's sample weight (1 without the option ``sample_weight``).
    factor : ndarray of shape (n_cells,)
        The margin weight of each cell on the sample itself.
    sample_weight : ndarray of shape (n,) or None
        The option ``sample_weight``'s column as the audit read it (for the selection table, which weights by
        the margins itself).
    """

    cells: np.ndarray
    target: np.ndarray
    base: np.ndarray
    factor: np.ndarray
    sample_weight: np.ndarray | None

    @property
    def weight(self) -> np.ndarray:
        """Each row's weight in every section: ``base * factor[cells]``, shape (n,)."""
        return self.base * self.factor[self.cells]

    def reweight(self, rows: np.ndarray | None = None):
        """The engine's hook (:func:`disaggregated_eval.engine.bootstrap.bootstrap_layout`, ``reweight``) for
        the audit's rows, or for the units whose first rows are ``rows``.

        ``counts`` (B, n) -> ``(counts * factor_b[c] / factor[c], undefined)``, with ``factor_b`` the margin
        weights of resample ``b`` (:func:`disaggregated_eval.selection.resampled_cell_weights`); a resample
        that drew no row of a cell with a target share has no margin weights (``undefined``; its replicates are
        NaN, counted in ``n_undefined``).
        """
        cells = self.cells if rows is None else self.cells[rows]
        base = self.base if rows is None else self.base[rows]
        factor = self.factor

        def hook(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            cell_weight = selection.resampled_cell_weights(cells, self.target, counts * base)
            undefined = ~np.isfinite(cell_weight).all(axis=1)
            relative = np.where(undefined[:, None], 0.0, cell_weight) / factor
            return counts * relative[:, cells], undefined

        return hook


def margin_weights(prepared: AuditInput, margins: MarginCells | None) -> MarginWeights | None:
    """The row weights of every section under the option ``population_margins`` (:class:`MarginWeights`).

    Parameters
    ----------
    prepared : AuditInput
        The audit's coded input (its sample weights and frequency weights).
    margins : MarginCells or None
        :func:`margin_cells` of the option; None: no margins (the result is None).

    Returns
    -------
    MarginWeights or None

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> rows = SimpleNamespace(n=4, weight=None, count=None)
    >>> cells = MarginCells(np.array([0, 0, 0, 1]), np.array([0.5, 0.5]), ("A",), False)
    >>> margin_weights(rows, cells).weight.tolist()  # 3 rows stand for half the target, 1 row for the other half
    [0.6666666666666666, 0.6666666666666666, 0.6666666666666666, 2.0]
    """
    if margins is None:
        return None
    base = np.ones(prepared.n) if prepared.weight is None else np.asarray(prepared.weight, dtype=np.float64)
    design = base if prepared.count is None else base * prepared.count
    mass = np.bincount(margins.cells, weights=design, minlength=margins.target.size)
    empty = (mass <= 0) & (margins.target > 0)
    if empty.any():
        raise AuditInputError(
            f"population_margins: cell {int(np.flatnonzero(empty)[0])} of the margins file has a share of "
            f"{float(margins.target[empty][0]):g} but its rows have no positive sample weight; no row can carry it"
        )
    factor = selection.poststratification_cell_weights(margins.cells, margins.target, sample_weight=design)
    return MarginWeights(margins.cells, margins.target, base, factor, prepared.weight)


def margin_notes(margins: MarginCells | None, controlled_plan: Any = None) -> list[str]:
    """The notes of an audit under population margins: what is weighted to the target and how.

    Parameters
    ----------
    margins : MarginCells or None
    controlled_plan : ControlledPlan, optional
        The audit's plan of the controlled evaluation (its weight models are fitted without the margin weights).

    Returns
    -------
    list of str
        Empty without margins.
    """
    if margins is None:
        return []
    what = " x ".join(margins.attributes) + (" and the label" if margins.with_label else "")
    notes = [
        f"population margins: every row weighs its sample weight times P_target(c) / P_sample(c) of its cell c of "
        f"{what} (post-stratification), in every table; the bootstraps of the slices, comparisons, fairness summary "
        f"and controlled tables re-estimate P_sample(c) on every resample (a resample without a row of a cell is "
        f"undefined, counted in n_undefined); the permutation tests, the calibration bins and the thresholds' "
        f"intervals hold the weights at their values on the sample"
    ]
    if controlled_plan is not None and getattr(controlled_plan, "weighted", ()):
        notes.append(
            "controlled evaluation under population margins: the weight models P(A | V) are fitted on the sample "
            "without the margin weights; every metric (subgroup, M_a, T_a, shared-space) is weighted to the margins"
        )
    return notes


def margins_line(options: Any) -> str | None:
    """The first screen's statement of what the population margins weight (the terminal and the report's top),
    or None without the option ``population_margins``; plain text (the caller escapes it for its medium)."""
    if options.population_margins is None or options.margins is None:
        return None
    frame = options.margins
    attributes = [c for c in frame.columns if c not in (SHARE_COLUMN, LABEL_RATE_COLUMN)]
    what = " x ".join(attributes) + (" and the label" if LABEL_RATE_COLUMN in frame.columns else "")
    return (
        f"weighted to the target population: every table (slices, comparisons, fairness summary, controlled, "
        f"calibration, thresholds, selection) estimates the target's quantities, each row weighted to the target's "
        f"shares of {what} in {options.population_margins} (post-stratification, re-estimated on "
        f"every bootstrap resample; held at the sample's values in the permutation tests, the calibration bins and "
        f"the thresholds); exact if selection into the data depends on {what} only"
    )


def _unmatched_hint(attributes, levels, file_rows, file_names, present) -> str:
    """What the file gives instead of a data combination without a share: a level is matched as text as the
    data write it, so the file's ``1.0`` or ``false`` is not the data's ``1`` or ``False``, nor an ``é`` of
    another Unicode form (shown by code point where the two print alike)."""
    wanted = slice_name(attributes, levels)
    key = lookalike_key(wanted)
    for name in file_names:
        if name != wanted and lookalike_key(name) == key:
            return (
                f" (the file gives {name!a}, which prints alike but is other text than the data's {wanted!a}: "
                f"other characters, or another Unicode form of the same letters)"
            )
    unmatched = [row for row, name in zip(file_rows, file_names, strict=True) if name not in present]
    if not unmatched:
        return ""
    shown = "; ".join(shown_slice_name(attributes, row) for row in unmatched[:3])
    more = f" and {len(unmatched) - 3} more" if len(unmatched) > 3 else ""
    return (
        f" (the file's combination(s) without rows in the data: {shown}{more}; a level is matched as text, "
        f"written as the data write it)"
    )


def selection_table(
    plan: SlicePlan,
    prepared: AuditInput,
    model_names: list[str],
    *,
    margins: MarginCells | None,
    gammas: list[float],
    metrics: list[str],
    n_resamples: int,
    min_group_size: int,
    seed: int,
    min_denominator: int = 0,
    confidence: float,
    threshold: float,
    preference_threshold: float,
    resampling: str,
) -> tuple[pd.DataFrame, list[str]]:
    """The table ``selection`` (:data:`.columns.SELECTION_COLUMNS`) and its notes.

    Empty without margins and Gammas (the options ``population_margins`` and ``selection_sensitivity``).
    Slices with fewer rows than ``min_group_size`` are left out (a note says how many); the metrics are
    those of ``metrics`` that have bounds (not the AUC; a model of hard predictions also has no score
    metrics). The bootstrap (seed path ``("audit", "selection")`` of the root ``seed``, the audit's
    ``resampling`` scheme) has ``min(n_resamples, MAX_SELECTION_RESAMPLES)`` resamples, on which the margin
    weights are re-estimated; ``overall`` is the reference of every difference. The breakdown claims of one
    model are one family (``selection_analysis(family_wise=True)``): its differences with at least
    ``min_denominator`` rows in the metric's denominator, read from a simultaneous band of their bounds at the
    common level ``band_level``.

    Parameters
    ----------
    plan, prepared, model_names
        The audit's slices, coded input and models.
    margins : MarginCells or None
        :func:`margin_cells` of the option ``population_margins``.
    gammas : list of float
        The option ``selection_sensitivity`` (increasing; empty: the margins only).
    metrics : list of str
    n_resamples, min_group_size, seed, confidence, threshold, preference_threshold, resampling, min_denominator
        The audit's options of the same names.
    """
    gammas = list(gammas or [])
    if margins is None and not gammas:
        return pd.DataFrame({c: [] for c in SELECTION_COLUMNS}), []
    audit_resamples = n_resamples
    n_resamples = min(int(n_resamples), MAX_SELECTION_RESAMPLES)
    rows = np.ones(prepared.n, dtype=np.int64) if prepared.count is None else prepared.count  # rows it stands for
    keep = [s for s in range(1, plan.n_slices) if rows[plan.slice_mask(s)].sum() >= max(min_group_size, 1)]
    notes = []
    left_out = plan.n_slices - 1 - len(keep)
    if left_out:
        notes.append(f"selection table: {left_out} slice(s) with fewer than {min_group_size} rows (or none) left out")
    if n_resamples < audit_resamples:
        notes.append(f"selection table: {n_resamples:,} bootstrap resamples (of {audit_resamples:,})")
    slices = {plan.names[s]: plan.slice_mask(s) for s in keep}
    tables = []
    bounded = [m for m in metrics if m in selection.BOUNDED_METRICS]
    for model in model_names:
        metrics = [m for m in bounded if not (prepared.hard[model] and m in vocabulary.SCORE_METRICS)]
        if not metrics:
            continue
        table = selection.selection_analysis(
            prepared.y,
            prepared.scores[model],
            slices,
            gammas=gammas or [1.0],
            cells=None if margins is None else margins.cells,
            target_shares=None if margins is None else margins.target,
            metrics=metrics,
            n_resamples=n_resamples,
            seed=seeds.seed_sequence(seed, "audit", "selection"),
            confidence=confidence,
            threshold=threshold,
            preference_threshold=preference_threshold,
            sample_weight=prepared.weight,
            strata=strata_for(resampling, plan.cell_codes),
            frequency_weight=prepared.count,
            family_wise=True,
            min_denominator=min_denominator,
        )
        table.insert(0, "model", model)
        tables.append(table)
    if not tables:
        return pd.DataFrame({c: [] for c in SELECTION_COLUMNS}), notes
    out = pd.concat(tables, ignore_index=True)

    # A quantity that takes one value on every resample (a label rate that the margins fix, a group without
    # predicted positives) has no interval: an interval of width 0 would claim certainty the sample lacks.
    fixed = zero_width(out["ci_low"], out["ci_high"]) & np.isfinite(out["estimate"])
    if fixed.any():
        out.loc[fixed, ["ci_low", "ci_high", "breakdown_gamma", "band_level"]] = np.nan
        out.loc[fixed, ["bound_band_low", "bound_band_high"]] = np.nan
        point = fixed & zero_width(out["bound_ci_low"], out["bound_ci_high"])
        out.loc[point, ["bound_ci_low", "bound_ci_high"]] = np.nan
        n_fixed = out.loc[fixed & (out["gamma"] == 1.0), ["model", "slice", "metric", "quantity"]].shape[0]
        notes.append(
            f"selection table: {n_fixed} quantity(ies) take the same value on every resample (e.g. a label rate "
            f"given by the margins file, or a slice without predicted positives): no interval and no breakdown Gamma"
        )
    family = {name: plan.attribute_of(s) for s, name in enumerate(plan.names)}
    out["attribute"] = out["slice"].map(family)
    return out[list(SELECTION_COLUMNS)], notes


def _assumption(population_margins: str | None, margins: MarginCells | None, result: Any) -> str:
    if margins is None:
        return "no margins given: the rows are taken as a sample of the target population as they are"
    what = " x ".join(margins.attributes) + (" and the label" if margins.with_label else "")
    table = getattr(result, "selection", None)
    n_eff = ""
    if table is not None and len(table):
        overall = table[(table["slice"] == vocabulary.OVERALL)]
        if len(overall):
            n_eff = f", Kish effective size {overall['effective_n'].iloc[0]:,.0f} of {result.n_rows:,} rows"
    return (
        f"weighted to the target's shares of {what} in {terminal_text(population_margins)}{n_eff}: exact if "
        f"selection into the data depends on {what} only"
    )


def _level_text(level: float) -> str:
    """A level as a percentage with enough digits not to round to 100% below it (``99.6%``, ``99.97%``)."""
    for digits in (1, 2, 3):
        text = f"{level:.{digits}%}"
        if level >= 1.0 or not text.startswith("100"):
            return text
    return text


def selection_lines(result: Any) -> list[str]:
    """What was assumed and what follows, in plain words (the terminal summary and the report).

    Returns
    -------
    list of str
        Empty when the audit had no selection options.
    """
    options = result.options
    table = getattr(result, "selection", None)
    if table is None or table.empty:
        return []
    margins = None
    if options.margins is not None:
        frame = options.margins
        attributes = tuple(c for c in frame.columns if c not in (SHARE_COLUMN, LABEL_RATE_COLUMN))
        margins = MarginCells(np.zeros(0, np.int64), np.zeros(0), attributes, LABEL_RATE_COLUMN in frame.columns)
    gammas = sorted(set(table["gamma"]) - {1.0})
    lines = [f"Evaluation under selection: {_assumption(options.population_margins, margins, result)}."]
    if gammas:
        lines.append(
            f"sensitivity: the true selection weights may differ from these by a factor up to Gamma "
            f"({', '.join(f'{g:g}' for g in gammas)}; Tan's marginal sensitivity model); the bounds widen with Gamma"
        )
    level = f"{options.confidence:.0%}"
    for model in pd.unique(table["model"]):
        rows = table[(table["model"] == model) & (table["quantity"] == "difference") & (table["gamma"] == 1.0)]
        rows = rows[rows["ci_low"].notna()]  # the differences with an interval (not those the margins fix)
        family = rows[rows["band_level"].notna()]  # the differences that may be claimed (min_denominator)
        flagged = family[family["breakdown_gamma"].notna() & (family["n_denominator"] >= options.min_denominator)]
        flagged = flagged.sort_values("breakdown_gamma", ascending=False)
        each = _level_text(float(family["band_level"].max())) if len(family) else level
        small = len(rows) - len(family)
        lines.append(
            f"{terminal_text(model)}: {len(flagged)} of {len(family)} differences from overall exclude 0 "
            f"{'after the weighting' if margins is not None else 'without weighting'}, family-wise at {level} over the "
            f"{len(family)} (a simultaneous band, each interval at {each}: at most a {1 - options.confidence:.0%} "
            f"chance that any claim below is wrong)"
            + (f"; {small} more with fewer than {options.min_denominator} rows in the metric's denominator are not "
               f"claimed" if small else "")
            + ("; how strong selection would have to be to explain each away:" if len(flagged) else "")
        )  # fmt: skip
        for row in flagged.head(_SHOWN).itertuples():
            label = vocabulary.METRIC_LABELS.get(row.metric, row.metric)
            beyond = row.breakdown_gamma == math.inf
            # rounded down: at the printed Gamma the bounds' interval still excludes 0 (1.2479 is "up to 1.24")
            upto = (f"beyond Gamma = {selection.GAMMA_MAX:g}" if beyond
                    else f"up to Gamma = {math.floor(row.breakdown_gamma * 100) / 100:.2f}")  # fmt: skip
            lines.append(
                f"  a disparity in {label} of {row.estimate:+.3f} for {terminal_text(row.slice)} survives selection "
                f"{upto}"
            )
        if len(flagged) > _SHOWN:
            lines.append(f"  ... and {len(flagged) - _SHOWN} more (selection.csv, column breakdown_gamma)")
    return lines
