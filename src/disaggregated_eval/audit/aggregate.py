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
  (``benchmarks/bench_aggregate.py`` measured it against pyarrow's Acero on the same file: the choice).
  The files are found by :func:`.parquet_files.find_parquet` (a walk that ends on any folder, one schema
  rule) and handed to DuckDB as a list of links with plain names in a temporary folder, so that no path
  of the user's is ever read as a glob pattern (``exp[12]/`` is that folder, not ``exp1/`` and
  ``exp2/``); the partition values are joined by file, and the rows DuckDB counts must equal the rows
  of the files' footers;
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

import contextlib
import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..validation import brief, format_values, repeated, rows_text
from .parquet_files import (
    ParquetInput,
    ParquetInputError,
    check_schema,
    find_parquet,
    first_unreadable,
    partition_values,
)

__all__ = [
    "COUNT_COLUMN",
    "AUTO_AGGREGATE_ROWS",
    "MAX_FREQUENCY",
    "AggregationError",
    "frequency_values",
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
#: ``--aggregate auto`` aggregates a Parquet file of more rows than this (and always a folder of files).
AUTO_AGGREGATE_ROWS = 10**7
#: Largest count of one row: the counts' sum must stay exact in int64 and in float64 sums (2^53).
MAX_FREQUENCY = 2**53
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
    if isinstance(columns, str):
        raise TypeError(
            f"columns must be a list of column names, not a single string (it would be read letter by letter); "
            f"got {brief(columns)}: give [{columns!r}]"
        )
    columns = list(columns)
    if not columns:
        raise AggregationError("columns must name at least one column to group by")
    bad = [c for c in columns if not isinstance(c, str) or not c]
    if bad:
        raise AggregationError(f"columns must be column names (non-empty strings); got {brief(bad)}")
    twice = sorted(repeated(columns))
    if twice:
        raise AggregationError(f"columns must be distinct; {brief(twice)} appear more than once")
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
    TypeError
        If ``columns`` is a single string (it would be read letter by letter).
    """
    columns = _check_columns(columns, count_column, frequency_weight)
    keys = ", ".join(_quote(c, quote) for c in columns)
    ordering = ", ".join(f"{_quote(c, quote)} NULLS LAST" for c in columns)
    total = "COUNT(*)" if frequency_weight is None else f"SUM(CAST({_quote(frequency_weight, quote)} AS BIGINT))"
    query = f"SELECT {keys}, {total} AS {_quote(count_column, quote)} FROM {source} GROUP BY {keys}"
    return query + (f" ORDER BY {ordering}" if order else "")


@contextlib.contextmanager
def _signals_pass_through() -> Iterator[None]:
    """Ctrl-C or SIGTERM during a DuckDB query: DuckDB stops the query and raises its own
    ``RuntimeError('Query interrupted')`` in place of the signal's exception; the signal's is raised again
    (:func:`.signals.interruption`), so that it unwinds as anywhere else."""
    try:
        yield
    except Exception as exc:
        interrupted = type(exc).__name__ == "InterruptException" or (
            isinstance(exc, RuntimeError) and "interrupted" in str(exc).lower()
        )
        if not interrupted:
            raise
        from .signals import interruption

        raise interruption() from None


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
        For a missing column or, with ``frequency_weight``, a count that breaks the rule of
        :func:`frequency_values`.
    TypeError
        If ``columns`` is a single string (it would be read letter by letter).
    """
    columns = _check_columns(columns, count_column, frequency_weight)
    wanted = columns + ([frequency_weight] if frequency_weight is not None else [])
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise AggregationError(
            f"the frame has no column(s) {brief(missing)}; its columns are {brief(list(frame.columns))}"
        )
    if frequency_weight is None:
        table = frame[columns].groupby(columns, dropna=False, sort=False).size().rename(count_column).reset_index()
    else:
        values = frequency_values(frame[frequency_weight], frequency_weight)
        grouped = frame[columns].assign(**{frequency_weight: values}).groupby(columns, dropna=False, sort=False)
        table = grouped[frequency_weight].sum().rename(count_column).reset_index()
    return _finish(table, columns, count_column)


def frequency_values(series: pd.Series, column: str) -> np.ndarray:
    """The values of a ``frequency_weight`` column, checked on every row: the one rule of every input.

    A count is a whole number >= 0, given as a number, a boolean or text that reads as a number (a CSV
    holds only text: ``'3.0'`` and ``3.0`` are the same count on every path, the CSV, a frame, Parquet
    and Dask), at most :data:`MAX_FREQUENCY`, and the counts sum to at most :data:`MAX_FREQUENCY` rows.

    Parameters
    ----------
    series : pandas.Series of shape (n_rows,)
    column : str
        Its name, for messages.

    Returns
    -------
    ndarray of shape (n_rows,), float64
        Whole numbers in ``[0, MAX_FREQUENCY]``.

    Raises
    ------
    AggregationError
        Naming the column, the offending values (missing, not a number, negative, fractional, infinite,
        too large) and the first row holding one.

    Examples
    --------
    >>> frequency_values(pd.Series([1, "3.0", 2.0]), "n")
    array([1., 3., 2.])
    >>> frequency_values(pd.Series([1, "inf", "x"]), "n")
    Traceback (most recent call last):
    ...
    disaggregated_eval.audit.aggregate.AggregationError: frequency_weight column 'n' must hold whole numbers >= 0 ...
    """
    values = _numbers(series)
    bad = ~_whole(values)
    if bad.any():
        rows = np.flatnonzero(bad)
        where = rows_text(rows.size, int(rows[0]))
        raise AggregationError(_frequency_message(column, format_values(series.to_numpy()[bad]), where))
    _check_frequency_sum(column, float(values.max(initial=0.0)), float(values.sum()))
    return values


def _numbers(series: pd.Series) -> np.ndarray:
    """float64 values of a column of numbers, booleans or numbers as text (NaN: missing or not a number)."""
    if pd.api.types.is_bool_dtype(series.dtype) or pd.api.types.is_numeric_dtype(series.dtype):
        return series.to_numpy(dtype=np.float64, na_value=np.nan)
    return pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def _whole(values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        return np.isfinite(values) & (values >= 0) & (values == np.floor(values))


_FREQUENCY_RULE = "whole numbers >= 0 (how many identical rows each row stands for)"


def _frequency_message(column: str, shown: str, where: str) -> str:
    return f"frequency_weight column {brief(column)} must hold {_FREQUENCY_RULE}; got values {shown} {where}"


def _check_frequency_sum(column: str, largest: float, total: float) -> None:
    if largest > MAX_FREQUENCY or total > MAX_FREQUENCY:
        got = f"a count of {largest:.3g}" if largest > MAX_FREQUENCY else f"counts summing to {total:.3g}"
        raise AggregationError(
            f"frequency_weight column {brief(column)} must sum to at most 2^53 rows (counts beyond it are not exact "
            f"in float64 sums); got {got}"
        )


def _sql_number(column: str) -> str:
    """SQL of a column's values as numbers, read as pandas reads them (:func:`_numbers`): NULL where the value
    is not a number (DuckDB's cast also reads ``1_000``, which pandas does not: refused as pandas does)."""
    return f"CASE WHEN contains(CAST({column} AS VARCHAR), '_') THEN NULL ELSE TRY_CAST({column} AS DOUBLE) END"


def _glob_literal(text: str) -> str:
    """``text`` as a DuckDB glob pattern matching only itself (each ``[ ] * ?`` in brackets)."""
    if "\\" in text and any(c in text for c in "[]*?"):
        raise AggregationError(
            f"the temporary folder {text} holds both '\\' and one of '[]*?', which DuckDB cannot read literally; "
            f"set TMPDIR to another folder"
        )
    return "".join(f"[{c}]" if c in "[]*?" else c for c in text)


def _sql_text(text: str) -> str:
    return text.replace("'", "''")


def _as_source(path: str | os.PathLike[str] | ParquetInput) -> ParquetInput:
    if isinstance(path, ParquetInput):
        return path
    try:
        return find_parquet(path)
    except ParquetInputError as exc:
        raise AggregationError(str(exc)) from None


def parquet_rows(path: str | os.PathLike[str] | ParquetInput) -> tuple[int, list[str]]:
    """Rows and column names of a Parquet file or folder, from the files' footers (nothing else is read).

    Parameters
    ----------
    path : path-like or ParquetInput
        A Parquet file or folder (:func:`.parquet_files.find_parquet`: which files are read), or its files
        found already.

    Returns
    -------
    n_rows : int
    columns : list of str
        The files' columns and partition keys.

    Raises
    ------
    AggregationError
        As :func:`.parquet_files.find_parquet`: the path does not exist, a folder holds no Parquet file, a
        link to a folder, a file reached twice, a file that is not readable Parquet.
    """
    source = _as_source(path)
    return source.n_rows, source.columns


def _duckdb_tables(source: ParquetInput, wanted: list[str], farm: Path, frequency_weight: str | None):
    """The SQL of the table DuckDB reads (raw, for the checks, and with the frequency weight as a number,
    for the count), and the partition values to register as ``parts``, or None.

    DuckDB reads the links of ``farm`` (plain names; the folder's path as a literal glob pattern), never a
    path of the user's. Partition values come from :func:`.parquet_files.partition_values`, joined by
    file (DuckDB's own hive reading would infer their types, and fail on a value holding ``=``).
    """
    names = set(source.columns) | set(wanted)
    link = "_file"
    while link in names or f"{link}_row" in names:
        link = "_" + link
    keys = [c for c in wanted if c in source.files[0].partitions]
    pattern = _glob_literal(str(farm)) + "/*.parquet"
    scan = (
        f"read_parquet('{_sql_text(pattern)}', union_by_name = true, hive_partitioning = false, "
        f"filename = '{_sql_text(link)}') AS t"
    )
    q = '"'

    def select(cast: bool) -> str:
        parts = []
        for c in wanted:
            name = f"p.{_quote(c, q)}" if c in keys else f"t.{_quote(c, q)}"
            if cast and c == frequency_weight:
                name = _sql_number(name)
            parts.append(f"{name} AS {_quote(c, q)}")
        if not cast:  # the file and row of each row, for messages (DuckDB's virtual column, unless a column hides it)
            row = "NULL" if "file_row_number" in names else "file_row_number"
            parts.append(f"t.{_quote(link, q)} AS {_quote(link, q)}, {row} AS {_quote(link + '_row', q)}")
        join = f" JOIN parts AS p ON parse_filename(t.{_quote(link, q)}) = p.{_quote(link, q)}" if keys else ""
        return f"(SELECT {', '.join(parts)} FROM {scan}{join}) AS source"

    parts = None
    if keys:
        parts = partition_values(source, keys)
        width = len(str(len(source.files)))
        parts[link] = [f"{i:0{width}d}.parquet" for i in range(len(source.files))]
    return select(False), select(True), link, parts


def _link_farm(source: ParquetInput, farm: Path) -> None:
    """A link with a plain name (``00042.parquet``, in the files' order) to every file, in ``farm``."""
    farm.mkdir()
    width = len(str(len(source.files)))
    for i, f in enumerate(source.files):
        os.symlink(os.path.abspath(f.path), farm / f"{i:0{width}d}.parquet")


def _duckdb_failure(source: ParquetInput, farm: Path, message: str, wanted: list[str]) -> str:
    """The message of a failed DuckDB read, naming the user's file: each link of ``farm`` in DuckDB's
    message is replaced by the file it links to (DuckDB reads the links, :func:`_link_farm`); when it
    names no file, the files are read with pyarrow to find one that fails (the footers were readable)."""
    named: dict[str, None] = {}

    def user_path(match: re.Match) -> str:
        path = str(source.files[int(match.group(1))].path)
        named.setdefault(path)
        return path

    text = re.sub(re.escape(str(farm)) + r"/(\d+)\.parquet", user_path, message)
    text = text.replace(str(farm), str(source.path))
    said = brief(text, 300)
    of = f" the folder {source.path}" if source.path.is_dir() else " it"
    if named:
        return f"{next(iter(named))}: DuckDB could not aggregate{of} ({said})"
    found, checked = first_unreadable(source, [c for c in wanted if c not in source.files[0].partitions])
    if found is not None:
        return f"{found[0]}: not a readable Parquet file ({found[1]}); DuckDB could not aggregate{of} ({said})"
    total = len(source.files)
    read = f"all {total:,} files" if checked == total else f"the first {checked:,} of its {total:,} files"
    return (
        f"{source.path}: DuckDB could not aggregate it ({said}); a file may be unreadable, but pyarrow read the "
        f"audited columns of {read} without error"
    )


def _check_parquet_frequency(connection: Any, source: ParquetInput, raw: str, link: str, column: str) -> int:
    """Check a Parquet input's frequency weights (the rule of :func:`frequency_values`); its rows, as DuckDB
    read them."""
    f = _quote(column, '"')
    x = _sql_number(f)
    bad = f"NOT ({x} IS NOT NULL AND isfinite({x}) AND {x} >= 0 AND {x} = floor({x}))"
    n_rows, n_bad, largest, total = connection.execute(
        f"SELECT COUNT(*), COUNT(*) FILTER (WHERE {bad}), MAX({x}) FILTER (WHERE NOT {bad}), "
        f"SUM({x}) FILTER (WHERE NOT {bad}) FROM {raw}"
    ).fetchall()[0]
    if n_bad:
        shown = [v for (v,) in connection.execute(f"SELECT DISTINCT {f} FROM {raw} WHERE {bad} LIMIT 6").fetchall()]
        name, row = connection.execute(
            f"SELECT {_quote(link, chr(34))}, {_quote(link + '_row', chr(34))} FROM {raw} WHERE {bad} "
            f"ORDER BY 1, 2 LIMIT 1"
        ).fetchall()[0]
        file = source.files[int(Path(name).stem)].path
        where = rows_text(int(n_bad), None if row is None else int(row), of=file)
        raise AggregationError(_frequency_message(column, format_values(shown), where))
    _check_frequency_sum(column, float(largest or 0.0), float(total or 0.0))
    return int(n_rows)


def aggregate_parquet(
    path: str | os.PathLike[str] | ParquetInput,
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
    path : path-like or ParquetInput
        A Parquet file, or a folder whose Parquet files (in any subfolder: hive partitions such as
        ``region=EU/part-0.parquet``, whose values become columns) are read as one table
        (:mod:`.parquet_files`: which files, the one schema rule); or its files found already
        (:func:`.parquet_files.find_parquet`).
    columns : sequence of str
        Columns to group by (the audited columns).
    frequency_weight : str, optional
        A column of counts to sum instead of counting rows (checked first, :func:`frequency_values`).
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
        For a missing path or column (naming the file's columns), a file that breaks the folder's schema
        rule or is unreadable (naming it), a bad frequency weight (naming the column, the bad values and
        the file and row of the first), or rows counted by DuckDB that differ from the rows of the files'
        footers.
    TypeError
        If ``columns`` is a single string.
    ImportError
        If DuckDB is not installed (``pip install duckdb``).
    """
    columns = _check_columns(columns, count_column, frequency_weight)
    source = _as_source(path)
    wanted = columns + ([frequency_weight] if frequency_weight is not None else [])
    try:
        check_schema(source, wanted)
    except ParquetInputError as exc:
        raise AggregationError(str(exc)) from None
    import duckdb

    with tempfile.TemporaryDirectory(prefix="disagg-eval-duckdb-") as spill:
        farm = Path(spill) / "files"
        _link_farm(source, farm)
        raw, counted, link, parts = _duckdb_tables(source, wanted, farm, frequency_weight)
        config = {"memory_limit": memory_limit, "temp_directory": str(Path(spill) / "spill")}
        if threads is not None:
            config["threads"] = int(threads)
        connection = duckdb.connect(":memory:", config=config)
        try:
            with _signals_pass_through():
                connection.execute("SET enable_progress_bar = false")
                if parts is not None:
                    connection.register("parts", parts)
                n_read = None
                if frequency_weight is not None:
                    n_read = _check_parquet_frequency(connection, source, raw, link, frequency_weight)
                query = counts_query(columns, counted, count_column=count_column, frequency_weight=frequency_weight)
                table = _to_pandas(connection, query)
        except duckdb.Error as exc:
            raise AggregationError(_duckdb_failure(source, farm, str(exc), wanted)) from exc
        finally:
            connection.close()
    if n_read is None:
        n_read = int(table[count_column].sum())
    if n_read != source.n_rows:
        raise AggregationError(
            f"{source.path}: DuckDB read {n_read:,} rows, but the files' footers hold {source.n_rows:,}; the count "
            f"would not be that of the files' rows (were the files changed while they were read?)"
        )
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
        Columns to group by (the audited columns; a list, as for :func:`aggregate_frame`).
    frequency_weight : str, optional
        A column of counts to sum instead of counting rows (checked on every partition first, by the rule
        of :func:`frequency_values`).
    count_column : str, default :data:`COUNT_COLUMN`
    split_out : int, default 1
        Partitions of the grouped result (Dask's ``split_out``, an integer >= 1; more for very many distinct
        combinations).

    Returns
    -------
    pandas.DataFrame of shape (n_distinct, len(columns) + 1)
        Module docstring.

    Raises
    ------
    AggregationError
        For a missing column or a bad frequency weight.
    TypeError
        If ``frame`` is not a Dask DataFrame, or ``columns`` is a single string.
    ValueError
        If ``split_out`` is not an integer >= 1.
    """
    import dask.dataframe as dd

    from ..validation import check_int

    if not isinstance(frame, dd.DataFrame):
        raise TypeError(f"frame must be a dask.dataframe.DataFrame; got {type(frame).__name__}")
    columns = _check_columns(columns, count_column, frequency_weight)
    split_out = check_int(split_out, "split_out", minimum=1)
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
        raw = part[frequency_weight]
        values = raw.map_partitions(lambda s: pd.Series(_numbers(s), index=s.index), meta=(frequency_weight, "f8"))
        bad = values.map_partitions(lambda v: pd.Series(~_whole(v.to_numpy()), index=v.index), meta=("bad", "bool"))
        import dask

        n_bad, largest, total = dask.compute(bad.sum(), values[~bad].max(), values[~bad].sum())
        if n_bad:
            shown = format_values(raw[bad].head(6, npartitions=-1).to_numpy())
            where = rows_text(int(n_bad))
            raise AggregationError(_frequency_message(frequency_weight, shown, where))
        _check_frequency_sum(frequency_weight, float(0.0 if pd.isna(largest) else largest), float(total))
        grouped = (part.assign(**{frequency_weight: values}).groupby(columns, dropna=False)[frequency_weight]
                   .sum(split_out=split_out).rename(count_column))  # fmt: skip
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
        with _signals_pass_through():
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
