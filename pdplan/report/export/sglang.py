"""A plan as SGLang launch commands (one bash script, a case per role).

Format followed (sgl-project/sglang ``docs/advanced_features/pd_disaggregation.md``, NIXL "Usage"): each instance
runs ``python -m sglang.launch_server --model-path MODEL --disaggregation-mode prefill|decode --port P
--disaggregation-transfer-backend nixl`` (with ``--host`` its address, as the multi-node example does), and
``python -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP_PORT ... --decode URL ...
--host 0.0.0.0 --port 8000`` routes requests (one ``--prefill`` / ``--decode`` per instance; "Router Integration",
and docs/advanced_features/sgl_model_gateway.md, "Prefill-Decode Disaggregation": prefill entries take an optional
bootstrap port). The prefill bootstrap port is ``--disaggregation-bootstrap-port`` (default 8998,
docs/advanced_features/server_arguments.md, "PD disaggregation"), written on both sides. Colocated plans: one plain
``launch_server`` per instance. Ports and the transfer backend: ``pdplan/data/export/targets.yaml``; engine
arguments: :mod:`pdplan.report.export.engine_args`.

**An instance wider than a node** (:func:`spans_nodes`, ``engines.sglang.sources.multinode`` in targets.yaml, read
in the SGLang 0.5.11 wheel, as the multi-node DeepSeek example of pd_disaggregation.md writes it): one
``launch_server`` a node with the same arguments, ``--dist-init-addr "$HEAD_IP:PORT"`` (node 0's address and
``dist_init_port``), ``--nnodes`` (the instance's nodes) and ``--node-rank`` (``NODE``, 0..nodes−1, checked by the
script), on GPUs 0.. of every node. SGLang places node r's PP and TP ranks itself (``_calculate_rank_ranges``);
every rank runs only where the PP stages divide over the nodes, or the nodes over the PP stages with ``--tp-size``
(TP × DP) divisible by nodes / PP, which :func:`spans_nodes` checks (others are refused). Node 0 runs the HTTP
server on the instance's port and, for a prefill instance, the bootstrap server at ``--dist-init-addr``'s host, so
the router lists node 0 of each instance.
"""

from __future__ import annotations

from pdplan.report.export.common import (
    REMOTE_PREFILL,
    Chosen,
    ExportContext,
    ExportResult,
    GpuFacts,
    LaunchCommand,
    base_role,
    transfer_backend_word,
)
from pdplan.report.export.engine_args import role_engine_flags
from pdplan.report.export.routing import sglang_policy_flags
from pdplan.report.export.shell import (
    Launcher,
    Raw,
    command_lines,
    host_checks,
    instance_loop,
    launch_script,
    packing,
    pool_host_checks,
    slot_port,
)
from pdplan.specs.export import PlanRole

SERVER = "python -m sglang.launch_server"
ROUTER = "python -m sglang_router.launch_router"
HOST = Raw('"${HOST_IP:?set HOST_IP to the address of this instance}"')
SPANS_WORDS = (
    "instances whose pipeline stages SGLang places over the nodes (PP a multiple of the nodes, or the nodes a "
    "multiple of PP with TP x DP divisible by nodes / PP)"
)
"""Which instances SGLang runs over several nodes (:func:`spans_nodes`), for the refusal of the others."""


def spans_nodes(role: PlanRole, facts: GpuFacts) -> bool:
    """Whether every rank of one instance of ``role`` runs when SGLang 0.5.11 spreads it over the n nodes it needs
    (module docstring): ``sglang/srt/entrypoints/engine.py`` ``_calculate_rank_ranges`` gives each node
    ``max(pp // n, 1)`` PP stages and ``tp_size // max(n // pp, 1)`` TP ranks, so PP a multiple of n, or n a
    multiple of PP with ``tp_size`` (TP × DP) a multiple of n / PP; the GPUs split evenly over the nodes."""
    gpus, node = role.gpus_per_instance, facts.gpus_per_node
    nodes = -(-gpus // node)
    if nodes <= 1 or gpus % nodes:
        return False
    if role.pp % nodes == 0:
        return True
    return nodes % role.pp == 0 and (role.tp * role.dp) % (nodes // role.pp) == 0


def _server(chosen: Chosen, ctx: ExportContext, role_name: str, spanning: bool = False) -> LaunchCommand:
    """One instance's ``launch_server``: in its node's slot, or (``spanning``) one node's share of an instance over
    several nodes (module docstring)."""
    data = ctx.targets.engines["sglang"]
    role = dict(chosen.plan.roles())[role_name]
    kind = base_role(role_name)
    port = {"prefill": data.prefill_port, "decode": data.decode_port}.get(kind, data.colocated_port)
    pack = packing(ctx, role)
    flags: list[tuple[str, str | None]] = [("--model-path", ctx.model_id), ("--host", HOST)]
    if spanning:
        head = Raw(f'"${{HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}}:{data.dist_init_port}"')
        flags += [("--port", str(port)), ("--dist-init-addr", head), ("--nnodes", str(pack.span))]
        flags.append(("--node-rank", Raw('"$NODE"')))
    else:
        flags += [("--port", slot_port(port)), ("--base-gpu-id", Raw(f'"$((SLOT * {pack.gpus}))"'))]
    if kind != "colocated":
        backend = transfer_backend_word(chosen, "sglang", data) or str(data.transfer_backend)
        flags += [("--disaggregation-mode", kind), ("--disaggregation-transfer-backend", backend)]
        if kind == "prefill":
            bootstrap = int(data.bootstrap_port or 0)
            flags.append(("--disaggregation-bootstrap-port", str(bootstrap) if spanning else slot_port(bootstrap)))
    flags += role_engine_flags(chosen, ctx, role_name, role, "sglang")
    return LaunchCommand(role=role_name, program=SERVER, flags=tuple(flags))


def _node_launches(chosen: Chosen, ctx: ExportContext, role_name: str) -> tuple[list[LaunchCommand], list[str]]:
    """The launch every node of an instance over several nodes runs (its rank from ``NODE``)."""
    cmd = _server(chosen, ctx, role_name, spanning=True)
    return [cmd], command_lines(cmd)


def _router(chosen: Chosen, ctx: ExportContext, prefill_pool: str = "prefill") -> tuple[LaunchCommand, list[str]]:
    """The router over ``prefill_pool``'s instances (the local prefill pool, or a PrfaaS plan's remote cluster on
    ``remote_router_port``, with the prefill pool's priced policy) and the decode pool."""
    data = ctx.targets.engines["sglang"]
    plan = chosen.plan
    pools = dict(plan.roles())
    checks = pool_host_checks(ctx, plan, prefill_pool)
    array = "remote_prefill_hosts" if prefill_pool == REMOTE_PREFILL else "prefill_hosts"
    prefill_url = f'"http://$h:$(({data.prefill_port} + k))" $(({data.bootstrap_port} + k))'
    decode_url = f'"http://$h:$(({data.decode_port} + k))"'
    checks += [
        "    urls=()",
        instance_loop(packing(ctx, pools[prefill_pool]), array, f"urls+=(--prefill {prefill_url})"),
        instance_loop(packing(ctx, pools["decode"]), "decode_hosts", f"urls+=(--decode {decode_url})"),
    ]
    flags: tuple[tuple[str, str | None], ...] = (
        ("--pd-disaggregation", None),
        ("--prefill", Raw(prefill_url)),
        ("--decode", Raw(decode_url)),
        *sglang_policy_flags(chosen),
        ("--host", "0.0.0.0"),
        ("--port", str(data.remote_router_port if prefill_pool == REMOTE_PREFILL else data.router_port)),
    )
    role = "remote-router" if prefill_pool == REMOTE_PREFILL else "router"
    return LaunchCommand(role=role, program=ROUTER, flags=flags), checks


def _remote_router(chosen: Chosen, ctx: ExportContext) -> tuple[LaunchCommand, list[str]]:
    return _router(chosen, ctx, REMOTE_PREFILL)


def _balancer(chosen: Chosen, ctx: ExportContext) -> tuple[LaunchCommand, list[str]]:
    """A colocated plan's load balancer: the router over every instance (``--worker-urls``), with the priced policy
    (sgl-router/py_src/sglang_router/router_args.py: ``--worker-urls`` takes the workers' URLs)."""
    data = ctx.targets.engines["sglang"]
    pack = packing(ctx, chosen.plan.roles()[0][1])
    checks = host_checks([("COLOCATED_HOSTS", "colocated_hosts", pack.nodes)])
    url = f'"http://$h:$(({data.colocated_port} + k))"'
    checks += ["    urls=()", instance_loop(pack, "colocated_hosts", f"urls+=({url})")]
    flags: tuple[tuple[str, str | None], ...] = (
        ("--worker-urls", Raw(url)),
        *sglang_policy_flags(chosen),
        ("--host", "0.0.0.0"),
        ("--port", str(data.router_port)),
    )
    return LaunchCommand(role="router", program=ROUTER, flags=flags), checks


def _router_lines(cmd: LaunchCommand) -> list[str]:
    """The router command with its per-instance ``--prefill`` / ``--decode`` pairs (or ``--worker-urls`` list) from
    the ``urls`` array."""
    if cmd.flags[0][0] == "--worker-urls":
        rest = [flag if value is None else f"{flag} {value}" for flag, value in cmd.flags[1:]]
        words = ['--worker-urls "${urls[@]}"', *rest]
        return [f"    exec {cmd.program} \\", *[f"      {w} \\" for w in words[:-1]], f"      {words[-1]}"]
    rest = [
        flag if value is None else f"{flag} {value}"
        for flag, value in cmd.flags
        if flag not in ("--prefill", "--decode")
    ]
    words = [rest[0], '"${urls[@]}"', *rest[1:]]
    return [f"    exec {cmd.program} \\", *[f"      {w} \\" for w in words[:-1]], f"      {words[-1]}"]


USAGE_DISAGG = """Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE router
  prefill, decode: once per instance, on its node, with HOST_IP set to that node's address; SLOT picks the
    instance's GPUs (--base-gpu-id), --port and --disaggregation-bootstrap-port on a shared node.
  router: once, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses, space-separated, in node order)."""
USAGE_REMOTE = """  remote-prefill: once per instance of the remote prefill cluster, on its node, as prefill.
  remote-router: once, as router, with REMOTE_PREFILL_HOSTS (the remote cluster's node addresses) and DECODE_HOSTS:
    it sends its requests to the remote prefill instances, then to the local decode instances."""
USAGE_COLOCATED = """Usage: bash THIS_FILE colocated SLOT, or bash THIS_FILE router
  colocated: once per instance, on its node, with HOST_IP set (SLOT picks its GPUs and --port).
  router: once, the load balancer, with COLOCATED_HOSTS (the node addresses, space-separated, in node order)."""


LAUNCHER = Launcher(
    "sglang",
    _server,
    "router",
    "routes each request to a prefill and a decode instance",
    _router,
    USAGE_COLOCATED,
    USAGE_DISAGG,
    front_lines=_router_lines,
    front_colocated=_balancer,
    remote_front=_remote_router,
    usage_remote=USAGE_REMOTE,
    spans_nodes=spans_nodes,
    spans_words=SPANS_WORDS,
    node_launches=_node_launches,
)


def sglang_script(chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> ExportResult:
    """The SGLang launch script for the chosen plan."""
    return launch_script(LAUNCHER, chosen, ctx, warnings)
