"""Tests of the paired bootstrap engine against the reference metrics on explicit resamples.

Tolerances:
- point estimates vs ``compute_metrics``: 1e-12. Both are ratios of sums of ~200 float64 terms of
  order 1, summed in different orders (sequential in the kernel, pairwise in numpy); the rounding
  difference is ~1e-15.
- replicates vs ``compute_metrics`` on the explicitly resampled rows: 1e-10. The kernel multiplies
  a weight by its count (``c * w``) where the reference adds ``w`` ``c`` times, and it derives
  TP = Wp - FN and FP = Wn - TN by differences; both are exact up to a few ulps of the totals,
  so ~1e-14 in practice. 1e-10 still catches any wrong count, tie or weight, which moves a value by
  at least ~1e-3 here.
- different batch sizes and thread counts: exact equality (bit-identical by design).
- metrics_from_sums called from Python or from a user's numba kernel vs compute_metrics: 1e-12
  (the same ratios of sums, summed in another order).
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from disaggregated_eval import vocabulary
from disaggregated_eval.engine import (
    METRIC_SLOTS,
    N_METRIC_SLOTS,
    BootstrapResult,
    Evaluation,
    bootstrap_evaluations,
    metric_slots,
    metrics_from_sums,
    resample_counts,
    resample_indices,
    resample_seed,
)
from disaggregated_eval.engine.sums import N_TERMS, TERM_SLOTS
from disaggregated_eval.intervals import percentile_interval
from disaggregated_eval.metrics import METRICS, compute_metrics, pointwise_log_loss

POINT_TOL = 1e-12
REPLICATE_TOL = 1e-10


def _problem(n: int = 200, seed: int = 0, extra: int = 0):
    """Three models (one with heavy ties, one with many scores exactly at 0.5), two groups, and
    evaluations of every kind: overall, 0/1 group masks, continuous weights P(A|V). ``extra``
    more evaluations of model ``xa`` (random masks and gamma weights) exercise the engine's walk for
    models with many evaluations (more than ``LANE_WALK_MAX_EVALUATIONS``)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n)
    y = rng.binomial(1, 0.3 + 0.3 * a)
    base = np.clip(0.4 * y + 0.6 * rng.random(n), 0, 1)
    scores = {
        "x": base,
        "xa": np.round(base, 1),  # heavy ties, including ties across the threshold rows
        "flat": np.where(rng.random(n) < 0.3, 0.5, np.round(rng.random(n), 2)),
    }
    p = rng.uniform(0.05, 0.95, n)  # P(A = 1 | V)
    evaluations = []
    for model in scores:
        evaluations += [
            Evaluation(model, np.ones(n)),
            Evaluation(model, (a == 0).astype(float)),
            Evaluation(model, (a == 1).astype(float)),
            Evaluation(model, 1.0 - p),
            Evaluation(model, p),
        ]
    for k in range(extra):
        weights = rng.gamma(1.0, 1.0, n) if k % 2 else (rng.random(n) < 0.4).astype(float)
        evaluations.append(Evaluation("xa", weights))
    return y, scores, evaluations


def _reference(y, scores, evaluation, rows=None, metrics=METRICS):
    rows = np.arange(len(y)) if rows is None else rows
    ref = compute_metrics(
        y[rows], scores[evaluation.score][rows], sample_weight=evaluation.weights[rows], metrics=metrics
    )
    return np.array([ref[m] for m in metrics])


@pytest.mark.parametrize("extra", [0, 8])
def test_point_estimates_equal_compute_metrics(extra):
    y, scores, evaluations = _problem(extra=extra)
    result = bootstrap_evaluations(y, scores, evaluations, n_resamples=2, seed=1)
    assert isinstance(result, BootstrapResult)
    assert result.metrics == METRICS
    assert result.point.shape == (len(evaluations), len(METRICS))
    assert result.replicates.shape == (2, len(evaluations), len(METRICS))
    assert result.replicates.dtype == np.float64
    for e, evaluation in enumerate(evaluations):
        np.testing.assert_allclose(result.point[e], _reference(y, scores, evaluation), rtol=0, atol=POINT_TOL)


@pytest.mark.parametrize(("seed", "extra"), [(0, 0), (1, 0), (2, 8)])
def test_replicates_equal_metrics_on_explicit_resamples(seed, extra):
    y, scores, evaluations = _problem(seed=seed, extra=extra)
    n_resamples = 5
    result = bootstrap_evaluations(y, scores, evaluations, n_resamples=n_resamples, seed=seed)
    counts = resample_counts(len(y), seed=seed, start=0, stop=n_resamples)
    for i in range(n_resamples):
        rows = np.repeat(np.arange(len(y)), counts[i])
        for e, evaluation in enumerate(evaluations):
            expected = _reference(y, scores, evaluation, rows)
            np.testing.assert_allclose(result.replicates[i, e], expected, rtol=0, atol=REPLICATE_TOL)


def test_replicate_auc_equals_sklearn_on_resampled_rows():
    # An independent check of the weighted tie-aware AUC on a resample (not via compute_metrics).
    y, scores, evaluations = _problem()
    result = bootstrap_evaluations(y, scores, evaluations, n_resamples=3, seed=4, metrics=("auc",))
    counts = resample_counts(len(y), seed=4, start=0, stop=3)
    for i in range(3):
        for e, ev in enumerate(evaluations):
            expected = roc_auc_score(y, scores[ev.score], sample_weight=ev.weights * counts[i])
            assert result.replicates[i, e, 0] == pytest.approx(expected, abs=REPLICATE_TOL)


def test_resamples_are_uniform_draws_with_replacement():
    counts = resample_counts(50, seed=3, start=0, stop=4)
    assert counts.shape == (4, 50) and counts.dtype == np.int32
    assert (counts.sum(axis=1) == 50).all()
    # Resample i uses child i of the seed sequence, as SeedSequence.spawn does.
    child = np.random.SeedSequence(3).spawn(3)[2]
    indices = np.random.Generator(np.random.PCG64(child)).integers(0, 50, size=50, dtype=np.int32)
    np.testing.assert_array_equal(counts[2], np.bincount(indices, minlength=50))
    assert resample_seed(3, 2).spawn_key == child.spawn_key
    # A slice of the resamples is the same slice of the full set.
    np.testing.assert_array_equal(resample_counts(50, seed=3, start=2, stop=4), counts[2:4])


def test_subset_of_metrics_and_order():
    y, scores, evaluations = _problem()
    metrics = ("precision", "log_loss")
    full = bootstrap_evaluations(y, scores, evaluations, n_resamples=3, seed=2)
    part = bootstrap_evaluations(y, scores, evaluations, n_resamples=3, seed=2, metrics=metrics)
    columns = [METRICS.index(m) for m in metrics]
    np.testing.assert_array_equal(part.replicates, full.replicates[:, :, columns])
    np.testing.assert_array_equal(part.point, full.point[:, columns])


@pytest.mark.parametrize("extra", [0, 8])
def test_bit_identical_for_batch_size_and_threads(extra):
    y, scores, evaluations = _problem(extra=extra)
    reference = bootstrap_evaluations(y, scores, evaluations, n_resamples=11, seed=9)
    for batch_size, n_threads in [(1, 1), (4, 2), (11, 2), (3, 1)]:
        other = bootstrap_evaluations(
            y, scores, evaluations, n_resamples=11, seed=9, batch_size=batch_size, n_threads=n_threads
        )
        np.testing.assert_array_equal(other.replicates, reference.replicates)
        np.testing.assert_array_equal(other.point, reference.point)


def test_seed_sequence_and_int_seed_agree_and_seeds_differ():
    y, scores, evaluations = _problem()
    a = bootstrap_evaluations(y, scores, evaluations[:2], n_resamples=4, seed=5)
    b = bootstrap_evaluations(y, scores, evaluations[:2], n_resamples=4, seed=np.random.SeedSequence(5))
    c = bootstrap_evaluations(y, scores, evaluations[:2], n_resamples=4, seed=6)
    np.testing.assert_array_equal(a.replicates, b.replicates)
    assert not np.array_equal(a.replicates, c.replicates, equal_nan=True)
    # The first resamples do not depend on how many are drawn.
    d = bootstrap_evaluations(y, scores, evaluations[:2], n_resamples=2, seed=5)
    np.testing.assert_array_equal(d.replicates, a.replicates[:2])


def test_progress_is_called_after_each_batch():
    y, scores, evaluations = _problem()
    calls = []
    bootstrap_evaluations(
        y, scores, evaluations[:1], n_resamples=7, seed=0, batch_size=3, progress=lambda d, t: calls.append((d, t))
    )
    assert calls == [(3, 7), (6, 7), (7, 7)]


def test_single_class_resamples_give_nan_and_are_counted():
    # n = 4 with one positive: a resample misses the positive with probability (3/4)^4 ~ 0.32, so
    # among 200 resamples some certainly do (P(none) ~ 1e-33) and some certainly do not.
    y = np.array([1, 0, 0, 0])
    scores = {"m": np.array([0.9, 0.2, 0.6, 0.4])}
    evaluations = [Evaluation("m", np.ones(4)), Evaluation("m", np.array([0.0, 1.0, 1.0, 0.0]))]
    n_resamples = 200
    result = bootstrap_evaluations(y, scores, evaluations, n_resamples=n_resamples, seed=12)
    counts = resample_counts(4, seed=12, start=0, stop=n_resamples)
    no_positive = counts[:, 0] == 0
    no_negative = counts[:, 0] == 4  # the positive drawn four times (probability 1/256)
    assert 0 < no_positive.sum() < n_resamples
    auc = result.replicates[:, 0, METRICS.index("auc")]
    sensitivity = result.replicates[:, 0, METRICS.index("sensitivity")]
    specificity = result.replicates[:, 0, METRICS.index("specificity")]
    np.testing.assert_array_equal(np.isnan(auc), no_positive | no_negative)
    np.testing.assert_array_equal(np.isnan(sensitivity), no_positive)
    np.testing.assert_array_equal(np.isnan(specificity), no_negative)
    # Where both classes are present the positive outranks every negative: AUC exactly 1.
    assert (auc[~(no_positive | no_negative)] == 1.0).all()
    # The group evaluation (rows 1 and 2, both negative) never has a positive; it is empty when
    # neither row is drawn, and then everything is NaN.
    group = result.replicates[:, 1, :]
    assert np.isnan(group[:, METRICS.index("auc")]).all()
    empty = (counts[:, 1] + counts[:, 2]) == 0
    np.testing.assert_array_equal(np.isnan(group[:, METRICS.index("log_loss")]), empty)
    _, _, n_undefined = percentile_interval(result.replicates)
    assert n_undefined[0, METRICS.index("auc")] == (no_positive | no_negative).sum()
    assert n_undefined[0, METRICS.index("sensitivity")] == no_positive.sum()
    assert n_undefined[0, METRICS.index("specificity")] == no_negative.sum()
    # precision is undefined without a predicted positive: for the group, when row 2 (score 0.6, its
    # only row above the threshold) is not drawn
    assert n_undefined[1, METRICS.index("precision")] == (counts[:, 2] == 0).sum()
    assert n_undefined[1, METRICS.index("auc")] == n_resamples


def test_percentile_interval_matches_numpy_over_finite_values():
    rng = np.random.default_rng(0)
    replicates = rng.normal(size=(101, 3, 2))
    replicates[rng.random((101, 3, 2)) < 0.2] = np.nan
    replicates[5, 0, 0] = np.inf
    replicates[:, 2, 1] = np.nan
    low, high, n_undefined = percentile_interval(replicates, confidence=0.9)
    for e in range(3):
        for q in range(2):
            column = replicates[:, e, q]
            finite = column[np.isfinite(column)]
            assert n_undefined[e, q] == column.size - finite.size
            if finite.size:
                # Same algorithm (numpy's linear interpolation) on the same values; the percentile
                # (1 - 0.9) / 2 * 100 = 5.000000000000004 in float64, hence a few ulps, not exact.
                assert low[e, q] == pytest.approx(np.percentile(finite, 5.0), abs=1e-12)
                assert high[e, q] == pytest.approx(np.percentile(finite, 95.0), abs=1e-12)
            else:
                assert np.isnan(low[e, q]) and np.isnan(high[e, q])
    # Another axis.
    low1, _high1, und1 = percentile_interval(np.moveaxis(replicates, 0, 2), confidence=0.9, axis=2)
    np.testing.assert_array_equal(low1, low)
    np.testing.assert_array_equal(und1, n_undefined)


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        (dict(y=np.array([0, 1, 3, 1])), ValueError, r"0/1.*\{3\}"),
        (dict(scores={"m": np.array([0.1, 0.2, 1.2, 0.4])}), ValueError, r"scores\['m'\].*got 1.2 at row 2"),
        (dict(scores={"m": np.array([0.1, 0.2, 0.3])}), ValueError, r"scores\['m'\] has 3 rows but y has 4"),
        (
            dict(evaluations=[Evaluation("m", np.array([1.0, -1.0, 1.0, 1.0]))]),
            ValueError,
            r"evaluations\[0\]\.weights .*got -1.0 at row 1",
        ),
        (dict(evaluations=[Evaluation("m", np.array([1.0, np.nan, 1.0, 1.0]))]), ValueError, r"got nan at row 1"),
        (dict(evaluations=[Evaluation("m", np.ones(3))]), ValueError, r"evaluations\[0\]\.weights has 3 rows"),
        (dict(evaluations=[Evaluation("zz", np.ones(4))]), ValueError, r"'zz' is not a key of scores"),
        (dict(evaluations=[]), ValueError, r"evaluations is empty"),
        (dict(n_resamples=0), ValueError, r"n_resamples must be a positive integer; got 0"),
        (dict(n_resamples=10.0), ValueError, r"n_resamples must be a positive integer; got 10.0"),
        (dict(batch_size=0), ValueError, r"batch_size must be a positive integer; got 0"),
        (dict(n_threads=0), ValueError, r"n_threads must be a positive integer; got 0"),
        (dict(n_threads=10_000), ValueError, r"n_threads must be <= .*got 10000"),
        (dict(seed=-1), ValueError, r"seed must be .*got -1"),
        (dict(metrics=("auc", "f1")), ValueError, r"unknown metric 'f1'"),
        (dict(threshold=0.0), ValueError, r"threshold must be in .*got 0.0"),
        (dict(y=np.array([], dtype=int)), ValueError, r"y is empty"),
        (dict(scores=[np.array([0.1, 0.2, 0.3, 0.4])]), TypeError, r"scores must be a mapping .*got list"),
        (dict(strata=np.array([0, 1, 1])), ValueError, r"strata has 3 rows but y has 4"),
        (dict(strata=np.array([0, -1, 1, 1])), ValueError, r"group codes \(strata\) must be integers .*\{-1\}"),
        (dict(strata=np.array([0, 0.5, 1, 1])), ValueError, r"group codes \(strata\) must be integers .*\{0.5\}"),
    ],
)
def test_validation_messages_name_the_bad_value(change, error, match):
    arguments = dict(
        y=np.array([0, 1, 0, 1]),
        scores={"m": np.array([0.1, 0.2, 0.3, 0.4])},
        evaluations=[Evaluation("m", np.ones(4))],
        n_resamples=2,
        seed=0,
    )
    arguments.update(change)
    y, scores, evaluations = arguments.pop("y"), arguments.pop("scores"), arguments.pop("evaluations")
    with pytest.raises(error, match=match):
        bootstrap_evaluations(y, scores, evaluations, **arguments)


def test_resample_counts_validation():
    with pytest.raises(ValueError, match=r"need 0 <= start <= stop; got start=3, stop=2"):
        resample_counts(5, seed=0, start=3, stop=2)
    with pytest.raises(ValueError, match=r"n must be a positive integer; got 0"):
        resample_counts(0, seed=0, start=0, stop=1)
    with pytest.raises(ValueError, match=r"start must be an integer >= 0; got -1"):
        resample_indices(5, seed=0, start=-1, stop=1)


# ----------------------------------------------------------------------------------------------
# Named output slots and the sums -> metrics function
# ----------------------------------------------------------------------------------------------


def test_metric_slots_are_named_and_cover_every_metric():
    assert set(METRIC_SLOTS) == set(vocabulary.METRICS)
    assert sorted(METRIC_SLOTS.values()) == list(range(N_METRIC_SLOTS))
    np.testing.assert_array_equal(
        metric_slots(["brier_score", "auc"]), [METRIC_SLOTS["brier_score"], METRIC_SLOTS["auc"]]
    )
    with pytest.raises(ValueError, match="unknown metric 'f1'"):
        metric_slots(["f1"])


def test_any_metric_order_gives_the_same_values():
    # The kernel's output follows the requested names, not the order of vocabulary.METRICS.
    y, scores, evaluations = _problem()
    forward = bootstrap_evaluations(y, scores, evaluations, n_resamples=3, seed=8)
    backward = bootstrap_evaluations(y, scores, evaluations, n_resamples=3, seed=8, metrics=METRICS[::-1])
    np.testing.assert_array_equal(backward.replicates, forward.replicates[:, :, ::-1])
    np.testing.assert_array_equal(backward.point, forward.point[:, ::-1])


def _sums(y, r, w, threshold=0.5):
    """The inputs of metrics_from_sums (wp, wn, fn, tn, auc, terms), computed directly with numpy."""
    yhat = r >= threshold
    order = np.argsort(r, kind="stable")
    rs, ys, ws = r[order], y[order], w[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(rs) != 0.0) + 1))
    pos = np.add.reduceat(ws * ys, starts)
    neg = np.add.reduceat(ws * (1 - ys), starts)
    auc = float(np.sum(pos * (np.cumsum(neg) - neg + 0.5 * neg)))
    return (
        float(np.sum(w * y)),
        float(np.sum(w * (1 - y))),
        float(np.sum(w * y * ~yhat)),
        float(np.sum(w * (1 - y) * ~yhat)),
        auc,
        _terms(float(np.sum(w * pointwise_log_loss(y, r))), float(np.sum(w * (r - y) ** 2)), float(np.sum(w * r))),
    )


def _terms(log_loss_sum, brier_sum, score_sum):
    """The terms vector of metrics_from_sums (slots from sums.TERM_SLOTS)."""
    terms = np.zeros(N_TERMS)
    terms[TERM_SLOTS["log_loss"]] = log_loss_sum
    terms[TERM_SLOTS["brier"]] = brier_sum
    terms[TERM_SLOTS["score"]] = score_sum
    return terms


@pytest.mark.parametrize("seed", [0, 1])
def test_metrics_from_sums_equals_compute_metrics(seed):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, 300).astype(float)
    r = np.round(np.clip(0.3 * y + 0.7 * rng.random(300), 0, 1), 2)
    w = rng.gamma(2.0, 1.0, 300)
    out = np.full(N_METRIC_SLOTS, -1.0)
    metrics_from_sums(*_sums(y, r, w), 0.25 / 0.75, out)
    expected = compute_metrics(y, r, sample_weight=w, preference_threshold=0.25)
    for name, value in expected.items():
        assert out[METRIC_SLOTS[name]] == pytest.approx(value, abs=POINT_TOL), name
    # Undefined metrics: no negatives -> AUC, specificity, FPR NaN; no weight at all -> all NaN.
    metrics_from_sums(2.0, 0.0, 1.0, 0.0, 0.0, _terms(0.5, 0.3, 1.2), 1.0, out)
    for name in ("auc", "specificity", "false_positive_rate"):
        assert np.isnan(out[METRIC_SLOTS[name]])
    assert out[METRIC_SLOTS["sensitivity"]] == 0.5 and out[METRIC_SLOTS["false_negative_rate"]] == 0.5
    metrics_from_sums(0.0, 0.0, 0.0, 0.0, 0.0, _terms(0.0, 0.0, 0.0), 1.0, out)
    assert np.isnan(out).all()


@numba.njit
def _user_kernel(y, r, w, threshold, odds, terms, out):
    # What a specialised kernel (e.g. the audit's slice kernel) does: accumulate its own sums and
    # call the engine's formulas. Rows are given in increasing score order without ties here.
    wp = 0.0
    wn = 0.0
    tp = 0.0
    fn = 0.0
    tn = 0.0
    fp = 0.0
    ll = 0.0
    br = 0.0
    auc = 0.0
    for j in range(y.shape[0]):
        pos = w[j] * y[j]
        neg = w[j] - pos
        auc += pos * wn
        wp += pos
        wn += neg
        if r[j] >= threshold:
            tp += pos
            fp += neg
        else:
            fn += pos
            tn += neg
        eps = 2.220446049250313e-16
        p = min(max(r[j], eps), 1.0 - eps)
        q = min(max(1.0 - r[j], eps), 1.0 - eps)
        ll += w[j] * (-np.log(p) if y[j] == 1.0 else -np.log(q))
        br += w[j] * (r[j] - y[j]) ** 2
        terms[2] += w[j] * r[j]  # TERM_SLOTS["score"]
    terms[0] = ll  # TERM_SLOTS["log_loss"]
    terms[1] = br  # TERM_SLOTS["brier"]
    metrics_from_sums(wp, wn, fn, tn, auc, terms, odds, out)


def test_metrics_from_sums_is_callable_from_another_numba_kernel():
    rng = np.random.default_rng(3)
    r = np.sort(rng.random(200))  # distinct scores, increasing
    y = (rng.random(200) < r).astype(float)
    w = rng.gamma(1.0, 1.0, 200)
    out = np.empty(N_METRIC_SLOTS)
    assert (TERM_SLOTS["log_loss"], TERM_SLOTS["brier"], TERM_SLOTS["score"]) == (0, 1, 2)
    _user_kernel(y, r, w, 0.5, 1.0, np.zeros(N_TERMS), out)
    expected = compute_metrics(y, r, sample_weight=w)
    for name, value in expected.items():
        assert out[METRIC_SLOTS[name]] == pytest.approx(value, abs=POINT_TOL), name


# ----------------------------------------------------------------------------------------------
# The within_group (stratified) scheme
# ----------------------------------------------------------------------------------------------


def test_within_group_resamples_keep_every_stratum_size():
    rng = np.random.default_rng(0)
    strata = rng.choice([0, 3, 7], size=120, p=[0.6, 0.3, 0.1])  # codes need not be 0..K-1
    counts = resample_counts(120, seed=4, start=0, stop=20, strata=strata)
    indices = resample_indices(120, seed=4, start=0, stop=20, strata=strata)
    assert indices.dtype == np.int32 and indices.shape == (20, 120)
    for code in (0, 3, 7):
        members = strata == code
        # every resample draws exactly as many rows from a stratum as it has, and only its rows
        np.testing.assert_array_equal(counts[:, members].sum(axis=1), members.sum())
    for i in range(20):
        np.testing.assert_array_equal(counts[i], np.bincount(indices[i], minlength=120))
    # Draws vary across resamples (a stratum of 72 rows is not always drawn once each).
    assert not (counts == 1).all()
    # The draws of stratum 3 (the second in code order): 36 uniform draws from its rows with the
    # generator of (seed, i), after those of stratum 0.
    rows0, rows3 = np.flatnonzero(strata == 0), np.flatnonzero(strata == 3)
    generator = np.random.Generator(np.random.PCG64(resample_seed(4, 5)))
    first = rows0[generator.integers(0, rows0.size, size=rows0.size, dtype=np.int32)]
    second = rows3[generator.integers(0, rows3.size, size=rows3.size, dtype=np.int32)]
    np.testing.assert_array_equal(indices[5, : rows0.size], first)
    np.testing.assert_array_equal(indices[5, rows0.size : rows0.size + rows3.size], second)


def test_one_stratum_equals_the_population_scheme():
    y, scores, evaluations = _problem()
    population = bootstrap_evaluations(y, scores, evaluations, n_resamples=6, seed=3)
    one = bootstrap_evaluations(y, scores, evaluations, n_resamples=6, seed=3, strata=np.zeros(len(y), dtype=int))
    np.testing.assert_array_equal(one.replicates, population.replicates)
    np.testing.assert_array_equal(one.point, population.point)


@pytest.mark.parametrize("extra", [0, 8])
def test_within_group_replicates_equal_metrics_on_the_stratified_resample(extra):
    y, scores, evaluations = _problem(seed=5, extra=extra)
    strata = evaluations[2].weights.astype(int)  # the group a == 1 mask
    result = bootstrap_evaluations(y, scores, evaluations, n_resamples=4, seed=6, strata=strata)
    counts = resample_counts(len(y), seed=6, start=0, stop=4, strata=strata)
    for i in range(4):
        rows = np.repeat(np.arange(len(y)), counts[i])
        for e, evaluation in enumerate(evaluations):
            np.testing.assert_allclose(
                result.replicates[i, e], _reference(y, scores, evaluation, rows), rtol=0, atol=REPLICATE_TOL
            )
    # Group sizes are fixed: each group's rows are drawn exactly as often as it has rows.
    for g, mask in ((0, strata == 0), (1, strata == 1)):
        np.testing.assert_array_equal(counts[:, mask].sum(axis=1), mask.sum(), err_msg=f"group {g}")
    # batch size and threads do not change the stratified draws either
    other = bootstrap_evaluations(
        y, scores, evaluations, n_resamples=4, seed=6, strata=strata, batch_size=3, n_threads=2
    )
    np.testing.assert_array_equal(other.replicates, result.replicates)


def test_resample_indices_into_a_given_buffer():
    buffer = np.full((3, 40), -1, dtype=np.int32)
    got = resample_indices(40, seed=2, start=4, stop=7, out=buffer)
    assert got is buffer
    np.testing.assert_array_equal(buffer, resample_indices(40, seed=2, start=4, stop=7))
    strata = np.arange(40) % 3
    resample_indices(40, seed=2, start=4, stop=7, strata=strata, out=buffer)
    np.testing.assert_array_equal(buffer, resample_indices(40, seed=2, start=4, stop=7, strata=strata))
    with pytest.raises(ValueError, match=r"out must be a writeable C-contiguous int32 array of shape \(3, 40\)"):
        resample_indices(40, seed=2, start=4, stop=7, out=np.empty((3, 40), dtype=np.int64))
    with pytest.raises(ValueError, match=r"shape \(3, 40\); got ndarray int32 \(2, 40\)"):
        resample_indices(40, seed=2, start=4, stop=7, out=np.empty((2, 40), dtype=np.int32))
