"""What a closed-loop benchmark at concurrency C reports for a disaggregated (xPyD) deployment.

The benchmark (docs/engines.md §3): C clients start together and each sends its next request when its last one ends;
TTFT and TPOT = (E2E − TTFT)/(OSL − 1) are averaged over N measured requests after W warm-up ones. Lengths are the
workload's means (the benchmarks compared are fixed ISL/OSL). A request's path is a closed network of:

* **Prefill pool**: ``m = x·dp_p`` servers (every attention-DP rank of every prefill instance takes its own prompt),
  one prompt each, FCFS, service ``S_p`` (the batch-1 roofline stage time plus the transfer granularity's prefill
  work: :class:`pdplan.serving.prefill_pool.PrefillPool`; the AIConfigurator-generated recipes run prefill workers at
  ``max_batch_size 1``, docs/engines.md §2.5). Its wait is the finite-source queue (machine-repairman, M/M/m//C:
  Kleinrock,
  *Queueing Systems* vol. 1 §3.10): C clients, each away from the pool for ``Z`` (transfer, decode, overheads), so
  with C ≤ m nobody ever waits and at saturation the extra clients queue there.
* **KV transfer and first token** (convention A, as the open model): the exposed transfer ``T_kv``, the wait for the
  decode step in flight ``(1 − e^{−B'})·τ_d/2`` (B' the other clients' sequences in decode) and the first step
  ``τ_d``; the engine's per-request time (API server, tokeniser:
  :func:`pdplan.serving.request_overhead.request_delay_s`) and its overlap scheduler's extra steps
  (``overlap_extra_steps·τ_d``) are added to TTFT.
  Convention B (DistServe: the prefill instance streams token 1) moves all of that but the per-request time and the
  prompt's own wait and prefill onto token 2, i.e. onto the TPOT, as the open model does.
* **Decode pool**: y instances, each batching all its attention-DP ranks' sequences, step
  ``τ_d(B) = t0 + t1·B + t2·B·κ`` (the decode step model, κ = ISL + OSL/2) at the instance batch B given by Little's
  law (a sequence holds its seat for OSL steps), a decoding sequence seeing the step at its own seat plus the
  others' (:func:`decode_batch`). B cannot exceed the instance's seats or ``⌊KV/k⌋``, k the KV tokens the decode
  server's admission counts per sequence (:func:`kv_tokens_per_seq`: ISL + OSL where it reserves, the mean held
  context where it allocates on demand, SGLang's PD decode its context plus ``num_reserved_decode_tokens``): there the
  decode pool saturates at ``X_d = y·B_max/(OSL·τ_d(B_max))`` and the clients it cannot admit wait before their first
  token.

Steady state: X solves ``X = X_mr(Z(X))`` (the machine-repairman throughput at the away time that X implies;
``X_mr`` falls as Z grows and Z grows with X, so the root is unique: bisection), capped at ``X_d``. By Little's law
the mean response is ``C/X`` and ``TTFT = C/X − (OSL − 1)·τ_d`` (every wait the model does not place elsewhere lands
before the first token), TPOT = τ_d at the batch a decoding sequence sees. Start-up burst: every tool runs its warm-up
requests to completion before the measured phase (docs/engines.md §3), and the measured phase starts its C clients
together, so its first C_adm requests reach the pool at once whatever the warm-up: prompt i ends its prefill at
``⌈(i + 1)/m⌉·S_p``. The average takes that staircase with weight ``w = min(1, k·C_adm/N)``, k the decode engine
profile's ``startup_cohorts`` (1 without one), and the steady state with ``1 − w`` (the TPOT stays the steady one),
as :mod:`pdplan.benchmark.colocated_loop` weighs its burst. (Before, the burst counted only for the clients beyond the
warm-up count, so AIConfigurator's recipe with 2·C warm-up requests gave it no weight at all.)

Invariants by construction: TTFT ≥ the prompt's own prefill (``S_p`` plus non-negative waits) and a decode step is
``τ_d``, which the step model keeps above its HBM read floor (:func:`pdplan.serving.roles.decode_perf`). Not
modelled: batched prefill servers (a prefill worker that batches queued prompts would cut the wait at high C), KV-link
contention between transfers, preemption (an on-demand pool at its KV bound preempts and recomputes; SGLang's PD decode
retracts), and the drain at the end of the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from pdplan.benchmark.colocated_loop import benchmark_counts
from pdplan.benchmark.records import BenchmarkLoop
from pdplan.numerics.gamma import gammaln
from pdplan.queueing import LinearStepTime
from pdplan.queueing.decode import windowed_mean_context
from pdplan.queueing.kv_admission import ratio_reserve_mean_tokens
from pdplan.serving.checks.physics import Breach, PhysicsInvariantError
from pdplan.serving.disaggregated import DisaggregatedModel
from pdplan.serving.request_overhead import request_delay_s
from pdplan.serving.roles import step_bytes
from pdplan.serving.ttft import step_boundary_s
from pdplan.specs.engine import EngineProfile


@dataclass(frozen=True, slots=True)
class DisaggLoopInputs:
    """Everything the disaggregated benchmark model needs (SI units; lengths are the workload means)."""

    prefill_service_s: float
    """S_p: one prompt on one prefill server (an attention-DP rank), as the FCFS queue sees it."""
    prefill_latency_s: float
    """The prompt's own prefill pass latency (≥ S_p with PP > 1), the TTFT offset."""
    servers: int
    transfer_s: float
    """Exposed KV transfer per request (after the prefill)."""
    request_delay_s: float
    overlap_steps: float
    step: LinearStepTime
    """One decode instance's step model τ_d(B) (B the instance's batch over its DP ranks)."""
    input_tokens: float
    output_tokens: float
    decode_instances: int
    seats_per_instance: float
    kv_tokens_per_instance: float
    prefill_streams_token_1: bool = False
    """TTFT convention B (DistServe): the prefill instance streams token 1, and token 2 waits for the KV."""
    state_tokens_per_seq: float = 0.0
    """s: KV token slots each sequence's fixed state takes (hybrid / sliding-window models,
    :mod:`pdplan.perf.memory`)."""
    startup_cohorts: float = 1.0
    """k: first cohorts' worth of start-up excess in the benchmark average (the decode engine profile's
    ``startup_cohorts``, as :mod:`pdplan.benchmark.colocated_loop` weighs its burst)."""
    window_tokens: float | None = None
    """w when every layer is windowed (:attr:`pdplan.specs.model.ModelSpec.kv_window_tokens`): a sequence holds and
    reads min(context, w) tokens, so κ is the windowed mean context and the footprint min(ISL + OSL, w) + s."""
    kv_admission: Literal["reserve", "on_demand", "ratio"] = "reserve"
    """The decode engine profile's ``kv_admission`` (:func:`kv_tokens_per_seq`)."""
    kv_reserve_ratio: float = 0.0
    """r of ``kv_admission: ratio`` (its floor, as :mod:`pdplan.benchmark.colocated_loop`)."""
    kv_reserve_clip_tokens: float = 0.0
    """c of ``kv_admission: ratio``."""
    pd_decode_reserved_tokens: float | None = None
    """R of a decode server that admits on its own rule (the profile's ``pd_decode_reserved_tokens``, SGLang): it
    takes precedence over :attr:`kv_admission` (:func:`kv_tokens_per_seq`)."""


def seat_steps(inp: DisaggLoopInputs) -> float:
    """Decode steps a sequence holds its seat for: OSL (convention A: the decode instance makes token 1 too) or
    OSL − 1 (convention B: the prefill instance made it)."""
    return max(inp.output_tokens - (1.0 if inp.prefill_streams_token_1 else 0.0), 1.0)


def decode_step_s(inp: DisaggLoopInputs, batch: float) -> float:
    """τ_d(B) at the mean context κ = ISL + OSL/2 (windowed: the mean of min(context, w),
    :func:`pdplan.queueing.decode.windowed_mean_context`)."""
    kappa = windowed_mean_context(inp.input_tokens, inp.output_tokens, inp.window_tokens)
    st = inp.step
    return st.t0_s + (st.t1_s_per_seq + st.t2_s_per_token * kappa) * batch


def kv_tokens_per_seq(inp: DisaggLoopInputs) -> float:
    """k: the KV tokens the decode server's admission counts per running sequence, by its rule (s the fixed state).

    The C clients cycle through the same fixed lengths, so in steady state the B sequences of an instance sit at
    decode positions spread evenly over their OSL steps (the same argument that prices the step at the mean context
    κ = ISL + OSL/2, windowed :func:`~pdplan.queueing.decode.windowed_mean_context`); what the pool must hold for B
    of them is B times the per-sequence count below, and B_max = ⌊KV/k⌋ (:func:`batch_max`):

    * ``reserve`` (TensorRT-LLM ``GUARANTEED_NO_EVICT``): the final context, min(ISL + OSL, w) + s.
    * ``on_demand`` (vLLM V1: blocks allocated as tokens arrive; its NIXL decode server allocates the prompt's blocks
      on admission and grows them): the mean held context κ + s. Preemptions at the edge are not priced.
    * ``ratio`` (SGLang's colocated ``PrefillAdder``): κ + s + r·(the mean over the decode of min(remaining output,
      c)), :func:`~pdplan.queueing.kv_admission.ratio_reserve_mean_tokens` of OSL, as the colocated loop counts it.
    * a PD decode server with ``pd_decode_reserved_tokens`` R (SGLang ``DecodePreallocQueue``, which does not run
      ``PrefillAdder``): it takes a transferred request while the free KV less R per request it holds (running,
      transferring, waiting) fits the prompt plus R, so each running sequence counts its context plus R: κ + s + R,
      whatever OSL (R = 512 by default, more than the remaining output of short answers).

    Example (ISL 1000, OSL 200, s = 0): reserve 1200, on demand 1100, SGLang PD decode 1100 + 512 = 1612; ratio with
    r = 0.098, c = 4096: 1100 + 0.098 × 100 = 1109.8."""
    kappa = windowed_mean_context(inp.input_tokens, inp.output_tokens, inp.window_tokens)
    if inp.pd_decode_reserved_tokens is not None:
        return kappa + inp.pd_decode_reserved_tokens + inp.state_tokens_per_seq
    if inp.kv_admission == "reserve":
        top = inp.input_tokens + inp.output_tokens
        return (top if inp.window_tokens is None else min(top, inp.window_tokens)) + inp.state_tokens_per_seq
    held = kappa + inp.state_tokens_per_seq
    if inp.kv_admission == "ratio":
        held += inp.kv_reserve_ratio * ratio_reserve_mean_tokens(inp.output_tokens, inp.kv_reserve_clip_tokens)
    return held


def batch_max(inp: DisaggLoopInputs) -> float:
    """B_max: the seats or ⌊KV/k⌋ of one decode instance, whichever binds (k: :func:`kv_tokens_per_seq`)."""
    return max(1.0, min(inp.seats_per_instance, math.floor(inp.kv_tokens_per_instance / kv_tokens_per_seq(inp))))


def decode_batch(inp: DisaggLoopInputs, rate_rps: float, clients: int) -> float:
    """B at throughput X (module docstring): ``B = (X/y)·OSL·τ_d(1 + B·(C − 1)/C)``, the step a decoding sequence
    sees being the one at its own seat plus the others' (the arrival theorem of closed networks: a tagged request
    sees the network with C − 1 requests; Reiser & Lavenberg 1980), so with ``k = t1 + t2·κ`` and ``rn = (X/y)·OSL``:
    ``B = rn·(t0 + k)/(1 − rn·k·(C − 1)/C)``; inf past the pool's capacity."""
    st = inp.step
    kappa = windowed_mean_context(inp.input_tokens, inp.output_tokens, inp.window_tokens)  # ISL + OSL/2 unwindowed
    k = st.t1_s_per_seq + st.t2_s_per_token * kappa
    r_n = rate_rps / inp.decode_instances * seat_steps(inp)
    denom = 1.0 - r_n * k * (clients - 1.0) / clients
    return math.inf if denom <= 0.0 else r_n * (st.t0_s + k) / denom


def decode_capacity_rps(inp: DisaggLoopInputs) -> float:
    """X_d = y·B_max/(n·τ_d(B_max)), n the steps a sequence holds its seat (:func:`seat_steps`)."""
    b = batch_max(inp)
    return inp.decode_instances * b / (seat_steps(inp) * decode_step_s(inp, b))


def finite_source(servers: int, clients: int, service_s: float, away_s: float) -> tuple[float, float]:
    """(throughput, mean wait) of the machine-repairman queue M/M/m//C: ``clients`` sources each away for
    ``away_s`` on average, ``servers`` servers of mean service ``service_s`` (Kleinrock vol. 1 §3.10).

    ``p_n ∝ C!/((C − n)!·n!)·a^n`` for n ≤ m and ``C!/((C − n)!·m!·m^{n−m})·a^n`` above (a = S/Z), in logs;
    throughput ``(C − L)/Z``, wait ``L/X − S`` (Little). With C ≤ m the wait is 0. Example: m = 1, C = 2, S = Z = 1:
    p ∝ (1, 2, 2), L = 6/5, X = 0.8, W = 1.5 − 1 = 0.5."""
    if clients <= servers:
        return clients / (service_s + away_s), 0.0
    if away_s <= 0.0:
        return servers / service_s, clients * service_s / servers - service_s
    n = np.arange(clients + 1, dtype=np.float64)
    log_a = math.log(service_s / away_s)
    log_c = gammaln(clients + 1.0) - gammaln(clients - n + 1.0)
    low = log_c - gammaln(n + 1.0) + n * log_a
    high = log_c - gammaln(servers + 1.0) - (n - servers) * math.log(servers) + n * log_a
    log_p = np.where(n <= servers, low, high)
    p = np.exp(log_p - log_p.max())
    p /= p.sum()
    busy_and_waiting = float(p @ n)
    rate = (clients - busy_and_waiting) / away_s
    return rate, max(busy_and_waiting / rate - service_s, 0.0)


def _away_s(inp: DisaggLoopInputs, rate: float, clients: int) -> tuple[float, float]:
    """(Z, τ_d): time a request spends away from the prefill pool at throughput ``rate``, and the step it decodes in
    (at its own seat plus the others', :func:`decode_batch`)."""
    b = min(decode_batch(inp, rate, clients), batch_max(inp), float(clients))
    others = b * (clients - 1.0) / clients
    tau = decode_step_s(inp, min(1.0 + others, batch_max(inp)))
    first = _first_wait_s(inp, others, tau)
    pipeline = inp.prefill_latency_s - inp.prefill_service_s
    return inp.request_delay_s + first + (inp.output_tokens - 1.0) * tau + pipeline, tau


def _first_wait_s(inp: DisaggLoopInputs, others: float, tau: float) -> float:
    """From the prefill's end to the decode instance's first step of this request: the exposed KV transfer, the step
    in flight ``(1 − e^{−B'})·τ/2``, the overlap scheduler's extra steps and (convention A) the step making token 1."""
    own = 0.0 if inp.prefill_streams_token_1 else tau
    return inp.transfer_s + step_boundary_s(1.0 - math.exp(-others), tau) + inp.overlap_steps * tau + own


def steady_state(inp: DisaggLoopInputs, concurrency: int) -> tuple[float, float, float]:
    """(X, TTFT, TPOT) in steady state at C clients (module docstring)."""
    cap = min(inp.servers / inp.prefill_service_s, decode_capacity_rps(inp) * (1.0 - 1e-9))

    def gap(x: float) -> float:
        return finite_source(inp.servers, concurrency, inp.prefill_service_s, _away_s(inp, x, concurrency)[0])[0] - x

    lo, hi = 0.0, cap
    if gap(hi) >= 0.0:
        x = hi
    else:
        for _ in range(80):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if gap(mid) > 0.0 else (lo, mid)
        x = 0.5 * (lo + hi)
    away, tau = _away_s(inp, x, concurrency)
    n = max(inp.output_tokens - 1.0, 0.0)
    if not inp.prefill_streams_token_1:
        return x, concurrency / x - n * tau, tau
    wait = finite_source(inp.servers, concurrency, inp.prefill_service_s, away)[1]
    excess = max(concurrency / x - (wait + inp.prefill_service_s + away), 0.0)  # clients the decode pool cannot admit
    ttft = inp.request_delay_s + wait + inp.prefill_latency_s + excess
    return x, ttft, (concurrency / x - ttft) / max(n, 1.0)


def disagg_benchmark_loop(
    inp: DisaggLoopInputs, concurrency: int, requests: int, warmup: int, tool: str
) -> BenchmarkLoop:
    """Benchmark-average and steady-state TTFT/TPOT of an xPyD deployment at closed-loop concurrency C."""
    x, steady_ttft, tpot = steady_state(inp, concurrency)
    b_max = batch_max(inp)
    admitted = int(min(concurrency, b_max * inp.decode_instances))
    others = min(concurrency - 1.0, b_max)  # the rest of the cohort decodes beside it
    tau = _away_s(inp, x, concurrency)[1]
    first_wait = 0.0 if inp.prefill_streams_token_1 else _first_wait_s(inp, others, tau)
    rounds = np.ceil((np.arange(admitted) + 1.0) / inp.servers)
    extra = inp.prefill_latency_s - inp.prefill_service_s
    burst = inp.request_delay_s + rounds * inp.prefill_service_s + extra + first_wait
    w = min(1.0, inp.startup_cohorts * admitted / requests)  # the measured phase's own burst, whatever the warm-up
    mean_ttft = w * float(burst.mean()) + (1.0 - w) * steady_ttft
    queue_s = max(concurrency - admitted, 0) / x
    return BenchmarkLoop(
        tool=tool,
        concurrency=concurrency,
        requests=requests,
        warmup=warmup,
        effective_concurrency=admitted,
        throughput_rps=x,
        mean_ttft_s=mean_ttft,
        mean_tpot_s=tpot,
        steady_ttft_s=steady_ttft,
        steady_tpot_s=tpot,
        burst_ttft_s=float(burst.mean()),
        server_queue_s=queue_s,
        request_overhead_s=inp.request_delay_s + inp.overlap_steps * tau,
    )


def disagg_loop_inputs(model: DisaggregatedModel) -> DisaggLoopInputs:
    """The xPyD serving model's numbers at the workload's mean lengths (bins weighted by their probability)."""
    res, pool = model.res, model.pool
    weights = pool.point_prob
    engine = res.hardware.decode.engine
    return DisaggLoopInputs(
        prefill_service_s=float(weights @ pool.point_service_s.ravel()),
        prefill_latency_s=float(weights @ pool.point_latency_s.ravel()),
        servers=pool.instances,
        transfer_s=float(weights @ model.point_exposed_s.ravel()),
        request_delay_s=request_delay_s(res.hardware.prefill, res.lengths.mean_input()),
        overlap_steps=engine.scheduling.overlap_extra_steps if engine is not None else 0.0,
        step=model.decode.line_fit,  # the one-line fit, not a concave law's line (decode_lines)
        input_tokens=res.lengths.mean_input(),
        output_tokens=res.lengths.mean_output(),
        decode_instances=model.y,
        seats_per_instance=model.decode.max_num_seqs,
        kv_tokens_per_instance=model.decode.kv_capacity_tokens,
        prefill_streams_token_1=res.scenario.ttft_convention == "B",
        state_tokens_per_seq=model.decode.state_tokens_per_seq,
        window_tokens=model.decode.window_tokens,
        startup_cohorts=engine.scheduling.startup_cohorts.value
        if engine is not None and engine.scheduling.startup_cohorts is not None
        else 1.0,
        **_admission(engine),
    )


def _admission(engine: EngineProfile | None) -> dict[str, Any]:
    """The decode engine's KV admission fields of :class:`DisaggLoopInputs` (reserve without an engine)."""
    if engine is None:
        return {}
    sched = engine.scheduling
    ratio, reserved = sched.kv_reserve_ratio, sched.pd_decode_reserved_tokens
    return {
        "kv_admission": sched.kv_admission,
        "kv_reserve_ratio": ratio.ratio if ratio is not None else 0.0,
        "kv_reserve_clip_tokens": float(ratio.clip_tokens) if ratio is not None else 0.0,
        "pd_decode_reserved_tokens": reserved.value if reserved is not None else None,
    }


def disagg_benchmark_of(
    model: DisaggregatedModel, concurrency: int, requests: int | None, warmup: int | None
) -> BenchmarkLoop:
    """The benchmark at concurrency C with N measured and W warm-up requests (defaults: the decode engine's tool's),
    checked against its physics floors (:func:`check_floors`)."""
    engine = model.res.hardware.decode.engine
    tool, n, w = benchmark_counts(engine, concurrency, requests, warmup)
    inp = disagg_loop_inputs(model)
    bench = disagg_benchmark_loop(inp, concurrency, n, w, tool)
    check_floors(model, inp, bench)
    return bench


def check_floors(model: DisaggregatedModel, inp: DisaggLoopInputs, bench: BenchmarkLoop) -> None:
    """The physics floors of a benchmark result (:mod:`pdplan.serving.checks.physics`): every TTFT ≥ the prompt's own
    prefill pass (the roofline's, each op at or below its peak), and the TPOT ≥ one decode step of a single sequence
    at the prompt's context, ``B(1, ISL)/BW`` (:func:`pdplan.serving.roles.step_bytes`: weights it touches plus its
    KV). A breach is a bug: :class:`~pdplan.serving.checks.physics.PhysicsInvariantError`."""
    hw = model.res.hardware.decode
    floor_s = float(step_bytes(hw, np.array(1.0), np.array(inp.input_tokens))) / hw.gpu.memory_bytes_per_s
    breaches = []
    if bench.mean_tpot_s < floor_s * (1.0 - 1e-9):
        breaches.append(Breach("decode step floor", bench.mean_tpot_s, floor_s, "benchmark TPOT below B(1, ISL)/BW"))
    for name, ttft in (("mean", bench.mean_ttft_s), ("steady", bench.steady_ttft_s), ("burst", bench.burst_ttft_s)):
        if ttft < inp.prefill_latency_s * (1.0 - 1e-9):
            breaches.append(Breach("TTFT floor", ttft, inp.prefill_latency_s, f"benchmark {name} TTFT below prefill"))
    if breaches:
        raise PhysicsInvariantError(bench.throughput_rps, breaches)
