"""What a closed-loop benchmark reports (``vllm bench serve --max-concurrency C``, SGLang ``bench_serving``, aiperf).

The benchmark (docs/engines.md §3): C clients start together at t = 0 and each sends its next request the moment its
last one ends, until N measured requests (after W warm-up ones) are done. TTFT is send → first token (it includes
any wait inside the server), TPOT = (E2E − TTFT)/(OSL − 1) per request, both averaged over requests. Lengths are
taken fixed at the workload's means (the benchmarks compared here use fixed ISL/OSL with ``ignore_eos``).

The engine admits ``C_eff = min(C, seats, ⌊KV tokens/(ISL + OSL − 1 + s)⌋)`` requests (s: the KV token slots of a
hybrid's fixed per-sequence state, :mod:`pdplan.perf.memory`; the footprint is the profile's ``kv_admission``,
:func:`admitted`); the other ``C − C_eff`` wait
in the server's queue, by Little's law ``(C − C_eff)/X`` each (X the throughput). Step prices: the decode step
``τ_d(B)`` at the mean context κ = ISL + OSL/2, the roofline's own step on a grid of B interpolated linearly
(:attr:`LoopInputs.decode_batches`; the loop only ever asks for a handful of batch sizes, so it need not take the
queueing model's global linear law ``t0 + t1·B + t2·B·κ``, which a MoE step, concave in B while the experts hit
saturate, bends away from: 5.9 ms at B = 32 against the roofline's 8.4 ms for gpt-oss-120b TP 4), plus the
prefill tokens T the step carries, priced at the step's own size: the GEMM side ``G(T) − G(1)`` of the kernel
roofline (a 1,024-token step is not 1/8 of an 8,192-token one: below the compute-bound knee the weights are read
anyway) and each prompt's attention ``A(ISL)`` pro rata (:func:`prefill_work_s`).

* **Mixed, decode-first** (vLLM, TensorRT-LLM in-flight batching): every step carries all running decodes and up to
  ``budget − B`` prefill tokens. The start-up burst leaves groups (the prompts whose prefill ended in the same step);
  with fixed lengths they stay phase-locked (:func:`_mixed_steady`): each cycle a group arrives at once, waits for
  the step in flight (step quantisation), is prefilled in one step beside the other decodes, and its TPOT carries
  the other groups' prefill steps. Groups that overflow the budget with the decodes riding repack FCFS
  (:func:`settled_groups`); the deterministic replay reaches that packing one group per cycle
  (:func:`_fragmenting_s`). A profile with ``steady_arrivals: spread`` (host jitter splits the burst's groups:
  measured at C = 8, ISL 1,024 on vLLM 0.12 and TensorRT-LLM) prices the same with every request its own group;
  where the steps that carry prompts are eager (below), with the groups that the arrivals landing during one such
  step form (:func:`_spread_groups`, :mod:`pdplan.benchmark.spread_arrivals`).
* **Prefill-first, no mixing** (SGLang's default): prefill batches of up to ``budget`` tokens run alone and the
  decodes wait. With fixed lengths the cohort never separates: all C_eff requests arrive together, are prefilled
  in ``P = ⌈C_eff·ISL/budget⌉`` steps (request i's prompt ends in step ⌈(i + 1)·ISL/budget⌉) and decode together
  for OSL − 1 steps at B = C_eff; request i's TPOT carries the prefill steps after its own.
* **Start-up burst**: every tool runs its warm-up requests to completion before the measured phase (vLLM
  ``--num-warmups``, SGLang ``--warmup-requests``, aiperf's warm-up phase; docs/engines.md §3), and the measured phase
  starts its C clients together, so its first cohort is a burst whatever the warm-up: the first C_eff requests of a
  mixed engine are prefilled FCFS in budget steps (each with the decodes already running), priced step by step; an
  unmixed engine's cohort is its steady state. The burst leaves phase-locked groups that real clients shed over the
  next cycles (host jitter), so the benchmark-average TTFT is ``(1 − w)·steady + w·burst`` with
  ``w = min(1, k·C_eff/N)``: the burst cohort's share of the N measured requests times ``k``, the profile's
  ``startup_cohorts`` (1 = the burst cohort alone; fitted per engine where the groups persist longer). TPOT takes
  the burst cohort alone (``k = 1``): a request's decode steps carry the same prefill work per cycle whether the
  others arrive grouped or alone, so the lingering groups move TTFT only. The drain at the end (the last C
  requests see fewer peers) is not modelled.
* **Eager steps** (``eager_step_s`` = H): an engine whose CUDA graphs cover decode-only batches (TensorRT-LLM's
  PyTorch backend) launches every step that carries prefill tokens kernel by kernel from the host. The launches are
  asynchronous, so the GPU runs each kernel as soon as it is issued: the step ends when the host has issued the last
  kernel and the GPU has run it, ``max(G, H)`` with G the step's GPU time and H the host's launch time for the step
  (the last kernel's own time beyond H is below the step models' resolution). H is per MoE layer (an MoE layer
  dispatches 8-11x a dense layer's kernels: TaxBreak, docs/engines.md §1.4) times the MoE layers one GPU runs
  (:meth:`pdplan.specs.engine.Overheads.eager_step_floor_s`); a decode-only step replays its graph and keeps its
  price. Every step with prefill tokens is floored: the burst's, the unmixed cohort's and the mixed steady state's.
* **Engine terms outside the steps**: the per-request overhead (API server, tokeniser) is added to every TTFT, and
  the overlap scheduler's extra step(s) ``overlap_extra_steps·τ_d`` to the burst's and the unmixed cohort's (a mixed
  engine's steady state prices them as the steps in flight: :func:`_mixed_steady`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.benchmark.records import BenchmarkLoop
from pdplan.benchmark.spread_arrivals import even_groups, merged_group_size
from pdplan.errors import SpecError
from pdplan.queueing import LinearStepTime
from pdplan.queueing.decode import windowed_mean_context
from pdplan.queueing.kv_admission import ratio_reserve_mean_tokens
from pdplan.specs.engine import EngineProfile


@dataclass(frozen=True, slots=True)
class LoopInputs:
    """Everything the benchmark model needs (SI units; lengths are the workload means)."""

    step: LinearStepTime
    prompt_s: float
    """c_p: prefill work of one prompt added to the steps that carry it (s)."""
    input_tokens: float
    output_tokens: float
    budget_tokens: int
    seats: int
    kv_tokens: float
    mixed: bool
    request_delay_s: float
    overlap_steps: float
    spread: bool = False
    """Steady state with every request arriving alone (the profile's ``steady_arrivals: spread``)."""
    state_tokens_per_seq: float = 0.0
    """s: KV token slots each sequence's fixed state takes (hybrid / sliding-window models,
    :mod:`pdplan.perf.memory`)."""
    gemm_tokens: np.ndarray | None = None
    """Prefill tokens in one step (grid, increasing) for :attr:`gemm_s`; None = price tokens at the secant."""
    gemm_s: np.ndarray | None = None
    """G(T) − G(1): the GEMM side of T prefill tokens in one pass above the decode step's own (roofline)."""
    attention_s: float = 0.0
    """A(ISL): one prompt's causal attention (the part of ``prompt_s`` that is not GEMM)."""
    startup_cohorts: float = 1.0
    """k: first cohorts' worth of start-up excess in the benchmark average (module docstring)."""
    eager_step_s: float = 0.0
    """H: host launch time of a step that carries prefill tokens outside the decode CUDA graphs; such a step takes
    ``max(G, H)`` (module docstring, "Eager steps"). 0 = no floor."""
    kv_on_demand: bool = False
    """The engine allocates KV as tokens arrive and preempts when the pool runs out (vLLM V1, the profile's
    ``kv_admission: on_demand``): requests spread over their decode stages hold ISL + (OSL − 1)/2 tokens on average,
    so the pool serves KV/(ISL + (OSL − 1)/2 + s) of them, where a reserving engine (TensorRT-LLM's
    GUARANTEED_NO_EVICT) admits KV/(ISL + OSL − 1 + s)."""
    kv_reserve_ratio: float = 0.0
    """r of the profile's ``kv_admission: ratio`` (SGLang, with :attr:`kv_on_demand`): each running request is also
    counted r times its remaining output clipped at :attr:`kv_reserve_clip_tokens`, on average r times
    :func:`~pdplan.queueing.kv_admission.ratio_reserve_mean_tokens` of OSL − 1 (:func:`admitted`); 0 = none."""
    kv_reserve_clip_tokens: float = 0.0
    """c of ``kv_admission: ratio`` (SGLang ``CLIP_MAX_NEW_TOKENS``); read only where :attr:`kv_reserve_ratio` > 0."""
    decode_batches: np.ndarray | None = None
    """Batch sizes (increasing, from 1) at which :attr:`decode_step_s` gives τ_d; None = the linear law ``step``."""
    decode_step_s: np.ndarray | None = None
    """τ_d(B) at the mean context on :attr:`decode_batches` (the roofline step with the engine's host time)."""
    window_tokens: float | None = None
    """w when every layer is windowed (:attr:`pdplan.specs.model.ModelSpec.kv_window_tokens`): the mean context and
    a request's KV are taken over min(context, w) (:func:`decode_s`, :func:`admitted`)."""
    merge_arrivals: bool = False
    """Spread steady state: the arrivals that land during one step share the next (:func:`_spread_groups`); off =
    every request its own group. :func:`pdplan.benchmark.loop_inputs.loop_inputs` sets it where the steps that
    carry prompts are eager (H > 0)."""


def decode_s(inp: LoopInputs, batch: float) -> float:
    """τ_d(B) at the mean context (module docstring): the roofline's grid where given, else the linear law."""
    if inp.decode_batches is not None and inp.decode_step_s is not None:
        return float(np.interp(batch, inp.decode_batches, inp.decode_step_s))
    context = windowed_mean_context(inp.input_tokens, inp.output_tokens, inp.window_tokens)
    st = inp.step
    return st.t0_s + st.t1_s_per_seq * batch + st.t2_s_per_token * batch * context


def prefill_work_s(inp: LoopInputs, tokens: np.ndarray | float, riding: np.ndarray | float = 0.0) -> np.ndarray:
    """Time T prefill tokens of fixed-length prompts add to a step with B decodes riding: the GEMM side of the pass
    at its own size, ``G(B + T) − G(B)`` from the kernel roofline (below the compute-bound knee the weight reads are
    shared, above it every token costs its FLOPs), and each prompt's attention pro rata; without a table, T/ISL
    prompts at ``prompt_s`` (the secant over the budget, :func:`pdplan.serving.roles.chunk_price`)."""
    t = np.asarray(tokens, dtype=np.float64)
    if inp.gemm_tokens is None or inp.gemm_s is None:
        return np.asarray(inp.prompt_s * t / inp.input_tokens, dtype=np.float64)
    b = np.maximum(np.asarray(riding, dtype=np.float64), 1.0)
    gemm = np.interp(b + t, inp.gemm_tokens, inp.gemm_s) - np.interp(b, inp.gemm_tokens, inp.gemm_s)
    return np.asarray(np.where(t > 0, gemm, 0.0) + inp.attention_s * t / inp.input_tokens, dtype=np.float64)


def eager_floor_s(inp: LoopInputs, step_s: np.ndarray | float, steps: np.ndarray | float = 1.0) -> np.ndarray:
    """``max(G, steps·H)``: the time of ``steps`` consecutive steps that carry prefill tokens, G their GPU time
    (module docstring, "Eager steps")."""
    return np.maximum(np.asarray(step_s, dtype=np.float64), inp.eager_step_s * np.asarray(steps, dtype=np.float64))


def admitted(inp: LoopInputs, concurrency: int) -> int:
    """C_eff: clients the engine serves at once (seats and KV tokens, ISL + OSL − 1 each; an on-demand pool:
    ISL + (OSL − 1)/2, :attr:`LoopInputs.kv_on_demand`; windowed: min(ISL + OSL − 1, w), resp. the mean of
    min(context, w) over the decode, :func:`pdplan.queueing.decode.windowed_mean_context`; SGLang's ratio admission
    adds r·mean min(remaining output, c), :attr:`LoopInputs.kv_reserve_ratio`: for ISL 1024, OSL 1024, r = 0.098,
    c = 4096, 1024 + 511.5 + 0.098 × 511.5 = 1585.6 tokens a request, against 2047 reserved)."""
    decoded = max(inp.output_tokens - 1.0, 0.0)
    if inp.window_tokens is None:
        held = inp.input_tokens + decoded * (0.5 if inp.kv_on_demand else 1.0)
    elif inp.kv_on_demand:
        held = windowed_mean_context(inp.input_tokens, decoded, inp.window_tokens)
    else:
        held = min(inp.input_tokens + decoded, inp.window_tokens)
    if inp.kv_reserve_ratio > 0.0:
        held += inp.kv_reserve_ratio * ratio_reserve_mean_tokens(decoded, inp.kv_reserve_clip_tokens)
    per_request = held + inp.state_tokens_per_seq
    return max(1, min(concurrency, inp.seats, int(inp.kv_tokens // per_request)))


def _mixed_steady(inp: LoopInputs, groups: np.ndarray, *, settle: bool = True) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-request (engine TTFT, TPOT) and throughput of the mixed engine in steady state.

    With fixed lengths the groups the start-up staircase formed (prompts whose prefill ended in the same step)
    stay together: each cycle group j arrives at once, waits for the step in flight (which carries group j − 1's
    prefill: its predecessor finished one step earlier), then has its g_j prompts prefilled in one step beside the
    other decodes. A cycle is the G prefill steps plus decode-only steps, n + 2 steps in all (wait, prefill, n
    decode steps); group j's n decode steps hold every prefill step but its own and group j − 1's. The first group
    arrives during a decode-only step (the cycle's gap). Groups that overflow the budget repack
    (:func:`settled_groups`). More groups than n + 2 steps cannot keep the pattern; they are
    priced as the prefill-bound fluid: every step carries a prefill.

    Overlap scheduling (``overlap_steps`` = m): the host schedules step s + 1 while step s runs, so an arrival also
    misses the step already scheduled behind the one in flight, m more steps of the same kind (group j − 2's
    prefill in the pattern): AIConfigurator's "TTFT = 3 × mixed step" from TensorRT-LLM iteration logs for a
    singleton pattern (docs/engines.md §1.4). To an idle engine the m steps are decode steps, as in the burst.
    """
    n = max(inp.output_tokens - 1.0, 0.0)
    groups = settled_groups(inp, groups) if settle else groups
    c_eff = int(groups.sum())
    count = groups.size
    prev = np.roll(groups, 1)
    riding = np.maximum(c_eff - groups - (prev if count > 1 else 0), 0)
    step_s = _group_step_s(inp, groups, riding)
    tau_d = decode_s(inp, c_eff)
    wait_s = np.roll(step_s, 1) if count > 1 else np.zeros(1)
    if 1 < count <= n + 2:  # the cycle has decode-only steps: the first group arrives during one of them
        wait_s[0] = decode_s(inp, float(c_eff - groups[0]))
    ttft = wait_s * (1.0 + inp.overlap_steps) + step_s if count > 1 else step_s + inp.overlap_steps * tau_d
    if count <= n + 2:
        others = step_s.sum() - step_s - (np.roll(step_s, 1) if count > 1 else 0.0)
        tpot = (others + (n - (count - 2 if count > 1 else 0)) * tau_d) / max(n, 1.0)
        tpot = np.maximum(tpot, tau_d) if count > 1 else np.full(1, tau_d)
    else:  # prefill-bound: all steps carry prefill, a cycle is the G steps
        tpot = np.full(count, step_s.mean())
        ttft = step_s.sum() - n * tpot
    cycle = float(np.average(ttft + n * tpot, weights=groups))
    return np.repeat(ttft, groups), np.repeat(tpot, groups), c_eff / cycle


def settled_groups(inp: LoopInputs, groups: np.ndarray) -> np.ndarray:
    """The groups the steady state keeps. Each cycle the groups' prompts queue FCFS and group j's step takes what
    its budget leaves after the riding decodes B_j: ``cap_j = ⌊(budget − B_j)/ISL⌋`` prompts (at least 1); a prompt
    left over finishes a step later, with the next group. So each group keeps at most cap_j and hands the rest to
    the next (the last one's rest forms groups of its cap); repeated until the groups (and with them each B_j) no
    longer move. Groups that fit are never merged: singletons stay singletons."""
    c_eff = int(groups.sum())
    for _ in range(64):
        count = groups.size
        riding = np.maximum(c_eff - groups - (np.roll(groups, 1) if count > 1 else 0), 0)
        cap = np.maximum(np.floor((inp.budget_tokens - riding) / inp.input_tokens), 1).astype(np.int64)
        packed: list[int] = []
        carry = 0
        for g, c in zip(groups.tolist(), cap.tolist(), strict=True):
            packed.append(min(c, g + carry))
            carry = g + carry - packed[-1]
        while carry > 0:
            packed.append(min(int(cap[-1]), carry))
            carry -= packed[-1]
        new = np.array(packed, dtype=np.int64)
        if new.size == groups.size and np.array_equal(new, groups):
            break
        groups = new
    return groups


def _group_step_s(inp: LoopInputs, prompts: np.ndarray, riding: np.ndarray) -> np.ndarray:
    """The step that prefills each group of ``prompts`` beside its ``riding`` decodes: k = ⌈g·ISL/(budget − B)⌉
    budget-sized passes, each a decode step of the riding batch, plus the prompts' prefill work, floored at the
    eager launch time of k steps (:func:`eager_floor_s`)."""
    k = np.ceil(prompts * inp.input_tokens / np.maximum(inp.budget_tokens - riding, 1.0))
    step_s = np.array([decode_s(inp, float(b)) for b in np.ravel(riding)]).reshape(np.shape(riding)) * k
    return eager_floor_s(inp, step_s + prefill_work_s(inp, prompts * inp.input_tokens, riding), k)


def _context_step_s(inp: LoopInputs, c_eff: int, prompts: float) -> float:
    """S(g): a step carrying g prompts beside the C_eff − g other decodes (:func:`_group_step_s`)."""
    riding = np.array(max(c_eff - prompts, 0.0))
    return float(_group_step_s(inp, np.array(prompts), riding))


def _spread_groups(inp: LoopInputs, c_eff: int) -> np.ndarray:
    """The groups of the spread steady state. Without :attr:`LoopInputs.merge_arrivals`, singletons: the regime
    fitted on the dense rows (TTFT about three one-prompt steps at C = 8, the profiles' ``steady_arrivals`` source).
    With it (set where the steps with prompts are eager), G = C/ḡ groups of the ḡ prompts a context step collects
    (:func:`pdplan.benchmark.spread_arrivals.merged_group_size`), the cycle T (the per-request overhead included) from
    :func:`_mixed_steady` priced with those groups, f(G) the count that cycle asks for. From singletons (f(C) ≤ C)
    G ← f(G) while the count falls (merging shortens the cycle, which raises ḡ), to the first fixed point f(G) = G
    (the least merged one below C); where an iterate overshoots (f(G) > G: the step prices switch regime, e.g.
    budget repacking) the count is bisected between it and the last iterate to f(G) < G < f(G − 1) + 1. Applied to
    graph-launched steps as well, the merge moves the dense TensorRT-LLM TTFT from 13.6 to 15.6 % median |error|
    (the groups' longer steps in the three-step TTFT; engine_accuracy_notes.py), so it is kept to the eager steps
    it was derived for."""
    if not inp.merge_arrivals:
        return np.ones(c_eff, dtype=np.int64)
    tau_s = decode_s(inp, c_eff)
    asked: dict[int, int] = {}

    def f(count: int) -> int:
        if count not in asked:
            cycle_s = c_eff / _mixed_steady(inp, even_groups(c_eff, c_eff / count))[2] + inp.request_delay_s
            size = merged_group_size(c_eff, cycle_s, tau_s, lambda g: _context_step_s(inp, c_eff, g))
            asked[count] = even_groups(c_eff, size).size
        return asked[count]

    hi = c_eff
    while (lo := f(hi)) < hi:
        if f(lo) <= lo:
            hi = lo
            continue
        while hi - lo > 1:  # f(lo) > lo, f(hi) <= hi
            mid = (lo + hi) // 2
            lo, hi = (lo, mid) if f(mid) <= mid else (mid, hi)
        break
    return even_groups(c_eff, c_eff / hi)


def _cohort(inp: LoopInputs, c_eff: int) -> tuple[np.ndarray, np.ndarray, float]:
    """Per-request (engine TTFT, TPOT) of a cohort of C_eff prefilled FCFS in budget-sized steps, then decoded."""
    n = max(inp.output_tokens - 1.0, 0.0)
    ends = np.ceil((np.arange(c_eff) + 1.0) * inp.input_tokens / inp.budget_tokens)  # step that ends prompt i
    steps = int(ends[-1])
    total = c_eff * inp.input_tokens
    per_step = np.full(steps, float(inp.budget_tokens))
    per_step[-1] = total - inp.budget_tokens * (steps - 1)
    step_s = eager_floor_s(inp, inp.step.t0_s + prefill_work_s(inp, per_step))
    done_s = np.cumsum(step_s)
    ttft = done_s[ends.astype(int) - 1]
    tau = decode_s(inp, c_eff)
    tpot = (done_s[-1] - ttft + n * tau) / max(n, 1.0)
    return ttft, tpot, c_eff / (done_s[-1] + n * tau)


def _burst_mixed(inp: LoopInputs, c_eff: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-request (engine TTFT, TPOT) of the first cohort of a mixed engine: FCFS prompts, decodes riding along."""
    n = max(inp.output_tokens - 1.0, 0.0)
    left = np.full(c_eff, inp.input_tokens)
    done = np.zeros(c_eff)
    times: list[float] = []
    now, i, decoding = 0.0, 0, 0
    while i < c_eff:
        room, step_tokens, ended = inp.budget_tokens - decoding, 0.0, 0
        while room > 0 and i + ended < c_eff:
            take = min(room, left[i + ended])
            left[i + ended] -= take
            room -= take
            step_tokens += take
            if left[i + ended] > 0:
                break
            ended += 1
        now += float(eager_floor_s(inp, decode_s(inp, decoding) + float(prefill_work_s(inp, step_tokens, decoding))))
        times.append(now)
        done[i : i + ended] = now
        i += ended
        decoding += ended
    last = now
    _, groups = np.unique(done, return_counts=True)
    later = np.array([sum(1 for t in times if t > d) for d in done])  # burst steps after one's own prefill
    tail = np.maximum(n - later, 0.0) * decode_s(inp, c_eff)
    tpot = (last - done + tail) / max(n, 1.0)
    return done, tpot, groups


def _fragmenting_s(inp: LoopInputs, groups: np.ndarray, settled_s: float, share: float) -> float:
    """Excess mean TTFT while the burst's groups repack into the settled ones (phase-locked clients only).

    The deterministic replay forms the settled groups one per cycle, in order (the group arriving in the cycle's
    decode-only gap takes its settled size first, and the rest repack behind it): with G_s settled groups the last
    forms by itself, so the transient lasts m = G_s − 1 cycles after the burst, its excess over the settled state
    falling linearly from the unsettled groups' ``G_u − S``. Over the N measured requests, cycles 2 …
    min(m, N/C_eff − 1) + 1 carry it, each with weight ``share = C_eff/N``."""
    settled = settled_groups(inp, groups)
    if np.array_equal(settled, groups) or settled.size < 2:
        return 0.0
    m = settled.size - 1
    unsettled = float(_mixed_steady(inp, groups, settle=False)[0].mean())
    cycles = int(min(m, max(1.0 / share - 1.0, 0.0)))
    return share * (unsettled - settled_s) * sum(1.0 - j / m for j in range(cycles))


def startup_weight(inp: LoopInputs, c_eff: int, requests: int) -> float:
    """w = min(1, k·C_eff/N): the start-up burst's weight in the average over N measured requests."""
    return min(1.0, inp.startup_cohorts * c_eff / requests)


def benchmark_loop(inp: LoopInputs, concurrency: int, requests: int, warmup: int, tool: str) -> BenchmarkLoop:
    """Benchmark-average and steady-state TTFT/TPOT at closed-loop concurrency C (module docstring); ``warmup``
    requests run before the measured phase and leave no trace in it (they only name the recipe)."""
    c_eff = admitted(inp, concurrency)
    overlap_s = inp.overlap_steps * decode_s(inp, c_eff)
    extra = inp.request_delay_s + overlap_s
    if inp.mixed:  # the steady state prices its own overlap steps (:func:`_mixed_steady`)
        burst_ttft, burst_tpot, groups = _burst_mixed(inp, c_eff)
        steady_ttft, steady_tpot, x = _mixed_steady(inp, _spread_groups(inp, c_eff) if inp.spread else groups)
        steady_ttft = steady_ttft - overlap_s
    else:
        burst_ttft, burst_tpot, x = _cohort(inp, c_eff)
        steady_ttft, steady_tpot = burst_ttft, burst_tpot
    queue_s = (concurrency - c_eff) / x
    w = startup_weight(inp, c_eff, requests)
    w_tpot = min(1.0, c_eff / requests)  # groups carry the same prefill work as singletons: only the burst differs
    mean_ttft = w * float(burst_ttft.mean()) + (1.0 - w) * float(steady_ttft.mean())
    if inp.mixed and not inp.spread:
        mean_ttft += _fragmenting_s(inp, groups, float(steady_ttft.mean()) + overlap_s, c_eff / requests)
    mean_tpot = w_tpot * float(burst_tpot.mean()) + (1.0 - w_tpot) * float(steady_tpot.mean())
    return BenchmarkLoop(
        tool=tool,
        concurrency=concurrency,
        requests=requests,
        warmup=warmup,
        effective_concurrency=c_eff,
        throughput_rps=x,
        mean_ttft_s=mean_ttft + extra + queue_s,
        mean_tpot_s=mean_tpot,
        steady_ttft_s=float(steady_ttft.mean()) + extra + queue_s,
        steady_tpot_s=float(steady_tpot.mean()),
        burst_ttft_s=float(burst_ttft.mean()) + extra,
        server_queue_s=queue_s,
        request_overhead_s=extra,
    )


def benchmark_counts(
    engine: EngineProfile | None, concurrency: int, requests: int | None, warmup: int | None
) -> tuple[str, int, int]:
    """The benchmark tool, N measured and W warm-up requests: the given ones, else the engine's tool's defaults
    (without an engine, a plain closed loop of 10·C requests and no warm-up); SpecError if N < 1 or W < 0."""
    tool = engine.benchmark.tool if engine is not None else "closed loop"
    n_default, w_default = engine.benchmark.counts(concurrency) if engine is not None else (10 * concurrency, 0)
    n = requests if requests is not None else n_default
    w = warmup if warmup is not None else w_default
    if n < 1 or w < 0:
        raise SpecError(f"requests must be >= 1 and warmup >= 0, got {n} and {w}", field="requests")
    return tool, n, w
