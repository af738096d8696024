"""The pinned software environments of the rules (``workflow/envs/*.yaml``) and the container built from them.

Each rule names one conda environment file (``conda:``); its packages are pinned (``name==version``
in the file's ``pip:`` list, the interpreter as ``python=3.11``). The container image (``Dockerfile``,
``workflow/envs/container.def``) installs the union of those pins, so a job runs with the same versions
under ``--sdm conda`` and ``--sdm apptainer``: ``python envs.py workflow/envs/*.yaml`` prints that union
as a pip requirements file, which the image definitions install (this file is copied into the image on
its own: it needs only PyYAML).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Sequence

__all__ = ["PIN", "env_pins", "union_pins"]

#: A pinned pip requirement: a distribution name, ``==`` and an exact version.
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][0-9A-Za-z.+!-]*)$")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def env_pins(path: str | os.PathLike[str]) -> dict[str, str]:
    """The pip pins of a conda environment file: normalised distribution name -> version.

    Parameters
    ----------
    path : path-like
        A conda environment file whose ``dependencies`` end with a ``pip:`` list of ``name==version``.

    Returns
    -------
    dict of str to str
        ``{"scikit-learn": "1.9.1", ...}`` (names lower case, ``_`` and ``.`` as ``-``).

    Raises
    ------
    ValueError
        If the file has no ``pip:`` list, or an entry of it is not ``name==version`` (the message names
        the file and the entry).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> env = pathlib.Path(tempfile.mkdtemp()) / "env.yaml"
    >>> _ = env.write_text("dependencies:\\n  - python=3.11\\n  - pip:\\n      - scikit_learn==1.9.1\\n")
    >>> env_pins(env)
    {'scikit-learn': '1.9.1'}
    """
    import yaml

    with open(path, encoding="utf-8") as handle:
        content = yaml.safe_load(handle) or {}
    lists = [d["pip"] for d in content.get("dependencies") or [] if isinstance(d, dict) and "pip" in d]
    if not lists:
        raise ValueError(f"{os.fspath(path)}: no `pip:` list in `dependencies`; expected pinned name==version entries")
    pins: dict[str, str] = {}
    for entry in lists[0] or []:
        match = PIN.match(str(entry))
        if match is None:
            raise ValueError(f"{os.fspath(path)}: pip entry {entry!r} is not pinned; expected name==version")
        pins[_normal(match.group(1))] = match.group(2)
    return pins


def union_pins(paths: Iterable[str | os.PathLike[str]]) -> dict[str, str]:
    """The pins of several environment files together: what the container image installs.

    Parameters
    ----------
    paths : iterable of path-like
        Conda environment files (see :func:`env_pins`).

    Returns
    -------
    dict of str to str
        Distribution name -> version, sorted by name.

    Raises
    ------
    ValueError
        If two files pin one package to different versions (the message names both).

    Examples
    --------
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "a.yaml").write_text("dependencies:\\n  - pip:\\n      - numpy==2.4.6\\n")
    >>> _ = (folder / "b.yaml").write_text("dependencies:\\n  - pip:\\n      - numpy==2.4.6\\n      - tqdm==4.70.1\\n")
    >>> union_pins([folder / "a.yaml", folder / "b.yaml"])
    {'numpy': '2.4.6', 'tqdm': '4.70.1'}
    """
    union: dict[str, tuple[str, str]] = {}
    for path in paths:
        for name, version in env_pins(path).items():
            if name in union and union[name][0] != version:
                raise ValueError(
                    f"{name} is pinned to {union[name][0]} in {union[name][1]} and to {version} in "
                    f"{os.fspath(path)}; expected one version in every environment file"
                )
            union[name] = (version, os.fspath(path))
    return {name: union[name][0] for name in sorted(union)}


def main(argv: Sequence[str] | None = None) -> int:
    """Print the union of the pins of the given environment files as a pip requirements file."""
    paths = list(sys.argv[1:] if argv is None else argv)
    if not paths:
        print("usage: python envs.py workflow/envs/*.yaml > requirements.txt", file=sys.stderr)
        return 2
    for name, version in union_pins(paths).items():
        print(f"{name}=={version}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
