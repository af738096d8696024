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
  Cooper and Hauskrecht, 2015, on quantile bins);
* the observed/expected ratio ``sum_b Y_sb / sum_b R_sb`` (the slices table's
  ``observed_expected_ratio``; its estimate and interval are taken from there when the audit computed it),

each with a BCa interval (jackknife acceleration per slice) and, against the overall value, a paired
percentile interval of the difference (``vs_overall``). The sums of every (slice, bin) come from ONE
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
from ..calibration import _quantile_bins
from ..derived import Replicated, difference, summarise
from ..engine.resampling import UNIT_BLOCK, default_batch_size, make_strata, run_batches, strata_for, unit_blocks
from ..engine.sums import keyed_draw_sums
from ..engine.units import Units, find_units
from ..intervals import (
    bca_interval,
    caveats,
    degenerate,
    effective_size,
    grouped_jackknife_acceleration,
    wilson_interval,
)
from .columns import CALIBRATION_BIN_COLUMNS, CALIBRATION_SUMMARY_COLUMNS
from .slices import SlicePlan
from .withheld import withheld_reasons

__all__ = ["score_bins", "calibration_analysis"]

_BATCH_BYTES = 32 * 2**20  # the per-(slice, bin) sums of one batch


def score_bins(scores: np.ndarray, n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Bin of every row (``0 .. B-1`` in increasing score order, empty bins dropped) and each bin's score range.

    One bin per distinct score when there are at most ``n_bins`` of them, else the library's quantile
    bins (module docstring). Used by the calibration table and by the observed/expected ratio's test,
    which permutes within these bins (:mod:`.comparisons`).

    Returns
    -------
    bins : ndarray of shape (n_rows,), int64
    low, high : ndarray of shape (B,)
        Smallest and largest score of the rows of each bin.
    """
    values, by_value = np.unique(scores, return_inverse=True)
    raw = by_value.ravel() if values.shape[0] <= n_bins else _quantile_bins(scores, n_bins)
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


def _ece_accelerations(plan: SlicePlan, y, r, w, bins, n_bins: int) -> np.ndarray:
    """BCa acceleration of every slice's ECE: the jackknife leaves out one row of the slice at a time.

    With ``e = w (y - r)``, ``D_kb`` the sum of ``e`` in slice ``k`` and bin ``b``, ``E_k = sum_b |D_kb|``
    and ``W_k = sum w``, leaving out row ``i`` (bin ``b_i``) gives
    ``(E_k - |D_kb_i| + |D_kb_i - e_i|) / (W_k - w_i)``, for every row and family at once.
    """
    out = np.zeros(plan.n_slices)
    e = w * (y - r)
    inside = w > 0
    for family in plan.families:
        k = family.n_slices
        codes = family.codes
        key = codes * n_bins + bins
        d = np.bincount(key, weights=e, minlength=k * n_bins)
        big_e = np.abs(d).reshape(k, n_bins).sum(axis=1)
        big_w = np.bincount(codes, weights=w, minlength=k)
        with np.errstate(invalid="ignore", divide="ignore"):
            loo = (big_e[codes] - np.abs(d[key]) + np.abs(d[key] - e)) / (big_w[codes] - w)
        out[family.slice_ids] = grouped_jackknife_acceleration(np.where(inside, loo, np.nan), codes, k)
    return out


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
    progress: Callable[[int, int], None] | None = None,
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
        Seed of the bootstrap (resample ``i`` uses child ``i``).
    resampling : {"population", "within_group"}
        The audit's scheme (``within_group``: strata are the cells).
    n_threads : int
    observed_expected : pandas.DataFrame, optional
        The slices table's ``observed_expected_ratio`` rows: their estimates and intervals are used.
    progress : callable, optional
        ``progress(done, total)`` after each batch of resamples.

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
    n_cells = plan.n_cells
    to_slices = _slice_matrix(plan)
    binned = {m: score_bins(scores[m], n_bins) for m in models}

    # Units: rows equal in cell, label, weight and every model's score (exact in distribution). Continuous
    # scores: units of (cell, label, every model's bin) with the score sums drawn given the unit counts
    # (_score_categories); with varying sample weights, or too few rows per category, the resamples are
    # row indices, as the engine draws them, summed by a kernel.
    units = find_units([cells, y, w] + [scores[m] for m in models])
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

    def unit_matrix(column: np.ndarray, values: np.ndarray, width: int) -> sparse.csr_matrix:
        return sparse.csr_matrix((values, (np.arange(n_units), column)), shape=(n_units, width))

    per_model = {}
    for i, m in enumerate(models):
        bins, _, _ = binned[m]
        k_bins = int(bins.max()) + 1
        u_r = scores[m][first] if spread is None else spread.mean[:, i]  # a category's mean score
        u_b = bins[first]
        key = u_cell * k_bins + u_b
        values = np.stack([u_w * (u_y - u_r), u_w, u_w * u_y, u_w * u_r], axis=1)  # D, W, Y, R per unit
        per_model[m] = dict(
            k=k_bins,
            keys=np.ascontiguousarray(np.stack([key] + [j * n_cells + n_cells * k_bins + u_cell for j in range(3)], axis=1)),
            values=np.ascontiguousarray(values),
            matrix=sparse.hstack([unit_matrix(key, values[:, 0], n_cells * k_bins)]
                                 + [unit_matrix(u_cell, values[:, j], n_cells) for j in (1, 2, 3)]).T.tocsr(),
            # where a category's score sum departs from count x mean: D falls and R rises by as much
            noise=None if spread is None else sparse.hstack(
                [unit_matrix(key, -u_w, n_cells * k_bins), sparse.csr_matrix((n_units, 2 * n_cells)),
                 unit_matrix(u_cell, u_w, n_cells)]).T.tocsr(),
        )  # fmt: skip
    noise_seed = seeds.seed_sequence(seed, "score sums")

    def statistics(draws: np.ndarray, rows: bool, start: int | None = None) -> tuple[dict, dict]:
        """ECE and O/E of every model and slice for each resample: ``draws`` (n_draws, n_units) holds unit
        counts, or (``rows``) the row indices drawn; ``start``: the first resample's index, where score sums
        are drawn given the counts (None: the point estimate)."""
        b = draws.shape[0]
        ece, oe = {}, {}
        if spread is not None and start is not None:
            deviations = spread.deviations(draws, noise_seed, start)
        for i, (m, mats) in enumerate(per_model.items()):
            k = mats["k"]
            if rows:
                sums = keyed_draw_sums(draws, mats["keys"], mats["values"], n_cells * k + 3 * n_cells).T
            else:
                sums = np.asarray(mats["matrix"] @ np.ascontiguousarray(draws.T, dtype=np.float64))
                if spread is not None and start is not None:
                    sums += np.asarray(mats["noise"] @ np.ascontiguousarray(deviations[:, :, i].T))
            d_cells = sums[: n_cells * k].reshape(n_cells, k * b)
            d_slices = np.asarray(to_slices @ d_cells).reshape(plan.n_slices, k, b)
            big_w, big_y, big_r = (np.asarray(to_slices @ part) for part in sums[n_cells * k :].reshape(3, n_cells, b))
            with np.errstate(invalid="ignore", divide="ignore"):
                ece[m] = np.where(big_w > 0, np.abs(d_slices).sum(axis=1) / big_w, np.nan).T
                oe[m] = np.where(big_r > 0, big_y / big_r, np.nan).T
        return ece, oe

    every_row = np.ones((1, n_units), dtype=np.int64) if multiplicity is None else multiplicity[None, :]
    point_ece, point_oe = statistics(every_row, rows=False)
    reps_ece = {m: np.empty((n_resamples, plan.n_slices)) for m in models}
    reps_oe = {m: np.empty((n_resamples, plan.n_slices)) for m in models}

    def kernel(draws: np.ndarray, start: int, stop: int) -> None:
        ece, oe = statistics(draws, rows=multiplicity is None, start=start)
        for m in models:
            reps_ece[m][start:stop] = ece[m]
            reps_oe[m][start:stop] = oe[m]

    k_max = max(mats["k"] for mats in per_model.values())
    batch = max(1, min(default_batch_size(n_units), _BATCH_BYTES // (8 * plan.n_slices * k_max * len(models))))
    strata = strata_for(resampling, u_cell)
    run_batches(kernel, n=n_units, n_resamples=n_resamples, seed=seed, batch_size=batch,
                strata=make_strata(strata, n_units), n_threads=n_threads, progress=progress,
                multiplicity=multiplicity)  # fmt: skip

    slice_rows = plan.slice_counts()
    names = np.array(plan.names, dtype=object)
    attributes = np.array([plan.attribute_of(s) for s in range(plan.n_slices)], dtype=object)
    bin_frames, summary_frames = [], []
    for m in models:
        bins, low_score, high_score = binned[m]
        k = per_model[m]["k"]
        key = cells * k + bins
        rows = _per_slice_bin(plan, key, None, k).astype(np.int64)
        big_w, big_y, big_r, big_w2 = (_per_slice_bin(plan, key, v, k) for v in (w, w * y, w * scores[m], w * w))
        with np.errstate(invalid="ignore", divide="ignore"):
            observed = np.where(big_w > 0, big_y / big_w, np.nan)
            predicted = np.where(big_w > 0, big_r / big_w, np.nan)
        ci_low, ci_high = wilson_interval(observed, effective_size(big_w, big_w2), confidence)
        reasons = withheld_reasons("mean_predicted_risk", slice_rows, slice_rows, slice_rows, slice_rows,
                                   point_ece[m][0], min_group_size=min_group_size, min_denominator=0)  # fmt: skip
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
        accelerations = {
            "expected_calibration_error": _ece_accelerations(plan, y, scores[m], w, bins, k),
            "observed_expected_ratio": _oe_accelerations(plan, y, scores[m], w),
        }
        for statistic, point, reps in (
            ("expected_calibration_error", point_ece[m][0], reps_ece[m]),
            ("observed_expected_ratio", point_oe[m][0], reps_oe[m]),
        ):
            low, high = bca_interval(reps, point, accelerations[statistic], confidence)
            caveat = caveats(point, degenerate(reps))
            interval = "bca"
            if statistic == "observed_expected_ratio" and observed_expected is not None:
                given = observed_expected[observed_expected["model"] == model_names[m]].set_index("slice")
                if len(given):
                    given = given.reindex(list(plan.names))
                    low, high = given["ci_low"].to_numpy(float), given["ci_high"].to_numpy(float)
                    caveat = given["caveat"].fillna("").to_numpy(object)
            x = Replicated(point=point, replicates=reps)
            vs = summarise(difference(x, np.arange(plan.n_slices), np.zeros(plan.n_slices, dtype=np.int64)),
                           confidence=confidence)  # fmt: skip
            vs_ok = (vs.caveat == "") & (np.arange(plan.n_slices) > 0)
            summary_frames.append(
                pd.DataFrame(
                    {
                        "model": model_names[m],
                        "slice": names,
                        "attribute": attributes,
                        "statistic": statistic,
                        "estimate": np.where(reported, point, np.nan),
                        "ci_low": np.where(caveat == "", low, np.nan),
                        "ci_high": np.where(caveat == "", high, np.nan),
                        "interval": interval,
                        "vs_overall": np.where(reported & (np.arange(plan.n_slices) > 0), vs.estimate, np.nan),
                        "vs_overall_low": np.where(vs_ok, vs.low, np.nan),
                        "vs_overall_high": np.where(vs_ok, vs.high, np.nan),
                        "n": slice_rows.astype(np.int64),
                        "n_bins": n_bins_used,
                        "n_undefined": np.sum(~np.isfinite(reps), axis=0).astype(np.int64),
                        "reported": reported,
                        "reason": reasons.astype(str),
                        "caveat": np.asarray(caveat).astype(str),
                    }
                )
            )
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


def _per_slice_bin(plan: SlicePlan, key: np.ndarray, values: np.ndarray | None, k: int) -> np.ndarray:
    """Sums of ``values`` (rows when None) per slice and bin, shape (n_slices, k); ``key = cell * k + bin``."""
    sums = np.bincount(key, weights=values, minlength=plan.n_cells * k).reshape(plan.n_cells, k)
    return plan.aggregate_cells(sums)


def _oe_accelerations(plan: SlicePlan, y: np.ndarray, r: np.ndarray, w: np.ndarray) -> np.ndarray:
    """BCa acceleration of every slice's observed/expected ratio (the slices table's jackknife)."""
    from .slice_table import jackknife_accelerations

    return jackknife_accelerations(plan, y, [r], w, ["observed_expected_ratio"], threshold=0.5, odds=1.0)[0, :, 0]
