"""Tests of calibration curves (paper Supplementary A.3): binning, Wilson intervals, ties, validation."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from disaggregated_eval.calibration import (
    CALIBRATION_COLUMNS,
    calibration_curve,
    calibration_table,
)


@pytest.fixture
def data():
    rng = np.random.default_rng(20240501)
    n = 1_000
    scores = rng.random(n)
    y = (rng.random(n) < scores).astype(np.int64)
    groups = rng.integers(0, 3, n)
    return y, scores, groups


def _direct(y, scores, n_bins):
    """The curve computed directly with pandas.qcut and groupby."""
    bins = pd.qcut(scores, n_bins, labels=False, duplicates="drop")
    frame = pd.DataFrame({"bin": bins, "y": y, "s": scores}).groupby("bin")
    return frame["y"].size().to_numpy(), frame["s"].mean().to_numpy(), frame["y"].mean().to_numpy()


@pytest.mark.parametrize("n_bins", [1, 3, 10, 17])
def test_bins_and_fractions_match_direct_computation(data, n_bins):
    y, scores, _ = data
    curve = calibration_curve(y, scores, n_bins=n_bins)
    assert list(curve.columns) == CALIBRATION_COLUMNS
    n, mean_score, fraction = _direct(y, scores, n_bins)
    assert curve["bin"].tolist() == list(range(n_bins))
    np.testing.assert_array_equal(curve["n"], n)
    np.testing.assert_allclose(curve["mean_score"], mean_score, rtol=1e-12)
    np.testing.assert_allclose(curve["fraction_positive"], fraction, rtol=1e-12)
    assert curve["n"].sum() == len(y)
    assert np.all(np.diff(curve["mean_score"]) > 0)


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_wilson_bounds_equal_statsmodels(data, confidence):
    y, scores, _ = data
    curve = calibration_curve(y, scores, n_bins=7, confidence=confidence)
    count = np.rint(curve["fraction_positive"] * curve["n"]).astype(int)
    for row, k in zip(curve.itertuples(), count, strict=True):
        low, high = proportion_confint(k, row.n, alpha=1 - confidence, method="wilson")
        assert row.ci_low == pytest.approx(low, abs=1e-15)
        assert row.ci_high == pytest.approx(high, abs=1e-15)
        assert row.ci_low <= row.fraction_positive <= row.ci_high


def test_ties_reduce_the_number_of_bins():
    rng = np.random.default_rng(7)
    scores = rng.choice([0.2, 0.5, 0.9], size=300, p=[0.5, 0.3, 0.2])
    y = rng.integers(0, 2, 300)
    curve = calibration_curve(y, scores, n_bins=10)
    # With shares of about 50/30/20%, the deciles only take the values 0.2, 0.5 and 0.9, so the
    # unique edges are 0.2, 0.5, 0.9 and the right-closed bins [0.2, 0.5] and (0.5, 0.9]: two bins
    # instead of ten.
    assert len(curve) == 2
    np.testing.assert_array_equal(curve["n"], [np.sum(scores <= 0.5), np.sum(scores == 0.9)])
    np.testing.assert_allclose(curve["mean_score"], [scores[scores <= 0.5].mean(), 0.9])
    # all scores equal: one bin with everything
    single = calibration_curve(y, np.full(300, 0.3), n_bins=10)
    assert single[["bin", "n"]].values.tolist() == [[0, 300]]
    assert single["fraction_positive"].iloc[0] == pytest.approx(y.mean())


def test_bin_edges_follow_qcut_with_ties():
    """Randomised check of the documented edge rule against pandas.qcut(duplicates="drop")."""
    rng = np.random.default_rng(3)
    for _ in range(300):
        n = int(rng.integers(2, 80))
        scores = rng.choice(np.round(rng.random(int(rng.integers(2, 12))), 3), size=n)
        if np.unique(scores).size < 2:
            continue
        n_bins = int(rng.integers(1, 13))
        y = rng.integers(0, 2, n)
        curve = calibration_curve(y, scores, n_bins=n_bins)
        codes = pd.qcut(scores, n_bins, labels=False, duplicates="drop")
        expected_n = np.bincount(codes)
        np.testing.assert_array_equal(curve["n"], expected_n[expected_n > 0])  # empty bins dropped


def test_perfectly_calibrated_scores_fall_in_wilson_intervals():
    # y ~ Bernoulli(score), so within a bin E[fraction_positive] = mean_score. With n = 100,000 and
    # 10 bins (10,000 rows each, sd of the fraction <= 0.005), each 95% Wilson interval misses
    # mean_score with probability ~0.05: at least 8 of 10 covering fails with probability ~1e-2 and
    # 7 of 10 with ~1e-3; we require 7 (and the seed is fixed, so the test is deterministic anyway).
    # |fraction - mean_score| < 0.03 is a 6-sd bound per bin (failure ~1e-8). A plausible bug
    # (mis-sorted bins, fraction over the wrong rows, inverted interval) breaks both.
    rng = np.random.default_rng(12345)
    n = 100_000
    scores = rng.random(n)
    y = (rng.random(n) < scores).astype(np.int64)
    curve = calibration_curve(y, scores, n_bins=10)
    assert len(curve) == 10
    covered = (curve["ci_low"] <= curve["mean_score"]) & (curve["mean_score"] <= curve["ci_high"])
    assert covered.sum() >= 7
    assert np.max(np.abs(curve["fraction_positive"] - curve["mean_score"])) < 0.03


def test_calibration_table_per_group_and_overall(data):
    y, scores, groups = data
    scores_xa = np.clip(scores * 0.9 + 0.05, 0, 1)
    labels = ["A = 0", "A = 1", "A = 2"]
    table = calibration_table(y, groups, {"x": scores, "xa": scores_xa}, group_labels=labels, n_bins=5)
    assert list(table.columns) == ["model", "group", *CALIBRATION_COLUMNS]
    assert list(pd.unique(table["model"])) == ["x", "xa"]
    assert list(pd.unique(table["group"])) == [*labels, "overall"]
    for model, s in (("x", scores), ("xa", scores_xa)):
        for code, label in enumerate(labels):
            got = table[(table["model"] == model) & (table["group"] == label)][CALIBRATION_COLUMNS]
            expected = calibration_curve(y[groups == code], s[groups == code], n_bins=5)
            pd.testing.assert_frame_equal(got.reset_index(drop=True), expected)
        got = table[(table["model"] == model) & (table["group"] == "overall")][CALIBRATION_COLUMNS]
        pd.testing.assert_frame_equal(got.reset_index(drop=True), calibration_curve(y, s, n_bins=5))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"y": np.array([0, 1, 2])}, r"labels \(y\) must be 0/1; got values \{2\}"),
        ({"scores": np.array([0.1, 0.5, 1.5])}, r"\[0, 1\]"),
        ({"scores": np.array([0.1, np.nan, 0.5])}, "finite"),
        ({"scores": np.array([0.1, 0.5])}, "scores has 2 rows but y has 3"),
        ({"n_bins": 0}, "n_bins must be a positive integer; got 0"),
        ({"n_bins": 2.5}, "n_bins must be a positive integer; got 2.5"),
        ({"n_bins": True}, "n_bins must be a positive integer; got True"),
        ({"confidence": 1.5}, "confidence must be in"),
        ({"y": np.array([], dtype=int), "scores": np.array([])}, "must not be empty"),
    ],
)
def test_calibration_curve_validation(kwargs, match):
    args = {"y": np.array([0, 1, 1]), "scores": np.array([0.1, 0.5, 0.9])} | kwargs
    y, scores = args.pop("y"), args.pop("scores")
    with pytest.raises(ValueError, match=match):
        calibration_curve(y, scores, **args)


@pytest.mark.parametrize(
    ("groups", "scores", "labels", "match"),
    [
        (np.array([0, 1, 2, 0]), None, ["a", "b"], r"group codes \(groups\) must be integers in 0\.\.1.*\{2\}"),
        (np.array([0, 1, 0]), None, ["a", "b"], "groups has 3 rows but y has 4"),
        (np.array([0, 0, 0, 0]), None, ["a", "b"], r"groups with no rows: \['b'\]"),
        (np.array([0, 1, 0, 1]), None, ["a", "overall"], r"must not use the reserved name\(s\) \['overall'\]"),
        (np.array([0, 1, 0, 1]), None, ["a", "a"], r"group_labels must be distinct; \['a'\] appear more than once"),
        (np.array([0, 1, 0, 1]), {}, ["a", "b"], "non-empty mapping"),
        (np.array([0, 1, 0, 1]), {"x": np.array([0.1, 0.2, 0.3, -0.1])}, ["a", "b"], r"scores\['x'\]"),
    ],
)
def test_calibration_table_validation(groups, scores, labels, match):
    y = np.array([0, 1, 1, 0])
    scores = {"x": np.array([0.1, 0.4, 0.6, 0.9])} if scores is None else scores
    with pytest.raises(ValueError, match=match):
        calibration_table(y, groups, scores, group_labels=labels)


def test_stack_calibration_tables_leads_with_study_and_dataset():
    from disaggregated_eval.calibration import stack_calibration_tables

    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 400)
    groups = rng.integers(0, 2, 400)
    tables = {
        name: calibration_table(y, groups, {"x": rng.random(400)}, group_labels=["A = 0", "A = 1"])
        for name in ("covariate_shift", "outcome_shift")
    }
    stacked = stack_calibration_tables(tables, study="simulation")
    assert list(stacked.columns[:2]) == ["study", "dataset"]
    assert len(stacked) == sum(len(t) for t in tables.values())
    assert list(pd.unique(stacked.dataset)) == ["covariate_shift", "outcome_shift"]
    assert (stacked.study == "simulation").all()
    with pytest.raises(ValueError, match="at least one"):
        stack_calibration_tables({}, study="acs")


# ---- the calibration error of a slice (binned_error_sums, binned_errors, calibration_error_interval) ----
def _binned(y, r, bins, k):
    from disaggregated_eval.calibration import binned_error_sums, binned_errors

    return binned_errors(binned_error_sums(y, r, np.ones(y.shape[0]), bins, k)[None])


def test_debiased_squared_calibration_error_is_unbiased():
    # Ten bins of 30 rows, true gaps delta_b = +-0.04 (squared error 0.0016): the plug-in sum p_b d_b^2 is
    # biased up by about sum p_b var(d_b) (~0.006 here, four times the truth); the debiased estimate's mean
    # over 3,000 samples must be within 0.0001 of the truth (its Monte-Carlo standard error is about 3e-5).
    from disaggregated_eval.calibration import calibration_error_interval

    rng = np.random.default_rng(20250101)
    k, n = 10, 30
    bins = np.repeat(np.arange(k), n)
    r = np.repeat(np.linspace(0.1, 0.8, k), n)
    q = r + np.where(np.arange(k * n) % 2 == 0, 0.04, -0.04)[bins * n]
    from disaggregated_eval.calibration import binned_error_sums, binned_errors

    samples = 3000  # each sample is a group of one call (the function is vectorised over groups)
    y = (rng.random((samples, k * n)) < q).astype(float).ravel()
    key = (np.arange(samples)[:, None] * k + bins[None, :]).ravel()
    sums = binned_error_sums(y, np.tile(r, samples), np.ones(y.shape[0]), key, samples * k).reshape(samples, k, -1)
    b = binned_errors(sums)
    squared = calibration_error_interval(b.share, b.deviation, b.variance, b.usable, floor=b.floor)[3]
    plug_in = np.sum(b.share * b.deviation**2, axis=1)
    assert np.mean(squared) == pytest.approx(0.0016, abs=1e-4)
    assert np.mean(plug_in) > 0.004


def test_calibration_error_interval_reaches_zero_when_calibrated_and_not_when_far_off():
    from disaggregated_eval.calibration import calibration_error_interval

    rng = np.random.default_rng(7)
    k, n = 10, 400
    bins = np.repeat(np.arange(k), n)
    r = np.repeat(np.linspace(0.1, 0.8, k), n)
    y = (rng.random(k * n) < r).astype(float)
    b = _binned(y, r, bins, k)
    estimate, low, high, _ = calibration_error_interval(b.share, b.deviation, b.variance, b.usable, floor=b.floor)
    assert low[0] == 0.0 and high[0] > 0.0 and estimate[0] <= high[0]
    y = (rng.random(k * n) < r - 0.08).astype(float)  # risk overestimated by 0.08: clearly miscalibrated
    b = _binned(y, r, bins, k)
    estimate, low, high, _ = calibration_error_interval(b.share, b.deviation, b.variance, b.usable, floor=b.floor)
    assert 0.04 < low[0] < 0.08 < high[0] and low[0] < estimate[0] < high[0]


def test_calibration_error_interval_never_has_zero_width():
    # Gaps exactly 0 in every bin (S = 0, below every theta's lower quantile): the upper bound falls back to
    # the normal approximation's at a debiased estimate of 0, positive.
    from disaggregated_eval.calibration import calibration_error_interval

    share = np.full((1, 4), 0.25)
    variance = np.full((1, 4), 0.001)
    estimate, low, high, _ = calibration_error_interval(share, np.zeros((1, 4)), variance, np.ones((1, 4), bool))
    assert estimate[0] == 0.0 and low[0] == 0.0 and high[0] > 0.01
    nothing = calibration_error_interval(share, np.zeros((1, 4)), variance, np.zeros((1, 4), bool))
    assert all(np.isnan(x[0]) for x in nothing)  # no usable bin: undefined
