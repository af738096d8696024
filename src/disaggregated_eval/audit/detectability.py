"""What the data can detect: the minimum detectable difference of every slice, and the rows a gap needs.

A slice without a flag is not a slice without a gap: it may be too small for any gap of interest to
reach the adjusted level. For each model, slice and metric this module gives the *minimum detectable
difference* (MDD) from overall: the smallest difference ``delta`` between the slice's value and the
overall value that the test of "slice vs overall" would detect with probability ``power`` (default
80%) at the level the flags use, ``alpha / m`` (``alpha = 1 - confidence``, ``m`` the size of the
flag's family: the strictest step of Holm's and of Benjamini-Hochberg's procedures; ``alpha``
without adjustment or without tests). With the option ``detect_gap`` it also gives the rows the
slice would need (the rest of the file unchanged) for a gap of that size, in either direction, to be
detected with that power.

Rates (the proportions: :data:`disaggregated_eval.engine.sums.PROPORTIONS`), method
``two-proportion normal``, from the slice's and the rest's counts (:mod:`.tallies`, effective sizes
under sample weights): the slice's value is ``p_s = p_0 + delta`` (or ``- delta``) while the overall
value stays ``p_0``, so the rest's is ``p_r = p_0 - pi delta / (1 - pi)`` (``pi`` the slice's share of
the metric's denominator) and the slice-vs-rest difference is ``Delta = delta / (1 - pi)``. The
two-sided pooled z-test of two independent proportions at level ``a`` then has power
``Phi((Delta - z_{1-a/2} SE_0) / SE_1)`` with ``SE_0 = sqrt(p_0 (1 - p_0) (1/n_s + 1/n_r))`` and
``SE_1 = sqrt(p_s (1 - p_s) / n_s + p_r (1 - p_r) / n_r)`` (Fleiss, Levin and Paik, 2003, "Statistical
Methods for Rates and Proportions", section 4.2; Chow, Shao and Wang, 2008, section 4.2); the MDD is
the smallest ``delta`` at which it reaches ``power``, per direction (``mdd_above``, ``mdd_below``; NaN
when no difference inside [0, 1] reaches it).

Other metrics (AUC, log loss, Brier score, net benefit, ...), method ``bootstrap se``: ``MDD =
(z_{1-a/2} + z_power) SE`` with ``SE`` the standard deviation of the paired bootstrap replicates of
the slice-minus-overall difference, the same in both directions; the rows needed scale ``SE`` as
``sqrt((1 - pi) / n_s)``, as for a mean.

Assumptions and limits (``docs/method.md``, "What the data can detect"): the normal approximation
(optimistic where the slice has few events: the audit's exact test is then conservative, so the
true MDD is larger), rows independent, the overall value held at its estimate.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import special

from ..derived import Replicated, difference
from ..engine.sums import PROPORTIONS
from .columns import DETECTABILITY_COLUMNS
from .estimates import AuditEstimates
from .slices import SlicePlan
from .tallies import SliceTallies

__all__ = ["METHODS", "MAX_SEARCHED_ROWS", "proportion_power", "minimum_detectable_difference", "rows_needed",
           "detectability_table", "rows_needed_note"]  # fmt: skip

#: The ``method`` column: how the MDD of a metric is computed.
METHODS: dict[str, str] = {"proportion": "two-proportion normal", "other": "bootstrap se"}
_GRID = 256  # points of the search for the smallest detectable difference
_BISECTIONS = 60
_MAX_ROWS = 1e9
#: Largest slice size :func:`rows_needed` tries: ``rows_needed`` is NaN for a gap that needs more.
MAX_SEARCHED_ROWS = _MAX_ROWS


def _z(alpha: np.ndarray | float) -> np.ndarray:
    return special.ndtri(1.0 - 0.5 * np.asarray(alpha, dtype=np.float64))


def proportion_power(
    delta: np.ndarray,
    p0: np.ndarray,
    n_slice: np.ndarray,
    n_rest: np.ndarray,
    share: np.ndarray,
    *,
    alpha: np.ndarray | float,
    direction: int,
) -> np.ndarray:
    """Power of the pooled two-sided z-test of slice vs rest when the slice is ``delta`` above (below) overall.

    Parameters
    ----------
    delta : ndarray
        Difference of the slice's rate from the overall rate, >= 0 (broadcast with the others).
    p0 : ndarray
        The overall rate, held fixed.
    n_slice, n_rest : ndarray
        (Effective) sizes of the metric's denominator in the slice and in the rest.
    share : ndarray
        The slice's share ``pi`` of the denominator's weight.
    alpha : float or ndarray
        Two-sided level of the test.
    direction : {1, -1}
        Slice above (1) or below (-1) overall.

    Returns
    -------
    ndarray
        ``Phi((Delta - z SE_0) / SE_1)`` (module docstring); NaN where a rate leaves [0, 1] or the
        inputs are degenerate.
    """
    with np.errstate(invalid="ignore", divide="ignore"):
        p_s = p0 + direction * delta
        p_r = p0 - direction * share * delta / (1.0 - share)
        gap_ = delta / (1.0 - share)
        se0 = np.sqrt(p0 * (1.0 - p0) * (1.0 / n_slice + 1.0 / n_rest))
        se1 = np.sqrt(p_s * (1.0 - p_s) / n_slice + p_r * (1.0 - p_r) / n_rest)
        power = special.ndtr((gap_ - _z(alpha) * se0) / se1)
    ok = (p_s >= 0) & (p_s <= 1) & (p_r >= 0) & (p_r <= 1) & (se0 > 0) & (n_slice > 0) & (n_rest > 0)
    ok &= (share > 0) & (share < 1)
    return np.where(ok, np.where(se1 > 0, power, 1.0), np.nan)


def _largest_delta(p0, share, direction: int):
    """The largest difference that keeps both the slice's and the rest's rates in [0, 1]."""
    with np.errstate(invalid="ignore", divide="ignore"):
        room = (1.0 - p0) if direction > 0 else p0
        rest_room = (p0 if direction > 0 else 1.0 - p0) * (1.0 - share) / share
    return np.minimum(room, rest_room)


def minimum_detectable_difference(
    p0: np.ndarray,
    n_slice: np.ndarray,
    n_rest: np.ndarray,
    share: np.ndarray,
    *,
    alpha: np.ndarray | float,
    power: float,
    direction: int,
) -> np.ndarray:
    """The smallest difference from overall detected with probability ``power`` (:func:`proportion_power`).

    Parameters
    ----------
    p0, n_slice, n_rest, share : ndarray (broadcast)
        As :func:`proportion_power`.
    alpha : float or ndarray
        Two-sided level of the test (already adjusted for the family).
    power : float
        In (0, 1).
    direction : {1, -1}

    Returns
    -------
    ndarray
        The smallest ``delta`` in (0, largest possible] with power at least ``power`` (a grid of 256
        points, then 60 bisections), NaN where no possible difference reaches it.
    """
    p0, n_slice, n_rest, share, alpha = np.broadcast_arrays(*(np.asarray(v, dtype=np.float64)
                                                              for v in (p0, n_slice, n_rest, share, alpha)))  # fmt: skip
    top = _largest_delta(p0, share, direction)
    fractions = np.arange(1, _GRID + 1) / _GRID
    grid = top[..., None] * fractions
    args = (p0[..., None], n_slice[..., None], n_rest[..., None], share[..., None])
    reached = proportion_power(grid, *args, alpha=alpha[..., None], direction=direction) >= power
    found = reached.any(axis=-1) & np.isfinite(top) & (top > 0)
    first = np.argmax(reached, axis=-1)
    hi = np.take_along_axis(grid, first[..., None], axis=-1)[..., 0]
    lo = np.where(first > 0, np.take_along_axis(grid, np.maximum(first - 1, 0)[..., None], axis=-1)[..., 0], 0.0)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        ok = proportion_power(mid, p0, n_slice, n_rest, share, alpha=alpha, direction=direction) >= power
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    return np.where(found, hi, np.nan)


def rows_needed(
    gap_: float,
    p0: np.ndarray,
    per_row: np.ndarray,
    weight_per_row: np.ndarray,
    n_rest: np.ndarray,
    weight_rest: np.ndarray,
    *,
    alpha: np.ndarray | float,
    power: float,
) -> np.ndarray:
    """Rows a slice needs for a difference ``gap_`` from overall, in either direction, to be detected.

    Parameters
    ----------
    gap_ : float
        The difference from overall, > 0.
    p0 : ndarray
        The overall rate.
    per_row : ndarray
        Effective size of the metric's denominator per row of the slice (e.g. its share of negatives
        for the false positive rate).
    weight_per_row : ndarray
        Weight of the metric's denominator per row of the slice.
    n_rest, weight_rest : ndarray
        Effective size and weight of the denominator in the rest of the file (held fixed).
    alpha : float or ndarray
    power : float

    Returns
    -------
    ndarray
        The smallest number of rows (a whole number) at which every direction that keeps the rates
        inside [0, 1] reaches ``power`` (a log-spaced grid of 256 sizes between 1 and 1e9 rows, then 60
        bisections); NaN when no size is enough.
    """
    p0, per_row, weight_per_row, n_rest, weight_rest, alpha = np.broadcast_arrays(
        *(np.asarray(v, dtype=np.float64) for v in (p0, per_row, weight_per_row, n_rest, weight_rest, alpha))
    )

    def enough(rows: np.ndarray) -> np.ndarray:
        """Whether ``rows`` rows give every possible direction at least ``power`` (broadcast)."""
        extra = rows.ndim - p0.ndim
        p, pr, wr, nr, wrest, a = (v.reshape(v.shape + (1,) * extra) for v in
                                   (p0, per_row, weight_per_row, n_rest, weight_rest, alpha))  # fmt: skip
        n_s = pr * rows
        share = wr * rows / (wr * rows + wrest)
        good, possible = True, False
        for direction in (1, -1):
            pw = proportion_power(gap_, p, n_s, nr, share, alpha=a, direction=direction)
            inside = np.isfinite(pw)
            possible = possible | inside
            good = good & (~inside | (pw >= power))
        return good & possible

    # Power need not grow with the slice for ever: with the rest and the overall value fixed, a very large
    # slice leaves the rest no room (its rate would leave [0, 1]). So: the first of a log-spaced grid of
    # sizes that is enough, then bisection between it and the grid point before.
    grid = np.exp(np.linspace(0.0, np.log(_MAX_ROWS), _GRID))
    ok = enough(np.broadcast_to(grid, p0.shape + grid.shape))
    found = ok.any(axis=-1)
    first = np.argmax(ok, axis=-1)
    hi = np.log(grid[first])
    lo = np.where(first > 0, np.log(grid[np.maximum(first - 1, 0)]), -1.0)
    for _ in range(_BISECTIONS):
        mid = 0.5 * (lo + hi)
        good = enough(np.exp(mid))
        hi = np.where(good, mid, hi)
        lo = np.where(good, lo, mid)
    rows = np.ceil(np.exp(hi) - 1e-9)
    return np.where(found & (per_row > 0), rows, np.nan)


def _bootstrap_rows(gap_: float, mdd: np.ndarray, rows: np.ndarray, total: float) -> np.ndarray:
    """Rows at which an MDD that scales as ``sqrt((1 - pi) / n)`` falls to ``gap_`` (closed form)."""
    rest = total - rows
    with np.errstate(invalid="ignore", divide="ignore"):
        c = (gap_ / mdd) ** 2 * (1.0 - rows / total) / rows  # (1 - pi_new) / n_new must equal c
        r = (-c * rest + np.sqrt((c * rest) ** 2 + 4.0 * c * rest)) / (2.0 * c)
    return np.where(np.isfinite(r) & (r > 0) & (rest > 0), np.ceil(r - 1e-9), np.nan)


def detectability_table(
    plan: SlicePlan,
    tallies: SliceTallies,
    estimates: AuditEstimates,
    reasons: np.ndarray,
    metric_ok: np.ndarray,
    model_names: Sequence[str],
    metrics: Sequence[str],
    comparisons: pd.DataFrame,
    flagged: pd.Series,
    *,
    confidence: float,
    power: float,
    detect_gap: float | None,
    adjusted: bool,
) -> pd.DataFrame:
    """The ``detectability`` table (:data:`.columns.DETECTABILITY_COLUMNS`), ordered by model, slice, metric.

    Parameters
    ----------
    plan : SlicePlan
    tallies : SliceTallies
        Counts of every slice at the audit's threshold.
    estimates : AuditEstimates
        The audit's paired bootstrap (the overall values, and the SE of the other metrics).
    reasons : ndarray of shape (n_models, n_slices, n_metrics), object
        Why each estimate is withheld ("" when reported).
    metric_ok : ndarray of shape (n_models, n_metrics), bool
    model_names, metrics : sequence of str
    comparisons : pandas.DataFrame
        The comparisons table (``vs_overall`` rows give the difference and the family size).
    flagged : pandas.Series of bool
        Aligned with ``comparisons``: whether each row carries a flag (:func:`.decisions.flagged_rows`).
    confidence, power : float
    detect_gap : float or None
    adjusted : bool
        Whether the flags are adjusted for their family (then the level is ``alpha / family_size``).

    Returns
    -------
    pandas.DataFrame
        One row per model, slice (overall excluded) and metric.
    """
    alpha = 1.0 - confidence
    rest = tallies.rest()
    slices = np.arange(1, plan.n_slices)
    names = np.array(plan.names, dtype=object)
    attributes = np.array([plan.attribute_of(s) for s in range(plan.n_slices)], dtype=object)
    rows_all = tallies.count.sum(-1)
    vs = comparisons[comparisons["kind"] == "vs_overall"].assign(
        _flag=flagged.reindex(comparisons.index, fill_value=False)
    )
    frames = []
    z_power = special.ndtri(power)
    for m, model in enumerate(model_names):
        for q, metric in enumerate(metrics):
            if not metric_ok[m, q]:
                continue
            rows = vs[(vs["model"] == model) & (vs["metric"] == metric)].set_index("slice")
            family_size = int(rows["family_size"].max()) if len(rows) else 0
            level = alpha / family_size if adjusted and family_size > 0 else alpha
            diff = rows["difference"].reindex(names[slices]).to_numpy(dtype=float)
            flag = rows["_flag"].reindex(names[slices], fill_value=False).to_numpy(dtype=bool)
            overall = float(estimates.point[estimates.slice_rows[m, 0, 0], q])
            n_rows = rows_all[m, slices]
            if metric in PROPORTIONS:
                method = METHODS["proportion"]
                p_all, n_eff, _, _ = tallies.proportion(metric)
                _, n_rest, _, _ = rest.proportion(metric)
                den = list(PROPORTIONS[metric][1])
                den_w = tallies.sum_w[m][:, den].sum(-1)
                p0 = p_all[m, 0]
                with np.errstate(invalid="ignore", divide="ignore"):  # no weight in the denominator: undefined
                    share = den_w[slices] / den_w[0]
                ns, nr = n_eff[m, slices], n_rest[m, slices]
                above = minimum_detectable_difference(p0, ns, nr, share, alpha=level, power=power, direction=1)
                below = minimum_detectable_difference(p0, ns, nr, share, alpha=level, power=power, direction=-1)
                needed = np.full(slices.shape, np.nan)
                if detect_gap is not None:
                    with np.errstate(invalid="ignore", divide="ignore"):
                        # a slice without rows takes the whole file's ratios per row
                        per_row = np.where(n_rows > 0, ns / n_rows, n_eff[m, 0] / rows_all[m, 0])
                        w_row = np.where(n_rows > 0, den_w[slices] / n_rows, den_w[0] / rows_all[m, 0])
                    needed = rows_needed(detect_gap, p0, per_row, w_row, nr, den_w[0] - den_w[slices],
                                         alpha=level, power=power)  # fmt: skip
                effective = ns
            else:
                method = METHODS["other"]
                base = Replicated(point=estimates.point[:, q], replicates=estimates.replicates[:, :, q])
                plus = estimates.slice_rows[m, slices, 0]
                minus = np.full(slices.shape, estimates.slice_rows[m, 0, 0])
                reps = difference(base, plus, minus).replicates
                finite = np.isfinite(reps)
                count = finite.sum(0)
                values = np.where(finite, reps, 0.0)
                mean = values.sum(0) / np.maximum(count, 1)
                squares = (np.where(finite, values - mean, 0.0) ** 2).sum(0)
                se = np.where(count >= 2, np.sqrt(squares / np.maximum(count - 1, 1)), np.nan)
                above = below = (_z(level) + z_power) * se
                needed = (_bootstrap_rows(detect_gap, above, n_rows.astype(float), float(rows_all[m, 0]))
                          if detect_gap is not None else np.full(slices.shape, np.nan))  # fmt: skip
                effective = n_rows.astype(float)
            why = reasons[m, slices, q].astype(str)
            frames.append(
                pd.DataFrame(
                    {
                        "model": model,
                        "slice": names[slices],
                        "attribute": attributes[slices],
                        "metric": metric,
                        "method": method,
                        "n": n_rows.astype(np.int64),
                        "n_effective": np.asarray(effective, dtype=float),
                        "overall": overall,
                        "difference": diff,
                        "flagged": flag,
                        "alpha": level,
                        "family_size": family_size,
                        "power": power,
                        "mdd_above": above,
                        "mdd_below": below,
                        "detect_gap": np.nan if detect_gap is None else float(detect_gap),
                        "rows_needed": needed,
                        "reported": why == "",
                        "reason": why,
                        "_m": m,
                        "_s": slices,
                        "_q": q,
                    }
                )
            )
    if not frames:
        return pd.DataFrame({c: [] for c in DETECTABILITY_COLUMNS})
    table = pd.concat(frames, ignore_index=True).sort_values(["_m", "_s", "_q"], kind="stable")
    table["family_size"] = table["family_size"].astype(np.int64)
    return table[list(DETECTABILITY_COLUMNS)].reset_index(drop=True)


def rows_needed_note(table: pd.DataFrame, detect_gap: float | None, power: float) -> str | None:
    """The note of an audit whose ``rows_needed`` is empty for reported rows, naming each row's reason.

    Parameters
    ----------
    table : pandas.DataFrame
        The ``detectability`` table (:func:`detectability_table`).
    detect_gap : float or None
        The option ``detect_gap`` (no note without it).
    power : float

    Returns
    -------
    str or None
        None when every reported row has its ``rows_needed``. Otherwise the count of the rows without
        one, split by reason: a rate ``detect_gap`` away from overall would leave [0, 1] in both
        directions; the bootstrap standard error of the difference is undefined (fewer than 2 finite
        replicates); or no slice of up to :data:`MAX_SEARCHED_ROWS` rows (the rest of the file
        unchanged) would detect so small a gap with that power.

    Examples
    --------
    >>> table = pd.DataFrame({"reported": [True, True], "rows_needed": [np.nan, 120.0],
    ...                       "method": [METHODS["proportion"]] * 2, "overall": [0.4, 0.4],
    ...                       "mdd_above": [0.1, 0.1]})
    >>> rows_needed_note(table, 1e-300, 0.8)[:60]
    'detect_gap 1e-300: rows_needed is empty for 1 of 2 reported '
    """
    if detect_gap is None or not len(table):
        return None
    reported = table["reported"].to_numpy(dtype=bool)
    empty = reported & table["rows_needed"].isna().to_numpy()
    if not empty.any():
        return None
    rate = (table["method"] == METHODS["proportion"]).to_numpy()
    overall = table["overall"].to_numpy(dtype=float)
    outside = empty & rate & (overall + detect_gap > 1.0) & (overall - detect_gap < 0.0)
    no_se = empty & ~rate & table["mdd_above"].isna().to_numpy()
    too_small = empty & ~outside & ~no_se
    reasons = []
    if too_small.any():
        reasons.append(f"{int(too_small.sum())} because no slice of up to {MAX_SEARCHED_ROWS:.0e} rows (the rest of the "
                       f"file unchanged) would detect a gap this small with power {power:g}")  # fmt: skip
    if outside.any():
        reasons.append(f"{int(outside.sum())} because a rate {detect_gap:g} away from overall would leave [0, 1] in "
                       "either direction")  # fmt: skip
    if no_se.any():
        reasons.append(f"{int(no_se.sum())} because the bootstrap standard error of the difference is undefined")
    return (f"detect_gap {detect_gap:g}: rows_needed is empty for {int(empty.sum())} of {int(reported.sum())} reported "
            f"rows of the detectability table: {'; '.join(reasons)}")  # fmt: skip
