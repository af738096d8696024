"""Counts tables: a prediction log aggregated to one row per distinct combination of the audited columns.

Every number of an audit depends on a row only through the columns it reads (label, scores, groups,
features, sample weight), so a table with one row per distinct combination of these columns and the
number of rows it stands for (its ``count``) gives the same audit as the rows themselves
(``frequency_weight``; ``docs/method.md``, "Frequency weights"). Such a table has as many rows as
there are distinct combinations: for hard predictions and a few attributes, a few dozen, however many
rows the log has; for a continuous score, up to one per distinct score value of each (cell, label).

This module builds that table with engines that do not hold the rows in memory:

* :func:`aggregate_parquet`: a Parquet file or a folder of Parquet files (hive partitions such as
  ``day=2026-01-01/part-0.parquet`` included) through DuckDB, embedded in the process, whose hash
  aggregate streams the files and spills to disk beyond its memory limit
  (``benchmarks/bench_aggregate.py`` measured it against pyarrow's Acero on the same file: the choice);
* :func:`aggregate_dask`: a ``dask.dataframe`` (on a laptop or a ``distributed`` cluster);
* :func:`counts_query`: the same aggregation as one SQL ``GROUP BY`` query for a warehouse or Spark SQL
  (``docs/audit.md``, "Large data", gives the PySpark recipe; the tests run the query through DuckDB);
* :func:`aggregate_frame`: pandas, for a frame already in memory (the reference of the others).

All of them return the same table: the columns in the order given, then the count column (int64), one
row per distinct combination (a missing value is a value of its own), rows sorted by the columns with
missing values last, so that the same data give the same table, bit for bit, whichever engine made it.
DuckDB and Dask are imported only when used.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..validation import brief

__all__ = [
    "COUNT_COLUMN",
    "AggregationError",
    "counts_query",
    "aggregate_frame",
    "aggregate_parquet",
    "aggregate_dask",
    "parquet_rows",
    "DUCKDB_MEMORY_LIMIT",
    "COMPRESS_MIN_ROWS",
    "compress_frame",
]

#: Name of the count column of a counts table (give ``frequency_weight=COUNT_COLUMN`` to the audit).
COUNT_COLUMN = "count"
#: DuckDB's memory limit during an aggregation: beyond it the hash aggregate spills to a temporary folder.
DUCKDB_MEMORY_LIMIT = "1GB"
#: An in-memory frame of at least this many rows is counted before the audit when that pays
#: (:func:`compress_frame`); smaller frames are audited row by row, as before.
COMPRESS_MIN_ROWS = 200_000
#: Rows of the sample that decides whether a frame's distinct rows are few enough to count it.
_SAMPLE_ROWS = 10_000


class AggregationError(ValueError):
    """A table that cannot be aggregated: a missing column, a bad frequency weight, an unreadable file."""


def _check_columns(columns: Sequence[str], count_column: str, frequency_weight: str | None) -> list[str]:
    columns = list(columns)
    if not columns:
        raise AggregationError("columns must name at least one column to group by")
    bad = [c for c in columns if not isinstance(c, str) or not c]
    if bad:
        raise AggregationError(f"columns must be column names (non-empty strings); got {brief(bad)}")
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise AggregationError(f"columns must be distinct; {brief(repeated)} appear more than once")
    if frequency_weight is not None and frequency_weight in columns:
        raise AggregationError(
            f"frequency_weight {brief(frequency_weight)} is summed, not grouped by: leave it out of columns"
        )
    if count_column in columns:
        raise AggregationError(
            f"the count column {brief(count_column)} is also a column to group by; give another count_column"
        )
    return columns


def _quote(name: str, quote: str) -> str:
    return quote + name.replace(quote, quote + quote) + quote


def counts_query(
    columns: Sequence[str],
    source: str,
    *,
    count_column: str = COUNT_COLUMN,
    frequency_weight: str | None = None,
    quote: str = "`",
    order: bool = True,
) -> str:
    """The SQL query of a counts table: ``SELECT columns, COUNT(*) ... GROUP BY columns ORDER BY columns``.

    One query for Spark SQL, DuckDB, BigQuery and most warehouses (``GROUP BY`` keeps a missing value as a
    group of its own in all of them; ``NULLS LAST`` fixes the row order).

    Parameters
    ----------
    columns : sequence of str
        The columns the audit reads (:func:`disaggregated_eval.audit.loading.required_columns`).
    source : str
        The table (or a table function such as ``read_parquet('log/*.parquet')``), inserted as written.
    count_column : str, default :data:`COUNT_COLUMN`
        Name of the count column.
    frequency_weight : str, optional
        A column of counts already in the table: summed (as integers) instead of counting rows.
    quote : str, default "`"
        Identifier quote: a backtick for Spark SQL, BigQuery and DuckDB (which accepts both), ``"`` for
        standard SQL.
    order : bool, default True
        End with ``ORDER BY`` the columns (``NULLS LAST``); False leaves the order to the caller.

    Returns
    -------
    str

    Raises
    ------
    AggregationError
        For no columns, repeated columns, or the count column or frequency weight among them.
    """
    columns = _check_columns(columns, count_column, frequency_weight)
    keys = ", ".join(_quote(c, quote) for c in columns)
    ordering = ", ".join(f"{_quote(c, quote)} NULLS LAST" for c in columns)
    total = "COUNT(*)" if frequency_weight is None else f"SUM(CAST({_quote(frequency_weight, quote)} AS BIGINT))"
    query = f"SELECT {keys}, {total} AS {_quote(count_column, quote)} FROM {source} GROUP BY {keys}"
    return query + (f" ORDER BY {ordering}" if order else "")


def _frequency_check_query(frequency_weight: str, source: str, quote: str = "`") -> str:
    """Rows whose frequency weight is not a whole number >= 0 (checked before summing: a sum hides them)."""
    f = _quote(frequency_weight, quote)
    bad = f"{f} IS NULL OR isnan(CAST({f} AS DOUBLE)) OR {f} < 0 OR CAST({f} AS DOUBLE) <> floor(CAST({f} AS DOUBLE))"
    return f"SELECT COUNT(*) FILTER (WHERE {bad}), MIN({f}) FILTER (WHERE {bad}) FROM {source}"


def _to_pandas(connection: Any, query: str) -> pd.DataFrame:
    """A DuckDB query's result as pandas through Arrow, freeing the Arrow buffers as it converts (the peak
    of a long result is about half that of DuckDB's own ``df()``; ``benchmarks/bench_aggregate.py``)."""
    table = connection.sql(query).to_arrow_table()
    return table.to_pandas(split_blocks=True, self_destruct=True)


def _finish(table: pd.DataFrame, columns: list[str], count_column: str, *, ordered: bool = False) -> pd.DataFrame:
    """The common form: columns in order, int64 counts, sorted with missing values last, index 0..n-1
    (``ordered``: sorted so already, by :func:`counts_query`'s ``ORDER BY``, which sorts as pandas does:
    numbers, and text by code point, with missing values last; the tests compare the engines)."""
    table = table[columns + [count_column]]
    if not ordered:
        table = table.sort_values(columns, na_position="last", kind="stable")
    table = table.reset_index(drop=True)
    table[count_column] = table[count_column].astype(np.int64)
    return table


def aggregate_frame(
    frame: pd.DataFrame,
    columns: Sequence[str],
    *,
    frequency_weight: str | None = None,
    count_column: str = COUNT_COLUMN,
) -> pd.DataFrame:
    """The counts table of a pandas frame (``groupby(..., dropna=False)``), the reference of the engines.

    Parameters
    ----------
    frame : pandas.DataFrame of shape (n_rows, n_columns)
    columns : sequence of str
        Columns to group by.
    frequency_weight : str, optional
        A column of counts to sum instead of counting rows.
    count_column : str, default :data:`COUNT_COLUMN`

    Returns
    -------
    pandas.DataFrame of shape (n_distinct, len(columns) + 1)
        Module docstring.

    Raises
    ------
    AggregationError
        For a missing column or, with ``frequency_weight``, a count that is not a whole number >= 0.
    """
    columns = _check_columns(columns, count_column, frequency_weight)
    wanted = columns + ([frequency_weight] if frequency_weight is not None else [])
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise AggregationError(
            f"the frame has no column(s) {brief(missing)}; its columns are {brief(list(frame.columns))}"
        )
    grouped = frame[wanted].groupby(columns, dropna=False, sort=False)
    if frequency_weight is None:
        table = grouped.size().rename(count_column).reset_index()
    else:
        _check_frequency_values(frame[frequency_weight], frequency_weight)
        table = grouped[frequency_weight].sum().rename(count_column).reset_index()
    return _finish(table, columns, count_column)


def _check_frequency_values(series: pd.Series, name: str) -> None:
    values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
    bad = ~(np.isfinite(values) & (values >= 0) & (values == np.floor(values)))
    if bad.any():
        raise AggregationError(_frequency_message(name, int(bad.sum()), series.to_numpy()[bad][0]))


def _frequency_message(name: str, n_bad: int, first: Any) -> str:
    return (
        f"frequency_weight column {brief(name)} must hold whole numbers >= 0 (how many identical rows each row "
        f"stands for); got {n_bad:,} other value(s), e.g. {brief(first)}"
    )


def _parquet_source(path: Path) -> str:
    """DuckDB's ``read_parquet`` of a file, or of every Parquet file below a folder (hive partitions)."""
    if path.is_dir():
        pattern = str(path / "**" / "*.parquet")
        return f"read_parquet('{_sql_text(pattern)}', hive_partitioning = true, union_by_name = true)"
    return f"read_parquet('{_sql_text(str(path))}')"


def _sql_text(text: str) -> str:
    return text.replace("'", "''")


def parquet_rows(path: str | os.PathLike[str]) -> tuple[int, list[str]]:
    """Rows and column names of a Parquet file or folder, from the files' footers (nothing else is read).

    Raises
    ------
    AggregationError
        If the path does not exist, a folder holds no ``.parquet`` file, or a file is not readable Parquet.
    """
    import pyarrow.dataset as ds

    path = Path(path)
    if not path.exists():
        raise AggregationError(f"{path}: no such file or folder")
    if path.is_dir() and not any(path.rglob("*.parquet")):
        raise AggregationError(
            f"{path}: a folder without .parquet files; expected Parquet files (hive partitions allowed)"
        )
    try:
        dataset = ds.dataset(str(path), format="parquet", partitioning="hive")
        return int(dataset.count_rows()), list(dataset.schema.names)
    except Exception as exc:  # pyarrow raises many types for damaged files
        raise AggregationError(f"{path}: not readable as Parquet ({exc})") from exc


def aggregate_parquet(
    path: str | os.PathLike[str],
    columns: Sequence[str],
    *,
    frequency_weight: str | None = None,
    count_column: str = COUNT_COLUMN,
    memory_limit: str = DUCKDB_MEMORY_LIMIT,
    threads: int | None = None,
) -> pd.DataFrame:
    """The counts table of a Parquet file or folder, aggregated by DuckDB without loading the rows.

    Parameters
    ----------
    path : path-like
        A ``.parquet`` file, or a folder whose ``.parquet`` files (in any subfolder: hive partitions such
        as ``region=EU/part-0.parquet``, whose values become columns) are read as one table.
    columns : sequence of str
        Columns to group by (the audited columns).
    frequency_weight : str, optional
        A column of counts to sum instead of counting rows (checked first: whole numbers >= 0).
    count_column : str, default :data:`COUNT_COLUMN`
    memory_limit : str, default :data:`DUCKDB_MEMORY_LIMIT`
        DuckDB's memory limit; beyond it the aggregation spills to a temporary folder.
    threads : int, optional
        DuckDB's threads (default: its own, one per core).

    Returns
    -------
    pandas.DataFrame of shape (n_distinct, len(columns) + 1)
        Module docstring; equal to :func:`aggregate_frame` of the rows.

    Raises
    ------
    AggregationError
        For a missing path or column (naming the file's columns), an unreadable file, or a bad
        frequency weight (naming the column, the number of bad rows and one of their values).
    ImportError
        If DuckDB is not installed (``pip install duckdb``).
    """
    columns = _check_columns(columns, count_column, frequency_weight)
    path = Path(path)
    _, names = parquet_rows(path)
    wanted = columns + ([frequency_weight] if frequency_weight is not None else [])
    missing = [c for c in wanted if c not in names]
    if missing:
        raise AggregationError(f"{path}: no column(s) {brief(missing)}; its columns are {brief(names, 300)}")
    import duckdb

    source = _parquet_source(path)
    with tempfile.TemporaryDirectory(prefix="disagg-eval-duckdb-") as spill:
        config = {"memory_limit": memory_limit, "temp_directory": spill}
        if threads is not None:
            config["threads"] = int(threads)
        connection = duckdb.connect(":memory:", config=config)
        try:
            connection.execute("SET enable_progress_bar = false")
            if frequency_weight is not None:
                n_bad, first = connection.execute(_frequency_check_query(frequency_weight, source)).fetchall()[0]
                if n_bad:
                    raise AggregationError(_frequency_message(frequency_weight, int(n_bad), first))
            query = counts_query(columns, source, count_column=count_column, frequency_weight=frequency_weight)
            table = _to_pandas(connection, query)
        except duckdb.Error as exc:
            raise AggregationError(f"{path}: DuckDB could not aggregate it ({exc})") from exc
        finally:
            connection.close()
    return _finish(table, columns, count_column, ordered=True)


def aggregate_dask(
    frame: Any,
    columns: Sequence[str],
    *,
    frequency_weight: str | None = None,
    count_column: str = COUNT_COLUMN,
    split_out: int = 1,
) -> pd.DataFrame:
    """The counts table of a ``dask.dataframe.DataFrame``, computed by Dask (its scheduler or cluster).

    Each partition is grouped where it lives (on the workers of a ``distributed`` cluster) and only the
    partial counts travel: the result has one row per distinct combination, as :func:`aggregate_frame`.

    Parameters
    ----------
    frame : dask.dataframe.DataFrame
    columns : sequence of str
        Columns to group by (the audited columns).
    frequency_weight : str, optional
        A column of counts to sum instead of counting rows (checked on every partition first).
    count_column : str, default :data:`COUNT_COLUMN`
    split_out : int, default 1
        Partitions of the grouped result (Dask's ``split_out``; more for very many distinct combinations).

    Returns
    -------
    pandas.DataFrame of shape (n_distinct, len(columns) + 1)
        Module docstring.

    Raises
    ------
    AggregationError
        For a missing column or a bad frequency weight.
    TypeError
        If ``frame`` is not a Dask DataFrame.
    """
    import dask.dataframe as dd

    if not isinstance(frame, dd.DataFrame):
        raise TypeError(f"frame must be a dask.dataframe.DataFrame; got {type(frame).__name__}")
    columns = _check_columns(columns, count_column, frequency_weight)
    wanted = columns + ([frequency_weight] if frequency_weight is not None else [])
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise AggregationError(
            f"the frame has no column(s) {brief(missing)}; its columns are {brief(list(frame.columns))}"
        )
    part = frame[wanted]
    if frequency_weight is None:
        grouped = part.groupby(columns, dropna=False).size(split_out=split_out).rename(count_column)
        table = grouped.compute().reset_index()
    else:
        values = dd.to_numeric(part[frequency_weight], errors="coerce")
        bad = ~(values.notnull() & (values >= 0) & (values == values.round()))
        n_bad = int(bad.sum().compute())
        if n_bad:
            first = part[frequency_weight][bad].head(1, npartitions=-1)
            raise AggregationError(_frequency_message(frequency_weight, n_bad, first.iloc[0] if len(first) else None))
        grouped = part.groupby(columns, dropna=False)[frequency_weight].sum(split_out=split_out).rename(count_column)
        table = grouped.compute().reset_index()
    return _finish(table, columns, count_column)


def _faithful(series: pd.Series) -> bool:
    """Whether DuckDB gives back this column's values as pandas holds them (numbers, booleans, text,
    categoricals with their categories in order); object columns of mixed types are left to pandas."""
    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return pd.api.types.infer_dtype(dtype.categories, skipna=True) in ("string", "integer", "floating")
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
        return not pd.api.types.is_complex_dtype(dtype) and not isinstance(dtype, pd.SparseDtype)
    if pd.api.types.is_string_dtype(dtype):
        return not pd.api.types.is_object_dtype(dtype) or pd.api.types.infer_dtype(series, skipna=True) in (
            "string",
            "empty",
        )
    return False


def compress_frame(data: pd.DataFrame, columns: Sequence[str], *, min_rows: int | None = None) -> pd.DataFrame | None:
    """The counts table of an in-memory frame when it has far fewer distinct rows than rows, else None.

    An audit of hard predictions (or of any columns with few distinct values) over ``n`` rows needs
    memory for every row at every stage; its counts table (:func:`counts_query` run by DuckDB on the
    frame, which it scans in place: about 8 bytes per row) gives the same audit with memory that follows
    the distinct rows (``docs/method.md``, "Frequency weights"). Used only where that is sure to pay and
    to keep every value as pandas reads it: at least ``min_rows`` rows, columns of numbers, booleans,
    text or categoricals (:func:`_faithful`), and a sample of :data:`_SAMPLE_ROWS` rows with at most a
    tenth as many distinct rows; the table is kept only when it has at most half as many rows as the
    frame (:data:`disaggregated_eval.engine.units.COMPRESSION_MAX_SHARE`).

    Parameters
    ----------
    data : pandas.DataFrame of shape (n_rows, n_columns)
    columns : sequence of str
        The columns the audit reads (present in ``data``, checked by the caller).
    min_rows : int, optional
        Default :data:`COMPRESS_MIN_ROWS` (read when called).

    Returns
    -------
    pandas.DataFrame of shape (n_distinct, len(columns) + 1) or None
        Columns ``columns`` and the count column (named :data:`COUNT_COLUMN`, or with leading ``_`` added
        until it differs from every column), as :func:`aggregate_frame`; None: audit the rows.
    """
    from ..engine.units import COMPRESSION_MAX_SHARE

    columns = list(dict.fromkeys(columns))
    n = len(data)
    if n < (COMPRESS_MIN_ROWS if min_rows is None else min_rows) or not all(_faithful(data[c]) for c in columns):
        return None
    sample = data[columns].iloc[:: max(1, n // _SAMPLE_ROWS)]
    if len(sample.drop_duplicates()) > len(sample) / 10:
        return None
    count = COUNT_COLUMN
    while count in columns:
        count = "_" + count
    import duckdb

    connection = duckdb.connect(":memory:", config={"memory_limit": DUCKDB_MEMORY_LIMIT})
    try:
        connection.execute("SET enable_progress_bar = false")
        connection.register("frame", data[columns] if list(data.columns) != columns else data)
        table = _to_pandas(connection, counts_query(columns, "frame", count_column=count))
    finally:
        connection.close()
    if len(table) > COMPRESSION_MAX_SHARE * n:
        return None
    for c in columns:  # the frame's own dtypes: text as objects, categoricals with their categories in order
        dtype = data[c].dtype
        if isinstance(dtype, pd.CategoricalDtype):
            table[c] = pd.Categorical(table[c], categories=dtype.categories, ordered=dtype.ordered)
        elif pd.api.types.is_object_dtype(dtype) and not pd.api.types.is_object_dtype(table[c].dtype):
            table[c] = table[c].astype(object).where(table[c].notna(), None)
    return _finish(table, columns, count, ordered=True)
