"""The slices table of an audit: every metric of every model on every slice, with its interval and band.

Intervals per metric (:data:`disaggregated_eval.intervals.INTERVAL_METHODS`, ``docs/method.md``,
"Intervals"): Wilson's score interval on the slice's own counts for the proportions (Kish's effective
size under sample weights), Newcombe's score-type interval for the AUC (effective sizes of the two
classes), the MOVER interval from the Wilson bounds of its two class rates for the balanced accuracy,
and the BCa bootstrap for the means and ratios of sums (log loss, Brier score, net benefit, mean
predicted risk, observed/expected ratio), with the jackknife acceleration of each slice. A BCa
interval whose replicates do not vary (every resample one value) is not given: ``caveat`` says
``degenerate``.

Simultaneous bands: for one model and metric, the family is the slices whose estimate is reported
(the minimum-size rules of :mod:`.withheld`); the common level ``c`` is the sup-t level of the
bootstrap replicates of that family (:func:`disaggregated_eval.intervals.band_level`, an undefined
replicate counts as outside), and each member's band is its own interval method at level ``c``.
Withheld slices get no band. ``estimate`` is NaN where the minimum-size rules withhold it;
``raw_estimate`` is the point estimate on the slice's rows in any case (fairlearn's ``by_group`` value).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..engine.sums import FN, FP, RATIOS_OF_SUMS, TN, TP, ratio_of_sums_values
from ..intervals import (
    auc_score_interval,
    band_level,
    bca_interval,
    caveats,
    degenerate,
    effective_size,
    grouped_jackknife_acceleration,
    interval_method,
    mover_mean,
    ratio_jackknife_acceleration,
    wilson_interval,
)
from ..registry import INTERVAL_KINDS, METRIC_REGISTRY
from .columns import SLICE_COLUMNS, WEIGHTED_SLICE_COLUMNS
from .estimates import AuditEstimates
from .slices import SlicePlan
from .tallies import SliceTallies

__all__ = ["jackknife_accelerations", "slice_table"]


def jackknife_accelerations(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    metrics: Sequence[str],
    *,
    threshold: float,
    odds: float,
    metric_ok: np.ndarray | None = None,
    count: np.ndarray | None = None,
) -> np.ndarray:
    """BCa's acceleration of every model, slice and metric that is a ratio of sums (NaN for the others).

    The jackknife leaves out one row of the slice at a time: for ``theta = sum w a / sum w b``,
    ``theta_(i) = (A - w_i a_i) / (B - w_i b_i)``, computed for every row and family at once, then
    :func:`disaggregated_eval.intervals.jackknife_acceleration`'s formula per slice
    (:func:`disaggregated_eval.intervals.ratio_jackknife_acceleration`: three passes over the rows per
    family). Rows of weight 0 are not part of the slice. With frequency weights (``count``) a row stands
    for ``count`` rows: its sums count it that many times, and so does the jackknife (grouped over the
    units, :func:`disaggregated_eval.intervals.grouped_jackknife_acceleration`), as on the expanded rows.

    Parameters
    ----------
    metric_ok : ndarray of shape (n_models, n_metrics), bool, optional
        Whether each model reports each metric (a model of hard predictions has no score metrics): the
        others are not computed (NaN).
    count : ndarray of shape (n_rows,), int, optional
        Rows each row stands for (frequency weights); None: one each.

    Returns
    -------
    ndarray of shape (n_models, n_slices, n_metrics)
    """
    n = y.shape[0]
    w = np.ones(n) if weight is None else weight
    inside = w > 0
    out = np.full((len(scores), plan.n_slices, len(metrics)), np.nan)
    for q, metric in enumerate(metrics):
        if metric not in RATIOS_OF_SUMS:
            continue
        for m, r in enumerate(scores):
            if metric_ok is not None and not metric_ok[m, q]:
                continue
            a, b = ratio_of_sums_values(metric, y, r, threshold=threshold, odds=odds)
            numerator, denominator = w * a, w * b
            for family in plan.families:
                if count is None:
                    out[m, family.slice_ids, q] = ratio_jackknife_acceleration(
                        family.codes, numerator, denominator, inside, family.n_slices
                    )
                    continue
                codes, k = family.codes, family.n_slices
                big_a = np.bincount(codes, weights=count * w * a, minlength=k)
                big_b = np.bincount(codes, weights=count * w * b, minlength=k)
                with np.errstate(invalid="ignore", divide="ignore"):
                    loo = (big_a[codes] - numerator) / (big_b[codes] - denominator)
                loo = np.where(inside, loo, np.nan)
                out[m, family.slice_ids, q] = grouped_jackknife_acceleration(loo, codes, k, count)
    return out


def _class_sizes(tallies: SliceTallies) -> tuple[np.ndarray, np.ndarray]:
    """Effective sizes of the positives and negatives of every model and slice."""
    pos = effective_size(tallies.sum_w[..., [FN, TP]].sum(-1), tallies.sum_w2[..., [FN, TP]].sum(-1))
    neg = effective_size(tallies.sum_w[..., [TN, FP]].sum(-1), tallies.sum_w2[..., [TN, FP]].sum(-1))
    return pos, neg


def _bounds(
    method: str, metric: str, m: int, point: np.ndarray, reps: np.ndarray, level, tallies, classes, acc
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of every slice of one model and metric at ``level`` (scalar or per slice), by the
    metric's interval method (:data:`disaggregated_eval.registry.INTERVAL_KINDS`)."""
    if method == "wilson":
        p, n_eff, _, _ = tallies.proportion(metric)
        return wilson_interval(p[m], n_eff[m], level)
    if method == "auc_score":
        return auc_score_interval(point, classes[0][m], classes[1][m], level)
    if method == "bca":
        return bca_interval(reps, point, acc, level)
    if method == "mover_wilson":
        parts = [tallies.proportion(part)[:2] for part in METRIC_REGISTRY[metric].mean_of]
        return mover_mean([p[m] for p, _ in parts], [n_eff[m] for _, n_eff in parts], level)
    raise ValueError(f"no slice interval {method!r} (metric {metric!r}); expected one of {INTERVAL_KINDS}")


def slice_table(
    plan: SlicePlan,
    estimates: AuditEstimates,
    tallies: SliceTallies,
    accelerations: np.ndarray,
    reasons: np.ndarray,
    metric_ok: np.ndarray,
    model_names: Sequence[str],
    metrics: Sequence[str],
    *,
    confidence: float,
) -> pd.DataFrame:
    """The ``slices`` table (:data:`.columns.SLICE_COLUMNS`; with sample weights
    :data:`.columns.WEIGHTED_SLICE_COLUMNS`, whose ``n_effective`` is Kish's effective size of the slice's
    weights), ordered by model, slice, metric."""
    rows = estimates.slice_rows[:, :, 0]  # (n_models, n_slices)
    classes = _class_sizes(tallies)
    counts = tallies.count
    n = counts.sum(-1)[0]
    effective = tallies.effective_sizes()
    columns = SLICE_COLUMNS if effective is None else WEIGHTED_SLICE_COLUMNS
    n_pos = counts[0][:, [FN, TP]].sum(-1)
    frames = []
    for m, model in enumerate(model_names):
        n_pp = counts[m][:, [FP, TP]].sum(-1)
        for q, metric in enumerate(metrics):
            if not metric_ok[m, q]:
                continue
            method = interval_method(metric)
            point = estimates.point[rows[m], q]
            reps = estimates.replicates[:, rows[m], q]
            low, high = _bounds(method, metric, m, point, reps, confidence, tallies, classes, accelerations[m, :, q])
            caveat = caveats(point, degenerate(reps) if method == "bca" else np.zeros(point.shape, dtype=bool))
            low = np.where(caveat == "", low, np.nan)
            high = np.where(caveat == "", high, np.nan)
            reported = reasons[m, :, q] == ""
            family = reported & (caveat == "")
            band_low = np.full(point.shape, np.nan)
            band_high = np.full(point.shape, np.nan)
            if family.any():
                level = band_level(reps, family, confidence)
                bl, bh = _bounds(method, metric, m, point, reps, level, tallies, classes, accelerations[m, :, q])
                band_low[family], band_high[family] = bl[family], bh[family]
            frames.append(
                pd.DataFrame(
                    {
                        "model": model,
                        "slice": list(plan.names),
                        "attribute": [plan.attribute_of(s) for s in range(plan.n_slices)],
                        "metric": metric,
                        "estimate": np.where(reported, point, np.nan),
                        "raw_estimate": point,
                        "ci_low": low,
                        "ci_high": high,
                        "band_low": band_low,
                        "band_high": band_high,
                        "interval": method,
                        "n": n,
                        "n_pos": n_pos,
                        "n_neg": n - n_pos,
                        "n_predicted_pos": n_pp,
                        **({} if effective is None else {"n_effective": effective[0][0]}),
                        "reported": reported,
                        "reason": reasons[m, :, q].astype(str),
                        "n_undefined": np.sum(~np.isfinite(reps), axis=0).astype(np.int64),
                        "caveat": caveat.astype(str),
                    }
                )
            )
    table = pd.concat(frames, ignore_index=True)[list(columns)]
    # model, slice (in slice order), metric (in the order given)
    slice_rank = {name: i for i, name in enumerate(plan.names)}
    table["_m"] = table["model"].map({name: i for i, name in enumerate(model_names)})
    table["_s"] = table["slice"].map(slice_rank)
    table["_q"] = table["metric"].map({name: i for i, name in enumerate(metrics)})
    table = table.sort_values(["_m", "_s", "_q"], kind="stable").drop(columns=["_m", "_s", "_q"])
    return table.reset_index(drop=True)
