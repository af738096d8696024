"""Tests of the simulated DGPs, their closed-form oracles, selection and seeding.

The exact oracle P(A | R), the oracle weights and the population metrics are tested in
``test_population.py``.

Statistical tolerances. Every Monte Carlo check compares an empirical mean with its closed-form
expectation and allows 5 standard errors. Under a correct implementation each check fails with
probability about 6e-7 (normal tail), so even the ~2,000 checks below fail together with probability
below about 1e-3 -- and the seeds are fixed, so the outcome is deterministic. With n = 200,000 one
standard error of a proportion is at most 0.0011 overall and about 0.007 in a bin of 5,000 rows,
so plausible bugs (groups swapped, a sign or intercept wrong, a missing mixture term, selection
ignored) move the statistic by tens of standard errors and fail.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.special import expit, logit
from scipy.stats import norm

from disaggregated_eval import seeds
from disaggregated_eval import simulate as sm

N_MC = 200_000
Z_TOL = 5.0

# Parameter tables of paper Supplementary A.3.1 (anticausal prevalences as in the authors' code),
# written out independently of the module.
CAUSAL_TABLE = {
    # id: (display, mu_0, mu_1, gamma_A, beta_0, beta_1, alpha_0, alpha_1)
    "covariate_shift": ("Covariate Shift", -2, 0, 1, 0.5, 0.5, 0, 0),
    "outcome_shift": ("Outcome Shift", -2, 0, 0, 0.5, -1, 0.1, 0),
    "complex_causal_shift": ("Complex Causal", -2, 0, 1, 0.5, -1, 0.1, 0),
    "low_overlap_causal": ("Separable", -2, 2, 1, 0.5, -1, 0.1, 0),
}
ANTICAUSAL_TABLE = {
    # id: (display, p_0, p_1, mu_00, mu_01, mu_10, mu_11)
    "anticausal_label_shift": ("Label Shift", 0.5, 0.1, -1, 1, -1, 1),
    "anticausal_presentation_shift": ("Presentation Shift", 0.5, 0.5, 1, 0, -1, 1),
    "complex_anticausal_shift": ("Complex Anticausal", 0.5, 0.1, 1, 0, -1, 1),
}


def _rng(*path: str | int) -> np.random.Generator:
    return seeds.generator(20250101, "tests", "simulate", *path)


def _binned_z(x: np.ndarray, target: np.ndarray, prob: np.ndarray, n_bins: int = 40) -> np.ndarray:
    """Standardised calibration residuals per quantile bin of ``x``.

    Given the x's, ``target_i ~ Bern(prob_i)`` independently when ``prob`` is the true conditional
    probability, so ``sum(target - prob) / sqrt(sum prob (1 - prob))`` is ~N(0, 1) per bin. The
    ``+ 1`` in the variance keeps nearly deterministic bins (prob ~ 0 or 1) from dividing by ~0; it
    only loosens the check where fewer than ~5 events are expected.
    """
    edges = np.quantile(x, np.linspace(0, 1, n_bins + 1)[1:-1])
    bins = np.searchsorted(edges, x, side="right")
    resid = np.bincount(bins, weights=target - prob, minlength=n_bins)
    var = np.bincount(bins, weights=prob * (1 - prob), minlength=n_bins)
    return resid / np.sqrt(var + 1.0)


# --------------------------------------------------------------------------------------------
# registry
# --------------------------------------------------------------------------------------------
def test_registry_order_and_parameters():
    assert tuple(sm.SETTINGS) == sm.MAIN_SETTINGS + sm.SELECTION_SETTINGS
    assert tuple(CAUSAL_TABLE) + tuple(ANTICAUSAL_TABLE) == sm.MAIN_SETTINGS
    assert sm.SELECTION_SETTINGS == ("selection_x", "selection_y", "selection_ya")
    for sid, (name, m0, m1, g, b0, b1, a0, a1) in CAUSAL_TABLE.items():
        d = sm.get_dgp(sid)
        assert isinstance(d, sm.CausalDGP)
        assert (d.setting_id, d.display_name) == (sid, name)
        assert (d.mu, d.gamma_a, d.beta, d.alpha) == ((m0, m1), g, (b0, b1), (a0, a1))
    for sid, (name, p0, p1, m00, m01, m10, m11) in ANTICAUSAL_TABLE.items():
        d = sm.get_dgp(sid)
        assert isinstance(d, sm.AnticausalDGP)
        assert (d.setting_id, d.display_name) == (sid, name)
        assert d.p_y == (p0, p1) and d.mu == ((m00, m01), (m10, m11))
        # the authors' code: group 0 has prevalence p_0
        assert d.prevalence(0) == p0 and d.prevalence(1) == p1
    for sid in sm.SELECTION_SETTINGS:
        d = sm.get_dgp(sid)
        assert d.setting_id == sid and d.base is sm.get_dgp("complex_causal_shift")


def test_get_dgp_unknown_id_names_it_and_lists_valid():
    with pytest.raises(ValueError, match=r"'nope'.*covariate_shift.*selection_ya"):
        sm.get_dgp("nope")


def test_dgps_are_frozen():
    with pytest.raises(AttributeError):
        sm.get_dgp("covariate_shift").gamma_a = 0  # type: ignore[misc]


# --------------------------------------------------------------------------------------------
# samples vs closed forms
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting", list(sm.SETTINGS))
def test_sample_moments_match_closed_forms(setting):
    dgp = sm.get_dgp(setting)
    df = dgp.sample(N_MC, _rng("moments", setting))
    assert list(df.columns) == ["x", "a", "y"]
    assert [str(t) for t in df.dtypes] == ["float64", "int64", "int64"]
    assert len(df) == N_MC and set(np.unique(df["a"])) <= {0, 1} and set(np.unique(df["y"])) <= {0, 1}

    def check_prop(k: int, n: int, p: float, what: str) -> None:
        se = math.sqrt(p * (1 - p) / n)
        assert abs(k / n - p) <= Z_TOL * se, f"{setting}: {what} {k / n:.4f} vs {p:.4f} (se {se:.4f})"

    check_prop(int((df["a"] == 1).sum()), N_MC, dgp.p_a()[1], "P(A=1)")
    check_prop(int(df["y"].sum()), N_MC, dgp.prevalence(), "P(Y=1)")
    for a in (0, 1):
        g = df[df["a"] == a]
        check_prop(int(g["y"].sum()), len(g), dgp.prevalence(a), f"P(Y=1|A={a})")
        se = g["x"].std() / math.sqrt(len(g))
        assert abs(g["x"].mean() - dgp.mean_x_given_a(a)) <= Z_TOL * se, f"{setting}: E[X|A={a}]"
    assert np.isclose(dgp.prevalence(), dgp.p_a() @ [dgp.prevalence(0), dgp.prevalence(1)], atol=1e-14)


def test_causal_prevalence_quadrature_matches_gauss_hermite():
    # Independent numerical check of the quad integral: 200-node Gauss-Hermite (exact to ~1e-15
    # for this smooth integrand).
    nodes, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / w.sum()
    for sid, (_, m0, m1, g, b0, b1, a0, a1) in CAUSAL_TABLE.items():
        dgp = sm.get_dgp(sid)
        for a, (b, al) in enumerate([(b0, a0), (b1, a1)]):
            means = [(m0, m1)[a]] if g == 1 else [m0, m1]
            expected = np.mean([w @ expit(b * (nodes + m) + al) for m in means])
            assert dgp.prevalence(a) == pytest.approx(expected, abs=1e-10)


# --------------------------------------------------------------------------------------------
# closed-form oracles vs Monte Carlo
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting", sm.MAIN_SETTINGS)
def test_oracles_match_monte_carlo(setting):
    dgp = sm.get_dgp(setting)
    df = dgp.sample(N_MC, _rng("oracles", setting))
    x, a, y = df["x"].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy()

    # E[Y | X, A]: within each group, binned by X
    for g in (0, 1):
        m = a == g
        z = _binned_z(x[m], y[m], dgp.p_y_given_xa(x[m], g))
        assert np.abs(z).max() <= Z_TOL, f"E[Y|X,A={g}] max |z| = {np.abs(z).max():.2f}"
    # E[Y | X]
    z = _binned_z(x, y, dgp.p_y_given_x(x))
    assert np.abs(z).max() <= Z_TOL, f"E[Y|X] max |z| = {np.abs(z).max():.2f}"
    # P(A = 1 | X)
    z = _binned_z(x, a, dgp.p_a_given_x(x)[:, 1])
    assert np.abs(z).max() <= Z_TOL, f"P(A|X) max |z| = {np.abs(z).max():.2f}"
    # P(A = 1 | Y)
    for label in (0, 1):
        m = y == label
        p = dgp.p_a_given_y(np.array([label]))[0, 1]
        se = math.sqrt(p * (1 - p) / m.sum())
        assert abs(a[m].mean() - p) <= Z_TOL * se, f"P(A=1|Y={label})"


@pytest.mark.parametrize("setting", list(sm.SETTINGS))
def test_oracle_identities(setting):
    dgp = sm.get_dgp(setting)
    x = np.linspace(-8, 8, 401)
    pax = dgp.p_a_given_x(x)
    assert pax.shape == (401, 2)
    np.testing.assert_allclose(pax.sum(axis=1), 1.0, atol=1e-15)
    mixed = dgp.p_y_given_xa(x, 0) * pax[:, 0] + dgp.p_y_given_xa(x, 1) * pax[:, 1]
    np.testing.assert_allclose(dgp.p_y_given_x(x), mixed, rtol=1e-12, atol=1e-15)
    pay = dgp.p_a_given_y(np.array([0, 1, 1, 0]))
    assert pay.shape == (4, 2)
    np.testing.assert_allclose(pay.sum(axis=1), 1.0, atol=1e-15)
    np.testing.assert_allclose(dgp.p_a(), [0.5, 0.5])
    # vectorised over a, and a scalar a broadcasts
    codes = np.arange(401) % 2
    both = dgp.p_y_given_xa(x, codes)
    np.testing.assert_array_equal(both[codes == 1], dgp.p_y_given_xa(x, 1)[codes == 1])
    with pytest.raises(ValueError, match="a must be 0/1"):
        dgp.p_y_given_xa(x[:2], np.array([0, 2]))
    with pytest.raises(ValueError, match="y must be 0/1"):
        dgp.p_a_given_y(np.array([3]))


def test_explicit_formulas():
    x = np.linspace(-6, 6, 121)
    # causal, gamma_A = 1: P(A=1|x) from the two normal components; E[Y|X,A] logistic
    d = sm.get_dgp("low_overlap_causal")
    np.testing.assert_allclose(d.p_a_given_x(x)[:, 1], expit(4 * x), rtol=1e-12)
    np.testing.assert_allclose(d.p_y_given_xa(x, 1), expit(-x), rtol=1e-12)
    np.testing.assert_allclose(d.p_y_given_xa(x, 0), expit(0.5 * x + 0.1), rtol=1e-12)
    # covariate shift: E[Y|X] does not depend on A
    d = sm.get_dgp("covariate_shift")
    np.testing.assert_allclose(d.p_y_given_x(x), expit(0.5 * x), rtol=1e-12)
    # causal, gamma_A = 0: A independent of X
    np.testing.assert_array_equal(sm.get_dgp("outcome_shift").p_a_given_x(x), 0.5)
    # anticausal: logit P(Y=1|x,a) = logit p_a + (mu_a1 - mu_a0) x - (mu_a1^2 - mu_a0^2)/2
    d = sm.get_dgp("complex_anticausal_shift")
    np.testing.assert_allclose(d.p_y_given_xa(x, 0), expit(-x + 0.5), rtol=1e-12)
    np.testing.assert_allclose(d.p_y_given_xa(x, 1), expit(logit(0.1) + 2 * x), rtol=1e-12)
    # label shift: P(A|Y) by Bayes: P(A=1|Y=1) = 0.1 / (0.5 + 0.1)
    d = sm.get_dgp("anticausal_label_shift")
    np.testing.assert_allclose(d.p_a_given_y(np.array([1, 0])), [[5 / 6, 1 / 6], [5 / 14, 9 / 14]])


# --------------------------------------------------------------------------------------------
# selection
# --------------------------------------------------------------------------------------------
def test_selection_x_clip_and_factors():
    d = sm.get_dgp("selection_x")
    x = np.array([-4.0, -2.5, -1.0, 0.0, 2.0, 2.5, 3.0])
    np.testing.assert_allclose(d.selection_probability(x, 0, 1), [0, 0, 1 - 4 / 25, 1, 1 - 16 / 25, 0, 0])
    grid = np.linspace(-10, 10, 1001)
    s = d.selection_probability(grid, 1, 0)
    assert s.min() == 0.0 and s.max() == 1.0
    y_sel = sm.get_dgp("selection_y")
    np.testing.assert_allclose(y_sel.selection_probability([5.0, 5.0, -9.0], [0, 1, 1], [1, 1, 0]), [0.8, 0.8, 0.4])
    ya = sm.get_dgp("selection_ya")
    np.testing.assert_allclose(ya.selection_probability(0.3, [0, 0, 1, 1], [1, 0, 1, 0]), [0.5, 0.8, 0.25, 0.8])
    # population sample is the full population (no |x| cut); the selected one respects the clip
    assert d.sample(20_000, _rng("clip", "pop"))["x"].abs().max() > 2.5
    assert d.sample_selected(20_000, _rng("clip", "sel"))["x"].abs().max() < 2.5


@pytest.mark.parametrize("setting", sm.SELECTION_SETTINGS)
def test_selection_kept_share_equals_expected_s(setting):
    d = sm.get_dgp(setting)
    rate = d.p_selected()
    # indicator sample: mean of S is E[s(X, A, Y)]
    df = d.sample_with_selection(N_MC, _rng("share", setting, "indicator"))
    assert set(np.unique(df["s"])) == {0, 1}
    se = math.sqrt(rate * (1 - rate) / N_MC)
    assert abs(df["s"].mean() - rate) <= Z_TOL * se
    # draw-and-filter: kept / drawn; drawn is negative binomial with sd sqrt(n (1 - p)) / p
    n = 100_000
    kept, drawn = d._sample_selected_counted(n, _rng("share", setting, "filter"))
    assert len(kept) == n
    sd_drawn = math.sqrt(n * (1 - rate)) / rate
    assert abs(drawn - n / rate) <= Z_TOL * sd_drawn


def test_p_selected_closed_forms():
    base = sm.get_dgp("complex_causal_shift")
    prev = base.prevalence()
    assert sm.get_dgp("selection_y").p_selected() == pytest.approx(0.4 + 0.4 * prev, abs=1e-14)
    pa = [base.prevalence(0), base.prevalence(1)]
    expected = 0.5 * (0.5 * pa[0] + 0.8 * (1 - pa[0])) + 0.5 * (0.25 * pa[1] + 0.8 * (1 - pa[1]))
    assert sm.get_dgp("selection_ya").p_selected() == pytest.approx(expected, abs=1e-14)
    # selection_x: E[clip(1 - c X^2, 0, 1)] with X ~ 0.5 N(-2, 1) + 0.5 N(0, 1), via truncated
    # normal moments: E[(1 - cX^2) 1{|X| < b}] = (1 - c(m^2 + 1)) dPhi - c(...) terms.
    c, b = 4 / 25, 2.5

    def component(m: float) -> float:
        lo, hi = -b - m, b - m  # standardised bounds for Z = X - m
        mass = norm.cdf(hi) - norm.cdf(lo)
        ez = norm.pdf(lo) - norm.pdf(hi)  # E[Z 1{lo<Z<hi}]
        ez2 = mass + lo * norm.pdf(lo) - hi * norm.pdf(hi)  # E[Z^2 1{...}]
        return mass - c * (m * m * mass + 2 * m * ez + ez2)

    expected_x = 0.5 * (component(-2.0) + component(0.0))
    assert sm.get_dgp("selection_x").p_selected() == pytest.approx(expected_x, abs=1e-10)


@pytest.mark.parametrize("setting", sm.SELECTION_SETTINGS)
def test_selected_scores_match_monte_carlo_on_selected_samples(setting):
    d = sm.get_dgp(setting)
    df = d.sample_selected(N_MC, _rng("selected_scores", setting))
    x, a, y = df["x"].to_numpy(), df["a"].to_numpy(), df["y"].to_numpy()
    for g in (0, 1):
        m = a == g
        z = _binned_z(x[m], y[m], d.selected_p_y_given_xa(x[m], g))
        assert np.abs(z).max() <= Z_TOL, f"E[Y|X,A={g},S=1] max |z| = {np.abs(z).max():.2f}"
    z = _binned_z(x, y, d.selected_p_y_given_x(x))
    assert np.abs(z).max() <= Z_TOL, f"E[Y|X,S=1] max |z| = {np.abs(z).max():.2f}"

    grid = np.linspace(-6, 6, 241)
    if setting == "selection_x":
        # S depends on X only: S is d-separated from Y by X (paper A.2, eq. 1)
        np.testing.assert_allclose(d.selected_p_y_given_x(grid), d.p_y_given_x(grid), rtol=1e-12)
        np.testing.assert_allclose(d.selected_p_y_given_xa(grid, 1), d.p_y_given_xa(grid, 1), rtol=1e-12)
    else:
        # power: the population score is visibly miscalibrated on the selected sample
        z_pop = _binned_z(x, y, d.p_y_given_x(x))
        assert np.abs(z_pop).max() > 4 * Z_TOL


def test_selected_scores_equal_population_for_main_settings():
    x = np.linspace(-5, 5, 101)
    for sid in sm.MAIN_SETTINGS:
        d = sm.get_dgp(sid)
        np.testing.assert_array_equal(d.selected_p_y_given_x(x), d.p_y_given_x(x))
        np.testing.assert_array_equal(d.selected_p_y_given_xa(x, 0), d.p_y_given_xa(x, 0))


def test_selection_population_oracles_are_the_base_ones():
    base = sm.get_dgp("complex_causal_shift")
    x = np.linspace(-5, 5, 51)
    for sid in sm.SELECTION_SETTINGS:
        d = sm.get_dgp(sid)
        np.testing.assert_array_equal(d.p_a_given_x(x), base.p_a_given_x(x))
        np.testing.assert_array_equal(d.p_y_given_xa(x, 1), base.p_y_given_xa(x, 1))
        assert d.prevalence(1) == base.prevalence(1)


def test_sample_selected_is_deterministic_and_exact_size():
    d = sm.get_dgp("selection_ya")
    a = d.sample_selected(1_234, _rng("det_sel"))
    b = d.sample_selected(1_234, _rng("det_sel"))
    pd.testing.assert_frame_equal(a, b)
    assert len(a) == 1_234 and list(a.columns) == ["x", "a", "y"]
    assert [str(t) for t in a.dtypes] == ["float64", "int64", "int64"]
    assert isinstance(a.index, pd.RangeIndex)


# --------------------------------------------------------------------------------------------
# simulate_setting: determinism and validation
# --------------------------------------------------------------------------------------------
def test_simulate_setting_deterministic_and_independent():
    tr1, te1 = sm.simulate_setting("covariate_shift", n_train=5_000, n_test=2_000, seed=7)
    tr2, te2 = sm.simulate_setting("covariate_shift", n_train=5_000, n_test=2_000, seed=7)
    pd.testing.assert_frame_equal(tr1, tr2)
    pd.testing.assert_frame_equal(te1, te2)
    assert (len(tr1), len(te1)) == (5_000, 2_000)
    assert [str(t) for t in te1.dtypes] == ["float64", "int64", "int64"]
    # train is drawn from its own generator
    rng = seeds.generator(7, "simulate", "covariate_shift", "train")
    pd.testing.assert_frame_equal(tr1, sm.get_dgp("covariate_shift").sample(5_000, rng))
    # another seed differs
    tr3, _ = sm.simulate_setting("covariate_shift", n_train=5_000, n_test=2_000, seed=8)
    assert not np.array_equal(tr1["x"], tr3["x"])
    # complex_causal_shift draws U and X exactly like covariate_shift, so shared generators would
    # give identical x columns; independent draws have |corr| ~ N(0, 1/n): 5 / sqrt(n) bound.
    tr4, _ = sm.simulate_setting("complex_causal_shift", n_train=5_000, n_test=2_000, seed=7)
    assert not np.array_equal(tr1["x"], tr4["x"])
    assert abs(np.corrcoef(tr1["x"], tr4["x"])[0, 1]) < 5 / math.sqrt(5_000)
    # train and test are independent of each other
    assert abs(np.corrcoef(tr1["x"][:2_000], te1["x"])[0, 1]) < 5 / math.sqrt(2_000)


def test_simulate_setting_selection_uses_selected_train():
    tr, te = sm.simulate_setting("selection_x", n_train=3_000, n_test=3_000, seed=1)
    assert tr["x"].abs().max() < 2.5 < te["x"].abs().max()
    rng = seeds.generator(1, "simulate", "selection_x", "train")
    pd.testing.assert_frame_equal(tr, sm.get_dgp("selection_x").sample_selected(3_000, rng))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"n_train": 0, "n_test": 10}, "n_train.*0"),
        ({"n_train": 10, "n_test": -3}, "n_test.*-3"),
        ({"n_train": 2.5, "n_test": 10}, "n_train.*2.5"),
        ({"n_train": True, "n_test": 10}, "n_train.*True"),
    ],
)
def test_simulate_setting_rejects_bad_sizes(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        sm.simulate_setting("covariate_shift", seed=0, **kwargs)


def test_simulate_setting_rejects_unknown_setting():
    with pytest.raises(ValueError, match=r"'covariate'.*valid settings"):
        sm.simulate_setting("covariate", n_train=10, n_test=10, seed=0)


# --------------------------------------------------------------------------------------------
# bayes_scores
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("setting", ["complex_anticausal_shift", "selection_y", "selection_ya"])
def test_bayes_scores(setting):
    d = sm.get_dgp(setting)
    _, test = sm.simulate_setting(setting, n_train=10, n_test=3_000, seed=3)
    out = sm.bayes_scores(setting, test)
    assert list(out.columns) == ["bayes_x", "bayes_xa"] and len(out) == len(test)
    assert (out.dtypes == np.float64).all()
    assert ((out > 0) & (out < 1)).all().all()
    np.testing.assert_allclose(out["bayes_x"], d.selected_p_y_given_x(test["x"]), rtol=1e-14)
    np.testing.assert_allclose(out["bayes_xa"], d.selected_p_y_given_xa(test["x"], test["a"]), rtol=1e-14)
    if setting in sm.SELECTION_SETTINGS:
        assert not np.allclose(out["bayes_x"], d.p_y_given_x(test["x"]))
    with pytest.raises(ValueError, match=r"missing columns.*'a'"):
        sm.bayes_scores(setting, test[["x"]])
