"""Snapshot the command-line arguments of the engine releases ``pdplan export`` targets, from their released sources.

Usage::

    pip download --no-deps --only-binary :all: vllm==0.20.1 sglang==0.5.11 sglang-router==0.3.2 ai-dynamo==1.2.1 -d W
    (unzip each wheel into its own folder)
    python tools/engine_args_snapshot.py vllm UNPACKED_VLLM_WHEEL --release 0.20.1 --artifact WHEEL_FILE_NAME
    python tools/engine_args_snapshot.py vllm-toy-proxy UNPACKED_VLLM_SDIST --release 0.20.1 --artifact SDIST_NAME
    python tools/engine_args_snapshot.py sglang UNPACKED_SGLANG_WHEEL --release 0.5.11 --artifact ...
    python tools/engine_args_snapshot.py sglang-router UNPACKED_ROUTER_WHEEL --release 0.3.2 --artifact ...
    python tools/engine_args_snapshot.py dynamo UNPACKED_AI_DYNAMO_WHEEL --release 1.2.1 --artifact ...
    python tools/engine_args_snapshot.py trtllm TENSORRT_LLM_SOURCES --release RELEASE --artifact ...
    python tools/engine_args_snapshot.py srun SLURM_SOURCES --release 25.11.7 --artifact "SchedMD/slurm tag ..."

TensorRT-LLM's wheels are not on PyPI (its ``tensorrt-llm`` entries are stub source archives that point to NVIDIA's
own index), so ``trtllm`` reads a folder holding ``tensorrt_llm/commands/serve.py``, ``tensorrt_llm/llmapi/
llm_args.py``, ``tensorrt_llm/llmapi/disagg_utils.py`` and ``tensorrt_llm/serve/router.py`` (whole files, or the
excerpts the snapshot's header names). ``srun`` (Slurm's, which starts a TensorRT-LLM instance wider than a node) reads
a Slurm source tree's ``src/common/slurm_opt.c`` (:mod:`engine_args.slurm_options`, regular expressions over its C
option records).

Each run writes ``pdplan/data/export/engine_args/<engine>-<release>.json`` (``--out`` to change the folder): a
header (engine, release, the artifact read, the files and functions read, this script) and, per group of flags
(the parts a program combines: vLLM's engine arguments and its OpenAI server's, Dynamo's runtime, worker
(vLLM, SGLang, TensorRT-LLM) and frontend groups), each flag's names, type, choices, nargs, action, default and file.
Nothing is imported: the sources are read with :mod:`ast` (:mod:`engine_args.source`), so the script needs neither
the engines nor a GPU.
What the AST pass cannot evaluate (a choice list or default computed at run time, a flag added in a loop over a
run-time list) is recorded as ``{"unresolved": <source text>}`` or under the group's ``unresolved``, never guessed.
"""

from __future__ import annotations

import argparse
import ast
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine_args.argparse_calls import ACTIONS, TYPE_NAMES, Collected, collect, function
from engine_args.click_pass import click_options, dict_keys, keyword_parameters
from engine_args.config_fields import field_kwargs
from engine_args.slurm_options import FILE as SLURM_OPT_FILE
from engine_args.slurm_options import srun_options
from engine_args.source import Module, SourceTree, Unresolved

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "pdplan" / "data" / "export" / "engine_args"


@dataclass(frozen=True)
class Part:
    """One group of flags: the functions that add them, in one module."""

    group: str
    module: str
    functions: tuple[str, ...]
    env: tuple[tuple[str, Any], ...] = ()


RECIPES: dict[str, tuple[str, tuple[Part, ...]]] = {
    "vllm": (
        "vLLM",
        (
            Part("engine", "vllm.engine.arg_utils", ("EngineArgs.add_cli_args", "AsyncEngineArgs.add_cli_args")),
            Part("openai_server", "vllm.entrypoints.openai.cli_args", ("make_arg_parser",)),
        ),
    ),
    "vllm-toy-proxy": (
        "vLLM toy proxy",
        (Part("proxy", "tests.v1.kv_connector.nixl_integration.toy_proxy_server", ("parse_args",)),),
    ),
    "sglang": ("SGLang", (Part("server_args", "sglang.srt.server_args", ("ServerArgs.add_cli_args",)),)),
    "sglang-router": (
        "sglang-router",
        (Part("router", "sglang_router.router_args", ("RouterArgs.add_cli_args",), (("prefix", ""),)),),
    ),
    "dynamo": (
        "Dynamo",
        (
            Part(
                "runtime", "dynamo.common.configuration.groups.runtime_args", ("DynamoRuntimeArgGroup.add_arguments",)
            ),
            Part("vllm_worker", "dynamo.vllm.backend_args", ("DynamoVllmArgGroup.add_arguments",)),
            Part("sglang_worker", "dynamo.sglang.backend_args", ("DynamoSGLangArgGroup.add_arguments",)),
            Part("trtllm_worker", "dynamo.trtllm.backend_args", ("DynamoTrtllmArgGroup.add_arguments",)),
            Part("frontend", "dynamo.frontend.frontend_args", ("FrontendArgGroup.add_arguments",)),
        ),
    ),
}


def _kwargs_of(tree: SourceTree, module: Module) -> Callable[[str], dict[str, dict[str, Any]]]:
    cache: dict[str, dict[str, dict[str, Any]]] = {}

    def kwargs_of(class_name: str) -> dict[str, dict[str, Any]]:
        if class_name not in cache:
            cache[class_name] = field_kwargs(tree, module, class_name)
        return cache[class_name]

    return kwargs_of


def _frontend_fields(tree: SourceTree, module: Module, out: Collected) -> None:
    """vLLM's OpenAI server flags: every field of ``FrontendArgs`` (and its base) as ``--field-name`` with
    ``get_kwargs``'s keywords, after the edits ``_customize_cli_kwargs`` makes (``kw["x"]["y"] = v``,
    ``del kw["x"]["y"]``; ``kw["x"]["flags"]`` adds names), replayed from the source."""
    kwargs = {name: dict(record) for name, record in field_kwargs(tree, module, "FrontendArgs").items()}
    for cls_name in ("BaseFrontendArgs", "FrontendArgs"):
        found = tree.class_def(module, cls_name)
        methods = [] if found is None else [n for n in found[1].body if isinstance(n, ast.FunctionDef)]
        for method in (m for m in methods if m.name == "_customize_cli_kwargs"):  # a class may not override it
            for stmt in ast.walk(method):
                _replay(tree, module, stmt, kwargs, out)
    for name, record in kwargs.items():
        names = [*record.pop("flags", []), f"--{name.replace('_', '-')}"]
        out.add({"names": names[::-1], "dest": name, **record})


def _replay(tree: SourceTree, module: Module, stmt: ast.AST, kwargs: dict[str, dict[str, Any]], out: Collected) -> None:
    def key_path(node: ast.expr) -> tuple[str, str] | None:
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Subscript):
            try:
                return tree.value(module, node.value.slice), tree.value(module, node.slice)
            except Unresolved:
                return None
        return None

    if isinstance(stmt, ast.Assign) and (path := key_path(stmt.targets[0])) is not None:
        field, key = path
        text = ast.unparse(stmt.value)
        if key == "type":
            kwargs[field]["type"] = TYPE_NAMES.get(text, f"unresolved:{text}")
        elif key == "action":
            value = stmt.value
            action = value.value if isinstance(value, ast.Constant) else f"unresolved:{text}"
            kwargs[field]["action"] = ACTIONS.get(str(action), str(action))
        else:
            try:
                kwargs[field][key] = tree.value(module, stmt.value)
            except Unresolved as err:
                out.unresolved.append({"call": f"{tree.relpath(module)}:{stmt.lineno}", "why": err.text})
    elif isinstance(stmt, ast.Delete):
        for target in stmt.targets:
            if (path := key_path(target)) is not None:
                kwargs[path[0]].pop(path[1], None)
                if path[1] == "nargs":
                    kwargs[path[0]]["nargs"] = None


TRTLLM_MODELS = (
    "BaseLlmArgs",
    "KvCacheConfig",
    "CacheTransceiverConfig",
    "TorchLlmArgs",
    "MoeConfig",
    "MoeLoadBalancerConfig",
)


def _trtllm_groups(tree: SourceTree) -> tuple[dict[str, Any], list[str]]:
    """TensorRT-LLM: ``trtllm-serve`` and ``trtllm-serve disaggregated`` options (click), the LLM-API argument
    models an ``--extra_llm_api_options`` YAML is validated with (pydantic fields, vLLM-style records), and the keys
    of a ``disaggregated`` config file (function parameters) with the router types."""
    serve = _module(tree, "tensorrt_llm.commands.serve")
    args = _module(tree, "tensorrt_llm.llmapi.llm_args")
    disagg = _module(tree, "tensorrt_llm.llmapi.disagg_utils")
    router = _module(tree, "tensorrt_llm.serve.router")
    groups: dict[str, Any] = {}
    for command in ("serve", "disaggregated"):
        out = click_options(tree, serve, command)
        groups[command] = {"flags": out.flags, "unresolved": out.unresolved}
    groups["llm_args"] = {"models": {name: field_kwargs(tree, args, name) for name in TRTLLM_MODELS}}
    groups["disagg_config"] = {
        "top": keyword_parameters(tree, disagg, "extract_disagg_cfg"),
        "servers": keyword_parameters(tree, disagg, "extract_ctx_gen_cfgs"),
        "router_types": dict_keys(tree, router, "create_router", "router_map"),
    }
    entry = [
        "tensorrt_llm/commands/serve.py: serve, disaggregated (click options)",
        f"tensorrt_llm/llmapi/llm_args.py: {', '.join(TRTLLM_MODELS)} (fields)",
        "tensorrt_llm/llmapi/disagg_utils.py: extract_disagg_cfg, extract_ctx_gen_cfgs (parameters)",
        "tensorrt_llm/serve/router.py: create_router (router_map keys)",
    ]
    return groups, entry


def _module(tree: SourceTree, name: str) -> Module:
    module = tree.module(name)
    if module is None:
        raise SystemExit(f"{name} is not under {tree.root}")
    return module


def snapshot(engine: str, root: Path, release: str, artifact: str) -> dict[str, Any]:
    """The snapshot document of ``engine`` (a key of :data:`RECIPES`, or ``trtllm``) read from the unpacked sources
    at ``root``."""
    tree = SourceTree(root)
    if engine == "srun":
        entry = [f"{SLURM_OPT_FILE}: common_options[] records srun takes (set_func or set_func_srun)"]
        doc = _document("Slurm srun", release, artifact, entry, tree, {"srun": {"flags": srun_options(root)}})
        doc["source"]["files_read"] = [SLURM_OPT_FILE]
        doc["source"]["extracted_by"] = "tools/engine_args_snapshot.py (regular expressions over the C records)"
        return doc
    if engine == "trtllm":
        trt_groups, entry = _trtllm_groups(tree)
        return _document("TensorRT-LLM", release, artifact, entry, tree, trt_groups)
    title, parts = RECIPES[engine]
    groups: dict[str, Any] = {}
    files: list[str] = []
    for part in parts:
        module = tree.module(part.module)
        if module is None:
            raise SystemExit(f"{part.module} is not under {root}")
        out = Collected()
        for qualname in part.functions:
            collect(
                tree,
                module,
                function(module, qualname),
                env=dict(part.env),
                kwargs_of=_kwargs_of(tree, module),
                out=out,
            )
        if part.group == "openai_server":
            _frontend_fields(tree, module, out)
        files.append(f"{tree.relpath(module)}: {', '.join(part.functions)}")
        groups[part.group] = {"flags": out.flags, "unresolved": out.unresolved}
    return _document(title, release, artifact, files, tree, groups)


def _document(
    title: str, release: str, artifact: str, files: list[str], tree: SourceTree, groups: dict[str, Any]
) -> dict[str, Any]:
    read = sorted({tree.relpath(m) for m in tree._modules.values() if m is not None})
    return {
        "schema_version": 1,
        "engine": title,
        "release": release,
        "source": {
            "artifact": artifact,
            "entry_points": files,
            "files_read": read,
            "extracted_by": "tools/engine_args_snapshot.py (ast pass; nothing imported)",
        },
        "groups": groups,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("engine", choices=sorted([*RECIPES, "trtllm", "srun"]))
    parser.add_argument("root", type=Path, help="the unpacked wheel (the folder holding the top-level packages)")
    parser.add_argument("--release", required=True, help="the release read, e.g. 0.20.1")
    parser.add_argument("--artifact", required=True, help="the file the sources came from (wheel name, registry)")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    doc = snapshot(args.engine, args.root, args.release, args.artifact)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{args.engine}-{args.release}.json"
    path.write_text(json.dumps(doc, indent=1, sort_keys=False, default=_json_default) + "\n")
    count = sum(len(g.get("flags", {})) for g in doc["groups"].values())
    unresolved = sum(len(g.get("unresolved", [])) for g in doc["groups"].values())
    print(f"{path}: {count} flags, {unresolved} calls unresolved")


def _json_default(value: Any) -> Any:
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    return {"unresolved": repr(value)}


if __name__ == "__main__":
    main()
