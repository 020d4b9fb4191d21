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

from pdplan.report.export.common import Chosen, ExportContext, ExportResult, LaunchCommand
from pdplan.report.export.engine_args import role_engine_flags
from pdplan.report.export.routing import sglang_policy_flags
from pdplan.report.export.shell import Launcher, Raw, launch_script, pool_host_checks

SERVER = "python -m sglang.launch_server"
ROUTER = "python -m sglang_router.launch_router"
HOST = Raw('"${HOST_IP:?set HOST_IP to the address of this instance}"')


def _server(chosen: Chosen, ctx: ExportContext, role_name: str) -> LaunchCommand:
    data = ctx.targets.engines["sglang"]
    role = dict(chosen.plan.roles())[role_name]
    port = {"prefill": data.prefill_port, "decode": data.decode_port}.get(role_name, data.colocated_port)
    flags: list[tuple[str, str | None]] = [("--model-path", ctx.model_id), ("--host", HOST), ("--port", str(port))]
    if role_name != "colocated":
        flags += [
            ("--disaggregation-mode", role_name),
            ("--disaggregation-transfer-backend", str(data.transfer_backend)),
        ]
        if role_name == "prefill":
            flags.append(("--disaggregation-bootstrap-port", str(data.bootstrap_port)))
    flags += role_engine_flags(chosen, ctx, role_name, role, "sglang")
    return LaunchCommand(role=role_name, program=SERVER, flags=tuple(flags))


def _router(chosen: Chosen, ctx: ExportContext) -> tuple[LaunchCommand, list[str]]:
    data = ctx.targets.engines["sglang"]
    plan = chosen.plan
    checks = pool_host_checks(plan)
    checks += [
        "    urls=()",
        f'    for h in "${{prefill_hosts[@]}}"; do '
        f'urls+=(--prefill "http://$h:{data.prefill_port}" {data.bootstrap_port}); done',
        f'    for h in "${{decode_hosts[@]}}"; do urls+=(--decode "http://$h:{data.decode_port}"); done',
    ]
    flags: tuple[tuple[str, str | None], ...] = (
        ("--pd-disaggregation", None),
        ("--prefill", Raw(f'"http://$h:{data.prefill_port}" {data.bootstrap_port}')),
        ("--decode", Raw(f'"http://$h:{data.decode_port}"')),
        *sglang_policy_flags(chosen),
        ("--host", "0.0.0.0"),
        ("--port", str(data.router_port)),
    )
    return LaunchCommand(role="router", program=ROUTER, flags=flags), checks


def _router_lines(cmd: LaunchCommand) -> list[str]:
    """The router command with its per-instance ``--prefill`` / ``--decode`` pairs from the ``urls`` array."""
    rest = [
        flag if value is None else f"{flag} {value}"
        for flag, value in cmd.flags
        if flag not in ("--prefill", "--decode")
    ]
    words = [rest[0], '"${urls[@]}"', *rest[1:]]
    return [f"    exec {cmd.program} \\", *[f"      {w} \\" for w in words[:-1]], f"      {words[-1]}"]


USAGE_DISAGG = """Usage: bash THIS_FILE prefill|decode|router
  prefill, decode: once per instance, on its host, with HOST_IP set to that host's address. Instances that share
    a node need their own GPUs (--base-gpu-id), --port and --disaggregation-bootstrap-port.
  router: once, with PREFILL_HOSTS and DECODE_HOSTS (space-separated addresses)."""
USAGE_COLOCATED = """Usage: bash THIS_FILE colocated
  once per instance, on its host, with HOST_IP set; put the instances behind one load balancer."""


LAUNCHER = Launcher(
    "sglang",
    _server,
    "router",
    "routes each request to a prefill and a decode instance",
    _router,
    USAGE_COLOCATED,
    USAGE_DISAGG,
    front_lines=_router_lines,
)


def sglang_script(chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> ExportResult:
    """The SGLang launch script for the chosen plan."""
    return launch_script(LAUNCHER, chosen, ctx, warnings)
