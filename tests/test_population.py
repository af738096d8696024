"""Tests of the exact oracle P(A | R) and of the population metrics by integration.

Deterministic checks compare with closed forms or independent numerical methods (scipy quadrature,
bracketing root finders) at tolerances set by floating point or by the measured quadrature error.
The slow test compares both the oracle and the population T_a with a Monte Carlo sample of 10^7
rows per setting; its tolerances come from the Monte Carlo standard errors (see its docstring).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import integrate, optimize, sparse
from scipy.special import expit, logit
from scipy.stats import binom, norm
from threadpoolctl import threadpool_limits

from disaggregated_eval import outcome_models, seeds, vocabulary
from disaggregated_eval import population as pop
from disaggregated_eval import simulate as sm
from disaggregated_eval.metrics import compute_metrics

SETTINGS = list(sm.SETTINGS)
FITTED = vocabulary.MODEL_TYPES
BAYES = vocabulary.BAYES_MODELS
METRICS = vocabulary.PIPELINE_METRICS
# Non-monotone E[Y | X] (two or more preimages per score): the hard case of the change of variables.
NON_MONOTONE = ["outcome_shift", "complex_causal_shift", "anticausal_presentation_shift", "selection_ya"]


@pytest.fixture(autouse=True, scope="module")
def one_openmp_thread():
    """HistGradientBoosting predictions of a few thousand rows: OpenMP threads only cost (shared CPUs)."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


@functools.cache
def fitted_models(setting: str) -> outcome_models.OutcomeModels:
    """Outcome models fitted on 4,000 training rows: small, but step functions of x like any HGB fit."""
    train, _ = sm.simulate_setting(setting, n_train=4_000, n_test=10, seed=17)
    fitted, _ = outcome_models.fit_outcome_models(
        train, features=["x"], grid=(8,), n_splits=2, seed=17, dataset=setting, n_threads=1
    )
    return fitted


def _rng(*path: str | int) -> np.random.Generator:
    return seeds.generator(20251201, "tests", "population", *path)


def _mixture_density(setting: str, x: np.ndarray) -> np.ndarray:
    """f(x, a), shape (n, 2), written from the paper's parameter tables (independent of the module)."""
    d = sm.get_dgp(setting)
    d = d.base if isinstance(d, sm.SelectionDGP) else d
    if isinstance(d, sm.CausalDGP):
        if d.gamma_a == 1:
            return np.column_stack([0.5 * norm.pdf(x, d.mu[0]), 0.5 * norm.pdf(x, d.mu[1])])
        both = 0.25 * (norm.pdf(x, d.mu[0]) + norm.pdf(x, d.mu[1]))
        return np.column_stack([both, both])
    return np.column_stack(
        [0.5 * ((1 - d.p_y[a]) * norm.pdf(x, d.mu[a][0]) + d.p_y[a] * norm.pdf(x, d.mu[a][1])) for a in (0, 1)]
    )


# --------------------------------------------------------------------------------------------
# DGP building blocks
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting", SETTINGS)
def test_bayes_logit_is_the_logit_of_bayes_scores_with_its_derivative(setting):
    d = sm.get_dgp(setting)
    x = np.linspace(-7, 7, 1401)
    both = pd.DataFrame({"x": np.r_[x, x], "a": np.r_[np.zeros(x.size, int), np.ones(x.size, int)]})
    scores = sm.bayes_scores(setting, both)
    for model in BAYES:
        value, slope = d.bayes_logit(x, model)
        # scores within 1e-7 of 1 lose ~1e-16 / 1e-7 relative precision in 1 - r: 1e-8 in the logit
        np.testing.assert_allclose(np.r_[value[:, 0], value[:, 1]], logit(scores[model]), rtol=0, atol=1e-8)
        # central difference: truncation h^2 |q'''| / 6 < 1e-10, rounding eps |q| / h < 1e-9
        h = 1e-5
        fd = (d.bayes_logit(x + h, model)[0] - d.bayes_logit(x - h, model)[0]) / (2 * h)
        np.testing.assert_allclose(slope, fd, rtol=0, atol=5e-9)
    _, _, log_fxa = d.bayes_logit(x, "bayes_x", with_density=True)
    np.testing.assert_allclose(np.exp(log_fxa), _mixture_density(setting, x), rtol=1e-12, atol=0)


@pytest.mark.parametrize("setting", SETTINGS)
def test_mass_xa_matches_quadrature(setting):
    d = sm.get_dgp(setting)
    lo = np.array([-np.inf, -3.0, -0.4, 1.7, 5.0, -1.0])
    hi = np.array([-2.5, -1.0, 0.9, np.inf, 8.0, -1.0])
    got = d.mass_xa(lo, hi)
    for k in range(lo.size):
        for a in (0, 1):
            want = (
                integrate.quad(
                    lambda v, a=a: _mixture_density(setting, np.array([v]))[0, a],
                    lo[k],
                    hi[k],
                    epsabs=1e-14,
                    epsrel=1e-12,
                )[0]
                if lo[k] < hi[k]
                else 0.0
            )
            assert got[k, a] == pytest.approx(want, rel=1e-10, abs=1e-14)
    whole = d.mass_xa(np.array([-np.inf]), np.array([np.inf]))[0]
    np.testing.assert_allclose(whole, d.p_a(), rtol=0, atol=1e-15)


# --------------------------------------------------------------------------------------------
# fitted models are step functions of x
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting", ["complex_causal_shift", "anticausal_label_shift"])
def test_step_score_is_the_fitted_model(setting):
    fitted = fitted_models(setting)
    _, test = sm.simulate_setting(setting, n_train=10, n_test=20_000, seed=3)
    predicted = fitted.predict(test)
    for model in FITTED:
        step = pop.step_score(fitted, model)
        # exact float equality with the pipeline's predictions on a test set
        np.testing.assert_array_equal(step(test["x"].to_numpy(), test["a"].to_numpy()), predicted[model].to_numpy())
        for a in (0, 1):
            t = step.thresholds[a]
            assert t.size > 100 and np.all(np.diff(t) > 0)
            # at the thresholds (which go to the lower interval) and one float to either side
            x = np.concatenate([t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf), np.linspace(-9, 9, 4001)])
            frame = pd.DataFrame({"x": x, "a": np.full(x.size, a)})
            np.testing.assert_array_equal(step(x, np.full(x.size, a)), fitted.predict(frame)[model].to_numpy())
        if model == "x":
            np.testing.assert_array_equal(step.values[0], step.values[1])


def test_step_score_validation():
    fitted = fitted_models("complex_causal_shift")
    with pytest.raises(ValueError, match="model must be one of 'x', 'xa', 'xa_stratified'; got 'bayes_x'"):
        pop.step_score(fitted, "bayes_x")
    with pytest.raises(TypeError, match="fitted must be an OutcomeModels; got dict"):
        pop.step_score({}, "x")


# --------------------------------------------------------------------------------------------
# the oracle P(A | R): step scores
# --------------------------------------------------------------------------------------------
def test_step_oracle_of_a_rounded_score_is_exact():
    # R = round(sigmoid(X / 2), 1) for both groups: R = k/10 iff X lies in an interval with
    # ends 2 logit(k/10 -+ 0.05), so P(A = 1 | R = k/10) follows from normal CDFs.
    setting = "covariate_shift"
    d = sm.get_dgp(setting)
    ks = np.arange(11)
    t = 2 * logit(ks[:-1] / 10 + 0.05)
    step = pop.StepScore(thresholds=(t, t), values=(ks / 10, ks / 10))
    oracle = pop.StepScoreOracle(setting, "x", step)
    lo = np.r_[-np.inf, t]
    hi = np.r_[t, np.inf]
    mass = [
        0.5 * np.where(lo > m, norm.sf(lo - m) - norm.sf(hi - m), norm.cdf(hi - m) - norm.cdf(lo - m)) for m in d.mu
    ]
    np.testing.assert_allclose(oracle(ks / 10)[:, 1], mass[1] / (mass[0] + mass[1]), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(oracle.joint.sum(), 1.0, atol=1e-15)
    # a score between the values is not a value of this model
    with pytest.raises(ValueError, match=r"scores\[1\] = 0.25 is not a value of the fitted model 'x'"):
        oracle(np.array([0.2, 0.25]))


@pytest.mark.parametrize("setting", ["complex_causal_shift", "selection_ya"])
def test_step_oracle_of_fitted_models(setting):
    fitted = fitted_models(setting)
    d = sm.get_dgp(setting)
    for model in FITTED:
        oracle = pop.score_oracle(setting, model, fitted=fitted)
        np.testing.assert_allclose(oracle.joint.sum(), 1.0, atol=1e-14)
        np.testing.assert_allclose(oracle.joint.sum(axis=0), d.p_a(), atol=1e-14)
        np.testing.assert_allclose(oracle.proba.sum(axis=1), 1.0, atol=1e-15)
        if model == "x":
            assert ((oracle.proba > 0) & (oracle.proba < 1)).all()
        else:
            # every score value occurs in one group only, so R reveals A
            step = oracle.step
            assert np.intersect1d(step.values[0], step.values[1]).size == 0
            assert set(np.unique(oracle.proba)) == {0.0, 1.0}


# --------------------------------------------------------------------------------------------
# the oracle P(A | R): Bayes scores
# --------------------------------------------------------------------------------------------
def _affine_bayes_xa(setting: str) -> tuple[np.ndarray, np.ndarray]:
    """Slope b_a and intercept c_a of logit E[Y | X = x, A = a, S = 1] = b_a x + c_a (paper A.3.1)."""
    d = sm.get_dgp(setting)
    shift = np.zeros(2)
    if isinstance(d, sm.SelectionDGP):
        s = np.asarray(d.s_ay)
        shift = np.log(s[:, 1] / s[:, 0])
        d = d.base
    if isinstance(d, sm.CausalDGP):
        return np.asarray(d.beta, float), np.asarray(d.alpha, float) + shift
    mu = np.asarray(d.mu, float)
    p = np.asarray(d.p_y, float)
    return mu[:, 1] - mu[:, 0], logit(p) - 0.5 * (mu[:, 1] ** 2 - mu[:, 0] ** 2) + shift


@pytest.mark.parametrize("setting", SETTINGS)
def test_smooth_oracle_of_bayes_xa_matches_closed_form(setting):
    # bayes_xa is affine in x within each group: the preimage of q under group a's score is
    # (q - c_a) / b_a and P(a) f_R(r | a) is proportional to f(x_a, a) / |b_a|.
    b, c = _affine_bayes_xa(setting)
    _, test = sm.simulate_setting(setting, n_train=10, n_test=5_000, seed=8)
    r = sm.bayes_scores(setting, test)["bayes_xa"].to_numpy()
    q = logit(r)
    joint = np.column_stack([_mixture_density(setting, (q - c[a]) / b[a])[:, a] / abs(b[a]) for a in (0, 1)])
    expected = joint / joint.sum(axis=1, keepdims=True)
    got = pop.score_oracle(setting, "bayes_xa")(r)
    np.testing.assert_allclose(got, expected, rtol=1e-8, atol=1e-12)


def _brute_force_p_a_given_r(setting: str, r: float) -> np.ndarray:
    """P(A | R = r) for bayes_x by an independent method: every sign change of logit E[Y|X] - q on a
    grid of step 1e-3, brentq to 1e-14, derivative by central differences of the public score."""
    d = sm.get_dgp(setting)

    def g(v):
        return logit(d.selected_p_y_given_x(np.atleast_1d(v)))

    q = logit(r)
    grid = np.linspace(-14, 12, 26_001)
    diff = g(grid) - q
    total = np.zeros(2)
    for k in np.flatnonzero(np.sign(diff[:-1]) != np.sign(diff[1:])):
        root = optimize.brentq(lambda v: g(v)[0] - q, grid[k], grid[k + 1], xtol=1e-14)
        slope = (g(root + 1e-6)[0] - g(root - 1e-6)[0]) / 2e-6
        total += _mixture_density(setting, np.array([root]))[0] / abs(slope)
    return total / total.sum()


@pytest.mark.parametrize("setting", NON_MONOTONE)
def test_smooth_oracle_of_bayes_x_matches_independent_root_finding(setting):
    oracle = pop.score_oracle(setting, "bayes_x")
    assert len(oracle.pieces) >= 2 and oracle.critical_points.size >= 1
    rng = _rng("brute", setting)
    r = sm.bayes_scores(setting, sm.get_dgp(setting).sample(40, rng))["bayes_x"].to_numpy()
    got = oracle(r)
    expected = np.array([_brute_force_p_a_given_r(setting, v) for v in r])
    # central differences with h = 1e-6: relative error of the Jacobian ~1e-9
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("setting", SETTINGS)
@pytest.mark.parametrize("model", BAYES)
def test_oracle_integrates_to_the_group_masses(setting, model):
    # Deterministic check of the pointwise formula: for every score bin,
    # integral over {r in bin} of P(A = a | R) dP = P(A = a, R in bin). The left side uses the
    # oracle at each pseudo-row, the right side only the densities. Bin edges are breakpoints of
    # the quadrature, so both sides are exact up to ~1e-12.
    oracle = pop.score_oracle(setting, model)
    coarse = pop.population_rows(setting, model, oracle=oracle)
    edges = _weighted_quantiles(coarse.score, coarse.mass, 200)
    rows = pop.population_rows(setting, model, oracle=oracle, breakpoint_scores=edges)
    bins = np.searchsorted(edges, rows.score, side="right")
    p = oracle(rows.score)
    for a in (0, 1):
        via_oracle = np.bincount(bins, rows.mass * p[:, a], minlength=edges.size + 1)
        direct = np.bincount(bins, rows.mass * (rows.a == a), minlength=edges.size + 1)
        np.testing.assert_allclose(via_oracle, direct, rtol=0, atol=1e-11)


def test_score_oracle_validation():
    with pytest.raises(ValueError, match=r"fitted .* needed .* model 'x'"):
        pop.score_oracle("covariate_shift", "x")
    with pytest.raises(ValueError, match=r"model must be one of .*; got 'tree'"):
        pop.score_oracle("covariate_shift", "tree")
    with pytest.raises(ValueError, match="unknown simulation setting 'nope'"):
        pop.score_oracle("nope", "bayes_x")
    oracle = pop.score_oracle("covariate_shift", "bayes_x")
    with pytest.raises(ValueError, match=r"scores must be finite and in \[0, 1\]; got 1.5 at row 1"):
        oracle(np.array([0.5, 1.5]))
    with pytest.raises(ValueError, match=r"scores\[1\] = 1.0 is not a value of 'bayes_x'"):
        oracle(np.array([0.5, 1.0]))


# --------------------------------------------------------------------------------------------
# oracle_weights (paper Algorithm 1): X, Y in closed form, one R block per score
# --------------------------------------------------------------------------------------------
def test_oracle_weights_closed_form_rows_and_format():
    setting = "complex_anticausal_shift"
    d = sm.get_dgp(setting)
    _, test = sm.simulate_setting(setting, n_train=10, n_test=1_000, seed=5)
    w = pop.oracle_weights(setting, test, test_scores={})
    assert list(w.columns) == ["weight_source", "control", "model", "row", "p_0", "p_1"]
    assert (w["weight_source"] == "oracle").all() and (w["model"] == "*").all()
    assert w["row"].dtype == np.int64 and w["p_0"].dtype == np.float64
    wx = w[w["control"] == "X"]
    wy = w[w["control"] == "Y"]
    np.testing.assert_array_equal(wx["row"], np.arange(1_000))
    np.testing.assert_array_equal(wx[["p_0", "p_1"]].to_numpy(), d.p_a_given_x(test["x"]))
    np.testing.assert_array_equal(wy[["p_0", "p_1"]].to_numpy(), d.p_a_given_y(test["y"]))
    np.testing.assert_allclose(w["p_0"] + w["p_1"], 1.0, atol=1e-15)


def test_oracle_weights_monotone_bayes_score_is_p_a_given_x():
    # In covariate_shift, E[Y|X] = sigmoid(X / 2) is strictly increasing in X, so R determines X
    # and P(A | R) = P(A | X) exactly; the change of variables reproduces it up to rounding
    # (the preimage is found to a logit residual of 1e-11, so 1e-9 is a loose bound).
    setting = "covariate_shift"
    d = sm.get_dgp(setting)
    _, test = sm.simulate_setting(setting, n_train=10, n_test=20_000, seed=11)
    scores = sm.bayes_scores(setting, test)
    w = pop.oracle_weights(setting, test, test_scores={"bayes_x": scores["bayes_x"].to_numpy()})
    wr = w[w["control"] == "R"]
    assert (wr["model"] == "bayes_x").all() and len(wr) == len(test)
    np.testing.assert_array_equal(wr["row"], np.arange(len(test)))
    np.testing.assert_allclose(wr[["p_0", "p_1"]].to_numpy(), d.p_a_given_x(test["x"]), rtol=0, atol=1e-9)
    # no randomness: the same call gives the same bits
    again = pop.oracle_weights(setting, test, test_scores={"bayes_x": scores["bayes_x"].to_numpy()})
    pd.testing.assert_frame_equal(w, again)


@pytest.fixture(scope="module")
def small_fit():
    """Outcome models of complex_causal_shift fitted on 3,000 rows: still step functions of x."""
    setting = "complex_causal_shift"
    train, test = sm.simulate_setting(setting, n_train=3_000, n_test=5_000, seed=4)
    fitted, _ = outcome_models.fit_outcome_models(
        train, features=["x"], grid=(8,), n_splits=2, seed=4, dataset=setting, n_threads=1
    )
    return setting, fitted, test


def test_oracle_weights_of_fitted_models(small_fit):
    setting, fitted, test = small_fit
    predicted = fitted.predict(test)
    test_scores = {m: predicted[m].to_numpy() for m in ("x", "xa", "xa_stratified")}
    test_scores.update({m: v.to_numpy() for m, v in sm.bayes_scores(setting, test).items()})
    w = pop.oracle_weights(setting, test, test_scores=test_scores, fitted=fitted)
    blocks = list(dict.fromkeys(zip(w["control"], w["model"])))
    assert blocks == [("X", "*"), ("Y", "*")] + [("R", m) for m in test_scores]
    assert len(w) == len(blocks) * len(test)
    np.testing.assert_allclose(w["p_0"] + w["p_1"], 1.0, atol=1e-12)
    for model, scores in test_scores.items():
        wr = w[(w["control"] == "R") & (w["model"] == model)]
        np.testing.assert_array_equal(
            wr[["p_0", "p_1"]].to_numpy(), pop.score_oracle(setting, model, fitted=fitted)(scores)
        )
    # xa and xa_stratified take disjoint score values in the two groups, so R reveals A
    for model in ("xa", "xa_stratified"):
        wr = w[(w["control"] == "R") & (w["model"] == model)]
        np.testing.assert_array_equal(wr["p_1"].to_numpy(), test["a"].to_numpy().astype(float))
    # prebuilt oracles give the same table
    oracles = {m: pop.score_oracle(setting, m, fitted=fitted) for m in test_scores}
    pd.testing.assert_frame_equal(w, pop.oracle_weights(setting, test, test_scores=test_scores, oracles=oracles))


def test_oracle_weights_validation(small_fit):
    setting, fitted, test = small_fit
    half = np.full(len(test), 0.5)
    with pytest.raises(ValueError, match=r"test_scores\['x'\] has 3 rows but y has 5000"):
        pop.oracle_weights(setting, test, test_scores={"x": np.zeros(3)}, fitted=fitted)
    with pytest.raises(ValueError, match=r"model .*must be one of.*got 'tree'"):
        pop.oracle_weights(setting, test, test_scores={"tree": half})
    with pytest.raises(ValueError, match=r"fitted .* needed .* model 'xa'"):
        pop.oracle_weights(setting, test, test_scores={"xa": half})
    with pytest.raises(ValueError, match=r"scores\[0\] = 0.5 is not a value of the fitted model 'x'"):
        pop.oracle_weights(setting, test, test_scores={"x": half}, fitted=fitted)
    with pytest.raises(ValueError, match=r"test_scores\['bayes_x'\] must be finite and in \[0, 1\]"):
        pop.oracle_weights(setting, test, test_scores={"bayes_x": half + 1.0})
    with pytest.raises(ValueError, match=r"missing columns.*'y'"):
        pop.oracle_weights(setting, test[["x", "a"]], test_scores={})
    with pytest.raises(ValueError, match="unknown simulation setting 'bad'"):
        pop.oracle_weights("bad", test, test_scores={})
    with pytest.raises(ValueError, match=r"test\['a'\] must be 0/1; got values \{2\}"):
        pop.oracle_weights(setting, test.assign(a=2), test_scores={})


# --------------------------------------------------------------------------------------------
# population metrics
# --------------------------------------------------------------------------------------------
def _weighted_quantiles(values: np.ndarray, weights: np.ndarray, n_bins: int) -> np.ndarray:
    order = np.argsort(values)
    cum = np.cumsum(weights[order]) / weights.sum()
    edges = np.interp(np.arange(1, n_bins) / n_bins, cum, values[order])
    return np.unique(edges)


@pytest.mark.parametrize("setting", SETTINGS)
def test_population_rows_reproduce_the_distribution(setting):
    d = sm.get_dgp(setting)
    for model in ("bayes_x", "xa"):
        rows = pop.population_rows(setting, model, fitted=fitted_models(setting) if model == "xa" else None)
        assert rows.mass.sum() == pytest.approx(1.0, abs=1e-13)
        for a in (0, 1):
            in_group = rows.a == a
            assert rows.mass[in_group].sum() == pytest.approx(d.p_a()[a], abs=1e-13)
            # quad's own error on the prevalence is ~1e-12
            label_rate = (rows.mass * in_group * rows.y).sum() / rows.mass[in_group].sum()
            assert label_rate == pytest.approx(d.prevalence(a), abs=1e-11)
            mean_x = (rows.mass * in_group * rows.x).sum() / rows.mass[in_group].sum()
            assert mean_x == pytest.approx(d.mean_x_given_a(a), abs=1e-12)


@pytest.mark.parametrize(
    "setting", ["anticausal_label_shift", "anticausal_presentation_shift", "complex_anticausal_shift"]
)
def test_population_subgroup_metrics_closed_form(setting):
    # Anticausal: X | A = a, Y = y ~ N(mu_ay, 1) and bayes_xa is increasing in x within group a
    # iff mu_a1 > mu_a0. So the subgroup AUC is Phi(|mu_a1 - mu_a0| / sqrt 2), and with x_a the
    # point where the score crosses 0.5, sensitivity and specificity are normal tail masses.
    d = sm.get_dgp(setting)
    b, c = _affine_bayes_xa(setting)
    table = pop.population_controlled_differences(setting, "bayes_xa", controls=("none",))
    for a in (0, 1):
        got = table[table["group"] == vocabulary.SIMULATION_GROUP_LABELS[a]].set_index("metric")["subgroup_metric"]
        m0, m1 = d.mu[a]
        x0 = -c[a] / b[a]
        up = b[a] > 0
        assert got["auc"] == pytest.approx(norm.cdf(abs(m1 - m0) / math.sqrt(2)), abs=1e-12)
        assert got["sensitivity"] == pytest.approx(norm.sf(x0 - m1) if up else norm.cdf(x0 - m1), abs=1e-12)
        assert got["specificity"] == pytest.approx(norm.cdf(x0 - m0) if up else norm.sf(x0 - m0), abs=1e-12)
        assert got["label_rate"] == pytest.approx(d.p_y[a], abs=1e-13)


@pytest.mark.parametrize("setting", ["complex_causal_shift", "selection_y"])
def test_population_controlled_differences_identities(setting):
    fitted = fitted_models(setting)
    for model in vocabulary.SIMULATION_MODELS:
        table = pop.population_controlled_differences(setting, model, fitted=fitted)
        assert list(table.columns) == list(pop.RESULT_COLUMNS)
        assert len(table) == 4 * 2 * len(METRICS)
        assert set(table["group"]) == {"A = 0", "A = 1"}
        np.testing.assert_allclose(
            table["controlled_difference"], table["subgroup_metric"] - table["weighted_population_metric"], atol=0
        )
        t = table.set_index(["control", "group", "metric"])
        # V = none: M_a is the population metric, the same for both groups
        for metric in METRICS:
            assert (
                t.loc[("none", "A = 0", metric), "weighted_population_metric"]
                == t.loc[("none", "A = 1", metric), "weighted_population_metric"]
            )
        # M_a of the label rate with V = Y is P(Y = 1 | A = a): T_a = 0
        for group in ("A = 0", "A = 1"):
            assert t.loc[("Y", group, "label_rate"), "controlled_difference"] == pytest.approx(0.0, abs=1e-12)
        # R reveals A for xa and xa_stratified: P(A = a | R) is the group mask and T_a = 0 exactly
        if model in ("xa", "xa_stratified"):
            assert (t.xs("R", level="control")["controlled_difference"] == 0.0).all()


@pytest.mark.parametrize(
    ("setting", "model"),
    [
        ("complex_causal_shift", "x"),
        ("outcome_shift", "xa_stratified"),
        ("complex_causal_shift", "bayes_x"),
        ("anticausal_presentation_shift", "bayes_x"),
        ("selection_ya", "bayes_xa"),
        ("outcome_shift", "bayes_x"),
    ],
)
def test_population_quadrature_converges(setting, model):
    # Halving the cells (to a quarter) and raising the nodes from 8 to 12 changes no metric by more
    # than 1e-9 (measured: below 1e-10): the default quadrature is accurate to about 1e-10.
    fitted = fitted_models(setting) if model in FITTED else None
    default = pop.population_controlled_differences(setting, model, fitted=fitted)
    fine = pop.population_controlled_differences(setting, model, fitted=fitted, cell_width=0.0125, n_nodes=12)
    cols = ["subgroup_metric", "weighted_population_metric"]
    np.testing.assert_allclose(default[cols].to_numpy(), fine[cols].to_numpy(), rtol=0, atol=1e-9)


@pytest.mark.parametrize(("setting", "model"), [("complex_causal_shift", "bayes_x"), ("selection_ya", "bayes_xa")])
def test_continuous_auc_equals_pairwise_auc_of_fine_pseudo_rows(setting, model):
    # compute_metrics' pairwise AUC on the pseudo-rows errs by about one cell's mass per pair of
    # cells with overlapping scores (measured ~5e-6 at cell width 0.01); the CDF integral does not.
    oracle = pop.score_oracle(setting, model)
    rows = pop.population_rows(setting, model, oracle=oracle, cell_width=0.005)
    for weight in (np.ones(rows.x.size), (rows.a == 1).astype(float), oracle(rows.score)[:, 0]):
        pairwise = compute_metrics(rows.y, rows.score, sample_weight=rows.mass * weight, metrics=("auc",))["auc"]
        assert rows.metrics(weight, metrics=("auc",))["auc"] == pytest.approx(pairwise, abs=2e-5)


def test_population_validation():
    with pytest.raises(ValueError, match=r"control must be one of .*; got 'Z'"):
        pop.population_controlled_differences("covariate_shift", "bayes_x", controls=("Z",))
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        pop.population_controlled_differences("covariate_shift", "bayes_x", metrics=("nope",))
    with pytest.raises(ValueError, match="group_labels must be two distinct labels"):
        pop.population_controlled_differences("covariate_shift", "bayes_x", group_labels=("a", "a"))
    with pytest.raises(ValueError, match="cell_width must be a positive number; got 0"):
        pop.population_rows("covariate_shift", "bayes_x", cell_width=0)
    with pytest.raises(ValueError, match="oracle is for setting 'covariate_shift', model 'bayes_x'"):
        pop.population_rows("covariate_shift", "bayes_xa", oracle=pop.score_oracle("covariate_shift", "bayes_x"))
    with pytest.raises(ValueError, match=r"breakpoint_scores must lie in \(0, 1\)"):
        pop.population_rows("covariate_shift", "bayes_x", breakpoint_scores=[0.5, 1.0])


# --------------------------------------------------------------------------------------------
# a setting with other group shares (thinning one group)
# --------------------------------------------------------------------------------------------
def test_group_prior_keep_and_shift():
    keep = pop.group_prior_keep("complex_causal_shift", (0.9, 0.1))
    np.testing.assert_allclose(keep, [1.0, 1.0 / 9.0], rtol=1e-14)  # P(A) = (0.5, 0.5)
    p = np.array([[0.5, 0.5], [0.2, 0.8]])
    np.testing.assert_allclose(
        pop.shift_group_proba(p, keep), [[0.9, 0.1], [0.2 / (0.2 + 0.8 / 9), 0.8 / 9 / (0.2 + 0.8 / 9)]]
    )
    for bad in [(0.5,), (0.9, 0.2), (1.0, 0.0), (np.nan, 0.5)]:
        with pytest.raises(ValueError, match="group_prior must be two positive numbers summing to 1"):
            pop.group_prior_keep("complex_causal_shift", bad)
    same = pop.population_controlled_differences("complex_causal_shift", "bayes_x", group_prior=(0.5, 0.5))
    plain = pop.population_controlled_differences("complex_causal_shift", "bayes_x")
    pd.testing.assert_frame_equal(same, plain, check_exact=False, rtol=1e-12, atol=1e-14)


def test_group_prior_population_matches_monte_carlo():
    """complex_causal_shift with group 1 thinned to 10%, model bayes_x: the sample's group share and
    P(Y | A) (kept by thinning), and the integrated subgroup metric, M_a and T_a of every group and
    control with the shifted oracle weights, against 20 chunks of 20,000 thinned rows. Each check
    allows 5.5 standard errors (chunk SD / sqrt 20) plus 1e-9: with t_19 tails a correct
    implementation fails one of the ~80 checks with probability about 2e-3 (fixed seeds:
    deterministic). Ignoring the thinning (the setting's own population) moves T_a(R) by up to 0.1."""
    setting, prior, chunks, rows = "complex_causal_shift", (0.9, 0.1), 20, 20_000
    dgp = sm.get_dgp(setting)
    oracle = pop.score_oracle(setting, "bayes_x")
    keep = pop.group_prior_keep(setting, prior)
    values, shares, rates = [], [], []
    for k in range(chunks):
        df = pop.sample_with_group_prior(setting, rows, group_prior=prior, rng=_rng("group prior", k))
        assert len(df) == rows and list(df.columns) == ["x", "a", "y"]
        x, a, y = df["x"].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy()
        score = sm.bayes_scores(setting, df)["bayes_x"].to_numpy()
        shares.append(a.mean())
        rates.append([y[a == g].mean() for g in (0, 1)])
        weights = {
            "X": pop.shift_group_proba(dgp.p_a_given_x(x), keep),
            "Y": pop.shift_group_proba(dgp.p_a_given_y(y), keep),
            "R": pop.shift_group_proba(oracle(score), keep),
        }
        chunk = []
        for w in weights.values():
            for g in (0, 1):
                sub = compute_metrics(y[a == g], score[a == g], metrics=METRICS)
                m_a = compute_metrics(y, score, sample_weight=w[:, g], metrics=METRICS)
                chunk.append([[sub[q], m_a[q], sub[q] - m_a[q]] for q in METRICS])
        values.append(chunk)
    n = chunks * rows
    assert abs(np.mean(shares) - 0.1) < 5.5 * math.sqrt(0.09 / n)
    for g in (0, 1):
        p = dgp.prevalence(g)
        n_g = n * prior[g]
        assert abs(np.mean([r[g] for r in rates]) - p) < 5.5 * math.sqrt(p * (1 - p) / n_g), g
    mc = np.asarray(values)  # (chunks, control x group, metric, quantity)
    mean, se = mc.mean(axis=0), mc.std(axis=0, ddof=1) / math.sqrt(chunks)
    table = pop.population_controlled_differences(
        setting, "bayes_x", oracle=oracle, controls=("X", "Y", "R"), metrics=METRICS, group_prior=prior
    )
    got = table[["subgroup_metric", "weighted_population_metric", "controlled_difference"]].to_numpy()
    got = got.reshape(3 * 2, len(METRICS), 3)
    bad = np.abs(got - mean) > 5.5 * se + 1e-9
    assert not bad.any(), (got[bad], mean[bad], se[bad])
    # the thinning matters: the setting's own T_a(R) differs by many standard errors
    plain = pop.population_controlled_differences(setting, "bayes_x", oracle=oracle, controls=("R",), metrics=METRICS)
    shift = np.abs(plain["controlled_difference"].to_numpy() - got[4:, :, 2].ravel())
    assert shift.max() > 20 * se[4:, :, 2].max(), shift


# --------------------------------------------------------------------------------------------
# Monte Carlo, 10^7 rows per setting
# --------------------------------------------------------------------------------------------
MC_CHUNKS = 40
MC_CHUNK_ROWS = 250_000  # 40 x 250,000 = 10^7 rows per setting
N_SCORE_BINS = 100
# Settings of the population T_a check (one per DGP family; every setting is checked for P(A | R)).
POPULATION_MC_SETTINGS = ["complex_causal_shift", "complex_anticausal_shift", "selection_ya"]


class _MonteCarloSetup:
    """What both Monte Carlo tests need for one setting: fitted models, oracles, score codes."""

    def __init__(self, setting: str) -> None:
        self.setting = setting
        self.dgp = sm.get_dgp(setting)
        self.fitted = fitted_models(setting)
        self.oracles = {
            m: pop.score_oracle(setting, m, fitted=self.fitted if m in FITTED else None)
            for m in vocabulary.SIMULATION_MODELS
        }
        # index among the sorted score values of every interval of each group's step function
        self.interval_code = {
            m: [np.searchsorted(self.oracles[m].values, self.oracles[m].step.values[a]) for a in (0, 1)] for m in FITTED
        }

    def chunk(self, k: int) -> pd.DataFrame:
        return self.dgp.sample(MC_CHUNK_ROWS, _rng("monte_carlo", self.setting, k))

    def step_codes(self, model: str, x: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Index of each row's score among the model's score values (the step lookup)."""
        step = self.oracles[model].step
        code = np.empty(x.size, dtype=np.int64)
        for g in (0, 1):
            rows = a == g
            code[rows] = self.interval_code[model][g][np.searchsorted(step.thresholds[g], x[rows], side="left")]
        return code


def _binomial_ok(k: np.ndarray, n: np.ndarray, p: np.ndarray, level: float = 1e-6) -> np.ndarray:
    """Exact two-sided binomial check: P(X <= k) and P(X >= k) both above ``level`` (|z| < ~4.9)."""
    return (binom.cdf(k, n, p) > level) & (binom.sf(k - 1, n, p) > level)


@pytest.mark.slow
@pytest.mark.parametrize("setting", SETTINGS)
def test_oracle_matches_monte_carlo(setting):
    """The exact P(A | R) of every model against 10^7 population rows.

    Step models: for every score value v, the count of group 1 among the n_v Monte Carlo rows with
    R = v is Binomial(n_v, P(A = 1 | R = v)) and n_v is Binomial(N, P(R = v)); the exact two-sided
    binomial tail probability must exceed 1e-6 (|z| < ~4.9; with ~600 cells per setting a correct
    implementation fails with probability ~1e-3, and the seeds are fixed, so the outcome is
    deterministic). Values with P(A | R) in {0, 1} (xa, xa_stratified) must be pure. Bayes scores:
    the same for 100 score bins of equal population mass, against the exact
    P(A = 1, R in bin) = integral of the oracle over the bin. A wrong Jacobian, a missed preimage
    or a swapped group moves P(A | R) by 0.05 or more over whole bins, i.e. by tens of standard
    errors (~0.002 per bin), and fails. The step lookup used for the Monte Carlo scores is checked
    against the fitted model's predictions on 20,000 of the rows.
    """
    setup = _MonteCarloSetup(setting)
    oracles = setup.oracles
    bins, joints = {}, {m: oracles[m].joint for m in FITTED}
    for m in BAYES:
        coarse = pop.population_rows(setting, m, oracle=oracles[m])
        bins[m] = _weighted_quantiles(coarse.score, coarse.mass, N_SCORE_BINS)
        rows = pop.population_rows(setting, m, oracle=oracles[m], breakpoint_scores=bins[m])
        b = np.searchsorted(bins[m], rows.score, side="left")  # (edges[k-1], edges[k]], as the counts
        p = oracles[m](rows.score)
        joints[m] = np.column_stack([np.bincount(b, rows.mass * p[:, a], minlength=bins[m].size + 1) for a in (0, 1)])
    counts = {m: np.zeros(joints[m].shape) for m in vocabulary.SIMULATION_MODELS}

    def add_counts(m: str, g: int, values: np.ndarray, cuts: np.ndarray, codes: np.ndarray) -> None:
        # rows of group g per interval (cuts[k-1], cuts[k]] of the sorted values, then per score cell
        at_or_below = np.searchsorted(values, cuts, side="right")
        per_interval = np.diff(np.concatenate(([0], at_or_below, [values.size])))
        np.add.at(counts[m][:, g], codes, per_interval)

    for k in range(MC_CHUNKS):
        df = setup.chunk(k)
        x, a = df["x"].to_numpy(), df["a"].to_numpy()
        bayes = sm.bayes_scores(setting, df)
        if k == 0:  # the step lookup is the fitted model itself
            predicted = setup.fitted.predict(df.iloc[:20_000])
            for m in FITTED:
                lookup = oracles[m].values[setup.step_codes(m, x[:20_000], a[:20_000])]
                np.testing.assert_array_equal(lookup, predicted[m].to_numpy())
        for g in (0, 1):
            in_group = a == g
            x_sorted = np.sort(x[in_group])
            for m in FITTED:
                add_counts(m, g, x_sorted, oracles[m].step.thresholds[g], setup.interval_code[m][g])
            for m in BAYES:
                # bins (edges[k-1], edges[k]]: a score equal to an edge has probability 0
                add_counts(m, g, np.sort(bayes[m].to_numpy()[in_group]), bins[m], np.arange(bins[m].size + 1))

    n_total = MC_CHUNKS * MC_CHUNK_ROWS
    for m in vocabulary.SIMULATION_MODELS:
        joint, count = joints[m], counts[m]
        n_v, p_v = count.sum(axis=1), joint.sum(axis=1)
        assert _binomial_ok(n_v, n_total, p_v).all(), f"{m}: P(R in cell) off"
        share = np.divide(joint[:, 1], p_v, out=np.zeros_like(p_v), where=p_v > 0)
        seen = n_v > 0
        pure = seen & ((share < 1e-15) | (share > 1 - 1e-15))
        np.testing.assert_array_equal(count[pure, 1], np.rint(share[pure]) * n_v[pure])
        mixed = seen & ~pure
        assert _binomial_ok(count[mixed, 1], n_v[mixed], share[mixed]).all(), f"{m}: P(A | R) off"
        z = (count[mixed, 1] - n_v[mixed] * share[mixed]) / np.sqrt(n_v[mixed] * share[mixed] * (1 - share[mixed]))
        z_mass = (n_v - n_total * p_v) / np.sqrt(n_total * p_v * (1 - p_v))
        k, n, p = count[mixed, 1], n_v[mixed], share[mixed]
        tail = float(np.minimum(binom.cdf(k, n, p), binom.sf(k - 1, n, p)).min(initial=1.0))
        # |z| misleads in cells with a minority expected count below 1; the tail probability does not
        print(
            f"MC oracle {setting} {m}: P(A | R) max |z| {float(np.abs(z).max(initial=0.0)):.2f}, smallest "
            f"binomial tail {tail:.1e} over {int(mixed.sum())} mixed cells ({int(pure.sum())} pure cells exact); "
            f"P(R in cell) max |z| {float(np.abs(z_mass).max()):.2f}"
        )


def _mc_metrics(
    y: np.ndarray,
    score: np.ndarray,
    weights: np.ndarray,
    codes: np.ndarray | None = None,
    values: np.ndarray | None = None,
) -> np.ndarray:
    """The metrics of compute_metrics (threshold and preference threshold 0.5) for every weight
    column at once, shape (n_weights, len(METRICS)).

    Step scores (``codes``: each row's index among the increasing distinct score ``values``):
    every metric is a function of the weighted (score value, label) histogram, ties included.
    Continuous scores: weighted sums, and the AUC from one sort (no ties).
    """
    eps = np.finfo(np.float64).eps
    if codes is not None:
        cell = 2 * codes + y  # (value, label) cell of each row
        onehot = sparse.csr_matrix(
            (np.ones(cell.size), (cell, np.arange(cell.size))), shape=(2 * values.size, cell.size)
        )
        hist = onehot @ weights  # (2 m, k)
        neg, pos = hist[0::2], hist[1::2]
        yhat = (values >= 0.5)[:, None]
        loss = (pos * -np.log(np.clip(values, eps, 1 - eps))[:, None]).sum(0) + (
            neg * -np.log(np.clip(1 - values, eps, 1 - eps))[:, None]
        ).sum(0)
        wp, wn = pos.sum(0), neg.sum(0)
        tp, fp = (pos * yhat).sum(0), (neg * yhat).sum(0)
        auc = (pos * (np.cumsum(neg, axis=0) - 0.5 * neg)).sum(axis=0) / (wp * wn)
    else:
        yf = y.astype(np.float64)
        yhat = (score >= 0.5).astype(np.float64)
        ll = np.where(y == 1, -np.log(np.clip(score, eps, 1 - eps)), -np.log(np.clip(1 - score, eps, 1 - eps)))
        total_, wp, tp, fp, loss = np.column_stack([np.ones_like(yf), yf, yf * yhat, (1 - yf) * yhat, ll]).T @ weights
        wn = total_ - wp
        order = np.argsort(score)
        ws, ys = weights[order], yf[order]
        below = np.cumsum(ws * (1.0 - ys)[:, None], axis=0)  # negatives up to each row; no ties
        auc = np.einsum("i,ij,ij->j", ys, ws, below) / (wp * wn)
    total = wp + wn
    pp = tp + fp
    tn = wn - fp
    # undefined (NaN) without positive predictions, as compute_metrics
    precision = np.divide(tp, pp, out=np.full_like(tp, np.nan), where=pp > 0)
    metric_values = {
        "log_loss": loss / total,
        "auc": auc,
        "sensitivity": tp / wp,
        "specificity": tn / wn,
        "precision": precision,
        "net_benefit": (tp - fp) / total,
        "label_rate": wp / total,
        "predicted_positive_rate": pp / total,
    }
    return np.column_stack([metric_values[name] for name in METRICS])


@pytest.mark.slow
@pytest.mark.parametrize("setting", POPULATION_MC_SETTINGS)
def test_population_controlled_differences_match_monte_carlo(setting):
    """Population M_a and T_a by integration against 10^7 population rows (40 chunks of 250,000).

    For every model, control, group and pipeline metric, the Monte Carlo M_a and T_a (mean over
    the chunks, oracle weights) must lie within 5.5 standard errors (chunk standard deviation /
    sqrt 40) plus 1e-9 (the quadrature error bound of ``test_population_quadrature_converges``)
    of the integral. With t_39 tails P(|t| > 5.5) ~ 2.5e-6, the 640 checks of a setting fail
    together with probability ~2e-3 under a correct implementation; the seeds are fixed, so the
    outcome is deterministic. A wrong weight or density moves T_a by 1e-2 or more, against
    standard errors of ~1e-4. The chunk means of ratio metrics are biased by O(1 / 250,000), far
    below the standard errors. For continuous scores the Monte Carlo weights P(A | R) are the exact
    oracle interpolated in logit(r) on 100,001 nodes (the exact oracle on 10^7 rows takes minutes);
    the interpolation error is checked on 100,000 rows and is far below the standard errors.
    """
    setup = _MonteCarloSetup(setting)
    dgp, oracles = setup.dgp, setup.oracles
    tables = {}
    for m in BAYES:
        lo = min(float(np.min(piece.sign * piece.q)) for piece in oracles[m].pieces)
        hi = max(float(np.max(piece.sign * piece.q)) for piece in oracles[m].pieces)
        q_nodes = np.linspace(max(lo, -36.0), min(hi, 36.0), 100_001)
        tables[m] = (q_nodes, oracles[m](expit(q_nodes))[:, 1])
    weights = np.empty((MC_CHUNK_ROWS, 9))  # 1[A=0], 1[A=1], 1, P(A|X), P(A|Y), P(A|R) (two columns each)
    values = {m: [] for m in vocabulary.SIMULATION_MODELS}
    for k in range(MC_CHUNKS):
        df = setup.chunk(k)
        x, a, y = df["x"].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy()
        weights[:, 0], weights[:, 1], weights[:, 2] = a == 0, a == 1, 1.0
        weights[:, 3:5], weights[:, 5:7] = dgp.p_a_given_x(x), dgp.p_a_given_y(y)
        bayes = sm.bayes_scores(setting, df)
        for m in vocabulary.SIMULATION_MODELS:
            if m in FITTED:
                code = setup.step_codes(m, x, a)
                score = oracles[m].values[code]
                weights[:, 7:9] = oracles[m].proba[code]
            else:
                code, score = None, bayes[m].to_numpy()
                q_nodes, p_nodes = tables[m]  # linear interpolation on the uniform grid of logits
                u = (logit(score) - q_nodes[0]) / (q_nodes[1] - q_nodes[0])
                i = np.clip(np.floor(u).astype(np.int64), 0, q_nodes.size - 2)
                p1 = p_nodes[i] + np.clip(u - i, 0.0, 1.0) * (p_nodes[i + 1] - p_nodes[i])
                weights[:, 7], weights[:, 8] = 1.0 - p1, p1
                if k == 0:
                    error = np.abs(p1[:100_000] - oracles[m](score[:100_000])[:, 1])
                    assert error.mean() < 1e-8 and error.max() < 1e-4, (error.mean(), error.max())
            step_values = oracles[m].values if m in FITTED else None
            values[m].append(_mc_metrics(y, score, weights, code, step_values))
            if k == 0 and m in ("x", "bayes_x"):  # the vectorised metrics are compute_metrics
                head = slice(0, 5_000)
                mine = _mc_metrics(
                    y[head], score[head], weights[head, 3:4], None if code is None else code[head], step_values
                )[0]
                ref = compute_metrics(y[head], score[head], sample_weight=weights[head, 3], metrics=METRICS)
                np.testing.assert_allclose(mine, [ref[name] for name in METRICS], rtol=1e-12, atol=1e-14)

    columns = {"none": (2, 2), "X": (3, 4), "Y": (5, 6), "R": (7, 8)}
    for m in vocabulary.SIMULATION_MODELS:
        chunks = np.stack(values[m])  # (chunks, 9 weights, metrics)
        table = pop.population_controlled_differences(setting, m, fitted=setup.fitted, oracle=oracles[m])
        worst = 0.0
        for control, weight_columns in columns.items():
            for g, w in enumerate(weight_columns):
                exact = table[
                    (table["control"] == control) & (table["group"] == vocabulary.SIMULATION_GROUP_LABELS[g])
                ].set_index("metric")
                for name, mc in (
                    ("subgroup_metric", chunks[:, g]),
                    ("weighted_population_metric", chunks[:, w]),
                    ("controlled_difference", chunks[:, g] - chunks[:, w]),
                ):
                    mean, se = mc.mean(axis=0), mc.std(axis=0, ddof=1) / math.sqrt(MC_CHUNKS)
                    got = exact.loc[list(METRICS), name].to_numpy()
                    # an undefined metric (precision without positive predictions) is NaN in both
                    assert np.array_equal(np.isnan(got), np.isnan(mean)), (m, control, g, name, got, mean)
                    bad = np.abs(got - mean) > 5.5 * se + 1e-9
                    assert not bad.any(), (
                        f"{m} {control} group {g} {name}: {np.array(METRICS)[bad]} integral {got[bad]} "
                        f"vs Monte Carlo {mean[bad]} +- {se[bad]}"
                    )
                    # report |difference| / SE where the SE is not rounding noise (degenerate metrics,
                    # e.g. a specificity of exactly 1, have SE ~1e-16 and are covered by the 1e-9)
                    ratio = np.abs(got - mean) / np.where(se > 1e-12, se, np.inf)
                    worst = max(worst, float(np.max(ratio)))
        print(f"MC population {setting} {m}: max |integral - MC| / SE {worst:.2f}")
