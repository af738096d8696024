"""The counts input (``frequency_weight``) and the counts tables of large data (``audit/aggregate.py``).

An audit of a table of counts must be the audit of the rows they stand for (``docs/method.md``,
"Frequency weights"). Where the expanded frame compresses to the same units as the counts (every
distinct row at least twice), the engine draws the same unit counts from the same seeds, so the two
audits are equal bit for bit, except the BCa bounds (their jackknife acceleration sums the same terms
in another order: equal to 1e-12) and sums of non-integer scores outside the engine (calibration
bins: 1e-15). Where it does not (continuous scores), the point estimates are equal and the resamples
are equal in distribution: checked on their spread.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest

from disaggregated_eval.audit import audit
from disaggregated_eval.audit.aggregate import (
    AggregationError,
    aggregate_dask,
    aggregate_frame,
    aggregate_parquet,
    counts_query,
)
from disaggregated_eval.audit.cli import main
from disaggregated_eval.audit.errors import AuditInputError
from disaggregated_eval.calibration import expanded_quantile
from disaggregated_eval.engine.units import find_units, units_of_counts
from disaggregated_eval.intervals import grouped_jackknife_acceleration

TABLES = ("slices", "comparisons", "controlled", "fairness", "calibration", "calibration_summary", "thresholds",
          "detectability")  # fmt: skip


def _log(n: int, seed: int, *, decimals: int | None = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    g = rng.choice(["a", "b", "c"], n)
    s = rng.choice(["f", "m"], n)
    y = (rng.random(n) < np.where(g == "a", 0.3, 0.5)).astype(int)
    r = np.clip(0.3 + 0.3 * y + 0.2 * rng.standard_normal(n), 0.0, 1.0)
    if decimals is not None:
        r = np.round(r, decimals)
    return pd.DataFrame({"y": y, "r": r, "g": g, "s": s, "w": rng.choice([0.5, 1.0, 2.0], n)})


def _expand(counts: pd.DataFrame, column: str = "n") -> pd.DataFrame:
    return counts.loc[counts.index.repeat(counts[column])].drop(columns=column).reset_index(drop=True)


def _audits(counts: pd.DataFrame, **options):
    options = dict(label="y", scores=["r"], groups=["g", "s"], n_resamples=400, n_permutations=200, seed=5,
                   thresholds=["0.3,0.6"]) | options  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rows = audit(_expand(counts), **options)
        table = audit(counts, frequency_weight="n", **options)
    return rows, table


def _close(a: pd.DataFrame, b: pd.DataFrame, *, rtol: float) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=rtol, atol=rtol)


def test_counts_equal_expanded_rows_bit_for_bit_where_units_coincide():
    """Every distinct row twice or more: the counts and the expanded frame have the same units, so the
    bootstrap, the permutations and every table are the same (BCa bounds and calibration sums to rounding)."""
    counts = _log(600, 1).drop(columns="w").groupby(["y", "r", "g", "s"], as_index=False).size()
    counts = counts.rename(columns={"size": "n"})
    counts["n"] = counts["n"] * 2  # every unit at least twice: the expanded frame compresses
    rows, table = _audits(counts)
    assert rows.n_rows == table.n_rows == int(counts["n"].sum())
    for name in ("comparisons", "fairness", "thresholds", "detectability"):
        pd.testing.assert_frame_equal(getattr(rows, name), getattr(table, name), check_exact=True)
    # point estimates exactly; BCa bounds through the jackknife's sums in another order
    pd.testing.assert_series_equal(rows.slices["estimate"], table.slices["estimate"], check_exact=True)
    percentile = rows.slices["interval"] != "bca"
    pd.testing.assert_frame_equal(rows.slices[percentile], table.slices[percentile], check_exact=True)
    for name in ("slices", "controlled", "calibration", "calibration_summary"):
        _close(getattr(rows, name), getattr(table, name), rtol=1e-12)
    assert table.notes == rows.notes


def test_counts_with_sample_weights_and_controls_equal_expanded_rows():
    """With controls Y and R the counts are expanded for the cross-fitting (folds of rows), and the audit
    is the expanded frame's, bit for bit; a row of count 0 is dropped with a note."""
    counts = _log(500, 2).groupby(["y", "r", "g", "s", "w"], as_index=False).size().rename(columns={"size": "n"})
    counts.loc[3, "n"] = 0
    rows, table = _audits(counts, controls=["none", "Y", "R"], sample_weight="w")
    for name in TABLES:
        pd.testing.assert_frame_equal(getattr(rows, name), getattr(table, name), check_exact=True)
    extra = [n for n in table.notes if n not in rows.notes]
    assert len(extra) == 2
    assert "1 row(s) with a count of 0" in extra[0]
    assert f"expanded to the {rows.n_rows} rows" in extra[1]


def test_counts_of_continuous_scores_equal_in_distribution():
    """Distinct continuous scores (most counts 1): the expanded frame does not compress, so it draws rows
    while the counts draw units. Point estimates are equal; the intervals come from other draws of the
    same distribution. 2,000 resamples: the interval widths' Monte-Carlo error is about 3% (the 2.5%
    and 97.5% quantiles of 2,000 draws), so widths within 15% of each other hold with room, while a
    bootstrap that ignored the counts (a row of count 3 drawn as one row) is off by far more on the
    slices whose rows repeat."""
    frame = _log(1500, 3, decimals=None)
    counts = frame.drop(columns="w").assign(n=np.random.default_rng(0).choice([1, 1, 1, 3], len(frame)))
    rows, table = _audits(counts, n_resamples=2000, n_permutations=0, metrics=["auc", "log_loss", "brier_score"],
                          thresholds=[])  # fmt: skip
    a, b = rows.slices, table.slices
    pd.testing.assert_series_equal(a["estimate"], b["estimate"], check_exact=False, rtol=1e-13)
    pd.testing.assert_series_equal(a["n"], b["n"])
    width_a, width_b = (a["ci_high"] - a["ci_low"]).to_numpy(), (b["ci_high"] - b["ci_low"]).to_numpy()
    bootstrap = (a["interval"] == "bca").to_numpy()
    ratio = width_b[bootstrap] / width_a[bootstrap]
    assert np.all(np.abs(ratio - 1) < 0.15), ratio
    assert not np.array_equal(width_a[bootstrap], width_b[bootstrap])  # other draws indeed


@pytest.mark.parametrize(
    ("values", "shown"),
    [
        ([1, 2.5, 3], "2.5"),
        ([1, -1, 3], "-1"),
        ([1, np.nan, 3], "nan"),
        ([1, np.inf, 3], "inf"),
        (["1", "x", "3"], "x"),
        ([0, 0, 0], "0 in every row"),
    ],
)
def test_bad_frequency_weights_are_refused_before_any_work(values, shown):
    frame = pd.DataFrame({"y": [0, 1, 1], "r": [0.2, 0.7, 0.9], "g": ["a", "b", "b"], "n": values})
    with pytest.raises(AuditInputError) as error:
        audit(frame, label="y", scores=["r"], groups=["g"], frequency_weight="n")
    message = str(error.value)
    assert "frequency_weight column 'n'" in message and shown in message


def test_row_numbers_in_messages_count_data_rows_from_1_on_every_path(tmp_path, capsys):
    """One convention (``validation.row_number``): row N is the N-th data row, the header not counted, as
    the margins file's messages count; row 5 of the CSV file is its line 6. Before, the counts' messages
    counted from 0 (hostile trials 2 and 3, C1-C9: "first at row 0" for the first data row)."""
    frame = pd.DataFrame({"y": [0, 1] * 5, "r": np.linspace(0.1, 0.9, 10), "g": ["a", "b"] * 5, "n": ["1"] * 10})
    frame.loc[4, "n"] = "½"
    csv, parquet, margins = tmp_path / "c.csv", tmp_path / "c.parquet", tmp_path / "m.csv"
    frame.to_csv(csv, index=False)
    frame.to_parquet(parquet)
    assert csv.read_text(encoding="utf-8").splitlines()[5].endswith(",½")  # line 6: the header is line 1
    common = ["--label", "y", "--score", "r", "--group", "g", "--frequency-weight", "n", "--quiet"]
    capsys.readouterr()
    assert main(["audit", str(csv), *common]) == 2
    assert "got values {'½'} in 1 row (first at row 5)" in capsys.readouterr().err
    assert main(["audit", str(parquet), "--aggregate", "yes", *common]) == 2
    assert f"got values {{'½'}} in 1 row (first at row 5 of {parquet})" in capsys.readouterr().err
    with pytest.raises(AuditInputError, match=r"got values \{'½'\} in 1 row \(first at row 5\)"):
        audit(frame, label="y", scores=["r"], groups=["g"], frequency_weight="n")
    margins.write_text("g,share\na,0.5\nb,0.25\na,0.25\n")  # the margins file's rows 1 and 3
    assert main(["audit", str(csv), *common[:6], "--population-margins", str(margins)]) == 2
    assert "gives g=a more than once (rows 1, 3)" in capsys.readouterr().err


def test_frequency_weight_option_and_roles_are_checked():
    frame = pd.DataFrame({"y": [0, 1], "r": [0.2, 0.7], "g": ["a", "b"], "n": [1, 2]})
    with pytest.raises(AuditInputError, match="frequency_weight must name a column"):
        audit(frame, label="y", scores=["r"], groups=["g"], frequency_weight=3)
    with pytest.raises(AuditInputError, match="given both as sample_weight and as frequency_weight"):
        audit(frame, label="y", scores=["r"], groups=["g"], frequency_weight="n", sample_weight="n")
    with pytest.raises(AuditInputError, match="data has no column"):
        audit(frame, label="y", scores=["r"], groups=["g"], frequency_weight="count")


def test_expanded_quantile_is_numpys_on_the_repeated_values():
    rng = np.random.default_rng(4)
    for trial in range(500):
        n = int(rng.integers(1, 25))
        values = rng.choice(rng.random(4), n) if trial % 2 else rng.random(n)
        count = rng.integers(0, 5, n)
        count[0] = max(count[0], 1)
        levels = np.linspace(0.0, 1.0, int(rng.integers(2, 12)))
        expected = np.quantile(np.repeat(values, count), levels)
        assert np.array_equal(expanded_quantile(values, count, levels), expected)


def test_units_of_counts_are_the_units_of_the_expanded_rows():
    rng = np.random.default_rng(5)
    columns = [rng.integers(0, 3, 200).astype(float), rng.integers(0, 2, 200).astype(float)]
    count = rng.integers(1, 4, 200)
    units = units_of_counts(columns, count)
    expanded = find_units([np.repeat(c, count) for c in columns])
    assert np.array_equal(units.multiplicity, expanded.multiplicity)
    for c in columns:  # the same values, in the same (lexicographic) order
        assert np.array_equal(c[units.first], np.repeat(c, count)[expanded.first])


def test_grouped_jackknife_with_multiplicities_is_that_of_the_expanded_rows():
    rng = np.random.default_rng(6)
    values, codes, count = rng.random(50), rng.integers(0, 3, 50), rng.integers(1, 5, 50)
    values[4] = np.nan
    expected = grouped_jackknife_acceleration(np.repeat(values, count), np.repeat(codes, count), 3)
    got = grouped_jackknife_acceleration(values, codes, 3, count)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# ----------------------------------------------------------------------------------------------
# Counts tables: pandas, DuckDB over Parquet (file and hive folder), the SQL recipe, Dask
# ----------------------------------------------------------------------------------------------
COLUMNS = ["y", "pred", "g", "h"]


@pytest.fixture(scope="module")
def log_frame() -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 3000
    return pd.DataFrame({
        "y": rng.integers(0, 2, n), "pred": rng.integers(0, 2, n).astype(float),
        "g": rng.choice(np.array(["a", "b", None], dtype=object), n), "h": rng.choice([1.0, 2.0, np.nan], n),
        "f": rng.integers(0, 4, n), "day": rng.choice(["mon", "tue"], n),
    })  # fmt: skip


@pytest.fixture(scope="module")
def parquet_paths(log_frame, tmp_path_factory):
    folder = tmp_path_factory.mktemp("log")
    file = folder / "log.parquet"
    log_frame.to_parquet(file)
    hive = folder / "hive"
    for day, part in log_frame.groupby("day"):
        (hive / f"day={day}").mkdir(parents=True)
        part.drop(columns="day").to_parquet(hive / f"day={day}" / "part-0.parquet")
    return file, hive


def test_counts_table_of_pandas_counts_every_row(log_frame):
    table = aggregate_frame(log_frame, COLUMNS)
    assert int(table["count"].sum()) == len(log_frame)
    assert table[COLUMNS].drop_duplicates().shape[0] == len(table)
    assert table["g"].isna().any() and table["h"].isna().any()  # a missing value is a group of its own
    first = table.iloc[0]
    match = (log_frame["y"] == first["y"]) & (log_frame["pred"] == first["pred"]) & (log_frame["g"] == first["g"])
    match &= log_frame["h"] == first["h"]
    assert int(match.sum()) == int(first["count"])


def test_duckdb_counts_of_a_file_and_a_hive_folder_equal_pandas(log_frame, parquet_paths):
    file, hive = parquet_paths
    expected = aggregate_frame(log_frame, COLUMNS)
    pd.testing.assert_frame_equal(aggregate_parquet(file, COLUMNS), expected)
    pd.testing.assert_frame_equal(aggregate_parquet(hive, COLUMNS), expected)
    by_day = aggregate_parquet(hive, ["day", "y"])  # the partition's value is a column
    pd.testing.assert_frame_equal(by_day, aggregate_frame(log_frame, ["day", "y"]))
    summed = aggregate_parquet(file, ["g"], frequency_weight="f")
    pd.testing.assert_frame_equal(summed, aggregate_frame(log_frame, ["g"], frequency_weight="f"))


def test_the_spark_sql_recipe_run_through_duckdb_equals_pandas(log_frame):
    """The query of the documented Spark SQL recipe (backtick identifiers), run by DuckDB on the frame."""
    import duckdb

    query = counts_query(COLUMNS, "log")
    assert query.startswith("SELECT `y`, `pred`, `g`, `h`, COUNT(*) AS `count` FROM log GROUP BY")
    connection = duckdb.connect()
    connection.register("log", log_frame)
    got = connection.execute(query).df()
    pd.testing.assert_frame_equal(got.astype({"count": np.int64}), aggregate_frame(log_frame, COLUMNS),
                                  check_dtype=False)  # fmt: skip


def test_dask_counts_on_a_local_cluster_of_worker_processes_equal_pandas(log_frame):
    """A real distributed.LocalCluster with 2 worker processes: each partition is counted on a worker."""
    import dask.dataframe as dd
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with cluster, Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        frame = dd.from_pandas(log_frame, npartitions=4)
        got = aggregate_dask(frame, COLUMNS)
        summed = aggregate_dask(frame, ["g"], frequency_weight="f")
    pd.testing.assert_frame_equal(got, aggregate_frame(log_frame, COLUMNS), check_dtype=False)
    pd.testing.assert_frame_equal(summed, aggregate_frame(log_frame, ["g"], frequency_weight="f"), check_dtype=False)
    expected = audit(log_frame.fillna({"g": "none"}), label="y", scores=["pred"], groups=["g"],
                     metrics=["sensitivity", "accuracy"], n_resamples=200, n_permutations=100)  # fmt: skip
    counted = audit(got.fillna({"g": "none"}), label="y", scores=["pred"], groups=["g"], frequency_weight="count",
                    metrics=["sensitivity", "accuracy"], n_resamples=200, n_permutations=100)  # fmt: skip
    pd.testing.assert_frame_equal(expected.slices, counted.slices, check_exact=True)
    pd.testing.assert_frame_equal(expected.comparisons, counted.comparisons, check_exact=True)


def test_bad_counts_tables_name_the_problem(log_frame, parquet_paths):
    file, _ = parquet_paths
    bad = log_frame.assign(f=log_frame["f"].astype(float))
    bad.loc[5, "f"] = -2.0
    with pytest.raises(AggregationError, match=r"frequency_weight column 'f' must hold whole numbers >= 0.*-2"):
        aggregate_frame(bad, ["g"], frequency_weight="f")
    with pytest.raises(AggregationError, match="no column"):
        aggregate_parquet(file, ["y", "nope"])
    with pytest.raises(AggregationError, match="is also a column to group by"):
        aggregate_frame(log_frame, ["y", "count"])
    with pytest.raises(AggregationError, match="no such file or folder"):
        aggregate_parquet(file.with_name("missing.parquet"), ["y"])


def test_cli_aggregates_parquet_to_the_same_audit_as_the_rows(parquet_paths, log_frame, tmp_path, capsys):
    file, hive = parquet_paths
    common = ["--label", "y", "--score", "pred", "--group", "day", "--metrics", "accuracy,sensitivity",
              "--n-resamples", "200", "--n-permutations", "100", "--quiet"]  # fmt: skip
    assert main(["audit", str(file), "--aggregate", "no", "--out", str(tmp_path / "rows"), *common]) == 0
    assert main(["audit", str(file), "--aggregate", "yes", "--out", str(tmp_path / "counts"), *common]) == 0
    assert main(["audit", str(hive), "--out", str(tmp_path / "hive"), *common]) == 0
    rows = pd.read_parquet(tmp_path / "rows" / "slices.parquet")
    for other in ("counts", "hive"):
        pd.testing.assert_frame_equal(rows, pd.read_parquet(tmp_path / other / "slices.parquet"), check_exact=True)
    capsys.readouterr()
    csv = tmp_path / "log.csv"
    log_frame.to_csv(csv, index=False)
    assert main(["audit", str(csv), "--aggregate", "yes", *common]) == 2
    assert "--aggregate yes reads Parquet files" in capsys.readouterr().err
    assert main(["audit", str(hive), "--aggregate", "no", *common]) == 2
    assert "is a folder" in capsys.readouterr().err


# ----------------------------------------------------------------------------------------------
# An in-memory frame counted before the audit; memory estimates and limits
# ----------------------------------------------------------------------------------------------
def _hard_frame(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: pd.Categorical.from_codes(rng.integers(0, 3, n), [f"{c}{k}" for k in range(3)])
                          for c in ("a", "b")})  # fmt: skip
    frame["t"] = rng.choice(np.array([" x", "y", None], dtype=object), n)  # text, stripped, missing
    frame["i"] = pd.Categorical.from_codes(rng.integers(0, 2, n), [30, 10])  # levels in the categories' order
    frame["y"] = (rng.random(n) < 0.3).astype(np.int64)
    frame["pred"] = (rng.random(n) < np.where(frame["y"] == 1, 0.7, 0.2)).astype(np.int64)
    return frame


def test_a_large_frame_of_hard_predictions_is_counted_and_gives_the_rows_audit(monkeypatch):
    """Counted by DuckDB before the audit (a note says so), the audit is the rows' audit: the units of
    the counts are those of the rows, so the same draws, and every table is equal."""
    import disaggregated_eval.audit.aggregate as aggregate

    frame = _hard_frame(20_000, 8)
    options = dict(label="y", scores=["pred"], groups=["a", "b", "t", "i"], intersections=2, n_resamples=300,
                   n_permutations=200, thresholds=["0.5"])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        monkeypatch.setattr(aggregate, "COMPRESS_MIN_ROWS", 10**9)
        rows = audit(frame, **options)
        monkeypatch.setattr(aggregate, "COMPRESS_MIN_ROWS", 1_000)
        counted = audit(frame, **options)
    assert rows.n_rows == counted.n_rows == 20_000
    extra = [n for n in counted.notes if n not in rows.notes]
    assert len(extra) == 1 and "the 20,000 rows were counted as" in extra[0]
    assert [n for n in rows.notes if n not in counted.notes] == []
    for name in ("comparisons", "fairness", "thresholds", "detectability"):
        pd.testing.assert_frame_equal(getattr(rows, name), getattr(counted, name), check_exact=True)
    pd.testing.assert_series_equal(rows.slices["estimate"], counted.slices["estimate"], check_exact=True)
    _close(rows.slices, counted.slices, rtol=1e-12)  # BCa bounds: the jackknife's sums in another order


def test_frames_that_would_not_pay_or_read_differently_are_not_counted():
    from disaggregated_eval.audit.aggregate import compress_frame

    frame = _hard_frame(5_000, 9)
    columns = ["y", "pred", "a", "b", "t"]
    assert compress_frame(frame, columns) is None  # below COMPRESS_MIN_ROWS
    assert compress_frame(frame, columns, min_rows=1_000) is not None
    mixed = frame.assign(t=frame["t"].astype(object).where(frame.index % 7 > 0, 1))  # text and numbers
    assert compress_frame(mixed, columns, min_rows=1_000) is None
    continuous = frame.assign(pred=np.random.default_rng(0).random(len(frame)))
    assert compress_frame(continuous, columns, min_rows=1_000) is None


def test_memory_limit_refuses_an_audit_before_any_work_with_the_estimate():
    frame = _hard_frame(300, 10)
    with pytest.raises(AuditInputError, match=r"would need about [\d,]+ MB of memory at its peak .* limit of 10 MB"):
        audit(frame, label="y", scores=["pred"], groups=["a"], memory_limit_mb=10)
    for bad in (-1, 0, float("nan"), "lots", True):
        with pytest.raises(AuditInputError, match="memory_limit_mb must be a"):
            audit(frame, label="y", scores=["pred"], groups=["a"], memory_limit_mb=bad)


def test_audit_peak_estimate_follows_the_rows_held():
    from disaggregated_eval.memory import AUDIT_FIXED_BYTES, AuditSize, audit_peak_bytes, audit_peak_parts

    sizes = dict(n_rows=10**7, n_models=1, n_families=7, n_slices=64, n_resamples=1000, n_outputs=170, n_metrics=11)
    rows = audit_peak_parts(AuditSize(n_units=10**7, **sizes))
    counted = audit_peak_parts(AuditSize(n_units=96, **sizes))
    assert rows["rows"] == 10**7 * (60 + 40 + 7 * 20) and counted["rows"] == 96 * 240  # counted before the work
    assert rows["fixed"] == counted["fixed"] == AUDIT_FIXED_BYTES and rows["replicates"] == counted["replicates"]
    assert rows["replicates"] == int(1000 * 8 * (1.25 * 170 * 11 + 6 * 64))
    assert counted["outputs"] == 64 * 110_000  # written after the work: the larger of the two counts
    assert (
        audit_peak_bytes(AuditSize(n_units=96, **sizes), resident=10**8) == 10**8 + sum(counted.values()) - 64 * 110_000
    )
    with pytest.raises(ValueError, match="n_units must be at most n_rows"):
        AuditSize(n_units=10**8, **sizes)


def test_cli_refuses_a_file_whose_rows_would_not_fit_before_reading_it(tmp_path, capsys):
    frame = _hard_frame(40_000, 11)  # about 4 MB to read, against the smallest limit, 1 MB
    csv = tmp_path / "log.csv"
    frame.to_csv(csv, index=False)
    status = main(["audit", str(csv), "--label", "y", "--score", "pred", "--group", "a", "--memory-limit-mb", "1",
                   "--out", str(tmp_path / "out")])  # fmt: skip
    assert status == 2
    err = capsys.readouterr().err
    assert "log.csv: its about" in err and "would need about" in err and "--aggregate yes" in err
    assert not (tmp_path / "out").exists()
    assert main(["audit", str(csv), "--label", "y", "--score", "pred", "--group", "a", "--aggregate", "maybe"]) == 2
    assert "--aggregate" in capsys.readouterr().err


def test_controls_on_counts_standing_for_too_many_rows_are_refused_before_any_work(monkeypatch):
    import disaggregated_eval.audit.inputs as inputs

    monkeypatch.setattr(inputs, "MAX_EXPANDED_ROWS", 1_000)
    counts = pd.DataFrame({"y": [0, 1, 0, 1], "r": [0.2, 0.7, 0.4, 0.9], "g": ["a", "a", "b", "b"], "n": [400] * 4})
    with pytest.raises(AuditInputError, match=r"needs the 1,600 rows the frequency_weight counts stand for, more than"):
        audit(counts, label="y", scores=["r"], groups=["g"], frequency_weight="n", controls=["none", "Y"])
    result = audit(counts, label="y", scores=["r"], groups=["g"], frequency_weight="n", n_resamples=200,
                   n_permutations=0, metrics=["accuracy"])  # fmt: skip
    assert result.n_rows == 1_600
    assert result.slices.loc[result.slices["slice"] == "overall", "n"].item() == 1_600


def test_counts_tests_large_sample_as_the_expanded_rows_and_switch_by_their_units():
    """Frequency weights and the tests of issue 24 item 1. (1) With test_method='bootstrap' the counts and the
    expanded frame (same units) give the same comparisons bit for bit: the large-sample z-test reads the same
    bootstrap draws, the unweighted rates keep their exact tests. (2) The switch rule bounds a Monte-Carlo
    test's work by its distinct units, not by the rows the counts stand for: 12 million rows of a few
    hundred units keep their permutation tests (2 x 200 permutations x under 600 units is far below 1e8;
    by rows it would be about 5e9, and every side has thousands of rows in each category, so a rule that
    counted rows would switch). (3) Their exact tests are the hypergeometric p-values of the rows' counts:
    summed here term by term from scipy's probabilities (relative 1e-9: a tail of about 1e-125, whose
    largest terms dominate; a table as long as the rows, or counts of table rows, would be off by orders)."""
    from scipy.stats import hypergeom

    from disaggregated_eval.engine.sums import PROPORTIONS, categories

    counts = _log(600, 1).drop(columns="w").groupby(["y", "r", "g", "s"], as_index=False).size()
    counts = counts.rename(columns={"size": "n"})
    counts["n"] = counts["n"] * 2
    rows, table = _audits(counts, test_method="bootstrap", thresholds=[])
    pd.testing.assert_frame_equal(rows.comparisons, table.comparisons, check_exact=True)
    tested = table.comparisons[table.comparisons["kind"] != "vs_model"]
    rates = tested["metric"].isin(list(PROPORTIONS))
    assert set(tested.loc[rates & tested["p_value"].notna(), "test"]) == {"exact"}
    assert set(tested.loc[~rates & tested["p_value"].notna(), "test"]) == {"bootstrap z"}

    big = counts.assign(n=counts["n"] * 10_000)
    options = dict(label="y", scores=["r"], groups=["g", "s"], n_resamples=200, n_permutations=200, seed=5,
                   metrics=["false_positive_rate", "auc", "log_loss"])  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = audit(big, frequency_weight="n", **options)
    assert result.n_rows == int(big["n"].sum()) > 10**7
    c = result.comparisons
    # permutation tests, not the large-sample test: Monte Carlo, or for the log loss (a mean) far from equal
    # at these sizes, the tail bound of its exact permutation p-value
    assert set(c.loc[(c["metric"] == "auc") & c["p_value"].notna(), "test"]) == {"monte carlo"}
    assert set(c.loc[(c["metric"] == "log_loss") & c["p_value"].notna(), "test"]) <= {"monte carlo", "tail bound"}
    fpr = c[(c["metric"] == "false_positive_rate") & (c["kind"] == "vs_overall") & (c["slice"] == "g=a")]
    assert fpr["test"].tolist() == ["exact"]
    cat = categories(big["y"].to_numpy(), big["r"].to_numpy(), 0.5)
    negative = cat < 2
    in_slice = (big["g"] == "a").to_numpy()
    n = big["n"].to_numpy()
    x, n_first = n[negative & in_slice & (cat == 1)].sum(), n[negative & in_slice].sum()
    successes, size = n[negative & (cat == 1)].sum(), n[negative].sum()
    support = np.arange(max(0, n_first - (size - successes)), min(n_first, successes) + 1)
    x0 = n_first * successes / size
    pmf = hypergeom.pmf(support, size, successes, n_first)
    expected = pmf[np.abs(support - x0) >= abs(x - x0) * (1 - 1e-9)].sum()
    assert 0 < expected < 1e-100  # a chance difference among 600 rows, each row repeated 20,000 times or more
    assert fpr["p_value"].iloc[0] == pytest.approx(expected, rel=1e-9)


def test_counts_of_a_billion_rows_refuse_permutations_before_any_work_and_name_the_remedies():
    # numpy's multivariate hypergeometric sampler takes fewer than 10^9 rows: a counts table standing for more
    # than that with Monte-Carlo tests (the net benefit of hard predictions) ended in a ValueError traceback
    rng = np.random.default_rng(3)
    table = pd.DataFrame({"y": rng.integers(0, 2, 40), "p": rng.integers(0, 2, 40), "g": rng.choice(["a", "b"], 40),
                          "n": rng.integers(1, 4, 40) * 100_000_000})  # fmt: skip
    common = dict(label="y", scores=["p"], groups=["g"], frequency_weight="n", metrics=["net_benefit"], n_resamples=50)
    with pytest.raises(AuditInputError, match=r"would permute .* rows .*fewer than 1e\+09.*test_method='bootstrap'"):
        audit(table, **common)
    result = audit(table, **common, test_method="bootstrap")
    tested = result.comparisons[result.comparisons["reported"]]
    assert len(tested) > 0 and (tested["test"] == "bootstrap z").all()
    # the weight line names the option that was given (it said --sample-weight for counts too)
    from disaggregated_eval.audit.terminal import summary_text

    assert "each row counted as many times as column n says (--frequency-weight); n counts rows" in summary_text(
        result, width=10_000
    )


def test_selection_table_of_counts_is_that_of_the_rows(tmp_path):
    """The table ``selection`` of a counts table is that of the rows it stands for: the estimates, bounds,
    effective sizes and denominators equal, the intervals from other draws of the same distribution (the
    counts draw units). It weighed each table row once, whatever its count (g=a's FPR of the distinct rows,
    effective sizes of table rows)."""
    frame = _log(1500, 4)
    counts = frame.groupby(["y", "r", "g", "s", "w"], as_index=False).size().rename(columns={"size": "n"})
    counts["n"] = counts["n"] * np.random.default_rng(1).choice([1, 2, 7], len(counts))
    margins = tmp_path / "margins.csv"
    margins.write_text("g,share,label_rate\na,0.5,0.35\nb,0.3,0.5\nc,0.2,0.45\n")
    common = dict(population_margins=str(margins), selection_sensitivity=[1.5, 2], n_permutations=0,
                  metrics=["false_positive_rate", "precision", "log_loss"], thresholds=[], min_group_size=100,
                  sample_weight="w")  # fmt: skip
    rows, table = _audits(counts, n_resamples=2000, **common)
    a, b = rows.selection, table.selection
    assert len(a) == len(b) > 0
    for column in ("model", "slice", "metric", "quantity", "gamma", "n_denominator"):
        pd.testing.assert_series_equal(a[column], b[column])
    for column in ("estimate", "bound_low", "bound_high", "effective_n"):
        pd.testing.assert_series_equal(a[column], b[column], check_exact=False, rtol=1e-10, atol=1e-12)
    fixed = a["ci_low"].isna()
    pd.testing.assert_series_equal(fixed, b["ci_low"].isna())
    width_a = (a["ci_high"] - a["ci_low"])[~fixed].to_numpy()
    width_b = (b["ci_high"] - b["ci_low"])[~fixed].to_numpy()
    assert np.all(np.abs(width_b / width_a - 1) < 0.15), width_b / width_a


def test_counts_beyond_2_to_the_31_rows_give_the_estimates_of_smaller_counts():
    """Counts summing to 2^41 (as a warehouse's table of 10^12 rows): every proportion is that of the same
    table with counts 2^30 times smaller. A unit's count was held in int32 by the engine's point estimates
    and resample buffers: beyond 2^31 it wrapped (a false positive rate of -0.25 with exit 0). The kernel
    holds counts as float32 (exact to 2^24): equal to 1e-6."""
    rng = np.random.default_rng(7)
    table = pd.DataFrame({"y": rng.integers(0, 2, 60), "p": rng.integers(0, 2, 60), "g": rng.choice(["a", "b"], 60),
                          "n": rng.integers(1, 4, 60) * 2**30})  # fmt: skip
    common = dict(label="y", scores=["p"], groups=["g"], frequency_weight="n", n_resamples=200, n_permutations=0,
                  metrics=["false_positive_rate", "precision", "accuracy"], test_method="bootstrap")  # fmt: skip
    big = audit(table, **common).slices
    small = audit(table.assign(n=table["n"] // 2**30), **common).slices
    assert big["n"].sum() == small["n"].sum() * 2**30
    assert big["estimate"].notna().all()
    np.testing.assert_allclose(big["estimate"], small["estimate"], rtol=1e-6)
    assert ((big["ci_low"] <= big["estimate"]) & (big["estimate"] <= big["ci_high"])).all()
    assert (big["ci_high"] - big["ci_low"]).max() < 1e-4  # 10^12 rows: intervals of width about 1e-6


def test_the_memory_estimate_of_counted_data_holds_the_batches_of_unit_counts():
    # M1 of hostile trial round 4: 2,612,361 distinct rows were estimated at 1,343 MB and peaked at 4.46 GB, in
    # batches of 64 unit-count resamples (a (64, units) int32 buffer, and per block drawn its int64 counts and the
    # multinomial's int64 draws) that the estimate did not count
    rng = np.random.default_rng(11)
    n = 100_000
    frame = pd.DataFrame({"y": rng.integers(0, 2, n), "p": rng.random(n), "a": rng.choice(["u", "v"], n),
                          "count": rng.integers(1, 4, n)})  # fmt: skip
    with pytest.raises(AuditInputError) as refused:
        audit(frame, label="y", scores=["p"], groups=["a"], frequency_weight="count", n_resamples=200,
              n_permutations=0, metrics=["false_positive_rate"], memory_limit_mb=1)  # fmt: skip
    parts = dict(re.findall(r"(\w+) ([\d,]+)(?=[,)])", str(refused.value).split("parts in MB: ")[1]))
    lower_bound = 64 * n * (4 + 8 + 8) / 1e6  # the batch's buffer, one block's counts and draws
    assert float(parts["batches"].replace(",", "")) >= lower_bound
    # 128 resamples per batch (about 32 MB of int32 counts, rounded up to whole blocks of 64), one block drawn
    assert int(parts["batches"].replace(",", "")) == round(n * (128 * 4 + 64 * 20) / 1e6)


@pytest.mark.parametrize("folder", [False, True])
def test_counts_that_are_all_0_name_the_users_column_on_every_path(tmp_path, capsys, folder):
    # C4 of hostile trial round 6: a Parquet folder whose counts were all 0 was refused naming DuckDB's count
    # column ('count'), not the user's; the CSV and the Parquet file named 'c'
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"y": rng.integers(0, 2, 100), "p": rng.random(100), "g": rng.choice(["A", "B"], 100), "c": 0})
    path = tmp_path / "F"
    if folder:
        path.mkdir()
        frame.to_parquet(path / "0.parquet", index=False)
    else:
        path = tmp_path / "f.csv"
        frame.to_csv(path, index=False)
    status = main(["audit", str(path), "--label", "y", "--score", "p", "--group", "g", "--frequency-weight", "c",
                   "--out", str(tmp_path / "o"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert status == 2 and "frequency_weight column 'c' is 0 in every row" in err, err
