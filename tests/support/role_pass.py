"""One prefill pass of a role's hardware, priced by the roofline directly, and one kind of its ops: the hand checks of
the attention-DP chunk price, closed form (tests/unit/test_colocated_dp_chunk.py) and simulator
(tests/unit/test_sim_chunk_price_dpep.py), build their expectations from these."""

from __future__ import annotations

import numpy as np

from pdplan.perf.roofline import PhaseTime, phase_time
from pdplan.serving.role_hardware import RoleHardware


def prefill_pass(hw: RoleHardware, batch: float, tokens: float) -> PhaseTime:
    """``batch`` prompts of ``tokens`` on one instance of ``hw`` (its TP, PP, DP, EP, gather, routing, MoE options)."""
    return phase_time(
        hw.model, hw.gpu, hw.table, phase="prefill", batch=batch, tokens=np.array([tokens]), tp=hw.tp, pp=hw.pp,
        precision=hw.precision, detail=False, dp=hw.dp, ep=hw.ep, expert_gather=hw.expert_gather,
        routing=hw.prefill_routing, **hw.moe_options,  # type: ignore[arg-type]
    )  # fmt: skip


def kind_s(pt: PhaseTime, kind: str) -> float:
    """The seconds of the pass's ops of ``kind``."""
    return float(sum(float(np.sum(op.time_s)) for op in pt.ops if op.kind == kind))
