"""The audit engine: slices, metrics per slice, minimum sizes, bootstrap replicates, comparisons,
permutation p-values, multiple-comparison adjustment, simultaneous bands, reproducibility.

Tolerances:
- point estimates vs scikit-learn: 1e-12. Both are ratios of sums of a few hundred float64 terms of
  order 1 (rounding ~1e-15); complements' AUC goes through N(C) = N(all) - X1 - Wp Wn(s) + X2 + N(s),
  a few more roundings of sums of order n^2 = 1e5, still ~1e-14 relative.
- replicates vs compute_metrics on explicitly resampled rows: 1e-10. The kernel multiplies a weight by
  its count where the reference adds the weight count times, and it forms TP = Wp - FN; both agree up
  to a few ulps of the totals (~1e-14). 1e-10 still catches any wrong count, tie or weight, which
  moves a value by at least ~1e-3 at these sizes.
- permutation p-values vs a brute-force loop on the same permutations: exact (integer counts); the
  brute force recomputes each permuted split with compute_metrics.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import (
    accuracy_score,
    balanced_accuracy_score,
    brier_score_loss,
    log_loss,
    precision_score,
    recall_score,
    roc_auc_score,
)
from statsmodels.stats.multitest import multipletests

from disaggregated_eval import seeds, vocabulary
from disaggregated_eval.audit import AuditInputError, AuditOptions, AuditResult, audit
from disaggregated_eval.audit.columns import (
    COMPARISON_COLUMNS,
    CONTROLLED_COLUMNS,
    SLICE_COLUMNS,
    WEIGHTED_SLICE_COLUMNS,
    table_columns,
)
from disaggregated_eval.audit.estimates import estimate_all
from disaggregated_eval.audit.slices import Attribute, plan_slices
from disaggregated_eval.engine import metric_slots, resample_counts
from disaggregated_eval.intervals import percentile_interval
from disaggregated_eval.metrics import METRICS, compute_metrics

POINT_TOL = 1e-12
REPLICATE_TOL = 1e-10
FAST = dict(n_resamples=50, n_permutations=0)


def _slice_bootstrap(plan, y, scores, w, *, n_resamples, seed, strata=None, n_threads=1):
    """Point estimates and replicates of every slice (side 0) and rest (side 1) of every model, from the
    audit's one bootstrap (``estimate_all``): arrays (n_models, n_slices, 2, n_metrics) and
    (n_resamples, n_models, n_slices, 2, n_metrics), NaN for the (empty) rest of overall."""
    est = estimate_all(
        plan, y, scores, w, [], metrics=METRICS, slots=metric_slots(METRICS), threshold=0.5, odds=1.0,
        n_resamples=n_resamples, seed=seed, strata=strata, n_threads=n_threads,
    )  # fmt: skip
    rows = est.slice_rows
    point = est.point[np.maximum(rows, 0)]
    point[rows < 0] = np.nan
    reps = est.replicates[:, np.maximum(rows, 0), :]
    reps[:, rows < 0] = np.nan
    return point, reps


def _frame(n=500, seed=0, weights=False):
    """Two attributes (3 and 2 levels, one cell rare), two models (one heavily tied), optional weights."""
    rng = np.random.default_rng(seed)
    race = rng.choice(["Asian", "Black", "White"], n, p=[0.15, 0.3, 0.55])
    sex = rng.choice(["F", "M"], n)
    y = rng.binomial(1, np.where(race == "Black", 0.45, 0.3))
    p = np.clip(0.35 * y + 0.65 * rng.random(n), 0, 1)
    df = pd.DataFrame(
        {
            "race": race,
            "sex": sex,
            "y": y,
            "p": p,
            "q": np.round(np.clip(0.2 * y + 0.8 * rng.random(n), 0, 1), 1),  # heavy ties, some at 0.5
        }
    )
    if weights:
        df["w"] = rng.gamma(2.0, 1.0, n)
    return df


def _sk(y, r, w, metric, threshold=0.5, t=0.5):
    """scikit-learn's value of each metric (sample weights)."""
    yhat = (r >= threshold).astype(int)
    if metric == "log_loss":
        return log_loss(y, r, sample_weight=w, labels=[0, 1])
    if metric == "auc":
        return roc_auc_score(y, r, sample_weight=w)
    if metric == "sensitivity":
        return recall_score(y, yhat, sample_weight=w)
    if metric == "specificity":
        return recall_score(y, yhat, pos_label=0, sample_weight=w)
    if metric == "precision":
        return precision_score(y, yhat, sample_weight=w, zero_division=0)
    if metric == "net_benefit":
        tp = np.sum(w * y * yhat)
        fp = np.sum(w * (1 - y) * yhat)
        return (tp - fp * t / (1 - t)) / np.sum(w)
    if metric == "label_rate":
        return np.average(y, weights=w)
    if metric == "predicted_positive_rate":
        return np.average(yhat, weights=w)
    if metric == "accuracy":
        return accuracy_score(y, yhat, sample_weight=w)
    if metric == "false_positive_rate":
        return 1 - recall_score(y, yhat, pos_label=0, sample_weight=w)
    if metric == "false_negative_rate":
        return 1 - recall_score(y, yhat, sample_weight=w)
    if metric == "mean_predicted_risk":
        return np.average(r, weights=w)
    if metric == "observed_expected_ratio":
        return np.sum(w * y) / np.sum(w * r)
    if metric == "balanced_accuracy":
        return balanced_accuracy_score(y, yhat, sample_weight=w)
    assert metric == "brier_score"
    return brier_score_loss(y, r, sample_weight=w)


def _mask(df, slice_name):
    if slice_name == "overall":
        return np.ones(len(df), dtype=bool)
    mask = np.ones(len(df), dtype=bool)
    for term in slice_name.split(" & "):
        column, level = term.split("=", 1)
        mask &= df[column].astype(str).to_numpy() == level
    return mask


# ----------------------------------------------------------------------------------------------
# Slices
# ----------------------------------------------------------------------------------------------


def test_slice_enumeration_names_and_order():
    df = _frame()
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], **FAST)
    assert isinstance(res, AuditResult)
    names = list(dict.fromkeys(res.slices["slice"]))
    assert names == [
        "overall",
        "race=Asian",
        "race=Black",
        "race=White",
        "sex=F",
        "sex=M",
        "race=Asian & sex=F",
        "race=Asian & sex=M",
        "race=Black & sex=F",
        "race=Black & sex=M",
        "race=White & sex=F",
        "race=White & sex=M",
    ]
    attrs = res.slices.drop_duplicates("slice").set_index("slice")["attribute"]
    assert attrs["overall"] == "overall" and attrs["sex=F"] == "sex" and attrs["race=Black & sex=M"] == "race & sex"
    # the fixed columns, with one column per attribute right after slice
    assert list(res.slices.columns) == table_columns(SLICE_COLUMNS, ["race", "sex"])
    assert list(res.comparisons.columns) == table_columns(COMPARISON_COLUMNS, ["race", "sex"])
    assert list(res.controlled.columns) == table_columns(CONTROLLED_COLUMNS, ["race", "sex"])
    # counts are the unweighted row counts of each slice
    first = res.slices.drop_duplicates("slice").set_index("slice")
    for name in names:
        mask = _mask(df, name)
        assert first.loc[name, "n"] == mask.sum()
        assert first.loc[name, "n_pos"] == df["y"][mask].sum()
        assert first.loc[name, "n_neg"] == (1 - df["y"][mask]).sum()
        assert first.loc[name, "n_predicted_pos"] == (df["p"][mask] >= 0.5).sum()
    # intersections=1: no intersection; the order given is kept
    one = audit(df, label="y", scores=["p"], groups=["sex", "race"], intersections=1, **FAST)
    assert list(dict.fromkeys(one.slices["slice"])) == [
        "overall",
        "sex=F",
        "sex=M",
        "race=Asian",
        "race=Black",
        "race=White",
    ]
    assert one.options.intersections == 1 and res.options.intersections == 2


def test_empty_and_single_row_slices_are_listed():
    df = _frame(n=300)
    df.loc[df.index[:1], ["race", "sex"]] = ["Other", "F"]  # one row; race=Other & sex=M has none
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], **FAST)
    counts = res.slices.drop_duplicates("slice").set_index("slice")["n"]
    assert counts["race=Other"] == 1 and counts["race=Other & sex=F"] == 1
    assert counts["race=Other & sex=M"] == 0
    empty = res.slices[res.slices["slice"] == "race=Other & sex=M"]
    assert len(empty) == len(vocabulary.AUDIT_METRICS)
    assert not empty["reported"].any() and empty["estimate"].isna().all()
    assert (empty["reason"] == "slice has 0 rows < min_group_size 30").all()
    # a 0-row slice has no replicate at all: every one is undefined
    assert (empty["n_undefined"] == 50).all()


def test_three_attributes_all_crossings():
    rng = np.random.default_rng(3)
    df = _frame(n=400)
    df["age"] = rng.choice(["young", "old"], len(df))
    res = audit(df, label="y", scores=["p"], groups=["race", "sex", "age"], **FAST)
    families = list(dict.fromkeys(res.slices["attribute"]))
    assert families == ["overall", "race", "sex", "age", "race & sex", "race & age", "sex & age", "race & sex & age"]
    assert res.slices["slice"].nunique() == 1 + 3 + 2 + 2 + 6 + 6 + 4 + 12
    assert "race=White & sex=M & age=old" in set(res.slices["slice"])
    two = audit(df, label="y", scores=["p"], groups=["race", "sex", "age"], intersections=2, **FAST)
    assert "race & sex & age" not in set(two.slices["attribute"])


# ----------------------------------------------------------------------------------------------
# Metrics against scikit-learn, slices and complements
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("weights", [False, True])
def test_every_metric_equals_scikit_learn_on_every_slice(weights):
    df = _frame(weights=weights)
    res = audit(
        df,
        label="y",
        scores=["p", "q"],
        groups=["race", "sex"],
        sample_weight="w" if weights else None,
        metrics=list(METRICS),  # the default list and the others (balanced accuracy)
        min_group_size=0,
        min_denominator=0,
        **FAST,
    )
    w_all = df["w"].to_numpy() if weights else np.ones(len(df))
    checked = 0
    for row in res.slices.itertuples():
        mask = _mask(df, row.slice)
        y, r, w = df["y"].to_numpy()[mask], df[row.model].to_numpy()[mask], w_all[mask]
        if len(np.unique(y)) < 2 and row.metric in (
            "auc",
            "sensitivity",
            "specificity",
            "false_positive_rate",
            "false_negative_rate",
            "balanced_accuracy",  # scikit-learn averages the recall of the one class there; undefined here
        ):
            continue
        assert abs(row.estimate - _sk(y, r, w, row.metric)) < POINT_TOL, (row.model, row.slice, row.metric)
        checked += 1
    assert checked == 2 * 12 * len(METRICS)  # 2 models x 12 slices x every metric


def test_complement_metrics_equal_direct_computation():
    df = _frame(weights=True)
    codes_race = pd.Categorical(df["race"]).codes.astype(np.int64)
    codes_sex = pd.Categorical(df["sex"]).codes.astype(np.int64)
    attrs = (Attribute("race", ("Asian", "Black", "White"), codes_race), Attribute("sex", ("F", "M"), codes_sex))
    plan = plan_slices(attrs, intersections=2)
    y = df["y"].to_numpy(dtype=float)
    w = df["w"].to_numpy()
    scores = [df["p"].to_numpy(), df["q"].to_numpy()]
    point, _ = _slice_bootstrap(plan, y, scores, w, n_resamples=1, seed=0)
    for m, r in enumerate(scores):
        for s in range(1, plan.n_slices):
            rest = ~plan.slice_mask(s)
            ref = compute_metrics(y[rest], r[rest], sample_weight=w[rest])
            np.testing.assert_allclose(point[m, s, 1], [ref[q] for q in METRICS], rtol=0, atol=POINT_TOL)
    # the overall slice has no rest: every metric is undefined
    assert np.isnan(point[:, 0, 1]).all()


@pytest.mark.parametrize("strata", [False, True])
def test_bootstrap_replicates_equal_direct_computation(strata):
    """Replicates of the slice kernel = compute_metrics on the same resample (resample_counts)."""
    df = _frame(n=240, weights=True)
    attrs = (
        Attribute("race", ("Asian", "Black", "White"), pd.Categorical(df["race"]).codes.astype(np.int64)),
        Attribute("sex", ("F", "M"), pd.Categorical(df["sex"]).codes.astype(np.int64)),
    )
    plan = plan_slices(attrs, intersections=2)
    y = df["y"].to_numpy(dtype=float)
    w = df["w"].to_numpy()
    scores = [df["p"].to_numpy(), df["q"].to_numpy()]
    seed = seeds.seed_sequence(7, "audit", "bootstrap")
    cells = plan.cell_codes if strata else None
    _, replicates = _slice_bootstrap(plan, y, scores, w, n_resamples=6, seed=seed, strata=cells, n_threads=2)
    counts = resample_counts(len(y), seed=seed, start=0, stop=6, strata=cells)
    for i in range(6):
        for m, r in enumerate(scores):
            for s in range(plan.n_slices):
                inside = plan.slice_mask(s)
                for side, mask in ((0, inside), (1, ~inside)):
                    ref = compute_metrics(y, r, sample_weight=w * counts[i] * mask)
                    expected = np.array([ref[q] for q in METRICS])
                    got = replicates[i, m, s, side]
                    assert np.array_equal(np.isnan(expected), np.isnan(got))
                    np.testing.assert_allclose(got, expected, rtol=0, atol=REPLICATE_TOL)
    if strata:  # within_group keeps every slice's size fixed
        for i in range(6):
            for s in range(plan.n_slices):
                assert counts[i][plan.slice_mask(s)].sum() == plan.slice_mask(s).sum()


def test_audit_paired_intervals_use_the_library_resamples():
    """The percentile intervals of paired differences (here T_a = slice - overall with V = none) are
    percentiles over compute_metrics on resample_counts' resamples of the rows in the order of the
    first model's score (stable), seed path ("audit", "bootstrap"). The scores are continuous, so every
    row is its own unit (engine.units) and the resamples are the row draws."""
    df = _frame(n=200)
    res = audit(
        df,
        label="y",
        scores=["p"],
        groups=["race"],
        n_resamples=40,
        n_permutations=0,
        seed=11,
        min_group_size=0,
        min_denominator=0,
    )
    order = np.argsort(df["p"].to_numpy(), kind="stable")
    y = df["y"].to_numpy(dtype=float)[order]
    r = df["p"].to_numpy()[order]
    black = (df["race"].to_numpy() == "Black")[order]
    counts = resample_counts(len(y), seed=seeds.seed_sequence(11, "audit", "bootstrap"), start=0, stop=40)
    reps = np.array(
        [
            compute_metrics(y, r, sample_weight=c * black)["auc"] - compute_metrics(y, r, sample_weight=c)["auc"]
            for c in counts
        ]
    )
    low, high, _ = percentile_interval(reps)
    row = res.controlled.query("slice == 'race=Black' and metric == 'auc' and control == 'none'").iloc[0]
    assert abs(row.T_a_low - low) < REPLICATE_TOL and abs(row.T_a_high - high) < REPLICATE_TOL


# ----------------------------------------------------------------------------------------------
# Minimum sizes
# ----------------------------------------------------------------------------------------------


def _sized(n_small, n_small_neg, seed=0):
    """A frame whose level 'small' of attribute g has n_small rows, n_small_neg of them negative."""
    rng = np.random.default_rng(seed)
    n_big = 400
    y_small = np.r_[np.zeros(n_small_neg), np.ones(n_small - n_small_neg)]
    y = np.r_[rng.binomial(1, 0.4, n_big), y_small]
    g = np.r_[np.full(n_big, "big"), np.full(n_small, "small")]
    p = np.clip(0.3 * y + 0.7 * rng.random(y.size), 0, 1)
    return pd.DataFrame({"y": y.astype(int), "p": p, "g": g})


def test_slice_of_26_rows_is_withheld_at_the_default():
    res = audit(_sized(26, 13), label="y", scores=["p"], groups=["g"], **FAST)
    small = res.slices[res.slices["slice"] == "g=small"]
    assert not small["reported"].any()
    assert small["estimate"].isna().all()
    assert (small["reason"] == "slice has 26 rows < min_group_size 30").all()
    assert small["ci_low"].notna().all() and small["ci_high"].notna().all()  # the interval is still given
    assert res.slices[res.slices["slice"] == "g=big"]["reported"].all()


def test_slice_of_36_rows_with_15_negatives_is_reported():
    df = _sized(36, 15)
    res = audit(df, label="y", scores=["p"], groups=["g"], **FAST)
    small = res.slices[res.slices["slice"] == "g=small"].set_index("metric")
    assert small.loc["specificity", "n_neg"] == 15
    mask = df["g"] == "small"
    yhat = (df["p"][mask] >= 0.5).astype(int)
    n_pp = int(yhat.sum())
    for metric, row in small.iterrows():
        if metric == "precision" and n_pp < 10:
            assert not row.reported and row.reason == f"{n_pp} predicted positives < min_denominator 10"
        else:
            assert row.reported and row.reason == "", metric
    assert abs(small.loc["specificity", "estimate"] - recall_score(df["y"][mask], yhat, pos_label=0)) < POINT_TOL


def test_each_metric_checks_its_own_denominator():
    df = _sized(40, 8)  # 40 rows, 8 negatives, 32 positives
    res = audit(df, label="y", scores=["p"], groups=["g"], **FAST)
    small = res.slices[res.slices["slice"] == "g=small"].set_index("metric")
    for metric in ("specificity", "false_positive_rate"):
        assert not small.loc[metric, "reported"]
        assert small.loc[metric, "reason"] == "8 negatives < min_denominator 10"
    assert small.loc["auc", "reason"] == "8 negatives (the smaller class) < min_denominator 10"
    for metric in ("sensitivity", "false_negative_rate", "accuracy", "log_loss", "label_rate"):
        assert small.loc[metric, "reported"], metric
    # a comparison with a withheld term is withheld too, and left out of the adjustment family
    cmp = res.comparisons.query("slice == 'g=small' and metric == 'specificity'")
    assert not cmp["reported"].any() and cmp["difference"].isna().all() and cmp["ci_low"].notna().all()
    assert cmp["reason"].str.contains("8 negatives < min_denominator 10").all()
    loose = audit(df, label="y", scores=["p"], groups=["g"], min_denominator=5, **FAST)
    assert loose.slices.query("slice == 'g=small' and metric == 'specificity'")["reported"].all()


# ----------------------------------------------------------------------------------------------
# Comparisons, permutation tests, adjustment, bands
# ----------------------------------------------------------------------------------------------


def test_comparison_differences_and_kinds():
    df = _frame()
    res = audit(df, label="y", scores=["p", "q"], groups=["race", "sex"], min_group_size=0, min_denominator=0, **FAST)
    c = res.comparisons
    est = res.slices.set_index(["model", "slice", "metric"])["estimate"]
    row = c.query("model == 'p' and kind == 'vs_overall' and slice == 'race=Black' and metric == 'auc'").iloc[0]
    assert row.reference == "overall"
    assert abs(row.difference - (est["p", "race=Black", "auc"] - est["p", "overall", "auc"])) < POINT_TOL
    row = c.query("model == 'p' and kind == 'vs_rest' and slice == 'race=Black' and metric == 'accuracy'").iloc[0]
    rest = df["race"] != "Black"
    ref = accuracy_score(df["y"][rest], (df["p"][rest] >= 0.5).astype(int))
    assert abs(row.difference - (est["p", "race=Black", "accuracy"] - ref)) < POINT_TOL
    pairs = c.query("model == 'p' and kind == 'pairwise' and metric == 'auc'")
    # pairs within race (3), sex (1) and the 6 cells of race & sex (15); never across families
    assert len(pairs) == 3 + 1 + 15
    assert set(zip(pairs.slice, pairs.reference)) >= {("race=Asian", "race=Black"), ("sex=F", "sex=M")}
    assert not ((pairs.slice == "race=Asian") & (pairs.reference == "sex=F")).any()
    vs_model = c.query("kind == 'vs_model' and metric == 'auc'")
    assert set(vs_model["model"]) == {"q"} and set(vs_model["reference"]) == {"p"}
    row = vs_model[vs_model["slice"] == "sex=F"].iloc[0]
    assert abs(row.difference - (est["q", "sex=F", "auc"] - est["p", "sex=F", "auc"])) < POINT_TOL
    assert vs_model["p_value"].isna().all()
    # paired intervals bracket the difference here (all slices are large enough)
    assert ((c["ci_low"] <= c["difference"] + 1e-12) | c["difference"].isna()).mean() > 0.95


def test_holm_and_benjamini_hochberg_equal_statsmodels():
    # Without a tolerance (no certification hypotheses) the families' adjusted p-values are statsmodels' Holm
    # and Benjamini-Hochberg; with one, Holm's step-down counts the certifications too (next test).
    df = _frame(n=300)
    for method, sm in (("holm", "holm"), ("bh", "fdr_bh")):
        res = audit(
            df,
            label="y",
            scores=["p"],
            groups=["race", "sex"],
            n_resamples=40,
            n_permutations=400,
            adjust=method,
            tolerance=["none"],
        )
        tested = res.comparisons[res.comparisons["kind"] != "vs_model"]
        for _, family in tested.groupby(["model", "kind", "metric"]):
            inside = family["p_value"].notna()
            assert inside.sum() >= 3
            assert (family["family_size"] == inside.sum()).all()
            expected = multipletests(family.loc[inside, "p_value"].to_numpy(), method=sm)[1]
            np.testing.assert_array_equal(family.loc[inside, "p_adjusted"].to_numpy(), expected)
            assert family.loc[~inside, "p_adjusted"].isna().all()
            assert (family.loc[inside, "p_adjusted"] >= family.loc[inside, "p_value"] - 1e-15).all()
    none = audit(df, label="y", scores=["p"], groups=["race"], n_resamples=40, n_permutations=40, adjust="none")
    tested = none.comparisons[none.comparisons["kind"] != "vs_model"]
    np.testing.assert_array_equal(tested["p_adjusted"].to_numpy(), tested["p_value"].to_numpy())
    np.testing.assert_array_equal(tested["p_within_adjusted"].to_numpy(), tested["p_within"].to_numpy())


def test_with_a_tolerance_each_family_is_adjusted_with_its_certifications():
    # The default tolerance: every tested family's p_adjusted and p_within_adjusted are the partitioned Holm
    # step-down of its p_value and p_within (verdicts.partitioned_holm), and the verdicts read them at 5%.
    from disaggregated_eval.verdicts import partitioned_holm, verdict_text

    df = _frame(n=3000)
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], n_resamples=200, n_permutations=400)
    tested = res.comparisons[res.comparisons["kind"] != "vs_model"]
    assert tested["p_within"].notna().any()  # large enough slices are candidates for certification
    for _, family in tested.groupby(["model", "kind", "metric"]):
        a, b = partitioned_holm(family["p_value"].to_numpy(float), family["p_within"].to_numpy(float))
        np.testing.assert_array_equal(family["p_adjusted"].to_numpy(), a)
        np.testing.assert_array_equal(family["p_within_adjusted"].to_numpy(), b)
        for r in family[family["reported"] & (family["caveat"] == "")].itertuples():
            differs = r.p_adjusted < 0.05 if np.isfinite(r.p_adjusted) else (r.ci_low > 0 or r.ci_high < 0)
            assert r.verdict == verdict_text(bool(differs), bool(r.p_within_adjusted < 0.05)), r
    assert (res.comparisons.loc[res.comparisons["kind"] == "vs_model", "verdict"] == "").all()


def test_no_permutations_gives_no_p_values():
    res = audit(_frame(n=200), label="y", scores=["p"], groups=["race"], n_resamples=40, n_permutations=0)
    assert res.comparisons["p_value"].isna().all() and res.comparisons["p_adjusted"].isna().all()


def test_simultaneous_bands_contain_the_intervals_and_are_only_given_to_reported_slices():
    df = _frame(n=800)
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], n_resamples=400, n_permutations=0)
    s = res.slices
    banded = s.dropna(subset=["band_low"])
    assert (banded["band_low"] <= banded["ci_low"] + 1e-12).all() and (
        banded["band_high"] >= banded["ci_high"] - 1e-12
    ).all()
    # bands are wider than the intervals somewhere (several slices are covered at once)
    assert ((banded["band_high"] - banded["band_low"]) > (banded["ci_high"] - banded["ci_low"]) + 1e-9).mean() > 0.5
    # no band for a withheld slice; a band for every reported one with an interval
    assert s.loc[~s["reported"], "band_low"].isna().all()
    assert s.loc[s["reported"] & s["ci_low"].notna(), "band_low"].notna().all()


# ----------------------------------------------------------------------------------------------
# Options and inputs
# ----------------------------------------------------------------------------------------------


def test_same_options_give_bit_identical_tables():
    df = _frame(n=300, weights=True)
    kwargs = dict(
        label="y",
        scores=["p", "q"],
        groups=["race", "sex"],
        sample_weight="w",
        n_resamples=40,
        n_permutations=400,
        seed=3,
    )
    a = audit(df, **kwargs)
    b = audit(df, **kwargs, n_threads=2)
    c = audit(df, options=AuditOptions(**kwargs))
    for other in (b, c):
        for name in ("slices", "comparisons", "controlled"):
            pd.testing.assert_frame_equal(getattr(a, name), getattr(other, name), check_exact=True)
    d = audit(df, **{**kwargs, "seed": 4})
    assert not np.array_equal(a.slices["ci_low"].to_numpy(), d.slices["ci_low"].to_numpy(), equal_nan=True)


def test_hard_predictions_leave_out_score_metrics():
    df = _frame()
    df["hard"] = (df["p"] >= 0.5).astype(int)
    res = audit(df, label="y", scores=["p", "hard"], groups=["race"], **FAST)
    hard = res.slices[res.slices["model"] == "hard"]
    assert set(hard["metric"]) == set(vocabulary.AUDIT_METRICS) - set(vocabulary.SCORE_METRICS)
    assert set(res.slices[res.slices["model"] == "p"]["metric"]) == set(vocabulary.AUDIT_METRICS)
    assert any("'hard'" in note and "log_loss, auc, brier_score" in note for note in res.notes)
    assert not res.comparisons.query("model == 'hard' and metric == 'auc'").shape[0]
    # its accuracy equals the thresholded score's
    acc = res.slices.query("metric == 'accuracy' and slice == 'overall'").set_index("model")["estimate"]
    assert acc["hard"] == acc["p"]


def test_missing_group_values_form_a_level_or_are_dropped():
    df = _frame(n=300)
    df.loc[df.index[:20], "race"] = None
    res = audit(df, label="y", scores=["p"], groups=["race"], **FAST)
    counts = res.slices.drop_duplicates("slice").set_index("slice")["n"]
    assert counts["race=missing"] == 20 and res.n_rows == 300
    assert any("20 rows with a missing value form the level 'missing'" in n for n in res.notes)
    dropped = audit(df, label="y", scores=["p"], groups=["race"], missing_group="drop", **FAST)
    assert "race=missing" not in set(dropped.slices["slice"]) and dropped.n_rows == 280
    assert any("20 rows with a missing group value were dropped (race 20)" in n for n in dropped.notes)


def test_positive_label_and_categorical_level_order():
    df = _frame(n=200)
    df["label"] = np.where(df["y"] == 1, "yes", "no")
    df["sex"] = pd.Categorical(df["sex"], categories=["M", "F", "X"])
    a = audit(df, label="label", positive_label="yes", scores=["p"], groups=["sex"], **FAST)
    b = audit(df.assign(sex=df["sex"].astype(str)), label="y", scores=["p"], groups=["sex"], **FAST)
    assert list(dict.fromkeys(a.slices["slice"])) == ["overall", "sex=M", "sex=F", "sex=X"]  # declared order
    est_a = a.slices.set_index(["slice", "metric"])["estimate"]
    est_b = b.slices.set_index(["slice", "metric"])["estimate"]
    assert est_a["sex=F", "auc"] == est_b["sex=F", "auc"]
    assert a.slices.query("slice == 'sex=X'")["n"].eq(0).all()  # an unused category is listed, with 0 rows


def _bad(df, message, **kwargs):
    args = dict(label="y", scores=["p"], groups=["race"], **FAST)
    args.update(kwargs)
    with pytest.raises(AuditInputError) as info:
        audit(df, **args)
    text = str(info.value)
    for part in message if isinstance(message, (list, tuple)) else [message]:
        assert part in text, text
    return text


def test_bad_inputs_stop_with_clear_messages():
    df = _frame(n=100)
    _bad(df, ["no column(s) ['nope']", "its columns are"], scores=["nope"])
    _bad(
        df.assign(y=df["y"].where(df.index != 7, 2)),
        ["label column 'y' must hold 0/1 values", "{2}", "first at row 8", "positive_label"],
    )
    _bad(df.assign(y=df["y"].astype(float).where(df.index != 3, np.nan)), ["label column 'y'", "'nan'"])
    _bad(df.assign(p=df["p"].where(df.index != 5, 1.5)), ["score column 'p'", "[0, 1]", "{1.5}", "first at row 6"])
    _bad(df.assign(p=df["p"].where(df.index != 9, np.nan)), ["score column 'p'", "'nan'", "first at row 10"])
    _bad(df.assign(p="high"), ["score column 'p'", "non-numeric values {'high'}"])
    dropped = df.assign(race=df["race"].where(df.index != 0), f=np.where(df.index == 6, np.inf, 1.0))
    _bad(
        dropped,
        ["feature column 'f'", "{inf} in 1 row (first at row 7)"],
        controls=["X"],
        features=["f"],
        missing_group="drop",
    )  # row 1 dropped: the message counts the rows given
    _bad(
        df.assign(w=np.where(df.index == 2, -1.0, 1.0)),
        ["sample_weight column 'w'", "{-1.0}", ">= 0"],
        sample_weight="w",
    )
    _bad(df.assign(w=np.where(df.index == 4, np.nan, 1.0)), ["sample_weight column 'w'", "'nan'"], sample_weight="w")
    _bad(df.assign(race="Black"), ["group column 'race' has a single level ('Black')", "at least two"])
    dup = pd.concat([df, df[["race"]]], axis=1)
    _bad(dup, "several columns named ['race']")
    _bad(df, "column 'y' is given both as label and as groups", groups=["y"])
    _bad(df, "unknown option(s) ['n_boot']", n_boot=5)
    _bad(df, "n_resamples must be an integer in 1..1000000; got 0", n_resamples=0)
    _bad(df, "threshold must be in the open interval (0, 1); got 1.5", threshold=1.5)
    _bad(df, "unknown metric 'aucc'", metrics=["aucc"])
    _bad(df, "controls must be among", controls=["Z"])
    _bad(df, "control X needs feature columns", controls=["X"])
    _bad(df, "intersections must be an integer in 1..1; got 2", intersections=2)
    _bad(df, "resampling must be one of", resampling="stratified")
    _bad(df, "positive_label 'yes' does not occur", positive_label="yes")
    _bad(df.assign(y=np.arange(len(df)) % 3), "must be binary (two values); got 3 values", positive_label=1)
    _bad(df.assign(race=df["race"].where(df.index != 0, "a & b")), "must not contain ' & '")
    _bad(df.rename(columns={"race": "ra=ce"}), "must not contain '='", groups=["ra=ce"])
    _bad(df.iloc[:0], "data has no rows")
    with pytest.raises(AuditInputError, match="data must be a pandas DataFrame"):
        audit(df.to_numpy(), label="y", scores=["p"], groups=["race"])
    assert issubclass(AuditInputError, ValueError)


# ----------------------------------------------------------------------------------------------
# Controlled evaluation
# ----------------------------------------------------------------------------------------------


def test_controlled_none_is_slice_minus_overall():
    df = _frame(n=300)
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], **FAST)
    ctl = res.controlled
    assert set(ctl["control"]) == {"none"}
    assert set(ctl["attribute"]) == {"race", "sex", "race & sex"}
    est = res.slices.set_index(["slice", "metric"])
    cmp = res.comparisons.query("kind == 'vs_overall'").set_index(["slice", "metric"])
    for row in ctl.itertuples():
        if not row.reported:
            continue
        assert row.subgroup == est.loc[(row.slice, row.metric), "estimate"]
        assert row.M_a == est.loc[("overall", row.metric), "estimate"]
        assert row.T_a == pytest.approx(row.subgroup - row.M_a, abs=POINT_TOL)
        assert row.T_a_low == cmp.loc[(row.slice, row.metric), "ci_low"]
        assert np.isnan(row.shared_space)


@pytest.mark.slow
@pytest.mark.parametrize(("resampling", "controls"), [("population", ["none", "Y", "R"]), ("within_group", ["R"])])
def test_controlled_with_weight_models(resampling, controls):
    """Controls Y and R (tiny HGB grid): T_a = subgroup - M_a; sample-weighted; on the slices' resamples.

    With no level left out, the controlled evaluation draws the same resamples as the slices table
    (same seed and, for within_group, the same strata), so its subgroup intervals equal the slices'
    (two engines, same resamples: equal up to rounding, 1e-10).
    """
    df = _frame(n=400, weights=True)
    res = audit(
        df,
        label="y",
        scores=["p"],
        groups=["race", "sex"],
        controls=controls,
        sample_weight="w",
        resampling=resampling,
        max_leaf_nodes=[5],
        cv_folds=2,
        crossfit_folds=2,
        n_resamples=40,
        n_permutations=0,
    )
    ctl = res.controlled
    assert set(ctl["control"]) == set(controls)
    assert set(ctl["attribute"]) == {"race", "sex", "race & sex"}
    weighted = ctl[(ctl["control"] != "none") & ctl["reported"]]
    assert len(weighted) > 0
    np.testing.assert_allclose(weighted["T_a"], weighted["subgroup"] - weighted["M_a"], atol=1e-12)
    assert weighted["shared_space"].notna().any()
    slices = res.slices.set_index(["slice", "metric"])
    for row in weighted.itertuples():
        assert row.subgroup == pytest.approx(slices.loc[(row.slice, row.metric), "estimate"], abs=POINT_TOL)
        assert row.subgroup_low == pytest.approx(slices.loc[(row.slice, row.metric), "ci_low"], abs=REPLICATE_TOL)
        assert row.subgroup_high == pytest.approx(slices.loc[(row.slice, row.metric), "ci_high"], abs=REPLICATE_TOL)
    assert any("fitted without sample weights" in note for note in res.notes)


def test_controlled_leaves_out_levels_too_small_to_cross_fit():
    df = _frame(n=300)
    df.loc[df.index[:3], "race"] = "Other"  # 3 rows: too few for 2 outer folds with a 2-fold search (4)
    res = audit(
        df,
        label="y",
        scores=["p"],
        groups=["race"],
        controls=["Y"],
        max_leaf_nodes=[5],
        cv_folds=2,
        crossfit_folds=2,
        n_resamples=40,
        n_permutations=0,
    )
    assert "race=Other" not in set(res.controlled["slice"])
    assert {"race=Asian", "race=Black", "race=White"} <= set(res.controlled["slice"])
    assert any("left out race=Other (3 rows)" in note and "at least 4 rows" in note for note in res.notes)


def test_the_note_on_left_out_levels_names_the_estimator_that_ran():
    """The label and a score in tenths get cell frequencies (no grid search); a continuous score a spline
    logistic regression with its grid search; the rule of 4 rows holds for all of them (issue 36)."""
    df = _frame(n=300)
    df.loc[df.index[:3], "race"] = "Other"
    res = audit(df, label="y", scores=["p", "q"], groups=["race"], controls=["Y", "R"], max_leaf_nodes=[5],
                cv_folds=2, crossfit_folds=2, n_resamples=40, n_permutations=0)  # fmt: skip
    (note,) = [note for note in res.notes if "left out race=Other (3 rows)" in note]
    assert (
        "P(A | V) is cross-fitted in 2 folds: the cell frequency for V = Y and V = R (q) (no model is fitted, no "
        "grid search runs); a spline logistic regression for V = R (p) (with a 2-fold grid search in each fold); "
        "every level needs at least 4 rows (what a fitted weight model's 2-fold grid search needs in each fold, "
        "the same rule for every V so that all controls evaluate the same levels)"
    ) in note
    methods = set(res.controlled.loc[res.controlled["control"] == "R", "weight_method"].dropna())
    assert methods == {"cell_frequency", "spline_logistic"}


def test_controlled_x_accepts_numeric_and_string_features():
    df = _frame(n=200)
    rng = np.random.default_rng(4)
    df["age"] = rng.normal(40, 10, len(df))
    df["job"] = rng.choice(["a", "b", "c"], len(df)).astype(object)
    df.loc[df.index[:5], "job"] = None  # missing stays missing
    res = audit(
        df,
        label="y",
        scores=["p"],
        groups=["sex"],
        controls=["X"],
        features=["age", "job"],
        max_leaf_nodes=[5],
        cv_folds=2,
        crossfit_folds=2,
        n_resamples=40,
        n_permutations=0,
    )
    ctl = res.controlled
    assert set(ctl["control"]) == {"X"} and set(ctl["slice"]) == {"sex=F", "sex=M"}
    assert ctl.loc[ctl["reported"], "M_a"].notna().all()
    from disaggregated_eval.audit import inputs
    from disaggregated_eval.audit.options import resolve_options

    opts = resolve_options(None, dict(label="y", scores=["p"], groups=["sex"], controls=["X"], features=["age", "job"]))
    prepared = inputs.prepare_input(df, inputs.InputSpec.from_options(opts))
    assert prepared.categorical == ("job",)
    job = prepared.features["job"].to_numpy()
    assert np.isnan(job).sum() == 5 and set(np.unique(job[~np.isnan(job)])) == {0.0, 1.0, 2.0}


def test_too_many_replicates_are_refused_before_any_work():
    df = _frame(n=100)
    _bad(df, "n_resamples must be an integer in 1..1000000; got 100000000", n_resamples=10**8)  # the stated cap
    # Within the cap, the replicates of these slices would not fit (2 models, 2 attributes crossed, Y and R).
    _bad(df, ["GiB of replicates", "or fewer (--n-resamples "], n_resamples=10**6, scores=["p", "q"],
         groups=["race", "sex"], controls=["none", "Y", "R"])  # fmt: skip


def test_controlled_weights_follow_the_control_variable_and_report_diagnostics():
    """V = Y and a score with 10 values: cell frequencies; a continuous score: the spline logistic
    regression. Every weighted row carries its estimator, balance and effective sample size."""
    df = _frame(n=600)
    res = audit(df, label="y", scores=["p", "q"], groups=["race"], controls=["none", "Y", "R"], **FAST)
    ctl = res.controlled
    methods = ctl.groupby(["control", "model"])["weight_method"].agg(set).to_dict()
    assert methods[("Y", "p")] == methods[("Y", "q")] == {"cell_frequency"}
    assert methods[("R", "q")] == {"cell_frequency"}  # q is rounded to 0.1: 11 values at most
    assert methods[("R", "p")] == {"spline_logistic"}
    assert methods[("none", "p")] == {""}
    weighted = ctl[ctl["control"] != "none"]
    # Cross-fitted cell frequencies of Y balance Y up to the folds' sampling noise (SMD ~ 1/sqrt(n)).
    assert (weighted.loc[weighted["control"] == "Y", "balance_smd"].abs() < 0.1).all()
    assert weighted["effective_sample_size"].between(1.0, len(df)).all()
    none = ctl[ctl["control"] == "none"]
    assert none["balance_smd"].isna().all() and none["effective_sample_size"].isna().all()
    assert any("cross-fitted cell frequency over the 2 distinct value(s)" in note for note in res.notes)


def test_every_family_and_control_share_one_outer_split(monkeypatch):
    """The weights of race, sex and race x sex for V = Y and V = R (a score of 10 values) are cross-fitted on
    one split of the rows: rows alike in cell, label and score get the same weights in every fit, so the
    bootstrap merges them into at most cells x labels x scores x folds units (before: one split per fit,
    and no two rows alike)."""
    from disaggregated_eval.audit import estimates

    seen = []
    real = estimates.find_units
    monkeypatch.setattr(estimates, "find_units", lambda keys: seen.append(real(keys)) or seen[-1])
    df = _frame(n=3_000)
    df["q"] = np.round(df["p"], 1)
    res = audit(df, label="y", scores=["q"], groups=["race", "sex"], controls=["none", "Y", "R"], **FAST)
    assert set(res.controlled.loc[res.controlled["control"] != "none", "weight_method"]) == {"cell_frequency"}
    cells = df.groupby(["race", "sex"]).ngroups
    assert seen[0] is not None and len(seen[0].first) <= cells * 2 * df["q"].nunique() * 5 < len(df)


def test_controlled_weights_of_a_continuous_score_follow_its_bins_not_its_rows():
    """V = R of a continuous score on 8,000 rows: each family's spline is fitted on each level's row counts in
    at most 512 bins of the score (at most 512 x levels points for the 6,400 rows of each outer fold), and the
    notes say so; the weighted rows are reported as with a fit on the rows."""
    df = _frame(n=8_000)
    res = audit(df, label="y", scores=["p"], groups=["race", "sex"], controls=["R"], intersections=1, **FAST)
    notes = sorted(note for note in res.notes if "spline basis of V" in note)
    assert [note.split(":")[0] for note in notes] == ["weights of race, V = R (p)", "weights of sex, V = R (p)"]
    for note, levels in zip(notes, (3, 2)):
        assert "row counts in bins of V" in note and "points for 6,400 rows per outer fold" in note
        points = note.split("bins of V: ")[1].split(" points")[0]
        assert all(int(p.replace(",", "")) <= levels * 512 for p in points.split("-")), note
    ctl = res.controlled
    assert set(ctl["weight_method"]) == {"spline_logistic"} and ctl["reported"].all()


def test_controlled_differences_without_overlap_are_withheld():
    """V = X containing the attribute's own source (age for an age group): M_a is the slice's own
    metric, T_a would be 0 by construction; the rows are withheld with the reason, and noted."""
    df = _frame(n=600)
    rng = np.random.default_rng(5)
    df["age"] = rng.integers(18, 80, len(df)).astype(float)
    df["age_group"] = np.where(df["age"] < 40, "under 40", "40 and over")
    res = audit(df, label="y", scores=["p"], groups=["age_group", "sex"], controls=["X"], features=["age"], **FAST)
    ctl = res.controlled
    age = ctl[ctl["attribute"] == "age_group"]
    assert len(age) > 0 and not age["reported"].any()
    assert age["T_a"].isna().all() and age["shared_space"].isna().all()
    assert age["reason"].str.startswith("no overlap:").all()
    sex = ctl[(ctl["attribute"] == "sex") & ctl["reported"]]  # age says little about sex: overlap
    assert len(sex) > 0 and sex["T_a"].notna().all()
    assert any("weights of age_group, V = X" in n and "T_a withheld: age_group=" in n for n in res.notes)


def test_poor_balance_is_marked_in_the_summary_table():
    from disaggregated_eval.audit.terminal import controlled_table

    rows = pd.DataFrame(
        {
            "model": "p",
            "metric": "false_positive_rate",
            "slice": ["a", "b"],
            "control": "R",
            "T_a": [0.01, 0.02],
            "T_a_low": [-0.01, 0.0],
            "T_a_high": [0.03, 0.04],
            "balance_smd": [0.02, -0.25],
            "reported": [True, True],
        }
    )
    text = controlled_table(rows, model="p", metric="false_positive_rate", controls=["R"])
    lines = text.splitlines()
    assert not any(line.startswith("a") and "*" in line for line in lines)
    assert any(line.startswith("b") and line.rstrip().endswith("*") for line in lines)
    assert "* poor balance" in text


def test_control_r_of_hard_predictions_says_that_r_is_the_decision():
    df = _frame(n=400)
    df["h"] = (df["p"] >= 0.5).astype(int)
    res = audit(df, label="y", scores=["p", "h"], groups=["race"], controls=["R"], metrics=["accuracy"], **FAST)
    notes = [n for n in res.notes if "a hard 0/1 prediction, so R is the decision" in n]
    assert len(notes) == 1 and "V = R of h:" in notes[0]  # the score p is not named
    assert set(res.controlled.loc[res.controlled["model"] == "h", "weight_method"]) == {"cell_frequency"}


@pytest.mark.parametrize("intersections", [2, 3])
def test_families_summed_from_their_intersections_equal_their_own_walk(intersections, monkeypatch):
    # An attribute's levels (and, with three attributes crossed, each 2-way intersection) take every sum
    # but the AUC numerator from the cells of a finer family (estimates.family_parts, engine.walk
    # "Parts"): the same sums added in another order, so point estimates and replicates equal those of
    # walking every family in full to rounding (sample weights, a tied score, within_group strata), with
    # undefined values in the same places: race=Asian has no predicted positive under model p, so its
    # precision is undefined and its predicted positive and false positive rates exactly 0 (a total of
    # negatives from one order of additions minus its share below the threshold from another gave
    # +-1e-16 and a precision of 0 instead of NaN).
    from disaggregated_eval.audit import estimates

    rng = np.random.default_rng(5)
    df = _frame(n=600, weights=True)
    df["age"] = rng.choice(["young", "mid", "old"], len(df))
    asian = df["race"] == "Asian"
    df.loc[asian, "p"] = 0.45 * rng.random(int(asian.sum()))
    attrs = tuple(
        Attribute(c, tuple(pd.Categorical(df[c]).categories), pd.Categorical(df[c]).codes.astype(np.int64))
        for c in ("race", "sex", "age")
    )
    plan = plan_slices(attrs, intersections=intersections)
    families = plan.families[1:]
    parts = estimates.family_parts(families)
    names = [f.name for f in families]
    population = parts.pop(-1)  # the whole population's per-row terms: from the smallest maximal family
    if intersections == 3:  # everything from the cells
        assert {names[f] for f in parts} == set(names) - {"race & sex & age"}
        assert {parts[f]["parts"] for f in parts} == {names.index("race & sex & age") + 1}
        assert population["parts"] == names.index("race & sex & age") + 1
    else:  # each attribute from its smallest 2-way intersection; the 2-way ones walked in full
        assert {names[f]: names[parts[f]["parts"] - 1] for f in parts} == {
            "race": "race & sex", "sex": "race & sex", "age": "sex & age"}  # fmt: skip
        two_way = [f for f, name in enumerate(names) if "&" in name]
        assert population["parts"] - 1 == min(two_way, key=lambda f: families[f].n_slices)
    assert set(population["part_codes"]) == {0}
    y, w = df["y"].to_numpy(dtype=float), df["w"].to_numpy()
    scores = [df["p"].to_numpy(), df["q"].to_numpy()]
    run = dict(n_resamples=12, seed=seeds.seed_sequence(3, "parts"), strata=plan.cell_codes, n_threads=2)
    point, reps = _slice_bootstrap(plan, y, scores, w, **run)
    monkeypatch.setattr(estimates, "family_parts", lambda families: {})
    point_full, reps_full = _slice_bootstrap(plan, y, scores, w, **run)
    assert np.array_equal(np.isnan(point), np.isnan(point_full)) and np.array_equal(np.isnan(reps), np.isnan(reps_full))
    np.testing.assert_allclose(point, point_full, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(reps, reps_full, rtol=1e-12, atol=1e-14)
    s = plan.names.index("race=Asian")
    metric = {q: i for i, q in enumerate(METRICS)}
    assert np.isnan(point[0, s, 0, metric["precision"]])
    assert point[0, s, 0, metric["predicted_positive_rate"]] == 0.0
    assert point[0, s, 0, metric["false_positive_rate"]] == 0.0
    assert np.isnan(reps[:, 0, s, 0, metric["precision"]]).all()
    assert (reps[:, 0, s, 0, metric["predicted_positive_rate"]] == 0.0).all()


def test_a_rest_without_predicted_positives_has_an_undefined_precision():
    # A rest's sums are its universe's minus its slice's, the same rows added in two orders: under sample
    # weights "no predicted positive" came out as +-1e-17 and a precision of 0, 1 or -1 instead of NaN.
    # 300 small weighted data sets (5 rows, scores to two decimals, 3 slices): every rest's precision,
    # predicted positive rate, sensitivity and AUC equal compute_metrics on the rest's rows.
    from disaggregated_eval.engine.walk import ModelStreams, Stream, build_layout, run_kernel

    rng = np.random.default_rng(1)
    n, metrics = 5, ["precision", "predicted_positive_rate", "sensitivity", "auc", "accuracy"]
    undefined = 0
    for _ in range(300):
        y = rng.integers(0, 2, n).astype(float)
        r = np.round(rng.random(n), 2)
        w = rng.gamma(2, 1, n)
        code = rng.integers(0, 3, n)
        streams = (Stream(0), Stream(0, codes=0, n_codes=3, universe=0))
        layout = build_layout(y, [ModelStreams(r, w[:, None], code[:, None].astype(np.int32), streams)],
                              thresholds=(0.5,), terms=())  # fmt: skip
        out = np.zeros((1, layout.n_outputs, 1, len(metrics)))
        run_kernel(layout, np.ones((1, n), np.int64), from_counts=True, slots=metric_slots(metrics), odds=1.0,
                   n_threads=1, out=out)  # fmt: skip
        for k in range(3):
            got = out[0, layout.output_index[(0, 1, k, 1)], 0]
            ref = compute_metrics(y, r, sample_weight=w * (code != k), metrics=metrics)
            expected = np.array([ref[q] for q in metrics])
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)  # NaN where the reference's is
            undefined += int(np.isnan(expected[0]))
    assert undefined > 30  # the case arises often enough to be tested


def test_walk_refuses_parts_that_do_not_refine_the_stream():
    from disaggregated_eval.engine.walk import ModelStreams, Stream, build_layout

    rng = np.random.default_rng(0)
    n = 50
    fine = rng.integers(0, 4, n)
    codes = np.stack([fine // 2, fine], axis=1).astype(np.int32)
    y = rng.integers(0, 2, n).astype(float)

    def layout(part_codes):
        streams = (Stream(0), Stream(0, codes=0, n_codes=2, universe=0, parts=2, part_codes=part_codes),
                   Stream(0, codes=1, n_codes=4, universe=0))  # fmt: skip
        return build_layout(y, [ModelStreams(rng.random(n), np.ones((n, 1)), codes, streams)], thresholds=(0.5,),
                            terms=())  # fmt: skip

    layout((0, 0, 1, 1))  # the right map
    with pytest.raises(ValueError, match="do not refine"):
        layout((0, 1, 0, 1))
    with pytest.raises(ValueError, match="one of its 2 codes"):
        layout((0, 0, 1))

    # a universe takes only its per-row terms from parts, and only from a stream in it, every code to 0
    def universe(parts, part_codes, inner_universe=0):
        streams = (Stream(0, parts=parts, part_codes=part_codes), Stream(0, codes=1, n_codes=4, universe=inner_universe),
                   Stream(0))  # fmt: skip
        return build_layout(y, [ModelStreams(rng.random(n), np.ones((n, 1)), codes, streams)], thresholds=(0.5,),
                            terms=("brier",))  # fmt: skip

    assert list(universe(1, (0, 0, 0, 0)).st_derived) == [0, 2]
    with pytest.raises(ValueError, match="-1 to a code of its parts that has rows"):
        universe(1, (0, 0, -1, 0))
    with pytest.raises(ValueError, match=r"0 \(or -1\) for each code"):
        universe(1, (0, 1, 0, 0))
    with pytest.raises(ValueError, match="only as a universe"):
        universe(1, (0, 0, 0, 0), inner_universe=2)
    with pytest.raises(ValueError, match="must be a coded stream without parts in it"):
        universe(2, (0,))


def test_layout_holds_each_weight_column_once():
    # Issue 36 item 4: the walk's weight block held every weight column, and the dense (weighted-population)
    # columns again in their own block (plus a sorted copy of all of them while laying out): at 8x10^5 rows
    # with V = Y the audit peaked at 2,288 MiB. Now the coded streams' block holds only the columns coded
    # streams read; the dense streams' results are unchanged (each equals compute_metrics under its weight).
    from disaggregated_eval.engine.walk import ModelStreams, Stream, build_layout, run_kernel

    rng = np.random.default_rng(5)
    n, metrics = 400, ["precision", "sensitivity", "auc"]
    y = rng.integers(0, 2, n).astype(float)
    r = rng.random(n)
    weights = np.column_stack([np.ones(n), rng.gamma(2, 1, (n, 3))])
    code = rng.integers(0, 3, n)[:, None].astype(np.int32)
    streams = (Stream(0), Stream(0, codes=0, n_codes=3, universe=0), Stream(1), Stream(2), Stream(3))
    layout = build_layout(y, [ModelStreams(r, weights, code, streams)], thresholds=(0.5,), terms=())
    assert list(layout.w_cols) == [1] and layout.weights.size == n  # the coded streams' one column
    assert layout.dense_weights.size == 3 * n
    out = np.zeros((1, layout.n_outputs, 1, len(metrics)))
    run_kernel(layout, np.ones((1, n), np.int64), from_counts=True, slots=metric_slots(metrics), odds=1.0,
               n_threads=1, out=out)  # fmt: skip
    for s in (2, 3, 4):
        ref = compute_metrics(y, r, sample_weight=weights[:, s - 1], metrics=metrics)
        np.testing.assert_allclose(out[0, layout.output_index[(0, s, 0, 0)], 0], [ref[q] for q in metrics], rtol=1e-12)
    for k in range(3):
        ref = compute_metrics(y, r, sample_weight=(code[:, 0] == k).astype(float), metrics=metrics)
        np.testing.assert_allclose(out[0, layout.output_index[(0, 1, k, 0)], 0], [ref[q] for q in metrics], rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# Sample weights: the minimum-size rules on Kish's effective size
# ----------------------------------------------------------------------------------------------


def test_a_slice_with_one_positive_weight_is_withheld_by_its_effective_size():
    """300 rows of which one has a positive weight are worth one row: withheld (it was reported as accuracy
    1.0 [0.207, 1.0] with n 300), the effective size shown and named in the reason."""
    df = _sized(300, 150).assign(w=1.0)
    small = (df["g"] == "small").to_numpy()
    df.loc[small, "w"] = 0.0
    df.loc[np.flatnonzero(small)[0], "w"] = 3.0
    res = audit(df, label="y", scores=["p"], groups=["g"], sample_weight="w", metrics=["accuracy", "log_loss"],
                thresholds=["0.3,0.6"], **FAST)  # fmt: skip
    assert list(res.slices.columns) == table_columns(WEIGHTED_SLICE_COLUMNS, ["g"])
    rows = res.slices[res.slices["slice"] == "g=small"].set_index("metric")
    assert (rows["n"] == 300).all() and (rows["n_effective"] == 1.0).all()
    assert not rows["reported"].any() and rows["estimate"].isna().all()
    reason = "effective size 1.0 of the slice's 300 rows (Kish, sample weights) < min_group_size 30"
    assert (rows["reason"] == reason).all()
    width = rows.loc["accuracy", "ci_high"] - rows.loc["accuracy", "ci_low"]
    assert width == pytest.approx(1 - 0.2065, abs=1e-4)  # Wilson's interval of one row, still given
    big = res.slices[res.slices["slice"] == "g=big"]
    assert big["reported"].all() and (big["n_effective"] == 400).all()
    cmp = res.comparisons.query("slice == 'g=small' and kind == 'vs_overall'")
    assert not cmp["reported"].any() and cmp["reason"].str.contains(reason, regex=False).all()
    # the same rule in the calibration summary and the threshold table (a rate's own denominator: the same size)
    for table in (res.calibration_summary, res.thresholds):
        small_rows = table[table["slice"] == "g=small"]
        assert len(small_rows) and not small_rows["reported"].any()
        assert small_rows["reason"].str.startswith("effective size 1.0 of the slice's 300 rows").all()


def test_one_weighted_row_in_the_whole_file_gives_no_numpy_warning():
    """Every weight 0 but one row's, a positive: the false positive rate's denominator has no weight anywhere;
    every estimate is withheld with its reason, and numpy's "invalid value encountered in divide" does not
    reach the user (hostile trial 4, N6: it came from the detectability table's share of the denominator)."""
    df = _sized(300, 150).assign(w=0.0)
    df.loc[np.flatnonzero(df["y"] == 1)[0], "w"] = 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        res = audit(df, label="y", scores=["p"], groups=["g"], sample_weight="w", metrics=["false_positive_rate"],
                    **FAST)  # fmt: skip
    assert not res.slices["reported"].any()
    assert res.detectability["mdd_above"].isna().all()


def test_a_denominator_of_small_effective_size_is_withheld():
    """200 rows, 20 negatives, one of them of weight 10 and every other row 1: Kish's size of the negatives is
    29^2 / 119 = 7.07 < 10, of the slice 209^2 / 299 = 146.1."""
    df = _sized(200, 20).assign(w=1.0)
    negative = np.flatnonzero((df["g"] == "small").to_numpy() & (df["y"] == 0).to_numpy())
    df.loc[negative[0], "w"] = 10.0
    metrics = ["specificity", "auc", "sensitivity"]
    res = audit(df, label="y", scores=["p"], groups=["g"], sample_weight="w", metrics=metrics, **FAST)
    rows = res.slices[res.slices["slice"] == "g=small"].set_index("metric")
    assert rows.loc["specificity", "reason"] == (
        "effective size 7.1 of 20 negatives (Kish, sample weights) < min_denominator 10"
    )
    assert rows.loc["auc", "reason"] == (
        "effective size 7.1 of 20 negatives (the smaller class) (Kish, sample weights) < min_denominator 10"
    )
    assert rows.loc["sensitivity", "reported"]
    assert rows["n_effective"].iloc[0] == pytest.approx(209**2 / 299, rel=1e-12)


@pytest.mark.parametrize("weight", [1.0, 0.1, 7.3])
def test_equal_weights_leave_the_rules_and_sizes_as_without_weights(weight):
    """A slice of exactly 30 rows and 10 negatives (the minimums) with equal weights: reported, its effective
    sizes its rows up to rounding (10 weights of 0.1 give 10 - 4e-15), every reason and interval of the rates
    as without weights."""
    df = _sized(30, 10)
    plain = audit(df, label="y", scores=["p"], groups=["g"], **FAST)
    weighted = audit(df.assign(w=weight), label="y", scores=["p"], groups=["g"], sample_weight="w", **FAST)
    assert "n_effective" not in plain.slices.columns
    assert np.allclose(weighted.slices["n_effective"], weighted.slices["n"], rtol=1e-12)
    assert list(weighted.slices["reason"]) == list(plain.slices["reason"])
    assert weighted.slices.query("slice == 'g=small' and metric in ['specificity', 'accuracy']")["reported"].all()
    rates = weighted.slices["interval"] == "wilson"
    for column in ("estimate", "ci_low", "ci_high"):
        assert np.allclose(weighted.slices.loc[rates, column], plain.slices.loc[rates, column], rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# Intervals that need a note: the log loss's cap, small bootstrap slices, interval vs test
# ----------------------------------------------------------------------------------------------


def _capped_small_slice():
    """A slice of 31 rows among 2,000, one of its rows a score of exactly 0 or 1 with the other label."""
    rng = np.random.default_rng(1)
    n = 2000
    y = rng.binomial(1, 0.4, n)
    p = np.clip(0.3 * y + 0.7 * rng.random(n), 0.01, 0.99)
    p[5] = 1.0 - y[5]
    g = np.r_[np.full(31, "a"), np.full(n - 31, "b")]
    return pd.DataFrame({"g": g, "y": y, "p": p})


def test_an_interval_that_disagrees_with_its_test_has_a_note():
    """The capped row (36.04 nats) makes the 31-row slice's log loss 1.6 against 0.5; the percentile bootstrap of
    the difference reaches below 0 while the permutation test rejects. Every tested row whose interval and test
    disagree at 5% has a note, and no other row."""
    res = audit(_capped_small_slice(), label="y", scores=["p"], groups=["g"], metrics=["log_loss", "brier_score",
                "accuracy"], n_resamples=300, n_permutations=1000, seed=2)  # fmt: skip
    c = res.comparisons
    assert list(c.columns) == table_columns(COMPARISON_COLUMNS, ["g"])
    tested = c["p_value"].notna() & c["ci_low"].notna()
    excludes = (c["ci_low"] > 0) | (c["ci_high"] < 0)
    disagree = tested & (excludes != (c["p_value"] < 0.05))
    assert (c["note"] != "").tolist() == disagree.tolist()
    row = c.query("metric == 'log_loss' and slice == 'g=a' and kind == 'vs_overall'").iloc[0]
    assert row["ci_low"] < 0 < row["ci_high"] and row["p_value"] < 0.05
    assert row["note"] == (
        f"interval includes 0 but the test gives p = {row['p_value']:.2g} < 0.05 (the verdict follows the test)"
    )
    assert (c.loc[c["metric"] == "accuracy", "note"] == "").all()
    # the cap stated, and the rule beside the small slice's bootstrap intervals
    capped = [n for n in res.notes if n.startswith("log loss of p: 1 row has a score of exactly 0 or 1")]
    assert len(capped) == 1 and "each costs 36.04 nats, not infinity" in capped[0]
    small = [n for n in res.notes if n.startswith("Log loss, Brier score: the bootstrap (BCa) intervals of 1 reported")]
    assert len(small) == 1 and "under 120 rows (g=a;" in small[0]


def test_the_terminal_marks_a_small_slice_bootstrap_interval():
    res = audit(_capped_small_slice(), label="y", scores=["p"], groups=["g"], metrics=["log_loss", "accuracy"],
                n_resamples=200, n_permutations=0, seed=2)  # fmt: skip
    from disaggregated_eval.audit import terminal

    text = terminal.slice_table(res.slices, res.comparisons, model="p", metric="log_loss", width=200)
    lines = {line.split()[0]: line for line in text.splitlines()}
    assert lines["g=a"].split("]")[1].split()[0] == "~"
    assert "~" not in lines["g=b"] and "~" not in lines["overall"]
    assert "~: a bootstrap interval of a slice under 120 rows" in text
    plain = terminal.slice_table(res.slices, res.comparisons, model="p", metric="accuracy", width=200)
    assert "~" not in plain
