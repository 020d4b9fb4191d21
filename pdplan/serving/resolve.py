"""Resolve a :class:`~pdplan.specs.scenario.Scenario` into specs, kernel tables and length bins.

Catalogue names become :class:`GpuSpec` / :class:`LinkSpec` / :class:`ModelSpec`; each GPU gets its
kernel table (packaged, or the user's via ``--kernel-table``: :meth:`Catalog.kernel_table`); the workload is binned into
a joint (input, output) histogram with at most ``WORKLOAD_BINS`` bins per axis (the 3 tail bins of
:func:`pdplan.workload.bins.discretize` keep P99+ prompts separate) and clipped to the model's context
window, with a warning naming the fraction of requests affected (ARCHITECTURE §2). The one-token
output mass gets its own output bin and each input bin a set of quadrature lengths
(:mod:`pdplan.workload.quadrature`).

:func:`resolve` does this once per scenario; :func:`bind` then puts any :class:`~pdplan.serving.deployment.Deployment`
on the result (its GPUs, kernel tables and link looked up in the catalogue, whose files are cached), which is how the
optimiser re-evaluates candidates without re-validating a scenario or re-binning the workload.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.perf.expert_parallel import parallelism_error
from pdplan.perf.roofline import Precision
from pdplan.serving.deployment import Deployment, Role
from pdplan.serving.engine_bind import engine_limits, scenario_engine, with_engine
from pdplan.workload.quadrature import input_quadrature, one_token_fraction, split_one_token
from pdplan.serving.roles import RoleHardware
from pdplan.workload.bins import JointLengths, discretize
from pdplan.specs.engine import EngineProfile
from pdplan.specs.hardware import LinkSpec
from pdplan.specs.model import ModelSpec
from pdplan.specs.scenario import Scenario
from pdplan.types import FloatArray

WORKLOAD_BINS = 24
"""Bins per length axis: 21 equal-probability body bins + 3 tail bins (speed vs. resolution)."""

DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0}


@dataclass(frozen=True, slots=True)
class ResolvedScenario:
    """Everything the serving models need, looked up once.

    ``scenario`` supplies what does not depend on the deployment (SLO, TTFT convention, dtypes, NICs per instance,
    memory utilisation); the deployment itself is ``deployment`` (its blocks in ``scenario`` are not read).
    """

    scenario: Scenario
    deployment: Deployment
    catalog: Catalog
    model: ModelSpec
    lengths: JointLengths
    prefill: RoleHardware | None
    decode: RoleHardware | None
    colocated: RoleHardware | None
    link: LinkSpec | None
    max_num_seqs: int
    chunk_tokens: int
    warnings: tuple[str, ...]
    input_points: FloatArray
    """``[K, J]`` quadrature lengths per input bin (:func:`pdplan.workload.quadrature.input_quadrature`)."""
    prefill_batch_tokens: int | None = None
    """Token budget of a batched prefill instance (None: one prompt at a time)."""
    engine: EngineProfile | None = None
    """The serving engine's profile (:mod:`pdplan.serving.engine_bind`)."""

    def cost_usd_per_hour(self) -> float | None:
        """Typical rental price of the deployment's GPUs (None if a GPU has no price in the catalogue)."""
        total = 0.0
        for name, role in self.deployment.roles:
            hw = getattr(self, name)
            if hw.gpu.price is None:
                return None
            total += hw.gpu.price.typical_usd_per_gpu_hour * role.gpus
        return total

    def gpu_prices_usd_per_hour(self) -> dict[str, float | None]:
        """USD per GPU-hour of each GPU type the deployment uses (a ``--price`` override where given), sorted."""
        prices: dict[str, float | None] = {}
        for name, _ in self.deployment.roles:
            gpu = getattr(self, name).gpu
            prices[gpu.name] = None if gpu.price is None else gpu.price.typical_usd_per_gpu_hour
        return dict(sorted(prices.items()))


def _share(fraction: float) -> str:
    """A share of requests for a warning: ``2.31%``, and for a small nonzero one its leading digits (``0.0042%``),
    never ``0.00%``."""
    if fraction >= 1e-4:
        return f"{fraction:.2%}"
    return f"{fraction * 100:.2g}%"


def precision_of(scenario: Scenario, model: ModelSpec | None = None) -> Precision:
    """Bytes per weight / activation / KV element from ``dtype`` and ``kv_dtype``.

    With ``model``, weights are never wider than the checkpoint stores them: an FP8 checkpoint
    (``weight_dtype: fp8``, from HF ``quantization_config``) is served in FP8 whatever ``dtype`` says,
    as vLLM and SGLang load it.
    """
    weight = DTYPE_BYTES[scenario.dtype]
    if model is not None:
        weight = min(weight, model.checkpoint_weight_bytes)
    return Precision(weight_bytes=weight, act_bytes=2.0, kv_bytes=DTYPE_BYTES[scenario.kv_dtype])


def role_hardware(
    catalog: Catalog, model: ModelSpec, role: Role | None, scenario: Scenario, engine: EngineProfile | None = None
) -> RoleHardware | None:
    """One pool's instance type (GPU spec, kernel table, TP/PP, precision); SpecError if TP cannot shard it."""
    if role is None:
        return None
    gpu = catalog.gpu(role.gpu)
    if model.num_attention_heads % role.tp:
        raise SpecError(
            f"TP {role.tp} does not divide {model.name}'s {model.num_attention_heads} attention heads "
            "(tensor parallelism shards heads evenly)",
            field="tp",
        )
    if role.tp > gpu.gpus_per_node and role.tp % gpu.gpus_per_node:
        raise SpecError(
            f"TP {role.tp} exceeds the {gpu.gpus_per_node} GPUs of one {gpu.name} node and is not a multiple of it "
            "(tensor parallelism across nodes takes whole nodes: its all-reduce crosses the scale-out NIC)",
            field="tp",
        )
    weight_bytes = precision_of(scenario, model).weight_bytes
    problem = parallelism_error(model, role.tp, role.dp, role.ep, scenario.redundant_experts, weight_bytes)
    if problem is not None:
        raise SpecError(problem, field="ep")
    hw = RoleHardware(
        model,
        gpu,
        catalog.kernel_table(gpu.name),
        role.tp,
        role.pp,
        precision_of(scenario, model),
        scenario.gpu_memory_utilization,
        dp=role.dp,
        ep=role.ep,
        expert_gather=role.expert_gather and role.ep > 1,
        redundant_experts=scenario.redundant_experts,
        two_batch_overlap=scenario.two_batch_overlap,
    )
    return with_engine(hw, engine or scenario_engine(catalog, scenario), scenario.gpu_memory_utilization)


def _colocated_role(role: Role | None) -> Role | None:
    """A colocated instance with attention DP is not modelled (its chunked batches would span DP ranks): SpecError."""
    if role is not None and role.dp > 1:
        raise SpecError(
            "attention DP (dp > 1) is modelled for disaggregated prefill/decode instances only; use dp 1 colocated",
            field="colocated.dp",
        )
    return role


def resolve(scenario: Scenario, catalog: Catalog) -> ResolvedScenario:
    """Look up every name, bin the workload (warnings collected, not printed) and bind the scenario's deployment."""
    model = catalog.model(scenario.model)
    window = model.max_position_embeddings
    lengths = discretize(scenario.workload, max_bins=WORKLOAD_BINS, context_window=window)
    lengths = split_one_token(lengths, one_token_fraction(scenario.workload))
    warnings = []
    if lengths.clipped_fraction > 0.0:
        warnings.append(
            f"{_share(lengths.clipped_fraction)} of requests exceed {model.name}'s context window of "
            f"{window} tokens and are clipped to it"
        )
    deployment = Deployment.of(scenario)
    base = ResolvedScenario(
        scenario=scenario,
        deployment=deployment,
        catalog=catalog,
        model=model,
        lengths=lengths,
        prefill=None,
        decode=None,
        colocated=None,
        link=None,
        max_num_seqs=0,
        chunk_tokens=0,
        warnings=tuple(warnings),
        input_points=input_quadrature(lengths.input_tokens, lengths.input_marginal()),
        engine=scenario_engine(catalog, scenario),
    )
    return bind(base, deployment)


def bind(res: ResolvedScenario, d: Deployment) -> ResolvedScenario:
    """``res`` for deployment ``d``: its instance types and link looked up, engine settings defaulted."""
    catalog, sc = res.catalog, res.scenario
    engine = res.engine or scenario_engine(catalog, sc)
    colocated = role_hardware(catalog, res.model, _colocated_role(d.colocated), sc, engine)
    serving = colocated or role_hardware(catalog, res.model, d.decode, sc, engine)
    assert serving is not None
    limits = engine_limits(engine, serving.gpu)  # seat cap and chunk budget of the decoding GPU's memory class
    return dataclasses.replace(
        res,
        prefill=role_hardware(catalog, res.model, d.prefill, sc, engine),
        decode=role_hardware(catalog, res.model, d.decode, sc, engine),
        colocated=colocated,
        link=catalog.link(d.link) if d.mode == "disaggregated" and d.link is not None else None,
        max_num_seqs=d.max_num_seqs or limits.max_seqs,
        chunk_tokens=d.chunk_tokens or limits.max_batched_tokens,
        prefill_batch_tokens=d.prefill_max_batch_tokens,
        deployment=d,
    )
