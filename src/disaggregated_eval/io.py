"""Atomic file output: write to a temporary file in the target folder, then rename.

A crash or a killed job never leaves a half-written result that a later rule could mistake for a
finished one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["atomic_path", "write_table", "write_json", "read_table", "rule_logger"]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` if the block succeeds.

    The temporary file is removed if the block raises, so no partial output is left behind.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    # mkstemp creates the file with mode 0600; give the result the permissions an ordinary
    # open() would (0666 less the umask), so results stay readable on shared filesystems.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_table(df: pd.DataFrame, path: str | os.PathLike[str]) -> None:
    """Write ``df`` atomically as parquet (``.parquet``), CSV (``.csv``) or Markdown (``.md``).

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
            df.to_csv(tmp, index=False)
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
