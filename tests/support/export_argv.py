"""The command lines an export really runs: a launch script run by bash with each program replaced by a stub that
records its arguments (so every shell expansion, slot port and host loop is evaluated as on a node), and a Dynamo
manifest's containers read from the YAML. Each command line is ``(program, argv)`` with ``program`` as
``pdplan/data/export/engine_flags.yaml`` names it (``vllm serve``, ``python -m sglang.launch_server``, ...)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import yaml

STUBBED = ("python", "python3", "vllm", "trtllm-serve", "srun")
STUB = '#!/bin/sh\nprintf "%s\\0" "$(basename "$0")" "$@" > "$ARGV_OUT"\n'


def _program(words: list[str]) -> tuple[str, list[str]]:
    """``[stub, args...]`` → (program, the arguments after it)."""
    stub, args = words[0], words[1:]
    if stub in ("python", "python3"):
        if args[:1] == ["-m"]:
            return f"{stub} -m {args[1]}", args[2:]
        return f"{stub} {args[0]}", args[1:]
    if stub == "vllm" or (stub == "trtllm-serve" and args[:1] == ["disaggregated"]):
        return f"{stub} {args[0]}", args[1:]
    return stub, args


def _run(script: Path, tmp: Path, role: str, slot: str | None, env: dict[str, str]) -> tuple[str, list[str]]:
    out = tmp / "argv.bin"
    args = ["bash", str(script), role] + ([slot] if slot is not None else [])
    full_env = {"PATH": f"{tmp / 'bin'}:/usr/bin:/bin", "ARGV_OUT": str(out), "HOST_IP": "10.0.0.1", **env}
    full_env.setdefault("HEAD_IP", "10.0.0.1")  # node 0 of an instance that spans nodes
    full_env["TRTLLM_CONFIG_DIR"] = str(tmp / f"config-{role}-{slot}")  # each launch keeps the files it wrote
    run = subprocess.run(args, env=full_env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        raise AssertionError(f"bash {script.name} {role} {slot}: exit {run.returncode}: {run.stderr}")
    words = out.read_bytes().decode().split("\0")[:-1]
    return _program(words)


def script_argvs(text: str, tmp: Path) -> list[tuple[str, list[str]]]:
    """Every launch of a script: each worker role at its first and last slot (or, for an instance that spans nodes,
    its first and last node), and the front (proxy, router) with as many node addresses as it checks for."""
    (tmp / "bin").mkdir(parents=True, exist_ok=True)
    for name in STUBBED:
        stub = tmp / "bin" / name
        stub.write_text(STUB)
        stub.chmod(0o755)
    script = tmp / "launch.sh"
    script.write_text(text)
    roles = re.search(r'role="\$\{1:\?usage: \$0 ([a-z|-]+)\}"', text)
    assert roles is not None, "no role case in the script"
    hosts = {var: " ".join(f"10.1.{i}.{k}" for k in range(int(n))) for i, (var, n) in enumerate(_host_counts(text))}
    out = []
    for role in roles.group(1).split("|"):
        body = text.split(f"\n  {role})\n", 1)[1].split("\n    ;;", 1)[0]
        last = re.search(r'\[ "\$(?:SLOT|NODE)" -le (\d+) \]', body)
        slots = [None] if last is None else sorted({"0", last.group(1)})
        out += [_run(script, tmp, role, slot, hosts) for slot in slots]
    return out


def _host_counts(text: str) -> list[tuple[str, str]]:
    """(variable, count) of each node-address list a front case checks: ``PREFILL_HOSTS needs 2 addresses``."""
    return sorted(set(re.findall(r'echo "([A-Z_]+) needs (\d+) addresses"', text)))


def manifest_argvs(text: str) -> list[tuple[str, list[str]]]:
    """Each service's container command line in a DynamoGraphDeployment."""
    doc: dict[str, Any] = yaml.safe_load(text)
    out = []
    for service in doc["spec"]["services"].values():
        container = service["extraPodSpec"]["mainContainer"]
        out.append((" ".join(container["command"]), [str(a) for a in container["args"]]))
    return out
