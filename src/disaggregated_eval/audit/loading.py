"""Reading the input file of an audit (CSV, gzipped CSV, TSV or parquet) with clear errors.

pandas reads many broken files without complaint: a gzipped file under a ``.csv`` name becomes one
column of garbage, a truncated last line is padded with missing values, and duplicated column names
are silently renamed ``name.1``. :func:`load_table` checks the file itself first (its bytes, its
header, the number of fields on every line) and raises :class:`InputFileError` naming the file, the
offending column or line, the first few bad values and what was expected, before any work is done.
The command line turns that error into exit status 2 (``docs/audit.md``, "Exit codes").

A CSV file is read in one pass of Python's :mod:`csv` reader that checks every line and keeps only
the fields of the requested columns, which pandas then parses (with its usual type inference): memory
grows with the columns used, not with the file. Every read is bounded: the path must be a regular file
(a FIFO or a device such as ``/dev/zero`` is refused before it is opened,
:func:`disaggregated_eval.io.check_regular_file`), and no line or field may be longer than
:data:`MAX_LINE_CHARS` (64 Mi characters: a field of 128 KiB or more in an unused column is fine; the
reader's own limit of 128 KiB per field is raised to this for the duration of the read), so that a file
without line ends is refused at that length instead of filling the memory.
"""

from __future__ import annotations

import contextlib
import csv
import difflib
import gzip
import io
import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import pandas as pd

from ..io import FileReadError, check_regular_file
from ..validation import brief

__all__ = ["InputFileError", "SUFFIXES", "MAX_LINE_CHARS", "table_format", "read_header", "check_file_columns",
           "load_table", "required_columns", "load_input"]  # fmt: skip

#: File name endings the tool reads, and their format.
SUFFIXES: dict[str, str] = {
    ".csv": "csv",
    ".csv.gz": "csv",
    ".tsv": "tsv",
    ".tsv.gz": "tsv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_GZIP_MAGIC = b"\x1f\x8b"
_ZIP_MAGIC = b"PK\x03\x04"
_PARQUET_MAGIC = b"PAR1"
_SHOW = 5  # offending lines or values shown in a message
#: Most names searched for a close match of a missing file or column (suggestions only).
_MAX_SUGGESTED = 10_000
#: Longest line, and longest field, of a text table (characters).
MAX_LINE_CHARS = 2**26


class InputFileError(ValueError):
    """The input file cannot be read as a table, or lacks what the audit needs.

    The message names the file and the problem in one line (the command line prints it and exits
    with status 2).
    """


def _name_of(path: Path) -> str:
    return str(path)


def table_format(path: str | os.PathLike[str], *, default: str | None = None) -> str:
    """The format of ``path`` from its name: ``"csv"``, ``"tsv"`` or ``"parquet"``.

    Parameters
    ----------
    path : path-like
    default : str, optional
        The format of a name that ends in none of :data:`SUFFIXES` (default: such a name is refused).

    Raises
    ------
    InputFileError
        If the name ends in none of :data:`SUFFIXES` and there is no ``default``.
    """
    name = Path(path).name.lower()
    for suffix in sorted(SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            return SUFFIXES[suffix]
    if default is not None:
        return default
    raise InputFileError(f"{_name_of(Path(path))}: unknown file type; expected a name ending in {', '.join(SUFFIXES)}")


def _is_gzip_name(path: Path) -> bool:
    return path.name.lower().endswith(".gz")


def _check_file(path: Path) -> bytes:
    """The file's first bytes, after checking it exists, is a regular file (not a folder, FIFO or device:
    :func:`disaggregated_eval.io.check_regular_file`) and is not empty."""
    name = _name_of(path)
    if not path.exists():
        parent = path.parent if str(path.parent) else Path(".")
        hint = ""
        if parent.is_dir():
            with os.scandir(parent) as entries:  # bounded work in a folder of millions of files
                names = [e.name for e in itertools.islice(entries, _MAX_SUGGESTED)]
            close = difflib.get_close_matches(path.name, names, n=3, cutoff=0.75)
            if close:
                hint = f" (similar names in {parent}: {', '.join(close)})"
        raise InputFileError(f"{name}: no such file{hint}")
    if path.is_dir():
        raise InputFileError(f"{name}: is a folder; expected a table file ({', '.join(SUFFIXES)})")
    try:
        if check_regular_file(path, what=name).st_size == 0:  # not read: empty, or a /proc file (may block)
            raise InputFileError(f"{name}: the file is empty; expected a header line and data rows")
        with path.open("rb") as handle:
            head = handle.read(4096)
    except FileReadError as exc:
        raise InputFileError(str(exc)) from None
    except OSError as exc:
        raise InputFileError(f"{name}: cannot be read ({exc.strerror or exc})") from exc
    if not head:
        raise InputFileError(f"{name}: the file is empty; expected a header line and data rows")
    return head


def _check_magic(path: Path, head: bytes, fmt: str) -> None:
    """Catch files whose content does not match their name (the commonest silent mistake)."""
    name = _name_of(path)
    if fmt == "parquet":
        if not head.startswith(_PARQUET_MAGIC):
            kind = "gzip-compressed" if head.startswith(_GZIP_MAGIC) else "not a parquet file"
            raise InputFileError(
                f"{name}: {kind} (no parquet magic bytes 'PAR1' at the start); expected a parquet file"
            )
        return
    gz_name = _is_gzip_name(path)
    if head.startswith(_GZIP_MAGIC) and not gz_name:
        raise InputFileError(
            f"{name}: the file is gzip-compressed but its name does not end in .gz; "
            f"rename it to {path.name}.gz or decompress it (gunzip)"
        )
    if gz_name and not head.startswith(_GZIP_MAGIC):
        raise InputFileError(f"{name}: the name ends in .gz but the file is not gzip-compressed")
    if head.startswith(_ZIP_MAGIC):
        raise InputFileError(f"{name}: the file is a zip archive; extract the CSV file from it first")
    if head.startswith(_PARQUET_MAGIC):
        raise InputFileError(f"{name}: the file is a parquet file, not {fmt.upper()}; rename it to end in .parquet")


def _open_text(path: Path) -> io.TextIOBase:
    raw = gzip.open(path, "rb") if _is_gzip_name(path) else path.open("rb")  # noqa: SIM115 - closed by the wrapper
    return io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")


def _text_errors(path: Path, exc: Exception) -> InputFileError:
    name = _name_of(path)
    if isinstance(exc, UnicodeDecodeError):
        byte = exc.object[exc.start : exc.start + 1].hex() if exc.object else "?"
        return InputFileError(
            f"{name}: not UTF-8 text (byte 0x{byte} cannot be decoded); expected a text table "
            "encoded as UTF-8 (re-save it as UTF-8 CSV)"
        )
    if isinstance(exc, (gzip.BadGzipFile, EOFError, OSError)):
        return InputFileError(f"{name}: the compressed file is damaged or truncated ({exc})")
    return InputFileError(f"{name}: cannot be parsed as a table ({exc})")


class _LineTooLong(ValueError):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


@contextlib.contextmanager
def _field_limit() -> Iterator[None]:
    """Set the :mod:`csv` module's limit on the size of a field (128 KiB; process-wide) to
    :data:`MAX_LINE_CHARS` for a read."""
    old = csv.field_size_limit()
    csv.field_size_limit(MAX_LINE_CHARS)
    try:
        yield
    finally:
        csv.field_size_limit(old)


class _TooManyChars(ValueError):
    def __init__(self, line: int, limit: int) -> None:
        super().__init__(line, limit)
        self.line = line
        self.limit = limit


def _lines(handle: io.TextIOBase, max_chars: int | None = None) -> Iterator[str]:
    """The lines of a text file, each of at most :data:`MAX_LINE_CHARS` characters (else
    :class:`_LineTooLong`, naming the line): a file without line ends is not read whole. With
    ``max_chars``, at most that many characters in all (else :class:`_TooManyChars`): a compressed
    file that expands far beyond its size, or a file that grows while it is read, is not read on."""
    read = handle.readline
    number = 0
    total = 0
    while True:
        line = read(MAX_LINE_CHARS + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_CHARS and line[-1] not in "\r\n":
            raise _LineTooLong(number)
        total += len(line)
        if max_chars is not None and total > max_chars:
            raise _TooManyChars(number, max_chars)
        yield line


def _too_long(path: Path, exc: _LineTooLong) -> InputFileError:
    return InputFileError(
        f"{_name_of(path)}: line {exc.line} is longer than {MAX_LINE_CHARS:,} characters; is it a table with "
        "line ends (or a binary file)?"
    )


def _delimiter(fmt: str) -> str:
    return "\t" if fmt == "tsv" else ","


def _check_header(path: Path, header: list[str], fmt: str) -> list[str]:
    name = _name_of(path)
    if not header or all(not h.strip() for h in header):
        raise InputFileError(f"{name}: the first line (header) is empty; expected column names")
    if "\x00" in "".join(header):
        raise InputFileError(f"{name}: contains NUL bytes: a binary file, not a {fmt.upper()} table")
    positions: dict[str, list[int]] = {}
    for i, column in enumerate(header, start=1):
        positions.setdefault(column, []).append(i)
    duplicated = {c: p for c, p in positions.items() if len(p) > 1}
    if duplicated:
        shown = "; ".join(f"{c!r} (columns {', '.join(map(str, p))})" for c, p in list(duplicated.items())[:_SHOW])
        raise InputFileError(
            f"{name}: duplicated column names in the header: {shown}; every column needs a distinct "
            "name (pandas would silently rename the copies to 'name.1')"
        )
    empty = [i for i, c in enumerate(header, start=1) if not c.strip()]
    # An unnamed first column is the index written by DataFrame.to_csv(index=True): allowed.
    if empty and len(empty) < len(header) and empty != [1]:
        raise InputFileError(
            f"{name}: column(s) {', '.join(map(str, empty[:_SHOW]))} of the header have no name; "
            "expected a name for every column"
        )
    return header


def read_header(
    path: str | os.PathLike[str], *, default_format: str | None = None, max_columns: int | None = None
) -> list[str]:
    """Column names of a table file, checked (no duplicates, no unnamed columns but an index).

    Parameters
    ----------
    path : path-like
    default_format : str, optional
        The format of a name without a known suffix (:func:`table_format`).
    max_columns : int, optional
        Most columns a text table may have (checked before its names are).

    Raises
    ------
    InputFileError
        If the file is missing, unreadable, not a regular file, empty, compressed differently from its
        name, not UTF-8 text, its header is longer than :data:`MAX_LINE_CHARS`, or repeats a name.
    """
    path = Path(path)
    fmt = table_format(path, default=default_format)
    head = _check_file(path)
    _check_magic(path, head, fmt)
    if fmt == "parquet":
        return _parquet_columns(path)
    try:
        with _field_limit(), _open_text(path) as handle:
            header = next(csv.reader(_lines(handle), delimiter=_delimiter(fmt), strict=True), [])
    except _LineTooLong as exc:
        raise _too_long(path, exc) from None
    except (UnicodeDecodeError, csv.Error, OSError, EOFError) as exc:
        raise _text_errors(path, exc) from exc
    if max_columns is not None and len(header) > max_columns:
        raise InputFileError(
            f"{_name_of(path)}: its header has {len(header):,} columns; expected at most {max_columns:,} "
            f"({brief(header[:_SHOW])}...)"
        )
    return _check_header(path, header, fmt)


def _parquet_columns(path: Path) -> list[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(f"{_name_of(path)}: not a readable parquet file ({exc})") from exc
    names = list(schema.names)
    return _check_header(path, names, "parquet")


def _check_rows(
    path: Path,
    n_columns: int,
    fmt: str,
    keep: Sequence[int] | None = None,
    max_chars: int | None = None,
    max_read_chars: int | None = None,
) -> tuple[int, str]:
    """Number of data rows, after checking that every line has exactly ``n_columns`` fields.

    With ``keep`` (field positions), also the text of a CSV file holding only those fields (header
    line included, in the order of ``keep``), for pandas to parse; otherwise ``""``. That text may hold
    at most ``max_chars`` characters (checked as it grows: a compressed file that expands far beyond its
    size is refused at the bound, not when the memory is full). With ``max_read_chars``, the whole file
    (every field, decompressed) may hold at most that many characters, checked as it is read.
    """
    name = _name_of(path)
    bad: list[tuple[int, int]] = []
    n_bad = 0
    n_rows = 0
    last_line = 0
    last_fields = n_columns
    reader = None
    kept = io.StringIO()
    # "\r\n" ends the lines: the writer then quotes every field holding a "\r" or a "\n" (with "\n" alone,
    # a bare carriage return inside a quoted field was written unquoted, and pandas split the row there).
    writer = csv.writer(kept, lineterminator="\r\n") if keep is not None else None
    try:
        with _field_limit(), _open_text(path) as handle:
            reader = csv.reader(_lines(handle, max_read_chars), delimiter=_delimiter(fmt), strict=True)
            header = next(reader, None)
            if writer is not None and header is not None:
                writer.writerow([header[i] for i in keep])
            for row in reader:
                if not row:
                    continue  # blank line (pandas skips them too)
                n_rows += 1
                last_line, last_fields = reader.line_num, len(row)
                if len(row) != n_columns:
                    n_bad += 1
                    if len(bad) < _SHOW:
                        bad.append((reader.line_num, len(row)))
                elif writer is not None and not n_bad:
                    writer.writerow([row[i] for i in keep])
                    if max_chars is not None and not n_rows % 65_536 and kept.tell() > max_chars:
                        raise InputFileError(
                            f"{name}: the columns read hold more than {max_chars:,} characters by line "
                            f"{reader.line_num:,}, more than fits in the memory limit (--memory-limit-mb); a "
                            "compressed file that expands far beyond its size? Convert it to Parquet and audit "
                            "that with --aggregate yes, which counts the rows without loading them"
                        )
            ends_with_newline = _ends_with_newline(path)
    except _LineTooLong as exc:
        raise _too_long(path, exc) from None
    except _TooManyChars as exc:
        raise InputFileError(
            f"{name}: holds more than {exc.limit:,} characters (by line {exc.line:,}), the limit for this file; a "
            "compressed file that expands far beyond its size, or a file that grew while it was read?"
        ) from None
    except csv.Error as exc:
        raise InputFileError(
            f"{name}: malformed CSV near line {reader.line_num if reader else 1} ({exc}); an unclosed quote or a "
            "truncated file?"
        ) from exc
    except (UnicodeDecodeError, OSError, EOFError) as exc:
        raise _text_errors(path, exc) from exc
    if n_bad:
        if n_bad == 1 and bad[0][0] == last_line and last_fields < n_columns and not ends_with_newline:
            raise InputFileError(
                f"{name}: the last line (line {last_line}) is truncated: {last_fields} of "
                f"{n_columns} fields and no line end; was the file cut off while writing or copying?"
            )
        shown = ", ".join(f"line {line}: {k} fields" for line, k in bad)
        more = f" ... ({n_bad} lines in all)" if n_bad > len(bad) else ""
        raise InputFileError(f"{name}: expected {n_columns} fields on every line (as in the header); got {shown}{more}")
    if n_rows == 0:
        raise InputFileError(f"{name}: has a header but no data rows")
    return n_rows, kept.getvalue()


def _ends_with_newline(path: Path) -> bool:
    if _is_gzip_name(path):
        return True  # a truncated gzip stream is caught by the decompressor
    with path.open("rb") as handle:
        handle.seek(0, os.SEEK_END)
        if handle.tell() == 0:
            return False
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) in (b"\n", b"\r")


def _check_columns(path: Path, header: Sequence[str], columns: Sequence[str]) -> None:
    present = set(header)
    missing = [c for c in columns if c not in present]
    if not missing:
        return
    hints = []
    candidates = list(header)[:_MAX_SUGGESTED]  # each search compares with every candidate: bounded work
    for column in missing[:_SHOW]:
        close = difflib.get_close_matches(column, candidates, n=2, cutoff=0.6)
        lower = [h for h in header if h.lower() == column.lower() and h not in close]
        if close or lower:
            hints.append(f"{column!r} -> did you mean {', '.join(map(repr, lower + close))}?")
    shown = ", ".join(map(repr, list(header)[:20])) + (" ..." if len(header) > 20 else "")
    single = ""
    if len(header) == 1 and any(sep in header[0] for sep in (";", "\t", "|", ",")):
        single = " (the header has a single column: is the file separated by another character?)"
    shown_missing = ", ".join(map(repr, missing[:20])) + (
        f" ... ({len(missing):,} in all)" if len(missing) > 20 else ""
    )
    raise InputFileError(
        f"{_name_of(path)}: no column(s) {shown_missing}"
        f"{' (' + '; '.join(hints) + ')' if hints else ''}; the file has columns [{shown}]{single}"
    )


def check_file_columns(path: str | os.PathLike[str], columns: Sequence[str]) -> list[str]:
    """Check, reading only the file's header, that the table holds ``columns`` (the workflow's check of
    an audit before any job starts; :func:`load_input` makes the same checks and reads the rows).

    Parameters
    ----------
    path : path-like
        The table (any format of :data:`SUFFIXES`), or a folder of Parquet files, read as
        :func:`load_input` reads it (:mod:`.parquet_files`: which files, the folder's one schema rule).

    Returns
    -------
    list of str
        The header (of a folder: its files' columns and partition keys).

    Raises
    ------
    InputFileError
        As :func:`read_header`, or naming the missing columns (close names suggested); for a folder as
        :func:`.parquet_files.find_parquet` and :func:`.parquet_files.check_schema` (naming the file).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp()) / "log"
    >>> (folder / "day=1").mkdir(parents=True)
    >>> pd.DataFrame({"y": [0, 1], "p": [0.2, 0.9]}).to_parquet(folder / "day=1" / "part-0.parquet")
    >>> check_file_columns(folder, ["y", "p", "day"])
    ['y', 'p', 'day']
    """
    path = Path(path)
    if path.is_dir():
        from .parquet_files import ParquetInputError, check_schema, find_parquet

        try:
            source = find_parquet(path)
            check_schema(source, columns)
        except ParquetInputError as exc:
            raise InputFileError(str(exc)) from None
        return source.columns
    header = read_header(path)
    _check_columns(path, header, list(columns))
    return header


def required_columns(
    *,
    label: str,
    scores: Sequence[str] = (),
    groups: Sequence[str] = (),
    features: Sequence[str] = (),
    sample_weight: str | None = None,
    frequency_weight: str | None = None,
) -> list[str]:
    """The columns an audit reads, from the options that name columns, in a stable order without repeats.

    Parameters
    ----------
    label : str
        The option ``label``.
    scores, groups, features : sequence of str, optional
        The options of the same names.
    sample_weight, frequency_weight : str or None, optional
        The options of the same names (None: no such column).

    Returns
    -------
    list of str
        ``label``, ``scores``, ``groups``, ``features``, ``sample_weight``, ``frequency_weight`` in this
        order, each name once; empty and missing names left out.

    Raises
    ------
    TypeError
        If ``scores``, ``groups`` or ``features`` is a single string (a list of names is expected: a
        string would be read letter by letter).
    """
    for name, value in (("scores", scores), ("groups", groups), ("features", features)):
        if isinstance(value, str):
            raise TypeError(f"{name} must be a list of column names, not a single string; got {value!r}")
    names = [label or "", *(scores or ()), *(groups or ()), *(features or ()), sample_weight or "",
             frequency_weight or ""]  # fmt: skip
    return [n for n in dict.fromkeys(names) if n]  # each name once, in order: linear in the names


def load_table(
    path: str | os.PathLike[str],
    *,
    columns: Sequence[str] | None = None,
    as_text: bool = False,
    default_format: str | None = None,
    max_text_chars: int | None = None,
    max_read_chars: int | None = None,
    level_columns: Sequence[str] = (),
) -> pd.DataFrame:
    """Read an audit's input table after checking the file; only ``columns`` if given.

    Parameters
    ----------
    path : path-like
        A ``.csv``, ``.csv.gz``, ``.tsv``, ``.tsv.gz``, ``.parquet`` or ``.pq`` file. CSV files are
        UTF-8 text (a byte-order mark is allowed) with one header line; empty fields and pandas'
        usual markers (``NA``, ``NaN``, ...) are missing values, but for ``level_columns``.
    columns : sequence of str, optional
        Columns to read (in this order); default all.
    as_text : bool, default False
        Keep every field of a text table as written (strings; an empty field is ``""``), without type
        inference or missing-value markers (the margins file, :func:`.options.read_margins`). Not for
        Parquet files.
    default_format : str, optional
        The format of a name without a known suffix (:func:`table_format`; default: refused).
    max_text_chars : int, optional
        Most characters of a text table's requested columns (default: any); the command line's bound
        from its memory limit.
    max_read_chars : int, optional
        Most characters of a text table in all (every field, after decompression; default: any),
        checked as they are read: a small ``.csv.gz`` that expands to gigabytes, or a file that grows
        while it is read, is refused at the bound.
    level_columns : sequence of str, default ()
        Columns of levels (the audit's group columns) of a text table: only an empty field is missing there;
        ``NA``, ``None``, ``NULL``, ``nan`` and pandas' other markers are levels as written, as they are in a
        Parquet file's text column (a country code ``NA``, a category ``None``).

    Returns
    -------
    pandas.DataFrame of shape (n_rows, len(columns))

    Raises
    ------
    InputFileError
        If the file is missing, unreadable, not a regular file (a FIFO, a device), empty, of another type
        than its name says (a gzipped file named ``.csv``, a parquet file named ``.csv``), not UTF-8 text,
        has duplicated or unnamed columns, a line with a different number of fields than the header (a
        truncated last line included) or longer than :data:`MAX_LINE_CHARS`, no data rows, or lacks a
        requested column (close names suggested). Every message names the file.
    """
    path = Path(path)
    fmt = table_format(path, default=default_format)
    header = read_header(path, default_format=default_format)
    wanted = list(columns) if columns is not None else list(header)
    _check_columns(path, header, wanted)
    if fmt == "parquet":
        if as_text:
            raise InputFileError(f"{_name_of(path)}: a parquet file; expected a text table (CSV)")
        try:
            frame = pd.read_parquet(path, columns=wanted)
        except Exception as exc:  # pyarrow raises many types for damaged files
            raise InputFileError(f"{_name_of(path)}: not a readable parquet file ({exc})") from exc
        if len(frame) == 0:
            raise InputFileError(f"{_name_of(path)}: has no data rows")
        return frame
    position = {c: i for i, c in enumerate(header)}
    _, text = _check_rows(
        path,
        len(header),
        fmt,
        keep=[position[c] for c in wanted],
        max_chars=max_text_chars,
        max_read_chars=max_read_chars,
    )
    kind: dict = {"dtype": str, "keep_default_na": False} if as_text else {}
    levels = set(wanted) & set(level_columns)
    if levels and not as_text:  # pandas' markers stay missing in the other columns (R writes NA in numbers)
        kind = {
            "keep_default_na": False,
            "na_values": {c: [""] if c in levels else sorted(_PANDAS_NA_MARKERS) for c in wanted},
        }
    try:
        frame = pd.read_csv(io.StringIO(text), sep=",", low_memory=False, **kind)
    except (ValueError, OSError) as exc:
        raise _text_errors(path, exc) from exc
    del text
    frame.columns = wanted  # the header as written (pandas would mangle nothing here: names are distinct)
    return frame


#: The text that pandas reads as missing by default (``pandas.read_csv``'s ``na_values``, as documented).
_PANDAS_NA_MARKERS = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA",
     "NULL", "NaN", "None", "n/a", "nan", "null"}
)  # fmt: skip


def load_input(
    path: str | os.PathLike[str],
    columns: Sequence[str],
    *,
    frequency_weight: str | None = None,
    memory_limit_mb: float | None = None,
    aggregate: str = "auto",
    level_columns: Sequence[str] = (),
) -> tuple[pd.DataFrame, str | None, str]:
    """The command line's input: the rows of a table file, or the counts of a Parquet file or folder.

    A Parquet folder (hive partitions), and with ``aggregate="auto"`` a Parquet file of more than
    :data:`.aggregate.AUTO_AGGREGATE_ROWS` rows, is aggregated to counts by DuckDB
    (:func:`.aggregate.aggregate_parquet`) and audited with the counts as ``frequency_weight`` (a
    ``frequency_weight`` of the file is summed): memory then follows the distinct rows, and the audit is
    that of the rows (``docs/method.md``, "Frequency weights").

    Parameters
    ----------
    path : path-like
    columns : sequence of str
        The columns the audit reads (:func:`required_columns`).
    frequency_weight : str, optional
        The audit's option of that name (a column of row counts of the file).
    memory_limit_mb : float, optional
        The audit's option of that name (default: 80% of the machine's memory).
    aggregate : {"auto", "yes", "no"}
    level_columns : sequence of str, default ()
        The audit's group columns: in a text table only an empty field is missing there (:func:`load_table`).

    Returns
    -------
    data : pandas.DataFrame
    frequency_weight : str or None
        The column of row counts of ``data``: the count column when the input was aggregated, else
        ``frequency_weight``.
    message : str
        What was read, for the progress line.

    Raises
    ------
    InputFileError
        As :func:`load_table`; for ``aggregate="yes"`` with a file that is not Parquet, ``"no"`` with a
        folder, or a Parquet input DuckDB cannot aggregate (naming the file and the column).
    """
    from .aggregate import AUTO_AGGREGATE_ROWS, COUNT_COLUMN, AggregationError, aggregate_parquet
    from .parquet_files import ParquetInputError, find_parquet

    path = Path(path)
    folder = path.is_dir()
    if not folder:
        _check_file(path)  # a regular file, before anything opens it (a FIFO would block the first reader)
    parquet = folder or table_format(path) == "parquet"
    if aggregate == "yes" and not parquet:
        raise InputFileError(
            f"{_name_of(path)}: --aggregate yes reads Parquet files (or a folder of them); got another type"
        )
    if folder and aggregate == "no":
        raise InputFileError(
            f"{_name_of(path)}: is a folder; a folder of Parquet files is read only aggregated (--aggregate auto or yes)"
        )
    wanted = [c for c in columns if c != frequency_weight]
    if parquet and aggregate != "no":
        try:
            source = find_parquet(path)  # once: its footers serve the row count and the aggregation
        except ParquetInputError as exc:
            raise InputFileError(str(exc)) from None
        n_rows = source.n_rows
        if folder or aggregate == "yes" or n_rows > AUTO_AGGREGATE_ROWS:
            count = COUNT_COLUMN
            while count in wanted:
                count = "_" + count
            try:
                table = aggregate_parquet(source, wanted, frequency_weight=frequency_weight, count_column=count)
            except AggregationError as exc:
                raise InputFileError(str(exc)) from None
            if len(table) == 0:
                raise InputFileError(f"{_name_of(path)}: has no data rows")
            if frequency_weight is not None and not (table[count] > 0).any():  # named as the user's column
                raise InputFileError(
                    f"{_name_of(path)}: frequency_weight column {brief(frequency_weight)} is 0 in every row; at least one "
                    "row needs a count of 1 or more"
                )
            message = (
                f"read {path}: {source.describe()}, {n_rows:,} rows of {len(wanted)} columns, aggregated by DuckDB "
                f"to {len(table):,} distinct rows with their counts"
            )
            return table, count, message
    from ..memory import memory_limit_origin

    limit = _memory_limit_bytes(memory_limit_mb)
    _check_frame_memory(path, len(columns), limit, origin=memory_limit_origin(memory_limit_mb))
    data = load_table(
        path, columns=list(columns), max_text_chars=int(limit // (CSV_READ_FACTOR + 1)), level_columns=level_columns
    )
    return data, frequency_weight, f"read {path}: {len(data):,} rows, {len(columns)} columns"


#: Bytes per row and column of a table read into pandas (a float64 or a short text per value), and the
#: factor of the CSV reader's peak over its frame: the estimate of :func:`_check_frame_memory`.
FRAME_VALUE_BYTES = 8
CSV_READ_FACTOR = 3


def _memory_limit_bytes(memory_limit_mb: float | None) -> float:
    """The audit's memory limit in bytes (``--memory-limit-mb``, default :func:`disaggregated_eval.memory.
    default_memory_limit_mb`: 80% of the machine's memory, or less under an address-space limit)."""
    from ..memory import default_memory_limit_mb

    return (memory_limit_mb if memory_limit_mb is not None else default_memory_limit_mb()) * 1e6


def _check_frame_memory(path: Path, n_columns: int, limit: float, *, origin: str = "--memory-limit-mb") -> None:
    """Refuse, before reading it, a table whose rows alone would not fit in memory, with the estimate.

    Rows: a Parquet file's footer, or a text file's size over the mean length of its first lines. The
    frame needs about :data:`FRAME_VALUE_BYTES` per value (times :data:`CSV_READ_FACTOR` while a text file
    is parsed); the audit then counts it to its distinct rows when it can, which needs little more.
    """
    from .aggregate import AggregationError, parquet_rows

    try:  # a file that cannot be read this way gets load_table's own message
        fmt = table_format(path)
        if fmt == "parquet":
            n_rows, factor = parquet_rows(path)[0], 1
        else:
            opener = gzip.open if _is_gzip_name(path) else open
            with opener(path, "rb") as handle:
                head = handle.read(1 << 20)
    except (InputFileError, AggregationError, OSError, EOFError):
        return
    if fmt != "parquet":
        lines = max(1, head.count(b"\n"))
        size = path.stat().st_size * (4 if _is_gzip_name(path) else 1)  # gzip: about 4 times smaller
        n_rows, factor = int(size * lines / max(1, len(head))), CSV_READ_FACTOR
    estimate = n_rows * n_columns * FRAME_VALUE_BYTES * (factor + 1)
    if estimate > limit:
        advice = (
            "--aggregate yes counts it with DuckDB without loading the rows"
            if fmt == "parquet"
            else "convert it to Parquet (e.g. with DuckDB or pyarrow) and audit that with --aggregate yes, which "
            "counts the rows without loading them"
        )
        raise InputFileError(
            f"{_name_of(path)}: its about {n_rows:,} rows of {n_columns} columns would need about "
            f"{estimate / 1e6:,.0f} MB of memory to read, more than the limit of {limit / 1e6:,.0f} MB "
            f"({origin}; --memory-limit-mb sets it); {advice}"
        )
