"""Flags from click decorators (``@click.option(...)`` on a command function), and the keyword parameters of a plain
function, read with :mod:`ast`: the command-line options of TensorRT-LLM's ``trtllm-serve`` and the keys its
``disaggregated`` config file takes.

A click option's names are the strings that start with ``-`` (a bare string names the parameter); ``type`` maps as in
:mod:`engine_args.argparse_calls` plus ``click.Choice([...])`` / a ``click.Choice`` subclass (its first argument:
the choices; a second mapping argument: aliases, also accepted) and ``click.Path(...)`` (a string); ``is_flag=True``
takes no value; ``multiple=True`` may repeat. What cannot be evaluated is recorded as unresolved.
"""

from __future__ import annotations

import ast
from typing import Any

from engine_args.argparse_calls import TYPE_NAMES, Collected
from engine_args.source import Module, SourceTree, Unresolved


def _value(tree: SourceTree, module: Module, node: ast.expr) -> Any:
    try:
        return tree.value(module, node)
    except Unresolved as err:
        return {"unresolved": err.text}


def _click_type(tree: SourceTree, module: Module, node: ast.expr, record: dict[str, Any]) -> str:
    text = ast.unparse(node)
    if text in TYPE_NAMES:
        return TYPE_NAMES[text]
    if isinstance(node, ast.Call):
        head = ast.unparse(node.func).split(".")[-1]
        if head == "Path":
            return "str"
        if "Choice" in head and node.args:
            choices = _value(tree, module, node.args[0])
            if isinstance(choices, list) and len(node.args) > 1:
                aliases = _value(tree, module, node.args[1])
                choices = sorted(choices + (list(aliases) if isinstance(aliases, dict) else []))
            record["choices"] = choices
            return "str"
    return f"unresolved:{text}"


def click_options(tree: SourceTree, module: Module, function: str) -> Collected:
    """The options of the click command defined by ``function`` (a module-level function) in ``module``."""
    func = module.functions.get(function)
    if func is None:
        raise Unresolved(f"{function} not found in {module.name}")
    out = Collected()
    for deco in func.decorator_list:
        if not (isinstance(deco, ast.Call) and ast.unparse(deco.func).endswith("option")):
            continue
        words = [_value(tree, module, a) for a in deco.args]
        names = [w for w in words if isinstance(w, str) and w.startswith("-")]
        dest = next((w for w in words if isinstance(w, str) and not w.startswith("-")), None)
        record: dict[str, Any] = {"names": names, "action": "store", "nargs": None, "choices": None}
        record["none_allowed"] = False
        keywords = {kw.arg: kw.value for kw in deco.keywords if kw.arg}
        if "type" in keywords:
            record["type"] = _click_type(tree, module, keywords["type"], record)
        if "is_flag" in keywords and _value(tree, module, keywords["is_flag"]) is True:
            record.update(type="bool", action="store_true")
        if "multiple" in keywords and _value(tree, module, keywords["multiple"]) is True:
            record["action"] = "append"
        record.setdefault("type", "str")
        record["default"] = _value(tree, module, keywords["default"]) if "default" in keywords else None
        longest = max(names, key=len)
        record["dest"] = dest or longest.lstrip("-").replace("-", "_")
        record["file"] = tree.relpath(module)
        out.add(record)
    return out


def keyword_parameters(tree: SourceTree, module: Module, function: str) -> dict[str, dict[str, Any]]:
    """A function's keyword parameters as key records (``type`` from the annotation's name, ``choices`` of a
    ``Literal``, ``default``); ``**kwargs`` is recorded as ``"**": true`` (other keys pass through)."""
    func = module.functions.get(function)
    if func is None:
        raise Unresolved(f"{function} not found in {module.name}")
    args = func.args
    defaults: list[ast.expr | None] = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    out: dict[str, dict[str, Any]] = {}
    for arg, default in zip(args.args, defaults, strict=True):
        annotation = ast.unparse(arg.annotation) if arg.annotation is not None else "Any"
        record: dict[str, Any] = {"annotation": annotation, "choices": None}
        record["type"] = next((t for t in ("int", "str", "float", "bool", "dict", "List") if t in annotation), "any")
        if annotation.startswith("Literal[") and isinstance(arg.annotation, ast.Subscript):
            record["choices"] = _value(tree, module, arg.annotation.slice)
        record["default"] = None if default is None else _value(tree, module, default)
        out[arg.arg] = record
    if args.kwarg is not None:
        out["**"] = {"annotation": f"**{args.kwarg.arg}", "type": "any", "choices": None, "default": None}
    return out


def dict_keys(tree: SourceTree, module: Module, function: str, variable: str) -> list[str]:
    """The literal keys of the dict a function assigns to ``variable`` (``router_map = {...}``)."""
    func = module.functions.get(function)
    if func is None:
        raise Unresolved(f"{function} not found in {module.name}")
    for node in ast.walk(func):
        named = isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == variable for t in node.targets)
        if named and isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            return [str(tree.value(module, k)) for k in node.value.keys if k is not None]
    raise Unresolved(f"{variable} not assigned a dict literal in {function}")
