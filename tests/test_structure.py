"""The package's import structure (docs/design.md, "Layers"): no import circle, no upward import.

Read from the source with :mod:`ast` (nothing is imported): an arrow from module A to module B is an
``import`` of B written anywhere in A, at the top or inside a function (a lazy import is an arrow all
the same). Importing a package's ``__init__`` implicitly when a submodule is imported is not an arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import disaggregated_eval

ROOT = Path(disaggregated_eval.__file__).parent
PACKAGE = "disaggregated_eval"
AUDIT = f"{PACKAGE}.audit"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _arrows(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Each module's imports of the package's own modules."""
    arrows: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:  # a submodule, else a name defined in ``source``
                    child = f"{source}.{alias.name}"
                    targets.add(child if child in modules else source)
        arrows[name] = {t for t in targets if t in modules and t != name}
    return arrows


def _cycles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(arrows[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(arrows):
        if v not in index:
            visit(v)
    return found


@pytest.fixture(scope="module")
def arrows() -> dict[str, set[str]]:
    return _arrows(_modules())


def test_the_arrows_are_found(arrows):
    # a check that cannot see arrows would pass vacuously: known arrows must be there
    assert f"{AUDIT}.options" in arrows[f"{AUDIT}.core"]
    assert f"{PACKAGE}.engine.walk" in arrows[f"{PACKAGE}.engine.bootstrap"]
    assert len(arrows) > 60


def test_no_import_circle(arrows):
    assert _cycles(arrows) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check sees one


def test_the_library_never_imports_the_audit(arrows):
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in arrows.items()
        if not source.startswith(AUDIT)
        for target in targets
        if target == AUDIT or target.startswith(f"{AUDIT}.")
    )
    assert upward == []
