"""Tests whose cost follows the information (issue 24, item 1): units found once, the large-sample test.

* :func:`disaggregated_eval.derived.bootstrap_z_pvalue` is the Wald z-test with the bootstrap's standard
  error: its value on constructed replicates, its level by simulation, and, for the AUC, a standard error
  equal to DeLong's within Monte-Carlo error (DeLong, DeLong and Clarke-Pearson, 1988; the fast algorithm
  of Sun and Xu, 2014, by midranks);
* :func:`disaggregated_eval.audit.comparison_tests.plan_tests` (the switch rule): a test is large-sample when its
  Monte-Carlo bound exceeds ``LARGE_SAMPLE_WORK`` and each side has ``LARGE_SAMPLE_MIN_ROWS`` rows in each
  outcome category, at the boundaries; ``test_method`` forces either;
* the tests read the units found once per audit (:func:`~disaggregated_eval.audit.comparison_tests.model_units`)
  and give the p-values of permuting the rows, bit for bit, where rows merge (deciles, hard predictions,
  few weights, the observed/expected ratio's quantile strata);
* an audit of continuous scores with large slices switches, says so in a note, and keeps exact tests for
  the rates.

The level and power of the large-sample test in the audit, under the validity study's strong and weak
nulls, are measured by ``benchmarks/bench_audit_validity.py`` (parts b and c), not here.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import special, stats

from disaggregated_eval.audit import audit, comparison_tests
from disaggregated_eval.audit.columns import BOOTSTRAP_Z, EXACT, MONTE_CARLO
from disaggregated_eval.audit.comparison_families import enumerate_comparisons
from disaggregated_eval.audit.comparison_tests import LARGE_SAMPLE_MIN_ROWS, LARGE_SAMPLE_WORK, model_units, plan_tests
from disaggregated_eval.audit.slices import Attribute, plan_slices
from disaggregated_eval.audit.tallies import tally_slices
from disaggregated_eval.derived import Replicated, bootstrap_z_pvalue

# ----------------------------------------------------------------------------------------------
# The z-test
# ----------------------------------------------------------------------------------------------


def test_bootstrap_z_pvalue_is_the_normal_tail_of_the_estimate_over_the_replicates_sd():
    reps = np.array([[0.1, 1.0, 0.0], [-0.1, 1.0, np.nan], [0.1, 1.0, 0.2], [-0.1, 1.0, np.nan]])
    sd = np.std(reps[:, 0], ddof=1)  # 0.11547
    x = Replicated(point=np.array([0.2, 0.5, 0.0]), replicates=reps)
    p = bootstrap_z_pvalue(x)
    assert p[0] == pytest.approx(special.erfc(0.2 / sd / math.sqrt(2)), rel=1e-12)
    assert np.isnan(p[1])  # every replicate equal: no standard error, no test (never p = 0)
    assert p[2] == 1.0  # an estimate of 0; the NaN replicates are left out (two finite values)
    assert np.isnan(bootstrap_z_pvalue(Replicated(point=np.array([np.nan]), replicates=np.ones((5, 1))))[0])
    one = Replicated(point=np.array([1.0]), replicates=np.array([[2.0], [np.nan]]))
    assert np.isnan(bootstrap_z_pvalue(one)[0])  # one finite replicate: no standard deviation


def test_bootstrap_z_test_rejects_at_its_level_under_the_null():
    # R = 600 pairs of independent samples of 300 and 500 rows from one skewed population (exponential: the
    # normal approximation is the test's, not the data's); the difference of means is tested with the
    # sd of B = 300 bootstrap differences. Rejection at 5%: Monte-Carlo SE 0.9%; the band [2%, 8%] is more
    # than 3 SEs each side (a test with the bootstrap SE off by 30% would reject 1% or 14%).
    rng = np.random.default_rng(11)
    big_r, b, n1, n2 = 600, 300, 300, 500
    rejected = 0
    for _ in range(big_r):
        a, c = rng.exponential(1.0, n1), rng.exponential(1.0, n2)
        ra = a[rng.integers(0, n1, (b, n1))].mean(axis=1)
        rc = c[rng.integers(0, n2, (b, n2))].mean(axis=1)
        p = bootstrap_z_pvalue(Replicated(point=np.array([a.mean() - c.mean()]), replicates=(ra - rc)[:, None]))
        rejected += p[0] < 0.05
    assert 0.02 <= rejected / big_r <= 0.08


def _delong_variance(positive: np.ndarray, negative: np.ndarray) -> tuple[float, float]:
    """AUC and DeLong's variance of it, by midranks (Sun and Xu, 2014, algorithm 1)."""
    m, n = positive.shape[0], negative.shape[0]
    both = stats.rankdata(np.concatenate([positive, negative]))
    within_pos, within_neg = stats.rankdata(positive), stats.rankdata(negative)
    v10 = (both[:m] - within_pos) / n  # each positive: the share of negatives below it (ties count 1/2)
    v01 = 1.0 - (both[m:] - within_neg) / m  # each negative: the share of positives above it
    auc = v10.mean()
    return auc, v10.var(ddof=1) / m + v01.var(ddof=1) / n


def test_the_auc_difference_has_delongs_standard_error():
    # Two slices of 3,000 rows whose AUCs differ by about 0.05; the audit's pairwise AUC test with the
    # bootstrap's SE (2,000 resamples: relative MC error of an SE about 1 / sqrt(2 B) = 1.6%) against
    # DeLong's SE of the difference of two independent AUCs. Agreement within 8%: 5 MC errors.
    rng = np.random.default_rng(12)
    n = 3000
    g = np.repeat(["a", "b"], n)
    y = rng.binomial(1, 0.35, 2 * n)
    shift = np.where(g == "a", 1.2, 1.0)
    score = special.expit(shift * (2 * y - 1) * 0.7 + rng.normal(0, 1, 2 * n))
    data = pd.DataFrame({"g": g, "y": y, "score": score})
    result = audit(data, label="y", scores=["score"], groups=["g"], metrics=["auc"], n_resamples=2000,
                   test_method="bootstrap", n_threads=1)  # fmt: skip
    row = result.comparisons.query("kind == 'pairwise'").iloc[0]
    assert row["test"] == BOOTSTRAP_Z
    se_bootstrap = abs(row["difference"]) / stats.norm.isf(row["p_value"] / 2)
    parts = []
    for level in ("a", "b"):
        s, t = score[g == level], y[g == level]
        parts.append(_delong_variance(s[t == 1], s[t == 0]))
    assert row["difference"] == pytest.approx(parts[0][0] - parts[1][0], abs=1e-12)
    se_delong = math.sqrt(parts[0][1] + parts[1][1])
    assert abs(row["difference"]) > 2 * se_delong  # a difference the SE matters for
    assert se_bootstrap / se_delong == pytest.approx(1.0, abs=0.08)


# ----------------------------------------------------------------------------------------------
# The switch rule
# ----------------------------------------------------------------------------------------------


def _planned(n_rows: int, **kwargs):
    """The test plan of one attribute of two equal levels, one continuous model (every row a unit), auc and the
    false positive rate; each level's rows cycle through the four outcome categories (n_rows / 8 each)."""
    i = np.arange(n_rows)
    codes = (i >= n_rows // 2).astype(np.int64)
    y = ((i // 2) % 2).astype(float)
    scores = [0.25 + 0.5 * (i % 2) + 1e-6 * i / n_rows]
    plan = plan_slices((Attribute("g", ("a", "b"), codes),), intersections=1)
    tallies = tally_slices(plan, y, scores, None, 0.5)
    units = model_units(plan, y, scores, None, 0.5)
    found = enumerate_comparisons(plan, 1, ["m"])
    return plan_tests(found, tallies, units, metrics=["auc", "false_positive_rate"], weighted=False, **kwargs)


def test_the_switch_rule_at_its_boundaries():
    # Every test's universe holds all n rows (slice and rest, or the two slices): its bound is 2 x P x n for P
    # permutations; each side has n / 8 rows in each outcome category.
    n = 8 * LARGE_SAMPLE_MIN_ROWS
    at = LARGE_SAMPLE_WORK // (2 * n)  # the permutations whose bound is exactly LARGE_SAMPLE_WORK
    assert 2 * at * n == LARGE_SAMPLE_WORK
    plan = _planned(n, n_permutations=at)
    assert len(plan.method) == 3 and set(plan.method.values()) == {MONTE_CARLO}  # the bound must exceed it
    assert all(plan.work[key] == LARGE_SAMPLE_WORK for key in plan.method)
    plan = _planned(n, n_permutations=at + 1)
    assert set(plan.method.values()) == {BOOTSTRAP_Z}  # each category of each side: exactly the minimum
    assert all(design == ((0, 1, 2, 3), "label") for *_, design in plan.method)  # the rate has an exact test
    small = _planned(n - 8, n_permutations=10 * at)  # one row short of the minimum in each category
    assert set(small.method.values()) == {MONTE_CARLO}
    assert set(_planned(n, n_permutations=10, test_method="bootstrap").method.values()) == {BOOTSTRAP_Z}
    forced = _planned(n, n_permutations=10 * at, test_method="permutation")
    assert set(forced.method.values()) == {MONTE_CARLO}
    with pytest.raises(ValueError, match="test_method must be one of"):
        _planned(n, n_permutations=10, test_method="fast")


# ----------------------------------------------------------------------------------------------
# Units found once: the same p-values as permuting rows
# ----------------------------------------------------------------------------------------------


def _frame(n=900, seed=14, values=10, weights=False):
    rng = np.random.default_rng(seed)
    race = rng.choice(["A", "B", "C"], n, p=[0.2, 0.3, 0.5])
    sex = rng.choice(["F", "M"], n)
    y = rng.binomial(1, np.where(race == "B", 0.45, 0.3))
    p = np.floor(np.clip(0.35 * y + 0.65 * rng.random(n), 0, 0.999) * values) / values + 0.5 / values
    data = pd.DataFrame({"race": race, "sex": sex, "y": y, "p": p})
    if weights:
        data["w"] = rng.choice([1.0, 2.0], n)
    return data


@pytest.mark.parametrize("values, weights", [(10, False), (20, False), (10, True), (2, False)])
def test_tests_on_units_found_once_equal_permuting_the_rows(monkeypatch, values, weights):
    # Scores of 10 or 20 values (the observed/expected ratio's strata: one per value, or quantile bins of the
    # expanded rows), weights of two values (every metric permuted), hard predictions (values=2 after the
    # threshold): the audit's tests read its units; with units refused (every test reads its rows, merged as
    # the tests merged them before) every p-value is the same, bit for bit.
    data = _frame(values=values, weights=weights)
    if values == 2:
        data["p"] = (data["p"] >= 0.5).astype(float)
    kwargs = dict(label="y", scores=["p"], groups=["race", "sex"], n_resamples=200, n_permutations=300,
                  test_method="permutation", n_threads=1, sample_weight="w" if weights else None)  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with_units = audit(data, **kwargs).comparisons
        assert comparison_tests.model_units(
            plan_slices((Attribute("r", ("x", "y"), np.repeat([0, 1], 5)),), intersections=1),
            np.zeros(10), [np.full(10, 0.3)], None, 0.5,
        )[0].units is not None  # fmt: skip
        monkeypatch.setattr(comparison_tests, "find_units", lambda *args, **kw: None)
        with_rows = audit(data, **kwargs).comparisons
    assert (with_units["test"] == MONTE_CARLO).any()
    pd.testing.assert_frame_equal(with_units, with_rows, check_exact=True)


# ----------------------------------------------------------------------------------------------
# The audit
# ----------------------------------------------------------------------------------------------


def test_large_comparisons_of_continuous_scores_use_the_large_sample_test():
    rng = np.random.default_rng(15)
    n = 12_000
    g = rng.choice(["a", "b"], n)
    y = rng.binomial(1, 0.4, n)
    score = special.expit((2 * y - 1) * 0.8 + rng.normal(0, 1, n) * np.where(g == "a", 1.5, 1.0))
    data = pd.DataFrame({"g": g, "y": y, "score": score})
    kwargs = dict(label="y", scores=["score"], groups=["g"], metrics=["auc", "log_loss", "false_positive_rate"],
                  n_resamples=400, n_threads=1)  # fmt: skip
    # 10,000 permutations over both sides of 12,000 units: 2.4e8 rows per test, above LARGE_SAMPLE_WORK;
    # each side has 6,000 rows, at least 500 in each outcome category (over LARGE_SAMPLE_MIN_ROWS)
    result = audit(data, **kwargs)
    tested = result.comparisons[result.comparisons["kind"] != "vs_model"]
    by_metric = tested.groupby("metric")["test"].agg(set).to_dict()
    assert by_metric == {"auc": {BOOTSTRAP_Z}, "log_loss": {BOOTSTRAP_Z}, "false_positive_rate": {EXACT}}
    assert ((tested["p_value"] > 0) & (tested["p_value"] <= 1)).all()
    note = next(n for n in result.notes if "large-sample z-test" in n)
    assert note.startswith("6 of 6 tests (auc, log_loss)") and "test_method='permutation'" in note
    assert "large comparisons by the bootstrap z-test" in result.summary(width=10_000)  # one line each
    # a slice whose scores are noisier: its AUC is lower than the rest's (about 0.75 against 0.84), and the
    # test sees it (a p-value far below any Monte-Carlo test's 1 / 10,001)
    noisier = tested[(tested["slice"] == "g=a") & (tested["kind"] == "vs_rest")].set_index("metric")
    assert noisier.loc["auc", "difference"] < -0.05 and noisier.loc["auc", "p_adjusted"] < 1e-6
    # with few permutations the same tests are cheap enough to permute
    few = audit(data, **dict(kwargs, n_permutations=100)).comparisons
    assert set(few.loc[few["metric"] == "auc", "test"]) == {MONTE_CARLO}


def test_the_observed_expected_ratio_is_tested_on_the_log_scale(monkeypatch):
    """The large-sample test of the observed/expected ratio is a z-test of log(O/E) differences with the
    bootstrap's standard error of the log ratio (issue 33, item 3: on the linear scale it rejected 11.0% at 5%
    under a weak null); the mean predicted risk stays on the linear scale. The statistics handed to the z-test
    are the slices' log ratios minus overall's (and the rest's), and each p-value is the normal tail of them."""
    seen = []

    def record(x):
        seen.append(x)
        return bootstrap_z_pvalue(x)

    monkeypatch.setattr(comparison_tests, "bootstrap_z_pvalue", record)
    rng = np.random.default_rng(33)
    n = 3_000
    g = rng.choice(["a", "b", "c"], n)
    score = np.clip(rng.beta(2, 5, n) * np.where(g == "a", 1.6, 1.0), 0.01, 0.99)
    y = rng.binomial(1, score)
    data = pd.DataFrame({"g": g, "y": y, "score": score})
    result = audit(data, label="y", scores=["score"], groups=["g"], metrics=["observed_expected_ratio",
                   "mean_predicted_risk"], n_resamples=300, n_threads=1, test_method="bootstrap")  # fmt: skip
    points = np.concatenate([np.ravel(x.point) for x in seen])
    s = result.slices.set_index(["slice", "metric"])["estimate"]
    for name in ("g=a", "g=b", "g=c"):
        oe = s[(name, "observed_expected_ratio")] / s[("overall", "observed_expected_ratio")]
        risk = s[(name, "mean_predicted_risk")] - s[("overall", "mean_predicted_risk")]
        assert np.isclose(points, math.log(oe), rtol=0, atol=1e-12).sum() == 1, (name, points)
        assert np.isclose(points, risk, rtol=0, atol=1e-12).sum() == 1, (name, points)
    # every replicate of a log-scale statistic is a difference of logs: the p-value is the z-test's on them
    c = result.comparisons
    tested = c[c["kind"] != "vs_model"]
    assert (tested["test"] == BOOTSTRAP_Z).all() and tested["p_value"].between(0, 1, inclusive="right").all()
    reps = np.concatenate([np.asarray(x.replicates).reshape(x.replicates.shape[0], -1) for x in seen], axis=1)
    log_ratio = math.log(s[("g=a", "observed_expected_ratio")] / s[("overall", "observed_expected_ratio")])
    at = np.flatnonzero(np.isclose(points, log_ratio, rtol=0, atol=1e-12))
    z = abs(points[at[0]]) / np.std(reps[:, at[0]], ddof=1)
    row = tested[(tested["slice"] == "g=a") & (tested["kind"] == "vs_overall")
                 & (tested["metric"] == "observed_expected_ratio")]  # fmt: skip
    assert row["p_value"].iloc[0] == pytest.approx(special.erfc(z / math.sqrt(2)), rel=1e-9)


def test_an_audit_whose_tests_are_all_exact_finds_no_units(monkeypatch):
    # Unweighted proportions are tested exactly from the counts: finding the models' units (a sort of every
    # row per model) is work for the Monte-Carlo tests only, so it must not run at all here.
    from disaggregated_eval.audit import core

    def refuse(*args, **kwargs):
        raise AssertionError("model_units called for exact tests")

    monkeypatch.setattr(core, "model_units", refuse)
    monkeypatch.setattr(comparison_tests, "model_units", refuse)
    rng = np.random.default_rng(np.random.SeedSequence(5))
    frame = pd.DataFrame({"y": rng.integers(0, 2, 600), "s": rng.uniform(size=600), "g": rng.choice(["a", "b"], 600)})
    result = audit(frame, label="y", scores=["s"], groups=["g"], metrics=["sensitivity", "false_positive_rate"],
                   n_resamples=200, n_permutations=100, seed=3)  # fmt: skip
    tested = result.comparisons[result.comparisons["kind"] != "vs_model"]
    assert set(tested["test"]) == {EXACT} and tested["p_value"].between(0, 1).all()
