"""Atomic file output: write to a temporary file in the target folder, then rename.

A crash or a killed job never leaves a half-written result that a later rule could mistake for a
finished one. A killed writer does leave its hidden temporary file (``.<name>.<pid>-<token>.tmp``
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
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
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
