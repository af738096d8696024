"""Reproducible seed trees.

Every random draw in the project comes from a :class:`numpy.random.SeedSequence` derived from the
configured root seed and a path of names (for example ``("simulate", "covariate_shift", "train")``).
A name path maps to the same seed whatever else is run, in whatever order, so adding a setting or
rerunning one rule never changes the draws of another.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

import numpy as np

__all__ = ["seed_sequence", "generator", "sklearn_seed"]


def _key(name: str | int) -> int:
    if isinstance(name, (int, np.integer)) and not isinstance(name, bool):
        if name < 0:
            raise ValueError(f"seed path entries must be non-negative integers or strings; got {name}")
        return int(name)
    if isinstance(name, str):
        # crc32 is stable across processes and Python versions (unlike hash()).
        return zlib.crc32(name.encode("utf-8"))
    raise TypeError(f"seed path entries must be str or int; got {type(name).__name__} {name!r}")


def seed_sequence(root: int | np.random.SeedSequence, *path: str | int) -> np.random.SeedSequence:
    """Return the seed sequence at ``path`` below ``root``.

    Parameters
    ----------
    root : int or numpy.random.SeedSequence
        The configured root seed (a non-negative integer) or a sequence already derived from it.
    *path : str or int
        Names of the branch, e.g. ``"simulate", "covariate_shift", "train"``. Strings are mapped
        to integers with CRC-32, so the path is stable across processes and platforms.

    Returns
    -------
    numpy.random.SeedSequence
        ``SeedSequence(entropy=root, spawn_key=root.spawn_key + mapped(path))``.

    Raises
    ------
    ValueError
        If ``root`` or an integer path entry is negative.
    TypeError
        If a path entry is neither ``str`` nor ``int``.
    """
    if isinstance(root, np.random.SeedSequence):
        entropy, base = root.entropy, tuple(root.spawn_key)
    else:
        if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or root < 0:
            raise ValueError(f"the root seed must be a non-negative integer; got {root!r}")
        entropy, base = int(root), ()
    return np.random.SeedSequence(entropy=entropy, spawn_key=base + tuple(_key(p) for p in path))


def generator(root: int | np.random.SeedSequence, *path: str | int) -> np.random.Generator:
    """Return a PCG64 :class:`numpy.random.Generator` seeded at ``path`` below ``root``."""
    return np.random.Generator(np.random.PCG64(seed_sequence(root, *path)))


def sklearn_seed(root: int | np.random.SeedSequence, *path: str | int) -> int:
    """Return an integer ``random_state`` in ``[0, 2**31 - 1)`` for scikit-learn at ``path``."""
    return int(seed_sequence(root, *path).generate_state(1, dtype=np.uint32)[0] % (2**31 - 1))


def _iter_path(path: Iterable[str | int]) -> tuple[int, ...]:  # pragma: no cover - helper for debugging
    return tuple(_key(p) for p in path)
