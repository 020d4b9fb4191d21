"""Physics invariants of a PrfaaS deployment at an operating rate (the PrfaaS counterpart of
:mod:`pdplan.serving.checks.physics`, with the same peaks and the same error).

Every bound comes from the roofline's operator list at the GPUs' datasheet peaks
(:func:`pdplan.serving.checks.physics.peak_time_s`) and the link's line rate, never from the curves it checks (a
measured profile or the kernel-table roofline). At aggregate rate λ, threshold ``t``, ``p = P(L > t)``:

* **remote compute**: ``λp · E[T_pk,r(L) | L > t] ≤ N_r · pp_r`` (a request's FLOPs over the GPUs of a TP group
  at peak; ``pp`` stages work on ``pp`` requests at once);
* **local prefill compute**: ``λ(1−p) · E[T_pk,l(L) | L ≤ t] ≤ N_p · pp_l``;
* **decode**: output tokens/s per decode instance ``λ E[n] / N_d ≤ max_num_seqs / τ_min`` with
  ``τ_min = B(1/pp, 0) / BW`` the fastest step physics allows (the weights read once at full HBM bandwidth;
  one step emits at most one token per seated sequence);
* **link**: egress ``λ E[S(L); L > t] ≤`` the link's line rate;
* **TTFT floors**: each offloaded prompt's service ``T_r(l) ≥ T_pk,r(l)`` and each local one's
  ``T_l(l) ≥ T_pk,l(l)`` (no queue makes a prompt faster than its own FLOPs at peak).

A breach is a bug (or a measured profile faster than the hardware's peak for this model), raised as
:class:`pdplan.serving.checks.physics.PhysicsInvariantError`.
"""

from __future__ import annotations

import numpy as np

from pdplan.serving.checks.physics import REL_TOL, Breach, PhysicsInvariantError, peak_time_s
from pdplan.serving.prfaas.build import PrfaasSetup
from pdplan.serving.resolve import DisaggregatedHardware, ResolvedScenario
from pdplan.serving.role_hardware import RoleHardware
from pdplan.serving.roles import step_bytes


def _ceiling(name: str, value: float, bound: float, detail: str) -> list[Breach]:
    return [Breach(name, value, bound, detail)] if value > bound * (1.0 + REL_TOL) else []


def _peak(hw: RoleHardware, tokens: np.ndarray) -> np.ndarray:
    return np.asarray(peak_time_s(hw, "prefill", np.ones(1), tokens), dtype=np.float64) / hw.dp


def _path(setup: PrfaasSetup, hw: RoleHardware, t: float, above: bool, rate_rps: float, name: str) -> list[Breach]:
    """Compute ceiling and TTFT floor of one prefill path."""
    inp = setup.capacity
    tok, w = inp.law.points(t, above=above)
    if tok.size == 0 or w.sum() <= 0:
        return []
    pool = inp.remote if above else inp.local
    peak = _peak(hw, tok)
    load = rate_rps * float(w @ peak)  # λ · E[T_pk; region] (w carries the region's probability mass)
    out = _ceiling(
        f"{name} compute", load, float(pool.instances * hw.pp), f"λ E[T_pk] on {pool.instances} x {hw.label}"
    )
    service = np.asarray(pool.curves.prefill_s(tok), dtype=np.float64)
    short = service < peak * (1.0 - REL_TOL)
    if bool(short.any()):
        i = int(np.argmax(short))
        out.append(Breach(f"{name} TTFT floor", float(service[i]), float(peak[i]), f"prompt of {tok[i]:,.0f} tokens"))
    return out


def prfaas_breaches(
    res: ResolvedScenario[DisaggregatedHardware], setup: PrfaasSetup, threshold_tokens: float, rate_rps: float
) -> list[Breach]:
    """Every ceiling and floor of the module docstring that fails (empty: all hold)."""
    inp, t = setup.capacity, float(threshold_tokens)
    out = _path(setup, setup.remote_hw, t, True, rate_rps, "remote prefill")
    out += _path(setup, res.hardware.prefill, t, False, rate_rps, "local prefill")
    dec = res.hardware.decode
    tau_min_s = float(step_bytes(dec, np.array(1.0 / dec.pp), np.array(0.0))) / dec.gpu.memory_bytes_per_s
    tokens_per_s = rate_rps * inp.mean_output_tokens / max(inp.decode.instances, 1)
    out += _ceiling("decode tokens/s", tokens_per_s, res.max_num_seqs * dec.dp / tau_min_s, f"per {dec.label} instance")
    egress = rate_rps * inp.law.tail(inp.remote.curves.kv_bytes, t)
    out += _ceiling("cross-DC link", egress, setup.link_line_rate_bytes_per_s, f"egress bytes/s on {setup.link_name}")
    return out


def check_prfaas(
    res: ResolvedScenario[DisaggregatedHardware], setup: PrfaasSetup, threshold_tokens: float, rate_rps: float
) -> None:
    """Raise :class:`PhysicsInvariantError` naming the numbers when an invariant fails at ``rate_rps``."""
    found = prfaas_breaches(res, setup, threshold_tokens, rate_rps)
    if found:
        raise PhysicsInvariantError(rate_rps, found)
