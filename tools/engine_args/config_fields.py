"""vLLM's argparse keywords for a config dataclass's fields, derived from the class's source the way vLLM derives them
at run time (``vllm/engine/arg_utils.py``: ``get_kwargs`` → ``_compute_kwargs``), by reading annotations and defaults
with :mod:`ast` instead of ``typing.get_type_hints``.

The rules, in ``_compute_kwargs``'s order, on the set of types a field's annotation names (``Annotated`` and unions
flattened, type aliases followed): a dataclass → a JSON value; ``bool`` → ``BooleanOptionalAction`` (``--x`` and
``--no-x``, no value); a ``Literal`` → its options as ``choices`` (a free string, ``metavar``, when ``str`` is also
allowed); ``tuple`` / ``list`` / ``set`` → ``nargs`` of the element type; ``int`` → int (``max_model_len``:
``human_readable_int_or_auto``; ``max_num_batched_tokens`` and ``kv_cache_memory_bytes``: ``human_readable_int``);
``float``; ``dict`` → JSON (or a string); ``str`` or any non-builtin class → a string; ``None`` allowed → the
value ``None`` parses to None (and is added to the choices). ``pydantic.Field`` bounds (``gt``, ``ge``, ``lt``,
``le``) are recorded as constraints: vLLM checks them when it builds the config.
"""

from __future__ import annotations

import ast
from typing import Any

from engine_args.source import Module, SourceTree, Unresolved, is_enum

BUILTINS = {"int", "float", "str", "bool", "dict", "list", "tuple", "set", "None", "Any", "object", "bytes"}
HUMAN_INT = {
    "max_model_len": "human_int_or_auto",
    "max_num_batched_tokens": "human_int",
    "kv_cache_memory_bytes": "human_int",
}


def _is_dataclass(cls: ast.ClassDef) -> bool:
    """A config class: a (pydantic) dataclass, or a pydantic model (a base named ``...BaseModel``)."""
    names = {ast.unparse(d.func if isinstance(d, ast.Call) else d).split(".")[-1] for d in cls.decorator_list}
    bases = {ast.unparse(b).split(".")[-1] for b in cls.bases}
    return bool(names & {"config", "dataclass"}) or any(b.endswith("BaseModel") for b in bases)


class _Hints:
    """The flattened type set of one annotation: ``kinds`` (builtin names, ``literal``, ``dataclass``, ``class``),
    the ``Literal`` options, and a collection's element kind."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.literals: list[Any] = []
        self.elem: str | None = None
        self.unresolved: list[str] = []


def _flatten(tree: SourceTree, module: Module, node: ast.expr, out: _Hints, depth: int = 0) -> None:
    if depth > 10:
        out.unresolved.append(ast.unparse(node))
        return
    if isinstance(node, ast.Constant) and node.value is None:
        out.kinds.add("None")
    elif isinstance(node, ast.Constant) and isinstance(node.value, str):  # a forward reference
        _flatten(tree, module, ast.parse(node.value, mode="eval").body, out, depth + 1)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _flatten(tree, module, node.left, out, depth + 1)
        _flatten(tree, module, node.right, out, depth + 1)
    elif isinstance(node, ast.Subscript):
        _subscript(tree, module, node, out, depth)
    elif isinstance(node, ast.Name | ast.Attribute):
        _named(tree, module, node, out, depth)
    else:
        out.unresolved.append(ast.unparse(node))


def _subscript(tree: SourceTree, module: Module, node: ast.Subscript, out: _Hints, depth: int) -> None:
    head = ast.unparse(node.value).split(".")[-1]
    args = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    if head == "Annotated":
        _flatten(tree, module, args[0], out, depth + 1)
    elif head in ("Union", "Optional"):
        for arg in args:
            _flatten(tree, module, arg, out, depth + 1)
        if head == "Optional":
            out.kinds.add("None")
    elif head == "Literal":
        out.kinds.add("literal")
        for arg in args:
            if isinstance(arg, ast.Constant):
                out.literals.append(arg.value)
            else:  # Literal["auto", OtherLiteral]: the other alias's options
                inner = _Hints()
                _flatten(tree, module, arg, inner, depth + 1)
                out.literals += inner.literals
                out.unresolved += inner.unresolved
    elif head in ("list", "tuple", "set", "List", "Tuple", "Set", "Sequence"):
        out.kinds.add(head.lower() if head != "Sequence" else "list")
        elem = _Hints()
        _flatten(tree, module, args[0], elem, depth + 1)
        out.elem = "str" if "str" in elem.kinds or len(elem.kinds) != 1 else next(iter(elem.kinds))
    elif head in ("dict", "Dict", "Mapping"):
        out.kinds.add("dict")
    elif head in ("ClassVar", "InitVar"):
        out.kinds.add("skip")
    else:
        out.kinds.add("class")


def _named(tree: SourceTree, module: Module, node: ast.Name | ast.Attribute, out: _Hints, depth: int) -> None:
    name = node.id if isinstance(node, ast.Name) else None
    if name in BUILTINS:
        out.kinds.add(name)
        return
    if name in ("Optional", "Any"):
        return
    found = tree.lookup(module, name) if name is not None else None
    if found is None:
        out.kinds.add("class")  # torch.dtype, a third-party class: not a builtin (vLLM: a string)
    elif isinstance(found[1], ast.ClassDef):
        if _is_dataclass(found[1]) and not is_enum(found[1]):
            out.kinds.add("dataclass")
        else:
            out.kinds.add("class")
    elif isinstance(found[1], ast.expr):
        _flatten(tree, found[0], found[1], out, depth + 1)  # a type alias
    else:
        out.kinds.add("class")


def _default(tree: SourceTree, module: Module, value: ast.expr | None) -> tuple[Any, dict[str, Any]]:
    """(default, constraints) of a field: ``= x``, ``= field(default=x | default_factory=f)`` or
    ``= Field(default=x, ge=..)``; an unresolved default is ``{"unresolved": text}``."""
    if value is None:
        return {"unresolved": "no default (required)"}, {}
    constraints: dict[str, Any] = {}
    expr: ast.expr | None = value
    if isinstance(value, ast.Call) and ast.unparse(value.func).split(".")[-1] in ("field", "Field"):
        expr = None
        for kw in value.keywords:
            if kw.arg == "default":
                expr = kw.value
            elif kw.arg == "default_factory":
                return _factory(kw.value), _bounds(tree, module, value)
        constraints = _bounds(tree, module, value)
        if expr is None and value.args:
            expr = value.args[0]
    if expr is None:
        return {"unresolved": ast.unparse(value)}, constraints
    try:
        return tree.value(module, expr), constraints
    except Unresolved as err:
        return {"unresolved": err.text}, constraints


def _factory(node: ast.expr) -> Any:
    text = ast.unparse(node)
    return {"list": [], "dict": {}, "set": []}.get(text, {"unresolved": f"default_factory={text}"})


def _bounds(tree: SourceTree, module: Module, call: ast.Call) -> dict[str, Any]:
    out = {}
    for kw in call.keywords:
        if kw.arg in ("gt", "ge", "lt", "le"):
            try:
                out[kw.arg] = tree.value(module, kw.value)
            except Unresolved as err:
                out[kw.arg] = {"unresolved": err.text}
    return out


def _fields(tree: SourceTree, module: Module, cls: ast.ClassDef) -> list[tuple[Module, ast.AnnAssign]]:
    """The class's annotated fields, base classes' first (dataclass inheritance order)."""
    out: list[tuple[Module, ast.AnnAssign]] = []
    for base in cls.bases:
        if isinstance(base, ast.Name):
            found = tree.class_def(module, base.id)
            if found is not None:
                out += _fields(tree, found[0], found[1])
    names = {f.target.id for _, f in out if isinstance(f.target, ast.Name)}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id in names:
                out = [(m, f) for m, f in out if not (isinstance(f.target, ast.Name) and f.target.id == node.target.id)]
            out.append((module, node))
    return out


def field_kwargs(tree: SourceTree, module: Module, class_name: str) -> dict[str, dict[str, Any]]:
    """``get_kwargs(cls)`` as data: field name → flag record (``type``, ``choices``, ``nargs``, ``action``,
    ``none_allowed``, ``default``, ``constraints``, ``file``)."""
    found = tree.class_def(module, class_name)
    if found is None:
        raise Unresolved(f"class {class_name} not found from {module.name}")
    out = {}
    for where, node in _fields(tree, found[0], found[1]):
        assert isinstance(node.target, ast.Name)
        hints = _Hints()
        try:
            _flatten(tree, where, node.annotation, hints)
        except Unresolved as err:
            hints.unresolved.append(err.text)
        if "skip" in hints.kinds:
            continue
        record = _record(node.target.id, hints)
        record["default"], constraints = _default(tree, where, node.value)
        if constraints:
            record["constraints"] = constraints
        record["file"] = tree.relpath(where)
        out[node.target.id] = record
    return out


def _record(name: str, hints: _Hints) -> dict[str, Any]:
    kinds = hints.kinds
    record: dict[str, Any] = {"action": "store", "nargs": None, "choices": None}
    if hints.unresolved:
        record["type"] = "unresolved:" + "; ".join(hints.unresolved)
    elif "dataclass" in kinds:
        record["type"] = "json"
    elif "bool" in kinds:
        record.update(type="bool", action="boolean_optional")
    elif "literal" in kinds:
        record["type"] = {bool: "bool", int: "int", float: "float"}.get(type(hints.literals[0]), "str")
        if "str" not in kinds:
            record["choices"] = sorted(hints.literals)
    elif kinds & {"tuple", "list", "set"}:
        record.update(type=hints.elem or "str", nargs="+")
    elif "int" in kinds:
        record["type"] = HUMAN_INT.get(name, "int")
    elif "float" in kinds:
        record["type"] = "float"
    elif "dict" in kinds:
        record["type"] = "str_or_json" if ("str" in kinds or "class" in kinds) else "json"
    elif kinds & {"str", "class"}:
        record["type"] = "str"
    else:
        record["type"] = f"unresolved:{sorted(kinds)}"
    record["none_allowed"] = "None" in kinds and record["type"] != "bool"
    if record["none_allowed"] and record["choices"] is not None:
        record["choices"] = [*record["choices"], "None"]
    return record
