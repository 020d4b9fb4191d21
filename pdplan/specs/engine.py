"""Engine profile: what a serving engine (vLLM, SGLang, TensorRT-LLM) adds to the kernels' time, and how it schedules.

A profile is data (``pdplan/data/engines/<name>.yaml``, or a user's YAML given as ``--engine FILE``); every number
carries its ``source`` and the profile names the engine ``version`` it holds for. Five groups:

* ``limits``: the chunked-prefill token budget (vLLM ``max_num_batched_tokens``, SGLang ``chunked_prefill_size``,
  TensorRT-LLM ``max_num_tokens``) and the seat cap (``max_num_seqs`` / ``max_running_requests`` /
  ``max_batch_size``) by GPU memory class: the first class (in file order) whose ``min_memory_gib`` the GPU
  reaches and whose ``exclude_gpus`` does not name it applies.
* ``kv_memory``: how the engine sizes its KV pool. ``basis: total``: a fraction of the GPU's whole memory (vLLM
  ``gpu_memory_utilization``); ``basis: free``: a fraction of what is left after weights and workspace (TensorRT-LLM
  ``free_gpu_memory_fraction``); ``basis: reserve``: total minus a reserve (SGLang ``mem_fraction_static``:
  ``base + per_chunk_token·max(chunk, min_chunk_tokens) + per_graph_seq·cuda_graph_max_seqs + per_gpu·tp·pp``,
  floored at ``floor_bytes`` on GPUs above ``floor_above_bytes``, as SGLang from PR #10975, 2025-09-27; or, where
  ``reserve_tiers`` is given, the reserve of the first tier the GPU's memory is below, ``reserve + per_gpu·tp·pp``,
  as SGLang 0.4.7–0.5.2; plus ``reserve_dp_attention_bytes`` with attention DP), the fraction rounded to 3 decimals
  as SGLang does. Under ``reserve`` the fraction holds weights and KV only: the activations live in the reserve.
* ``scheduling``: chunked prefill on/off, decode-first, prefill chunks riding in decode steps, partial prefills
  at a time, overlap/async scheduling and the extra steps it costs a request's first token, and how a request is
  admitted on KV (``kv_admission``: reserve, on demand, or SGLang's ratio reservation).
* ``overheads``: host time the kernel tables cannot show, each a :class:`Sourced` value. Per step:
  ``step_s`` (scheduler, input preparation, sampling), ``collective_s`` per all-reduce (two per layer at TP > 1),
  ``launch_gap_s_per_layer``. Per request, on TTFT: ``request_s`` (API server, dispatch),
  ``request_s_per_layer`` (per-layer dispatch, as AIConfigurator's vLLM backend), ``tokenize_s_per_1k_tokens``.
  Per step that carries prefill tokens outside the decode CUDA graphs: ``eager_s_per_moe_layer`` (host launch time,
  a floor under the step).
* ``benchmark``: the closed-loop benchmark tool usually run against this engine and its defaults (requests and
  warm-up), used by ``evaluate --concurrency`` when ``--requests`` / ``--warmup`` are not given.

``kernels`` is the profile with no engine at all: zero overheads, pdplan's former serving defaults.
"""

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pdplan.specs.base import FrozenModel
from pdplan.specs.kv_backend import KvConnector
from pdplan.specs.moe_wideep import MoeRuntime

PosInt = Annotated[int, Field(strict=True, ge=1)]
NonNegInt = Annotated[int, Field(strict=True, ge=0)]
NonNegative = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(gt=0.0, le=1.0)]
Text = Annotated[str, Field(min_length=1)]


class Sourced(FrozenModel):
    """One non-negative number (SI units, named by the field holding it) and where it comes from."""

    value: NonNegative
    source: Text


class MemoryClass(FrozenModel):
    """Scheduler limits for GPUs of at least ``min_memory_gib`` (binary GiB) not named in ``exclude_gpus``."""

    min_memory_gib: NonNegative = 0.0
    exclude_gpus: list[Text] = Field(default_factory=list)
    """Substrings of GPU names (case-insensitive) this class does not apply to (vLLM: ``a100``)."""
    max_batched_tokens: PosInt
    """Tokens one step may carry: the chunked-prefill budget."""
    max_seqs: PosInt
    """Sequences one step may carry: the seat cap."""
    cuda_graph_max_seqs: PosInt | None = None
    """Largest CUDA-graph batch (SGLang ``cuda_graph_max_bs``; enters the ``reserve`` memory basis)."""
    workspace_tokens: PosInt | None = None
    """Tokens the activation workspace is sized for (None: ``max_batched_tokens``)."""


class Limits(FrozenModel):
    """Token budget and seat cap by GPU memory class; the last class should catch every GPU (``min_memory_gib: 0``)."""

    classes: Annotated[list[MemoryClass], Field(min_length=1)]
    source: Text

    @model_validator(mode="after")
    def _catch_all(self) -> "Limits":
        last = self.classes[-1]
        if last.min_memory_gib != 0.0 or last.exclude_gpus:
            raise ValueError("the last class must apply to every GPU: min_memory_gib 0 and no exclude_gpus")
        return self

    def for_gpu(self, gpu_name: str, memory_bytes: float) -> MemoryClass:
        """The first class this GPU falls in (file order)."""
        name = gpu_name.lower()
        for cls in self.classes:
            excluded = any(word.lower() in name for word in cls.exclude_gpus)
            if memory_bytes >= cls.min_memory_gib * 2**30 and not excluded:
                return cls
        return self.classes[-1]


class ReserveTier(FrozenModel):
    """SGLang's reserve for GPUs with less memory than ``below_memory_bytes`` (None: every GPU left)."""

    below_memory_bytes: NonNegative | None = None
    reserve_bytes: NonNegative
    per_gpu_bytes: NonNegative = 0.0
    """Reserve per GPU of the model-parallel group (tp·pp)."""


class KvMemory(FrozenModel):
    """How the engine sizes the memory that holds weights, workspace and the KV cache (module docstring)."""

    basis: Literal["total", "free", "reserve"]
    fraction: Fraction = 1.0
    """``total``: share of the GPU's memory; ``free``: share of what weights and workspace leave; ``reserve``: unused.
    """
    reserve_base_bytes: NonNegative = 0.0
    reserve_per_chunk_token_bytes: NonNegative = 0.0
    reserve_min_chunk_tokens: NonNegInt = 0
    reserve_per_graph_seq_bytes: NonNegative = 0.0
    reserve_per_gpu_bytes: NonNegative = 0.0
    """Reserve per GPU of the model-parallel group (SGLang: tp·pp/8 GiB)."""
    reserve_floor_bytes: NonNegative = 0.0
    reserve_floor_above_bytes: NonNegative = 0.0
    """The floor applies to GPUs with more memory than this."""
    reserve_tiers: list[ReserveTier] = Field(default_factory=list)
    """Tiered reserve by GPU memory (file order, the last without ``below_memory_bytes``); replaces the formula."""
    reserve_dp_attention_bytes: NonNegative = 0.0
    """Added to the reserve where attention runs data-parallel (SGLang ``enable_dp_attention``: 4 GiB)."""
    source: Text

    @model_validator(mode="after")
    def _tiers_catch_all(self) -> "KvMemory":
        if self.reserve_tiers and self.reserve_tiers[-1].below_memory_bytes is not None:
            raise ValueError("the last reserve tier must apply to every GPU: no below_memory_bytes")
        return self

    @property
    def workspace_in_budget(self) -> bool:
        """Whether the activation workspace comes out of the usable share (not under ``reserve``: SGLang's
        ``mem_fraction_static`` is "(model weights + KV cache pool) / GPU memory capacity")."""
        return self.basis != "reserve"

    def usable_fraction(
        self, memory_bytes: float, *, chunk_tokens: int, graph_seqs: int, gpus: int, dp_attention: bool = False
    ) -> float:
        """Share of the GPU's memory the engine gives to weights, workspace and KV (``total``), to weights and KV
        (``reserve``: ``round((memory − reserve)/memory, 3)``), or 1.0 for ``free`` (whose :attr:`fraction` then
        applies to what is left after weights and workspace).

        Example (SGLang 0.5.1 tiers): B200 exposing 183,359 MiB at TP4 is above every tier, reserve 32 GiB:
        round((183359 − 32768)/183359, 3) = 0.821."""
        if self.basis == "total":
            return self.fraction
        if self.basis == "free":
            return 1.0
        reserve = self._reserve_bytes(memory_bytes, chunk_tokens=chunk_tokens, graph_seqs=graph_seqs, gpus=gpus)
        if dp_attention:
            reserve += self.reserve_dp_attention_bytes
        return max(0.0, round((memory_bytes - reserve) / memory_bytes, 3))

    def _reserve_bytes(self, memory_bytes: float, *, chunk_tokens: int, graph_seqs: int, gpus: int) -> float:
        """The ``reserve`` basis's reserve before attention DP (module docstring)."""
        for tier in self.reserve_tiers:
            if tier.below_memory_bytes is None or memory_bytes < tier.below_memory_bytes:
                return tier.reserve_bytes + tier.per_gpu_bytes * gpus
        reserve = (
            self.reserve_base_bytes
            + self.reserve_per_chunk_token_bytes * max(chunk_tokens, self.reserve_min_chunk_tokens)
            + self.reserve_per_graph_seq_bytes * graph_seqs
            + self.reserve_per_gpu_bytes * gpus
        )
        if memory_bytes > self.reserve_floor_above_bytes:
            reserve = max(reserve, self.reserve_floor_bytes)
        return reserve

    @property
    def free_fraction(self) -> float:
        """Share of the memory left after weights and workspace that becomes KV cache."""
        return self.fraction if self.basis == "free" else 1.0


class KvReserveRatio(FrozenModel):
    """``kv_admission: ratio`` (SGLang): the share of a running request's remaining output its admission counts."""

    ratio: Fraction
    """r: a running request is counted as its held context plus r·min(remaining output, ``clip_tokens``)."""
    clip_tokens: PosInt
    """c: the remaining output the estimate is clipped to (SGLang ``CLIP_MAX_NEW_TOKENS``)."""
    init_ratio: Fraction
    """The share at start-up and after the engine idles, from which it decays to :attr:`ratio` (SGLang
    ``init_new_token_ratio``); the simulator runs the decay (:mod:`pdplan.sim.ratio_admission`), the closed form the
    floor."""
    decay_steps: PosInt
    """Decode steps the share takes to decay from :attr:`init_ratio` to :attr:`ratio` (SGLang
    ``new_token_ratio_decay_steps``)."""
    retract_steps: PosInt
    """Steps' worth of tokens per running request in the share a retraction sets (SGLang ``retract_decode_steps``)."""
    source: Text


class Scheduling(FrozenModel):
    """The engine's batching policy (defaults of the version named by the profile)."""

    chunked_prefill: bool
    """Long prompts are split into chunks of the token budget (off: a prompt runs whole in one step)."""
    decode_first: bool
    """Running decodes are scheduled before new prefill tokens (they always ride in the step)."""
    mixed_batches: bool
    """Prefill chunks and decode tokens share one step (off: a step is all-prefill or all-decode)."""
    max_partial_prefills: PosInt = 1
    """Prompts that may be partly prefilled at once."""
    overlap_scheduling: bool
    """The host prepares step n+1 while step n runs (vLLM async scheduling, SGLang overlap, TRT-LLM overlap)."""
    overlap_extra_steps: NonNegative = 0.0
    """Steps a request's first token waits extra because of the overlap (TRT-LLM: "one extra decoding step")."""
    steady_arrivals: Literal["grouped", "spread"] = "grouped"
    """Closed-loop benchmarks with fixed lengths: ``grouped`` = the clients stay in the groups the start-up burst
    formed (phase-locked to steps); ``spread`` = host-side jitter desynchronises them, each request arrives alone."""
    kv_admission: Literal["reserve", "on_demand", "ratio"] = "reserve"
    """How the engine admits a request on KV, the one source of truth of the closed form's KV limits
    (:func:`pdplan.queueing.kv_admission.admission_footprint`), the benchmark loop's admitted clients
    (pdplan.benchmark.colocated_loop ``admitted``) and the simulator. ``reserve``: only with KV room for its whole
    length (ISL + OSL − 1; TensorRT-LLM ``GUARANTEED_NO_EVICT``); ``on_demand``: KV blocks are allocated as tokens
    arrive and a running request is preempted when the pool runs out (vLLM), so the pool holds the growing context;
    ``ratio``: the context is held as it grows, but a request is admitted only while the running requests' context
    plus :attr:`kv_reserve_ratio`'s share of their remaining output leaves room for it (SGLang)."""
    kv_reserve_ratio: KvReserveRatio | None = None
    """The share and clip of ``kv_admission: ratio`` (given with it, and only with it)."""
    pd_decode_reserved_tokens: Sourced | None = None
    """R where the engine's disaggregated decode server admits on its own rule: a transferred request is taken
    while the free KV, less R for every request it already holds, fits its prompt plus R (SGLang
    ``DecodePreallocQueue``, ``SGLANG_NUM_RESERVED_DECODE_TOKENS``); None = the decode server admits by
    :attr:`kv_admission` (:mod:`pdplan.benchmark.disaggregated_loop` ``batch_max``)."""
    startup_cohorts: Sourced | None = None
    """Closed-loop benchmarks: how many first cohorts' worth of start-up excess TTFT/TPOT (the C-wide burst at the
    start of the measured phase and the groups it leaves until they desynchronise) the benchmark average carries
    (:mod:`pdplan.benchmark.colocated_loop`); None = 1, the burst cohort alone."""
    source: Text

    @model_validator(mode="after")
    def _ratio_with_share(self) -> "Scheduling":
        if (self.kv_admission == "ratio") != (self.kv_reserve_ratio is not None):
            raise ValueError("kv_reserve_ratio is given with kv_admission: ratio, and only with it")
        return self


class Overheads(FrozenModel):
    """Host time kernel tables do not contain, each with its source (module docstring)."""

    step_s: Sourced
    """Per engine step (any phase): scheduling, input preparation, sampling, output processing."""
    collective_s: Sourced
    """Per all-reduce, two per layer at TP > 1 (launch and synchronisation beyond the kernel's own latency)."""
    launch_gap_s_per_layer: Sourced
    """Per layer per step: kernel launch gaps the kernel timings do not show."""
    request_s: Sourced
    """Per request, on TTFT: API server, HTTP/SSE, detokenised first chunk, dispatch."""
    tokenize_s_per_1k_tokens: Sourced
    """Per request, on TTFT: tokenisation per 1,000 prompt tokens."""
    request_s_per_layer: Sourced | None = None
    """Per request per layer, on TTFT (AIConfigurator's vLLM prefill dispatch overhead); None = 0."""
    eager_s_per_moe_layer: Sourced | None = None
    """Per MoE layer of a step that carries prefill tokens and runs outside the decode CUDA graphs: the host's kernel
    launch time, a floor under that step (:mod:`pdplan.benchmark.colocated_loop`, "Eager steps"); None = 0."""
    step_s_per_seq: Sourced | None = None
    """Per decode step per running sequence: host work that grows with the batch (input preparation, sampling,
    output processing of each sequence; docs/engines.md §1.6 "large batches (cost ∝ #seqs)", Vidur's per-batch CPU
    terms); None = 0."""

    def seq_overhead_s(self) -> float:
        """Host time one decode step adds per running sequence (``step_s_per_seq``; 0 when unset)."""
        return self.step_s_per_seq.value if self.step_s_per_seq is not None else 0.0

    def step_overhead_s(self, num_layers: int, tp: float) -> float:
        """Host time one engine step adds to its kernels: step + layers·launch gap + 2·layers·collective at TP > 1."""
        collectives = 2.0 * num_layers if tp > 1 else 0.0
        return (
            self.step_s.value + num_layers * self.launch_gap_s_per_layer.value + collectives * self.collective_s.value
        )

    def eager_step_floor_s(self, num_moe_layers: int) -> float:
        """H: host launch time of one step with prefill tokens over ``num_moe_layers`` MoE layers (0 without it)."""
        per_layer = self.eager_s_per_moe_layer.value if self.eager_s_per_moe_layer is not None else 0.0
        return num_moe_layers * per_layer

    def request_overhead_s(self, num_layers: int, prompt_tokens: float) -> float:
        """Time a request's TTFT carries beyond the engine's steps: server, per-layer dispatch, tokenisation."""
        per_layer = self.request_s_per_layer.value if self.request_s_per_layer is not None else 0.0
        return (
            self.request_s.value + num_layers * per_layer + prompt_tokens / 1000.0 * self.tokenize_s_per_1k_tokens.value
        )


class BenchmarkDefaults(FrozenModel):
    """The closed-loop benchmark tool and its defaults: requests = ``requests`` + ``requests_per_concurrency``·C,
    warm-up = ``warmup`` + ``warmup_per_concurrency``·C (warm-up requests are not measured)."""

    tool: Text
    requests: NonNegInt = 0
    requests_per_concurrency: NonNegInt = 0
    warmup: NonNegInt = 0
    warmup_per_concurrency: NonNegInt = 0
    source: Text

    def counts(self, concurrency: int) -> tuple[int, int]:
        """(measured requests, warm-up requests) at concurrency C; at least C measured."""
        measured = self.requests + self.requests_per_concurrency * concurrency
        return max(measured, concurrency), self.warmup + self.warmup_per_concurrency * concurrency


class EngineProfile(FrozenModel):
    """One serving engine at one version (fields in the module docstring)."""

    schema_version: Literal[1] = 1
    name: Text
    engine: Text
    """The engine it describes: vllm | sglang | trtllm | none (kernels only), or a user's own word."""
    version: Text
    description: str = ""
    limits: Limits
    kv_memory: KvMemory
    scheduling: Scheduling
    overheads: Overheads
    benchmark: BenchmarkDefaults
    moe: MoeRuntime | None = None
    """Which MoE kernel runs at EP > 1 and whether two-batch overlap is on (:class:`MoeRuntime`; None: fused, off)."""
    fitted: bool = False
    """True when overhead constants were fitted to measurements (their sources say on which)."""
    sources: dict[str, str] = Field(default_factory=dict)
    """Extra notes (fit residuals, the data a fit used), printed with the profile."""
    kv_connector: KvConnector | None = None
    """The KV connector disaggregated serving uses: its backend, descriptor split and KV block size
    (:mod:`pdplan.specs.kv_backend`); None: the engine names none."""
