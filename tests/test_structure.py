"""The package's import structure (docs/design.md, "Library API", the item "Import layers of these modules"):
no import circle, no upward import, no private name used across modules.

Read from the source with :mod:`ast` (nothing is imported): an arrow from module A to module B is an
``import`` of B written anywhere in A, at the top or inside a function (a lazy import is an arrow all
the same). Importing a package's ``__init__`` implicitly when a submodule is imported is not an arrow.

Private names: no module of the project (the package, the workflow's plumbing, its rule scripts and
rule files, the benchmarks, the examples) imports or uses an underscore-prefixed name of another
module of the project, and no module outside a package imports a private (underscore-prefixed) module
of it (``disaggregated_eval._x``; ``disaggregated_eval.engine._cache`` only from within ``engine``).
The tests are exempt: they may test private helpers.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
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


# ----------------------------------------------------------------------------------------------
# Private names and modules
# ----------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
#: Folders holding packages: a module is named by its path below the folder.
PACKAGE_FOLDERS = ("src", "workflow/lib")
#: Folders of scripts: each script imports its siblings as top-level modules (Python puts a script's
#: folder first on ``sys.path``); they are named here by folder, ``benchmarks._validity``.
SCRIPT_FOLDERS = ("benchmarks", "workflow/scripts", "examples")
#: Snakemake files: not Python, but their import statements are.
RULE_FILES = ("Snakefile", "workflow/Snakefile", "workflow/rules/*.smk")


@dataclass(frozen=True)
class _Source:
    name: str  # dotted: "disaggregated_eval.audit.core", "benchmarks.bench_engine", "workflow.rules.audit"
    package: str  # what a relative import is relative to
    siblings: str | None  # the script folder's prefix, for top-level imports of sibling scripts
    tree: ast.Module


def _is_private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _rule_imports(text: str) -> str:
    """The import statements of a Snakemake file, as Python (a parenthesised import over several lines
    included; a line of prose that starts with ``from`` is not an import and is left out)."""
    statements: list[str] = []
    current: list[str] = []
    depth = 0
    for line in text.splitlines():
        stripped = line.split("#")[0].strip()
        if not current and not stripped.startswith(("import ", "from ")):
            continue
        current.append(stripped)
        depth += stripped.count("(") - stripped.count(")")
        if depth <= 0:
            statement = " ".join(current)
            try:
                ast.parse(statement)
            except SyntaxError:
                pass
            else:
                statements.append(statement)
            current, depth = [], 0
    return "\n".join(statements)


def _source(name: str, text: str, *, is_package: bool = False, siblings: str | None = None) -> _Source:
    package = name if is_package else name.rpartition(".")[0]
    return _Source(name, package, siblings, ast.parse(text, filename=name))


def _project_sources(repo: Path) -> dict[str, _Source]:
    """Every module of the project outside ``tests/``, by dotted name."""
    sources: dict[str, _Source] = {}
    for folder in PACKAGE_FOLDERS:
        for path in sorted((repo / folder).rglob("*.py")):
            parts = list(path.relative_to(repo / folder).with_suffix("").parts)
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            sources[name] = _source(name, path.read_text(), is_package=is_package)
    for folder in SCRIPT_FOLDERS:
        prefix = folder.replace("/", ".")
        for path in sorted((repo / folder).glob("*.py")):
            name = f"{prefix}.{path.stem}"
            sources[name] = _source(name, path.read_text(), siblings=prefix)
    for pattern in RULE_FILES:
        for path in sorted(repo.glob(pattern)):
            name = ".".join(path.relative_to(repo).with_suffix("").parts)
            sources[name] = _source(name, _rule_imports(path.read_text()))
    return sources


def _private_uses(sources: dict[str, _Source]) -> list[str]:
    """Each import or attribute use of a private name of another module of ``sources``, and each
    import of a private module from outside the package that holds it."""
    found: set[str] = set()

    def absolute(source: _Source, module: str) -> str:
        head = module.split(".")[0]
        if source.siblings is not None and f"{source.siblings}.{head}" in sources:
            return f"{source.siblings}.{module}"
        return module

    def check_module(source: _Source, module: str) -> None:
        parts = module.split(".")
        for i, part in enumerate(parts):
            if _is_private(part):
                owner = ".".join(parts[:i])
                if not (source.name == owner or source.name.startswith(f"{owner}.")):
                    found.add(f"{source.name} imports the private module {module}")
                return

    def check_member(source: _Source, module: str, member: str, verb: str) -> str | None:
        """``module.member``: the submodule's name if it is one, else None (after the name check)."""
        child = f"{module}.{member}"
        if child in sources:
            check_module(source, child)
            return child
        if _is_private(member):
            found.add(f"{source.name} {verb} the private name {member} of {module}")
        return None

    for source in sources.values():
        bound: dict[str, str] = {}  # local name -> project module it stands for
        for node in ast.walk(source.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    module = absolute(source, alias.name)
                    if module in sources:
                        check_module(source, module)
                    if alias.asname:
                        bound[alias.asname] = module
                    else:  # ``import a.b`` binds ``a``
                        head = alias.name.split(".")[0]
                        bound[head] = absolute(source, head)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = source.package.split(".")
                    base = base[: len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = absolute(source, node.module or "")
                if module not in sources:
                    continue
                check_module(source, module)
                for alias in node.names:
                    child = check_member(source, module, alias.name, "imports")
                    if child is not None:
                        bound[alias.asname or alias.name] = child
        for node in ast.walk(source.tree):
            if not isinstance(node, ast.Attribute):
                continue
            chain: list[str] = []
            value = node.value
            while isinstance(value, ast.Attribute):
                chain.insert(0, value.attr)
                value = value.value
            if not isinstance(value, ast.Name) or value.id not in bound:
                continue
            module = ".".join([bound[value.id], *chain])
            if module in sources:
                check_member(source, module, node.attr, "uses")
    return sorted(found)


@pytest.fixture(scope="module")
def sources() -> dict[str, _Source]:
    return _project_sources(REPO)


def test_the_project_sources_are_found(sources):
    # a check that reads no file would pass vacuously: every kind of source must be there
    for name in (
        f"{PACKAGE}.validation",
        f"{PACKAGE}.engine._cache",
        "disaggregated_eval_workflow.config",
        "workflow.scripts.run_audit",
        "benchmarks.bench_audit_validity",
        "benchmarks._validity",
        "examples.fit_adult_model",
        "workflow.Snakefile",
        "workflow.rules.audit",
    ):
        assert name in sources
    assert not any(name.startswith("tests") for name in sources)
    rule_imports = {n.module for n in ast.walk(sources["workflow.rules.audit"].tree) if isinstance(n, ast.ImportFrom)}
    assert "disaggregated_eval_workflow.audit_runs" in rule_imports  # a parenthesised import over lines


def test_no_private_name_used_across_modules(sources):
    assert _private_uses(sources) == []


def test_the_private_check_sees_planted_cases():
    planted = {
        s.name: s
        for s in (
            _source(PACKAGE, "", is_package=True),
            _source(f"{PACKAGE}.a", "from .b import _helper, public\nfrom . import b\nb._other()\nb.public()\n"),
            _source(f"{PACKAGE}.b", "def _helper(): ...\ndef _other(): ...\npublic = 1\n"),
            _source(f"{PACKAGE}._private", "x = 1\n"),
            _source(f"{PACKAGE}.c", "from . import _private\nfrom ._private import x\n"),  # inside: allowed
            _source(f"{PACKAGE}.engine", "from ._cache import guard as _guard\n", is_package=True),
            _source(f"{PACKAGE}.engine._cache", "guard = 1\n"),
            _source(f"{PACKAGE}.engine.walk", "from . import _cache\n"),  # inside engine: allowed
            _source(f"{PACKAGE}.audit", "from ..engine._cache import guard\n", is_package=True),
            _source(
                "workflow_lib.config",
                f"from {PACKAGE}._private import x\nimport {PACKAGE}.b as b\nimport {PACKAGE}.b\n"
                f"b._helper()\n{PACKAGE}.b._other()\nfrom {PACKAGE} import b as bb, __version__\n",
            ),
            _source(
                "benchmarks.bench", "import _shared\nfrom _shared import _thing\n_shared.value\n", siblings="benchmarks"
            ),
            _source("benchmarks._shared", "_thing = 1\nvalue = 2\n", siblings="benchmarks"),
            _source(
                "workflow.rules.audit",
                _rule_imports(f"rule a:\n    input: 'x'\nfrom {PACKAGE}.b import (\n    _helper,\n)\nfrom the text\n"),
            ),
        )
    }
    assert _private_uses(planted) == [
        "benchmarks.bench imports the private name _thing of benchmarks._shared",
        f"{PACKAGE}.a imports the private name _helper of {PACKAGE}.b",
        f"{PACKAGE}.a uses the private name _other of {PACKAGE}.b",
        f"{PACKAGE}.audit imports the private module {PACKAGE}.engine._cache",
        f"workflow.rules.audit imports the private name _helper of {PACKAGE}.b",
        f"workflow_lib.config imports the private module {PACKAGE}._private",
        f"workflow_lib.config uses the private name _helper of {PACKAGE}.b",
        f"workflow_lib.config uses the private name _other of {PACKAGE}.b",
    ]
