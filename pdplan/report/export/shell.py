"""Launch commands as one bash script with a case per role: ``bash FILE prefill|decode|proxy`` (or ``colocated``).

Each instance runs the command of its role on its own host (``HOST_IP`` names it); the proxy or router runs once
and is given every instance's address (``PREFILL_HOSTS``, ``DECODE_HOSTS``, space-separated), and checks that it got
as many as the plan has instances. Values are shell-quoted except :class:`Raw` ones (expansions the script makes).
"""

from __future__ import annotations

import shlex

from pdplan.errors import SpecError
from pdplan.report.export.common import Chosen, ExportContext, LaunchCommand, gpu_facts, nodes_for, role_summary


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
    lines = ["#!/usr/bin/env bash", *(f"# {h}" for h in header), "#", *(f"# {u}" for u in usage.splitlines())]
    lines += ["set -euo pipefail", f'role="${{1:?usage: $0 {roles}}}"', 'case "$role" in']
    for name, body in cases:
        lines += [f"  {name})", *body, "    ;;"]
    lines += [f'  *) echo "usage: $0 {roles}" >&2; exit 2 ;;', "esac"]
    return "\n".join(lines) + "\n"


def role_comment(chosen: Chosen, ctx: ExportContext, name: str) -> str:
    role = dict(chosen.plan.roles())[name]
    return f"    # {role_summary(name, role, gpu_facts(ctx, role))}; run once per instance, on its host"
