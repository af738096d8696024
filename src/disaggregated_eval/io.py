"""File input and output: bounded reads of the user's files, and atomic writes.

Reads. Every file the tool or the workflow reads on a user's behalf (an audit's table, a margins file,
a ``--config`` file, a workflow configuration) is checked first by :func:`check_regular_file`: it must
be a regular file (a FIFO, a device such as ``/dev/zero``, a socket or a folder is refused before it
is opened, since reading one may block forever or never end), and a file read whole is read by
:func:`read_bounded`, which checks its size against a stated maximum before reading it and reads no
more than that maximum even if the file grows meanwhile. Both raise :class:`FileReadError`, whose
message names the file, what it is and what was expected.

Writes. A crash or a killed job never leaves a half-written result that a later rule could mistake for
a finished one. A killed writer does leave its hidden temporary file (``.<name>.<pid>-<token>.tmp``
next to the target); the next write of the same target removes such leftovers of writers that no
longer run (:func:`remove_stale_temporaries`), so rerunning a rule cleans up after its killed run.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import logging
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "FileReadError",
    "MAX_TEXT_FILE_BYTES",
    "MAX_CONFIG_BYTES",
    "check_regular_file",
    "read_bounded",
    "atomic_path",
    "temporary_sibling",
    "stale_temporaries",
    "remove_stale_temporaries",
    "write_table",
    "write_json",
    "read_table",
    "rule_logger",
    "DuplicateKeyError",
    "read_yaml_unique_keys",
]


#: Largest file read whole into memory by default (:func:`read_bounded`), such as a margins table.
#: Larger ones are refused before they are read.
MAX_TEXT_FILE_BYTES = 64 * 2**20
#: Largest YAML configuration file (the audit's ``--config``, the workflow's configuration files): the
#: YAML parser reads about 1 MiB a second, and a configuration of 100,000 items (the most
#: :func:`disaggregated_eval.validation.check_nesting` accepts) takes about 3 MiB.
MAX_CONFIG_BYTES = 4 * 2**20


class FileReadError(ValueError):
    """A file that cannot be read safely: missing, not a regular file, or larger than its maximum.

    The message names the file (as ``what`` and the path) and what was expected, in one line.
    """


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _refuse_special(path: str | os.PathLike[str], mode: int, what: str) -> None:
    if not stat.S_ISREG(mode):
        raise FileReadError(
            f"{what}: is {_kind(mode)}, not a regular file; expected a file (a pipe or device may never end "
            "or block forever: save its content to a file first)"
        )


def check_regular_file(
    path: str | os.PathLike[str], *, what: str | None = None, max_bytes: int | None = None
) -> os.stat_result:
    """Check, without opening it, that ``path`` is a regular file (a link to one is followed) of at
    most ``max_bytes``.

    Parameters
    ----------
    path : path-like
    what : str, optional
        How messages name the file (default: the path), e.g. ``"population_margins 'm.csv'"``.
    max_bytes : int, optional
        Largest size accepted (default: any).

    Returns
    -------
    os.stat_result
        The file's status (``st_size`` its size in bytes).

    Raises
    ------
    FileReadError
        If the path does not exist, cannot be examined, is a folder, a FIFO, a device or a socket, or
        is larger than ``max_bytes`` (the message names the file, its kind or size, and the limit).

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as handle:
    ...     check_regular_file(handle.name).st_size
    0
    >>> check_regular_file("/dev/null", what="population_margins '/dev/null'")
    Traceback (most recent call last):
    ...
    disaggregated_eval.io.FileReadError: population_margins '/dev/null': is a character device, not a regular file; ...
    """
    what = str(path) if what is None else what
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise FileReadError(f"{what}: no such file") from None
    except OSError as exc:
        raise FileReadError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    _refuse_special(path, status.st_mode, what)
    if max_bytes is not None and status.st_size > max_bytes:
        raise FileReadError(
            f"{what}: is {status.st_size:,} bytes, more than the limit of {max_bytes:,} bytes for this file; "
            "is it the right file?"
        )
    return status


def read_bounded(
    path: str | os.PathLike[str], max_bytes: int = MAX_TEXT_FILE_BYTES, *, what: str | None = None
) -> bytes:
    """The bytes of a regular file of at most ``max_bytes``, size checked before it is read.

    The file is checked (:func:`check_regular_file`), opened without blocking (a FIFO put in its place
    meanwhile is refused, not waited on), checked again on the open file, and read up to
    ``max_bytes + 1`` bytes: a file that grew past the limit while it was read is refused too, so
    memory never exceeds the limit whatever the file does. A file of size 0 is not read: it is empty,
    or a pseudo-file of ``/proc`` or ``/sys`` that states no size (whose read may block).

    Parameters
    ----------
    path : path-like
    max_bytes : int, default :data:`MAX_TEXT_FILE_BYTES`
    what : str, optional
        How messages name the file (default: the path).

    Returns
    -------
    bytes

    Raises
    ------
    FileReadError
        As :func:`check_regular_file`, or if reading fails.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.NamedTemporaryFile() as handle:
    ...     _ = handle.write(b"race,share\\nA,1\\n"); handle.flush()
    ...     read_bounded(handle.name)
    b'race,share\\nA,1\\n'
    """
    what = str(path) if what is None else what
    if check_regular_file(path, what=what, max_bytes=max_bytes).st_size == 0:
        return b""  # empty, or a pseudo-file (/proc, /sys) of no stated size, whose read may block or never end
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise FileReadError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    try:
        status = os.fstat(fd)
        _refuse_special(path, status.st_mode, what)  # replaced between the check and the opening
        chunks = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise FileReadError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise FileReadError(f"{what}: grew past the limit of {max_bytes:,} bytes for this file while it was read")
    return data


def _temporary_pattern(name: str, suffix: str) -> re.Pattern[str]:
    """Names of the temporaries of target ``name``: ``.<name>.<pid>-<8 hex digits><suffix>``.

    The writer's id and token hold no dot, so a temporary of one target never matches the pattern of
    another target (``a.csv`` and ``a.csv.bak`` included).
    """
    return re.compile(rf"\.{re.escape(name)}\.(?P<pid>\d+)-[0-9a-f]{{8}}{re.escape(suffix)}")


def _process_alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (a process of another user counts)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as exc:  # e.g. EINVAL on exotic platforms: assume alive, never remove
        return exc.errno != errno.ESRCH
    return True


def stale_temporaries(path: str | os.PathLike[str], *, suffix: str = ".tmp") -> list[Path]:
    """The temporaries of ``path`` left behind by writers that no longer run, oldest first.

    A temporary ``.<name>.<pid>-<token><suffix>`` next to ``path`` is stale when no process ``pid``
    runs on this host; files (or folders) of running writers, and temporaries of any other target, are
    not listed. Within the workflow one job writes a given output, so a temporary whose writer runs on
    another cluster node (whose id may be unknown here) is never one of a concurrent writer of the
    same target.

    Parameters
    ----------
    path : path-like
        The target file (or folder) whose temporaries are looked for in its folder.
    suffix : str, default ".tmp"
        The temporaries' suffix (``".download"`` for the folders of :mod:`disaggregated_eval.acs`,
        ``".old"`` for an earlier audit moved aside by :mod:`disaggregated_eval.audit.outputs`).

    Returns
    -------
    list of pathlib.Path
        Ordered by the time of their last status change (``st_ctime``; a rename changes it), then name.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> _ = (folder / ".out.csv.99999999-0123abcd.tmp").write_text("left by a killed writer")
    >>> [p.name for p in stale_temporaries(folder / "out.csv")]
    ['.out.csv.99999999-0123abcd.tmp']
    """
    target = Path(path)
    pattern = _temporary_pattern(target.name, suffix)
    try:
        entries = list(os.scandir(target.parent))
    except FileNotFoundError:
        return []
    stale = []
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or _process_alive(int(match["pid"])):
            continue
        try:
            changed = entry.stat(follow_symlinks=False).st_ctime
        except FileNotFoundError:
            continue
        stale.append((changed, entry.name, Path(entry.path)))
    return [found for _, _, found in sorted(stale)]


def remove_stale_temporaries(path: str | os.PathLike[str], *, suffix: str = ".tmp") -> list[Path]:
    """Remove the temporaries of ``path`` left behind by writers that no longer run.

    Parameters
    ----------
    path : path-like
        The target file whose temporaries are looked for in its folder (:func:`stale_temporaries`).
    suffix : str, default ".tmp"
        The temporaries' suffix.

    Returns
    -------
    list of pathlib.Path
        The removed paths.
    """
    removed = []
    for stale in stale_temporaries(path, suffix=suffix):
        with contextlib.suppress(FileNotFoundError):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink()
            removed.append(stale)
    return removed


def temporary_sibling(path: str | os.PathLike[str], *, suffix: str = ".tmp", directory: bool = False) -> Path:
    """Create an empty hidden file (or folder) next to ``path`` named for this process; return it.

    The name is ``.<name>.<pid>-<token><suffix>`` (:func:`remove_stale_temporaries` recognises it).
    A file gets the permissions an ordinary ``open()`` would give (0666 less the umask), so results
    renamed from it stay readable on shared filesystems.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    while True:
        candidate = target.parent / f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{suffix}"
        try:
            if directory:
                candidate.mkdir(mode=0o700)
            else:
                os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        except FileExistsError:
            continue
        return candidate


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` if the block succeeds.

    Stale temporaries of ``path`` from killed writers are removed first
    (:func:`remove_stale_temporaries`). The temporary file is removed if the block raises, so no
    partial output is left behind.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(target)
    tmp_path = temporary_sibling(target)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def _has_carriage_return(df: pd.DataFrame) -> bool:
    """Whether a text cell or a column name holds a carriage return (``\r``)."""
    if any("\r" in str(c) for c in df.columns):
        return True
    for column in df.columns:
        values = df[column]
        text = values.dtype == object or pd.api.types.is_string_dtype(values.dtype)
        if text and values.map(lambda v: isinstance(v, str) and "\r" in v).any():
            return True
    return False


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``df`` atomically as parquet (``.parquet``), CSV (``.csv``) or Markdown (``.md``).

    CSV rows end in ``\n`` and fields are quoted where needed; pandas does not quote a field for a
    bare carriage return, which CSV readers take for a line break, so a table with a ``\r`` in a
    text cell or column name is written with every non-numeric field quoted
    (``csv.QUOTE_NONNUMERIC``), which every reader splits into the same rows.

    Raises
    ------
    ValueError
        If the file extension is not one of ``.parquet``, ``.csv``, ``.md``.
    """
    suffix = Path(path).suffix
    if suffix not in {".parquet", ".csv", ".md"}:
        raise ValueError(f"table path must end in .parquet, .csv or .md; got {str(path)!r}")
    with atomic_path(path) as tmp:
        if suffix == ".parquet":
            df.to_parquet(tmp, index=False)
        elif suffix == ".csv":
            quoting = csv.QUOTE_NONNUMERIC if _has_carriage_return(df) else csv.QUOTE_MINIMAL
            df.to_csv(tmp, index=False, quoting=quoting)
        else:
            tmp.write_text(df.to_markdown(index=False) + "\n")


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a table written by :func:`write_table` (parquet or CSV)."""
    p = Path(path)
    if p.suffix == ".parquet":
        return pd.read_parquet(p)
    if p.suffix == ".csv":
        return pd.read_csv(p)
    raise ValueError(f"table path must end in .parquet or .csv; got {str(path)!r}")


def write_json(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` atomically as indented, key-sorted JSON."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(obj, indent=2, sort_keys=True) + "\n")


def rule_logger(log_path: str | os.PathLike[str], name: str) -> logging.Logger:
    """Route standard error, warnings and an INFO logger named ``name`` to a rule's log file.

    Used by the workflow's scripts (``rule_logger(snakemake.log[0], "fit_outcome_models")``), so
    every rule's progress lines, warnings and tracebacks end up in ``logs/<rule>/...``.
    """
    sys.stderr = open(log_path, "a", buffering=1)  # noqa: SIM115 - lives as long as the job
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s", force=True)
    logging.captureWarnings(True)
    return logging.getLogger(name)


class DuplicateKeyError(ValueError):
    """A key given twice in one YAML mapping: ``key``, and the ``first`` and ``second`` line (1-based)."""

    def __init__(self, key: Any, first: int, second: int) -> None:
        super().__init__(f"the key {key!r} is given twice (lines {first} and {second})")
        self.key, self.first, self.second = key, first, second


def read_yaml_unique_keys(text: str) -> Any:
    """Parse YAML (or JSON) text with a safe loader that refuses a mapping key given twice.

    PyYAML keeps the last of two equal keys silently; a configuration that gives a key twice is almost
    always an editing mistake, so both the workflow's configuration and the audit's ``--config`` files
    are read through this one loader. ``<<`` merge keys may be overridden; an unhashable key is left to
    PyYAML, which reports it itself.

    Parameters
    ----------
    text : str
        The document.

    Returns
    -------
    object
        The parsed document (``yaml.safe_load`` semantics).

    Raises
    ------
    DuplicateKeyError
        If one mapping gives a key twice (with both line numbers).
    yaml.YAMLError
        If the text is not valid YAML.
    """
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    def construct_mapping(loader: Loader, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # '<<' merges may be overridden
                continue
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: PyYAML reports it itself
                continue
            if first is not None:
                raise DuplicateKeyError(key, first, line)
            seen[key] = line
        return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)

    Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, construct_mapping)
    return yaml.load(text, Loader=Loader)  # a SafeLoader subclass
