"""Controlled evaluation: T_a, M_a, relative and shared-space quantities.

The per-resample checks recompute every quantity with scikit-learn on the explicitly resampled
rows. With ``n_resamples=1`` the percentile interval of a quantity collapses to its single
replicate (``ci_low == ci_high == value on resample 0``), which exposes the engine's replicate
values through the public table.
"""

from __future__ import annotations

import runpy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import log_loss, precision_score, recall_score, roc_auc_score

from disaggregated_eval import seeds, vocabulary
from disaggregated_eval.engine import resample_counts
from disaggregated_eval.evaluation import (
    TIDY_COLUMNS,
    _build_evaluations,
    _check_inputs,
    controlled_evaluation,
    shared_space_weights,
)
from disaggregated_eval.memory import (
    SUMMARY_CHUNK_COPIES,
    SUMMARY_CHUNK_VALUES,
    check_replicate_memory,
    evaluations_per_model,
    replicate_memory_bytes,
)
from disaggregated_eval.simulate import get_dgp


def _sk_metrics(y, r, w):
    """Reference metric values with scikit-learn (sample weights), as the authors' code computes them."""
    yhat = (r >= 0.5).astype(int)
    tpr = recall_score(y, yhat, sample_weight=w)
    tnr = recall_score(y, yhat, pos_label=0, sample_weight=w)
    pi = np.sum(w * y) / np.sum(w)
    return {
        "log_loss": log_loss(y, r, sample_weight=w, labels=[0, 1]),
        "auc": roc_auc_score(y, r, sample_weight=w),
        "sensitivity": tpr,
        "specificity": tnr,
        "precision": precision_score(y, yhat, sample_weight=w, zero_division=0),
        "net_benefit": tpr * pi - (1 - tnr) * (1 - pi) * 1.0,
        "label_rate": pi,
        "predicted_positive_rate": np.sum(w * yhat) / np.sum(w),
    }


def _toy(n=600, k=3, seed=0):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, k, n)
    x = rng.normal(size=n) + 0.5 * groups
    y = (rng.random(n) < 1 / (1 + np.exp(-(x - 0.3 * groups)))).astype(np.int64)
    scores = {
        "x": np.round(1 / (1 + np.exp(-x)), 2).clip(0.01, 0.99),  # heavy ties
        "xa": 1 / (1 + np.exp(-(x - 0.3 * groups + 0.2 * rng.normal(size=n)))),
    }
    blocks = []
    for control, model in [("X", "*"), ("Y", "*"), ("R", "x"), ("R", "xa")]:
        p = rng.dirichlet(np.ones(k), size=n)
        block = pd.DataFrame({f"p_{j}": p[:, j] for j in range(k)})
        block.insert(0, "row", np.arange(n))
        block.insert(0, "model", model)
        block.insert(0, "control", control)
        block.insert(0, "weight_source", "estimated")
        blocks.append(block)
    return y, groups, scores, pd.concat(blocks, ignore_index=True)


def _weights(table, control, model, n, k):
    key = model if control == "R" else "*"
    sel = table[(table.control == control) & (table.model == key)].sort_values("row")
    return sel[[f"p_{j}" for j in range(k)]].to_numpy()


@pytest.mark.parametrize(
    ("seed", "resampling"), [(11, "population"), (12, "population"), (13, "within_group"), (14, "within_group")]
)
def test_replicate_values_match_sklearn_on_the_resample(seed, resampling):
    y, groups, scores, weights = _toy()
    n, k = len(y), 3
    labels = ["g0", "g1", "g2"]
    boot_seed = seeds.seed_sequence(seed, "bootstrap", "toy")
    table = controlled_evaluation(
        y,
        groups,
        scores,
        weights=weights,
        group_labels=labels,
        relative_to={"xa": "x"},
        n_resamples=1,
        seed=boot_seed,
        resampling=resampling,
    )
    strata = groups if resampling == "within_group" else None
    counts = resample_counts(n, seed=boot_seed, start=0, stop=1, strata=strata)[0]
    if strata is not None:  # the stratified resample keeps every group's size
        np.testing.assert_array_equal(
            np.bincount(groups, weights=counts, minlength=k), np.bincount(groups, minlength=k)
        )
    idx = np.repeat(np.arange(n), counts)
    yy, gg = y[idx], groups[idx]

    def value(**query):
        sel = table
        for col, val in query.items():
            sel = sel[sel[col] == val]
        assert len(sel) == 1, query
        row = sel.iloc[0]
        # One resample: the interval is that resample's value.
        assert row.ci_low == row.ci_high
        return row.ci_low

    shares = np.bincount(groups, minlength=k) / n
    for model, r in scores.items():
        rr = r[idx]
        for a, label in enumerate(labels):
            m = gg == a
            group_ref = _sk_metrics(yy[m], rr[m], np.ones(m.sum()))
            overall_ref = _sk_metrics(yy, rr, np.ones(len(yy)))
            for metric, ref in group_ref.items():
                # 1e-10: sums of at most a few hundred terms in float64, compared across two
                # summation orders (sklearn vs the engine's sorted accumulation).
                assert value(model=model, comparison="absolute", group=label, metric=metric) == pytest.approx(
                    ref, abs=1e-10
                )
                assert value(
                    model=model, comparison="controlled_difference", control="none", group=label, metric=metric
                ) == pytest.approx(ref - overall_ref[metric], abs=1e-10)
            for control in ("X", "Y", "R"):
                p = _weights(weights, control, model, n, k)[:, a]
                ma_ref = _sk_metrics(yy, rr, p[idx])
                ss = shared_space_weights(p, groups == a, shares[a])[idx]
                ss_ref = _sk_metrics(yy[ss > 0], rr[ss > 0], ss[ss > 0])
                for metric in group_ref:
                    ma = value(
                        model=model,
                        comparison="weighted_population",
                        control=control,
                        weight_source="estimated",
                        group=label,
                        metric=metric,
                    )
                    assert ma == pytest.approx(ma_ref[metric], abs=1e-10)
                    ta = value(
                        model=model,
                        comparison="controlled_difference",
                        control=control,
                        weight_source="estimated",
                        group=label,
                        metric=metric,
                    )
                    assert ta == pytest.approx(group_ref[metric] - ma_ref[metric], abs=1e-10)
                    sv = value(
                        model=model,
                        comparison="shared_space",
                        control=control,
                        weight_source="estimated",
                        group=label,
                        metric=metric,
                    )
                    assert sv == pytest.approx(ss_ref[metric], abs=1e-10)
    for label in ["overall", *labels]:
        m = np.ones(len(yy), bool) if label == "overall" else gg == labels.index(label)
        ref_xa = _sk_metrics(yy[m], scores["xa"][idx][m], np.ones(m.sum()))
        ref_x = _sk_metrics(yy[m], scores["x"][idx][m], np.ones(m.sum()))
        for metric in ref_x:
            rel = value(model="xa", comparison="relative", group=label, metric=metric)
            assert rel == pytest.approx(ref_xa[metric] - ref_x[metric], abs=1e-10)


def test_point_estimates_are_full_sample_values_and_table_is_tidy():
    y, groups, scores, weights = _toy(seed=3)
    table = controlled_evaluation(
        y, groups, scores, weights=weights, group_labels=["a", "b", "c"], n_resamples=50, seed=1
    )
    assert tuple(table.columns) == TIDY_COLUMNS
    assert set(table.comparison) == {"absolute", "weighted_population", "controlled_difference", "shared_space"}
    assert set(table.control) == {"none", "X", "Y", "R"}
    row = table[
        (table.model == "x") & (table.comparison == "absolute") & (table.group == "overall") & (table.metric == "auc")
    ].iloc[0]
    assert row.estimate == pytest.approx(roc_auc_score(y, scores["x"]), abs=1e-12)
    assert row.ci_low <= row.estimate <= row.ci_high
    assert (table.n_resamples == 50).all()
    # M_a with control none is the population metric for every group.
    pop = table[(table.model == "xa") & (table.comparison == "weighted_population") & (table.control == "none")]
    overall = table[(table.model == "xa") & (table.comparison == "absolute") & (table.group == "overall")]
    for metric in ("log_loss", "auc"):
        assert np.allclose(pop[pop.metric == metric].estimate, overall[overall.metric == metric].estimate.iloc[0])


def test_same_seed_bit_identical_and_seed_matters():
    y, groups, scores, weights = _toy(seed=4)
    kw = dict(weights=weights, group_labels=["a", "b", "c"], n_resamples=40)
    t1 = controlled_evaluation(y, groups, scores, seed=7, **kw)
    t2 = controlled_evaluation(y, groups, scores, seed=7, batch_size=7, **kw)
    t3 = controlled_evaluation(y, groups, scores, seed=8, **kw)
    pd.testing.assert_frame_equal(t1, t2, check_exact=True)
    assert not np.array_equal(t1.ci_low.to_numpy(), t3.ci_low.to_numpy())


def test_undefined_resamples_are_counted_not_fatal():
    # Group "rare" has 3 rows with one positive: many resamples miss its positive (or the group),
    # so sensitivity/AUC are undefined there; the table must count them and keep going.
    rng = np.random.default_rng(0)
    n = 200
    groups = np.zeros(n, dtype=np.int64)
    groups[:3] = 1
    y = rng.integers(0, 2, n)
    y[:3] = [1, 0, 0]
    r = rng.random(n)
    table = controlled_evaluation(
        y, groups, {"m": r}, weights=None, group_labels=["big", "rare"], n_resamples=300, seed=5
    )
    sens = table[(table.comparison == "absolute") & (table.group == "rare") & (table.metric == "sensitivity")].iloc[0]
    # P(the single positive row is not drawn) = (1 - 1/200)^200 ~ 0.37, so about 110 of 300.
    assert 60 < sens.n_undefined < 170
    counts = np.stack([resample_counts(n, seed=5, start=0, stop=300)])[0]
    assert sens.n_undefined == int(np.sum(counts[:, 0] == 0))
    ll = table[(table.comparison == "absolute") & (table.group == "rare") & (table.metric == "log_loss")].iloc[0]
    assert ll.n_undefined == int(np.sum(counts[:, :3].sum(axis=1) == 0))


# ----------------------------------------------------------------------------------------------
# Bad inputs: one test each; every error names the bad value and comes before any work
# ----------------------------------------------------------------------------------------------

LABELS = ["a", "b", "c"]


def _never_called(done, total):  # progress callback: the bootstrap must not start
    raise AssertionError("the bootstrap started before the bad input was reported")


def _evaluate(**change):
    y, groups, scores, weights = _toy(seed=5)
    arguments = dict(
        y=y,
        groups=groups,
        scores=scores,
        weights=weights,
        group_labels=LABELS,
        n_resamples=5,
        seed=1,
        progress=_never_called,
    )
    arguments.update(change)
    return controlled_evaluation(arguments.pop("y"), arguments.pop("groups"), arguments.pop("scores"), **arguments)


def test_group_codes_beyond_the_labels_are_rejected():
    with pytest.raises(
        ValueError, match=r"group codes \(groups\) must be integers in 0\.\.1 \(n_groups=2\); got values \{2\}"
    ):
        _evaluate(group_labels=["a", "b"])


def test_group_labels_must_not_be_overall():
    # 'overall' labels the whole population; a subgroup called so would be mistaken for it.
    with pytest.raises(ValueError, match=r"group_labels must not use the reserved name\(s\) \['overall'\]"):
        _evaluate(group_labels=["overall", "b", "c"])


def test_group_labels_must_be_distinct():
    # Two subgroups with one label would silently merge into one row of the table.
    with pytest.raises(ValueError, match=r"group_labels must be distinct; \['a'\] appear more than once"):
        _evaluate(group_labels=["a", "a", "c"])


def test_group_without_rows_is_named():
    _y, groups, _scores, _weights = _toy(seed=5)
    with pytest.raises(ValueError, match=r"no rows for \['c'\]"):
        _evaluate(groups=np.minimum(groups, 1))


def test_scores_as_a_list_are_a_type_error_naming_scores():
    _y, _groups, scores, _weights = _toy(seed=5)
    with pytest.raises(TypeError, match=r"scores must be a mapping of model name to scores.*got list"):
        _evaluate(scores=[scores["x"], scores["xa"]])


def test_scores_of_the_wrong_length_name_the_model():
    _y, _groups, scores, _weights = _toy(seed=5)
    with pytest.raises(ValueError, match=r"scores\['xa'\] has 599 rows but y has 600"):
        _evaluate(scores={"x": scores["x"], "xa": scores["xa"][:-1]})


def test_scores_outside_the_unit_interval_name_the_row():
    _y, _groups, scores, _weights = _toy(seed=5)
    bad = scores["x"].copy()
    bad[7] = 1.5
    with pytest.raises(ValueError, match=r"scores\['x'\] must be finite and in \[0, 1\]; got 1.5 at row 7"):
        _evaluate(scores={"x": bad, "xa": scores["xa"]})


def test_unknown_relative_model_is_named():
    with pytest.raises(ValueError, match="relative_to names model 'nope'"):
        _evaluate(relative_to={"nope": "x"})


def test_unknown_control_is_named():
    with pytest.raises(ValueError, match=r"controls must be one of .*got 'Z'"):
        _evaluate(controls=("none", "Z"))


def test_weighted_controls_need_a_weight_table():
    with pytest.raises(ValueError, match=r"controls \['X'\] need a weight table"):
        _evaluate(weights=None, controls=("none", "X"))


def test_unknown_resampling_scheme_is_named():
    with pytest.raises(ValueError, match=r"resampling must be one of 'population', 'within_group'; got 'stratified'"):
        _evaluate(resampling="stratified")


def test_unknown_metric_is_named():
    with pytest.raises(ValueError, match=r"unknown metric 'f1'"):
        _evaluate(metrics=("auc", "f1"))


def test_weights_outside_the_unit_interval_are_rejected():
    _y, _groups, _scores, weights = _toy(seed=5)
    bad = weights.copy()
    bad.loc[bad.index[0], "p_0"] = 1.5
    with pytest.raises(ValueError, match="probabilities in"):
        _evaluate(weights=bad)


def test_weights_that_do_not_sum_to_one_name_the_row():
    _y, _groups, _scores, weights = _toy(seed=5)
    bad = weights.copy()
    bad.loc[bad.index[3], "p_1"] += 0.2
    with pytest.raises(ValueError, match="row 3 sums to"):
        _evaluate(weights=bad)


def test_missing_weights_name_the_rows():
    _y, _groups, _scores, weights = _toy(seed=5)
    bad = weights.copy()
    bad.loc[bad.index[2], "p_2"] = np.nan
    with pytest.raises(ValueError, match=r"rows \[2\] hold NaN"):
        _evaluate(weights=bad)


def test_weights_shifted_by_a_row_are_rejected():
    y, _groups, _scores, weights = _toy(seed=5)
    bad = weights.copy()
    bad.loc[bad.index[: len(y)], "row"] += 1  # X weights shifted by one row
    with pytest.raises(ValueError, match=r"missing \[0\], out of range \[600\]"):
        _evaluate(weights=bad)


# ----------------------------------------------------------------------------------------------
# Memory of the replicates
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("controls", "shared_space"), [(("none", "X", "Y", "R"), True), (("none", "Y"), False), (("none",), True)]
)
def test_evaluation_count_formula_matches_the_evaluations_built(controls, shared_space):
    y, groups, scores, weights = _toy(seed=5)
    two_sources = pd.concat([weights, weights.assign(weight_source="oracle")], ignore_index=True)
    inputs = _check_inputs(
        y,
        groups,
        scores,
        weights=two_sources,
        group_labels=LABELS,
        relative_to=None,
        controls=controls,
        metrics=vocabulary.PIPELINE_METRICS,
    )
    evaluations, _ = _build_evaluations(inputs, two_sources, shared_space=shared_space)
    per_model = evaluations_per_model(
        n_groups=3, n_controls=len(controls) - 1, n_weight_sources=2, shared_space=shared_space
    )
    assert len(evaluations) == 2 * per_model


def test_replicate_memory_of_the_issue_examples():
    # Simulation study: 5 models, 2 groups, X/Y/R, estimated + oracle, 8 metrics -> 27 evaluations
    # per model, 135 in all; 8 bytes per replicate.
    sizes = dict(n_models=5, n_groups=2, n_controls=3, n_weight_sources=2, n_metrics=8)
    replicates = 8 * 135 * 8
    for n_resamples in (10_000, 2_000_000, 1_000_000_000):
        got = replicate_memory_bytes(n_resamples=n_resamples, **sizes)
        # The replicate array plus the summary's working set: SUMMARY_CHUNK_COPIES arrays of about
        # 2^22 values, or of one quantity's n_resamples x 8 values when that is larger.
        summary = SUMMARY_CHUNK_COPIES * 8 * max(SUMMARY_CHUNK_VALUES, n_resamples * 8)
        assert replicates * n_resamples < got <= replicates * n_resamples + summary
    # 2,000,000 resamples: the issue's 16 GiB of replicates (17.28e9 bytes) plus 4 summary copies of
    # one quantity (4 x 8 x 1.6e7 = 0.512e9 bytes).
    assert replicate_memory_bytes(n_resamples=2_000_000, **sizes) == 17_280_000_000 + 512_000_000
    assert check_replicate_memory(n_resamples=10_000, mem_mb=4000, **sizes) < 250e6


def test_too_many_resamples_are_rejected_before_any_work():
    sizes = dict(n_models=5, n_groups=2, n_controls=3, n_weight_sources=2, n_metrics=8)
    # 8 bytes x 135 evaluations x 8 metrics x 10^9 = 8.64e12 bytes, plus the summary (4 copies of
    # one quantity's 8 x 10^9 values: 2.56e11) = 8.896e12 bytes = 8,896,000 MB (the issue's 7.86 TiB
    # was the replicate array alone).
    with pytest.raises(
        ValueError,
        match=r"evaluation\.n_resamples = 1,000,000,000 needs about 8,896,000 MB .*"
        r"more than resources\.simulation\.bootstrap\.mem_mb = 4000 MB",
    ):
        check_replicate_memory(
            n_resamples=1_000_000_000,
            mem_mb=4000,
            what="evaluation.n_resamples",
            limit="resources.simulation.bootstrap.mem_mb",
            **sizes,
        )
    with pytest.raises(
        ValueError, match=r"n_resamples = 2,000,000 needs about 17,792 MB .*at most about \d{3},\d{3} fit"
    ):
        check_replicate_memory(n_resamples=2_000_000, mem_mb=4000, **sizes)
    # The suggested largest count does fit.
    with pytest.raises(ValueError, match=r"at most about \d{3},\d{3} fit") as error:
        check_replicate_memory(n_resamples=2_000_000, mem_mb=4000, **sizes)
    largest = int(error.value.args[0].split("at most about ")[1].split(" fit")[0].replace(",", ""))
    assert 400_000 < largest < 462_963  # 4e9 / (8 x 135 x 8) = 462,962 without the summary
    assert check_replicate_memory(n_resamples=largest, mem_mb=4000, **sizes) <= 4000e6
    with pytest.raises(ValueError, match=r"mem_mb must be a positive number of megabytes; got 0"):
        check_replicate_memory(n_resamples=10, mem_mb=0, **sizes)
    with pytest.raises(ValueError, match=r"n_controls must be an integer >= 0; got -1"):
        replicate_memory_bytes(n_models=1, n_groups=2, n_controls=-1, n_weight_sources=1, n_metrics=8, n_resamples=10)


def test_controlled_evaluation_checks_its_memory_limit_before_the_bootstrap():
    # 8 evaluations per model (1 + 3 + 1 source x 1 control x 3 groups x ... ) x 8 metrics x 10^6
    # resamples is far above 1 MB; the error comes before any resample is drawn.
    with pytest.raises(ValueError, match=r"n_resamples = 1,000,000 needs about .* more than memory_limit_mb = 1 MB"):
        _evaluate(n_resamples=1_000_000, memory_limit_mb=1)
    table = _evaluate(n_resamples=5, memory_limit_mb=1000, progress=None)
    assert (table.n_resamples == 5).all()


def _oracle_x_evaluation(setting: str, n: int, n_resamples: int):
    dgp = get_dgp(setting)
    test = dgp.sample(n, seeds.generator(99, "test_evaluation", setting))
    x, y, a = test["x"].to_numpy(), test["y"].to_numpy(), test["a"].to_numpy()
    p = dgp.p_a_given_x(x)
    weights = pd.DataFrame(
        {"weight_source": "oracle", "control": "X", "model": "*", "row": np.arange(n), "p_0": p[:, 0], "p_1": p[:, 1]}
    )
    table = controlled_evaluation(
        y,
        a,
        {"bayes_x": dgp.p_y_given_x(x)},
        weights=weights,
        group_labels=["A = 0", "A = 1"],
        controls=("X",),
        metrics=("log_loss", "auc", "sensitivity", "specificity"),
        n_resamples=n_resamples,
        confidence=0.99,
        seed=seeds.seed_sequence(99, "bootstrap", setting),
        shared_space=False,
    )
    return table[table.comparison == "controlled_difference"]


@pytest.mark.slow
def test_oracle_control_for_x_explains_covariate_shift_but_not_outcome_shift():
    """Table 2: for the Bayes-optimal subgroup-agnostic model, {R, Y} ⊥ A | X holds under covariate
    shift (T_a = 0 for every metric) and fails under outcome shift.

    Reliability: with oracle weights the only error is sampling noise, and the weighted estimator's
    bias is O(1/n). At n = 100,000 the bootstrap standard error of T_a is about 0.002-0.005 for
    these metrics, while under outcome shift |T_a| for log loss is about 0.057 (at n = 10^6,
    E[Y|X] has log loss 0.742 in group 0 and 0.629 in group 1; A is independent of X there, so
    P(A|X) = 1/2 and M_a is the population value 0.685), i.e. more than 10 standard errors from 0. We use 99% intervals, so a correct implementation fails the
    covariate-shift check for a given quantity with probability about 1%; the seed is fixed, so the
    test is deterministic, and the check fails for any sizeable bias (e.g. a weight or sign error
    moves T_a by > 0.05).
    """
    cov = _oracle_x_evaluation("covariate_shift", 100_000, 400)
    assert len(cov) == 8  # 2 groups x 4 metrics
    assert ((cov.ci_low <= 0) & (cov.ci_high >= 0)).all(), cov[["group", "metric", "estimate", "ci_low", "ci_high"]]
    assert (cov.estimate.abs() < 0.02).all()

    out = _oracle_x_evaluation("outcome_shift", 100_000, 400)
    ll = out[out.metric == "log_loss"]
    assert ((ll.ci_low > 0) | (ll.ci_high < 0)).all(), ll
    assert (ll.estimate.abs() > 0.04).all()


def test_default_metrics_are_the_pipeline_metrics():
    table = _evaluate(progress=None)
    assert tuple(pd.unique(table.metric)) == vocabulary.PIPELINE_METRICS
    every = _evaluate(progress=None, metrics=vocabulary.METRICS, controls=("none",))
    assert tuple(pd.unique(every.metric)) == vocabulary.METRICS
    # the first eight metrics do not change when the other four are added
    common = table[table.control == "none"].merge(
        every, on=[c for c in TIDY_COLUMNS if c not in ("estimate", "ci_low", "ci_high", "n_undefined")]
    )
    assert len(common) == len(table[table.control == "none"])
    np.testing.assert_array_equal(common.estimate_x, common.estimate_y)
    np.testing.assert_array_equal(common.ci_low_x, common.ci_low_y)


# ----------------------------------------------------------------------------------------------
# The two resampling schemes
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_within_group_and_population_widths_agree_for_absolute_metrics_at_n_20000():
    """At n = 20,000 the two schemes give the same interval widths for absolute metrics, within
    Monte-Carlo error (``docs/method.md``, "Bootstrap").

    Why they should agree: under ``population`` a group's size is Binomial(n, pi_a), which changes
    the variance of a ratio metric only at order 1/n^2; for the overall metrics, stratifying removes
    the between-group part of the variance, here at most a few percent (e.g. label rates 0.3 vs 0.5
    in groups of 30% and 70%: 0.21 x 0.2^2 / 0.24 = 3.5% of the variance, 1.7% of the width).

    Monte-Carlo error: with B resamples the q-quantile's standard error is
    sqrt(q (1 - q) / B) / f(x_q); for a near-normal replicate distribution (sd s, width 3.92 s)
    and q = 0.025, 0.975 each endpoint has SE 0.0845 s sqrt(2000 / B), the two nearly
    independent. With B = 4,000 the width's SE is 0.085 s = 2.2% of the width per scheme, and the
    difference of two independent schemes has SE 3.1%. We allow 4 SE = 12.3% (a false alarm has
    probability ~6e-5 per quantity, ~2e-3 over the 24; the seed is fixed, so the test is
    deterministic). A scheme that drew n rows within each group, or the group's rows only once,
    would change a group width by a factor sqrt(0.3) or more and fail by far.
    """
    rng = seeds.generator(2025, "test_evaluation", "schemes")
    n = 20_000
    groups = (rng.random(n) < 0.3).astype(np.int64)
    x = rng.normal(size=n) + 0.4 * groups
    y = (rng.random(n) < 1 / (1 + np.exp(-(x - 0.5 - 0.8 * groups)))).astype(np.int64)
    scores = {"m": 1 / (1 + np.exp(-(0.8 * x - 0.4 + 0.3 * rng.normal(size=n))))}
    widths = {}
    for scheme in vocabulary.RESAMPLING_SCHEMES:
        table = controlled_evaluation(
            y,
            groups,
            scores,
            weights=None,
            group_labels=["A = 0", "A = 1"],
            controls=("none",),
            n_resamples=4_000,
            seed=seeds.seed_sequence(2025, "bootstrap", scheme),
            resampling=scheme,
        )
        absolute = table[table.comparison == "absolute"].set_index(["group", "metric"])
        assert (absolute.n_undefined == 0).all()
        widths[scheme] = absolute.ci_high - absolute.ci_low
    ratio = widths["within_group"] / widths["population"]
    assert len(ratio) == 3 * 8
    assert ((ratio - 1).abs() < 0.123).all(), ratio.sort_values()
    # ... and the agreement is not an accident of the two schemes drawing the same rows.
    assert not np.array_equal(widths["within_group"].to_numpy(), widths["population"].to_numpy())


# ----------------------------------------------------------------------------------------------
# The rule script (workflow/scripts/bootstrap_metrics.py) with a stand-in for Snakemake's object
# ----------------------------------------------------------------------------------------------

SCRIPT = Path(__file__).resolve().parents[1] / "workflow" / "scripts" / "bootstrap_metrics.py"


class _Namespace(dict):
    """Attribute and item access, like Snakemake's named lists."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def _script_inputs(tmp_path, *, n_score_rows=None):
    y, groups, scores, weights = _toy(n=300, k=2, seed=9)
    test = pd.DataFrame({"x": np.zeros(len(y)), "a": groups, "y": y})
    test.to_parquet(tmp_path / "test.parquet")
    (tmp_path / "schema.json").write_text(
        '{"dataset": "toy", "label": "y", "group": "a", "group_labels": ["A = 0", "A = 1"]}'
    )
    frame = pd.DataFrame(scores)
    if n_score_rows is not None:
        frame = frame.iloc[:n_score_rows]
    frame.to_parquet(tmp_path / "scores.parquet")
    weights.to_parquet(tmp_path / "weights_estimated.parquet")
    return _Namespace(
        input=_Namespace(
            scores=str(tmp_path / "scores.parquet"),
            weights_estimated=str(tmp_path / "weights_estimated.parquet"),
            test=str(tmp_path / "test.parquet"),
            schema=str(tmp_path / "schema.json"),
        ),
        output=_Namespace(parquet=str(tmp_path / "metrics.parquet"), csv=str(tmp_path / "metrics.csv")),
        log=[str(tmp_path / "log.txt")],
        wildcards=_Namespace(dataset="toy"),
        params=_Namespace(
            seed=3,
            study="simulation",
            models=["x", "xa"],
            relative_to={"xa": "x"},
            weight_sources=["estimated"],
            n_resamples=20,
            confidence=0.95,
            threshold=0.5,
            preference_threshold=0.5,
        ),
        threads=1,
        resources=_Namespace(mem_mb=500),
        config={"evaluation": {"batch_size": 7}},
    )


def _run_script(snakemake):
    runpy.run_path(str(SCRIPT), init_globals={"snakemake": snakemake}, run_name="__main__")


def test_script_writes_the_table_and_reads_batch_size_from_the_config(tmp_path):
    snakemake = _script_inputs(tmp_path)
    _run_script(snakemake)
    table = pd.read_parquet(tmp_path / "metrics.parquet")
    assert list(table.columns) == list(TIDY_COLUMNS)
    assert set(table.dataset) == {"toy"} and tuple(pd.unique(table.metric)) == vocabulary.PIPELINE_METRICS
    # batch_size is not a result-changing parameter: another value gives the same bits.
    snakemake.config["evaluation"]["batch_size"] = None
    snakemake.output["parquet"] = str(tmp_path / "again.parquet")
    snakemake.output["csv"] = str(tmp_path / "again.csv")
    _run_script(snakemake)
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "again.parquet"), table, check_exact=True)


def test_script_rejects_a_score_file_with_the_wrong_number_of_rows(tmp_path):
    snakemake = _script_inputs(tmp_path, n_score_rows=299)
    with pytest.raises(
        ValueError, match=r"score file .*scores\.parquet has 299 rows but the test set .*test\.parquet has 300"
    ):
        _run_script(snakemake)
    assert not (tmp_path / "metrics.parquet").exists()


def test_script_rejects_too_many_resamples_for_the_jobs_memory(tmp_path):
    snakemake = _script_inputs(tmp_path)
    snakemake.params["n_resamples"] = 50_000_000
    with pytest.raises(ValueError, match=r"n_resamples = 50,000,000 needs about .* more than memory_limit_mb = 500 MB"):
        _run_script(snakemake)


def test_sample_weight_equals_repeated_rows_for_point_estimates():
    """Integer sample weights are the same as repeating rows (every comparison, every metric)."""
    rng = np.random.default_rng(11)
    n = 300
    groups = rng.integers(0, 2, n)
    y = rng.binomial(1, 0.4, n)
    scores = {"m": rng.uniform(0.01, 0.99, n)}
    p = np.clip(rng.uniform(size=n), 0.05, 0.95)
    counts = rng.integers(0, 4, n)
    counts[:4] = 1  # keep both groups present

    def weights_for(prob):
        from disaggregated_eval.weight_table import weight_table

        return weight_table(np.column_stack([1 - prob, prob]), weight_source="estimated", control="X")

    weighted = controlled_evaluation(
        y,
        groups,
        scores,
        weights=weights_for(p),
        group_labels=["a", "b"],
        n_resamples=5,
        seed=0,
        sample_weight=counts.astype(float),
    )
    rows = np.repeat(np.arange(n), counts)
    repeated = controlled_evaluation(
        y[rows],
        groups[rows],
        {"m": scores["m"][rows]},
        weights=weights_for(p[rows]),
        group_labels=["a", "b"],
        n_resamples=5,
        seed=0,
    )
    np.testing.assert_allclose(weighted["estimate"], repeated["estimate"], rtol=1e-10, atol=1e-12)


def test_strata_need_within_group_and_fix_stratum_sizes():
    rng = np.random.default_rng(3)
    n = 200
    groups = rng.integers(0, 2, n)
    y = rng.binomial(1, 0.5, n)
    scores = {"m": rng.uniform(size=n)}
    strata = rng.integers(0, 3, n)
    with pytest.raises(ValueError, match="strata are only used with resampling='within_group'"):
        controlled_evaluation(
            y,
            groups,
            scores,
            weights=None,
            group_labels=["a", "b"],
            n_resamples=5,
            seed=0,
            controls=("none",),
            strata=strata,
        )
    with pytest.raises(ValueError, match=r"strata has 3 rows but y has 200"):
        controlled_evaluation(
            y,
            groups,
            scores,
            weights=None,
            group_labels=["a", "b"],
            n_resamples=5,
            seed=0,
            controls=("none",),
            resampling="within_group",
            strata=strata[:3],
        )
    # With the subgroups as strata the result equals the default within_group scheme.
    a = controlled_evaluation(
        y,
        groups,
        scores,
        weights=None,
        group_labels=["a", "b"],
        n_resamples=20,
        seed=0,
        controls=("none",),
        resampling="within_group",
    )
    b = controlled_evaluation(
        y,
        groups,
        scores,
        weights=None,
        group_labels=["a", "b"],
        n_resamples=20,
        seed=0,
        controls=("none",),
        resampling="within_group",
        strata=groups,
    )
    pd.testing.assert_frame_equal(a, b)
