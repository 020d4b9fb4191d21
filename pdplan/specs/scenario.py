"""Scenario: one deployment question in YAML — model, hardware per role, link, workload, SLO.

YAML keys equal the field names (no merge magic; docs/architecture.md §8). Loaded by :func:`load_scenario`, which
turns every failure into one-line :class:`~pdplan.errors.SpecError` naming the file and the field.

Two deployment shapes (``mode``):

* ``disaggregated`` (xPyD): ``prefill: {gpu, tp, pp, count}`` and ``decode: {gpu, tp, pp, count}``,
  joined by ``link`` with ``granularity`` request | layer | chunk and ``routing`` of prompts over
  the prefill pool (random | round-robin | least-work | least-loaded | power-of-two). ``granularity`` defaults to
  ``request``: the one every shipped engine's KV connector runs (its profile's ``kv_connector.granularities``: vLLM's
  NixlConnector and TensorRT-LLM's cache transceiver send a request's KV after its prefill, SGLang also per chunk),
  so a scenario that leaves it out is priced as the engine runs it (issue #25); ``layer`` (DistServe/Splitwise-style
  streaming) is priced only when asked for, with a warning naming the engine that does not run it.
* ``colocated``: ``colocated: {gpu, tp, pp, count, scheduler, chunk_tokens}`` — every instance does
  both phases, with ``prefill-first`` (vanilla vLLM) or ``chunked`` (Sarathi-Serve) batching.

``routing`` is the router's policy for both pools, as in vLLM's disaggregated proxy and SGLang's
mini load balancer (one policy picks the prefill and the decode instance): ``random``,
``round-robin`` (decode in prefill-completion order), ``least-work`` (prefill: least unfinished
work; decode: fewest outstanding requests), or what Dynamo's and SGLang's routers run (pdplan.queueing.jsq):
``least-loaded`` (fewest in-flight requests) and ``power-of-two`` (the fewer of two instances drawn at random).
The default is ``least-loaded``: the load-aware policy a shipped router runs as priced (Dynamo's frontend
``--router-mode least-loaded``, TensorRT-LLM's ``load_balancing`` router; pdplan/data/export/targets.yaml
``routers``), so a default plan is exported as it was priced (issue #25). No router runs ``least-work`` (the
exports write the nearest with a warning); ask for it to price an ideal work-aware router.

``prefill_max_batch_tokens`` (a positive integer; default none = one prompt at a time) turns on
batched prefill on each prefill instance of a disaggregated deployment, with this token budget
(vLLM's ``max_num_batched_tokens``): an idle instance takes the FCFS head requests whose prompt
tokens fit the budget (always at least one; a longer prompt runs alone) and all finish together
(:mod:`pdplan.queueing.batched`, :mod:`pdplan.serving.prefill_pool`). Colocated deployments
ignore it (their batching is ``scheduler``/``chunk_tokens``), so a search may swap modes freely.

``kv_backend`` prices the KV data plane of a disaggregated deployment (:mod:`pdplan.transfer.data_plane`,
docs/kv_data_plane.md): ``engine`` (the engine profile's ``kv_connector`` and its backend), a backend name of
``pdplan/data/kv_backends.yaml`` (``nixl-ucx``, ``nccl-p2p``, ``mooncake-te``, ``tcp``; split as the engine's
connector splits), a path to a backends YAML holding one backend, or ``none`` (the link alone, α–β); default: the
engine's own connector where its profile names one (``engine``), else none.
``kv_block_tokens`` (a positive integer) is the KV block size the connector cuts descriptors by; default the
engine connector's (vLLM 16).

``workload`` is an inline block (docs/architecture.md §4), a bundled preset name (``chat``) or a path to a
workload YAML (relative to the scenario file). SLO times accept unit strings (``"250ms"``); inside
they are seconds. Engine settings left out (``max_num_seqs``, ``gpu_memory_utilization``,
``chunk_tokens``) come from ``pdplan/data/serving_defaults.yaml`` (with sources).
"""

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from pdplan.specs.base import FrozenModel
from pdplan.specs.cache import CacheSearch, CacheSpec
from pdplan.specs.ceilings import MAX_INSTANCES_PER_ROLE, MAX_PARALLEL_DEGREE
from pdplan.specs.prfaas import PrfaasSpec
from pdplan.specs.workload import WorkloadSpec
from pdplan.types import Convention, Dtype, Granularity, Mode, Objective, Redundancy, Routing, Scheduler
from pdplan.units import parse_time_s

PosInt = Annotated[int, Field(strict=True, ge=1)]
Degree = Annotated[int, Field(strict=True, ge=1, le=MAX_PARALLEL_DEGREE)]
Count = Annotated[int, Field(strict=True, ge=1, le=MAX_INSTANCES_PER_ROLE)]


class RoleSpec(FrozenModel):
    """One instance type of a pool: GPU (name or path), tensor/pipeline parallelism, instances; ``dp`` attention
    data-parallel ranks and ``ep`` expert-parallel size (MoE; ``ep`` divides ``tp·dp``: MoE layers run as
    ``moe_tp × ep`` over the ``tp·dp`` GPUs of a stage, :mod:`pdplan.perf.expert_parallel`)."""

    gpu: Annotated[str, Field(min_length=1)]
    tp: Degree = 1
    pp: Degree = 1
    count: Count = 1
    dp: Degree = 1
    ep: Degree = 1
    expert_gather: bool = False
    """Prefill, ep > 1: ZeRO-Prefill's expert-weight all-gather instead of the EP all-to-all."""

    @model_validator(mode="after")
    def _ep_divides(self) -> "RoleSpec":
        if (self.tp * self.dp) % self.ep:
            raise ValueError(f"ep {self.ep} must divide tp·dp = {self.tp * self.dp} (moe_tp = tp·dp/ep GPUs)")
        return self

    @property
    def gpus(self) -> int:
        """GPUs in the pool: ``tp·dp·pp·count``."""
        return self.tp * self.dp * self.pp * self.count


class ColocatedSpec(RoleSpec):
    """Colocated instances; ``chunk_tokens`` None → serving default ``prefill_chunk_tokens``."""

    scheduler: Scheduler = "chunked"
    chunk_tokens: PosInt | None = None


def _seconds(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError("expected a time such as '2s' or '100ms', got a boolean")
    if isinstance(value, str):
        return parse_time_s(value)
    return value


Seconds = Annotated[float, Field(gt=0.0, allow_inf_nan=False)]


class SloSpec(FrozenModel):
    """TTFT/TPOT thresholds (s), the percentile they are read at, and the target attainment.

    Defaults: DistServe's (OSDI'24 §6) 90 % attainment convention; 2 s / 100 ms are placeholder
    chat-style thresholds (docs/architecture.md §2 "default P90, 90 %"), meant to be set per scenario.
    """

    ttft: Seconds = 2.0
    tpot: Seconds = 0.1
    percentile: Annotated[float, Field(gt=0.0, lt=100.0)] = 90.0
    attainment: Annotated[float, Field(gt=0.0, le=1.0)] = 0.9

    @field_validator("ttft", "tpot", mode="before")
    @classmethod
    def _parse_time(cls, value: object) -> object:
        return _seconds(value)


class SearchSpace(FrozenModel):
    """What ``pdplan optimize`` may choose; a field left out keeps the scenario's own value.

    ``gpus`` is the GPU budget (maximise goodput per GPU within it); ``rate`` a target request rate (meet it at the
    fewest GPUs or the lowest $/h, per ``objective``). ``tp``/``pp`` are tried per role within one node;
    ``max_instances`` bounds x and y (and the colocated count); ``max_num_seqs`` lists decode batch caps.
    """

    prefill_gpus: Annotated[list[str], Field(min_length=1)] | None = None
    decode_gpus: Annotated[list[str], Field(min_length=1)] | None = None
    gpus: PosInt | None = None
    tp: Annotated[list[PosInt], Field(min_length=1)] | None = None
    prefill_tp: Annotated[list[PosInt], Field(min_length=1)] | None = None
    """TP degrees for prefill instances only (default: ``tp``)."""
    decode_tp: Annotated[list[PosInt], Field(min_length=1)] | None = None
    """TP degrees for decode instances only (default: ``tp``)."""
    pp: Annotated[list[PosInt], Field(min_length=1)] | None = None
    max_instances: PosInt | None = None
    granularities: Annotated[list[Granularity], Field(min_length=1)] | None = None
    links: Annotated[list[str], Field(min_length=1)] | None = None
    routing: Annotated[list[Routing], Field(min_length=1)] | None = None
    max_num_seqs: Annotated[list[PosInt], Field(min_length=1)] | None = None
    colocated_scheduler: Scheduler = "chunked"
    rate: Annotated[float, Field(gt=0.0)] | None = None
    objective: Objective = "gpus"
    headroom: Annotated[float, Field(ge=0.0, le=10.0)] | None = None
    """Planning margin H: the SLO must hold at (1+H)x the operating rate (default: pdplan/data/planning_defaults)."""
    redundancy: Redundancy | None = None
    """``n+1``: the SLO must hold with one instance of each pool down (default ``none``)."""
    budget_usd_per_hour: Annotated[float, Field(gt=0.0)] | None = None
    """A dollar budget: only plans costing at most this per hour."""
    prices: dict[str, Annotated[float, Field(gt=0.0)]] | None = None
    """GPU name -> USD per GPU-hour, replacing the catalogue's typical price."""
    ep: Annotated[list[PosInt], Field(min_length=1)] | None = None
    """Expert-parallel sizes for both roles (MoE models; default: the ladder of :mod:`pdplan.search.parallel`)."""
    prefill_ep: Annotated[list[PosInt], Field(min_length=1)] | None = None
    decode_ep: Annotated[list[PosInt], Field(min_length=1)] | None = None
    dp: Annotated[list[PosInt], Field(min_length=1)] | None = None
    """Attention data-parallel ranks per instance for both roles (MoE models)."""
    prefill_dp: Annotated[list[PosInt], Field(min_length=1)] | None = None
    decode_dp: Annotated[list[PosInt], Field(min_length=1)] | None = None
    cache: CacheSearch | None = None
    """Prefix-cache dimensions (on/off, routing, tier sizes; :mod:`pdplan.specs.cache`); searched only when the
    workload reuses KV."""
    kv_block_tokens: Annotated[list[PosInt], Field(min_length=1)] | None = None
    """KV block (page) sizes to try, each one the engine runs (its ``kv_connector.block_tokens_supported``: vLLM
    ``--block-size``, SGLang ``--page-size``, TensorRT-LLM ``tokens_per_block``); default: the scenario's
    ``kv_block_tokens`` (docs/kv_data_plane.md §6)."""
    kv_backends: Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)] | None = None
    """KV transfer backends to try (``engine``, ``none``, a backend name; each one the engine's connector can drive);
    default: the scenario's ``kv_backend``."""


class Scenario(FrozenModel):
    """One deployment to evaluate (fields documented in the module docstring)."""

    schema_version: Literal[1] = 1
    name: str | None = None
    description: str = ""
    model: Annotated[str, Field(min_length=1)]
    mode: Mode = "disaggregated"
    prefill: RoleSpec | None = None
    decode: RoleSpec | None = None
    colocated: ColocatedSpec | None = None
    link: Annotated[str, Field(min_length=1)] = "ib-ndr"
    nics_per_instance: PosInt | None = None
    granularity: Granularity = "request"
    routing: Routing = "least-loaded"
    workload: WorkloadSpec
    slo: SloSpec = SloSpec()
    ttft_convention: Convention = "A"
    dtype: Dtype = "bf16"
    kv_dtype: Dtype = "bf16"
    max_num_seqs: PosInt | None = None
    gpu_memory_utilization: Annotated[float, Field(gt=0.0, le=1.0)] | None = None
    max_model_len: PosInt | None = None
    """The longest request (prompt + output) the engine accepts (vLLM ``--max-model-len``); None: the model's
    context window. Longer requests of the workload are clipped to it, as to the window."""
    chunk_tokens: PosInt | None = None
    prefill_max_batch_tokens: PosInt | None = None
    search: SearchSpace | None = None
    prfaas: PrfaasSpec | None = None
    """A remote prefill cluster for long prompts (:mod:`pdplan.specs.prfaas`); disaggregated mode only."""
    engine: Annotated[str, Field(min_length=1)] | None = None
    """Serving engine profile: vllm | sglang | trtllm | kernels or a YAML path (None: vllm; pdplan.io.engines)."""
    redundant_experts: Annotated[int, Field(strict=True, ge=0)] = 0
    """EPLB redundant expert slots (SGLang ``--ep-num-redundant-experts``): E + r slots spread over EP ranks."""
    two_batch_overlap: bool | None = None
    """EP steps as two overlapped micro-batches (SGLang ``--enable-two-batch-overlap``); None: the engine's default."""
    cache: CacheSpec | None = None
    """The prefix cache (:mod:`pdplan.specs.cache`); None: the engines' default (prefix caching on, HBM only,
    affinity routing) where the workload reuses KV, and nothing where it does not."""
    kv_backend: Annotated[str, Field(min_length=1)] | None = None
    """KV data plane: ``engine``, a backend name or a backends YAML path (module docstring); None: the link alone."""
    kv_block_tokens: PosInt | None = None
    """KV block size the connector cuts descriptors by (None: the engine connector's)."""

    @field_validator("workload", mode="before")
    @classmethod
    def _resolve_workload(cls, value: object, info: Any) -> object:
        """A preset name or file path is loaded by the resolver :mod:`pdplan.io.scenario` passes in the validation
        context (``context={"resolve_workload": fn, "base_dir": folder}``): specs read no files themselves."""
        if isinstance(value, str):
            context = info.context or {}
            resolver = context.get("resolve_workload")
            if resolver is None:
                raise ValueError("a workload given by name or path is loaded by pdplan.io.scenario.load_scenario")
            return resolver(value, Path(context.get("base_dir", Path.cwd())))
        return value

    @model_validator(mode="after")
    def _shape(self) -> "Scenario":
        if self.mode == "disaggregated":
            if self.prefill is None or self.decode is None:
                raise ValueError("mode disaggregated needs both prefill: and decode: blocks")
            if self.colocated is not None:
                raise ValueError("mode disaggregated takes no colocated: block")
        else:
            if self.colocated is None:
                raise ValueError("mode colocated needs a colocated: block")
            if self.prefill is not None or self.decode is not None:
                raise ValueError("mode colocated takes no prefill:/decode: blocks")
        if self.prfaas is not None and self.mode != "disaggregated":
            raise ValueError("prfaas: needs mode disaggregated (the local cluster's prefill and decode pools)")
        _check_turn_placement(self)
        return self

    @property
    def num_gpus(self) -> int:
        """GPUs of the whole deployment."""
        if self.colocated is not None:
            return self.colocated.gpus
        assert self.prefill is not None
        assert self.decode is not None
        return self.prefill.gpus + self.decode.gpus


def _check_turn_placement(scenario: Scenario) -> None:
    """A PPD policy other than ``pd`` needs what it acts on (docs/prefix_cache.md §11): an xPyD deployment (a Turn 2+
    append runs on a decode instance), a ``sessions`` workload (turns to place) and prefix caching on (the decode
    instance keeps the history in its prefix cache)."""
    cache = scenario.cache
    policy = "pd" if cache is None else cache.turn_placement.policy
    if cache is None or policy == "pd":
        return
    why = (
        "mode disaggregated (a Turn 2+ append runs on the decode instance holding its session)"
        if scenario.mode != "disaggregated"
        else "a sessions workload (multi-turn sessions to place)"
        if scenario.workload.sessions is None
        else "prefix_caching: true (the decode instance keeps the history in its prefix cache)"
        if not cache.prefix_caching
        else None
    )
    if why is not None:
        raise ValueError(f"cache.turn_placement.policy {policy} needs {why}; use policy pd")
