"""Deployable exports of a plan: ``optimize --format json`` → a Dynamo manifest or vLLM / SGLang / TensorRT-LLM
launch commands.

Dynamo's workers run vLLM, SGLang or TensorRT-LLM (``backend``; TensorRT-LLM workers are checked as ``--to trtllm``
plans are: :func:`pdplan.report.export.trtllm.check_trtllm`).

Pure builders (plan document + looked-up facts → text); the CLI (:mod:`pdplan.cli.export`) reads the files and the
catalogue. :func:`export_plan` picks the plan by rank, refuses what no engine can run (exit 2: GPUs of two vendors
across a KV transfer, a vendor the target does not support, instances wider than a node that a script target does
not launch over nodes: :mod:`pdplan.report.export.shell`),
refuses a plan priced with a mechanism the engine cannot run (ZeRO-Prefill expert gather; KV transfer overlapped
with the prefill on a request-granularity engine; a host cache tier SGLang cannot start with), writes the plan's KV
cache (prefix caching, affinity routing, a host-DRAM tier: :mod:`pdplan.report.export.cache`), and warns — in the
output and on stderr — where the engine will not do exactly what the plan priced (routing, KV-transfer granularity)
or where the plan document leaves a setting to the engine's default.
"""

from __future__ import annotations

from pdplan.errors import SpecError
from pdplan.report.export.cache import cache_warnings, check_cache
from pdplan.report.export.common import (
    TARGETS,
    Engine,
    ExportContext,
    ExportResult,
    GpuFacts,
    LaunchCommand,
    Target,
    check_mechanisms,
    check_vendors,
    choose_plan,
    granularity_warnings,
    setting_warnings,
    transfer_backend_warnings,
    version_warnings,
)
from pdplan.report.export.dynamo import dynamo_manifest
from pdplan.report.export.dynamo_trtllm import dynamo_trtllm_warnings
from pdplan.report.export.engine_args import batch_cap_warnings
from pdplan.report.export.routing import prfaas_warnings, routing_warnings
from pdplan.report.export.sglang import sglang_script
from pdplan.report.export.trtllm import check_trtllm, trtllm_script, trtllm_warnings
from pdplan.report.export.vllm import vllm_script
from pdplan.specs.export import PlanDocument

__all__ = [
    "TARGETS",
    "ExportContext",
    "ExportResult",
    "GpuFacts",
    "LaunchCommand",
    "export_plan",
    "plan_gpus",
]


def export_plan(
    doc: PlanDocument, *, target: str, rank: int, ctx: ExportContext, source: str, backend: str = "vllm"
) -> ExportResult:
    """The chosen plan (``rank``, 1-based) as ``target`` text; ``backend`` is Dynamo's worker engine."""
    if target not in TARGETS:
        raise SpecError(f"unknown export target {target!r}; allowed: {', '.join(TARGETS)}", field="--to")
    if backend not in ("vllm", "sglang", "trtllm"):
        raise SpecError(f"unknown Dynamo backend {backend!r}; allowed: vllm, sglang, trtllm", field="--backend")
    chosen = choose_plan(doc, rank, source)
    if target == "trtllm":
        check_trtllm(chosen, ctx)
        warnings = setting_warnings(chosen, "trtllm") + trtllm_warnings(chosen, ctx) + routing_warnings(chosen, target)
        return trtllm_script(chosen, ctx, warnings + cache_warnings(chosen, ctx, target, None))
    if target == "dynamo" and backend == "trtllm":
        check_trtllm(chosen, ctx)
        warnings = setting_warnings(chosen, "trtllm") + trtllm_warnings(chosen, ctx, server=False)
        warnings += routing_warnings(chosen, target) + dynamo_trtllm_warnings(chosen, ctx)
        return dynamo_manifest(chosen, ctx, "trtllm", warnings)
    engine: Engine = "sglang" if (backend if target == "dynamo" else target) == "sglang" else "vllm"
    check_vendors(chosen, ctx, _target(target), engine)
    check_mechanisms(chosen, engine, ctx.targets.engines[engine])
    check_cache(chosen, ctx, engine)
    warnings = granularity_warnings(chosen.plan, engine, ctx.targets.engines[engine])
    warnings += version_warnings(chosen, ctx, engine) + setting_warnings(chosen, engine)
    warnings += batch_cap_warnings(chosen, ctx, engine) + routing_warnings(chosen, target)
    warnings += cache_warnings(chosen, ctx, target, engine) + prfaas_warnings(chosen, ctx, target)
    warnings += transfer_backend_warnings(chosen, engine, ctx.targets.engines[engine])
    if target == "dynamo":
        return dynamo_manifest(chosen, ctx, engine, warnings)
    if target == "vllm":
        return vllm_script(chosen, ctx, warnings)
    return sglang_script(chosen, ctx, warnings)


def plan_gpus(doc: PlanDocument, rank: int, source: str) -> list[str]:
    """GPU types of the plan ``rank`` picks (the CLI looks up their vendor and node size in the catalogue)."""
    return sorted({role.gpu for _, role in choose_plan(doc, rank, source).plan.roles()})


def _target(name: str) -> Target:
    for target in TARGETS:
        if target == name:
            return target
    raise SpecError(f"unknown export target {name!r}", field="--to")
