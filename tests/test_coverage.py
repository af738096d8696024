"""Tests of the coverage study (disaggregated_eval.coverage) and its figure (plots.plot_coverage).

Hand-checked cases fix the definitions (an interval covers if ci_low - 1e-9 <= truth <= ci_high +
1e-9; NaN intervals are left out; Clopper-Pearson interval; nominal band of Binomial(n, 0.95)).
A tiny study (outcome models fitted on 2,000 rows, test sets of 400 rows, 50 resamples) checks the
seeds, the pairing of the bootstrap calls, determinism and that the coverage table is computed from
the replicates' intervals as defined. That the population T_a (the truth) matches a 10^7-row Monte
Carlo is tested in tests/test_population.py (test_population_controlled_differences_match_monte_carlo).
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy import stats
from threadpoolctl import threadpool_limits

from disaggregated_eval import coverage, evaluation, outcome_models, plots, population, seeds, simulate, vocabulary

SEED = 11
SETTING = "covariate_shift"
LEAVES = {("X", "*"): 8, ("Y", "*"): 8, ("R", "x"): 8, ("R", "xa"): 8}
TINY = dict(n_test=400, n_train=600, n_resamples=50, crossfit_folds=2, seed=SEED)


@pytest.fixture(autouse=True, scope="module")
def one_openmp_thread():
    """Small HistGradientBoosting fits: OpenMP threads only cost on shared CPUs."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


@functools.cache
def fitted_models(setting: str = SETTING) -> outcome_models.OutcomeModels:
    train, _ = simulate.simulate_setting(setting, n_train=2_000, n_test=10, seed=SEED)
    fitted, _ = outcome_models.fit_outcome_models(
        train, features=["x"], grid=(8,), n_splits=2, seed=SEED, dataset=setting, n_threads=1
    )
    return fitted


@functools.cache
def tiny_study() -> tuple[pd.DataFrame, pd.DataFrame]:
    return coverage.run_study(
        SETTING, fitted=fitted_models(), max_leaf_nodes=LEAVES, n_replicates=3, n_replicates_r=1, **TINY
    )


# --------------------------------------------------------------------------------------------
# Coverage from intervals: hand-checked
# --------------------------------------------------------------------------------------------


def _replicate_rows(cells: dict[tuple[str, str], list[tuple[float, float, float]]]) -> pd.DataFrame:
    """Replicate rows of cells keyed by (weight_source, metric): lists of (estimate, ci_low, ci_high)."""
    records = []
    for (source, metric), intervals in cells.items():
        for r, (est, lo, hi) in enumerate(intervals):
            records.append(("d", r, "x", "X", source, "A = 0", metric, est, lo, hi, 1000, 0))
    return pd.DataFrame.from_records(records, columns=list(coverage.REPLICATE_COLUMNS))


def test_coverage_table_hand_checked():
    """Five replicates of one cell with truth 1: covered, covered (end point), missed, undefined,
    covered within the 1e-9 tolerance; a second cell (other weight source, same truth) misses all."""
    nan = float("nan")
    replicates = _replicate_rows({
        ("oracle", "auc"): [(0.5, 0.0, 1.0), (1.2, 1.0, 2.0), (2.0, 1.5, 3.0), (nan, nan, nan), (0.3, -1.0, 1 - 5e-10)],
        ("estimated", "auc"): [(3.0, 2.0, 4.0), (2.5, 2.0, 3.0)],
    })  # fmt: skip
    truth = pd.DataFrame([("d", "x", "X", "A = 0", "auc", 1.0)], columns=list(coverage.TRUTH_COLUMNS))
    table = coverage.coverage_table(replicates, truth)
    assert list(table.columns) == list(coverage.COVERAGE_COLUMNS)
    table = table.set_index("weight_source")
    oracle = table.loc["oracle"]
    assert (oracle["n_replicates"], oracle["n_covered"], oracle["n_undefined_replicates"]) == (4, 3, 1)
    assert oracle["coverage"] == 0.75
    # Clopper-Pearson of 3 / 4 (scipy's exact interval), to rounding of the beta quantiles
    exact = stats.binomtest(3, 4).proportion_ci(0.95, method="exact")
    np.testing.assert_allclose([oracle["coverage_ci_low"], oracle["coverage_ci_high"]], [exact.low, exact.high],
                               rtol=1e-12)  # fmt: skip
    # Binomial(4, 0.95): P(X <= 2) = 0.0140 < 0.025 <= P(X <= 3) = 0.1855, so the band is [3/4, 4/4]
    assert (oracle["nominal_band_low"], oracle["nominal_band_high"]) == (0.75, 1.0)
    assert bool(oracle["within_band"])
    widths = [1.0, 1.0, 1.5, 2 - 5e-10]
    assert oracle["mean_width"] == pytest.approx(np.mean(widths), abs=1e-15)
    assert oracle["mean_bias"] == pytest.approx(np.mean([-0.5, 0.2, 1.0, -0.7]), abs=1e-15)
    assert oracle["sd_estimate"] == pytest.approx(np.std([0.5, 1.2, 2.0, 0.3], ddof=1), abs=1e-15)
    assert oracle["truth"] == 1.0 and oracle["n_resamples"] == 1000
    estimated = table.loc["estimated"]
    assert (estimated["n_replicates"], estimated["n_covered"], estimated["coverage"]) == (2, 0, 0.0)
    assert estimated["coverage_ci_low"] == 0.0  # k = 0: lower end 0 by definition
    assert not bool(estimated["within_band"])


def test_coverage_table_tolerance_is_the_only_slack():
    """An interval ending 2e-9 below the truth misses; with tolerance 0 the 5e-10 case misses too."""
    replicates = _replicate_rows({("oracle", "auc"): [(0.0, -1.0, 1 - 2e-9), (0.0, -1.0, 1 - 5e-10)]})
    truth = pd.DataFrame([("d", "x", "X", "A = 0", "auc", 1.0)], columns=list(coverage.TRUTH_COLUMNS))
    assert coverage.coverage_table(replicates, truth)["n_covered"].item() == 1
    assert coverage.coverage_table(replicates, truth, tolerance=0.0)["n_covered"].item() == 0


def test_a_cell_with_undefined_truth_is_kept_with_its_reason_and_not_counted():
    """Truth NaN (the population T_a is undefined, e.g. the precision of a Bayes model that predicts no
    positive): the cell keeps its row, coverage NaN and caveat set; the summary counts only the other
    cell (issue 22, item 0: coverage_table raised "no truth for the cell" before)."""
    replicates = pd.concat([
        _replicate_rows({("oracle", "precision"): [(0.1, 0.0, 0.2), (0.1, 0.0, 0.2)]}),
        _replicate_rows({("oracle", "auc"): [(0.5, 0.0, 1.0), (0.5, 0.6, 1.0)]}),
    ], ignore_index=True)  # fmt: skip
    truth = pd.DataFrame([("d", "x", "X", "A = 0", "precision", float("nan")), ("d", "x", "X", "A = 0", "auc", 0.5)],
                         columns=list(coverage.TRUTH_COLUMNS))  # fmt: skip
    table = coverage.coverage_table(replicates, truth).set_index("metric")
    precision, auc = table.loc["precision"], table.loc["auc"]
    assert precision["caveat"] == coverage.UNDEFINED_TRUTH and auc["caveat"] == ""
    assert np.isnan(precision["coverage"]) and np.isnan(precision["mean_bias"]) and not precision["within_band"]
    assert precision["n_covered"] == 0 and precision["n_replicates"] == 2
    assert (auc["n_replicates"], auc["n_covered"], auc["coverage"]) == (2, 1, 0.5)
    summary = coverage.coverage_summary(table.reset_index())
    assert (summary["n_cells"] == 1).all()  # only the auc cell, at every level
    assert (summary["mean_coverage"] == 0.5).all()


def test_coverage_table_errors():
    replicates = _replicate_rows({("oracle", "auc"): [(0.0, -1.0, 1.0)]})
    truth = pd.DataFrame([("d", "x", "X", "A = 0", "log_loss", 1.0)], columns=list(coverage.TRUTH_COLUMNS))
    with pytest.raises(ValueError, match="no truth for the cell"):
        coverage.coverage_table(replicates, truth)
    with pytest.raises(ValueError, match="several rows for one cell and replicate"):
        coverage.coverage_table(pd.concat([replicates, replicates]), truth.assign(metric="auc"))
    with pytest.raises(ValueError, match=r"replicates is missing columns \['ci_low'\]"):
        coverage.coverage_table(replicates.drop(columns="ci_low"), truth.assign(metric="auc"))


@pytest.mark.parametrize(("k", "n"), [(0, 5), (5, 5), (3, 4), (190, 200), (37, 50)])
def test_clopper_pearson_is_scipys_exact_interval(k, n):
    low, high = coverage.clopper_pearson(k, n)
    exact = stats.binomtest(k, n).proportion_ci(0.95, method="exact")
    np.testing.assert_allclose([low, high], [exact.low, exact.high], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("n", [4, 50, 100, 200, 1000])
def test_nominal_band_has_its_probability(n):
    """The band [lo, hi] of Binomial(n, 0.95) / n: lo is the 2.5% quantile (P(X <= lo) >= 0.025 >
    P(X <= lo - 1)), hi the 97.5% one, so the band holds a correct coverage with probability >= 95%."""
    low, high = coverage.nominal_band(n)
    lo, hi = round(float(low) * n), round(float(high) * n)
    cdf = stats.binom(n, 0.95).cdf
    assert cdf(lo) >= 0.025 > cdf(lo - 1)
    assert cdf(hi) >= 0.975 > cdf(hi - 1)
    assert cdf(hi) - cdf(lo - 1) >= 0.95
    if n == 200:  # the "about 1.5 points": the band is 0.95 -3 / +3 points
        assert (float(low), float(high)) == (0.92, 0.98)


def test_coverage_summary_hand_checked():
    table = pd.DataFrame({
        "weight_source": ["oracle", "oracle", "oracle", "estimated", "estimated"],
        "model": ["x", "bayes_x", "x", "x", "x"],
        "control": ["X", "X", "R", "X", "R"],
        "coverage": [0.95, 0.90, 0.97, 0.50, 0.80],
        "within_band": [True, False, True, False, False],
        "nominal_band_low": [0.92, 0.92, 0.92, 0.92, 0.90],
        "n_replicates": [200, 200, 200, 200, 100],
    })  # fmt: skip
    summary = coverage.coverage_summary(table)
    assert list(summary.columns) == list(coverage.SUMMARY_COLUMNS)
    summary = summary.set_index(["weight_source", "model", "control"])
    x = summary.loc[("oracle", "all", "X")]
    assert (x["n_cells"], x["share_within_band"], x["share_below_band"]) == (2, 0.5, 0.5)
    assert x["median_coverage"] == pytest.approx(0.925)
    oracle_all = summary.loc[("oracle", "all", "all")]
    assert (oracle_all["n_cells"], oracle_all["median_coverage"], oracle_all["min_coverage"]) == (3, 0.95, 0.90)
    assert summary.loc[("oracle", "x", "all"), "n_cells"] == 2
    assert summary.loc[("oracle", "bayes_x", "X"), "share_below_band"] == 1.0
    assert summary.loc[("estimated", "all", "all"), "share_below_band"] == 1.0
    assert summary.loc[("estimated", "x", "R"), "median_n_replicates"] == 100
    # order: weight source (oracle before estimated), model ("all" first), control ("all" last)
    assert list(summary.index) == [
        ("oracle", "all", "X"), ("oracle", "all", "R"), ("oracle", "all", "all"),
        ("oracle", "x", "X"), ("oracle", "x", "R"), ("oracle", "x", "all"),
        ("oracle", "bayes_x", "X"), ("oracle", "bayes_x", "all"),
        ("estimated", "all", "X"), ("estimated", "all", "R"), ("estimated", "all", "all"),
        ("estimated", "x", "X"), ("estimated", "x", "R"), ("estimated", "x", "all"),
    ]  # fmt: skip


# --------------------------------------------------------------------------------------------
# Seeds, draws, weights
# --------------------------------------------------------------------------------------------


def test_replicate_seeds_are_the_documented_paths():
    for kind in coverage.SEED_KINDS:
        got = coverage.replicate_seed(SEED, SETTING, kind, 3)
        want = seeds.seed_sequence(SEED, "coverage", SETTING, kind, 3)
        assert got.spawn_key == want.spawn_key and got.entropy == want.entropy
    with pytest.raises(ValueError, match="kind"):
        coverage.replicate_seed(SEED, SETTING, "oracle", 0)
    with pytest.raises(ValueError, match="replicate"):
        coverage.replicate_seed(SEED, SETTING, "test", -1)


def test_draw_replicate_is_seeded_and_independent():
    test, train = coverage.draw_replicate(SETTING, n_test=300, n_train=500, seed=SEED, replicate=2)
    again, _ = coverage.draw_replicate(SETTING, n_test=300, n_train=500, seed=SEED, replicate=2)
    other, _ = coverage.draw_replicate(SETTING, n_test=300, n_train=500, seed=SEED, replicate=3)
    pd.testing.assert_frame_equal(test, again)
    assert (len(test), len(train)) == (300, 500) and list(test.columns) == ["x", "a", "y"]
    assert not np.array_equal(test["x"], other["x"]) and not np.array_equal(test["x"], train["x"][:300])
    rng = seeds.generator(SEED, "coverage", SETTING, "test", 2)
    pd.testing.assert_frame_equal(test, simulate.get_dgp(SETTING).sample(300, rng))
    with pytest.raises(ValueError, match="main simulation setting"):
        coverage.draw_replicate("selection_x", n_test=10, n_train=10, seed=SEED, replicate=0)


def test_estimated_weights_estimate_the_population_weights():
    """P(A | X), P(A | Y) fitted on 20,000 independent rows predict the test rows close to the
    closed forms (mean absolute error below 0.03; HGB with 8 leaves on one feature reaches ~0.01),
    P(A | R) cross-fitted on the 4,000 test rows (2 folds: 2,000 rows per fit) close to the exact
    oracle (below 0.08; observed ~0.05: the step score has many values, each seen a few times);
    swapped groups or a constant 0.5 would be off by 0.3 or more. Rows sum to 1; seeded."""
    test, train = coverage.draw_replicate(SETTING, n_test=4_000, n_train=20_000, seed=SEED, replicate=0)
    fitted = fitted_models()
    r = fitted.predict(test)["x"].to_numpy()
    kwargs = dict(max_leaf_nodes=LEAVES, crossfit_folds=2, seed=SEED, dataset=SETTING, replicate=0)
    weights = coverage.estimated_weights(test, train, {"x": r}, **kwargs)
    again = coverage.estimated_weights(test, train, {"x": r}, **kwargs)
    pd.testing.assert_frame_equal(weights, again)
    assert set(weights["weight_source"]) == {"estimated"}
    dgp = simulate.get_dgp(SETTING)
    oracle = population.score_oracle(SETTING, "x", fitted=fitted)
    for control, model, exact in (
        ("X", "*", dgp.p_a_given_x(test["x"].to_numpy())),
        ("Y", "*", dgp.p_a_given_y(test["y"].to_numpy())),
        ("R", "x", oracle(r)),
    ):
        p = evaluation.weight_matrix(weights, weight_source="estimated", control=control, model=model,
                                     n_rows=len(test), n_groups=2)  # fmt: skip
        np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
        error = np.abs(p[:, 1] - exact[:, 1]).mean()
        assert error < (0.08 if control == "R" else 0.03), (control, error)
    with pytest.raises(ValueError, match=r"no entry \('R', 'xa'\)"):
        coverage.estimated_weights(
            test, train, {"xa": r}, controls=["R"], **kwargs | {"max_leaf_nodes": {("R", "x"): 8}}
        )
    with pytest.raises(ValueError, match="train is needed"):
        coverage.estimated_weights(test, None, {}, controls=["X"], **kwargs)


# --------------------------------------------------------------------------------------------
# Replicates: the pipeline's intervals, paired, seeded
# --------------------------------------------------------------------------------------------


def test_replicate_intervals_are_the_pipelines_on_shared_resamples():
    """Each model's rows equal a direct controlled_evaluation of that model alone with the same
    seed: the calls share resamples (paired), and oracle T_a of a fitted model does not depend on
    the estimated weights it is computed next to."""
    fitted = fitted_models()
    test, train = coverage.draw_replicate(SETTING, n_test=400, n_train=600, seed=SEED, replicate=0)
    predicted = fitted.predict(test)
    bayes = simulate.bayes_scores(SETTING, test)
    scores = {"x": predicted["x"].to_numpy(), "bayes_x": bayes["bayes_x"].to_numpy()}
    oracle_w = population.oracle_weights(SETTING, test, test_scores=scores, fitted=fitted)
    estimated = coverage.estimated_weights(test, train, {"x": scores["x"]}, max_leaf_nodes=LEAVES, crossfit_folds=2,
                                           seed=SEED, dataset=SETTING, replicate=0)  # fmt: skip
    boot = coverage.replicate_seed(SEED, SETTING, "bootstrap", 0)
    table = coverage.replicate_intervals(test, scores, oracle_weights=oracle_w, estimated=estimated,
                                         estimated_models=["x"], n_resamples=60, seed=boot, replicate=0)  # fmt: skip
    assert list(table.columns) == list(coverage.REPLICATE_COLUMNS)
    keys = ["model", "control", "weight_source", "group", "metric"]
    for model, weights in (("bayes_x", oracle_w), ("x", oracle_w), ("x", estimated)):
        direct = evaluation.controlled_evaluation(
            test["y"].to_numpy(), test["a"].to_numpy(), {model: scores[model]},
            weights=weights[weights["model"].isin([model, "*"])], group_labels=vocabulary.SIMULATION_GROUP_LABELS,
            n_resamples=60, seed=boot, shared_space=False,
        )  # fmt: skip
        direct = direct[direct["comparison"] == "controlled_difference"].set_index(keys)
        source = set(weights["weight_source"])
        mine = table[(table["model"] == model) & table["weight_source"].isin(source | {"none"})].set_index(keys)
        assert len(mine) == len(direct) == 4 * 2 * len(vocabulary.PIPELINE_METRICS)
        for column in ("estimate", "ci_low", "ci_high", "n_undefined"):
            np.testing.assert_array_equal(mine.loc[direct.index, column].to_numpy(), direct[column].to_numpy())


def test_tiny_study_cells_seeds_and_determinism():
    replicates, truth = tiny_study()
    again, truth_again = coverage.run_study(
        SETTING, fitted=fitted_models(), max_leaf_nodes=LEAVES, n_replicates=3, n_replicates_r=1, **TINY
    )
    pd.testing.assert_frame_equal(replicates, again)
    pd.testing.assert_frame_equal(truth, truth_again)
    assert list(replicates.columns) == list(coverage.REPLICATE_COLUMNS)
    assert list(truth.columns) == list(coverage.TRUTH_COLUMNS)
    n_metrics = len(vocabulary.PIPELINE_METRICS)
    cells = replicates.groupby(["model", "control", "weight_source"])["replicate"].agg(lambda r: sorted(set(r)))
    for model in ("bayes_x", "bayes_xa"):
        for control in ("none", "X", "Y", "R"):
            assert cells[(model, control, "none" if control == "none" else "oracle")] == [0, 1, 2]
    for model in ("x", "xa"):
        assert cells[(model, "none", "none")] == [0, 1, 2]
        for control in ("X", "Y"):
            assert cells[(model, control, "estimated")] == [0, 1, 2]
            assert cells[(model, control, "oracle")] == [0, 1, 2]
        # V = R of fitted models: only the first n_replicates_r replicates, estimated and oracle paired
        assert cells[(model, "R", "estimated")] == [0] and cells[(model, "R", "oracle")] == [0]
    assert len(cells) == 8 + 2 * 7
    assert (replicates.groupby(["model", "control", "weight_source", "replicate"]).size() == 2 * n_metrics).all()
    # replicate 1 of the study is run_replicate(1) on its own: replicates do not depend on each other
    oracles = {m: population.score_oracle(SETTING, m, fitted=fitted_models() if m in ("x", "xa") else None)
               for m in ("x", "xa", "bayes_x", "bayes_xa")}  # fmt: skip
    alone = coverage.run_replicate(SETTING, 1, fitted=fitted_models(), oracles=oracles, max_leaf_nodes=LEAVES,
                                   estimate_r=False, **TINY)  # fmt: skip
    pd.testing.assert_frame_equal(alone, replicates[replicates["replicate"] == 1].reset_index(drop=True))
    # the truth is the population T_a of each model (fitted models: of the fitted model itself)
    direct = population.population_controlled_differences(SETTING, "xa", fitted=fitted_models())
    mine = truth[truth["model"] == "xa"].reset_index(drop=True)
    np.testing.assert_array_equal(mine["truth"].to_numpy(), direct["controlled_difference"].to_numpy())


def test_tiny_study_coverage_is_computed_from_the_intervals():
    """Coverage of every cell of the tiny study, recomputed row by row from its definition."""
    replicates, truth = tiny_study()
    table = coverage.coverage_table(replicates, truth)
    truth_of = truth.set_index(["dataset", "model", "control", "group", "metric"])["truth"]
    expected = {}
    for row in replicates.itertuples():
        t = truth_of[(row.dataset, row.model, row.control, row.group, row.metric)]
        key = (row.dataset, row.model, row.control, row.weight_source, row.group, row.metric)
        n, k, widths = expected.get(key, (0, 0, []))
        if np.isfinite(row.ci_low) and np.isfinite(row.ci_high):
            n, k = n + 1, k + int(row.ci_low - 1e-9 <= t <= row.ci_high + 1e-9)
            widths = widths + [row.ci_high - row.ci_low]
        expected[key] = (n, k, widths)
    assert len(table) == len(expected)
    for row in table.itertuples():
        n, k, widths = expected[(row.dataset, row.model, row.control, row.weight_source, row.group, row.metric)]
        assert (row.n_replicates, row.n_covered) == (n, k)
        if n:
            assert row.coverage == k / n
            assert row.mean_width == pytest.approx(np.mean(widths), rel=1e-12, abs=1e-15)
    assert table["n_covered"].sum() > 0.5 * table["n_replicates"].sum()  # intervals mostly cover at n = 400


def test_replicate_parts_round_robin():
    assert coverage.replicate_parts(7, 3) == [[0, 3, 6], [1, 4], [2, 5]]
    assert coverage.replicate_parts(3, 1) == [[0, 1, 2]]
    with pytest.raises(ValueError, match=r"n_parts must not exceed n_replicates \(3\); got 4"):
        coverage.replicate_parts(3, 4)
    with pytest.raises(ValueError, match="n_parts"):
        coverage.replicate_parts(3, 0)


def test_parts_give_the_rows_of_the_whole_study():
    """A job of some replicates (any order) gives exactly the rows of those replicates in run_study."""
    replicates, _ = tiny_study()
    part = coverage.run_replicates(
        SETTING, [2, 0], fitted=fitted_models(), max_leaf_nodes=LEAVES, n_replicates_r=1, **TINY
    )
    expected = pd.concat([replicates[replicates["replicate"] == r] for r in (2, 0)], ignore_index=True)
    pd.testing.assert_frame_equal(part, expected)
    with pytest.raises(ValueError, match="at least one replicate"):
        coverage.run_replicates(SETTING, [], fitted=fitted_models(), max_leaf_nodes=LEAVES, n_replicates_r=1, **TINY)


def test_run_study_validation():
    kwargs = dict(fitted=fitted_models(), max_leaf_nodes=LEAVES, n_replicates=2, **TINY)
    with pytest.raises(ValueError, match=r"n_replicates_r must not exceed n_replicates \(2\); got 3"):
        coverage.run_study(SETTING, n_replicates_r=3, **kwargs)
    with pytest.raises(ValueError, match=r"no entry \('R', 'x'\)"):
        coverage.run_study(SETTING, n_replicates_r=1, **kwargs | {"max_leaf_nodes": {("X", "*"): 8, ("Y", "*"): 8}})
    with pytest.raises(ValueError, match="main simulation setting"):
        coverage.run_study("selection_y", n_replicates_r=0, **kwargs)


def test_study_design_records_the_choices():
    design = coverage.study_design(SETTING, max_leaf_nodes=LEAVES, n_replicates=3, n_replicates_r=1, n_test=400,
                                   n_train=600, n_resamples=50, crossfit_folds=2, confidence=0.95)  # fmt: skip
    assert design["max_leaf_nodes"] == {"R/x": 8, "R/xa": 8, "X/*": 8, "Y/*": 8}
    assert "no new grid search" in design["hyperparameters"]
    assert design["seeds"]["bootstrap"] == f"('coverage', '{SETTING}', 'bootstrap', r)"
    both = coverage.collect_designs([design, design | {"dataset": "outcome_shift", "n_replicates_r": 0}])
    assert both["n_resamples"] == 50 and both["n_replicates_r"] == {SETTING: 1, "outcome_shift": 0}


# --------------------------------------------------------------------------------------------
# Figure
# --------------------------------------------------------------------------------------------


def test_plot_coverage_writes_png_and_pdf(tmp_path):
    replicates, truth = tiny_study()
    table = coverage.coverage_table(replicates, truth)
    paths = [tmp_path / "coverage.png", tmp_path / "coverage.pdf"]
    written = plots.plot_coverage(table, paths=paths)
    assert written == paths
    assert paths[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and paths[1].read_bytes()[:5] == b"%PDF-"
    with pytest.raises(ValueError, match=r"missing columns \['coverage'\]"):
        plots.plot_coverage(table.drop(columns="coverage"), paths=paths)
    with pytest.raises(ValueError, match="outcome_shift"):
        plots.plot_coverage(table, paths=paths, datasets=["outcome_shift"])
    with pytest.raises(ValueError, match="no cell with a defined replicate"):
        plots.plot_coverage(table.assign(n_replicates=0), paths=paths)


# --------------------------------------------------------------------------------------------
# Configuration keys (schema and cross-key checks of disaggregated_eval_workflow.config)
# --------------------------------------------------------------------------------------------


def test_coverage_config_defaults_and_checks():
    from disaggregated_eval_workflow.config import ConfigError, validate_config

    config = validate_config({})
    assert config["coverage"] == {
        "settings": None,
        "n_replicates": 200,
        "n_replicates_r": 80,
        "n_resamples": 1000,
        "jobs_per_setting": 4,
    }
    assert config["resources"]["simulation"]["coverage"]["threads"] == 1
    with pytest.raises(
        ConfigError, match=r"coverage.n_replicates_r must be at most coverage.n_replicates \(5\); got 6"
    ):
        validate_config({"coverage": {"n_replicates": 5, "n_replicates_r": 6}})
    with pytest.raises(
        ConfigError, match=r"coverage.jobs_per_setting must be at most coverage.n_replicates \(5\); got 6"
    ):
        validate_config({"coverage": {"n_replicates": 5, "n_replicates_r": 0, "jobs_per_setting": 6}})
    with pytest.raises(ConfigError, match=r"coverage.settings contains unknown name\(s\) 'selection_x'"):
        validate_config({"coverage": {"settings": ["selection_x"]}})
    with pytest.raises(ConfigError, match=r"coverage.settings must be among simulation.settings.*'outcome_shift'"):
        validate_config({"coverage": {"settings": ["outcome_shift"]}, "simulation": {"settings": ["covariate_shift"]}})


# --------------------------------------------------------------------------------------------
# The workflow target (tiny configuration)
# --------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
LINKED = ("Snakefile", "workflow", "config", "src", "profiles")


@pytest.mark.slow
def test_coverage_target_tiny(tmp_path):
    """`snakemake coverage` on tests/fixtures/tiny.yaml (2 settings, 3 replicates, 1 with estimated
    P(A | R), 30 resamples): the tables, the design record, the figure and the progress lines."""
    for name in LINKED:
        (tmp_path / name).symlink_to(REPO / name, target_is_directory=(REPO / name).is_dir())
    tiny = yaml.safe_load((REPO / "tests" / "fixtures" / "tiny.yaml").read_text())
    cmd = [sys.executable, "-m", "snakemake", "coverage", "--cores", "2", "--configfile",
           str(REPO / "tests" / "fixtures" / "tiny.yaml"), "--directory", str(tmp_path)]  # fmt: skip
    run = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=3600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    settings = tiny["coverage"]["settings"]
    table = pd.read_csv(tmp_path / "results" / "tables" / "coverage.csv")
    assert list(table.columns) == list(coverage.COVERAGE_COLUMNS)
    assert sorted(set(table["dataset"])) == sorted(settings)
    n_r = table[(table["control"] == "R") & (table["weight_source"] == "estimated")]["n_replicates"]
    n_x = table[(table["control"] == "X") & (table["weight_source"] == "estimated")]["n_replicates"]
    assert n_r.max() <= tiny["coverage"]["n_replicates_r"] and n_x.max() <= tiny["coverage"]["n_replicates"]
    assert (table["n_resamples"] == tiny["coverage"]["n_resamples"]).all()
    summary = pd.read_csv(tmp_path / "results" / "tables" / "coverage_summary.csv")
    assert list(summary.columns) == list(coverage.SUMMARY_COLUMNS)
    design = json.loads((tmp_path / "results" / "tables" / "coverage_design.json").read_text())
    assert design["n_resamples"] == tiny["coverage"]["n_resamples"]
    assert design["n_replicates_r"] == dict.fromkeys(settings, tiny["coverage"]["n_replicates_r"])
    for ext in ("png", "pdf"):
        assert (tmp_path / "figures" / "simulation" / f"coverage.{ext}").stat().st_size > 1000
    # jobs_per_setting 2: part 0 holds replicates 0 and 2, part 1 replicate 1 (round robin)
    log = (tmp_path / "logs" / "coverage_replicates" / f"{settings[0]}_part_0.log").read_text()
    assert "replicates [0, 2]" in log and "replicate 2 (2 / 2 of this job" in log
    again = subprocess.run([*cmd, "--dry-run"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert "Nothing to be done" in again.stdout + again.stderr
