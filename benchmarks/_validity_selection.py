"""Part (g) of the audit's validity study: the table ``selection`` (evaluation under selection).

The audit (``audit(...)`` with ``population_margins``, a margins CSV written to a temporary folder, and
``selection_sensitivity``) is run on samples drawn from a *selected* part of a population whose metrics
are known exactly, and its table ``selection`` is compared with the metrics of the whole population
(the target).

**The target population** (finite support, so every truth is a finite sum): a group ``A`` with levels
``large``, ``medium``, ``small`` and shares 0.5, 0.3, 0.2; a label with ``P(Y = 1 | A)`` = 0.3, 0.4, 0.5; an
unmodelled binary ``U`` with ``P(U = 1) = 0.5``, independent of ``(A, Y)``; a hard decision with
``P(predicted positive | A, Y, U)`` (:data:`POSITIVE_RATE`): 0.10 / 0.40 for ``Y = 0`` and ``U = 0 / 1`` in
every group (false positive rate 0.25 everywhere: every slice's false-positive-rate difference from
overall is exactly 0), 0.6 / 0.9 for ``Y = 1`` in ``large`` and ``medium`` and 0.15 / 0.45 in ``small``
(sensitivity 0.75, 0.75, 0.30); a score ``R`` of 0.1 or 0.3 (each with probability 1/2) on predicted
negatives and 0.6 or 0.9 on predicted positives (threshold 0.5). The truth of every slice's metric and
difference from overall is :func:`disaggregated_eval.metrics.compute_metrics` on the 48 support points
weighted by their probabilities (the project's definitions, exact up to rounding).

**Selection** (:data:`CELLS`): ``P(S = 1 | A, Y, U)`` has odds ``odds(s_AY) * lambda^(U - 1/2)`` with
``s_AY`` (:data:`SELECTION_AY`) 0.2 / 0.5 (``Y = 0 / 1``) for ``large``, 0.12 / 0.4 for ``medium``, 0.3 / 0.6
for ``small`` (positives over-selected, as in a clinic's patients), and ``lambda`` the odds ratio of
selection between ``U = 1`` and ``U = 0`` (1: selection on ``(A, Y)`` only). A sample is ``n`` independent
draws from ``P(A, Y, U, R | S = 1)`` (the support points weighted by ``probability * s``), i.e. the
selected rows of a population large enough that ``n`` of them were selected. The audit is given the
target's ``P(A, Y)`` (margins ``AY``: the file has ``share`` and ``label_rate``), its ``P(A)`` (``A``:
``share`` only), or nothing (``none``: ``selection_sensitivity`` only, bounds around the unweighted rows).

**True selection strength** ``Gamma*`` (:func:`strength`): :func:`disaggregated_eval.selection.gamma_star`
of the support points, with ``pi_0(c) = P(S = 1 | c)`` for the cells of the margins: ``gamma_box``, the
smallest ``Gamma`` from which the bounds are valid, and ``gamma_msm`` of Tan's model (larger).
With margins ``AY`` and ``lambda = 1`` the weighting identifies every metric (``Gamma* = 1``).

**Claims**: the terminal lists, for every difference from overall whose interval excludes 0 at the family's
common level (``breakdown_gamma`` defined; ``n_denominator`` at least the audit's ``min_denominator``: the
family of one model's differences, claimed together at 95% through a simultaneous band of their bounds,
``band_level``), "a disparity ... survives selection up to Gamma = Gamma_b". Such a claim speaks about the
true selection when ``Gamma_b > Gamma*``, and is then wrong if the difference's truth is 0 or of the other
sign.

Measured per cell (``summarise``): (g1) where the margins identify, the coverage of the corrected
estimates' and differences' intervals (goal >= 93%); (g2) the coverage of the bounds' interval at the first
``Gamma`` of the grid at or above ``Gamma*`` (goal >= 95%), and (g4) against every ``Gamma``; (g3) the
``Gamma = 1`` rows equal to the corrected estimate and its interval (bit for bit, goal: all) and the
error rate of the claims: per audit (any wrong claim) and per difference whose truth is 0 (how often it is
claimed), goal at most 5%; (g5) where the margins identify, every other section of the same audits against the
target's truths (issue 33, item 1: under margins every section is weighted to the target): the coverage of the
slices table's intervals of each slice's metric, of the comparisons' intervals of each group's difference from
overall, and of the fairness summary's demographic parity and equalized odds differences (goal >= 93% in the
worst slice).
"""

from __future__ import annotations

import itertools
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path

import _verdicts as v  # rates, percentages, verdicts: a leaf sibling module of benchmarks/
import numpy as np
import pandas as pd

from disaggregated_eval import selection, vocabulary
from disaggregated_eval.coverage import TRUTH_TOLERANCE
from disaggregated_eval.metrics import compute_metrics

__all__ = [
    "LEVELS",
    "SHARES",
    "LABEL_RATES",
    "POSITIVE_RATE",
    "SELECTION_AY",
    "METRICS",
    "GAMMAS",
    "SelectionCell",
    "CELLS",
    "support",
    "selection_probability",
    "truth",
    "strength",
    "selection_data",
    "margins_frame",
    "run_selection",
    "summarise",
    "TITLES",
]

LEVELS: tuple[str, ...] = ("large", "medium", "small")
SHARES: tuple[float, ...] = (0.5, 0.3, 0.2)
LABEL_RATES: tuple[float, ...] = (0.3, 0.4, 0.5)
#: ``P(U = 1)`` of the unmodelled variable, independent of ``(A, Y)``.
U_RATE = 0.5
#: ``P(predicted positive | A = a, Y = y, U = u)`` at ``[a][y][u]``.
POSITIVE_RATE: tuple[tuple[tuple[float, float], tuple[float, float]], ...] = (
    ((0.10, 0.40), (0.6, 0.9)),
    ((0.10, 0.40), (0.6, 0.9)),
    ((0.10, 0.40), (0.15, 0.45)),
)
#: Scores of predicted negatives and of predicted positives (each value with probability 1/2).
NEGATIVE_SCORES, POSITIVE_SCORES = (0.1, 0.3), (0.6, 0.9)
THRESHOLD = 0.5
#: ``P(S = 1 | A = a, Y = y)`` at ``[a][y]`` (at ``lambda = 1``; the odds of ``U = 1 / 0`` are multiplied by
#: ``lambda^(1/2)`` and ``lambda^(-1/2)``).
SELECTION_AY: tuple[tuple[float, float], ...] = ((0.2, 0.5), (0.12, 0.4), (0.3, 0.6))
#: The metrics audited: five proportions, a mean (Brier score) and a ratio of sums (observed / expected).
METRICS: tuple[str, ...] = (
    "false_positive_rate",
    "sensitivity",
    "precision",
    "label_rate",
    "predicted_positive_rate",
    "brier_score",
    "observed_expected_ratio",
)
#: The audit's ``selection_sensitivity`` (1 is implied).
GAMMAS: tuple[float, ...] = (1.1, 1.25, 1.5, 2.0, 3.0)
#: Differences whose truth is 0 (the claims about them are wrong whatever their sign).
NULL_METRICS: tuple[str, ...] = ("false_positive_rate",)
_COLUMN = "group"
_OVERALL = "overall"


@dataclass(frozen=True)
class SelectionCell:
    """One cell of part (g): the selection's odds ratio ``lambda`` in ``U`` per group, the margins given, the
    sample size."""

    name: str
    odds_ratio: tuple[float, float, float]
    margins: str  # "AY", "A" or "none"
    n: int


CELLS: dict[str, SelectionCell] = {
    c.name: c
    for c in (
        SelectionCell("AY-identified-n2000", (1.0, 1.0, 1.0), "AY", 2000),
        SelectionCell("AY-identified-n500", (1.0, 1.0, 1.0), "AY", 500),
        SelectionCell("A-on-Y-n2000", (1.0, 1.0, 1.0), "A", 2000),
        SelectionCell("none-on-AY-n2000", (1.0, 1.0, 1.0), "none", 2000),
        SelectionCell("AY-U-odds2-n2000", (2.0, 2.0, 2.0), "AY", 2000),
        SelectionCell("AY-U-small-odds4-n2000", (1.0, 1.0, 4.0), "AY", 2000),
    )
}


# ----------------------------------------------------------------------------------------------
# The population, its truths and its selection
# ----------------------------------------------------------------------------------------------
def support() -> pd.DataFrame:
    """The target population's support points ``a, y, u, r`` (``a`` an index into :data:`LEVELS`) and ``mass``."""
    rows = []
    for a, y, u in itertools.product(range(len(LEVELS)), (0, 1), (0, 1)):
        base = SHARES[a] * (LABEL_RATES[a] if y else 1.0 - LABEL_RATES[a]) * (U_RATE if u else 1.0 - U_RATE)
        positive = POSITIVE_RATE[a][y][u]
        for scores, p in ((NEGATIVE_SCORES, 1.0 - positive), (POSITIVE_SCORES, positive)):
            rows += [(a, y, u, r, base * p / len(scores)) for r in scores]
    return pd.DataFrame.from_records(rows, columns=["a", "y", "u", "r", "mass"])


def selection_probability(cell: SelectionCell, points: pd.DataFrame) -> np.ndarray:
    """``P(S = 1 | a, y, u)`` at each support point, shape (n_points,)."""
    a = points["a"].to_numpy()
    s_ay = np.asarray(SELECTION_AY, dtype=np.float64)[a, points["y"].to_numpy()]
    odds = s_ay / (1.0 - s_ay) * np.asarray(cell.odds_ratio)[a] ** (points["u"].to_numpy() - 0.5)
    return odds / (1.0 + odds)


def _slice_name(level: str) -> str:
    return f"{_COLUMN}={level}"


def truth() -> dict[tuple[str, str, str], float]:
    """The target's truths ``(slice, metric, quantity) -> value``: every slice's metric (``overall`` too) and
    every group's difference from overall."""
    points = support()
    y, r, mass = points["y"].to_numpy(), points["r"].to_numpy(), points["mass"].to_numpy()

    def metrics(weight):
        return compute_metrics(y, r, sample_weight=weight, threshold=THRESHOLD, metrics=list(METRICS))

    overall = metrics(mass)
    out = {(_OVERALL, m, "metric"): overall[m] for m in METRICS}
    for k, level in enumerate(LEVELS):
        group = metrics(mass * (points["a"].to_numpy() == k))
        for m in METRICS:
            out[(_slice_name(level), m, "metric")] = group[m]
            out[(_slice_name(level), m, "difference")] = group[m] - overall[m]
    return out


def _cells_of(margins: str, points: pd.DataFrame) -> np.ndarray:
    a, y = points["a"].to_numpy(), points["y"].to_numpy()
    return {"AY": 2 * a + y, "A": a, "none": np.zeros_like(a)}[margins]


def strength(cell: SelectionCell) -> dict[str, float]:
    """``gamma_msm`` and ``gamma_box`` of the cell's selection given its margins
    (:func:`disaggregated_eval.selection.gamma_star` over the support points)."""
    points = support()
    s, mass = selection_probability(cell, points), points["mass"].to_numpy()
    codes = _cells_of(cell.margins, points)
    pi0 = np.bincount(codes, weights=mass * s) / np.bincount(codes, weights=mass)
    lowest, highest = (np.array([f(s[codes == c]) for c in range(pi0.size)]) for f in (np.min, np.max))
    pi0 = np.where(lowest == highest, lowest, pi0)  # s constant in a cell: pi_0 is that value, without rounding
    return selection.gamma_star(pi0[codes], s)


def selection_data(rng: np.random.Generator, cell: SelectionCell) -> pd.DataFrame:
    """``cell.n`` independent draws from the selected population: columns ``group``, ``y``, ``r``."""
    points = support()
    p = points["mass"].to_numpy() * selection_probability(cell, points)
    draw = rng.choice(len(points), size=cell.n, p=p / p.sum())
    return pd.DataFrame(
        {
            _COLUMN: np.asarray(LEVELS, dtype=object)[points["a"].to_numpy()[draw]],
            "y": points["y"].to_numpy()[draw],
            "r": points["r"].to_numpy()[draw],
        }
    )


def margins_frame(margins: str) -> pd.DataFrame | None:
    """The margins file's content for ``margins`` (the target's ``P(A)``, with its label rates for ``AY``)."""
    if margins == "none":
        return None
    frame = pd.DataFrame({_COLUMN: list(LEVELS), "share": list(SHARES)})
    if margins == "AY":
        frame["label_rate"] = list(LABEL_RATES)
    return frame


# ----------------------------------------------------------------------------------------------
# One replicate
# ----------------------------------------------------------------------------------------------
def run_selection(task, audit) -> dict[str, pd.DataFrame]:
    """One replicate of a cell: the audit's table ``selection`` with the truths.

    ``audit(data, **options)`` runs the public audit with the study's common options (``_validity._audit``).
    """
    cell = CELLS[str(task.param)]
    data = selection_data(task.rng(), cell)
    margins = margins_frame(cell.margins)
    with tempfile.TemporaryDirectory(prefix="validity_selection_") as folder:
        path = None
        if margins is not None:
            path = str(Path(folder) / "margins.csv")
            margins.to_csv(path, index=False)
        result = audit(data, scores=["r"], groups=[_COLUMN], metrics=list(METRICS), n_permutations=0,
                       population_margins=path, selection_sensitivity=list(GAMMAS))  # fmt: skip
    table = result.selection
    truths = truth()
    keys = zip(table["slice"], table["metric"], table["quantity"], strict=True)
    out = table[["slice", "metric", "quantity", "gamma", "estimate", "ci_low", "ci_high", "bound_low", "bound_high",
                 "bound_ci_low", "bound_ci_high", "band_level", "breakdown_gamma", "n_denominator"]].copy()  # fmt: skip
    out["truth"] = [truths[k] for k in keys]
    tag = dict(cell=cell.name, replicate=task.replicate)
    return {"selection": out.assign(**tag).reset_index(drop=True),
            "sections": _sections(result, truths).assign(**tag)}  # fmt: skip


#: The fairness summary's statistics checked against the target (issue 33, item 1): ranges over the groups.
FAIRNESS_STATISTICS: dict[str, tuple[str, ...]] = {
    "demographic_parity_difference": ("predicted_positive_rate",),
    "equalized_odds_difference": ("sensitivity", "false_positive_rate"),
}


def _sections(result, truths: dict) -> pd.DataFrame:
    """Every other section's rows with their truths (under margins every section estimates the target's
    quantities): the slices table (each slice's metric), the comparisons (each group's difference from overall)
    and the fairness summary (demographic parity and equalized odds differences over the groups), with the
    interval of each (NaN where the audit gives none)."""
    frames = []
    slices = result.slices
    frames.append(pd.DataFrame({
        "section": "slices", "slice": slices["slice"], "metric": slices["metric"], "estimate": slices["raw_estimate"],
        "ci_low": slices["ci_low"], "ci_high": slices["ci_high"],
        "truth": [truths[(s, m, "metric")] for s, m in zip(slices["slice"], slices["metric"], strict=True)],
    }))  # fmt: skip
    c = result.comparisons
    c = c[c["kind"] == "vs_overall"]
    frames.append(pd.DataFrame({
        "section": "comparisons", "slice": c["slice"], "metric": c["metric"], "estimate": c["difference"],
        "ci_low": c["ci_low"], "ci_high": c["ci_high"],
        "truth": [truths[(s, m, "difference")] for s, m in zip(c["slice"], c["metric"], strict=True)],
    }))  # fmt: skip
    fair = result.fairness
    for statistic, metrics in FAIRNESS_STATISTICS.items():
        row = fair[(fair["statistic"] == statistic) & (fair["attribute"] == _COLUMN)]
        if len(row) != 1:
            continue
        truth = max(np.ptp([truths[(_slice_name(x), m, "metric")] for x in LEVELS]) for m in metrics)
        frames.append(pd.DataFrame({
            "section": "fairness", "slice": _COLUMN, "metric": statistic, "estimate": row["estimate"].to_numpy(),
            "ci_low": row["ci_low"].to_numpy(), "ci_high": row["ci_high"].to_numpy(), "truth": [truth],
        }))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------------------------
# Summaries
# ----------------------------------------------------------------------------------------------
TITLES = {
    "g1": "(g1) Corrected estimates where the margins identify the target: coverage of the 95% intervals (%)",
    "g2": "(g2) Intervals of the sensitivity bounds at the first Gamma of the grid >= Gamma*: coverage (%)",
    "g3": "(g3) Gamma = 1 rows, and the breakdown claims ('survives selection up to Gamma = Gamma_b > Gamma*', one "
    "family per audit)",
    "g4": "(g4) Mean coverage of the bounds' interval against Gamma (%, over slices, metrics and quantities)",
    "g5": "(g5) Every section under margins where they identify the target: coverage of the 95% intervals of the "
    "slices table, the comparisons (difference from overall) and the fairness summary (%)",
}
#: Coverage goals: the corrected estimates where identified, the bounds from Gamma* on.
ESTIMATE_GOAL, BOUNDS_GOAL = 0.93, 0.95
#: Most a claim may err: per audit (any wrong claim) and per difference whose truth is 0.
CLAIM_GOAL = 0.05


def _columns() -> list[tuple[str, str, str]]:
    """The (slice, quantity, label) columns of tables g1 and g2."""
    metric = [(_OVERALL, "metric", _OVERALL)] + [(_slice_name(x), "metric", x) for x in LEVELS]
    return metric + [(_slice_name(x), "difference", f"{x} - overall") for x in LEVELS]


def _first_gamma(gamma_box: float) -> float:
    grid = [g for g in (1.0, *GAMMAS) if g >= gamma_box]
    return grid[0] if grid else math.nan


def _covered(frame: pd.DataFrame, low: str, high: str) -> pd.Series:
    t = frame["truth"]
    return (frame[low] - TRUTH_TOLERANCE <= t) & (t <= frame[high] + TRUTH_TOLERANCE)


def summarise(
    selection_rows: pd.DataFrame, r_max: int, section_rows: pd.DataFrame | None = None
) -> tuple[dict[str, pd.DataFrame], list[tuple[str, pd.DataFrame]]]:
    """Part (g)'s CSV tables and printed tables, from the rows of :func:`run_selection` of replicates ``< r_max``.

    Returns
    -------
    (dict, list)
        ``{"g_coverage": ..., "g_claims": ..., "g_identified": ..., "g_bounds": ...}`` (written as CSV; the
        last two are tables g1 and g2, whose verdicts the study's tally counts) and ``[(key, printed table)]``.
    """
    rows = selection_rows[selection_rows["replicate"] < r_max].copy()
    rows["estimate_covered"] = _covered(rows, "ci_low", "ci_high")
    rows["bounds_covered"] = _covered(rows, "bound_ci_low", "bound_ci_high")
    strengths = {name: strength(cell) for name, cell in CELLS.items()}
    coverage = _coverage(rows, strengths)
    claims = _claims(rows, strengths)
    identified, bounds = _table_g1(coverage), _table_g2(coverage)
    shown = [("g1", identified), ("g2", bounds), ("g3", _table_g3(claims)), ("g4", _table_g4(rows, strengths))]
    out = {"g_coverage": coverage, "g_claims": claims, "g_identified": identified, "g_bounds": bounds}
    if section_rows is not None and len(section_rows):
        out["g_sections"] = _table_g5(section_rows[section_rows["replicate"] < r_max])
        shown.append(("g5", out["g_sections"]))
    return out, shown


def _table_g5(rows: pd.DataFrame) -> pd.DataFrame:
    """Per identified cell, section and metric: the coverage of the section's intervals of the target's truths,
    over the slices (or differences) that have an interval; the label rate under margins ``AY`` is the file's."""
    rows = rows[rows["ci_low"].notna() & rows["ci_high"].notna()].copy()
    rows["covered"] = _covered(rows, "ci_low", "ci_high")
    records = []
    for name, cell in CELLS.items():
        if cell.margins != "AY" or any(x != 1.0 for x in cell.odds_ratio):
            continue
        for section in ("slices", "comparisons", "fairness"):
            x = rows[(rows["cell"] == name) & (rows["section"] == section)]
            for metric in pd.unique(x["metric"]):
                m = x[x["metric"] == metric]
                given = _given_by_margins(cell, metric)
                per = [v.rate(g["covered"]) for _, g in m.groupby("slice")]
                worst = min(per, key=lambda t: t[0])
                p, se, _ = v.rate(m["covered"])
                records.append({
                    "cell": name, "section": section, "metric": metric, "R": int(m["replicate"].nunique()),
                    "mean": v.pct(p, se), "worst slice": v.pct(worst[0], worst[1]),
                    "mean width": f"{float((m['ci_high'] - m['ci_low']).mean()):.3f}",
                    "verdict": "- (given by the margins)" if given else v.rate_verdict(worst[0], worst[2],
                                                                                     low=ESTIMATE_GOAL, k=len(per)),
                    "goal": ">=93%",
                })  # fmt: skip
    return pd.DataFrame(records)


def _coverage(rows: pd.DataFrame, strengths: dict) -> pd.DataFrame:
    """Per cell, slice, metric, quantity and Gamma: coverage of the estimate's and of the bounds' interval."""
    records = []
    for (name, slice_, metric, quantity, gamma), g in rows.groupby(["cell", "slice", "metric", "quantity", "gamma"]):
        est, est_se, r = v.rate(g["estimate_covered"])
        bounds, bounds_se, _ = v.rate(g["bounds_covered"])
        records.append({
            "cell": name, "slice": slice_, "metric": metric, "quantity": quantity, "gamma": gamma,
            "gamma_box": strengths[name]["gamma_box"], "gamma_msm": strengths[name]["gamma_msm"],
            "first_gamma": gamma == _first_gamma(strengths[name]["gamma_box"]), "replicates": r,
            "truth": float(g["truth"].iloc[0]), "mean_estimate": float(g["estimate"].mean()),
            "estimate_coverage": est, "estimate_coverage_se": est_se,
            "mean_width": float((g["ci_high"] - g["ci_low"]).mean()),
            "bounds_coverage": bounds, "bounds_coverage_se": bounds_se,
            "mean_bounds_width": float((g["bound_ci_high"] - g["bound_ci_low"]).mean()),
        })  # fmt: skip
    out = pd.DataFrame(records)
    out["_c"] = out["cell"].map(list(CELLS).index)
    out["_m"] = out["metric"].map(METRICS.index)
    return out.sort_values(["_c", "_m", "quantity", "slice", "gamma"]).drop(columns=["_c", "_m"]).reset_index(drop=True)


def _given_by_margins(cell: SelectionCell, metric: str) -> bool:
    """The label rate under margins ``AY``: the file gives it (the same on every resample: the audit gives it no
    interval, and no coverage is counted)."""
    return cell.margins == "AY" and metric == "label_rate"


def _row(coverage: pd.DataFrame, column: str, goal: float, given: bool) -> dict:
    values, verdicts = {}, []
    for slice_, quantity, label in _columns():
        x = coverage[(coverage["slice"] == slice_) & (coverage["quantity"] == quantity)]
        if not len(x):
            values[label] = "-"
            continue
        p, se, r = float(x[column].iloc[0]), float(x[f"{column}_se"].iloc[0]), int(x["replicates"].iloc[0])
        values[label] = v.pct(p, se)
        verdicts.append(v.rate_verdict(p, r, low=goal, k=len(_columns())))
    verdict = "- (given by the margins: no interval)" if given else v.worst_verdict(verdicts)
    return {**values, "verdict": verdict}


def _table_g1(coverage: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name, cell in CELLS.items():
        if cell.margins != "AY" or any(x != 1.0 for x in cell.odds_ratio):
            continue
        for metric in METRICS:
            x = coverage[(coverage["cell"] == name) & (coverage["metric"] == metric) & (coverage["gamma"] == 1.0)]
            given = _given_by_margins(cell, metric)
            rows.append({"cell": name, "metric": metric, "R": int(x["replicates"].max()),
                         **_row(x, "estimate_coverage", ESTIMATE_GOAL, given), "goal": ">=93%"})  # fmt: skip
    return _order(pd.DataFrame(rows))


def _table_g2(coverage: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for name in CELLS:
        x = coverage[(coverage["cell"] == name) & coverage["first_gamma"]]
        if not len(x) or float(x["gamma"].iloc[0]) == 1.0:  # identified: the Gamma = 1 bounds are the estimate (g1)
            continue
        for metric in METRICS:
            m = x[x["metric"] == metric]
            rows.append({"cell": name, "Gamma* (box / MSM)": f"{m['gamma_box'].iloc[0]:.2f} / {m['gamma_msm'].iloc[0]:.2f}",
                         "Gamma": f"{m['gamma'].iloc[0]:g}", "metric": metric, "R": int(m["replicates"].max()),
                         **_row(m, "bounds_coverage", BOUNDS_GOAL, False), "goal": ">=95%"})  # fmt: skip
    return _order(pd.DataFrame(rows))


def _order(frame: pd.DataFrame) -> pd.DataFrame:
    """The verdict and goal columns last."""
    if not len(frame):
        return frame
    last = ["goal", "verdict"]
    return frame[[c for c in frame.columns if c not in last] + last]


def _same(a: pd.Series, b: pd.Series) -> pd.Series:
    """Equal, or both missing (a quantity fixed by the margins has neither interval)."""
    return (a == b) | (a.isna() & b.isna())


def _claims(rows: pd.DataFrame, strengths: dict) -> pd.DataFrame:
    """Per cell: the Gamma = 1 rows against the estimate, and the breakdown claims' error rates."""
    records = []
    for name in [c for c in CELLS if c in set(rows["cell"])]:
        g = rows[rows["cell"] == name]
        gamma_box = strengths[name]["gamma_box"]
        one = g[g["gamma"] == 1.0]
        equal = (
            (one["bound_low"] == one["estimate"]) & (one["bound_high"] == one["estimate"])
            & _same(one["bound_ci_low"], one["ci_low"]) & _same(one["bound_ci_high"], one["ci_high"])
        )  # fmt: skip
        diff = one[one["quantity"] == "difference"]
        # The terminal lists a claim whose slice has at least the audit's default min_denominator rows.
        listed = diff["breakdown_gamma"].notna() & (diff["n_denominator"] >= vocabulary.MIN_DENOMINATOR)
        claim = listed & (diff["breakdown_gamma"] > gamma_box)
        null = diff["truth"].abs() <= TRUTH_TOLERANCE
        wrong = claim & (null | (np.sign(diff["truth"]) != np.sign(diff["estimate"])))
        per_audit = wrong.groupby(diff["replicate"]).any()
        audit_rate, audit_se, r = v.rate(per_audit)
        nulls = diff[null].assign(claimed=claim[null])
        per_null = nulls.groupby(["slice", "metric"])["claimed"].mean()
        worst = per_null.idxmax() if len(per_null) else None
        worst_rate = float(per_null.max()) if len(per_null) else math.nan
        worst_se = math.sqrt(worst_rate * (1 - worst_rate) / r) if len(per_null) else math.nan
        records.append({
            "cell": name, "gamma_box": gamma_box, "replicates": r,
            "gamma1_rows": len(one), "gamma1_equal": int(equal.sum()),
            "family_level": float(diff["band_level"].mean()) if "band_level" in diff else math.nan,
            "listed_per_audit": float(listed.sum() / r), "claims_per_audit": float(claim.sum() / r),
            "claims": int(claim.sum()), "wrong_claims": int(wrong.sum()),
            "wrong_claim_share": float(wrong.sum() / claim.sum()) if claim.sum() else math.nan,
            "null_differences": len(per_null),
            "audits_with_wrong_claim": audit_rate, "audits_with_wrong_claim_se": audit_se,
            "worst_null_claim_rate": worst_rate, "worst_null_claim_rate_se": worst_se,
            "worst_null": f"{worst[1]}, {worst[0]}" if worst else "-",
            "verdict_gamma1": "PASS" if bool(equal.all()) else "FAIL",
            "verdict_audit": v.rate_verdict(audit_rate, r, high=CLAIM_GOAL),
            "verdict_null": v.rate_verdict(worst_rate, r, high=CLAIM_GOAL, k=max(len(per_null), 1)),
        })  # fmt: skip
    out = pd.DataFrame(records)
    out["verdict"] = [v.worst_verdict(x) for x in zip(out["verdict_gamma1"], out["verdict_audit"], out["verdict_null"])]
    return out


def _table_g3(claims: pd.DataFrame) -> pd.DataFrame:
    pct = v.pct
    return pd.DataFrame({
        "cell": claims["cell"], "Gamma* (box)": [f"{x:.2f}" for x in claims["gamma_box"]], "R": claims["replicates"],
        "Gamma = 1 rows equal to the estimate": [f"{e:,} of {n:,}" for e, n in zip(claims["gamma1_equal"], claims["gamma1_rows"])],
        "level of each interval (mean)": [f"{100 * x:.2f}%" if math.isfinite(x) else "-" for x in claims["family_level"]],
        "listed per audit": [f"{x:.1f}" for x in claims["listed_per_audit"]],
        "claims (Gamma_b > Gamma*) per audit": [f"{x:.1f}" for x in claims["claims_per_audit"]],
        "wrong claims": [f"{w} of {c}" for w, c in zip(claims["wrong_claims"], claims["claims"])],
        "audits with a wrong claim": [pct(p, s) for p, s in zip(claims["audits_with_wrong_claim"],
                                                                claims["audits_with_wrong_claim_se"])],
        "worst null difference: claimed": [f"{pct(p, s)} ({w})" for p, s, w in zip(
            claims["worst_null_claim_rate"], claims["worst_null_claim_rate_se"], claims["worst_null"])],
        "goal": "equal: all; wrong: <=5%", "verdict": claims["verdict"],
    })  # fmt: skip


def _table_g4(rows: pd.DataFrame, strengths: dict) -> pd.DataFrame:
    out = []
    for name in [c for c in CELLS if c in set(rows["cell"])]:
        g, cell = rows[rows["cell"] == name], CELLS[name]
        counted = g[~np.array([_given_by_margins(cell, m) for m in g["metric"]])]
        record = {"cell": name, "Gamma* (box)": f"{strengths[name]['gamma_box']:.2f}", "R": g["replicate"].nunique()}
        for gamma, x in counted.groupby("gamma"):  # at Gamma = 1 the bounds' interval is the estimate's
            record["1 (estimate)" if gamma == 1.0 else f"{gamma:g}"] = v.pct(x["bounds_covered"].mean())
        out.append(record)
    return pd.DataFrame(out)
