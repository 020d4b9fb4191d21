"""A plan as TensorRT-LLM launch commands (one bash script, a case per role): ``pdplan export --to trtllm``.

Format followed (NVIDIA/TensorRT-LLM ``tensorrt_llm/commands/serve.py``, ``tensorrt_llm/llmapi/disagg_utils.py``):
each instance runs ``trtllm-serve MODEL --host H --port P --backend pytorch --extra_llm_api_options FILE``, FILE a
YAML of LLM-API arguments (``tensorrt_llm/llmapi/llm_args.py`` ``BaseLlmArgs``, whose unknown keys are an error:
``extra="forbid"``) that carries the plan's numbers; a disaggregated plan's context (prefill) and generation
(decode) servers are joined by ``trtllm-serve disaggregated -c disagg.yaml``, whose ``context_servers`` /
``generation_servers`` sections list ``num_instances``, ``urls`` (``host:port``) and a ``router`` ``type``
(``extract_disagg_cfg`` / ``extract_ctx_gen_cfgs`` / ``extract_router_config``), serving on ``hostname`` /
``port``. Colocated plans: one plain ``trtllm-serve`` per instance; TensorRT-LLM ships no load balancer for
separate servers, so the header says to put them behind one. Its disaggregated server cannot be that balancer over
aggregated servers alone: ``tensorrt_llm/serve/openai_disagg_server.py`` (``OpenAIDisaggServer.__init__``, in the
code index's copy) refuses a config without context servers ("At least one context server must be provided")
unless ``TRTLLM_DISAGG_BENCHMARK_GEN_ONLY=1``, a benchmarking switch that sends requests to the generation servers
only, which pdplan does not write.

The YAML per role: ``tensor_parallel_size``, ``pipeline_parallel_size``, ``moe_expert_parallel_size`` (EP > 1),
``enable_attention_dp`` (attention DP: an instance of d TP1 ranks is ``tensor_parallel_size`` d, the world size,
with its attention data-parallel over the ranks), ``moe_config`` (``backend: WIDEEP`` for a plan priced with the
wide-EP kernels, ``load_balancer.num_slots`` = routed experts + the priced redundant experts; ``moe_backends`` and
the sources in trtllm.yaml),
``max_batch_size`` (the plan's batch cap on generation and colocated servers), ``max_num_tokens`` (the priced token
budget), ``max_seq_len`` (the priced max-model-len), ``dtype: bfloat16`` (BF16 weights, as vLLM's ``--dtype``),
``enable_chunked_prefill`` (on where a budget is written, as
vLLM's default that pdplan priced; off for a colocated prefill-first plan), ``kv_cache_config.dtype: fp8`` (FP8 KV)
and, on disaggregated servers, ``cache_transceiver_config.backend`` (``pdplan/data/export/trtllm.yaml``). Not
written, and said so in the file: ``kv_cache_config.free_gpu_memory_fraction`` — TensorRT-LLM's share of the memory
left after weights, not vLLM's share of the whole GPU that the plan records, and the plan document does not record
the weights to convert one into the other.

An instance wider than a node runs as one Slurm MPI world (:mod:`pdplan.report.export.trtllm_nodes`).

Refused (one line, exit 2): GPUs other than NVIDIA, an instance whose GPUs do not split evenly over the nodes it
needs (:func:`_splits_evenly`), KV transfer overlapped with the
prefill (TensorRT-LLM moves a request's KV after its context phase), attention DP ranks of TP > 1 and two-batch
overlap, which pdplan does not write for TensorRT-LLM, redundant experts whose slots do not divide over the EP ranks
or whose model's expert count the catalogue lacks, and ZeRO-Prefill expert gather (no engine runs it).
"""

from __future__ import annotations

from typing import Any

import yaml

from pdplan.errors import SpecError
from pdplan.report.export.common import (
    Chosen,
    ExportContext,
    ExportResult,
    GpuFacts,
    LaunchCommand,
    gpu_facts,
    header_lines,
)
from pdplan.report.export.engine_args import token_budget
from pdplan.report.export.routing import priced_routing
from pdplan.report.export.shell import (
    Raw,
    command_lines,
    instance_loop,
    packing,
    pool_host_checks,
    role_comment,
    script,
    single_node_only,
    slot_port,
)
from pdplan.report.export.trtllm_data import TrtllmData
from pdplan.report.export.trtllm_nodes import launch_lines, spanning_lines, srun_command
from pdplan.specs.export import PlanRole

SERVE = "trtllm-serve"
SERVER = "trtllm-serve disaggregated"
HOST = Raw('"${HOST_IP:?set HOST_IP to the address of this instance}"')
ALL_INTERFACES = "0.0.0.0"
"""``--host`` of an instance over nodes: rank 0 serves on whichever node it runs (TensorRT-LLM's Slurm example,
:mod:`pdplan.report.export.trtllm_nodes`), node 0 of the instance by the host file."""
CONFIG_DIR = "${TRTLLM_CONFIG_DIR:-/tmp}"
SECTIONS = {"prefill": "context_servers", "decode": "generation_servers"}


def router_type(data: TrtllmData, policy: str | None) -> str:
    """The disaggregated server's router ``type`` for a priced policy (``routers`` in trtllm.yaml; round_robin,
    TensorRT-LLM's default, where the document records none)."""
    for name, router in data.routers.items():
        if name == policy:
            return router
    return "round_robin"


def _data(ctx: ExportContext) -> TrtllmData:
    if ctx.trtllm is None:
        raise SpecError("the TensorRT-LLM export data (pdplan/data/export/trtllm.yaml) was not loaded")
    return ctx.trtllm


def check_trtllm(chosen: Chosen, ctx: ExportContext) -> None:
    """Refuse (SpecError, one line) a plan TensorRT-LLM cannot run as priced, or whose settings pdplan cannot write
    for it (module docstring)."""
    plan, data = chosen.plan, _data(ctx)
    where = f"{chosen.source}: plans[{chosen.rank - 1}]"
    head = f"plan {chosen.rank} ({plan.label})"
    vendors = {gpu_facts(ctx, role).vendor for _, role in plan.roles()}
    if not vendors <= set(data.vendors):
        raise SpecError(f"{head} runs on {', '.join(sorted(vendors))} GPUs; TensorRT-LLM runs on NVIDIA GPUs only")
    priced = [p for p in (plan.priced.roles.values() if plan.priced else ())]
    reasons = []
    if plan.prfaas is not None:  # first: no other setting would make it exportable
        reasons.append(
            "is a Prefill-as-a-Service plan, whose remote prefill cluster pdplan does not write for TensorRT-LLM"
        )
    if any(p.expert_gather for p in priced) or any(role.expert_gather for _, role in plan.roles()):
        reasons.append("is priced with ZeRO-Prefill expert gather, which no engine runs")
    if plan.mode == "disaggregated" and plan.granularity != data.kv_transfer_granularity:
        reasons.append(
            f"is priced with {plan.granularity}-granularity KV transfer, but TensorRT-LLM transfers KV per request, "
            "after the context phase (re-run `pdplan optimize --granularity request`)"
        )
    reasons += _moe_reasons(chosen, ctx)
    if reasons:
        raise SpecError(f"{head} {reasons[0]}: export it to sglang or dynamo, or another plan (--rank)", source=where)
    single_node_only(chosen, ctx, "trtllm", spans=_splits_evenly, spans_words="GPUs that split evenly over nodes")


def _splits_evenly(role: PlanRole, facts: GpuFacts) -> bool:
    """An instance over ``m`` nodes runs ``n / m`` MPI ranks on each (TensorRT-LLM's Slurm examples,
    :mod:`pdplan.report.export.trtllm_nodes`); others are refused (``nodes_for`` says why)."""
    return role.gpus_per_instance % -(-role.gpus_per_instance // facts.gpus_per_node) == 0


def _moe_reasons(chosen: Chosen, ctx: ExportContext) -> list[str]:
    """Why the attention-DP / wide-EP settings of the plan cannot be written (:func:`check_trtllm`)."""
    plan, out = chosen.plan, []
    wide = [f"{name} TP{role.tp} DP{role.dp}" for name, role in plan.roles() if role.dp > 1 and role.tp > 1]
    if wide:
        out.append(
            f"uses attention data parallelism with TP > 1 per rank ({', '.join(wide)}); pdplan writes TensorRT-LLM's "
            "enable_attention_dp for TP1 ranks only"
        )
    priced = plan.priced.roles if plan.priced else {}
    if any(p.two_batch_overlap for p in priced.values()):
        out.append("is priced with two-batch overlap, for which pdplan knows no TensorRT-LLM LLM-API key")
    for name, role in plan.roles():
        slots = _slots(chosen, ctx, name)
        if slots is not None and (slots <= 0 or slots % max(role.ep, 1)):
            what = "the model's expert count is unknown" if slots <= 0 else f"{slots} do not divide over EP{role.ep}"
            out.append(
                f"is priced with redundant experts whose TensorRT-LLM load-balancer slots cannot be written: {what}"
            )
    return out


def _slots(chosen: Chosen, ctx: ExportContext, role_name: str) -> int | None:
    """``moe_config.load_balancer.num_slots`` of a role priced with redundant experts: routed experts + redundant
    (0 where the catalogue does not know the model's experts); None without redundant experts."""
    priced = chosen.plan.priced_role(role_name)
    if priced is None or not priced.redundant_experts:
        return None
    return 0 if ctx.model_experts is None else ctx.model_experts + priced.redundant_experts


def _moe_config(chosen: Chosen, ctx: ExportContext, role_name: str) -> dict[str, Any]:
    """``moe_config``: the backend of the priced MoE kernel (``moe_backends`` in trtllm.yaml) and the load balancer's
    slots (:func:`_slots`); empty where neither applies."""
    priced = chosen.plan.priced_role(role_name)
    out: dict[str, Any] = {}
    backend = _data(ctx).moe_backends.get(priced.moe_kernel or "") if priced is not None else None
    if backend is not None:
        out["backend"] = backend
    slots = _slots(chosen, ctx, role_name)
    if slots:
        out["load_balancer"] = {"num_slots": slots}
    return out


def trtllm_warnings(chosen: Chosen, ctx: ExportContext, server: bool = True) -> list[str]:
    """What the file leaves to TensorRT-LLM: the KV memory share, FP8 weights, and routing its disaggregated server
    cannot express (``server``: False for Dynamo's TensorRT-LLM workers, which Dynamo's frontend routes)."""
    out = [
        "kv_cache_config.free_gpu_memory_fraction is not written: TensorRT-LLM's is a share of the memory left "
        "after the weights (default 0.9), not the share of the whole GPU the plan records; set it by hand so that "
        "each server holds the KV the plan priced"
    ]
    if chosen.doc.input_str("dtype") == "fp8":
        out.append(
            "the plan is priced with FP8 weights: TensorRT-LLM loads them from an FP8-quantized checkpoint "
            "(no online quantization flag), so pass one with --model-id"
        )
    priced = chosen.plan.priced.roles.values() if chosen.plan.priced else ()
    if any(_data(ctx).moe_backends.get(p.moe_kernel or "") == "WIDEEP" for p in priced):
        out.append(
            "the plan's MoE layers were priced with DeepEP all-to-all and DeepGEMM experts; TensorRT-LLM's WIDEEP "
            "backend, written for them, runs its own all-to-all and expert GEMMs, so its step times may differ; "
            "WIDEEP is a MoeConfig.backend choice in the source copy the keys were checked against, but not in "
            "NVIDIA's LLM-API reference for 1.3.0rc26 and later: check that your release accepts it"
        )
    pool = "colocated" if chosen.plan.mode == "colocated" else "prefill"
    policy = priced_routing(chosen).get(pool)
    if server and chosen.plan.mode == "disaggregated" and policy in ("least-work", "random", "power-of-two"):
        router = router_type(_data(ctx), policy)
        out.append(
            f"the plan was priced with {policy} {pool} routing; TensorRT-LLM's disaggregated server has no such "
            f"router, so router type {router} is written, the nearest: its TTFT may differ from the plan's"
        )
    return out


def llm_api_options(chosen: Chosen, ctx: ExportContext, role_name: str) -> dict[str, Any]:
    """The ``--extra_llm_api_options`` mapping of one role (module docstring)."""
    plan = chosen.plan
    role = dict(plan.roles())[role_name]
    out: dict[str, Any] = {"tensor_parallel_size": role.tp * role.dp, "pipeline_parallel_size": role.pp}
    if role.dp > 1:
        out["enable_attention_dp"] = True
    if role.ep > 1:
        out["moe_expert_parallel_size"] = role.ep
    moe = _moe_config(chosen, ctx, role_name)
    if moe:
        out["moe_config"] = moe
    if plan.max_num_seqs is not None and role_name != "prefill":
        out["max_batch_size"] = plan.max_num_seqs
    budget = token_budget(chosen, ctx, role_name)
    if budget is not None:
        out["max_num_tokens"] = budget
    priced = plan.priced_role(role_name)
    if priced is not None and priced.max_model_len is not None:
        out["max_seq_len"] = priced.max_model_len
    prefill_first = role_name == "colocated" and plan.scheduler == "prefill-first"
    if budget is not None or prefill_first:
        out["enable_chunked_prefill"] = not prefill_first
    if chosen.doc.input_str("dtype") == "bf16":
        out["dtype"] = "bfloat16"
    if chosen.doc.input_str("kv_dtype") == "fp8":
        out["kv_cache_config"] = {"dtype": "fp8"}
    if role_name != "colocated":
        out["cache_transceiver_config"] = {"backend": _data(ctx).cache_transceiver_backend}
    return out


def _config_lines(options: dict[str, Any], path: str) -> list[str]:
    """Write ``options`` as YAML to ``path`` (a quoted heredoc: nothing in it is expanded)."""
    body = yaml.safe_dump(options, sort_keys=False, default_flow_style=False).splitlines()
    return [f'    cfg="{path}"', '    mkdir -p "$(dirname "$cfg")"', "    cat > \"$cfg\" <<'YAML'", *body, "YAML"]


def _serve(chosen: Chosen, ctx: ExportContext, role_name: str) -> LaunchCommand:
    data = _data(ctx)
    role = dict(chosen.plan.roles())[role_name]
    port = {"prefill": data.context_port, "decode": data.generation_port}.get(role_name, data.colocated_port)
    pack = packing(ctx, role)
    gpus = pack.gpus
    flags: tuple[tuple[str, str | None], ...] = (
        ("--host", HOST if pack.span == 1 else ALL_INTERFACES),
        ("--port", slot_port(port)),
        ("--backend", data.backend),
        ("--extra_llm_api_options", Raw('"$cfg"')),
    )
    env = (("CUDA_VISIBLE_DEVICES", Raw(f'"$(seq -s, $((SLOT * {gpus})) $((SLOT * {gpus} + {gpus - 1})))"')),)
    serve = LaunchCommand(
        role=role_name, program=SERVE, positional=(ctx.model_id,), flags=flags, env=env if pack.span == 1 else ()
    )
    return serve if pack.span == 1 else srun_command(pack, serve)


def _server_lines(chosen: Chosen, ctx: ExportContext) -> tuple[LaunchCommand, list[str]]:
    """The disaggregated server: ``disagg.yaml`` (hostname, port, each pool's instances, URLs and router) written
    from the pools' node addresses, then ``trtllm-serve disaggregated -c``."""
    data = _data(ctx)
    pools = dict(chosen.plan.roles())
    routing = priced_routing(chosen)
    lines = [*pool_host_checks(ctx, chosen.plan), f'    cfg="{CONFIG_DIR}/pdplan-trtllm-disagg.yaml"']
    lines += [
        '    mkdir -p "$(dirname "$cfg")"',
        f"    printf 'hostname: 0.0.0.0\\nport: {data.server_port}\\n' > \"$cfg\"",
    ]
    for role_name, hosts in (("prefill", "prefill_hosts"), ("decode", "decode_hosts")):
        pack, policy = packing(ctx, pools[role_name]), routing.get(role_name)
        base = data.context_port if role_name == "prefill" else data.generation_port
        lines.append(
            f"    printf '{SECTIONS[role_name]}:\\n  num_instances: {pack.count}\\n  router:\\n    type: "
            f'{router_type(data, policy)}\\n  urls:\\n\' >> "$cfg"'
        )
        lines.append(instance_loop(pack, hosts, f'printf \'    - "%s:%s"\\n\' "$h" $(({base} + k)) >> "$cfg"'))
    cmd = LaunchCommand(role="server", program=SERVER, flags=(("-c", Raw('"$cfg"')),))
    return cmd, lines


def _routing_line(chosen: Chosen, data: TrtllmData) -> str:
    routing = priced_routing(chosen)
    if chosen.plan.mode == "colocated":
        return (
            f"routing: priced with {routing.get('colocated') or 'an unrecorded'} colocated routing; no router "
            "(trtllm-serve disaggregated needs context servers): put the instances behind a load balancer"
        )
    names = ("prefill", "decode")
    priced = ", ".join(f"{routing.get(name) or 'unrecorded'} {name}" for name in names)
    runs = ", ".join(f"{SECTIONS[name]} router {router_type(data, routing.get(name))}" for name in names)
    return f"routing: priced with {priced} routing; trtllm-serve disaggregated runs {runs}"


USAGE_DISAGG = """Usage: bash THIS_FILE prefill|decode SLOT, or bash THIS_FILE server
  prefill (context), decode (generation): once per instance, on its node, with HOST_IP set to that node's address;
    SLOT picks the instance's GPUs (CUDA_VISIBLE_DEVICES) and --port on a shared node; each writes its
    --extra_llm_api_options YAML under TRTLLM_CONFIG_DIR (default /tmp).
  server: once, with PREFILL_HOSTS and DECODE_HOSTS (the pools' node addresses, space-separated, in node order):
    writes disagg.yaml and runs trtllm-serve disaggregated on all interfaces."""
USAGE_NODES = """  a role whose instance spans nodes (its comment says so): bash THIS_FILE ROLE once per instance,
    inside a Slurm allocation that holds its nodes, on its node 0 (rank 0 reads the YAML there; or set
    TRTLLM_CONFIG_DIR to a folder every node sees), with ROLE_NODES (e.g. PREFILL_NODES) its node names, node 0
    first: srun places rank 0, the server, on node 0, the address the server case lists for it (node 0 of each
    instance in PREFILL_HOSTS)."""
SPANNING_NOTE = (
    "instances over nodes: srun --nodes --ntasks --distribution arbitrary --mpi pmix, checked against Slurm 25.11.7's "
    "options (pdplan/data/export/engine_args/srun-25.11.7.json); not checked: that this cluster's Slurm has the PMIx "
    "plugin (srun --mpi=list), and trtllm-llmapi-launch, which has no options to check (it runs the command it is "
    "given: the server on rank 0, MPI workers on the other ranks)"
)
USAGE_COLOCATED = """Usage: bash THIS_FILE colocated SLOT
  once per instance, on its node, with HOST_IP set (SLOT picks its GPUs and --port); TensorRT-LLM ships no load
    balancer for separate servers (trtllm-serve disaggregated joins context and generation servers, and refuses
    a config without context servers): put two or more instances behind one (round-robin)."""


def trtllm_script(chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> ExportResult:
    """The TensorRT-LLM launch script for the chosen plan (refusals: :func:`check_trtllm`)."""
    data = _data(ctx)
    header = header_lines(chosen, ctx, "trtllm", warnings)
    header.append(
        f"engine: targets TensorRT-LLM {data.version} (pinned by Dynamo {ctx.targets.dynamo.release}; its arguments: "
        "pdplan/data/export/engine_args/trtllm-*.json); the plan was priced with "
        + (f"the {chosen.doc.engine_name} engine profile" if chosen.doc.engine_name else "an unrecorded profile")
    )
    header.append(_routing_line(chosen, data))
    commands: list[LaunchCommand] = []
    cases: list[tuple[str, list[str]]] = []
    spanning = False
    for role_name, role in chosen.plan.roles():
        cmd = _serve(chosen, ctx, role_name)
        commands.append(cmd)
        options = llm_api_options(chosen, ctx, role_name)
        pack = packing(ctx, role)
        if pack.span > 1:
            spanning = True
            config = _config_lines(options, f"{CONFIG_DIR}/pdplan-trtllm-{role_name}-${{nodes[0]}}.yaml")
            lines = [*spanning_lines(chosen, ctx, role_name), *config, *launch_lines(pack, role_name, cmd, CONFIG_DIR)]
        else:
            config = _config_lines(options, f"{CONFIG_DIR}/pdplan-trtllm-{role_name}-$SLOT.yaml")
            lines = [*role_comment(chosen, ctx, role_name), *config, *command_lines(cmd)]
        cases.append((role_name, lines))
    disaggregated = chosen.plan.mode == "disaggregated"
    if disaggregated:
        cmd, lines = _server_lines(chosen, ctx)
        commands.append(cmd)
        comment = "    # routes each request to a context server, then to a generation server"
        cases.append(("server", [comment, *lines, *command_lines(cmd)]))
    usage = (USAGE_DISAGG if disaggregated else USAGE_COLOCATED) + ("\n" + USAGE_NODES if spanning else "")
    if spanning:
        header.append(SPANNING_NOTE)
    text = script(header, usage, cases)
    return ExportResult(text=text, commands=tuple(commands), warnings=tuple(warnings))
