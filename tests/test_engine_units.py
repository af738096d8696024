"""Compression (``engine.units``): the unit-count bootstrap and permutations are the row ones in distribution.

The bootstrap of units draws ``Multinomial(n, m_u / n)`` unit counts; the row bootstrap draws ``n`` rows.
They differ draw for draw but must agree in distribution. Checks, with B resamples on each side:

* the mean of every metric's replicates agrees within 5 Monte-Carlo standard errors of the difference
  (``sqrt(2) sd / sqrt(B)``; a correct implementation fails with probability ~1e-6 per check);
* their standard deviations agree within 15% (the sd of a sample sd ratio is about ``sqrt(1 / B)`` =
  2.2% at B = 2,000; 15% is ~5 of those), while a wrong multinomial (e.g. unit counts drawn with the
  wrong probabilities, or the multiplicity forgotten) shifts the sd by far more;
* a two-sample Kolmogorov-Smirnov test does not reject at 1e-4.

Also: units are found by hash grouping with the semantics of a lexicographic sort of the rows; the
exact tests read the hypergeometric tails (right to 1e-13 against exact rational sums); the compiled
jackknife of ratios of sums equals the grouped formula bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from disaggregated_eval.engine.bootstrap import bootstrap_layout
from disaggregated_eval.engine.permutation import (
    exact_count_pvalue,
    permutation_space,
    permutation_test,
)
from disaggregated_eval.engine.sums import metric_slots, terms_for
from disaggregated_eval.engine.units import find_units, score_key, units_of_counts
from disaggregated_eval.engine.walk import ModelStreams, Stream, build_layout

METRICS = ("auc", "false_positive_rate", "log_loss", "precision", "accuracy")
B = 2000


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    g = rng.integers(0, 3, n)
    y = rng.binomial(1, 0.3 + 0.1 * g).astype(float)
    r = np.round(np.clip(0.3 * y + 0.7 * rng.random(n), 0, 1), 1)  # deciles: few distinct scores
    return g, y, r


def _layout(g, y, r):
    model = ModelStreams(
        scores=r,
        weights=np.ones((y.shape[0], 1)),
        codes=g[:, None].astype(np.int32),
        streams=(Stream(0), Stream(0, codes=0, n_codes=3, universe=0)),
    )
    return build_layout(y, [model], thresholds=(0.5,), terms=terms_for(METRICS))


@pytest.mark.parametrize("strata", [False, True])
def test_unit_bootstrap_equals_the_row_bootstrap_in_distribution(strata):
    g, y, r = _data()
    units = find_units([g, y, r])
    assert units is not None and units.n_units <= 3 * 2 * 11
    slots = metric_slots(METRICS)
    rows = bootstrap_layout(
        _layout(g, y, r), slots=slots, odds=1.0, n_resamples=B, seed=1, strata=g if strata else None
    )
    first = units.first
    compressed = bootstrap_layout(
        _layout(g[first], y[first], r[first]),
        slots=slots,
        odds=1.0,
        n_resamples=B,
        seed=2,
        strata=g[first] if strata else None,
        multiplicity=units.multiplicity,
    )
    np.testing.assert_allclose(compressed.point, rows.point, rtol=0, atol=1e-12)
    a, b = rows.replicates[:, :, 0, :], compressed.replicates[:, :, 0, :]
    for o in range(a.shape[1]):
        for q in range(a.shape[2]):
            x, z = a[:, o, q], b[:, o, q]
            x, z = x[np.isfinite(x)], z[np.isfinite(z)]
            sd = max(x.std(), 1e-12)
            assert abs(x.mean() - z.mean()) < 5 * np.sqrt(2) * sd / np.sqrt(B), (o, METRICS[q])
            assert abs(z.std() / sd - 1) < 0.15, (o, METRICS[q])
            assert stats.ks_2samp(x, z).pvalue > 1e-4, (o, METRICS[q])


def test_count_metrics_compress_to_their_predictions():
    g, y, _ = _data()
    r = np.random.default_rng(5).random(y.shape[0])  # continuous: every row its own unit
    assert find_units([g, y, r]) is None
    key = score_key(r, (0.5,), needs_scores=False)
    assert set(np.unique(key)) == {0.0, 0.5} and np.array_equal(key >= 0.5, r >= 0.5)
    units = find_units([g, y, key])
    assert units is not None and units.n_units == 12


def test_unit_permutations_equal_the_exact_p_value_within_monte_carlo_error():
    """The false positive rate of slice 0, permuted among the negatives: the Monte-Carlo p-value over
    unit-count permutations (20,000, no sequential stop) agrees with the exact hypergeometric p-value
    within 5 binomial standard errors."""
    g, y, r = _data()
    neg = y == 0
    space = permutation_space(y[neg], r[neg], None, metrics=["false_positive_rate"], threshold=0.5)
    assert space.multiplicity.shape[0] < neg.sum() / 10  # compressed
    first = (g == 0)[neg]
    fp = r[neg] >= 0.5
    # an observed slice FPR a little above the overall: pick the statistic of the data itself
    k, n1, kk, nn = int((fp & first).sum()), int(first.sum()), int(fp.sum()), int(neg.sum())
    observed = np.array([[k / n1 - kk / nn], [k / n1 - (kk - k) / (nn - n1)]])
    p, _used = permutation_test(space, space.first_counts(first), observed, pairwise=False,
                               fixed=np.array([kk / nn]), slots=metric_slots(["false_positive_rate"]), odds=1.0,
                               n_permutations=20_000, seed=3, sequential=None)  # fmt: skip
    exact = float(exact_count_pvalue(k, n1, kk, nn))
    se = np.sqrt(exact * (1 - exact) / 20_000) + 1 / 20_000
    assert abs(p[0, 0] - exact) < 5 * se and abs(p[1, 0] - exact) < 5 * se


def test_unit_resamples_do_not_depend_on_batches_or_threads():
    g, y, r = _data(n=600)
    units = find_units([g, y, r])
    first = units.first
    layout = _layout(g[first], y[first], r[first])
    slots = metric_slots(METRICS)
    runs = [
        bootstrap_layout(
            layout,
            slots=slots,
            odds=1.0,
            n_resamples=150,
            seed=4,
            multiplicity=units.multiplicity,
            batch_size=batch,
            n_threads=threads,
            strata=g[first],
        )
        for batch, threads in ((None, 1), (10, 1), (64, 2), (128, 2))
    ]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.replicates, runs[0].replicates)


# ---- finding units: hash grouping, the semantics of a lexicographic sort ---------------------------------------


def _sorted_units(columns, max_share):
    """The reference: the rows' distinct values in lexicographic order (numpy's sort of the stacked rows)."""
    stacked = np.stack([np.asarray(c, dtype=np.float64) + 0.0 for c in columns], axis=1)  # + 0.0: -0.0 is 0.0
    _, first, of_row, multiplicity = np.unique(stacked, axis=0, return_index=True, return_inverse=True,
                                               return_counts=True)  # fmt: skip
    if first.shape[0] > max_share * stacked.shape[0]:
        return None
    return of_row.ravel(), first, multiplicity


@pytest.mark.parametrize("seed", range(6))
def test_units_are_the_rows_distinct_values_in_lexicographic_order(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    columns = [
        rng.integers(0, 4, n).astype(float),
        rng.choice([-0.0, 0.0, 0.25, 1.0], n),  # -0.0 and 0.0 are one value
        np.round(rng.random(n), int(rng.integers(1, 3))),
        rng.integers(0, 2, n) * 1.0,
    ][: int(rng.integers(1, 5))]
    for share in (0.5, 1.0, np.inf, 0.01):
        expected = _sorted_units(columns, share)
        units = find_units(columns, max_share=share)
        assert (units is None) == (expected is None)
        if units is not None:
            for got, want in zip((units.of_row, units.first, units.multiplicity), expected):
                np.testing.assert_array_equal(got, want)


def test_units_of_columns_whose_product_of_values_overflows_a_packed_key():
    # 4 columns of 70,000 distinct values each: 70,000^4 = 2.4e19 combinations, beyond a 64-bit key, so the
    # key is renumbered on the way; the units still sort as the rows do.
    rng = np.random.default_rng(7)
    n = 70_000
    columns = [rng.permutation(n).astype(float) for _ in range(4)]
    columns = [np.concatenate([c, c[:500]]) for c in columns]  # 500 rows repeated: 70,000 units of 70,500 rows
    units = find_units(columns, max_share=1.0)
    of_row, first, multiplicity = _sorted_units(columns, 1.0)
    np.testing.assert_array_equal(units.of_row, of_row)
    np.testing.assert_array_equal(units.first, first)
    np.testing.assert_array_equal(units.multiplicity, multiplicity)
    assert multiplicity.max() == 2 and units.n_units == n


def test_units_of_counts_are_the_units_of_the_expanded_rows():
    rng = np.random.default_rng(8)
    n = 400
    columns = [rng.integers(0, 3, n).astype(float), rng.integers(0, 2, n).astype(float), rng.integers(0, 5, n) / 4]
    counts = rng.integers(1, 6, n)
    units = units_of_counts(columns, counts)
    expanded = find_units([np.repeat(c, counts) for c in columns], max_share=np.inf)
    np.testing.assert_array_equal(units.multiplicity, expanded.multiplicity)
    for c, e in zip(columns, (np.repeat(c, counts) for c in columns)):
        np.testing.assert_array_equal(c[units.first], e[expanded.first])  # the same values, unit by unit


# ---- exact tests: the hypergeometric tails, at a cost bounded by the counts ------------------------------------


def _exact_tail_sum(x, n_first, successes, size):
    """The permutation p-value as an exact rational sum over the support (math.comb), as a float."""
    from fractions import Fraction

    x0 = Fraction(n_first * successes, size)
    observed = abs(x - x0)
    reach = float(observed) - 1e-9 * max(1.0, float(observed))  # the module's tolerance
    low, high = max(0, n_first - (size - successes)), min(n_first, successes)
    total = sum(
        math.comb(successes, k) * math.comb(size - successes, n_first - k)
        for k in range(low, high + 1)
        if abs(k - float(x0)) >= reach
    )
    return float(Fraction(total, math.comb(size, n_first)))


def test_exact_p_values_equal_the_exact_sums_of_the_probabilities():
    # Exact rational sums (math.comb): the tails are right to about 1e-15 (the log-gamma table the tests used
    # before erred by up to 1e-11 at these sizes); every extreme value is where the condition puts it,
    # including the mirror image of x across x0 (x0 = 50 below, where |k - x0| ties exactly).
    rng = np.random.default_rng(9)
    cases = [(60, 100, 100, 200), (40, 100, 100, 200), (50, 100, 100, 200), (0, 5, 3, 10), (3, 5, 3, 10)]
    for size in (2, 7, 30, 300, 2000):
        for _ in range(40):
            successes, n_first = int(rng.integers(0, size + 1)), int(rng.integers(1, size))
            low, high = max(0, n_first - (size - successes)), min(n_first, successes)
            cases.append((int(rng.integers(low, high + 1)), n_first, successes, size))
    x, n_first, successes, size = (np.array(v) for v in zip(*cases))
    got = exact_count_pvalue(x, n_first, successes, size)
    want = np.array([_exact_tail_sum(*case) for case in cases])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-13)
    assert got[2] == 1.0  # x = x0: every permutation is as extreme


def test_exact_p_values_of_a_hundred_million_rows_need_no_table_of_them():
    # The old test summed a probability table as long as the rows; this one reads the two tails. At 1e8 rows
    # the hypergeometric is normal to within 1e-3 (sd 2,449 here), so the p-value is the normal tail's.
    size, successes, n_first = 100_000_000, 40_000_000, 25_000_000
    sd = math.sqrt(n_first * (successes / size) * (1 - successes / size) * (size - n_first) / (size - 1))
    x0 = n_first * successes / size
    for z in (0.5, 2.0, 3.5):
        p = float(exact_count_pvalue(round(x0 + z * sd), n_first, successes, size))
        assert p == pytest.approx(math.erfc(z / math.sqrt(2.0)), abs=2e-3)
    assert np.isnan(exact_count_pvalue(5, 0, 10, 100)) and np.isnan(exact_count_pvalue(5, 100, 10, 100))


# ---- the jackknife acceleration of ratios of sums: compiled, the same sums --------------------------------------


def test_ratio_jackknife_acceleration_equals_the_grouped_formula_bit_for_bit():
    from disaggregated_eval.intervals import grouped_jackknife_acceleration, ratio_jackknife_acceleration

    rng = np.random.default_rng(10)
    for trial in range(60):
        n, k = int(rng.integers(1, 2000)), int(rng.integers(1, 7))
        codes = rng.integers(0, k, n)
        w = np.where(rng.random(n) < 0.1, 0.0, rng.uniform(0.5, 2.0, n)) if trial % 2 else np.ones(n)
        a = rng.random(n) if trial % 3 else (rng.random(n) < 0.3).astype(float)
        b = np.ones(n) if trial % 4 else (rng.random(n) < 0.5).astype(float)  # 0/1: some groups undefined
        numerator, denominator, inside = w * a, w * b, w > 0
        big_a = np.bincount(codes, weights=numerator, minlength=k)
        big_b = np.bincount(codes, weights=denominator, minlength=k)
        with np.errstate(invalid="ignore", divide="ignore"):
            loo = np.where(inside, (big_a[codes] - numerator) / (big_b[codes] - denominator), np.nan)
        np.testing.assert_array_equal(
            ratio_jackknife_acceleration(codes, numerator, denominator, inside, k),
            grouped_jackknife_acceleration(loo, codes, k),
        )
