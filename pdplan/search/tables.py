"""Per-role tables for the optimiser's screen: computed once per instance type, shared by every (x, y).

docs/queueing.md §5.3: everything about a pool is a function of its *per-instance* load, so each instance type is
tabulated once on a 1-D load grid and any instance count is an interpolation.

* **Prefill** (per GPU/TP/PP, granularity, link and decode TP — the last two set the exposed KV time): the FCFS M/G/1
  waiting-time cdf of one instance at utilisations ρ_r (FFT, :func:`pdplan.queueing.mg1_wait_distribution`). For x
  instances at per-instance load ρ the wait is, by routing policy (docs/queueing.md §1.3): random ``F(t) = F_ρ(t)``;
  round-robin (the GI/G/1 law at c² = 1/x, :mod:`pdplan.queueing.gig1`) ``F(t) = 1 − (π/ρ)·(1 − F_ρ(t/σ))`` with Whitt's
  delay probability π and the stretch σ = k·g·ρ/π; least-work (M/G/c) ``F(t) = 1 − C(x, xρ)·(1 − F_ρ(t·x))/ρ`` — the
  M/G/1 with service S/x is the per-instance M/G/1 scaled by 1/x in time; least-loaded and power-of-two (routers that
  count requests, :mod:`pdplan.queueing.jsq`) ``F(t) = 1 − (π/ρ)·(1 − F_ρ(t/σ))`` with their own π and σ per load. The
  per-bin TTFT-ok probability is F(a − g_l) with g_l = prefill latency + exposed KV time (+ 1.5 zero-load decode steps
  under convention A: first step and a busy instance's mean step-boundary wait). The KV time is
  :func:`pdplan.transfer.kv.kv_transfer` with the same :class:`~pdplan.transfer.kv_inputs.TransferConfig` as the exact
  evaluation's, data plane included (the backend's descriptors, launch, rate cap and staging: docs/kv_data_plane.md), so
  the screen and the exact model agree on a candidate's transfer time.
* **Decode** (per GPU/TP/PP and batch cap): the linearised step, the per-instance stable rate, and per prompt bin
  the joint weight Σ_n p(l, n)·P(TPOT ≤ b | l, n) at per-instance rates on a grid up to that stable rate.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from pdplan.perf.kv_blocks import resident_partial_block_tokens
from pdplan.queueing import (
    DecodeCapacity,
    DecodeWorkload,
    LinearStepTime,
    decode_fixed_point,
    mg1_wait_distribution,
    tpot_distribution,
)
from pdplan.queueing.kv_admission import kv_held, kv_mean_rate
from pdplan.queueing.linear_capacity import fast_decode_capacity
from pdplan.serving import DECODE_U_MAX, PREFILL_RHO_MAX, DecodePerf, PrefillPerf, RoleHardware, decode_perf
from pdplan.specs.cache import CacheSpec
from pdplan.specs.engine import EngineProfile
from pdplan.specs.hardware import LinkSpec
from pdplan.transfer.data_plane import DataPlane
from pdplan.transfer.kv import kv_transfer
from pdplan.transfer.kv_inputs import TransferConfig, kv_shape_from_model
from pdplan.transfer.plane_setup import KvChoice, resolve_data_plane
from pdplan.types import FloatArray, Granularity

RHO_GRID = 1.0 - np.geomspace(0.98, 1.0 - PREFILL_RHO_MAX, 32)
"""Per-instance prefill utilisations tabulated (dense near saturation, where TTFT bends up)."""
DECODE_GRID = 1.0 - np.geomspace(0.995, 0.002, 24)
"""Fractions of a decode instance's stable rate tabulated."""
SCREEN_CELLS = 2**12
"""FFT cells of the screen's M/G/1 tables (the exact re-evaluation uses the serving model's finer grid)."""


@dataclass(frozen=True)
class PrefillBase:
    """Prefill instance type + transfer option before the SLO is applied."""

    hw: RoleHardware
    granularity: Granularity
    link: str
    decode_tp: int
    latency_s: FloatArray
    service_s: FloatArray
    exposed_s: FloatArray
    mean_bytes: float
    link_bytes_per_s: float
    cache: CacheSpec | None = None
    """The prefix-cache setting this option is priced under (:mod:`pdplan.search.cache_options`)."""
    cache_usd_per_hour_per_gpu: float = 0.0
    """Its lower tiers' cost per prefill GPU (node tiers: a GPU's share of its node's; NaN: a tier has no price)."""
    cache_usd_per_hour_fixed: float = 0.0
    """Its remote pool's cost, paid once per deployment."""
    data_plane: DataPlane | None = None
    """The KV data plane (backend, split, block size) the transfer is priced with; None: the link alone."""
    kv_choice: KvChoice | None = None
    """The searched KV (backend, block size) choice this option was priced with; None: not searched."""


def prefill_base(
    base: PrefillPerf,
    hw: RoleHardware,
    granularity: Granularity,
    link: LinkSpec,
    decode_tp: int,
    input_prob: FloatArray,
    chunk_tokens: int,
    nics: int | None,
    data_plane: DataPlane | None = None,
    kv_choice: KvChoice | None = None,
) -> PrefillBase:
    """Latency, queue service and exposed KV time per prompt bin (as :mod:`pdplan.serving.disaggregated`) for one
    transfer option; ``base`` is the instance type's batch-1 prefill (:func:`prefill_perf`, priced once per type;
    the KV block size does not change it); ``kv_choice`` the searched choice it records (:class:`KvOption`);
    ``data_plane`` the backend the transfer goes through (:func:`pdplan.transfer.plane_setup.resolve_data_plane`,
    as :func:`pdplan.serving.disaggregated.transfer_config` resolves it). The link rate the fan-in queue sees is the
    transfer's own (the backend's cap where it has one)."""
    input_tokens = base.input_tokens
    cfg = TransferConfig(
        granularity=granularity,
        prefill_tp=hw.tp,
        decode_tp=decode_tp,
        nics_prefill=nics,
        nics_decode=nics,
        chunk_tokens=chunk_tokens if granularity == "chunk" else None,
        prefill_hbm_bytes_per_s=hw.gpu.memory_bytes_per_s,
        decode_hbm_bytes_per_s=hw.gpu.memory_bytes_per_s,
        data_plane=data_plane,
    )
    kv = kv_shape_from_model(hw.model, hw.precision.kv_bytes)
    xfer = kv_transfer(input_tokens, kv, link, cfg, prefill_time_s=base.latency_s)
    return PrefillBase(
        hw,
        granularity,
        link.name,
        decode_tp,
        base.latency_s + xfer.prefill_extra_s,
        base.service_s + xfer.prefill_extra_s,
        np.asarray(xfer.exposed_s, dtype=np.float64),
        float(input_prob @ np.asarray(xfer.bytes)),
        xfer.bandwidth_bytes_per_s,
        data_plane=data_plane,
        kv_choice=kv_choice,
    )


@dataclass(frozen=True)
class KvOption:
    """One KV data-plane option of the screen: the choice plans record (None: not searched), the data plane it
    prices and the KV block size its instance types page in (None: theirs, the scenario's or the engine's)."""

    choice: KvChoice | None
    plane: DataPlane | None
    block_tokens: int | None

    def hardware(self, hw: RoleHardware) -> RoleHardware:
        """``hw`` paging its KV in this option's blocks (:mod:`pdplan.perf.kv_blocks`)."""
        return hw if self.block_tokens is None else dataclasses.replace(hw, kv_block_tokens=self.block_tokens)


def kv_options(choices: tuple[KvChoice, ...], searched: bool, engine: EngineProfile) -> list[KvOption]:
    """The screen's KV options: the scenario's own data plane alone (not searched, as
    :func:`pdplan.serving.disaggregated.transfer_config` resolves it), else each searched choice, its backend and
    block filled in with the engine's defaults so that a plan records what it runs."""
    if not searched:
        (only,) = choices
        return [KvOption(None, resolve_data_plane(only.backend, only.block_tokens, engine), None)]
    out = []
    for c in choices:
        plane = resolve_data_plane(c.backend, c.block_tokens, engine)
        default_block = engine.kv_connector.block_tokens if engine.kv_connector is not None else 1
        block = c.block_tokens or default_block
        backend = c.backend or ("engine" if engine.kv_connector is not None else "none")
        out.append(KvOption(KvChoice(backend.strip().lower(), block), plane, block))
    return out


def block_variants(hw: RoleHardware, options: list[KvOption]) -> list[RoleHardware]:
    """``hw`` once per KV block size the options page in (itself where none sets one): the decode instance types."""
    sizes = dict.fromkeys(o.block_tokens for o in options)
    return [hw if b is None else dataclasses.replace(hw, kv_block_tokens=b) for b in sizes]


def prefill_wait_table(base: PrefillBase, prob: FloatArray) -> tuple[object, float, float]:
    """The per-instance M/G/1 wait at every ρ of :data:`RHO_GRID`, E[S] and the service SCV c_s²."""
    mean = float(prob @ base.service_s)
    second = float(prob @ base.service_s**2)
    wait = mg1_wait_distribution(RHO_GRID / mean, base.service_s, prob, max_cells=SCREEN_CELLS)
    return wait, mean, second / mean**2 - 1.0


@dataclass(frozen=True)
class DecodeTable:
    """One decode instance type (GPU/TP/PP, batch cap) tabulated over its per-instance rate."""

    hw: RoleHardware
    max_num_seqs: int
    perf: DecodePerf
    capacity: DecodeCapacity
    rates_per_s: FloatArray  # [R]
    tpot_ok_by_input: FloatArray  # [R, L] joint weight Σ_n p(l,n) P(TPOT ≤ b | l, n)
    tau_mean_s: FloatArray  # [R]


def decode_tables(
    hw: RoleHardware, seat_caps: tuple[int, ...], cells: DecodeWorkload, n_inputs: int, tpot_slo_s: float
) -> list[DecodeTable]:
    """Tabulate one decode GPU/TP/PP for each batch cap; caps whose instance cannot hold the longest request drop.

    The step-time fit and the TPOT distribution at a given rate do not depend on the cap (it only bounds the stable
    rate through the seat limit), so the TPOT table is computed once, up to the largest cap's stable rate.
    """
    partial = resident_partial_block_tokens(cells.input_tokens, cells.decode_steps, cells.prob, hw.kv_block_tokens)
    perf = decode_perf(hw, cells.mean_work / cells.mean_steps, max(seat_caps), partial)  # as the exact model's
    lines = perf.law_lines  # a concave step: the minimum of its lines (pdplan.serving.decode_lines)
    caps = [max((_capacity(cells, perf, line, s) for line in lines), key=lambda c: c.max_rate_per_s) for s in seat_caps]
    top = max(c.max_rate_per_s for c in caps)
    if top <= 0.0:
        return []
    rates = top * DECODE_GRID
    ok, tau = _law_rows(rates, cells, lines, tpot_slo_s)
    by_input = (ok * cells.prob[None, :]).reshape(rates.size, n_inputs, -1).sum(axis=2)
    return [
        DecodeTable(hw, seats, perf, cap, rates, by_input, tau)
        for seats, cap in zip(seat_caps, caps, strict=True)
        if cap.max_rate_per_s > 0.0
    ]


def _capacity(cells: DecodeWorkload, perf: DecodePerf, step: LinearStepTime, seats: int) -> DecodeCapacity:
    """One line's capacity at ``seats`` seats (the law's is the best of its lines', :mod:`pdplan.serving.
    decode_lines`), with the exact model's KV stability limit (:func:`_at_mean_kv`)."""
    cap = fast_decode_capacity(
        cells,
        step,
        kv_capacity_tokens=perf.kv_capacity_tokens,
        max_num_seqs=float(seats),
        utilisation_max=DECODE_U_MAX,
        state_tokens_per_seq=perf.state_tokens_per_seq,
    )
    return _at_mean_kv(cap, cells, dataclasses.replace(perf, step=step))


def _law_rows(
    rates: FloatArray, cells: DecodeWorkload, lines: tuple[LinearStepTime, ...], tpot_slo_s: float
) -> tuple[FloatArray, FloatArray]:
    """(P(TPOT ≤ SLO) per rate and cell, τ̄ per rate) of the step law: each rate on the line whose τ̄ is the least
    there (:mod:`pdplan.serving.decode_lines`; one line: that line's, as before)."""
    if len(lines) == 1:
        ok = tpot_distribution(rates, cells, lines[0]).cdf_per_bin(tpot_slo_s)
        return ok, np.asarray(decode_fixed_point(rates, cells, lines[0]).tau_mean_s, dtype=np.float64)
    oks = np.zeros((len(lines), rates.size, cells.prob.size))
    taus = np.full((len(lines), rates.size), np.inf)
    for i, line in enumerate(lines):
        stable = rates * line.per_request_s(cells) < 1.0
        if stable.any():
            oks[i, stable] = tpot_distribution(rates[stable], cells, line).cdf_per_bin(tpot_slo_s)
            taus[i, stable] = decode_fixed_point(rates[stable], cells, line).tau_mean_s
    pick = np.argmin(taus, axis=0)
    rows = np.arange(rates.size)
    return oks[pick, rows], taus[pick, rows]


def _at_mean_kv(cap: DecodeCapacity, cells: DecodeWorkload, perf: DecodePerf) -> DecodeCapacity:
    """The screen's capacity with the exact model's KV stability limit: the mean occupancy (growing footprint, the
    smaller hold, so the screen stays optimistic; :mod:`pdplan.queueing.kv_admission`), not the P99 one at which
    requests only start to queue for KV admission."""
    if cap.kv_rate_per_s <= 0.0:  # the longest request does not fit at all
        return cap
    held = kv_held(cells, perf.state_tokens_per_seq, reserve=False)
    kv = max(cap.kv_rate_per_s, kv_mean_rate(cells, held, perf.step, perf.kv_capacity_tokens))
    bounds = {"utilisation": cap.utilisation_rate_per_s, "kv": kv, "seqs": cap.seqs_rate_per_s}
    binding = min(bounds, key=lambda k: bounds[k])
    return DecodeCapacity(bounds[binding], cap.utilisation_rate_per_s, kv, cap.seqs_rate_per_s, binding)


def erlang_c_grid(servers: FloatArray, offered: FloatArray) -> FloatArray:
    """Erlang C for arrays of server counts and offered loads (a < c), by the stable Erlang-B recursion."""
    c_max = int(servers.max())
    b = np.ones_like(offered)
    out = np.zeros_like(offered)
    for k in range(1, c_max + 1):
        b = offered * b / (k + offered * b)
        out = np.where(servers == k, b, out)
    rho = offered / servers
    return np.asarray(out / (1.0 - rho * (1.0 - out)), dtype=np.float64)


def interp_rows(table: FloatArray, grid: FloatArray, points: FloatArray) -> FloatArray:
    """Linear interpolation along axis 0 of ``table`` [R, ...] at ``points`` (any shape, clipped to the grid).

    Returns shape ``points.shape + table.shape[1:]``.
    """
    pos = np.interp(points, grid, np.arange(grid.size, dtype=np.float64))
    lo = np.clip(np.floor(pos).astype(np.intp), 0, grid.size - 2)
    frac = (pos - lo)[(...,) + (None,) * (table.ndim - 1)]
    return np.asarray(table[lo] * (1.0 - frac) + table[lo + 1] * frac, dtype=np.float64)
