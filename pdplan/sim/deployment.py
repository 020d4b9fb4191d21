"""The simulator's view of a scenario: the SAME deployment the closed form evaluates, per request.

:func:`sim_deployment` turns a prepared serving model (:func:`pdplan.serving.build_model`) and
sampled request lengths into a :mod:`pdplan.sim` deployment, so that ``pdplan simulate`` compares
the queueing approximations and nothing else:

* **Prefill** (disaggregated): per-request service = batch-1 roofline *stage* time at the sampled
  prompt length plus the granularity's prefill extra (:func:`pdplan.serving.roles.prefill_perf`,
  :func:`pdplan.transfer.kv.kv_transfer`), FCFS per instance, the scenario's routing policy. With
  ``prefill_max_batch_tokens`` the pool batches instead (:class:`pdplan.sim.PrefillPool`
  ``batch_time_s``/``max_batch_tokens``), each batch priced by the closed form's own
  :class:`~pdplan.serving.roles.PrefillBatchTime` (roofline, granularity extra once per batch).
  With PP > 1 the pass latency exceeds the stage time; the (batch-1) difference is added after
  prefill (to the KV transfer time, and to TTFT under convention B), as the closed form adds it
  to every request.
* **KV transfer**: the exposed time per request from :func:`pdplan.transfer.kv.kv_transfer` (same
  :func:`~pdplan.serving.disaggregated.transfer_config`). When the closed form models the link
  queue, both ends are FIFO resources: the serving prefill instance's NICs and the chosen decode
  instance's NICs, each held ``latency + bytes/BW_side`` per request (the fan-in service time of
  :func:`pdplan.transfer.fan_in.fan_in_link_queue`, whose closed form queues at the busier side only).
* **Decode**: the linearised step ``t0 + t1·B + t2·K`` the closed form uses (``step="linear"``), or
  the full roofline step (``step="roofline"``, which also tests the linearisation); seats =
  ``max_num_seqs``, KV capacity from memory; the simulator reserves ``l + n`` tokens at admission.
  The decode instance is picked by the scenario's routing policy (random, round-robin in
  prefill-completion order, least-work and least-loaded = fewest outstanding requests, power-of-two = the fewer of
  two drawn).
* **Colocated**: z instances with random routing (the closed form's even split into z M/G/1
  queues); prefill-first serves the batch-1 roofline prefill latency per prompt; chunked serves
  up to ``chunk_tokens − B`` prefill tokens per iteration on top of the decode step, priced by the
  simulator's own roofline tables (:class:`SimChunkPrice`), not by the closed form's per-token
  secant and per-prompt attention, so that neither can inherit the other's mistake (the two used to
  share one fit to the workload's own lengths, which made chunked prefill free for a fixed length
  in both and so passed the comparison). An iteration that runs B decoding sequences beside its pieces
  (pieces of several prompts when one ends inside it) runs B + Σc tokens through its GEMMs, which read the weights
  once: the pieces cost ``G(B + Σc) − G(B)`` for their GEMM side (issue #23: the prompt tokens at the step's own
  width; below the GEMM ridge they ride on the weight read, above it each costs its FLOPs) — G(n) the roofline
  batch-1 prefill pass of n tokens less its attention kernels, read off an integer table of n; the decode step
  already pays what G(B) holds (a prefill-only iteration, B = 0: ``G(Σc) − G(1)``, the decode step of none paying
  the weight read) — split over the pieces by tokens, plus per piece one causal-attention
  kernel of the same FLOPs as its c queries over ``before + c`` keys: the roofline attention
  A(s_eq) of ``s_eq = √(c(2·before + c))`` tokens (causal FLOPs ∝ (before + c)² − before² = s_eq²).
  The closed form prices the same physics its own way, at the mean field's step width
  (:mod:`pdplan.queueing.chunk_width`: a geometric table, the width of a step that carries prompt tokens).
  *Per rank*: with attention DP an iteration's pieces run on ONE attention-DP rank (:func:`rank_split_s`): its
  dense layers, all-to-all share and causal attention are those of the pass in which every rank carries the
  pieces' tokens (the step waits for the busiest rank), its routed experts (spread over EP GPUs) see those tokens
  only, not dp times them. So a 253-token append on a 33K history on DeepSeek-V3's B200 TP1 DP8 EP8 decode instance
  costs 0.075 s (it cost 0.161 s priced at TP1 alone: all 256 experts on one GPU; issue #24). Pieces of several
  prompts in one iteration are all priced on that one rank (an engine whose ranks schedule their own prompts would
  run them side by side); B is that rank's decoding batch (each rank is a simulated instance).
  Its KV follows the engine (:mod:`pdplan.sim.colocated_instance`): a chunked instance of an engine whose profile
  does not say ``kv_admission: reserve`` holds the growing context and preempts with recompute, vLLM's way
  (``on_demand``) or SGLang's (``ratio``: admission against the running requests' ratio-weighted remaining output,
  retraction of the least-decoded request; :func:`ratio_admission`, the profile's ``kv_reserve_ratio``);
  TensorRT-LLM, and every prefill-first instance, reserve ``l + n`` at admission.
* **TTFT convention**: A (decode streams token 1: n = output steps, the first emits token 1) or B
  (prefill streams token 1: n = output − 1); colocated: the iteration finishing the prompt. With an engine whose
  overlap scheduler costs token 1 k extra steps (``scheduling.overlap_extra_steps``) the instance that samples it
  (the decode instance under A, the colocated one) sends it k of its own simulated iterations later
  (:mod:`pdplan.sim.overlap_lag`); under B the prefill instance sends it at once, as the closed form prices it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from pdplan.errors import NoFeasiblePlanError, SpecError, UnknownNameError
from pdplan.perf.roofline import PhaseTime, phase_time
from pdplan.serving.colocated import ColocatedModel
from pdplan.serving.disaggregated import DisaggregatedModel, transfer_config
from pdplan.serving.request_overhead import request_delay_s
from pdplan.serving.role_hardware import RoleHardware, instance_budget
from pdplan.serving.roles import DecodePerf, decode_step_fn, prefill_perf
from pdplan.sim import Colocated, DecodePool, Disaggregated, KvTransfer, PrefillPool, Requests
from pdplan.sim.overlap_lag import overlap_iterations
from pdplan.sim.pd_decode_rule import PdDecodeAdmission
from pdplan.sim.ratio_admission import RatioAdmission
from pdplan.sim.spec import DecodeRecompute, StepTimeFn, largest_need_tokens
from pdplan.specs.engine import Scheduling
from pdplan.specs.hardware import LinkSpec
from pdplan.transfer.fan_in import side_busy_s
from pdplan.transfer.kv import kv_transfer
from pdplan.transfer.kv_inputs import kv_shape_from_model
from pdplan.types import Binding, FloatArray
from pdplan.types import Int64Array as IntArray

if TYPE_CHECKING:
    from pdplan.io.catalog import Catalog

StepModel = Literal["linear", "roofline"]
STEP_MODELS: tuple[str, ...] = ("linear", "roofline")


@dataclass(frozen=True, slots=True)
class SimSetup:
    """A simulator deployment plus per-request TTFT additions the simulator cannot express."""

    deployment: Disaggregated | Colocated
    requests: Requests
    ttft_extra_s: FloatArray
    t0_s: float
    prefill_extra_s: FloatArray | None = None
    """Disaggregated: the granularity's prefill work per request added to the roofline stage time (the one-prompt
    service less that stage time; :mod:`pdplan.sim.reuse` adds it to a cached prefill's price)."""


def _step_fn(hw: RoleHardware, decode: DecodePerf, step: StepModel) -> StepTimeFn:
    """The step each iteration prices: ``linear``, the closed form's law (its line, or for a step concave in B the
    minimum of its lines, evaluated at each iteration's own B and K: the closed form's mean field takes one line per
    rate, :mod:`pdplan.serving.decode_lines`, the simulator none); ``roofline``, the roofline step itself."""
    if step == "linear":
        return decode.law_step_s if decode.lines else decode.step

    def roofline(batch: FloatArray, context: FloatArray) -> FloatArray:
        return decode_step_fn(hw, batch, context)

    return roofline


def _check_fits(
    req: Requests,
    steps: IntArray,
    kv_cap: float,
    label: str,
    state: float,
    window: float | None = None,
    reserved: float = 0.0,
) -> None:
    """Every sampled request fits an empty instance: its final footprint, and with a decode server's R
    (:func:`pd_admission`) its prompt + R."""
    need = largest_need_tokens(req, steps, state, window, reserved)  # window: ModelSpec.kv_window_tokens
    if need > kv_cap:
        raise NoFeasiblePlanError(
            f"a sampled request needs {int(need)} KV tokens, more than the {label} "
            f"instance's {kv_cap:.0f}; the simulator cannot admit it",
            binding_constraint=Binding.DECODE_KV,
        )


def _disaggregated(model: DisaggregatedModel, req: Requests, step: StepModel) -> SimSetup:
    res = model.res
    hw = res.hardware
    sc, routing = res.scenario, hw.deployment.routing
    # the decode pool by the same router: least-loaded is the decode pool's fewest-outstanding rule (least-work there)
    decode_routing = "least-work" if routing == "least-loaded" else routing
    lens = req.input_tokens.astype(np.float64)
    base = prefill_perf(hw.prefill, lens)
    cfg = transfer_config(res)
    kv = kv_shape_from_model(res.model, hw.prefill.precision.kv_bytes)
    xfer = kv_transfer(lens, kv, hw.link, cfg, prefill_time_s=base.latency_s)
    pipe = base.latency_s - base.service_s  # PP > 1: pass latency beyond the stage time
    busy = pbusy = None
    if model.link_queued:
        nics_p, nics_d = cfg.side_nics
        busy, pbusy = side_busy_s(xfer, hw.link, nics_d), side_busy_s(xfer, hw.link, nics_p)
    dec = model.decode
    steps = req.output_tokens - (0 if sc.ttft_convention == "A" else 1)
    admission = pd_admission(res.engine.scheduling)
    if admission is not None:  # SGLang's retraction copies KV to host and back (pdplan.sim.pd_decode_rule)
        host = host_link(res.catalog, hw.decode)
        admission = dataclasses.replace(admission, host_copy_s_per_token=host_copy_s_per_token(hw.decode, host))
    reserved = 0.0 if admission is None else float(admission.reserved_tokens)
    _check_fits(req, steps, dec.kv_capacity_tokens, "decode", dec.state_tokens_per_seq, dec.window_tokens, reserved)
    dep = Disaggregated(
        prefill=_prefill_pool(model, base.service_s + xfer.prefill_extra_s),
        decode=DecodePool(
            model.y,
            _step_fn(hw.decode, dec, step),
            max_batch=res.max_num_seqs,
            kv_capacity_tokens=dec.kv_capacity_tokens,
            routing=decode_routing,
            state_tokens_per_seq=dec.state_tokens_per_seq,
            window_tokens=dec.window_tokens,
            overlap_steps=_overlap(hw.decode),  # the decode instance samples token 1 (convention A)
            pd_admission=admission,
            recompute=decode_recompute(model, float((req.input_tokens + steps).max())),
        ),
        transfer=KvTransfer(
            time_s=pipe + np.asarray(xfer.exposed_s),
            link_busy_s=busy,
            prefill_link_busy_s=pbusy,
            stream_lead_s=xfer.overlap_s - pipe,
            stream_s=xfer.time_s,
        ),
        convention=sc.ttft_convention,
    )
    extra = pipe if sc.ttft_convention == "B" else np.zeros_like(pipe)
    extra = extra + request_delay_s(hw.prefill, res.lengths.mean_input())  # engine host time, as the closed form
    return SimSetup(
        dep, req, np.asarray(extra, dtype=np.float64), dec.step.t0_s, _per_request(xfer.prefill_extra_s, req.count)
    )


def _per_request(values: FloatArray, n: int) -> FloatArray:
    """A per-request array of ``values`` (a scalar broadcast)."""
    return np.array(np.broadcast_to(np.asarray(values, dtype=np.float64), (n,)))


def _prefill_pool(model: DisaggregatedModel, service_s: FloatArray) -> PrefillPool:
    """Batch-1 FCFS pool with per-request ``service_s``, or the batched pool of the scenario. Its servers are the
    closed form's: every attention-DP rank of every prefill instance takes its own prompts (x·dp; until 2026-12-07
    the simulator took x, so a DP32 prefill instance served one prompt at a time: DeepSeek-V3 wide-EP's simulated
    TTFT was 69 s at 20 req/s against the closed form's 0.37 s)."""
    routing = model.res.hardware.deployment.routing
    batched = model.pool.batched
    servers = model.pool.instances
    if batched is None:
        return PrefillPool(servers, routing, service_s=service_s)
    price = batched.batch_time

    def batch_time_s(tokens: float, sum_sq_tokens: float) -> float:
        return float(price(np.array([tokens]), np.array([sum_sq_tokens]))[0])

    return PrefillPool(servers, routing, batch_time_s=batch_time_s, max_batch_tokens=int(batched.budget_tokens))


@dataclass(frozen=True, slots=True)
class SimChunkPrice:
    """The simulator's price of one iteration's prefill pieces (module docstring): G(n) on every
    token count 1..C and A(s) on every s up to the longest prompt (A(0) = 0), read by linear
    interpolation between whole token counts (exact at them: the roofline's tile steps stay where
    they are; beyond C the GEMM side grows at the last slope)."""

    gemm_tokens: FloatArray
    gemm_s: FloatArray
    attention_tokens: FloatArray
    attention_s: FloatArray

    def __call__(self, tokens: FloatArray, before: FloatArray, decode_tokens: float = 0.0) -> FloatArray:
        """Seconds per piece for pieces of ``tokens`` after ``before`` prefilled tokens (one iteration that also runs
        ``decode_tokens`` = B decoding sequences: the GEMM side ``G(B + Σc) − G(B)``; B = 0, a prefill-only
        iteration whose decode step of none still pays G(1): ``G(Σc) − G(1)``)."""
        tok = np.asarray(tokens, dtype=np.float64)
        total = float(tok.sum())
        if total <= 0.0:
            return np.zeros_like(tok)
        riding = float(decode_tokens)
        gemm = max(self._gemm_at(riding + total) - self._gemm_at(max(riding, 1.0)), 0.0)
        s_eq = np.sqrt(tok * (2.0 * np.asarray(before, dtype=np.float64) + tok))
        attn = np.interp(s_eq, self.attention_tokens, self.attention_s)
        return np.asarray(gemm * tok / total + attn, dtype=np.float64)

    def _gemm_at(self, n: float) -> float:
        """``G(n)``: read off the integer table, beyond it at its last slope."""
        top, slope = float(self.gemm_tokens[-1]), float(self.gemm_s[-1] - self.gemm_s[-2])
        return float(np.interp(n, self.gemm_tokens, self.gemm_s)) + max(n - top, 0.0) * slope


def _pass(hw: RoleHardware, batch: float, tokens: FloatArray) -> PhaseTime:
    """The roofline prefill pass of ``batch`` prompts × ``tokens`` on one instance of ``hw``: its TP, PP, attention-DP
    ranks (the batch spread over them), EP, ZeRO gather, prefill routing law and MoE kernel options."""
    return phase_time(
        hw.model, hw.gpu, hw.table, phase="prefill", batch=batch, tokens=tokens, tp=hw.tp, pp=hw.pp,
        precision=hw.precision, detail=False, dp=hw.dp, ep=hw.ep, expert_gather=hw.expert_gather,
        routing=hw.prefill_routing, **hw.moe_options,  # type: ignore[arg-type]
    )  # fmt: skip


def rank_split_s(hw: RoleHardware, tokens: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(G, A) of ``tokens`` prompt tokens run on ONE attention-DP rank of ``hw`` (module docstring, *per rank*).

    G: the pass less its causal-attention kernels; A: those kernels. A rank's attention, dense GEMMs and all-to-all
    share are those of the pass in which every rank carries ``tokens`` (``batch = dp``: the step waits for the busiest
    rank); the routed experts see only those ``tokens`` (the experts' op of the pass in which the instance carries
    ``tokens`` in all, ``batch = 1``), not ``dp`` times them. With ``dp = 1`` both passes are the batch-1 pass."""
    tok = np.asarray(tokens, dtype=np.float64)
    rank = _pass(hw, float(hw.dp), tok)
    attn = rank.kind_s("attn_prefill", tok.shape)
    gemm = np.broadcast_to(rank.time_s, tok.shape) - attn
    if hw.dp > 1 and hw.model.moe is not None:
        gemm = gemm - rank.kind_s("moe", tok.shape) + _pass(hw, 1.0, tok).kind_s("moe", tok.shape)
    return np.asarray(gemm, np.float64), attn


def sim_chunk_price(hw: RoleHardware, budget_tokens: int, max_context: float) -> SimChunkPrice:
    """Tabulate the roofline for :class:`SimChunkPrice` (one rank's pieces: :func:`rank_split_s`)."""
    gemm_tokens = np.arange(1.0, max(int(budget_tokens), 2) + 1.0)
    gemm_s, _ = rank_split_s(hw, gemm_tokens)
    grid = np.arange(1.0, math.ceil(max(float(max_context), 2.0)) + 2.0)
    attn = _pass(hw, float(hw.dp), grid).kind_s("attn_prefill", grid.shape)  # A of rank_split_s
    return SimChunkPrice(gemm_tokens, gemm_s, np.concatenate(([0.0], grid)), np.concatenate(([0.0], attn)))


def _colocated(model: ColocatedModel, req: Requests, step: StepModel) -> SimSetup:
    res = model.res
    hw = res.hardware.colocated
    dec = model.decode
    steps = req.output_tokens - 1
    _check_fits(req, steps, dec.kv_capacity_tokens, "colocated", dec.state_tokens_per_seq, dec.window_tokens)
    chunk_time = sim_chunk_price(hw, res.chunk_tokens, float(req.input_tokens.max()))
    service = None
    if model.scheduler == "prefill-first":
        service = prefill_perf(hw, req.input_tokens.astype(np.float64)).latency_s
    dep = Colocated(
        instances=model.z,
        step_time_s=_step_fn(hw, dec, step),
        scheduler="chunked" if model.scheduler == "chunked" else "prefill-first",
        routing="random",
        max_batch=res.max_num_seqs,
        kv_capacity_tokens=dec.kv_capacity_tokens,
        state_tokens_per_seq=dec.state_tokens_per_seq,
        window_tokens=dec.window_tokens,
        prefill_service_s=service,
        token_budget=res.chunk_tokens,
        chunk_time_s=chunk_time,
        reserve_kv=model.scheduler != "chunked" or res.engine.scheduling.kv_admission == "reserve",
        ratio_admission=ratio_admission(res.engine.scheduling) if model.scheduler == "chunked" else None,
        recompute_hits=res.engine.scheduling.kv_admission == "on_demand",  # vLLM V1: prefix caching on by default
        overlap_steps=_overlap(hw),
    )
    delay = request_delay_s(hw, res.lengths.mean_input())  # engine host time, as the closed form
    return SimSetup(dep, req, np.full(req.count, delay), dec.step.t0_s)


def _overlap(hw: RoleHardware) -> int:
    """The iterations token 1 waits behind the one that sampled it on this instance type: its engine's overlap
    scheduler (``scheduling.overlap_extra_steps``; 0 without an engine), counted by the simulator itself
    (:mod:`pdplan.sim.overlap_lag`), not priced as the closed form's steps."""
    return 0 if hw.engine is None else overlap_iterations(hw.engine.scheduling.overlap_extra_steps)


def ratio_admission(scheduling: Scheduling) -> RatioAdmission | None:
    """SGLang's admission parameters from the profile's ``kv_reserve_ratio`` (floor, start, decay, clip, retraction
    look-ahead: :mod:`pdplan.sim.ratio_admission`); None for an engine that does not admit by ratio."""
    ratio = scheduling.kv_reserve_ratio
    if scheduling.kv_admission != "ratio" or ratio is None:
        return None
    return RatioAdmission(
        init_ratio=ratio.init_ratio,
        min_ratio=ratio.ratio,
        decay_steps=ratio.decay_steps,
        clip_tokens=ratio.clip_tokens,
        retract_steps=ratio.retract_steps,
    )


def pd_admission(scheduling: Scheduling) -> PdDecodeAdmission | None:
    """SGLang's PD decode rule from the profile's ``pd_decode_reserved_tokens`` R and ``kv_reserve_ratio``'s clip
    (the same ``SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION``: :mod:`pdplan.sim.pd_decode_rule`); None for an engine whose
    profile has no R (its decode instances reserve, :mod:`pdplan.sim.decode`)."""
    reserved = scheduling.pd_decode_reserved_tokens
    if reserved is None:
        return None
    ratio = scheduling.kv_reserve_ratio
    if ratio is None:
        raise SpecError(
            "the profile's pd_decode_reserved_tokens needs kv_reserve_ratio.clip_tokens (CLIP_MAX_NEW_TOKEN) for the "
            "simulator's decode admission"
        )
    value = float(reserved.value)
    if value != int(value):
        raise SpecError(f"pd_decode_reserved_tokens must be a whole number of tokens, got {value}")
    return PdDecodeAdmission(reserved_tokens=int(value), clip_tokens=ratio.clip_tokens)


def host_link(catalog: Catalog, hw: RoleHardware) -> LinkSpec:
    """The link between a decode GPU and host memory: the catalogue's ``pcie<gen>`` entry of the GPU's ``pcie_gen``
    (``hardware_db/links/pcie5.yaml`` for an H100); a clear error where the catalogue has none."""
    name = f"pcie{hw.gpu.pcie_gen}"
    try:
        return catalog.link(name)
    except UnknownNameError as exc:
        raise SpecError(
            f"the simulator prices SGLang's retraction offload over the decode GPU's host link, and GPU "
            f"{hw.gpu.name} has pcie_gen {hw.gpu.pcie_gen} but the catalogue has no link {name!r}: add "
            f"links/{name}.yaml (line rate, efficiency, with sources) to a --hardware-db folder"
        ) from exc


def host_copy_s_per_token(hw: RoleHardware, link: LinkSpec) -> float:
    """Seconds one context token's KV takes to copy between a decode instance's HBM and host memory, one way
    (:attr:`pdplan.sim.pd_decode_rule.PdDecodeAdmission.host_copy_s_per_token`): each of the instance's t·p GPUs
    copies its share of the token's KV, ``kv_bytes_per_token · r / (t·p)`` (r the KV replication over the t ranks,
    :func:`pdplan.perf.memory.kv_replication`; the instance memory's ``kv_bytes_per_token_instance``, the bytes its KV
    capacity divides by, :func:`pdplan.serving.role_hardware.instance_budget`), over its own host link at
    the link's achievable rate (line rate × efficiency), all at once: ``share / rate``. An H100 TP4 instance of
    Llama-3.1-70B (bf16 KV: 327,680 bytes a token, r = 1, 81,920 a GPU) over PCIe Gen5 (63 GB/s × 0.89 =
    56.07 GB/s): 1.46 µs a token, so retracting a 4,000-token request stalls the instance 5.8 ms. Left out: the
    per-message latency, a node's GPUs sharing the host's PCIe root, the fixed per-sequence state."""
    per_token = float(np.ravel(instance_budget(hw, "decode").kv_bytes_per_token_instance)[0])
    return per_token / (hw.tp * hw.pp) / link.achievable_bytes_per_s


def decode_recompute(model: DisaggregatedModel, max_context: float) -> DecodeRecompute | None:
    """vLLM's decode instances (the profile's ``kv_admission: on_demand`` without ``pd_decode_reserved_tokens``)
    grow on demand and preempt with recompute (:mod:`pdplan.sim.preempt_decode`), the recompute priced by the
    simulator's own chunk tables of the decode hardware (one rank's pieces, :class:`SimChunkPrice`) up to
    ``max_context`` tokens, in the engine's token budget, with vLLM V1's prefix caching; None for the other engines."""
    res = model.res
    scheduling = res.engine.scheduling
    if scheduling.kv_admission != "on_demand" or scheduling.pd_decode_reserved_tokens is not None:
        return None
    price = sim_chunk_price(res.hardware.decode, res.chunk_tokens, max_context)
    return DecodeRecompute(price, int(res.chunk_tokens))


def sim_deployment(
    model: DisaggregatedModel | ColocatedModel,
    input_tokens: IntArray,
    output_tokens: IntArray,
    step: StepModel = "linear",
) -> SimSetup:
    """The simulator deployment of ``model`` for sampled request lengths (module docstring)."""
    req = Requests.of(input_tokens, np.maximum(output_tokens, 1))
    if isinstance(model, DisaggregatedModel):
        return _disaggregated(model, req, step)
    return _colocated(model, req, step)
