"""Decode KV admission: the fluid KV limit and the wait for free KV past the comfortable (P99) limit.

A decode instance admits a request only while its KV fits (docs/queueing.md §2.3: "else preemption/recompute (vLLM)
or admission queueing"; §1.5: "add the decode admission wait"); pdplan's simulator (:mod:`pdplan.sim.decode`) queues
it FCFS for KV at the step boundary. The instance stays stable up to the **mean (fluid) KV limit** of §2.3,
``K̄(λ) = λ τ̄(λ) E[held work] = M_kv`` (Nie, Si, Zhou 2026, arXiv 2605.04595): for the linear step
``τ̄ = t0/(1 − λ·per)``, ``per = t1 E[n] + t2 E[work]``, that is ``λ_kv = M/(t0 W + M·per)`` (W = E[held work], the
context-token·steps a request holds, :func:`pdplan.queueing.decode.kv_footprint`). The **comfortable limit** is the
P99 one of :func:`pdplan.queueing.decode.decode_capacity` (``K̄ + z₉₉·sd K = M_kv``); below it fewer than 1 % of
arrivals find the KV full and the wait is neglected, as before.

Between the two the wait is a **diffusion (Halfin–Whitt) approximation of a many-server queue on KV seats**: seats
``c = M_kv / r̄`` with r̄ = W/E[n] the mean context of an in-flight sequence, offered seats ``a = K̄/r̄`` (= N, the
mean sequences in flight). Halfin and Whitt (1981, Oper. Res. 29(3)) give for M/M/c with ``β = (c − a)/√a`` the
probability of waiting ``P_w ≈ [1 + β Φ(β)/φ(β)]⁻¹``; here ``√a`` (the M/G/∞ sd of the seats in use) is replaced by
the sd of the KV occupancy in seats, ``sd K / r̄`` with ``Var K = λ τ̄ E[Σ_{j<n}(L+j)²]·F`` (the §2.3 shot noise
with the §2.4 feedback factor F; reserved footprints: ``E[n(L + s + n)²]``), so ``β = (M_kv − K̄)/sd K``, exactly
the margin the P99 rule holds at z₉₉: at the comfortable limit ``P_w = 0.011``. The wait of those who wait is
exponential with M/M/c's rate ``cμ − λ`` (μ = 1/(E[n] τ̄)), i.e. mean ``W τ̄/(M_kv − K̄)``, times the Allen–Cunneen
factor ``(1 + c_s²)/2`` (c_s² of a request's held token·steps, the KV·time it occupies; the M/G/c correction of
:func:`pdplan.queueing.mgc.allen_cunneen_wait_s`). Waiting requests hold no KV and run no step, so τ̄ and the TPOT
model are unchanged. Measured against the simulator in docs/queueing.md §2.6.

Engines (docs/queueing.md §2.6): what a request is admitted on is the engine profile's ``scheduling.kv_admission``
(:func:`admission_footprint`), the one source of truth. ``on_demand`` (vLLM) admits on its prompt's blocks and
preempts (recompute) when blocks run out: it holds the growing context of §2.2, ``L + s + j`` at step j, and both a
colocated and a disaggregated decode instance price its preemptions (*Preemption with recompute* and *A disaggregated
decode instance* below). ``reserve`` (TensorRT-LLM's default ``GUARANTEED_NO_EVICT``, and
pdplan's simulator) admits a request only when its final footprint fits, so it holds ``L + s + n`` for all n steps:
W = E[n(L + s + n)] and the variance sum E[n(L + s + n)²]. Where that reserved mean limit lies below the comfortable
(growing-context P99) one, the comfortable limit stays the stability limit.

``ratio`` (SGLang's ``PrefillAdder``, the profile's ``kv_reserve_ratio``): a new request is admitted while its
prompt plus its output fit beside the running requests counted as their context plus r·min(remaining output, c)
(``new_token_ratio``, decayed to its floor r = 0.098; c = ``CLIP_MAX_NEW_TOKENS``); the pool holds the growing
context, and a decode step that finds no free KV retracts requests. The admission-counted footprint of a request at
step j is ``f_j = L + s + j + r·min(n − j, c)`` (n − j output tokens left; windowed: ``min(L + s + j, w + s) +
r·min(n − j, c)``), and the fluid admission limit is ``λ τ̄ E[Σ_j f_j] = M_kv``: the same §2.3 argument with f_j in
place of the held context, since the engine stops admitting when Σ f over the running requests fills the pool. Its
sums (:func:`kv_ratio_held`), without window and clip (n ≤ c), b = L + s:

* W = Σ_{j<n} f_j = nb + n(n − 1)/2 + r·n(n + 1)/2: the growing W plus r times the remaining output summed over
  the steps (r = 0: the growing context; r = 1 gives n(b + n), the reserved W);
* Σ_{j<n} f_j² = Σ(b + j)² + 2r·Σ(b + j)(n − j) + r²·Σ(n − j)², with Σ(b + j)(n − j) = b·n(n + 1)/2 +
  (n − 1)n(n + 1)/6 and Σ(n − j)² = n(n + 1)(2n + 1)/6 (r = 1 gives n(b + n)²).

With the clip and the window f_j is affine on at most three stretches of j (breaks at j = w − L, where the context
meets the window, and j = n − c, where the remaining output falls below the clip), each summed in closed form
(:func:`_affine_sums`, exact for integer breaks, continuous between, as :func:`held_context_sums`). Left out: the
newcomer is charged its whole ``min(OSL, c)`` rather than r of it at its own admission, a one-request margin of
(1 − r)·min(n, c) tokens (≲ 1 % of the pool wherever it holds ≳ 100 requests), and the ratio's rise after a
retraction. The ratio is SGLang's colocated scheduler's rule; its PD decode server admits differently.

``pd_decode_reserved_tokens`` R (SGLang's disaggregated decode server, :func:`decode_server_footprint`):
``DecodePreallocQueue.pop_preallocated`` takes a transferred request while its prompt plus R fits the allocatable
tokens, ``_allocatable_tokens`` = free KV − R × (running + transfer-queue + waiting requests)
(sgl-project/sglang ``python/sglang/srt/disaggregation/decode.py``; R = ``SGLANG_NUM_RESERVED_DECODE_TOKENS``,
default 512, the profile's source). With the free KV = M_kv − Σ over the requests it holds of their context
L_i + s + j_i, a request is admitted iff Σ_i (L_i + s + j_i + R) + (L + s + R) ≤ M_kv: every request in the server
counts its held context plus R, whatever its remaining output. That is the growing footprint of a context R tokens
longer, ``f_j = L + s + R + j`` (windowed ``min(L + s + j, w + s) + R``), so :func:`kv_held` with the fixed state
s + R gives its sums: W = E[n(L + s + R) + n(n − 1)/2] and Σ f² = E[Σ_{j<n} (L + s + R + j)²]. The pool itself
holds the growing context (a request that outgrows R is retracted when a step finds no free KV; not priced).

**Colocated instances** (:class:`RidingKvAdmission`, :mod:`pdplan.serving.colocated`). A colocated engine's
scheduler admits a waiting request on the same rule (vLLM and TensorRT-LLM run one scheduler for both phases; SGLang's
``PrefillAdder`` ratio is its colocated rule), so the queue above carries over with two changes, both from the
colocated mean field (docs/queueing.md §3): prefill takes p = ``prefill_s_per_request`` seconds of step time per
request (u_p = λp, linear in λ for both schedulers), so ``τ̄ = t0/(1 − λ(per + p))`` and the fluid limit is
``λ_kv = M/(t0 W + M(per + p))`` (:func:`kv_mean_rate`); and the load feedback of §2.4 is that of decodes whose steps
carry the prefill, F at the rate λ/(1 − u_p) (:func:`pdplan.queueing.linear_capacity.riding_feedback`). With them the
comfortable limit is the colocated P99 KV bound of :func:`pdplan.queueing.linear_capacity.riding_capacity` (β = z₉₉
there, P_w = 0.011), and β, P_w and the wait follow as above. A request waiting for KV has not started its prefill
(the engines admit a request to its first chunk only with its KV), so the wait delays token 1: it adds to TTFT as a
delay independent of the prompt queue's (the same independence the disaggregated model takes between the link's wait
and the admission wait), and the TPOT model is unchanged (waiting requests hold no KV and run no step). The serving
model uses the band for every engine: those that hold a request back until its KV fits (``reserve``, ``ratio``) as
above, and an ``on_demand`` engine (vLLM) with its preemptions priced as follows.

**Seats** (:func:`seat_held`; a colocated instance, :meth:`pdplan.serving.colocated.ColocatedModel.seat_admission`).
The engines cap the requests running at once (``max_num_seqs``, SGLang's ``max_running_requests``, TensorRT-LLM's
``max_batch_size``) and keep the rest waiting FCFS (vLLM's ``waiting`` queue, ``Scheduler.schedule``: a request is
admitted only while ``len(self.running) < max_num_running_reqs``). That is the same many-server queue with one seat
per request in place of its KV tokens: the footprint is 1 at each of its n steps (W = E[n], Σf² = E[n]), the P99 rule
is the §2.3 seat bound, the fluid limit λτ̄E[n] = max_num_seqs, and between them the Halfin–Whitt wait above, which
delays token 1 (a waiting request has not started its prefill). Where both the KV and the seat queues are in their
bands a request waits for whichever is scarcer: the serving model takes the queue with the larger mean wait (a
lower bound on a wait for both; the two rarely bind together).

**Preemption with recompute** (``on_demand``, vLLM V1; vllm-project/vllm ``vllm/v1/core/sched/scheduler.py``
``Scheduler.schedule`` and ``_preempt_request`` @ 00024d314514900f361ad072af6931e403b7f589, the loop unchanged since
V1's first releases). Each step the running requests are given their new tokens' blocks first, in admission order;
when ``allocate_slots`` fails, the last request of ``self.running`` (the newest admitted) is preempted: its blocks are
freed (``kv_cache_manager.free``, tail blocks first into the free queue, their hashes kept), ``num_computed_tokens``
is reset to 0 and it is put back at the *head* of the waiting queue (``waiting.prepend_request``); no waiting request
is admitted in a step that preempted; a waiting request is admitted while its next chunk's blocks fit. When admitted
again it is prefilled anew over its prompt and the tokens it had generated; with prefix caching on, the blocks of its
context that no other request took in between are hits (``get_computed_blocks``). So vLLM admits greedily on the
current context and, once the pool is *pinned* (a queue waits and the admissions fill what the completions free), the
decode batch's own growth overflows it. Two pieces:

* *How often the pool is pinned*: an admission queue whose P_w is the chance an arrival finds the pool full (the
  Halfin–Whitt queue above, its queue drained by a full pool: below).
* *What a pinned pool overflows* (:func:`pinned_overflow_share`): after the greedy admissions the room left is R, less
  than the waiting head's need ℓ (a prompt, or a preempted request's context: ≈ E[L] + s, the victim being the newest
  admitted), taken uniform on [0, ℓ). The batch then grows by N̄ tokens a step and a completion comes every
  1/(λτ̄) steps, so the growth between completions is N̄/(λτ̄) = E[n] tokens on average; taking it exponential
  (Poisson completions), the growth G outruns R with probability ``E_R[e^{−R/E[n]}] = (1 − e^{−x})/x = f``, x =
  ℓ/E[n], and each such overrun preempts one request (the newest, whose context ≈ ℓ ≥ the overrun). A request
  completes once per such cycle, so a pinned pool preempts f times per request.

Each preemption recomputes the victim's context c̄ = E[L] + s (the newest admitted: its prompt and a few tokens)
as a prompt; with prefix caching only the overrun itself is lost (the growth
took the victim's tail blocks; its head blocks are hits), whose mean given an overrun is E[n] (memoryless), so c̄ =
min(E[L] + s, E[n]). Each costs r = c̄·(p/E[computed prompt tokens]) seconds of prefill riding the steps, so a pool
pinned throughout serves the **pinned limit** ``λ_pin = M/(t0 W + M(per + p + f r))`` (the fluid limit with f r more
prefill per request), the stability limit of an ``on_demand`` engine ("decode KV capacity") where it lies above the
P99 bound: past it one pinned stretch lowers the throughput below the offered rate and never drains (pdplan's
simulator, which runs vLLM's preemption and its prefix-cache hits, saturates at 5.70 req/s on an OPT-13B pick against
λ_pin 5.538, 4.74 on another against 4.683, 1.879 on a Llama-3.1-70B chat pick against 1.911, 4.30 on a
Llama-3.1-70B pick against 4.012; docs/accuracy.md §6, *vLLM past its comfortable KV limit*).

The queue (:func:`_pinned_wait`) is the Halfin–Whitt queue above with its queue drained by a *full* pool: in M/M/c
P_w = P_c·cμ/(cμ − λ), P_c the mass at c busy seats (reached through the occupancy law of the P99 limit, the fluid
margin M_kv − K̄ against sd K) times the geometric queue beyond it, whose drain cμ − λ is λ_pin − λ here (a full
pool's steps are longer, K = M_kv, and carry the recompute) where the fluid queue has λM_kv/K̄ − λ. So P_w is the
fluid one times (λ_pin/(λ_pin − λ))·((M_kv − K̄)/M_kv), at most 1, and E[W | W > 0] = (1 + c_s²)/2 · 1/(λ_pin − λ);
π = f·P_w preemptions per request. The comfortable limit is where this P_w is the P99 rule's 0.011 (Halfin–Whitt's
at β = z₉₉; :func:`pinned_comfort_rate`), or the P99 KV bound if that comes first: the factor is above 1 near the
bound, so the wait starts below it rather than jumping there. Where λ_pin lies at
or below the P99 bound nothing of this applies: the P99 bound stays the limit, as before (on the Llama-3.1-70B pick
above the simulator runs 4.4 req/s, collapses at 4.5 and saturates at 4.30 against the bound's 4.387: λ_pin's
min(E[L], E[n]) tokens per recompute overstates what its victims lose there). What the recompute costs: the wait delays
token 1 (TTFT); the recompute stretches τ̄ to t0/(1 − λ(per + p + π r)) for every decode, and a preempted request
pauses for its recompute and its wait at the head of the queue (the next completion of a full pool, 1/λ_pin), spread
over its steps (TPOT, as mean shifts). Left out: the recompute's share of the prompt queue's (chunk queue's) load,
the skew of K (its third cumulant, γ ≈ 0.7 on that pick, where a shifted gamma would raise P_w 1.1–1.8× near the
comfortable limit), and a victim among requests still in prefill.

**A disaggregated decode instance** (vLLM, :func:`pinned_decode_admission`; :mod:`pdplan.serving.decode_recompute`
builds it). A vLLM decode instance runs the same ``Scheduler.schedule`` (vllm-project/vllm
``vllm/v1/core/sched/scheduler.py`` @ 00024d314514900f361ad072af6931e403b7f589) with a KV connector, read here for
NixlConnector (``vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py`` @
002a1057e9ae674d7bdc9c4be95bc29d65d2e808):

* *On receipt it allocates the prompt's blocks only.* For a waiting request with ``num_computed_tokens == 0`` the
  scheduler asks ``connector.get_num_new_matched_tokens``; ``NixlConnectorScheduler.get_num_new_matched_tokens``
  answers, "if params is not None and params.get("do_remote_prefill")": "Remote prefill: get all prompt blocks from
  remote", ``count = len(token_ids) - num_computed_tokens``, ``return count, True`` (asynchronous). The scheduler
  then calls ``allocate_slots(request, num_new_tokens=0, ..., num_external_computed_tokens=..., delay_cache_blocks=
  load_kv_async)`` ("KVTransfer: loading remote KV, do not allocate for new work") and parks the request in
  ``WAITING_FOR_REMOTE_KVS``; when the transfer ends, ``_update_waiting_for_remote_kv`` caches those blocks and sets
  ``num_computed_tokens`` (the received tokens, at most the prompt less one), and the request is admitted like any
  other, on the blocks its known tokens need, while they fit (``if new_blocks is None: ... break``).
* *It grows on demand and preempts the newest running request.* In the running loop, "Schedule newly needed KV
  blocks for the request": when ``allocate_slots`` returns None, "Preempt the lowest-priority request", under the
  default FCFS policy ``preempted_req = self.running.pop()`` (the last admitted), then ``_preempt_request``:
  ``kv_cache_manager.free(request)``, ``request.num_computed_tokens = 0``, ``self.waiting.prepend_request(request)``;
  no waiting request is admitted in a step that preempted (``if not preempted_reqs``). The colocated rule, unchanged.
* *The recompute is a local prefill.* ``NixlConnectorScheduler.update_state_after_alloc`` consumed the remote KV
  params at the first admission: "Only trigger 1 KV transfer per request. params["do_remote_prefill"] = False". So
  when the preempted request is admitted again (``num_computed_tokens == 0``) the connector matches no tokens
  (``return 0, False``), ``get_computed_blocks`` gives the local prefix-cache hits (the received prompt's blocks
  were cached on receipt), and ``num_new_tokens = request.num_tokens - num_computed_tokens`` ("We use
  `request.num_tokens` instead of `request.num_prompt_tokens` to consider the resumed requests, which have output
  tokens") are prefilled on the decode instance, in chunks of the token budget riding its decode steps.

So the decode instance is the colocated ``on_demand`` one with p = 0 (no prefill of its own rides its steps): the pinned
limit ``λ_pin = M/(t0 W + M(per + f r))`` as its stability limit, π = f·P_w preemptions per request, the recompute's
stretch of τ̄ and its victims' pause (TPOT), the comfortable limit where P_w is the P99 rule's. r is priced as a PPD
append-prefill on that instance (:mod:`pdplan.serving.decode_recompute`), not at a colocated instance's riding prefill
price. Its **wait** (:func:`_recompute_wait`) is not the pinned one: the Halfin–Whitt queue above, whose β, P_w and
Allen–Cunneen wait are read at the mean step its own preemptions stretch, ``τ̄(P) = t0/(1 − λ(per + f·P·r))`` (K̄ =
λ·τ̄(P)·W), with P_w the least fixed point of P = HW(P). It rises from the plain queue's P_w where preemptions are rare;
at λ_pin the pinned pool is a fixed point (P_w = 1: τ̄(1) makes K̄ = M_kv), and on the pools measured (below) the least
fixed point climbs to it, so the wait diverges at the stability limit as the pinned queue's does. Where it stays low up
to λ_pin (a pool far from full whose λ_pin is set by a large recompute share: tests/unit/test_decode_recompute.py's M =
2,000 pool, P_w 0.0035 at 499.9 of λ_pin 500/s) the wait jumps there, and λ_pin, the rate a pinned pool serves, stays
the limit (conservative). The pinned queue (a queue beyond c drained at λ_pin − λ, P_w raised by λ_pin/(λ_pin − λ)·(M_kv
− K̄)/M_kv) prices every wait as if the pool were pinned from the first full step; pdplan's simulator
(:mod:`pdplan.sim.preempt_decode`, vLLM's scheduler) does not wait so: on the DistServe OPT-13B example (20,000
requests, seed 0) it measures P_w 0.04–0.07, 0.21–0.25 and 0.46–0.50 at 5.9, 6.2 and 6.4 req/s and a mean wait of 34,
366 and 1,470 ms, where the pinned queue gave P_w 0.18, 1 and 1 and 479 ms, 6.4 s and 209 s, and this queue gives 0.054,
0.25 and 0.89 and 31 ms, 252 ms and 9.5 s (its λ_pin, 6.41, lies 4 % below the simulator's saturation, 6.67;
docs/queueing.md §2.6). A colocated ``on_demand`` instance keeps the pinned queue: measured against the simulator
(docs/queueing.md §2.6, *The colocated wait*), this queue would wait less than the pinned one where the pinned one
already waits 2–5× less than the simulator (Llama-3.1-70B, chat, 2x H100), and 0–10 ms where it simulates 0.2–1 s
(OPT-13B); the pinned queue's excess near λ_pin there is its drain λ_pin − λ (λ_pin 1.5–2.2 % below the simulated
saturation).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pdplan.numerics.normal import log_ndtr
from pdplan.numerics.roots import brentq
from pdplan.queueing.decode import (
    DecodeWorkload,
    LinearStepTime,
    decode_fixed_point,
    held_context_sums,
    load_noise,
)
from pdplan.queueing.linear_capacity import riding_feedback
from pdplan.queueing.link_delay import BinDelay, tail_bands
from pdplan.specs.engine import Scheduling
from pdplan.types import Z99, FloatArray

ADMISSION_POINTS = 8
"""Quantile points (plus the atom at 0) of the admission wait mixed into TTFT or TPOT (:func:`tail_bands`)."""


@dataclass(frozen=True, slots=True)
class KvFootprint:
    """What a request holds in the KV pool over its life: ``work`` = E[KV token·steps], ``square_sum`` = E[Σ over its
    steps of the tokens held²] (the M/G/∞ variance of the occupancy, §2.3), ``scv`` = the squared coefficient of
    variation of its token·steps."""

    work: float
    square_sum: float
    scv: float


def seat_held(cells: DecodeWorkload) -> KvFootprint:
    """A request's seat over its life (*Seats* in the module docstring): one of ``max_num_seqs`` at each of its n
    decode steps, as the P99 seat bound counts it (``N + z₉₉ √(N F) ≤ max_num_seqs`` with N = λτ̄E[n],
    :func:`pdplan.queueing.linear_capacity.riding_capacity`): work E[n] seat·steps, Σ 1² = E[n], c_s² = Var n/E[n]²."""
    n, p = cells.decode_steps, cells.prob
    mean = float(p @ n)
    return KvFootprint(mean, mean, max(float(p @ n**2) / mean**2 - 1.0, 0.0))


def kv_held(cells: DecodeWorkload, state_tokens_per_seq: float, *, reserve: bool) -> KvFootprint:
    """The footprint of :class:`KvFootprint`: growing, ``L + s + j`` at step j (§2.2, vLLM/SGLang); reserved,
    ``L + s + n`` at every step (TensorRT-LLM ``GUARANTEED_NO_EVICT``). With the ``cells``' window w (every layer
    windowed) a sequence holds min(L + j, w) + s, resp. min(L + n, w) + s (:func:`held_context_sums`)."""
    n, p = cells.decode_steps, cells.prob
    base = cells.input_tokens + state_tokens_per_seq
    if cells.window_tokens is not None:
        top = cells.window_tokens + state_tokens_per_seq  # min(L + j, w) + s = min(L + s + j, w + s)
        if reserve:
            w = n * np.minimum(base + n, top)
            square = n * np.minimum(base + n, top) ** 2
        else:
            w, square = held_context_sums(base, n, top)
        return _footprint(p, w, square)
    if reserve:
        w = n * (base + n)
        square = n * (base + n) ** 2
    else:
        w = n * base + n * (n - 1.0) / 2.0
        square = n * base**2 + base * n * (n - 1.0) + (n - 1.0) * n * (2.0 * n - 1.0) / 6.0
    return _footprint(p, w, square)


def _footprint(prob: FloatArray, work: FloatArray, square_sum: FloatArray) -> KvFootprint:
    """:class:`KvFootprint` of per-bin token·steps ``work`` and Σ tokens² ``square_sum`` under the bins' ``prob``:
    their means, and the squared coefficient of variation of the work."""
    mean = float(prob @ work)
    return KvFootprint(mean, float(prob @ square_sum), float(prob @ (work - mean) ** 2) / mean**2)


def admission_footprint(cells: DecodeWorkload, state_tokens_per_seq: float, scheduling: Scheduling) -> KvFootprint:
    """The footprint the engine's profile admits on (module docstring): ``reserve`` and ``on_demand`` through
    :func:`kv_held`, ``ratio`` through :func:`kv_ratio_held` with the profile's share and clip."""
    ratio = scheduling.kv_reserve_ratio
    if scheduling.kv_admission == "ratio" and ratio is not None:
        return kv_ratio_held(cells, state_tokens_per_seq, ratio.ratio, float(ratio.clip_tokens))
    return kv_held(cells, state_tokens_per_seq, reserve=scheduling.kv_admission == "reserve")


def pd_decode_reserved_tokens(scheduling: Scheduling) -> float:
    """R of an engine whose disaggregated decode server admits on its own rule (the profile's
    ``pd_decode_reserved_tokens``, SGLang's ``num_reserved_decode_tokens``); 0 where the profile has none."""
    reserved = scheduling.pd_decode_reserved_tokens
    return 0.0 if reserved is None else float(reserved.value)


def decode_server_footprint(cells: DecodeWorkload, state_tokens_per_seq: float, scheduling: Scheduling) -> KvFootprint:
    """The footprint a disaggregated decode instance admits on: with the profile's ``pd_decode_reserved_tokens`` R,
    the held context plus R (module docstring: :func:`kv_held` growing with the fixed state s + R); else reserved
    where ``kv_admission`` is ``reserve`` and growing otherwise (an SGLang profile without R: its PD decode server
    does not run the colocated ratio rule). Example (L = 1000, n = 200, s = 0, R = 512): W = 200 × 1512 +
    200 × 199/2 = 322,300 token·steps, against 219,900 growing and 240,000 reserved."""
    reserved = pd_decode_reserved_tokens(scheduling)
    if reserved > 0.0:
        return kv_held(cells, state_tokens_per_seq + reserved, reserve=False)
    return kv_held(cells, state_tokens_per_seq, reserve=scheduling.kv_admission == "reserve")


def decode_server_admission(
    cells: DecodeWorkload,
    state_tokens_per_seq: float,
    scheduling: Scheduling,
    step: LinearStepTime,
    kv_capacity_tokens: float,
    comfort_rate_per_s: float,
) -> KvAdmission:
    """One disaggregated decode instance's KV admission queue on the footprint its server admits on
    (:func:`decode_server_footprint`), with the comfortable (P99) rate of its capacity and the fluid limit
    :func:`kv_mean_rate` (at least the comfortable one): the one builder of the plain disaggregated model
    (:mod:`pdplan.serving.disaggregated`) and PPD's decode instances (:mod:`pdplan.serving.ppd_decode`)."""
    held = decode_server_footprint(cells, state_tokens_per_seq, scheduling)
    mean = kv_mean_rate(cells, held, step, kv_capacity_tokens)
    return KvAdmission(cells, held, step, kv_capacity_tokens, comfort_rate_per_s, max(mean, comfort_rate_per_s))


def kv_ratio_held(cells: DecodeWorkload, state_tokens_per_seq: float, ratio: float, clip_tokens: float) -> KvFootprint:
    """SGLang's admission-counted footprint ``f_j = min(L + s + j, w + s) + r·min(n − j, c)`` (module docstring):
    ``work`` = E[Σ_j f_j], ``square_sum`` = E[Σ_j f_j²], summed over the stretches where f_j is affine. Example
    (L = 100, s = 0, n = 4, r = 0.5, no window or clip): f = 102, 102.5, 103, 103.5, so W = 411 and Σf² =
    42,231.5."""
    n, p = cells.decode_steps, cells.prob
    base = cells.input_tokens + state_tokens_per_seq
    # without a window, a top the context never passes (b + j < b + n): min(b + j, top) = b + j throughout
    top = base + n if cells.window_tokens is None else np.full_like(n, cells.window_tokens + state_tokens_per_seq)
    window_at = np.clip(top - base, 0.0, n)  # j from which the held context is the window: min(b + j, top) = top
    clip_at = np.clip(n - clip_tokens, 0.0, n)  # j from which the remaining output n − j is below the clip
    marks = [np.zeros_like(n), np.minimum(window_at, clip_at), np.maximum(window_at, clip_at), n]
    w, square = np.zeros_like(n), np.zeros_like(n)
    for start, stop in itertools.pairwise(marks):
        mid = (start + stop) / 2.0
        grows, clipped = mid < window_at, mid < clip_at
        held_0, held_1 = np.where(grows, base, top), np.where(grows, 1.0, 0.0)
        rest_0, rest_1 = np.where(clipped, clip_tokens, n), np.where(clipped, 0.0, -1.0)
        first, second = _affine_sums(held_0 + ratio * rest_0, held_1 + ratio * rest_1, start, stop)
        w, square = w + first, square + second
    return _footprint(p, w, square)


def _affine_sums(
    alpha: FloatArray, beta: FloatArray, start: FloatArray, stop: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``(Σ (α + βj), Σ (α + βj)²)`` over start ≤ j < stop, from the power sums Σ_{j<x} 1, j, j² = x, x(x − 1)/2,
    (x − 1)x(2x − 1)/6 (the integer formulas continued to real x, as :func:`held_context_sums`); 0 where stop ≤
    start."""

    def powers(x: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
        return x, x * (x - 1.0) / 2.0, (x - 1.0) * x * (2.0 * x - 1.0) / 6.0

    (a0, a1, a2), (b0, b1, b2) = powers(start), powers(np.maximum(stop, start))
    s0, s1, s2 = b0 - a0, b1 - a1, b2 - a2
    return alpha * s0 + beta * s1, alpha**2 * s0 + 2.0 * alpha * beta * s1 + beta**2 * s2


def ratio_reserve_mean_tokens(span_tokens: float, clip_tokens: float) -> float:
    """Mean of min(span − x, c) over x uniform on [0, span]: the remaining output a fixed-length request's ``ratio``
    admission counts (before the share r), averaged over its decode as the benchmark loop averages its context
    (:func:`pdplan.queueing.decode.windowed_mean_context`). span ≤ c: span/2; else (c²/2 + (span − c)·c)/span =
    c − c²/(2·span). span = 0: 0."""
    span, c = float(span_tokens), float(clip_tokens)
    if span <= c:
        return span / 2.0
    return c - c * c / (2.0 * span)


def kv_mean_rate(
    cells: DecodeWorkload,
    held: KvFootprint,
    step: LinearStepTime,
    kv_capacity_tokens: float,
    prefill_s_per_request: float = 0.0,
) -> float:
    """Per-instance rate at which the mean KV occupancy ``λ τ̄ W`` reaches ``M_kv`` (module docstring; ``per`` from
    the ``cells``' context, W = ``held.work``). ``prefill_s_per_request``: p, the prefill seconds per request riding
    the decode steps of a colocated instance (*Colocated instances* below): τ̄ = t0/(1 − λ(per + p)), so
    ``λ_kv = M/(t0 W + M·(per + p))``; 0 (a decode instance) adds nothing."""
    per = step.per_request_s(cells) + prefill_s_per_request
    return kv_capacity_tokens / (step.t0_s * held.work + kv_capacity_tokens * per)


@dataclass(frozen=True, slots=True)
class KvAdmission:
    """One decode instance's KV admission queue: the workload ``cells`` (decode steps), its footprint ``held``, the
    step law, the capacity, and the comfortable (P99) and fluid (mean) per-instance rates."""

    cells: DecodeWorkload
    held: KvFootprint
    step: LinearStepTime
    kv_capacity_tokens: float
    comfort_rate_per_s: float
    mean_rate_per_s: float

    def wait(self, rates_per_s: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(P_w, E[W | W > 0])`` per per-instance rate: zeros at or below the comfortable limit (module docstring)."""
        rates = np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64))
        prob, cond = np.zeros(rates.size), np.zeros(rates.size)
        beyond = np.flatnonzero((rates > self.comfort_rate_per_s) & (rates < self.mean_rate_per_s))
        if beyond.size == 0:
            return prob, cond
        fixed = decode_fixed_point(rates[beyond], self.cells, self.step)
        _, factor = load_noise(fixed, self.cells)
        prob[beyond], cond[beyond] = _halfin_whitt(
            fixed.rate_per_s * fixed.tau_mean_s, fixed.tau_mean_s, factor, self.held, self.kv_capacity_tokens
        )
        return prob, cond

    def delay(self, rates_per_s: FloatArray, points: int = ADMISSION_POINTS) -> BinDelay:
        """The wait as a :class:`BinDelay` (one bin for all): an atom ``1 − P_w`` at 0 and ``points`` band quantiles
        of the exponential ``E[W | W > 0]``."""
        return wait_delay(*self.wait(rates_per_s), points)


def _halfin_whitt(
    lt: FloatArray, tau_s: FloatArray, factor: FloatArray, held: KvFootprint, kv_capacity_tokens: float
) -> tuple[FloatArray, FloatArray]:
    """``(P_w, E[W | W > 0])`` of the module docstring at λτ̄ = ``lt``, τ̄ = ``tau_s`` and the feedback factor F =
    ``factor`` (each per rate): β = (M_kv − λτ̄W)/√(λτ̄·Σf²·F), P_w = [1 + βΦ(β)/φ(β)]⁻¹, and the Allen–Cunneen
    mean ``(1 + c_s²)/2 · W τ̄/(M_kv − λτ̄W)``."""
    sd = np.sqrt(lt * held.square_sum * factor)
    free = kv_capacity_tokens - lt * held.work
    return _waiting_probability(free / sd), (1.0 + held.scv) / 2.0 * held.work * tau_s / free


def _waiting_probability(beta: FloatArray) -> FloatArray:
    """Halfin–Whitt's ``P_w = [1 + βΦ(β)/φ(β)]⁻¹``; βΦ(β)/φ(β) = β √(2π) exp(β²/2 + log Φ(β)), in logs so that
    exp(β²/2) does not overflow before the ratio is formed; a margin so wide that β·e^700 still overflows gives the
    ratio +inf and P_w 0, as it should (the overflow is not reported)."""
    with np.errstate(over="ignore"):
        ratio = beta * np.sqrt(2.0 * np.pi) * np.exp(np.minimum(beta**2 / 2.0 + log_ndtr(beta), 700.0))
    return np.asarray(1.0 / (1.0 + ratio), dtype=np.float64)


def wait_delay(prob: FloatArray, cond: FloatArray, points: int = ADMISSION_POINTS) -> BinDelay:
    """An admission wait ``(P_w, E[W | W > 0])`` per rate as a one-bin :class:`BinDelay`: an atom ``1 − P_w`` at 0
    and ``points`` band quantiles of the exponential of mean ``E[W | W > 0]``."""
    mids, widths = tail_bands(points)
    pts = np.concatenate((np.zeros((prob.size, 1)), -cond[:, None] * np.log1p(-mids[None, :])), axis=1)
    wts = np.concatenate(((1.0 - prob)[:, None], prob[:, None] * widths[None, :]), axis=1)
    return BinDelay(pts[:, None, :], wts[:, None, :])


@dataclass(frozen=True, slots=True)
class RidingKvAdmission:
    """A colocated instance's KV admission queue (*Colocated instances* in the module docstring): the fields of
    :class:`KvAdmission` plus p = ``prefill_s_per_request``, the prefill seconds per request riding the decode steps
    (u_p = λp), which stretch τ̄ and the load feedback. An ``on_demand`` engine (vLLM, *Preemption with recompute*)
    adds f = ``overflow_share``, the share of the pinned pool's growth that overruns, and r =
    ``recompute_s_per_preemption``, the prefill seconds one preemption's recompute costs; its ``mean_rate_per_s`` is
    then the pinned limit λ_pin and its queue the pinned one. Both 0 for the engines that hold a request back."""

    cells: DecodeWorkload
    held: KvFootprint
    step: LinearStepTime
    kv_capacity_tokens: float
    comfort_rate_per_s: float
    mean_rate_per_s: float
    prefill_s_per_request: float
    overflow_share: float = 0.0
    recompute_s_per_preemption: float = 0.0
    recompute_in_occupancy: bool = False
    """The queue of an ``on_demand`` decode instance (:func:`pinned_decode_admission`): the Halfin–Whitt queue at
    the mean step its own preemptions' recompute stretches (:func:`_recompute_wait`) in place of the pinned one
    (:func:`_pinned_wait`, the colocated instance's)."""

    def tau_s(self, rates_per_s: FloatArray) -> FloatArray:
        """The colocated mean token interval ``τ̄ = t0/(1 − λ(per + p))`` per per-instance rate (no recompute)."""
        rates = np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64))
        return self._tau(rates, np.zeros(rates.size))

    def _tau(self, rates: FloatArray, preemptions: FloatArray) -> FloatArray:
        """``t0/(1 − λ(per + p + π r))`` per rate, π preemptions per request."""
        st, wl = self.step, self.cells
        per = st.per_request_s(wl) + self.prefill_s_per_request + preemptions * self.recompute_s_per_preemption
        return np.asarray(st.t0_s / (1.0 - rates * per), dtype=np.float64)

    def _band(self, rates: FloatArray) -> npt.NDArray[np.intp]:
        """Indices of the rates strictly between the comfortable and the mean limit."""
        return np.flatnonzero((rates > self.comfort_rate_per_s) & (rates < self.mean_rate_per_s))

    def feedback(self, rates: FloatArray) -> FloatArray:
        """F of the riding decodes per rate (:func:`~pdplan.queueing.linear_capacity.riding_feedback`, at u_p = λp)."""
        return np.array([riding_feedback(x, x * self.prefill_s_per_request, self.cells, self.step) for x in rates])

    def _queue(self, lam: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(P_w, E[W | W > 0])`` at per-instance rates ``lam`` below the mean limit (:func:`_halfin_whitt`; for
        ``on_demand`` the wait of a pinned pool, :func:`_pinned_wait`, or on a decode instance the queue at the step
        its recompute stretches, :func:`_recompute_wait`)."""
        tau = self.tau_s(lam)
        factor = self.feedback(lam)
        if self.overflow_share == 0.0:
            return _halfin_whitt(lam * tau, tau, factor, self.held, self.kv_capacity_tokens)
        if self.recompute_in_occupancy:
            return _recompute_wait(self, lam, factor)
        return _pinned_wait(lam, tau, factor, self.held, self.kv_capacity_tokens, self.mean_rate_per_s)

    def wait(self, rates_per_s: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(P_w, E[W | W > 0])`` per per-instance rate: zeros at or below the comfortable limit and at or past the
        mean one (the latter is refused by the deployment's limit)."""
        rates = np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64))
        prob, cond = np.zeros(rates.size), np.zeros(rates.size)
        beyond = self._band(rates)
        if beyond.size == 0:
            return prob, cond
        prob[beyond], cond[beyond] = self._queue(rates[beyond])
        return prob, cond

    def preemptions_per_request(self, rates_per_s: FloatArray) -> FloatArray:
        """π = f·P_w, the preemptions per request per per-instance rate (``on_demand``; 0 outside the band and for
        the engines that hold a request back)."""
        return self.overflow_share * self.wait(rates_per_s)[0]

    def recompute_s(self, rates_per_s: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(Δτ̄, π·pause)`` per per-instance rate (``on_demand``, module docstring): the stretch of the mean token
        interval by the recompute, ``t0/(1 − λ(per + p + π r)) − t0/(1 − λ(per + p))``, and a request's mean pause,
        π times a preempted request's wait at the head of the queue, the next completion of a full pool (1/λ_pin),
        and its recompute r; zeros outside the band and for the engines that hold a request back."""
        rates = np.atleast_1d(np.asarray(rates_per_s, dtype=np.float64))
        pre = self.preemptions_per_request(rates)
        stretch = self._tau(rates, pre) - self.tau_s(rates)
        return stretch, pre * (1.0 / self.mean_rate_per_s + self.recompute_s_per_preemption)

    def delay(self, rates_per_s: FloatArray, points: int = ADMISSION_POINTS) -> BinDelay:
        """The wait as a one-bin :class:`BinDelay` (as :meth:`KvAdmission.delay`)."""
        return wait_delay(*self.wait(rates_per_s), points)


def _pinned_wait(
    lam: FloatArray, tau_s: FloatArray, factor: FloatArray, held: KvFootprint, kv_capacity_tokens: float, pinned: float
) -> tuple[FloatArray, FloatArray]:
    """``(P_w, E[W | W > 0])`` of an ``on_demand`` pool (module docstring, *Preemption with recompute*): M/M/c whose
    queue beyond c a full pool drains at λ_pin = ``pinned``. M/M/c's P_w = P_c·cμ/(cμ − λ) (P_c the mass at c busy
    seats, the geometric queue beyond it); :func:`_halfin_whitt` gives P_w at the fluid cμ = λM_kv/K̄, so the pinned
    one is ``P_w · (λ_pin/(λ_pin − λ)) · ((M_kv − K̄)/M_kv)`` (at most 1), and E[W | W > 0] = (1 + c_s²)/2 ·
    1/(λ_pin − λ) (Allen–Cunneen)."""
    lt = lam * tau_s
    fluid, _ = _halfin_whitt(lt, tau_s, factor, held, kv_capacity_tokens)
    free = (kv_capacity_tokens - lt * held.work) / kv_capacity_tokens
    prob = np.minimum(fluid * pinned / (pinned - lam) * free, 1.0)
    return prob, (1.0 + held.scv) / 2.0 / (pinned - lam)


RECOMPUTE_GRID = 8
"""Cells of [0, 1] on which :func:`_recompute_wait` looks for the first sign change of HW(P) − P."""
RECOMPUTE_STEPS = 60
"""At most this many Illinois steps in that cell (:func:`_recompute_wait`); they stop at :data:`RECOMPUTE_XTOL`."""
RECOMPUTE_XTOL = 1e-13
"""The width in P_w at which the Illinois steps stop (or where |HW(P) − P| is below 1e-3 of it)."""


def _stretched_hw(queue: RidingKvAdmission, lam: FloatArray, factor: FloatArray, prob: FloatArray) -> tuple[
    FloatArray, FloatArray
]:  # fmt: skip
    """:func:`_halfin_whitt` at the mean step the recompute of π = f·``prob`` preemptions per request stretches,
    ``τ̄ = t0/(1 − λ(per + p + f·prob·r))`` (:func:`_recompute_wait`); the arrays broadcast."""
    st = queue.step
    per = st.per_request_s(queue.cells) + queue.prefill_s_per_request
    recompute = queue.overflow_share * queue.recompute_s_per_preemption
    tau = np.asarray(st.t0_s / (1.0 - lam * (per + recompute * prob)), dtype=np.float64)
    return _halfin_whitt(lam * tau, tau, factor, queue.held, queue.kv_capacity_tokens)


def _recompute_wait(queue: RidingKvAdmission, lam: FloatArray, factor: FloatArray) -> tuple[FloatArray, FloatArray]:
    """``(P_w, E[W | W > 0])`` of a disaggregated ``on_demand`` (vLLM) decode instance at per-instance rates ``lam``
    (module docstring, *A disaggregated decode instance*): the Halfin–Whitt queue of :func:`_halfin_whitt` at the mean
    step the instance's own recompute stretches, ``τ̄(P) = t0/(1 − λ(per + p + f·P·r))`` (π = f·P preemptions per
    request, each r seconds of prefill riding the steps, as :meth:`RidingKvAdmission.recompute_s` prices them), so K̄ =
    λτ̄(P)W (:func:`_stretched_hw`). P_w is the least fixed point of ``P = HW(P)`` (HW rises with P, so it is where the
    iteration P ← HW(P) from 0 ends: the pool's ordinary state, not a pinned one it might also hold): HW(0) ≥ 0, and at
    P = 1 K̄ < M_kv exactly where λ < λ_pin (λ_pin solves λτ̄(1)W = M_kv), so HW(1) < 1 and HW(P) − P changes sign on
    [0, 1] (a rate where it does not, HW(P) > P throughout, raises ValueError: no wait is invented). The first of
    :data:`RECOMPUTE_GRID` cells where it does is narrowed by the Illinois variant of regula falsi (Dowell and Jarratt
    1971, BIT 11: the retained end's value halved when it is kept twice), at most :data:`RECOMPUTE_STEPS` steps, to
    :data:`RECOMPUTE_XTOL` (two sign changes within one cell, 1/8 of P_w, would be missed). F is the load feedback at λ
    without the recompute (``factor``). Example (tests/unit/test_decode_recompute.py)."""
    rate, noise = lam[:, None], factor[:, None]

    def gap(prob: FloatArray) -> FloatArray:
        return _stretched_hw(queue, rate, noise, prob)[0] - prob

    grid = np.linspace(0.0, 1.0, RECOMPUTE_GRID + 1)[None, :]
    values = gap(grid)
    if not np.all(np.any(values <= 0.0, axis=1)):  # HW(P) > P throughout (β < 0 at P = 1): no fixed point
        raise ValueError(f"rates {lam} lie past the pinned limit {queue.mean_rate_per_s}: the queue has no fixed point")
    first = np.argmax(values <= 0.0, axis=1)  # HW(1) < 1: some cell ends at or below the diagonal
    rows = np.arange(lam.size)
    low, high = grid[0, np.maximum(first - 1, 0)][:, None], grid[0, first][:, None]
    f_low, f_high = values[rows, np.maximum(first - 1, 0)][:, None], values[rows, first][:, None]
    kept = np.zeros((lam.size, 1), dtype=np.int8)  # +1: low was kept last step, −1: high
    best, f_best = high.copy(), f_high.copy()  # the point of least |HW(P) − P| so far (true values)
    for _ in range(RECOMPUTE_STEPS):
        if np.all((high - low <= RECOMPUTE_XTOL) | (np.abs(f_best) <= RECOMPUTE_XTOL * 1e-3)):
            break
        span = f_low - f_high
        mid = np.where(span > 0.0, (low * f_high - high * f_low) / np.where(span > 0.0, -span, 1.0), low)
        mid = np.clip(mid, low, high)
        f_mid = gap(mid)
        closer = np.abs(f_mid) < np.abs(f_best)
        best, f_best = np.where(closer, mid, best), np.where(closer, f_mid, f_best)
        up = f_mid > 0.0  # the fixed point lies above mid
        f_high = np.where(up & (kept == -1), f_high / 2.0, f_high)
        f_low = np.where(~up & (kept == 1), f_low / 2.0, f_low)
        low, f_low = np.where(up, mid, low), np.where(up, f_mid, f_low)
        high, f_high = np.where(up, high, mid), np.where(up, f_high, f_mid)
        kept = np.where(up, -1, 1).astype(np.int8)
    prob, cond = _stretched_hw(queue, rate, noise, best)
    return prob[:, 0], cond[:, 0]


def pinned_comfort_rate(admission: RidingKvAdmission, p99_rate_per_s: float) -> float:
    """The per-instance rate below ``p99_rate_per_s`` where an ``on_demand`` queue's P_w (:func:`_pinned_wait`) is the
    one the P99 rule allows, Halfin–Whitt's at β = z₉₉ (0.011), by brentq on (0, p99] to 1e-12 relative (P_w rises
    with λ from 0 at λ → 0, where β → ∞): the P99 bound where P_w is below it there, so that the wait starts at 0.011
    instead of jumping at the bound (module docstring). On a decode instance (:func:`_recompute_wait`) P_w is that
    0.011 where it is a fixed point, HW(0.011) = 0.011 at the step 0.011·f preemptions per request stretch: one
    equation in λ (:func:`_stretched_hw`), no inner search."""
    target = float(_waiting_probability(np.array([Z99]))[0])

    def excess(lam: float) -> float:
        rate = np.array([lam])
        if admission.recompute_in_occupancy:
            prob = _stretched_hw(admission, rate, admission.feedback(rate), np.array([target]))[0]
            return float(prob[0]) - target
        return float(admission._queue(rate)[0][0]) - target  # the pinned queue's P_w (overflow_share > 0)

    top = excess(p99_rate_per_s)
    if top <= 0.0:
        return p99_rate_per_s
    return brentq(excess, 0.0, p99_rate_per_s, xtol=1e-15, rtol=1e-12, f_a=-target, f_b=top)


def recompute_tokens(cells: DecodeWorkload, state_tokens_per_seq: float) -> tuple[float, float, float]:
    """``(f, c̄, ℓ)`` of an ``on_demand`` pool (module docstring, *Preemption with recompute*): the waiting head's need
    ℓ = E[L] + s (the victim, the newest admitted, holds about as much), the pinned pool's overflow share f at ℓ
    (:func:`pinned_overflow_share`) and the tokens one preemption's recompute computes, c̄ = min(ℓ, E[n]) (prefix
    caching keeps the victim's head blocks that the growth did not take). Example: E[L] = 600, s = 0, E[n] = 400:
    ℓ = 600, f = 0.518, c̄ = 400."""
    context = float(cells.prob @ cells.input_tokens) + state_tokens_per_seq
    return pinned_overflow_share(context, cells.mean_steps), min(context, cells.mean_steps), context


def pinned_batch(held: KvFootprint, cells: DecodeWorkload, kv_capacity_tokens: float) -> float:
    """N̄ of a pool pinned full: λτ̄W = M_kv there, so λτ̄ = M_kv/W and N̄ = λτ̄E[n] = M_kv·E[n]/W sequences in a step
    (whatever the rate that pins it). Example: M_kv = 100,000, W = 50,000 token·steps, E[n] = 100: N̄ = 200."""
    return kv_capacity_tokens * cells.mean_steps / held.work


def pinned_decode_admission(
    cells: DecodeWorkload,
    held: KvFootprint,
    step: LinearStepTime,
    kv_capacity_tokens: float,
    comfort_rate_per_s: float,
    overflow_share: float,
    recompute_s_per_preemption: float,
) -> RidingKvAdmission:
    """A disaggregated ``on_demand`` (vLLM) decode instance's queue (module docstring, *A disaggregated decode
    instance*): :class:`RidingKvAdmission` with no riding prefill (p = 0), f = ``overflow_share``, r =
    ``recompute_s_per_preemption`` and the queue at the step its recompute stretches (:func:`_recompute_wait`); stable
    to the pinned limit λ_pin = M/(t0 W + M(per + f r)) where that lies above the P99 bound ``comfort_rate_per_s``,
    comfortable where its P_w is the P99 rule's (:func:`pinned_comfort_rate`); else the P99 bound stays its limit and
    nothing waits. Example (tests/unit/test_decode_recompute.py): t0 = 10 ms, per = 1 ms, W = 100, M = 2,000, f = 0.5,
    r = 1 ms: λ_pin = 2,000/(1 + 2,000 · 1.5 ms) = 500 /s."""
    pinned = kv_mean_rate(cells, held, step, kv_capacity_tokens, overflow_share * recompute_s_per_preemption)
    queue = RidingKvAdmission(
        cells, held, step, kv_capacity_tokens, comfort_rate_per_s, pinned, 0.0, overflow_share,
        recompute_s_per_preemption, recompute_in_occupancy=True,
    )  # fmt: skip
    if pinned <= comfort_rate_per_s:  # a full pool serves less than the P99 bound: it stays the limit
        return dataclasses.replace(queue, mean_rate_per_s=comfort_rate_per_s)
    return dataclasses.replace(queue, comfort_rate_per_s=pinned_comfort_rate(queue, comfort_rate_per_s))


def pinned_overflow_share(context_tokens: float, mean_steps: float) -> float:
    """f = (1 − e^{−x})/x with x = ℓ/E[n] (module docstring, *Preemption with recompute*): the chance that the
    decode batch's growth between two completions of a pinned pool outruns the room the greedy admission left, a
    uniform residual on [0, ℓ) (ℓ = ``context_tokens``, the waiting head's need), when the growth between completions
    is exponential with mean E[n] = ``mean_steps`` tokens. Example: ℓ = E[n]: f = 1 − 1/e = 0.632; ℓ = 600,
    E[n] = 400: x = 1.5, f = (1 − e^{−1.5})/1.5 = 0.518."""
    if context_tokens <= 0.0 or mean_steps <= 0.0:
        raise ValueError(f"need a positive context and step count, got {context_tokens} and {mean_steps}")
    x = context_tokens / mean_steps
    return float(-np.expm1(-x) / x)


def add_delays(first: BinDelay, second: BinDelay, points: int) -> BinDelay:
    """The sum of two independent per-bin delays, as an atom at 0 plus ``points`` band quantiles of its positive part
    (:func:`~pdplan.queueing.link_delay.tail_bands`, as the link delays are discretised); a bin axis of length 1
    broadcasts over the other's bins. Every pair of points is summed with its weights multiplied, then the pairs are
    sorted and each band's level read off their cumulative weight (the smallest sum reaching it)."""
    r = first.points_s.shape[0]
    bins = max(first.points_s.shape[1], second.points_s.shape[1])
    pairs = (r, bins, first.points_s.shape[2] * second.points_s.shape[2])
    pts = np.broadcast_to(
        first.points_s[:, :, :, None] + second.points_s[:, :, None, :],
        (r, bins, first.points_s.shape[2], second.points_s.shape[2]),
    ).reshape(pairs)
    wts = np.broadcast_to(
        first.weights[:, :, :, None] * second.weights[:, :, None, :],
        (r, bins, first.weights.shape[2], second.weights.shape[2]),
    ).reshape(pairs)
    order = np.argsort(pts, axis=2, kind="stable")
    pts = np.take_along_axis(pts, order, axis=2)
    wts = np.take_along_axis(wts, order, axis=2)
    atom = np.sum(np.where(pts <= 0.0, wts, 0.0), axis=2)
    cum = np.cumsum(wts, axis=2)
    mids, widths = tail_bands(points)
    levels = atom[:, :, None] + (1.0 - atom[:, :, None]) * mids[None, None, :]
    idx = np.minimum(np.sum(cum[:, :, None, :] < levels[:, :, :, None], axis=3), pairs[2] - 1)
    out_pts = np.concatenate((np.zeros((r, bins, 1)), np.take_along_axis(pts, idx, axis=2)), axis=2)
    out_wts = np.concatenate((atom[:, :, None], (1.0 - atom[:, :, None]) * widths[None, None, :]), axis=2)
    return BinDelay(out_pts, out_wts)
