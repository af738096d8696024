"""ACS PUMS acquisition, extraction and task definitions (paper Supplementary A.4; ``docs/method.md``).

The study uses the American Community Survey (ACS) Public Use Microdata Sample (PUMS) person file of
one state and survey period (the paper: California, 2018, 5-Year) and two prediction tasks of
`folktables <https://github.com/socialfoundations/folktables>`_: ``ACSIncome`` and
``ACSPublicCoverage``. The task definitions (features, target, target transform, row filter) are
taken from folktables' own objects, not re-typed here; this module adds

- acquisition in folktables' file layout (:func:`person_file_path`, :func:`obtain_person_file`),
  with downloads that either produce the complete file or fail loudly (:class:`PumsDownloadError`);
- a check of the file (:func:`validate_person_file`: compressed or non-text files, missing columns,
  no rows, a truncated last line) and of the filtered cohort (:func:`check_cohort`: rows per group and
  label, enough for the model stage's folds);
- a column-selective, typed reader (:func:`extract_task`) that gives the same rows and labels as
  ``ACSDataSource.get_data`` + ``task.df_to_pandas`` but reads only the needed columns;
- the race/ethnicity group of paper Supplementary A.4 (:func:`race_ethnicity_group`);
- the split and integer coding for HistGradientBoosting (:func:`encode_and_split`);
- the cohort table (paper Table B4; :func:`cohort_table`, :func:`cohort_markdown`).

Differences from folktables' output, all deliberate:

- Missing feature values stay ``NaN``. folktables' ``postprocess`` is ``np.nan_to_num(x, -1)``,
  whose second positional argument is ``copy``, so folktables turns missing values into ``0.0``.
- ``RAC1P`` is dropped from the features; the group ``a`` (paper Supplementary A.4) replaces it.
- The label is ``int64`` 0/1 instead of ``bool``.
"""

from __future__ import annotations

import contextlib
import csv
import importlib
import io
import math
import os
import re
import shlex
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import folktables
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pacsv
from sklearn.model_selection import train_test_split

from . import seeds, vocabulary
from .io import remove_stale_temporaries, temporary_sibling

# ``folktables.load_acs`` is shadowed by the function of the same name that folktables re-exports, so
# the module is taken from importlib.
_fl_load = importlib.import_module("folktables.load_acs")

__all__ = [
    "TASKS",
    "GROUP_LABELS",
    "NUMERIC_FEATURES",
    "DEFAULT_YEAR",
    "DEFAULT_HORIZON",
    "DEFAULT_STATE",
    "FILTER_CONDITIONS",
    "PumsDownloadError",
    "person_file_path",
    "person_file_url",
    "obtain_person_file",
    "validate_person_file",
    "required_columns",
    "race_ethnicity_group",
    "filter_text",
    "extract_task",
    "CohortMinimum",
    "cohort_minimum",
    "check_cohort",
    "encode_and_split",
    "cohort_table",
    "cohort_markdown",
]

#: Dataset id -> folktables task name (one home: :data:`disaggregated_eval.vocabulary.TASKS`).
TASKS: dict[str, str] = vocabulary.TASKS

#: Display labels of the group codes ``a = 0..5`` (alphabetical; :data:`vocabulary.ACS_GROUP_LABELS`).
GROUP_LABELS: tuple[str, ...] = vocabulary.ACS_GROUP_LABELS

#: Numeric (not categorical) features per dataset (paper Supplementary A.4); every other feature is
#: categorical.
NUMERIC_FEATURES: dict[str, tuple[str, ...]] = {
    "acs_income": ("AGEP", "WKHP"),
    "acs_public_coverage": ("AGEP", "PINCP"),
}

#: folktables' row filters (``adult_filter``, ``public_coverage_filter``) written out as
#: ``(column, operator, value)`` conditions, all of which a row must meet. folktables exposes the filters
#: only as functions, which :func:`extract_task` applies; this copy names the columns to read and the
#: condition that removed every row in error messages (a test checks it against folktables).
FILTER_CONDITIONS: dict[str, tuple[tuple[str, str, float], ...]] = {
    "ACSIncome": (("AGEP", ">", 16), ("PINCP", ">", 100), ("WKHP", ">", 0), ("PWGTP", ">=", 1)),
    "ACSPublicCoverage": (("AGEP", "<", 65), ("PINCP", "<=", 30000)),
}
_FILTER_COLUMNS: dict[str, tuple[str, ...]] = {
    name: tuple(dict.fromkeys(column for column, _, _ in conditions)) for name, conditions in FILTER_CONDITIONS.items()
}
_OPERATORS = {">": np.greater, ">=": np.greater_equal, "<": np.less, "<=": np.less_equal}

#: The paper's survey (Supplementary A.4).
DEFAULT_YEAR = 2018
DEFAULT_HORIZON = "5-Year"
DEFAULT_STATE = "CA"

_GROUP_COLUMNS = ("RAC1P", "HISP")
_RAC1P_CODES = frozenset(range(1, 10))
_HISP_CODES = frozenset(range(1, 25))
# RAC1P -> group code for non-Hispanic persons (Supplementary A.4): 1 White, 2 Black, 6 Asian, 9 Multiracial,
# 3/4/5/7/8 Other.  Codes: 0 Asian, 1 Black, 2 Hispanic, 3 Multiracial, 4 Other, 5 White.
_RAC1P_TO_GROUP = {1: 5, 2: 1, 3: 4, 4: 4, 5: 4, 6: 0, 7: 4, 8: 4, 9: 3}
_HISPANIC = 2

_CENSUS_PUMS_URL = "https://www2.census.gov/programs-surveys/acs/data/pums"


class PumsDownloadError(RuntimeError):
    """A PUMS file could not be downloaded; no partial file was left behind.

    Attributes
    ----------
    url : str
        The URL that was requested.
    status : int or None
        The HTTP status of the response, or ``None`` if no response arrived.
    reason : str
        The network error or the reason the response was unusable.
    path : pathlib.Path
        Where the person file is expected (to place it by hand).
    """

    def __init__(self, message: str, *, url: str, status: int | None, reason: str, path: Path):
        super().__init__(message)
        self.url = url
        self.status = status
        self.reason = reason
        self.path = path


# ---------------------------------------------------------------------------------------------------
# File layout and acquisition


def _check_survey(year: int, horizon: str, state: str) -> tuple[int, str, str]:
    if isinstance(year, bool) or not isinstance(year, (int, np.integer, str)):
        raise TypeError(f"year must be an integer such as 2018; got {year!r}")
    try:
        year_int = int(year)
    except ValueError:
        raise ValueError(f"year must be an integer such as 2018; got {year!r}") from None
    if year_int < 2014:
        raise ValueError(f"folktables supports PUMS survey years from 2014 on; got year={year!r}")
    if horizon not in vocabulary.HORIZONS:
        raise ValueError(f"horizon must be one of {list(vocabulary.HORIZONS)}; got {horizon!r}")
    if state not in vocabulary.STATES:
        raise ValueError(
            f"state must be a two-letter postal code known to folktables ({', '.join(vocabulary.STATES)}); got {state!r}"
        )
    return year_int, horizon, state


def _file_names(year: int, state: str) -> tuple[str, str]:
    """(person CSV name, remote zip name), as in ``folktables.load_acs.initialize_and_download``."""
    if year >= 2017:
        csv_name = f"psam_p{_fl_load._STATE_CODES[state]}.csv"
    else:  # 2016 and earlier use other file names
        csv_name = f"ss{str(year)[-2:]}p{state.lower()}.csv"
    return csv_name, f"csv_p{state.lower()}.zip"


def person_file_path(
    root: str | os.PathLike[str],
    *,
    year: int = DEFAULT_YEAR,
    horizon: str = DEFAULT_HORIZON,
    state: str = DEFAULT_STATE,
) -> Path:
    """Return where folktables keeps a PUMS person file: ``<root>/<year>/<horizon>/psam_p<fips>.csv``.

    Parameters
    ----------
    root : path-like
        folktables' ``root_dir``.
    year : int, default 2018
        Survey year (2014 or later). Years before 2017 use folktables' ``ss<yy>p<state>.csv`` name.
    horizon : {"1-Year", "5-Year"}, default "5-Year"
        Survey period.
    state : str, default "CA"
        Two-letter postal code; the file name uses its FIPS code (CA -> ``psam_p06.csv``).

    Returns
    -------
    pathlib.Path

    Raises
    ------
    ValueError
        If ``year``, ``horizon`` or ``state`` is not supported by folktables.
    """
    year, horizon, state = _check_survey(year, horizon, state)
    return Path(root) / str(year) / horizon / _file_names(year, state)[0]


def person_file_url(*, year: int = DEFAULT_YEAR, horizon: str = DEFAULT_HORIZON, state: str = DEFAULT_STATE) -> str:
    """Return the Census URL of the zipped person file (the URL folktables downloads).

    Raises
    ------
    ValueError
        If ``year``, ``horizon`` or ``state`` is not supported by folktables.
    """
    year, horizon, state = _check_survey(year, horizon, state)
    return f"{_CENSUS_PUMS_URL}/{year}/{horizon}/{_file_names(year, state)[1]}"


def _manual_instructions(target: Path, url: str) -> str:
    csv_name = target.name
    return (
        f"To place the file by hand: download {url}, unzip it and move {csv_name} to {target} "
        f"(for example: curl -fLO {url} && unzip -o {Path(url).name} {csv_name} -d {target.parent})."
    )


_RECORDER_LOCK = threading.Lock()


class _RecordingRequests:
    """Stand-in for the ``requests`` module inside ``folktables.load_acs`` that records responses.

    folktables' ``download_and_extract`` calls ``requests.get(url)`` without checking the status and
    ``initialize_and_download`` prints and swallows any error. To report the URL and the HTTP status,
    the download runs with this recorder in place of folktables' module-level ``requests`` name (only
    that name, only for the duration of the call).
    """

    def __init__(self, real: Any):
        self._real = real
        self.calls: list[tuple[str, int | None]] = []

    def get(self, url: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append((url, None))
        response = self._real.get(url, *args, **kwargs)
        self.calls[-1] = (url, int(response.status_code))
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def _recording_folktables_requests() -> Iterator[_RecordingRequests]:
    with _RECORDER_LOCK:
        real = _fl_load.requests
        recorder = _RecordingRequests(real)
        _fl_load.requests = recorder
        try:
            yield recorder
        finally:
            _fl_load.requests = real


def obtain_person_file(
    root: str | os.PathLike[str],
    *,
    year: int = DEFAULT_YEAR,
    horizon: str = DEFAULT_HORIZON,
    state: str = DEFAULT_STATE,
    download: bool = True,
) -> Path:
    """Return the path of a PUMS person file, downloading it through folktables if missing.

    A present file is returned as is, without any network access. A missing file is downloaded with
    folktables' helper (``folktables.load_acs.initialize_and_download``, the one
    ``ACSDataSource.get_data(download=True)`` uses) into a temporary folder next to the target, and
    renamed into place only when the CSV was extracted completely; the zip and any partial file are
    removed in every case. Download folders left by a killed earlier attempt are removed first
    (:func:`disaggregated_eval.io.remove_stale_temporaries`).

    Parameters
    ----------
    root : path-like
        folktables' ``root_dir``; the file is ``<root>/<year>/<horizon>/psam_p<fips>.csv``.
    year : int, default 2018
    horizon : {"1-Year", "5-Year"}, default "5-Year"
    state : str, default "CA"
    download : bool, default True
        Download a missing file. If False, a missing file raises :class:`FileNotFoundError`.

    Returns
    -------
    pathlib.Path
        The path of the person CSV.

    Raises
    ------
    FileNotFoundError
        If the file is missing and ``download`` is False (the message gives the expected path, the
        URL and how to place the file by hand).
    PumsDownloadError
        If the download fails: the message names the URL, the HTTP status or the network error, and
        the exact path to place the file by hand.
    ValueError
        If ``year``, ``horizon`` or ``state`` is not supported by folktables.
    """
    year, horizon, state = _check_survey(year, horizon, state)
    target = person_file_path(root, year=year, horizon=horizon, state=state)
    if target.is_file():
        return target
    url = person_file_url(year=year, horizon=horizon, state=state)
    if not download:
        raise FileNotFoundError(
            f"the ACS PUMS {year} {horizon} person file for {state} was not found at {target}. "
            f"Call with download=True to download it through folktables, or place it by hand. "
            + _manual_instructions(target, url)
        )

    # Download folders of killed earlier attempts (``.<name>.<pid>-<token>.download``) go first.
    remove_stale_temporaries(target, suffix=".download")
    workdir = temporary_sibling(target, suffix=".download", directory=True)
    printed = io.StringIO()
    try:
        with _recording_folktables_requests() as recorder, contextlib.redirect_stdout(printed):
            try:
                _fl_load.initialize_and_download(str(workdir), state, str(year), horizon, "person", download=True)
                raised: BaseException | None = None
            except Exception as exc:  # folktables swallows most errors; anything else is reported too
                raised = exc
        extracted = workdir / target.name
        if raised is None and extracted.is_file() and extracted.stat().st_size > 0:
            os.replace(extracted, target)
            return target
        status = recorder.calls[-1][1] if recorder.calls else None
        requested = recorder.calls[-1][0] if recorder.calls else url
        if raised is not None:
            reason = f"{type(raised).__name__}: {raised}"
        else:
            lines = [ln.strip() for ln in printed.getvalue().splitlines() if ln.strip()]
            reason = next((ln for ln in reversed(lines) if ln.startswith("Exception")), "")
            reason = reason.replace("Exception: ", "", 1).strip() or "no CSV was extracted"
        if status is None:
            what = f"network error: {reason}"
        elif status >= 400:
            what = f"HTTP status {status} ({reason})"
        else:
            what = f"HTTP status {status}, but the response was not a usable zip with {target.name} ({reason})"
        raise PumsDownloadError(
            f"downloading the ACS PUMS {year} {horizon} person file for {state} from {requested} "
            f"failed: {what}. No partial file was left at {target}. " + _manual_instructions(target, requested),
            url=requested,
            status=status,
            reason=reason,
            path=target,
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ---------------------------------------------------------------------------------------------------
# Task definitions and validation


def _check_dataset(dataset: str) -> folktables.BasicProblem:
    if dataset not in TASKS:
        raise ValueError(f"dataset must be one of {sorted(TASKS)}; got {dataset!r}")
    return getattr(folktables, TASKS[dataset])


def required_columns(dataset: str) -> tuple[str, ...]:
    """Return the person-file columns needed for ``dataset``, in folktables' feature order.

    The task's features, target and filter columns (from folktables' task definition) plus ``RAC1P``
    and ``HISP`` for the group.

    Raises
    ------
    ValueError
        If ``dataset`` is not a key of :data:`TASKS`.
    """
    task = _check_dataset(dataset)
    cols = [*task.features, task.target, *_FILTER_COLUMNS[TASKS[dataset]], *_GROUP_COLUMNS]
    return tuple(dict.fromkeys(cols))


# Leading bytes of files that are not a plain CSV, what they are and how to get the CSV out of them.
# The commands decompress into a new file and rename it over the target only if that worked: a command
# that writes into the file it reads (`gunzip -c f.csv > f.csv`) would truncate the user's file first.
_NOT_CSV = (
    (b"\x1f\x8b", "a gzip-compressed file", "gunzip -c"),
    (b"PK\x03\x04", "a zip archive", None),
    (b"BZh", "a bzip2-compressed file", "bunzip2 -c"),
    (b"\xfd7zXZ", "an xz-compressed file", "xz -dc"),
)


def _decompress_advice(path: Path, command: str | None) -> str:
    """How to get the CSV out of a compressed ``path``, as a command that cannot truncate any file."""
    if command is None:
        return "unzip it and use the psam_p*.csv inside"
    source = shlex.quote(str(path))
    stem = path.name
    for suffix in (".gz", ".bz2", ".xz", ".csv"):
        stem = stem.removesuffix(suffix)
    target = path.with_name(stem + ".csv")
    part = shlex.quote(str(target) + ".part")
    return (
        f"decompress it first, into a new file renamed over {target.name} only if that worked: "
        f"{command} {source} > {part} && mv {part} {shlex.quote(str(target))}"
    )


#: Longest header line of a PUMS file read (a PUMS header is about 3 KB).
_MAX_HEADER_BYTES = 1 << 20


def _read_header(path: Path, year: int) -> list[str]:
    """Column names of a PUMS CSV; compressed or non-UTF-8 files are named as such."""
    with open(path, "rb") as f:
        start = f.read(8)
        for magic, what, command in _NOT_CSV:
            if start.startswith(magic):
                raise ValueError(
                    f"{path} is {what}, not a CSV text file (survey year {year}): " + _decompress_advice(path, command)
                )
        f.seek(0)
        line = f.readline(_MAX_HEADER_BYTES + 1)  # bounded: a file without line ends is not read whole
    if len(line) > _MAX_HEADER_BYTES and not line.endswith(b"\n"):
        raise ValueError(
            f"{path}: its first line is longer than {_MAX_HEADER_BYTES:,} bytes (survey year {year}); expected the "
            "header of a PUMS person CSV (a few hundred column names)"
        )
    try:
        text = line.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path} is not a UTF-8 CSV text file (survey year {year}): line 1 has the byte "
            f"0x{line[exc.start]:02x} at byte {exc.start + 1}; expected a PUMS person CSV"
        ) from None
    return [c.strip().strip('"') for c in text.rstrip("\r\n").split(",")] if line else []


def _missing_column_hint(column: str, year: int, header: Sequence[str]) -> str:
    renamed = vocabulary.PUMS_RENAMED_COLUMNS.get(column)
    if renamed is not None and year >= renamed[1]:
        new, since = renamed
        return f" (PUMS files from {since} on replaced {column} by {new}; folktables' task definition needs {column})"
    if column == "ST" and "STATE" in header:
        return " (this file has STATE instead, as in PUMS 2024 and later)"
    return ""


def _check_header(path: Path, header: Sequence[str], year: int, tasks: Sequence[str]) -> list[str]:
    present = set(header)
    needed = list(dict.fromkeys(c for d in tasks for c in required_columns(d)))
    missing = [c for c in needed if c not in present]
    if missing:
        column = missing[0]
        users = [TASKS[d] for d in tasks if column in required_columns(d)]
        others = "".join(f"; also missing: {c!r}{_missing_column_hint(c, year, header)}" for c in missing[1:])
        raise ValueError(
            f"column {column!r} needed by {', '.join(users)} is missing from {path} "
            f"(survey year {year}){_missing_column_hint(column, year, header)}{others}"
        )
    return needed


def _count_fields(line: bytes) -> int:
    """Number of CSV fields of one line (quotes respected)."""
    text = line.decode("utf-8", errors="replace").rstrip("\r\n")
    return len(next(csv.reader([text]), [""]))


def _scan_lines(path: Path, chunk_size: int = 1 << 24) -> tuple[int, bytes]:
    """(number of lines, the last non-empty line), reading the file in binary chunks."""
    newlines, tail = 0, b""
    with open(path, "rb") as f:
        while chunk := f.read(chunk_size):
            newlines += chunk.count(b"\n")
            # Keep only the bytes after the last complete line break but one (the last line).
            tail = (tail + chunk[-(1 << 20) :])[-(1 << 20) :]
    stripped = tail.rstrip(b"\r\n")
    lines = newlines + (not tail.endswith(b"\n") and bool(tail))
    return lines, stripped.rsplit(b"\n", 1)[-1]


def _first_bad_line(
    path: Path, header: Sequence[str], *, column: int | None = None, value: str | None = None
) -> tuple[int, str] | None:
    """The first data line (1-based line number, text) whose field count differs from the header's,
    or, with ``column`` and ``value``, whose field ``column`` equals ``value``. Used on error paths only."""
    width = len(header)
    with open(path, "rb") as f:
        f.readline()
        for number, line in enumerate(f, start=2):
            fields = next(csv.reader([line.decode("utf-8", errors="replace").rstrip("\r\n")]), [])
            if column is None:
                if len(fields) != width and line.strip():
                    return number, f"has {len(fields)} fields but the header has {width}"
            elif column < len(fields) and fields[column].strip() == value:
                return number, f"has {value!r} in column {header[column]!r}"
    return None


def validate_person_file(
    path: str | os.PathLike[str],
    *,
    year: int,
    tasks: Sequence[str] = tuple(TASKS),
) -> dict[str, Any]:
    """Check that a PUMS person file is a complete CSV with every column the tasks need.

    The header is parsed, the rows are counted by scanning the file for line breaks, and the last line
    must have as many fields as the header (a shorter one is the mark of a truncated download or copy).

    Parameters
    ----------
    path : path-like
        A PUMS person CSV.
    year : int
        Survey year of the file (named in errors; PUMS column names change between years).
    tasks : sequence of str, default all of :data:`TASKS`
        Dataset ids whose columns are required.

    Returns
    -------
    dict
        ``{"path": str, "bytes": int, "rows": int, "columns": list[str]}`` with ``columns`` the
        required columns that were checked.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is compressed (gzip, zip, bzip2, xz) or not UTF-8 text, a required column is missing
        (the message names the column, the file and the year), the file has no data rows, its last line
        is truncated (the message gives the line number and the field counts), or a dataset id is unknown.
    """
    p = Path(path)
    for d in tasks:
        _check_dataset(d)
    if not p.is_file():
        raise FileNotFoundError(f"PUMS person file not found: {p}")
    year = int(year)
    header = _read_header(p, year)
    if not header or header == [""]:
        raise ValueError(f"{p} is empty: expected a PUMS person CSV with a header (survey year {year})")
    checked = _check_header(p, header, year, tasks)
    lines, last = _scan_lines(p)
    rows = max(lines - 1, 0)
    if rows == 0:
        raise ValueError(f"{p} has a header but no data rows (survey year {year})")
    fields = _count_fields(last)
    if fields != len(header):
        raise ValueError(
            f"{p} looks truncated: its last line (line {lines}) has {fields} fields but the header has "
            f"{len(header)} (survey year {year}; an interrupted download or copy?). Replace it with a complete copy."
        )
    return {"path": str(p), "bytes": p.stat().st_size, "rows": rows, "columns": checked}


def race_ethnicity_group(rac1p: Any, hisp: Any) -> np.ndarray:
    """Map PUMS race (``RAC1P``) and Hispanic origin (``HISP``) codes to the group of paper Supplementary A.4.

    ``Hispanic`` if ``HISP != 1``; otherwise by ``RAC1P``: 1 White, 2 Black, 6 Asian, 9 Multiracial,
    3/4/5/7/8 Other. Codes follow :data:`GROUP_LABELS` (alphabetical): 0 Asian, 1 Black, 2 Hispanic,
    3 Multiracial, 4 Other, 5 White.

    Parameters
    ----------
    rac1p : array-like of shape (n_samples,)
        ``RAC1P`` codes 1-9.
    hisp : array-like of shape (n_samples,)
        ``HISP`` codes 1-24 (1 = not Spanish/Hispanic/Latino).

    Returns
    -------
    ndarray of shape (n_samples,), dtype int64

    Raises
    ------
    ValueError
        If a code is missing or outside the known sets (the message names the codes).
    """
    r = np.asarray(rac1p, dtype=np.float64)
    h = np.asarray(hisp, dtype=np.float64)
    if r.shape != h.shape or r.ndim != 1:
        raise ValueError(f"rac1p and hisp must be 1-d of equal length; got shapes {r.shape} and {h.shape}")
    for name, values, known in (("RAC1P", r, _RAC1P_CODES), ("HISP", h, _HISP_CODES)):
        bad = ~np.isin(values, np.fromiter(known, dtype=np.float64))
        if bad.any():
            shown = {"missing" if np.isnan(v) else int(v) if v == int(v) else float(v) for v in values[bad]}
            codes = sorted(shown, key=lambda c: (isinstance(c, str), c if not isinstance(c, str) else 0))
            raise ValueError(
                f"unknown {name} code(s) {codes} in {int(bad.sum())} row(s); expected {min(known)}-{max(known)}"
            )
    lookup = np.full(10, -1, dtype=np.int64)
    for code, group in _RAC1P_TO_GROUP.items():
        lookup[code] = group
    return np.where(h != 1, _HISPANIC, lookup[r.astype(np.int64)])


# ---------------------------------------------------------------------------------------------------
# Extraction


def _read_columns(path: Path, columns: Sequence[str]) -> pd.DataFrame:
    table = pacsv.read_csv(
        path,
        convert_options=pacsv.ConvertOptions(
            include_columns=list(columns),
            column_types={c: pa.float64() for c in columns},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=True,
        ),
    )
    return table.to_pandas(self_destruct=True, split_blocks=True)


def filter_text(dataset: str) -> str:
    """folktables' row filter of ``dataset`` in words, e.g. ``"AGEP > 16 and PINCP > 100 and ..."``."""
    _check_dataset(dataset)
    return " and ".join(f"{column} {op} {value:g}" for column, op, value in FILTER_CONDITIONS[TASKS[dataset]])


def _arrow_error_message(path: Path, header: Sequence[str], year: int, exc: Exception) -> str:
    """Name the file, line and column of a pyarrow read error (found by scanning the file)."""
    text = str(exc)
    if "Expected" in text and "columns, got" in text:
        bad = _first_bad_line(path, header)
        where = f"line {bad[0]} of {path} {bad[1]}" if bad else f"{path} has a line with the wrong number of fields"
        return f"{where} (survey year {year}; a truncated or damaged file? Replace it with a complete copy): {exc}"
    found = re.search(r"CSV column #(\d+)", text)
    value = re.search(r"invalid value '(.*)'", text)
    if found and int(found.group(1)) < len(header):
        index = int(found.group(1))
        bad = _first_bad_line(path, header, column=index, value=value.group(1)) if value else None
        line = f", line {bad[0]}" if bad else ""
        return (
            f"could not read column {header[index]!r} of {path}{line} (survey year {year}) as a numeric PUMS "
            f"code: {exc}"
        )
    return f"could not read {path} (survey year {year}) as a PUMS person CSV: {exc}"


def extract_task(
    path: str | os.PathLike[str],
    dataset: str,
    *,
    year: int,
) -> pd.DataFrame:
    """Extract one folktables task from a PUMS person file, with the group of paper Supplementary A.4.

    Reads only the needed columns (:func:`required_columns`) as float64 with pyarrow (blank cells
    become NaN), then applies folktables' own task definition: its row filter, its feature list and
    its target transform. The rows and labels equal those of ``ACSDataSource.get_data`` followed by
    ``task.df_to_pandas`` on the same file (same order).

    Parameters
    ----------
    path : path-like
        A PUMS person CSV (e.g. from :func:`obtain_person_file`).
    dataset : {"acs_income", "acs_public_coverage"}
        Dataset id (:data:`TASKS`).
    year : int
        Survey year of the file (named in errors; PUMS column names change between years).

    Returns
    -------
    pandas.DataFrame
        One row per person passing the task's filter, in file order, with columns: the task's features
        in folktables' order without ``RAC1P`` (float64 raw PUMS codes, NaN where the PUMS cell is
        blank), ``a`` (int64 group code 0..5, :data:`GROUP_LABELS`), ``y`` (int64 0/1 label).

    Raises
    ------
    ValueError
        If ``dataset`` is unknown, the file is compressed or not UTF-8 text, a needed column is missing,
        a line has the wrong number of fields or a value cannot be read as a number (the message names
        the file, the line and the column), a ``RAC1P``/``HISP`` code is outside the known sets, or no
        row passes the task's filter (the message gives the rows meeting each condition).
    FileNotFoundError
        If ``path`` does not exist.

    Notes
    -----
    folktables' ``df_to_pandas`` returns ``0.0`` for missing features (its ``postprocess`` is
    ``np.nan_to_num(x, -1)``, where ``-1`` is the ``copy`` argument); this function keeps NaN.
    """
    task = _check_dataset(dataset)
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"PUMS person file not found: {p}")
    year = int(year)
    header = _read_header(p, year)
    columns = _check_header(p, header, year, (dataset,))
    try:
        frame = _read_columns(p, columns)
    except pa.ArrowInvalid as exc:
        raise ValueError(_arrow_error_message(p, header, year, exc)) from exc
    try:
        group = race_ethnicity_group(frame["RAC1P"].to_numpy(), frame["HISP"].to_numpy())
    except ValueError as exc:
        raise ValueError(f"{p}: {exc}") from None
    frame["__group__"] = group
    # folktables 0.0.12 keeps the row filter in the private ``_preprocess``; there is no public accessor.
    filtered = task._preprocess(frame)
    if filtered.empty:
        raise ValueError(
            f"{dataset} (folktables {TASKS[dataset]}): no row of {p} (survey year {year}) passes the task's "
            f"filter {filter_text(dataset)}; rows meeting each condition on its own: "
            + "; ".join(
                f"{column} {op} {value:g}: {int(np.sum(_OPERATORS[op](frame[column].to_numpy(), value))):,}"
                for column, op, value in FILTER_CONDITIONS[TASKS[dataset]]
            )
            + f" (of {len(frame):,})"
        )
    features = [f for f in task.features if f != "RAC1P"]
    out = filtered[features].astype(np.float64).reset_index(drop=True)
    out["a"] = filtered["__group__"].to_numpy(dtype=np.int64)
    out["y"] = np.asarray(task.target_transform(filtered[task.target]), dtype=np.int64)
    return out


class CohortMinimum(NamedTuple):
    """Rows of the filtered cohort that the model stage needs (:func:`cohort_minimum`)."""

    per_label: int  #: rows of each label in each group
    per_group: int  #: rows of each group
    test_per_group: int  #: of which in the test split


def cohort_minimum(*, cv_folds: int, crossfit_folds: int, test_size: float) -> CohortMinimum:
    """Rows each group, and each label within it, needs in the filtered cohort for the model stage.

    :func:`encode_and_split` splits the cohort stratified on group x label, so each split gets each
    (group, label) share up to rounding: a stratum of ``n`` rows gets at least ``n * test_size - 1``
    test rows and at least ``n * (1 - test_size) - 2`` training rows. The model stage then needs

    - ``cv_folds`` training rows of each label in each group: every group's own outcome model
      (``xa_stratified``) is chosen by stratified ``cv_folds``-fold cross-validation (paper
      Supplementary A.3);
    - a test row of each label in each group, so that the subgroup metrics are defined;
    - ``t`` test rows of each group with ``t - ceil(t / crossfit_folds) >= cv_folds``: ``P(A | R)`` is
      cross-fitted on the test split (paper Algorithm 2), and the part of the test split outside each
      outer fold must still hold ``cv_folds`` rows of every group for the inner cross-validation.

    Parameters
    ----------
    cv_folds, crossfit_folds : int
        Folds of the inner cross-validation and of the outer cross-fitting (>= 2).
    test_size : float
        Share of the rows in the test split, in (0, 1).

    Returns
    -------
    CohortMinimum
        ``per_label = max(ceil((cv_folds + 2) / (1 - test_size)), ceil(2 / test_size))``,
        ``per_group = max(2 * per_label, ceil((t + 2) / test_size))`` and ``test_per_group = t``.

    Raises
    ------
    ValueError
        If a fold count is not an integer >= 2 or ``test_size`` is not in (0, 1).
    """
    for name, value in (("cv_folds", cv_folds), ("crossfit_folds", crossfit_folds)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 2:
            raise ValueError(f"{name} must be an integer >= 2; got {value!r}")
    if isinstance(test_size, bool) or not isinstance(test_size, (int, float, np.floating)) or not 0 < test_size < 1:
        raise ValueError(f"test_size must be a number in (0, 1); got {test_size!r}")
    cv, k = int(cv_folds), int(crossfit_folds)
    t = cv
    while t - math.ceil(t / k) < cv:
        t += 1
    per_label = max(math.ceil((cv + 2) / (1 - test_size)), math.ceil(2 / test_size))
    # A group's two strata each lose at most one test row to rounding.
    per_group = max(2 * per_label, math.ceil((t + 2) / test_size))
    return CohortMinimum(per_label=per_label, per_group=per_group, test_per_group=t)


def check_cohort(
    df: pd.DataFrame,
    dataset: str,
    *,
    cv_folds: int,
    crossfit_folds: int,
    test_size: float,
) -> pd.DataFrame:
    """Check that every group of an extracted task has enough rows of each label; return the counts.

    Run right after :func:`extract_task`, so that an empty or thin group stops the work before the
    split and the model fitting (which would otherwise fail inside scikit-learn's split, or only after
    the outcome models, tens of minutes later).

    Parameters
    ----------
    df : pandas.DataFrame of shape (n_samples, n_features + 2)
        Output of :func:`extract_task` (needs ``a`` and ``y``).
    dataset : {"acs_income", "acs_public_coverage"}
        Dataset id (:data:`TASKS`), named in messages with its filter.
    cv_folds, crossfit_folds : int
        Folds of the model stage (``models.cv_folds``, ``models.crossfit_folds`` of the workflow).
    test_size : float
        Share of the test split (``acs.test_size``).

    Returns
    -------
    pandas.DataFrame
        One row per group code and label, all 12 of them: ``a`` (int64 0..5), ``y`` (int64 0/1), ``n``
        (int64 rows); the input of the cohort table (paper Table B4).

    Raises
    ------
    ValueError
        If a group has no rows, fewer than ``per_group`` rows, or a label within it fewer than
        ``per_label`` rows (:func:`cohort_minimum`); the message names the task, its filter, every such
        group and label with its count, and the minimum with the fold settings it comes from.
    """
    _check_dataset(dataset)
    need = cohort_minimum(cv_folds=cv_folds, crossfit_folds=crossfit_folds, test_size=test_size)
    if "a" not in df.columns or "y" not in df.columns:
        raise ValueError(f"df needs columns 'a' and 'y' (output of extract_task); got {list(df.columns)}")
    k = len(GROUP_LABELS)
    a = df["a"].to_numpy(dtype=np.int64)
    y = df["y"].to_numpy(dtype=np.int64)
    counts = np.bincount(a * 2 + y, minlength=2 * k).reshape(k, 2)
    task = f"{dataset} (folktables {TASKS[dataset]}, filter {filter_text(dataset)})"
    why = (
        f"every group needs at least {need.per_group:,} rows and {need.per_label:,} of each label (cv_folds={cv_folds}, "
        f"crossfit_folds={crossfit_folds}, test_size={test_size}: the training split needs cv_folds rows of each "
        f"group and label for the cross-validation of each group's model, the test split {need.test_per_group} "
        f"rows of each group for the cross-fitting of P(A | R) and a row of each label for the subgroup metrics)"
    )
    empty = [GROUP_LABELS[g] for g in range(k) if counts[g].sum() == 0]
    if empty:
        raise ValueError(f"{task}: group(s) {', '.join(map(repr, empty))} have no rows after the filter; {why}")
    thin = [f"{GROUP_LABELS[g]!r} has {counts[g].sum():,} rows" for g in range(k) if counts[g].sum() < need.per_group]
    thin += [
        f"{GROUP_LABELS[g]!r} has {counts[g, label]:,} with y = {label}"
        for g in range(k)
        for label in (0, 1)
        if counts[g, label] < need.per_label
    ]
    if thin:
        raise ValueError(f"{task}: too few rows after the filter: {'; '.join(thin)}; {why}")
    return pd.DataFrame(
        {
            "a": np.repeat(np.arange(k, dtype=np.int64), 2),
            "y": np.tile(np.array([0, 1], dtype=np.int64), k),
            "n": counts.ravel().astype(np.int64),
        }
    )


# ---------------------------------------------------------------------------------------------------
# Split and encoding


def _encode_categorical(train: pd.Series, test: pd.Series, max_levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes learned on ``train``; merge rare levels when there are more than ``max_levels``.

    Kept levels are coded ``0..k-1`` in ascending order of their raw value. With more than
    ``max_levels`` training levels, the ``max_levels - 1`` most frequent are kept (ties: smaller raw
    value first) and every other level, including levels first seen in ``test``, gets code
    ``max_levels - 1``. Without merging, a level first seen in ``test`` becomes NaN (HistGradientBoosting
    treats categories unseen during fit as missing anyway). NaN stays NaN.
    """
    counts = train.value_counts(dropna=True)
    merged = len(counts) > max_levels
    if merged:
        order = counts.reset_index()
        order.columns = ["level", "count"]
        order = order.sort_values(["count", "level"], ascending=[False, True], kind="stable")
        kept = np.sort(order["level"].to_numpy()[: max_levels - 1])
        other = float(max_levels - 1)
    else:
        kept = np.sort(counts.index.to_numpy(dtype=np.float64))
        other = np.nan

    def code(values: pd.Series) -> np.ndarray:
        v = values.to_numpy(dtype=np.float64)
        if len(kept) == 0:
            return np.where(np.isnan(v), np.nan, other)
        pos = np.minimum(np.searchsorted(kept, v), len(kept) - 1)
        out = np.where(kept[pos] == v, pos.astype(np.float64), other)
        out[np.isnan(v)] = np.nan
        return out

    return code(train), code(test)


def encode_and_split(
    df: pd.DataFrame,
    dataset: str,
    *,
    test_size: float = 0.2,
    seed: int | np.random.SeedSequence,
    max_levels: int = 255,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    """Split an extracted task 80/20 stratified on group x label and integer-code its categoricals.

    Parameters
    ----------
    df : pandas.DataFrame of shape (n_samples, n_features + 2)
        Output of :func:`extract_task` (features, ``a``, ``y``).
    dataset : {"acs_income", "acs_public_coverage"}
        Dataset id; decides which features are numeric (:data:`NUMERIC_FEATURES`).
    test_size : float, default 0.2
        Fraction of rows in the test split, in (0, 1).
    seed : int or numpy.random.SeedSequence
        Root seed; the split uses ``random_state = seeds.sklearn_seed(seed, "acs_split", dataset)``.
    max_levels : int, default 255
        Largest number of levels a categorical column may have (HistGradientBoosting's ``max_bins``
        limit). A column with more training levels keeps its ``max_levels - 1`` most frequent ones
        and merges the rest, and any level first seen in the test split, into code ``max_levels - 1``.

    Returns
    -------
    train, test : pandas.DataFrame
        Columns: the features (numeric ones float64 as extracted; categorical ones float64 integer
        codes ``0..k-1`` learned on ``train``, NaN where missing), ``a`` (int64), ``y`` (int64). Index
        ``0..n-1``; ``test`` keeps the order that ``train_test_split`` returns.
    schema : dict
        ``{"dataset", "study": "acs", "features", "categorical", "label": "y", "group": "a",
        "group_labels"}`` as in ``docs/design.md`` (data stage).

    Raises
    ------
    ValueError
        If ``dataset`` is unknown, columns are missing, ``a``/``y`` hold invalid codes, ``test_size``
        or ``max_levels`` is out of range, or a group x label stratum has fewer than two rows.
    """
    task = _check_dataset(dataset)
    features = [f for f in task.features if f != "RAC1P"]
    missing = [c for c in [*features, "a", "y"] if c not in df.columns]
    if missing:
        raise ValueError(f"df lacks column(s) {missing} expected for {dataset} (output of extract_task)")
    if not 0 < test_size < 1:
        raise ValueError(f"test_size must be in (0, 1); got {test_size!r}")
    if isinstance(max_levels, bool) or not isinstance(max_levels, (int, np.integer)) or not 2 <= max_levels <= 255:
        raise ValueError(f"max_levels must be an integer in [2, 255]; got {max_levels!r}")
    a = df["a"].to_numpy()
    y = df["y"].to_numpy()
    bad_a = set(np.unique(a).tolist()) - set(range(len(GROUP_LABELS)))
    if bad_a:
        raise ValueError(f"a must hold group codes 0..{len(GROUP_LABELS) - 1}; got values {sorted(bad_a)}")
    bad_y = set(np.unique(y).tolist()) - {0, 1}
    if bad_y:
        raise ValueError(f"y must be 0/1; got values {sorted(bad_y)}")
    strata = a.astype(np.int64) * 2 + y.astype(np.int64)
    counts = np.bincount(strata, minlength=2 * len(GROUP_LABELS))
    thin = [(GROUP_LABELS[s // 2], s % 2) for s in np.flatnonzero((counts > 0) & (counts < 2))]
    if thin:
        raise ValueError(f"cannot stratify on group x label: (group, y) stratum with a single row: {thin}")

    idx_train, idx_test = train_test_split(
        np.arange(len(df)),
        test_size=test_size,
        stratify=strata,
        random_state=seeds.sklearn_seed(seed, "acs_split", dataset),
    )
    train = df.iloc[idx_train].reset_index(drop=True)
    test = df.iloc[idx_test].reset_index(drop=True)
    numeric = set(NUMERIC_FEATURES[dataset])
    categorical = [f for f in features if f not in numeric]
    out_train = pd.DataFrame(index=train.index)
    out_test = pd.DataFrame(index=test.index)
    for f in features:
        if f in numeric:
            out_train[f] = train[f].to_numpy(dtype=np.float64)
            out_test[f] = test[f].to_numpy(dtype=np.float64)
        else:
            out_train[f], out_test[f] = _encode_categorical(train[f], test[f], int(max_levels))
    for frame, src in ((out_train, train), (out_test, test)):
        frame["a"] = src["a"].to_numpy(dtype=np.int64)
        frame["y"] = src["y"].to_numpy(dtype=np.int64)
    schema = {
        "dataset": dataset,
        "study": "acs",
        "features": features,
        "categorical": categorical,
        "label": "y",
        "group": "a",
        "group_labels": list(GROUP_LABELS),
    }
    return out_train, out_test, schema


# ---------------------------------------------------------------------------------------------------
# Cohort table (paper Table B4)


def cohort_table(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Count and label prevalence per group and task on the filtered data (paper Table B4).

    Parameters
    ----------
    frames : mapping of str to pandas.DataFrame
        Dataset id -> output of :func:`extract_task` (before the split); needs columns ``a`` and ``y``.

    Returns
    -------
    pandas.DataFrame
        One row per group in :data:`GROUP_LABELS` order; columns ``group`` and, per dataset in the
        mapping's order, ``{dataset}_count`` (int64) and ``{dataset}_prevalence`` (float64 mean of
        ``y``, NaN for an empty group).

    Raises
    ------
    ValueError
        If ``frames`` is empty, or a frame lacks ``a``/``y`` or holds invalid codes.
    """
    if not frames:
        raise ValueError("frames must map at least one dataset id to its extracted frame")
    table = pd.DataFrame({"group": list(GROUP_LABELS)})
    k = len(GROUP_LABELS)
    for dataset, df in frames.items():
        if "a" not in df.columns or "y" not in df.columns:
            raise ValueError(f"frame for {dataset!r} needs columns 'a' and 'y'; got {list(df.columns)}")
        a = df["a"].to_numpy()
        y = df["y"].to_numpy()
        if len(a) and (a.min() < 0 or a.max() >= k):
            raise ValueError(
                f"frame for {dataset!r}: a must be in 0..{k - 1}; got values {sorted(set(np.unique(a).tolist()) - set(range(k)))}"
            )
        if not np.isin(y, (0, 1)).all():
            raise ValueError(
                f"frame for {dataset!r}: y must be 0/1; got values {sorted(set(np.unique(y).tolist()) - {0, 1})}"
            )
        n = np.bincount(a.astype(np.int64), minlength=k)
        pos = np.bincount(a.astype(np.int64), weights=y.astype(np.float64), minlength=k)
        with np.errstate(invalid="ignore", divide="ignore"):
            prevalence = np.where(n > 0, pos / np.maximum(n, 1), np.nan)
        table[f"{dataset}_count"] = n.astype(np.int64)
        table[f"{dataset}_prevalence"] = prevalence
    return table


def cohort_markdown(table: pd.DataFrame) -> str:
    """Render :func:`cohort_table` output as Markdown (thousands separators, 3-decimal prevalences).

    Column headers use the folktables task names, e.g. ``ACSIncome count | ACSIncome prevalence``.

    Parameters
    ----------
    table : pandas.DataFrame
        Output of :func:`cohort_table`.

    Returns
    -------
    str
        A Markdown table ending with a newline.
    """
    headers = ["group"]
    cells: list[list[str]] = [[str(g)] for g in table["group"]]
    for col in table.columns[1:]:
        dataset, _, kind = col.rpartition("_")
        name = TASKS.get(dataset, dataset)
        headers.append(f"{name} {kind}")
        for row, v in zip(cells, table[col]):
            if kind == "count":
                row.append(f"{int(v):,}")
            else:
                row.append("" if pd.isna(v) else f"{float(v):.3f}")
    align = ["---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in cells]
    return "\n".join(lines) + "\n"
