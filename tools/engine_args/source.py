"""A released package's Python sources, read with :mod:`ast` only (nothing is imported or executed), and the values
its module-level names and class attributes hold where they are literals.

:class:`SourceTree` finds a module's file under an unpacked wheel (``vllm.config.cache`` → ``vllm/config/cache.py``
or ``.../__init__.py``), follows ``from X import Y`` (absolute and relative) to where a name is defined, and
:meth:`SourceTree.value` evaluates an expression made of literals, names bound to literals, class attributes
(``ServerArgs.tp_size`` → the field's default), enum members, f-strings over known names, ``+`` of lists or strings,
and comprehensions over an enum. Anything else raises :class:`Unresolved` with the expression's text, so the
snapshot records it as unresolved rather than guessing.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class Unresolved(Exception):
    """An expression the AST pass cannot evaluate (a value computed at run time); ``text`` is its source."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


@dataclass
class Module:
    """One parsed module: its top-level assignments, classes and imported names."""

    name: str
    path: Path
    tree: ast.Module
    assigns: dict[str, ast.expr] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)
    imports: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    """local name → (module, attribute): ``from a.b import c as d`` gives ``d → (a.b, c)``; ``import a.b as e`` gives
    ``e → (a.b, None)``."""


def _index(module: Module) -> None:
    package = module.name if module.path.name == "__init__.py" else module.name.rpartition(".")[0]
    for node in module.tree.body:
        if isinstance(node, ast.ImportFrom | ast.Import):
            _index_import(module, package, node)
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    module.assigns[target.id] = node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            module.assigns[node.target.id] = node.value
        elif isinstance(node, ast.ClassDef):
            module.classes[node.name] = node
        elif isinstance(node, ast.FunctionDef):
            module.functions[node.name] = node


def _index_import(module: Module, package: str, node: ast.ImportFrom | ast.Import) -> None:
    if isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parent = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{parent}.{base}" if base else parent
        for alias in node.names:
            module.imports[alias.asname or alias.name] = (base, alias.name)
    else:
        for alias in node.names:
            module.imports[alias.asname or alias.name.split(".")[0]] = (alias.name, None)


class SourceTree:
    """The unpacked sources under ``root`` (the folder that holds the top-level packages)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._modules: dict[str, Module | None] = {}

    def module(self, name: str) -> Module | None:
        """The parsed module ``name``, or None where its file is not under the root (another distribution)."""
        if name not in self._modules:
            base = self.root / Path(*name.split("."))
            found = None
            for path in (base.with_suffix(".py"), base / "__init__.py"):
                if path.is_file():
                    found = Module(name, path, ast.parse(path.read_text(encoding="utf-8")))
                    _index(found)
                    break
            self._modules[name] = found
        return self._modules[name]

    def relpath(self, module: Module) -> str:
        return module.path.relative_to(self.root).as_posix()

    def lookup(self, module: Module, name: str, depth: int = 0) -> tuple[Module, ast.AST] | None:
        """Where ``name`` (as seen from ``module``) is defined: an assigned expression or a class; None if outside
        the tree."""
        if depth > 12:
            return None
        if name in module.classes:
            return module, module.classes[name]
        if name in module.assigns:
            return module, module.assigns[name]
        if name in module.functions:
            return module, module.functions[name]
        if name in module.imports:
            source, attr = module.imports[name]
            target = self.module(source)
            if target is None:
                return None
            if attr is None:
                return target, target.tree
            return self.lookup(target, attr, depth + 1) or self._submodule(source, attr)
        return None

    def _submodule(self, package: str, attr: str) -> tuple[Module, ast.AST] | None:
        sub = self.module(f"{package}.{attr}")
        return None if sub is None else (sub, sub.tree)

    def class_def(self, module: Module, name: str) -> tuple[Module, ast.ClassDef] | None:
        found = self.lookup(module, name)
        if found is not None and isinstance(found[1], ast.ClassDef):
            return found[0], found[1]
        return None

    def value(self, module: Module, node: ast.AST, env: Mapping[str, Any] | None = None) -> Any:
        """The literal value of ``node`` as seen from ``module`` (``env``: extra names, e.g. a function's
        parameters); :class:`Unresolved` otherwise."""
        return _Evaluator(self, env or {}).eval(module, node)


def class_attribute(cls: ast.ClassDef, name: str) -> ast.expr | None:
    """The expression a class body assigns to ``name`` (a dataclass field's default, an enum member's value)."""
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return node.value
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return node.value
    return None


def is_enum(cls: ast.ClassDef) -> bool:
    return any(ast.unparse(base).split(".")[-1] in ("Enum", "StrEnum", "IntEnum") for base in cls.bases)


def enum_values(tree: SourceTree, module: Module, cls: ast.ClassDef) -> list[Any]:
    """The values of an enum's members, in order (``auto()`` is not a literal: Unresolved)."""
    out = []
    for node in cls.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            out.append(tree.value(module, node.value))
    return out


_SAFE_CALLS: dict[str, Callable[[Any], Any]] = {
    "sorted": sorted,
    "list": list,
    "set": set,
    "tuple": tuple,
    "frozenset": frozenset,
}


def _spread(node: ast.Dict) -> ast.AST:
    raise Unresolved(ast.unparse(node))  # {**other}: not a literal


class _Evaluator:
    def __init__(self, tree: SourceTree, env: Mapping[str, Any]) -> None:
        self.tree = tree
        self.env = dict(env)

    def eval(self, module: Module, node: ast.AST) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.List | ast.Tuple | ast.Set):
            items = [self.eval(module, e) for e in node.elts]
            return items if not isinstance(node, ast.Tuple) else tuple(items)
        if isinstance(node, ast.Dict):
            pairs = zip(node.keys, node.values, strict=True)
            return {self.eval(module, k or _spread(node)): self.eval(module, v) for k, v in pairs}
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.eval(module, node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.eval(module, node.left) + self.eval(module, node.right)
        if isinstance(node, ast.JoinedStr):
            return "".join(self._fstring_part(module, part) for part in node.values)
        if isinstance(node, ast.Name):
            return self._name(module, node)
        if isinstance(node, ast.Attribute):
            return self._attribute(module, node)
        if isinstance(node, ast.ListComp):
            return self._comprehension(module, node)
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in _SAFE_CALLS
            and len(node.args) == 1
            and not node.keywords
        ):
            return _SAFE_CALLS[node.func.id](self.eval(module, node.args[0]))
        raise Unresolved(ast.unparse(node))

    def _fstring_part(self, module: Module, part: ast.expr) -> str:
        if isinstance(part, ast.FormattedValue):
            return str(self.eval(module, part.value))
        return str(self.eval(module, part))

    def _name(self, module: Module, node: ast.Name) -> Any:
        if node.id in self.env:
            return self.env[node.id]
        if node.id in ("None", "True", "False"):
            return {"None": None, "True": True, "False": False}[node.id]
        found = self.tree.lookup(module, node.id)
        if found is None or not isinstance(found[1], ast.expr):
            raise Unresolved(node.id)
        return self.eval(found[0], found[1])

    def _attribute(self, module: Module, node: ast.Attribute) -> Any:
        """``Cls.field`` (a class attribute), ``Enum.MEMBER.value`` or ``Enum.MEMBER`` (its value)."""
        inner = node.value
        if node.attr == "value" and isinstance(inner, ast.Attribute):
            return self._attribute(module, inner)
        if isinstance(inner, ast.Name):
            found = self.tree.class_def(module, inner.id)
            if found is not None:
                expr = class_attribute(found[1], node.attr)
                if expr is not None:
                    return self.eval(found[0], expr)
        raise Unresolved(ast.unparse(node))

    def _comprehension(self, module: Module, node: ast.ListComp) -> list[Any]:
        """``[m.value for m in Enum]`` (one generator over an enum class, no condition)."""
        if len(node.generators) != 1 or node.generators[0].ifs:
            raise Unresolved(ast.unparse(node))
        gen = node.generators[0]
        if not (isinstance(gen.iter, ast.Name) and isinstance(gen.target, ast.Name)):
            raise Unresolved(ast.unparse(node))
        found = self.tree.class_def(module, gen.iter.id)
        if found is None or not is_enum(found[1]):
            raise Unresolved(ast.unparse(node))
        values = enum_values(self.tree, found[0], found[1])
        elt = node.elt
        if isinstance(elt, ast.Attribute) and elt.attr == "value" and ast.unparse(elt.value) == gen.target.id:
            return values
        raise Unresolved(ast.unparse(node))
