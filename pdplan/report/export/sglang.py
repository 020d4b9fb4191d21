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
"""

from __future__ import annotations

from pdplan.report.export.common import REMOTE_PREFILL, Chosen, ExportContext, ExportResult, LaunchCommand, base_role
from pdplan.report.export.engine_args import role_engine_flags
from pdplan.report.export.routing import sglang_policy_flags
from pdplan.report.export.shell import (
    Launcher,
    Raw,
    host_checks,
    instance_loop,
    launch_script,
    packing,
    pool_host_checks,
    slot_port,
)

SERVER = "python -m sglang.launch_server"
ROUTER = "python -m sglang_router.launch_router"
HOST = Raw('"${HOST_IP:?set HOST_IP to the address of this instance}"')


def _server(chosen: Chosen, ctx: ExportContext, role_name: str) -> LaunchCommand:
    data = ctx.targets.engines["sglang"]
    role = dict(chosen.plan.roles())[role_name]
    kind = base_role(role_name)
    port = {"prefill": data.prefill_port, "decode": data.decode_port}.get(kind, data.colocated_port)
    gpus = packing(ctx, role).gpus
    flags: list[tuple[str, str | None]] = [
        ("--model-path", ctx.model_id),
        ("--host", HOST),
        ("--port", slot_port(port)),
        ("--base-gpu-id", Raw(f'"$((SLOT * {gpus}))"')),
    ]
    if kind != "colocated":
        flags += [
            ("--disaggregation-mode", kind),
            ("--disaggregation-transfer-backend", str(data.transfer_backend)),
        ]
        if kind == "prefill":
            flags.append(("--disaggregation-bootstrap-port", slot_port(int(data.bootstrap_port or 0))))
    flags += role_engine_flags(chosen, ctx, role_name, role, "sglang")
    return LaunchCommand(role=role_name, program=SERVER, flags=tuple(flags))


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
)


def sglang_script(chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> ExportResult:
    """The SGLang launch script for the chosen plan."""
    return launch_script(LAUNCHER, chosen, ctx, warnings)
