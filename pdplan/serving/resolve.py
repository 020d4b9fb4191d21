"""Resolve a :class:`~pdplan.specs.scenario.Scenario` into specs, kernel tables and length bins.

Catalogue names become :class:`GpuSpec` / :class:`LinkSpec` / :class:`ModelSpec`; each GPU gets its
kernel table (packaged, or the user's via ``--kernel-table``: :meth:`Catalog.kernel_table`); the workload is binned into
a joint (input, output) histogram with at most ``WORKLOAD_BINS`` bins per axis (the 3 tail bins of
:func:`pdplan.workload.bins.discretize` keep P99+ prompts separate) and clipped to the model's context
window, with a warning naming the fraction of requests affected (docs/architecture.md §2). The one-token
output mass gets its own output bin and each input bin a set of quadrature lengths
(:mod:`pdplan.workload.quadrature`).

:func:`resolve` does this once per scenario; :func:`bind` then puts any :class:`~pdplan.serving.deployment.Deployment`
on the result (its GPUs, kernel tables and link looked up in the catalogue, whose files are cached), which is how the
optimiser re-evaluates candidates without re-validating a scenario or re-binning the workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from pdplan.errors import SpecError
from pdplan.io.catalog import Catalog
from pdplan.perf.expert_parallel import parallelism_error
from pdplan.perf.precision import Precision
from pdplan.perf.sharding import sharding_error
from pdplan.serving.cache_setup import cache_cost_usd_per_hour, cache_setup, resolve_reuse
from pdplan.serving.deployment import Colocated, Deployment, Disaggregated, Role, deployment_of, local_part
from pdplan.serving.engine_bind import engine_limits, scenario_engine, with_engine
from pdplan.serving.role_hardware import RoleHardware
from pdplan.specs.engine import EngineProfile
from pdplan.specs.hardware import LinkSpec
from pdplan.specs.model import ModelSpec
from pdplan.specs.scenario import Scenario
from pdplan.types import FloatArray
from pdplan.workload.bins import JointLengths, discretize
from pdplan.workload.quadrature import input_quadrature, one_token_fraction, split_one_token

if TYPE_CHECKING:
    from pdplan.serving.prefix_cache import CacheSetup, Reuse

WORKLOAD_BINS = 24
"""Bins per length axis: 21 equal-probability body bins + 3 tail bins (speed vs. resolution)."""

DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0}


@dataclass(frozen=True, slots=True)
class DisaggregatedHardware:
    """A :class:`~pdplan.serving.deployment.Disaggregated` deployment with its instance types and link looked up."""

    deployment: Disaggregated
    prefill: RoleHardware
    decode: RoleHardware
    link: LinkSpec

    @property
    def roles(self) -> tuple[tuple[str, RoleHardware], ...]:
        """(pool name, instance type) of each pool."""
        return (("prefill", self.prefill), ("decode", self.decode))

    @property
    def serving(self) -> RoleHardware:
        """The instance type that decodes (whose memory class sets the engine's seat cap and chunk budget)."""
        return self.decode


@dataclass(frozen=True, slots=True)
class ColocatedHardware:
    """A :class:`~pdplan.serving.deployment.Colocated` deployment with its instance type looked up."""

    deployment: Colocated
    colocated: RoleHardware

    @property
    def roles(self) -> tuple[tuple[str, RoleHardware], ...]:
        return (("colocated", self.colocated),)

    @property
    def serving(self) -> RoleHardware:
        return self.colocated


Hardware = DisaggregatedHardware | ColocatedHardware
H = TypeVar("H", bound=DisaggregatedHardware | ColocatedHardware)
"""The hardware a resolved scenario is bound to: one type per deployment kind that has a serving model of its own
(a PrfaaS deployment binds its local xPyD cluster)."""


@dataclass(frozen=True, slots=True)
class ResolvedScenario(Generic[H]):
    """Everything the serving models need, looked up once, bound to one deployment's hardware.

    ``scenario`` supplies what does not depend on the deployment (SLO, TTFT convention, dtypes, NICs per instance,
    memory utilisation); the deployment itself is ``hardware.deployment`` (its blocks in ``scenario`` are not read)
    and ``deployment`` the whole one (a PrfaaS deployment: the local cluster's hardware, the remote cluster in
    ``deployment.remote``).
    """

    scenario: Scenario
    deployment: Deployment
    hardware: H
    catalog: Catalog
    model: ModelSpec
    lengths: JointLengths
    max_num_seqs: int
    chunk_tokens: int
    warnings: tuple[str, ...]
    input_points: FloatArray
    """``[K, J]`` quadrature lengths per input bin (:func:`pdplan.workload.quadrature.input_quadrature`)."""
    engine: EngineProfile
    """The serving engine's profile (:mod:`pdplan.serving.engine_bind`)."""
    prefill_batch_tokens: int | None = None
    """Token budget of a batched prefill instance (None: one prompt at a time)."""
    reuse: Reuse | None = None
    """What the workload reuses (:func:`pdplan.serving.cache_setup.resolve_reuse`); None: every prompt new."""
    cache: CacheSetup | None = None
    """The bound deployment's prefix cache (:mod:`pdplan.serving.cache_setup`); None: none (no reuse, or off)."""
    cache_rate_rps: float | None = None
    """The request rate the cache's hit rates are evaluated at (None: a first estimate; :mod:`pdplan.serving.
    prefix_cache`, "The rate")."""
    decode_line: int | None = None
    """The line of a concave decode step law (:attr:`pdplan.serving.roles.DecodePerf.lines`) the models price
    (:mod:`pdplan.serving.decode_lines`); None: the one-line fit, what a step of one line prices anyway."""

    @property
    def roles(self) -> tuple[tuple[str, RoleHardware], ...]:
        """(pool name, instance type) of each pool of the bound deployment."""
        return self.hardware.roles

    def cost_usd_per_hour(self) -> float | None:
        """Typical rental price of the deployment's GPUs plus its prefix cache's lower tiers (None if a GPU or a tier
        has no price in the catalogue; :func:`pdplan.serving.cache_setup.cache_cost_usd_per_hour`)."""
        total = 0.0
        for (name, role), (_, hw) in zip(local_part(self.deployment).roles, self.roles, strict=True):
            if hw.gpu.price is None:
                return None
            total += hw.gpu.price.typical_usd_per_gpu_hour * role.gpus
            if name in ("prefill", "colocated") and self.cache is not None:
                tiers = cache_cost_usd_per_hour(self.cache, float(role.gpus), hw.gpu.gpus_per_node)
                if tiers is None:
                    return None
                total += tiers
        return total

    def gpu_prices_usd_per_hour(self) -> dict[str, float | None]:
        """USD per GPU-hour of each GPU type the deployment uses (a ``--price`` override where given), sorted."""
        prices: dict[str, float | None] = {}
        for _, hw in self.roles:
            prices[hw.gpu.name] = None if hw.gpu.price is None else hw.gpu.price.typical_usd_per_gpu_hour
        return dict(sorted(prices.items()))


SESSIONS_PAST_WINDOW = (
    "; the closed form keeps a session's turns past the window (their prompts clipped), `pdplan simulate` ends the "
    "session before the first of them and offers fewer requests than the nominal rate: the two answer different "
    "workloads "
    "(docs/prefix_cache.md §11, Held histories under cache pressure)"
)
"""What the context-window warning adds for a sessions workload (the closed form's length bins clip a turn's prompt
to the window; the simulator's sessions end before it, :mod:`pdplan.sim.reuse_sessions`)."""


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
    catalog: Catalog, model: ModelSpec, role: Role, scenario: Scenario, engine: EngineProfile | None = None
) -> RoleHardware:
    """One pool's instance type (GPU spec, kernel table, TP/PP, precision); SpecError if TP cannot shard it."""
    gpu = catalog.gpu(role.gpu)
    sharding = sharding_error(model, role.tp, role.pp)
    if sharding is not None:
        raise SpecError(sharding[1], field=sharding[0])
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
    engine = engine or scenario_engine(catalog, scenario)
    return with_engine(hw, engine, scenario.gpu_memory_utilization, scenario.kv_block_tokens)


def resolve(scenario: Scenario, catalog: Catalog) -> ResolvedScenario[Hardware]:
    """Look up every name, bin the workload (warnings collected, not printed) and bind the scenario's deployment."""
    model = catalog.model(scenario.model)
    window = min(model.max_position_embeddings, scenario.max_model_len or model.max_position_embeddings)
    limit = (
        f"{model.name}'s context window of {window} tokens"
        if window == model.max_position_embeddings
        else f"max_model_len {window} ({model.name}'s window: {model.max_position_embeddings})"
    )
    lengths = discretize(scenario.workload, max_bins=WORKLOAD_BINS, context_window=window)
    lengths = split_one_token(lengths, one_token_fraction(scenario.workload))
    warnings = []
    if lengths.clipped_fraction >= 1.0 - 1e-12:  # every request is longer than the model can hold: not a workload
        raise SpecError(
            f"every request exceeds {limit} (prompt + output); engines "
            "refuse such requests (vLLM and SGLang answer 400), so there is nothing to plan: shorten the lengths",
            field="workload",
        )
    if lengths.clipped_fraction > 0.0:
        warnings.append(
            f"{_share(lengths.clipped_fraction)} of requests exceed {limit} and are clipped to it"
            + (SESSIONS_PAST_WINDOW if scenario.workload.sessions is not None else "")
        )
    engine = scenario_engine(catalog, scenario)
    deployment = deployment_of(scenario)
    hardware = bind_hardware(catalog, model, scenario, engine, local_part(deployment))
    limits = engine_limits(engine, hardware.serving.gpu)
    local = local_part(deployment)
    reuse = resolve_reuse(scenario)
    return ResolvedScenario(
        scenario=scenario,
        deployment=deployment,
        hardware=hardware,
        catalog=catalog,
        model=model,
        lengths=lengths,
        max_num_seqs=local.max_num_seqs or limits.max_seqs,
        chunk_tokens=local.chunk_tokens or limits.max_batched_tokens,
        warnings=tuple(warnings),
        input_points=input_quadrature(lengths.input_tokens, lengths.input_marginal()),
        engine=engine,
        prefill_batch_tokens=local.prefill_max_batch_tokens if isinstance(local, Disaggregated) else None,
        reuse=reuse,
        cache=cache_setup(reuse, local.cache, catalog, engine),
    )


def bind_hardware(
    catalog: Catalog, model: ModelSpec, sc: Scenario, engine: EngineProfile, d: Disaggregated | Colocated
) -> Hardware:
    """The instance types (and link) of ``d`` looked up in the catalogue, engine settings applied."""
    if isinstance(d, Colocated):
        return ColocatedHardware(d, role_hardware(catalog, model, d.instance, sc, engine))
    return DisaggregatedHardware(
        d,
        role_hardware(catalog, model, d.prefill, sc, engine),
        role_hardware(catalog, model, d.decode, sc, engine),
        catalog.link(d.link),
    )


@overload
def bind(res: ResolvedScenario[Any], d: Disaggregated) -> ResolvedScenario[DisaggregatedHardware]: ...
@overload
def bind(res: ResolvedScenario[Any], d: Colocated) -> ResolvedScenario[ColocatedHardware]: ...
@overload
def bind(res: ResolvedScenario[Any], d: Deployment) -> ResolvedScenario[Hardware]: ...
def bind(res: ResolvedScenario[Any], d: Deployment) -> ResolvedScenario[Any]:
    """``res`` for deployment ``d``: its instance types and link looked up, engine settings defaulted (a PrfaaS
    deployment binds its local cluster)."""
    local = local_part(d)
    scenario = _with_kv_choice(res.scenario, local)
    hardware = bind_hardware(res.catalog, res.model, scenario, res.engine, local)
    limits = engine_limits(res.engine, hardware.serving.gpu)  # seat cap and chunk budget of the decoding GPU
    return ResolvedScenario(
        scenario=scenario,
        deployment=d,
        hardware=hardware,
        catalog=res.catalog,
        model=res.model,
        lengths=res.lengths,
        max_num_seqs=local.max_num_seqs or limits.max_seqs,
        chunk_tokens=local.chunk_tokens or limits.max_batched_tokens,
        warnings=res.warnings,
        input_points=res.input_points,
        engine=res.engine,
        prefill_batch_tokens=local.prefill_max_batch_tokens if isinstance(local, Disaggregated) else None,
        reuse=res.reuse,
        cache=cache_setup(res.reuse, local.cache, res.catalog, res.engine),
        cache_rate_rps=res.cache_rate_rps,
    )


def _with_kv_choice(scenario: Scenario, d: Disaggregated | Colocated) -> Scenario:
    """``scenario`` with the KV backend and block size the optimiser chose for ``d`` (``search.kv_backends`` /
    ``search.kv_block_tokens``), which the engine binding and the transfer read from it; unchanged where none was."""
    if not isinstance(d, Disaggregated) or (d.kv_backend is None and d.kv_block_tokens is None):
        return scenario
    chosen = {"kv_backend": d.kv_backend, "kv_block_tokens": d.kv_block_tokens}
    return scenario.model_copy(update={k: v for k, v in chosen.items() if v is not None})
