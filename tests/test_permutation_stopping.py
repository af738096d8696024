"""Permutation tests whose cost follows the decision (issue 31, item 2).

* The drawn rows only: :func:`~disaggregated_eval.engine.walk.run_subset_kernel` gives the metrics of a subset
  and of its complement equal (to rounding) to the walk of every unit in two lanes, and a test gives the same
  p-values either way (the draws are the same).
* Floyd's draws of the smaller side are uniform subsets, also when the second side is drawn and within strata
  (chi-square over every outcome; thresholds at the 1e-6 quantile, so a correct sampler fails about once in a
  million runs).
* :func:`~disaggregated_eval.engine.permutation.linear_tail_pvalues` is at least the exact permutation p-value
  (every subset enumerated) and small where the data are far from the null.
* The stop for small p-values: a test whose exact p-value is far below its threshold ``low`` stops at the first
  checkpoint where the Clopper-Pearson bound allows it (counted, not timed), decides as the full run of the same
  draws does, and stops wrongly (exact p-value at least ``low``) at most at its stated risk.
* The audit reads each family's smallest threshold (``alpha / m``, Holm and Benjamini-Hochberg; ``alpha``
  without adjustment; ``m`` times the metrics with ``adjust_scope="model"``, every test with ``"audit"``), gives unweighted means far from
  equal a ``tail bound`` and draws few permutations for a test far below its threshold.
"""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from disaggregated_eval import vocabulary
from disaggregated_eval.audit import audit, comparison_tests
from disaggregated_eval.engine import permutation, walk
from disaggregated_eval.engine.permutation import (
    RESAMPLING_RISK,
    exact_count_pvalue,
    linear_tail_pvalues,
    permutation_draws,
    permutation_space,
    permutation_test,
)
from disaggregated_eval.engine.sums import metric_slots, ratio_of_sums_values, terms_for
from disaggregated_eval.engine.walk import ModelStreams, Stream, build_layout, run_kernel, run_subset_kernel

LINEAR = ["log_loss", "brier_score", "net_benefit", "mean_predicted_risk"]


def test_docstring_examples_run():
    for module in (permutation, walk):
        failed, attempted = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert failed == 0 and attempted >= 1, module.__name__


@pytest.mark.parametrize("thresholds", [(0.5,), (0.3, 0.6)])
def test_subset_walk_equals_the_walk_of_every_unit(thresholds):
    """Every metric of 9 subsets of 60 rows and of their complements: ties (scores rounded to 0.01), sample
    weights, one or two thresholds; the walk of every unit in two lanes is the reference (differences of sums
    added in another order: 1e-12)."""
    rng = np.random.default_rng(0)
    n = 500
    y = rng.integers(0, 2, n).astype(float)
    r = np.round(rng.random(n), 2)
    w = rng.gamma(2.0, 1.0, n)
    metrics = [*vocabulary.AUDIT_METRICS, "balanced_accuracy"]
    model = ModelStreams(scores=r, weights=w[:, None], codes=np.zeros((n, 0), np.int32), streams=(Stream(weight=0),))
    layout = build_layout(y, [model], thresholds=thresholds, terms=terms_for(metrics))
    slots = metric_slots(metrics)
    sub = walk.subset_layout(layout, np.ones(n))
    rows = np.stack([rng.choice(n, 60, replace=False) for _ in range(9)])
    out = np.empty((9, 2, len(thresholds), len(metrics)))
    run_subset_kernel(layout, sub, rows, slots=slots, odds=1.0, out=out)
    counts = np.zeros((18, n), dtype=np.int32)
    for b in range(9):
        counts[2 * b, rows[b]] = 1
        counts[2 * b + 1] = 1 - counts[2 * b]
    ref = np.empty((18, 1, len(thresholds), len(metrics)))
    run_kernel(layout, counts, from_counts=True, slots=slots, odds=1.0, n_threads=1, out=ref)
    for side in (0, 1):
        got, want = out[:, side], ref[side::2, 0]
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, equal_nan=True)


def test_subset_layout_refuses_a_layout_it_cannot_walk():
    y = np.array([0.0, 1.0])
    model = ModelStreams(scores=np.array([0.2, 0.7]), weights=np.ones((2, 2)), codes=np.zeros((2, 0), np.int32),
                         streams=(Stream(weight=0), Stream(weight=1)))  # fmt: skip
    layout = build_layout(y, [model], thresholds=(0.5,), terms=())
    with pytest.raises(ValueError, match="one stream"):
        walk.subset_layout(layout, np.ones(2))


def _chi_square(draws: np.ndarray, probabilities: dict) -> float:
    outcomes, counts = np.unique(draws, axis=0, return_counts=True)
    assert len(outcomes) == len(probabilities)
    expected = np.array([probabilities[tuple(o)] for o in outcomes]) * draws.shape[0]
    return float(np.sum((counts - expected) ** 2 / expected))


def test_floyd_draws_of_the_second_side_and_within_strata_are_uniform():
    """Six rows, four in the first side (Floyd draws the two of the second): 15 subsets, 15,000 draws. Two strata
    of 4 and 5 rows with 1 and 3 in the first side: 4 x 10 = 40 outcomes, 40,000 draws."""
    space = permutation_space(np.zeros(6), np.arange(6) / 10.0, None, metrics=["accuracy"], threshold=0.5)
    draws = permutation_draws(space, np.array([4]), 7, 15_000)
    assert (draws.sum(axis=1) == 4).all() and draws.max() == 1
    uniform = {tuple(int(i in c) for i in range(6)): 1 / 15 for c in itertools.combinations(range(6), 4)}
    assert _chi_square(draws, uniform) < stats.chi2.ppf(1 - 1e-6, 14)
    strata = np.r_[np.zeros(4), np.ones(5)].astype(np.int64)
    space = permutation_space(np.zeros(9), np.arange(9) / 10.0, None, metrics=["accuracy"], threshold=0.5,
                              strata=strata)  # fmt: skip
    draws = permutation_draws(space, np.array([1, 3]), 11, 40_000)
    assert (draws[:, :4].sum(axis=1) == 1).all() and (draws[:, 4:].sum(axis=1) == 3).all()
    outcomes = {}
    for a in itertools.combinations(range(4), 1):
        for b in itertools.combinations(range(4, 9), 3):
            outcomes[tuple(int(i in a + b) for i in range(9))] = 1 / 40
    assert _chi_square(draws, outcomes) < stats.chi2.ppf(1 - 1e-6, 39)


def _continuous(n=2000, seed=3):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(float)
    r = np.clip(rng.beta(2, 2, n) + 0.1 * y, 0.0, 1.0)
    return y, r


@pytest.mark.parametrize(
    ("metrics", "within"), [(LINEAR, None), (["auc"], "label"), (["observed_expected_ratio"], "score")]
)
@pytest.mark.parametrize("majority", [False, True])
def test_a_test_gives_the_same_p_values_walking_the_drawn_rows_or_every_unit(monkeypatch, metrics, within, majority):
    """The same draws walked two ways (SUBSET_SHARE 1: the drawn rows; 0: every unit): the same p-values and
    permutation counts, whether the drawn side is the first (a slice of 118 rows) or the second (a slice of all
    but 118). Observed statistics of an actual slice (so that some permutations exceed them)."""
    y, r = _continuous()
    strata = {None: None, "label": y.astype(np.int64), "score": np.minimum((r * 10).astype(np.int64), 9)}[within]
    space = permutation_space(y, r, None, metrics=metrics, threshold=0.5, strata=strata)
    first = np.zeros(y.shape[0], dtype=bool)
    first[::17] = True  # 118 rows
    first = ~first if majority else first
    n_first = space.first_counts(first)
    from disaggregated_eval.metrics import compute_metrics

    a = compute_metrics(y[first], r[first], metrics=metrics)
    b = compute_metrics(y[~first], r[~first], metrics=metrics)
    everything = compute_metrics(y, r, metrics=metrics)
    observed = np.array([[a[m] - everything[m] for m in metrics], [a[m] - b[m] for m in metrics]])
    runs = {}
    for share in (1.0, 0.0):
        monkeypatch.setattr(permutation, "SUBSET_SHARE", share)
        runs[share] = permutation_test(space, n_first, observed, pairwise=False,
                                       fixed=np.array([everything[m] for m in metrics]), slots=metric_slots(metrics),
                                       odds=1.0, n_permutations=3000, seed=5, sequential=None)  # fmt: skip
    assert permutation._subset_side(space, n_first) is None  # share 0: every unit
    monkeypatch.setattr(permutation, "SUBSET_SHARE", 1.0)
    assert permutation._subset_side(space, n_first) is (not majority)  # the side drawn: the smaller
    np.testing.assert_array_equal(runs[1.0][0], runs[0.0][0])
    np.testing.assert_array_equal(runs[1.0][1], runs[0.0][1])
    assert np.isfinite(runs[1.0][0]).all()


def _all_subset_pvalues(values, strata, n_first, observed, *, pairwise, fixed):
    """Exact permutation p-values of a mean by enumerating every first side (within strata)."""
    groups = [np.flatnonzero(strata == s) for s in range(strata.max() + 1)]
    total, size = values.sum(), values.shape[0]
    n = int(sum(n_first))
    tol = permutation.TOLERANCE * np.maximum(1.0, np.abs(observed))
    hits = np.zeros(observed.shape)
    count = 0
    for parts in itertools.product(*(itertools.combinations(g, k) for g, k in zip(groups, n_first, strict=True))):
        idx = np.concatenate([np.asarray(p, dtype=np.int64) for p in parts])
        s = values[idx].sum()
        rest = (total - s) / (size - n)
        stat = np.array([s / n - rest]) if pairwise else np.array([s / n - fixed, s / n - rest])
        hits += np.abs(stat)[:, None] >= np.abs(observed) - tol
        count += 1
    return hits / count


@pytest.mark.parametrize("metric", LINEAR)
@pytest.mark.parametrize("stratified", [False, True])
def test_tail_bounds_are_at_least_the_exact_p_value(metric, stratified):
    """16 rows (ties, both classes), a first side of 5 (2 + 3 in two strata): every first side enumerated. The
    bound of every observed statistic a permutation can give (and of one beyond all of them, whose exact
    p-value is 0) is at least the exact p-value."""
    rng = np.random.default_rng(4)
    y = np.r_[np.zeros(8), np.ones(8)]
    r = np.round(rng.random(16), 1)
    strata = np.r_[np.zeros(8), np.ones(8)].astype(np.int64) if stratified else np.zeros(16, dtype=np.int64)
    n_first = np.array([2, 3]) if stratified else np.array([5])
    space = permutation_space(y, r, None, metrics=[metric], threshold=0.5, strata=strata if stratified else None)
    assert space.multiplicity.sum() == 16
    a, _ = ratio_of_sums_values(metric, y, r, threshold=0.5, odds=0.8)
    fixed = a.mean()
    for pairwise in (False, True):
        draws = permutation_draws(space, n_first, 9, 12)
        sums = draws @ ratio_of_sums_values(metric, space.y, space.score, threshold=0.5, odds=0.8)[0]
        means = sums / 5
        rests = (a.sum() - sums) / 11
        candidates = [means - rests] if pairwise else [means - fixed, means - rests]
        observed = np.concatenate([np.stack(candidates, axis=0), np.full((len(candidates), 1), 3.0)], axis=1)
        for column in range(observed.shape[1]):
            obs = observed[:, [column]]
            exact = _all_subset_pvalues(a, strata, n_first, obs, pairwise=pairwise, fixed=fixed)
            bound = linear_tail_pvalues(space, n_first, obs, pairwise=pairwise, fixed=np.array([fixed]),
                                        metrics=[metric], threshold=0.5, odds=0.8)  # fmt: skip
            assert (bound >= exact - 1e-12).all(), (column, bound, exact)
            assert (bound <= 1.0).all()


def test_tail_bounds_are_small_far_from_the_null_and_absent_where_they_do_not_hold():
    """A slice of 100 of 2,000 rows whose mean predicted risk is 0.25 above the rest's: an exact p-value far
    below 1e-10 (normal approximation: z ~ 11), and a bound below 1e-8. No bound for the AUC (not a mean) or
    under unequal weights."""
    rng = np.random.default_rng(2)
    r = rng.random(2000) * 0.5
    r[:100] += 0.25
    y = (rng.random(2000) < r).astype(float)
    first = np.zeros(2000, dtype=bool)
    first[:100] = True
    metrics = ["mean_predicted_risk", "auc"]
    space = permutation_space(y, r, None, metrics=metrics, threshold=0.5)
    d = r[first].mean() - r.mean()
    observed = np.array([[d, 0.1], [r[first].mean() - r[~first].mean(), 0.1]])
    bound = linear_tail_pvalues(space, space.first_counts(first), observed, pairwise=False,
                                fixed=np.array([r.mean(), 0.7]), metrics=metrics, threshold=0.5, odds=1.0)  # fmt: skip
    assert (bound[:, 0] < 1e-8).all() and np.isnan(bound[:, 1]).all()
    weighted = permutation_space(y, r, rng.gamma(2.0, 1.0, 2000), metrics=metrics, threshold=0.5)
    assert np.isnan(linear_tail_pvalues(weighted, weighted.first_counts(first), observed, pairwise=False,
                                        fixed=np.array([r.mean(), 0.7]), metrics=metrics, threshold=0.5,
                                        odds=1.0)).all()  # fmt: skip


def _checkpoints(n_permutations, n_units):
    return [stop for _, _, stop in permutation._chunks(n_permutations, n_units)]


def test_a_p_value_far_below_its_threshold_stops_at_the_first_checkpoint_that_shows_it():
    """An AUC difference no permutation reaches (observed 5): with ``low`` 0.01 the test stops at the first
    checkpoint ``L`` with ``1 - (risk / C)^(1 / L) < 0.01`` (g = 0; C chunks), 960 of 10,000, with
    p = 1 / (L + 1); without ``low`` (1ee08dc's rule) it draws all 10,000."""
    y, r = _continuous(n=600)
    space = permutation_space(y, r, None, metrics=["auc"], threshold=0.5, strata=y.astype(np.int64))
    first = space.first_counts(np.arange(600) < 60)
    kwargs = dict(pairwise=False, fixed=np.zeros(1), slots=metric_slots(["auc"]), odds=1.0, n_permutations=10_000,
                  seed=1)  # fmt: skip
    stops = _checkpoints(10_000, space.multiplicity.shape[0])
    expected = next(L for L in stops if 1.0 - (RESAMPLING_RISK / len(stops)) ** (1.0 / L) < 0.01)
    assert expected == 960
    p, used = permutation_test(space, first, np.array([[5.0], [5.0]]), low=0.01, **kwargs)
    assert (used == expected).all() and np.allclose(p, 1.0 / (expected + 1))
    p, used = permutation_test(space, first, np.array([[5.0], [5.0]]), **kwargs)
    assert (used == 10_000).all()
    # a bound below low is the p-value: no permutation
    p, used = permutation_test(space, first, np.array([[5.0], [5.0]]), low=0.01, bounds=np.array([[1e-9], [0.5]]),
                               **kwargs)  # fmt: skip
    assert used[0, 0] == 0 and p[0, 0] == 1e-9 and used[1, 0] == expected


def test_permutation_test_refuses_a_bad_risk_or_threshold():
    y, r = _continuous(n=100)
    space = permutation_space(y, r, None, metrics=["auc"], threshold=0.5)
    kwargs = dict(pairwise=True, fixed=None, slots=metric_slots(["auc"]), odds=1.0, n_permutations=10, seed=1)
    with pytest.raises(ValueError, match="risk must be in"):
        permutation_test(space, np.array([10]), np.array([[0.1]]), risk=0.0, **kwargs)
    with pytest.raises(ValueError, match="low must be in"):
        permutation_test(space, np.array([10]), np.array([[0.1]]), low=1.5, **kwargs)


def _label_rate_case(target, n=2000, n_first=200, positives=600):
    """A label rate's test through the Monte-Carlo path whose exact p-value is known (hypergeometric): the
    observed count of positives in the slice whose exact p-value is nearest ``target``."""
    y = np.zeros(n)
    y[:positives] = 1.0
    r = np.random.default_rng(0).random(n)
    space = permutation_space(y, r, None, metrics=["label_rate"], threshold=0.5)
    xs = np.arange(n_first + 1)
    exact = exact_count_pvalue(xs, n_first, positives, n)
    x = int(xs[xs >= n_first * positives / n][np.argmin(np.abs(np.log(exact[xs >= n_first * positives / n] / target)))])
    p_exact = float(exact[x])
    observed = np.array([[x / n_first - positives / n], [x / n_first - (positives - x) / (n - n_first)]])
    return space, np.array([n_first]), observed, np.array([positives / n]), p_exact


def test_early_stops_decide_as_the_full_run_of_the_same_draws():
    """Exact p-value about 0.0005, threshold 0.01: every one of 20 seeds stops early (by 1,984 permutations of
    10,000), and the full run of the same draws (no stop for small p-values) draws more and gives a p-value
    below 0.01 too."""
    space, n_first, observed, fixed, p_exact = _label_rate_case(0.0005)
    assert 0.0002 < p_exact < 0.001
    kwargs = dict(pairwise=False, fixed=fixed, slots=metric_slots(["label_rate"]), odds=1.0, n_permutations=10_000)
    for seed in range(20):
        p, used = permutation_test(space, n_first, observed, seed=seed, low=0.01, **kwargs)
        full, full_used = permutation_test(space, n_first, observed, seed=seed, **kwargs)
        assert (used <= 1984).all() and (p < 0.01).all()
        assert (full < 0.01).all() and (full_used > used).all()


def test_early_stops_are_wrong_at_most_at_their_risk():
    """Exact p-value just above the threshold (0.0104 against 0.01): a stop would be a wrong decision. At a
    stated risk of 0.2 (to see it at 60 seeds) the share of seeds stopped is at most 0.2 plus three binomial
    standard errors (0.15); 1ee08dc's rule never stops (used 4,000)."""
    space, n_first, observed, fixed, p_exact = _label_rate_case(0.0105)
    assert 0.01 <= p_exact < 0.012
    kwargs = dict(pairwise=False, fixed=fixed, slots=metric_slots(["label_rate"]), odds=1.0, n_permutations=4000)
    wrong = 0
    for seed in range(60):
        p, used = permutation_test(space, n_first, observed, seed=seed, low=np.array([0.01, 0.01]), risk=0.2,
                                   **kwargs)  # fmt: skip
        wrong += int(((used < 4000) & (p < 0.01)).any())
    assert wrong / 60 <= 0.2 + 3 * math.sqrt(0.2 * 0.8 / 60)


def _shifted_frame(n=3000, seed=0):
    """Two attributes; slice g=c has a much higher mean predicted risk and a much lower AUC than the others."""
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b", "c"], n, p=[0.45, 0.45, 0.1])
    h = rng.choice(["u", "v"], n)
    x = rng.normal(size=n)
    y = (rng.random(n) < 1 / (1 + np.exp(-x))).astype(int)
    noise = np.where(g == "c", 3.0, 0.5)
    score = 1 / (1 + np.exp(-(x + rng.normal(0.0, 1.0, n) * noise + np.where(g == "c", 2.0, 0.0))))
    return pd.DataFrame({"g": g, "h": h, "y": y, "score": score})


def _recorded(monkeypatch):
    calls = []
    original = comparison_tests.permutation_test

    def record(*args, **kwargs):
        p, used = original(*args, **kwargs)
        calls.append(dict(low=np.asarray(kwargs["low"]).tolist(), used=used, p=p, pairwise=kwargs["pairwise"]))
        return p, used

    monkeypatch.setattr(comparison_tests, "permutation_test", record)
    return calls


@pytest.mark.parametrize(
    ("options", "divisor"),
    [
        (dict(), 1),
        (dict(adjust="bh"), 1),
        (dict(adjust="none"), None),
        (dict(adjust_scope="model"), 2),
        (dict(adjust_scope="audit"), "audit"),
    ],
)
def test_the_audit_reads_each_family_at_its_smallest_threshold(monkeypatch, options, divisor):
    """Slices of g (3 levels), h (2) and their 6 cells: 11 tests vs overall (and vs rest); pairs within g, h
    and the cells: 3 + 1 + 15 = 19. The tests are told ``alpha / m`` (``alpha`` without adjustment; ``m`` times
    the 2 metrics with adjust_scope='model'; every test of the audit, 2 x (11 + 11 + 19), with 'audit')."""
    calls = _recorded(monkeypatch)
    audit(_shifted_frame(), label="y", scores=["score"], groups=["g", "h"], metrics=["auc", "log_loss"],
          n_resamples=200, n_permutations=500, **options)  # fmt: skip
    if divisor == "audit":
        vs = pairs = 0.05 / (2 * (11 + 11 + 19))
    else:
        vs, pairs = (0.05, 0.05) if divisor is None else (0.05 / (11 * divisor), 0.05 / (19 * divisor))
    assert calls and any(call["pairwise"] for call in calls)
    for call in calls:
        want = [pairs] if call["pairwise"] else [vs, vs]
        assert call["low"] == pytest.approx(want, rel=1e-12)


def test_a_slice_far_from_equal_costs_few_permutations_and_means_get_a_tail_bound(monkeypatch):
    """Slice g=c (about 300 of 3,000 rows) has an AUC far below the others' and a mean predicted risk far above.
    Its AUC test stops once the p-value is known to be below alpha / 11 (at most 4,032 permutations of 10,000;
    1ee08dc drew all 10,000); its mean predicted risk gets a tail bound (no permutation) below that threshold,
    and the verdicts flag both."""
    calls = _recorded(monkeypatch)
    res = audit(_shifted_frame(), label="y", scores=["score"], groups=["g", "h"],
                metrics=["auc", "mean_predicted_risk"], n_resamples=200)  # fmt: skip
    c = res.comparisons.set_index(["kind", "slice", "reference", "metric"])
    auc = c.loc[("vs_overall", "g=c", "overall", "auc")]
    risk = c.loc[("vs_overall", "g=c", "overall", "mean_predicted_risk")]
    assert auc["test"] == "monte carlo" and auc["verdict"].startswith("differs")
    assert risk["test"] == "tail bound" and risk["p_value"] < 0.05 / 11 and risk["verdict"].startswith("differs")
    # every test whose p-values are all far below alpha / 11 (1e-3; g=c's AUC among them) stops by 4,032
    used = [int(call["used"].max()) for call in calls if not call["pairwise"] and np.nanmax(call["p"]) < 1e-3]
    assert used and max(used) <= 4032
    weighted = audit(_shifted_frame().assign(w=1.0), label="y", scores=["score"], groups=["g", "h"],
                     metrics=["mean_predicted_risk"], n_resamples=200, sample_weight="w")  # fmt: skip
    assert (weighted.comparisons["test"] != "tail bound").all()
