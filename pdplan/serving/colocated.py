"""Colocated baseline: z instances each doing prefill and decode (docs/queueing.md §3).

Random routing splits λ evenly (λ_c = λ/z per instance). Per instance:

* ``prefill-first`` (vanilla vLLM): prefills stall decodes; TTFT = M/G/1 (with decode steps as
  vacations) on the batch-1 roofline prefill time S(l), each cell's at its prompt bin's quadrature lengths l_kj (the
  xPyD prefill pool's, :attr:`~pdplan.serving.resolve.ResolvedScenario.input_points`; with a prefix cache each
  point's missed tokens, as :mod:`~pdplan.serving.colocated_cache` prices them): the prompt queue's service law and
  each prompt's own prefill in TTFT, so the TTFT law has steps of p_c/J, not point masses p_c at the bins'
  representatives (*Lengths within a bin* of :mod:`pdplan.queueing.colocated_queue`); mean token interval t0/(1 − ρ_p −
  u_d), and per request the stall of its decode window, which starts at its own prefill departure
  while the prompt queue is still busy with probability ρ_p
  (:func:`pdplan.queueing.colocated_prefill_first`).
* ``chunked`` (Sarathi-Serve, token budget C = ``chunk_tokens``): prefill is served in chunks
  riding on decode steps (:func:`pdplan.queueing.colocated_chunked`), priced from the roofline at
  the width of the steps they ride in (:mod:`pdplan.queueing.chunk_width`, issue #23): c prompt tokens beside N
  decode tokens add ``G(N + c) − G(N)`` of the pass without attention (G tabulated up to the budget by
  :func:`pdplan.serving.roles.chunk_price`), at the mean field's N and the tokens of a step that carries a prompt, a
  fixed point with τ̄; a prompt's attention is that of its chunks over the context already
  prefilled (full chunks of C tokens and a last one of m_L), and that last chunk costs
  ``G(N + m_L) − G(N)`` on the GEMM side (the drain step of the chunk queue). Until issue #23 every prompt token cost
  the full-budget secant ``(G(C) − G(1))/(C − 1)`` and the last chunk ``G(m_L) − G(1)``. The price per request p(λ)
  moves with the rate, so the bounds below take it at each trial rate (:meth:`ColocatedModel.riding_s_per_request`).
  This used to be a fit ``S(l) ≈ a + b·l + c·l²`` to the workload's own prompt lengths (t_p = b, t_a = 2c),
  which for one fixed length returns (S, 0, 0): chunked prefill was free (opt-13b on an A100,
  512/64 tokens: 22.3 req/s where the prefill alone caps it at 16.7).

Decode step: the same linearised roofline τ = t0 + t1·B + t2·K as the disaggregated decode pool.
Stability limit: total utilisation u_d + u_p ≤ 0.85 (the range the TPOT model was validated on,
docs/queueing.md §6.3), the chunk-queue utilisation ρ ≤ 0.99 (chunked; drain-corrected,
:func:`pdplan.queueing.chunk_window.chunk_queue`), and the KV and seat bounds
``K̄ + z₀.₉₉ √(Var K) ≤ M_kv``, ``N + z₀.₉₉ √(N·F) ≤ max_num_seqs`` at the colocated τ̄, with Var K the §2.3
shot noise times the load-feedback factor F of §2.4 taken with the prefill riding every step: τ = t0 + t1·B + t2·K
+ u_p·τ stretches a step by a load excess over (1 − u_p), so the feedback gain is the decode one over (1 − u_p)
(:func:`pdplan.queueing.linear_capacity.riding_feedback`; F 2.8–3.6 near the OPT-13B colocated knee of
docs/accuracy.md §6, where Poisson scatter put the comfortable KV limit at 9.925 req/s, now 9.634). K counts the
footprint the engine's profile admits on (``scheduling.kv_admission``,
:func:`pdplan.queueing.kv_admission.admission_footprint`): vLLM holds its growing context L + s + j, TensorRT-LLM
(``GUARANTEED_NO_EVICT``) reserves L + s + n from admission, an extra E[n(n+1)/2] per sequence, and SGLang counts its
context plus a share r of the remaining output (``ratio``, :func:`~pdplan.queueing.kv_admission.kv_ratio_held`).
Past this P99 (comfortable) KV limit a request waits for KV admission, as the engine's own scheduler holds it back
(:class:`~pdplan.queueing.kv_admission.RidingKvAdmission`, the disaggregated decode's Halfin–Whitt queue with the
colocated τ̄ and load feedback): the wait delays token 1 (it adds to TTFT, before the prompt queue's wait and
independent of it), the plan is marked beyond its comfortable KV limit (JSON ``beyond_comfortable_kv_limit``, the
report's words of :data:`~pdplan.serving.limits.BEYOND_KV_COMFORT`), and only the mean (fluid) KV limit
``λ τ̄ W = M_kv`` is the stability limit ("decode KV capacity"). This holds for the engines that hold a request back
until its KV fits: ``reserve`` (TensorRT-LLM's ``GUARANTEED_NO_EVICT``) and ``ratio`` (SGLang's ``PrefillAdder``,
which turns requests away before a decode step runs out of KV). An ``on_demand`` engine (vLLM) admits on its
prompt's blocks and, when the growing contexts fill the pool, preempts the newest running request and recomputes its
context as a prompt (:mod:`pdplan.queueing.kv_admission`, *Preemption with recompute*): past its comfortable limit it
preempts π = f·P_w times per request (f the pinned pool's overflow share, P_w its admission queue's), each costing
the victim's context as prefill: its stability limit is the pinned limit λ_pin, the throughput of a pool pinned
throughout (f recomputes per request), where that lies above the P99 bound (else the P99 bound, as before), its
admission queue drained at λ_pin (comfortable where its P_w is the P99 rule's 0.011), the wait delays token 1, and
the recompute stretches τ̄ and pauses its victims (TPOT, mean shifts; docs/accuracy.md §6, *vLLM past its
comfortable KV limit*).
Seats alike (:meth:`ColocatedModel.seat_admission`, since 2026-12-07): past the P99 seat bound a request waits for a
seat (``max_num_seqs``; the same Halfin–Whitt band with one seat per request, :mod:`pdplan.queueing.kv_admission`
*Seats*), the plan is marked beyond its comfortable seat limit (JSON ``beyond_comfortable_seat_limit``), and the fluid
seat limit λτ̄E[n] = max_num_seqs is the stability limit ("decode seats"). A request past both comfortable limits
waits in the queue with the larger mean wait (:meth:`ColocatedModel.admission_wait`).
The overlap scheduler's extra steps (``scheduling.overlap_extra_steps`` = k, :mod:`pdplan.serving.ttft`): token 1 is
sampled by the iteration that ends the prompt and sent k iterations of the same instance later (:meth:`ColocatedModel.
overlap_step_law`, coupled to the request's own TTFT by :class:`~pdplan.serving.overlap_ttft.OverlapTtft`). A
departing prompt leaves its queue holding work with probability ρ, the queue's busy share of *time* (departures see
what arrivals see, PASTA), so the next iteration is length-biased, not the mean token interval τ̄. chunked
(:mod:`pdplan.queueing.chunk_window`): with probability ρ a step carrying prompt tokens, by count a full chunk step
(τ_c, ``n_c = (ρ − f_d)/τ_c`` a second) or a drain step (``n_d = f_d/τ_d``; since 2026-12-07 in slices of its law,
:func:`~pdplan.serving.overlap_ttft.chunk_step_law`), else a plain step τ_p = t0 + u_d τ̄; mean ``ρ τ_b + (1 − ρ)
τ_p``, τ_b = ρ/(n_c + n_d). SGLang's colocated chat on the default hardware (3 × TP4, chunk budget 8,192, prompts of
1,628 tokens on average: mostly drains): 41 / 61 / 104 ms at 0.3 / 0.5 / 0.8 of the limit against 41 / 66 / 139 ms
simulated (τ̄, 22 / 28 / 50 ms, averages per step; τ_c, 490 ms, is far too long; past half the limit a departing prompt
leaves work behind more often than ρ says, not modelled). prefill-first: another prompt's pass (probability ρ_p),
else a plain decode step of mean (1 − ρ_p)·τ̄: ``ρ_p E[S] + (1 − ρ_p)²·τ̄`` (38 / 52 / 73 ms, as simulated).
TTFT/TPOT attainment is taken as a product per cell (an approximation on one instance, §5.2).
One-token outputs have no TPOT (:func:`~pdplan.serving.cells.tpot_defined`): they are left
out of the TPOT percentiles and meet any TPOT threshold, as in the simulator and the disaggregated
model (they used to count as one-step requests, which for the coding workload put the busy time
their prompt leaves behind into the TPOT tail). When *every* output is one token there is no TPOT
at all: the snapshot's TPOT is then a point mass at 0 (no time after the only token, E2E = TTFT)
over all cells, met by any threshold (:func:`no_tpot`; an all-undefined mask left nothing to
normalise the TPOT percentiles over and ``--osl 1`` died on a NaN).

An instance with attention DP = D is D servers of this model (``z`` counts every rank of every instance), each with
its rank's step law, seats and KV (:mod:`pdplan.serving.colocated_dp`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from pdplan.numerics.bisection import bisect_rows
from pdplan.numerics.roots import brentq
from pdplan.queueing import DecodeWorkload, GammaMixture, colocated_distributions
from pdplan.queueing.arrivals import instance_ca2
from pdplan.queueing.chunk_width import GemmWidth, riding_mean_field
from pdplan.queueing.chunk_window import ChunkQueue, chunk_queue
from pdplan.queueing.colocated_queue import ColocatedResult
from pdplan.queueing.decode import kv_footprint
from pdplan.queueing.distributions import ShiftedMixture
from pdplan.queueing.kv_admission import (
    KvFootprint,
    RidingKvAdmission,
    admission_footprint,
    kv_mean_rate,
    pinned_comfort_rate,
    recompute_tokens,
    seat_held,
    wait_delay,
)
from pdplan.queueing.linear_capacity import riding_capacity
from pdplan.queueing.ttft_mixture import TtftMixture
from pdplan.serving.cells import tpot_defined
from pdplan.serving.limits import DECODE_U_MAX, PREFILL_RHO_MAX, Limit, cache_read_limit
from pdplan.serving.overlap_ttft import chunk_step_law, coupled
from pdplan.serving.request_overhead import DelayedTtft, request_delay_s
from pdplan.serving.resolve import ColocatedHardware, ResolvedScenario
from pdplan.serving.roles import DecodePerf
from pdplan.serving.snapshot import Snapshot, TtftLike
from pdplan.serving.ttft import GRID_CELLS, TtftParts, overlap_s, overlap_steps
from pdplan.types import Binding, FloatArray, IntArray, Utilisation

if TYPE_CHECKING:
    from pdplan.serving.prefix_cache import CacheClasses


@dataclass(frozen=True, slots=True)
class BoundRates:
    """Per-instance rates of a colocated instance's bounds (req/s): utilisation (``DECODE_U_MAX``), and at most that
    the P99 KV (the comfortable KV limit) and seat bounds."""

    utilisation_rate_per_s: float
    kv_rate_per_s: float
    seats_rate_per_s: float


@dataclass(frozen=True, slots=True)
class ColocatedModel:
    """A prepared colocated deployment; :meth:`snapshot` evaluates it at a batch of rates."""

    res: ResolvedScenario[ColocatedHardware]
    scheduler: str
    cells: DecodeWorkload
    prefill_point_s: FloatArray | None
    """prefill-first: ``[C, J]`` per cell, the batch-1 prefill of its prompt at each of its bin's J quadrature lengths
    (equal weights; with a prefix cache, of the point's missed tokens), seconds. None: not priced (a chunked model
    with a prefix cache, whose prompts ride the decode steps at the representative lengths:
    :mod:`~pdplan.serving.colocated_cache`, *Chunked models*)."""
    decode: DecodePerf
    prefill_s_per_token: float
    """t_p: seconds per chunk token (GEMM side, :func:`~pdplan.serving.roles.chunk_price`)."""
    attention_cell_s: FloatArray
    """Per cell: the causal attention of its prompt's chunks, seconds."""
    drain_cell_s: FloatArray
    """Per cell: g(m_L), the GEMM side of its prompt's last chunk alone, seconds."""
    z: int
    cache: CacheClasses | None = None
    """The prefix cache's classes per prompt bin (:mod:`pdplan.serving.prefix_cache`); None: every prompt new."""
    load_cell_s: FloatArray | None = None
    """With a prefix cache, per cell the exposed load of its hit tokens, a TTFT delay (:mod:`~pdplan.serving.
    colocated_cache`); chunked, at the bin's representative length."""
    defined: npt.NDArray[np.bool_] | None = None
    """With a prefix cache, the cells whose TPOT exists (the cells are split by class; None: the scenario's)."""
    cell_input_bin: IntArray | None = None
    """With a prefix cache, each cell's prompt bin (None: cell // output bins)."""
    plain: ColocatedModel | None = None
    """With a prefix cache, the same deployment's model without it: the cells, step model and chunk prices the hit
    rates do not change, reused by a model at another cache rate
    (:func:`pdplan.serving.colocated_build.build_colocated`)."""
    load_point_s: FloatArray | None = None
    """With a prefix cache, ``[C, J]`` the same at each of the cell's quadrature lengths (prefill-first)."""
    arrival_ca2: float = 1.0
    """c_a² of the arrival gaps; an instance sees their random z-way split (:mod:`pdplan.queueing.arrivals`)."""
    gemm_width: GemmWidth | None = None
    """chunked: G(n) up to the budget (:attr:`~pdplan.serving.roles.ChunkPrice.width`); the prompt tokens riding in a
    step are priced at its width, ``G(N + c) − G(N)`` (:mod:`pdplan.queueing.chunk_width`), not at t_p and
    :attr:`drain_cell_s`. None: at t_p and the drain prices (a model built by hand, the queue's tests)."""
    _memo: dict[str, BoundRates] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The per-instance utilisation, P99 KV and seat rates, solved once per model (:meth:`bound_rates`)."""
    _admission: dict[str, RidingKvAdmission] = field(default_factory=dict, init=False, repr=False, compare=False)
    """The instance's KV admission queue (an ``on_demand`` engine's with its pinned limit), solved once per model
    (:meth:`kv_admission`)."""
    _riding: dict[float, float] = field(default_factory=dict, init=False, repr=False, compare=False)
    """p(λ) per per-instance rate already priced (:meth:`riding_s_per_request`): the bounds' searches cross the same
    rates (λ_u is read again by the KV searches and the mean KV rate, each brentq root again by its caller)."""

    @property
    def prefill_cell_s(self) -> FloatArray:
        """prefill-first: per cell the mean of :attr:`prefill_point_s` over its points (its share of λE[S])."""
        if self.prefill_point_s is None:
            raise ValueError("this colocated model prices no quadrature points (a chunked model with a prefix cache)")
        return np.asarray(self.prefill_point_s.mean(axis=1), dtype=np.float64)

    def token_interval_s(self, lam: float) -> float:
        """Mean-field token interval τ̄ per instance at per-instance rate ``lam`` (§3)."""
        return self._tau(lam)

    def _tau(self, lam: float) -> float:
        """Mean-field token interval per instance at per-instance rate ``lam`` (§3)."""
        return self.decode.step.t0_s / max(1e-12, 1.0 - self._decode_share(lam) - self._u_prefill(lam))

    def _u_prefill(self, lam: float) -> float:
        return lam * self.riding_s_per_request(lam)

    def riding_s_per_request(self, lam: float) -> float:
        """p(λ): the prefill seconds per request riding the decode steps at per-instance rate ``lam`` (u_p = λ·p).
        prefill-first: E[S]; chunked: ``t_p E[L] + E[A]``, with a :attr:`gemm_width` t_p(λ) at the step's width
        (:func:`~pdplan.queueing.chunk_width.riding_mean_field`; past its stable range, at the edge N = C, so that p
        stays finite for the bounds that search over λ). Not monotone in general: a MoE's lone prompt reads every
        expert, a prompt beside a large decode batch only the GEMM work the batch has not paid. Kept per rate
        (:attr:`_riding`; a rate's mean field is the same doubles alone or among others, so the kept value is the one
        solving it again gives)."""
        lam = float(lam)
        if lam not in self._riding:
            self._riding_rows(np.array([lam]))
        return self._riding[lam]

    def _riding_rows(self, lams: FloatArray) -> FloatArray:
        """p(λ) (:meth:`riding_s_per_request`) at every per-instance rate of ``lams``, the rates not yet kept solved
        in one :func:`~pdplan.queueing.chunk_width.riding_mean_field` call (vectorised over rates, each row the
        doubles it has alone)."""
        keys = np.asarray(lams, dtype=np.float64).tolist()
        new = [x for x in dict.fromkeys(keys) if x not in self._riding]
        if new:
            self._riding.update(zip(new, self._price_rows(np.array(new)).tolist(), strict=True))
        return np.array([self._riding[x] for x in keys], dtype=np.float64)

    def _price_rows(self, lams: FloatArray) -> FloatArray:
        """p(λ) per rate, solved (:meth:`riding_s_per_request`)."""
        p, lin = self.cells.prob, self.cells.computed_tokens
        if self.scheduler == "prefill-first":
            return np.full(lams.size, float(p @ self.prefill_cell_s))
        t_p = np.full(lams.size, self.prefill_s_per_token)
        if self.gemm_width is not None:
            step = riding_mean_field(
                lams,
                self.cells,
                self.decode.step,
                float(self.res.chunk_tokens),
                self.gemm_width,
                self.attention_cell_s,
            )
            t_p = step.s_per_token
        return np.asarray(t_p * float(p @ lin) + float(p @ self.attention_cell_s), dtype=np.float64)

    def _riding_floor_s(self) -> float:
        """A floor of p(λ) over every rate: p itself where it does not move with λ (prefill-first, or no
        :attr:`gemm_width`), else E[A] (t_p ≥ 0: :meth:`~pdplan.queueing.chunk_width.GemmWidth.extra_s` is clipped
        at 0). Rounding is monotone, so ``u_d + λ·floor ≤ u_d + λ·p(λ)`` holds for the doubles as well."""
        if self.scheduler == "chunked" and self.gemm_width is not None:
            return float(self.cells.prob @ self.attention_cell_s)
        return self.riding_s_per_request(0.0)

    def decode_rate_bound(self) -> float:
        """A deployment rate no stable limit of this deployment exceeds at any hit rates: where the decode share alone
        reaches the utilisation cap, ``z·DECODE_U_MAX/(t1 E[n] + t2 E[work])`` (one part in 10⁶ above, for the
        round-off of the cells' means). Every candidate of :meth:`limit` is at most λ_u, the root of u_d + u_p =
        DECODE_U_MAX with u_p = λ·p(λ) ≥ 0 (:meth:`_riding_floor_s`), so λ_u lies below it. A prefix cache's cells
        keep each (prompt, output) cell's mass (its classes' weights sum to 1 per prompt bin, unless the cache lays
        out the prompts itself: :func:`~pdplan.serving.colocated_cache._bin_reweighted`) and its context and steps,
        so E[n] and E[work], and this bound, are the model's without the cache (:attr:`plain`) at every cache rate."""
        st, wl = self.decode.step, self.cells
        per = st.t1_s_per_seq * wl.mean_steps + st.t2_s_per_token * wl.mean_work
        return math.inf if per <= 0.0 else self.z * DECODE_U_MAX / per * (1.0 + 1e-6)

    def _decode_share(self, lam: float) -> float:
        """u_d = λ(t1 E[n] + t2 E[work]) per instance (§3)."""
        st, wl = self.decode.step, self.cells
        return lam * (st.t1_s_per_seq * wl.mean_steps + st.t2_s_per_token * wl.mean_work)

    def _utilisation_rows(self, lams: FloatArray) -> FloatArray:
        """u_d + u_p at every per-instance rate of ``lams`` (each the double :meth:`_decode_share` plus
        :meth:`_u_prefill` give it alone: the same operations elementwise)."""
        st, wl = self.decode.step, self.cells
        u_d = lams * (st.t1_s_per_seq * wl.mean_steps + st.t2_s_per_token * wl.mean_work)
        return np.asarray(u_d + lams * self._riding_rows(lams), dtype=np.float64)

    def chunk_queue_at(self, lam_per_instance: FloatArray) -> ChunkQueue:
        """The chunked-prefill queue of one instance at per-instance rates (:func:`pdplan.queueing.chunk_queue`);
        ValueError where the mean field is unstable or the decode batch fills the budget."""
        return chunk_queue(
            lam_per_instance,
            self.cells,
            self.decode.step,
            float(self.res.chunk_tokens),
            self.prefill_s_per_token,
            0.0,
            self.attention_cell_s,
            self.drain_cell_s if self.gemm_width is None else None,
            self.gemm_width,
        )

    def _chunk_rho(self, lam: float) -> float:
        """Chunk-queue utilisation ρ (drain-corrected) of :meth:`chunk_queue_at`."""
        try:
            q = self.chunk_queue_at(np.array([lam]))
        except ValueError:  # unstable mean field or the decode batch fills the budget
            return math.inf
        return float(q.rho[0])

    def limit(self) -> Limit:
        """The stable deployment rate: utilisation, chunk queue, seats (P99) and KV at the mean (fluid) occupancy,
        with the comfortable (P99) KV limit where it lies below (module docstring; past it requests queue for KV)."""
        bounds = self.bound_rates()
        lam_u = bounds.utilisation_rate_per_s
        cands = [Limit(lam_u, Binding.COLOCATED_UTILISATION)]
        if self.scheduler == "chunked":
            cands.append(Limit(_root(lambda lam: self._chunk_rho(lam) - PREFILL_RHO_MAX, lam_u), Binding.PREFILL_CHUNK))
        admission, seats = self.kv_admission(), self.seat_admission()
        cands.append(Limit(min(admission.mean_rate_per_s, lam_u), Binding.DECODE_KV))
        cands.append(Limit(min(seats.mean_rate_per_s, lam_u), Binding.DECODE_SEATS))
        best = min(cands, key=lambda c: c.rate_rps)
        read = cache_read_limit(self.cache)  # a deployment rate already
        if read is not None and read.rate_rps < best.rate_rps * self.z:
            best = Limit(read.rate_rps / self.z, read.binding)
        kv, seat = (q.comfort_rate_per_s for q in (admission, seats))
        return Limit(
            best.rate_rps * self.z,
            best.binding,
            kv * self.z if kv < best.rate_rps else None,
            seat * self.z if seat < best.rate_rps else None,
        )

    def seat_admission(self) -> RidingKvAdmission:
        """The instance's seat admission queue (:mod:`pdplan.queueing.kv_admission`, *Seats*): the KV queue's
        Halfin–Whitt band with one seat per request (:func:`~pdplan.queueing.kv_admission.seat_held`) and
        ``max_num_seqs`` seats, comfortable at the P99 seat bound (:meth:`bound_rates`), stable to the fluid seat
        limit λτ̄E[n] = max_num_seqs, with the riding prefill p at that limit as the KV queue takes it (solved once
        per model). Until 2026-12-07 the P99 seat bound was the deployment's limit."""
        if "seats" not in self._admission:
            held = seat_held(self.cells)
            riding, mean = self._kv_mean(held, capacity=self.decode.max_num_seqs)
            comfort = self.bound_rates().seats_rate_per_s
            self._admission["seats"] = RidingKvAdmission(
                self.cells, held, self.decode.step, self.decode.max_num_seqs, comfort, max(mean, comfort), riding
            )
        return self._admission["seats"]

    def admission_wait(self, lam: FloatArray) -> tuple[FloatArray, FloatArray]:
        """``(P_w, E[W | W > 0])`` per per-instance rate of the admission queue a request waits in there: the KV or
        the seat queue, whichever has the larger mean wait P_w·E[W | W > 0] at that rate (module docstring of
        :mod:`pdplan.queueing.kv_admission`, *Seats*: a lower bound on waiting for both, which rarely bind together)."""
        (p_kv, c_kv), (p_seat, c_seat) = self.kv_admission().wait(lam), self.seat_admission().wait(lam)
        seat = p_seat * c_seat > p_kv * c_kv
        return np.where(seat, p_seat, p_kv), np.where(seat, c_seat, c_kv)

    def kv_admission(self) -> RidingKvAdmission:
        """The instance's KV admission queue (:class:`~pdplan.queueing.kv_admission.RidingKvAdmission`) on the
        footprint the engine's profile admits on (:func:`~pdplan.queueing.kv_admission.admission_footprint`:
        reserved, growing or SGLang's ratio): comfortable at the P99 KV bound, stable to the mean one where the engine
        queues for KV (``reserve``, ``ratio``); an ``on_demand`` engine (vLLM) preempts and recomputes instead, priced
        with its overflow share and recompute seconds: stable to its pinned limit where that lies above the P99 bound,
        its queue drained at that limit and comfortable where its P_w is the P99 rule's
        (:func:`~pdplan.queueing.kv_admission.pinned_comfort_rate`); else the P99 bound stays its limit, as before
        (solved once per model; module docstring)."""
        scheduling = self.res.engine.scheduling
        if scheduling.kv_admission in self._admission:
            return self._admission[scheduling.kv_admission]
        held = admission_footprint(self.cells, self.decode.state_tokens_per_seq, scheduling)
        comfort = self.bound_rates().kv_rate_per_s
        if scheduling.kv_admission != "on_demand":
            riding, mean = self._kv_mean(held)  # the riding prefill at the mean KV rate (its step-width price)
            self._admission[scheduling.kv_admission] = RidingKvAdmission(
                self.cells, held, self.decode.step, self.decode.kv_capacity_tokens, comfort, max(mean, comfort), riding
            )
        else:
            # a pool pinned throughout (module docstring of kv_admission): f r more prefill, at the pinned rate's width;
            # the queue's riding prefill is the one at λ_pin too, so that its τ̄ with π → f there is the pinned fixed
            # point's (λ_pin τ̄ W = M_kv)
            riding, pinned = self._kv_mean(held, recompute=True)
            share, recompute_s = self._recompute(riding)
            queue = RidingKvAdmission(
                self.cells, held, self.decode.step, self.decode.kv_capacity_tokens, comfort, pinned, riding, share,
                recompute_s,
            )  # fmt: skip
            if pinned <= comfort:  # a full pool serves less than the P99 bound: it stays the limit (kv_admission)
                queue = dataclasses.replace(queue, mean_rate_per_s=comfort)
            else:  # the wait starts where its P_w is the P99 rule's, at or below the bound
                queue = dataclasses.replace(queue, comfort_rate_per_s=pinned_comfort_rate(queue, comfort))
            self._admission["on_demand"] = queue
        return self._admission[scheduling.kv_admission]

    def _recompute(self, prefill_s_per_request: float) -> tuple[float, float]:
        """``(f, r)`` of an ``on_demand`` engine (vLLM; :mod:`pdplan.queueing.kv_admission`, *Preemption with
        recompute*): f the pinned pool's overflow share at the head's need ℓ = E[L] + s, and r the prefill seconds of
        one preemption's recompute, c̄ = min(E[L] + s, E[n]) tokens (vLLM V1 caches prefixes by default: the victim's
        blocks the growth did not take are hits; docs/engines.md §1.2) at the instance's mean prefill seconds per
        computed prompt token."""
        wl = self.cells
        share, lost, _ = recompute_tokens(wl, self.decode.state_tokens_per_seq)
        return share, lost * prefill_s_per_request / float(wl.prob @ wl.computed_tokens)

    def _kv_mean(
        self, held: KvFootprint, recompute: bool = False, capacity: float | None = None
    ) -> tuple[float, float]:
        """(p, λ_kv): the mean (fluid) KV rate, ``λ τ̄(λ) W = M_kv``, with the riding prefill p = p(λ_kv) of
        :meth:`riding_s_per_request`; the admission queue's band takes p there. p is constant but for the step-width
        price, and then λ_kv is a root of ``λ − λ_kv(q(λ))`` (``λ_kv(q) = M/(t0 W + M(per + q))``), by brentq on
        (0, λ_u] where it changes sign there (negative at 0); else λ_kv(q(λ_u)) ≥ λ_u, which no limit reads past λ_u.
        q = p, or with ``recompute`` (an ``on_demand`` pool pinned full, :meth:`kv_admission`) q = p + f·r(p), the
        recompute's tokens priced at the same step width as the riding prompts (:meth:`_recompute`). ``capacity``:
        the pool ``held`` fills (None: the KV capacity; the seats' ``max_num_seqs`` for :meth:`seat_admission`)."""
        cap = self.decode.kv_capacity_tokens if capacity is None else capacity

        def extra_at(lam: float) -> float:
            p = self.riding_s_per_request(lam)
            if not recompute:
                return p
            share, recompute_s = self._recompute(p)
            return p + share * recompute_s

        def mean_at(lam: float) -> float:
            return kv_mean_rate(self.cells, held, self.decode.step, cap, extra_at(lam))

        lam_u = self.bound_rates().utilisation_rate_per_s
        top = mean_at(lam_u)
        if self.scheduler == "prefill-first" or self.gemm_width is None or top >= lam_u:
            return self.riding_s_per_request(lam_u), top
        root = brentq(lambda lam: lam - mean_at(lam), 0.0, lam_u, xtol=1e-15, rtol=1e-14, f_b=lam_u - top)
        return self.riding_s_per_request(root), root

    def bound_rates(self) -> BoundRates:
        """The per-instance utilisation limit λ_u and the rates (at most λ_u) of the §2.3 P99 KV and seat bounds at
        the colocated τ̄, with the load-feedback factor of decodes whose steps carry the prefill
        (:func:`~pdplan.queueing.linear_capacity.riding_capacity`) and the footprint the engine's profile admits on
        (:func:`~pdplan.queueing.kv_admission.admission_footprint`: reserved, growing or SGLang's ratio). Solved
        once per model (:attr:`_memo`): :meth:`limit` and every :meth:`snapshot` past the comfortable KV limit read
        them."""
        if "rates" not in self._memo:
            floor = self._riding_floor_s()  # _root's bisection on (0, 1e9], 31 trial rates per mean-field call
            lam_u = bisect_rows(
                lambda lams: self._utilisation_rows(lams) - DECODE_U_MAX,
                1e9,
                lower=lambda lam: self._decode_share(lam) + lam * floor - DECODE_U_MAX,
            )
            held = admission_footprint(self.cells, self.decode.state_tokens_per_seq, self.res.engine.scheduling)
            kv, seats = riding_capacity(
                self.cells,
                self.decode.step,
                prefill_s_per_request=self.riding_s_per_request,  # p(λ): u_p = λ·p(λ)
                rate_max=lam_u,
                kv_capacity_tokens=self.decode.kv_capacity_tokens,
                max_num_seqs=self.decode.max_num_seqs,
                held=(held.work, held.square_sum),
            )
            self._memo["rates"] = BoundRates(lam_u, min(kv, lam_u), min(seats, lam_u))
        return self._memo["rates"]

    def utilisation(self, rates: FloatArray) -> Utilisation:
        """Pool utilisations per rate: the mean-field part of :meth:`snapshot` (no distributions)."""
        lam = np.atleast_1d(np.asarray(rates, dtype=np.float64)) / self.z
        u_p = np.array([self._u_prefill(float(x)) for x in lam])
        tau = np.array([self._tau(float(x)) for x in lam])
        st, wl = self.decode.step, self.cells
        u_d = lam * (st.t1_s_per_seq * wl.mean_steps + st.t2_s_per_token * wl.mean_work)
        held = kv_footprint(wl, self.decode.state_tokens_per_seq)
        return {"prefill": u_p, "decode": u_d, "decode_kv": lam * tau * held.mean_work / self.decode.kv_capacity_tokens}

    def ttft_parts(self, rate_rps: float) -> TtftParts:
        """The mean TTFT's parts at ``rate_rps`` (:mod:`pdplan.serving.ttft`): the wait in the instance's prompt
        queue (with the KV admission wait past the comfortable KV limit), the prompt's prefill (prefill-first: its
        pass; chunked: its chunks riding on the decode steps), the engine's request time and the overlap scheduler's
        extra iterations; one instance does both phases, so no KV crosses a link and token 1 is sampled where the
        prefill ends."""
        rates = np.array([float(rate_rps)])
        out = self._distributions(rates)
        ttft = out.ttft
        mean_offset = _cell_offsets_s(ttft) @ ttft.prob
        load_s = self._mean_load_s()  # the offsets carry the loads (:meth:`_distributions`): counted once, here
        prob, cond = self.admission_wait(rates / self.z)  # the KV or seat wait, zero below the comfortable limits
        admission_s = float(prob[0] * cond[0])  # P_w · E[W | W > 0]
        return TtftParts(
            queue_s=float(ttft.wait.mean_s[0]) + admission_s,
            prefill_s=float(mean_offset[0]) - load_s,
            kv_transfer_s=0.0,
            first_token_s=0.0,
            request_overhead_s=float(request_delay_s(self.res.hardware.colocated, self.res.lengths.mean_input())),
            cache_load_s=load_s,
            overlap_s=float(self._overlap_shift_s(rates, out)[0]),
        )

    def _mean_load_s(self) -> float:
        """The mean exposed load of the hit tokens (0 without a cache), over the loads the TTFT takes."""
        if self.load_cell_s is None:
            return 0.0
        if self.scheduler == "prefill-first" and self.load_point_s is not None:
            return float(self.cells.prob @ self.load_point_s.mean(axis=1))
        return float(self.cells.prob @ self.load_cell_s)

    def _distributions(self, rates: FloatArray) -> ColocatedResult:
        return self._admitted(self._loaded(rates), rates)

    def overlap_step_law(self, rates: FloatArray, out: ColocatedResult) -> tuple[FloatArray, FloatArray]:
        """The iteration token 1 waits for behind the one that sampled it, per rate of ``out`` (module docstring),
        points ``[R, n]`` and their weights: chunked :func:`~pdplan.serving.overlap_ttft.chunk_step_law`;
        prefill-first a plain decode step (1 − ρ_p)·τ̄ (1 − ρ_p) or another prompt's pass E[S] (ρ_p)."""
        if self.scheduler == "prefill-first":
            rho, tau = out.prefill_utilisation, out.tpot_mean_s
            plain, busy = (1.0 - rho) * tau, np.full_like(tau, float(self.cells.prob @ self.prefill_cell_s))
            return np.stack((plain, busy), axis=1), np.stack((1.0 - rho, rho), axis=1)
        lam = rates / self.z
        return chunk_step_law(lam, self.chunk_queue_at(lam))

    def _overlap_shift_s(self, rates: FloatArray, out: ColocatedResult) -> FloatArray:
        """The overlap scheduler's mean extra time on token 1 per rate, k times :meth:`overlap_step_law`'s mean."""
        k = overlap_steps(self.res.hardware.colocated.engine)
        if k == 0.0:
            return np.zeros_like(out.tpot_mean_s)
        points, weights = self.overlap_step_law(rates, out)
        return overlap_s(k, np.sum(points * weights, axis=1))

    def _overlapped(self, out: ColocatedResult, rates: FloatArray) -> TtftLike:
        """``out``'s TTFT law with token 1 k iterations of :meth:`overlap_step_law` later, coupled to the TTFT
        (:func:`~pdplan.serving.overlap_ttft.coupled`); the law itself for k = 0."""
        k = overlap_steps(self.res.hardware.colocated.engine)
        if k == 0.0:
            return out.ttft
        points, weights = self.overlap_step_law(rates, out)
        return coupled(out.ttft, overlap_s(k, points), weights)

    def _admitted(self, out: ColocatedResult, rates: FloatArray) -> ColocatedResult:
        """``out`` with the KV admission wait before token 1 at the rates past the comfortable KV limit (module
        docstring): the TTFT law becomes a :class:`~pdplan.queueing.ttft_mixture.TtftMixture` whose one-bin delay is
        the wait (prefill-first's has no delay of its own to replace; chunked's offsets get one quadrature point); for
        ``on_demand`` the TPOT law is shifted per cell by the recompute's stretch of τ̄ and the mean pause of a
        preempted request spread over the cell's steps (:meth:`~pdplan.queueing.kv_admission.RidingKvAdmission.
        recompute_s`)."""
        lam = rates / self.z
        on_demand = self.res.engine.scheduling.kv_admission == "on_demand"  # its comfortable limit may lie lower
        bounds = self.bound_rates()
        if not on_demand and not np.any(lam > min(bounds.kv_rate_per_s, bounds.seats_rate_per_s)):
            return out
        prob, cond = self.admission_wait(lam)
        if not np.any(prob > 0.0):
            return out  # no rate in either band
        delay = wait_delay(prob, cond)
        kv = self.kv_admission()
        if kv.overflow_share > 0.0:  # on_demand: the recompute stretches τ̄ and pauses its victims (TPOT)
            stretch, pause = kv.recompute_s(lam)
            steps = np.maximum(self.cells.decode_steps, 1.0)
            shift = stretch[:, None] + pause[:, None] / steps[None, :]
            out = dataclasses.replace(out, tpot=dataclasses.replace(out.tpot, offset_s=out.tpot.offset_s + shift))
        ttft = out.ttft
        if isinstance(ttft, TtftMixture):
            return dataclasses.replace(out, ttft=dataclasses.replace(ttft, link=delay))
        offsets = np.broadcast_to(ttft.offsets_s, (rates.size, ttft.prob.size))[:, :, None]
        return dataclasses.replace(out, ttft=TtftMixture(ttft.wait, delay, np.array(offsets), ttft.prob))

    def _loaded(self, rates: FloatArray) -> ColocatedResult:
        """The instance's queues at ``rates`` with the exposed loads of the prefix cache's hits on TTFT."""
        out = self._queue(rates)
        if self.load_cell_s is None:
            return out
        ttft = out.ttft  # the loads delay token 1: per quadrature point (prefill-first) or per cell (chunked)
        if not isinstance(ttft, TtftMixture):
            later = ShiftedMixture(ttft.wait, ttft.offsets_s + self.load_cell_s, ttft.prob)
            return dataclasses.replace(out, ttft=later)
        if self.load_point_s is None:
            raise TypeError("a prefill-first TTFT per quadrature point needs the loads per point")
        return dataclasses.replace(out, ttft=dataclasses.replace(ttft, offsets_s=ttft.offsets_s + self.load_point_s))

    def _queue(self, rates: FloatArray) -> ColocatedResult:
        return colocated_distributions(
            self.scheduler,
            rates / self.z,
            self.cells,
            self.decode.step,
            prefill_service_s=self.prefill_point_s,
            token_budget=float(self.res.chunk_tokens),
            prefill_s_per_token=self.prefill_s_per_token,
            attention_s=self.attention_cell_s,
            drain_s=self.drain_cell_s if self.gemm_width is None else None,
            max_cells=GRID_CELLS,
            arrival_ca2=instance_ca2("random", self.arrival_ca2, self.z),
            width=self.gemm_width,
        )

    def snapshot(self, rates: FloatArray) -> Snapshot:
        rates = np.atleast_1d(np.asarray(rates, dtype=np.float64))
        out = self._distributions(rates)
        held = kv_footprint(self.cells, self.decode.state_tokens_per_seq)  # contexts + fixed state per sequence
        fixed_k = (rates / self.z) * out.tpot_mean_s * held.mean_work
        util: Utilisation = {
            "prefill": out.prefill_utilisation,
            "decode": out.decode_utilisation,
            "decode_kv": fixed_k / self.decode.kv_capacity_tokens,
        }
        tpot, defined = no_tpot(out.tpot, tpot_defined(self.res) if self.defined is None else self.defined)
        return Snapshot(
            rates,
            self.cells.prob,
            self.cells.decode_steps,
            DelayedTtft(
                self._overlapped(out, rates),
                request_delay_s(self.res.hardware.colocated, self.res.lengths.mean_input()),
            ),
            np.arange(self.cells.prob.size),
            tpot,
            util,
            defined,
        )


def no_tpot(tpot: GammaMixture, defined: npt.NDArray[np.bool_]) -> tuple[GammaMixture, npt.NDArray[np.bool_] | None]:
    """``(tpot, defined)`` unchanged when some cell has a TPOT; when none has (every output one
    token) a point mass at 0 on every cell and no mask (module docstring)."""
    if bool(defined.any()):
        return tpot, defined
    zero = np.zeros_like(tpot.offset_s)
    return GammaMixture(zero, zero.copy(), zero.copy(), tpot.prob), None


def _cell_offsets_s(ttft: TtftMixture | ShiftedMixture) -> FloatArray:
    """``[R, C]`` each cell's mean deterministic TTFT offset (over its quadrature points where it has them)."""
    if isinstance(ttft, TtftMixture):
        return np.asarray(ttft.offsets_s.mean(axis=2), dtype=np.float64)
    return np.asarray(np.broadcast_to(ttft.offsets_s, (ttft.wait.h_s.size, ttft.prob.size)), dtype=np.float64)


def _root(fn: Callable[[float], float], hi: float) -> float:
    """λ in (0, hi] where an increasing ``fn`` crosses 0 (bisection, robust to inf past a pole);
    ``hi`` if fn(hi) ≤ 0."""
    if fn(hi) <= 0.0:
        return hi
    lo, top = 0.0, hi
    for _ in range(80):
        mid = 0.5 * (lo + top)
        if fn(mid) <= 0.0:
            lo = mid
        else:
            top = mid
    return lo
