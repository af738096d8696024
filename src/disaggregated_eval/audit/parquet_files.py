"""The files of a Parquet input: found by a walk that always ends, their footers read, one schema rule.

A Parquet input is a file, or a folder whose Parquet files are read as one table (``docs/audit.md``,
"Large data"). The folder is walked here, with :func:`os.scandir`, rather than by a library's dataset
discovery (which follows a link back into the folder forever) or a glob pattern (the folder's own name
would be a pattern: ``exp[12]/`` matches ``exp1/`` and ``exp2/``, not itself). The rules, stated in
``docs/audit.md``:

* Read: every file whose name ends in ``.parquet`` or ``.pq`` (any case) in the folder and its
  subfolders. Ignored (and counted in the progress line): other files (``README.txt``, ``_SUCCESS``),
  and files and folders whose names start with ``.`` or ``_`` (hidden files, Spark's ``_temporary/``
  and ``_metadata``).
* A link to a file is read as that file. A link to a folder is refused, naming it: links to folders
  are not followed (a link may loop back into the folder, or reach files read already). Each file is
  read once: a file reached twice (two links, or hard links, to the same file) is refused, naming both
  paths. So the walk visits each real folder below the path once and ends on any folder.
* A FIFO, device or socket with a Parquet name is refused before it is opened
  (:func:`disaggregated_eval.io.check_regular_file`); so is a folder of more than
  :data:`MAX_PARQUET_FILES` files.
* Hive partitions: a folder below the path named ``key=value`` gives every file below it the column
  ``key`` with that value (split at the first ``=``, so a value may hold ``=``; percent-escapes such as
  ``%3D`` decoded, as Spark and pyarrow write them). The values are typed as a CSV column is (pandas'
  reading of the text: numbers if every value is one, else text, so ``2026-01-01`` and ``2026-1-1``
  stay two levels); an empty value and Hive's ``__HIVE_DEFAULT_PARTITION__`` are missing, as an empty
  CSV field is.
* One schema for the folder (:func:`check_schema`): every file holds every column the audit reads,
  as a column of its own or as a partition folder (never both), each column once; and a column holds
  one kind of values in every file (numbers, text, booleans, dates and times). A file that breaks the
  rule is refused, naming the file, the column and a file that has it.

Each file's footer gives its rows (pyarrow): :func:`.aggregate.aggregate_parquet` checks that DuckDB
read exactly that many.
"""

from __future__ import annotations

import io
import itertools
import os
import stat
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..io import FileReadError, check_regular_file
from ..validation import brief

__all__ = [
    "PARQUET_SUFFIXES",
    "MAX_PARQUET_FILES",
    "MAX_WALKED_ENTRIES",
    "NULL_PARTITION",
    "ParquetInputError",
    "ParquetFile",
    "ParquetInput",
    "find_parquet",
    "parquet_paths",
    "check_schema",
    "partition_values",
    "first_unreadable",
]

#: Names of the files read in a folder (compared in lower case).
PARQUET_SUFFIXES: tuple[str, ...] = (".parquet", ".pq")
#: Most Parquet files of one folder (each is opened for its footer before the count; 10^5 small files
#: took 24 s at a load average of 7): a folder of more is refused before its footers are read.
MAX_PARQUET_FILES = 1_000_000
#: Most entries (files, folders, links) a folder's walk visits in all: a tree of millions of empty
#: folders or other files is refused too, before it fills the memory with their names.
MAX_WALKED_ENTRIES = 10 * MAX_PARQUET_FILES
#: The value Hive and Spark write for a missing partition value.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: Names starting with these are hidden (not read, not walked).
_HIDDEN = (".", "_")
_SHOW = 3
#: Paths of ignored files kept for messages (the rest are counted only).
_KEPT_IGNORED = 100


class ParquetInputError(ValueError):
    """A Parquet file or folder that cannot be read as one table; the message names the file."""


@dataclass(frozen=True)
class ParquetFile:
    """One Parquet file of an input: its path, rows, columns and partition values."""

    path: Path
    rows: int
    kinds: dict[str, list[str]]  # column -> its kind, once per time the column appears in the file
    partitions: dict[str, str | None]  # partition key -> value (None: missing)


@dataclass(frozen=True)
class ParquetInput:
    """The Parquet files of a file or folder (:func:`find_parquet`).

    Attributes
    ----------
    path : pathlib.Path
        The file or folder given.
    files : tuple of ParquetFile
        In the order of their paths.
    ignored : tuple of pathlib.Path
        Files and folders of the folder that are not read (not Parquet, or hidden): the first
        :data:`_KEPT_IGNORED` met (memory stays bounded in a folder of millions of other files).
    n_ignored : int
        How many there are.
    """

    path: Path
    files: tuple[ParquetFile, ...]
    ignored: tuple[Path, ...]
    n_ignored: int = 0

    @property
    def n_rows(self) -> int:
        """Rows of all files, from their footers."""
        return sum(f.rows for f in self.files)

    @property
    def columns(self) -> list[str]:
        """The columns of the files and the partition keys, each once, in the order first seen."""
        seen: dict[str, None] = {}
        for f in self.files:
            seen.update(dict.fromkeys(f.kinds))
            seen.update(dict.fromkeys(f.partitions))
        return list(seen)

    def describe(self) -> str:
        """What was found, for the progress line: ``3 Parquet files (2 other files ignored, e.g. README.txt)``."""
        if not self.path.is_dir():
            return "1 Parquet file"
        text = f"{len(self.files):,} Parquet file{'s' if len(self.files) != 1 else ''}"
        if self.n_ignored:
            shown = ", ".join(brief(p.name, plain=True) for p in self.ignored[:_SHOW])
            more = " ..." if self.n_ignored > _SHOW else ""
            text += f" ({self.n_ignored:,} other file(s) or folder(s) ignored: {shown}{more})"
        return text


def _is_parquet_name(name: str) -> bool:
    return name.lower().endswith(PARQUET_SUFFIXES)


def _is_utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes, kept by the file system's surrogate escapes
        return False
    return True


def _kind(arrow_type) -> str:
    """The kind of values of a column's Arrow type: a column must have one kind in every file."""
    import pyarrow as pa

    t = arrow_type
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_null(t):
        return "null"
    if pa.types.is_boolean(t):
        return "booleans"
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return "numbers"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", lambda _: False)(t):
        return "text"
    if pa.types.is_temporal(t):
        return "dates and times"
    return str(t)


def _partition(segment: str) -> tuple[str, str | None] | None:
    """``key=value`` of a folder name (None: not a partition folder)."""
    key, sep, value = segment.partition("=")
    if not sep or not key:
        return None
    value = urllib.parse.unquote(value)
    return urllib.parse.unquote(key), (None if value in ("", NULL_PARTITION) else value)


def _walk(root: Path) -> tuple[list[tuple[Path, dict[str, str | None]]], list[Path], int]:
    """The Parquet files below ``root`` with their partition values, the first paths ignored and their count."""
    found: list[tuple[Path, dict[str, str | None]]] = []
    ignored: list[Path] = []
    n_ignored = 0

    def ignore(path: Path) -> None:
        nonlocal n_ignored
        n_ignored += 1
        if len(ignored) < _KEPT_IGNORED:
            ignored.append(path)

    seen: dict[tuple[int, int], Path] = {}
    status = os.stat(root)
    seen[(status.st_dev, status.st_ino)] = root
    stack: list[tuple[Path, dict[str, str | None]]] = [(root, {})]
    walked = 0
    while stack:
        folder, partitions = stack.pop()
        try:
            with os.scandir(folder) as listing:  # at most what the bound leaves, whatever the folder holds
                entries = list(itertools.islice(listing, MAX_WALKED_ENTRIES - walked + 1))
        except OSError as exc:
            raise ParquetInputError(f"{folder}: cannot be listed ({exc.strerror or exc})") from None
        entries.sort(key=lambda e: e.name)  # the walk in the order of the paths
        below = []
        walked += len(entries)
        if walked > MAX_WALKED_ENTRIES:
            raise ParquetInputError(
                f"{root}: more than {MAX_WALKED_ENTRIES:,} files and folders below it; audit a part of it, or move "
                f"what is not Parquet out of it"
            )
        for entry in entries:
            path = Path(entry.path)
            if entry.name.startswith(_HIDDEN):
                ignore(path)
                continue
            try:
                target = entry.stat()  # a link's target (cached by scandir for the rest)
            except FileNotFoundError:
                if _is_parquet_name(entry.name):
                    raise ParquetInputError(f"{path}: a link to a file that does not exist") from None
                ignore(path)
                continue
            except OSError as exc:
                raise ParquetInputError(f"{path}: cannot be examined ({exc.strerror or exc})") from None
            key = (target.st_dev, target.st_ino)
            if (stat.S_ISDIR(target.st_mode) or _is_parquet_name(entry.name)) and not _is_utf8(entry.name):
                raise ParquetInputError(  # bytes that are not UTF-8: no reader below can open it
                    f"{str(path)!a}: a name that is not UTF-8 text; rename it (or move it out of {root})"
                )
            if stat.S_ISDIR(target.st_mode):
                if entry.is_symlink():
                    raise ParquetInputError(
                        f"{path}: a link to a folder ({os.path.realpath(path)}); links to folders are not followed "
                        f"(a link may loop back into {root} or reach files read already): put the folder itself "
                        f"there, or remove the link"
                    )
                if key in seen:  # a bind mount or a folder hard link: the same folder again
                    raise ParquetInputError(f"{path}: the same folder as {seen[key]}; its files would be read twice")
                seen[key] = path
                own = dict(partitions)
                part = _partition(entry.name)
                if part is not None:
                    if part[0] in own:
                        raise ParquetInputError(
                            f"{path}: the partition key {part[0]!r} is given twice in the path; give each key once"
                        )
                    own[part[0]] = part[1]
                below.append((path, own))
                continue
            if not _is_parquet_name(entry.name):
                ignore(path)
                continue
            try:
                check_regular_file(path)
            except FileReadError as exc:
                raise ParquetInputError(str(exc)) from None
            if key in seen:
                raise ParquetInputError(
                    f"{path}: the same file as {seen[key]} (a link or a hard link); its rows would be read twice: "
                    f"remove one of them"
                )
            seen[key] = path
            found.append((path, partitions))
            if len(found) > MAX_PARQUET_FILES:
                raise ParquetInputError(
                    f"{root}: more than {MAX_PARQUET_FILES:,} Parquet files; merge them into fewer files (e.g. with "
                    f"DuckDB's COPY), or audit a part of the folder"
                )
        stack.extend(reversed(below))  # the first subfolder next: a walk in the order of the paths
    found.sort(key=lambda item: item[0].parts)
    ignored.sort(key=lambda p: p.parts)
    return found, ignored, n_ignored


def _footer(path: Path, partitions: dict[str, str | None], shared: dict) -> ParquetFile:
    """One file's footer; files of one schema share one ``kinds`` mapping (``shared``), so that memory
    follows the distinct schemas, not the files times their columns."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        metadata = pq.read_metadata(path)
        schema = metadata.schema.to_arrow_schema()
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise ParquetInputError(f"{path}: not a readable Parquet file ({brief(str(exc), 200)})") from None
    key = tuple((f.name, _kind(f.type)) for f in schema)
    kinds = shared.get(key)
    if kinds is None:
        kinds = {}
        for name, kind in key:
            kinds.setdefault(name, []).append(kind)
        shared[key] = kinds
    return ParquetFile(path, int(metadata.num_rows), kinds, partitions)


def find_parquet(path: str | os.PathLike[str]) -> ParquetInput:
    """The Parquet files of a file or folder, with their rows, column kinds and partition values.

    Parameters
    ----------
    path : path-like
        A Parquet file, or a folder of them (module docstring: which files are read).

    Returns
    -------
    ParquetInput

    Raises
    ------
    ParquetInputError
        Naming the path: it does not exist, is not a regular file or folder, a folder holds no Parquet
        file, a link to a folder or a file reached twice, more than :data:`MAX_PARQUET_FILES` files, a
        partition key given twice in a path, a file that is not readable Parquet.

    Examples
    --------
    >>> import tempfile
    >>> import pandas as pd
    >>> folder = Path(tempfile.mkdtemp()) / "exp[12]"
    >>> (folder / "day=2026-01-01").mkdir(parents=True)
    >>> pd.DataFrame({"y": [0, 1, 1]}).to_parquet(folder / "day=2026-01-01" / "part-0.parquet")
    >>> _ = (folder / "README.txt").write_text("ignored")
    >>> found = find_parquet(folder)
    >>> found.n_rows, found.columns, found.describe()
    (3, ['y', 'day'], '1 Parquet file (1 other file(s) or folder(s) ignored: README.txt)')
    """
    path = Path(path)
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise ParquetInputError(f"{path}: no such file or folder") from None
    except OSError as exc:
        raise ParquetInputError(f"{path}: cannot be examined ({exc.strerror or exc})") from None
    if stat.S_ISDIR(status.st_mode):
        found, ignored, n_ignored = _walk(path)
        if not found:
            raise ParquetInputError(
                f"{path}: a folder without Parquet files (names ending in {' or '.join(PARQUET_SUFFIXES)}); expected "
                f"Parquet files (hive partitions allowed)"
            )
    else:
        try:
            check_regular_file(path)
        except FileReadError as exc:
            raise ParquetInputError(str(exc)) from None
        found, ignored, n_ignored = [(path, {})], [], 0
    shared: dict = {}
    files = tuple(_footer(p, parts, shared) for p, parts in found)
    return ParquetInput(path, files, tuple(ignored), n_ignored)


def parquet_paths(folder: str | os.PathLike[str]) -> list[Path]:
    """The paths of the Parquet files a folder's audit reads, in order (:func:`find_parquet`'s files,
    without reading their footers): for the manifest's record of the input.

    Raises
    ------
    ParquetInputError
        As :func:`find_parquet`'s walk of a folder.

    Examples
    --------
    >>> import tempfile
    >>> import pandas as pd
    >>> folder = Path(tempfile.mkdtemp())
    >>> for name in ("b.pq", "a.parquet", "_tmp.parquet"):
    ...     pd.DataFrame({"y": [0, 1]}).to_parquet(folder / name)
    >>> [p.name for p in parquet_paths(folder)]
    ['a.parquet', 'b.pq']
    """
    return [p for p, _ in _walk(Path(folder))[0]]


def check_schema(source: ParquetInput, columns: Sequence[str]) -> None:
    """Check the folder's one schema rule for ``columns`` (module docstring), naming the file that breaks it.

    Parameters
    ----------
    source : ParquetInput
    columns : sequence of str
        The columns the audit reads.

    Raises
    ------
    ParquetInputError
        A column that is in no file (naming the columns there are), a file lacking a column another
        file has, a column both in a file and in its partition folders, a column given twice in one
        file, or a column of different kinds of values in two files.
    """
    wanted = list(dict.fromkeys(columns))
    present = set(source.columns)
    absent = [c for c in wanted if c not in present]
    if absent:
        raise ParquetInputError(
            f"{source.path}: no column(s) {brief(absent)}; its columns are {brief(source.columns, 300)}"
        )
    having: dict[str, Path] = {}
    kinds: dict[str, tuple[str, Path]] = {}
    for f in source.files:
        for c in wanted:
            in_file = c in f.kinds
            if in_file and c in f.partitions:
                raise ParquetInputError(
                    f"{f.path}: the column {c!r} is both in the file and a partition folder ({c}=...) of its path; "
                    f"which one is meant? rename one of them"
                )
            if not in_file and c not in f.partitions:
                other = having.get(c) or next(g.path for g in source.files if c in g.kinds or c in g.partitions)
                raise ParquetInputError(
                    f"{f.path}: has no column {c!r} (neither in the file nor as a partition folder {c}=...), which "
                    f"{other} has; every file of a folder must hold every column the audit reads"
                )
            having.setdefault(c, f.path)
            if not in_file:
                kind = "partition values"
            elif len(f.kinds[c]) > 1:
                raise ParquetInputError(f"{f.path}: the column {c!r} appears {len(f.kinds[c])} times; give it once")
            else:
                kind = f.kinds[c][0]
            if kind == "null":  # a column with no value at all fits any kind
                continue
            first = kinds.setdefault(c, (kind, f.path))
            if first[0] != kind:
                raise ParquetInputError(
                    f"{f.path}: the column {c!r} holds {kind}, but {first[0]} in {first[1]}; every file must give a "
                    f"column the same kind of values (numbers, text, booleans, dates and times)"
                )


def partition_values(source: ParquetInput, keys: Sequence[str]) -> pd.DataFrame:
    """The partition values of every file, one row per file, typed as a CSV column is.

    Parameters
    ----------
    source : ParquetInput
    keys : sequence of str
        Partition keys (every file has them: :func:`check_schema`).

    Returns
    -------
    pandas.DataFrame of shape (n_files, len(keys))
        Row ``i`` for ``source.files[i]``; each column as pandas reads the values written as one CSV
        column (numbers if every present value is one, else text; missing values as a CSV's empty field).
    """
    keys = list(keys)
    if not keys:
        return pd.DataFrame(index=range(len(source.files)))
    text = io.StringIO()
    frame = pd.DataFrame({k: [f.partitions[k] for f in source.files] for k in keys}, dtype=object)
    frame.to_csv(text, index=False, header=[f"c{i}" for i in range(len(keys))])
    typed = pd.read_csv(io.StringIO(text.getvalue()), low_memory=False)
    typed.columns = keys
    return typed


def first_unreadable(
    source: ParquetInput, columns: Sequence[str], *, seconds: float = 60.0
) -> tuple[tuple[Path, str] | None, int]:
    """The first file whose ``columns`` pyarrow cannot read, row group by row group (for a message
    after a failed read: the footers were readable, a data page is not).

    Parameters
    ----------
    source : ParquetInput
    columns : sequence of str
        The columns read (partition keys are skipped: they are not in the files).
    seconds : float, default 60
        Time after which the search stops (a large folder is read in full otherwise).

    Returns
    -------
    found : (path, reason) or None
        The file and pyarrow's error; None when no file checked failed.
    n_checked : int
        Files read in full (``len(source.files)`` when every file was).

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> pd.DataFrame({"y": [0, 1]}).to_parquet(folder / "a.parquet")
    >>> first_unreadable(find_parquet(folder), ["y"])
    (None, 1)
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = list(dict.fromkeys(columns))
    start = time.monotonic()
    for i, f in enumerate(source.files):
        if i and time.monotonic() - start > seconds:
            return None, i
        present = [c for c in wanted if c in f.kinds]
        try:
            with pq.ParquetFile(f.path) as reader:
                for group in range(reader.metadata.num_row_groups):
                    reader.read_row_group(group, columns=present)
        except (pa.ArrowException, OSError, ValueError) as exc:
            return (f.path, brief(str(exc), 200)), i
    return None, len(source.files)
