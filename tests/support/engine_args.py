"""Check an exported command line the way the engine itself parses it: an argparse parser rebuilt from the argument
snapshots of the pinned releases (``pdplan/data/export/engine_args/*.json``, made by tools/engine_args_snapshot.py
from the released wheels), then the cross-flag rules each engine enforces when it builds its config.

:func:`parse` refuses (:class:`EngineRefusal`) an unknown flag, a value that does not parse to the flag's type or is
not one of its choices or outside its bounds, a value given to a flag that takes none, and a flag whose snapshot
record is unresolved (never passed unchecked). :func:`rule_violations` lists the cross-flag checks that fail.

A Dynamo worker parses its own groups first (``parse_known_args``) and gives the rest to the engine's parser
(ai-dynamo 1.2.1 ``dynamo/vllm/args.py`` ``parse_args``: ``AsyncEngineArgs.add_cli_args``, the engine group only;
``dynamo/sglang/args.py``: ``ServerArgs.add_cli_args``); the TensorRT-LLM worker has one parser
(``dynamo/trtllm/args.py``) and its engine flags and ``--override-engine-args`` become LLM-API arguments
(:func:`dynamo_trtllm_rules`): :data:`PROGRAMS` lists the stages of each program.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parents[2] / "pdplan" / "data" / "export" / "engine_args"

Group = tuple[str, str]
"""(snapshot file stem, group): ``("vllm-0.20.1", "engine")``."""

PROGRAMS: dict[str, tuple[tuple[Group, ...], ...]] = {
    "vllm serve": ((("vllm-0.20.1", "openai_server"), ("vllm-0.20.1", "engine")),),
    "python3 -m dynamo.vllm": (
        (("dynamo-1.2.1", "runtime"), ("dynamo-1.2.1", "vllm_worker")),
        (("vllm-0.20.1", "engine"),),
    ),
    "python3 -m dynamo.sglang": (
        (("dynamo-1.2.1", "runtime"), ("dynamo-1.2.1", "sglang_worker")),
        (("sglang-0.5.11", "server_args"),),
    ),
    "python3 -m dynamo.trtllm": ((("dynamo-1.2.1", "runtime"), ("dynamo-1.2.1", "trtllm_worker")),),
    "python3 -m dynamo.frontend": ((("dynamo-1.2.1", "frontend"),),),
    "python -m sglang.launch_server": ((("sglang-0.5.11", "server_args"),),),
    "python -m sglang_router.launch_router": ((("sglang-router-0.3.2", "router"),),),
    "python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py": ((("vllm-toy-proxy-0.20.1", "proxy"),),),
    "trtllm-serve": ((("trtllm-unpinned", "serve"),),),
    "trtllm-serve disaggregated": ((("trtllm-unpinned", "disaggregated"),),),
    "srun": ((("srun-25.11.7", "srun"),),),
}
"""Each program's parsing stages: a stage's groups form one parser; every stage but the last keeps what it does not
know for the next (``parse_known_args``)."""


class EngineRefusal(ValueError):
    """What the engine's own parser would say before it starts (exit 2) or its config check would raise."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse would print and exit
        raise EngineRefusal(f"{self.prog}: {message}")


@cache
def snapshot(stem: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((DATA / f"{stem}.json").read_text())
    return data


def records(group: Group) -> dict[str, dict[str, Any]]:
    flags: dict[str, dict[str, Any]] = snapshot(group[0])["groups"][group[1]]["flags"]
    return flags


def _human_int(text: str, auto: bool = False) -> int:
    """vLLM ``human_readable_int`` (``vllm/utils/argparse_utils.py``): ``25.6k``, ``1K``, plain integers;
    ``..._or_auto`` also ``-1`` / ``auto``."""
    if auto and (text == "-1" or text.lower() == "auto"):
        return -1
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", text.strip())
    if match is None:
        return int(text)
    number, suffix = match.groups()
    if suffix.islower():
        return int(float(number) * 10 ** (3 * "kmgt".index(suffix) + 3))
    return int(number) * 2 ** (10 * "KMGT".index(suffix) + 10)


def _json_or_str(text: str) -> Any:
    return json.loads(text) if re.match(r"(?s)^\s*{.*}\s*$", text) else text


CONVERTERS: dict[str, Callable[[str], Any]] = {
    "int": int,
    "float": float,
    "str": str,
    "json": json.loads,
    "human_int": _human_int,
    "human_int_or_auto": lambda text: _human_int(text, auto=True),
    "str_or_json": _json_or_str,
}


def _converter(name: str, record: dict[str, Any]) -> Callable[[str], Any]:
    """The value parser of one flag: its type, then ``None`` where allowed, its choices and its bounds."""

    def convert(text: str) -> Any:
        kind = record["type"]
        if kind not in CONVERTERS:
            raise argparse.ArgumentTypeError(f"{name}: the snapshot cannot check this flag ({kind})")
        if record.get("none_allowed") and text in ("", "None"):
            return None
        try:
            value = CONVERTERS[kind](text)
        except ValueError as err:
            raise argparse.ArgumentTypeError(f"{name}: {text!r} is not {kind}") from err
        choices = record.get("choices")
        if isinstance(choices, dict):
            raise argparse.ArgumentTypeError(f"{name}: the snapshot cannot check its choices ({choices})")
        if choices is not None and value not in choices:
            raise argparse.ArgumentTypeError(f"{name}: {text!r} is not one of {choices}")
        _check_bounds(name, value, record.get("constraints", {}))
        return value

    return convert


def _check_bounds(name: str, value: Any, bounds: dict[str, Any]) -> None:
    tests = {
        "gt": lambda b: value > b,
        "ge": lambda b: value >= b,
        "lt": lambda b: value < b,
        "le": lambda b: value <= b,
    }
    for key, bound in bounds.items():
        if isinstance(bound, dict):
            raise argparse.ArgumentTypeError(f"{name}: the snapshot cannot check its bound {key} ({bound})")
        if not tests[key](bound):
            raise argparse.ArgumentTypeError(f"{name}: {value} violates {key} {bound}")


def _add(parser: argparse.ArgumentParser, record: dict[str, Any]) -> None:
    names, action = record["names"], record["action"]
    kwargs: dict[str, Any] = {"dest": record["dest"], "default": None}
    if action == "boolean_optional":
        kwargs["action"] = argparse.BooleanOptionalAction
    elif action in ("store_true", "store_false", "count"):
        kwargs["action"] = action
    elif action in ("store_const", "version", "help"):
        kwargs["action"] = "store_true"
    elif action in ("store", "append"):
        kwargs.update(action=action, type=_converter(names[0], record))
        if record.get("nargs") is not None:
            kwargs["nargs"] = record["nargs"]
    else:  # a custom action the snapshot could not resolve: refuse any use
        kwargs.update(action="store", type=_converter(names[0], {**record, "type": f"unresolved action {action}"}))
    parser.add_argument(*names, **kwargs)


@cache
def _parser(prog: str, groups: tuple[Group, ...], positional: bool, rest: bool = False) -> _Parser:
    parser = _Parser(prog=prog, add_help=False, allow_abbrev=False)
    seen: set[str] = set()
    for group in groups:
        for record in records(group).values():
            fresh = [n for n in record["names"] if n not in seen]
            if fresh:
                _add(parser, {**record, "names": fresh})
                seen.update(fresh)
    if positional:
        parser.add_argument("model_tag", nargs="?")
    if rest:  # srun: its options end at the command it runs (Slurm's getopt stops at the first non-option)
        parser.add_argument("command", nargs=argparse.REMAINDER)
    return parser


def parse(program: str, argv: Sequence[str]) -> argparse.Namespace:
    """``argv`` (the words after the program) parsed as ``program`` parses them; EngineRefusal otherwise."""
    if program not in PROGRAMS:
        raise EngineRefusal(f"no argument snapshot for {program!r}")
    stages = PROGRAMS[program]
    rest, namespace = list(argv), argparse.Namespace()
    for i, groups in enumerate(stages):
        parser = _parser(program, groups, positional=program in ("vllm serve", "trtllm-serve"), rest=program == "srun")
        if i < len(stages) - 1:
            namespace, rest = parser.parse_known_args(rest, namespace)
        else:
            namespace = parser.parse_args(rest, namespace)
    return namespace


def _get(ns: argparse.Namespace, name: str, default: Any = None) -> Any:
    value = getattr(ns, name, None)
    return default if value is None else value


def vllm_rules(ns: argparse.Namespace) -> list[str]:
    """vLLM 0.20.1's checks on the values an export writes: ``vllm/config/scheduler.py``
    ``SchedulerConfig.verify_max_model_len`` (token budget ≥ max_num_seqs; ≥ max_model_len unless chunked prefill,
    on by default: ``enable_chunked_prefill: bool = True``) and ``vllm/config/parallel.py``
    ``_validate_parallel_config`` (EPLB needs expert parallelism and TP × DP > 1; redundant experts need EPLB); for
    data-parallel ranks over nodes, ``vllm/entrypoints/cli/serve.py`` ``run_headless`` (``--data-parallel-size-local``
    > 0 in headless mode) and ``vllm/engine/arg_utils.py`` ``create_engine_config`` (a start rank without
    ``--headless`` turns on hybrid load balancing, not the one API server written; the local ranks, from the start
    rank on, within ``--data-parallel-size``)."""
    out = []
    budget, seqs, length = ns.max_num_batched_tokens, ns.max_num_seqs, ns.max_model_len
    if budget is not None and seqs is not None and budget < seqs:
        out.append(f"max_num_batched_tokens ({budget}) must be >= max_num_seqs ({seqs})")
    chunked = _get(ns, "enable_chunked_prefill", True)
    if budget is not None and length is not None and length > 0 and budget < length and not chunked:
        out.append(f"max_num_batched_tokens ({budget}) is smaller than max_model_len ({length}) without chunking")
    redundant = (ns.eplb_config or {}).get("num_redundant_experts", 0)
    if ns.enable_eplb:
        if not ns.enable_expert_parallel:
            out.append("enable_expert_parallel must be True to use EPLB")
        if _get(ns, "tensor_parallel_size", 1) * _get(ns, "data_parallel_size", 1) <= 1:
            out.append("EPLB requires tensor_parallel_size or data_parallel_size > 1")
    elif redundant:
        out.append(f"num_redundant_experts is {redundant} but EPLB is not enabled")
    return out + _vllm_node_rules(ns)


def _vllm_node_rules(ns: argparse.Namespace) -> list[str]:
    """The data-parallel rules of :func:`vllm_rules` (ranks over several nodes)."""
    out = []
    local, start = ns.data_parallel_size_local, _get(ns, "data_parallel_start_rank", 0)
    if _get(ns, "headless", False) and not (local or 0) > 0:
        out.append("data_parallel_size_local must be > 0 in headless mode")
    if start and not _get(ns, "headless", False):
        out.append("a data-parallel start rank without --headless turns on hybrid load balancing")
    if local is not None and start + local > _get(ns, "data_parallel_size", 1):
        out.append(f"ranks {start}..{start + local - 1} exceed data_parallel_size {_get(ns, 'data_parallel_size', 1)}")
    return out


def sglang_rules(ns: argparse.Namespace) -> list[str]:
    """SGLang 0.5.11's checks (``python/sglang/srt/server_args.py``): ``check_server_args`` (TP × PP divisible by
    nnodes; chunked prefill size a multiple of the page size outside decode; two-batch overlap needs an MoE
    all-to-all backend), ``_handle_data_parallelism`` (DP attention: tp_size divisible by dp_size),
    ``_handle_eplb_and_dispatch`` (EPLB needs ep_size > 1), ``_handle_pd_disaggregation`` (no ``fake`` backend on a
    prefill server); and ``_handle_a2a_moe``, which replaces ep_size by tp_size under DeepEP: an export that writes
    another ep_size would not run the EP it was priced with. (``ServerArgs.from_cli_args`` renames the parsed
    ``tensor_parallel_size`` etc. to ``tp_size``.)"""
    out = []
    tp, pp = _get(ns, "tensor_parallel_size", 1), _get(ns, "pipeline_parallel_size", 1)
    dp, ep_written = _get(ns, "data_parallel_size", 1), ns.expert_parallel_size
    if (tp * pp) % _get(ns, "nnodes", 1):
        out.append("tp_size * pp_size must be divisible by nnodes")
    chunk, page = _get(ns, "chunked_prefill_size", -1), _get(ns, "page_size", 1)
    if chunk > 0 and _get(ns, "disaggregation_mode", "null") != "decode" and chunk % page:
        out.append(f"chunked_prefill_size {chunk} must be divisible by page_size {page}")
    a2a = _get(ns, "moe_a2a_backend", "none")
    if ns.enable_two_batch_overlap and a2a == "none":
        out.append("two batch overlap needs moe_a2a_backend other than none")
    if ns.enable_dp_attention and dp > 1 and tp % dp:
        out.append(f"DP attention: tp_size {tp} must be divisible by dp_size {dp}")
    ep = tp if a2a == "deepep" else (ep_written or 1)
    if a2a == "deepep" and ep_written is not None and ep_written != tp:
        out.append(f"DeepEP sets ep_size to tp_size ({tp}), not the {ep_written} written")
    if ns.enable_eplb and ep <= 1:
        out.append("EPLB needs ep_size > 1")
    if _get(ns, "disaggregation_mode", "null") == "prefill" and ns.disaggregation_transfer_backend == "fake":
        out.append("a prefill server cannot use the fake transfer backend")
    fraction = ns.mem_fraction_static
    if fraction is not None and not 0 < fraction < 1:
        out.append(f"mem_fraction_static {fraction} is not in (0, 1)")
    return out + _sglang_node_rules(ns)


def _sglang_node_rules(ns: argparse.Namespace) -> list[str]:
    """SGLang 0.5.11's multi-node checks: ``check_server_args`` ("multi-node data parallel is not supported unless
    dp attention"); a node rank within ``nnodes``; ``--dist-init-addr`` as ``host:port`` (``NetworkAddress.parse``)
    wherever ``nnodes`` > 1 (every node meets there: ``model_runner.py`` initialises torch.distributed at it); and
    ``entrypoints/engine.py`` ``_calculate_rank_ranges`` run for every node: each (PP, TP) rank started exactly
    once."""
    nnodes, rank = _get(ns, "nnodes", 1), _get(ns, "node_rank", 0)
    tp, pp = _get(ns, "tensor_parallel_size", 1), _get(ns, "pipeline_parallel_size", 1)
    dp = _get(ns, "data_parallel_size", 1)
    out = []
    if dp > 1 and nnodes != 1 and not ns.enable_dp_attention:
        out.append("multi-node data parallel is not supported unless dp attention")
    if not 0 <= rank < nnodes:
        out.append(f"node_rank {rank} is not one of the {nnodes} nodes")
    addr = ns.dist_init_addr
    if nnodes > 1 and (addr is None or not re.fullmatch(r"[^:\s\[\]]+:\d{1,5}", addr)):
        out.append(f"--dist-init-addr {addr!r} is not host:port, which every node of a multi-node server needs")
    started: list[tuple[int, int]] = []
    for node in range(nnodes):
        pp_node, per_pp = max(pp // nnodes, 1), max(nnodes // pp, 1)
        tp_node = tp // per_pp
        started += [
            (p, t)
            for p in range(pp_node * (node // per_pp), pp_node * (node // per_pp + 1))
            for t in range(tp_node * (node % per_pp), tp_node * (node % per_pp + 1))
        ]
    if sorted(started) != [(p, t) for p in range(pp) for t in range(tp)]:
        out.append(f"over {nnodes} nodes SGLang does not start each of the pp {pp} x tp {tp} ranks exactly once")
    return out


def dynamo_vllm_rules(ns: argparse.Namespace) -> list[str]:
    """ai-dynamo 1.2.1 ``dynamo/vllm/args.py`` ``cross_validate_config``: a prefill worker needs an explicit
    ``--kv-transfer-config``; then vLLM's own checks."""
    out = []
    if ns.disaggregation_mode == "prefill" and ns.kv_transfer_config is None:
        out.append("--disaggregation-mode prefill needs an explicit --kv-transfer-config")
    return out + vllm_rules(ns)


def router_rules(ns: argparse.Namespace) -> list[str]:
    """sglang-router 0.3.2 ``router_args.py``: PD mode routes to the ``--prefill`` and ``--decode`` servers given."""
    if ns.pd_disaggregation and not (ns.prefill and ns.decode):
        return ["--pd-disaggregation needs --prefill and --decode servers"]
    return []


def proxy_rules(ns: argparse.Namespace) -> list[str]:
    """vLLM 0.20.1 ``tests/v1/kv_connector/nixl_integration/toy_proxy_server.py`` ``parse_args``: as many hosts as
    ports, for prefillers and for decoders."""
    out = []
    for kind in ("prefiller", "decoder"):
        hosts, ports = getattr(ns, f"{kind}_hosts") or [], getattr(ns, f"{kind}_ports") or []
        if len(hosts) != len(ports):
            out.append(f"{len(hosts)} {kind} hosts but {len(ports)} ports")
    return out


def _models() -> dict[str, dict[str, dict[str, Any]]]:
    models: dict[str, dict[str, dict[str, Any]]] = snapshot("trtllm-unpinned")["groups"]["llm_args"]["models"]
    return models


NESTED = {
    "kv_cache_config": "KvCacheConfig",
    "cache_transceiver_config": "CacheTransceiverConfig",
    "moe_config": "MoeConfig",
    "load_balancer": "MoeLoadBalancerConfig",
}
YAML_TYPES: dict[str, tuple[type, ...]] = {"int": (int,), "float": (float, int), "str": (str,), "bool": (bool,)}


def llm_args_problems(options: Any, model: str = "BaseLlmArgs", where: str = "") -> list[str]:
    """An ``--extra_llm_api_options`` mapping checked as TensorRT-LLM's LLM-API models check it
    (``tensorrt_llm/llmapi/llm_args.py``: ``StrictBaseModel``, ``extra="forbid"``): every key a field, each value of
    the field's type, in its choices and bounds; nested configs checked against their own model."""
    if not isinstance(options, dict):
        return [f"{where or model}: not a mapping"]
    fields, out = _model_fields(model), []
    for key, value in options.items():
        path = f"{where}{key}"
        if key not in fields:
            out.append(f"{path}: not a field of {model} (extra keys are forbidden)")
        elif key in NESTED:
            out += llm_args_problems(value, NESTED[key], f"{path}.")
        else:
            out += _value_problems(path, value, fields[key])
    return out


def _model_fields(model: str) -> dict[str, dict[str, Any]]:
    """A model's fields; ``BaseLlmArgs`` with those of ``TorchLlmArgs``, its PyTorch-backend subclass that
    ``trtllm-serve --backend pytorch`` validates the options with (the snapshot holds only the subclass fields pdplan
    writes)."""
    models = _models()
    return {**models[model], **models["TorchLlmArgs"]} if model == "BaseLlmArgs" else models[model]


def moe_problems(options: dict[str, Any]) -> list[str]:
    """TensorRT-LLM's MoE checks on an options mapping (``tensorrt_llm/llmapi/llm_args.py``
    ``MoeLoadBalancerConfig.setup``: "num_slots ... must be divisible by ep_size")."""
    balancer = (options.get("moe_config") or {}).get("load_balancer")
    slots, ep = (balancer or {}).get("num_slots"), options.get("moe_expert_parallel_size") or 1
    if isinstance(slots, int) and slots % ep:
        return [f"moe_config.load_balancer.num_slots ({slots}) must be divisible by ep_size ({ep})"]
    return []


def _value_problems(path: str, value: Any, record: dict[str, Any]) -> list[str]:
    if value is None:
        return [] if record.get("none_allowed") else [f"{path}: None is not allowed"]
    kinds = YAML_TYPES.get(record["type"])
    if kinds is None:
        return [f"{path}: the snapshot cannot check this field ({record['type']})"]
    if not isinstance(value, kinds) or (record["type"] != "bool" and isinstance(value, bool)):
        return [f"{path}: {value!r} is not {record['type']}"]
    if record.get("choices") is not None and value not in record["choices"]:
        return [f"{path}: {value!r} is not one of {record['choices']}"]
    try:
        _check_bounds(path, value, record.get("constraints", {}))
    except argparse.ArgumentTypeError as err:
        return [str(err)]
    return []


def trtllm_serve_rules(ns: argparse.Namespace) -> list[str]:
    """``trtllm-serve``: the ``--extra_llm_api_options`` file the command names, checked as the LLM API does."""
    if ns.extra_llm_api_options is None:
        return []
    options = yaml.safe_load(Path(ns.extra_llm_api_options).read_text())
    return llm_args_problems(options) + (moe_problems(options) if isinstance(options, dict) else [])


def disagg_config_problems(config: Any) -> list[str]:
    """A ``trtllm-serve disaggregated`` config (``tensorrt_llm/llmapi/disagg_utils.py``): top-level keys are
    ``extract_disagg_cfg``'s parameters (others pass to both sections as LLM-API arguments); each section's keys are
    ``extract_ctx_gen_cfgs``' parameters, ``router`` (``type`` one of ``create_router``'s) or LLM-API arguments;
    as many ``urls`` (``host:port``) as ``num_instances``."""
    spec = snapshot("trtllm-unpinned")["groups"]["disagg_config"]
    if not isinstance(config, dict):
        return ["disagg config: not a mapping"]
    out, llm_keys = [], set(_models()["BaseLlmArgs"])
    for key in config:
        if key not in spec["top"] and key not in llm_keys:
            out.append(f"{key}: not a disaggregated-server key or an LLM-API argument")
    for name in ("context_servers", "generation_servers"):
        section = config.get(name)
        if not isinstance(section, dict):
            out.append(f"{name}: missing")
            continue
        extra = {k: v for k, v in section.items() if k not in spec["servers"] and k != "router"}
        out += llm_args_problems(extra, where=f"{name}.")
        router = section.get("router", {}).get("type", "round_robin")
        if router not in spec["router_types"]:
            out.append(f"{name}.router.type: {router!r} is not one of {spec['router_types']}")
        urls = section.get("urls") or []
        if len(urls) != section.get("num_instances", 1):
            out.append(f"{name}: {len(urls)} urls for num_instances {section.get('num_instances', 1)}")
        out += [f"{name}.urls: {u!r} is not host:port" for u in urls if not re.fullmatch(r"[^:\s]+:\d+", str(u))]
    return out


def trtllm_disagg_rules(ns: argparse.Namespace) -> list[str]:
    if ns.config_file is None:
        return ["trtllm-serve disaggregated needs -c CONFIG"]
    return disagg_config_problems(yaml.safe_load(Path(ns.config_file).read_text()))


def srun_rules(ns: argparse.Namespace) -> list[str]:
    """``srun`` as pdplan writes it for a TensorRT-LLM instance over nodes (``pdplan/report/export/trtllm_nodes.py``):
    Slurm 25.11.7 ``src/common/proc_args.c`` ``verify_dist_type`` (``arbitrary`` one of its distributions) and
    ``src/common/slurm_opt.c`` ``_validate_nodelist`` (a host file is read only without ``--nodelist``); the command
    it runs is ``trtllm-llmapi-launch`` (no options: ``tensorrt_llm/llmapi/trtllm-llmapi-launch``) then
    ``trtllm-serve``, checked as that program."""
    out = []
    if ns.distribution != "arbitrary" or ns.nodelist is not None:
        out.append("srun: the ranks follow SLURM_HOSTFILE only with --distribution arbitrary and no --nodelist")
    if not ns.nodes or not ns.ntasks or int(ns.ntasks) % int(ns.nodes):
        out.append(f"srun: --ntasks {ns.ntasks} is not a whole number of ranks on each of --nodes {ns.nodes}")
    command = list(ns.command or [])
    if command[:2] != ["trtllm-llmapi-launch", "trtllm-serve"]:
        return [*out, f"srun runs {command[:2]}, not trtllm-llmapi-launch trtllm-serve"]
    try:
        check("trtllm-serve", command[2:])
    except EngineRefusal as err:
        out.append(str(err))
    return out


DYNAMO_TRTLLM_KEYS = {
    "tensor_parallel_size": "tensor_parallel_size",
    "pipeline_parallel_size": "pipeline_parallel_size",
    "expert_parallel_size": "moe_expert_parallel_size",
    "enable_attention_dp": "enable_attention_dp",
    "max_batch_size": "max_batch_size",
    "max_num_tokens": "max_num_tokens",
    "max_seq_len": "max_seq_len",
}
"""Dynamo 1.2.1 TensorRT-LLM worker flag (dest) → the LLM-API argument it sets (``dynamo/trtllm/workers/
llm_worker.py`` ``arg_map``)."""


def dynamo_trtllm_rules(ns: argparse.Namespace) -> list[str]:
    """ai-dynamo 1.2.1 ``dynamo/trtllm/workers/llm_worker.py``: the worker's engine flags and its
    ``--override-engine-args`` (a JSON object, ``json.loads`` then ``deep_update``) make TensorRT-LLM's LLM arguments,
    checked as the LLM API checks them (:func:`llm_args_problems`, :func:`moe_problems`); a prefill or decode worker
    moves KV through TensorRT-LLM's cache transceiver, which runs only with a ``cache_transceiver_config``
    (NVIDIA/TensorRT-LLM ``docs/source/features/disagg-serving.md`` @ 0434b982: "We use the
    ``cache_transceiver_config`` configuration to set up disaggregated serving")."""
    options: dict[str, Any] = {key: getattr(ns, dest) for dest, key in DYNAMO_TRTLLM_KEYS.items()}
    options = {key: value for key, value in options.items() if value is not None}
    if ns.override_engine_args:
        try:
            overrides = json.loads(ns.override_engine_args)
        except json.JSONDecodeError as err:
            return [f"--override-engine-args is not JSON: {err}"]
        if not isinstance(overrides, dict):
            return ["--override-engine-args must be a JSON object"]
        options.update(overrides)
    out = llm_args_problems(options) + moe_problems(options)
    if ns.disaggregation_mode in ("prefill", "decode") and "cache_transceiver_config" not in options:
        out.append(f"a {ns.disaggregation_mode} worker needs cache_transceiver_config to move its KV")
    return out


RULES: dict[str, Callable[[argparse.Namespace], list[str]]] = {
    "srun": srun_rules,
    "trtllm-serve": trtllm_serve_rules,
    "trtllm-serve disaggregated": trtllm_disagg_rules,
    "python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py": proxy_rules,
    "vllm serve": vllm_rules,
    "python3 -m dynamo.vllm": dynamo_vllm_rules,
    "python -m sglang.launch_server": sglang_rules,
    "python3 -m dynamo.sglang": sglang_rules,
    "python3 -m dynamo.trtllm": dynamo_trtllm_rules,
    "python -m sglang_router.launch_router": router_rules,
}


def rule_violations(program: str, ns: argparse.Namespace) -> list[str]:
    return RULES.get(program, lambda _: [])(ns)


def check(program: str, argv: Sequence[str]) -> argparse.Namespace:
    """Parse ``argv`` as ``program`` does and apply its rules; EngineRefusal naming every problem otherwise."""
    ns = parse(program, argv)
    problems = rule_violations(program, ns)
    if problems:
        raise EngineRefusal(f"{program}: {'; '.join(problems)}")
    return ns
