"""Tests of the audit's statistics: the intervals per metric family, the permutation tests of the
metric (exact and Monte Carlo, sequential), the draws of the compressed engine, and the families.

Tolerances and sizes are stated where they are used; Monte-Carlo checks use enough draws that a
correct implementation fails with probability below about 1e-6 and a plausible bug fails surely.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from disaggregated_eval import seeds, vocabulary
from disaggregated_eval.audit import AuditWarning, audit
from disaggregated_eval.audit.calibration_table import score_bins
from disaggregated_eval.audit.comparison_tests import PERMUTATION_DESIGNS, SCORE_STRATA
from disaggregated_eval.engine.permutation import (
    SEQUENTIAL_EXCEEDANCES,
    exact_count_pvalue,
    min_permutations,
    permutation_draws,
    permutation_space,
    permutation_test,
)
from disaggregated_eval.engine.sums import PROPORTIONS, categories, metric_slots
from disaggregated_eval.intervals import auc_score_interval, mover_mean, newcombe_difference, wilson_interval
from disaggregated_eval.metrics import compute_metrics


def _frame(n=600, seed=0, weights=False, rounded=False):
    rng = np.random.default_rng(seed)
    race = rng.choice(["Asian", "Black", "White"], n, p=[0.15, 0.3, 0.55])
    sex = rng.choice(["F", "M"], n)
    y = rng.binomial(1, np.where(race == "Black", 0.45, 0.3))
    p = np.clip(0.35 * y + 0.65 * rng.random(n), 0, 1)
    if rounded:
        p = np.round(p, 1)
    df = pd.DataFrame({"race": race, "sex": sex, "y": y, "p": p})
    if weights:
        df["w"] = rng.gamma(2.0, 1.0, n)
    return df


# ----------------------------------------------------------------------------------------------
# Intervals
# ----------------------------------------------------------------------------------------------


def test_wilson_equals_statsmodels_and_never_has_zero_width():
    for k, n in [(0, 20), (3, 20), (20, 20), (1, 5), (0, 1)]:
        low, high = wilson_interval(np.array([k / n]), np.array([n]), 0.95)
        ref = proportion_confint(k, n, alpha=0.05, method="wilson")
        assert low[0] == pytest.approx(ref[0], abs=1e-12) and high[0] == pytest.approx(ref[1], abs=1e-12)
        assert high[0] - low[0] > 0.0


def test_newcombe_interval_of_a_slice_without_events():
    # 0/10 minus 0/20: the bounds are the other side's Wilson bounds, (-0.1611, +0.2775) (Wilson upper
    # bounds of 0/20 and 0/10); 10/10 minus 0/20: (1 - sqrt(0.2775^2 + 0.1611^2), 1) = (0.6791, 1)
    # (Newcombe 1998, Table II, examples (e) and (h), read with the samples in this order)
    low, high = newcombe_difference(np.array([0.0]), np.array([10]), np.array([0.0]), np.array([20]), 0.95)
    assert low[0] == pytest.approx(-0.1611, abs=5e-4) and high[0] == pytest.approx(0.2775, abs=5e-4)
    low, high = newcombe_difference(np.array([1.0]), np.array([10]), np.array([0.0]), np.array([20]), 0.95)
    assert low[0] == pytest.approx(0.6791, abs=5e-4) and high[0] == pytest.approx(1.0, abs=5e-4)


def _mover_by_hand(counts, level=0.95):
    """MOVER bounds of the mean of independent proportions from statsmodels' Wilson bounds (Zou and Donner 2008)."""
    p = [k / n for k, n in counts]
    bounds = [proportion_confint(k, n, alpha=1 - level, method="wilson") for k, n in counts]
    mean = sum(p) / len(p)
    low = mean - math.sqrt(sum((x - lo) ** 2 for x, (lo, _) in zip(p, bounds))) / len(p)
    high = mean + math.sqrt(sum((hi - x) ** 2 for x, (_, hi) in zip(p, bounds))) / len(p)
    return low, high


@pytest.mark.parametrize("counts", [[(7, 10), (18, 20)], [(0, 5), (12, 12)], [(0, 4), (0, 9)], [(3, 3), (40, 41)]])
def test_mover_mean_is_the_mover_interval_of_wilson_bounds(counts):
    # Tolerance 1e-12: the same closed forms, rounded in another order (values of order 1).
    p = [np.array([k / n]) for k, n in counts]
    n = [np.array([float(n)]) for _, n in counts]
    low, high = mover_mean(p, n, 0.95)
    ref = _mover_by_hand(counts)
    assert low[0] == pytest.approx(ref[0], abs=1e-12) and high[0] == pytest.approx(ref[1], abs=1e-12)
    # inside [mean of the lower bounds, mean of the upper bounds], so in [0, 1]; never of zero width
    walls = [proportion_confint(k, m, alpha=0.05, method="wilson") for k, m in counts]
    assert np.mean([w[0] for w in walls]) - 1e-12 <= low[0] < high[0] <= np.mean([w[1] for w in walls]) + 1e-12


def test_mover_mean_of_one_part_is_wilson_and_undefined_without_rows():
    p, n = np.array([0.0, 0.3, 1.0]), np.array([8.0, 10.0, 3.0])
    np.testing.assert_allclose(mover_mean([p], [n], 0.9), wilson_interval(p, n, 0.9), rtol=0, atol=1e-15)
    low, high = mover_mean([np.array([0.5]), np.array([np.nan])], [np.array([10.0]), np.array([0.0])], 0.95)
    assert np.isnan(low[0]) and np.isnan(high[0])


def test_balanced_accuracy_of_a_slice_gets_the_mover_interval_of_its_class_rates():
    df = _frame()
    res = audit(df, label="y", scores=["p"], groups=["race"], metrics=["balanced_accuracy", "sensitivity"],
                n_resamples=200, n_permutations=0)  # fmt: skip
    row = res.slices.query("slice == 'race=Asian' and metric == 'balanced_accuracy'").iloc[0]
    mask = (df["race"] == "Asian").to_numpy()
    y, yhat = df["y"].to_numpy()[mask], (df["p"].to_numpy()[mask] >= 0.5)
    counts = [(int((yhat & (y == 1)).sum()), int((y == 1).sum())), (int((~yhat & (y == 0)).sum()), int((y == 0).sum()))]
    ref = _mover_by_hand(counts)
    assert row.interval == "mover_wilson" and row.estimate == pytest.approx(
        np.mean([k / m for k, m in counts]), abs=1e-12
    )
    assert row.ci_low == pytest.approx(ref[0], abs=1e-12) and row.ci_high == pytest.approx(ref[1], abs=1e-12)
    assert row.band_low <= row.ci_low and row.band_high >= row.ci_high  # the band: the same method at a higher level


def test_auc_score_interval_brackets_the_estimate_and_stays_in_the_unit_interval():
    auc = np.array([0.5, 0.8, 1.0, 0.0])
    low, high = auc_score_interval(auc, np.array([10, 30, 8, 8]), np.array([10, 30, 12, 12]), 0.95)
    assert np.all(low <= auc + 1e-12) and np.all(high >= auc - 1e-12)
    assert np.all(low >= 0.0) and np.all(high <= 1.0) and np.all(high - low > 0.05)
    # wider for fewer cases
    low2, high2 = auc_score_interval(np.array([0.8]), np.array([300]), np.array([300]), 0.95)
    assert high2[0] - low2[0] < high[1] - low[1]


def test_slices_get_the_interval_of_their_metric_family():
    df = _frame()
    res = audit(df, label="y", scores=["p"], groups=["race"], n_resamples=200, n_permutations=0)
    s = res.slices.set_index(["slice", "metric"])
    for metric in PROPORTIONS:
        assert s.loc[("overall", metric), "interval"] == "wilson"
    assert s.loc[("overall", "auc"), "interval"] == "auc_score"
    assert s.loc[("overall", "log_loss"), "interval"] == "bca"
    # the Wilson interval of the false positive rate of a slice, from its own counts
    mask = df["race"] == "Black"
    neg = mask & (df["y"] == 0)
    fp = int(((df["p"] >= 0.5) & neg).sum())
    ref = proportion_confint(fp, int(neg.sum()), alpha=0.05, method="wilson")
    row = s.loc[("race=Black", "false_positive_rate")]
    assert row.ci_low == pytest.approx(ref[0], abs=1e-12) and row.ci_high == pytest.approx(ref[1], abs=1e-12)


def test_a_slice_without_false_positives_gets_an_interval_of_positive_width():
    """The finding of the validity issue: 20 negatives, no false positive gave [0.000, 0.000]."""
    rng = np.random.default_rng(3)
    n_big = 500
    y = np.r_[rng.binomial(1, 0.4, n_big), np.zeros(20, dtype=int), np.ones(20, dtype=int)]
    p = np.r_[rng.random(n_big), np.full(20, 0.1), np.full(20, 0.9)]
    g = np.r_[np.full(n_big, "big"), np.full(40, "small")]
    res = audit(pd.DataFrame({"y": y, "p": p, "g": g}), label="y", scores=["p"], groups=["g"],
                n_resamples=200, n_permutations=200)  # fmt: skip
    row = res.slices.query("slice == 'g=small' and metric == 'false_positive_rate'").iloc[0]
    assert row.estimate == 0.0 and row.ci_low == 0.0 and row.ci_high > 0.1  # Wilson: z^2 / (20 + z^2) = 0.161
    acc = res.slices.query("slice == 'g=small' and metric == 'accuracy'").iloc[0]
    assert acc.estimate == 1.0 and acc.ci_high == 1.0 and acc.ci_low < 0.95
    for frame in (res.slices, res.comparisons):
        finite = frame.dropna(subset=["ci_low", "ci_high"])
        assert (finite["ci_high"] > finite["ci_low"]).all()


def test_precision_without_predicted_positives_is_undefined_not_zero():
    df = _frame()
    df.loc[df["race"] == "Asian", "p"] = 0.1  # no predicted positive among the Asian rows
    res = audit(df, label="y", scores=["p"], groups=["race"], n_resamples=100, n_permutations=0,
                min_group_size=0, min_denominator=0)  # fmt: skip
    row = res.slices.query("slice == 'race=Asian' and metric == 'precision'").iloc[0]
    assert np.isnan(row.estimate) and row.caveat == "undefined" and row.n_undefined == 100
    assert (
        compute_metrics(df["y"][df["race"] == "Asian"], df["p"][df["race"] == "Asian"], metrics=["precision"])[
            "precision"
        ]
        != 0.0
    )  # NaN, as the engine


# ----------------------------------------------------------------------------------------------
# Permutation tests
# ----------------------------------------------------------------------------------------------


def test_exact_p_value_equals_the_enumerated_permutation_distribution():
    """A universe of 10 rows (4 numerator rows), a slice of 4: all 210 subsets enumerated."""
    from itertools import combinations

    rows = np.r_[np.ones(4), np.zeros(6)]
    x0 = 4 * 4 / 10
    for x_obs in range(5):
        extreme = sum(
            1 for chosen in combinations(range(10), 4) if abs(rows[list(chosen)].sum() - x0) >= abs(x_obs - x0) - 1e-9
        )
        assert exact_count_pvalue(x_obs, 4, 4, 10) == pytest.approx(extreme / math.comb(10, 4), abs=1e-12)


def _brute_pvalue(stats_by_perm, observed, h):
    """Besag-Clifford on an explicit sequence of permutation statistics (module docstring of the engine)."""
    exceed = defined = 0
    for t in stats_by_perm:
        if not np.isfinite(t):
            continue
        defined += 1
        if abs(t) >= abs(observed) - 1e-9 * max(1.0, abs(observed)):
            exceed += 1
            if exceed == h:
                return h / defined
    return (exceed + 1) / (defined + 1)


@pytest.mark.parametrize("weighted", [False, True])
def test_monte_carlo_p_values_equal_a_brute_force_loop(weighted):
    """The audit's Monte-Carlo p-values = Besag-Clifford over compute_metrics on the same draws.

    The draws are the engine's (permutation_draws, the test's seed path); each side's metrics are
    recomputed with compute_metrics on the rows its unit counts stand for. With sample weights every
    metric is Monte Carlo, the false positive rate permuted among the negatives only."""
    df = _frame(n=300, weights=weighted, rounded=True)
    P = 300
    res = audit(df, label="y", scores=["p"], groups=["race"], sample_weight="w" if weighted else None,
                metrics=[*vocabulary.AUDIT_METRICS, "balanced_accuracy"],
                n_resamples=40, n_permutations=P, seed=5, min_group_size=0, min_denominator=0)  # fmt: skip
    order = np.argsort(df["p"].to_numpy(), kind="stable")
    sdf = df.iloc[order].reset_index(drop=True)
    y, r = sdf["y"].to_numpy(float), sdf["p"].to_numpy()
    w = sdf["w"].to_numpy() if weighted else np.ones(len(sdf))
    cats = categories(y, r, 0.5)
    comps = res.comparisons.set_index(["kind", "slice", "reference", "metric"])
    point = res.slices.set_index(["slice", "metric"])["estimate"]
    metrics = ["auc", "log_loss", "observed_expected_ratio", "balanced_accuracy"]
    metrics += ["false_positive_rate"] if weighted else []
    for metric in metrics:
        design_cats, within = PERMUTATION_DESIGNS[metric]
        rows = np.flatnonzero(np.isin(cats, design_cats))
        # AUC, balanced accuracy: within each class; observed/expected ratio: within quantile bins of the score
        strata = {"label": y[rows].astype(np.int64), "score": score_bins(r[rows], SCORE_STRATA)[0], None: None}
        space = permutation_space(y[rows], r[rows], w[rows], metrics=[metric], threshold=0.5, strata=strata[within])
        first = (sdf["race"].to_numpy() == "Asian")[rows]
        n_first = space.first_counts(first)
        name = "+".join(("TN", "FP", "FN", "TP")[c] for c in design_cats) if len(design_cats) < 4 else "all"
        path = ("audit", "permutation", "p", name + (f" by {within}" if within else ""), "race=Asian")
        draws = permutation_draws(space, n_first, seeds.seed_sequence(5, *path), P)
        unit = space.unit_of_row
        stats_overall, stats_rest = [], []
        everything = compute_metrics(y[rows], r[rows], sample_weight=w[rows], metrics=[metric])[metric]
        for d in draws:
            # spread each unit's count over its rows (rows of a unit are interchangeable)
            take = np.zeros(rows.size)
            for u in np.flatnonzero(d):
                take[np.flatnonzero(unit == u)[: d[u]]] = 1.0
            a = compute_metrics(y[rows], r[rows], sample_weight=w[rows] * take, metrics=[metric])[metric]
            b = compute_metrics(y[rows], r[rows], sample_weight=w[rows] * (1 - take), metrics=[metric])[metric]
            stats_overall.append(a - everything)
            stats_rest.append(a - b)
        rest = compute_metrics(y[rows][~first], r[rows][~first], sample_weight=w[rows][~first], metrics=[metric])
        obs_overall = point["race=Asian", metric] - point["overall", metric]
        obs_rest = point["race=Asian", metric] - rest[metric]
        h = SEQUENTIAL_EXCEEDANCES
        assert comps.loc[("vs_overall", "race=Asian", "overall", metric), "p_value"] == pytest.approx(
            _brute_pvalue(stats_overall, obs_overall, h), rel=1e-12
        )
        assert comps.loc[("vs_rest", "race=Asian", "rest", metric), "p_value"] == pytest.approx(
            _brute_pvalue(stats_rest, obs_rest, h), rel=1e-12
        )
        assert comps.loc[("vs_overall", "race=Asian", "overall", metric), "test"] == "monte carlo"


def test_unweighted_rates_get_exact_tests_of_the_metric():
    df = _frame()
    res = audit(df, label="y", scores=["p"], groups=["race"], n_resamples=40, n_permutations=200,
                min_group_size=0, min_denominator=0)  # fmt: skip
    c = res.comparisons.set_index(["kind", "slice", "reference", "metric"])
    black = df["race"] == "Black"
    neg = df["y"] == 0
    fp = df["p"] >= 0.5
    expected = exact_count_pvalue(int((black & neg & fp).sum()), int((black & neg).sum()), int((neg & fp).sum()),
                                  int(neg.sum()))  # fmt: skip
    for kind, ref in (("vs_overall", "overall"), ("vs_rest", "rest")):
        row = c.loc[(kind, "race=Black", ref, "false_positive_rate")]
        assert row.test == "exact" and row.p_value == pytest.approx(float(expected), abs=1e-12)


def test_permutation_draws_are_uniform_subsets():
    """Six rows, each its own unit, three drawn: 20 subsets, 20,000 draws, 1,000 expected each.

    With 19 degrees of freedom the 1e-6 upper quantile of chi-square is ~61; a sampler favouring one
    subset by 20% adds ~40, a biased position hundreds."""
    y = np.zeros(6)
    space = permutation_space(y, np.arange(6) / 10.0, None, metrics=["accuracy"], threshold=0.5)
    draws = permutation_draws(space, np.array([3]), 7, 20_000)
    assert (draws.sum(axis=1) == 3).all() and draws.max() == 1
    keys, counts = np.unique(draws, axis=0, return_counts=True)
    assert len(keys) == math.comb(6, 3)
    assert float(np.sum((counts - 1000.0) ** 2 / 1000.0)) < 61.0


def test_permutation_chunks_hold_a_bounded_number_of_counts(monkeypatch):
    """A chunk of permutations holds at most CHUNK_ELEMENTS unit counts (a 1,000,000-row audit of continuous
    scores drew 4,096 x 1,000,000 counts at once: 32 GB). The chunks depend only on the data and
    n_permutations, so a test's draws do not depend on when the sequential rule stops it; with one stratum
    the first permutations are even the same however many are drawn (with strata, the last, shorter chunk
    draws each stratum's permutations with another size)."""
    from disaggregated_eval.engine import permutation

    assert [b - a for _, a, b in permutation._chunks(10_000, 1_000)][:7] == [64, 128, 256, 512, 1024, 2048, 4096]
    for n_units in (1_000, 20_000, 1_000_000):
        sizes = [b - a for _, a, b in permutation._chunks(10_000, n_units)]
        assert sum(sizes) == 10_000 and max(sizes) * n_units <= permutation.CHUNK_ELEMENTS
    assert max(b - a for _, a, b in permutation._chunks(10_000, 1_000_000)) == 8
    monkeypatch.setattr(permutation, "CHUNK_ELEMENTS", 2**12)  # 300 rows: chunks of 8
    rng = np.random.default_rng(2)
    space = permutation_space(np.zeros(300), rng.random(300), None, metrics=["auc"], threshold=0.5)
    many = permutation_draws(space, np.array([40]), 11, 200)
    assert (many.sum(axis=1) == 40).all() and many.max() == 1
    np.testing.assert_array_equal(permutation_draws(space, np.array([40]), 11, 37), many[:37])


def test_a_test_whose_design_has_no_rows_is_not_made():
    """Weighted precision permutes among the predicted positives of the two slices compared; where neither
    has one there is nothing to permute: no test (NaN, no test name), not a crash (an empty permutation
    space failed in the walk's layout)."""
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"y": rng.integers(0, 2, n), "g": rng.choice(["a", "b", "c"], n), "w": rng.gamma(2, 1, n)})
    df["p"] = np.where(df["g"].isin(["a", "b"]), 0.1, rng.random(n))  # a, b: no predicted positive
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", AuditWarning)
        r = audit(df, label="y", scores=["p"], groups=["g"], metrics=["precision"], sample_weight="w",
                  n_resamples=60, n_permutations=20)  # fmt: skip
    c = r.comparisons.set_index(["kind", "slice", "reference"])
    assert np.isnan(c.loc[("pairwise", "g=a", "g=b"), "p_value"]) and c.loc[("pairwise", "g=a", "g=b"), "test"] == ""


def test_permutation_draws_of_units_are_multivariate_hypergeometric():
    """Units of 3, 2 and 5 rows, 4 drawn: the unit counts' frequencies match the multivariate
    hypergeometric pmf (chi-square over the 11 outcomes, 20,000 draws; 1e-6 quantile with 10 df ~47)."""
    y = np.zeros(10)
    r = np.r_[np.full(3, 0.1), np.full(2, 0.2), np.full(5, 0.3)]
    space = permutation_space(y, r, None, metrics=["auc"], threshold=0.5)
    assert space.multiplicity.tolist() == [3, 2, 5]
    draws = permutation_draws(space, np.array([4]), 3, 20_000)
    outcomes, counts = np.unique(draws, axis=0, return_counts=True)
    expected = np.array(
        [math.comb(3, a) * math.comb(2, b) * math.comb(5, c) / math.comb(10, 4) for a, b, c in outcomes]
    )
    assert abs(expected.sum() - 1.0) < 1e-12
    assert float(np.sum((counts - 20_000 * expected) ** 2 / (20_000 * expected))) < 47.0


def test_sequential_tests_stop_early_when_the_p_value_is_large():
    df = _frame(n=400, rounded=True)
    y, r = df["y"].to_numpy(float), df["p"].to_numpy()
    space = permutation_space(y, r, None, metrics=["auc"], threshold=0.5, strata=y.astype(np.int64))
    first = space.first_counts(df["sex"].to_numpy() == "F")
    slots = metric_slots(["auc"])
    p, used = permutation_test(space, first, np.array([[1e-6], [1e-6]]), pairwise=False, fixed=np.zeros(1),
                               slots=slots, odds=1.0, n_permutations=5000, seed=1)  # fmt: skip
    # an observed difference of ~0 is matched at once: h exceedances in about h permutations
    assert (used <= 2 * SEQUENTIAL_EXCEEDANCES).all() and np.allclose(p, SEQUENTIAL_EXCEEDANCES / used)
    # a difference no permutation reaches (|AUC - 0| <= 1 < 5): every permutation is drawn, p = 1 / (P + 1)
    p, used = permutation_test(space, first, np.array([[5.0], [5.0]]), pairwise=False, fixed=np.zeros(1),
                               slots=slots, odds=1.0, n_permutations=500, seed=1)  # fmt: skip
    assert (used == 500).all() and np.allclose(p, 1 / 501)


def test_thread_count_does_not_change_p_values():
    df = _frame(n=500, weights=True, rounded=True)
    kwargs = dict(label="y", scores=["p"], groups=["race", "sex"], sample_weight="w", n_resamples=40,
                  n_permutations=400, min_group_size=0, min_denominator=0)  # fmt: skip
    one = audit(df, n_threads=1, **kwargs).comparisons
    two = audit(df, n_threads=2, **kwargs).comparisons
    np.testing.assert_array_equal(one["p_value"].to_numpy(), two["p_value"].to_numpy())


def test_too_few_permutations_for_the_family_are_raised_with_a_note():
    assert min_permutations(20, 0.05) == 399
    df = _frame()
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], metrics=["auc"], n_resamples=40,
                n_permutations=100, pairwise_max_levels=0)  # fmt: skip
    # the largest family: 11 slices vs overall (3 + 2 + 6); 11 / 0.05 - 1 = 219 permutations
    assert res.options.n_permutations == 219
    assert any("n_permutations raised from 100 to 219" in note for note in res.notes)
    # unweighted rates alone have exact tests: any number of permutations is enough
    res = audit(df, label="y", scores=["p"], groups=["race"], metrics=["false_positive_rate"], n_resamples=40,
                n_permutations=1)  # fmt: skip
    assert res.options.n_permutations == 1 and not any("raised" in note for note in res.notes)


def test_families_are_per_kind_and_metric_and_say_their_size():
    df = _frame()
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], metrics=["false_positive_rate", "accuracy"],
                n_resamples=40, n_permutations=0)  # fmt: skip
    assert res.comparisons["family_size"].eq(0).all()  # no tests, no families
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], metrics=["false_positive_rate", "accuracy"],
                n_resamples=40, n_permutations=1000, min_group_size=0, min_denominator=0)  # fmt: skip
    c = res.comparisons
    vs = c[(c["kind"] == "vs_overall") & (c["metric"] == "accuracy")]
    assert (vs["family_size"] == vs["p_value"].notna().sum()).all() and vs["family_size"].iloc[0] == 11
    scoped = audit(df, label="y", scores=["p"], groups=["race", "sex"], metrics=["false_positive_rate", "accuracy"],
                   n_resamples=40, n_permutations=1000, min_group_size=0, min_denominator=0,
                   adjust_scope="model").comparisons  # fmt: skip
    vs = scoped[scoped["kind"] == "vs_overall"]
    assert (vs["family_size"] == 22).all()


def test_audit_scope_adjusts_every_test_of_the_audit_in_one_family_and_the_first_screen_says_so():
    """adjust_scope='audit' (issue 33, item 6): one Holm family over every model, metric and kind; its size is every
    test with a p-value, and each adjusted p-value is Holm's over them all (partitioned with the certifications). The
    terminal summary and the report name the family on their first lines; the default names its per-metric ones."""
    from disaggregated_eval.audit.report import render_html
    from disaggregated_eval.verdicts import difference_verdicts

    df = _frame()
    df["q"] = np.clip(df["p"] + np.random.default_rng(5).normal(0, 0.3, len(df)), 0, 1).round().astype(int)
    common = dict(label="y", groups=["race", "sex"], metrics=["false_positive_rate", "accuracy"], n_resamples=40,
                  n_permutations=1000, min_group_size=0, min_denominator=0)  # fmt: skip
    res = audit(df, scores=["p", "q"], adjust_scope="audit", **common)
    c = res.comparisons
    tested = c[c["kind"].isin(["vs_overall", "vs_rest", "pairwise"])]
    n_tests = int(tested["p_value"].notna().sum())
    # 2 models x 2 metrics x (11 vs overall + 11 vs rest + pairs within race (3), sex (1) and the 6 cells (15))
    assert n_tests == 2 * 2 * (11 + 11 + 3 + 1 + 15) == 164
    assert (tested["family_size"] == n_tests).all()
    holm, holm_within = difference_verdicts(tested["p_value"].to_numpy(), tested["p_within"].to_numpy(), alpha=0.05,
                                            method="holm")  # fmt: skip
    np.testing.assert_allclose(tested["p_adjusted"].to_numpy(), holm, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tested["p_within_adjusted"].to_numpy(), holm_within, rtol=0, atol=1e-15)
    text = res.summary(width=400)
    line = ("flags: Holm over the whole audit (164 tests: every model, metric and kind of comparison in one family; "
            "family-wise error at most 0.05 over the audit)")  # fmt: skip
    assert line in text.splitlines()
    assert "adjustment within the family of 164 tests of the whole audit" in text
    assert f'<span data-run="flags">{line}.</span></p>' in render_html(res, figures={}, summary=text)
    default = audit(df, scores=["p", "q"], **common)
    tested = default.comparisons[default.comparisons["kind"] != "vs_model"]
    assert (tested.groupby(["model", "metric", "kind"])["family_size"].max().to_dict()
            == {(m, q, k): size for m in ("p", "q") for q in common["metrics"]
                for k, size in (("vs_overall", 11), ("vs_rest", 11), ("pairwise", 19))})  # fmt: skip
    assert ("flags: Holm within each (model, metric, kind) family of 11 to 19 tests (12 families; family-wise error "
            "at most 0.05 in each, not over the audit: --adjust-scope audit for one family)"
            in default.summary(width=400).splitlines())  # fmt: skip


def test_adjust_scope_audit_is_an_option_and_a_bad_scope_names_the_choices():
    from disaggregated_eval.audit.errors import AuditInputError
    from disaggregated_eval.audit.options import AuditOptions, options_from_mapping, resolve_options

    base = AuditOptions(label="y", scores=["p"], groups=["race"])
    assert resolve_options(base, {"adjust_scope": "audit"}).adjust_scope == "audit"
    assert options_from_mapping({"adjust_scope": "audit"}, source="audit.yaml")["adjust_scope"] == "audit"
    with pytest.raises(AuditInputError, match=r"adjust_scope must be one of 'metric', 'model', 'audit'; got 'audits'"):
        resolve_options(base, {"adjust_scope": "audits"})


def test_pairwise_comparisons_only_within_small_families_unless_asked():
    df = _frame()
    df["zip"] = np.random.default_rng(1).choice([f"z{i}" for i in range(20)], len(df))
    res = audit(df, label="y", scores=["p"], groups=["race", "zip"], intersections=1, metrics=["accuracy"],
                n_resamples=40, n_permutations=0)  # fmt: skip
    pairs = res.comparisons[res.comparisons["kind"] == "pairwise"]
    assert set(pairs["slice"].str.split("=").str[0]) == {"race"}  # zip has 20 levels > 12
    assert any(n.startswith("no pairwise comparisons within zip (20 slices)") for n in res.notes), res.notes
    res = audit(df, label="y", scores=["p"], groups=["race", "zip"], intersections=1, metrics=["accuracy"],
                n_resamples=40, n_permutations=0, pairwise_max_levels=None)  # fmt: skip
    pairs = res.comparisons[res.comparisons["kind"] == "pairwise"]
    assert len(pairs) == 3 + 20 * 19 // 2
    assert not any("no pairwise comparisons" in n for n in res.notes)


def test_net_benefit_uses_the_decision_threshold_unless_a_preference_threshold_is_given():
    df = _frame()
    base = dict(label="y", scores=["p"], groups=["race"], metrics=["net_benefit"], n_resamples=40, n_permutations=0)
    one = audit(df, threshold=0.3, **base).slices.set_index("slice")["estimate"]
    y, r = df["y"].to_numpy(float), df["p"].to_numpy()
    tp = np.sum((r >= 0.3) & (y == 1))
    fp = np.sum((r >= 0.3) & (y == 0))
    assert one["overall"] == pytest.approx((tp - fp * 0.3 / 0.7) / len(y), abs=1e-12)
    two = audit(df, threshold=0.3, preference_threshold=0.5, **base).slices.set_index("slice")["estimate"]
    assert two["overall"] == pytest.approx((tp - fp) / len(y), abs=1e-12)


def test_grouped_jackknife_acceleration_equals_the_one_group_formula():
    from disaggregated_eval.intervals import grouped_jackknife_acceleration, jackknife_acceleration

    rng = np.random.default_rng(7)
    codes = rng.integers(0, 4, 300)
    loo = rng.gamma(2.0, 1.0, 300)
    loo[::17] = np.nan  # rows that do not count
    codes[codes == 3] = 2  # group 3 is empty: no values, acceleration 0
    got = grouped_jackknife_acceleration(loo, codes, 4)
    want = [jackknife_acceleration(loo[codes == g]) if (codes == g).any() else 0.0 for g in range(4)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)
    assert got[3] == 0.0 and np.all(got[:3] != 0.0)


def test_bca_counts_a_replicate_equal_to_the_estimate_but_for_rounding_as_a_tie():
    # A replicate whose sums are the estimate's added in another order differs from it in the last bits:
    # counted as below or above, it moved the bias correction and a BCa bound by 1e-2 between two walks of
    # the same audit that differ only in their order of additions. 30 of 60 replicates tie the estimate.
    from disaggregated_eval.intervals import bca_interval

    rng = np.random.default_rng(3)
    estimate = 0.6931471805599453
    spread = estimate + rng.normal(0, 0.05, 30)
    exact = np.concatenate([np.full(30, estimate), spread])[:, None]
    jitter = exact.copy()
    jitter[:30, 0] = estimate * (1 + rng.choice([-1, 1], 30) * rng.integers(1, 4, 30) * 2.2e-16)
    assert (jitter[:30, 0] != estimate).sum() > 20
    want = bca_interval(exact, np.array([estimate]), np.array([0.02]), 0.95)
    for reps, est in ((jitter, estimate), (exact, estimate * (1 + 4.4e-16))):
        got = bca_interval(reps, np.array([est]), np.array([0.02]), 0.95)
        np.testing.assert_allclose(np.ravel(got), np.ravel(want), rtol=1e-13)


def test_score_strata_keep_few_score_values_apart():
    def score_strata(scores):
        return score_bins(scores, SCORE_STRATA)[0]

    two = np.array([0.15, 0.75, 0.75, 0.15, 0.75])
    np.testing.assert_array_equal(score_strata(two), [0, 1, 1, 0, 1])  # quantile bins would merge them
    many = np.random.default_rng(3).random(1000)
    strata = score_strata(many)
    assert np.unique(strata).size == SCORE_STRATA
    # increasing in the score: a stratum's scores all lie below the next stratum's
    assert all(many[strata == k].max() < many[strata == k + 1].min() for k in range(SCORE_STRATA - 1))
