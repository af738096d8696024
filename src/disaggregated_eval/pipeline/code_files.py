"""The library files a rule's script imports, found by walking the imports of the package's source.

Snakemake reruns a job when its script changes, not when a module the script imports changes. The
rules therefore list the library modules their script imports as an input (``code=``), with every
library module those import in turn: an edit of one of them reruns exactly the rules that use it.
:func:`library_files` finds that closure from the source text (``ast``, nothing is imported), so a
new import needs no hand-written list. The walk follows, inside the package:

- ``from . import x``, ``from .x import y``, ``from ..x import y`` (relative imports at any level,
  from modules and from packages' ``__init__``),
- ``from disaggregated_eval.x import y`` and ``import disaggregated_eval.x.y``,
- submodules named in a ``from`` import (``from .engine import intervals`` -> ``engine/intervals.py``),
- the ``__init__.py`` of every package on the way (importing ``a.b.c`` runs ``a`` and ``a.b`` first),
- imports inside functions too (lazy imports run when the function does, so they count).

Module names are dotted and relative to the package (``"plots"``, ``"audit.core"``; ``""`` is the
package itself); files are returned as POSIX paths relative to the working directory of the workflow
(``src/disaggregated_eval/plots.py``), as the rules list their inputs.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path

__all__ = [
    "PACKAGE",
    "PACKAGE_DIR",
    "module_file",
    "imported_modules",
    "script_modules",
    "import_closure",
    "library_files",
]

#: Import name of the package.
PACKAGE = "disaggregated_eval"
#: Folder of the package's source, relative to the repository root (the workflow's working directory).
PACKAGE_DIR = f"src/{PACKAGE}"
#: The package's source folder in this checkout.
_SOURCE = Path(__file__).resolve().parents[1]


def module_file(name: str, *, source: str | os.PathLike[str] | None = None) -> Path | None:
    """The source file of module ``name`` of the package, or ``None`` if there is none.

    Parameters
    ----------
    name : str
        Dotted name relative to the package (``"plots"``, ``"audit.cli"``); ``""`` is the package.
    source : path-like, optional
        The package's source folder; default the folder of this installation.

    Returns
    -------
    pathlib.Path or None
        ``<source>/<a>/<b>.py`` or, for a package, ``<source>/<a>/<b>/__init__.py``.
    """
    root = Path(source) if source is not None else _SOURCE
    parts = [p for p in name.split(".") if p]
    module = root.joinpath(*parts).with_suffix(".py") if parts else None
    if module is not None and module.is_file():
        return module
    package = root.joinpath(*parts, "__init__.py")
    return package if package.is_file() else None


def _parents(name: str) -> list[str]:
    """The packages that importing ``name`` runs first: ``""``, ``"a"``, ``"a.b"`` for ``"a.b.c"``."""
    parts = [p for p in name.split(".") if p]
    return [".".join(parts[:i]) for i in range(len(parts))]


def _join(*names: str) -> str:
    return ".".join(n for n in names if n)


@cache
def _imports_of(name: str, source: Path) -> frozenset[str]:
    path = module_file(name, source=source)
    if path is None:
        raise ValueError(f"no module {_join(PACKAGE, name)!r} in {source} (neither a .py file nor a package)")
    parts = [p for p in name.split(".") if p]
    package = parts if path.name == "__init__.py" else parts[:-1]  # the package relative imports start from
    return _walk(path, package, source)


def _walk(path: Path, package: list[str] | None, source: Path) -> frozenset[str]:
    """Package modules imported by the file ``path``; ``package``: where its relative imports start
    (``None`` for a file outside the package, e.g. a rule's script: relative imports are not ours)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()

    def add(candidate: str) -> bool:
        if module_file(candidate, source=source) is None:
            return False
        found.add(candidate)
        return True

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None or node.level - 1 > len(package):
                    continue  # beyond the package: not ours
                base = _join(*package[: len(package) - (node.level - 1)], node.module or "")
            elif node.module == PACKAGE or (node.module or "").startswith(PACKAGE + "."):
                base = node.module[len(PACKAGE) + 1 :]
            else:
                continue
            add(base)
            for alias in node.names:  # a name may be a submodule: ``from .engine import intervals``
                if alias.name != "*":
                    add(_join(base, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                    add(alias.name[len(PACKAGE) + 1 :])
    for module in list(found):
        found.update(_parents(module))
    return frozenset(found)


def imported_modules(name: str, *, source: str | os.PathLike[str] | None = None) -> set[str]:
    """Package modules that module ``name`` imports directly (with the packages on their way).

    Parameters
    ----------
    name : str
        Dotted name relative to the package (``""`` is the package's ``__init__``).
    source : path-like, optional
        The package's source folder; default the folder of this installation.

    Returns
    -------
    set of str
        Dotted names relative to the package.

    Raises
    ------
    ValueError
        If ``name`` is not a module of the package.
    """
    return set(_imports_of(name, Path(source).resolve() if source is not None else _SOURCE))


def script_modules(script: str | os.PathLike[str], *, source: str | os.PathLike[str] | None = None) -> set[str]:
    """Package modules that a file outside the package (a rule's script) imports directly.

    Parameters
    ----------
    script : path-like
        A Python file, e.g. ``workflow/scripts/run_audit.py``.
    source : path-like, optional
        The package's source folder; default the folder of this installation.

    Returns
    -------
    set of str
        Dotted names relative to the package, with the packages on their way (``""`` included as
        soon as one is imported).
    """
    return set(_walk(Path(script), None, Path(source).resolve() if source is not None else _SOURCE))


def import_closure(modules: Iterable[str], *, source: str | os.PathLike[str] | None = None) -> set[str]:
    """``modules``, the packages they live in and every package module they import, recursively.

    Parameters
    ----------
    modules : iterable of str
        Dotted names relative to the package (``"plots"``, ``"audit.core"``).
    source : path-like, optional
        The package's source folder; default the folder of this installation.

    Returns
    -------
    set of str
        Dotted names relative to the package; ``""`` (the package's ``__init__``) is always there.

    Raises
    ------
    ValueError
        If a name is not a module of the package.
    """
    root = Path(source).resolve() if source is not None else _SOURCE
    todo = [""]
    for name in modules:
        todo += [*_parents(name), name]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imports_of(name, root))
    return seen


def library_files(
    *modules: str,
    source: str | os.PathLike[str] | None = None,
    prefix: str = PACKAGE_DIR,
) -> list[str]:
    """Source files of ``modules`` and of every package module they import, for a rule's ``code`` input.

    Parameters
    ----------
    *modules : str
        Modules the rule's script imports, dotted and relative to the package (``"plots"``,
        ``"audit.outputs"``).
    source : path-like, optional
        The package's source folder to read; default the folder of this installation.
    prefix : str, default ``"src/disaggregated_eval"``
        Path of the package's source folder as the rule lists it (relative to the workflow's
        working directory).

    Returns
    -------
    list of str
        ``<prefix>/<module path>.py`` (or ``.../__init__.py``), sorted, without duplicates.

    Raises
    ------
    ValueError
        If a name is not a module of the package.
    """
    root = Path(source).resolve() if source is not None else _SOURCE
    files = {
        module_file(name, source=root).relative_to(root).as_posix() for name in import_closure(modules, source=root)
    }
    return [f"{prefix}/{f}" for f in sorted(files)]
