"""The source files a rule's script imports, found by walking the imports of the project's source.

Snakemake reruns a job when its script changes, not when a module the script imports changes. The
rules therefore list the modules their script imports as an input (``code=``), with every module
those import in turn: an edit of one of them reruns exactly the rules that use it.
:func:`script_files` finds that closure from the source text (``ast``, nothing is imported), so a
new import needs no hand-written list. The walk follows the imports of the project's packages
(:data:`PACKAGES`: the library, and this plumbing package, whose ``inputs`` some scripts import), from
one into the other too:

- ``from . import x``, ``from .x import y``, ``from ..x import y`` (relative imports at any level,
  from modules and from packages' ``__init__``),
- ``from disaggregated_eval.x import y`` and ``import disaggregated_eval.x.y``,
- submodules named in a ``from`` import (``from .engine import intervals`` -> ``engine/intervals.py``),
- the ``__init__.py`` of every package on the way (importing ``a.b.c`` runs ``a`` and ``a.b`` first),
- imports inside functions too (lazy imports run when the function does, so they count).

Module names are full dotted names (``"disaggregated_eval.plots"``,
``"disaggregated_eval_workflow.inputs"``); files are returned as POSIX paths relative to the
repository root, the working directory of the workflow (``src/disaggregated_eval/plots.py``), as the
rules list their inputs.
"""

from __future__ import annotations

import ast
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path

__all__ = [
    "PACKAGES",
    "module_file",
    "imported_modules",
    "script_modules",
    "import_closure",
    "source_files",
    "script_files",
]

#: The packages whose imports the walk follows: import name -> source folder, relative to the
#: repository root. Imports of any other module (numpy, the standard library) are not followed.
PACKAGES: dict[str, str] = {
    "disaggregated_eval": "src/disaggregated_eval",
    "disaggregated_eval_workflow": "workflow/lib/disaggregated_eval_workflow",
}
#: The repository root of this checkout (``workflow/lib/<this package>/`` is three levels below).
_ROOT = Path(__file__).resolve().parents[3]


def _root(root: str | os.PathLike[str] | None) -> Path:
    # absolute, not resolved: a checkout reached through symbolic links keeps its paths below them
    return Path(os.path.abspath(root)) if root is not None else _ROOT


def module_file(name: str, *, root: str | os.PathLike[str] | None = None) -> Path | None:
    """The source file of module ``name`` of one of :data:`PACKAGES`, or ``None`` if there is none.

    Parameters
    ----------
    name : str
        Full dotted name (``"disaggregated_eval.plots"``, ``"disaggregated_eval.audit"``).
    root : path-like, optional
        The repository root (holding the folders of :data:`PACKAGES`); default this checkout's.

    Returns
    -------
    pathlib.Path or None
        ``<root>/<package folder>/<a>/<b>.py`` or, for a package, ``.../<a>/<b>/__init__.py``;
        ``None`` for a module of no package of :data:`PACKAGES` or without a file.
    """
    top, *parts = name.split(".")
    if top not in PACKAGES:
        return None
    folder = _root(root) / PACKAGES[top]
    module = folder.joinpath(*parts).with_suffix(".py") if parts else None
    if module is not None and module.is_file():
        return module
    package = folder.joinpath(*parts, "__init__.py")
    return package if package.is_file() else None


def _parents(name: str) -> list[str]:
    """The packages that importing ``name`` runs first: ``"a"``, ``"a.b"`` for ``"a.b.c"``."""
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


@cache
def _imports_of(name: str, root: Path) -> frozenset[str]:
    path = module_file(name, root=root)
    if path is None:
        raise ValueError(
            f"no module {name!r} under {root} (neither a .py file nor a package in the folders of "
            f"{', '.join(PACKAGES.values())})"
        )
    parts = name.split(".")
    package = parts if path.name == "__init__.py" else parts[:-1]  # the package relative imports start from
    return _walk(path, package, root)


def _walk(path: Path, package: list[str] | None, root: Path) -> frozenset[str]:
    """Modules of :data:`PACKAGES` imported by the file ``path``; ``package``: where its relative
    imports start (``None`` for a file outside the packages, e.g. a rule's script: relative imports are
    not ours)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()

    def add(candidate: str) -> None:
        if module_file(candidate, root=root) is not None:
            found.add(candidate)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if package is None or node.level > len(package):
                    continue  # beyond the top-level package: not ours
                base = ".".join([*package[: len(package) - (node.level - 1)], *filter(None, [node.module])])
            elif (node.module or "").split(".")[0] in PACKAGES:
                base = node.module
            else:
                continue
            add(base)
            for alias in node.names:  # a name may be a submodule: ``from .engine import intervals``
                if alias.name != "*":
                    add(f"{base}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    add(alias.name)
    for module in list(found):
        found.update(_parents(module))
    return frozenset(found)


def imported_modules(name: str, *, root: str | os.PathLike[str] | None = None) -> set[str]:
    """Modules of :data:`PACKAGES` that module ``name`` imports directly (with the packages on their way).

    Parameters
    ----------
    name : str
        Full dotted name of a module of :data:`PACKAGES`.
    root : path-like, optional
        The repository root; default this checkout's.

    Returns
    -------
    set of str
        Full dotted names.

    Raises
    ------
    ValueError
        If ``name`` is not a module of :data:`PACKAGES`.
    """
    return set(_imports_of(name, _root(root)))


def script_modules(script: str | os.PathLike[str], *, root: str | os.PathLike[str] | None = None) -> set[str]:
    """Modules of :data:`PACKAGES` that a file outside them (a rule's script) imports directly.

    Parameters
    ----------
    script : path-like
        A Python file, e.g. ``workflow/scripts/run_audit.py``.
    root : path-like, optional
        The repository root; default this checkout's.

    Returns
    -------
    set of str
        Full dotted names, with the packages on their way (``"disaggregated_eval"`` as soon as one
        of its modules is imported).
    """
    return set(_walk(Path(script), None, _root(root)))


def import_closure(modules: Iterable[str], *, root: str | os.PathLike[str] | None = None) -> set[str]:
    """``modules``, the packages they live in and every module of :data:`PACKAGES` they import, recursively.

    Parameters
    ----------
    modules : iterable of str
        Full dotted names (``"disaggregated_eval.plots"``, ``"disaggregated_eval.audit.core"``).
    root : path-like, optional
        The repository root; default this checkout's.

    Returns
    -------
    set of str
        Full dotted names.

    Raises
    ------
    ValueError
        If a name is not a module of :data:`PACKAGES`.
    """
    where = _root(root)
    todo: list[str] = []
    for name in modules:
        todo += [*_parents(name), name]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_imports_of(name, where))
    return seen


def _input_path(path: Path, base: Path) -> str:
    """``path`` relative to ``base`` if it lies below it, else absolute (POSIX)."""
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return path.as_posix()


def source_files(
    *modules: str, root: str | os.PathLike[str] | None = None, workdir: str | os.PathLike[str] | None = None
) -> list[str]:
    """Source files of ``modules`` and of every module of :data:`PACKAGES` they import.

    Parameters
    ----------
    *modules : str
        Full dotted names (``"disaggregated_eval.plots"``, ``"disaggregated_eval_workflow.inputs"``).
    root : path-like, optional
        The repository root; default this checkout's.
    workdir : path-like, optional
        The folder the paths are given relative to (a rule's inputs are relative to the workflow's
        working directory); default ``root``. A file outside it is given as an absolute path: the
        workflow used as a module of another one runs in that workflow's folder, not in this checkout.

    Returns
    -------
    list of str
        Paths relative to ``workdir`` (``src/disaggregated_eval/plots.py``, or ``.../__init__.py`` for
        a package), or absolute for files outside it, POSIX, sorted, without duplicates.

    Raises
    ------
    ValueError
        If a name is not a module of :data:`PACKAGES`.

    Examples
    --------
    >>> source_files("disaggregated_eval_workflow.inputs")[0]
    'src/disaggregated_eval/__init__.py'
    >>> source_files("disaggregated_eval_workflow.inputs", workdir="/elsewhere")[0] == (_ROOT / "src/disaggregated_eval/__init__.py").as_posix()
    True
    """
    where = _root(root)
    base = where if workdir is None else Path(os.path.abspath(workdir))
    files = {_input_path(module_file(name, root=where), base) for name in import_closure(modules, root=where)}
    return sorted(files)


def script_files(
    script: str | os.PathLike[str],
    *,
    root: str | os.PathLike[str] | None = None,
    workdir: str | os.PathLike[str] | None = None,
) -> list[str]:
    """Source files a rule's script runs: what it imports from :data:`PACKAGES`, and what those import.

    The ``code`` input of a rule (``script_code`` in ``workflow/rules/common.smk``, and
    ``audit_code_files`` for rule ``run_audit``).

    Parameters
    ----------
    script : path-like
        The rule's script, e.g. ``<root>/workflow/scripts/bootstrap_metrics.py``.
    root : path-like, optional
        The repository root; default this checkout's.
    workdir : path-like, optional
        As :func:`source_files`: the folder the paths are relative to; default ``root``.

    Returns
    -------
    list of str
        As :func:`source_files`.
    """
    return source_files(*script_modules(script, root=root), root=root, workdir=workdir)
