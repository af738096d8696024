"""Tests of the estimators of P(A | V) that fit the control variable (weight_models), and of the weight
diagnostics (weight_diagnostics).

Known truth comes from the simulation settings (``simulate``, ``population``): closed-form
``P(A | Y)`` and ``P(A, lo < X <= hi)``, and the exact ``P(A | R)`` of a Bayes-optimal score, also in
a setting thinned so that one group is small (``population.sample_with_group_prior``). Statistical
tolerances are stated where they are used.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from threadpoolctl import threadpool_limits

from disaggregated_eval import population, seeds, simulate, weight_diagnostics, weight_models

SEED = 11


@pytest.fixture(scope="module", autouse=True)
def _single_thread():
    # HistGradientBoosting (OpenMP) and the logistic regressions (BLAS) only wait for each other's
    # threads on a small shared machine.
    with threadpool_limits(limits=1):
        yield


def _fold_ids(groups: np.ndarray, seed: int, folds: int = 5) -> np.ndarray:
    """The documented outer split of a cross-fitting with root seed ``seed``."""
    return weight_models.crossfit_fold_ids(
        groups, crossfit_folds=folds, random_state=seeds.sklearn_seed(seeds.seed_sequence(seed))
    )


# ------------------------------------------------------------------------------------------------
# cell frequencies
# ------------------------------------------------------------------------------------------------


def test_cell_frequency_of_the_label_matches_the_population_p_a_given_y():
    """V = Y in the label-shift setting: P(A = 1 | Y) is 0.31 at Y = 0 and 0.17 at Y = 1."""
    setting = "anticausal_label_shift"
    _, test = simulate.simulate_setting(setting, n_train=10, n_test=20_000, seed=SEED)
    a, y = test["a"].to_numpy(), test["y"].to_numpy()
    proba, table = weight_models.crossfit_cell_frequency(test[["y"]], a, n_groups=2, seed=SEED)
    truth = simulate.get_dgp(setting).p_a_given_y(y)
    folds = _fold_ids(a, SEED)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-15)
    for k in range(5):
        for label in (0, 1):
            rows = (folds == k) & (y == label)
            assert np.ptp(proba[rows, 1]) == 0.0  # one value per cell and fold
            # A binomial proportion over the other folds' rows with Y = label: within 4 standard
            # errors (each of the 10 checks fails by chance with probability 6e-5).
            n_fit = ((folds != k) & (y == label)).sum()
            p = truth[rows][0, 1]
            assert abs(proba[rows][0, 1] - p) < 4 * np.sqrt(p * (1 - p) / n_fit), (k, label)
    assert table["n_cells"].tolist() == [2] * 5 and table["n_unseen_rows"].tolist() == [0] * 5
    assert table["n_fit_rows"].tolist() == [int((folds != k).sum()) for k in range(5)]


def test_cell_frequency_of_a_binned_covariate_matches_the_closed_form():
    """V = the decile bin of x (fixed edges): P(A = 1 | bin) = P(A = 1, X in bin) / P(X in bin)."""
    setting = "complex_causal_shift"
    dgp = simulate.get_dgp(setting)
    _, test = simulate.simulate_setting(setting, n_train=10, n_test=20_000, seed=SEED + 1)
    edges = np.array([-np.inf, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, np.inf])
    x, a = test["x"].to_numpy(), test["a"].to_numpy()
    cell = np.searchsorted(edges, x, side="left") - 1
    proba, _ = weight_models.crossfit_cell_frequency(cell, a, n_groups=2, seed=SEED)
    mass = dgp.mass_xa(edges[:-1], edges[1:])
    truth = mass[:, 1] / mass.sum(axis=1)
    folds = _fold_ids(a, SEED)
    for k in range(5):
        for b in range(10):
            rows = (folds == k) & (cell == b)
            n_fit = ((folds != k) & (cell == b)).sum()
            se = np.sqrt(truth[b] * (1 - truth[b]) / n_fit)
            # 50 checks at 4.5 standard errors: a chance failure has probability below 4e-4.
            assert abs(proba[rows, 1].mean() - truth[b]) < 4.5 * se + 1e-12, (k, b)


def test_cell_frequency_uses_only_the_other_folds():
    rng = seeds.generator(SEED, "tests", "weight_models", "own rows")
    n = 600
    v = rng.integers(0, 6, size=n)
    a = rng.integers(0, 3, size=n)
    v[17] = 99  # a value of one row only: no other fold has it
    proba, table = weight_models.crossfit_cell_frequency(v, a, n_groups=3, seed=SEED)
    folds = _fold_ids(a, SEED)
    for k in range(5):
        fit = folds != k
        for value in np.unique(v[folds == k]):
            rows = (folds == k) & (v == value)
            same = fit & (v == value)
            if same.any():
                expected = np.bincount(a[same], minlength=3) / same.sum()
            else:  # the documented fallback: the other folds' group shares
                expected = np.bincount(a[fit], minlength=3) / fit.sum()
            np.testing.assert_array_equal(proba[rows], np.broadcast_to(expected, (rows.sum(), 3)))
    # the lone row does not see its own group
    np.testing.assert_array_equal(
        proba[17], np.bincount(a[folds != folds[17]], minlength=3) / (folds != folds[17]).sum()
    )
    assert table["n_unseen_rows"].sum() == 1 and table.loc[folds[17], "n_unseen_rows"] == 1


@pytest.mark.parametrize("method", ["cell_frequency", "spline_logistic", "gradient_boosting"])
def test_a_fold_is_predicted_by_a_model_that_never_saw_it(method):
    """Permuting V among the rows of outer fold 0 permutes their predictions and nothing else: the
    model of fold 0 is fitted on the other folds only (the other folds' models do change)."""
    rng = seeds.generator(SEED, "tests", "weight_models", "permute", method)
    n = 1_500
    v = np.round(rng.normal(size=n), 1 if method == "cell_frequency" else 6)
    if method == "cell_frequency":
        v = np.clip(v, -2, 2)
    a = (rng.random(n) < 1 / (1 + np.exp(-1.5 * v))).astype(np.int64)
    args = dict(n_groups=2, seed=SEED, method=method, max_leaf_nodes=10)
    before = weight_models.group_proba_for_control(pd.DataFrame({"v": v}), a, **args).proba
    fold0 = np.flatnonzero(_fold_ids(a, SEED) == 0)
    perm = rng.permutation(fold0)
    shuffled = v.copy()
    shuffled[fold0] = v[perm]
    after = weight_models.group_proba_for_control(pd.DataFrame({"v": shuffled}), a, **args).proba
    np.testing.assert_array_equal(after[fold0], before[perm])
    others = np.setdiff1d(np.arange(n), fold0)
    assert not np.array_equal(after[others], before[others])


def test_shared_fold_ids_spread_every_stratum_within_one_row_of_even():
    rng = seeds.generator(SEED, "tests", "weight_models", "shared folds")
    strata = rng.integers(0, 40, size=997)  # strata of 10-40 rows, and some of fewer rows than folds
    strata[:3] = 1000 + np.arange(3)
    folds = weight_models.shared_fold_ids(strata, crossfit_folds=5, random_state=3)
    assert folds.dtype == np.int64 and set(folds.tolist()) == set(range(5))
    for s in np.unique(strata):
        counts = np.bincount(folds[strata == s], minlength=5)
        assert counts.max() - counts.min() <= 1, (s, counts)
    overall = np.bincount(folds, minlength=5)
    assert overall.max() - overall.min() <= 1
    np.testing.assert_array_equal(folds, weight_models.shared_fold_ids(strata, crossfit_folds=5, random_state=3))
    assert not np.array_equal(folds, weight_models.shared_fold_ids(strata, crossfit_folds=5, random_state=4))
    with pytest.raises(ValueError, match=r"crossfit_folds must be an integer >= 2; got 1"):
        weight_models.shared_fold_ids(strata, crossfit_folds=1, random_state=3)


@pytest.mark.parametrize("method", ["cell_frequency", "spline_logistic"])
def test_a_given_split_is_used_where_it_serves_and_the_seed_split_otherwise(method):
    """Two fits given one split hold out the same rows: rows alike in V and group get the same weights in
    both (the units the audit's bootstrap merges). A split that leaves a group without training rows in a
    fold is not used: the result is then the seed's split, as without one."""
    rng = seeds.generator(SEED, "tests", "weight_models", "given split", method)
    n = 1_200
    v = rng.integers(0, 8, size=n).astype(float)
    a = (rng.random(n) < 1 / (1 + np.exp(-0.4 * (v - 4)))).astype(np.int64)
    b = rng.integers(0, 3, size=n)
    shared = weight_models.shared_fold_ids(a * 3 + b, crossfit_folds=5, random_state=1)
    args = dict(method=method, crossfit_folds=5, fold_ids=shared)
    pa = weight_models.group_proba_for_control(pd.DataFrame({"v": v}), a, n_groups=2, seed=1, **args).proba
    pb = weight_models.group_proba_for_control(pd.DataFrame({"v": v}), b, n_groups=3, seed=2, **args).proba
    key = pd.DataFrame({"v": v, "a": a, "b": b, "fold": shared})
    for p in (pa, pb):
        frame = pd.concat([key, pd.DataFrame(p)], axis=1)
        assert frame.groupby(["v", "a", "b", "fold"]).nunique().drop(columns=[]).max().max() == 1
    # the same weights without the split differ (each fit draws its own split from its seed)
    own = weight_models.group_proba_for_control(pd.DataFrame({"v": v}), a, n_groups=2, seed=1, method=method).proba
    assert not np.array_equal(own, pa)
    # a split that puts every row of group 1 in fold 0 leaves fold 0's training part without it: not used
    bad = shared.copy()
    bad[a == 1] = 0
    fallback = weight_models.group_proba_for_control(
        pd.DataFrame({"v": v}), a, n_groups=2, seed=1, method=method, crossfit_folds=5, fold_ids=bad
    ).proba
    np.testing.assert_array_equal(fallback, own)
    with pytest.raises(ValueError, match=r"fold_ids must hold integers in 0\.\.4"):
        weight_models.group_proba_for_control(
            pd.DataFrame({"v": v}), a, n_groups=2, seed=1, method=method, fold_ids=shared + 1
        )


def test_cell_frequency_validation():
    a = np.r_[np.zeros(50, dtype=int), np.ones(3, dtype=int)]
    v = np.arange(53) % 2
    with pytest.raises(ValueError, match=r"group 1 \('small'\) has 3 rows in V, fewer than crossfit_folds=5"):
        weight_models.crossfit_cell_frequency(v, a, n_groups=2, seed=0, group_labels=["big", "small"])
    with pytest.raises(ValueError, match=r"groups has 52 rows but V has 53"):
        weight_models.crossfit_cell_frequency(v, a[:-1], n_groups=2, seed=0)
    with pytest.raises(ValueError, match=r"n_groups must be an integer in 2\.\.255; got 1"):
        weight_models.crossfit_cell_frequency(v, a, n_groups=1, seed=0)
    with pytest.raises(ValueError, match=r"must be a DataFrame or an array of shape \(n,\) or \(n, d\)"):
        weight_models.crossfit_cell_frequency(np.zeros((53, 1, 1)), a, n_groups=2, seed=0)


def test_cell_codes_treat_missing_as_a_value_and_rows_as_cells():
    codes, n = weight_models.cell_codes(pd.DataFrame({"u": [1.0, np.nan, 1.0, np.nan, 2.0], "w": [0, 0, 1, 0, 0]}))
    assert n == 4
    assert codes[1] == codes[3] and len({codes[0], codes[2], codes[4], codes[1]}) == 4


# ------------------------------------------------------------------------------------------------
# spline logistic regression for a continuous V
# ------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_spline_logistic_is_calibrated_where_the_small_group_lives():
    """Fast version of benchmarks/bench_weight_calibration.py: covariate_shift thinned so that group 1
    is 10% of 10,000 rows, V = R of the Bayes-optimal score, exact P(A | R) from the oracle.

    Measured on 6 replicates of this design (seeds 7/0..5): mean absolute error of P(A = 1 | R) on
    the small group's rows 0.031-0.045 for the gradient boosting and 0.003-0.011 for the spline
    (ratio at most 0.33). The bounds (0.02; ratio 0.5) leave room for other seeds while failing an
    estimator as flat as the gradient boosting (or the spline without its linear term: 0.009-0.018).
    """
    setting, share = "covariate_shift", 0.1
    prior = (1 - share, share)
    keep = population.group_prior_keep(setting, prior)
    test = population.sample_with_group_prior(
        setting, 10_000, group_prior=prior, rng=seeds.generator(7, "tests", "weight_models", "calibration", 0)
    )
    a = test["a"].to_numpy()
    score = simulate.bayes_scores(setting, test)["bayes_x"].to_numpy()
    oracle = population.shift_group_proba(population.score_oracle(setting, "bayes_x")(score), keep)[:, 1]
    V = weight_models.score_frame(score)
    branch = seeds.seed_sequence(7, "tests", "weight_models", "calibration", 0)
    old, _ = weight_models.crossfit_group_proba(V, a, n_groups=2, seed=branch)
    new, table = weight_models.crossfit_spline_logistic(V, a, n_groups=2, seed=branch)
    small = a == 1
    error_old = np.abs(old[small, 1] - oracle[small]).mean()
    error_new = np.abs(new[small, 1] - oracle[small]).mean()
    assert error_new < 0.02, error_new
    assert error_new < 0.5 * error_old, (error_new, error_old)
    assert table.groupby("fold")["selected"].sum().tolist() == [1] * 5
    assert set(table["n_knots"]) == {weight_models.SPLINE_KNOTS}


def test_spline_logistic_is_deterministic_and_validated():
    rng = seeds.generator(SEED, "tests", "weight_models", "spline")
    v = rng.normal(size=800)
    a = (rng.random(800) < 1 / (1 + np.exp(-2 * v))).astype(np.int64)
    one, t1 = weight_models.crossfit_spline_logistic(v, a, n_groups=2, seed=3, C_grid=[1.0, 10.0])
    two, t2 = weight_models.crossfit_spline_logistic(v, a, n_groups=2, seed=3, C_grid=[1.0, 10.0])
    np.testing.assert_array_equal(one, two)
    pd.testing.assert_frame_equal(t1, t2)
    np.testing.assert_allclose(one.sum(axis=1), 1.0, atol=1e-12)
    assert list(t1.columns) == [
        "fold", "n_fit_rows", "aggregation", "n_fit_points", "n_knots", "C", "mean_cv_log_loss", "std_cv_log_loss",
        "selected",
    ]  # fmt: skip
    # 800 rows of a continuous V: 512 bins would hold about one row per (bin, group), so the fits are on the rows
    assert set(t1["aggregation"]) == {"rows"} and (t1["n_fit_points"] == t1["n_fit_rows"]).all()
    # three groups: a multinomial model, one column per group
    three = np.where(v > 0.8, 2, a)
    proba, _ = weight_models.crossfit_spline_logistic(v, three, n_groups=3, seed=3, C_grid=[10.0])
    assert proba.shape == (800, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, atol=1e-12)
    assert proba[v > 1.5, 2].mean() > 0.9 and proba[v < 0, 2].mean() < 0.1
    with pytest.raises(ValueError, match=r"V must have exactly one column"):
        weight_models.crossfit_spline_logistic(np.column_stack([v, v]), a, n_groups=2, seed=3)
    with pytest.raises(ValueError, match=r"has 2 distinct value\(s\); a spline needs at least 3"):
        weight_models.crossfit_spline_logistic(a, a, n_groups=2, seed=3)
    with pytest.raises(ValueError, match=r"must be finite"):
        weight_models.crossfit_spline_logistic(np.where(v > 2, np.nan, v), a, n_groups=2, seed=3)
    with pytest.raises(ValueError, match=r"C_grid must be a non-empty sequence of distinct positive numbers"):
        weight_models.crossfit_spline_logistic(v, a, n_groups=2, seed=3, C_grid=[1.0, -1.0])
    with pytest.raises(ValueError, match=r"n_knots must be an integer >= 3"):
        weight_models.crossfit_spline_logistic(v, a, n_groups=2, seed=3, n_knots=2)
    with pytest.raises(ValueError, match=r"n_bins must be an integer >= 2; got 1"):
        weight_models.crossfit_spline_logistic(v, a, n_groups=2, seed=3, n_bins=1)


def _three_groups(n: int, name: str, decimals: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Groups of 60%, 30% and 10% of ``n`` rows, ``V | A = a ~ N(-1, 0, 1.5; 1.2^2)``: the small group
    lives in the upper tail, where ``P(A = 2 | V)`` rises steeply. ``V`` rounded to ``decimals``."""
    rng = seeds.generator(SEED, "tests", "weight_models", name)
    a = rng.choice(3, size=n, p=[0.6, 0.3, 0.1])
    v = rng.normal(np.array([-1.0, 0.0, 1.5])[a], 1.2)
    return (v if decimals is None else np.round(v, decimals)), a


def test_spline_on_distinct_values_with_counts_equals_the_fit_on_the_rows():
    """Sufficient statistics: the log-likelihood of rows that share a value of V and a group is that
    value's term times their count. With 20,000 rows and V rounded to 0.1 (109 distinct values, far
    fewer than SPLINE_BINS) the fits on the (value, group) points with counts are the fits on the rows,
    with the same inner folds of rows: the same C in every fold, and probabilities equal up to the
    rounding of sums in another order (measured 1.5e-12; tolerance 1e-9)."""
    v, a = _three_groups(20_000, "distinct", decimals=1)
    grid = [0.1, 10.0]
    points, table = weight_models.crossfit_spline_logistic(v, a, n_groups=3, seed=3, C_grid=grid)
    rows, reference = weight_models.crossfit_spline_logistic(v, a, n_groups=3, seed=3, C_grid=grid, n_bins=None)
    n_values = np.unique(v).size
    assert n_values < 150 and set(table["aggregation"]) == {"distinct values"}
    assert set(reference["aggregation"]) == {"rows"}
    assert (table["n_fit_rows"] == 16_000).all() and (table["n_fit_points"] <= 3 * n_values).all()
    np.testing.assert_array_equal(table["selected"], reference["selected"])
    np.testing.assert_allclose(table["mean_cv_log_loss"], reference["mean_cv_log_loss"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(points, rows, rtol=0, atol=1e-9)


def test_binned_spline_is_within_a_stated_bound_of_the_fit_on_the_rows():
    """A continuous V on 60,000 rows: the fits are on each group's counts in at most SPLINE_BINS bins of V,
    each (bin, group) point at the mean V of its rows, 1,200 points for 48,000 rows per fold: what is fitted
    follows the bins, not the rows. Against the fit on the rows with the same C (fixed, so that only the
    binning differs) and the same folds: measured max |difference| of P(A = a | V) 4.1e-5 to 5.0e-5 over
    every row and group (3 data sets), mean 2.8e-6. The bound 5e-4 leaves a factor 10 and is 20 times
    below the standard error of the estimate itself on the small group's rows (about 0.01 at this size)."""
    v, a = _three_groups(60_000, "bins")
    points, table = weight_models.crossfit_spline_logistic(v, a, n_groups=3, seed=3, C_grid=[1.0])
    rows, reference = weight_models.crossfit_spline_logistic(v, a, n_groups=3, seed=3, C_grid=[1.0], n_bins=None)
    assert set(table["aggregation"]) == {"bins"} and (table["n_fit_rows"] == 48_000).all()
    assert (table["n_fit_points"] <= 3 * weight_models.SPLINE_BINS).all()
    assert (reference["n_fit_points"] == 48_000).all()
    assert np.abs(points - rows).max() < 5e-4
    assert np.abs(points - rows).mean() < 5e-5


def test_spline_points_follow_the_bins_not_the_rows():
    """Five times the rows, about the same points (a group's counts in each bin of V; measured 1,070 and
    1,200: more bins of the tails hold every group). Below about 4 rows per
    (bin, group) point the fits stay on the rows, bit for bit as without bins (2,000 rows)."""
    v, a = _three_groups(100_000, "scale")
    _, small = weight_models.crossfit_spline_logistic(v[:20_000], a[:20_000], n_groups=3, seed=3, C_grid=[1.0])
    _, large = weight_models.crossfit_spline_logistic(v, a, n_groups=3, seed=3, C_grid=[1.0])
    assert set(small["aggregation"]) == set(large["aggregation"]) == {"bins"}
    assert (small["n_fit_rows"] == 16_000).all() and (large["n_fit_rows"] == 80_000).all()
    for table in (small, large):
        assert table["n_fit_points"].between(1_000, 3 * weight_models.SPLINE_BINS).all()
    assert large["n_fit_points"].max() <= 1.2 * small["n_fit_points"].max()
    few, table = weight_models.crossfit_spline_logistic(v[:2_000], a[:2_000], n_groups=3, seed=3)
    same, _ = weight_models.crossfit_spline_logistic(v[:2_000], a[:2_000], n_groups=3, seed=3, n_bins=None)
    assert set(table["aggregation"]) == {"rows"}
    np.testing.assert_array_equal(few, same)


# ------------------------------------------------------------------------------------------------
# the dispatcher
# ------------------------------------------------------------------------------------------------


def test_auto_picks_the_estimator_that_fits_v():
    rng = seeds.generator(SEED, "tests", "weight_models", "auto")
    n = 400
    x = rng.normal(size=n)
    choose = weight_models.choose_weight_method
    assert choose(pd.DataFrame({"y": rng.integers(0, 2, size=n)})) == "cell_frequency"
    assert choose(pd.DataFrame({"decile": np.ceil(10 * rng.random(n)) / 10})) == "cell_frequency"
    assert choose(pd.DataFrame({"r": np.arange(n) % 51})) == "spline_logistic"  # 51 values > MAX_CELLS
    assert choose(pd.DataFrame({"r": np.arange(n) % 51}), max_cells=60) == "cell_frequency"
    assert choose(pd.DataFrame({"r": x})) == "spline_logistic"
    assert choose(pd.DataFrame({"r": np.where(x > 2, np.nan, x)})) == "gradient_boosting"
    assert choose(pd.DataFrame({"c": np.arange(n) % 60}), categorical=["c"]) == "gradient_boosting"
    assert choose(pd.DataFrame({"x1": x, "x2": rng.normal(size=n)})) == "gradient_boosting"
    assert choose(pd.DataFrame({"x1": np.arange(n) % 5, "x2": np.arange(n) % 3})) == "cell_frequency"


def test_dispatcher_returns_what_the_chosen_estimator_returns():
    rng = seeds.generator(SEED, "tests", "weight_models", "dispatch")
    n = 1_000
    x = rng.normal(size=n)
    a = (rng.random(n) < 1 / (1 + np.exp(-x))).astype(np.int64)
    y = (rng.random(n) < 0.3 + 0.2 * a).astype(np.int64)
    seed = seeds.seed_sequence(SEED, "tests", "dispatch")
    lines = []
    got = weight_models.group_proba_for_control(pd.DataFrame({"y": y}), a, n_groups=2, seed=seed, progress=lines.append)
    assert len(lines) == 5 and lines[0].startswith("weight model P(A | V) cell frequency, outer fold 0: 2 value(s)")
    expected, table = weight_models.crossfit_cell_frequency(pd.DataFrame({"y": y}), a, n_groups=2, seed=seed)
    assert got.method == "cell_frequency" and got.note.startswith(
        "P(A | V) is the cross-fitted cell frequency over the 2"
    )
    np.testing.assert_array_equal(got.proba, expected)
    pd.testing.assert_frame_equal(got.table, table)
    lines.clear()
    got = weight_models.group_proba_for_control(
        weight_models.score_frame(1 / (1 + np.exp(-x))), a, n_groups=2, seed=seed, progress=lines.append
    )
    assert len(lines) == 5 and "spline logistic, outer fold 4" in lines[-1]
    expected, _ = weight_models.crossfit_spline_logistic(
        weight_models.score_frame(1 / (1 + np.exp(-x))), a, n_groups=2, seed=seed
    )
    assert got.method == "spline_logistic"
    np.testing.assert_array_equal(got.proba, expected)
    frame = pd.DataFrame({"x": x, "z": rng.normal(size=n)})
    got = weight_models.group_proba_for_control(frame, a, n_groups=2, seed=seed, max_leaf_nodes=10)
    expected, _ = weight_models.crossfit_group_proba(frame, a, n_groups=2, seed=seed, max_leaf_nodes=10)
    assert got.method == "gradient_boosting"
    np.testing.assert_array_equal(got.proba, expected)
    with pytest.raises(ValueError, match=r"method must be one of 'auto', 'cell_frequency'"):
        weight_models.group_proba_for_control(frame, a, n_groups=2, seed=seed, method="isotonic")


# ------------------------------------------------------------------------------------------------
# diagnostics
# ------------------------------------------------------------------------------------------------


def test_kish_effective_sample_size():
    ess = weight_diagnostics.kish_effective_sample_size
    assert ess(np.ones(7)) == pytest.approx(7.0)
    assert ess([1.0, 0.0, 0.0]) == pytest.approx(1.0)
    assert ess([1.0, 1.0, 2.0]) == pytest.approx(16.0 / 6.0)
    np.testing.assert_allclose(ess(np.array([[1.0, 0.0], [1.0, 0.0]]), axis=0), [2.0, np.nan])
    with pytest.raises(ValueError, match="finite and non-negative"):
        ess([1.0, -1.0])


def test_standardized_mean_difference_by_hand():
    V = pd.DataFrame({"v": [0.0, 1.0, 2.0, 4.0], "c": ["u", "u", "w", "w"]})
    groups = np.array([0, 0, 1, 1])
    proba = np.array([[0.9, 0.1], [0.6, 0.4], [0.5, 0.5], [0.2, 0.8]])
    smd, terms = weight_diagnostics.standardized_mean_differences(V, groups, proba, n_groups=2)
    assert terms == ["v", "c=u", "c=w"]

    def expected(x, inside, w):
        m1, m0 = np.average(x[inside], weights=np.ones(inside.sum())), np.average(x, weights=w)
        v1, v0 = np.average((x[inside] - m1) ** 2), np.average((x - m0) ** 2, weights=w)
        return (m1 - m0) / np.sqrt((v1 + v0) / 2)

    v = V["v"].to_numpy()
    for g in (0, 1):
        assert smd[g, 0] == pytest.approx(expected(v, groups == g, proba[:, g]), rel=1e-12)
        assert smd[g, 1] == pytest.approx(
            expected((V["c"] == "u").to_numpy(float), groups == g, proba[:, g]), rel=1e-12
        )


def test_balance_is_good_with_the_true_weights_and_poor_without():
    """V = X in covariate_shift (X | A = a ~ N(-2 + 2a, 1)): with the oracle P(A | X) the re-weighted
    population matches each group's mean of X (|SMD| is a sampling error of about 1/sqrt(n_a) ~ 0.01
    at n = 40,000; bound 0.05). Weights that ignore X (P(A) for every row) compare each group with
    the whole population (mean -1, variance 2): SMD = +-1 / sqrt((1 + 2) / 2) = +-0.816 (bound 0.7)."""
    setting = "covariate_shift"
    _, test = simulate.simulate_setting(setting, n_train=10, n_test=40_000, seed=SEED)
    a, x = test["a"].to_numpy(), test[["x"]]
    truth = simulate.get_dgp(setting).p_a_given_x(x["x"].to_numpy())
    table = weight_diagnostics.weight_diagnostics(x, a, truth, n_groups=2)
    assert list(table.columns) == list(weight_diagnostics.DIAGNOSTIC_COLUMNS)
    assert (table["balance_smd"].abs() < 0.05).all() and not table["poor_balance"].any()
    assert (table["overlap_reason"] == "").all()
    flat = np.tile(np.bincount(a) / len(a), (len(a), 1))
    table = weight_diagnostics.weight_diagnostics(x, a, flat, n_groups=2)
    np.testing.assert_allclose(table["balance_smd"], [-0.816, 0.816], atol=0.03)
    assert table["poor_balance"].all()
    # constant weights: Kish's effective sample size is every row
    np.testing.assert_allclose(table["effective_sample_size"], len(a))
    np.testing.assert_allclose(table["rest_share"], 1.0)


def test_overlap_reasons():
    rng = seeds.generator(SEED, "tests", "weight_models", "overlap")
    n = 5_000
    a = (rng.random(n) < 0.3).astype(np.int64)
    # 1. a discrete V with disjoint values per group (a score that reveals the group)
    v = 10 * a + rng.integers(0, 5, size=n)
    proba, _ = weight_models.crossfit_cell_frequency(v, a, n_groups=2, seed=SEED)
    reasons = weight_diagnostics.overlap_reasons(v, a, proba, n_groups=2)
    assert all(r.startswith("no overlap: the slice and the rest share no value of V") for r in reasons)
    # 2. a continuous V whose ranges do not meet
    v = rng.normal(size=n) + 20 * a
    reasons = weight_diagnostics.overlap_reasons(v, a, np.column_stack([1.0 - a, a]), n_groups=2)
    assert reasons == [
        "no overlap: every value of V in the slice lies below every value in the rest",
        "no overlap: every value of V in the slice lies above every value in the rest",
    ]
    # 3. age and an age group, with 0.1% of the rows on the wrong side: ranges overlap, but the
    #    weights (here the exact P(A | V) of this construction) leave the rest almost nothing
    age = rng.uniform(18, 80, size=n)
    flip = rng.random(n) < 0.001
    group = ((age >= 40) ^ flip).astype(np.int64)
    p1 = np.where(age >= 40, 0.999, 0.001)
    reasons = weight_diagnostics.overlap_reasons(age, group, np.column_stack([1 - p1, p1]), n_groups=2)
    assert all(r.startswith("no overlap: V nearly determines the slice") for r in reasons), reasons
    # 4. a small slice whose weights are all small but V says nothing about it: overlap is fine
    #    (a rule on "P(A = a | V) near 0 for almost every row" would withhold it)
    small = (rng.random(n) < 0.01).astype(np.int64)
    flat = np.tile([0.99, 0.01], (n, 1))
    assert weight_diagnostics.overlap_reasons(rng.normal(size=n), small, flat, n_groups=2) == ["", ""]
    # 5. the paper's low-overlap setting still has overlap (the rest keeps ~7% of its weight)
    _, test = simulate.simulate_setting("low_overlap_causal", n_train=10, n_test=20_000, seed=SEED)
    x, a = test["x"].to_numpy(), test["a"].to_numpy()
    truth = simulate.get_dgp("low_overlap_causal").p_a_given_x(x)
    table = weight_diagnostics.weight_diagnostics(x, a, truth, n_groups=2)
    assert (table["overlap_reason"] == "").all() and (table["rest_share"] > 0.05).all(), table
    with pytest.raises(ValueError, match=r"proba must have shape \(20000, 2\)"):
        weight_diagnostics.overlap_reasons(x, a, truth[:, :1], n_groups=2)
    with pytest.raises(ValueError, match=r"min_rest_share must be a number in \[0, 1\)"):
        weight_diagnostics.overlap_reasons(x, a, truth, n_groups=2, min_rest_share=1.0)
