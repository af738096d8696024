"""The minimum detectable difference (MDD) and the rows needed, checked by simulation with known truth.

At the computed MDD, the test the formula describes (the two-sided pooled z-test of the slice's rate
against the rest's, at the adjusted level) must reject with the stated power: 4,000 replicates per
setting, Monte-Carlo standard error sqrt(0.8 x 0.2 / 4000) = 0.0063, tolerance 3 standard errors
(0.019) plus 0.005 for the normal approximation at these sizes (at least 40 expected events per side).
The audit's own test of an unweighted rate is the exact conditional (hypergeometric) test, which is
more conservative: its power at the MDD is reported and must stay within 0.08 below the stated power
at these sizes (docs/method.md says the MDD is optimistic for it at small counts).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import special

from disaggregated_eval import seeds
from disaggregated_eval.audit.detectability import minimum_detectable_difference, proportion_power, rows_needed

REPLICATES = 4000
POWER = 0.8
MC_SE = np.sqrt(POWER * (1 - POWER) / REPLICATES)
TOLERANCE = 3 * MC_SE + 0.005
# (overall rate, slice size, rest size, level after the family's adjustment)
SETTINGS = [
    (0.30, 400, 3600, 0.05 / 10),
    (0.10, 1000, 4000, 0.05 / 5),
    (0.50, 250, 750, 0.05),
    (0.20, 600, 9400, 0.05 / 20),
]


def pooled_z_rejects(x_s, n_s, x_r, n_r, alpha):
    pooled = (x_s + x_r) / (n_s + n_r)
    se = np.sqrt(pooled * (1 - pooled) * (1 / n_s + 1 / n_r))
    with np.errstate(invalid="ignore", divide="ignore"):
        z = (x_s / n_s - x_r / n_r) / se
    return np.abs(z) > special.ndtri(1 - alpha / 2)


def simulate(p0, n_s, n_r, delta, direction, alpha, key):
    share = n_s / (n_s + n_r)
    p_s = p0 + direction * delta
    p_r = p0 - direction * share * delta / (1 - share)
    rng = np.random.default_rng(seeds.seed_sequence(20250101, "test", "mdd", *map(str, key)))
    x_s = rng.binomial(n_s, p_s, REPLICATES)
    x_r = rng.binomial(n_r, p_r, REPLICATES)
    return x_s, x_r


@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_power_at_the_mdd_is_the_stated_power(setting, direction):
    p0, n_s, n_r, alpha = SETTINGS[setting]
    share = n_s / (n_s + n_r)
    delta = float(minimum_detectable_difference(p0, n_s, n_r, share, alpha=alpha, power=POWER, direction=direction))
    assert 0 < delta < 0.5
    # the formula's own power at the MDD is the stated power (to the bisection's precision)
    assert proportion_power(delta, p0, n_s, n_r, share, alpha=alpha, direction=direction) == pytest.approx(
        POWER, abs=1e-6
    )
    x_s, x_r = simulate(p0, n_s, n_r, delta, direction, alpha, (setting, direction))
    power = pooled_z_rejects(x_s, n_s, x_r, n_r, alpha).mean()
    assert abs(power - POWER) < TOLERANCE, (SETTINGS[setting], direction, delta, power)
    # a difference 30% smaller is detected clearly less often (the MDD is not an upper bound only)
    x_s, x_r = simulate(p0, n_s, n_r, 0.7 * delta, direction, alpha, (setting, direction, "smaller"))
    assert pooled_z_rejects(x_s, n_s, x_r, n_r, alpha).mean() < POWER - 0.15


@pytest.mark.parametrize("setting", range(len(SETTINGS)))
def test_the_audits_exact_test_at_the_mdd_is_somewhat_conservative(setting):
    from disaggregated_eval.engine.permutation import exact_count_pvalue

    p0, n_s, n_r, alpha = SETTINGS[setting]
    share = n_s / (n_s + n_r)
    delta = float(minimum_detectable_difference(p0, n_s, n_r, share, alpha=alpha, power=POWER, direction=1))
    x_s, x_r = simulate(p0, n_s, n_r, delta, 1, alpha, (setting, "exact"))
    p = exact_count_pvalue(x_s, np.full(REPLICATES, n_s), x_s + x_r, np.full(REPLICATES, n_s + n_r))
    power = float(np.mean(p < alpha))
    assert POWER - 0.08 < power < POWER + TOLERANCE, (SETTINGS[setting], power)


def test_rows_needed_give_the_stated_power_in_the_harder_direction():
    p0, n_r, alpha, gap = 0.25, 5000, 0.05 / 8, 0.06
    rows = float(rows_needed(gap, p0, 1.0, 1.0, n_r, n_r, alpha=alpha, power=POWER))
    assert np.isfinite(rows) and rows > 10
    powers = []
    for direction in (1, -1):
        x_s, x_r = simulate(p0, int(rows), n_r, gap, direction, alpha, ("rows", direction))
        powers.append(pooled_z_rejects(x_s, int(rows), x_r, n_r, alpha).mean())
    assert abs(min(powers) - POWER) < TOLERANCE, powers  # the harder direction is just detected
    assert max(powers) >= POWER - TOLERANCE
    # one row fewer is not enough for the formula
    share = (rows - 1) / (rows - 1 + n_r)
    worst = min(proportion_power(gap, p0, rows - 1, n_r, share, alpha=alpha, direction=d) for d in (1, -1))
    assert worst < POWER


def test_mdd_is_undefined_where_no_difference_can_reach_the_power():
    # a 5-row slice with a rate of 0.02: no possible difference has 80% power at alpha / 20
    assert np.isnan(minimum_detectable_difference(0.02, 5, 5000, 5 / 5005, alpha=0.05 / 20, power=0.8, direction=-1))
    assert np.isnan(minimum_detectable_difference(0.0, 500, 5000, 0.1, alpha=0.05, power=0.8, direction=1))


def test_audit_detectability_table_reads_the_counts_and_the_families():
    from disaggregated_eval.audit import audit
    from disaggregated_eval.audit.decisions import flagged_rows

    rng = np.random.default_rng(seeds.seed_sequence(20250101, "test", "detectability-audit"))
    n = 3000
    data = pd.DataFrame({"g": rng.choice(["a", "b", "c", "d"], n, p=[0.6, 0.25, 0.12, 0.03])})
    data["y"] = rng.binomial(1, 0.3 + 0.1 * (data["g"] == "b"))
    data["r"] = np.clip(0.3 * data["y"] + rng.uniform(0, 0.7, n), 0, 1)
    result = audit(data, label="y", scores=["r"], groups=["g"], metrics=["false_positive_rate", "accuracy", "auc"],
                   n_resamples=200, n_permutations=200, detect_gap=0.05)  # fmt: skip
    table = result.detectability
    assert list(table["slice"].unique()) == ["g=a", "g=b", "g=c", "g=d"]
    fpr = table[table["metric"] == "false_positive_rate"].set_index("slice")
    # the level: alpha over the family of reported vs_overall tests of the metric
    comps = result.comparisons
    vs = comps[(comps["kind"] == "vs_overall") & (comps["metric"] == "false_positive_rate")]
    assert (fpr["family_size"] == vs["family_size"].max()).all()
    assert fpr["alpha"].iloc[0] == pytest.approx(0.05 / vs["family_size"].max())
    # the MDD of slice b from its own counts
    b = data[data["g"] == "b"]
    neg_b, neg_all = int((b["y"] == 0).sum()), int((data["y"] == 0).sum())
    p0 = float(((data["r"] >= 0.5) & (data["y"] == 0)).sum() / neg_all)
    expected = minimum_detectable_difference(p0, neg_b, neg_all - neg_b, neg_b / neg_all, alpha=fpr.loc["g=b", "alpha"],
                                             power=0.8, direction=1)  # fmt: skip
    assert fpr.loc["g=b", "mdd_above"] == pytest.approx(float(expected), rel=1e-9)
    assert fpr.loc["g=b", "method"] == "two-proportion normal" and fpr.loc["g=b", "n_effective"] == neg_b
    # smaller slices detect less; a slice large enough already needs fewer rows than it has
    assert fpr["mdd_above"].is_monotonic_increasing  # a (60%) > b > c > d (3%) in size
    assert fpr.loc["g=a", "rows_needed"] < fpr.loc["g=a", "n"]
    assert fpr.loc["g=d", "rows_needed"] > fpr.loc["g=d", "n"]
    flags = vs.assign(f=flagged_rows(vs, 0.05)).set_index("slice")["f"]
    assert (fpr["flagged"] == flags.reindex(fpr.index).fillna(False)).all()
    auc = table[table["metric"] == "auc"]
    assert (auc["method"] == "bootstrap se").all() and (auc["mdd_above"] == auc["mdd_below"]).all()
    assert (auc["mdd_above"].dropna() > 0).all()
