"""One TTFT decomposition: the parts a request's time to first token is made of, and which model produces which part
under which convention (the table is docs/queueing.md §1.5).

A request's TTFT is the sum of

* ``queue_s`` — the wait for a prefill server (FCFS; for batched prefill the wait includes the batch beyond the
  prompt's own time; colocated: the wait for the instance's prompt queue);
* ``prefill_s`` — the prompt's own prefill pass (pipeline latency included; colocated chunked prefill: its chunks
  interleaved with the running decode steps);
* ``kv_transfer_s`` — the KV transfer left exposed after the prefill, plus the wait of a busy KV link
  (:mod:`pdplan.queueing.link_delay`; PrfaaS' remote path: the pipelined cross-datacenter transfer, the link's mean
  wait and one round trip);
* ``first_token_s`` — convention A (the decode instance streams token 1): the wait for the decode step in flight,
  ``(1 − e^{−N})·τ̄/2`` with N the sequences in flight (the instance is idle with probability ``e^{−N}``, M/G/∞
  occupancy seen at arrival, else the boundary is uniform over a step), and the first decode step τ̄:
  ``(1 + (1 − e^{−N})/2)·τ̄`` (:func:`first_token_s`). Convention B (the prefill instance streams token 1, as
  DistServe measures): 0 — the KV transfer and the step boundary then delay token 2, and the serving model spreads
  them over the request's TPOT instead;
* ``overlap_s`` — the overlap scheduler's extra steps: an engine that launches step s + 1 before it processes step
  s's output (vLLM ``async_scheduling``: ``EngineCore.step_with_batch_queue``; SGLang's overlap scheduler:
  ``Scheduler.event_loop_overlap`` processes the last batch's result after launching the next; TensorRT-LLM's overlap
  scheduler, which "introduces one extra decoding step") sends token 1 ``k = scheduling.overlap_extra_steps`` steps
  after the step that sampled it, k steps *of the instance that samples it* (:func:`overlap_s`): the decode
  instance's τ̄_d under convention A (disaggregated), the colocated instance's mean iteration (its mixed step;
  :mod:`pdplan.serving.colocated`). Under convention B the prefill instance streams token 1 and nothing is added
  (TensorRT-LLM's disaggregated recipes turn the overlap scheduler off on prefill workers, AIConfigurator's
  ``generator/rule_plugin/trtllm.rule``). On a plain decode instance the step is the mean-field mean, so the TTFT law
  shifts by the constant k·step at each rate (its percentiles too); where the next step may carry prompt work (a
  colocated instance; a PPD decode instance's appends, :func:`overlap_append_steps`) its law has several points whose
  mean is that step, coupled to the TTFT (:mod:`pdplan.serving.overlap_ttft`); k = 0 (vLLM 0.12, the kernel-only
  profile) adds nothing. Until 2026-12-07 only the closed-loop benchmark models (:mod:`pdplan.benchmark`) added it;
* ``request_overhead_s`` — the engine's host time per request outside the queues (API server, tokeniser, per-layer
  dispatch: :mod:`pdplan.serving.request_overhead`);
* ``cache_load_s`` — reading a request's cached prefix KV back from a storage tier (0 until the prefix cache is
  priced).

The disaggregated model's TTFT law is ``W_p ⊕ W_link ⊕ g_l`` per prompt bin (:class:`pdplan.queueing.ttft_mixture.
TtftMixture`); since a request's FCFS wait is independent of its own service under renewal arrivals (Poisson or the
workload's other processes, :mod:`pdplan.queueing.arrivals`),
``P(TTFT ≤ a | l) = E_{W_link | l}[F_{W_p}(a − g_l − W_link)]`` with the outer expectation over a discretised link delay
per bin (its atom plus ``LINK_POINTS`` conditional quantile points). Percentiles come from the mixture cdf by brentq —
never by adding quantiles; :class:`TtftParts` holds the *means* of the parts, which add up to the mean TTFT.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.queueing import WaitDistribution
from pdplan.queueing.arrivals import gg_prefill_wait_distribution
from pdplan.specs.engine import EngineProfile
from pdplan.types import Convention, FloatArray, Mode

LINK_POINTS = 16
GRID_CELLS = 2**10
"""FFT lattice cells for waits in the serving model (queueing default 2^16): the grid still spans
≥ 30 conditional mean waits + max S (docs/queueing.md §1.2(1) sizing) with a coarser step, read by linear
interpolation. Against 2^13 on the five examples and two colocated variants (goodput, TTFT/TPOT
mean/P50/P90/P99 at 60 % of the limit) the largest relative change is 6.4e−4, at 1/8 the cost."""

CONVENTION_WORDS: dict[Convention, str] = {
    "A": "A: TTFT = prefill wait + prefill + KV transfer + decode step boundary + first decode "
    "step (decode streams token 1)",
    "B": "B: TTFT = prefill wait + prefill (prefill streams token 1, as DistServe)",
}
COLOCATED_WORDS = "colocated: TTFT = wait + prefill on the same instance"


@dataclass(frozen=True, slots=True)
class TtftParts:
    """The mean TTFT of a class of requests split into its parts (seconds; module docstring)."""

    queue_s: float
    prefill_s: float
    kv_transfer_s: float
    first_token_s: float
    request_overhead_s: float
    cache_load_s: float = 0.0
    overlap_s: float = 0.0

    @property
    def total_s(self) -> float:
        """The mean TTFT: the sum of the parts."""
        return self.prefill_side_s + self.decode_side_s

    @property
    def prefill_side_s(self) -> float:
        """Arrival to the end of the prompt's prefill: engine overhead, cache load, queue and prefill."""
        return self.request_overhead_s + self.cache_load_s + self.queue_s + self.prefill_s

    @property
    def decode_side_s(self) -> float:
        """The end of the prefill to token 1: exposed KV transfer, the first decode step (convention A) and the
        overlap scheduler's extra steps."""
        return self.kv_transfer_s + self.first_token_s + self.overlap_s


def first_token_s(convention: Convention, tau_s: FloatArray, busy_prob: FloatArray | float) -> FloatArray:
    """The decode side's part of TTFT after the KV has arrived: convention A ``(1 + busy/2)·τ̄`` (the step in flight,
    uniform over a step when the instance is busy, then the first step); B 0 (token 1 comes from the prefill)."""
    tau = np.asarray(tau_s, dtype=np.float64)
    if convention == "B":
        return np.zeros_like(tau)
    return np.asarray((1.0 + 0.5 * np.asarray(busy_prob, dtype=np.float64)) * tau, dtype=np.float64)


def overlap_steps(engine: EngineProfile | None) -> float:
    """k: the steps the engine's overlap scheduler adds to token 1 (``scheduling.overlap_extra_steps``; 0 without an
    engine profile, kernel time only)."""
    return 0.0 if engine is None else float(engine.scheduling.overlap_extra_steps)


def overlap_s(steps: float, step_s: FloatArray) -> FloatArray:
    """The overlap scheduler's part of TTFT, ``k·step`` (module docstring): ``steps`` = k of :func:`overlap_steps`,
    ``step_s`` the mean step of the instance that samples token 1, per rate."""
    return np.asarray(steps * np.asarray(step_s, dtype=np.float64), dtype=np.float64)


def overlap_append_steps(steps: float, tau_s: FloatArray, rho_append: float) -> tuple[FloatArray, FloatArray]:
    """The overlap scheduler's extra iterations on a PPD decode instance (the appends of Turn 2+ share its steps,
    :mod:`pdplan.serving.ppd_boundary`), as two points ``[R, 2]`` of ``k`` steps each and their weights: a plain step
    τ_p = (1 − ρ_a)·τ' with probability 1 − ρ_a, a step carrying append work τ_p + τ' with probability ρ_a.

    Which step: the one after token 1's sampling step, which carries append work where an append is queued or in
    progress at its start. The decode instance spends the share ρ_a = λ_a·E[w] of its time on append work (the
    stretch τ' = τ_p/(1 − ρ_a) of :mod:`pdplan.serving.ppd`), and takes that share as the probability: the simulator's
    share of next steps carrying an append, 0.27–0.30 against ρ_a 0.27–0.30 on the agent example (docs/prefix_cache.md
    §11), where the share of steps by count, ``1 − e^{−λ_a τ'}`` (0.14), is that of a step at a random boundary, not
    after one carrying the own append. The mixed step's length follows from the mean: a step boundary at the end of a
    step is followed by a step of mean τ' (the stationary sequence's, :mod:`pdplan.serving.ppd_boundary` *Steps*), so
    ``(1 − ρ_a)·τ_p + ρ_a·τ_m = τ'`` gives ``τ_m = τ_p + τ'`` (the append work of a mixed step, τ', a mean chunk's
    work; the simulator's ~68 ms against τ_p + τ' = 57 ms there). The mean, k·τ', is :func:`overlap_s`'s; with
    ρ_a = 0 both points are τ' (plain disaggregation). The k steps are taken alike (k = 1 in every profile)."""
    tau = np.asarray(tau_s, dtype=np.float64)
    rho = min(max(rho_append, 0.0), 1.0)
    plain = (1.0 - rho) * tau
    points = steps * np.stack((plain, plain + tau), axis=1)
    weights = np.broadcast_to(np.array([1.0 - rho, rho]), points.shape)
    return np.asarray(points, dtype=np.float64), np.asarray(weights, dtype=np.float64)


def step_boundary_s(busy_prob: float, tau_s: float) -> float:
    """The mean wait for the decode step in flight: ``busy · τ/2`` (a busy instance's boundary is uniform over a
    step; the benchmark loop's form, :mod:`pdplan.benchmark.disaggregated_loop`)."""
    return busy_prob * tau_s / 2.0


def convention_words(mode: Mode, convention: Convention) -> str:
    """The TTFT convention of a deployment, in words (disaggregated: the scenario's; colocated: one instance does
    both)."""
    return CONVENTION_WORDS[convention] if mode == "disaggregated" else COLOCATED_WORDS


def prefill_wait(
    policy: str,
    rates: FloatArray,
    service_s: FloatArray,
    prob: FloatArray,
    instances: int,
    max_cells: int = GRID_CELLS,
    arrival_ca2: float = 1.0,
) -> WaitDistribution:
    """:func:`pdplan.queueing.prefill_wait_distribution` on a ``max_cells`` lattice (random →
    M/G/1 at λ/x; round-robin → Kingman-rescaled M/G/1; least-work → Erlang-C × M/G/1 on S/x), for arrivals whose
    gaps have squared coefficient of variation ``arrival_ca2``: 1 (Poisson) is that law itself, any other value
    its G/G correction for the c² each instance sees (:func:`pdplan.queueing.arrivals.gg_prefill_wait_distribution`)."""
    return gg_prefill_wait_distribution(policy, rates, service_s, prob, instances, arrival_ca2, max_cells=max_cells)
