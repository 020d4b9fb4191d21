"""Disaggregated xPyD deployment: prefill pool → KV link → decode pool (QUEUEING §1, §2, §5.2).

* **Prefill pool**: x FCFS instances behind the router (``routing``): random → x independent
  M/G/1 at λ/x (exact); least-work → M/G/c (Erlang-C × scaled M/G/1); round-robin → E_x/G/1
  (Kingman mean); all by FFT (:func:`pdplan.queueing.prefill_wait_distribution`). Service = the
  batch-1 roofline stage time per prompt bin (:mod:`pdplan.serving.roles`).
* **KV transfer** (:mod:`pdplan.transfer`): the exposed time per prompt bin for the granularity,
  TP mismatch and NICs; the busier side of the fan-in is an M/G/1 on transfer times, included as
  its own wait when its utilisation at the stability limit is ≥ ``LINK_QUEUE_MIN_RHO``.
* **Decode pool**: y instances with continuous batching, λ_d = λ/y; mean-field fixed point and the
  shot-noise TPOT model with load feedback (:func:`pdplan.queueing.tpot_distribution`).
* **TTFT** (QUEUEING §1.5): convention A (default; the decode instance streams token 1)
  ``W_p + S_p(l) + W_link + T_kv(l) + E[J_d] + τ̄_d`` with the step-boundary wait J_d ≈ U(0, τ̄_d)
  taken at its mean τ̄_d/2; convention B (prefill streams token 1, DistServe) ``W_p + S_p(l)``,
  and then token 2 waits for the KV: each request's TPOT gains ``(T_kv(l) + E[W_link] + τ̄_d/2)/n``
  (found by ``pdplan simulate``: without it TPOT P99 was −40 % for short outputs over a slow link).
* **Stability limit**: the smallest of prefill ρ = λE[S]/x ≤ ``PREFILL_RHO_MAX``, the decode
  capacity (u ≤ 0.85, KV and seat bounds with a z₀.₉₉ margin; :func:`pdplan.queueing.decode_capacity`)
  times y, and link ρ ≤ ``PREFILL_RHO_MAX``.

Not modelled: KV-ingest HBM interference on decode (§2.5, ≈ λ_d E[l] kvb / BW, typically < 1e−3),
decode admission queueing beyond the KV/seat capacity margin, preemption.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdplan.errors import NoFeasiblePlanError
from pdplan.queueing import (
    DecodeCapacity,
    DecodeWorkload,
    GammaMixture,
    decode_fixed_point,
    decode_workload,
    mg1_wait_distribution,
    tpot_distribution,
)
from pdplan.queueing.distributions import FloatArray
from pdplan.serving.inputs import ResolvedScenario
from pdplan.serving.roles import (
    DecodePerf,
    PrefillPerf,
    decode_perf,
    fast_decode_capacity,
    instance_budget,
    prefill_perf,
)
from pdplan.serving.snapshot import Snapshot
from pdplan.serving.ttft import GRID_CELLS, TtftMixture, discretise_wait, prefill_wait, zero_wait
from pdplan.transfer import (
    TransferConfig,
    fan_in_link_queue,
    kv_shape_from_model,
    kv_transfer,
)

PREFILL_RHO_MAX = 0.99
"""Highest prefill/link utilisation evaluated (the FFT grid and any SLO fail beyond it)."""
LINK_QUEUE_MIN_RHO = 0.01
"""Below this link utilisation at the stability limit the link wait is negligible and skipped."""
DECODE_U_MAX = 0.85
"""Highest decode utilisation trusted: QUEUEING §6.3 validated the TPOT model up to u = 0.85."""


@dataclass(frozen=True, slots=True)
class Limit:
    """Largest stable rate (req/s) and which constraint sets it, in words."""

    rate_rps: float
    binding: str


def decode_cells(res: ResolvedScenario) -> DecodeWorkload:
    """Flattened (input, output) cells: context L = input, n = max(output − 1, 1) decode steps."""
    lens = res.lengths
    lin = np.repeat(lens.input_tokens, lens.output_tokens.size)
    steps = np.maximum(np.tile(lens.output_tokens, lens.input_tokens.size) - 1.0, 1.0)
    return decode_workload(lin, steps, lens.prob.ravel())


def decode_limit_words(cap: DecodeCapacity) -> str:
    return {"utilisation": "decode utilisation", "kv": "decode KV capacity",
            "seqs": "decode seats (max_num_seqs)"}[cap.binding]


@dataclass(frozen=True, slots=True)
class DisaggregatedModel:
    """A prepared xPyD deployment; :meth:`snapshot` evaluates it at a batch of rates."""

    res: ResolvedScenario
    prefill: PrefillPerf
    exposed_s: FloatArray
    transfer_bytes: FloatArray
    decode: DecodePerf
    cells: DecodeWorkload
    capacity: DecodeCapacity
    link_service_s: FloatArray
    link_rate_factor: float
    x: int
    y: int

    @property
    def input_prob(self) -> FloatArray:
        return np.asarray(self.res.lengths.input_marginal(), dtype=np.float64)

    @property
    def link_queued(self) -> bool:
        """Whether the link wait is modelled: its ρ at the stability limit ≥ LINK_QUEUE_MIN_RHO."""
        rho_unit = self.link_rate_factor * float(self.input_prob @ self.link_service_s)
        return self.limit().rate_rps * rho_unit >= LINK_QUEUE_MIN_RHO

    def limit(self) -> Limit:
        p = self.input_prob
        rho_unit = float(p @ self.prefill.service_s) / self.x
        link_unit = self.link_rate_factor * float(p @ self.link_service_s)
        cands = [Limit(PREFILL_RHO_MAX / rho_unit, "prefill utilisation"),
                 Limit(self.y * self.capacity.max_rate_per_s, decode_limit_words(self.capacity))]
        if link_unit > 0:
            cands.append(Limit(PREFILL_RHO_MAX / link_unit, "link"))
        return min(cands, key=lambda c: c.rate_rps)

    def utilisation(self, rates: FloatArray) -> dict[str, FloatArray]:
        """Prefill ρ, decode u, decode KV occupancy K̄/M_kv and link ρ per rate (closed forms)."""
        p = self.input_prob
        fixed = decode_fixed_point(rates / self.y, self.cells, self.decode.step)
        return {"prefill": rates * float(p @ self.prefill.service_s) / self.x,
                "decode": fixed.utilisation,
                "decode_kv": fixed.mean_context_tokens / self.decode.kv_capacity_tokens,
                "link": rates * self.link_rate_factor * float(p @ self.link_service_s)}

    def snapshot(self, rates: FloatArray) -> Snapshot:
        """TTFT/TPOT distributions and utilisations at each rate (all below :meth:`limit`)."""
        rates = np.atleast_1d(np.asarray(rates, dtype=np.float64))
        p = self.input_prob
        wait = prefill_wait(self.res.scenario.routing, rates, self.prefill.service_s, p, self.x)
        link = zero_wait(rates.size)
        if self.link_queued:
            link = discretise_wait(mg1_wait_distribution(
                rates * self.link_rate_factor, self.link_service_s, p, max_cells=GRID_CELLS))
        fixed = decode_fixed_point(rates / self.y, self.cells, self.decode.step)
        tau = fixed.tau_mean_s
        offsets = np.broadcast_to(self.prefill.latency_s, (rates.size, p.size)).copy()
        tpot = tpot_distribution(rates / self.y, self.cells, self.decode.step)
        m = self.res.lengths.output_tokens.size
        if self.res.scenario.ttft_convention == "A":
            offsets += self.exposed_s[None, :] + 1.5 * tau[:, None]
        else:  # token 2 waits for the KV, the link and a step boundary: spread over n intervals
            gap = np.repeat(self.exposed_s, m)[None, :] + (link.mean_s + 0.5 * tau)[:, None]
            tpot = GammaMixture(tpot.offset_s + gap / self.cells.decode_steps[None, :],
                                tpot.load_mean_s, tpot.load_var_s2, tpot.prob)
            link = zero_wait(rates.size)
        ttft = TtftMixture(wait, link, offsets, p)
        util = self.utilisation(rates)
        return Snapshot(rates, self.cells.prob, self.cells.decode_steps, ttft,
                        np.repeat(np.arange(p.size), m), tpot, util)


def transfer_config(res: ResolvedScenario) -> TransferConfig:
    """The KV-transfer configuration of the scenario (granularity, TPs, NICs, chunk, HBM rates)."""
    sc = res.scenario
    assert sc.prefill is not None
    assert sc.decode is not None
    assert res.prefill is not None
    assert res.decode is not None
    return TransferConfig(
        granularity=sc.granularity, prefill_tp=sc.prefill.tp, decode_tp=sc.decode.tp,
        nics_prefill=sc.nics_per_instance, nics_decode=sc.nics_per_instance,
        chunk_tokens=res.chunk_tokens if sc.granularity == "chunk" else None,
        prefill_hbm_bytes_per_s=res.prefill.gpu.memory_bytes_per_s,
        decode_hbm_bytes_per_s=res.decode.gpu.memory_bytes_per_s)


def build_disaggregated(res: ResolvedScenario) -> DisaggregatedModel:
    """Price both roles, the transfer and the decode capacity (NoFeasiblePlanError if none)."""
    sc, lens = res.scenario, res.lengths
    assert res.prefill is not None
    assert res.decode is not None
    assert res.link is not None
    assert sc.prefill is not None
    assert sc.decode is not None
    pmem = instance_budget(res.prefill, "prefill")
    if float(lens.input_tokens.max()) > float(np.ravel(pmem.kv_capacity_tokens)[0]):
        raise NoFeasiblePlanError(
            f"prefill instance {res.prefill.label} holds {float(pmem.kv_capacity_tokens[0]):.0f} "
            f"KV tokens, less than the longest prompt bin ({lens.input_tokens.max():.0f})",
            binding_constraint="prefill KV capacity")
    base = prefill_perf(res.prefill, lens.input_tokens)
    cfg = transfer_config(res)
    kv = kv_shape_from_model(res.model, res.prefill.precision.kv_bytes)
    xfer = kv_transfer(lens.input_tokens, kv, res.link, cfg, prefill_time_s=base.latency_s)
    prefill = PrefillPerf(lens.input_tokens, base.latency_s + xfer.prefill_extra_s,
                          base.service_s + xfer.prefill_extra_s)
    cells = decode_cells(res)
    dperf = decode_perf(res.decode, cells.mean_work / cells.mean_steps, res.max_num_seqs)
    cap = fast_decode_capacity(cells, dperf.step, kv_capacity_tokens=dperf.kv_capacity_tokens,
                          max_num_seqs=dperf.max_num_seqs, utilisation_max=DECODE_U_MAX)
    if cap.max_rate_per_s <= 0.0:
        raise NoFeasiblePlanError(
            f"decode instance {res.decode.label} holds {dperf.kv_capacity_tokens:.0f} KV tokens, "
            "less than the longest request (input + output)", binding_constraint="decode KV capacity")
    lq = fan_in_link_queue(xfer, lens.input_marginal(), 1.0, sc.prefill.count, sc.decode.count,
                           res.link, cfg)
    return DisaggregatedModel(res, prefill, np.asarray(xfer.exposed_s), np.asarray(xfer.bytes),
                              dperf, cells, cap, np.asarray(lq.service_s), lq.arrival_rate_per_s,
                              sc.prefill.count, sc.decode.count)
