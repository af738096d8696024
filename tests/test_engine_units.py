"""Compression (``engine.units``): the unit-count bootstrap and permutations are the row ones in distribution.

The bootstrap of units draws ``Multinomial(n, m_u / n)`` unit counts; the row bootstrap draws ``n`` rows.
They differ draw for draw but must agree in distribution. Checks, with B resamples on each side:

* the mean of every metric's replicates agrees within 5 Monte-Carlo standard errors of the difference
  (``sqrt(2) sd / sqrt(B)``; a correct implementation fails with probability ~1e-6 per check);
* their standard deviations agree within 15% (the sd of a sample sd ratio is about ``sqrt(1 / B)`` =
  2.2% at B = 2,000; 15% is ~5 of those), while a wrong multinomial (e.g. unit counts drawn with the
  wrong probabilities, or the multiplicity forgotten) shifts the sd by far more;
* a two-sample Kolmogorov-Smirnov test does not reject at 1e-4.
"""

from __future__ import annotations

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
from disaggregated_eval.engine.units import find_units, score_key
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
