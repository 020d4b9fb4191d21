"""Flags from the ``add_argument`` calls in a function's source (argparse, read with :mod:`ast`).

Recognised calls: ``<anything>.add_argument(*names, **keywords)`` (argparse); Dynamo's helpers
``add_argument(group, flag_name=..., default=..., choices=..., arg_type=...)`` and
``add_negatable_bool_argument(group, flag_name=...)`` (``dynamo/common/configuration/utils.py``: a typed flag, and a
``BooleanOptionalAction`` pair); and vLLM's ``**kwargs_of_cls["field"]`` (the keywords ``get_kwargs(cls)`` computes
for a config field: :mod:`engine_args.config_fields`), optionally merged with literal overrides
(``**{**kw["x"], "default": None}``). Flag names may be f-strings over the function's parameters (``env``).

Each flag becomes a record: ``names``, ``dest``, ``type`` (``int``, ``float``, ``str``, ``json``, ``human_int``,
``human_int_or_auto``, ``str_or_json``, ``bool`` for flags that take no value, or ``unresolved:<source>``),
``nargs``, ``action``, ``choices``, ``none_allowed``, ``default`` (``{"unresolved": <source>}`` where it is computed
at run time) and the file it came from. A call whose names cannot be evaluated is listed under ``unresolved``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine_args.source import Module, SourceTree, Unresolved

TYPE_NAMES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "human_readable_int": "human_int",
    "human_readable_int_or_auto": "human_int_or_auto",
    "json.loads": "json",
    "parse_type(json.loads)": "json",
    "union_dict_and_str": "str_or_json",
}
ACTIONS = {
    "store_true": "store_true",
    "store_false": "store_false",
    "append": "append",
    "store_const": "store_const",
    "version": "version",
    "help": "help",
    "count": "count",
    "argparse.BooleanOptionalAction": "boolean_optional",
    "BooleanOptionalAction": "boolean_optional",
}
NO_VALUE = {"store_true", "store_false", "boolean_optional", "store_const", "version", "help", "count"}


@dataclass
class Collected:
    """The flags found, by primary name, and what could not be resolved."""

    flags: dict[str, dict[str, Any]] = field(default_factory=dict)
    unresolved: list[dict[str, str]] = field(default_factory=list)
    seen: set[int] = field(default_factory=set)
    """Functions already read (a helper called twice, or recursion, is read once)."""

    def add(self, record: dict[str, Any]) -> None:
        self.flags[record["names"][0]] = record


KwargsOf = Callable[[str], dict[str, dict[str, Any]]]
"""Config class name → its fields' flag records (vLLM's ``get_kwargs``)."""


def function(module: Module, qualname: str) -> ast.FunctionDef:
    """The function ``qualname`` (``Class.method`` or ``name``) defined in ``module``."""
    scope: list[ast.stmt] = module.tree.body
    node: ast.AST | None = None
    for part in qualname.split("."):
        node = next((n for n in scope if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == part), None)
        if node is None:
            raise Unresolved(f"{qualname} not found in {module.name}")
        scope = node.body
    assert isinstance(node, ast.FunctionDef)
    return node


def collect(
    tree: SourceTree,
    module: Module,
    func: ast.FunctionDef,
    *,
    env: Mapping[str, Any] | None = None,
    kwargs_of: KwargsOf | None = None,
    out: Collected | None = None,
) -> Collected:
    """Every flag ``func`` adds (in source order, nested blocks included)."""
    out = out if out is not None else Collected()
    if id(func) in out.seen:
        return out
    out.seen.add(id(func))
    local = _LocalKwargs(tree, module, kwargs_of)
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            local.note(node)
    for node in sorted((n for n in ast.walk(func) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)):
        kind = _call_kind(node)
        if kind is None:
            _follow(tree, module, node, kwargs_of, out)
            continue
        try:
            record = _record(tree, module, node, kind, dict(env or {}), local)
        except Unresolved as err:
            out.unresolved.append({"call": f"{tree.relpath(module)}:{node.lineno}", "why": err.text})
            continue
        if record is not None:
            out.add(record)
    return out


def _follow(tree: SourceTree, module: Module, node: ast.Call, kwargs_of: KwargsOf | None, out: Collected) -> None:
    """Flags added by a helper the function calls: ``helper(group, ...)`` (a function of the tree) or
    ``SomeArgGroup().add_arguments(parser)`` (Dynamo's argument groups)."""
    func = node.func
    target: tuple[Module, ast.AST] | None = None
    if isinstance(func, ast.Name):
        target = tree.lookup(module, func.id)
    elif isinstance(func, ast.Attribute) and func.attr == "add_arguments" and isinstance(func.value, ast.Call):
        cls = func.value.func
        found = tree.class_def(module, cls.id) if isinstance(cls, ast.Name) else None
        if found is not None:
            method = next(
                (n for n in found[1].body if isinstance(n, ast.FunctionDef) and n.name == "add_arguments"), None
            )
            target = None if method is None else (found[0], method)
    if target is not None and isinstance(target[1], ast.FunctionDef):
        env = {
            kw.arg: tree.value(module, kw.value)
            for kw in node.keywords
            if kw.arg and isinstance(kw.value, ast.Constant)
        }
        collect(tree, target[0], target[1], env=env, kwargs_of=kwargs_of, out=out)


def _call_kind(node: ast.Call) -> str | None:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    if name == "add_argument":
        return "dynamo" if any(kw.arg == "flag_name" for kw in node.keywords) else "argparse"
    if name == "add_negatable_bool_argument":
        return "dynamo_bool"
    return None


class _LocalKwargs:
    """``x_kwargs = get_kwargs(Cls)`` assignments in the function: name → the class's field records."""

    def __init__(self, tree: SourceTree, module: Module, kwargs_of: KwargsOf | None) -> None:
        self.tree, self.module, self.kwargs_of = tree, module, kwargs_of
        self.names: dict[str, str] = {}

    def note(self, node: ast.Assign) -> None:
        value = node.value
        if isinstance(value, ast.Call) and ast.unparse(value.func).endswith("get_kwargs") and value.args:
            target = node.targets[0]
            if isinstance(target, ast.Name) and isinstance(value.args[0], ast.Name):
                self.names[target.id] = value.args[0].id

    def field(self, node: ast.expr) -> dict[str, Any]:
        """``kw["field"]`` → a copy of that field's record."""
        if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in self.names):
            raise Unresolved(ast.unparse(node))
        if self.kwargs_of is None:
            raise Unresolved(ast.unparse(node))
        key = self.tree.value(self.module, node.slice)
        return dict(self.kwargs_of(self.names[node.value.id])[key])


def _record(
    tree: SourceTree, module: Module, node: ast.Call, kind: str, env: dict[str, Any], local: _LocalKwargs
) -> dict[str, Any] | None:
    keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
    record: dict[str, Any] = {"action": "store", "nargs": None, "choices": None, "none_allowed": False}
    if kind == "argparse":
        names = [tree.value(module, a, env) for a in node.args]
        if not names or not all(isinstance(n, str) and n.startswith("-") for n in names):
            return None  # a positional argument
        for kw in node.keywords:
            if kw.arg is None:
                try:
                    record.update(_spread(tree, module, kw.value, local))
                except Unresolved as err:  # keywords built in a local variable: the flag exists, its type is unknown
                    record["type"] = f"unresolved:**{err.text}"
    else:
        names = [tree.value(module, keywords.pop("flag_name"), env)]
        if "obsolete_flag" in keywords:
            obsolete = tree.value(module, keywords.pop("obsolete_flag"), env)
            names += [obsolete] if obsolete else []
        if kind == "dynamo_bool":
            record["action"] = "boolean_optional"
        elif "arg_type" not in keywords:
            record["type"] = "str"  # the helper's default arg_type
    record["names"] = names
    _apply_keywords(tree, module, keywords, record, env)
    record.setdefault("dest", names[0].lstrip("-").replace("-", "_"))
    record["file"] = tree.relpath(module)
    if record["action"] in NO_VALUE:
        record["type"] = "bool"
    record.setdefault("type", "str")  # argparse stores the string when no type is given
    record.setdefault("default", None)
    return record


def _spread(tree: SourceTree, module: Module, node: ast.expr, local: _LocalKwargs) -> dict[str, Any]:
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                out.update(local.field(value))
            else:
                out[tree.value(module, key)] = _literal_or_text(tree, module, value)
        return out
    return local.field(node)


def _literal_or_text(tree: SourceTree, module: Module, node: ast.expr) -> Any:
    try:
        return tree.value(module, node)
    except Unresolved as err:
        return {"unresolved": err.text}


def _apply_keywords(
    tree: SourceTree, module: Module, keywords: dict[str, ast.expr], record: dict[str, Any], env: dict[str, Any]
) -> None:
    for key, value in keywords.items():
        if key in ("type", "arg_type"):
            record["type"] = _type_name(value, record)
        elif key == "action":
            text = str(value.value) if isinstance(value, ast.Constant) else ast.unparse(value)
            record["action"] = ACTIONS.get(text, f"unresolved:{text}")
        elif key == "choices":
            choices = _literal_or_text(tree, module, value)
            record["choices"] = sorted(choices, key=str) if isinstance(choices, list | set | tuple) else choices
        elif key == "default":
            record["default"] = _literal_or_text(tree, module, value)
        elif key in ("nargs", "dest", "required", "const", "metavar"):
            record[key] = _literal_or_text(tree, module, value)


def _type_name(node: ast.expr, record: dict[str, Any]) -> str | None:
    text = ast.unparse(node)
    if text == "None":
        return "str"  # no type: argparse keeps the string
    if isinstance(node, ast.Call) and ast.unparse(node.func) == "optional_type" and node.args:
        record["none_allowed"] = True
        text = ast.unparse(node.args[0])
    return TYPE_NAMES.get(text, f"unresolved:{text}")
