"""Part (f) of the audit's validity study: the fairness summary, the verdicts and the calibration error.

Populations with known truth (no sampling in the truth):

* **Fairness cells** (:data:`FAIR_CELLS`): ``K`` slices of ``n`` rows each (fixed sizes, as in a stratified
  sample) or the six cells of two attributes ``a`` (2 levels) x ``b`` (3 levels); in every slice (cell) the
  label is Bernoulli(``label_rate``) and the hard prediction, given the label, Bernoulli(``TPR``) or
  Bernoulli(``FPR``), each set by design. Truths: every slice's selection rate ``pi TPR + (1 - pi) FPR``,
  TPR, FPR and FNR (a union of cells: rates weighted by the cells' expected denominators), and from them
  the demographic-parity and equalized-odds differences and ratios, the largest gap of the false positive
  rate (the audit's headline with these metrics), each slice's disparity ratio to its family's reference
  (the first slice: every slice has the same rows), and each slice's difference from overall.
* **Calibration cells** (:data:`CALIBRATION_CELLS`): one attribute whose levels have 100, 500, 2,000 and
  5,000 rows; the true risk ``q`` is ``0.95 expit(Z)``, ``Z ~ N(-1, 1.2^2)`` (continuous) or one of the ten
  deciles' midpoints times 0.95 (deciles); the score is ``r = q`` (calibrated) or ``r = q + 0.05``
  (risk overestimated by 0.05 everywhere, never above 1). Truths: the calibration error over any bins is
  0 (calibrated) or exactly 0.05 (every bin's mean gap is -0.05); its distance from overall's calibration is
  0 in both (every slice is miscalibrated as everyone is); the observed/expected ratio is 1 or
  ``E q / E r`` (closed form from the decile masses, quadrature for the continuous score, the same in every
  slice), its difference from overall 0.

Verdicts are wrong when they claim what the truth denies (tolerance 0.05 and [0.8, 1.25], the audit's
default): ``differs`` (in any form) at a truth of equality (a gap of 0, a ratio of 1; to 1e-12), ``within
tolerance`` at a truth outside it, ``beyond tolerance`` at a truth inside it. A comparison's ``differs`` is
wrong at a true difference of 0, its ``within tolerance`` at ``|d| >= 0.05``.

Each replicate runs the public ``audit()`` once (hard predictions: metrics ``false_positive_rate``,
``predicted_positive_rate``, ``sensitivity``, ``false_negative_rate``, exact permutation tests; calibration:
``false_positive_rate`` and ``observed_expected_ratio``, no tests); the width cell also computes the
previous audit's interval of the demographic-parity difference (the percentile interval of ``max - min``
over a population bootstrap of 1,000 resamples, the method of commit 1515df6) on the same data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import special

from disaggregated_eval import seeds

#: The audit's default tolerance (the study checks its verdicts at it).
TOLERANCE = 0.05
RATIO_TOLERANCE = (0.8, 1.25)
FAIR_METRICS = ("false_positive_rate", "predicted_positive_rate", "sensitivity", "false_negative_rate")
#: Family statistics and the metric of each (largest gap: the headline, the false positive rate).
FAMILY_STATISTICS = (
    "demographic_parity_difference",
    "demographic_parity_ratio",
    "equalized_odds_difference",
    "equalized_odds_ratio",
    "largest_gap",
)
WRONG = ("differs", "differs, within tolerance", "beyond tolerance")


@dataclass(frozen=True)
class FairCell:
    """One fairness cell: per slice (or intersection cell) its label rate, TPR and FPR; ``n`` rows each."""

    name: str
    n: int
    label_rate: tuple[float, ...]
    tpr: tuple[float, ...]
    fpr: tuple[float, ...]
    intersection: bool = False  # six cells of a (2) x b (3), in the order (a, b) = (0,0), (0,1), ... (1,2)
    truth: str = ""  # "equal", "small gap", "large gap", "equal error rates"

    @property
    def k(self) -> int:
        return len(self.label_rate)


def _cell(name, n, k, *, truth, pi=0.3, tpr=0.7, fpr=0.2, intersection=False) -> FairCell:
    def spread(x):
        return tuple(float(v) for v in np.broadcast_to(np.asarray(x, float), (k,)))

    return FairCell(name, n, spread(pi), spread(tpr), spread(fpr), intersection, truth)


FAIR_CELLS: dict[str, FairCell] = {
    c.name: c
    for c in (
        _cell("equal-K2-n200", 200, 2, truth="equal"),
        _cell("equal-K2-n2000", 2000, 2, truth="equal"),
        _cell("equal-K4-n100", 100, 4, truth="equal"),
        _cell("equal-K4-n500", 500, 4, truth="equal"),
        _cell("equal-K4-n2000", 2000, 4, truth="equal"),
        _cell("equal-K8-n200", 200, 8, truth="equal"),
        _cell("equal-K8-n5000", 5000, 8, truth="equal"),
        _cell("equal-2x3-n300", 300, 6, truth="equal", intersection=True),
        _cell("small-K4-n500", 500, 4, truth="small gap", fpr=(0.2, 0.2, 0.2, 0.25)),
        _cell("small-K4-n5000", 5000, 4, truth="small gap", fpr=(0.2, 0.2, 0.2, 0.22)),
        _cell("small-K8-n2000", 2000, 8, truth="small gap", fpr=(0.2,) * 7 + (0.25,)),
        _cell("small-2x3-n1000", 1000, 6, truth="small gap", fpr=(0.2,) * 5 + (0.25,), intersection=True),
        _cell("large-K2-n2000", 2000, 2, truth="large gap", fpr=(0.2, 0.35)),
        _cell("large-K4-n500", 500, 4, truth="large gap", fpr=(0.2, 0.2, 0.2, 0.35)),
        _cell("large-K8-n200", 200, 8, truth="large gap", fpr=(0.2,) * 7 + (0.35,)),
        _cell("rates-K4-n2000", 2000, 4, truth="equal error rates", pi=(0.15, 0.25, 0.35, 0.45)),
        _cell("rates-K8-n500", 500, 8, truth="equal error rates", pi=tuple(np.linspace(0.15, 0.45, 8))),
        # two slices at +-0.05 from overall (the certification's boundary), four equal: both kinds of claims
        _cell("boundary-K8-n5000", 5000, 8, truth="tolerance boundary", fpr=(0.2,) * 4 + (0.25, 0.25, 0.15, 0.15)),
    )
}
#: The cell of the power goal (certify that every slice is within 0.05 of overall) and of the width goal.
POWER_CELL = "equal-K4-n2000"
WIDTH_CELL = "large-K2-n2000"


def _levels(cell: FairCell) -> list[dict[str, str]]:
    if cell.intersection:
        return [{"a": str(i // 3), "b": str(i % 3)} for i in range(6)]
    return [{"g": f"s{i}"} for i in range(cell.k)]


def fair_data(rng: np.random.Generator, cell: FairCell) -> pd.DataFrame:
    """``n`` rows per slice (cell): the attribute(s), label ``y`` and hard prediction ``p``."""
    frames = []
    for i, levels in enumerate(_levels(cell)):
        y = rng.random(cell.n) < cell.label_rate[i]
        p = np.where(y, rng.random(cell.n) < cell.tpr[i], rng.random(cell.n) < cell.fpr[i])
        frames.append(pd.DataFrame({**levels, "y": y.astype(int), "p": p.astype(int)}))
    return pd.concat(frames, ignore_index=True)


def _families(cell: FairCell) -> dict[str, list[tuple[str, list[int]]]]:
    """Family -> [(slice name, the cells it holds)], in the audit's slice order."""
    if not cell.intersection:
        return {"g": [(f"g=s{i}", [i]) for i in range(cell.k)]}
    levels = _levels(cell)
    return {
        "a": [(f"a={v}", [i for i, x in enumerate(levels) if x["a"] == v]) for v in "01"],
        "b": [(f"b={v}", [i for i, x in enumerate(levels) if x["b"] == v]) for v in "012"],
        "a & b": [(f"a={x['a']} & b={x['b']}", [i]) for i, x in enumerate(levels)],
    }


def _rates(cell: FairCell, members: list[int]) -> dict[str, float]:
    pi, tpr, fpr = (np.asarray(x)[members] for x in (cell.label_rate, cell.tpr, cell.fpr))
    positives, negatives = pi, 1.0 - pi  # equal rows per cell: weights by expected denominators
    sensitivity = float(np.sum(positives * tpr) / np.sum(positives))
    false_positive = float(np.sum(negatives * fpr) / np.sum(negatives))
    selection = float(np.mean(pi * tpr + (1 - pi) * fpr))
    return {"predicted_positive_rate": selection, "sensitivity": sensitivity,
            "false_positive_rate": false_positive, "false_negative_rate": 1.0 - sensitivity}  # fmt: skip


def fair_truth(cell: FairCell) -> tuple[dict[tuple, float], dict[tuple, float]]:
    """Truths of the fairness table ``(attribute, statistic, metric, slice) -> value`` and of the
    ``vs_overall`` differences ``(metric, slice) -> value``."""
    table: dict[tuple, float] = {}
    differences: dict[tuple, float] = {}
    overall = _rates(cell, list(range(cell.k)))
    for family, slices in _families(cell).items():
        rates = [_rates(cell, members) for _, members in slices]
        names = [name for name, _ in slices]

        def values(metric, rates=rates):
            return np.array([r[metric] for r in rates])

        sel, tpr, fpr = values("predicted_positive_rate"), values("sensitivity"), values("false_positive_rate")
        table[(family, "demographic_parity_difference")] = float(np.ptp(sel))
        table[(family, "demographic_parity_ratio")] = float(sel.min() / sel.max())
        table[(family, "equalized_odds_difference")] = float(max(np.ptp(tpr), np.ptp(fpr)))
        table[(family, "equalized_odds_ratio")] = float(min(tpr.min() / tpr.max(), fpr.min() / fpr.max()))
        table[(family, "largest_gap")] = float(np.ptp(fpr))
        for metric in ("predicted_positive_rate", "false_positive_rate", "false_negative_rate"):
            x = values(metric)
            for name, value in zip(names[1:], x[1:] / x[0], strict=True):
                table[(family, "disparity_ratio", metric, name)] = float(value)
        for name, r in zip(names, rates, strict=True):
            for metric in FAIR_METRICS:
                differences[(metric, name)] = r[metric] - overall[metric]
    return table, differences


def _wrong(statistic: str, verdict: str, truth: float) -> bool:
    """Whether the verdict claims what the truth denies (module docstring)."""
    if verdict in ("", "inconclusive"):
        return False
    if statistic.endswith("difference") or statistic == "largest_gap":
        equal, within, beyond = abs(truth) <= 1e-12, truth <= TOLERANCE + 1e-12, truth > TOLERANCE + 1e-12
    elif statistic == "disparity_ratio":
        lo, hi = RATIO_TOLERANCE
        equal, within = abs(truth - 1.0) <= 1e-12, lo - 1e-12 <= truth <= hi + 1e-12
        beyond = not within
    else:  # a min/max ratio
        floor = max(RATIO_TOLERANCE[0], 1.0 / RATIO_TOLERANCE[1])
        equal, within = abs(truth - 1.0) <= 1e-12, truth >= floor - 1e-12
        beyond = not within
    if verdict in WRONG and verdict != "beyond tolerance" and equal:
        return True
    if verdict == "beyond tolerance" and (equal or not beyond):
        return True
    return verdict in ("within tolerance", "differs, within tolerance") and not within


def _old_dp_interval(data: pd.DataFrame, cell: FairCell, rng: np.random.Generator, n_resamples: int = 1000):
    """The previous audit's DP-difference interval: percentile of max - min over a population bootstrap."""
    group = data["g"].to_numpy()
    codes = pd.factorize(group, sort=True)[0]
    counts = np.stack([np.bincount(codes[data["p"].to_numpy() == v], minlength=cell.k) for v in (0, 1)], axis=1)
    n = counts.sum()
    draws = rng.multinomial(n, (counts / n).ravel(), size=n_resamples).reshape(n_resamples, cell.k, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        sel = draws[..., 1] / draws.sum(-1)
    gap = sel.max(1) - sel.min(1)
    return tuple(np.percentile(gap, [2.5, 97.5]))


def run_fair(task, audit) -> dict[str, pd.DataFrame]:
    """One replicate of a fairness cell: the fairness table's rows and the vs_overall verdicts, with truths."""
    cell = FAIR_CELLS[str(task.param)]
    data = fair_data(task.rng(), cell)
    groups = ["a", "b"] if cell.intersection else ["g"]
    result = audit(data, scores=["p"], groups=groups, metrics=list(FAIR_METRICS))
    truth, differences = fair_truth(cell)
    f = result.fairness.copy()
    key = [
        (a, s) if s != "disparity_ratio" else (a, s, m, sl)
        for a, s, m, sl in zip(f["attribute"], f["statistic"], f["metric"], f["slice"], strict=True)
    ]
    f["truth"] = [truth[k] for k in key]
    f["covered"] = (f["ci_low"] <= f["truth"] + 1e-12) & (f["truth"] - 1e-12 <= f["ci_high"])
    f["band_covered"] = (f["band_low"] <= f["truth"] + 1e-12) & (f["truth"] - 1e-12 <= f["band_high"])
    f["wrong"] = [_wrong(s, vv, t) for s, vv, t in zip(f["statistic"], f["verdict"], f["truth"], strict=True)]
    fairness = f[["attribute", "statistic", "metric", "slice", "estimate", "bias_corrected", "ci_low", "ci_high",
                  "band_low", "band_high", "verdict", "reported", "truth", "covered", "band_covered", "wrong"]]  # fmt: skip
    c = result.comparisons
    c = c[c["kind"] == "vs_overall"].copy()
    c["truth"] = [differences[(m, s)] for m, s in zip(c["metric"], c["slice"], strict=True)]
    claims_differ = c["verdict"].isin(["differs", "differs, within tolerance"])
    claims_within = c["verdict"].isin(["within tolerance", "differs, within tolerance"])
    c["wrong"] = (claims_differ & (c["truth"].abs() <= 1e-12)) | (
        claims_within & (c["truth"].abs() >= TOLERANCE - 1e-12)
    )
    c["within"] = claims_within
    comparisons = c[["metric", "slice", "difference", "truth", "verdict", "within", "wrong", "reported"]]
    out = {
        "fair": fairness.assign(cell=cell.name, replicate=task.replicate).reset_index(drop=True),
        "fair_comparisons": comparisons.assign(cell=cell.name, replicate=task.replicate).reset_index(drop=True),
    }
    if cell.name == WIDTH_CELL:
        low, high = _old_dp_interval(data, cell, seeds.generator(task.root, "validity", task.cell, task.replicate,
                                                                 "old interval"))  # fmt: skip
        dp = f[f["statistic"] == "demographic_parity_difference"].iloc[0]
        out["fair_width"] = pd.DataFrame({"cell": [cell.name], "replicate": [task.replicate],
                                          "width": [dp["ci_high"] - dp["ci_low"]], "old_width": [high - low],
                                          "old_covered": [low <= truth[("g", "demographic_parity_difference")] <= high]})  # fmt: skip
    return out


# ----------------------------------------------------------------------------------------------
# The audit's family: every verdict of a fair model's audit of three metrics (issue 33, item 6)
# ----------------------------------------------------------------------------------------------
#: Cells of the audit-wide family-wise error (fair models: every slice's rates equal) and the three metrics.
AUDIT_FAMILY_CELLS = ("equal-K4-n500", "equal-2x3-n300")
AUDIT_FAMILY_METRICS = ("false_positive_rate", "predicted_positive_rate", "sensitivity")
#: The adjustment's families compared on the same files and seeds (option ``adjust_scope``).
AUDIT_FAMILY_SCOPES = ("metric", "audit")


def run_audit_family(task, audit) -> dict[str, pd.DataFrame]:
    """One replicate of an audit-family cell: the same file (a fair model, every difference 0) audited with
    :data:`AUDIT_FAMILY_METRICS` and each ``adjust_scope``; per audit, whether any verdict is wrong (any
    ``differs`` of a tested comparison, every kind, every metric; a ``within tolerance`` is right at a
    difference of 0) and whether any slice-vs-overall verdict is, with the number of tests."""
    cell = FAIR_CELLS[str(task.param)]
    if cell.truth != "equal":
        raise ValueError(f"an audit-family cell needs a fair model (truth 'equal'); got {cell.name!r} ({cell.truth})")
    data = fair_data(task.rng(), cell)
    groups = ["a", "b"] if cell.intersection else ["g"]
    rows = []
    for scope in AUDIT_FAMILY_SCOPES:
        result = audit(data, scores=["p"], groups=groups, metrics=list(AUDIT_FAMILY_METRICS), adjust_scope=scope)
        c = result.comparisons
        c = c[c["kind"].isin(["vs_overall", "vs_rest", "pairwise"]) & c["reported"]]
        wrong = c["verdict"].isin(["differs", "differs, within tolerance"])
        overall = c["kind"] == "vs_overall"
        rows.append({"cell": cell.name, "replicate": task.replicate, "adjust_scope": scope,
                     "tests": int(c["p_value"].notna().sum()), "largest_family": int(c["family_size"].max()),
                     "wrong_any": bool(wrong.any()), "wrong_vs_overall": bool((wrong & overall).any()),
                     "wrong_unadjusted": bool((c["p_value"] < 1.0 - float(result.options.confidence)).any())})  # fmt: skip
    return {"audit_family": pd.DataFrame(rows)}


# ----------------------------------------------------------------------------------------------
# Calibration cells
# ----------------------------------------------------------------------------------------------
CALIBRATION_SIZES = (100, 500, 2000, 5000)
CALIBRATION_CELLS = ("calibrated-continuous", "overestimated-continuous", "calibrated-deciles", "overestimated-deciles")
_SHIFT = 0.05
_DECILES = (np.arange(10) + 0.5) / 10 * 0.95


def _risk(rng: np.random.Generator, n: int, deciles: bool) -> np.ndarray:
    if deciles:
        return _DECILES[rng.integers(0, 10, n)]
    return 0.95 * special.expit(rng.normal(-1.0, 1.2, n))


def calibration_data(rng: np.random.Generator, cell: str) -> pd.DataFrame:
    """One attribute ``size`` with levels of 100 ... 5,000 rows; label ``y``, score ``r``."""
    deciles = cell.endswith("deciles")
    shift = _SHIFT if cell.startswith("overestimated") else 0.0
    frames = []
    for n in CALIBRATION_SIZES:
        q = _risk(rng, n, deciles)
        frames.append(pd.DataFrame({"size": f"n{n}", "y": (rng.random(n) < q).astype(int), "r": q + shift}))
    return pd.concat(frames, ignore_index=True)


def calibration_truth(cell: str) -> dict[str, float]:
    """Truths of the calibration summary (the same for every slice)."""
    shift = _SHIFT if cell.startswith("overestimated") else 0.0
    if cell.endswith("deciles"):
        mean_q = float(_DECILES.mean())
    else:
        nodes, weights = np.polynomial.hermite_e.hermegauss(80)
        mean_q = float(np.sum(weights * 0.95 * special.expit(-1.0 + 1.2 * nodes)) / math.sqrt(2 * math.pi))
    return {"calibration_error": shift, "calibration_error_vs_overall": 0.0,
            "observed_expected_ratio": mean_q / (mean_q + shift), "observed_expected_ratio_vs_overall": 0.0}  # fmt: skip


def run_calibration(task, audit) -> dict[str, pd.DataFrame]:
    """One replicate of a calibration cell: every slice's calibration summary, with truths."""
    cell = str(task.param)
    data = calibration_data(task.rng(), cell)
    result = audit(data, scores=["r"], groups=["size"], metrics=["false_positive_rate", "observed_expected_ratio"],
                   n_permutations=0)  # fmt: skip
    truth = calibration_truth(cell)
    s = result.calibration_summary
    rows = []
    for r in s.itertuples(index=False):
        record = {"cell": cell, "replicate": task.replicate, "slice": r.slice, "statistic": r.statistic,
                  "estimate": r.estimate, "ci_low": r.ci_low, "ci_high": r.ci_high}  # fmt: skip
        if r.statistic in truth:
            t = truth[r.statistic]
            record.update(
                truth=t, covered=r.ci_low <= t + 1e-12 and t - 1e-12 <= r.ci_high, lower_positive=r.ci_low > 0
            )
            if r.slice != "overall":
                tv = truth[f"{r.statistic}_vs_overall"]
                record.update(
                    vs_truth=tv, vs_covered=r.vs_overall_low <= tv + 1e-12 and tv - 1e-12 <= r.vs_overall_high
                )
        else:  # the plug-in ECE: its truth is the calibration error's under a constant shift (every bin's |gap|)
            record.update(truth=truth["calibration_error"])
        rows.append(record)
    return {"calibration": pd.DataFrame(rows)}
