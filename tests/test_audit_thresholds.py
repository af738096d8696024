"""Threshold analysis: the option, the table (Wilson intervals on each threshold's counts) and its checks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportion_confint

from disaggregated_eval import seeds
from disaggregated_eval.audit.options import MAX_THRESHOLDS, parse_thresholds

FAST = dict(n_resamples=200, n_permutations=0)
RATES = ["predicted_positive_rate", "sensitivity", "false_positive_rate"]


def synthetic(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(seeds.seed_sequence(20250101, "test", "thresholds-data"))
    data = pd.DataFrame({"g": rng.choice(["a", "b", "c"], n, p=[0.5, 0.4, 0.1])})
    data["y"] = rng.binomial(1, 0.35, n)
    data["r"] = np.clip(0.35 * data["y"] + rng.uniform(0, 0.65, n) + 0.05 * (data["g"] == "b"), 0, 1)
    return data


@pytest.fixture(scope="module")
def data():
    return synthetic()


@pytest.fixture(scope="module")
def result(data):
    from disaggregated_eval.audit import audit

    return audit(data, label="y", scores=["r"], groups=["g"], metrics=RATES, thresholds=["0.2:0.8:0.1", "0.5"], **FAST)


def test_parse_values_and_grids():
    assert parse_thresholds([]).size == 0
    np.testing.assert_array_equal(parse_thresholds(["0.3", "0.1", 0.2]), [0.1, 0.2, 0.3])
    grid = parse_thresholds(["0.05:0.95:0.05"])
    assert grid.size == 19 and grid[0] == 0.05 and grid[-1] == 0.95 and 0.15 in grid  # rounded: no 0.15000000000000002
    np.testing.assert_array_equal(parse_thresholds(["0.1,0.5", "0.1:0.3:0.1"]), [0.1, 0.2, 0.3, 0.5])  # repeats merged


@pytest.mark.parametrize(
    "items, message",
    [
        (["0.5:0.1:0.1"], "needs a finite step > 0 and stop >= start"),
        (["0.1:0.5:0"], "needs a finite step > 0"),
        # issue 22, item 5: an OverflowError, a ValueError naming no option, an 80-digit count before
        (["0.1:inf:0.1"], r"thresholds item '0.1:inf:0.1': a grid's start and stop must lie in \(0, 1\).*got stop inf"),
        (
            ["nan:0.5:0.1"],
            r"thresholds item 'nan:0.5:0.1': a grid's start and stop must lie in \(0, 1\).*got start nan",
        ),
        (["0.1:0.9:inf"], r"thresholds item '0.1:0.9:inf': a grid start:stop:step needs a finite step > 0"),
        (["0.1:0.9:nan"], r"thresholds item '0.1:0.9:nan': a grid start:stop:step needs a finite step > 0"),
        (["0.1:0.9:1e-300"], r"thresholds item '0.1:0.9:1e-300' has 8e\+299 values, more than 200; give a larger step"),
        (["0.1:0.5"], "a grid is start:stop:step"),
        (["abc"], "'abc' is not a number"),
        (["0", "0.5"], r"must lie in \(0, 1\).*\[0.0\]"),
        (["1.5"], r"must lie in \(0, 1\)"),
        ([f"0.0001:0.9999:{0.9 / (MAX_THRESHOLDS + 5)}"], "more than 200"),
    ],
)
def test_bad_thresholds_name_the_item(items, message):
    with pytest.raises(ValueError, match=message):
        parse_thresholds(items)


def test_bad_thresholds_are_refused_by_the_audit_before_any_work(data):
    from disaggregated_eval.audit import AuditInputError, audit

    with pytest.raises(AuditInputError, match="needs a finite step > 0"):
        audit(data, label="y", scores=["r"], groups=["g"], thresholds=["0.9:0.1:0.1"], **FAST)
    for bad in (dict(detect_gap=0.0), dict(power=1.0), dict(calibration_bins=0)):
        with pytest.raises(AuditInputError, match=next(iter(bad))):
            audit(data, label="y", scores=["r"], groups=["g"], **bad, **FAST)


def test_the_command_line_reads_lists_and_grids():
    from disaggregated_eval.audit.cli import build_parser, command_options

    args = build_parser().parse_args(["audit", "f.csv", "--label", "y", "--score", "r", "--group", "g",
                                      "--thresholds", "0.1,0.2", "0.3:0.5:0.1", "--detect-gap", "0.05",
                                      "--reference", "g=a", "--calibration-bins", "5", "--power", "0.9"])  # fmt: skip
    _, _, options, _ = command_options(args)
    assert options["thresholds"] == ["0.1", "0.2", "0.3:0.5:0.1"]
    assert (options["detect_gap"], options["reference"], options["calibration_bins"], options["power"]) == (
        0.05, ["g=a"], 5, 0.9)  # fmt: skip


def test_at_the_audits_threshold_the_rows_are_the_slices_tables(result):
    at = result.thresholds[result.thresholds["threshold"] == 0.5]
    for metric in RATES:
        ours = at[at["metric"] == metric].reset_index(drop=True)
        theirs = result.slices[result.slices["metric"] == metric].reset_index(drop=True)
        assert list(ours["slice"]) == list(theirs["slice"])
        for column in ("estimate", "ci_low", "ci_high", "reported", "reason", "interval"):
            pd.testing.assert_series_equal(ours[column], theirs[column], check_names=False)


def test_rates_and_wilson_intervals_at_another_threshold(data, result):
    t = 0.3
    rows = result.thresholds[np.isclose(result.thresholds["threshold"], t)].set_index(["slice", "metric"])
    pred = data["r"] >= t
    for level, group in [("overall", data)] + [(f"g={g}", part) for g, part in data.groupby("g")]:
        p = pred[group.index]
        y = group["y"] == 1
        for metric, k, n in (("predicted_positive_rate", p.sum(), len(group)), ("sensitivity", (p & y).sum(), y.sum()),
                             ("false_positive_rate", (p & ~y).sum(), (~y).sum())):  # fmt: skip
            row = rows.loc[(level, metric)]
            assert row["estimate"] == k / n and row["n_denominator"] == n
            low, high = proportion_confint(k, n, alpha=0.05, method="wilson")
            assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=1e-12)
    assert sorted(result.thresholds["threshold"].unique()) == pytest.approx([0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8])
    # selection rate and TPR fall as the threshold rises
    overall = result.thresholds[(result.thresholds["slice"] == "overall")]
    for metric in ("predicted_positive_rate", "sensitivity"):
        assert overall[overall["metric"] == metric]["estimate"].is_monotonic_decreasing


def test_without_thresholds_the_table_is_empty_with_its_columns(data):
    from disaggregated_eval.audit import audit
    from disaggregated_eval.audit.columns import THRESHOLD_COLUMNS, table_columns

    result = audit(data, label="y", scores=["r"], groups=["g"], metrics=["accuracy"], **FAST)
    assert result.thresholds.empty and list(result.thresholds.columns) == table_columns(THRESHOLD_COLUMNS, ["g"])
