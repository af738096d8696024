"""Validation of the selection methods against the simulation's truth (``docs/method.md``, "Evaluation under selection").

For each selection setting (:data:`disaggregated_eval.vocabulary.SELECTION_SETTINGS`: selection on
``X``, on ``Y``, on ``Y`` and ``A``; paper Supplementary A.2) a practitioner holds only a *selected*
test set, drawn from ``P(X, A, Y | S = 1)``, and wants the metrics of the *full* population. The
study, modelled on the coverage study (:mod:`disaggregated_eval.coverage`):

1. **Truth** (:func:`population_truth`): every subgroup metric, ``M_a`` (control none: the overall
   metric) and ``T_a`` of the full population, by numerical integration
   (:func:`disaggregated_eval.population.population_controlled_differences`), for the Bayes-optimal
   scores of the model trained on the selected population (``bayes_x``, ``bayes_xa``; no fitted
   model is needed). **True selection strength** (:func:`selection_strength`): ``Gamma*`` of the
   marginal sensitivity model and of the weight box, per setting and margins.
2. **Replicates** (:func:`run_replicate`): replicate ``r`` draws a selected test set
   (:func:`disaggregated_eval.simulate.selected_test_set`, seed path
   ``("selection", setting, "test", r)``) and runs :func:`disaggregated_eval.selection.
   selection_analysis` for each model and margins: ``none`` (the naive evaluation), ``A`` (the
   target's group shares ``P(A)``), ``AY`` (the target's ``P(A, Y)``: group shares and prevalence by
   group), on the resamples of ``("selection", setting, "bootstrap", r)``.
3. **Coverage** (:func:`coverage_table`, :func:`coverage_summary`): per cell, the share of
   replicates whose interval contains the full-population truth: the estimate's interval (naive or
   margin-corrected) and the interval of the bounds at every ``Gamma``; with the Clopper-Pearson
   interval of the coverage (:func:`disaggregated_eval.coverage.clopper_pearson`) and whether
   ``Gamma >= Gamma*``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from . import population, seeds, selection, simulate, vocabulary
from .coverage import TRUTH_TOLERANCE, clopper_pearson, nominal_band
from .validation import check_choice, check_int

__all__ = [
    "MARGINS",
    "MODELS",
    "METRICS",
    "SLICES",
    "STRENGTH_COLUMNS",
    "TRUTH_COLUMNS",
    "REPLICATE_COLUMNS",
    "COVERAGE_COLUMNS",
    "SUMMARY_COLUMNS",
    "target_shares",
    "selection_strength",
    "strength_table",
    "population_truth",
    "run_replicate",
    "run_replicates",
    "coverage_table",
    "coverage_summary",
]

#: What the practitioner knows of the target: nothing (naive), ``P(A)``, ``P(A, Y)``.
MARGINS: tuple[str, ...] = ("none", "A", "AY")
#: Scores of the study: the Bayes-optimal scores of the selected (training) population.
MODELS: tuple[str, ...] = vocabulary.BAYES_MODELS
#: Metrics of the study: the pipeline's metrics that have bounds (all but the AUC).
METRICS: tuple[str, ...] = tuple(m for m in vocabulary.PIPELINE_METRICS if m in selection.BOUNDED_METRICS)
#: Slices of the study: the two groups and the whole population (the reference of ``T_a``).
SLICES: tuple[str, ...] = (*vocabulary.SIMULATION_GROUP_LABELS, vocabulary.OVERALL)
#: Columns of :func:`strength_table`.
STRENGTH_COLUMNS: tuple[str, ...] = (
    "dataset",
    "margins",
    "min_selection",
    "gamma_msm",
    "gamma_box",
    "excluded_mass",
)
#: Columns of :func:`population_truth`: ``quantity`` ``metric`` (a slice's metric; ``M_a`` is the
#: ``overall`` slice's) or ``difference`` (``T_a`` with control none).
TRUTH_COLUMNS: tuple[str, ...] = ("dataset", "model", "slice", "metric", "quantity", "truth")
#: Columns of :func:`run_replicate`.
REPLICATE_COLUMNS: tuple[str, ...] = ("dataset", "replicate", "model", "margins", *selection.RESULT_COLUMNS)
#: Columns of :func:`coverage_table`.
COVERAGE_COLUMNS: tuple[str, ...] = (
    "dataset",
    "model",
    "margins",
    "slice",
    "metric",
    "quantity",
    "method",
    "gamma",
    "gamma_box",
    "identified",
    "n_replicates",
    "n_withheld",
    "n_covered",
    "coverage",
    "coverage_ci_low",
    "coverage_ci_high",
    "nominal_band_low",
    "mean_width",
    "mean_bias",
    "truth",
    "n_flagged",
    "n_sign_errors",
    "caveat",
)
#: ``caveat`` of a cell whose full-population value is undefined (e.g. the precision of a score that
#: predicts no positive): nothing to cover; left out of :func:`coverage_summary`.
UNDEFINED_TRUTH = "truth undefined (e.g. no predicted positive in the population): nothing to cover; not counted"
#: ``caveat`` of a cell whose intervals all have width 0 (e.g. a predicted positive rate of exactly 0 in
#: every resample and in the truth): its coverage says nothing; left out of :func:`coverage_summary`.
DEGENERATE = "degenerate: every interval has width 0; not counted"
#: ``caveat`` of a cell withheld in every replicate (fewer than ``min_denominator`` rows in its denominator).
WITHHELD = "withheld in every replicate (fewer rows in the metric's denominator than min_denominator)"
#: Columns of :func:`coverage_summary`.
SUMMARY_COLUMNS: tuple[str, ...] = (
    "dataset",
    "margins",
    "method",
    "gamma",
    "gamma_box",
    "identified",
    "n_cells",
    "n_replicates",
    "mean_coverage",
    "mc_error",
    "min_coverage",
    "share_below_band",
    "n_flagged",
    "n_sign_errors",
)


def _check_setting(dataset: str) -> simulate.SelectionDGP:
    return simulate.get_dgp(check_choice(dataset, "dataset (a selection setting)", vocabulary.SELECTION_SETTINGS))


def _cells(margins: str, a: np.ndarray, y: np.ndarray) -> np.ndarray | None:
    """Cell codes of the modelled variables: None, ``A``, or ``2 A + Y``."""
    if margins == "none":
        return None
    return np.asarray(a, dtype=np.int64) if margins == "A" else 2 * np.asarray(a, dtype=np.int64) + np.asarray(y)


def target_shares(dataset: str, margins: str) -> np.ndarray | None:
    """The full population's shares of the cells of ``margins`` (what a registry or census would give).

    Returns
    -------
    ndarray or None
        None for ``none``; ``P(A = a)`` (shape (2,)) for ``A``; ``P(A = a, Y = y)`` at ``2 a + y``
        (shape (4,)) for ``AY``.
    """
    dgp = _check_setting(dataset)
    check_choice(margins, "margins", MARGINS)
    if margins == "none":
        return None
    p_a = dgp.p_a()
    if margins == "A":
        return np.asarray(p_a, dtype=np.float64)
    prev = np.array([dgp.prevalence(0), dgp.prevalence(1)])
    return np.column_stack([p_a * (1.0 - prev), p_a * prev]).ravel()


def selection_strength(dataset: str, margins: str, *, min_selection: float = 0.0) -> dict[str, float]:
    """The true selection strength ``Gamma*`` of a setting, given what the margins model.

    With ``pi_0(c) = P(S = 1 | c)`` for the cell ``c`` of the modelled variables (``margins``; one
    cell for ``none``) and ``s(x, a, y) = P(S = 1 | x, a, y)`` (:meth:`simulate.SelectionDGP.
    selection_probability`):

    * ``gamma_msm``: Tan's marginal sensitivity model, ``sup |log OR|`` of ``pi_0`` against ``s``,
      exponentiated (``inf`` where ``s`` reaches 0 or 1 and ``pi_0`` does not);
    * ``gamma_box``: the smallest ``Gamma`` at which the true inverse-probability weights, up to a
      common factor, lie in the box ``[w/Gamma, w Gamma]`` around the margin weights ``w``:
      ``sqrt(max rho / min rho)`` with ``rho = pi_0(c) / s(x, a, y)``; ``gamma_box <= gamma_msm``
      (both by :func:`disaggregated_eval.selection.gamma_star` at the extremes of ``s``).

    The supremum over ``x`` is taken analytically: ``s = clip(1 - c x^2, 0, 1) s_ay`` runs over
    ``[0, s_ay]`` when ``c > 0`` (``X`` is unbounded) and is ``s_ay`` otherwise. ``pi_0`` is a
    quadrature over the population (:func:`disaggregated_eval.population.population_rows`).

    Parameters
    ----------
    dataset : str
        A selection setting.
    margins : {"none", "A", "AY"}
    min_selection : float, default 0
        Restrict the population to the part with ``s >= min_selection`` (for ``selection_x``,
        where ``s`` reaches 0 and ``Gamma*`` is infinite): ``pi_0`` and the suprema are taken
        there, and ``excluded_mass`` is the population mass left out.

    Returns
    -------
    dict
        ``gamma_msm``, ``gamma_box`` (float, possibly ``inf``) and ``excluded_mass``.
    """
    dgp = _check_setting(dataset)
    check_choice(margins, "margins", MARGINS)
    if not (0.0 <= min_selection < 1.0):
        raise ValueError(f"min_selection must be in [0, 1); got {min_selection!r}")
    rows = population.population_rows(dataset, "bayes_x")
    s = dgp.selection_probability(rows.x, rows.a, rows.y)
    kept = s >= min_selection if min_selection > 0 else np.ones(s.size, dtype=bool)
    excluded = float(rows.mass[~kept].sum() / rows.mass.sum())
    cell = _cells(margins, rows.a, rows.y)
    cell = np.zeros(s.size, dtype=np.int64) if cell is None else cell
    s_ay = np.asarray(dgp.s_ay, dtype=np.float64)
    cell_probability, extremes = [], []
    for c in np.unique(cell):
        inside = (cell == c) & kept
        if np.ptp(s[inside]) == 0:  # s constant in the cell: pi_0 is that value (no quadrature rounding)
            pi0 = float(s[inside][0])
        else:
            pi0 = float((rows.mass[inside] * s[inside]).sum() / rows.mass[inside].sum())
        for a, y in {(int(a), int(y)) for a, y in zip(rows.a[inside], rows.y[inside], strict=True)}:
            s_max = s_ay[a, y]
            s_min = max(min_selection, 0.0) if dgp.x_curvature > 0 else s_max
            cell_probability += [pi0, pi0]
            extremes += [s_min, s_max]
    return {**selection.gamma_star(cell_probability, extremes), "excluded_mass": excluded}


def strength_table(datasets: Sequence[str], *, min_selection: Sequence[float] = (0.0, 0.05)) -> pd.DataFrame:
    """:func:`selection_strength` of every setting, margins and ``min_selection``: :data:`STRENGTH_COLUMNS`."""
    records = [
        (d, m, float(e), *selection_strength(d, m, min_selection=e).values())
        for d in datasets
        for m in MARGINS
        for e in min_selection
    ]
    return pd.DataFrame.from_records(records, columns=list(STRENGTH_COLUMNS))


def population_truth(
    dataset: str,
    *,
    models: Sequence[str] = MODELS,
    metrics: Sequence[str] = METRICS,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
) -> pd.DataFrame:
    """Full-population metrics of every slice and ``T_a`` (control none) of each model: :data:`TRUTH_COLUMNS`.

    :func:`disaggregated_eval.population.population_controlled_differences` (quadrature error about
    1e-11) with control ``none``: ``subgroup_metric`` is a group's metric, ``weighted_population_metric``
    the overall metric (``M_a``), ``controlled_difference`` ``T_a``.
    """
    _check_setting(dataset)
    records = []
    for model in models:
        table = population.population_controlled_differences(
            dataset,
            model,
            controls=["none"],
            metrics=metrics,
            threshold=threshold,
            preference_threshold=preference_threshold,
        )
        for row in table.itertuples(index=False):
            records.append((dataset, model, row.group, row.metric, "metric", row.subgroup_metric))
            records.append((dataset, model, row.group, row.metric, "difference", row.controlled_difference))
        overall = table.drop_duplicates("metric")
        for row in overall.itertuples(index=False):
            records.append((dataset, model, vocabulary.OVERALL, row.metric, "metric", row.weighted_population_metric))
    return pd.DataFrame.from_records(records, columns=list(TRUTH_COLUMNS))


def run_replicate(
    dataset: str,
    replicate: int,
    *,
    n_test: int,
    n_resamples: int,
    gammas: Sequence[float],
    seed: int,
    models: Sequence[str] = MODELS,
    margins: Sequence[str] = MARGINS,
    metrics: Sequence[str] = METRICS,
    confidence: float = 0.95,
    threshold: float = 0.5,
    preference_threshold: float = 0.5,
) -> pd.DataFrame:
    """One replicate: a selected test set and :func:`selection.selection_analysis` per model and margins.

    Returns
    -------
    DataFrame
        Columns :data:`REPLICATE_COLUMNS`; slices ``A = 0``, ``A = 1`` and ``overall`` (the
        reference: ``difference`` rows are ``T_a`` with control none).
    """
    _check_setting(dataset)
    replicate = check_int(replicate, "replicate", minimum=0)
    test = simulate.selected_test_set(dataset, n_test=n_test, seed=seed, replicate=replicate)
    a, y = test["a"].to_numpy(), test["y"].to_numpy()
    scores = simulate.bayes_scores(dataset, test)
    groups = {label: a == k for k, label in enumerate(vocabulary.SIMULATION_GROUP_LABELS)}
    boot = seeds.seed_sequence(seed, "selection", dataset, "bootstrap", replicate)
    tables = []
    for model in models:
        for m in margins:
            table = selection.selection_analysis(
                y,
                scores[check_choice(model, "models", MODELS)].to_numpy(),
                groups,
                gammas=gammas,
                cells=_cells(m, a, y),
                target_shares=target_shares(dataset, m),
                metrics=metrics,
                n_resamples=n_resamples,
                seed=boot,
                confidence=confidence,
                threshold=threshold,
                preference_threshold=preference_threshold,
            )
            table.insert(0, "margins", m)
            table.insert(0, "model", model)
            tables.append(table)
    out = pd.concat(tables, ignore_index=True)
    out.insert(0, "replicate", np.int64(replicate))
    out.insert(0, "dataset", dataset)
    return out[list(REPLICATE_COLUMNS)]


def run_replicates(
    dataset: str, replicates: Sequence[int], *, progress: Callable[[str], object] | None = None, **kwargs
) -> pd.DataFrame:
    """:func:`run_replicate` for the given replicate indices (one job of rule ``selection_replicates``)."""
    tables = []
    for i, r in enumerate(replicates):
        tables.append(run_replicate(dataset, r, **kwargs))
        if progress is not None:
            progress(f"{dataset}: replicate {r} ({i + 1} / {len(replicates)} of this job)")
    return pd.concat(tables, ignore_index=True)


def coverage_table(
    replicates: pd.DataFrame,
    truth: pd.DataFrame,
    strength: pd.DataFrame,
    *,
    confidence: float = 0.95,
    min_denominator: int = vocabulary.MIN_DENOMINATOR,
) -> pd.DataFrame:
    """Coverage of the full-population truth per cell: :data:`COVERAGE_COLUMNS`.

    Methods: ``estimate`` (the naive or margin-corrected estimate's percentile interval; rows at
    ``gamma = 1`` only) and ``bounds`` (the interval of the bounds at each ``gamma``). An interval
    covers if ``low - tol <= truth <= high + tol`` (``tol`` = :data:`coverage.TRUTH_TOLERANCE`).
    ``gamma_box`` is the setting's :func:`selection_strength` (``min_selection = 0``) for the margins;
    ``identified``: the margins identify the truth (``gamma_box == 1``). A cell whose truth is
    undefined keeps its row with ``caveat`` :data:`UNDEFINED_TRUTH`; one whose intervals all have width
    0, :data:`DEGENERATE`. Breakdown check, on the ``bounds`` rows of ``difference`` cells:
    ``n_flagged`` counts the replicates whose breakdown ``Gamma`` exceeds ``gamma_box`` (the claim
    "the difference survives selection up to the breakdown Gamma" then covers the true selection),
    ``n_sign_errors`` those of them whose truth does not have the estimate's sign (the claim is wrong).
    A replicate whose slice has fewer than ``min_denominator`` rows in the metric's denominator is
    withheld, as the audit withholds such an estimate (its option ``min_denominator``, default 10): not
    counted, and counted in ``n_withheld``.
    """
    strength = strength[strength["min_selection"] == 0.0][["dataset", "margins", "gamma_box"]]
    keys = ["dataset", "model", "slice", "metric", "quantity"]
    rows = replicates.merge(truth.assign(_has_truth=True), on=keys, how="left", validate="many_to_one").merge(
        strength, on=["dataset", "margins"], how="left", validate="many_to_one"
    )
    if rows["_has_truth"].isna().any():
        example = rows.loc[rows["_has_truth"].isna(), keys].iloc[0].to_dict()
        raise ValueError(f"no truth row for the cell {example}")
    tol = TRUTH_TOLERANCE
    parts = []
    for method, low, high in (("estimate", "ci_low", "ci_high"), ("bounds", "bound_ci_low", "bound_ci_high")):
        part = rows if method == "bounds" else rows[rows["gamma"] == 1.0]
        tt = part["truth"].to_numpy(float)
        lo, hi = part[low].to_numpy(float), part[high].to_numpy(float)
        withheld = part["n_denominator"].to_numpy() < min_denominator
        defined = np.isfinite(lo) & np.isfinite(hi) & np.isfinite(tt) & ~withheld  # undefined truth: nothing to cover
        breakdown = part["breakdown_gamma"].to_numpy(float)
        flagged = (part["quantity"] == "difference").to_numpy() & (breakdown > part["gamma_box"].to_numpy(float))
        sign_error = flagged & ~(np.sign(tt) == np.sign(part["estimate"].to_numpy(float)))
        parts.append(
            part.assign(
                method=method,
                _defined=defined,
                _withheld=withheld,
                _covered=defined & (lo - tol <= tt) & (tt <= hi + tol),
                _width=np.where(defined, hi - lo, np.nan),
                _bias=part["estimate"].to_numpy(float) - tt,
                _flagged=flagged & ~withheld if method == "bounds" else False,
                _sign_error=sign_error & ~withheld if method == "bounds" else False,
            )
        )
    cells = ["dataset", "model", "margins", "slice", "metric", "quantity", "method", "gamma"]
    out = (
        pd.concat(parts, ignore_index=True)
        .groupby(cells, sort=True)
        .agg(
            gamma_box=("gamma_box", "first"),
            n_replicates=("_defined", "sum"),
            n_covered=("_covered", "sum"),
            mean_width=("_width", "mean"),
            mean_bias=("_bias", "mean"),
            truth=("truth", "first"),
            n_flagged=("_flagged", "sum"),
            n_sign_errors=("_sign_error", "sum"),
            n_withheld=("_withheld", "sum"),
        )
        .reset_index()
    )
    n = out["n_replicates"].to_numpy(np.int64)
    k = out["n_covered"].to_numpy(np.int64)
    ok = n > 0
    coverage = np.full(n.shape, np.nan)
    ci_low, ci_high, band = (np.full(n.shape, np.nan) for _ in range(3))
    coverage[ok] = k[ok] / n[ok]
    ci_low[ok], ci_high[ok] = clopper_pearson(k[ok], n[ok])
    band[ok], _ = nominal_band(n[ok], confidence=confidence)
    out["coverage"], out["coverage_ci_low"], out["coverage_ci_high"], out["nominal_band_low"] = (
        coverage,
        ci_low,
        ci_high,
        band,
    )
    out["identified"] = out["gamma_box"] == 1.0
    undefined = ~np.isfinite(out["truth"].to_numpy(float))
    degenerate = out["mean_width"].to_numpy(float) == 0
    out["caveat"] = np.where(
        undefined, UNDEFINED_TRUTH, np.where(degenerate, DEGENERATE, np.where(n == 0, WITHHELD, ""))
    )
    for column in ("n_replicates", "n_withheld", "n_covered", "n_flagged", "n_sign_errors"):
        out[column] = out[column].astype(np.int64)
    return out[list(COVERAGE_COLUMNS)]


def coverage_summary(table: pd.DataFrame) -> pd.DataFrame:
    """Per setting, margins, method and ``gamma``: the mean coverage over cells with its Monte-Carlo error.

    ``mc_error``: the binomial standard error of the mean coverage, ``sqrt(c (1 - c) / N)`` with ``N``
    the cell-replicates pooled (cells of one replicate are dependent, so this is a lower bound of the
    error; the per-cell Clopper-Pearson intervals are in :func:`coverage_table`). ``share_below_band``:
    cells whose coverage is below the band a correct 95% interval falls in with probability 95%.
    """
    cells = table[(table["n_replicates"] > 0) & (table["caveat"] == "")].assign(
        _below=lambda d: d["coverage"] < d["nominal_band_low"]
    )
    out = (
        cells.groupby(["dataset", "margins", "method", "gamma"], sort=True)
        .agg(
            gamma_box=("gamma_box", "first"),
            identified=("identified", "first"),
            n_cells=("coverage", "size"),
            n_replicates=("n_replicates", "median"),
            mean_coverage=("coverage", "mean"),
            _covered=("n_covered", "sum"),
            _total=("n_replicates", "sum"),
            min_coverage=("coverage", "min"),
            share_below_band=("_below", "mean"),
            n_flagged=("n_flagged", "sum"),
            n_sign_errors=("n_sign_errors", "sum"),
        )
        .reset_index()
    )
    pooled = out["_covered"] / out["_total"]
    out["mc_error"] = np.sqrt(pooled * (1 - pooled) / out["_total"])
    order = {m: i for i, m in enumerate(MARGINS)}
    out = out.sort_values(
        ["dataset", "margins", "method", "gamma"], key=lambda c: c.map(order) if c.name == "margins" else c
    )
    return out[list(SUMMARY_COLUMNS)].reset_index(drop=True)
