"""Keep numba's on-disk cache of the engine consistent with the engine's source.

numba caches a compiled function per source file and checks only that file's time stamp; constants
and functions it takes from other modules (the metric slots and :func:`.sums.metrics_from_sums`,
inlined into the kernels of :mod:`.walk` and :mod:`.permutation`) are baked into the cache. An edit
of ``sums.py`` alone would leave the kernels' cache stale. :func:`guard` (run when the engine is
imported, before any kernel is loaded) stores a fingerprint of every engine source file next to the
cache and removes the engine's cache files when it changes.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

__all__ = ["guard"]

_HERE = Path(__file__).resolve().parent
_STAMP = "engine-source.sha256"


def _fingerprint() -> str:
    digest = hashlib.sha256()
    for path in sorted(_HERE.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def guard() -> None:
    """Remove the engine's numba cache files if any engine source file changed since they were written."""
    cache = _HERE / "__pycache__"
    try:
        current = _fingerprint()
        stamp = cache / _STAMP
        if stamp.is_file() and stamp.read_text() == current:
            return
        if cache.is_dir():
            for path in cache.iterdir():
                if path.suffix in (".nbi", ".nbc"):
                    path.unlink(missing_ok=True)
        cache.mkdir(exist_ok=True)
        tmp = cache / f".{_STAMP}.{os.getpid()}"
        tmp.write_text(current)
        os.replace(tmp, stamp)
    except OSError:  # a read-only install: numba then caches elsewhere or not at all
        return
