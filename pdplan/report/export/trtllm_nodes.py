"""A TensorRT-LLM instance wider than one node: one Slurm MPI world, ``srun ... trtllm-llmapi-launch trtllm-serve``.

**The launch TensorRT-LLM documents.** A ``trtllm-serve`` over several nodes is one MPI world of as many ranks as
the instance's GPUs, started by Slurm (NVIDIA/TensorRT-LLM ``examples/disaggregated/slurm/simple_example/
launch.slurm`` at commit 14e6b10f: ``srun -N 2 --ntasks-per-node=4 --mpi=pmix bash -c "trtllm-llmapi-launch
trtllm-serve MODEL --tp_size 8 --host 0.0.0.0 --port P --config FILE"``, a context server of TP8 on two 4-GPU nodes;
``examples/llm-api/llm_mgmn_trtllm_serve.sh`` at commit 0bd88711: "the number of MPI processes should be the same as
the model world size"). ``tensorrt_llm/llmapi/trtllm-llmapi-launch`` (commit 020c89e6), a shell script that takes
the command as its arguments and has no options of its own: the task of MPI rank 0 (``SLURM_PROCID``) runs the
command (the server, on its node) and the MPI leader, every other rank an MPI worker. Each rank's world size is the
YAML's ``tensor_parallel_size`` × ``pipeline_parallel_size`` (:func:`pdplan.report.export.trtllm.llm_api_options`),
so the ranks are the instance's GPUs, one a GPU.

**Rank 0's node.** The disaggregated server must list the address of the node where rank 0 serves. Slurm places
ranks in the order of a host file when ``SLURM_HOSTFILE`` is set and no node list is given (Slurm 25.11.7,
``src/common/slurm_opt.c`` ``_validate_nodelist``: the distribution becomes arbitrary; ``doc/man/man1/srun.1``,
``--distribution=arbitrary``: "your tasks will be laid out on the nodes in the order of the file"), so the script
writes one line per rank, the instance's node 0 first (``G/m`` lines a node: TensorRT-LLM's examples put the same
number of ranks on every node), and runs ``srun --nodes m --ntasks n --distribution arbitrary --mpi pmix``: rank 0
runs on node 0, the address the server lists (node 0 of each instance, as for the other targets' instances over
nodes). TensorRT-LLM's own benchmark scripts find rank 0's node another way (``examples/disaggregated/slurm/
benchmark/start_worker.sh``: the task on ``SLURM_NODEID`` 0 writes its host name to a shared folder, which
``gen_server_config.py`` reads into the server's URLs); the host file makes the placement a fact of the launch
instead.

**Checked.** ``srun``'s options against ``pdplan/data/export/engine_args/srun-25.11.7.json`` (Slurm 25.11.7's option
records), ``trtllm-serve``'s and the YAML's against the TensorRT-LLM snapshot, as for one node. Not checked, and
said in the script: ``--mpi pmix`` needs Slurm built with the PMIx plugin (TensorRT-LLM's examples use it); the
``trtllm-llmapi-launch`` script has no parser to check (none is needed: it takes no options); the run starts inside a
Slurm allocation that holds the nodes.
"""

from __future__ import annotations

import shlex

from pdplan.report.export.common import Chosen, ExportContext, LaunchCommand, comment_text, gpu_facts, role_summary
from pdplan.report.export.shell import Packing, Raw, command_lines, packing

SRUN = "srun"
LAUNCH = "trtllm-llmapi-launch"
NODE_NAME = "^[A-Za-z0-9][A-Za-z0-9._-]*$"
"""A node name or address as the script accepts it (no shell or path characters: it names files and Slurm's host
file lines)."""


def nodes_var(role_name: str) -> str:
    """The variable that names one instance's nodes: ``PREFILL_NODES``."""
    return f"{role_name.upper().replace('-', '_')}_NODES"


def spanning_lines(chosen: Chosen, ctx: ExportContext, role_name: str) -> list[str]:
    """The first case lines of a role whose instance spans ``m`` nodes: the comment and the node-name checks (the
    caller writes the YAML, then :func:`launch_lines`)."""
    role = dict(chosen.plan.roles())[role_name]
    facts = gpu_facts(ctx, role)
    pack = packing(ctx, role)
    var, per_node = nodes_var(role_name), pack.gpus // pack.span
    where = (
        f"one instance on {pack.span} nodes of {facts.gpus_per_node} GPUs: one MPI world of {pack.gpus} ranks, "
        f"{per_node} a node, rank 0 (the server) on node 0; {pack.nodes} node(s); instance i on nodes "
        f"i*{pack.span}..i*{pack.span}+{pack.span - 1}: bash THIS_FILE {role_name} once, inside a Slurm allocation "
        f"holding them, with {var} their names (node 0 first)"
    )
    return [
        f"    # {comment_text(role_summary(role_name, role, facts))}",
        f"    # {comment_text(where)}",
        f'    read -r -a nodes <<< "${{{var}:?set {var} to the {pack.span} node addresses}}"',
        f'    [ "${{#nodes[@]}}" -eq {pack.span} ] || {{ echo "{var} needs {pack.span} addresses" >&2; exit 2; }}',
        f'    for n in "${{nodes[@]}}"; do [[ "$n" =~ {NODE_NAME} ]] || '
        f'{{ echo "{var}: not a node name: $n" >&2; exit 2; }}; done',
        "    SLOT=0",
    ]


def srun_command(pack: Packing, serve: LaunchCommand) -> LaunchCommand:
    """``SLURM_HOSTFILE="$hostfile" srun --nodes m --ntasks n --distribution arbitrary --mpi pmix
    trtllm-llmapi-launch trtllm-serve ...`` (module docstring)."""
    launch = LaunchCommand(role=serve.role, program=LAUNCH, flags=(), then=serve)
    flags: tuple[tuple[str, str | None], ...] = (
        ("--nodes", str(pack.span)),
        ("--ntasks", str(pack.gpus)),
        ("--distribution", "arbitrary"),
        ("--mpi", "pmix"),
    )
    env = (("SLURM_HOSTFILE", Raw('"$hostfile"')),)
    return LaunchCommand(role=serve.role, program=SRUN, flags=flags, env=env, then=launch)


def launch_lines(pack: Packing, role_name: str, srun: LaunchCommand, config_dir: str) -> list[str]:
    """The host file (one line per rank, in rank order: ``G/m`` lines for each node, node 0 first), then ``srun``
    with the command it starts after its flags (``trtllm-llmapi-launch trtllm-serve MODEL`` on one line, then
    ``trtllm-serve``'s flags)."""
    per_node = pack.gpus // pack.span
    launch = srun.then
    serve = launch.then if launch is not None else None
    if launch is None or serve is None:
        raise ValueError("srun_command builds srun -> trtllm-llmapi-launch -> trtllm-serve")
    start = " ".join([launch.program, serve.program, *(shlex.quote(p) for p in serve.positional)])
    flat = LaunchCommand(
        role=srun.role, program=srun.program, flags=(*srun.flags, (start, None), *serve.flags), env=srun.env
    )
    return [
        f'    hostfile="{config_dir}/pdplan-trtllm-{role_name}-${{nodes[0]}}.hosts"',
        f'    for n in "${{nodes[@]}}"; do for ((r = 0; r < {per_node}; r++)); do echo "$n"; done; done > "$hostfile"',
        *command_lines(flat),
    ]
