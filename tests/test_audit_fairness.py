"""The fairness summary equals fairlearn's and Aequitas' numbers, with paired intervals.

fairlearn 0.15 is installed (test extra): its ``demographic_parity_difference`` / ``_ratio`` and
``equalized_odds_difference`` / ``_ratio`` are the reference of the family statistics. Aequitas is not
installed; its disparity ratios are written out here from its definitions (``pprev``: the share of
the group predicted positive; ``fpr``, ``fnr``; each divided by the reference group's value).

Unweighted point estimates are compared with ``==``: every rate is a ratio of integer counts held
exactly in float64, and the audit and the peers divide the same two numbers. Weighted ones agree to
1e-12 (the weighted sums are added in a different order).
"""

from __future__ import annotations

import fairlearn.metrics as fairlearn_metrics  # the test extra installs it: a missing peer fails, never skips
import numpy as np
import pandas as pd
import pytest

FAST = dict(n_resamples=200, n_permutations=0)
METRICS = ["false_positive_rate", "false_negative_rate", "sensitivity", "predicted_positive_rate", "accuracy"]


def synthetic(n: int = 3000, seed: int = 3, tiny: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = pd.DataFrame({
        "group": rng.choice(["A", "B", "C"], n, p=[0.5, 0.3, 0.2]),
        "sex": rng.choice(["F", "M"], n, p=[0.45, 0.55]),
    })  # fmt: skip
    if tiny:
        data.loc[:11, "group"] = "D"  # 12 rows: withheld by min_group_size 30
    x = rng.normal(size=n) + 0.6 * (data["group"] == "B") - 0.3 * (data["sex"] == "F")
    data["y"] = rng.binomial(1, 1 / (1 + np.exp(-x)))
    data["score"] = 1 / (1 + np.exp(-(x + rng.normal(0, 0.8, n) + 0.4 * (data["group"] == "C"))))
    data["w"] = rng.uniform(0.5, 2.0, n)
    return data


def row(table: pd.DataFrame, **where) -> pd.Series:
    mask = np.ones(len(table), dtype=bool)
    for key, value in where.items():
        mask &= (table[key] == value).to_numpy()
    assert mask.sum() == 1, where
    return table[mask].iloc[0]


@pytest.fixture(scope="module")
def data():
    return synthetic()


@pytest.fixture(scope="module")
def result(data):
    from disaggregated_eval.audit import audit

    return audit(data, label="y", scores=["score"], groups=["group", "sex"], metrics=METRICS, **FAST)


def _peers(frame: pd.DataFrame, features, weight=None) -> dict[str, float]:
    y, pred = frame["y"], (frame["score"] >= 0.5).astype(int)
    kw = dict(sensitive_features=features, sample_weight=weight)
    return {
        "demographic_parity_difference": fairlearn_metrics.demographic_parity_difference(y, pred, **kw),
        "demographic_parity_ratio": fairlearn_metrics.demographic_parity_ratio(y, pred, **kw),
        "equalized_odds_difference": fairlearn_metrics.equalized_odds_difference(y, pred, **kw),
        "equalized_odds_ratio": fairlearn_metrics.equalized_odds_ratio(y, pred, **kw),
    }


@pytest.mark.parametrize("family", ["group", "sex", "group & sex"])
def test_family_statistics_equal_fairlearn_exactly(data, result, family):
    columns = family.split(" & ")
    features = data[columns[0]] if len(columns) == 1 else data[columns]
    for statistic, expected in _peers(data, features).items():
        got = row(result.fairness, attribute=family, statistic=statistic)
        assert got["estimate"] == expected, (family, statistic, got["estimate"], expected)
        assert got["reported"] and got["ci_low"] <= got["estimate"] <= got["ci_high"], (family, statistic)


def aequitas_disparities(frame: pd.DataFrame, attribute: str, reference: str) -> pd.DataFrame:
    """Aequitas' definitions, written out: pprev = PP / n, fpr = FP / (FP + TN), fnr = FN / (FN + TP),
    each group's value over the reference group's."""
    pred = frame["score"] >= 0.5
    y = frame["y"] == 1
    counts = pd.DataFrame({
        "n": frame.groupby(attribute).size(),
        "pp": pred.groupby(frame[attribute]).sum(),
        "fp": (pred & ~y).groupby(frame[attribute]).sum(),
        "tn": (~pred & ~y).groupby(frame[attribute]).sum(),
        "fn": (~pred & y).groupby(frame[attribute]).sum(),
        "tp": (pred & y).groupby(frame[attribute]).sum(),
    }).astype(float)  # fmt: skip
    rates = pd.DataFrame({
        "predicted_positive_rate": counts["pp"] / counts["n"],
        "false_positive_rate": counts["fp"] / (counts["fp"] + counts["tn"]),
        "false_negative_rate": counts["fn"] / (counts["fn"] + counts["tp"]),
    })  # fmt: skip
    return rates / rates.loc[reference]


def test_disparity_ratios_equal_aequitas_with_the_largest_slice_as_reference(data, result):
    expected = aequitas_disparities(data, "group", "A")  # A is the largest group (half of the rows)
    rows = result.fairness[
        (result.fairness["statistic"] == "disparity_ratio") & (result.fairness["attribute"] == "group")
    ]
    assert set(rows["reference"]) == {"group=A"}
    assert len(rows) == 2 * 3  # B and C, three rates each
    for r in rows.itertuples():
        level = r.slice.split("=")[1]
        assert r.estimate == expected.loc[level, r.metric], (r.slice, r.metric)
        band = not 0.8 <= r.estimate <= 1.25
        assert r.disparity == band  # the four-fifths rule (Aequitas' default threshold 0.8)
        assert r.interval_outside == (r.ci_low > 1.25 or r.ci_high < 0.8)


def test_a_reference_given_by_name_and_for_an_intersection(data):
    from disaggregated_eval.audit import audit

    result = audit(data, label="y", scores=["score"], groups=["group", "sex"], metrics=METRICS,
                   reference=["group=C", "sex=M & group=B"], **FAST)  # fmt: skip
    assert result.options.reference == ["group=C", "group=B & sex=M"]  # written as the audit names slices
    expected = aequitas_disparities(data, "group", "C")
    rows = result.fairness[
        (result.fairness["statistic"] == "disparity_ratio") & (result.fairness["attribute"] == "group")
    ]
    assert set(rows["reference"]) == {"group=C"}
    for r in rows.itertuples():
        assert r.estimate == expected.loc[r.slice.split("=")[1], r.metric]
    cells = result.fairness[(result.fairness["statistic"] == "disparity_ratio")
                            & (result.fairness["attribute"] == "group & sex")]  # fmt: skip
    assert set(cells["reference"]) == {"group=B & sex=M"} and len(cells) == 3 * 5


@pytest.mark.parametrize(
    "reference, message",
    [
        (["race=A"], "not <attribute>=<level> with an attribute among the group columns"),
        (["group=A", "group=B"], "two slices of the family 'group'"),
        (["group=A & group=B"], "names the attribute 'group' twice"),
    ],
)
def test_bad_references_are_refused_before_any_work(data, reference, message):
    from disaggregated_eval.audit import AuditInputError, audit

    with pytest.raises(AuditInputError, match=message):
        audit(data, label="y", scores=["score"], groups=["group", "sex"], reference=reference, **FAST)


def test_a_reference_level_that_does_not_exist_is_refused_before_any_work(data):
    from disaggregated_eval.audit import AuditInputError, audit

    stages = []
    with pytest.raises(AuditInputError, match=r"reference 'group=Z': 'Z' is not a level of 'group'; its levels are "
                                              r"\['A', 'B', 'C'\]"):  # fmt: skip
        audit(data, label="y", scores=["score"], groups=["group"], reference=["group=Z"], metrics=METRICS,
              progress=lambda *args: stages.append(args), **FAST)  # fmt: skip
    assert stages == []  # no bootstrap, no test, nothing started


def test_weighted_statistics_equal_fairlearn_with_sample_weight(data):
    from disaggregated_eval.audit import audit

    result = audit(data, label="y", scores=["score"], groups=["group"], metrics=METRICS, sample_weight="w", **FAST)
    for statistic, expected in _peers(data, data["group"], data["w"]).items():
        got = row(result.fairness, attribute="group", statistic=statistic)["estimate"]
        assert got == pytest.approx(expected, abs=1e-12), statistic  # summation order only


def test_withheld_slices_take_no_part_and_missing_metrics_get_their_own_bootstrap():
    from disaggregated_eval.audit import audit

    data = synthetic(tiny=True)
    # only accuracy asked for: the fairness rates are bootstrapped for the summary, with a note
    result = audit(data, label="y", scores=["score"], groups=["group"], metrics=["accuracy"], **FAST)
    assert any(
        note.startswith("fairness summary: predicted_positive_rate, false_positive_rate") for note in result.notes
    )
    reported = data[data["group"] != "D"]  # group D has 12 rows < min_group_size 30
    for statistic, expected in _peers(reported, reported["group"]).items():
        got = row(result.fairness, attribute="group", statistic=statistic)
        assert got["estimate"] == expected and got["members"] == 3, statistic
    d = result.fairness[(result.fairness["slice"] == "group=D") & (result.fairness["statistic"] == "disparity_ratio")]
    assert len(d) == 3 and not d["reported"].any() and d["estimate"].isna().all()
    assert d["reason"].str.startswith("slice: slice has 12 rows < min_group_size 30").all()
    gap = row(result.fairness, attribute="group", statistic="largest_gap")
    assert gap["metric"] == "accuracy"  # the headline metric
    accuracy = reported.assign(ok=(reported["score"] >= 0.5) == (reported["y"] == 1)).groupby("group")["ok"].mean()
    assert gap["estimate"] == accuracy.max() - accuracy.min()
    assert gap["slice"] == f"group={accuracy.idxmax()}" and gap["reference"] == f"group={accuracy.idxmin()}"


def test_intervals_are_percentiles_of_the_statistic_on_each_resample():
    # fairness_table on known replicates: the interval of the demographic-parity difference is the
    # percentile interval of (max - min over the family) resample by resample, not a combination of the
    # slices' own intervals; the equalized-odds difference takes the larger gap on each resample.
    from disaggregated_eval.audit.fairness import MetricSource, fairness_table
    from disaggregated_eval.audit.slices import Attribute, plan_slices
    from disaggregated_eval.derived import Replicated

    codes = np.array([0, 0, 1, 1, 2, 2])
    plan = plan_slices([Attribute("g", ("a", "b", "c"), codes)], intersections=1)  # overall, g=a, g=b, g=c
    rng = np.random.default_rng(0)
    sources = {}
    for metric in ("predicted_positive_rate", "sensitivity", "false_positive_rate", "false_negative_rate"):
        point = rng.uniform(0.2, 0.8, 4)
        reps = point + rng.normal(0, 0.05, (500, 4))
        sources[metric] = MetricSource(Replicated(point, reps), np.arange(4), np.ones(4, bool), np.full(4, "", object))
    table = fairness_table(plan, [sources], ["m"], headline=[None], references={}, confidence=0.9)
    reps = sources["predicted_positive_rate"].values.replicates[:, 1:]
    dp = row(table, statistic="demographic_parity_difference")
    expected = np.percentile(reps.max(1) - reps.min(1), [5, 95])
    assert [dp["ci_low"], dp["ci_high"]] == pytest.approx(expected, abs=1e-12)
    tpr, fpr = (sources[k].values.replicates[:, 1:] for k in ("sensitivity", "false_positive_rate"))
    eo = row(table, statistic="equalized_odds_difference")
    both = np.maximum(tpr.max(1) - tpr.min(1), fpr.max(1) - fpr.min(1))
    assert [eo["ci_low"], eo["ci_high"]] == pytest.approx(np.percentile(both, [5, 95]), abs=1e-12)
    ratio = row(table, statistic="equalized_odds_ratio")
    low = np.minimum(tpr.min(1) / tpr.max(1), fpr.min(1) / fpr.max(1))
    assert [ratio["ci_low"], ratio["ci_high"]] == pytest.approx(np.percentile(low, [5, 95]), abs=1e-12)
