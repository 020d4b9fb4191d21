"""Disaggregated xPyD deployment: prefill pool → KV link → decode pool (docs/queueing.md §1, §2, §5.2).

* **Prefill pool** (:mod:`pdplan.serving.prefill_pool`): x FCFS instances behind the router
  (``routing``): random → x independent M/G/1 at λ/x (exact); least-work → M/G/c (Erlang-C ×
  scaled M/G/1); round-robin → E_x/G/1 (Kingman mean); all by FFT
  (:func:`pdplan.queueing.prefill_wait_distribution`). Service = the batch-1 roofline stage time
  per prompt (:mod:`pdplan.serving.roles`). With ``prefill_max_batch_tokens`` each instance is
  the batched-prefill queue of :mod:`pdplan.queueing.batched` instead (at λ/x; least-work: one
  central queue over the x instances).
* **KV transfer** (:mod:`pdplan.transfer.kv`): the exposed time per prompt bin for the granularity,
  TP mismatch and NICs. Layer and chunk streams start while the prefill runs (``overlap``), so a
  link wait W counted from the stream start delays the KV only by ``max(0, W − slack_l)``
  (:mod:`pdplan.queueing.link_delay`). The busier side of the fan-in sets W: a prefill instance's
  own NICs (at least as busy as a decode instance's) → the tandem chain of that one FCFS server
  and its link (its stream starts are the server's output, not Poisson: a layer stream that keeps
  up with the compute never waits, a short prompt right behind a long request-granularity
  transfer waits for most of it), and with x ≥ 2 the stream also clears the decode NIC, busy with
  the other x − 1 instances' streams (an independent M/G/1 at λ(x−1)/(x·y)); the decode side
  (fed by several prefill instances), or any batched prefill → an M/G/1 on the side's busy
  times. Modelled when the link's utilisation at the stability limit is ≥
  ``LINK_QUEUE_MIN_RHO``. The link delay is taken independent of the request's prefill wait given
  its prompt bin.
* **Decode pool**: y instances with continuous batching, λ_d = λ/y; mean-field fixed point and the
  shot-noise TPOT model with load feedback (:func:`pdplan.queueing.tpot_distribution`). The
  router's policy also picks the decode instance (:mod:`pdplan.specs.scenario`); each instance
  is modelled with Poisson arrivals at λ/y: exact for random routing (thinning), pessimistic for
  round-robin and least-work (fewest outstanding requests), which smooth each instance's load.
  TPOT is undefined for one-token outputs (:mod:`pdplan.serving.snapshot`; all of them one token:
  :func:`pdplan.serving.colocated.no_tpot`).
* **TTFT** (docs/queueing.md §1.5): convention A (default; the decode instance streams token 1)
  ``W_p + S_p(l) + D_link(l) + T_kv(l) + E[J_d] + τ̄_d``. J_d, the wait for the decode step
  boundary, is 0 when the decode instance is idle (probability ``e^{−N}``, N the mean sequences
  in flight: M/G/∞ occupancy seen at arrival) and else ≈ U(0, τ̄_d), so ``E[J_d] = (1 −
  e^{−N}) τ̄_d/2``, plus under A the overlap scheduler's extra steps of the decode instance that samples token 1,
  ``k·τ̄_d`` (k = ``scheduling.overlap_extra_steps`` of the decode instance's engine: :func:`pdplan.serving.ttft.
  overlap_s`, a constant shift of the law per rate; the step is the decode instance's because its loop launches the
  next decode step before it sends the token; with PPD's appends on that instance the step is plain, τ_p, or carries
  append work, τ_p + τ̄_d, with probability ρ_a, coupled to the TTFT: :func:`pdplan.serving.ttft.
  overlap_append_steps`, :class:`pdplan.serving.overlap_ttft.OverlapTtft`); convention B (prefill streams token 1,
  DistServe) ``W_p + S_p(l)``, and then token 2 waits for the KV: each request's TPOT gains
  ``(T_kv(l) + D_link(l) + J_d)/n`` (found by ``pdplan simulate``: without it TPOT P99 was −40 % for short
  outputs over a slow link), with D_link mixed in per prompt bin as a random delay (its atom plus
  ``TPOT_LINK_POINTS`` quantile points; for n = 1–3 its tail *is* the TPOT tail) and J_d exactly
  as that idle/uniform mixture (:class:`~pdplan.queueing.GammaMixture` ``uniform``; moment
  matching it into the load's gamma put the n = 1 tail 10 % low).
* **Stability limit**: the smallest of prefill load λ/capacity ≤ ``PREFILL_RHO_MAX`` (ρ = λE[S]/x
  for batch-1 prefill; λ/(x·λ_cap) batched), the decode
  capacity (u ≤ 0.85 and the seat bound with a z₀.₉₉ margin, :func:`pdplan.queueing.linear_capacity`; KV at its mean
  occupancy, :func:`pdplan.queueing.kv_admission.kv_mean_rate`) times y, and link ρ ≤ ``PREFILL_RHO_MAX``.
* **KV admission** (:mod:`pdplan.queueing.kv_admission`): past the comfortable (P99) KV limit a request waits for free
  KV; that wait joins the link delay (token 1 under A, token 2 under B). Both KV limits count the footprint the decode
  server admits on (:func:`pdplan.queueing.kv_admission.decode_server_footprint`; SGLang: context plus 512 reserved
  tokens a request, its ``DecodePreallocQueue``). vLLM's decode instances preempt the newest request and recompute it
  locally instead (:mod:`pdplan.serving.decode_recompute`): their stability limit is the pinned one, and the
  recompute's stretch of τ̄ and its victims' pause join TPOT. PPD's decode instances too, on the step the appends
  stretch (:func:`pdplan.serving.ppd_decode.kv_admission`, which :func:`~pdplan.serving.ppd_model.place_turns` puts
  in ``admission``).

Not modelled: KV-ingest HBM interference on decode (§2.5, ≈ λ_d E[l] kvb / BW, typically < 1e−3),
queueing for seats beyond the seat margin.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.queueing import (
    DecodeCapacity,
    DecodeWorkload,
    GammaMixture,
    decode_fixed_point,
    mg1_wait_distribution,
    tpot_distribution,
)
from pdplan.queueing.distributions import SpreadDelay, UniformPart
from pdplan.queueing.kv_admission import (
    KvAdmission,
    RidingKvAdmission,
    add_delays,
    pd_decode_reserved_tokens,
)
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.queueing.link_delay import (
    BinDelay,
    TandemLink,
    no_delay,
    slack_delay,
    tandem_delay,
)
from pdplan.queueing.ttft_mixture import GroupedTtft, TtftMixture
from pdplan.serving.cache_domain import cache_rate, prefill_domain, turn_duration_s
from pdplan.serving.cache_mechanism_calls import (
    add_read_wait,
    dual_path_cache,
    dual_path_setting,
    place_turns,
    storage_read_stage,
)
from pdplan.serving.cache_mechanisms import ppd_applies
from pdplan.serving.cells import decode_cells, tpot_defined
from pdplan.serving.colocated import no_tpot
from pdplan.serving.decode_lines import role_decode_perf
from pdplan.serving.decode_recompute import decode_admission
from pdplan.serving.limits import (
    DECODE_U_MAX,
    LINK_QUEUE_MIN_RHO,
    PREFILL_RHO_MAX,
    Limit,
    cache_read_limit,
    decode_binding,
)
from pdplan.serving.overlap_ttft import OverlapTtft, coupled
from pdplan.serving.prefill_pool import PrefillPool, prefill_pool
from pdplan.serving.request_overhead import request_delay_s
from pdplan.serving.resolve import DisaggregatedHardware, ResolvedScenario
from pdplan.serving.role_hardware import instance_budget
from pdplan.serving.roles import DecodePerf, PrefillPerf, cached_prefill_perf, prefill_perf
from pdplan.serving.snapshot import Snapshot, TtftLike
from pdplan.serving.ttft import (
    GRID_CELLS,
    LINK_POINTS,
    TtftParts,
    first_token_s,
    overlap_append_steps,
    overlap_s,
    overlap_steps,
)
from pdplan.transfer.fan_in import LinkQueue, fan_in_link_queue, side_busy_s
from pdplan.transfer.kv import TransferResult, kv_transfer
from pdplan.transfer.kv_inputs import TransferConfig, kv_shape_from_model
from pdplan.transfer.plane_setup import resolve_data_plane
from pdplan.types import Binding, Convention, FloatArray, Utilisation

if TYPE_CHECKING:
    from pdplan.serving.dual_path_setup import StorageReadStage
    from pdplan.serving.ppd_decode import AppendNoise
    from pdplan.serving.prefix_cache import CacheClasses, CacheSetup

TPOT_LINK_POINTS = 8
"""Convention B: link-wait quadrature points (plus its atom) mixed into each cell's TPOT."""


@dataclass(frozen=True, slots=True)
class DisaggregatedModel:
    """A prepared xPyD deployment; :meth:`snapshot` evaluates it at a batch of rates.

    Per prompt bin ``[K]``: exposed transfer, bytes and link service; per quadrature length
    ``[K, J]``: the exposed transfer that enters TTFT (``point_exposed_s``).
    """

    res: ResolvedScenario[DisaggregatedHardware]
    pool: PrefillPool
    exposed_s: FloatArray
    point_exposed_s: FloatArray
    transfer_bytes: FloatArray
    decode: DecodePerf
    cells: DecodeWorkload
    capacity: DecodeCapacity
    link_service_s: FloatArray
    link_rate_factor: float
    link_slack_s: FloatArray
    tandem: TandemLink | None
    far_service_s: FloatArray | None
    """With the tandem chain: a decode instance's NIC busy time per bin (the far side)."""
    x: int
    y: int
    convention: Convention
    """Who streams token 1 (:mod:`pdplan.serving.ttft`): A the decode instance, B the prefill instance."""
    bin_prob: FloatArray
    """The prefill side's bins: the prompt bins, or with a prefix cache each bin's classes (``[K·H]``)."""
    cache: CacheClasses | None = None
    """The prefix cache's classes per prompt bin (:mod:`pdplan.serving.prefix_cache`); None: every prompt new."""
    admission: KvAdmission | RidingKvAdmission | None = None
    """One decode instance's KV admission queue (:mod:`pdplan.queueing.kv_admission`; vLLM's with its preemptions
    priced, :mod:`pdplan.serving.decode_recompute`); None: not modelled, or not yet on a model PPD is about to place
    (:func:`unplaced_disaggregated`)."""
    storage_read: StorageReadStage | None = None
    """DualPath's storage → DRAM stage before the prefill queue (:mod:`pdplan.serving.dual_path_setup`); None:
    the tiers' loads are all in the prefill's price."""
    append_noise: AppendNoise | None = None
    """PPD: the spread the appends placed on decode give each request's TPOT (:mod:`pdplan.serving.ppd_decode`);
    None: no appends on decode."""

    @property
    def input_prob(self) -> FloatArray:
        """Probabilities of the prefill side's bins (the arrays per bin of this model are over these)."""
        return self.bin_prob

    @property
    def prefill(self) -> PrefillPerf:
        """Per prompt bin: the own-prefill TTFT offset and the FCFS service (means over the bin's
        quadrature lengths; batched prefill: the prompt's single-prompt batch)."""
        pool = self.pool
        tokens = self.res.lengths.input_tokens
        if self.cache is not None:
            tokens = np.repeat(tokens, self.cache.classes)
        return PrefillPerf(tokens, pool.point_latency_s.mean(axis=1), pool.point_service_s.mean(axis=1))

    @property
    def link_queued(self) -> bool:
        """Whether the link wait is modelled: its ρ at the stability limit ≥ LINK_QUEUE_MIN_RHO."""
        rho_unit = self.link_rate_factor * float(self.input_prob @ self.link_service_s)
        return self.limit().rate_rps * rho_unit >= LINK_QUEUE_MIN_RHO

    def limit(self) -> Limit:
        p = self.input_prob
        link_unit = self.link_rate_factor * float(p @ self.link_service_s)
        cands = [Limit(PREFILL_RHO_MAX * self.pool.capacity_rps, Binding.PREFILL_UTILISATION), self._decode_limit()]
        if link_unit > 0:
            cands.append(Limit(PREFILL_RHO_MAX / link_unit, Binding.LINK))
        read = cache_read_limit(self.cache, dual_path_setting(self.res))
        if read is not None:
            cands.append(read)
        best = min(cands, key=lambda c: c.rate_rps)
        kv = self.capacity.kv_rate_per_s if self.admission is None else self.admission.comfort_rate_per_s
        comfort = self.y * kv  # vLLM's pinned queue: where its P_w is the P99 rule's (decode_recompute)
        return Limit(best.rate_rps, best.binding, comfort) if comfort < best.rate_rps else best

    def decode_limit(self) -> Limit:
        """The decode pool's stable rate alone: at least :meth:`limit` (one of its candidates), and the same at every
        cache rate of one bound deployment where the hit rates do not change the decode side (:class:`DecodeSide`:
        every xPyD model but PPD's), so it bounds the goodput of every such model."""
        return self._decode_limit()

    def _decode_limit(self) -> Limit:
        """The decode pool's stable rate: utilisation, seats, and KV at the mean (fluid) occupancy when the KV
        admission queue is modelled (:mod:`pdplan.queueing.kv_admission`), else at the P99 one."""
        cap = self.capacity
        if self.admission is None:
            return Limit(self.y * cap.max_rate_per_s, decode_binding(cap))
        bounds = {
            Binding.DECODE_UTILISATION: cap.utilisation_rate_per_s,
            Binding.DECODE_SEATS: cap.seqs_rate_per_s,
            Binding.DECODE_KV: self.admission.mean_rate_per_s,
        }
        binding = min(bounds, key=lambda k: bounds[k])
        return Limit(self.y * bounds[binding], binding)

    def decode_delay(self, rates: FloatArray) -> BinDelay:
        """What delays a request's first decode step: the link's wait, plus the KV admission wait past the
        comfortable limit (:mod:`pdplan.queueing.kv_admission`)."""
        link = self.link_delay(rates)
        if self.admission is None or not np.any(rates / self.y > self.admission.comfort_rate_per_s):
            return link
        points = LINK_POINTS if self.convention == "A" else TPOT_LINK_POINTS
        return add_delays(link, self.admission.delay(rates / self.y), points)

    def _recomputed(self, tpot: GammaMixture, rates: FloatArray) -> GammaMixture:
        """``tpot`` with vLLM's preemptions priced (:mod:`pdplan.serving.decode_recompute`): per cell, the
        recompute's stretch of τ̄ plus a preempted request's mean pause spread over the cell's steps
        (:meth:`~pdplan.queueing.kv_admission.RidingKvAdmission.recompute_s`, as the colocated model's TPOT); ``tpot``
        itself where the instances do not preempt or no rate lies past the comfortable limit."""
        queue = self.admission
        if not isinstance(queue, RidingKvAdmission) or not np.any(rates / self.y > queue.comfort_rate_per_s):
            return tpot
        stretch, pause = queue.recompute_s(rates / self.y)
        steps = np.maximum(self.cells.decode_steps, 1.0)
        return dataclasses.replace(tpot, offset_s=tpot.offset_s + stretch[:, None] + pause[:, None] / steps[None, :])

    def utilisation(self, rates: FloatArray, prefill_busy: FloatArray | None = None) -> Utilisation:
        """Prefill load, decode u, decode KV occupancy K̄/M_kv and link ρ per rate.

        ``prefill`` is the load over the pool's capacity (ρ = λE[S]/x for batch-1 prefill, also
        its busy fraction). Batched prefill adds ``prefill_busy``, the busy time fraction of an
        instance (what the simulator measures), from the chain when given.
        """
        p = self.input_prob
        fixed = decode_fixed_point(rates / self.y, self.cells, self.decode.step)
        out: Utilisation = {
            "prefill": self.pool.load(rates),
            "decode": fixed.utilisation,
            "decode_kv": (fixed.mean_context_tokens + self.decode.state_tokens_per_seq * fixed.mean_seqs)
            / self.decode.kv_capacity_tokens,
            "link": rates * self.link_rate_factor * float(p @ self.link_service_s),
        }
        if self.pool.batched is not None and prefill_busy is not None:
            out["prefill_busy"] = prefill_busy
        return out

    def link_delay(self, rates: FloatArray) -> BinDelay:
        """What the busy link adds per prompt bin (:mod:`pdplan.queueing.link_delay`)."""
        if not self.link_queued:
            return no_delay(rates.size)
        points = LINK_POINTS if self.convention == "A" else TPOT_LINK_POINTS
        if self.tandem is not None:
            other = None
            if self.x > 1 and self.far_service_s is not None:  # the others' streams at a decode NIC
                other = mg1_wait_distribution(
                    rates * (self.x - 1) / (self.x * self.y), self.far_service_s, self.input_prob, max_cells=GRID_CELLS
                )
            return tandem_delay(self.tandem, rates / self.x, points, other=other)
        return slack_delay(
            mg1_wait_distribution(
                rates * self.link_rate_factor, self.link_service_s, self.input_prob, max_cells=GRID_CELLS
            ),
            self.link_slack_s,
            points,
        )

    def ttft_parts(self, rate_rps: float) -> TtftParts:
        """The mean TTFT's parts at ``rate_rps`` (:mod:`pdplan.serving.ttft`; they add up to :meth:`snapshot`'s mean):
        the prefill wait, the prompt's own prefill, the engine's request time, and under convention A the exposed KV
        transfer with the link's wait, the first decode step and the overlap scheduler's extra steps (under B those
        delay token 2, not token 1, and the prefill instance streams token 1)."""
        rates = np.array([float(rate_rps)])
        p = self.input_prob
        wait, _ = self.pool.wait(rates)
        wait_mean = wait.mean_s @ p if wait.mean_s.ndim == 2 else wait.mean_s
        kv_s = first_s = extra_s = 0.0
        if self.convention == "A":
            link = np.broadcast_to(self.link_delay(rates).bin_mean_s, (1, p.size))[0]
            kv_s = float(p @ (self.point_exposed_s.mean(axis=1) + link))
            fixed = decode_fixed_point(rates / self.y, self.cells, self.decode.step)
            first_s = float(first_token_s("A", fixed.tau_mean_s, -np.expm1(-fixed.mean_seqs))[0])
            extra_s = float(overlap_s(self.overlap_steps, fixed.tau_mean_s)[0])
            if self.admission is not None:  # the KV admission wait delays the first decode step
                prob, cond = self.admission.wait(rates / self.y)
                first_s += float(prob[0] * cond[0])
        read = self.storage_read
        return TtftParts(
            cache_load_s=0.0 if read is None else read.mean_s(float(rate_rps), p),
            queue_s=float(wait_mean[0]),
            prefill_s=float(p @ self.pool.point_latency_s.mean(axis=1)),
            kv_transfer_s=kv_s,
            first_token_s=first_s,
            request_overhead_s=float(request_delay_s(self.res.hardware.prefill, self.res.lengths.mean_input())),
            overlap_s=extra_s,
        )

    @property
    def overlap_steps(self) -> float:
        """k: the decode instance's overlap steps on token 1 (convention A; :func:`pdplan.serving.ttft.overlap_steps`
        of the decode instance type's engine)."""
        return overlap_steps(self.res.hardware.decode.engine)

    @property
    def append_share(self) -> float:
        """ρ_a: the decode instance's share of time on Turn 2+ appends placed on it (PPD,
        :attr:`pdplan.serving.ppd_pool.TurnPlacement.rho_append`; 0 without PPD): the overlap scheduler's extra step
        carries append work with this probability (:func:`pdplan.serving.ttft.overlap_append_steps`)."""
        placement = getattr(self.pool, "placement", None)
        if placement is None or placement.share_on_decode <= 0.0:
            return 0.0
        return float(placement.rho_append)

    def _per_prompt_bin(self, link: BinDelay) -> tuple[FloatArray, FloatArray, FloatArray]:
        """Convention B's TPOT terms per prompt bin: (exposed transfer ``[K]``, link-delay points and weights
        ``[R, K or 1, P]``); with a prefix cache each bin mixes its classes (points of every class, weighted)."""
        if self.cache is None:
            return self.exposed_s, link.points_s, link.weights
        w = self.cache.weights
        k, h = w.shape
        exposed = np.einsum("kh,kh->k", self.exposed_s.reshape(k, h), w)
        if link.points_s.shape[1] == 1:
            return exposed, link.points_s, link.weights
        r, _, n = link.points_s.shape
        points = link.points_s.reshape(r, k, h * n)
        weights = (link.weights.reshape(r, k, h, n) * w[None, :, :, None]).reshape(r, k, h * n)
        return exposed, points, weights

    def snapshot(self, rates: FloatArray) -> Snapshot:
        """TTFT/TPOT distributions and utilisations at each rate (all below :meth:`limit`)."""
        rates = np.atleast_1d(np.asarray(rates, dtype=np.float64))
        p = self.input_prob
        wait, busy = self.pool.wait(rates)
        link = self.decode_delay(rates)
        fixed = decode_fixed_point(rates / self.y, self.cells, self.decode.step)
        tau = fixed.tau_mean_s
        busy_p = -np.expm1(-fixed.mean_seqs)  # P(decode instance busy) = 1 − e^{−N} (M/G/∞)
        offsets = np.broadcast_to(self.pool.point_latency_s, (rates.size, *self.point_exposed_s.shape)).copy()
        offsets += request_delay_s(
            self.res.hardware.prefill, self.res.lengths.mean_input()
        )  # engine: API server, tokeniser
        if self.storage_read is not None:  # DualPath: the hit is read into DRAM before the request's prefill queue
            offsets += self.storage_read.fixed_s(offsets.shape[1])[None, :, :]
        tpot = self._recomputed(tpot_distribution(rates / self.y, self.cells, self.decode.step), rates)
        if self.append_noise is not None:
            tpot = self.append_noise.tpot(tpot, rates, tau, self.cells.decode_steps)
        m = self.res.lengths.output_tokens.size
        if self.convention == "A":
            boundary = first_token_s("A", tau, busy_p)  # first step + E[J_d]
            if self.overlap_steps and not self.append_share:  # the decode engine's overlap scheduler: k·τ̄_d
                boundary = boundary + overlap_s(self.overlap_steps, tau)
            offsets += self.point_exposed_s[None, :, :] + boundary[:, None, None]
        else:  # token 2 waits for the KV, the link and a step boundary: spread over n intervals
            n = self.cells.decode_steps
            exposed, points_s, weights = self._per_prompt_bin(link)
            gap = np.repeat(exposed, m)[None, :]
            cell_bins = np.repeat(np.arange(exposed.size), m) if points_s.shape[1] > 1 else [0]
            tpot = GammaMixture(
                tpot.offset_s + gap / n[None, :],
                tpot.load_mean_s,
                tpot.load_var_s2,
                tpot.prob,
                SpreadDelay(points_s[:, cell_bins], weights[:, cell_bins], n),
                UniformPart(tau[:, None] / n[None, :], busy_p),
            )
            link = no_delay(rates.size)
        if self.storage_read is not None:  # and waits for a storage NIC first: its law joins the link's delay
            link = add_read_wait(link, self.storage_read.wait_law(rates, offsets.shape[1]))
        mixture = TtftMixture(wait, link, offsets, p)
        law: TtftMixture | OverlapTtft = mixture
        if self.convention == "A" and self.overlap_steps and self.append_share:  # PPD: plain or append-carrying
            points, weights = overlap_append_steps(self.overlap_steps, tau, self.append_share)
            law = coupled(mixture, points, weights)
        ttft: TtftLike = law if self.cache is None else GroupedTtft(law, self.cache.weights)
        util = self.utilisation(rates, busy)
        tpot, defined = no_tpot(tpot, tpot_defined(self.res))
        return Snapshot(
            rates,
            self.cells.prob,
            self.cells.decode_steps,
            ttft,
            np.repeat(np.arange(self.res.lengths.input_tokens.size), m),
            tpot,
            util,
            defined,
        )


def transfer_config(res: ResolvedScenario[DisaggregatedHardware]) -> TransferConfig:
    """The KV-transfer configuration of the scenario (granularity, TPs, NICs, chunk, HBM rates, data plane)."""
    hw, nics = res.hardware, res.scenario.nics_per_instance
    d = hw.deployment
    return TransferConfig(
        granularity=d.granularity,
        prefill_tp=d.prefill.tp,
        decode_tp=d.decode.tp,
        nics_prefill=nics,
        nics_decode=nics,
        chunk_tokens=res.chunk_tokens if d.granularity == "chunk" else None,
        prefill_hbm_bytes_per_s=hw.prefill.gpu.memory_bytes_per_s,
        decode_hbm_bytes_per_s=hw.decode.gpu.memory_bytes_per_s,
        data_plane=resolve_data_plane(res.scenario.kv_backend, res.scenario.kv_block_tokens, res.engine),
    )


@dataclass(frozen=True, slots=True)
class DecodeSide:
    """What an xPyD model's build prices on the decode side: the cells, one instance's step model, its capacity and
    its KV admission queue. None of it depends on the prefix cache's hit rates, so a model of the same bound
    deployment at another cache rate reuses it (:func:`pdplan.serving.build.goodput_model`)."""

    cells: DecodeWorkload
    decode: DecodePerf
    capacity: DecodeCapacity
    admission: KvAdmission | RidingKvAdmission

    @classmethod
    def of(cls, model: DisaggregatedModel) -> DecodeSide:
        """The decode side ``model`` was built with."""
        if model.admission is None:
            raise ValueError("a model without its KV admission queue has no reusable decode side")
        return cls(model.cells, model.decode, model.capacity, model.admission)


def build_disaggregated(
    res: ResolvedScenario[DisaggregatedHardware], decode_side: DecodeSide | None = None
) -> DisaggregatedModel:
    """Price both roles, the transfer and the decode capacity (NoFeasiblePlanError if none). ``decode_side``: that of
    a model of the same bound deployment (``res`` at another cache rate), reused as it is (None: priced here)."""
    model, cfg = unplaced_disaggregated(res, decode_side)
    return place_turns(model, cfg)  # PPD: Turn 2+ appends on decode (cache: turn_placement; pd leaves it unchanged)


def unplaced_disaggregated(
    res: ResolvedScenario[DisaggregatedHardware], decode_side: DecodeSide | None = None
) -> tuple[DisaggregatedModel, TransferConfig]:
    """:func:`build_disaggregated`'s model before PPD places its turns (plain disaggregation's; the model itself
    where PPD does not apply) and the KV-transfer configuration it was priced with, which
    :func:`~pdplan.serving.ppd_model.place_turns` takes. Where PPD applies the model's ``admission`` is None:
    :func:`~pdplan.serving.ppd_model.place_turns` prices the placed model's on its stretched step, and the plain one
    would be thrown away (under vLLM its comfortable limit is a root search of about a dozen load-feedback FFTs,
    :func:`~pdplan.queueing.kv_admission.pinned_comfort_rate`)."""
    hw = res.hardware
    d = hw.deployment
    _check_prefill_memory(res)
    cfg = transfer_config(res)
    kv = kv_shape_from_model(res.model, hw.prefill.precision.kv_bytes)
    cells = decode_cells(res) if decode_side is None else decode_side.cells
    dperf, cap = _decode_capacity(res, cells) if decode_side is None else (decode_side.decode, decode_side.capacity)
    side = (
        _prefill_side(res)
        if res.cache is None
        else _cached_prefill_side(res, res.cache, _token_interval_s(res, cells, dperf))
    )
    # the pass a layer-wise stream overlaps: the prefill's compute plus the tiers' load it leaves exposed (a hit
    # prefill computes only its new tokens, and the load from a lower tier stretches that pass again)
    load_s = np.zeros(side.points.shape) if side.load_s is None else side.load_s
    xfer = kv_transfer(side.tokens, kv, hw.link, cfg, prefill_time_s=side.base.latency_s + load_s.mean(axis=1))
    point_xfer = kv_transfer(
        side.points.ravel(), kv, hw.link, cfg, prefill_time_s=side.point_base.latency_s + load_s.ravel()
    )
    extra = np.asarray(point_xfer.prefill_extra_s).reshape(side.points.shape)
    pool = prefill_pool(
        hw.prefill,
        side.routing,
        d.prefill.count * hw.prefill.dp,  # each attention DP rank takes its own prompts
        side.points,
        side.tokens,
        side.prob,
        extra if side.load_s is None else extra + side.load_s,
        res.prefill_batch_tokens,
        side.point_base,
        side.cached_points,
    )
    lq = fan_in_link_queue(xfer, side.prob, 1.0, d.prefill.count, d.decode.count, hw.link, cfg)
    pipe = side.base.latency_s - side.base.service_s
    tandem = _tandem_link(res, xfer, pool, lq, pipe, cfg, side.prob)
    far = None if tandem is None else side_busy_s(xfer, hw.link, cfg.side_nics[1])
    model = DisaggregatedModel(
        res,
        pool,
        np.asarray(xfer.exposed_s),
        np.asarray(point_xfer.exposed_s).reshape(side.points.shape),
        np.asarray(xfer.bytes),
        dperf,
        cells,
        cap,
        np.asarray(lq.service_s),
        lq.arrival_rate_per_s,
        xfer.slack_s,
        tandem,
        far,
        d.prefill.count,
        d.decode.count,
        res.scenario.ttft_convention,
        side.prob,
        side.classes,
        _plain_admission(res, cells, dperf, cap) if decode_side is None else decode_side.admission,
        side.storage_read,
    )
    return model, cfg


def _plain_admission(
    res: ResolvedScenario[DisaggregatedHardware], cells: DecodeWorkload, decode: DecodePerf, cap: DecodeCapacity
) -> KvAdmission | RidingKvAdmission | None:
    """The plain decode instance's KV admission queue (:func:`~pdplan.serving.decode_recompute.decode_admission`);
    None where PPD places turns on it (:func:`unplaced_disaggregated`)."""
    return None if ppd_applies(res) else decode_admission(res, cells, decode, cap)


@dataclass(frozen=True, slots=True)
class _PrefillSide:
    """The prefill side's bins: lengths ``[B]``, probabilities, quadrature points ``[B, J]``, their prices, the
    router's policy, and with a prefix cache each point's cached prefix, its exposed load and the classes."""

    tokens: FloatArray
    prob: FloatArray
    points: FloatArray
    base: PrefillPerf
    point_base: PrefillPerf
    routing: str
    cached_points: FloatArray | None = None
    load_s: FloatArray | None = None
    classes: CacheClasses | None = None
    storage_read: StorageReadStage | None = None


def _prefill_side(res: ResolvedScenario[DisaggregatedHardware]) -> _PrefillSide:
    """Every prompt new: the prompt bins and their quadrature points, priced in full."""
    hw, lens, points = res.hardware.prefill, res.lengths, res.input_points
    return _PrefillSide(
        lens.input_tokens,
        lens.input_marginal(),
        points,
        prefill_perf(hw, lens.input_tokens),
        prefill_perf(hw, points.ravel()),
        res.hardware.deployment.routing,
    )


def _token_interval_s(res: ResolvedScenario[DisaggregatedHardware], cells: DecodeWorkload, dperf: DecodePerf) -> float:
    """The decode pool's mean token interval at the rate the hit rates hold at (the decode part of a session turn's
    gap on the prefill side, :func:`pdplan.serving.cache_domain.turn_duration_s`); the SLO's TPOT past the decode
    pool's stable range."""
    try:
        fixed = decode_fixed_point(cache_rate(res) / res.hardware.deployment.decode.count, cells, dperf.step)
    except ValueError:
        return res.scenario.slo.tpot
    return float(fixed.tau_mean_s[0])


def _cached_prefill_side(
    res: ResolvedScenario[DisaggregatedHardware], setup: CacheSetup, token_interval_s: float
) -> _PrefillSide:
    """Each prompt bin split into its prefix-cache classes (:mod:`pdplan.serving.prefix_cache`), each priced on its
    missed tokens plus the exposed load of its hit tokens (a trace's cells at their own requests' prompts and hits,
    :mod:`pdplan.serving.trace_cells`; the others at the bin's quadrature lengths and the class's mean hit). An
    ``affinity`` router places requests by session or prefix, not by load: the pool is then ``random``-routed
    (independent M/G/1 per instance, Poisson thinning)."""
    from pdplan.serving.prefix_cache import cache_classes, point_prices  # lazy: start-up (issue #27)
    from pdplan.serving.trace_cells import trace_cells  # lazy: start-up (issue #27)

    hw, lens = res.hardware.prefill, res.lengths
    duration_s = turn_duration_s(res, token_interval_s)
    setup = dual_path_cache(res, setup)  # DualPath's read bandwidth where the cache reads over both paths
    classes = cache_classes(setup, prefill_domain(res), lens.input_tokens, cache_rate(res), duration_s)
    k, h = classes.weights.shape
    tokens = np.repeat(lens.input_tokens, h)
    hits = classes.hit_tokens.ravel()
    kvb = res.model.kv_bytes_per_token(hw.precision.kv_bytes)
    if classes.requests is None:
        points, point_hits = np.repeat(res.input_points, h, axis=0), hits[:, None]
    else:  # a trace: each cell at its own requests (pdplan.serving.trace_cells)
        points, point_hits = trace_cells(res, classes, classes.requests, kvb)
    priced = point_prices(hw, classes, points.reshape(k, h, -1), point_hits.reshape(k, h, -1), kvb)
    cached, load = priced.cached_tokens.reshape(points.shape), priced.load_s.reshape(points.shape)
    routing = "random" if setup.spec.routing == "affinity" else res.hardware.deployment.routing
    prob = classes.bin_class_probability(lens.input_marginal()).ravel()
    return _PrefillSide(
        tokens,
        prob,
        points,
        cached_prefill_perf(hw, tokens, hits),
        priced.perf,
        routing,
        cached,
        load,
        classes,
        storage_read_stage(res, classes, cached, prob),
    )


def _decode_capacity(
    res: ResolvedScenario[DisaggregatedHardware], cells: DecodeWorkload
) -> tuple[DecodePerf, DecodeCapacity]:
    """One decode instance's step model and its capacity bounds (NoFeasiblePlanError if no request fits), the KV
    bound on the footprint its server admits on (SGLang's PD decode: the context plus
    :func:`~pdplan.queueing.kv_admission.pd_decode_reserved_tokens`)."""
    reserved = pd_decode_reserved_tokens(res.engine.scheduling)
    dperf = role_decode_perf(res)  # on decode_cells(res), the line of a concave law res names (decode_lines)
    cap = fast_decode_capacity(
        cells,
        dperf.step,
        kv_capacity_tokens=dperf.kv_capacity_tokens,
        max_num_seqs=dperf.max_num_seqs,
        utilisation_max=DECODE_U_MAX,
        state_tokens_per_seq=dperf.state_tokens_per_seq,
        reserved_tokens_per_seq=reserved,
    )
    if cap.max_rate_per_s <= 0.0:
        admits = f" or than the longest prompt + the {reserved:.0f} tokens its engine reserves" if reserved else ""
        raise NoFeasiblePlanError(
            f"decode instance {res.hardware.decode.label} holds {dperf.kv_capacity_tokens:.0f} KV tokens, "
            f"less than the longest request (input + output + {dperf.state_tokens_per_seq:.0f} of fixed state)"
            f"{admits}",
            binding_constraint=Binding.DECODE_KV,
        )
    return dperf, cap


def _tandem_link(
    res: ResolvedScenario[DisaggregatedHardware],
    xfer: TransferResult,
    pool: PrefillPool,
    lq: LinkQueue,
    pipe_s: FloatArray,
    cfg: TransferConfig,
    prob: FloatArray,
) -> TandemLink | None:
    """The one-server-fed link model when each prefill instance's own NICs are at least as busy
    as a decode instance's and prefill is batch-1 FCFS; else None (M/G/1 with slack)."""
    if lq.load is None:  # fan_in_link_queue sets the load of a queue it builds for a whole deployment
        raise TypeError("the KV-link queue carries no side loads")
    if pool.batched is not None or lq.load.rho_prefill_side < lq.load.rho_decode_side:
        return None
    lead = xfer.overlap_s - pipe_s
    service = pool.point_service_s.mean(axis=1)
    busy = side_busy_s(xfer, res.hardware.link, cfg.side_nics[0])  # the prefill instance's own NICs
    return TandemLink(prob, service, busy - lead, service - lead, xfer.slack_s)


def _check_prefill_memory(res: ResolvedScenario[DisaggregatedHardware]) -> None:
    """The prefill instance must hold the longest prompt's (or a full batch's) KV, plus one sequence's fixed state
    (hybrids; a batch of several prompts holds one per prompt, so this is a lower bound there)."""
    prefill = res.hardware.prefill
    pmem = instance_budget(prefill, "prefill")
    hold = float(np.ravel(pmem.kv_capacity_tokens)[0])
    need = max(float(res.lengths.input_tokens.max()), float(res.prefill_batch_tokens or 0))
    need += float(np.ravel(pmem.state_tokens_per_seq)[0])
    if need > hold:
        what = (
            "the longest prompt bin"
            if res.prefill_batch_tokens is None or float(res.lengths.input_tokens.max()) >= res.prefill_batch_tokens
            else "prefill_max_batch_tokens"
        )
        raise NoFeasiblePlanError(
            f"prefill instance {prefill.label} holds {hold:.0f} KV tokens, less than {what} ({need:.0f})",
            binding_constraint=Binding.PREFILL_KV,
        )
