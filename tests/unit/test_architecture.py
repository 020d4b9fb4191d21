"""The package's shape (docs/architecture.md §5): no import cycle among pdplan's modules, counting imports made
inside functions and under ``TYPE_CHECKING``; one import path per name (no module re-exports another module's names,
except a package ``__init__`` face); the performance model reads no files; module sizes stay reviewable.

The import graph is read from the source with :mod:`ast` (no import is executed), so a cycle hidden in a function
body or a type-checking block is found as surely as a module-level one.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "pdplan"
MAX_MODULE_LINES = 800
"""A concept may take 600–800 lines in one module rather than be split into re-export shims (the house style)."""


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


MODULES = _modules()


@functools.cache
def _tree(module: str) -> ast.Module:
    """``module``'s parsed source, parsed once per test process (the checks below read each module many times)."""
    return ast.parse(MODULES[module].read_text())


def _resolve(name: str) -> str | None:
    """The module a dotted name lives in (``pdplan.serving.ttft.TtftParts`` → ``pdplan.serving.ttft``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """Every pdplan module ``module`` imports, wherever the import statement is."""
    found: set[str] = set()
    for node in ast.walk(_tree(module)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for target in targets:
            resolved = _resolve(target) if target.startswith("pdplan") else None
            if resolved is not None and resolved != module:
                found.add(resolved)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_cycle_finder_finds_a_cycle() -> None:
    """The finder itself: a two-module cycle and a three-module one, beside an acyclic branch."""
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"e"}, "e": {"f"}, "f": {"d"}}
    assert sorted(_cycles(graph)) == [["a", "b"], ["d", "e", "f"]]


def test_no_import_cycle() -> None:
    graph = {m: _imports(m) for m in MODULES}
    assert not _cycles(graph), "import cycles: " + "; ".join(" <-> ".join(c) for c in _cycles(graph))


@functools.cache
def _defined_and_imported(module: str) -> tuple[set[str], dict[str, str]]:
    """(names ``module`` defines, names it imports from other pdplan modules → their module)."""
    tree = _tree(module)
    defined: set[str] = set()
    imported: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("pdplan") and node.level == 0:
            for alias in node.names:
                imported[alias.asname or alias.name] = node.module
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            defined.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            defined |= {t.id for t in targets if isinstance(t, ast.Name)}
    return defined, imported


def test_no_module_re_exports_another_modules_names() -> None:
    """A name imported from a non-package module must come from the module that defines it: importing
    ``RoleHardware`` through ``pdplan.serving.roles`` (which only imported it) is a second path to one name."""
    faces = {m for m, p in MODULES.items() if p.name == "__init__.py"}
    problems = []
    for module in MODULES:
        for node in ast.walk(_tree(module)):
            if not (isinstance(node, ast.ImportFrom) and node.module in MODULES and node.module not in faces):
                continue
            defined, imported = _defined_and_imported(node.module)
            for alias in node.names:
                if alias.name in imported and alias.name not in defined:
                    problems.append(f"{module} imports {alias.name} via {node.module} (from {imported[alias.name]})")
    assert not problems, "\n".join(problems)


def test_the_performance_model_reads_no_files() -> None:
    perf = [m for m in MODULES if m.startswith("pdplan.perf")]
    reads = {m: sorted(i for i in _imports(m) if i.startswith("pdplan.io")) for m in perf}
    assert not {m: r for m, r in reads.items() if r}


def test_modules_stay_reviewable() -> None:
    long = {m: n for m, p in MODULES.items() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"modules over {MAX_MODULE_LINES} lines: {long}"
