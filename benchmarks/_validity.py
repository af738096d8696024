"""Building blocks of the audit's validity study (``benchmarks/bench_audit_validity.py``).

Known truth: every data set of the study is drawn from a population whose metrics are computed
without sampling (:class:`LogitNormalMixture`); the audit (``disaggregated_eval.audit.audit``, the
public function, run as a practitioner runs it) is applied to the draws, and what it reports is
compared with the truth. This module holds the populations, the draws, one replicate of each kind
(:func:`run_task`, run in worker processes) and the summaries with their Monte-Carlo errors and
verdicts. The docstring of ``bench_audit_validity.py`` describes the design and the goals.

The population (:class:`LogitNormalMixture`): a group ``A`` with shares ``P(A = a)``, a label with
``P(Y = 1 | A = a)``, and a score ``R = expit(Z)`` with ``Z | A = a, Y = y ~ N(mu_ay, sd_ay^2)``.
Its metrics under any weighting ``w(a, y, z)`` are integrals over ``z`` of the component densities;
they are computed by Gauss-Legendre quadrature on cells of width 0.05 (8 nodes each) whose edges
include ``logit(threshold) = 0`` (where ``1[R >= threshold]`` jumps), over the means plus and minus 12
standard deviations: the population is a set of weighted pseudo-rows ``(z_j, a, y)`` with mass
``P(A = a, Y = y) phi((z_j - mu_ay) / sd_ay) / sd_ay * w_j``, and
``disaggregated_eval.metrics.compute_metrics`` (the project's definitions, equal to scikit-learn's)
evaluates every metric on them with sample weights ``mass * w``. Within a cell every integrand is
smooth, so the quadrature error is far below 1e-9 (checked in ``tests/test_audit_validity.py``
against closed forms and a Monte-Carlo sample). The AUC of a population whose weight is constant
within each component is in closed form, ``sum_ij m_i n_j Phi((mu_i - mu_j) / sqrt(sd_i^2 + sd_j^2))
/ (sum m_i sum n_j)`` over positive components ``i`` and negative components ``j``, and is used
instead of the pseudo-rows' (whose pairwise comparison of nearby nodes errs by about 1e-5).
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field

import _validity_fairness  # part (f): a sibling module of benchmarks/
import numpy as np
import pandas as pd
from _verdicts import MC_LEVEL, pct, rate, rate_verdict, verdict, worst_verdict  # noqa: F401  (v.rate, ...)
from scipy.special import expit
from scipy.stats import norm

from disaggregated_eval import seeds
from disaggregated_eval.audit.withheld import DENOMINATOR
from disaggregated_eval.metrics import compute_metrics

__all__ = [
    "LogitNormalMixture",
    "Task",
    "run_task",
    "THRESHOLD",
    "CONFIDENCE",
    "SIZES",
    "PROPORTION_METRICS",
    "SMOOTH_METRICS",
    "OTHER_METRICS",
    "ALL_METRICS",
    "STRONG",
    "WEAK_RATES",
    "WEAK_NULLS",
    "POWER_EXCESSES",
    "Z_SIZES",
    "Z_RULE_ROWS",
    "WEAK_Z_SIZE",
    "POWER_Z_GAPS",
    "power_z_population",
    "CONTROLLED",
    "CONTROLLED_SIZES",
    "CONTROLLED_METRICS",
    "controlled_truth",
    "strong_truth",
    "rate_verdict",
    "verdict",
    "worst_verdict",
    "rate",
    "pct",
]

#: Classification threshold of every audit (``score >= 0.5`` is a predicted positive; ``Z >= 0``).
THRESHOLD = 0.5
#: Level of the intervals and of the tests (the audit's default): a flag is ``p_adjusted < 1 - 0.95``.
CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE
#: Slice sizes of part (a): one attribute whose levels have these many rows.
SIZES: tuple[int, ...] = (15, 30, 60, 120, 500, 2000)
#: Metrics that are proportions of a count (goal: 93-99% coverage from 15 rows).
PROPORTION_METRICS: tuple[str, ...] = (
    "sensitivity",
    "specificity",
    "precision",
    "label_rate",
    "predicted_positive_rate",
    "accuracy",
    "false_positive_rate",
    "false_negative_rate",
)
#: Metrics of the issue's second coverage goal (at least 92% from 30 rows).
SMOOTH_METRICS: tuple[str, ...] = ("auc", "log_loss", "brier_score")
#: The other metrics: the study applies the second goal to them too (its own choice, said in the table).
#: The balanced accuracy is not in the audit's default list; the study asks for it.
OTHER_METRICS: tuple[str, ...] = ("net_benefit", "mean_predicted_risk", "observed_expected_ratio", "balanced_accuracy")
ALL_METRICS: tuple[str, ...] = PROPORTION_METRICS + SMOOTH_METRICS + OTHER_METRICS
#: Width below which an interval counts as zero-width (a degenerate interval has bounds exactly equal).
ZERO_WIDTH = 1e-12
_QUAD_CELL, _QUAD_NODES, _QUAD_HALF_WIDTH = 0.05, 8, 12.0


# ----------------------------------------------------------------------------------------------
# Populations with known metrics
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LogitNormalMixture:
    """A population of ``(A, Y, R)``: ``Z = logit R | A = a, Y = y ~ N(means[a][y], sds[a][y]^2)``.

    Parameters
    ----------
    shares : tuple of float, length K
        ``P(A = a)``; sum to 1.
    prevalence : tuple of float, length K
        ``P(Y = 1 | A = a)``.
    means, sds : tuple of K pairs of float
        Mean and standard deviation of the logit score for ``y = 0`` and ``y = 1`` in group ``a``.
    """

    shares: tuple[float, ...]
    prevalence: tuple[float, ...]
    means: tuple[tuple[float, float], ...]
    sds: tuple[tuple[float, float], ...]
    _rows: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self):
        k = len(self.shares)
        if not (len(self.prevalence) == len(self.means) == len(self.sds) == k):
            raise ValueError("shares, prevalence, means and sds must have one entry per group")
        if abs(sum(self.shares) - 1.0) > 1e-12:
            raise ValueError(f"shares must sum to 1; got {sum(self.shares)}")

    @property
    def n_groups(self) -> int:
        return len(self.shares)

    def joint(self) -> np.ndarray:
        """``P(A = a, Y = y)``, shape (K, 2)."""
        p = np.asarray(self.prevalence, dtype=np.float64)
        return np.asarray(self.shares, dtype=np.float64)[:, None] * np.stack([1.0 - p, p], axis=1)

    # -- draws ----------------------------------------------------------------------------------
    def draw(self, rng: np.random.Generator, counts: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows with ``counts[a]`` rows of group ``a``: ``(a, y, score)``, each of shape (sum(counts),)."""
        a = np.repeat(np.arange(self.n_groups), counts)
        y = (rng.random(a.size) < np.asarray(self.prevalence)[a]).astype(np.int64)
        mu = np.asarray(self.means, dtype=np.float64)[a, y]
        sd = np.asarray(self.sds, dtype=np.float64)[a, y]
        return a, y, expit(mu + sd * rng.standard_normal(a.size))

    # -- population quantities ------------------------------------------------------------------
    def rows(self) -> dict[str, np.ndarray]:
        """Quadrature pseudo-rows of the population (module docstring): ``z, a, y, mass``."""
        if self._rows:
            return self._rows
        mu = np.asarray(self.means, dtype=np.float64)
        sd = np.asarray(self.sds, dtype=np.float64)
        lo = math.floor((mu - _QUAD_HALF_WIDTH * sd).min() / _QUAD_CELL) * _QUAD_CELL
        hi = math.ceil((mu + _QUAD_HALF_WIDTH * sd).max() / _QUAD_CELL) * _QUAD_CELL
        n_cells = round((hi - lo) / _QUAD_CELL)
        left = lo + _QUAD_CELL * np.arange(n_cells)  # edges at multiples of the cell: 0 is one of them
        t, w = np.polynomial.legendre.leggauss(_QUAD_NODES)
        nodes = (left[:, None] + 0.5 * _QUAD_CELL * (t[None, :] + 1.0)).ravel()
        node_w = np.tile(0.5 * _QUAD_CELL * w, n_cells)
        joint = self.joint()
        z, a, y, mass = [], [], [], []
        for g in range(self.n_groups):
            for label in (0, 1):
                z.append(nodes)
                a.append(np.full(nodes.size, g))
                y.append(np.full(nodes.size, label))
                mass.append(joint[g, label] * norm.pdf(nodes, mu[g, label], sd[g, label]) * node_w)
        self._rows.update(z=np.concatenate(z), a=np.concatenate(a), y=np.concatenate(y), mass=np.concatenate(mass))
        return self._rows

    def p_a_given_y(self, y: np.ndarray) -> np.ndarray:
        """``P(A = a | Y = y)`` at each ``y``, shape (n, K) (Bayes' rule on :meth:`joint`)."""
        joint = self.joint()
        return (joint / joint.sum(axis=0, keepdims=True)).T[np.asarray(y, dtype=np.int64)]

    def p_a_given_z(self, z: np.ndarray) -> np.ndarray:
        """``P(A = a | logit R = z)`` at each ``z``, shape (n, K) (Bayes' rule on the densities)."""
        z = np.asarray(z, dtype=np.float64)[:, None]
        joint = self.joint()
        dens = sum(
            joint[None, :, label]
            * norm.pdf(z, np.asarray(self.means)[None, :, label], np.asarray(self.sds)[None, :, label])
            for label in (0, 1)
        )
        return dens / dens.sum(axis=1, keepdims=True)

    def metrics(self, weight: np.ndarray | None = None, *, metrics: Sequence[str] = ALL_METRICS) -> dict[str, float]:
        """Population metrics with pseudo-row weight ``mass * weight`` (``weight`` of shape (n_pseudo_rows,)).

        The AUC is left to the caller when the weight is not constant within components (use
        :meth:`auc`): here it is the pseudo-rows' value.
        """
        rows = self.rows()
        w = rows["mass"] if weight is None else rows["mass"] * np.asarray(weight, dtype=np.float64)
        return compute_metrics(rows["y"], expit(rows["z"]), sample_weight=w, threshold=THRESHOLD, metrics=metrics)

    def auc(self, group_weight: Sequence[float]) -> float:
        """Closed-form AUC of the population with weight ``group_weight[a]`` on group ``a`` (module docstring)."""
        joint = self.joint() * np.asarray(group_weight, dtype=np.float64)[:, None]
        mu, sd = np.asarray(self.means), np.asarray(self.sds)
        num = 0.0
        for i in range(self.n_groups):
            for j in range(self.n_groups):
                diff = (mu[i, 1] - mu[j, 0]) / math.hypot(sd[i, 1], sd[j, 0])
                num += joint[i, 1] * joint[j, 0] * norm.cdf(diff)
        return float(num / (joint[:, 1].sum() * joint[:, 0].sum()))


#: Part (a), (b) strong null, (d): every slice draws from this one population. FPR Phi(-1) = 0.159,
#: sensitivity Phi(2/3) = 0.748, label rate 0.3; a 15-row slice has about 10 negatives, 4.5 positives
#: and 5 predicted positives.
STRONG = LogitNormalMixture(shares=(1.0,), prevalence=(0.3,), means=((-1.2, 0.8),), sds=((1.2, 1.2),))

#: Part (b) weak nulls: label rates of the four slices of 500 rows.
WEAK_RATES: tuple[float, ...] = (0.20, 1.0 / 3.0, 7.0 / 15.0, 0.60)
WEAK_SIZE = 500
#: The two scores of the weak-null file and the metrics equal in every slice for each:
#: ``separation``: ``Z | Y`` the same in every slice (STRONG's), so every rate conditional on Y is equal;
#: ``sufficiency``: ``R`` in {0.15, 0.75} with ``P(Y = 1 | R) = R`` in every slice and ``P(R = 0.75 | slice)``
#: set so that the label rate is the slice's, so precision (0.75) and observed / expected (1) are equal.
WEAK_NULLS: dict[str, tuple[str, ...]] = {
    "separation": (
        "false_positive_rate",
        "false_negative_rate",
        "sensitivity",
        "specificity",
        "auc",
        "balanced_accuracy",
    ),
    "sufficiency": ("precision", "observed_expected_ratio"),
}
_SUFF_LOW, _SUFF_HIGH = 0.15, 0.75

#: Part (c): 3,000 rows, attribute ``a`` with a target level of 15% of the rows whose false positive
#: rate is 0.20 + excess (the other levels 0.20), attribute ``b`` independent of everything, 50/50.
POWER_ROWS = 3000
POWER_SIZES: tuple[int, ...] = (450, 1050, 750, 750)
POWER_LEVELS: tuple[str, ...] = ("target", "u", "v", "w")
POWER_BASE_FPR = 0.20
POWER_EXCESSES: tuple[float, ...] = (0.05, 0.10)


def power_population(excess: float) -> LogitNormalMixture:
    """Part (c)'s population: FPR ``Phi(mu_0) = 0.20`` (+ ``excess`` for the target), label rate 0.3."""
    mu0 = [float(norm.ppf(POWER_BASE_FPR + (excess if g == 0 else 0.0))) for g in range(4)]
    return LogitNormalMixture(
        shares=tuple(s / POWER_ROWS for s in POWER_SIZES),
        prevalence=(0.3,) * 4,
        means=tuple((m, 1.0) for m in mu0),
        sds=((1.0, 1.0),) * 4,
    )


#: Part (e): three groups of 60%, 30% and 10% of the rows; the small group's scores sit in the upper
#: tail, where ``P(A = small | R)`` rises steeply and a weight model's smoothing matters.
CONTROLLED = LogitNormalMixture(
    shares=(0.6, 0.3, 0.1),
    prevalence=(0.3, 0.4, 0.5),
    means=((-1.5, 0.5), (-1.0, 1.0), (0.0, 2.0)),
    sds=((1.0, 1.0),) * 3,
)
CONTROLLED_LEVELS: tuple[str, ...] = ("large", "medium", "small")
CONTROLLED_SIZES: tuple[int, ...] = (2000, 20000)
CONTROLLED_METRICS: tuple[str, ...] = ("false_positive_rate", "precision", "label_rate")
CONTROLLED_CONTROLS: tuple[str, ...] = ("Y", "R")

# ---- The large-sample test of the comparisons (parts b and c, issue 24) ------------------------------------
#: Part (b), the large-sample test under the strong null: slices of these many rows from :data:`STRONG`
#: (33,300 rows). The rarest outcome category is the false negatives, 7.6% of the rows (label rate 0.3,
#: FNR 0.252): about 23, 76, 303, 606 and 1,515 of them; the audit's switch rule (at least
#: ``LARGE_SAMPLE_MIN_ROWS`` = 200 rows in each category on each side) holds from 4,000 rows. The smaller
#: slices show the test where the rule would not use it.
Z_SIZES: tuple[int, ...] = (300, 1000, 4000, 8000, 20000)
#: Slices of at least this many rows are within the switch rule's sizes (:data:`Z_SIZES`).
Z_RULE_ROWS = 4000
#: Part (b), the large-sample test under the weak nulls: four slices of 12,000 rows with part (b)'s label
#: rates (48,000 rows); the rarest category, the sufficiency score's false positives at label rate 0.20,
#: has about 250 rows.
WEAK_Z_SIZE = 12_000
#: Sample weights of the weighted audits of the large-sample cells (then every metric, the rates too, is
#: tested by the large-sample test): uniform on [0.5, 1.5], independent of everything (the nulls still hold).
Z_WEIGHT_RANGE = (0.5, 1.5)
#: Part (c), the large-sample test's power: 20,000 rows, attribute ``a`` with a target level of 15% whose
#: AUC is below the others' by ``gap`` (its positives' logit scores nearer the negatives'), attribute ``b``
#: independent, label rate 0.4; the AUC of the others is STRONG's, Phi(2 / sqrt(2 x 1.2^2)) = 0.881.
POWER_Z_SIZES: tuple[int, ...] = (3000, 7000, 5000, 5000)
POWER_Z_GAPS: tuple[float, ...] = (0.01, 0.02)


def power_z_population(gap: float) -> LogitNormalMixture:
    """Part (c)'s large-sample population: the target's positives' mean logit lowered so that its AUC is
    ``gap`` below the others' (the AUC of two normals: ``Phi((mu_1 - mu_0) / sqrt(sd_0^2 + sd_1^2))``)."""
    (mu0, mu1), (sd0, sd1) = STRONG.means[0], STRONG.sds[0]
    spread = math.hypot(sd0, sd1)
    base = norm.cdf((mu1 - mu0) / spread)
    target_mu1 = mu0 + spread * norm.ppf(base - gap)
    rows = sum(POWER_Z_SIZES)
    return LogitNormalMixture(
        shares=tuple(n / rows for n in POWER_Z_SIZES),
        prevalence=(0.4,) * 4,
        means=((mu0, target_mu1),) + ((mu0, mu1),) * 3,
        sds=((sd0, sd1),) * 4,
    )


def strong_truth() -> dict[str, float]:
    """Every metric of :data:`STRONG` (the truth of every slice of parts a and d)."""
    out = STRONG.metrics()
    out["auc"] = STRONG.auc([1.0])
    return out


def controlled_truth() -> pd.DataFrame:
    """Population subgroup metric, ``M_a`` and ``T_a`` of :data:`CONTROLLED` for V = Y and V = R.

    ``M_a`` is the population weighted by the exact ``P(A = a | V)`` (Bayes' rule on the DGP); rows
    (control, slice, metric, subgroup, M_a, T_a).
    """
    rows = CONTROLLED.rows()
    weights = {"Y": CONTROLLED.p_a_given_y(rows["y"]), "R": CONTROLLED.p_a_given_z(rows["z"])}
    records = []
    for g, level in enumerate(CONTROLLED_LEVELS):
        sub = CONTROLLED.metrics((rows["a"] == g).astype(np.float64), metrics=CONTROLLED_METRICS)
        for control in CONTROLLED_CONTROLS:
            ma = CONTROLLED.metrics(weights[control][:, g], metrics=CONTROLLED_METRICS)
            for metric in CONTROLLED_METRICS:
                records.append((control, f"group={level}", metric, sub[metric], ma[metric], sub[metric] - ma[metric]))
    return pd.DataFrame.from_records(records, columns=["control", "slice", "metric", "subgroup", "M_a", "T_a"])


# ----------------------------------------------------------------------------------------------
# Draws
# ----------------------------------------------------------------------------------------------


def size_level(size: int, digits: int = 4) -> str:
    """Level name of the slice of ``size`` rows (zero-padded so that the audit's order is by size)."""
    return f"n{size:0{digits}d}"


def strong_data(rng: np.random.Generator, sizes: Sequence[int] = SIZES) -> pd.DataFrame:
    """Parts a, b (strong null), d: attribute ``size`` with levels of ``sizes`` rows, one population."""
    _, y, score = STRONG.draw(rng, [sum(sizes)])
    digits = max(4, len(str(max(sizes))))
    return pd.DataFrame({"size": np.repeat([size_level(s, digits) for s in sizes], sizes), "y": y, "score": score})


def weak_level(rate_: float) -> str:
    return f"{rate_:.2f}"


def weak_data(rng: np.random.Generator, size: int = WEAK_SIZE) -> pd.DataFrame:
    """Part b (weak nulls): 4 slices of ``size`` rows with label rates 0.20-0.60 and the scores of :data:`WEAK_NULLS`."""
    slice_ = np.repeat(np.arange(len(WEAK_RATES)), size)
    rates = np.asarray(WEAK_RATES)[slice_]
    high = rng.random(slice_.size) < (rates - _SUFF_LOW) / (_SUFF_HIGH - _SUFF_LOW)
    sufficiency = np.where(high, _SUFF_HIGH, _SUFF_LOW)
    y = (rng.random(slice_.size) < sufficiency).astype(np.int64)
    mu = np.asarray(STRONG.means[0])[y]
    sd = np.asarray(STRONG.sds[0])[y]
    separation = expit(mu + sd * rng.standard_normal(y.size))
    levels = np.asarray([weak_level(r) for r in WEAK_RATES], dtype=object)
    return pd.DataFrame({"label_rate": levels[slice_], "y": y, "separation": separation, "sufficiency": sufficiency})


def power_data(rng: np.random.Generator, excess: float) -> pd.DataFrame:
    """Part c: :func:`power_population` with exactly :data:`POWER_SIZES` rows per level of ``a``."""
    a, y, score = power_population(excess).draw(rng, POWER_SIZES)
    b = np.where(rng.random(a.size) < 0.5, "x", "y")
    return pd.DataFrame({"a": np.asarray(POWER_LEVELS, dtype=object)[a], "b": b, "y": y, "score": score})


def power_z_data(rng: np.random.Generator, gap: float) -> pd.DataFrame:
    """Part c (large-sample test): :func:`power_z_population` with exactly :data:`POWER_Z_SIZES` rows per level."""
    a, y, score = power_z_population(gap).draw(rng, POWER_Z_SIZES)
    b = np.where(rng.random(a.size) < 0.5, "x", "y")
    return pd.DataFrame({"a": np.asarray(POWER_LEVELS, dtype=object)[a], "b": b, "y": y, "score": score})


def controlled_data(rng: np.random.Generator, n: int) -> pd.DataFrame:
    """Part e: ``n`` rows of :data:`CONTROLLED` (group sizes multinomial)."""
    counts = rng.multinomial(n, CONTROLLED.shares)
    a, y, score = CONTROLLED.draw(rng, counts)
    return pd.DataFrame({"group": np.asarray(CONTROLLED_LEVELS, dtype=object)[a], "y": y, "score": score})


# ----------------------------------------------------------------------------------------------
# One replicate (run in a worker process)
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """One replicate of one cell.

    ``kind``: ``strong`` (parts a, b strong null, d), ``weak`` (b), ``power`` (c), ``controlled`` (e),
    ``fair``, ``calibration`` and ``audit_family`` (f, :mod:`_validity_fairness`), ``strong_z`` and ``weak_z`` (b) and
    ``power_z`` (c) of the large-sample test, ``selection`` (g, :mod:`_validity_selection`). ``param``: the
    FPR excess (power), the AUC gap (power_z), the number of rows (controlled) or the cell's name (fair,
    calibration, audit_family, selection). ``schemes``: resampling schemes to audit (strong); ``permutations``: whether
    the population audit computes p-values; ``metrics``: the metrics of parts a, b and d (strong, weak,
    strong_z, weak_z; the data do not depend on them).
    """

    kind: str
    replicate: int
    root: int
    n_resamples: int
    param: float | int | None = None
    schemes: tuple[str, ...] = ("population",)
    permutations: bool = True
    metrics: tuple[str, ...] = ALL_METRICS

    @property
    def cell(self) -> str:
        return self.kind if self.param is None else f"{self.kind}-{self.param}"

    def rng(self) -> np.random.Generator:
        return seeds.generator(self.root, "validity", self.cell, self.replicate, "data")

    def audit_seed(self) -> int:
        return seeds.sklearn_seed(self.root, "validity", self.cell, self.replicate, "audit")


def _audit(task: Task, data: pd.DataFrame, warned: list[str], **options):
    from disaggregated_eval.audit import audit

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = audit(
            data,
            label="y",
            n_resamples=task.n_resamples,
            seed=task.audit_seed(),
            threshold=THRESHOLD,
            confidence=CONFIDENCE,
            n_threads=1,
            **options,
        )
    warned.extend(f"{w.category.__name__}: {w.message}" for w in caught)
    return result


def _tests(result, **labels) -> pd.DataFrame:
    """The p-values of the comparisons with a permutation test (kinds vs_overall, vs_rest, pairwise)."""
    c = result.comparisons
    c = c[c["kind"] != "vs_model"]
    out = c[
        ["model", "metric", "kind", "slice", "reference", "difference", "test", "p_value", "p_adjusted", "reported"]
    ]
    return out.assign(**labels).reset_index(drop=True)


def _slice_records(result, truth: dict[str, float], scheme: str, replicate: int) -> pd.DataFrame:
    s = result.slices
    t = s["metric"].map(truth).to_numpy(dtype=np.float64)
    low, high = s["ci_low"].to_numpy(dtype=np.float64), s["ci_high"].to_numpy(dtype=np.float64)
    band_low, band_high = s["band_low"].to_numpy(dtype=np.float64), s["band_high"].to_numpy(dtype=np.float64)
    finite = np.isfinite(low) & np.isfinite(high)
    kind = s["metric"].map(DENOMINATOR)
    n_pos, n_neg = s["n_pos"].to_numpy(), s["n_neg"].to_numpy()
    denominator = np.select(
        [kind == "positives", kind == "negatives", kind == "predicted positives", kind == "smaller class"],
        [n_pos, n_neg, s["n_predicted_pos"].to_numpy(), np.minimum(n_pos, n_neg)],
        default=s["n"].to_numpy(),
    )
    size = np.where(s["slice"] == "overall", sum(SIZES), s["slice"].str.extract(r"n(\d+)$")[0].fillna(0).astype(int))
    return pd.DataFrame(
        {
            "scheme": scheme,
            "replicate": replicate,
            "metric": s["metric"].to_numpy(),
            "slice": s["slice"].to_numpy(),
            "size": size.astype(np.int64),
            "reported": s["reported"].to_numpy(dtype=bool),
            "covered": (low <= t) & (t <= high),
            "zero_width": finite & (high - low <= ZERO_WIDTH),
            "missing_interval": ~finite,
            "undefined_estimate": denominator == 0,
            "band_covered": (band_low <= t) & (t <= band_high),
        }
    )


def _strong(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    data = strong_data(task.rng())
    truth = strong_truth()
    out: dict[str, list[pd.DataFrame]] = {"slices": [], "tests": []}
    for scheme in task.schemes:
        permute = task.permutations and scheme == "population"
        options = {} if permute else {"n_permutations": 0}
        result = _audit(task, data, warned, scores=["score"], groups=["size"], resampling=scheme,
                        metrics=list(task.metrics), **options)  # fmt: skip
        out["slices"].append(_slice_records(result, truth, scheme, task.replicate))
        if permute:
            out["tests"].append(_tests(result, null="strong", replicate=task.replicate))
    return {k: pd.concat(v, ignore_index=True) for k, v in out.items() if v}


def _weak(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    metrics = sorted({m for ms in WEAK_NULLS.values() for m in ms if m in task.metrics}, key=ALL_METRICS.index)
    if not metrics:
        return {}
    result = _audit(
        task, weak_data(task.rng()), warned, scores=list(WEAK_NULLS), groups=["label_rate"], metrics=metrics
    )
    tests = _tests(result, null="weak", replicate=task.replicate)
    keep = [metric in WEAK_NULLS[model] for model, metric in zip(tests["model"], tests["metric"])]
    return {"tests": tests[keep].reset_index(drop=True)}


def _power(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    data = power_data(task.rng(), float(task.param))
    frames = []
    for adjust in ("holm", "bh"):
        result = _audit(
            task, data, warned, scores=["score"], groups=["a", "b"], metrics=["false_positive_rate"], adjust=adjust
        )
        c = result.comparisons
        target = c[(c["slice"] == "a=target") & c["kind"].isin(["vs_overall", "vs_rest"])]
        frames.append(
            target[["kind", "difference", "p_value", "p_adjusted", "reported"]].assign(
                excess=float(task.param), adjust=adjust, replicate=task.replicate
            )
        )
    return {"power": pd.concat(frames, ignore_index=True)}


def _with_weights(task: Task, data: pd.DataFrame, rng: np.random.Generator) -> list[tuple[str, pd.DataFrame, dict]]:
    """The two audits of a large-sample cell: without weights, and with uniform weights (every metric tested)."""
    weighted = data.assign(w=rng.uniform(*Z_WEIGHT_RANGE, len(data)))
    return [("none", data, {}), ("uniform", weighted, {"sample_weight": "w"})]


def _strong_z(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    rng = task.rng()
    frames = []
    for weights, data, extra in _with_weights(task, strong_data(rng, Z_SIZES), rng):
        result = _audit(task, data, warned, scores=["score"], groups=["size"], metrics=list(task.metrics),
                        test_method="bootstrap", **extra)  # fmt: skip
        frames.append(_tests(result, null="strong", weights=weights, replicate=task.replicate))
    return {"tests_z": pd.concat(frames, ignore_index=True)}


def _weak_z(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    rng = task.rng()
    metrics = sorted({m for ms in WEAK_NULLS.values() for m in ms if m in task.metrics}, key=ALL_METRICS.index)
    if not metrics:
        return {}
    frames = []
    for weights, data, extra in _with_weights(task, weak_data(rng, WEAK_Z_SIZE), rng):
        result = _audit(task, data, warned, scores=list(WEAK_NULLS), groups=["label_rate"], metrics=metrics,
                        test_method="bootstrap", **extra)  # fmt: skip
        tests = _tests(result, null="weak", weights=weights, replicate=task.replicate)
        keep = [metric in WEAK_NULLS[model] for model, metric in zip(tests["model"], tests["metric"])]
        frames.append(tests[keep])
    return {"tests_z": pd.concat(frames, ignore_index=True)}


def _power_z(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    """The same file tested by the large-sample test and by permutations (AUC; one family of 6 slices)."""
    data = power_z_data(task.rng(), float(task.param))
    frames = []
    for method in ("bootstrap", "permutation"):
        result = _audit(task, data, warned, scores=["score"], groups=["a", "b"], metrics=["auc"], intersections=1,
                        pairwise_max_levels=0, test_method=method)  # fmt: skip
        c = result.comparisons
        target = c[(c["slice"] == "a=target") & (c["kind"] == "vs_overall")]
        frames.append(target[["difference", "test", "p_value", "p_adjusted", "reported"]].assign(
            gap=float(task.param), test_method=method, replicate=task.replicate))  # fmt: skip
    return {"power_z": pd.concat(frames, ignore_index=True)}


def _controlled(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    n = int(task.param)
    result = _audit(
        task,
        controlled_data(task.rng(), n),
        warned,
        scores=["score"],
        groups=["group"],
        metrics=list(CONTROLLED_METRICS),
        controls=list(CONTROLLED_CONTROLS),
        n_permutations=0,
    )
    c = result.controlled
    c = c[c["control"].isin(CONTROLLED_CONTROLS)]
    out = c[["control", "slice", "metric", "T_a", "T_a_low", "T_a_high", "reported"]].assign(
        n=n, replicate=task.replicate
    )
    return {"controlled": out.reset_index(drop=True)}


def _fair(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    return _validity_fairness.run_fair(task, lambda data, **options: _audit(task, data, warned, **options))


def _audit_family(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    return _validity_fairness.run_audit_family(task, lambda data, **options: _audit(task, data, warned, **options))


def _calibration(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    return _validity_fairness.run_calibration(task, lambda data, **options: _audit(task, data, warned, **options))


def _selection(task: Task, warned: list[str]) -> dict[str, pd.DataFrame]:
    import _validity_selection  # part (g); imported here: it imports this module

    return _validity_selection.run_selection(task, lambda data, **options: _audit(task, data, warned, **options))


_KINDS = {"strong": _strong, "weak": _weak, "power": _power, "controlled": _controlled, "fair": _fair,
          "calibration": _calibration, "strong_z": _strong_z, "weak_z": _weak_z, "power_z": _power_z,
          "selection": _selection, "audit_family": _audit_family}  # fmt: skip


def run_task(task: Task) -> tuple[Task, dict[str, pd.DataFrame], float, list[str]]:
    """Run one replicate: ``(task, tables, CPU seconds of this process, warnings raised by the audits)``."""
    start = time.process_time()
    warned: list[str] = []
    tables = _KINDS[task.kind](task, warned)
    return task, tables, time.process_time() - start, warned


# ----------------------------------------------------------------------------------------------
# Summaries: rates, Monte-Carlo errors, verdicts
# ----------------------------------------------------------------------------------------------


# The rates, percentages and verdicts live in _verdicts (a leaf module that part g's module imports too);
# the study reads them from here as v.rate, v.pct, v.rate_verdict, v.verdict, v.worst_verdict.
