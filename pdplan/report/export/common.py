"""What every export target shares: the chosen plan, the facts the CLI looked up, the checks, and the engine
arguments that carry the plan's numbers.

Every number an export writes comes from the plan document (TP, PP, DP, EP, instance counts, ``max_num_seqs``,
``assumptions.engine_defaults``: ``gpu_memory_utilization``, ``max_num_batched_tokens``; ``inputs.dtype`` and
``inputs.kv_dtype``) or from sourced data (``pdplan/data/export/targets.yaml``: images, versions, ports; the colocated
chunk from ``pdplan/data/serving_defaults.yaml``, which is what pdplan priced chunked prefill with).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pdplan.errors import SpecError
from pdplan.report.export.trtllm_data import TrtllmData
from pdplan.serving.ppd_report import ENGINE_NOTE
from pdplan.specs.base import validate_spec
from pdplan.specs.engine import EngineProfile
from pdplan.specs.export import EngineData, ExportPlan, ExportTargets, NodeLabel, PlanDocument, PlanRole

Target = Literal["dynamo", "vllm", "sglang", "trtllm"]
Engine = Literal["vllm", "sglang"]
TARGETS: tuple[Target, ...] = ("dynamo", "vllm", "sglang", "trtllm")
REMOTE_PREFILL = "remote-prefill"
"""The role of a PrfaaS plan's remote prefill cluster (:meth:`pdplan.specs.export.ExportPlan.roles`)."""


def base_role(name: str) -> str:
    """The engine role a plan role runs: a PrfaaS plan's remote prefill cluster runs prefill instances."""
    return "prefill" if name == REMOTE_PREFILL else name


@dataclass(frozen=True)
class GpuFacts:
    """Catalogue facts about one GPU type that an export needs (looked up by the CLI)."""

    name: str
    display_name: str
    vendor: str
    gpus_per_node: int
    memory_bytes: float = 0.0
    """HBM per GPU (bytes): SGLang's memory fraction rule reads it
    (:func:`pdplan.report.export.engine_args.sglang_mem_fraction`)."""
    priced_gpus_per_node: int = 0
    """The catalogue's node size, which the plan's node-shared cache tiers were priced with (``--gpus-per-node``
    changes only the packing); 0: ``gpus_per_node``."""


@dataclass(frozen=True)
class ExportContext:
    """Everything an export reads besides the plan: looked up in the catalogue and the export data files."""

    model_id: str
    gpus: Mapping[str, GpuFacts]
    targets: ExportTargets
    node_labels: Mapping[str, NodeLabel]
    colocated_chunk_tokens: int
    colocated_chunk_source: str
    sglang: EngineProfile | None = None
    """The packaged SGLang engine profile: its ``mem_fraction_static`` rule for plans priced with another engine."""
    trtllm: TrtllmData | None = None
    """``pdplan/data/export/trtllm.yaml`` (``--to trtllm``)."""
    storage_kinds: Mapping[str, str] = field(default_factory=dict)
    """Kind (``host-dram``, ``local-ssd``, ``remote-pool``) of each storage entry the plans' cache tiers name."""
    model_is_moe: bool | None = None
    """Whether the plan's model preset has MoE layers (vLLM runs MoE data-parallel ranks in lockstep, dense ones
    independently: :mod:`pdplan.report.export.vllm_dp`); None: the catalogue does not hold the model."""
    model_experts: int | None = None
    """Routed experts of the plan's MoE model (TensorRT-LLM's load-balancer slots count them); None: dense or
    unknown."""


@dataclass(frozen=True)
class LaunchCommand:
    """One program launch: ``program`` (a key of ``engine_flags.yaml``), positional words, then (flag, value) pairs."""

    role: str
    program: str
    flags: tuple[tuple[str, str | None], ...]
    positional: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    then: LaunchCommand | None = None
    """The command this one starts after its flags (``srun`` starts ``trtllm-llmapi-launch`` on every task, which
    starts ``trtllm-serve`` on rank 0); None for a program that runs itself."""

    def argv(self) -> list[str]:
        words = list(self.positional)
        for flag, value in self.flags:
            words.append(flag)
            if value is not None:
                words.append(value)
        if self.then is not None:
            words += [*self.then.program.split(), *self.then.argv()]
        return words


@dataclass(frozen=True)
class ExportResult:
    """The exported text, the launches it contains (for checks), and warnings for stderr (also in the text)."""

    text: str
    commands: tuple[LaunchCommand, ...]
    warnings: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Chosen:
    """The plan picked by ``--rank``, with the document it came from."""

    rank: int
    plan: ExportPlan
    doc: PlanDocument
    source: str


def choose_plan(doc: PlanDocument, rank: int, source: str) -> Chosen:
    """``plans[rank - 1]`` validated as an exportable plan; SpecError naming the allowed ranks otherwise."""
    if not 1 <= rank <= len(doc.plans):
        raise SpecError(f"--rank {rank} is out of range; the document has plans 1..{len(doc.plans)}", source=source)
    plan = validate_spec(ExportPlan, doc.plans[rank - 1], f"{source}: plans[{rank - 1}]")
    return Chosen(rank, plan, doc, source)


def gpu_facts(ctx: ExportContext, role: PlanRole) -> GpuFacts:
    return ctx.gpus[role.gpu]


def check_vendors(chosen: Chosen, ctx: ExportContext, target: Target, engine: Engine) -> None:
    """Refuse (exit 2) plans no engine can run: two GPU vendors across a KV transfer, or a vendor the target lacks.

    Refusing rather than warning: a manifest for an NVIDIA prefill / AMD decode pair would deploy, then fail at the
    first KV transfer (NIXL and Mooncake need one vendor's build on both ends; no documented engine pairs CUDA with
    ROCm), and the plan's TTFT assumes a transfer path that does not exist.
    """
    plan = chosen.plan
    vendors = {name: gpu_facts(ctx, role).vendor for name, role in plan.roles()}
    where = f"{chosen.source}: plans[{chosen.rank - 1}]"
    if len(set(vendors.values())) > 1:
        pairs = ", ".join(f"{name} {plan_role.gpu} ({vendors[name]})" for name, plan_role in plan.roles())
        raise SpecError(
            f"plan {chosen.rank} ({plan.label}) pairs GPUs of two vendors: {pairs}; no serving engine transfers KV "
            "between NVIDIA and AMD GPUs (NIXL/Mooncake need one vendor's build on both ends): export a plan with "
            "one vendor (see --rank)",
            source=where,
        )
    vendor = next(iter(vendors.values()))
    data = ctx.targets.engines[engine]
    if target == "dynamo":
        allowed, what = ctx.targets.dynamo.vendors, f"Dynamo {ctx.targets.dynamo.release} runtime images"
    elif plan.mode == "colocated":
        allowed, what = data.vendors_colocated, f"{engine} (colocated)"
    else:
        allowed, what = data.vendors_disaggregated, f"{engine} prefill/decode disaggregation"
    if vendor not in allowed:
        raise SpecError(
            f"plan {chosen.rank} ({plan.label}) runs on {vendor} GPUs; {what} support {', '.join(allowed)} "
            f"(pdplan/data/export/targets.yaml names the sources)",
            source=where,
        )


def check_mechanisms(chosen: Chosen, engine: Engine, data: EngineData) -> None:
    """Refuse (exit 2) a plan that relies on a mechanism the engine cannot run, rather than deploy numbers it will not
    meet: ZeRO-Prefill's expert-weight all-gather (no vLLM or SGLang flag runs the MoE layers that way:
    pdplan/data/export/engine_flags.yaml), or a KV transfer overlapped with the prefill (layer or chunk granularity)
    on an engine that transfers a request's KV only after its prefill (vLLM's NIXL connector:
    ``engines.vllm.sources.kv_transfer_granularity`` in pdplan/data/export/targets.yaml)."""
    plan = chosen.plan
    where = f"{chosen.source}: plans[{chosen.rank - 1}]"
    priced_gather = any(p.expert_gather for p in (plan.priced.roles.values() if plan.priced else ()))
    if priced_gather or any(role.expert_gather for _, role in plan.roles()):
        raise SpecError(
            f"plan {chosen.rank} ({plan.label}) is priced with ZeRO-Prefill expert gather, which no {engine} flag "
            "runs: export another plan (--rank) or search without it (expert_gather: false)",
            source=where,
        )
    if plan.mode == "disaggregated" and data.kv_transfer_granularity == "request" and plan.granularity != "request":
        raise SpecError(
            f"plan {chosen.rank} ({plan.label}) is priced with {plan.granularity}-granularity KV transfer, but "
            f"{engine} transfers KV per request, after the prefill: re-run `pdplan optimize --granularity request` "
            "or export another plan (--rank)",
            source=where,
        )


def granularity_warnings(plan: ExportPlan, engine: Engine, data: EngineData) -> list[str]:
    """A warning when the plan priced a KV-transfer granularity the engine does not implement but can approach
    (SGLang sends each finished prefill chunk; a request-granularity plan is priced more slowly than it runs, and a
    layer-granularity plan slightly faster). Request-only engines refuse such plans (:func:`check_mechanisms`)."""
    if plan.mode != "disaggregated" or plan.granularity == data.kv_transfer_granularity:
        return []
    return [
        f"the plan priced {plan.granularity}-granularity KV transfer, but {engine} transfers KV per "
        f"{data.kv_transfer_granularity} (engines.{engine}.sources in pdplan/data/export/targets.yaml), so its TTFT "
        f"may differ from the plan's: re-run `pdplan optimize --granularity {data.kv_transfer_granularity}` for "
        "numbers this engine can meet"
    ]


def transfer_backend_word(chosen: Chosen, engine: Engine, data: EngineData) -> str | None:
    """What the engine is told to move KV with for the backend the plan was priced with (``priced.transfer_backend``
    through ``engines.<engine>.transfer_backends`` in pdplan/data/export/targets.yaml: SGLang's
    ``--disaggregation-transfer-backend``); None where the plan records none or the engine has no word for it (the
    target's default is written: :func:`transfer_backend_warnings`)."""
    priced = chosen.plan.priced.transfer_backend if chosen.plan.priced is not None else None
    return None if priced is None else data.transfer_backends.get(priced)


def transfer_backend_warnings(chosen: Chosen, engine: Engine, data: EngineData) -> list[str]:
    """A warning when a disaggregated plan was priced with a KV backend the engine is not told to run (its
    ``transfer_backends`` have no word for it): its KV transfer time is the priced backend's, not the engine's."""
    priced = chosen.plan.priced.transfer_backend if chosen.plan.priced is not None else None
    if chosen.plan.mode != "disaggregated" or priced is None or priced in data.transfer_backends:
        return []
    runs = data.transfer_backend or data.kv_connector or "its default"
    return [
        f"the plan priced its KV transfer with the {priced} backend, which {engine} is not set up to run here "
        f"(engines.{engine}.transfer_backends in pdplan/data/export/targets.yaml): {runs} is written, so the "
        "transfer time may differ from the plan's"
    ]


ENGINE_WORDS: dict[Engine, str] = {"vllm": "vLLM", "sglang": "SGLang"}


def _priced_words(chosen: Chosen) -> str:
    name, version = chosen.doc.engine_name, chosen.doc.engine_version
    if name is None:
        return "an engine profile the plan document does not record"
    return f"the {name}{'' if version is None else ' ' + version} engine profile"


def engine_line(chosen: Chosen, ctx: ExportContext, engine: Engine) -> str:
    """Both versions in one header line: the engine release the file's flags are for, and the profile the plan's
    numbers were priced with (``assumptions.engine``)."""
    target = f"{ENGINE_WORDS[engine]} {ctx.targets.engines[engine].version}"
    return (
        f"engine: targets {target} (its flags: pdplan/data/export/engine_flags.yaml); the plan was priced with "
        f"{_priced_words(chosen)}"
    )


def version_warnings(chosen: Chosen, ctx: ExportContext, engine: Engine) -> list[str]:
    """A warning when the plan was priced with another release of the same engine than the one the file targets:
    the flags are the target's, the latencies the priced profile's (host time per step, scheduler defaults)."""
    version, target = chosen.doc.engine_version, ctx.targets.engines[engine].version
    if chosen.doc.engine_name != engine or version is None or version == target:
        return []
    words = ENGINE_WORDS[engine]
    return [
        f"the plan was priced with the {engine} {version} engine profile, but this file targets {words} {target} "
        f"(the release pdplan/data/export/targets.yaml names, whose flags it writes): its TTFT and TPOT are "
        f"{words} {version}'s (host time per step, scheduler defaults); before relying on them, fit a profile to "
        f"{words} {target} benchmark results (`pdplan calibrate RESULTS... -o ENGINE.yaml`) and re-run "
        "`pdplan optimize --engine ENGINE.yaml`"
    ]


def setting_warnings(chosen: Chosen, engine: str) -> list[str]:
    """Warnings for settings the plan document does not record (the engine's own default applies instead), for a
    plan priced with another engine's profile, and for a PPD plan (:func:`ppd_warnings`)."""
    out = ppd_warnings(chosen.plan)
    priced = chosen.doc.engine_name
    if priced is not None and priced != engine:
        out.append(f"the plan was priced with the {priced} engine profile, but it is exported for {engine}")
    defaults = chosen.doc.assumptions.engine_defaults
    if defaults.gpu_memory_utilization is None or defaults.max_num_batched_tokens is None:
        out.append(
            "the plan document has no assumptions.engine_defaults (gpu_memory_utilization, max_num_batched_tokens): "
            "the engine's defaults apply"
        )
    if chosen.doc.input_str("dtype") is None:
        out.append("the plan document has no inputs.dtype: the engine loads the checkpoint's dtype")
    if chosen.plan.max_num_seqs is None:
        out.append("the plan has no max_num_seqs: the engine's default batch limit applies")
    if chosen.plan.priced is None:
        out.append(
            "the plan has no priced record (documents before pdplan recorded one): no --max-model-len / "
            "--context-length is written, so the engine takes the model's full window, which may not fit its KV "
            "cache, and no MoE settings are written; re-run `pdplan optimize --format json`"
        )
    return out


def ppd_warnings(plan: ExportPlan) -> list[str]:
    """A plan priced with a PPD policy (``cache.turn_placement``, docs/prefix_cache.md §11): no stock engine runs it
    (:data:`pdplan.serving.ppd_report.ENGINE_NOTE`); its priced gain against the same plan with ``pd``."""
    cache = plan.cache or {}
    setting = cache.get("turn_placement")
    if not isinstance(setting, dict) or setting.get("policy", "pd") == "pd":
        return []
    report = (cache.get("report") or {}).get("turn_placement") or {}
    pd, gain = report.get("goodput_pd_rps"), report.get("gain_vs_pd")
    priced = (
        f"; priced with {setting['policy']}: {plan.goodput_rps:.4g} req/s, with pd {pd:.4g} req/s ({gain:.3g}x)"
        if isinstance(pd, int | float) and isinstance(gain, int | float)
        else ""
    )
    return [ENGINE_NOTE + priced]


def nodes_for(role: PlanRole, facts: GpuFacts, source: str) -> tuple[int, int]:
    """(nodes per instance, GPUs per node) for one instance of ``role`` on nodes of ``facts.gpus_per_node`` GPUs."""
    gpus = role.gpus_per_instance
    nodes = math.ceil(gpus / facts.gpus_per_node)
    if gpus % nodes:
        raise SpecError(
            f"{role.gpu}: {gpus} GPUs per instance do not split evenly over {nodes} nodes of "
            f"{facts.gpus_per_node} GPUs",
            source=source,
        )
    return nodes, gpus // nodes


def role_summary(name: str, role: PlanRole, facts: GpuFacts) -> str:
    """``prefill: 10 x TP2 (2 GPUs each) on h100-sxm (NVIDIA H100 SXM5 80GB)``."""
    par = f"TP{role.tp}" + (f" PP{role.pp}" if role.pp > 1 else "") + (f" DP{role.dp}" if role.dp > 1 else "")
    par += f" EP{role.ep}" if role.ep > 1 else ""
    each = role.gpus_per_instance
    return (
        f"{name}: {role.count} x {par} ({each} GPU{'s' if each > 1 else ''} each) on {role.gpu} ({facts.display_name})"
    )


def comment_text(text: str) -> str:
    """``text`` made safe for one comment line of a script or manifest: control characters (a newline would end the
    comment and start a command or a key) are written as escapes, e.g. ``\\n``."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def header_lines(chosen: Chosen, ctx: ExportContext, target: str, warnings: list[str]) -> list[str]:
    """Comment lines that say what was exported, from which plan, with what promise, and any warnings."""
    plan = chosen.plan
    lines = [
        f"pdplan export --to {target}: plan {chosen.rank} of {len(chosen.doc.plans)} from {chosen.source}",
        f"plan: {plan.label}; {plan.num_gpus} GPUs; goodput {plan.goodput_rps:.4g} req/s",
    ]
    if plan.ttft_p90_s is not None and plan.tpot_p90_s is not None:
        lines.append(f"at that rate: TTFT P90 {plan.ttft_p90_s * 1e3:.4g} ms, TPOT P90 {plan.tpot_p90_s * 1e3:.4g} ms")
    lines.append(f"model: {ctx.model_id}")
    lines += [role_summary(name, role, gpu_facts(ctx, role)) for name, role in plan.roles()]
    if plan.prfaas is not None:
        link = f" over {plan.prfaas.link}" if plan.prfaas.link else ""
        lines.append(
            f"PrfaaS: prompts of more than {int(plan.prfaas.threshold_tokens)} tokens are prefilled on the "
            f"remote-prefill cluster, their KV sent to the local decode instances{link}"
        )
    priced = plan.priced_role("colocated")
    if plan.mode == "colocated" and plan.scheduler == "chunked":
        if priced is not None and priced.max_num_batched_tokens is not None:
            lines.append(
                f"tokens per step: {priced.max_num_batched_tokens}, the chunk pdplan priced chunked prefill with "
                "(priced.roles.colocated.max_num_batched_tokens)"
            )
        else:
            lines.append(
                f"tokens per step: {ctx.colocated_chunk_tokens}, the chunk pdplan priced chunked prefill with "
                "(serving default prefill_chunk_tokens; a scenario's own chunk_tokens is not in the plan document)"
            )
    lines += [f"WARNING: {w}" for w in warnings]
    return lines
