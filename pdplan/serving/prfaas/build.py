"""A scenario's ``prfaas:`` block → the capacity model's inputs (curves, pools, link) and the queueing extras.

Each number comes from a measured profile when the scenario gives one and from pdplan's own models otherwise;
:attr:`PrfaasSetup.sources` says which, per input (reports print it):

* remote / local prefill time ``T(l)``: ``remote_profile`` / ``local_profile`` (PCHIP, :mod:`.profile`) or the
  roofline of one prompt on that GPU × TP (:func:`pdplan.serving.roles.prefill_perf`);
* KV bytes ``S(l)`` crossing the link: the profile's ``kv_bytes`` column or the KV model
  (:func:`pdplan.transfer.kv.kv_bytes_per_request`, hybrid layers' fixed state included, replicated for the
  local decode TP);
* decode capacity per local decode instance ``C_d = BS_max / T_decode`` (Eq. 5): ``decode_tokens_per_s`` or the
  fitted decode step ``τ(B) = t0 + (t1 + t2·κ)·B`` (κ = mean context) at the largest batch whose step meets the
  TPOT SLO, within ``max_num_seqs`` and the KV capacity (``C_d = B*/τ(B*)``);
* the link: ``B_out = line rate × efficiency`` of the ``prfaas.link`` entry; RTT ``prfaas.rtt`` or the entry's
  ``per_message_latency_s`` (for a cross-datacenter entry, the fibre round trip).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np

from pdplan.errors import NoFeasiblePlanError, SpecError
from pdplan.io.profiles import load_profile, resolve_profile
from pdplan.perf.block_quant import expert_parallel_for_blocks
from pdplan.serving.build import arrival_ca2
from pdplan.serving.deployment import Prfaas, Role
from pdplan.serving.prfaas.capacity import DECODE, LINK, LOCAL, REMOTE, CapacityInputs, DecodePool, PrefillPool
from pdplan.serving.prfaas.lengths import PointsLaw, QuantileLaw, SplitLaw
from pdplan.serving.prfaas.profile import Curves, MeasuredProfile
from pdplan.serving.resolve import DisaggregatedHardware, ResolvedScenario, precision_of, role_hardware
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import decode_perf, prefill_perf
from pdplan.specs.prfaas import PrfaasSpec
from pdplan.transfer.kv import kv_bytes_per_request
from pdplan.transfer.kv_inputs import kv_shape_from_model
from pdplan.types import FloatArray


@dataclass(frozen=True)
class PrfaasSetup:
    """The capacity inputs plus what the queueing model needs beyond them."""

    capacity: CapacityInputs
    spec: PrfaasSpec
    rtt_s: float
    num_layers: int
    link_name: str
    sources: dict[str, str]
    routing: str
    remote_hw: RoleHardware
    """The remote instance type (for the physics invariants, :mod:`.invariants`)."""
    link_line_rate_bytes_per_s: float = float("inf")
    """The link's line rate (the invariants' ceiling on egress; ``capacity.link_bytes_per_s`` is the usable part)."""
    arrival_ca2: float = 1.0
    """c_a² of the workload's arrival gaps (:func:`pdplan.serving.build.arrival_ca2`; 1: Poisson)."""


def _law(res: ResolvedScenario[DisaggregatedHardware]) -> SplitLaw:
    parametric = res.scenario.workload.parametric()
    if parametric is not None:
        return QuantileLaw(parametric[0])
    return PointsLaw(res.lengths.input_tokens, res.lengths.input_marginal())


def _profile(ref: str) -> MeasuredProfile:
    table = load_profile(resolve_profile(ref))
    return MeasuredProfile(table.tokens, table.prefill_s, table.kv_bytes, source=table.source)


ROOFLINE_MEMO_ENTRIES = 512
"""Token arrays whose roofline prefill times one curve keeps: the queueing model asks for the same quadrature
points at every rate of a goodput root, so a memo (exact: the same inputs give the same times) saves most calls."""


def _roofline_curve(hw: RoleHardware) -> Curves:
    memo: dict[bytes, FloatArray] = {}

    def time_s(tokens: FloatArray) -> FloatArray:
        tok = np.asarray(tokens, np.float64)
        key = tok.tobytes() + str(tok.shape).encode()
        if key not in memo:
            if len(memo) >= ROOFLINE_MEMO_ENTRIES:
                memo.pop(next(iter(memo)))
            memo[key] = np.asarray(prefill_perf(hw, tok).latency_s, dtype=np.float64)
        return memo[key]

    return Curves(prefill_s=time_s, kv_bytes=time_s, source=f"roofline {hw.label}")


def _kv_curve(res: ResolvedScenario[DisaggregatedHardware], decode_tp: int) -> Curves:
    shape = kv_shape_from_model(res.model, res.hardware.prefill.precision.kv_bytes)

    def kv(tokens: FloatArray) -> FloatArray:
        return kv_bytes_per_request(np.asarray(tokens, np.float64), shape, decode_tp=decode_tp)

    return Curves(prefill_s=kv, kv_bytes=kv, source=f"KV model {res.model.name}")


def _prefill_curves(
    ref: str | None, hw: RoleHardware, kv: Curves, upper_tokens: float, what: str
) -> tuple[Curves, str, str]:
    """``(curves, time source, kv source)`` of one prefill pool."""
    if ref is None:
        roof = _roofline_curve(hw)
        return Curves(roof.prefill_s, kv.kv_bytes, roof.source), roof.source, kv.source
    prof = _profile(ref)
    prof.check_covers(upper_tokens, f"the workload ({what} prefill)")
    if prof.kv_bytes is None:
        return prof.curves(kv_bytes=kv.kv_bytes), f"profile {prof.source}", kv.source
    return prof.curves(), f"profile {prof.source}", f"profile {prof.source}"


def decode_capacity_tokens_per_s(hw: RoleHardware, mean_context: float, max_num_seqs: int, tpot_s: float) -> float:
    """``B*/τ(B*)``: the decode tokens/s one instance sustains with every step within ``tpot_s`` (Eq. 5). A model
    whose every layer is windowed holds and reads min(c, w) tokens per sequence (its step law's K is windowed:
    :mod:`pdplan.serving.roles`), so the mean context is capped at the window (≥ E[min(c, w)] by Jensen, min being
    concave: the seat and step are not underpriced)."""
    window = hw.model.kv_window_tokens
    if window is not None:
        mean_context = min(mean_context, window)
    perf = decode_perf(hw, mean_context, float(max_num_seqs))
    lines = perf.law_lines  # a step concave in B: the minimum of its lines (pdplan.serving.decode_lines)
    per_seq = [ln.t1_s_per_seq + ln.t2_s_per_token * mean_context for ln in lines]
    # τ(B) = min over the lines rises with B: it stays within the SLO up to the largest of the lines' own B
    b_slo = max((tpot_s - ln.t0_s) / k if k > 0 else float(max_num_seqs) for ln, k in zip(lines, per_seq, strict=True))
    seat_tokens = max(mean_context, 1.0) + perf.state_tokens_per_seq  # context + fixed state (pdplan.perf.memory)
    b_star = min(float(max_num_seqs), perf.kv_capacity_tokens / seat_tokens, b_slo)

    def step_s(batch: float) -> float:
        return float(perf.law_step_s(np.array(batch), np.array(batch * mean_context)))

    if b_star < 1.0:
        raise NoFeasiblePlanError(
            f"a decode step of one sequence on {hw.label} takes {step_s(1.0):.3g} s, above the TPOT SLO {tpot_s:.3g} s",
            binding_constraint="decode utilisation",
        )
    return b_star / step_s(b_star)


def prfaas_local(res: ResolvedScenario[Any]) -> tuple[ResolvedScenario[DisaggregatedHardware], Prfaas]:
    """``res`` typed as the local xPyD cluster of a PrfaaS deployment, and that deployment (SpecError when the
    scenario has no ``prfaas:`` block or is not disaggregated)."""
    dep = res.deployment
    if not isinstance(dep, Prfaas) or not _disaggregated(res):
        raise SpecError("the scenario has no prfaas: block (or is not disaggregated)", field="prfaas")
    return res, dep


def _disaggregated(res: ResolvedScenario[Any]) -> TypeGuard[ResolvedScenario[DisaggregatedHardware]]:
    return isinstance(res.hardware, DisaggregatedHardware)


def prfaas_setup(res: ResolvedScenario[Any]) -> PrfaasSetup:
    """Resolve the scenario's ``prfaas:`` block (SpecError when there is none)."""
    local_res, dep = prfaas_local(res)
    sc, hw = local_res.scenario, local_res.hardware
    spec = dep.remote
    # the remote cluster loads the checkpoint as the engines do: experts split tp ways unless FP8 weight blocks forbid
    # it, then expert-parallel over the same GPUs (the rule of `transfer --sweep`)
    ep = expert_parallel_for_blocks(res.model, spec.tp, precision_of(sc, res.model).weight_bytes)
    remote_hw = role_hardware(res.catalog, res.model, Role(spec.gpu, spec.tp, 1, spec.count, ep=ep), sc)
    link = res.catalog.link(spec.link)
    law = _law(local_res)
    kv = _kv_curve(local_res, hw.decode.tp)
    remote, remote_src, kv_src = _prefill_curves(spec.remote_profile, remote_hw, kv, law.upper, "remote")
    local, local_src, _ = _prefill_curves(spec.local_profile, hw.prefill, kv, law.upper, "local")
    out_mean = res.lengths.mean_output()
    if spec.decode_tokens_per_s is not None:
        c_d, dec_src = spec.decode_tokens_per_s, "measured (prfaas.decode_tokens_per_s)"
    else:
        context = res.lengths.mean_input() + 0.5 * out_mean
        c_d = decode_capacity_tokens_per_s(hw.decode, context, res.max_num_seqs, sc.slo.tpot)
        dec_src = f"roofline {hw.decode.label} at the TPOT SLO"
    capacity = CapacityInputs(
        law=law,
        mean_output_tokens=out_mean,
        remote=PrefillPool(remote, spec.count),
        local=PrefillPool(local, dep.local.prefill.count),
        decode=DecodePool(c_d, dep.local.decode.count, dec_src),
        link_bytes_per_s=link.achievable_bytes_per_s,
    )
    rtt = spec.rtt if spec.rtt is not None else link.per_message_latency_s
    sources = {
        REMOTE: remote_src,
        LOCAL: local_src,
        DECODE: dec_src,
        LINK: f"{link.name} ({link.efficiency:g} × line rate), RTT {'prfaas.rtt' if spec.rtt else link.name}",
        "kv bytes": kv_src,
    }
    return PrfaasSetup(
        capacity,
        spec,
        float(rtt),
        res.model.num_layers,
        link.name,
        sources,
        sc.routing,
        remote_hw,
        link.line_rate_bytes_per_s,
        arrival_ca2(res.scenario.workload),
    )
