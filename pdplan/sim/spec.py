"""Inputs of the discrete-event simulator: plain arrays and callables, validated once.

The simulator knows nothing about GPUs, models or specs: the caller (the serving layer, a test, a
notebook) computes per-request service times and passes step-time callables, so the DES can replay
exactly what the analytic model predicts (docs/queueing.md §5.4).

Request ``i`` is described by ``input_tokens[i]`` (prompt length l) and ``output_tokens[i]`` (≥ 1).
Every per-request array below is indexed by the request id ``i``; in closed-loop mode requests are
issued in index order.

Decode-step accounting (docs/queueing.md notation, n = decode steps):

* convention ``"B"`` (prefill emits token 1, DistServe): ``n = output_tokens − 1``; a request with
  one output token never enters decode.
* convention ``"A"`` (first token streamed by the decode instance, docs/queueing.md §1.5):
  ``n = output_tokens``; its first step emits token 1.
* colocated: the iteration that completes the prefill emits token 1, then ``n = output_tokens − 1``.

A sequence admitted to a decode batch at step s with prompt l holds context ``l + j`` at its j-th step
(j = 0 … n−1), so the batch context is ``K = Σ (l_i + s − s_admit_i)`` (docs/queueing.md §2.2).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
from numpy.typing import ArrayLike

from pdplan.errors import SpecError
from pdplan.sim.pd_decode_rule import PdDecodeAdmission
from pdplan.sim.ratio_admission import RatioAdmission
from pdplan.types import FloatArray
from pdplan.types import Int64Array as IntArray

StepTimeFn = Callable[[FloatArray, FloatArray], FloatArray]
"""``decode_step_s(batch_size[m], total_context_tokens[m]) -> seconds[m]`` (vectorised)."""
BatchPrefillFn = Callable[[float, float], float]
"""``prefill_batch_time_s(total_tokens, sum_sq_tokens) -> seconds`` for one prefill batch."""
ChunkTimeFn = Callable[[FloatArray, FloatArray, float], FloatArray]
"""``chunk_time_s(chunk_tokens[m], context_before_chunk[m], decode_tokens) -> seconds[m]`` (vectorised): the pieces
of one iteration that also runs ``decode_tokens`` decoding sequences (0: a prefill-only iteration)."""


@dataclass(frozen=True, slots=True)
class PrefillStart:
    """What a request's prefill costs on the instance where it starts (the answer of a :data:`StartFn`)."""

    service_s: float
    """The prefill's time on the instance, cache loads included (one-prompt prefill pools, prefill-first)."""
    cached_tokens: int = 0
    """Prompt tokens the instance already holds (chunked prefill computes only the rest)."""
    load_s: float = 0.0
    """Exposed time to load the cached tokens from slower tiers (chunked prefill: the iteration that starts the
    request waits for it)."""


StartFn = Callable[[int, int, float], PrefillStart]
"""``start(request, instance, now_s)``: called once, when ``request``'s prefill starts on ``instance`` (a prefix
cache answers here what the instance holds, :mod:`pdplan.sim.reuse`)."""


class RequestEvents(Protocol):
    """Listens to requests' progress (:func:`pdplan.sim.event_loop.simulate_events`): a prefix cache inserts a
    prompt's blocks when its prefill ends; a session issues its next turn when a turn finishes."""

    def prefill_done(self, request: int, instance: int, now_s: float) -> None:
        """``request``'s prefill ended on prefill (or colocated) ``instance`` at ``now_s``."""

    def finished(self, request: int, now_s: float) -> tuple[int, float] | None:
        """``request``'s last token at ``now_s``; returns (request, arrival time) of a request this releases."""


PrefillRouting = Literal["random", "round-robin", "least-work", "least-loaded", "power-of-two"]
DecodeRouting = Literal["random", "round-robin", "least-work", "power-of-two"]
ColocatedRouting = Literal["random", "least-work"]
Scheduler = Literal["prefill-first", "chunked"]
Convention = Literal["A", "B"]
PREFILL_ROUTINGS: tuple[str, ...] = ("random", "round-robin", "least-work", "least-loaded", "power-of-two")
DECODE_ROUTINGS: tuple[str, ...] = ("random", "round-robin", "least-work", "power-of-two")
COLOCATED_ROUTINGS: tuple[str, ...] = ("random", "least-work")
SCHEDULERS: tuple[str, ...] = ("prefill-first", "chunked")


def poisson_arrivals(rate_per_s: float, n: int, rng: np.random.Generator, start_s: float = 0.0) -> FloatArray:
    """Arrival times [n] of a Poisson process: ``start_s + cumsum(Exp(1/rate))``.

    Example: ``poisson_arrivals(2.0, 3, np.random.default_rng(0))`` → three increasing times whose
    gaps have mean 0.5 s.
    """
    if not (math.isfinite(rate_per_s) and rate_per_s > 0):
        raise SpecError(f"rate_per_s must be finite and > 0, got {rate_per_s}")
    if n < 0:
        raise SpecError(f"n must be >= 0, got {n}")
    gaps = rng.exponential(1.0 / rate_per_s, size=n)
    return np.asarray(start_s + np.cumsum(gaps), dtype=np.float64)


def as_times(values: ArrayLike, n: int, name: str) -> FloatArray:
    """A finite, non-negative float64 array of length n (a scalar is broadcast)."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        arr = np.full(n, float(arr))
    if arr.shape != (n,):
        raise SpecError(f"{name} must have shape ({n},), got {arr.shape}")
    if not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise SpecError(f"{name} must be finite and >= 0")
    return arr


def as_tokens(values: ArrayLike, name: str, minimum: int) -> IntArray:
    """A 1-D int64 array of token counts, each ≥ ``minimum``."""
    raw = np.asarray(values)
    if raw.ndim != 1 or raw.size == 0:
        raise SpecError(f"{name} must be a non-empty 1-D array")
    arr = raw.astype(np.int64)
    if not np.array_equal(arr, raw) or np.any(arr < minimum):
        raise SpecError(f"{name} must be integers >= {minimum}")
    return arr


@dataclass(frozen=True, slots=True)
class Requests:
    """Prompt and output lengths of N requests (token counts)."""

    input_tokens: IntArray
    output_tokens: IntArray

    @staticmethod
    def of(input_tokens: ArrayLike, output_tokens: ArrayLike) -> Requests:
        """Validated constructor: equal lengths, prompts ≥ 1 token, outputs ≥ 1 token."""
        inp = as_tokens(input_tokens, "input_tokens", 1)
        out = as_tokens(output_tokens, "output_tokens", 1)
        if inp.shape != out.shape:
            raise SpecError("input_tokens and output_tokens must have the same length")
        return Requests(inp, out)

    @property
    def count(self) -> int:
        """Number of requests N."""
        return int(self.input_tokens.size)


@dataclass(frozen=True, slots=True)
class PrefillPool:
    """x prefill instances, each FCFS on its own queue (see :mod:`pdplan.sim.prefill`).

    Give either ``service_s`` (per-request prefill time [N], one prompt at a time) or
    ``batch_time_s`` (batched prefill: an idle instance takes the FCFS head requests whose token
    sum fits ``max_batch_tokens`` — at least one — and all finish together after
    ``batch_time_s(Σl, Σl²)``), or ``start`` (one prompt at a time, its time asked of ``start`` when it starts on
    an instance: :class:`pdplan.sim.prefill.DispatchedPrefill`). ``routes`` [N] pins each request to an instance
    (session or prefix affinity), replacing ``routing``.
    """

    instances: int
    routing: PrefillRouting = "least-work"
    service_s: ArrayLike | None = None
    batch_time_s: BatchPrefillFn | None = None
    max_batch_tokens: int = 8192
    start: StartFn | None = None
    routes: ArrayLike | None = None


@dataclass(frozen=True, slots=True)
class DecodeRecompute:
    """What a decode instance that preempts with recompute (vLLM's, :mod:`pdplan.sim.preempt_decode`) prices its
    recompute with."""

    chunk_s: ChunkTimeFn
    """Prefill pieces' time on the decode instance (:class:`pdplan.sim.deployment.SimChunkPrice` of its hardware)."""
    budget_tokens: int
    """Tokens one iteration may carry (decodes and recompute pieces): the engine's ``max_num_batched_tokens``."""
    hits: bool = True
    """Prefix caching (vLLM V1's default): a victim's blocks left in the free block queue are hits at its
    readmission (:mod:`pdplan.sim.recompute_hits`)."""


@dataclass(frozen=True, slots=True)
class DecodePool:
    """y decode instances with continuous batching (see :mod:`pdplan.sim.decode`).

    ``max_batch`` seats per instance; ``kv_capacity_tokens`` KV slots per instance (admission
    reserves ``l + n`` tokens, the sequence's final context, unless ``pd_admission`` gives the engine's own
    rule). ``routing`` picks the decode instance when a prefill ends (:mod:`pdplan.sim.event_loop`): ``"random"``
    (uniform, pre-drawn per request),
    ``"round-robin"`` (in prefill-completion order) or ``"least-work"`` (fewest requests routed
    there and not finished: join-the-shortest-queue by count).
    """

    instances: int
    step_time_s: StepTimeFn
    max_batch: int = 256
    kv_capacity_tokens: float = math.inf
    routing: DecodeRouting = "least-work"
    state_tokens_per_seq: float = 0.0
    """KV token slots each sequence's fixed state takes on top of ``l + n`` (hybrid / sliding-window models,
    :mod:`pdplan.perf.memory`)."""
    window_tokens: float | None = None
    """Every layer windowed (:attr:`pdplan.specs.model.ModelSpec.kv_window_tokens`): a sequence holds and reads
    min(l + j, w) tokens, so it reserves min(l + n, w) + s and the step's K is the windowed sum
    (:class:`pdplan.sim.batch.ActiveSet`). None: no cap."""
    overlap_steps: int = 0
    """Convention A: iterations token 1 waits behind the step that sampled it (the engine's overlap scheduler,
    ``scheduling.overlap_extra_steps``, :mod:`pdplan.sim.overlap_lag`); 0: out at that step's end."""
    pd_admission: PdDecodeAdmission | None = None
    """SGLang's decode server rule instead of the reservation: the pool holds the growing context, a request is
    admitted against the free KV less R for every request held, and the least-decoded request is retracted when a
    step does not fit, the instance stalling while its KV goes to host memory and comes back (its
    ``host_copy_s_per_token``, :mod:`pdplan.sim.pd_decode_rule`, the profile's ``pd_decode_reserved_tokens``); None:
    every request reserves min(l + n, w) + s at admission (:mod:`pdplan.sim.decode`)."""
    recompute: DecodeRecompute | None = None
    """vLLM's rule instead of the reservation: the pool holds the growing context and the newest running request is
    preempted and recomputed on the instance when a step does not fit (:mod:`pdplan.sim.preempt_decode`); None:
    the reservation (or ``pd_admission``)."""


@dataclass(frozen=True, slots=True)
class KvTransfer:
    """KV transfer prefill → decode: latency ``time_s`` [N] from transfer start to "KV ready".

    Each instance's NICs are one FIFO resource, taken in prefill-completion order. With
    ``link_busy_s`` [N] (latency + bytes/BW on the decode side) the decode instance's inbound link
    is held that long per request; with ``prefill_link_busy_s`` [N] the serving prefill
    instance's outbound link likewise. A transfer starts when the prefill ends and every modelled
    link is free (start = max(prefill done − ``stream_lead_s``, link(s) free)), holds each for its
    busy time, and the KV is ready at ``max(done + time_s, start + stream_s)``. Overlapped
    granularities (layer, chunk) stream while the prefill runs: ``stream_lead_s`` is how long
    before the prefill ends the stream may start (:attr:`pdplan.transfer.kv.TransferResult.overlap_s`
    less any pipeline-parallel pass latency) and ``stream_s`` the whole transfer; by default
    (lead 0, stream = time) start = max(done, links free) and ready = start + time. Without
    either link, ready = done + time.
    """

    time_s: ArrayLike
    link_busy_s: ArrayLike | None = None
    prefill_link_busy_s: ArrayLike | None = None
    stream_lead_s: ArrayLike | None = None
    stream_s: ArrayLike | None = None


@dataclass(frozen=True, slots=True)
class Disaggregated:
    """A disaggregated deployment: prefill pool → KV transfer → decode pool."""

    prefill: PrefillPool
    decode: DecodePool
    transfer: KvTransfer | None = None
    convention: Convention = "A"


@dataclass(frozen=True, slots=True)
class Colocated:
    """z colocated instances (see :mod:`pdplan.sim.colocated_instance`).

    ``"prefill-first"`` needs ``prefill_service_s`` [N] or ``start``; ``"chunked"`` needs ``token_budget`` C
    (> ``max_batch``) and ``chunk_time_s``. ``start`` (:data:`StartFn`) is asked when a request's prefill starts:
    prefill-first serves its ``service_s``; chunked computes only the tokens after ``cached_tokens`` and adds
    ``load_s`` to the iteration that starts it. ``routes`` [N] pins each request to an instance (affinity).
    """

    instances: int
    step_time_s: StepTimeFn
    scheduler: Scheduler = "chunked"
    routing: ColocatedRouting = "least-work"
    max_batch: int = 256
    kv_capacity_tokens: float = math.inf
    prefill_service_s: ArrayLike | None = None
    token_budget: int = 2048
    chunk_time_s: ChunkTimeFn | None = None
    state_tokens_per_seq: float = 0.0  # as DecodePool's
    window_tokens: float | None = None  # as DecodePool's
    mixed: bool = True
    """``"chunked"`` only: False runs prefill chunks in steps of their own (up to the whole budget) while the decodes
    wait, as SGLang without ``enable_mixed_chunk``; True puts them beside the decodes (decode-first)."""
    start: StartFn | None = None
    routes: ArrayLike | None = None
    reserve_kv: bool = True
    """True: a request reserves its final footprint min(l + n, w) + s when its prefill starts (TensorRT-LLM
    ``GUARANTEED_NO_EVICT``); False (``"chunked"`` only): its prompt's, then one token per decode step, the latest
    admitted decode preempted and recomputed when the pool runs out (vLLM V1; :mod:`pdplan.sim.colocated_instance`)."""
    ratio_admission: RatioAdmission | None = None
    """With ``reserve_kv=False``: SGLang's rule instead of vLLM's, admission against the running requests'
    ratio-weighted remaining output and retraction of the least-decoded request to the queue's tail
    (:mod:`pdplan.sim.ratio_admission`); None = vLLM's."""
    overlap_steps: int = 0
    """Iterations token 1 waits behind the iteration that sampled it: the engine's overlap scheduler
    (``scheduling.overlap_extra_steps``, :mod:`pdplan.sim.overlap_lag`); 0: out at that iteration's end."""
    recompute_hits: bool = False
    """vLLM's rule with prefix caching (V1's default): a preempted request readmitted finds the prefix of its context
    that the pool's allocations did not take in between and recomputes the rest (:mod:`pdplan.sim.recompute_hits`);
    False: it recomputes its whole context."""


Deployment = Disaggregated | Colocated


def check_count(value: int, name: str) -> None:
    """Raise SpecError unless value is an int ≥ 1."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
        raise SpecError(f"{name} must be an integer >= 1, got {value!r}")


def check_step_fn(fn: StepTimeFn, max_batch: int, kv_capacity: float, name: str) -> None:
    """Probe a vectorised step-time callable: shape-preserving, finite and > 0."""
    top = min(kv_capacity, 1e7)
    batch = np.array([1.0, float(max_batch), float(max_batch)])
    context = np.array([1.0, 1.0, top])
    out = np.asarray(fn(batch, context), dtype=np.float64)
    if out.shape != (3,) or not np.all(np.isfinite(out)) or np.any(out <= 0):
        raise SpecError(f"{name} must map arrays [m] to finite positive seconds [m]")


def largest_need_tokens(
    req: Requests, steps: IntArray, state: float = 0.0, window: float | None = None, reserved: float = 0.0
) -> float:
    """The most KV slots any one request needs on an empty instance: its final footprint min(l + n, w) + s, and with
    a decode server's R (``reserved``, SGLang's PD decode rule: :mod:`pdplan.sim.pd_decode_rule`) its prompt
    min(l, w) + R + s where that is more."""
    cap = np.inf if window is None else window  # a windowed sequence holds at most w
    top = np.minimum(req.input_tokens + steps, cap)
    if reserved > 0.0:
        top = np.maximum(top, np.minimum(req.input_tokens, cap) + reserved)
    return float(top.max()) + state


def check_capacity(
    req: Requests, steps: IntArray, max_batch: int, kv_cap: float, state: float = 0.0, window: float | None = None
) -> None:
    """Every request must fit an empty instance on its own (else it could never be admitted); ``state``: the slots
    of a sequence's fixed state (``state_tokens_per_seq``, >= 0); ``window``: the cap on a sequence's tokens
    (``window_tokens``, > 0 or None)."""
    check_count(max_batch, "max_batch")
    if not state >= 0.0:
        raise SpecError(f"state_tokens_per_seq must be >= 0, got {state!r}")
    if window is not None and not window > 0.0:
        raise SpecError(f"window_tokens must be > 0, got {window!r}")
    need = largest_need_tokens(req, steps, state, window)
    if not kv_cap > 0 or need > kv_cap:
        raise SpecError(
            f"kv_capacity_tokens={kv_cap} is smaller than the largest request footprint "
            f"(input + decode steps + state = {need:.0f})"
        )


def decode_steps(req: Requests, convention: str) -> IntArray:
    """Decode steps n per request: output − 1 (B, colocated) or output (A)."""
    if convention not in ("A", "B"):
        raise SpecError(f"convention must be 'A' or 'B', got {convention!r}")
    return req.output_tokens - (0 if convention == "A" else 1)
