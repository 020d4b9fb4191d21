"""Launch commands as one bash script with a case per role: ``bash FILE prefill|decode|proxy SLOT`` (or
``colocated``).

**Packing.** Instances are packed onto nodes of ``gpus_per_node`` GPUs (the catalogue's, or ``--gpus-per-node``):
``per_node = min(count, gpus_per_node // gpus_per_instance)`` instances a node, in slots 0..per_node−1, so a pool of
``count`` instances needs ``ceil(count / per_node)`` nodes. Slot ``k`` of a node takes GPUs ``k·g .. k·g + g − 1``
(g the instance's GPUs), the role's base port + k, and its own side-channel / bootstrap port (base + k·dp: vLLM's NIXL
side channel uses one port per data-parallel rank above its base). Instance ``i`` of a pool runs on node
``i // per_node`` in slot ``i % per_node``. Each instance runs ``bash FILE ROLE SLOT`` on its node (``HOST_IP``
names the node); the proxy or router runs once and is given the pools' node addresses (``PREFILL_HOSTS``,
``DECODE_HOSTS``, space-separated, one per node), checks that it got as many as the plan's pools need, and lists
every instance (node address, slot port). Values are shell-quoted except :class:`Raw` ones (expansions the script
makes).

**Instances wider than a node** (only where the engine runs one so: vLLM's data-parallel ranks,
:mod:`pdplan.report.export.vllm_dp`; SGLang's ``--nnodes``, :mod:`pdplan.report.export.sglang`): an instance takes
``span`` whole nodes, instance ``i`` nodes ``i·span .. i·span + span − 1``; each of its nodes runs
``bash FILE ROLE NODE`` (NODE 0..span−1, checked to be a number in that range; ``HEAD_IP`` the address of its node 0,
which serves the instance's port, written inside double quotes so it stays one word), and the front lists node 0 of
each instance.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from pdplan.errors import SpecError
from pdplan.report.export.common import (
    REMOTE_PREFILL,
    Chosen,
    Engine,
    ExportContext,
    ExportResult,
    GpuFacts,
    LaunchCommand,
    comment_text,
    engine_line,
    gpu_facts,
    header_lines,
    nodes_for,
    role_summary,
)
from pdplan.report.export.routing import routing_line
from pdplan.specs.export import ExportPlan, PlanRole


class Raw(str):
    """A value written verbatim (a shell expansion such as ``"${prefill_hosts[@]}"``)."""

    __slots__ = ()


HEAD_IP = Raw('"${HEAD_IP:?set HEAD_IP to the address of node 0 of this instance}"')


def _word(value: str) -> str:
    return value if isinstance(value, Raw) else shlex.quote(value)


def command_lines(cmd: LaunchCommand, indent: str = "    ") -> list[str]:
    """``VAR=value \\`` lines, then ``exec program positional \\`` and one ``--flag value`` per line."""
    parts = [f"{name}={value} \\" for name, value in cmd.env]
    head = " ".join([cmd.program, *(_word(p) for p in cmd.positional)])
    flag_words = [flag if value is None else f"{flag} {_word(value)}" for flag, value in cmd.flags]
    if not flag_words:
        return [indent + line for line in [*parts, f"exec {head}"]]
    lines = [*parts, f"exec {head} \\"]
    lines += [f"  {w} \\" for w in flag_words[:-1]] + [f"  {flag_words[-1]}"]
    return [indent + line for line in lines]


def host_checks(names: list[tuple[str, str, int]]) -> list[str]:
    """Read each ``VAR`` of (variable, array, count) into a bash array and check it holds ``count`` addresses."""
    lines = []
    for var, array, count in names:
        lines.append(f'    read -r -a {array} <<< "${{{var}:?set {var} to the {count} node addresses}}"')
        lines.append(
            f'    [ "${{#{array}[@]}}" -eq {count} ] || {{ echo "{var} needs {count} addresses" >&2; exit 2; }}'
        )
    return lines


@dataclass(frozen=True)
class Packing:
    """How a pool's instances share nodes (module docstring): ``per_node`` slots a node, ``nodes`` nodes, ``count``
    instances of ``gpus`` GPUs and ``dp`` data-parallel ranks each; ``span`` nodes an instance (1: it fits one)."""

    per_node: int
    nodes: int
    count: int
    gpus: int
    dp: int
    span: int = 1


def packing(ctx: ExportContext, role: PlanRole) -> Packing:
    """The :class:`Packing` of ``role`` on its GPU's nodes (instances wider than a node take ``span`` whole nodes,
    where the engine runs them so: :func:`single_node_only` refuses the others before)."""
    node = gpu_facts(ctx, role).gpus_per_node
    if role.gpus_per_instance > node:
        span = -(-role.gpus_per_instance // node)
        return Packing(1, role.count * span, role.count, role.gpus_per_instance, role.dp, span)
    per_node = max(1, min(role.count, node // role.gpus_per_instance))
    return Packing(per_node, -(-role.count // per_node), role.count, role.gpus_per_instance, role.dp)


def slot_port(base: int, step: int = 1) -> Raw:
    """A port of this instance's slot: ``base + SLOT·step`` (shell arithmetic)."""
    return Raw(f'"$(({base} + SLOT * {step}))"') if step != 1 else Raw(f'"$(({base} + SLOT))"')


def slot_check(pack: Packing) -> list[str]:
    """Read ``SLOT`` (the second argument, default 0) and check it is one of the node's slots."""
    last = pack.per_node - 1
    return [
        '    SLOT="${2:-0}"',
        f'    [[ "$SLOT" =~ ^[0-9]+$ ]] && [ "$SLOT" -le {last} ] || '
        f'{{ echo "SLOT must be 0..{last} ({pack.per_node} instance(s) a node)" >&2; exit 2; }}',
    ]


def pool_host_checks(ctx: ExportContext, plan: ExportPlan, prefill_pool: str = "prefill") -> list[str]:
    """:func:`host_checks` for a disaggregated plan's pools: ``PREFILL_HOSTS`` (a PrfaaS plan's remote cluster:
    ``REMOTE_PREFILL_HOSTS``) and ``DECODE_HOSTS``, one address per node the pool's packing needs."""
    pools = dict(plan.roles())
    var = "REMOTE_PREFILL_HOSTS" if prefill_pool == REMOTE_PREFILL else "PREFILL_HOSTS"
    return host_checks(
        [
            (var, var.lower(), packing(ctx, pools[prefill_pool]).nodes),
            ("DECODE_HOSTS", "decode_hosts", packing(ctx, pools["decode"]).nodes),
        ]
    )


def instance_loop(pack: Packing, hosts: str, body: str) -> str:
    """A bash loop over a pool's instances with ``h`` (its node's address, node 0 of an instance wider than a node)
    and ``k`` (its slot) set for ``body``."""
    if pack.span > 1:
        return f"    for ((i = 0; i < {pack.count}; i++)); do h=${{{hosts}[i * {pack.span}]}}; k=0; {body}; done"
    return (
        f"    for ((i = 0; i < {pack.count}; i++)); do "
        f"h=${{{hosts}[i / {pack.per_node}]}}; k=$((i % {pack.per_node})); {body}; done"
    )


def single_node_only(
    chosen: Chosen,
    ctx: ExportContext,
    target: str,
    spans: Callable[[PlanRole, GpuFacts], bool] | None = None,
    spans_words: str = "",
) -> None:
    """Launch commands here start one process group per instance on one host: refuse instances wider than a node,
    but those ``spans`` says the engine runs over several nodes (module docstring; ``spans_words`` says which)."""
    for name, role in chosen.plan.roles():
        facts = gpu_facts(ctx, role)
        if role.gpus_per_instance <= facts.gpus_per_node or (spans is not None and spans(role, facts)):
            continue
        nodes, _ = nodes_for(role, facts, chosen.source)  # refuses GPUs that do not split evenly over the nodes
        if nodes > 1:
            writes = "single-node launches" if spans is None else f"launches over nodes only for {spans_words}"
            raise SpecError(
                f"plan {chosen.rank}: a {name} instance needs {role.gpus_per_instance} GPUs, more than one "
                f"{role.gpu} node ({facts.gpus_per_node}); --to {target} writes {writes}: "
                "use --to dynamo (multinode workers)",
                source=chosen.source,
            )


def script(header: list[str], usage: str, cases: list[tuple[str, list[str]]]) -> str:
    """The whole script: header comments, usage, ``set -euo pipefail``, one case per role."""
    roles = "|".join(name for name, _ in cases)
    lines = ["#!/usr/bin/env bash", *(f"# {comment_text(h)}" for h in header), "#"]
    lines += [f"# {comment_text(u)}" for u in usage.splitlines()]
    lines += ["set -euo pipefail", f'role="${{1:?usage: $0 {roles}}}"', 'case "$role" in']
    for name, body in cases:
        lines += [f"  {name})", *body, "    ;;"]
    lines += [f'  *) echo "usage: $0 {roles}" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines) + "\n"


def role_comment(chosen: Chosen, ctx: ExportContext, name: str) -> list[str]:
    """The role's summary and packing as comments, then the slot check."""
    role = dict(chosen.plan.roles())[name]
    pack = packing(ctx, role)
    if pack.span > 1:
        return _spanning_comment(chosen, ctx, name, pack)
    where = (
        f"{pack.per_node} a node in slots 0..{pack.per_node - 1}, {pack.nodes} node(s) of "
        f"{gpu_facts(ctx, role).gpus_per_node} GPUs; on node n, instance n*{pack.per_node}+SLOT: "
        f"bash THIS_FILE {name} SLOT"
    )
    return [
        f"    # {comment_text(role_summary(name, role, gpu_facts(ctx, role)))}",
        f"    # {comment_text(where)}",
        *slot_check(pack),
    ]


def _spanning_comment(chosen: Chosen, ctx: ExportContext, name: str, pack: Packing) -> list[str]:
    """:func:`role_comment` for an instance on ``pack.span`` nodes: which nodes, then the NODE check."""
    role = dict(chosen.plan.roles())[name]
    node, last = gpu_facts(ctx, role).gpus_per_node, pack.span - 1
    q, r = divmod(pack.dp, pack.span)
    each = (
        (
            f"{q} data-parallel ranks a node"
            if r == 0
            else f"{q + 1} data-parallel ranks on nodes 0..{r - 1}, {q} on the rest"
        )
        if pack.dp > 1
        else f"{pack.gpus // pack.span} GPUs a node"
    )
    where = (
        f"one instance on {pack.span} nodes of {node} GPUs ({each}), "
        f"{pack.nodes} node(s); instance i on nodes i*{pack.span}..i*{pack.span}+{last}: bash THIS_FILE {name} NODE "
        f"(0..{last}) on each, HEAD_IP the address of its node 0"
    )
    return [
        f"    # {comment_text(role_summary(name, role, gpu_facts(ctx, role)))}",
        f"    # {comment_text(where)}",
        '    NODE="${2:-0}"',
        f'    [[ "$NODE" =~ ^[0-9]+$ ]] && [ "$NODE" -le {last} ] || '
        f'{{ echo "NODE must be 0..{last} (the instance spans {pack.span} nodes)" >&2; exit 2; }}',
    ]


USAGE_NODES = """  a role whose instance spans nodes (its comment says so) takes NODE (0..nodes-1) in place of SLOT, on
    each of the instance's nodes, with HEAD_IP set to the address of its node 0 (which serves its port)."""


@dataclass(frozen=True)
class Launcher:
    """How one engine launches a plan: a command per role; for a disaggregated plan, the program that runs once in
    front of it (vLLM's proxy, SGLang's router: its case name, comment, command with host checks, and how its command
    is written); the usage texts."""

    engine: Engine
    role_command: Callable[[Chosen, ExportContext, str], LaunchCommand]
    front_name: str
    front_comment: str
    front: Callable[[Chosen, ExportContext], tuple[LaunchCommand, list[str]]]
    usage_colocated: str
    usage_disaggregated: str
    front_lines: Callable[[LaunchCommand], list[str]] = command_lines
    front_colocated: Callable[[Chosen, ExportContext], tuple[LaunchCommand, list[str]]] | None = None
    """A colocated plan's load balancer (SGLang's router); None: the engine ships none."""
    colocated_one: Callable[[Chosen, ExportContext], tuple[list[LaunchCommand], list[str], str] | None] | None = None
    """A colocated plan served by one engine with its own balancer (vLLM's data parallelism, on one node or one
    launch a node): its commands, case lines and usage text; None (or a hook returning None): one process per
    instance."""
    remote_front: Callable[[Chosen, ExportContext], tuple[LaunchCommand, list[str]]] | None = None
    """A PrfaaS plan's second front: the same program over the remote prefill cluster and the local decode pool."""
    usage_remote: str = ""
    spans_nodes: Callable[[PlanRole, GpuFacts], bool] | None = None
    """Whether the engine runs one instance of a role over several nodes (vLLM's data-parallel ranks, SGLang's
    ``--nnodes``); None: never."""
    spans_words: str = ""
    """Which instances ``spans_nodes`` accepts, for the refusal of the others."""
    node_launches: Callable[[Chosen, ExportContext, str], tuple[list[LaunchCommand], list[str]]] | None = None
    """The launches of a role whose instance spans nodes (one a node) and their case lines."""


def launch_script(launcher: Launcher, chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> ExportResult:
    """The launch script: header (with both engine versions), one case per role, then the front case when the plan
    is disaggregated."""
    single_node_only(chosen, ctx, launcher.engine, launcher.spans_nodes, launcher.spans_words)
    header = header_lines(chosen, ctx, launcher.engine, warnings)
    header.append(engine_line(chosen, ctx, launcher.engine))
    header.append(routing_line(chosen, launcher.engine, ctx))
    disaggregated = chosen.plan.mode == "disaggregated"
    one = None if disaggregated or launcher.colocated_one is None else launcher.colocated_one(chosen, ctx)
    if one is not None:
        cmds, lines, usage = one
        text = script(header, usage, [("colocated", lines)])
        return ExportResult(text=text, commands=tuple(cmds), warnings=tuple(warnings))
    commands: list[LaunchCommand] = []
    cases: list[tuple[str, list[str]]] = []
    spanning = False
    for role_name, role in chosen.plan.roles():
        if packing(ctx, role).span > 1 and launcher.node_launches is not None:
            launches, lines = launcher.node_launches(chosen, ctx, role_name)
            spanning = True
        else:
            launches = [launcher.role_command(chosen, ctx, role_name)]
            lines = command_lines(launches[0])
        commands += launches
        cases.append((role_name, [*role_comment(chosen, ctx, role_name), *lines]))
    usage = launcher.usage_disaggregated if disaggregated else launcher.usage_colocated
    usage += "\n" + USAGE_NODES if spanning else ""
    front_of = launcher.front if disaggregated else launcher.front_colocated
    if front_of is not None:
        front, checks = front_of(chosen, ctx)
        commands.append(front)
        comment = launcher.front_comment if disaggregated else "balances requests over the instances"
        front_case = [f"    # {comment_text(comment)}", *checks, *launcher.front_lines(front)]
        cases.append((launcher.front_name, front_case))
    if chosen.plan.prfaas is not None and launcher.remote_front is not None:
        front, checks = launcher.remote_front(chosen, ctx)
        commands.append(front)
        comment = "the PrfaaS front: each request it gets is prefilled on the remote cluster, then decoded locally"
        cases.append((f"remote-{launcher.front_name}", [f"    # {comment}", *checks, *launcher.front_lines(front)]))
        usage += "\n" + launcher.usage_remote
    text = script(header, usage, cases)
    return ExportResult(text=text, commands=tuple(commands), warnings=tuple(warnings))
