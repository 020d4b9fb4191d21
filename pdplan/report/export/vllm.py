"""A plan as ``vllm serve`` launch commands (one bash script, a case per role).

Format followed (vllm-project/vllm ``docs/features/nixl_connector_usage.md``, "Multi-Instance Setup"): prefillers
run ``vllm serve MODEL --port 8100 --tensor-parallel-size T --kv-transfer-config
'{"kv_connector":"NixlConnector","kv_role":"kv_producer","kv_load_failure_policy":"fail"}'`` with
``VLLM_NIXL_SIDE_CHANNEL_HOST`` (this host's address), ``VLLM_NIXL_SIDE_CHANNEL_PORT`` and ``UCX_NET_DEVICES=all``;
decoders the same with ``kv_role`` ``kv_consumer`` on port 8200; ``toy_proxy_server.py`` (in the vLLM repository,
``tests/v1/kv_connector/nixl_integration/``) routes each request to a prefiller, then a decoder, given
``--prefiller-hosts/--prefiller-ports`` and ``--decoder-hosts/--decoder-ports`` (one entry per instance), bound to
all interfaces with ``--host 0.0.0.0`` (its default is 127.0.0.1) and routing round-robin (``itertools.cycle`` over
its clients; :mod:`pdplan.report.export.routing`).
Colocated plans: one ``vllm serve --data-parallel-size z`` on one node, whose data-parallel engines are the z
instances behind vLLM's own load balancer, where that matches the priced instances
(:mod:`pdplan.report.export.vllm_dp`), or, where they need m nodes, one such launch a node (node 0 with the API
and the balancer over all z, the others ``--headless``); else one plain ``vllm serve`` per instance, no connector,
and a note that vLLM ships no balancer for them. An instance of data-parallel ranks wider than a node runs one
``vllm serve`` a node, the first serving the API, the others ``--headless``
(:func:`pdplan.report.export.vllm_dp.node_flags`), with the packing of :mod:`pdplan.report.export.shell`. Ports
and connector settings: ``pdplan/data/export/targets.yaml``; engine arguments:
:mod:`pdplan.report.export.engine_args`.
"""

from __future__ import annotations

import dataclasses
import json

from pdplan.report.export.cache import plan_cache, vllm_transfer_config
from pdplan.report.export.common import (
    REMOTE_PREFILL,
    Chosen,
    ExportContext,
    ExportResult,
    LaunchCommand,
    base_role,
    comment_text,
    gpu_facts,
    role_summary,
)
from pdplan.report.export.engine_args import role_engine_flags
from pdplan.report.export.shell import (
    HEAD_IP,
    Launcher,
    Packing,
    Raw,
    command_lines,
    instance_loop,
    launch_script,
    packing,
    pool_host_checks,
    slot_port,
)
from pdplan.report.export.vllm_dp import SPANS_WORDS, node_flags, node_split, spans_nodes, vllm_dp_front
from pdplan.specs.export import EngineData

PROXY = "python tests/v1/kv_connector/nixl_integration/toy_proxy_server.py"
HOST_ENV = Raw('"${HOST_IP:?set HOST_IP to the address of this instance}"')
FRONT_HEAD_IP = '"${HEAD_IP:?set HEAD_IP to the address of node 0, which serves the API}"'


def _kv_transfer_config(chosen: Chosen, ctx: ExportContext, role_name: str, kv_role: str) -> str:
    """The NIXL connector's config; on a prefill role with a host-DRAM tier, inside a MultiConnector
    (:func:`pdplan.report.export.cache.vllm_transfer_config`)."""
    data = ctx.targets.engines["vllm"]
    config: dict[str, object] = {
        "kv_connector": data.kv_connector,
        "kv_role": kv_role,
        "kv_load_failure_policy": data.kv_load_failure_policy,
    }
    return json.dumps(vllm_transfer_config(config, plan_cache(chosen, ctx), ctx, role_name), separators=(",", ":"))


def _port(data: EngineData, role_name: str) -> int:
    """The role's base port (its slot 0): prefill, decode or colocated (targets.yaml)."""
    return {"prefill": data.prefill_port, "decode": data.decode_port}.get(base_role(role_name), data.colocated_port)


def _serve(chosen: Chosen, ctx: ExportContext, role_name: str) -> LaunchCommand:
    data = ctx.targets.engines["vllm"]
    role = dict(chosen.plan.roles())[role_name]
    flags: list[tuple[str, str | None]] = [("--port", slot_port(_port(data, role_name)))]
    flags += role_engine_flags(chosen, ctx, role_name, role, "vllm")
    env: tuple[tuple[str, str], ...] = (("CUDA_VISIBLE_DEVICES", _slot_gpus(packing(ctx, role))),)
    if role_name != "colocated":
        kv_role = "kv_producer" if base_role(role_name) == "prefill" else "kv_consumer"
        flags.append(("--kv-transfer-config", _kv_transfer_config(chosen, ctx, role_name, kv_role)))
        env += (
            ("VLLM_NIXL_SIDE_CHANNEL_HOST", HOST_ENV),
            ("VLLM_NIXL_SIDE_CHANNEL_PORT", slot_port(int(data.nixl_side_channel_port or 0), role.dp)),
            ("UCX_NET_DEVICES", "all"),
        )
    return LaunchCommand(role=role_name, program="vllm serve", positional=(ctx.model_id,), flags=tuple(flags), env=env)


def _node_launches(chosen: Chosen, ctx: ExportContext, role_name: str) -> tuple[list[LaunchCommand], list[str]]:
    """An instance of data-parallel ranks on several nodes (:func:`pdplan.report.export.vllm_dp.node_flags`): node
    0's ``vllm serve`` (the API, on the role's base port) and the others' ``--headless`` one, chosen by ``NODE``;
    each node's GPUs ``0 .. L·T − 1`` and the NIXL side channel's base port (vLLM adds the rank's index)."""
    data = ctx.targets.engines["vllm"]
    role = dict(chosen.plan.roles())[role_name]
    split = node_split(role.dp, packing(ctx, role).span)
    base = _serve(chosen, ctx, role_name)
    engine = [(flag, value) for flag, value in base.flags if flag != "--port"]
    local_gpus = ",".join(str(g) for g in range(split.most * role.tp))
    side_port = str(data.nixl_side_channel_port or 0)
    env = tuple(
        (name, local_gpus if name == "CUDA_VISIBLE_DEVICES" else side_port if "SIDE_CHANNEL_PORT" in name else value)
        for name, value in base.env
    )
    rpc = int(data.data_parallel_rpc_port or 0)
    head_flags = [("--port", str(_port(data, role_name))), *node_flags(engine, str(split.most), HEAD_IP, rpc, "")]
    rest_flags = node_flags(engine, Raw(split.local()), HEAD_IP, rpc, Raw(split.start()))
    head = dataclasses.replace(base, flags=tuple(head_flags), env=env)
    rest = dataclasses.replace(base, flags=tuple(rest_flags), env=env)
    return [head, rest], _head_or_rest(head, rest)


def _head_or_rest(head: LaunchCommand, rest: LaunchCommand) -> list[str]:
    """Case lines that run ``head`` on node 0 and ``rest`` on the others."""
    lines = ['    if [ "$NODE" -eq 0 ]; then', *command_lines(head, "      "), "    else"]
    return [*lines, *command_lines(rest, "      "), "    fi"]


def _data_parallel(chosen: Chosen, ctx: ExportContext) -> tuple[list[LaunchCommand], list[str], str] | None:
    """A colocated plan's z instances as one ``vllm serve --data-parallel-size z`` on GPUs ``0 .. z·g − 1`` of one
    node, or as z / m engines on each of m nodes behind node 0's API (:mod:`pdplan.report.export.vllm_dp`), with
    its case lines and usage; None where it does not apply."""
    front = vllm_dp_front(chosen, ctx)
    if front.size is None:
        return None
    size, nodes = front.size, front.nodes
    data = ctx.targets.engines["vllm"]
    role = chosen.plan.roles()[0][1]
    flags = role_engine_flags(chosen, ctx, "colocated", role, "vllm")
    at = next(i for i, (flag, _) in enumerate(flags) if flag == "--tensor-parallel-size") + 1
    flags = [*flags[:at], ("--data-parallel-size", str(size)), *flags[at:]]
    split = node_split(size, nodes)
    gpus = ",".join(str(g) for g in range(split.most * role.gpus_per_instance))
    env = (("CUDA_VISIBLE_DEVICES", gpus),)
    cmd = LaunchCommand(role="colocated", program="vllm serve", positional=(ctx.model_id,), flags=(), env=env)
    facts = gpu_facts(ctx, role)
    comments = [f"    # {comment_text(role_summary('colocated', role, facts))}"]
    port = ("--port", str(data.colocated_port))
    if nodes == 1:
        head = dataclasses.replace(cmd, flags=(port, *flags))
        where = f"all {size} instances on one node of {facts.gpus_per_node} GPUs, as data-parallel engines"
        lines = [*comments, f"    # {comment_text(where)}", *command_lines(head)]
        return [head], lines, USAGE_DP.format(size=size, port=data.colocated_port)
    rpc, last, address = int(data.data_parallel_rpc_port or 0), nodes - 1, Raw(FRONT_HEAD_IP)
    head = dataclasses.replace(cmd, flags=(port, *node_flags(flags, str(split.most), address, rpc, "")))
    rest_flags = node_flags(flags, Raw(split.local()), address, rpc, Raw(split.start()))
    rest = dataclasses.replace(cmd, flags=tuple(rest_flags))
    where = (
        f"all {size} instances as data-parallel engines on {nodes} nodes of {facts.gpus_per_node} GPUs "
        f"({split.words()}): bash THIS_FILE colocated NODE (0..{last}) on each, HEAD_IP the address of node 0"
    )
    check = (
        f'    [[ "$NODE" =~ ^[0-9]+$ ]] && [ "$NODE" -le {last} ] || '
        f'{{ echo "NODE must be 0..{last} (the engines span {nodes} nodes)" >&2; exit 2; }}'
    )
    lines = [*comments, f"    # {comment_text(where)}", '    NODE="${2:-0}"', check, *_head_or_rest(head, rest)]
    usage = USAGE_DP_NODES.format(size=size, nodes=nodes, last=last, each=split.words(), port=data.colocated_port)
    return [head, rest], lines, usage


def _slot_gpus(pack: Packing) -> Raw:
    """The GPU ids of this instance's slot, ``k·g .. k·g + g − 1`` (:mod:`pdplan.report.export.shell`)."""
    return Raw(f'"$(seq -s, $((SLOT * {pack.gpus})) $((SLOT * {pack.gpus} + {pack.gpus - 1})))"')


def _proxy(chosen: Chosen, ctx: ExportContext, prefill_pool: str = "prefill") -> tuple[LaunchCommand, list[str]]:
    """The toy proxy over ``prefill_pool``'s instances (the local prefill pool, or a PrfaaS plan's remote cluster on
    ``remote_proxy_port``) and the decode pool."""
    data = ctx.targets.engines["vllm"]
    pools = dict(chosen.plan.roles())  # a disaggregated plan's: prefill and decode (and a PrfaaS remote prefill)
    checks = pool_host_checks(ctx, chosen.plan, prefill_pool)
    array = "remote_prefill_hosts" if prefill_pool == REMOTE_PREFILL else "prefill_hosts"
    checks += [
        "    p_hosts=(); p_ports=(); d_hosts=(); d_ports=()",
        instance_loop(
            packing(ctx, pools[prefill_pool]), array, f'p_hosts+=("$h"); p_ports+=($(({data.prefill_port} + k)))'
        ),
        instance_loop(
            packing(ctx, pools["decode"]), "decode_hosts", f'd_hosts+=("$h"); d_ports+=($(({data.decode_port} + k)))'
        ),
    ]
    port = data.remote_proxy_port if prefill_pool == REMOTE_PREFILL else data.proxy_port
    flags: tuple[tuple[str, str | None], ...] = (
        ("--host", "0.0.0.0"),
        ("--port", str(port)),
        ("--prefiller-hosts", Raw('"${p_hosts[@]}"')),
        ("--prefiller-ports", Raw('"${p_ports[@]}"')),
        ("--decoder-hosts", Raw('"${d_hosts[@]}"')),
        ("--decoder-ports", Raw('"${d_ports[@]}"')),
    )
    role = "remote-proxy" if prefill_pool == REMOTE_PREFILL else "proxy"
    return LaunchCommand(role=role, program=PROXY, flags=flags), checks


def _remote_proxy(chosen: Chosen, ctx: ExportContext) -> tuple[LaunchCommand, list[str]]:
    return _proxy(chosen, ctx, REMOTE_PREFILL)


USAGE_DISAGG = """Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE proxy
  prefill, decode: once per instance, on its node, with HOST_IP set to that node's address; SLOT picks the
    instance's GPUs (CUDA_VISIBLE_DEVICES), --port and VLLM_NIXL_SIDE_CHANNEL_PORT on a shared node.
  proxy: once, from a vLLM source checkout, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses,
    space-separated, in node order)."""
USAGE_REMOTE = """  remote-prefill: once per instance of the remote prefill cluster, on its node, as prefill.
  remote-proxy: once, as proxy, with REMOTE_PREFILL_HOSTS (the remote cluster's node addresses) and DECODE_HOSTS:
    it sends its requests to the remote prefill instances, then to the local decoders."""
USAGE_COLOCATED = """Usage: bash THIS_FILE colocated SLOT
  once per instance, on its node (SLOT picks its GPUs and --port); vLLM ships no load balancer for separate
    servers (its toy proxy is for prefill/decode pairs; its data-parallel front is written only where its
    ranks are the priced instances, dense and TP-only, the same number on each node): put two or more behind
    one (round-robin)."""
USAGE_DP = """Usage: bash THIS_FILE colocated
  once, on one node: one vllm serve runs the plan's {size} instances as data-parallel engines, each request sent
    to the least loaded by vLLM's own load balancer, all on port {port}."""
USAGE_DP_NODES = """Usage: bash THIS_FILE colocated NODE
  once on each of {nodes} nodes (NODE 0..{last}), with HEAD_IP set to the address of node 0: together they run the
    plan's {size} instances as data-parallel engines, {each}; node 0 serves the API on port {port} and sends
    each request to the least loaded engine on any node (vLLM's own load balancer), the others run --headless."""


LAUNCHER = Launcher(
    "vllm",
    _serve,
    "proxy",
    "routes each request to a prefiller, then to a decoder",
    _proxy,
    USAGE_COLOCATED,
    USAGE_DISAGG,
    remote_front=_remote_proxy,
    colocated_one=_data_parallel,
    usage_remote=USAGE_REMOTE,
    spans_nodes=spans_nodes,
    spans_words=SPANS_WORDS,
    node_launches=_node_launches,
)


def vllm_script(chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> ExportResult:
    """The ``vllm serve`` launch script for the chosen plan."""
    return launch_script(LAUNCHER, chosen, ctx, warnings)
