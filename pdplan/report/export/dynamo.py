"""A plan as an NVIDIA Dynamo ``DynamoGraphDeployment`` manifest (Kubernetes YAML).

Format followed (ai-dynamo/dynamo): ``examples/backends/vllm/deploy/disagg.yaml`` and
``examples/backends/sglang/deploy/disagg.yaml`` for disaggregated plans (a ``Frontend`` service plus prefill and
decode worker services with ``componentType: worker``, ``subComponentType: prefill|decode``, ``replicas``,
``resources.limits.gpu``, ``envFromSecret``, ``extraPodSpec.mainContainer`` image / workingDir / command / args with
``--disaggregation-mode prefill|decode``); ``examples/backends/vllm/deploy/agg.yaml`` and
``examples/backends/sglang/deploy/agg.yaml`` for colocated plans (one worker service, no subComponentType);
``examples/backends/vllm/deploy/disagg-multinode.yaml`` for instances wider than a node (``multinode.nodeCount``,
``resources.limits.gpu`` per node) and the frontend command (``python3 -m dynamo.frontend --http-port``). Service
names follow those files (``VllmPrefillWorker`` / ``VllmDecodeWorker`` for vLLM, ``prefill`` / ``decode`` for
SGLang). Images: ``pdplan/data/export/targets.yaml``.

Every worker is pinned to its GPU type with ``extraPodSpec.nodeSelector`` (``extraPodSpec`` carries a pod spec) on
the label NVIDIA GPU Feature Discovery sets, ``nvidia.com/gpu.product`` (values in
``pdplan/data/export/node_labels.yaml``), as AIConfigurator's generated manifests pin every service
(``dynamo.sources.node_selector`` in pdplan/data/export/targets.yaml); the frontend too where the plan has one GPU
type (it needs no GPU; a mixed plan's frontend is left free). A GPU with no known label (``--node-label`` adds one)
refuses a mixed-GPU plan, whose roles must land on their own GPU types, and leaves a one-GPU-type plan unpinned, with
a warning.

Every worker also gets ``sharedMemory.size`` (the ``/dev/shm`` tmpfs; the operator's default is 8Gi) from
``dynamo.shared_memory_size`` and ``--served-model-name`` (vLLM and SGLang), as Dynamo's Llama-3-70B disaggregated
recipe writes both (``dynamo.sources`` in pdplan/data/export/targets.yaml names file and commit).

TensorRT-LLM workers (``--backend trtllm``): :mod:`pdplan.report.export.dynamo_trtllm` writes their commands; the graph
says ``spec.backendFramework: trtllm``, and a service whose instances span nodes gets Open MPI's run-as-root switches
(``envs``), as Dynamo's TensorRT-LLM multi-node example does.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

import yaml

from pdplan.errors import SpecError
from pdplan.report.export import dynamo_trtllm
from pdplan.report.export.cache import kv_events_flags, plan_cache, vllm_transfer_config
from pdplan.report.export.common import (
    REMOTE_PREFILL,
    Chosen,
    ExportContext,
    ExportResult,
    LaunchCommand,
    base_role,
    comment_text,
    engine_line,
    gpu_facts,
    header_lines,
    nodes_for,
    transfer_backend_word,
)
from pdplan.report.export.engine_args import role_engine_flags
from pdplan.report.export.routing import dynamo_router_mode, routing_line
from pdplan.specs.export import PlanRole

Backend = Literal["vllm", "sglang", "trtllm"]
"""The engine of Dynamo's workers (``--backend``)."""

SERVICE_NAMES: dict[Backend, dict[str, str]] = {
    "vllm": {
        "prefill": "VllmPrefillWorker",
        "decode": "VllmDecodeWorker",
        "colocated": "VllmDecodeWorker",
        REMOTE_PREFILL: "VllmRemotePrefillWorker",
    },
    "sglang": {"prefill": "prefill", "decode": "decode", "colocated": "decode", REMOTE_PREFILL: "remote-prefill"},
    "trtllm": dynamo_trtllm.SERVICE_NAMES,
}


def _worker_command(
    chosen: Chosen, ctx: ExportContext, role_name: str, role: PlanRole, engine: Backend
) -> LaunchCommand:
    if engine == "trtllm":
        return dynamo_trtllm.worker_command(chosen, ctx, role_name)
    flags: list[tuple[str, str | None]]
    cache = plan_cache(chosen, ctx)
    if engine == "vllm":
        flags = [("--model", ctx.model_id), ("--served-model-name", ctx.model_id)]
        if role_name != "colocated":
            config = vllm_transfer_config(dict(ctx.targets.dynamo.vllm_kv_transfer_config), cache, ctx, role_name)
            kv_config = json.dumps(config, separators=(",", ":"))
            flags += [("--disaggregation-mode", base_role(role_name)), ("--kv-transfer-config", kv_config)]
    else:
        flags = [("--model-path", ctx.model_id), ("--served-model-name", ctx.model_id), ("--skip-tokenizer-init", None)]
        if role_name != "colocated":
            flags += [
                ("--disaggregation-mode", base_role(role_name)),
                ("--disaggregation-transfer-backend", _sglang_backend(chosen, ctx)),
                ("--disaggregation-bootstrap-port", str(ctx.targets.dynamo.sglang_bootstrap_port)),
            ]
        flags.append(("--host", "0.0.0.0"))
    flags += role_engine_flags(chosen, ctx, role_name, role, engine) + kv_events_flags(cache, role_name, engine, ctx)
    return LaunchCommand(role=role_name, program=f"python3 -m dynamo.{engine}", flags=tuple(flags))


def _sglang_backend(chosen: Chosen, ctx: ExportContext) -> str:
    """SGLang's ``--disaggregation-transfer-backend``: the priced backend's word, else the target's default."""
    data = ctx.targets.engines["sglang"]
    return transfer_backend_word(chosen, "sglang", data) or str(data.transfer_backend)


SIDE_CHANNEL_HOST_ENV = {
    "name": "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
}
"""The pod's address as NIXL's side-channel host. Dynamo 1.2.1's vLLM worker sets it itself only when the
``--kv-transfer-config`` connector is NIXL or a ``PdConnector`` holding it (ai-dynamo 1.2.1 wheel
``dynamo/vllm/args.py``: ``_uses_nixl_connector``, ``ensure_side_channel_host``); in a ``MultiConnector`` (NIXL beside
vLLM's offloading connector, :func:`pdplan.report.export.cache.vllm_transfer_config`) vLLM would advertise its
default, ``localhost``, and the decode workers could not reach the prefill's KV. A service's ``envs`` take Kubernetes
``EnvVar`` objects (the CRD's ``spec.services.<name>.envs``)."""


def _wrapped_nixl(command: LaunchCommand) -> bool:
    """Whether the worker's ``--kv-transfer-config`` holds NIXL inside a ``MultiConnector``."""
    config = dict(command.flags).get("--kv-transfer-config")
    return config is not None and json.loads(config).get("kv_connector") == "MultiConnector"


def node_selectors(chosen: Chosen, ctx: ExportContext, warnings: list[str]) -> dict[str, dict[str, str]]:
    """GPU type → its ``nodeSelector`` (module docstring): a GPU with no known label refuses a mixed-GPU plan and is
    left out of a one-GPU-type plan's, with a warning."""
    gpus = list(dict.fromkeys(role.gpu for _, role in chosen.plan.roles()))
    out: dict[str, dict[str, str]] = {}
    for gpu in gpus:
        label = ctx.node_labels.get(gpu)
        if label is not None:
            out[gpu] = {label.key: label.value}
            continue
        known = f"known: {', '.join(sorted(ctx.node_labels))} (pdplan/data/export/node_labels.yaml)"
        if len(gpus) > 1:
            raise SpecError(
                f"no node label known for GPU {gpu!r}, needed to place the roles of a mixed-GPU plan; {known}; "
                "give one with --node-label GPU=KEY=VALUE",
                source=chosen.source,
            )
        warnings.append(
            f"no node label known for GPU {gpu!r} ({known}): the workers carry no nodeSelector, so Kubernetes may "
            "place them on any GPU node; give one with --node-label GPU=KEY=VALUE"
        )
    return out


def _worker_service(
    chosen: Chosen,
    ctx: ExportContext,
    role_name: str,
    role: PlanRole,
    engine: Backend,
    selector: dict[str, str] | None,
) -> tuple[dict[str, Any], LaunchCommand]:
    command = _worker_command(chosen, ctx, role_name, role, engine)
    nodes, gpus_per_node = nodes_for(role, gpu_facts(ctx, role), chosen.source)
    service: dict[str, Any] = {"envFromSecret": ctx.targets.dynamo.hf_token_secret}
    if engine == "vllm" and _wrapped_nixl(command):
        service["envs"] = [SIDE_CHANNEL_HOST_ENV]
    if engine == "trtllm" and nodes > 1:
        service["envs"] = [dict(env) for env in dynamo_trtllm.MPI_ROOT_ENVS]
    service["componentType"] = "worker"
    if role_name != "colocated":
        service["subComponentType"] = base_role(role_name)
    service["replicas"] = role.count
    if nodes > 1:
        service["multinode"] = {"nodeCount": nodes}
    service["resources"] = {"limits": {"gpu": str(gpus_per_node)}}
    service["sharedMemory"] = {"size": ctx.targets.dynamo.shared_memory_size}
    pod: dict[str, Any] = {}
    if selector is not None:
        pod["nodeSelector"] = dict(selector)
    pod["mainContainer"] = {
        "image": ctx.targets.dynamo.images[engine],
        "workingDir": ctx.targets.dynamo.working_dirs[engine],
        "command": command.program.split(),
        "args": command.argv(),
    }
    service["extraPodSpec"] = pod
    return service, command


def _frontend(
    chosen: Chosen, ctx: ExportContext, engine: Backend, selector: dict[str, str] | None
) -> tuple[dict[str, Any], LaunchCommand]:
    flags: list[tuple[str, str | None]] = [("--http-port", str(ctx.targets.dynamo.frontend_http_port))]
    mode = dynamo_router_mode(chosen)
    if mode is not None:
        flags.append(("--router-mode", mode))
    command = LaunchCommand(role="frontend", program="python3 -m dynamo.frontend", flags=tuple(flags))
    pod: dict[str, Any] = {} if selector is None else {"nodeSelector": dict(selector)}
    pod["mainContainer"] = {
        "image": ctx.targets.dynamo.images[engine],
        "command": command.program.split(),
        "args": command.argv(),
    }
    service = {"componentType": "frontend", "replicas": 1, "extraPodSpec": pod}
    return service, command


def deployment_name(model_name: str | None, mode: str) -> str:
    """A DNS-1123 name: ``llama-3-1-70b-disagg`` (Kubernetes object names: lowercase alphanumerics and '-')."""
    stem = re.sub(r"[^a-z0-9]+", "-", (model_name or "pdplan").lower()).strip("-") or "pdplan"
    return f"{stem}-{'agg' if mode == 'colocated' else 'disagg'}"[:63].strip("-")


def dynamo_manifest(chosen: Chosen, ctx: ExportContext, engine: Backend, warnings: list[str]) -> ExportResult:
    """The ``DynamoGraphDeployment`` for the chosen plan, with ``engine`` as the worker backend."""
    plan = chosen.plan
    selectors = node_selectors(chosen, ctx, warnings)
    gpus = {role.gpu for _, role in plan.roles()}
    services: dict[str, Any] = {}
    frontend, frontend_cmd = _frontend(chosen, ctx, engine, selectors.get(next(iter(gpus))) if len(gpus) == 1 else None)
    services["Frontend"] = frontend
    commands = [frontend_cmd]
    for role_name, role in reversed(plan.roles()):  # decode first, as the examples list them
        service, command = _worker_service(chosen, ctx, role_name, role, engine, selectors.get(role.gpu))
        services[SERVICE_NAMES[engine][role_name]] = service
        commands.append(command)
    spec: dict[str, Any] = {"backendFramework": "trtllm"} if engine == "trtllm" else {}
    spec["services"] = services
    manifest = {
        "apiVersion": ctx.targets.dynamo.api_version,
        "kind": ctx.targets.dynamo.kind,
        "metadata": {"name": deployment_name(chosen.doc.model_name, plan.mode)},
        "spec": spec,
    }
    header = header_lines(chosen, ctx, f"dynamo (backend {engine})", warnings)
    header.append(f"images: {ctx.targets.dynamo.images[engine]} (Dynamo {ctx.targets.dynamo.release})")
    header.append(dynamo_trtllm.engine_line(chosen, ctx) if engine == "trtllm" else engine_line(chosen, ctx, engine))
    header.append(routing_line(chosen, "dynamo"))
    header.append(
        f"needs: the Dynamo platform installed and a secret {ctx.targets.dynamo.hf_token_secret} with HF_TOKEN"
    )
    if selectors:
        keys = ", ".join(sorted({key for sel in selectors.values() for key in sel}))
        header.append(f"workers are pinned to their GPU type by nodeSelector on {keys} (NVIDIA GFD)")
    header.append(f"workers get /dev/shm of {ctx.targets.dynamo.shared_memory_size} (sharedMemory)")
    body = yaml.safe_dump(manifest, sort_keys=False, default_flow_style=False, width=120)
    text = "".join(f"# {comment_text(line)}\n" for line in header) + body
    return ExportResult(text=text, commands=tuple(commands), warnings=tuple(warnings))
