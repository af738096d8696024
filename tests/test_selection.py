"""Tests of evaluation under selection (disaggregated_eval.selection, disaggregated_eval.selection_study).

Exact checks fix the definitions: the bounds at Gamma = 1 are the estimate (bit for bit), they nest as
Gamma grows, the threshold rule agrees with scipy's linear programme, the margin weights reproduce the
margins, the per-resample reweighting equals a direct computation with compute_metrics, and without
margins the estimates and intervals are those of evaluation.controlled_evaluation on the same seed.
The coverage of the full-population truth is the study's job (target `selection`, docs/method.md);
here one large selected sample checks identification by the (A, Y) margins against the truth.
"""

from __future__ import annotations

import itertools
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import optimize

from disaggregated_eval import evaluation, intervals, selection, selection_study, simulate, vocabulary
from disaggregated_eval.engine import resample_counts
from disaggregated_eval.metrics import compute_metrics
from disaggregated_eval_workflow.config import ConfigError, validate_config

REPO = Path(__file__).resolve().parents[1]
GROUPS = vocabulary.SIMULATION_GROUP_LABELS


def _sample(n=600, seed=3, setting="selection_ya"):
    test = simulate.selected_test_set(setting, n_test=n, seed=seed)
    scores = simulate.bayes_scores(setting, test)["bayes_xa"].to_numpy()
    return test["y"].to_numpy(), scores, test["a"].to_numpy()


# ---- the bounds over a box ------------------------------------------------------------------
def _linprog_bounds(h, w, gamma):
    """min and max of sum v h / sum v over v in [w / gamma, w gamma] by Charnes-Cooper + linprog.

    Variables z = t v (n) and t: max h.z subject to sum z = 1, z - t w gamma <= 0, t w / gamma - z <= 0.
    """
    n = h.size
    a_ub = np.zeros((2 * n, n + 1))
    a_ub[:n, :n] = np.eye(n)
    a_ub[:n, n] = -w * gamma
    a_ub[n:, :n] = -np.eye(n)
    a_ub[n:, n] = w / gamma
    a_eq = np.r_[np.ones(n), 0.0][None, :]
    out = []
    for sign in (1.0, -1.0):
        res = optimize.linprog(np.r_[sign * h, 0.0], A_ub=a_ub, b_ub=np.zeros(2 * n), A_eq=a_eq, b_eq=[1.0],
                               bounds=[(0, None)] * (n + 1), method="highs")  # fmt: skip
        assert res.status == 0
        out.append(sign * res.fun)
    return out[0], out[1]


def test_threshold_rule_equals_linprog_on_small_problems():
    """200 random problems (continuous and tied values, 1-12 rows): equal to the LP optimum within 1e-8
    (HiGHS' default feasibility tolerance is 1e-7 relative; the problems are scaled to O(1))."""
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(1, 13))
        h = rng.integers(0, 3, n).astype(float) if trial % 2 else rng.normal(size=n)
        w = rng.exponential(size=n) + 0.05
        gamma = float(rng.uniform(1.01, 5.0))
        _, low, high = selection.ratio_bounds(h, w, [gamma])
        lp_low, lp_high = _linprog_bounds(h, w, gamma)
        assert low[0] == pytest.approx(lp_low, abs=1e-8)
        assert high[0] == pytest.approx(lp_high, abs=1e-8)


def test_bounds_at_one_are_the_estimate_and_widen_with_gamma():
    rng = np.random.default_rng(1)
    h = rng.normal(size=500)
    w = rng.exponential(size=(40, 500))  # 40 "resamples"
    gammas = [1.0, 1.05, 1.2, 1.5, 2.0, 4.0, 10.0]
    estimate, low, high = selection.ratio_bounds(h, w, gammas)
    direct = (w * h).sum(axis=1) / w.sum(axis=1)
    assert np.array_equal(low[0], estimate) and np.array_equal(high[0], estimate)
    np.testing.assert_allclose(estimate, direct, rtol=0, atol=1e-14)
    assert (np.diff(low, axis=0) <= 0).all() and (np.diff(high, axis=0) >= 0).all()
    assert (high[1:] - low[1:] > 0).all()
    # a binary value: the odds move by exactly Gamma^2 (closed form of the threshold rule)
    y = (rng.random(300) < 0.3).astype(float)
    p = y.mean()
    _, lo2, hi2 = selection.ratio_bounds(y, np.ones(300), [2.0])
    odds = p / (1 - p)
    assert hi2[0] == pytest.approx(4 * odds / (1 + 4 * odds), rel=1e-12)
    assert lo2[0] == pytest.approx((odds / 4) / (1 + odds / 4), rel=1e-12)


def test_bounds_of_empty_or_weightless_slices_are_undefined():
    estimate, low, high = selection.ratio_bounds(np.zeros(0), np.zeros(0), [2.0])
    assert np.isnan(estimate) and np.isnan(low).all() and np.isnan(high).all()
    estimate, low, high = selection.ratio_bounds(np.ones(3), np.zeros(3), [2.0])
    assert np.isnan(estimate) and np.isnan(high).all()


def test_difference_bounds_through_the_rest_hold_every_vertex_and_are_tighter():
    """T = metric(slice) - metric(overall) at every vertex of the box (2^n weight vectors, n <= 10) and at
    500 random points inside it lies within the bounds; the bounds (the intersection of
    the bounds through the rest with the plain combination, which gives the slice's rows two weights at
    once) are never wider than the plain ones and narrower in the median."""
    from disaggregated_eval.selection import _difference, _SortedSums

    rng = np.random.default_rng(6)
    narrower = []
    for trial in range(120):
        n = int(rng.integers(3, 11))
        h = rng.normal(size=n) if trial % 2 else rng.integers(0, 2, n).astype(float)
        w = rng.exponential(size=n) + 0.05
        mask = np.zeros(n, dtype=bool)
        mask[: int(rng.integers(1, n))] = True
        rng.shuffle(mask)
        gamma = float(rng.uniform(1.05, 3.0))
        whole, part, rest = _SortedSums(h, w), _SortedSums(h[mask], w[mask]), _SortedSums(h[~mask], w[~mask])
        low, high = _difference(part, whole, rest)(gamma)
        plain_low, plain_high = _difference(part, whole)(gamma)
        vertices = np.array(list(itertools.product([1 / gamma, gamma], repeat=n))) * w
        inside = np.exp(rng.uniform(-np.log(gamma), np.log(gamma), size=(500, n))) * w
        vertices = np.vstack([vertices, inside])
        t = (vertices[:, mask] * h[mask]).sum(1) / vertices[:, mask].sum(1) - (vertices * h).sum(1) / vertices.sum(1)
        assert t.min() >= low - 1e-12 and t.max() <= high + 1e-12
        assert plain_low <= low + 1e-12 and high <= plain_high + 1e-12
        if plain_high > plain_low:
            narrower.append((high - low) / (plain_high - plain_low))
    assert np.median(narrower) < 0.9


@pytest.mark.parametrize("bad", [[0.5], [1.5, 1.2], [1.0, 1.0], [float("inf")], [], "2", [True]])
def test_bad_gammas_are_named(bad):
    with pytest.raises(ValueError, match="gammas"):
        selection.check_gammas(bad)


def test_breakdown_gamma_is_where_the_interval_reaches_zero():
    calls = []

    def interval(gamma):  # a difference of 0.2 whose interval widens like 0.1 * gamma^2
        calls.append(gamma)
        return 0.2 - 0.1 * gamma**2, 0.2 + 0.1 * gamma**2

    found = selection.breakdown_gamma(interval, rtol=1e-4)
    assert found == pytest.approx(math.sqrt(2.0), rel=1e-4) and found >= math.sqrt(2.0)
    assert len(calls) < 40
    assert math.isnan(selection.breakdown_gamma(lambda g: (-0.1, 0.3)))  # not flagged at Gamma = 1
    assert selection.breakdown_gamma(lambda g: (0.5, 0.6)) == math.inf  # survives GAMMA_MAX


# ---- metrics as weighted means ------------------------------------------------------------
@pytest.mark.parametrize("metric", selection.BOUNDED_METRICS)
def test_metric_row_values_reproduce_compute_metrics(metric):
    rng = np.random.default_rng(2)
    y = (rng.random(400) < 0.4).astype(float)
    scores = rng.random(400)
    w = rng.exponential(size=400)
    h, b = selection.metric_row_values(metric, y, scores, threshold=0.4, preference_threshold=0.3)
    expected = compute_metrics(y, scores, sample_weight=w, threshold=0.4, preference_threshold=0.3, metrics=[metric])
    assert (w * b * h).sum() / (w * b).sum() == pytest.approx(expected[metric], rel=1e-12)


def test_auc_has_no_bounds():
    with pytest.raises(ValueError, match="'auc' has no sensitivity bounds"):
        selection.metric_row_values("auc", [0, 1], [0.2, 0.8])


# ---- margin weights --------------------------------------------------------------------------
def test_poststratification_reproduces_the_margins_and_keeps_rates_given_y():
    y, scores, a = _sample()
    cells = 2 * a + y
    target = np.array([0.3, 0.2, 0.1, 0.4])
    w = selection.poststratification_weights(cells, target)
    np.testing.assert_allclose(np.bincount(cells, weights=w) / w.sum(), target, atol=1e-12)
    assert w.mean() == pytest.approx(1.0, abs=1e-12)
    for g in (0, 1):  # rates given Y do not move within a group; the label rate becomes P_target(Y | A)
        rows = a == g
        plain = compute_metrics(y[rows], scores[rows], metrics=["sensitivity", "false_positive_rate"])
        weighted = compute_metrics(y[rows], scores[rows], sample_weight=w[rows], metrics=["sensitivity",
                                   "false_positive_rate", "label_rate"])  # fmt: skip
        assert weighted["sensitivity"] == pytest.approx(plain["sensitivity"], abs=1e-12)
        assert weighted["false_positive_rate"] == pytest.approx(plain["false_positive_rate"], abs=1e-12)
        assert weighted["label_rate"] == pytest.approx(target[2 * g + 1] / target[2 * g : 2 * g + 2].sum(), abs=1e-12)
    assert selection.effective_sample_size(np.ones(10)) == 10.0
    assert selection.effective_sample_size(w) < len(w)


def test_raking_meets_every_margin_and_equals_poststratification_for_one_margin():
    rng = np.random.default_rng(4)
    mass = rng.integers(20, 200, size=6).astype(float)  # joint cells of race (3) x sex (2)
    race, sex = np.repeat([0, 1, 2], 2), np.tile([0, 1], 3)
    margins = [(race, [0.5, 0.3, 0.2]), (sex, [0.45, 0.55])]
    w = selection.raking_weights(mass, margins)
    weighted = mass * w / (mass * w).sum()
    np.testing.assert_allclose(np.bincount(race, weights=weighted), [0.5, 0.3, 0.2], atol=1e-9)
    np.testing.assert_allclose(np.bincount(sex, weights=weighted), [0.45, 0.55], atol=1e-9)
    one = selection.raking_weights(mass, [(np.arange(6), np.full(6, 1 / 6))])
    np.testing.assert_allclose(one, (1 / 6) / (mass / mass.sum()), rtol=1e-12)
    stacked = selection.raking_weights(np.vstack([mass, 2 * mass]), margins)  # resamples at once
    np.testing.assert_allclose(stacked[1], w, rtol=1e-9)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ([0.5, 0.4], r"must sum to 1 .* they sum to 0\.9"),
        ([1.0, 0.0], r"the share of A = 1 is 0 but the data have rows there"),
        ([0.5, -0.1], r"must be finite numbers >= 0; got -0\.1 for A = 1"),
        ([0.3, 0.3, 0.4], r"A = 2 has a share of 0\.4 in the target but no row in the data"),
    ],
)
def test_bad_margins_get_a_clear_error(target, message):
    a = np.array([0, 1, 1, 0])
    with pytest.raises(ValueError, match=message):
        selection.poststratification_weights(a, target, labels=["A = 0", "A = 1", "A = 2"][: len(target)])


# ---- the analysis -----------------------------------------------------------------------------
def test_without_margins_gamma_one_reproduces_controlled_evaluation():
    """Same seed, same resamples: estimates and percentile intervals of the slices, the overall metric
    and T_a (control none) equal the pipeline's to 1e-12 (the engine adds in score order, this module in
    value order)."""
    y, scores, a = _sample()
    metrics = list(selection_study.METRICS)
    ours = selection.selection_analysis(y, scores, {GROUPS[0]: a == 0, GROUPS[1]: a == 1}, gammas=[2.0],
                                        metrics=metrics, n_resamples=100, seed=9)  # fmt: skip
    theirs = evaluation.controlled_evaluation(y, a, {"m": scores}, weights=None, group_labels=GROUPS, metrics=metrics,
                                              n_resamples=100, seed=9, shared_space=False)  # fmt: skip
    ones = ours[ours["gamma"] == 1.0]
    for bound, value in (("bound_low", "estimate"), ("bound_high", "estimate"), ("bound_ci_low", "ci_low"),
                         ("bound_ci_high", "ci_high")):  # fmt: skip
        assert np.array_equal(ones[bound].to_numpy(), ones[value].to_numpy(), equal_nan=True)
    pairs = [("absolute", GROUPS[0], GROUPS[0], "metric"), ("absolute", GROUPS[1], GROUPS[1], "metric"),
             ("absolute", "overall", "overall", "metric"), ("controlled_difference", GROUPS[0], GROUPS[0], "difference"),
             ("controlled_difference", GROUPS[1], GROUPS[1], "difference")]  # fmt: skip
    for comparison, group, name, quantity in pairs:
        a_rows = theirs[(theirs["comparison"] == comparison) & (theirs["group"] == group)].set_index("metric")
        b_rows = ones[(ones["slice"] == name) & (ones["quantity"] == quantity)].set_index("metric")
        for column in ("estimate", "ci_low", "ci_high"):
            np.testing.assert_allclose(b_rows.loc[metrics, column], a_rows.loc[metrics, column], rtol=0, atol=1e-12)


def test_reweighting_on_every_resample_equals_a_direct_computation():
    """The corrected interval: on each resample, the cell weights from that resample's own cell shares
    and compute_metrics with sample_weight = count x weight; percentiles of those equal the table's."""
    y, scores, a = _sample(n=400)
    cells = 2 * a + y
    target = selection_study.target_shares("selection_ya", "AY")
    out = selection.selection_analysis(y, scores, {GROUPS[0]: a == 0, GROUPS[1]: a == 1}, gammas=[1.5],
                                       cells=cells, target_shares=target, metrics=["precision", "label_rate"],
                                       n_resamples=60, seed=5, breakdown=False)  # fmt: skip
    counts = resample_counts(len(y), seed=5, start=0, stop=60)
    values = {("overall", m): [] for m in ("precision", "label_rate")}
    values |= {(GROUPS[0], m): [] for m in ("precision", "label_rate")}
    for row in counts:
        share = np.bincount(cells, weights=row, minlength=4) / row.sum()
        w = row * (target / share)[cells]
        for m in ("precision", "label_rate"):
            values[("overall", m)].append(compute_metrics(y, scores, sample_weight=w, metrics=[m])[m])
            keep = a == 0
            values[(GROUPS[0], m)].append(compute_metrics(y[keep], scores[keep], sample_weight=w[keep], metrics=[m])[m])
    for (name, m), reps in values.items():
        row = out[(out["slice"] == name) & (out["metric"] == m) & (out["quantity"] == "metric") & (out["gamma"] == 1)]
        low, high = np.nanpercentile(reps, [2.5, 97.5])  # over the resamples where it is defined
        assert row["ci_low"].iloc[0] == pytest.approx(low, abs=1e-12)
        assert row["ci_high"].iloc[0] == pytest.approx(high, abs=1e-12)
    direct = selection.poststratification_weights(cells, target)
    row = out[(out["slice"] == "overall") & (out["metric"] == "label_rate") & (out["gamma"] == 1)].iloc[0]
    assert row["estimate"] == pytest.approx(target[1] + target[3], abs=1e-12)  # the target's prevalence
    assert row["effective_n"] == pytest.approx(selection.effective_sample_size(direct), rel=1e-12)


def test_bound_intervals_contain_the_bounds_and_breakdown_matches_them():
    y, scores, a = _sample(n=800, setting="selection_y")
    out = selection.selection_analysis(y, scores, {GROUPS[0]: a == 0, GROUPS[1]: a == 1}, gammas=[1.02, 1.1, 1.5],
                                       metrics=["label_rate"], n_resamples=100, seed=2)  # fmt: skip
    assert (out["bound_ci_low"] <= out["bound_low"] + 1e-12).all()
    assert (out["bound_ci_high"] >= out["bound_high"] - 1e-12).all()
    diff = out[(out["quantity"] == "difference") & (out["slice"] == GROUPS[1])]
    crossing = diff["breakdown_gamma"].iloc[0]
    assert 1.0 < crossing < 1.5  # flagged at Gamma = 1, explained away by Gamma = 1.5
    for gamma in diff["gamma"]:
        row = diff[diff["gamma"] == gamma].iloc[0]
        reaches = row["bound_ci_low"] <= 0 <= row["bound_ci_high"]
        assert reaches == (gamma >= crossing)


def test_a_one_sided_band_of_an_interval_with_equal_ends_is_the_two_sided_band():
    reps = np.random.default_rng(5).normal(size=(2000, 6)) @ np.triu(np.ones((6, 6))) * 0.1  # correlated columns
    every = np.ones(6, dtype=bool)
    two_sided = intervals.band_level(reps, every, 0.95)
    # each column as the lower end (checked from below) and the upper end (from above) of one interval
    doubled = np.concatenate([reps, reps], axis=1)
    sides = np.repeat([-1, 1], 6)
    assert intervals.band_level(doubled, np.ones(12, dtype=bool), 0.95, sides=sides) == two_sided
    assert 0.95 < two_sided < 1.0
    # checking one end only leaves more replicates inside: a level no higher than the two-sided one
    assert intervals.band_level(reps, every, 0.95, sides=np.ones(6)) <= two_sided
    with pytest.raises(ValueError, match="sides must be -1, 0 or \\+1"):
        intervals.band_level(reps, every, 0.95, sides=np.full(6, 2))


def _null_slices(n=1200, k=8, seed=0):
    """``n`` rows, ``k`` disjoint slices of one population (no difference from overall is real)."""
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(float)
    scores = np.clip(0.4 + 0.25 * (y - 0.4) + rng.normal(0, 0.2, n), 0.01, 0.99)
    part = rng.integers(0, k, n)
    return y, scores, {f"s{j}": part == j for j in range(k)}


def test_family_wise_breakdown_claims_keep_their_error_per_analysis():
    # 8 slices whose differences from overall are all 0: claimed one by one, some difference is claimed in about a
    # third of the analyses; as one family, in at most about 5% of them
    any_each, any_family = 0, 0
    for seed in range(40):
        y, scores, slices = _null_slices(seed=seed)
        out = selection.selection_analysis(y, scores, slices, gammas=[1.5], metrics=["label_rate"], n_resamples=1000,
                                           seed=seed, family_wise=True)  # fmt: skip
        diff = out[(out["quantity"] == "difference") & (out["gamma"] == 1.0)]
        assert diff["band_level"].nunique() == 1 and 0.99 < diff["band_level"].iloc[0] < 1.0
        any_each += bool(((diff["ci_low"] > 0) | (diff["ci_high"] < 0)).any())  # each difference's own interval
        any_family += bool(diff["breakdown_gamma"].notna().any())
    assert any_each >= 10  # about 30% of 40 analyses (the differences share overall's rows: correlated)
    assert any_family <= 6  # binomial(40, 0.05): P(more than 6) < 0.001


def test_family_wise_band_is_the_common_level_of_the_members_and_sets_the_breakdown():
    y, scores, a = _sample(n=1500, setting="selection_y")
    slices = {GROUPS[0]: a == 0, GROUPS[1]: a == 1}
    kwargs = dict(gammas=[1.02, 1.1, 1.5], metrics=["label_rate", "sensitivity", "precision"], n_resamples=400, seed=2)
    each = selection.selection_analysis(y, scores, slices, **kwargs)
    family = selection.selection_analysis(y, scores, slices, family_wise=True, **kwargs)
    same = [c for c in selection.RESULT_COLUMNS if c not in ("bound_band_low", "bound_band_high", "band_level",
                                                              "breakdown_gamma")]  # fmt: skip
    pd.testing.assert_frame_equal(each[same], family[same])  # estimates, bounds and their own intervals unchanged
    diff = family[family["quantity"] == "difference"]
    levels = diff["band_level"].unique()
    assert levels.size == 1 and 0.95 < levels[0] < 1.0  # one level for the 6 differences, above each one's own
    assert family.loc[family["quantity"] == "metric", "band_level"].isna().all()
    assert (diff["bound_band_low"] <= diff["bound_ci_low"] + 1e-12).all()
    assert (diff["bound_band_high"] >= diff["bound_ci_high"] - 1e-12).all()
    # one difference at a time: the band is its own interval at the analysis's confidence
    own = each[each["quantity"] == "difference"]
    assert (own["band_level"] == 0.95).all() and np.array_equal(own["bound_band_low"], own["bound_ci_low"])
    # the breakdown is where the family's band reaches 0, never later than where the difference's own interval does
    claimed = diff[diff["breakdown_gamma"].notna()]
    assert len(claimed) > 0
    for (name, metric), rows in claimed.groupby(["slice", "metric"]):
        crossing = rows["breakdown_gamma"].iloc[0]
        alone = own[(own["slice"] == name) & (own["metric"] == metric)]["breakdown_gamma"].iloc[0]
        assert crossing <= alone
        for row in rows.itertuples():
            assert (row.bound_band_low <= 0 <= row.bound_band_high) == (row.gamma >= crossing)
    # a difference whose slice has too few rows in the metric's denominator is not in the family
    fewer = selection.selection_analysis(y, scores, slices, family_wise=True, min_denominator=10**6, **kwargs)
    assert fewer["breakdown_gamma"].isna().all() and fewer["band_level"].isna().all()


def test_bad_inputs_of_the_analysis_are_named():
    y, scores, a = _sample(n=100)
    with pytest.raises(ValueError, match="slice 'empty' has no rows"):
        selection.selection_analysis(y, scores, {"empty": np.zeros(100, bool)}, gammas=[2.0], seed=1)
    with pytest.raises(ValueError, match="cells and target_shares go together"):
        selection.selection_analysis(y, scores, {"g": a == 0}, gammas=[2.0], cells=a, seed=1)
    with pytest.raises(ValueError, match="'auc' has no sensitivity bounds"):
        selection.selection_analysis(y, scores, {"g": a == 0}, gammas=[2.0], metrics=["auc"], seed=1)


# ---- the simulation's truth ---------------------------------------------------------------
def test_selected_test_sets_have_their_own_seed_branch():
    first = simulate.selected_test_set("selection_y", n_test=50, seed=1)
    again = simulate.selected_test_set("selection_y", n_test=50, seed=1)
    other = simulate.selected_test_set("selection_y", n_test=50, seed=1, replicate=0)
    pd.testing.assert_frame_equal(first, again)
    assert not first.equals(other)
    _, full = simulate.simulate_setting("selection_y", n_train=50, n_test=50, seed=1)
    assert not first.equals(full)
    with pytest.raises(ValueError, match="needs a selection setting"):
        simulate.selected_test_set("covariate_shift", n_test=5, seed=1)


def test_true_selection_strength():
    dgp = simulate.get_dgp("selection_y")
    pi0 = np.array([0.4 + 0.4 * dgp.prevalence(a) for a in (0, 1)])  # s = 0.4 (y = 0), 0.8 (y = 1)
    strength = selection_study.selection_strength("selection_y", "A")
    assert strength["gamma_box"] == pytest.approx(math.sqrt((pi0.max() / 0.4) / (pi0.min() / 0.8)), rel=1e-9)
    odds = lambda p: p / (1 - p)
    expected = max(odds(p) / odds(s) if p > s else odds(s) / odds(p) for p in pi0 for s in (0.4, 0.8))
    assert strength["gamma_msm"] == pytest.approx(expected, rel=1e-9)
    for setting in ("selection_y", "selection_ya"):  # identified by P(A, Y)
        assert selection_study.selection_strength(setting, "AY") == {"gamma_msm": 1.0, "gamma_box": 1.0,
                                                                      "excluded_mass": 0.0}  # fmt: skip
    positivity = selection_study.selection_strength("selection_x", "AY")
    assert positivity["gamma_box"] == math.inf and positivity["gamma_msm"] == math.inf
    trimmed = selection_study.selection_strength("selection_x", "AY", min_selection=0.05)
    assert math.isfinite(trimmed["gamma_box"]) and 0.1 < trimmed["excluded_mass"] < 0.3


def test_gamma_star_closed_forms_and_errors():
    # one cell with pi_0 = 0.5 and rows selected with probability 0.25 or 0.5: Tan's model needs the odds
    # ratio odds(0.5) / odds(0.25) = 3; the weights 1 / s = 4, 2 lie in a box around w from sqrt(4 / 2) on
    out = selection.gamma_star([0.5, 0.5], [0.25, 0.5])
    assert out["gamma_msm"] == pytest.approx(3.0, rel=1e-12) and out["gamma_box"] == pytest.approx(
        math.sqrt(2), rel=1e-12
    )
    assert selection.gamma_star([0.3, 0.6], [0.3, 0.6]) == {"gamma_msm": 1.0, "gamma_box": 1.0}  # s = pi_0: identified
    assert selection.gamma_star([0.4, 0.4], [0.0, 0.8]) == {"gamma_msm": math.inf, "gamma_box": math.inf}  # positivity
    with pytest.raises(ValueError, match="equal, non-zero length"):
        selection.gamma_star([0.5], [0.5, 0.4])
    with pytest.raises(ValueError, match=r"cell_probability must lie in \(0, 1\]; got 0.0"):
        selection.gamma_star([0.0], [0.5])
    with pytest.raises(ValueError, match=r"probability must lie in \[0, 1\]; got 1.5"):
        selection.gamma_star([0.5], [1.5])


@pytest.mark.slow
def test_margins_of_a_and_y_identify_the_full_population_under_selection_on_y_and_a():
    """selection_ya depends on (A, Y) only: weighted to the target's P(A, Y), a 40,000-row selected
    sample estimates every full-population metric and T_a within 4.5 of its bootstrap standard errors
    (half the 95% interval's width / 1.96); the naive estimate of the label rate is off by more than 10
    of them (P(S | A, Y) favours y = 0: the selected prevalence is too low)."""
    setting = "selection_ya"
    test = simulate.selected_test_set(setting, n_test=40_000, seed=8)
    y, a = test["y"].to_numpy(), test["a"].to_numpy()
    scores = simulate.bayes_scores(setting, test)["bayes_xa"].to_numpy()
    truth = selection_study.population_truth(setting, models=["bayes_xa"])
    slices = {GROUPS[0]: a == 0, GROUPS[1]: a == 1}
    common = dict(gammas=[2.0], metrics=list(selection_study.METRICS), n_resamples=200, seed=3, breakdown=False)
    corrected = selection.selection_analysis(y, scores, slices, cells=2 * a + y,
                                             target_shares=selection_study.target_shares(setting, "AY"), **common)  # fmt: skip
    naive = selection.selection_analysis(y, scores, slices, **common)
    keys = ["slice", "metric", "quantity"]
    for table, bound in ((corrected, 4.5), (naive, None)):
        rows = table[table["gamma"] == 1.0].merge(truth, on=keys)
        z = (rows["estimate"] - rows["truth"]).abs() / ((rows["ci_high"] - rows["ci_low"]) / (2 * 1.96))
        if bound is not None:
            assert (z < bound).all(), rows.assign(z=z)[[*keys, "estimate", "truth"]]
        else:
            label = (rows["slice"] == "overall") & (rows["metric"] == "label_rate")
            assert z[label].iloc[0] > 10


# ---- configuration and workflow -----------------------------------------------------------
def test_selection_study_config_is_checked():
    with pytest.raises(ConfigError, match=r"selection_study.gammas must be increasing"):
        validate_config({"selection_study": {"gammas": [2, 1.5]}})
    with pytest.raises(ConfigError, match=r"selection_study.jobs_per_setting must be at most"):
        validate_config({"selection_study": {"n_replicates": 2, "jobs_per_setting": 3}})
    with pytest.raises(ConfigError, match=r"selection_study.settings contains unknown name\(s\) 'covariate_shift'"):
        validate_config({"selection_study": {"settings": ["covariate_shift"]}})
    with pytest.raises(ConfigError, match=r"selection_study.gammas"):
        validate_config({"selection_study": {"gammas": [0.5]}})


@pytest.mark.slow
def test_selection_target_tiny(tmp_path):
    """`snakemake selection` on tests/fixtures/tiny.yaml (selection_ya, 3 replicates of 300 rows, 30
    resamples, 2 jobs): the tables, Gamma*, the figure, the report caption; a second run has nothing to do."""
    for name in ("Snakefile", "workflow", "config", "src", "profiles"):
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=(REPO / name).is_dir())
    tiny = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny.yaml").read_text())
    cmd = [sys.executable, "-m", "snakemake", "selection", "--cores", "2", "--configfile",
           str(REPO / "tests" / "fixtures" / "tiny.yaml"), "--directory", str(tmp_path)]  # fmt: skip
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    tables = tmp_path / "results" / "tables"
    table = pd.read_csv(tables / "selection_coverage.csv", keep_default_na=False, na_values=[""])
    assert list(table.columns) == list(selection_study.COVERAGE_COLUMNS)
    assert set(table["dataset"]) == {"selection_ya"} and set(table["margins"]) == set(selection_study.MARGINS)
    assert sorted(set(table["gamma"])) == [1.0, 1.5, 3.0]
    assert table.loc[table["caveat"].isna(), "n_replicates"].max() == tiny["selection_study"]["n_replicates"]
    summary = pd.read_csv(tables / "selection_summary.csv")
    assert list(summary.columns) == list(selection_study.SUMMARY_COLUMNS)
    strength = pd.read_csv(tables / "selection_strength.csv")
    ay = strength[(strength["margins"] == "AY") & (strength["min_selection"] == 0)]
    assert ay["gamma_box"].iloc[0] == 1.0 and bool(summary.loc[summary["margins"] == "AY", "identified"].all())
    for ext in ("png", "pdf"):
        assert (tmp_path / "figures" / "simulation" / f"selection_bounds_selection_ya.{ext}").stat().st_size > 1000
    log = (tmp_path / "logs" / "selection_replicates" / "selection_ya_part_0.log").read_text()
    assert "replicates [0, 2]" in log
    again = subprocess.run([*cmd, "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "Nothing to be done" in again.stdout + again.stderr
