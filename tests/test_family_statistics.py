"""The fairness statistics of a family (disaggregated_eval.derived), their intervals and pieces (MOVER-R, max-|t|).

The formulas are checked against their definitions; the coverage at equality (the point of the module)
by a seeded simulation whose tolerance is stated at each assertion.
"""

from __future__ import annotations

import numpy as np
import pytest

from disaggregated_eval.derived import Extreme, SliceRates, demographic_parity, disparity_ratios, equalized_odds
from disaggregated_eval.intervals import max_abs_t, max_t_level, mover_ratio, wilson_interval
from disaggregated_eval.seeds import generator


def test_mover_ratio_bounds_solve_their_defining_equations():
    p1 = np.array([0.3, 0.1, 0.6, 0.25])
    n1 = np.array([100.0, 50, 400, 80])
    p2 = np.array([0.3, 0.2, 0.5, 0.05])
    n2 = np.array([120.0, 60, 300, 40])
    low, high = mover_ratio(p1, n1, p2, n2, 0.95)
    l1, u1 = wilson_interval(p1, n1, 0.95)
    l2, u2 = wilson_interval(p2, n2, 0.95)
    # (p1 - t p2)^2 = (p1 - l1)^2 + t^2 (u2 - p2)^2 at the lower bound, the upper with (u1, l2)
    np.testing.assert_allclose((p1 - low * p2) ** 2, (p1 - l1) ** 2 + low**2 * (u2 - p2) ** 2, rtol=1e-9)
    np.testing.assert_allclose((p1 - high * p2) ** 2, (u1 - p1) ** 2 + high**2 * (p2 - l2) ** 2, rtol=1e-9)
    assert np.all(low < p1 / p2) and np.all(p1 / p2 < high)


def test_mover_ratio_with_zero_counts():
    low, high = mover_ratio(
        np.array([0.0, 0.3]), np.array([50.0, 50]), np.array([0.2, 0.0]), np.array([50.0, 50]), 0.95
    )
    assert low[0] == 0.0 and 0 < high[0] < 1  # no events on top: [0, finite], never zero width
    assert low[1] > 0 and np.isinf(high[1])  # no events below: the ratio is unbounded above


def test_max_t_level_is_the_bonferroni_level_for_one_quantity_and_grows_with_independent_ones():
    rng = generator(20250101, "test", "max-t")
    one = max_abs_t(rng.standard_normal((40000, 1)))
    assert max_t_level(one, 0.05) == pytest.approx(0.95, abs=0.004)  # 40,000 draws: quantile error ~0.002
    many = max_abs_t(rng.standard_normal((40000, 10)))
    # ten independent |Z|: P(max <= c) = (2 Phi(c) - 1)^10 = 0.95 gives a per-quantity level 0.95^(1/10)
    assert max_t_level(many, 0.05) == pytest.approx(0.95**0.1, abs=0.001)
    # a degenerate column (no variation) is left out; an undefined resample counts as outside
    with_constant = np.column_stack([rng.standard_normal(1000), np.zeros(1000)])
    np.testing.assert_allclose(max_abs_t(with_constant), max_abs_t(with_constant[:, :1]))
    with_nan = rng.standard_normal((100, 2))
    with_nan[3, 1] = np.nan
    assert np.isinf(max_abs_t(with_nan)[3])


def _family(rng, rates, n, b=1000):
    """Selection rates of slices of n rows each (binomial) with a within-slice bootstrap."""
    rates = np.asarray(rates)
    counts = rng.binomial(n, rates)
    p = counts / n
    reps = rng.binomial(n, p, size=(b, rates.size)) / n
    return SliceRates(p, reps, np.full(rates.size, float(n)))


def test_extreme_intervals_cover_equality_and_a_large_gap():
    # Six slices of 200 rows with the same rate 0.35: the DP difference's truth is 0 and its ratio's 1. The
    # plug-in's percentile interval never covers them (the simulation: 0%); these intervals cover at
    # least 95% by construction (97.5% when every pair ties). Over 300 families the coverage must be >= 93%
    # (at 97.5%, 93% is 4.7 standard errors below: probability below 1e-5). A single gap of 0.15 between two
    # slices of 2,000 rows: coverage >= 90% over 300 families (94-95% seen; 90% is 2.9 standard errors below
    # 95%) and a width within 1.3 times the percentile interval's.
    rng = generator(20250101, "test", "extremes-coverage")
    hits = {"difference": 0, "ratio": 0}
    for _ in range(300):
        difference, ratio = demographic_parity(_family(rng, [0.35] * 6, 200))
        lo, hi = difference.interval(0.95)
        hits["difference"] += lo <= 0.0 <= hi
        lo, hi = ratio.interval(0.95)
        hits["ratio"] += lo <= 1.0 <= hi
    assert min(hits.values()) >= 0.93 * 300, hits
    covered, widths = 0, []
    for _ in range(300):
        rates = _family(rng, [0.3, 0.45], 2000)
        difference, _ = demographic_parity(rates)
        lo, hi = difference.interval(0.95)
        covered += lo <= 0.15 <= hi
        gaps = rates.replicates.max(1) - rates.replicates.min(1)
        old = np.percentile(gaps, [2.5, 97.5])
        widths.append((hi - lo) / (old[1] - old[0]))
    assert covered >= 0.90 * 300 and np.mean(widths) <= 1.3, (covered, np.mean(widths))


def test_equalized_odds_takes_the_worse_of_its_two_rates_and_the_band_widens_the_interval():
    rng = generator(20250101, "test", "extremes-eo")
    tpr, fpr = _family(rng, [0.7, 0.72, 0.69], 500), _family(rng, [0.2, 0.3, 0.21], 800)
    difference, ratio = equalized_odds(tpr, fpr)
    assert difference.estimate == max(np.ptp(tpr.estimate), np.ptp(fpr.estimate))
    assert ratio.estimate == pytest.approx(min(tpr.estimate.min() / tpr.estimate.max(),
                                               fpr.estimate.min() / fpr.estimate.max()))  # fmt: skip
    lo, hi = difference.interval(0.95)
    b_lo, b_hi = difference.band(0.999)
    assert b_lo <= lo <= difference.estimate <= hi <= b_hi
    assert difference.bias_corrected() >= 0.0 and 0.0 <= ratio.bias_corrected() <= 1.0
    ratios = disparity_ratios(fpr, reference=0)
    assert ratios.ratio[1] == fpr.estimate[1] / fpr.estimate[0]
    lo, hi = ratios.bounds(0.95)
    assert (lo[1], hi[1]) == pytest.approx(tuple(x[0] for x in mover_ratio(fpr.estimate[[1]], fpr.size[[1]],
                                                                              fpr.estimate[[0]], fpr.size[[0]], 0.95)))  # fmt: skip


def test_bad_inputs_are_refused():
    rates = SliceRates(np.array([0.2, 0.3]), np.zeros((10, 2)), np.array([10.0, 10.0]))
    with pytest.raises(ValueError, match="kind must be one of"):
        Extreme("max", (rates,))
    with pytest.raises(ValueError, match="at least 2"):
        Extreme("gap", (SliceRates(np.array([0.2]), np.zeros((10, 1))),))
    with pytest.raises(ValueError, match="needs proportions"):
        Extreme("ratio", (SliceRates(np.array([0.2, 0.3]), np.zeros((10, 2))),))
    with pytest.raises(ValueError, match="replicates must have shape"):
        SliceRates(np.array([0.2, 0.3]), np.zeros((10, 3)))


def test_a_family_too_large_for_pairs_projects_the_slices_intervals_and_is_wider(monkeypatch):
    # Above MAX_PAIRS pairs the bounds come from the slices' own Wilson intervals (every slice at once on the
    # side the plug-in errs): valid, and never narrower than the pairs' bounds on the same data.
    from disaggregated_eval import derived

    rng = generator(20250101, "test", "extremes-projection")
    rates = _family(rng, [0.3] * 5 + [0.4], 400)
    difference, ratio = demographic_parity(rates)
    pairs = difference.interval(0.95), ratio.interval(0.95)
    monkeypatch.setattr(derived, "MAX_PAIRS", 10)  # 15 pairs: projected
    assert difference.projected and ratio.projected
    projected = difference.interval(0.95), ratio.interval(0.95)
    assert projected[0][0] <= pairs[0][0] and projected[0][1] >= pairs[0][1]
    assert projected[1][0] <= pairs[1][0] and projected[1][1] >= pairs[1][1] - 1e-12
    assert difference.max_t() is None  # the band uses Bonferroni's level for such a family


def test_attained_by_names_the_part_and_the_slices_of_the_plug_in_statistic():
    # Three slices; TPR spread 0.6 - 0.2 = 0.4 (slices 2 and 0), FPR spread 0.3 - 0.25 = 0.05 (slices 0 and 1).
    # The EO difference is the TPR's gap; the EO ratio the smaller ratio: TPR 0.2/0.6 = 0.33 < FPR 0.25/0.3.
    reps = np.zeros((4, 3))
    tpr = SliceRates(np.array([0.2, 0.4, 0.6]), reps, np.full(3, 50.0))
    fpr = SliceRates(np.array([0.3, 0.25, 0.28]), reps, np.full(3, 50.0))
    difference, ratio = equalized_odds(tpr, fpr)
    assert difference.attained_by() == (0, 2, 0)
    assert ratio.attained_by() == (0, 2, 0)
    assert difference.estimate == pytest.approx(0.4) and ratio.estimate == pytest.approx(0.2 / 0.6)
    # The FPR attains both when its spread is the wider one; with equal values, the first of equals.
    wide = SliceRates(np.array([0.9, 0.1, 0.1]), reps, np.full(3, 50.0))
    assert equalized_odds(tpr, wide)[0].attained_by() == (1, 0, 1)
    assert equalized_odds(tpr, wide)[1].attained_by() == (1, 0, 1)
    # An undefined statistic (a slice's value undefined, or a ratio's largest value 0) names no slices.
    partly = SliceRates(np.array([np.nan, 0.1, 0.3]), reps, np.full(3, 50.0))
    assert np.isnan(demographic_parity(partly)[0].estimate) and demographic_parity(partly)[0].attained_by() is None
    zero = SliceRates(np.array([0.0, 0.0]), np.zeros((4, 2)), np.full(2, 50.0))
    assert demographic_parity(zero)[0].attained_by() == (0, 0, 0)  # a gap of 0 between equal slices
    assert np.isnan(demographic_parity(zero)[1].estimate) and demographic_parity(zero)[1].attained_by() is None


def test_the_parts_of_an_extreme_must_share_their_resamples():
    three = np.full(3, 50.0)
    with pytest.raises(ValueError, match=r"same paired resamples; got replicates of \[4, 7\] resamples"):
        equalized_odds(SliceRates(np.full(3, 0.2), np.zeros((4, 3)), three),
                       SliceRates(np.full(3, 0.2), np.zeros((7, 3)), three))  # fmt: skip


def test_pair_ratio_replicates_are_undefined_where_the_reference_rate_is_zero():
    reps = np.array([[0.2, 0.4], [0.3, 0.0], [0.1, np.nan]])
    ratios = disparity_ratios(SliceRates(np.array([0.2, 0.4]), reps, np.array([50.0, 50.0])), reference=1)
    assert ratios.n_undefined(np.array([0])).tolist() == [2]  # a reference rate of 0 and an undefined one
    assert ratios.ratio[0] == pytest.approx(0.5)
    assert np.isnan(disparity_ratios(SliceRates(np.array([0.2, 0.0]), reps, np.array([50.0, 50.0])), 1).ratio[0])


def test_pair_ratios_in_blocks_equal_each_pair_alone(monkeypatch):
    # The block statistics (read in blocks of slices) equal those of each (slice, reference) pair built alone:
    # the same max-|t| over the pairs, the same undefined counts, the same MOVER-R bounds.
    from disaggregated_eval import derived

    rng = generator(20250101, "test", "pair-ratios-blocks")
    rates = _family(rng, [0.3, 0.0, 0.2, 0.35, 0.5, 0.25, 0.3], 60)
    ratios = disparity_ratios(rates, reference=3)
    others = np.array([0, 1, 2, 4, 5, 6])
    monkeypatch.setattr(derived, "_CHUNK_VALUES", 2 * rates.replicates.shape[0])  # blocks of 2 slices
    t = ratios.max_t(others)
    alone = [derived._max_abs_t(SliceRates(rates.estimate[[s, 3]], rates.replicates[:, [s, 3]], rates.size[[s, 3]]),
                                "ratio") for s in others]  # fmt: skip
    np.testing.assert_array_equal(t, np.maximum.reduce(alone))
    with np.errstate(invalid="ignore", divide="ignore"):
        undefined = [np.sum(~np.isfinite(rates.replicates[:, s] / np.where(rates.replicates[:, 3] == 0, np.nan,
                                                                             rates.replicates[:, 3]))) for s in others]  # fmt: skip
    assert ratios.n_undefined(others).tolist() == undefined
    low, high = ratios.bounds(0.9)
    for s in others:
        one = mover_ratio(rates.estimate[[s]], rates.size[[s]], rates.estimate[[3]], rates.size[[3]], 0.9)
        assert (low[s], high[s]) == (one[0][0], one[1][0])


def test_max_t_level_with_undefined_resamples_warns_nothing_and_reaches_one():
    # An undefined resample has an infinite |t|; where the quantile falls between two of them numpy's
    # interpolation computes inf - inf. The level is then 1 (nothing can be bounded), without a warning.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert max_t_level(np.array([1.0, np.inf, np.inf, np.inf]), 0.05) == 1.0
        assert max_t_level(np.array([1.0, 2.0, 3.0, np.inf]), 0.5) < 1.0


def test_docstring_examples_run():
    import doctest

    from disaggregated_eval import derived

    failed, attempted = doctest.testmod(derived, optionflags=doctest.ELLIPSIS)
    assert failed == 0 and attempted >= 1
