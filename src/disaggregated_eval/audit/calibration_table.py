"""Calibration per slice: observed rates per score bin, the expected calibration error, observed/expected.

Bins (:func:`score_bins`). A score with at most ``calibration_bins`` distinct values (deciles, a hard
decision) gets one bin per value; otherwise its scores are cut into ``calibration_bins`` quantile bins
over the whole file, with the library's binning rule (:mod:`disaggregated_eval.calibration`:
``pandas.qcut`` edges, duplicate edges dropped, empty bins dropped). Quantile edges alone would merge
tied values (COMPAS's 10 deciles gave 8 bins; a two-valued score, one). Every slice is read on the same bins. The bins are fixed: they
are not recomputed on a resample (as the weights of the controlled evaluation).

Per model, slice and bin (:data:`.columns.CALIBRATION_BIN_COLUMNS`): the rows, the mean predicted risk
``sum w r / sum w``, the observed rate ``sum w y / sum w`` and its Wilson interval (Kish's effective
size under sample weights), as the calibration curves of the pipeline (paper Supplementary A.3).

Per model and slice (:data:`.columns.CALIBRATION_SUMMARY_COLUMNS`):

* the expected calibration error ``ECE_s = sum_b (W_sb / W_s) |Y_sb / W_sb - R_sb / W_sb|
  = sum_b |Y_sb - R_sb| / W_s`` with ``W``, ``Y``, ``R`` the sums of ``w``, ``w y``, ``w r`` (Naeini,
  Cooper and Hauskrecht, 2015, on quantile bins): the plug-in the other tools report, without an
  interval (it is positive on every sample of a calibrated slice, and no bootstrap of it covers 0);
* the calibration error ``CE_s = sqrt(sum_b (W_sb / W_s) delta_sb^2)``, the root-mean-square gap
  (the l2 calibration error of Kumar, Liang and Ma, 2019), debiased, with an interval that reaches 0
  for a calibrated slice (:func:`disaggregated_eval.calibration.calibration_error_interval`), and as
  ``vs_overall`` the same statistic of the slice's gaps minus the whole population's, bin by bin
  (0 when the slice is calibrated as everyone is; :func:`_calibration_errors`);
* the observed/expected ratio ``sum_b Y_sb / sum_b R_sb`` (the slices table's
  ``observed_expected_ratio``; its estimate and interval are taken from there when the audit computed
  it), with a BCa interval (jackknife acceleration per slice) and, against the overall value, a paired
  percentile interval of the difference (``vs_overall``).

The observed/expected ratio's replicates (and the ECE's point estimate) come from ONE
bootstrap on the engine's resampling (:func:`disaggregated_eval.engine.resampling.run_batches`: the
same seeds, unit counts and strata rules as every bootstrap of the audit, seed path
``("audit", "calibration")``): rows that share their cell, label, weight and every model's score are
one unit (:mod:`disaggregated_eval.engine.units`) and each resample's unit counts give the sums of every
(cell, bin) as one sparse product; for continuous scores the units are the (cell, label, bin) categories,
whose counts are exact and whose score sums are drawn given the counts (:func:`_score_categories`); with
varying sample weights or small files the resamples are row indices, as the engine draws them, summed by
the engine's :func:`~disaggregated_eval.engine.sums.keyed_draw_sums`; the cells add up into slices. ECE is an absolute value of noisy
sums: on a small slice it is positive even for a perfectly calibrated model (``docs/method.md``,
"Calibration per slice").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse

from .. import seeds, vocabulary
from ..calibration import BIN_SUMS, binned_error_sums, binned_errors, calibration_error_interval, quantile_bins
from ..derived import Replicated, difference, summarise
from ..engine.resampling import UNIT_BLOCK, default_batch_size, make_strata, run_batches, strata_for, unit_blocks
from ..engine.sums import keyed_draw_sums
from ..engine.units import Units, find_units, units_of_counts
from ..intervals import (
    bca_interval,
    caveats,
    degenerate,
    effective_size,
    wilson_interval,
)
from .columns import CALIBRATION_BIN_COLUMNS, CALIBRATION_SUMMARY_COLUMNS
from .slices import SlicePlan
from .withheld import withheld_reasons

__all__ = ["score_bins", "calibration_analysis"]

_BATCH_BYTES = 32 * 2**20  # the per-(slice, bin) sums of one batch


def score_bins(
    scores: np.ndarray, n_bins: int, count: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin of every row (``0 .. B-1`` in increasing score order, empty bins dropped) and each bin's score range.

    One bin per distinct score when there are at most ``n_bins`` of them, else the library's quantile
    bins (module docstring). Used by the calibration table and by the observed/expected ratio's test,
    which permutes within these bins (:mod:`.comparison_tests`). With ``count`` (rows each score stands for,
    frequency weights) the quantile bins are those of the expanded rows.

    Returns
    -------
    bins : ndarray of shape (n_rows,), int64
    low, high : ndarray of shape (B,)
        Smallest and largest score of the rows of each bin.
    """
    values, by_value = np.unique(scores, return_inverse=True)
    raw = by_value.ravel() if values.shape[0] <= n_bins else quantile_bins(scores, n_bins, count)
    used, bins = np.unique(raw, return_inverse=True)
    k = used.shape[0]
    low = np.full(k, np.inf)
    high = np.full(k, -np.inf)
    np.minimum.at(low, bins, scores)
    np.maximum.at(high, bins, scores)
    return bins.astype(np.int64), low, high


def _slice_matrix(plan: SlicePlan) -> sparse.csr_matrix:
    """(n_slices, n_cells) 0/1: which cells make up each slice."""
    n_cells, n_families = plan.cell_slices.shape
    rows = plan.cell_slices.T.ravel()
    cols = np.tile(np.arange(n_cells), n_families)
    return sparse.csr_matrix((np.ones(rows.shape[0]), (rows, cols)), shape=(plan.n_slices, n_cells))


def _observed_expected_bootstrap(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    w: np.ndarray,
    binned: dict,
    models: Sequence[int],
    *,
    n_resamples: int,
    seed: np.random.SeedSequence,
    resampling: str,
    n_threads: int,
    progress: Callable[[int, int], None] | None,
    count: np.ndarray | None = None,
) -> tuple[dict, dict]:
    """Point estimates and paired replicates of every slice's observed/expected ratio, per model.

    ONE bootstrap on the engine's resampling (module docstring): unit counts (rows equal in cell, label,
    weight and every model's score), or for continuous scores (cell, label, every model's bin)
    categories with their score sums drawn given the counts (:func:`_score_categories`), or row indices
    summed by the engine's kernel. With frequency weights (``count``) the rows are always units, with the
    summed counts as multiplicities. Returns ``point[m]`` of shape (n_slices,) and ``reps[m]`` of shape
    (n_resamples, n_slices).
    """
    n = y.shape[0]
    cells = plan.cell_codes.astype(np.int64)
    n_cells = plan.n_cells
    to_slices = _slice_matrix(plan)
    keys = [cells, y, w] + [scores[m] for m in models]
    units = find_units(keys) if count is None else units_of_counts(keys, count)
    spread = None
    if units is None:
        units, spread = _score_categories(cells, y, w, [scores[m] for m in models], [binned[m][0] for m in models])
    if units is None:
        first = np.arange(n)
        multiplicity = None
    else:
        first, multiplicity = units.first, units.multiplicity
    n_units = first.shape[0]
    u_cell, u_y, u_w = cells[first], y[first], w[first]

    def unit_matrix(column: np.ndarray, values: np.ndarray) -> sparse.csr_matrix:
        return sparse.csr_matrix((values, (np.arange(n_units), column)), shape=(n_units, n_cells))

    per_model = {}
    for i, m in enumerate(models):
        u_r = scores[m][first] if spread is None else spread.mean[:, i]  # a category's mean score
        values = np.stack([u_w * u_y, u_w * u_r], axis=1)  # Y, R per unit
        per_model[m] = dict(
            keys=np.ascontiguousarray(np.stack([j * n_cells + u_cell for j in range(2)], axis=1)),
            values=np.ascontiguousarray(values),
            matrix=sparse.hstack([unit_matrix(u_cell, values[:, j]) for j in (0, 1)]).T.tocsr(),
            # where a category's score sum departs from count x mean, R moves by as much
            noise=None if spread is None else sparse.hstack(
                [sparse.csr_matrix((n_units, n_cells)), unit_matrix(u_cell, u_w)]).T.tocsr(),
        )  # fmt: skip
    noise_seed = seeds.seed_sequence(seed, "score sums")

    def statistics(draws: np.ndarray, rows: bool, start: int | None = None) -> dict:
        """O/E of every model and slice for each resample: ``draws`` (n_draws, n_units) holds unit counts,
        or (``rows``) the row indices drawn; ``start``: the first resample's index, where score sums are
        drawn given the counts (None: the point estimate)."""
        b = draws.shape[0]
        oe = {}
        if spread is not None and start is not None:
            deviations = spread.deviations(draws, noise_seed, start)
        for i, (m, mats) in enumerate(per_model.items()):
            if rows:
                sums = keyed_draw_sums(draws, mats["keys"], mats["values"], 2 * n_cells).T
            else:
                sums = np.asarray(mats["matrix"] @ np.ascontiguousarray(draws.T, dtype=np.float64))
                if spread is not None and start is not None:
                    sums += np.asarray(mats["noise"] @ np.ascontiguousarray(deviations[:, :, i].T))
            big_y, big_r = (np.asarray(to_slices @ part) for part in sums.reshape(2, n_cells, b))
            with np.errstate(invalid="ignore", divide="ignore"):
                oe[m] = np.where(big_r > 0, big_y / big_r, np.nan).T
        return oe

    every_row = np.ones((1, n_units), dtype=np.int64) if multiplicity is None else multiplicity[None, :]
    point = {m: values[0] for m, values in statistics(every_row, rows=False).items()}
    reps = {m: np.empty((n_resamples, plan.n_slices)) for m in models}

    def kernel(draws: np.ndarray, start: int, stop: int) -> None:
        for m, values in statistics(draws, rows=multiplicity is None, start=start).items():
            reps[m][start:stop] = values

    batch = max(1, min(default_batch_size(n_units), _BATCH_BYTES // (8 * plan.n_slices * 2 * len(models))))
    strata = strata_for(resampling, u_cell)
    run_batches(kernel, n=n_units, n_resamples=n_resamples, seed=seed, batch_size=batch,
                strata=make_strata(strata, n_units), n_threads=n_threads, progress=progress,
                multiplicity=multiplicity)  # fmt: skip
    return point, reps


def calibration_analysis(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    model_names: Sequence[str],
    *,
    hard: Sequence[bool],
    n_bins: int,
    confidence: float,
    min_group_size: int,
    n_resamples: int,
    seed: np.random.SeedSequence,
    resampling: str,
    n_threads: int,
    observed_expected: pd.DataFrame | None = None,
    observed_expected_vs_overall: pd.DataFrame | None = None,
    progress: Callable[[int, int], None] | None = None,
    count: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The ``calibration`` and ``calibration_summary`` tables of an audit (module docstring).

    Parameters
    ----------
    plan : SlicePlan
    y : ndarray of shape (n_rows,)
        Labels 0/1.
    scores : sequence of ndarray of shape (n_rows,)
        Each model's scores in [0, 1].
    weight : ndarray of shape (n_rows,) or None
        Sample weights (None: 1).
    model_names : sequence of str
    hard : sequence of bool
        Whether each model gives hard 0/1 predictions (no calibration: left out).
    n_bins : int
        Quantile bins requested (fewer when scores tie).
    confidence : float
        Level of every interval.
    min_group_size : int
        Slices with fewer rows are withheld (interval only).
    n_resamples : int
    seed : numpy.random.SeedSequence
        Seed of the observed/expected bootstrap (resample ``i`` uses child ``i``), run only when the
        audit did not compute that metric.
    resampling : {"population", "within_group"}
        The audit's scheme (``within_group``: strata are the cells).
    n_threads : int
    observed_expected : pandas.DataFrame, optional
        The slices table's ``observed_expected_ratio`` rows: their estimates and intervals are used.
    observed_expected_vs_overall : pandas.DataFrame, optional
        The comparisons table's ``vs_overall`` rows of ``observed_expected_ratio``: their differences and
        intervals are the summary's ``vs_overall`` (the same paired bootstrap differences). With both
        tables for every model, no bootstrap is run here.
    progress : callable, optional
        ``progress(done, total)`` after each batch of resamples.
    count : ndarray of shape (n_rows,), int64, optional
        Rows each row stands for (frequency weights): the bins are those of the expanded scores, every
        sum and row count counts a row that many times, and the bootstrap draws the expanded rows.

    Returns
    -------
    bins, summary : pandas.DataFrame
        Columns :data:`.columns.CALIBRATION_BIN_COLUMNS` and :data:`.columns.CALIBRATION_SUMMARY_COLUMNS`.
    """
    n = y.shape[0]
    w = np.ones(n) if weight is None else weight
    models = [m for m in range(len(model_names)) if not hard[m]]
    if not models:
        return (pd.DataFrame({c: [] for c in CALIBRATION_BIN_COLUMNS}),
                pd.DataFrame({c: [] for c in CALIBRATION_SUMMARY_COLUMNS}))  # fmt: skip
    cells = plan.cell_codes.astype(np.int64)
    binned = {m: score_bins(scores[m], n_bins, count) for m in models}
    given = {}
    if observed_expected is not None and observed_expected_vs_overall is not None:
        for m in models:
            name = model_names[m]
            own = observed_expected[observed_expected["model"] == name].set_index("slice")
            vs = observed_expected_vs_overall[observed_expected_vs_overall["model"] == name].set_index("slice")
            if len(own):
                given[m] = (own.reindex(list(plan.names)), vs.reindex(list(plan.names)))
    missing = [m for m in models if m not in given]
    point_oe, reps_oe = ({}, {}) if not missing else _observed_expected_bootstrap(
        plan, y, scores, w, binned, missing, n_resamples=n_resamples, seed=seed, resampling=resampling,
        n_threads=n_threads, progress=progress, count=count)  # fmt: skip

    slice_rows = plan.slice_counts()
    names = np.array(plan.names, dtype=object)
    attributes = np.array([plan.attribute_of(s) for s in range(plan.n_slices)], dtype=object)
    bin_frames, summary_frames = [], []
    for m in models:
        bins, low_score, high_score = binned[m]
        k = int(bins.max()) + 1
        key = cells * k + bins
        rows = np.rint(_per_slice_bin(plan, key, count, k)).astype(np.int64)
        sums = (w, w * y, w * scores[m], w * w)
        big_w, big_y, big_r, big_w2 = (_per_slice_bin(plan, key, v if count is None else count * v, k) for v in sums)
        with np.errstate(invalid="ignore", divide="ignore"):
            observed = np.where(big_w > 0, big_y / big_w, np.nan)
            predicted = np.where(big_w > 0, big_r / big_w, np.nan)
        ci_low, ci_high = wilson_interval(observed, effective_size(big_w, big_w2), confidence)
        with np.errstate(invalid="ignore", divide="ignore"):
            total = big_w.sum(axis=1)
            ece = np.where(total > 0, np.abs(big_y - big_r).sum(axis=1) / np.where(total > 0, total, 1.0), np.nan)
        # under sample weights the rule counts the slice's effective size too (:mod:`.withheld`)
        effective = None if weight is None else (effective_size(big_w.sum(axis=1), big_w2.sum(axis=1)),) * 4
        reasons = withheld_reasons("mean_predicted_risk", slice_rows, slice_rows, slice_rows, slice_rows,
                                   ece, min_group_size=min_group_size, min_denominator=0, effective=effective)  # fmt: skip
        reported = reasons == ""
        bin_frames.append(
            pd.DataFrame(
                {
                    "model": model_names[m],
                    "slice": np.repeat(names, k),
                    "attribute": np.repeat(attributes, k),
                    "bin": np.tile(np.arange(k, dtype=np.int64), plan.n_slices),
                    "score_low": np.tile(low_score, plan.n_slices),
                    "score_high": np.tile(high_score, plan.n_slices),
                    "n": rows.ravel(),
                    "mean_predicted": predicted.ravel(),
                    "observed": observed.ravel(),
                    "ci_low": ci_low.ravel(),
                    "ci_high": ci_high.ravel(),
                    "interval": "wilson",
                    "reported": np.repeat(reported, k),
                    "reason": np.repeat(reasons.astype(str), k),
                }
            )
        )
        n_bins_used = (rows > 0).sum(axis=1).astype(np.int64)
        base = {"model": model_names[m], "slice": names, "attribute": attributes, "n": slice_rows.astype(np.int64),
                "n_bins": n_bins_used, "reported": reported, "reason": reasons.astype(str)}  # fmt: skip
        not_overall = np.arange(plan.n_slices) > 0
        # the expected calibration error: the plug-in only (biased upward on small slices; no interval)
        summary_frames.append(pd.DataFrame({
            **base, "statistic": "expected_calibration_error",
            "estimate": np.where(reported, ece, np.nan), "ci_low": np.nan, "ci_high": np.nan,
            "interval": INTERVAL_NONE, "vs_overall": np.nan, "vs_overall_low": np.nan, "vs_overall_high": np.nan,
            "n_undefined": 0, "caveat": caveats(ece, np.zeros(plan.n_slices, dtype=bool)).astype(str),
        }))  # fmt: skip
        # the calibration error: debiased, with an interval that reaches 0 (library: calibration.py)
        error, vs = _calibration_errors(plan, key, y, scores[m], w, k, confidence, count)
        summary_frames.append(pd.DataFrame({
            **base, "statistic": "calibration_error",
            "estimate": np.where(reported, error[0], np.nan), "ci_low": error[1], "ci_high": error[2],
            "interval": INTERVAL_CALIBRATION_ERROR,
            "vs_overall": np.where(reported & not_overall, vs[0], np.nan),
            "vs_overall_low": np.where(not_overall, vs[1], np.nan), "vs_overall_high": np.where(not_overall, vs[2], np.nan),
            "n_undefined": 0, "caveat": caveats(error[0], np.zeros(plan.n_slices, dtype=bool)).astype(str),
        }))  # fmt: skip
        if m in given:
            own, vs = given[m]
            point, low, high = (own[c].to_numpy(float) for c in ("estimate", "ci_low", "ci_high"))
            point = np.where(reported, point, np.nan)
            caveat = own["caveat"].fillna("").to_numpy(object)
            undefined = own["n_undefined"].fillna(0).to_numpy(np.int64)
            vs_estimate, vs_low, vs_high = (vs[c].to_numpy(float) for c in ("difference", "ci_low", "ci_high"))
            vs_ok = (vs["caveat"].fillna("").to_numpy(object) == "") & not_overall
        else:
            point, reps = point_oe[m], reps_oe[m]
            low, high = bca_interval(reps, point, _oe_accelerations(plan, y, scores[m], w, count), confidence)
            caveat = caveats(point, degenerate(reps))
            undefined = np.sum(~np.isfinite(reps), axis=0).astype(np.int64)
            x = Replicated(point=point, replicates=reps)
            vs_oe = summarise(difference(x, np.arange(plan.n_slices), np.zeros(plan.n_slices, dtype=np.int64)),
                              confidence=confidence)  # fmt: skip
            vs_estimate, vs_low, vs_high = vs_oe.estimate, vs_oe.low, vs_oe.high
            vs_ok = (vs_oe.caveat == "") & not_overall
        summary_frames.append(pd.DataFrame({
            **base, "statistic": "observed_expected_ratio",
            "estimate": np.where(reported, point, np.nan),
            "ci_low": np.where(caveat == "", low, np.nan), "ci_high": np.where(caveat == "", high, np.nan),
            "interval": "bca",
            "vs_overall": np.where(reported & not_overall, vs_estimate, np.nan),
            "vs_overall_low": np.where(vs_ok, vs_low, np.nan), "vs_overall_high": np.where(vs_ok, vs_high, np.nan),
            "n_undefined": undefined, "caveat": np.asarray(caveat).astype(str),
        }))  # fmt: skip
    bins_table = pd.concat(bin_frames, ignore_index=True)[list(CALIBRATION_BIN_COLUMNS)]
    summary = pd.concat(summary_frames, ignore_index=True)
    order = {name: i for i, name in enumerate(model_names)}
    summary = summary.assign(
        _m=summary["model"].map(order),
        _s=summary["slice"].map({name: i for i, name in enumerate(plan.names)}),
        _q=summary["statistic"].map({s: i for i, s in enumerate(vocabulary.CALIBRATION_STATISTICS)}),
    ).sort_values(["_m", "_s", "_q"], kind="stable")
    return bins_table, summary[list(CALIBRATION_SUMMARY_COLUMNS)].reset_index(drop=True)


#: Categories (cell, label, every model's score bin) are used for continuous scores only when they hold at
#: least this many rows on average (fewer: the row draws, exact, are cheap anyway).
SCORE_CATEGORY_MIN_ROWS = 50


@dataclass(frozen=True)
class _ScoreSpread:
    """The scores of each category (``_score_categories``): mean, population SD and range, per model."""

    mean: np.ndarray  # (n_categories, n_models)
    sd: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def deviations(self, counts: np.ndarray, seed: np.random.SeedSequence, start: int) -> np.ndarray:
        """Each category's score sum minus ``count x mean`` on resamples ``start ..``, shape (B, K, models).

        Normal with variance ``count x sd^2`` (the sum of ``count`` draws with replacement from the
        category's scores), kept inside ``count x [low, high]``. The normals are drawn in the engine's
        blocks of resamples (:func:`~disaggregated_eval.engine.resampling.unit_blocks`): they depend on the
        seed and the resample index only, as the counts do.
        """
        b, k = counts.shape
        models = self.mean.shape[1]
        z = np.empty((b, k, models))
        for generator, first, lo, hi in unit_blocks(seed, start, start + b):
            z[lo - start : hi - start] = generator.standard_normal((UNIT_BLOCK, k, models))[lo - first : hi - first]
        c = counts.astype(np.float64)[:, :, None]
        deviation = np.sqrt(c) * self.sd[None] * z
        return np.clip(deviation, c * (self.low - self.mean)[None], c * (self.high - self.mean)[None])


def _score_categories(cells, y, w, scores, bins) -> tuple[Units | None, _ScoreSpread | None]:
    """Units of (cell, label, every model's bin) for the bootstrap of continuous scores, or ``(None, None)``.

    The ECE and O/E read a row through its cell, label, bin and its score's contribution to its
    (slice, bin) sum. A resample's count of each category is exact (``Multinomial``, as every unit
    count); the sum of the scores drawn from a category given its count ``c`` is a sum of ``c`` draws with
    replacement from the category's scores, with mean ``c x mean`` and variance ``c x sd^2``, drawn from
    the normal with these moments (``docs/method.md``, "Calibration per slice"). Used only without
    sample weights (or equal ones) and when categories hold at least :data:`SCORE_CATEGORY_MIN_ROWS`
    rows on average.
    """
    if not np.all(w == w[0]):
        return None, None
    units = find_units([cells, y] + list(bins), max_share=1.0 / SCORE_CATEGORY_MIN_ROWS)
    if units is None:
        return None, None
    k = units.n_units
    stats = []
    for r in scores:
        total = np.bincount(units.of_row, weights=r, minlength=k)
        mean = total / units.multiplicity
        centred = r - mean[units.of_row]
        sd = np.sqrt(np.bincount(units.of_row, weights=centred * centred, minlength=k) / units.multiplicity)
        low = np.full(k, np.inf)
        high = np.full(k, -np.inf)
        np.minimum.at(low, units.of_row, r)
        np.maximum.at(high, units.of_row, r)
        stats.append((mean, sd, low, high))
    return units, _ScoreSpread(*(np.stack([s[j] for s in stats], axis=1) for j in range(4)))


#: ``interval`` of the expected calibration error (a plug-in without interval) and of the calibration error.
INTERVAL_NONE = "none"
INTERVAL_CALIBRATION_ERROR = "scaled_chi2"


def _calibration_errors(
    plan: SlicePlan,
    key: np.ndarray,
    y: np.ndarray,
    r: np.ndarray,
    w: np.ndarray,
    k: int,
    confidence: float,
    count: np.ndarray | None = None,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every slice's calibration error and its distance from overall's calibration, with intervals.

    The calibration error is :func:`disaggregated_eval.calibration.calibration_error_interval` of the
    slice's bins. ``vs_overall`` is the same statistic of the differences between the slice's and the
    whole population's gaps, bin by bin: ``d_sb - d_ob = (1 - pi_b) (d_sb - d_rb)`` with ``pi_b`` the
    slice's share of the bin's weight and ``r`` the rest of the rows, whose variance is
    ``(1 - pi_b)^2 (v_sb + v_rb)`` (slice and rest are independent samples given the bins' rows): 0 when
    the slice is calibrated as the whole population is, whatever that is.

    Returns
    -------
    (estimate, low, high), (vs_estimate, vs_low, vs_high) : ndarrays of shape (n_slices,)
    """
    sums = binned_error_sums(y, r, w, key, plan.n_cells * k, count).reshape(plan.n_cells, k, len(BIN_SUMS))
    per_slice = plan.aggregate_cells(sums)  # (n_slices, k, 7)
    own = binned_errors(per_slice)
    error = calibration_error_interval(own.share, own.deviation, own.variance, own.usable, floor=own.floor,
                                       confidence=confidence)[:3]  # fmt: skip
    rest_sums = per_slice[:1] - per_slice
    signed = [BIN_SUMS.index("we"), BIN_SUMS.index("w2e")]  # sums of e may be negative; the others not (rounding)
    unsigned = [j for j in range(len(BIN_SUMS)) if j not in signed]
    rest_sums[..., unsigned] = np.maximum(rest_sums[..., unsigned], 0.0)
    rest = binned_errors(rest_sums)
    rows = per_slice[..., 0]
    rest_rows = rows[:1] - rows
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = per_slice[..., 1]
        total = weight[:1]
        outside = np.where(total > 0, 1.0 - weight / np.where(total > 0, total, 1.0), 0.0)  # 1 - pi_b
    gap = outside * (own.deviation - rest.deviation)
    variance = outside**2 * (own.variance + rest.variance)
    floor = outside**2 * (own.floor + rest.floor)
    usable = own.usable & ((rest_rows == 0) | rest.usable)
    gap = np.where(rest_rows == 0, 0.0, gap)
    vs = calibration_error_interval(own.share, gap, variance, usable, floor=floor, confidence=confidence)[:3]
    return error, vs


def _per_slice_bin(plan: SlicePlan, key: np.ndarray, values: np.ndarray | None, k: int) -> np.ndarray:
    """Sums of ``values`` (rows when None) per slice and bin, shape (n_slices, k); ``key = cell * k + bin``."""
    sums = np.bincount(key, weights=values, minlength=plan.n_cells * k).reshape(plan.n_cells, k)
    return plan.aggregate_cells(sums)


def _oe_accelerations(
    plan: SlicePlan, y: np.ndarray, r: np.ndarray, w: np.ndarray, count: np.ndarray | None = None
) -> np.ndarray:
    """BCa acceleration of every slice's observed/expected ratio (the slices table's jackknife)."""
    from .slice_table import jackknife_accelerations

    return jackknife_accelerations(plan, y, [r], w, ["observed_expected_ratio"], threshold=0.5, odds=1.0, count=count)[
        0, :, 0
    ]
