"""Launch commands as one bash script with a case per role: ``bash FILE prefill|decode|proxy`` (or ``colocated``).

Each instance runs the command of its role on its own host (``HOST_IP`` names it); the proxy or router runs once
and is given every instance's address (``PREFILL_HOSTS``, ``DECODE_HOSTS``, space-separated), and checks that it got
as many as the plan has instances. Values are shell-quoted except :class:`Raw` ones (expansions the script makes).
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass

from pdplan.errors import SpecError
from pdplan.report.export.common import (
    Chosen,
    Engine,
    ExportContext,
    ExportResult,
    LaunchCommand,
    comment_text,
    engine_line,
    gpu_facts,
    header_lines,
    nodes_for,
    role_summary,
)
from pdplan.report.export.routing import routing_line
from pdplan.specs.export import ExportPlan


class Raw(str):
    """A value written verbatim (a shell expansion such as ``"${prefill_hosts[@]}"``)."""

    __slots__ = ()


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
        lines.append(f'    read -r -a {array} <<< "${{{var}:?set {var} to the {count} instance addresses}}"')
        lines.append(
            f'    [ "${{#{array}[@]}}" -eq {count} ] || {{ echo "{var} needs {count} addresses" >&2; exit 2; }}'
        )
    return lines


def pool_host_checks(plan: ExportPlan) -> list[str]:
    """:func:`host_checks` for a disaggregated plan's pools: ``PREFILL_HOSTS`` and ``DECODE_HOSTS``, one address per
    instance."""
    pools = dict(plan.roles())
    return host_checks(
        [
            ("PREFILL_HOSTS", "prefill_hosts", pools["prefill"].count),
            ("DECODE_HOSTS", "decode_hosts", pools["decode"].count),
        ]
    )


def single_node_only(chosen: Chosen, ctx: ExportContext, target: str) -> None:
    """Launch commands here start one process group per instance on one host: refuse instances wider than a node."""
    for name, role in chosen.plan.roles():
        facts = gpu_facts(ctx, role)
        nodes, _ = nodes_for(role, facts, chosen.source)
        if nodes > 1:
            raise SpecError(
                f"plan {chosen.rank}: a {name} instance needs {role.gpus_per_instance} GPUs, more than one "
                f"{role.gpu} node ({facts.gpus_per_node}); --to {target} writes single-node launches: "
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


def role_comment(chosen: Chosen, ctx: ExportContext, name: str) -> str:
    role = dict(chosen.plan.roles())[name]
    return f"    # {comment_text(role_summary(name, role, gpu_facts(ctx, role)))}; run once per instance, on its host"


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


def launch_script(launcher: Launcher, chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> ExportResult:
    """The launch script: header (with both engine versions), one case per role, then the front case when the plan
    is disaggregated."""
    single_node_only(chosen, ctx, launcher.engine)
    header = header_lines(chosen, ctx, launcher.engine, warnings)
    header.append(engine_line(chosen, ctx, launcher.engine))
    header.append(routing_line(chosen, launcher.engine))
    commands: list[LaunchCommand] = []
    cases: list[tuple[str, list[str]]] = []
    for role_name, _ in chosen.plan.roles():
        cmd = launcher.role_command(chosen, ctx, role_name)
        commands.append(cmd)
        cases.append((role_name, [role_comment(chosen, ctx, role_name), *command_lines(cmd)]))
    usage = launcher.usage_colocated
    if chosen.plan.mode == "disaggregated":
        front, checks = launcher.front(chosen, ctx)
        commands.append(front)
        front_case = [f"    # {comment_text(launcher.front_comment)}", *checks, *launcher.front_lines(front)]
        cases.append((launcher.front_name, front_case))
        usage = launcher.usage_disaggregated
    text = script(header, usage, cases)
    return ExportResult(text=text, commands=tuple(commands), warnings=tuple(warnings))
